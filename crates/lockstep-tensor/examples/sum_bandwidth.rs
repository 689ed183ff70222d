//! Memory bandwidth of `sum` over a large f32 vector: lockstep's deterministic and
//! nondeterministic `sum` against a plain reference sum, plus other schedules of the
//! deterministic order (same bits, different memory access patterns) to see which one a
//! machine favours.
//!
//! ```text
//! cargo run --release -p lockstep-tensor --example sum_bandwidth -- --threads 2
//! cargo run --release -p lockstep-tensor --example sum_bandwidth -- --threads 1,2,4,8,16 --size 64Mi
//! ```
//! `--threads` takes one count or a comma-separated list (lockstep's `set_num_threads`);
//! `--size` is a number of f32 elements, with an optional `Ki`/`Mi`/`Gi` (or `K`/`M`/`G`)
//! suffix (default `64Mi`, 256 MiB); `--runs` the number of interleaved rounds (default 20).
//! Every row is the best of the rounds; each round runs every row once, so a busy machine
//! slows all rows alike. Rows:
//!
//! * `lockstep det` / `lockstep nondet`: `Tensor::sum` in deterministic / default mode;
//! * `reference`: the input cut into N contiguous parts on N threads (lockstep's pool), each
//!   summed in one sequential pass with 8 independent vector accumulators and no software
//!   prefetch — roughly what PyTorch's `sum` does, and about what the memory system allows;
//! * `det Ns pfD`: lockstep's deterministic order (16 KiB-element pieces, 16 lanes per piece,
//!   the same thread split) computed here with N pieces in flight per thread (N sequential
//!   streams 64 KiB apart) and a software prefetch D bytes ahead (`pf0`: none). `det 4s pf2048`
//!   is the library's AVX-512 schedule; `skB`: each later piece of a group starts B bytes
//!   later (AVX-512 only), so that the streams are not exactly 64 KiB apart (on the same L1
//!   sets);
//!   `bits` says whether the result equals `lockstep det`.
//! * `pool round trip`: an empty parallel job on N threads (thread wake-up cost).

use lockstep_tensor::deterministic::scope;
use lockstep_tensor::isa::Isa;
use lockstep_tensor::ops::reduce::{CHUNK, LANES, sum_lanes, tree_sum};
use lockstep_tensor::threads::Par;
use lockstep_tensor::{Tensor, set_num_threads};
use rayon::prelude::*;
use std::hint::black_box;
use std::time::{Duration, Instant};

fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mul) = [
        ("Ki", 1usize << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("K", 1000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
    ]
    .iter()
    .find_map(|&(suf, m)| s.strip_suffix(suf).map(|n| (n, m)))
    .unwrap_or((s, 1));
    num.parse::<usize>().ok()?.checked_mul(mul)
}

struct Args {
    threads: Vec<usize>,
    size: usize,
    runs: usize,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        threads: vec![std::thread::available_parallelism().map_or(1, |n| n.get())],
        size: 64 << 20,
        runs: 20,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let val = it.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--threads" => {
                a.threads = val
                    .split(',')
                    .map(|t| t.trim().parse::<usize>().ok().filter(|&n| n >= 1))
                    .collect::<Option<_>>()
                    .ok_or(format!(
                        "bad --threads {val:?}: counts >= 1, comma-separated"
                    ))?;
            }
            "--size" => {
                a.size = parse_size(&val)
                    .filter(|&n| n >= 1)
                    .ok_or(format!("bad --size {val:?}: e.g. 67108864, 64Mi, 100M"))?;
            }
            "--runs" => {
                a.runs = val
                    .parse()
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or(format!("bad --runs {val:?}"))?;
            }
            _ => {
                return Err(format!(
                    "unknown flag {flag} (use --threads, --size, --runs)"
                ));
            }
        }
    }
    Ok(a)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The input: values in [-0.5, 0.5) from xorshift64, written in parallel (so the pages are
/// touched before timing).
fn data(n: usize) -> Vec<f32> {
    let mut v = vec![0f32; n];
    v.par_chunks_mut(1 << 16).enumerate().for_each(|(c, part)| {
        let mut s = (c as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for x in part {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            *x = (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
        }
    });
    v
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use super::{CHUNK, LANES};
    use core::arch::x86_64::*;

    fn pf(p: *const f32, bytes: usize) {
        // SAFETY: a prefetch never faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>().wrapping_add(bytes)) }
    }

    /// Plain sum: 8 accumulators of 16 floats, one sequential pass.
    ///
    /// # Safety
    /// AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn ref_avx512(x: &[f32]) -> f32 {
        let mut a = [_mm512_setzero_ps(); 8];
        let mut c = x.chunks_exact(128);
        for c in &mut c {
            for (j, a) in a.iter_mut().enumerate() {
                // SAFETY: c has 128 elements.
                *a = _mm512_add_ps(*a, unsafe { _mm512_loadu_ps(c.as_ptr().add(16 * j)) });
            }
        }
        let mut t = a[0];
        for &v in &a[1..] {
            t = _mm512_add_ps(t, v);
        }
        _mm512_reduce_add_ps(t) + c.remainder().iter().sum::<f32>()
    }

    /// Plain sum: 8 accumulators of 8 floats, one sequential pass.
    ///
    /// # Safety
    /// AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn ref_avx2(x: &[f32]) -> f32 {
        let mut a = [_mm256_setzero_ps(); 8];
        let mut c = x.chunks_exact(64);
        for c in &mut c {
            for (j, a) in a.iter_mut().enumerate() {
                // SAFETY: c has 64 elements.
                *a = _mm256_add_ps(*a, unsafe { _mm256_loadu_ps(c.as_ptr().add(8 * j)) });
            }
        }
        let mut t = a[0];
        for &v in &a[1..] {
            t = _mm256_add_ps(t, v);
        }
        let mut o = [0f32; 8];
        // SAFETY: o holds 8 floats.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), t) };
        o.iter().sum::<f32>() + c.remainder().iter().sum::<f32>()
    }

    /// Lane sums of `S` whole pieces (`x.len() == S * CHUNK`), `S` chains in flight (one per
    /// piece: `S` streams `CHUNK * 4` bytes apart, or `skew` elements less for each later
    /// piece, which then starts that much later), prefetching `pfd` bytes ahead (0: none).
    /// Lane `l` of piece `s` is `x[s * CHUNK + l], x[s * CHUNK + l + 16], …` added in order.
    ///
    /// # Safety
    /// AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn pieces_avx512<const S: usize>(
        x: &[f32],
        pfd: usize,
        skew: usize,
    ) -> [[f32; LANES]; S] {
        assert_eq!(x.len(), S * CHUNK);
        let p: [*const f32; S] = core::array::from_fn(|s| x[s * CHUNK..].as_ptr());
        let mut a = [_mm512_setzero_ps(); S];
        let mut k = 0;
        while k < CHUNK + (S - 1) * skew {
            for s in 0..S {
                // Piece `s` runs `s * skew` elements behind piece 0.
                let Some(o) = k.checked_sub(s * skew).filter(|&o| o < CHUNK) else {
                    continue;
                };
                if pfd > 0 {
                    pf(p[s].wrapping_add(o), pfd);
                }
                // SAFETY: o + 16 <= CHUNK.
                a[s] = _mm512_add_ps(a[s], unsafe { _mm512_loadu_ps(p[s].add(o)) });
            }
            k += LANES;
        }
        let mut out = [[0f32; LANES]; S];
        for (o, a) in out.iter_mut().zip(a) {
            // SAFETY: o holds 16 floats.
            unsafe { _mm512_storeu_ps(o.as_mut_ptr(), a) };
        }
        out
    }

    /// As [`pieces_avx512`] with two 8-float registers per piece (lanes 0-7 and 8-15).
    ///
    /// # Safety
    /// AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn pieces_avx2<const S: usize>(x: &[f32], pfd: usize) -> [[f32; LANES]; S] {
        assert_eq!(x.len(), S * CHUNK);
        let p: [*const f32; S] = core::array::from_fn(|s| x[s * CHUNK..].as_ptr());
        let mut lo = [_mm256_setzero_ps(); S];
        let mut hi = [_mm256_setzero_ps(); S];
        let mut k = 0;
        while k < CHUNK {
            for s in 0..S {
                if pfd > 0 {
                    pf(p[s].wrapping_add(k), pfd);
                }
                // SAFETY: k + 16 <= CHUNK.
                unsafe {
                    lo[s] = _mm256_add_ps(lo[s], _mm256_loadu_ps(p[s].add(k)));
                    hi[s] = _mm256_add_ps(hi[s], _mm256_loadu_ps(p[s].add(k + 8)));
                }
            }
            k += LANES;
        }
        let mut out = [[0f32; LANES]; S];
        for s in 0..S {
            // SAFETY: out[s] holds 16 floats.
            unsafe {
                _mm256_storeu_ps(out[s].as_mut_ptr(), lo[s]);
                _mm256_storeu_ps(out[s].as_mut_ptr().add(8), hi[s]);
            }
        }
        out
    }
}

/// The plain reference sum of one thread's part.
fn ref_part(x: &[f32], isa: Isa) -> f32 {
    #[cfg(target_arch = "x86_64")]
    match isa {
        // SAFETY: `isa` is the path in use, which the CPU supports.
        Isa::Avx512 => return unsafe { simd::ref_avx512(x) },
        // SAFETY: as above.
        Isa::Avx2 => return unsafe { simd::ref_avx2(x) },
        Isa::Portable => {}
    }
    let _ = isa;
    let mut a = [0f32; 8];
    let mut c = x.chunks_exact(8);
    for c in &mut c {
        for j in 0..8 {
            a[j] += c[j];
        }
    }
    a.iter().sum::<f32>() + c.remainder().iter().sum::<f32>()
}

fn reference(x: &[f32], par: &Par, isa: Isa) -> f32 {
    let per = x.len().div_ceil(par.threads());
    par.install(|| x.par_chunks(per).map(|c| ref_part(c, isa)).sum())
}

/// The sums of `S` whole pieces, folded by the fixed tree (the library's piece sums).
fn group<const S: usize>(x: &[f32], pfd: usize, skew: usize, isa: Isa, out: &mut [f32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY (both): `isa` is the path in use, which the CPU supports.
        let lanes = match isa {
            Isa::Avx512 => unsafe { simd::pieces_avx512::<S>(x, pfd, skew) },
            Isa::Avx2 => unsafe { simd::pieces_avx2::<S>(x, pfd) },
            Isa::Portable => return false,
        };
        for (o, mut l) in out.iter_mut().zip(lanes) {
            *o = tree_sum(&mut l);
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (x, pfd, skew, isa, out);
        false
    }
}

/// One thread's run of pieces with `streams` pieces in flight.
fn run_pieces(x: &[f32], out: &mut [f32], (streams, pfd, skew): (usize, usize, usize), isa: Isa) {
    let mut o = 0;
    let mut rest = x;
    while rest.len() >= streams * CHUNK {
        let (g, r) = rest.split_at(streams * CHUNK);
        let done = match streams {
            1 => group::<1>(g, pfd, skew, isa, &mut out[o..o + 1]),
            2 => group::<2>(g, pfd, skew, isa, &mut out[o..o + 2]),
            4 => group::<4>(g, pfd, skew, isa, &mut out[o..o + 4]),
            8 => group::<8>(g, pfd, skew, isa, &mut out[o..o + 8]),
            _ => false,
        };
        if !done {
            break;
        }
        o += streams;
        rest = r;
    }
    for c in rest.chunks(CHUNK) {
        out[o] = sum_lanes(c);
        o += 1;
    }
}

/// lockstep's deterministic sum order with another schedule: the library's split of the
/// pieces over the threads, `streams` pieces in flight per thread.
fn det_schedule(x: &[f32], par: &Par, sched: (usize, usize, usize), isa: Isa) -> f32 {
    if x.len() <= CHUNK {
        return sum_lanes(x);
    }
    let pieces = x.len().div_ceil(CHUNK);
    let mut partials = vec![0f32; pieces];
    let threads = par.threads().min(pieces / 4).max(1);
    if threads == 1 {
        run_pieces(x, &mut partials, sched, isa);
    } else {
        let per = pieces.div_ceil(threads).next_multiple_of(4);
        par.install(|| {
            partials
                .par_chunks_mut(per)
                .zip(x.par_chunks(per * CHUNK))
                .for_each(|(o, c)| run_pieces(c, o, sched, isa))
        });
    }
    tree_sum(&mut partials)
}

struct Row {
    name: String,
    f: Box<dyn Fn() -> f32>,
    best: Duration,
    value: f32,
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("sum_bandwidth: {e}");
            std::process::exit(2);
        }
    };
    let isa = Isa::best();
    println!("cpu: {}", cpu_model());
    println!(
        "isa: {} (detected {}), cores available: {}",
        isa,
        Isa::detected(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let n = a.size;
    let bytes = n * 4;
    println!(
        "size: {n} f32 ({:.1} MiB), best of {} interleaved rounds",
        bytes as f64 / (1 << 20) as f64,
        a.runs
    );
    let t0 = Instant::now();
    // One buffer for every row (the same pages, the same huge-page state).
    let xt = Tensor::from_vec(data(n), &[n]).expect("input tensor");
    println!("input ready in {:.1} s", t0.elapsed().as_secs_f64());

    for &threads in &a.threads {
        set_num_threads(threads);
        let par = Par::new(threads);
        let mut rows: Vec<Row> = Vec::new();
        let mut add = |name: String, f: Box<dyn Fn() -> f32>| {
            rows.push(Row {
                name,
                f,
                best: Duration::MAX,
                value: f32::NAN,
            })
        };
        let t = xt.clone();
        add(
            "lockstep det".into(),
            Box::new(move || {
                scope(true, false, || t.sum().and_then(|s| s.item::<f32>())).expect("sum")
            }),
        );
        let t = xt.clone();
        add(
            "lockstep nondet".into(),
            Box::new(move || {
                scope(false, false, || t.sum().and_then(|s| s.item::<f32>())).expect("sum")
            }),
        );
        let (xr, p) = (xt.clone(), par.clone());
        add(
            "reference".into(),
            Box::new(move || reference(xr.data().expect("f32"), &p, isa)),
        );
        for (streams, pfd, skew) in [
            (4, 2048, 0),
            (4, 0, 0),
            (4, 2048, 256),
            (4, 0, 256),
            (2, 0, 0),
            (2, 2048, 0),
            (1, 0, 0),
            (1, 2048, 0),
            (8, 0, 0),
        ] {
            let (xr, p) = (xt.clone(), par.clone());
            let name = match skew {
                0 => format!("det {streams}s pf{pfd}"),
                _ => format!("det {streams}s pf{pfd} sk{}", skew * 4),
            };
            add(
                name,
                Box::new(move || {
                    det_schedule(xr.data().expect("f32"), &p, (streams, pfd, skew), isa)
                }),
            );
        }
        let p = par.clone();
        add(
            "pool round trip".into(),
            Box::new(move || {
                p.install(|| {
                    (0..p.threads())
                        .into_par_iter()
                        .for_each(|i| _ = black_box(i))
                });
                0.0
            }),
        );
        // Every row once per round; stop early if a slow machine would pass ~50 s in all.
        let start = Instant::now();
        let mut rounds = 0;
        for _ in 0..=a.runs {
            for r in rows.iter_mut() {
                let t = Instant::now();
                let v = black_box((r.f)());
                let d = t.elapsed();
                if rounds > 0 {
                    r.best = r.best.min(d);
                }
                r.value = v;
            }
            rounds += 1;
            let per_count = 50.0 / a.threads.len() as f64;
            if start.elapsed().as_secs_f64() * (rounds + 1) as f64 / rounds as f64 > per_count {
                break;
            }
        }
        let det = rows[0].value;
        let ref_ms = rows[2].best.as_secs_f64() * 1e3;
        println!(
            "\nthreads {threads} ({} timed rounds)\n{:<22} {:>9} {:>8} {:>8}  value",
            rounds - 1,
            "row",
            "ms",
            "GB/s",
            "ref/row",
        );
        for r in &rows {
            let ms = r.best.as_secs_f64() * 1e3;
            if r.name == "pool round trip" {
                println!("{:<22} {:>9.4}", r.name, ms);
                continue;
            }
            let bits = if r.name.starts_with("det ") {
                if r.value.to_bits() == det.to_bits() {
                    "  bits = lockstep det"
                } else {
                    "  bits DIFFER from lockstep det"
                }
            } else {
                ""
            };
            println!(
                "{:<22} {:>9.3} {:>8.1} {:>8.2}  {:.6e}{bits}",
                r.name,
                ms,
                bytes as f64 / r.best.as_secs_f64() / 1e9,
                ref_ms / ms,
                r.value
            );
        }
    }
}
