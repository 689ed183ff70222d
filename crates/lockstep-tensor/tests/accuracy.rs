//! Accuracy of the reductions and scans against a float64 reference, next to PyTorch's error
//! on the same data (issue 15, "Accuracy").
//!
//! The data and PyTorch's errors come from `tools/accuracy_torch.py` (written to
//! `tests/golden/tensor/accuracy.json`); both sides generate the inputs with the same exact
//! counter-based generator, so the file holds only PyTorch's error figure per case. Each case
//! states our bound as a multiple of PyTorch's figure plus a few units of float32 rounding
//! (`U = 2^-24`): a kernel whose error grows faster than PyTorch's (a sequential f32 sum over a
//! long line, say) fails by orders of magnitude, while ordinary differences of summation order
//! pass. The error is normwise: `max|y - ref| / max|ref|`.

mod common;

use lockstep_tensor::Tensor;
use lockstep_tensor::deterministic::scope;

/// Unit roundoff of float32.
const U: f64 = 1.0 / (1u64 << 24) as f64;

/// splitmix64's finaliser (the generator of `tools/accuracy_torch.py`).
pub fn splitmix64(z: u64) -> u64 {
    let mut z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn uniform(seed: u64, i: u64) -> f64 {
    (splitmix64(i.wrapping_add(seed << 40)) >> 40) as f64 * U
}

/// The case's float32 inputs, exactly as the script makes them.
pub fn data(kind: &str, seed: u64, n: usize) -> Vec<f32> {
    (0..n as u64)
        .map(|i| {
            let four = || (0..4).map(|j| uniform(seed * 4 + j, i)).sum::<f64>();
            (match kind {
                "uniform" => uniform(seed, i),
                "signed" => uniform(seed, i) * 20.0 - 10.0,
                "normal" => four() - 2.0,
                "offset" => four() + 8.0,
                _ => panic!("unknown data kind {kind}"),
            }) as f32
        })
        .collect()
}

/// `max|y - ref| / max|ref|`.
pub fn rel_error(y: &[f32], r: &[f64]) -> f64 {
    assert_eq!(y.len(), r.len());
    let num = y
        .iter()
        .zip(r)
        .map(|(&a, &b)| (a as f64 - b).abs())
        .fold(0.0, f64::max);
    num / r.iter().map(|v| v.abs()).fold(0.0, f64::max)
}

/// Our bound next to PyTorch's figure; fails naming both.
pub fn check(name: &str, ours: f64, torch: f64, factor: f64, ulps: f64) {
    let bound = factor * torch + ulps * U;
    println!("{name:<28} ours {ours:.3e}  PyTorch {torch:.3e}  bound {bound:.3e}");
    assert!(
        ours <= bound,
        "{name}: relative error {ours:.3e} > bound {bound:.3e} ({factor} x PyTorch's {torch:.3e} \
         + {ulps} U)"
    );
}

/// Compensated (Neumaier) float64 sum: the reference for sums of float32 values.
fn sum64(v: impl Iterator<Item = f64>) -> f64 {
    let (mut s, mut c) = (0f64, 0f64);
    for x in v {
        let t = s + x;
        c += if s.abs() >= x.abs() {
            (s - t) + x
        } else {
            (x - t) + s
        };
        s = t;
    }
    s + c
}

/// `[outer, n, inner]` of `shape` around `dim`.
fn geom(shape: &[usize], dim: usize) -> (usize, usize, usize) {
    (
        shape[..dim].iter().product(),
        shape[dim],
        shape[dim + 1..].iter().product(),
    )
}

fn line(x: &[f32], g: (usize, usize, usize), o: usize, i: usize) -> impl Iterator<Item = f64> {
    let (_, n, inner) = g;
    (0..n).map(move |k| x[(o * n + k) * inner + i] as f64)
}

/// The float64 truth of each case.
fn reference(op: &str, x: &[f32], shape: &[usize], dim: Option<usize>) -> Vec<f64> {
    let g = dim.map_or((1, x.len(), 1), |d| geom(shape, d));
    let (outer, n, inner) = g;
    let mut out = Vec::new();
    match op {
        "sum" | "mean" | "sum_dim" | "mean_dim" => {
            for o in 0..outer {
                for i in 0..inner {
                    let s = sum64(line(x, g, o, i));
                    out.push(if op.starts_with("mean") {
                        s / n as f64
                    } else {
                        s
                    });
                }
            }
        }
        "cumsum" => {
            out = vec![0.0; x.len()];
            for o in 0..outer {
                for i in 0..inner {
                    let mut s = 0f64;
                    for k in 0..n {
                        s += x[(o * n + k) * inner + i] as f64;
                        out[(o * n + k) * inner + i] = s;
                    }
                }
            }
        }
        "softmax" | "log_softmax" | "logsumexp" => {
            assert_eq!(inner, 1);
            for o in 0..outer {
                let l: Vec<f64> = line(x, g, o, 0).collect();
                let m = l.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let s = sum64(l.iter().map(|v| (v - m).exp()));
                match op {
                    "softmax" => out.extend(l.iter().map(|v| (v - m).exp() / s)),
                    "log_softmax" => out.extend(l.iter().map(|v| v - m - s.ln())),
                    _ => out.push(m + s.ln()),
                }
            }
        }
        "var" | "std" => {
            for o in 0..outer {
                for i in 0..inner {
                    let mean = sum64(line(x, g, o, i)) / n as f64;
                    let ss = sum64(line(x, g, o, i).map(|v| (v - mean) * (v - mean)));
                    let v = ss / (n as f64 - 1.0);
                    out.push(if op == "std" { v.sqrt() } else { v });
                }
            }
        }
        _ => panic!("unknown op {op}"),
    }
    out
}

fn ours(op: &str, t: &Tensor, dim: Option<usize>) -> Vec<f32> {
    let d = dim.map(|d| d as isize);
    let y = match op {
        "sum" => t.sum(),
        "mean" => t.mean(),
        "sum_dim" => t.sum_dim(d.unwrap(), false),
        "mean_dim" => t.mean_dim(d.unwrap(), false),
        "cumsum" => t.cumsum(d.unwrap()),
        "softmax" => t.softmax(d.unwrap()),
        "log_softmax" => t.log_softmax(d.unwrap()),
        "logsumexp" => t.logsumexp(d.unwrap(), false),
        "var" => d.map_or_else(|| t.var(1.0), |d| t.var_dim(d, 1.0, false)),
        "std" => d.map_or_else(|| t.std(1.0), |d| t.std_dim(d, 1.0, false)),
        _ => panic!("unknown op {op}"),
    };
    y.unwrap().to_vec::<f32>().unwrap()
}

/// Bounds per op as `(factor on PyTorch's error, units of U)`: the pairwise-type sums and the
/// f64-accumulated scan stay within a small multiple of PyTorch's figure.
fn bound(op: &str) -> (f64, f64) {
    match op {
        // Blocked pairwise sums (lanes, then trees): same growth as PyTorch's cascade sum.
        "sum" | "mean" | "sum_dim" | "mean_dim" => (2.0, 4.0),
        // Accumulated in f64 and rounded once, as PyTorch: its error, to within 1 %.
        "var" | "std" => (1.01, 0.0),
        // Accumulated in f64, one rounding per output: as PyTorch.
        "cumsum" => (1.0, 1.0),
        // Our own exp (within 2 ulp) and a lane-summed denominator.
        "softmax" | "log_softmax" | "logsumexp" => (2.0, 8.0),
        _ => panic!("unknown op {op}"),
    }
}

#[test]
fn reductions_and_scans_are_as_accurate_as_pytorch() {
    let doc = common::golden("accuracy.json");
    let mut seen = 0;
    for c in doc["cases"].as_array().unwrap() {
        let op = c["op"].as_str().unwrap();
        if op == "conv2d" {
            continue; // tests/accuracy_conv.rs
        }
        let name = c["name"].as_str().unwrap();
        let shape = common::dims(&c["shape"]);
        let dim = c["dim"].as_u64().map(|d| d as usize);
        let n: usize = shape.iter().product();
        let x = data(c["data"].as_str().unwrap(), c["seed"].as_u64().unwrap(), n);
        let r = reference(op, &x, &shape, dim);
        let t = Tensor::from_vec(x, &shape).unwrap();
        let torch = c["torch_error"].as_f64().unwrap();
        let (factor, ulps) = bound(op);
        let det = scope(true, false, || ours(op, &t, dim));
        check(name, rel_error(&det, &r), torch, factor, ulps);
        if op == "sum" {
            // Nondeterministic mode may differ in bits, not in accuracy.
            let nd = scope(false, false, || {
                lockstep_tensor::threads::with_num_threads(2, || ours(op, &t, dim))
            });
            check(
                &format!("{name} (nondet)"),
                rel_error(&nd, &r),
                torch,
                factor,
                ulps,
            );
        }
        seen += 1;
    }
    assert!(seen >= 15, "only {seen} cases");
}
