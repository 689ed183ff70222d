//! Times lockstep's GEMM and this machine's FMA peak; prints one JSON object per line.
//!
//! ```text
//! cargo run --release -p lockstep-tensor --example gemm_bench -- peak
//! cargo run --release -p lockstep-tensor --example gemm_bench -- gemm f32 1024 1024 1024 1 [isa] [algo]
//! cargo run --release -p lockstep-tensor --example gemm_bench -- kernel f64 [isa] [kc]
//! ```
//! `isa` is `best` (default), `avx512`, `avx2` or `portable` (slice-level `gemm_with`); `algo`
//! (`matmul.blocked`, `matmul.splitk_fixed`, `matmul.splitk_completion`) times a tensor-level
//! implementation instead. Reports the best of several runs, in GFLOP/s (2·m·n·k flops): by
//! wall time (`gflops`) and, for `gemm_with` at one thread, by the calling thread's CPU time
//! (`cpu_gflops`, x86-64 Linux only), which stays comparable while other processes share the
//! cores. The peak uses CPU time where it is available. `kernel` times the micro-kernel alone on panels hot in
//! L1 (`kc` steps per call, the dtype's KC by default): the ceiling for the blocked product.

use lockstep_tensor::ops::matmul::{GemmFloat, Isa, MATMUL, gemm_with};
use lockstep_tensor::threads::Par;
use lockstep_tensor::{Element, Tensor};
use std::time::Instant;

/// On-CPU time of the calling thread in seconds (`CLOCK_THREAD_CPUTIME_ID`), or `None` where
/// it is not implemented (anything but x86-64 Linux). Unlike wall time it does not count the
/// time other processes hold the core, so one-thread timings stay comparable on a busy machine.
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
        if ret == 0 {
            return Some(ts[0] as f64 + ts[1] as f64 * 1e-9);
        }
    }
    None
}

/// Best wall time and best on-CPU time of the calling thread (see [`thread_cpu_secs`]) over
/// several runs after a warm-up.
fn best_of(min_secs: f64, mut f: impl FnMut()) -> (f64, Option<f64>) {
    f(); // warm-up
    let start = Instant::now();
    let (mut best, mut best_cpu) = (f64::INFINITY, None::<f64>);
    let mut runs = 0;
    while runs < 3 || (start.elapsed().as_secs_f64() < min_secs && runs < 50) {
        let c = thread_cpu_secs();
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
        if let (Some(c0), Some(c1)) = (c, thread_cpu_secs()) {
            best_cpu = Some(best_cpu.map_or(c1 - c0, |b| b.min(c1 - c0)));
        }
        runs += 1;
    }
    (best, best_cpu)
}

fn data<T: Element>(n: usize, seed: u64) -> Vec<T> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            T::from_f64((s >> 11) as f64 / (1u64 << 53) as f64 - 0.5)
        })
        .collect()
}

fn run<T: GemmFloat>(
    dt: &str,
    m: usize,
    n: usize,
    k: usize,
    threads: usize,
    isa: &str,
    algo: Option<&str>,
) {
    let par = Par::new(threads);
    let a = data::<T>(m * k, 1);
    let b = data::<T>(k * n, 2);
    let (secs, cpu) = if let Some(algo) = algo {
        let imp = MATMUL.by_algo(algo).expect("known algo");
        let ta = Tensor::from_vec(a, &[m, k]).unwrap();
        let tb = Tensor::from_vec(b, &[k, n]).unwrap();
        best_of(1.0, || {
            (imp.f)(&ta, &tb, &par).unwrap();
        })
    } else {
        let isa_v = match isa {
            "avx512" => Isa::Avx512,
            "avx2" => Isa::Avx2,
            "portable" => Isa::Portable,
            _ => Isa::best(),
        };
        let mut c = vec![T::ZERO; m * n];
        best_of(1.0, || {
            gemm_with(isa_v, m, n, k, &a, (k, 1), &b, (n, 1), &mut c, (n, 1), &par).unwrap();
        })
    };
    let gflops = 2.0 * (m * n * k) as f64 / secs / 1e9;
    // One thread of the slice-level GEMM computes on the calling thread, so its CPU time is
    // the product's; with more threads, or a tensor-level candidate (split-K runs in the pool
    // even at one thread), the caller's CPU time means nothing and is left out.
    let cpu = match cpu {
        Some(c) if threads == 1 && algo.is_none() && c > 0.0 => format!(
            ",\"cpu_secs\":{c:.6},\"cpu_gflops\":{:.2}",
            2.0 * (m * n * k) as f64 / c / 1e9
        ),
        _ => String::new(),
    };
    println!(
        "{{\"kind\":\"gemm\",\"dtype\":\"{dt}\",\"m\":{m},\"n\":{n},\"k\":{k},\"threads\":{threads},\"isa\":\"{isa}\",\"algo\":\"{}\",\"secs\":{secs:.6},\"gflops\":{gflops:.2}{cpu}}}",
        algo.unwrap_or("gemm")
    );
}

#[cfg(target_arch = "x86_64")]
mod peak {
    use core::arch::x86_64::*;

    /// 12 independent FMA chains of 256-bit vectors (enough to cover 4-cycle latency on two
    /// ports); returns f32 flops done.
    #[target_feature(enable = "avx2,fma")]
    pub fn avx2(iters: usize) -> (f64, f32) {
        let mut acc = [_mm256_set1_ps(0.0); 12];
        let x = _mm256_set1_ps(0.999_999);
        let y = _mm256_set1_ps(1e-7);
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm256_fmadd_ps(*a, x, y);
            }
        }
        let mut s = _mm256_setzero_ps();
        for a in acc {
            s = _mm256_add_ps(s, a);
        }
        let mut out = [0f32; 8];
        // SAFETY: `out` holds 8 floats.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), s) };
        ((iters * 12 * 8 * 2) as f64, out.iter().sum())
    }

    /// The same with 512-bit vectors.
    #[target_feature(enable = "avx512f")]
    pub fn avx512(iters: usize) -> (f64, f32) {
        let mut acc = [_mm512_set1_ps(0.0); 12];
        let x = _mm512_set1_ps(0.999_999);
        let y = _mm512_set1_ps(1e-7);
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm512_fmadd_ps(*a, x, y);
            }
        }
        let mut s = _mm512_setzero_ps();
        for a in acc {
            s = _mm512_add_ps(s, a);
        }
        ((iters * 12 * 16 * 2) as f64, _mm512_reduce_add_ps(s))
    }
}

fn peak() {
    #[cfg(target_arch = "x86_64")]
    {
        let iters = 20_000_000;
        let report = |name: &str, f: &dyn Fn() -> (f64, f32)| {
            let mut flops = 0.0;
            let (wall, cpu) = best_of(0.5, || {
                let (fl, s) = f();
                flops = fl;
                std::hint::black_box(s);
            });
            let secs = cpu.map_or(wall, |c| c.min(wall));
            println!(
                "{{\"kind\":\"peak\",\"isa\":\"{name}\",\"dtype\":\"f32\",\"threads\":1,\"gflops\":{:.2},\"f64_gflops\":{:.2}}}",
                flops / secs / 1e9,
                flops / secs / 2e9
            );
        };
        if Isa::Avx2.available() {
            // SAFETY: AVX2 and FMA are present.
            report("avx2", &|| unsafe { peak::avx2(iters) });
        }
        if Isa::Avx512.available() {
            // SAFETY: AVX-512F is present.
            report("avx512", &|| unsafe { peak::avx512(iters) });
        }
    }
}

/// The micro-kernel alone: `reps` calls on the same packed panels of `kc` steps (hot in L1),
/// accumulating into one tile, as a ceiling for the blocked product.
fn kernel_only<T: GemmFloat>(dt: &str, isa: &str, kc: usize) {
    let isa_v = match isa {
        "avx2" => Isa::Avx2,
        "portable" => Isa::Portable,
        _ => Isa::best(),
    };
    let kern = T::kernel(isa_v);
    let a = data::<T>(kc * kern.mr, 1);
    let b = data::<T>(kc * kern.nr, 2);
    let mut c = vec![T::ZERO; kern.mr * kern.nr];
    let reps = (1usize << 27) / (kc * kern.mr * kern.nr);
    let (wall, cpu) = best_of(0.5, || {
        for r in 0..reps {
            // SAFETY: the panels hold `kc` steps of MR and NR elements, C one dense tile.
            unsafe { (kern.f)(kc, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), kern.nr, r > 0) };
        }
        std::hint::black_box(&mut c);
    });
    let secs = cpu.map_or(wall, |c| c.min(wall));
    let flops = 2.0 * (reps * kc * kern.mr * kern.nr) as f64;
    println!(
        "{{\"kind\":\"kernel\",\"dtype\":\"{dt}\",\"kernel\":\"{}\",\"kc\":{kc},\"gflops\":{:.2}}}",
        kern.name,
        flops / secs / 1e9
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("peak") => peak(),
        Some("gemm") if args.len() >= 6 => {
            let p = |i: usize| args[i].parse::<usize>().expect("a number");
            let (m, n, k, t) = (p(2), p(3), p(4), p(5));
            let isa = args.get(6).map_or("best", String::as_str);
            let algo = args.get(7).map(String::as_str);
            match args[1].as_str() {
                "f64" => run::<f64>("f64", m, n, k, t, isa, algo),
                _ => run::<f32>("f32", m, n, k, t, isa, algo),
            }
        }
        Some("kernel") if args.len() >= 2 => {
            let isa = args.get(2).map_or("best", String::as_str);
            match args[1].as_str() {
                "f64" => kernel_only::<f64>(
                    "f64",
                    isa,
                    args.get(3)
                        .map_or(f64::KC, |s| s.parse().expect("a number")),
                ),
                _ => kernel_only::<f32>(
                    "f32",
                    isa,
                    args.get(3)
                        .map_or(f32::KC, |s| s.parse().expect("a number")),
                ),
            }
        }
        _ => eprintln!(
            "usage: gemm_bench peak | gemm f32|f64 M N K THREADS [isa] [algo] | kernel f32|f64 [isa] [kc]"
        ),
    }
}
