//! The layers and losses of issue 27 against real PyTorch (`tests/golden/train/layers27.json`,
//! written by `tools/golden_layers27.py`), their gradient checks, and their errors.
//!
//! * `init`: after `manual_seed(s)`, `LSTMCell`, `GRUCell`, `RNNCell`, `Conv1d` and
//!   `ConvTranspose2d` give PyTorch's `state_dict` (names, shapes, every bit) and leave the
//!   default generator in PyTorch's state.
//! * `activations`: `leaky_relu` bit for bit in `f32` and `f64`; `silu`, `softplus` within
//!   1e-10 relative in `f64` and 2e-6 in `f32` (PyTorch's vectorised `exp`/`log1p` may differ
//!   from the portable ones in the last bit). Relative means per element
//!   `|a − b| ≤ tol · max(|b|, rms(reference))`.
//! * `losses` and `cells` (`f64`): values and gradients within 1e-10 relative; the cells in
//!   `f32` (`cells_f32`, PyTorch's `f32` results) within 1e-5.
//! * `convs`: `f32` kernels against PyTorch's `f64` result on the same `f32` values, within
//!   1e-5.

use lockstep_nn::cells::{GRUCell, LSTMCell, RNNCell};
use lockstep_nn::functional::{
    self as F, BinaryCrossEntropy, Conv1dParams, HuberLoss, KlDiv, KlReduction, Reduction,
    SmoothL1Loss,
};
use lockstep_nn::gradcheck::{gradcheck, gradcheck_vars};
use lockstep_nn::layers::{Conv1d, ConvTranspose2d, Identity, LeakyReLU, SiLU, Softplus};
use lockstep_nn::{Forward, Module, Result, Var};
use lockstep_rng::Generator;
use lockstep_tensor::ops::conv::Conv2dParams;
use lockstep_tensor::{DType, Tensor};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::sync::{Mutex, MutexGuard, OnceLock};

const F64_TOL: f64 = 1e-10;
const F32_TOL: f64 = 2e-6;
const CONV_TOL: f64 = 1e-5;

fn golden() -> &'static Value {
    static G: OnceLock<Value> = OnceLock::new();
    G.get_or_init(|| {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/golden/train/layers27.json"
        );
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("{path}: {e} (regenerate with tools/golden_layers27.py)"));
        serde_json::from_str(&text).expect("layers27.json parses")
    })
}

fn section(name: &str) -> &'static [Value] {
    golden()[name].as_array().expect(name)
}

/// The default generator is process-wide: tests that seed it or construct layers take this.
fn gen_lock() -> MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    L.lock().unwrap_or_else(|e| e.into_inner())
}

fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect();
    let vals: Vec<f64> = v["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    match v["dtype"].as_str().unwrap() {
        "float32" => Tensor::from_vec(vals.iter().map(|&x| x as f32).collect(), &shape).unwrap(),
        "float64" => Tensor::from_vec(vals, &shape).unwrap(),
        d => panic!("dtype {d}"),
    }
}

fn leaf(v: &Value) -> Var {
    Var::new(tensor(v), true)
}

#[track_caller]
fn assert_close(what: &str, got: &Tensor, want: &Value, tol: f64) {
    let w = tensor(want);
    assert_eq!(got.shape(), w.shape(), "{what}: shape");
    assert_eq!(got.dtype(), w.dtype(), "{what}: dtype");
    let (g, w) = (got.to_f64_vec(), w.to_f64_vec());
    let rms = (w.iter().map(|x| x * x).sum::<f64>() / w.len().max(1) as f64).sqrt();
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= tol * b.abs().max(rms) || (a.is_nan() && b.is_nan()),
            "{what}: element {i}: lockstep {a:e}, PyTorch {b:e} (tol {tol:e})"
        );
    }
}

#[track_caller]
fn assert_bits(what: &str, got: &Tensor, want: &Value) {
    let w = tensor(want);
    assert_eq!(got.shape(), w.shape(), "{what}: shape");
    assert_eq!(got.dtype(), w.dtype(), "{what}: dtype");
    let (g, w) = (got.to_f64_vec(), w.to_f64_vec());
    // f32 values widen exactly, so comparing the f64 bits compares the f32 bits.
    let bad = g
        .iter()
        .zip(&w)
        .position(|(a, b)| a.to_bits() != b.to_bits());
    assert!(
        bad.is_none(),
        "{what}: not bit-identical at {bad:?}: lockstep {:?}, PyTorch {:?}",
        bad.map(|i| g[i]),
        bad.map(|i| w[i])
    );
}

fn grad(v: &Var) -> Tensor {
    v.grad().expect("a gradient")
}

// ---------------------------------------------------------------------------------------------
// Constructors named as in the golden file

enum Built {
    Lstm(LSTMCell),
    Gru(GRUCell),
    Rnn(RNNCell),
    C1(Conv1d),
    Ct(ConvTranspose2d),
}

impl Built {
    fn module(&self) -> &dyn Module {
        match self {
            Built::Lstm(m) => m,
            Built::Gru(m) => m,
            Built::Rnn(m) => m,
            Built::C1(m) => m,
            Built::Ct(m) => m,
        }
    }
}

fn c1(cin: usize, cout: usize, k: usize, p: Conv1dParams, bias: bool) -> Result<Built> {
    let g = &mut lockstep_rng::default_generator();
    Ok(Built::C1(Conv1d::with_options(g, cin, cout, k, p, bias)?))
}

fn ct(
    cin: usize,
    cout: usize,
    k: (usize, usize),
    p: Conv2dParams,
    op: (usize, usize),
    bias: bool,
) -> Result<Built> {
    let g = &mut lockstep_rng::default_generator();
    Ok(Built::Ct(ConvTranspose2d::with_options(
        g, cin, cout, k, p, op, bias,
    )?))
}

fn sq(s: usize, p: usize, groups: usize) -> Conv2dParams {
    Conv2dParams {
        stride: (s, s),
        padding: (p, p),
        groups,
        ..Conv2dParams::default()
    }
}

fn build(ctor: &str) -> Built {
    let d1 = Conv1dParams::default();
    let b = match ctor {
        "nn.LSTMCell(3, 5)" => LSTMCell::new(3, 5, true).map(Built::Lstm),
        "nn.LSTMCell(1, 51)" => LSTMCell::new(1, 51, true).map(Built::Lstm),
        "nn.LSTMCell(3, 4, bias=False)" => LSTMCell::new(3, 4, false).map(Built::Lstm),
        "nn.GRUCell(4, 3)" => GRUCell::new(4, 3, true).map(Built::Gru),
        "nn.GRUCell(3, 5)" => GRUCell::new(3, 5, true).map(Built::Gru),
        "nn.GRUCell(2, 3, bias=False)" => GRUCell::new(2, 3, false).map(Built::Gru),
        "nn.RNNCell(3, 4)" => RNNCell::new(3, 4, true, "tanh").map(Built::Rnn),
        "nn.RNNCell(3, 5)" => RNNCell::new(3, 5, true, "tanh").map(Built::Rnn),
        "nn.RNNCell(3, 4, nonlinearity='relu')" => RNNCell::new(3, 4, true, "relu").map(Built::Rnn),
        "nn.RNNCell(3, 4, bias=False, nonlinearity='relu')" => {
            RNNCell::new(3, 4, false, "relu").map(Built::Rnn)
        }
        "nn.Conv1d(3, 4, 3)" => Conv1d::new(3, 4, 3).map(Built::C1),
        "nn.Conv1d(4, 6, 5, stride=2, padding=1, dilation=2, groups=2, bias=False)"
        | "nn.Conv1d(4, 6, 5, stride=2, padding=1, dilation=2, groups=2)" => c1(
            4,
            6,
            5,
            Conv1dParams {
                stride: 2,
                padding: 1,
                dilation: 2,
                groups: 2,
            },
            !ctor.contains("bias=False"),
        ),
        "nn.Conv1d(2, 3, 1, bias=False)" => c1(2, 3, 1, d1, false),
        "nn.ConvTranspose2d(3, 4, 4, stride=2, padding=1)" => {
            ConvTranspose2d::new(3, 4, 4, 2, 1).map(Built::Ct)
        }
        "nn.ConvTranspose2d(8, 2, (3, 2), stride=(2, 1), padding=(1, 0), output_padding=(1, 0), bias=False)" => {
            ct(
                8,
                2,
                (3, 2),
                Conv2dParams {
                    stride: (2, 1),
                    padding: (1, 0),
                    ..Conv2dParams::default()
                },
                (1, 0),
                false,
            )
        }
        "nn.ConvTranspose2d(4, 6, 3, groups=2)" => ct(4, 6, (3, 3), sq(1, 0, 2), (0, 0), true),
        "nn.ConvTranspose2d(5, 2, 4, stride=1, padding=0, bias=False)" => {
            ct(5, 2, (4, 4), sq(1, 0, 1), (0, 0), false)
        }
        "nn.ConvTranspose2d(2, 3, (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2))" => {
            ct(
                2,
                3,
                (3, 2),
                Conv2dParams {
                    stride: (2, 3),
                    padding: (1, 0),
                    ..Conv2dParams::default()
                },
                (1, 2),
                true,
            )
        }
        "nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2)" => {
            ct(4, 6, (3, 3), sq(2, 0, 2), (0, 0), true)
        }
        "nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, dilation=2)" => ct(
            2,
            3,
            (3, 3),
            Conv2dParams {
                dilation: (2, 2),
                ..sq(2, 1, 1)
            },
            (0, 0),
            true,
        ),
        other => panic!("unknown constructor {other} (add it to build)"),
    };
    b.unwrap_or_else(|e| panic!("{ctor}: {e}"))
}

fn load_params(what: &str, m: &dyn Module, params: &Value) {
    let np = m.named_parameters();
    let want = params.as_array().unwrap();
    let names: Vec<&str> = np.iter().map(|(n, _)| n.as_str()).collect();
    let want_names: Vec<&str> = want.iter().map(|e| e[0].as_str().unwrap()).collect();
    assert_eq!(names, want_names, "{what}: named_parameters");
    for ((_, p), w) in np.iter().zip(want) {
        p.set_data(tensor(&w[1])).unwrap();
        p.zero_grad();
    }
}

fn check_param_grads(what: &str, m: &dyn Module, grads: &Value, tol: f64) {
    for ((name, p), g) in m.named_parameters().iter().zip(grads.as_array().unwrap()) {
        assert_eq!(name, g[0].as_str().unwrap(), "{what}");
        assert_close(&format!("{what}: grad of {name}"), &grad(p), &g[1], tol);
    }
}

// ---------------------------------------------------------------------------------------------
// Against PyTorch

#[test]
fn init_bit_exact_with_generator_state() {
    let _g = gen_lock();
    let cases = section("init");
    assert_eq!(cases.len(), 20);
    for case in cases {
        let ctor = case["ctor"].as_str().unwrap();
        let seed = case["seed"].as_u64().unwrap();
        let what = format!("{ctor} after manual_seed({seed})");
        lockstep_rng::default_generator().manual_seed(seed);
        let m = build(ctor);
        let sha: String = Sha256::digest(lockstep_rng::default_generator().get_state())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            sha,
            case["rng_sha256"].as_str().unwrap(),
            "{what}: generator"
        );
        let sd = m.module().state_dict();
        let want = case["state_dict"].as_array().unwrap();
        let names: Vec<&str> = sd.iter().map(|(n, _)| n.as_str()).collect();
        let want_names: Vec<&str> = want.iter().map(|e| e[0].as_str().unwrap()).collect();
        assert_eq!(names, want_names, "{what}: state_dict names");
        for ((name, t), w) in sd.iter().zip(want) {
            assert_bits(&format!("{what}: {name}"), t, &w[1]);
        }
    }
}

#[test]
fn activations_match_pytorch() {
    let cases = section("activations");
    assert_eq!(cases.len(), 12);
    for (k, c) in cases.iter().enumerate() {
        let op = c["op"].as_str().unwrap();
        let kw = &c["kwargs"];
        let num = |name: &str| kw[name].as_f64().unwrap();
        let x = leaf(&c["x"]);
        let y = match op {
            "leaky_relu" => LeakyReLU::new(num("negative_slope")).forward(&x),
            "silu" => SiLU::default().forward(&x),
            "softplus" => Softplus::new(num("beta"), num("threshold")).forward(&x),
            other => panic!("unknown activation {other}"),
        }
        .unwrap();
        y.mul(&Var::constant(tensor(&c["w"])))
            .unwrap()
            .sum()
            .unwrap()
            .backward()
            .unwrap();
        let what = format!("case {k}: {op}({kw}) {:?}", x.dtype());
        if op == "leaky_relu" {
            assert_bits(&format!("{what}: output"), &y.data(), &c["y"]);
            assert_bits(&format!("{what}: grad"), &grad(&x), &c["grad_x"]);
        } else {
            let tol = if x.dtype() == DType::F64 {
                F64_TOL
            } else {
                F32_TOL
            };
            assert_close(&format!("{what}: output"), &y.data(), &c["y"], tol);
            assert_close(&format!("{what}: grad"), &grad(&x), &c["grad_x"], tol);
        }
    }
}

fn reduction(s: &str) -> Reduction {
    s.parse().unwrap()
}

#[test]
fn losses_match_pytorch() {
    let cases = section("losses");
    assert_eq!(cases.len(), 3 * 10 + 4 * 2);
    for (k, c) in cases.iter().enumerate() {
        let op = c["op"].as_str().unwrap();
        let kw = &c["kwargs"];
        let red = kw["reduction"].as_str().unwrap();
        let x = leaf(&c["input"]);
        let t = leaf(&c["target"]);
        let td = t.data();
        let loss = match op {
            "binary_cross_entropy" => F::binary_cross_entropy_with(
                &x,
                &td,
                &BinaryCrossEntropy {
                    weight: c.get("weight").map(tensor),
                    reduction: reduction(red),
                },
            ),
            "l1_loss" => F::l1_loss(&x, &t, reduction(red)),
            "smooth_l1_loss" => F::smooth_l1_loss_with(
                &x,
                &t,
                &SmoothL1Loss {
                    reduction: reduction(red),
                    beta: kw["beta"].as_f64().unwrap(),
                },
            ),
            "huber_loss" => F::huber_loss_with(
                &x,
                &t,
                &HuberLoss {
                    reduction: reduction(red),
                    delta: kw["delta"].as_f64().unwrap(),
                },
            ),
            "kl_div" => F::kl_div_with(
                &x,
                &td,
                &KlDiv {
                    reduction: match red {
                        "batchmean" => KlReduction::BatchMean,
                        "mean" => KlReduction::Mean,
                        "sum" => KlReduction::Sum,
                        _ => KlReduction::None,
                    },
                    log_target: kw["log_target"].as_bool().unwrap(),
                },
            ),
            other => panic!("unknown loss {other}"),
        }
        .unwrap();
        match c.get("grad_output") {
            Some(g) => loss.backward_with(&tensor(g)).unwrap(),
            None => loss.backward().unwrap(),
        }
        let what = format!(
            "case {k}: {op}({kw}, weight: {})",
            c.get("weight").is_some()
        );
        assert_close(&format!("{what}: loss"), &loss.data(), &c["loss"], F64_TOL);
        assert_close(
            &format!("{what}: grad input"),
            &grad(&x),
            &c["grad_input"],
            F64_TOL,
        );
        if let Some(gt) = c.get("grad_target") {
            assert_close(&format!("{what}: grad target"), &grad(&t), gt, F64_TOL);
        }
    }
}

#[test]
fn cells_match_pytorch() {
    let _g = gen_lock();
    check_cells("cells", 6 * 4, DType::F64, F64_TOL);
    check_cells("cells_f32", 6 * 2, DType::F32, CONV_TOL);
}

fn check_cells(name: &str, count: usize, dtype: DType, tol: f64) {
    let cases = section(name);
    assert_eq!(cases.len(), count);
    for (k, c) in cases.iter().enumerate() {
        let ctor = c["ctor"].as_str().unwrap();
        let what = format!("{name} case {k}: {ctor}");
        let b = build(ctor);
        b.module().to_dtype(dtype).unwrap();
        load_params(&what, b.module(), &c["params"]);
        let x = leaf(&c["x"]);
        let hx = c.get("hx").map(leaf);
        let cx = c.get("cx").map(leaf);
        let w = Var::constant(tensor(&c["w"]));
        let (h, cy) = match &b {
            Built::Lstm(m) => {
                let state = hx.as_ref().map(|h| (h, cx.as_ref().unwrap()));
                let (h, cy) = m.forward_with_state(&x, state).unwrap();
                (h, Some(cy))
            }
            Built::Gru(m) => (m.forward_with_state(&x, hx.as_ref()).unwrap(), None),
            Built::Rnn(m) => (m.forward_with_state(&x, hx.as_ref()).unwrap(), None),
            _ => unreachable!(),
        };
        let mut loss = h.mul(&w).unwrap().sum().unwrap();
        if let Some(cy) = &cy {
            let v = Var::constant(tensor(&c["v"]));
            loss = loss.add(&cy.mul(&v).unwrap().sum().unwrap()).unwrap();
            assert_close(&format!("{what}: c"), &cy.data(), &c["c"], tol);
        }
        loss.backward().unwrap();
        assert_close(&format!("{what}: h"), &h.data(), &c["h"], tol);
        assert_close(&format!("{what}: grad x"), &grad(&x), &c["grad_x"], tol);
        if let Some(hx) = &hx {
            assert_close(&format!("{what}: grad hx"), &grad(hx), &c["grad_hx"], tol);
        }
        if let Some(cx) = &cx {
            assert_close(&format!("{what}: grad cx"), &grad(cx), &c["grad_cx"], tol);
        }
        check_param_grads(&what, b.module(), &c["grad_params"], tol);
    }
}

#[test]
fn convs_match_pytorch() {
    let _g = gen_lock();
    let cases = section("convs");
    assert_eq!(cases.len(), 8);
    for (k, c) in cases.iter().enumerate() {
        let ctor = c["ctor"].as_str().unwrap();
        let what = format!("case {k}: {ctor}");
        let b = build(ctor);
        load_params(&what, b.module(), &c["params"]);
        let x = leaf(&c["x"]);
        let y = match &b {
            Built::C1(m) => m.forward(&x),
            Built::Ct(m) => m.forward(&x),
            _ => unreachable!(),
        }
        .unwrap();
        y.mul(&Var::constant(tensor(&c["w"])))
            .unwrap()
            .sum()
            .unwrap()
            .backward()
            .unwrap();
        let f64_of = |t: &Tensor| t.to_dtype(DType::F64);
        assert_close(
            &format!("{what}: output"),
            &f64_of(&y.data()),
            &c["y"],
            CONV_TOL,
        );
        assert_close(
            &format!("{what}: grad x"),
            &f64_of(&grad(&x)),
            &c["grad_x"],
            CONV_TOL,
        );
        for ((name, p), g) in b
            .module()
            .named_parameters()
            .iter()
            .zip(c["grad_params"].as_array().unwrap())
        {
            assert_eq!(name, g[0].as_str().unwrap());
            assert_close(
                &format!("{what}: grad of {name}"),
                &f64_of(&grad(p)),
                &g[1],
                CONV_TOL,
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Gradient checks (f64 central differences; the convolutions in f32, being linear)

/// SplitMix64: test data independent of every generator under test.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
}

fn rnd(shape: &[usize], seed: u64, lo: f64, hi: f64) -> Tensor {
    let mut m = Mix(seed);
    let n = shape.iter().product();
    Tensor::from_vec((0..n).map(|_| m.uniform(lo, hi)).collect(), shape).unwrap()
}

/// `|x|` in `[0.2, 1.2)` with a random sign: no kink at 0 within a step.
fn away(shape: &[usize], seed: u64) -> Tensor {
    let mut m = Mix(seed);
    let n = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|_| {
            let a = m.uniform(0.2, 1.2);
            if m.next() & 1 == 0 { a } else { -a }
        })
        .collect();
    Tensor::from_vec(v, shape).unwrap()
}

const EPS: f64 = 1e-6;
const TOL: f64 = 1e-7;

#[test]
fn gradcheck_activations() {
    let x = away(&[3, 5], 1);
    gradcheck(
        |v| F::leaky_relu(&v[0], 0.2),
        std::slice::from_ref(&x),
        EPS,
        TOL,
    )
    .unwrap();
    gradcheck(|v| F::silu(&v[0]), &[rnd(&[3, 5], 2, -4.0, 4.0)], EPS, TOL).unwrap();
    // Both branches of softplus (β·x above and below the threshold 1, not within a step).
    gradcheck(
        |v| F::softplus(&v[0], 2.0, 1.0),
        &[x.mul_scalar(3.0).unwrap()],
        EPS,
        TOL,
    )
    .unwrap();
    gradcheck(
        |v| F::softplus(&v[0], 1.0, 20.0),
        &[rnd(&[3, 5], 3, -6.0, 6.0)],
        EPS,
        TOL,
    )
    .unwrap();
    gradcheck(|v| Identity::default().forward(&v[0]), &[x], EPS, TOL).unwrap();
}

#[test]
fn gradcheck_losses() {
    let p = rnd(&[3, 4], 4, 0.05, 0.95);
    let t = rnd(&[3, 4], 5, 0.0, 1.0);
    let w = rnd(&[4], 6, 0.5, 2.0);
    for reduction in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        let o = BinaryCrossEntropy {
            weight: Some(w.clone()),
            reduction,
        };
        gradcheck(
            |v| F::binary_cross_entropy_with(&v[0], &t, &o),
            std::slice::from_ref(&p),
            EPS,
            TOL,
        )
        .unwrap();
        // Differences |x − t| in [0.2, 1.2): away from l1's kink and from the thresholds.
        let (x, y) = (rnd(&[2, 5], 7, -1.0, 1.0), away(&[2, 5], 8));
        let y = x.add(&y).unwrap();
        gradcheck(
            |v| F::l1_loss(&v[0], &v[1], reduction),
            &[x.clone(), y.clone()],
            EPS,
            TOL,
        )
        .unwrap();
        for beta in [0.5, 1.5] {
            let o = SmoothL1Loss { reduction, beta };
            gradcheck(
                |v| F::smooth_l1_loss_with(&v[0], &v[1], &o),
                &[x.clone(), y.clone()],
                EPS,
                TOL,
            )
            .unwrap();
            let o = HuberLoss {
                reduction,
                delta: beta,
            };
            gradcheck(
                |v| F::huber_loss_with(&v[0], &v[1], &o),
                &[x.clone(), y.clone()],
                EPS,
                TOL,
            )
            .unwrap();
        }
    }
    let lp = rnd(&[3, 4], 9, -3.0, -0.1);
    for log_target in [false, true] {
        for reduction in [
            KlReduction::Mean,
            KlReduction::Sum,
            KlReduction::None,
            KlReduction::BatchMean,
        ] {
            let o = KlDiv {
                reduction,
                log_target,
            };
            let tt = if log_target {
                lp.mul_scalar(0.5).unwrap()
            } else {
                p.clone()
            };
            gradcheck(
                |v| F::kl_div_with(&v[0], &tt, &o),
                std::slice::from_ref(&lp),
                EPS,
                TOL,
            )
            .unwrap();
        }
    }
}

#[test]
fn gradcheck_cells() {
    let g = &mut Generator::with_seed(3);
    let x = Var::new(rnd(&[2, 3], 10, -1.0, 1.0), true);
    let h = Var::new(rnd(&[2, 4], 11, -1.0, 1.0), true);
    let c = Var::new(rnd(&[2, 4], 12, -1.0, 1.0), true);
    let lstm = LSTMCell::with_generator(g, 3, 4, true).unwrap();
    lstm.to_dtype(DType::F64).unwrap();
    let mut vars: Vec<Var> = lstm.parameters();
    vars.extend([x.clone(), h.clone(), c.clone()]);
    gradcheck_vars(
        || {
            let (h2, c2) = lstm.forward_with_state(&x, Some((&h, &c)))?;
            Var::cat(&[h2, c2], 1)
        },
        &vars,
        EPS,
        TOL,
    )
    .unwrap();
    let gru = GRUCell::with_generator(g, 3, 4, true).unwrap();
    gru.to_dtype(DType::F64).unwrap();
    let mut vars: Vec<Var> = gru.parameters();
    vars.extend([x.clone(), h.clone()]);
    gradcheck_vars(|| gru.forward_with_state(&x, Some(&h)), &vars, EPS, TOL).unwrap();
    for nl in ["tanh", "relu"] {
        let rnn = RNNCell::with_generator(g, 3, 4, false, nl).unwrap();
        rnn.to_dtype(DType::F64).unwrap();
        let mut vars: Vec<Var> = rnn.parameters();
        vars.extend([x.clone(), h.clone()]);
        gradcheck_vars(|| rnn.forward_with_state(&x, Some(&h)), &vars, EPS, TOL).unwrap();
    }
}

/// The convolutions are linear in each argument: in f32 a large step has no truncation
/// error, and the rounding error of the quotient stays near 1e-5.
#[test]
fn gradcheck_convs() {
    let f = |t: Tensor| t.to_dtype(DType::F32);
    let p1 = Conv1dParams {
        stride: 2,
        padding: 1,
        dilation: 2,
        groups: 2,
    };
    gradcheck(
        |v| F::conv1d(&v[0], &v[1], Some(&v[2]), p1),
        &[
            f(rnd(&[2, 4, 9], 13, -1.0, 1.0)),
            f(rnd(&[6, 2, 3], 14, -1.0, 1.0)),
            f(rnd(&[6], 15, -1.0, 1.0)),
        ],
        0.1,
        1e-3,
    )
    .unwrap();
    let p2 = Conv2dParams {
        stride: (2, 3),
        padding: (1, 0),
        groups: 2,
        ..Conv2dParams::default()
    };
    gradcheck(
        |v| F::conv_transpose2d(&v[0], &v[1], Some(&v[2]), p2, (1, 2)),
        &[
            f(rnd(&[2, 4, 3, 3], 16, -1.0, 1.0)),
            f(rnd(&[4, 3, 3, 2], 17, -1.0, 1.0)),
            f(rnd(&[6], 18, -1.0, 1.0)),
        ],
        0.1,
        1e-3,
    )
    .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Determinism and errors

/// A DCGAN-like step (ConvTranspose2d, LeakyReLU, Conv1d-free discriminator on the flattened
/// image, binary cross-entropy): every gradient bit for bit the same at 1, 2, 3 and 8 threads
/// in deterministic mode.
#[test]
fn generator_step_is_thread_invariant() {
    use lockstep_tensor::deterministic::scope;
    use lockstep_tensor::threads::with_num_threads;
    let g = &mut Generator::with_seed(7);
    let up = ConvTranspose2d::with_options(g, 16, 8, (4, 4), sq(2, 1, 1), (0, 0), true).unwrap();
    let conv = Conv1d::with_options(g, 8, 4, 3, Conv1dParams::default(), true).unwrap();
    let z = Var::constant(rnd(&[4, 16, 8, 8], 19, -1.0, 1.0).to_dtype(DType::F32));
    let run = || {
        scope(true, false, || {
            for p in up.parameters().iter().chain(&conv.parameters()) {
                p.zero_grad();
            }
            let y = F::leaky_relu(&up.forward(&z)?, 0.2)?; // [4, 8, 16, 16]
            let y = conv.forward(&y.reshape(&[4, 8, 256])?)?.sigmoid()?;
            let t = Tensor::full(y.shape(), 0.5, DType::F32)?;
            F::binary_cross_entropy(&y, &t)?.backward()?;
            let mut bits = Vec::new();
            for p in up.parameters().iter().chain(&conv.parameters()) {
                bits.extend(
                    p.grad()
                        .unwrap()
                        .to_vec::<f32>()?
                        .iter()
                        .map(|x| x.to_bits()),
                );
            }
            Ok::<_, lockstep_nn::Error>(bits)
        })
        .unwrap()
    };
    let one = with_num_threads(1, run);
    for t in [2, 3, 8] {
        assert_eq!(with_num_threads(t, run), one, "threads = {t}");
    }
}

#[track_caller]
fn err_with<T: core::fmt::Debug>(r: Result<T>, pieces: &[&str]) {
    let e = r.unwrap_err().to_string();
    for p in pieces {
        assert!(e.contains(p), "{e:?} lacks {p:?}");
    }
}

#[test]
fn bad_inputs_are_clear_errors() {
    let g = &mut Generator::with_seed(0);
    let v = |shape: &[usize]| Var::new(Tensor::zeros(shape, DType::F32).unwrap(), true);
    let lstm = LSTMCell::with_generator(g, 3, 4, true).unwrap();
    err_with(
        lstm.forward_with_state(&v(&[2, 5]), None),
        &["LSTMCell(3, 4", "[B, 3]", "[2, 5]"],
    );
    err_with(
        lstm.forward_with_state(&v(&[2, 3]), Some((&v(&[3, 4]), &v(&[2, 4])))),
        &["LSTMCell(3, 4", "hidden state", "[2, 4]", "[3, 4]"],
    );
    err_with(
        lstm.forward_with_state(
            &Var::constant(Tensor::zeros(&[2, 3], DType::F64).unwrap()),
            None,
        ),
        &["LSTMCell(", "F32", "F64"],
    );
    let gru = GRUCell::with_generator(g, 3, 4, true).unwrap();
    err_with(gru.forward(&v(&[1, 2, 3])), &["GRUCell(3, 4", "[1, 2, 3]"]);
    err_with(
        RNNCell::with_generator(g, 3, 4, true, "sigmoid").map(|_| ()),
        &["RNNCell", "nonlinearity", "sigmoid"],
    );
    let x = v(&[2, 3]);
    err_with(
        F::binary_cross_entropy(
            &x.add_scalar(1.5).unwrap(),
            &Tensor::zeros(&[2, 3], DType::F32).unwrap(),
        ),
        &["binary_cross_entropy", "between 0 and 1"],
    );
    err_with(
        F::binary_cross_entropy(&x, &Tensor::zeros(&[3, 2], DType::F32).unwrap()),
        &["binary_cross_entropy", "target", "[3, 2]", "[2, 3]"],
    );
    err_with(
        F::binary_cross_entropy_with(
            &x,
            &Tensor::zeros(&[2, 3], DType::F32).unwrap(),
            &BinaryCrossEntropy {
                weight: Some(Tensor::ones(&[4], DType::F32).unwrap()),
                reduction: Reduction::Mean,
            },
        ),
        &["binary_cross_entropy", "weight", "[4]"],
    );
    err_with(
        F::l1_loss(&x, &v(&[3]), Reduction::Mean),
        &["l1_loss", "target"],
    );
    err_with(
        F::smooth_l1_loss_with(
            &x,
            &x,
            &SmoothL1Loss {
                reduction: Reduction::Mean,
                beta: -1.0,
            },
        ),
        &["smooth_l1_loss", "beta"],
    );
    err_with(
        F::huber_loss_with(
            &x,
            &x,
            &HuberLoss {
                reduction: Reduction::Mean,
                delta: 0.0,
            },
        ),
        &["huber_loss", "delta"],
    );
    err_with(
        F::kl_div(&x, &Tensor::zeros(&[2, 3], DType::F64).unwrap()),
        &["kl_div", "target", "F64"],
    );
    err_with(F::softplus(&x, 0.0, 20.0), &["softplus", "beta"]);
    err_with(
        F::leaky_relu(
            &Var::constant(Tensor::zeros(&[2], DType::I64).unwrap()),
            0.1,
        ),
        &["leaky_relu"],
    );
    let c1 = Conv1d::new(3, 4, 3);
    err_with(
        c1.and_then(|c| c.forward(&v(&[2, 4, 9]))),
        &["Conv1d(3, 4", "[N, 3, L]", "[2, 4, 9]"],
    );
    err_with(
        Conv1d::with_options(
            g,
            3,
            4,
            3,
            Conv1dParams {
                groups: 2,
                ..Conv1dParams::default()
            },
            true,
        )
        .map(|_| ()),
        &["Conv1d", "groups"],
    );
    err_with(
        F::conv1d(
            &v(&[2, 3, 1, 9]),
            &v(&[4, 3, 3]),
            None,
            Conv1dParams::default(),
        ),
        &["conv1d", "input"],
    );
    let ct = ConvTranspose2d::with_options(g, 3, 4, (3, 3), sq(2, 0, 1), (1, 1), true).unwrap();
    err_with(
        ct.forward(&v(&[2, 4, 5, 5])),
        &["ConvTranspose2d(3, 4", "[N, 3, H, W]", "[2, 4, 5, 5]"],
    );
    err_with(
        ConvTranspose2d::with_options(g, 3, 4, (3, 3), sq(2, 0, 1), (2, 0), true).map(|_| ()),
        &["ConvTranspose2d", "output_padding"],
    );
}
