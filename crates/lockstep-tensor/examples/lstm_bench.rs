//! Times the products of one LSTM layer's training step on one thread — the input projection
//! (`lstm_input`), the recurrent forward and backward (`lstm_layer`, `lstm_layer_backward`)
//! and the projection's gradients (`lstm_input_backward`) — and prints one JSON object per
//! line with the best wall and on-CPU seconds and the multiply-adds' GFLOP/s by CPU time, to
//! compare with `gemm_bench peak`. Shape: the `lockstep train --model lstm` second layer
//! (T 8, batch 32, H 128, input 128); run with `LOCKSTEP_ISA=avx2` for the AVX2 path.
//!
//! Usage: `lstm_bench [RUNS] [H] [BATCH]`.

use lockstep_tensor::ops::recurrent::{LstmLayer, lstm_input, lstm_input_backward};
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};
use std::time::Instant;

/// On-CPU time of the calling thread in seconds (`CLOCK_THREAD_CPUTIME_ID`; x86-64 Linux only).
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

/// Best wall and on-CPU seconds over `runs` runs after a warm-up.
fn best(runs: usize, mut f: impl FnMut()) -> (f64, f64) {
    f();
    let (mut wall, mut cpu) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..runs {
        let c = thread_cpu_secs();
        let t = Instant::now();
        f();
        wall = wall.min(t.elapsed().as_secs_f64());
        if let (Some(c0), Some(c1)) = (c, thread_cpu_secs()) {
            cpu = cpu.min(c1 - c0);
        }
    }
    (wall, cpu)
}

fn report(name: &str, macs: f64, (wall, cpu): (f64, f64)) {
    println!(
        "{{\"name\": \"{name}\", \"seconds\": {wall:.7}, \"cpu_seconds\": {cpu:.7}, \"cpu_gflops\": {:.2}}}",
        2.0 * macs / cpu / 1e9
    );
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let runs: usize = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(50);
    let h: usize = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(128);
    let b: usize = a.get(3).and_then(|s| s.parse().ok()).unwrap_or(32);
    let t = 8;
    let mut rng = lockstep_rng::Generator::with_seed(0);
    let mut rnd = |s: &[usize], scale: f64| {
        let mut v = Tensor::randn(s, DType::F32, Some(&mut rng)).unwrap();
        v.mul_scalar_(scale).unwrap();
        v
    };
    let x = rnd(&[t, b, h], 1.0);
    let w_ih = rnd(&[4 * h, h], 0.1);
    let b_ih = rnd(&[4 * h], 0.1);
    let w_hh = rnd(&[4 * h, h], 0.1);
    let b_hh = rnd(&[4 * h], 0.1);
    let h0 = Tensor::zeros(&[b, h], DType::F32).unwrap();
    let gy = rnd(&[t + 1, b, h], 1.0);
    let order: Vec<usize> = (0..t).collect();
    let (tb, g4) = ((t * b) as f64, (4 * h) as f64);
    let rec = ((t - 1) * b * 4 * h * h) as f64;
    with_num_threads(1, || {
        let xw = lstm_input(&x, &w_ih, Some(&b_ih)).unwrap().unwrap();
        report(
            "lstm_input",
            tb * g4 * h as f64,
            best(runs, || drop(lstm_input(&x, &w_ih, Some(&b_ih)).unwrap())),
        );
        report(
            "lstm_layer",
            rec,
            best(runs, || {
                drop(LstmLayer::forward(&xw, &w_hh, Some(&b_hh), &h0, &h0, &order).unwrap())
            }),
        );
        let (_, layer) = LstmLayer::forward(&xw, &w_hh, Some(&b_hh), &h0, &h0, &order).unwrap();
        report(
            "lstm_layer_backward",
            2.0 * rec,
            best(runs, || drop(layer.backward(&gy, false, false).unwrap())),
        );
        let dxw = layer.backward(&gy, false, false).unwrap()[0]
            .clone()
            .unwrap();
        report(
            "lstm_input_backward",
            2.0 * tb * g4 * h as f64,
            best(runs, || {
                drop(lstm_input_backward(&dxw, &x, &w_ih, true, true, true, true).unwrap())
            }),
        );
    });
}
