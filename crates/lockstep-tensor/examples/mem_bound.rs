//! Times the memory-bound rows of issue 31 (deterministic mode) and prints one JSON object per
//! line: `{"case", "threads", "wall", "cpu"}`, each the best of the runs in seconds; `cpu` is
//! the on-CPU time of the calling thread (x86-64 Linux; one-thread rows, whose work runs on
//! that thread), which stays comparable while other processes share the cores.
//! `bench/mem_bound.py` runs it beside PyTorch (same cases, same clocks) for BENCHMARKS.md.
//!
//! ```text
//! LOCKSTEP_ISA=avx2 cargo run --release -p lockstep-tensor --example mem_bound -- 15
//! ```

use lockstep_tensor::Tensor;
use lockstep_tensor::deterministic::scope;
use lockstep_tensor::isa::Isa;
use lockstep_tensor::ops::reduce::{CHUNK, LaneSum, tree_sum};
use lockstep_tensor::threads::with_num_threads;
use std::hint::black_box;
use std::time::Instant;

/// SplitMix64 (inputs only; the timings do not depend on the values).
fn mix(seed: u64, n: usize) -> impl Iterator<Item = u64> {
    let mut s = seed;
    (0..n).map(move |_| {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
}

fn thread_cpu_secs() -> Option<f64> {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let mut ts = [0i64; 2];
        let ret: i64;
        // SAFETY: the Linux syscall clock_gettime (228) with CLOCK_THREAD_CPUTIME_ID (3) writes
        // one `struct timespec` (two i64) to `ts`; `syscall` clobbers only rcx and r11.
        unsafe {
            core::arch::asm!(
                "syscall",
                inlateout("rax") 228i64 => ret,
                in("rdi") 3i64,
                in("rsi") ts.as_mut_ptr(),
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        (ret == 0).then(|| ts[0] as f64 + ts[1] as f64 * 1e-9)
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    None
}

/// One case's call.
type Run<'a> = Box<dyn Fn() -> Tensor + 'a>;

fn time(runs: usize, threads: usize, f: &dyn Fn() -> Tensor) -> (f64, f64) {
    let call = || with_num_threads(threads, || scope(true, false, || black_box(f())));
    drop(call());
    let (mut wall, mut cpu) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..runs {
        let (t, c) = (Instant::now(), thread_cpu_secs());
        let out = call();
        let w = t.elapsed().as_secs_f64();
        let c = thread_cpu_secs().zip(c).map_or(w, |(b, a)| b - a);
        drop(out);
        wall = wall.min(w);
        cpu = cpu.min(c);
    }
    (wall, cpu)
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(15);
    let n = 64 << 20;
    let x = Tensor::from_vec(
        mix(1, n)
            .map(|z| (z >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
            .collect(),
        &[n],
    )
    .unwrap();
    let (tok, dim, vocab) = (32 << 10, 512, 50_000);
    let grad = Tensor::from_vec(
        mix(4, tok * dim)
            .map(|z| (z >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
            .collect(),
        &[tok, dim],
    )
    .unwrap();
    let ids = Tensor::from_vec(
        mix(5, tok).map(|z| (z % vocab as u64) as i64).collect(),
        &[tok],
    )
    .unwrap();
    let cases: [(&str, Run); 2] = [
        ("sum 64Mi f32", Box::new(|| x.sum().unwrap())),
        (
            "embedding_backward 32k x 512 -> 50k",
            Box::new(|| Tensor::embedding_backward(&grad, &ids, vocab).unwrap()),
        ),
    ];
    // The read bandwidth the memory-bound rows are judged by: a plain xor-fold of the sum's
    // 256 MiB input (8 independent u64 accumulators, no software prefetch), one thread.
    let words: Vec<u64> = x
        .data::<f32>()
        .unwrap()
        .chunks_exact(2)
        .map(|p| (p[0].to_bits() as u64) << 32 | p[1].to_bits() as u64)
        .collect();
    let (mut wall, mut cpu) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..runs + 1 {
        let (t, c) = (Instant::now(), thread_cpu_secs());
        let mut acc = [0u64; 8];
        for c in black_box(&words).chunks_exact(8) {
            for j in 0..8 {
                acc[j] ^= c[j];
            }
        }
        black_box(acc);
        let w = t.elapsed().as_secs_f64();
        wall = wall.min(w);
        cpu = cpu.min(thread_cpu_secs().zip(c).map_or(w, |(b, a)| b - a));
    }
    drop(words);
    println!(
        "{{\"case\": \"read 256MiB\", \"threads\": 1, \"wall\": {wall:.6}, \"cpu\": {cpu:.6}}}"
    );
    // The AVX2 path's schedule before the four-piece kernel: one 16 Ki-element piece at a time
    // (its two 256-bit chains), the same bits; one thread.
    let before = || {
        let v = x.data::<f32>().unwrap();
        let mut parts: Vec<f32> = v
            .chunks(CHUNK)
            .map(|c| {
                let mut l = f32::lane_sums(c, Isa::best());
                tree_sum(&mut l)
            })
            .collect();
        Tensor::from_vec(vec![tree_sum(&mut parts)], &[1]).unwrap()
    };
    let (wall, cpu) = time(runs, 1, &before);
    println!(
        "{{\"case\": \"sum 64Mi f32 one piece at a time\", \"threads\": 1, \"wall\": {wall:.6}, \"cpu\": {cpu:.6}}}"
    );
    for (name, f) in &cases {
        for t in [1, 2] {
            let (wall, cpu) = time(runs, t, f.as_ref());
            println!(
                "{{\"case\": \"{name}\", \"threads\": {t}, \"wall\": {wall:.6}, \"cpu\": {cpu:.6}}}"
            );
        }
    }
}
