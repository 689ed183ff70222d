//! Times lockstep's random streams and prints one JSON object per line:
//! `{"name": ..., "seconds": best of N runs, "elements": ..., "threads": ...}`.
//! `bench/compare.py` runs this beside PyTorch and NumPy and writes BENCHMARKS.md;
//! the criterion benches in `benches/` are the detailed, statistical view. Each row also gives
//! `cpu_seconds`: the best on-CPU time of the calling thread (x86-64 Linux; else the wall
//! time), which stays comparable while other processes share the cores (one-thread rows only).

use lockstep_rng::compat::{numpy, torch};
use lockstep_rng::{Generator, Philox4x32};
use std::hint::black_box;
use std::time::Instant;

/// On-CPU time of the calling thread in seconds (`CLOCK_THREAD_CPUTIME_ID`), or `None` where
/// it is not implemented here (anything but x86-64 Linux).
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

thread_local! {
    /// The best on-CPU time of the last `best_of`, for the next `row`.
    static CPU: std::cell::Cell<f64> = const { std::cell::Cell::new(f64::NAN) };
}

fn best_of(runs: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm up: page in the output buffer, load the code
    let (mut wall, mut cpu) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..runs {
        let (t, c) = (Instant::now(), thread_cpu_secs());
        f();
        let w = t.elapsed().as_secs_f64();
        wall = wall.min(w);
        cpu = cpu.min(thread_cpu_secs().zip(c).map_or(w, |(b, a)| b - a));
    }
    CPU.with(|c| c.set(cpu));
    wall
}

fn row(name: &str, seconds: f64, elements: usize, threads: usize) {
    let cpu = CPU.with(|c| c.replace(f64::NAN));
    let cpu = if cpu.is_nan() { seconds } else { cpu };
    println!(
        "{{\"name\": \"{name}\", \"seconds\": {seconds:.6}, \"cpu_seconds\": {cpu:.6}, \"elements\": {elements}, \"threads\": {threads}}}"
    );
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    const N: usize = 10_000_000;
    let mut f32s = vec![0f32; N];
    let mut f64s = vec![0f64; N];

    let mut g = Generator::with_seed(0);
    row(
        "torch.rand f32 1e7",
        best_of(runs, || torch::rand(&mut g, black_box(&mut f32s))),
        N,
        1,
    );
    row(
        "torch.randn f32 1e7",
        best_of(runs, || {
            torch::normal_(&mut g, black_box(&mut f32s), 0.0, 1.0).unwrap()
        }),
        N,
        1,
    );
    row(
        "torch.randn f64 1e7",
        best_of(runs, || {
            torch::normal_(&mut g, black_box(&mut f64s), 0.0, 1.0).unwrap()
        }),
        N,
        1,
    );

    // The transform as it was before lockstep ported glibc's math: the same uniforms, then
    // the platform's `log`/`cos`/`sin` per element (kept to show the gain in the same run).
    row(
        "torch.randn f64 1e7 (platform libm transform)",
        best_of(runs, || {
            let d = black_box(&mut f64s);
            torch::rand(&mut g, d);
            for b in d.chunks_exact_mut(16) {
                for j in 0..8 {
                    let radius = (-2.0 * (1.0 - b[j]).ln()).sqrt();
                    let theta = core::f64::consts::TAU * b[j + 8];
                    b[j] = (radius * theta.cos()).mul_add(1.0, 0.0);
                    b[j + 8] = (radius * theta.sin()).mul_add(1.0, 0.0);
                }
            }
        }),
        N,
        1,
    );

    let mut npg = numpy::Generator::from_u64(0);
    row(
        "numpy Generator.random f64 1e7",
        best_of(runs, || npg.random(black_box(&mut f64s))),
        N,
        1,
    );
    row(
        "numpy Generator.standard_normal f64 1e7",
        best_of(runs, || npg.standard_normal(black_box(&mut f64s))),
        N,
        1,
    );
    let mut rs = numpy::RandomState::new(0);
    row(
        "numpy RandomState.rand f64 1e7",
        best_of(runs, || rs.random_sample(black_box(&mut f64s))),
        N,
        1,
    );

    const P: usize = 1 << 28;
    let mut big = vec![0f32; P];
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let mut ph = Philox4x32::new([1, 2]);
        let s = best_of(runs.min(3), || {
            pool.install(|| ph.par_fill_uniform_f32(black_box(&mut big)))
        });
        row("philox uniform f32 2^28", s, P, threads);
    }
}
