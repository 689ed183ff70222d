//! Elementary functions for deterministic kernels: the same bits on every CPU, OS and libc.
//!
//! `f32::exp`, `f64::ln` and friends call the platform's math library (glibc, musl, macOS's
//! libsystem_m, the MSVC CRT), whose results differ in the last bit from one to another and
//! sometimes between versions. Every deterministic kernel of lockstep (softmax, log_softmax,
//! logsumexp, activations, losses, the nn layers, optimizers) takes its transcendental functions
//! from here instead: portable software implementations (the `libm` crate, a pure-Rust port of
//! musl's libm, compiled into lockstep), so a result depends only on the input bits.
//!
//! # Accuracy
//! Measured against correctly rounded results (mpmath, `tools/golden_math.py` →
//! `tests/golden/math.json`, about 2,000 random inputs per function over its whole domain plus
//! thresholds and hard cases; `tests/math.rs` asserts the bound column), and for the
//! one-argument f32 functions over *every* f32 input against the f64 function (each worst case
//! found is in the golden file, so its error is mpmath's). Errors are in
//! ulps of the exact value; special values (±0, ±inf, NaN, domain errors, C99's `pow` cases)
//! are exactly the C standard's.
//!
//! | function | bound | max seen, f64 (sampled) | max seen, f32 (every input) |
//! |---|---|---|---|
//! | `exp`, `expf` | < 1 | 0.680 | 0.912 |
//! | `expm1`, `expm1f` | < 1 | 0.740 | 0.812 |
//! | `ln`, `lnf` | < 1 | 0.692 | 0.836 |
//! | `ln_1p`, `ln_1pf` | < 1 | 0.660 | 0.836 |
//! | `tanh`, `tanhf` | 2.5 | 1.508 | 2.188 |
//! | `erf`, `erff` | < 1 | 0.724 | 0.968 |
//! | `sin`, `sinf` | < 1 | 0.604 | 0.500 |
//! | `cos`, `cosf` | < 1 | 0.660 | 0.500 |
//! | `pow`, `powf` | < 1, see below | 0.728 | 0.792 (sampled) |
//! | `sigmoid`, `sigmoidf` | 2.5, see below | 1.824 | 2.480 |
//!
//! So every function but `tanh`, `sigmoid` and `pow` is faithfully rounded (one of the two
//! floats around the exact value). Exceptions, documented on the functions:
//! * `pow(x, y)` (f64) with `|y| ≥ 2^31` and `x` within `2^-20` of 1: up to 167 ulps seen (the
//!   `libm` crate's pow loses accuracy there; bound tested: 256 ulps). No such error was seen
//!   for `powf` (sampled with `|y|` up to 10^9).
//! * `sigmoid(x)` where `e^-x` overflows (`x < −709.78`, f32: `x < −88.72`): `+0`, as PyTorch's
//!   formula gives, though the exact value is a (subnormal) positive number below the smallest
//!   normal one.
//!
//! The compat samplers (`lockstep_rng::compat`) do *not* use this module: they mirror the
//! reference library, which calls the platform's functions (see the README's table).

/// `e^x`.
#[inline]
pub fn exp(x: f64) -> f64 {
    libm::exp(x)
}
/// `e^x` in f32.
#[inline]
pub fn expf(x: f32) -> f32 {
    libm::expf(x)
}
/// `e^x − 1`, accurate near 0.
#[inline]
pub fn expm1(x: f64) -> f64 {
    libm::expm1(x)
}
/// `e^x − 1` in f32.
#[inline]
pub fn expm1f(x: f32) -> f32 {
    libm::expm1f(x)
}
/// Natural logarithm.
#[inline]
pub fn ln(x: f64) -> f64 {
    libm::log(x)
}
/// Natural logarithm in f32.
#[inline]
pub fn lnf(x: f32) -> f32 {
    libm::logf(x)
}
/// `ln(1 + x)`, accurate near 0.
#[inline]
pub fn ln_1p(x: f64) -> f64 {
    libm::log1p(x)
}
/// `ln(1 + x)` in f32.
#[inline]
pub fn ln_1pf(x: f32) -> f32 {
    libm::log1pf(x)
}
/// Hyperbolic tangent. Error below 2.5 ulps (not faithfully rounded: 1.51 ulps seen).
#[inline]
pub fn tanh(x: f64) -> f64 {
    libm::tanh(x)
}
/// Hyperbolic tangent in f32. Error below 2.5 ulps (2.188 at most over every f32 input).
#[inline]
pub fn tanhf(x: f32) -> f32 {
    libm::tanhf(x)
}
/// The error function.
#[inline]
pub fn erf(x: f64) -> f64 {
    libm::erf(x)
}
/// The error function in f32.
#[inline]
pub fn erff(x: f32) -> f32 {
    libm::erff(x)
}
/// Sine.
#[inline]
pub fn sin(x: f64) -> f64 {
    libm::sin(x)
}
/// Sine in f32.
#[inline]
pub fn sinf(x: f32) -> f32 {
    libm::sinf(x)
}
/// Cosine.
#[inline]
pub fn cos(x: f64) -> f64 {
    libm::cos(x)
}
/// Cosine in f32.
#[inline]
pub fn cosf(x: f32) -> f32 {
    libm::cosf(x)
}
/// `x^y`. Faithfully rounded, except for `|y| ≥ 2^31` with `x` within `2^-20` of 1, where the
/// error can reach hundreds of ulps (167 seen; 256 tested).
#[inline]
pub fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}
/// `x^y` in f32.
#[inline]
pub fn powf(x: f32, y: f32) -> f32 {
    libm::powf(x, y)
}
/// The logistic function `1 / (1 + e^-x)` (PyTorch's formula). Error below 2.5 ulps, except
/// where `e^-x` overflows (`x < −709.78`): `+0` there, the exact value being below
/// `f64::MIN_POSITIVE`.
#[inline]
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + exp(-x))
}
/// The logistic function in f32 (PyTorch's formula). Error below 2.5 ulps (2.480 at most
/// over every f32 input), except where `e^-x` overflows (`x < −88.72`): `+0` there, the exact value
/// being below `f32::MIN_POSITIVE`.
#[inline]
pub fn sigmoidf(x: f32) -> f32 {
    1.0 / (1.0 + expf(-x))
}

#[cfg(test)]
mod tests {
    #[test]
    fn agrees_with_the_platform_to_an_ulp_on_a_few_points() {
        for &x in &[-3.5f64, -0.1, 0.0, 1e-9, 0.5, 2.0, 10.0] {
            let close = |a: f64, b: f64| (a - b).abs() <= 2.0 * f64::EPSILON * b.abs().max(1e-300);
            assert!(close(super::exp(x), x.exp()), "exp({x})");
            assert!(close(super::tanh(x), x.tanh()), "tanh({x})");
            assert!(close(super::ln_1p(x.abs()), x.abs().ln_1p()), "ln_1p({x})");
        }
    }
}
