//! The summary statistics of `lockstep sweep`: mean, spread, Student t and percentile
//! bootstrap intervals, with the incomplete beta function and t quantiles written out so the
//! report depends on no platform library.

use super::{BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED};
use lockstep::rng::Generator;
use serde_json::{Value, json};

/// Mean, spread and intervals of one metric over the seeds.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (divides by n − 1; NaN for one seed).
    pub std: f64,
    /// Smallest value (NaN if any value is NaN).
    pub min: f64,
    /// Largest value (NaN if any value is NaN).
    pub max: f64,
    /// mean ∓ t₀.₉₇₅,ₙ₋₁ · std / √n (NaN for one seed).
    pub t95: [f64; 2],
    /// The 2.5 % and 97.5 % percentiles of the bootstrap means (NaN if any value is NaN).
    pub bootstrap95: [f64; 2],
    /// How many values were NaN (runs that diverged): every statistic above is then NaN, as
    /// NumPy's `mean`, `min` and `max` of such values are.
    pub nan: usize,
}

impl Stats {
    /// Summarizes `xs` (at least one value).
    pub fn of(xs: &[f64]) -> Self {
        let n = xs.len();
        let nan = xs.iter().filter(|x| x.is_nan()).count();
        // f64::min and f64::max skip a NaN: an all-NaN fold would give inf and -inf.
        let extreme = |f: fn(f64, f64) -> f64, start: f64| {
            if nan > 0 {
                f64::NAN
            } else {
                xs.iter().copied().fold(start, f)
            }
        };
        let nf = n as f64;
        let mean = xs.iter().sum::<f64>() / nf;
        let std = if n >= 2 {
            (xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (nf - 1.0)).sqrt()
        } else {
            f64::NAN
        };
        let t95 = if n >= 2 {
            let h = t_quantile(0.975, nf - 1.0) * std / nf.sqrt();
            [mean - h, mean + h]
        } else {
            [f64::NAN; 2]
        };
        Self {
            mean,
            std,
            min: extreme(f64::min, f64::INFINITY),
            max: extreme(f64::max, f64::NEG_INFINITY),
            t95,
            bootstrap95: if nan > 0 {
                [f64::NAN; 2]
            } else {
                bootstrap95(xs, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED)
            },
            nan,
        }
    }

    /// `{"mean", "std", "min", "max", "t95": [lo, hi], "bootstrap95": [lo, hi], "nan_runs"}`
    /// (non-finite values as null; `nan_runs`: how many values were NaN).
    pub fn to_json(&self) -> Value {
        json!({
            "mean": num(self.mean),
            "std": num(self.std),
            "min": num(self.min),
            "max": num(self.max),
            "t95": [num(self.t95[0]), num(self.t95[1])],
            "bootstrap95": [num(self.bootstrap95[0]), num(self.bootstrap95[1])],
            "nan_runs": self.nan,
        })
    }
}

fn num(x: f64) -> Value {
    if x.is_finite() { json!(x) } else { Value::Null }
}

/// A uniform index below `n` from `g` (rejection sampling on 64-bit draws: unbiased).
pub fn uniform_index(g: &mut Generator, n: usize) -> usize {
    let n = n as u64;
    // 2^64 mod n values at the top of the range are rejected.
    let rem = (u64::MAX % n + 1) % n;
    loop {
        let x = g.next_u64();
        if rem == 0 || x < 0u64.wrapping_sub(rem) {
            return (x % n) as usize;
        }
    }
}

/// The percentile bootstrap 95 % interval of the mean: `b` resamples of `xs` with replacement,
/// indices drawn in order with [`uniform_index`] from `Generator::with_seed(seed)`; each
/// resample's mean sums in draw order; the means sorted; the 2.5 % and 97.5 % percentiles with
/// linear interpolation between order statistics (NumPy's default: position q·(b − 1)).
pub fn bootstrap95(xs: &[f64], b: usize, seed: u64) -> [f64; 2] {
    let n = xs.len();
    if n == 0 || b == 0 {
        return [f64::NAN; 2];
    }
    let mut g = Generator::with_seed(seed);
    let mut means: Vec<f64> = (0..b)
        .map(|_| (0..n).map(|_| xs[uniform_index(&mut g, n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    [percentile(&means, 0.025), percentile(&means, 0.975)]
}

/// The `q` quantile of sorted values, interpolating linearly at position q·(len − 1).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    let h = q * (sorted.len() - 1) as f64;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms; relative error about 1e-15).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_93,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_13,
        -176.615_029_162_140_59,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_571_6e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 − x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The continued fraction of the incomplete beta function (modified Lentz).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..100_000 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-16 {
            break;
        }
    }
    h
}

/// The regularized incomplete beta function I_x(a, b).
pub fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    if x < (a + 1.0) / (a + b + 2.0) {
        ln_front.exp() * beta_cf(a, b, x) / a
    } else {
        1.0 - ln_front.exp() * beta_cf(b, a, 1.0 - x) / b
    }
}

/// P(T > t) for t ≥ 0, T Student t with `df` degrees of freedom.
pub(super) fn t_upper_tail(t: f64, df: f64) -> f64 {
    0.5 * inc_beta(df / 2.0, 0.5, df / (df + t * t))
}

/// The `p` quantile of Student's t distribution with `df` > 0 degrees of freedom: closed forms
/// for 1 and 2, otherwise bisection on the upper tail 1 − p = ½ I_{df/(df+t²)}(df/2, ½) to
/// full double precision.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    if !(p > 0.0 && p < 1.0 && df > 0.0) {
        return f64::NAN;
    }
    if p < 0.5 {
        return -t_quantile(1.0 - p, df);
    }
    if p == 0.5 {
        return 0.0;
    }
    if df == 1.0 {
        return (std::f64::consts::PI * (p - 0.5)).tan();
    }
    if df == 2.0 {
        return (2.0 * p - 1.0) / (2.0 * p * (1.0 - p)).sqrt();
    }
    let tail = 1.0 - p;
    let mut hi = 1.0;
    while t_upper_tail(hi, df) > tail {
        hi *= 2.0;
        if hi > 1e300 {
            return f64::INFINITY;
        }
    }
    let mut lo = 0.0;
    for _ in 0..2000 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if t_upper_tail(mid, df) > tail {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}
