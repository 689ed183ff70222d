//! The fused recurrent layers' kernels: one op per direction of an LSTM, GRU or Elman RNN layer
//! (`lstm_layer`, `gru_layer`, `rnn_layer` and their backwards) and an LSTM layer's input
//! projection (`lstm_input`), each through dispatch with the same bits at any number of
//! threads. `lockstep-nn`'s `Rnn` module turns them into differentiable ops; they take and
//! return plain tensors.
//!
//! | op | API | implementations |
//! |---|---|---|
//! | `lstm_layer`, `lstm_layer_backward` | [`LstmLayer`] | `.simd` (f32, AVX2+FMA or AVX-512), `.gemm` (any float, any CPU): the same bits |
//! | `gru_layer`, `rnn_layer` and backwards | [`RecurrentLayer`] | `.gemm` |
//! | `lstm_input`, `lstm_input_backward` | [`lstm_input`], [`lstm_input_backward`] | `.simd`, `.linear` (`Tensor::linear`): the same bits |

mod blocks;
mod gru;
mod input;
mod lstm;
pub(crate) mod lstm_kernel;

pub use blocks::{BatchBlockSum, lstm_input_backward_blocks};
pub use gru::{CellKind, RecurrentLayer};
pub use input::{lstm_input, lstm_input_backward, lstm_input_fits};
pub use lstm::LstmLayer;

use crate::Result;
use crate::ops::matmul::{GemmFloat, PackedB};
use crate::threads::Par;
use lstm_kernel::fast;

/// The ops of this family (forward and backward of each layer, the LSTM input projection).
pub fn ops() -> Vec<crate::op::OpInfo> {
    let mut v = lstm::ops();
    v.extend(input::ops());
    v.extend(gru::ops());
    v
}

/// The float types the fused recurrent layers run in: [`GemmFloat`] with the gates' activations.
pub(crate) trait Real: GemmFloat {
    /// `tanh` of every element of `v`, in place.
    fn tanh_all(v: &mut [Self]);
    /// `1 / (1 + exp(−x))` of every element of `v`, in place.
    fn sigmoid_all(v: &mut [Self]);
    fn tanh(self) -> Self;
}

/// f64 (gradient checks, goldens): the portable `crate::math` functions, as the unfused ops.
impl Real for f64 {
    fn tanh_all(v: &mut [Self]) {
        v.iter_mut().for_each(|x| *x = crate::math::tanh(*x));
    }
    fn sigmoid_all(v: &mut [Self]) {
        v.iter_mut().for_each(|x| *x = crate::math::sigmoid(*x));
    }
    #[inline(always)]
    fn tanh(self) -> Self {
        crate::math::tanh(self)
    }
}

/// f32 (training): vectorised polynomial `exp`/`tanh` (see [`fast`]), a few ulp from the C
/// library's, where the scalar calls were a fifth of an LSTM training step.
impl Real for f32 {
    fn tanh_all(v: &mut [Self]) {
        fast::map(v, fast::tanh);
    }
    fn sigmoid_all(v: &mut [Self]) {
        fast::map(v, fast::sigmoid);
    }
    #[inline(always)]
    fn tanh(self) -> Self {
        fast::tanh(self)
    }
}

/// Runs `f(r0, r1)` over row ranges covering `0..rows`: on the calling thread, or cut into one
/// range per thread when `work` (multiply-adds) is large enough to pay for the hop: from 2^19,
/// ~10 µs of one core, which takes in the first layer's projections (2^20 at H = 128; the
/// two-thread LSTM step 1.5 % faster than from 2^21). [`Par::run_parts`]: the caller works
/// beside standing helpers, no sleep and wake per region. The ranges are the same whoever runs
/// them and never change the bits: each row is computed alone.
pub(crate) fn for_row_ranges(par: &Par, rows: usize, work: usize, f: impl Fn(usize, usize) + Sync) {
    let parts = par.threads().min(rows);
    if parts <= 1 || work < 1 << 19 {
        f(0, rows);
        return;
    }
    par.run_parts(parts, |p| f(p * rows / parts, (p + 1) * rows / parts));
}

/// [`for_row_ranges`] for work that can fail: the first error any range returns (the others
/// still run to their end).
///
/// # Errors
/// The first error of a range.
pub(crate) fn try_row_ranges(
    par: &Par,
    rows: usize,
    work: usize,
    f: impl Fn(usize, usize) -> Result<()> + Sync,
) -> Result<()> {
    let failed = std::sync::Mutex::new(None);
    for_row_ranges(par, rows, work, |r0, r1| {
        if let Err(e) = f(r0, r1) {
            failed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert(e);
        }
    });
    match failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// An empty vector with room for `n` elements, which the caller writes through its pointer
/// before `set_len`.
///
/// # Errors
/// `OutOfMemory` if the allocation fails.
pub(crate) fn uninit(op: &'static str, n: usize) -> Result<Vec<f32>> {
    Ok(crate::tensor::try_with_capacity::<f32>(op, n)?)
}

/// `Wᵀ` (`W` `[g, h]`, row-major) packed as the B operand of `h·Wᵀ` products: dense `[h, g]`
/// first, in 16×16 tiles (the product packs rows of it with plain copies; packing the
/// transposed view gathers one element at a time, as slow as the product itself, and element
/// by element the strided side cost as much as a step's math), then packed once for all steps
/// in the product's own layout, so the bits are `gemm`'s.
///
/// # Errors
/// `OutOfMemory` if the buffers cannot be allocated.
pub(crate) fn packed_transpose<T: Real>(w: &[T], g: usize, h: usize) -> Result<PackedB<T>> {
    let mut wt = crate::try_filled_vec("rnn", g * h, T::ZERO)?;
    for j0 in (0..g).step_by(16) {
        for p0 in (0..h).step_by(16) {
            for j in j0..(j0 + 16).min(g) {
                for p in p0..(p0 + 16).min(h) {
                    wt[p * g + j] = w[j * h + p];
                }
            }
        }
    }
    PackedB::new(h, g, &wt, (g, 1))
}

#[cfg(test)]
mod tests {
    use super::fast;
    use crate::threads::Par;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Every row once, in the ranges `threads` gives, whoever runs them: the calling thread
    /// with the helpers, or the pool while another thread holds the helpers.
    #[test]
    fn row_ranges_cover_every_row_once() {
        let check = || {
            for threads in [1, 2, 3, 8] {
                let par = Par::new(threads);
                for rows in [1, 5, 32, 100] {
                    let seen: Vec<AtomicUsize> = (0..rows).map(|_| AtomicUsize::new(0)).collect();
                    let ranges = AtomicUsize::new(0);
                    super::for_row_ranges(&par, rows, 1 << 22, |r0, r1| {
                        let parts = threads.min(rows);
                        let p = (0..parts)
                            .find(|&p| p * rows / parts == r0)
                            .expect("a range start");
                        assert_eq!(r1, (p + 1) * rows / parts);
                        ranges.fetch_add(1, Ordering::Relaxed);
                        for s in &seen[r0..r1] {
                            s.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                    assert!(seen.iter().all(|s| s.load(Ordering::Relaxed) == 1));
                    assert_eq!(ranges.load(Ordering::Relaxed), threads.min(rows));
                }
            }
        };
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(check);
            }
        });
    }

    #[test]
    fn all_finite_finds_every_infinity_and_nan() {
        use super::lstm_kernel::all_finite;
        let ok = [
            0.0f32,
            -0.0,
            1.0,
            -f32::MAX,
            f32::MAX,
            f32::MIN_POSITIVE,
            1e-45,
            -1e-45,
        ];
        assert!(all_finite(&ok) && all_finite(&[]));
        for bad in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN] {
            for at in 0..ok.len() {
                let mut v = ok.to_vec();
                v.insert(at, bad);
                assert!(!all_finite(&v), "{bad} at {at}");
            }
        }
        assert!(!all_finite(&[f32::from_bits(0x7fff_ffff)]));
        assert!(!all_finite(&[f32::from_bits(0xff80_0001)]));
    }

    /// Distance in units in the last place between an f32 and the correctly rounded f64 value.
    fn ulps(got: f32, want: f64) -> f64 {
        let w = want as f32;
        if got == w {
            return 0.0;
        }
        let ulp = (f32::from_bits(w.abs().to_bits() + 1) - w.abs()) as f64;
        (got as f64 - want).abs() / ulp
    }

    /// The polynomial-only runs give `tanh`'s bits: runs all below the switch, runs that mix
    /// both forms, NaN, infinities, the switch itself, and a remainder shorter than a run.
    #[test]
    fn tanh_runs_are_tanh_element_by_element() {
        let mut v: Vec<f32> = (0..1000)
            .map(|i| ((i * 7919 % 1000) as f32 / 1000.0 - 0.5) * 1.2)
            .collect();
        for (i, x) in [
            (40, f32::NAN),
            (77, f32::INFINITY),
            (130, -f32::INFINITY),
            (200, fast::TANH_SMALL),
            (201, -fast::TANH_SMALL),
            (300, f32::from_bits(fast::TANH_SMALL.to_bits() - 1)),
            (999, 3.0),
        ] {
            v[i] = x;
        }
        // Some runs of every width entirely below the switch.
        for x in &mut v[400..600] {
            *x *= 0.5;
        }
        let want: Vec<u32> = v.iter().map(|&x| fast::tanh(x).to_bits()).collect();
        macro_rules! widths {
            ($($l:literal),*) => {$({
                let mut got = v.clone();
                fast::tanh_runs::<$l>(&mut got);
                let got: Vec<u32> = got.iter().map(|x| x.to_bits()).collect();
                assert_eq!(got, want, "runs of {}", $l);
            })*};
        }
        widths!(1, 4, 8, 16, 48);
        let want: Vec<u32> = v
            .iter()
            .map(|&x| fast::sigmoid(2.0 * x).to_bits())
            .collect();
        macro_rules! sigmoid_widths {
            ($($l:literal),*) => {$({
                let mut got: Vec<f32> = v.iter().map(|&x| 2.0 * x).collect();
                fast::sigmoid_runs::<$l>(&mut got);
                let got: Vec<u32> = got.iter().map(|x| x.to_bits()).collect();
                assert_eq!(got, want, "sigmoid runs of {}", $l);
            })*};
        }
        sigmoid_widths!(1, 4, 8, 16, 48);
    }

    #[test]
    fn fast_activations_are_within_a_few_ulp() {
        let (mut worst_s, mut worst_t) = (0f64, 0f64);
        let mut x = -30.0f32;
        while x < 30.0 {
            let xd = x as f64;
            worst_s = worst_s.max(ulps(fast::sigmoid(x), 1.0 / (1.0 + (-xd).exp())));
            // Both sides of the switch between the polynomial and the exponential form.
            let xs = x * (fast::SIGMOID_SMALL / 30.0);
            let xsd = xs as f64;
            worst_s = worst_s.max(ulps(fast::sigmoid(xs), 1.0 / (1.0 + (-xsd).exp())));
            worst_t = worst_t.max(ulps(fast::tanh(x), xd.tanh()));
            x += 1.7e-4;
        }
        for &x in &[
            1e-30f32, -1e-8, 1e-3, 0.624, 0.625, 0.626, 8.99, 9.0, 50.0, -100.0,
        ] {
            worst_t = worst_t.max(ulps(fast::tanh(x), (x as f64).tanh()));
        }
        assert!(worst_s <= 4.0, "sigmoid: {worst_s} ulp");
        assert!(worst_t <= 4.0, "tanh: {worst_t} ulp");
        assert!(fast::tanh(f32::NAN).is_nan() && fast::sigmoid(f32::NAN).is_nan());
        assert_eq!(fast::sigmoid(-200.0), 0.0f32.max(fast::sigmoid(-200.0)));
        assert_eq!(fast::tanh(-200.0), -1.0);
        assert_eq!(fast::sigmoid(200.0), 1.0);
    }
}
