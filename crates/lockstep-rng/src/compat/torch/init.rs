//! `torch.nn.init` and the default initialisation of `nn.Linear`, on slices with an explicit
//! shape. Scale factors are computed in f64 in exactly PyTorch's order, then handed to
//! [`uniform_`] / [`normal_`].

use super::{Float, normal_, uniform_};
use crate::{Generator, Result, invalid};

/// Which fan [`kaiming_uniform_`] and [`kaiming_normal_`] scale by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanMode {
    /// `fan_in` (PyTorch's default): preserves the variance of the forward pass.
    FanIn,
    /// `fan_out`: preserves the variance of the backward pass.
    FanOut,
}

impl core::str::FromStr for FanMode {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "fan_in" => Ok(FanMode::FanIn),
            "fan_out" => Ok(FanMode::FanOut),
            _ => Err(invalid(
                "kaiming_init",
                "mode",
                format!("Mode {s} not supported, please use one of fan_in, fan_out"),
            )),
        }
    }
}

/// `torch.nn.init.calculate_gain(nonlinearity, param)`.
///
/// # Errors
/// On an unknown nonlinearity, or a `param` given for `leaky_relu` that is not finite.
pub fn calculate_gain(nonlinearity: &str, param: Option<f64>) -> Result<f64> {
    match nonlinearity {
        "linear" | "conv1d" | "conv2d" | "conv3d" | "conv_transpose1d" | "conv_transpose2d"
        | "conv_transpose3d" | "sigmoid" => Ok(1.0),
        "tanh" => Ok(5.0 / 3.0),
        "relu" => Ok(2.0f64.sqrt()),
        "leaky_relu" => {
            let slope = param.unwrap_or(0.01);
            if !slope.is_finite() {
                return Err(invalid(
                    "calculate_gain",
                    "param",
                    format!("negative_slope {slope} not a valid number"),
                ));
            }
            Ok((2.0 / (1.0 + slope * slope)).sqrt())
        }
        "selu" => Ok(3.0 / 4.0),
        _ => Err(invalid(
            "calculate_gain",
            "nonlinearity",
            format!("Unsupported nonlinearity {nonlinearity}"),
        )),
    }
}

/// `(fan_in, fan_out)` of a weight of `shape` (`d1·receptive`, `d0·receptive`).
///
/// # Errors
/// If `shape` has fewer than 2 dimensions.
pub fn fan_in_and_fan_out(shape: &[usize]) -> Result<(usize, usize)> {
    if shape.len() < 2 {
        return Err(invalid(
            "init",
            "tensor",
            format!(
                "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions \
                 (shape {shape:?})"
            ),
        ));
    }
    let receptive: usize = shape[2..].iter().product();
    Ok((shape[1] * receptive, shape[0] * receptive))
}

fn kaiming_std(
    op: &'static str,
    out_len: usize,
    shape: &[usize],
    a: f64,
    mode: FanMode,
    nonlinearity: &str,
) -> Result<Option<f64>> {
    if shape.contains(&0) {
        // PyTorch warns and leaves an empty tensor untouched: no draws.
        return Ok(None);
    }
    if shape.iter().product::<usize>() != out_len {
        return Err(invalid(
            op,
            "shape",
            format!("shape {shape:?} does not match {out_len} elements"),
        ));
    }
    let (fan_in, fan_out) = fan_in_and_fan_out(shape)?;
    let fan = match mode {
        FanMode::FanIn => fan_in,
        FanMode::FanOut => fan_out,
    };
    let gain = calculate_gain(nonlinearity, Some(a))?;
    Ok(Some(gain / (fan as f64).sqrt()))
}

/// `kaiming_uniform_(w, a, mode, nonlinearity)`: `uniform_(−b, b)` with
/// `b = sqrt(3) · gain / sqrt(fan)`. No draws if a dimension is 0.
///
/// # Errors
/// Fewer than 2 dimensions, a shape that does not match `out`, an unknown nonlinearity.
pub fn kaiming_uniform_<T: Float>(
    g: &mut Generator,
    out: &mut [T],
    shape: &[usize],
    a: f64,
    mode: FanMode,
    nonlinearity: &str,
) -> Result<()> {
    match kaiming_std("kaiming_uniform_", out.len(), shape, a, mode, nonlinearity)? {
        None => Ok(()),
        Some(std) => {
            let bound = 3.0f64.sqrt() * std;
            uniform_(g, out, -bound, bound)
        }
    }
}

/// `kaiming_normal_(w, a, mode, nonlinearity)`: `normal_(0, gain / sqrt(fan))`. No draws if a
/// dimension is 0.
///
/// # Errors
/// As [`kaiming_uniform_`].
pub fn kaiming_normal_<T: Float>(
    g: &mut Generator,
    out: &mut [T],
    shape: &[usize],
    a: f64,
    mode: FanMode,
    nonlinearity: &str,
) -> Result<()> {
    match kaiming_std("kaiming_normal_", out.len(), shape, a, mode, nonlinearity)? {
        None => Ok(()),
        Some(std) => normal_(g, out, 0.0, std),
    }
}

fn xavier_std(op: &'static str, out_len: usize, shape: &[usize], gain: f64) -> Result<f64> {
    if shape.iter().product::<usize>() != out_len {
        return Err(invalid(
            op,
            "shape",
            format!("shape {shape:?} does not match {out_len} elements"),
        ));
    }
    let (fan_in, fan_out) = fan_in_and_fan_out(shape)?;
    Ok(gain * (2.0 / (fan_in + fan_out) as f64).sqrt())
}

/// `xavier_uniform_(w, gain)`: `uniform_(−a, a)` with `a = sqrt(3) · gain · sqrt(2 / (fan_in +
/// fan_out))`.
///
/// # Errors
/// Fewer than 2 dimensions, or a shape that does not match `out`.
pub fn xavier_uniform_<T: Float>(
    g: &mut Generator,
    out: &mut [T],
    shape: &[usize],
    gain: f64,
) -> Result<()> {
    let a = 3.0f64.sqrt() * xavier_std("xavier_uniform_", out.len(), shape, gain)?;
    uniform_(g, out, -a, a)
}

/// `xavier_normal_(w, gain)`: `normal_(0, gain · sqrt(2 / (fan_in + fan_out)))`.
///
/// # Errors
/// As [`xavier_uniform_`].
pub fn xavier_normal_<T: Float>(
    g: &mut Generator,
    out: &mut [T],
    shape: &[usize],
    gain: f64,
) -> Result<()> {
    let std = xavier_std("xavier_normal_", out.len(), shape, gain)?;
    normal_(g, out, 0.0, std)
}

unsafe extern "C" {
    /// The C library's error function (Python's `math.erf` on Linux).
    safe fn erf(x: f64) -> f64;
}

fn norm_cdf(x: f64) -> f64 {
    (1.0 + erf(x / 2.0f64.sqrt())) / 2.0
}

/// `trunc_normal_(w, mean, std, a, b)` as PyTorch 2.15 does it: a rejection sampler.
///
/// If the interval holds more than 30 % of the mass, the whole buffer is filled with
/// `normal_(mean, std)` and, while any value lies outside `[a, b]`, a complete new buffer is
/// drawn and only the outside values replaced. Otherwise candidates come from `uniform_(a, b)`
/// and are accepted when `log(u) ≤ −½((v − mean)/std)² − log_peak` for a second uniform `u`,
/// again redrawing whole buffers. The narrow branch uses the C library's `log`; PyTorch uses
/// MKL's vector `log`, which can differ by one ulp, so that branch can (rarely) differ.
///
/// # Errors
/// If `std` is not positive, `a > b`, or the bounds are NaN.
pub fn trunc_normal_<T: Float>(
    g: &mut Generator,
    out: &mut [T],
    mean: f64,
    std: f64,
    a: f64,
    b: f64,
) -> Result<()> {
    const OP: &str = "trunc_normal_";
    if !(std > 0.0) {
        return Err(invalid(
            OP,
            "std",
            format!("std must be positive, got {std}"),
        ));
    }
    if !(a <= b) {
        return Err(invalid(
            OP,
            "a",
            format!("expects a <= b, got a={a}, b={b}"),
        ));
    }
    let p = norm_cdf((b - mean) / std) - norm_cdf((a - mean) / std);
    let n = out.len();
    if p > 0.3 {
        let (lo, hi) = (T::from_f64(a), T::from_f64(b));
        let outside = |v: T| v < lo || v > hi;
        normal_(g, out, mean, std)?;
        let mut fresh = vec![T::ZERO; n];
        while out.iter().any(|&v| outside(v)) {
            normal_(g, &mut fresh, mean, std)?;
            for (v, &f) in out.iter_mut().zip(&fresh) {
                if outside(*v) {
                    *v = f;
                }
            }
        }
        return Ok(());
    }
    let mode = a.max(mean.min(b));
    let z = (mode - mean) / std;
    let log_peak = -0.5 * (z * z);
    let (mean_t, std_t, peak_t, half) = (
        T::from_f64(mean),
        T::from_f64(std),
        T::from_f64(log_peak),
        T::from_f64(-0.5),
    );
    let log_density = |v: T| {
        let d = v.sub(mean_t).div(std_t);
        d.mul(d).mul(half).sub(peak_t)
    };
    uniform_(g, out, a, b)?;
    let mut u = vec![T::ZERO; n];
    T::fill_unit(g, &mut u);
    let mut pending: Vec<bool> = out
        .iter()
        .zip(&u)
        .map(|(&v, &u)| T::ln(u) > log_density(v))
        .collect();
    let mut cand = vec![T::ZERO; n];
    while pending.iter().any(|&p| p) {
        uniform_(g, &mut cand, a, b)?;
        T::fill_unit(g, &mut u);
        for i in 0..n {
            if pending[i] {
                out[i] = cand[i];
                pending[i] = T::ln(u[i]) > log_density(cand[i]);
            }
        }
    }
    Ok(())
}

/// The default initialisation of `nn.Linear(in_features, out_features, bias)`: the weight
/// (`out × in`, row-major) with `kaiming_uniform_(a = sqrt(5))`, then the bias with
/// `uniform_(±1/sqrt(in_features))` (bound 0 if `in_features` is 0).
pub fn linear<T: Float>(
    g: &mut Generator,
    in_features: usize,
    out_features: usize,
    bias: bool,
) -> Result<(Vec<T>, Option<Vec<T>>)> {
    let mut w = vec![T::ZERO; in_features * out_features];
    kaiming_uniform_(
        g,
        &mut w,
        &[out_features, in_features],
        5.0f64.sqrt(),
        FanMode::FanIn,
        "leaky_relu",
    )?;
    let b = if bias {
        // PyTorch: `bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0` and `uniform_(-bound,
        // bound)`: with the int 0, `-bound` is +0, so the bias is +0.0, never -0.0.
        let (low, bound) = if in_features > 0 {
            let b = 1.0 / (in_features as f64).sqrt();
            (-b, b)
        } else {
            (0.0, 0.0)
        };
        let mut b = vec![T::ZERO; out_features];
        uniform_(g, &mut b, low, bound)?;
        Some(b)
    } else {
        None
    };
    Ok((w, b))
}
