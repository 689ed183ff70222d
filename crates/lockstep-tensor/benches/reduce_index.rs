//! Reductions and indexing: deterministic vs nondeterministic kernels at 1 and 2 threads.
//!
//! `cargo bench -p lockstep-tensor --bench reduce_index` runs criterion over every case.
//! `LOCKSTEP_QUICK=1 cargo bench -p lockstep-tensor --bench reduce_index` instead prints a table
//! (best of several runs, as the machine may be shared) with the det/nondet ratios
//! (`LOCKSTEP_FILTER=bincount` times only the cases whose name contains it,
//! `LOCKSTEP_THREADS=1,2,8` sets the thread counts, `LOCKSTEP_REPS` the runs);
//! `bench/tensor_ops.py` times PyTorch on the same cases.

use criterion::{Criterion, criterion_group};
use lockstep_tensor::deterministic::scope;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};
use std::hint::black_box;
use std::time::Instant;

/// SplitMix64 (the same stream as `bench/tensor_ops.py` does not need: each side draws its own).
struct Mix(u64);
impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn randf(n: usize, seed: u64) -> Vec<f32> {
    let mut m = Mix(seed);
    (0..n)
        .map(|_| (m.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
        .collect()
}

fn randi(n: usize, hi: usize, seed: u64) -> Vec<i64> {
    let mut m = Mix(seed);
    (0..n).map(|_| (m.next() % hi as u64) as i64).collect()
}

/// One benchmark case: a name, the bytes it must at least read (for bandwidth), and the call.
struct Case {
    name: String,
    bytes: usize,
    run: Box<dyn Fn() -> Tensor>,
}

/// The cases whose name contains `filter` (the others are not even built: their inputs take
/// hundreds of MiB).
fn cases(filter: &str) -> Vec<Case> {
    let want = |name: &str| name.contains(filter);
    let mut v = Vec::new();
    let n = 64 << 20;
    if want("sum 64Mi f32") {
        let x = Tensor::from_vec(randf(n, 1), &[n]).unwrap();
        v.push(Case {
            name: "sum 64Mi f32".into(),
            bytes: n * 4,
            run: Box::new(move || x.sum().unwrap()),
        });
    }
    let (rows, d) = (1 << 20, 64);
    if want("index_add") || want("scatter_add") {
        let src = Tensor::from_vec(randf(rows * d, 2), &[rows, d]).unwrap();
        for dest in [100usize, 10_000, 1_000_000] {
            let idx = Tensor::from_vec(randi(rows, dest, 3), &[rows]).unwrap();
            let base = Tensor::zeros(&[dest, d], DType::F32).unwrap();
            let name = format!("index_add 1Mx64 -> {dest}");
            if want(&name) {
                let (s, i, b) = (src.clone(), idx.clone(), base.clone());
                v.push(Case {
                    name,
                    bytes: rows * d * 4,
                    run: Box::new(move || b.index_add(0, &i, &s).unwrap()),
                });
            }
            let name = format!("scatter_add 1Mx64 -> {dest}");
            if want(&name) {
                // scatter_add with the row index broadcast over the 64 columns.
                let iv = idx.to_vec::<i64>().unwrap();
                let full: Vec<i64> = iv.iter().flat_map(|&r| std::iter::repeat_n(r, d)).collect();
                let fi = Tensor::from_vec(full, &[rows, d]).unwrap();
                let (s, b) = (src.clone(), base);
                v.push(Case {
                    name,
                    bytes: rows * d * 12,
                    run: Box::new(move || b.scatter_add(0, &fi, &s).unwrap()),
                });
            }
        }
    }
    let (tok, dim, vocab) = (32 << 10, 512, 50_000);
    if want("embedding_backward 32k x 512 -> 50k") {
        let grad = Tensor::from_vec(randf(tok * dim, 4), &[tok, dim]).unwrap();
        let ids = Tensor::from_vec(randi(tok, vocab, 5), &[tok]).unwrap();
        v.push(Case {
            name: "embedding_backward 32k x 512 -> 50k".into(),
            bytes: tok * dim * 4,
            run: Box::new(move || Tensor::embedding_backward(&grad, &ids, vocab).unwrap()),
        });
    }
    let nb = 16 << 20;
    for bins in [1000usize, 1_000_000] {
        let name = format!("bincount 16Mi weights -> {bins}");
        if !want(&name) {
            continue;
        }
        let vals = Tensor::from_vec(randi(nb, bins, 6), &[nb]).unwrap();
        let w = Tensor::from_vec(randf(nb, 7), &[nb]).unwrap();
        v.push(Case {
            name,
            bytes: nb * 12,
            run: Box::new(move || vals.bincount(Some(&w), bins).unwrap()),
        });
    }
    if want("softmax 4096x4096") {
        let sm = Tensor::from_vec(randf(4096 * 4096, 8), &[4096, 4096]).unwrap();
        v.push(Case {
            name: "softmax 4096x4096".into(),
            bytes: 4096 * 4096 * 8,
            run: Box::new(move || sm.softmax(-1).unwrap()),
        });
    }
    v
}

/// Best times of the nondeterministic and the deterministic policy, measured alternately
/// (so that a noisy neighbour slows both alike).
fn best_pair(reps: usize, threads: usize, f: &dyn Fn() -> Tensor) -> (f64, f64) {
    let time = |det: bool| {
        with_num_threads(threads, || {
            scope(det, false, || {
                let t = Instant::now();
                black_box(f());
                t.elapsed().as_secs_f64()
            })
        })
    };
    time(false);
    time(true);
    let (mut nd, mut de) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..reps {
        nd = nd.min(time(false));
        de = de.min(time(true));
    }
    (nd, de)
}

/// Read-bandwidth reference for `sum`: an integer xor-fold over the same 256 MiB (no
/// floating-point latency chain), best of `reps`, in GB/s.
fn read_bandwidth(reps: usize) -> f64 {
    let n = 64usize << 20;
    let v: Vec<u32> = randf(n, 1).iter().map(|x| x.to_bits()).collect();
    let fold = |x: &[u32]| {
        let mut a = [0u32; 16];
        for c in x.chunks_exact(16) {
            for l in 0..16 {
                a[l] ^= c[l];
            }
        }
        a.iter().fold(0, |p, q| p ^ q)
    };
    let mut best = f64::INFINITY;
    for _ in 0..reps {
        let t = Instant::now();
        black_box(fold(black_box(&v)));
        best = best.min(t.elapsed().as_secs_f64());
    }
    (n * 4) as f64 / best / 1e9
}

fn quick() {
    let reps: usize = std::env::var("LOCKSTEP_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let filter = std::env::var("LOCKSTEP_FILTER").unwrap_or_default();
    // Thread counts to time (`LOCKSTEP_THREADS=1,2,8`; default 1 and 2).
    let threads: Vec<usize> = std::env::var("LOCKSTEP_THREADS")
        .ok()
        .and_then(|s| s.split(',').map(|t| t.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2]);
    if filter.is_empty() || filter.contains("sum") {
        println!(
            "read bandwidth (1 thread, xor-fold of 256 MiB): {:.2} GB/s",
            read_bandwidth(reps)
        );
    }
    println!(
        "{:<38} {:>3} {:>10} {:>10} {:>7} {:>8}",
        "case", "thr", "nondet ms", "det ms", "det/nd", "det GB/s"
    );
    for c in cases(&filter) {
        for &t in &threads {
            let (nd, de) = best_pair(reps, t, &c.run);
            println!(
                "{:<38} {:>3} {:>10.2} {:>10.2} {:>7.3} {:>8.2}",
                c.name,
                t,
                nd * 1e3,
                de * 1e3,
                de / nd,
                c.bytes as f64 / de / 1e9
            );
        }
    }
}

fn bench(cr: &mut Criterion) {
    let mut g = cr.benchmark_group("reduce_index");
    g.sample_size(10);
    for c in cases("") {
        for t in [1usize, 2] {
            for det in [false, true] {
                let id = format!("{}/{}/t{t}", c.name, if det { "det" } else { "nondet" });
                g.bench_function(id, |b| {
                    b.iter(|| with_num_threads(t, || scope(det, false, || black_box((c.run)()))))
                });
            }
        }
    }
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    if std::env::var_os("LOCKSTEP_QUICK").is_some() {
        quick();
    } else {
        benches();
        Criterion::default().configure_from_args().final_summary();
    }
}
