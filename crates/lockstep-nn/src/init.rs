//! `torch.nn.init` on parameters: each function writes into a [`Var`] in place, drawing the
//! same numbers in the same order as PyTorch 2.15 from the given generator or, with `None`,
//! the default one (`lockstep_rng::default_generator`, seeded by `manual_seed`).
//!
//! As in PyTorch the writes run under [`no_grad`], so they work on a parameter that requires
//! a gradient, reach the parameter itself (and its detached aliases) and bump its version.
//! Where PyTorch raises (`eye_` on a tensor that is not 2-D, fans of a tensor with fewer
//! than 2 dimensions, an unknown nonlinearity, `trunc_normal_` with `a > b`), these return an
//! error naming the function and argument; where PyTorch leaves a zero-element tensor
//! untouched (`kaiming_*`), so do these, without drawing.
//!
//! ```
//! use lockstep_nn::{Var, init};
//! use lockstep_tensor::{DType, Tensor};
//!
//! let w = Var::new(Tensor::zeros(&[8, 4, 3, 3], DType::F32)?, true);
//! lockstep_rng::default_generator().manual_seed(0);      // torch.manual_seed(0)
//! init::kaiming_normal_(&w, 0.0, init::FanMode::FanOut, "relu", None)?;
//! init::zeros_(&w)?;
//! assert!(init::eye_(&w).is_err()); // "Only tensors with 2 dimensions are supported"
//! # Ok::<(), lockstep_tensor::Error>(())
//! ```

use crate::ops::invalid;
use crate::{Result, Var, no_grad};
use lockstep_rng::Generator;
use lockstep_rng::compat::torch::{Float, init as slice};
use lockstep_tensor::{DType, Tensor};

pub use lockstep_rng::compat::torch::init::FanMode;

/// `torch.nn.init.calculate_gain(nonlinearity, param)`: the recommended gain for
/// `linear`, `conv*d`, `conv_transpose*d`, `sigmoid` (1), `tanh` (5/3), `relu` (√2),
/// `leaky_relu` (√(2 / (1 + slope²)), slope `param` or 0.01) and `selu` (3/4).
///
/// # Errors
/// An unknown nonlinearity, or a `leaky_relu` slope that is not finite.
pub fn calculate_gain(nonlinearity: &str, param: Option<f64>) -> Result<f64> {
    Ok(slice::calculate_gain(nonlinearity, param)?)
}

/// `(fan_in, fan_out)` of `w` as PyTorch's `_calculate_fan_in_and_fan_out`: `size(1)` and
/// `size(0)`, each times the product of the remaining (receptive-field) dimensions.
///
/// # Errors
/// If `w` has fewer than 2 dimensions.
pub fn fan_in_and_fan_out(w: &Var) -> Result<(usize, usize)> {
    Ok(slice::fan_in_and_fan_out(w.shape())?)
}

/// `nn.init.uniform_(w, a, b, generator)`: values from U(a, b), as `w.uniform_(a, b)`.
///
/// # Errors
/// A dtype that is not float; `a > b` (as [`lockstep_tensor::Tensor::uniform_`]).
pub fn uniform_(w: &Var, a: f64, b: f64, g: Option<&mut Generator>) -> Result<()> {
    no_grad(|| w.uniform_(a, b, g))
}

/// `nn.init.normal_(w, mean, std, generator)`: values from N(mean, std²), as
/// `w.normal_(mean, std)`.
///
/// # Errors
/// A dtype that is not float; a negative `std`.
pub fn normal_(w: &Var, mean: f64, std: f64, g: Option<&mut Generator>) -> Result<()> {
    no_grad(|| w.normal_(mean, std, g))
}

/// `nn.init.constant_(w, val)`: every element set to `val` (rounded to the dtype).
///
/// # Errors
/// As [`Var::fill_`].
pub fn constant_(w: &Var, val: f64) -> Result<()> {
    no_grad(|| w.fill_(val))
}

/// `nn.init.ones_(w)`.
///
/// # Errors
/// As [`Var::fill_`].
pub fn ones_(w: &Var) -> Result<()> {
    constant_(w, 1.0)
}

/// `nn.init.zeros_(w)`.
///
/// # Errors
/// As [`Var::zero_`].
pub fn zeros_(w: &Var) -> Result<()> {
    no_grad(|| w.zero_())
}

/// `nn.init.eye_(w)`: the identity matrix in a 2-D `w` (ones on the main diagonal of a
/// rectangular matrix, zeros elsewhere). Draws nothing.
///
/// # Errors
/// If `w` is not 2-D ("Only tensors with 2 dimensions are supported", as PyTorch).
pub fn eye_(w: &Var) -> Result<()> {
    let shape = w.shape();
    if shape.len() != 2 {
        return Err(invalid(
            "eye_",
            "tensor",
            format!("Only tensors with 2 dimensions are supported (got shape {shape:?})"),
        ));
    }
    let (rows, cols) = (shape[0], shape[1]);
    let mut v: Vec<f64> = lockstep_rng::try_with_capacity("eye_", rows.saturating_mul(cols))?;
    v.extend((0..rows * cols).map(|i| if i / cols == i % cols { 1.0 } else { 0.0 }));
    let eye = Tensor::from_vec(v, shape)?.to_dtype(w.dtype());
    no_grad(|| w.copy_(&eye))
}

/// `nn.init.xavier_uniform_(w, gain, generator)`: U(−a, a) with
/// `a = gain · √(2 / (fan_in + fan_out)) · √3`, the scale computed in f64 in PyTorch's order.
///
/// # Errors
/// Fewer than 2 dimensions; `fan_in + fan_out == 0` (PyTorch divides by zero); a dtype that
/// is not float.
pub fn xavier_uniform_(w: &Var, gain: f64, g: Option<&mut Generator>) -> Result<()> {
    let a = 3.0f64.sqrt() * xavier_std("xavier_uniform_", w, gain)?;
    uniform_(w, -a, a, g)
}

/// `nn.init.xavier_normal_(w, gain, generator)`: N(0, std²) with
/// `std = gain · √(2 / (fan_in + fan_out))`.
///
/// # Errors
/// As [`xavier_uniform_`].
pub fn xavier_normal_(w: &Var, gain: f64, g: Option<&mut Generator>) -> Result<()> {
    let std = xavier_std("xavier_normal_", w, gain)?;
    normal_(w, 0.0, std, g)
}

fn xavier_std(op: &'static str, w: &Var, gain: f64) -> Result<f64> {
    let (fan_in, fan_out) = fan_in_and_fan_out(w)?;
    if fan_in + fan_out == 0 {
        return Err(invalid(
            op,
            "tensor",
            format!(
                "fan_in + fan_out is 0 for shape {:?} (PyTorch: division by zero)",
                w.shape()
            ),
        ));
    }
    Ok(gain * (2.0 / (fan_in + fan_out) as f64).sqrt())
}

/// The `std` of `kaiming_*`, or `None` for a zero-element tensor (PyTorch warns and leaves
/// it untouched, drawing nothing).
fn kaiming_std(w: &Var, a: f64, mode: FanMode, nonlinearity: &str) -> Result<Option<f64>> {
    if w.shape().contains(&0) {
        return Ok(None);
    }
    let (fan_in, fan_out) = fan_in_and_fan_out(w)?;
    let fan = match mode {
        FanMode::FanIn => fan_in,
        FanMode::FanOut => fan_out,
    };
    let gain = calculate_gain(nonlinearity, Some(a))?;
    Ok(Some(gain / (fan as f64).sqrt()))
}

/// `nn.init.kaiming_uniform_(w, a, mode, nonlinearity, generator)`: U(−b, b) with
/// `b = √3 · gain / √fan`, `gain = calculate_gain(nonlinearity, a)`. PyTorch's defaults are
/// `a = 0`, [`FanMode::FanIn`], `"leaky_relu"`; `nn.Linear` uses `a = √5`. A zero-element
/// `w` is left as it is, with no draws.
///
/// # Errors
/// Fewer than 2 dimensions; an unknown nonlinearity; a dtype that is not float.
pub fn kaiming_uniform_(
    w: &Var,
    a: f64,
    mode: FanMode,
    nonlinearity: &str,
    g: Option<&mut Generator>,
) -> Result<()> {
    match kaiming_std(w, a, mode, nonlinearity)? {
        None => Ok(()),
        Some(std) => {
            let bound = 3.0f64.sqrt() * std;
            uniform_(w, -bound, bound, g)
        }
    }
}

/// `nn.init.kaiming_normal_(w, a, mode, nonlinearity, generator)`: N(0, std²) with
/// `std = gain / √fan`. A zero-element `w` is left as it is, with no draws.
///
/// # Errors
/// As [`kaiming_uniform_`].
pub fn kaiming_normal_(
    w: &Var,
    a: f64,
    mode: FanMode,
    nonlinearity: &str,
    g: Option<&mut Generator>,
) -> Result<()> {
    match kaiming_std(w, a, mode, nonlinearity)? {
        None => Ok(()),
        Some(std) => normal_(w, 0.0, std, g),
    }
}

/// `nn.init.trunc_normal_(w, mean, std, a, b, generator)`: N(mean, std²) truncated to
/// `[a, b]`, by PyTorch 2.15's rejection sampler (see
/// [`lockstep_rng::compat::torch::init::trunc_normal_`], including its note on the narrow
/// branch). PyTorch's defaults are `mean = 0, std = 1, a = −2, b = 2`.
///
/// # Errors
/// `std` not positive, `a > b` or a NaN bound; a dtype that is not float.
pub fn trunc_normal_(
    w: &Var,
    mean: f64,
    std: f64,
    a: f64,
    b: f64,
    g: Option<&mut Generator>,
) -> Result<()> {
    fn draw<T: Float + lockstep_tensor::Element>(
        g: &mut Generator,
        shape: &[usize],
        mean: f64,
        std: f64,
        a: f64,
        b: f64,
    ) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        let mut v: Vec<T> = lockstep_rng::try_with_capacity("trunc_normal_", n)?;
        v.resize(n, <T as Float>::ZERO);
        slice::trunc_normal_(g, &mut v, mean, std, a, b)?;
        Tensor::from_vec(v, shape)
    }
    let dtype = w.dtype();
    let shape = w.shape();
    let sample = |g: &mut Generator| match dtype {
        DType::F32 => draw::<f32>(g, shape, mean, std, a, b),
        DType::F64 => draw::<f64>(g, shape, mean, std, a, b),
        other => Err(invalid(
            "trunc_normal_",
            "tensor",
            format!("expected a float tensor, got {other:?}"),
        )),
    };
    let t = match g {
        Some(g) => sample(g)?,
        None => sample(&mut *lockstep_rng::try_default_generator()?)?,
    };
    no_grad(|| w.copy_(&t))
}
