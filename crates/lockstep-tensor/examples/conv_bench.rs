//! Times conv2d and its two backward primitives at 1 and 2 threads, deterministic and not, and
//! prints one JSON object per line: `{"name", "mode", "threads", "seconds"}` (best of N), with
//! `"cpu_seconds"` (the calling thread's on-CPU time) at one thread.
//! `bench/conv.py` runs this beside PyTorch.
//!
//! Usage: `conv_bench [RUNS] [issue|cnn] [FILTER]` (FILTER: time only the rows whose name
//! contains it, at 1 thread). `issue` (the default): 3×3, 64→64 channels, 56×56,
//! batch 8, padding 1. `cnn`: the two convolutions of `lockstep train --model cnn` (batch 64 of
//! 8×8 digits: 1→16 channels at 8×8, then 16→32 at 4×4, both 3×3 with padding 1). `sizes`:
//! 3×3 convolutions from 4×4 to 64×64 and 16 to 128 channels, to place the heuristic's
//! thresholds (Winograd; the implicit GEMM's size limit). `dcgan`: the `dcgan` example's
//! convolutions (4×4 kernels, stride 2, padding 1, batch 64; the generator's transposed
//! convolutions are these ops with forward and input gradient swapped). With `FAST_CONV` set in the
//! environment, fast convolution is allowed (`set_allow_fast_conv(true)`), so the heuristic's
//! Winograd choices run.

use lockstep_tensor::deterministic::scope;
use lockstep_tensor::ops::conv::Conv2dParams;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};
use std::time::Instant;

/// On-CPU time of the calling thread in seconds (`CLOCK_THREAD_CPUTIME_ID`; x86-64 Linux only):
/// one-thread timings stay comparable while other processes share the cores.
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

/// Best wall time and best on-CPU time of the calling thread over `runs` runs after a warm-up.
fn best(runs: usize, mut f: impl FnMut()) -> (f64, Option<f64>) {
    f();
    let (mut wall, mut cpu) = (f64::INFINITY, None::<f64>);
    for _ in 0..runs {
        let c = thread_cpu_secs();
        let t = Instant::now();
        f();
        wall = wall.min(t.elapsed().as_secs_f64());
        if let (Some(c0), Some(c1)) = (c, thread_cpu_secs()) {
            cpu = Some(cpu.map_or(c1 - c0, |b: f64| b.min(c1 - c0)));
        }
    }
    (wall, cpu)
}

/// A named benchmark body.
type Row<'a> = (String, Box<dyn Fn() + 'a>);

/// One convolution to time: a label, the input shape, the weight shape, the stride and the
/// padding (both the same along the two axes).
type Case = (&'static str, [usize; 4], [usize; 4], usize, usize);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(5);
    let cases: &[Case] = match args.get(2).map_or("issue", |s| s.as_str()) {
        "cnn" => &[
            ("conv1 1→16 8×8 b64", [64, 1, 8, 8], [16, 1, 3, 3], 1, 1),
            ("conv2 16→32 4×4 b64", [64, 16, 4, 4], [32, 16, 3, 3], 1, 1),
        ],
        "sizes" => &[
            ("16→32 4×4 b64", [64, 16, 4, 4], [32, 16, 3, 3], 1, 1),
            ("16→32 8×8 b64", [64, 16, 8, 8], [32, 16, 3, 3], 1, 1),
            ("32→32 8×8 b64", [64, 32, 8, 8], [32, 32, 3, 3], 1, 1),
            ("16→16 16×16 b16", [16, 16, 16, 16], [16, 16, 3, 3], 1, 1),
            ("64→64 8×8 b16", [16, 64, 8, 8], [64, 64, 3, 3], 1, 1),
            ("64→64 16×16 b8", [8, 64, 16, 16], [64, 64, 3, 3], 1, 1),
            ("64→64 24×24 b8", [8, 64, 24, 24], [64, 64, 3, 3], 1, 1),
            ("64→64 32×32 b8", [8, 64, 32, 32], [64, 64, 3, 3], 1, 1),
            ("64→64 31×31 b8", [8, 64, 31, 31], [64, 64, 3, 3], 1, 1),
            ("64→64 56×56 b8", [8, 64, 56, 56], [64, 64, 3, 3], 1, 1),
            ("64→64 56×56 b1", [1, 64, 56, 56], [64, 64, 3, 3], 1, 1),
            ("16→16 64×64 b8", [8, 16, 64, 64], [16, 16, 3, 3], 1, 1),
            ("8→8 60×60 b4", [4, 8, 60, 60], [8, 8, 3, 3], 1, 1),
            ("64→64 64×64 b4", [4, 64, 64, 64], [64, 64, 3, 3], 1, 1),
            ("96→96 32×32 b8", [8, 96, 32, 32], [96, 96, 3, 3], 1, 1),
            ("32→32 32×32 b8", [8, 32, 32, 32], [32, 32, 3, 3], 1, 1),
            ("128→128 16×16 b8", [8, 128, 16, 16], [128, 128, 3, 3], 1, 1),
        ],
        "dcgan" => &[
            (
                "D conv1 1→64 8×8 k4s2 b64",
                [64, 1, 8, 8],
                [64, 1, 4, 4],
                2,
                1,
            ),
            (
                "D conv2 64→128 4×4 k4s2 b64",
                [64, 64, 4, 4],
                [128, 64, 4, 4],
                2,
                1,
            ),
        ],
        _ => &[("", [8, 64, 56, 56], [64, 64, 3, 3], 1, 1)],
    };
    let mut g = lockstep_rng::Generator::with_seed(0);
    let data: Vec<_> = cases
        .iter()
        .map(|&(label, xs, ws, stride, pad)| {
            let x = Tensor::randn(&xs, DType::F32, Some(&mut g)).unwrap();
            let w = Tensor::randn(&ws, DType::F32, Some(&mut g)).unwrap();
            let out = |len: usize, k: usize| (len + 2 * pad - k) / stride + 1;
            let ys = [xs[0], ws[0], out(xs[2], ws[2]), out(xs[3], ws[3])];
            let gy = Tensor::randn(&ys, DType::F32, Some(&mut g)).unwrap();
            let p = Conv2dParams {
                stride: (stride, stride),
                padding: (pad, pad),
                ..Conv2dParams::default()
            };
            (label, x, w, gy, p)
        })
        .collect();
    let filter = args.get(3).cloned();
    lockstep_tensor::autotune::set_allow_fast_conv(std::env::var_os("FAST_CONV").is_some());
    let thread_counts: &[usize] = if filter.is_some() { &[1] } else { &[1, 2] };
    for &threads in thread_counts {
        for det in [false, true] {
            let mode = if det { "det" } else { "nondet" };
            let mut rows: Vec<Row> = Vec::new();
            for (label, x, w, gy, p) in &data {
                let p = *p;
                let name = |op: &str| {
                    if label.is_empty() {
                        op.to_string()
                    } else {
                        format!("{op} {label}")
                    }
                };
                rows.push((
                    name("conv2d forward"),
                    Box::new(move || drop(x.conv2d(w, None, p).unwrap())),
                ));
                rows.push((
                    name("conv2d input grad"),
                    Box::new(move || {
                        drop(Tensor::conv2d_backward_input(gy, x.shape(), w, p).unwrap())
                    }),
                ));
                rows.push((
                    name("conv2d weight grad"),
                    Box::new(move || {
                        drop(Tensor::conv2d_backward_weight(gy, x, w.shape(), p).unwrap())
                    }),
                ));
            }
            for (name, f) in rows {
                if filter.as_ref().is_some_and(|s| !name.contains(s.as_str())) {
                    continue;
                }
                let (s, cpu) = with_num_threads(threads, || scope(det, false, || best(runs, &f)));
                // At one thread the work runs on the calling thread, so its CPU time counts it
                // all (and not the time other processes held the core).
                let cpu = match cpu {
                    Some(c) if threads == 1 => format!(", \"cpu_seconds\": {c:.7}"),
                    _ => String::new(),
                };
                println!(
                    "{{\"name\": \"{name}\", \"mode\": \"{mode}\", \"threads\": {threads}, \"seconds\": {s:.7}{cpu}}}"
                );
            }
        }
    }
}
