//! lockstep-nn against real PyTorch: `tests/golden/train/modules.json`, written by
//! `tools/golden_modules.py` (see `tests/golden/train/README.md` for versions and how to rerun).
//!
//! * `init`: after `manual_seed(s)`, each constructor gives the same `state_dict` (names, order,
//!   shapes, dtypes, every value bit for bit), the same `named_parameters` names, the same
//!   sha256 over `parameters()` as `torch_train.py`'s `init_sha256`, and leaves the default
//!   generator in the same state (sha256 of `get_state()`, PyTorch's byte layout).
//! * `dropout`: `nn.Dropout(p)(ones)` after `manual_seed(s)`: outputs bit for bit, and the
//!   generator state afterwards.
//! * `recurrent`, `modules`, `losses`: float64 forward and backward (outputs, loss, gradients of
//!   the input, initial states and parameters, BatchNorm's buffers after each call and the
//!   eval output) within 1e-10 relative. Relative means per element
//!   `|a − b| ≤ tol · max(|b|, rms(reference))`: the reference tensor's root mean square stands
//!   in for elements that cancel to near zero. Conv2d and the poolings have `f32` kernels only
//!   in lockstep-tensor: they run in `f32` (inputs and parameters rounded) and are compared with
//!   the `f64` reference within 1e-5. The one `float32` LSTM case (PyTorch runs it through
//!   oneDNN) is compared within 1e-5 as well.
//!
//! Constructors are read from the file's strings (`nn.LSTM(3, 5, num_layers=2, …)`) by a small
//! parser, so a case added to the script with a known layer is tested without a code change; an
//! unknown layer fails the test.

use lockstep_nn::functional::{self as F, CrossEntropy, Reduction};
use lockstep_nn::layers::{
    BatchNorm, Conv2d, Dropout, Embedding, Flatten, GELU, LayerNorm, Linear, Pool, PoolKind, ReLU,
    Sequential, Sigmoid, Tanh, Unflatten,
};
use lockstep_nn::module::{Kind, Named};
use lockstep_nn::rnn::{Rnn, RnnConfig};
use lockstep_nn::{Forward, Module, Result, Training, Var, Visitor, no_grad};
use lockstep_tensor::ops::conv::Conv2dParams;
use lockstep_tensor::{DType, Tensor};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::sync::{Mutex, MutexGuard, OnceLock};

const F64_TOL: f64 = 1e-10;
const F32_TOL: f64 = 1e-5;

// ---------------------------------------------------------------------------------------------
// Fixture loading

fn golden() -> &'static Value {
    static G: OnceLock<Value> = OnceLock::new();
    G.get_or_init(|| {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/golden/train/modules.json"
        );
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("{path}: {e} (regenerate with tools/golden_modules.py)"));
        serde_json::from_str(&text).expect("modules.json parses")
    })
}

/// The default generator is process-wide: tests that seed it, construct layers (which draw
/// from it) or run dropout take this lock, so that parallel tests do not draw in between.
fn gen_lock() -> MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    L.lock().unwrap_or_else(|e| e.into_inner())
}

fn manual_seed(s: u64) {
    lockstep_rng::default_generator().manual_seed(s);
}

fn rng_sha256() -> String {
    hex(&Sha256::digest(
        lockstep_rng::default_generator().get_state(),
    ))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn shape_of(v: &Value) -> Vec<usize> {
    v["shape"]
        .as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dim") as usize)
        .collect()
}

fn floats(v: &Value) -> Vec<f64> {
    v["values"]
        .as_array()
        .expect("values")
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

/// A `{"shape", "dtype", "values"}` object as a tensor of its dtype.
fn tensor(v: &Value) -> Tensor {
    let shape = shape_of(v);
    match v["dtype"].as_str().expect("dtype") {
        "float32" => {
            Tensor::from_vec(floats(v).into_iter().map(|x| x as f32).collect(), &shape).unwrap()
        }
        "float64" => Tensor::from_vec(floats(v), &shape).unwrap(),
        "int64" => {
            let vals: Vec<i64> = v["values"]
                .as_array()
                .expect("values")
                .iter()
                .map(|x| x.as_i64().expect("an integer"))
                .collect();
            Tensor::from_vec(vals, &shape).unwrap()
        }
        d => panic!("unexpected dtype {d}"),
    }
}

fn dtype_of(s: &str) -> DType {
    match s {
        "float32" => DType::F32,
        "float64" => DType::F64,
        "int64" => DType::I64,
        d => panic!("unexpected dtype {d}"),
    }
}

/// `what`: `got` equals `want` within `tol` relative (see the file's docs), shapes equal.
#[track_caller]
fn assert_close(what: &str, got: &Tensor, want: &Value, tol: f64) {
    assert_eq!(got.shape(), shape_of(want).as_slice(), "{what}: shape");
    let (g, w) = (got.to_f64_vec(), floats(want));
    let rms = (w.iter().map(|x| x * x).sum::<f64>() / w.len().max(1) as f64).sqrt();
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = (a - b).abs() <= tol * b.abs().max(rms) || (a.is_nan() && b.is_nan());
        assert!(
            ok,
            "{what}: element {i}: lockstep {a:e}, PyTorch {b:e} (tol {tol:e})"
        );
    }
}

#[track_caller]
fn assert_close_scalar(what: &str, got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= tol * want.abs().max(1e-300),
        "{what}: lockstep {got:e}, PyTorch {want:e}"
    );
}

/// `what`: `got` equals `want` bit for bit (as its dtype), shapes and dtypes equal.
#[track_caller]
fn assert_bits(what: &str, got: &Tensor, want: &Value) {
    assert_eq!(got.shape(), shape_of(want).as_slice(), "{what}: shape");
    let dt = want["dtype"].as_str().unwrap();
    assert_eq!(got.dtype(), dtype_of(dt), "{what}: dtype");
    let w = tensor(want);
    let (a, b) = (got.contiguous(), w.contiguous());
    let same = match got.dtype() {
        DType::F32 => bits32(&a) == bits32(&b),
        DType::F64 => bits64(&a) == bits64(&b),
        _ => a.to_vec::<i64>().unwrap() == b.to_vec::<i64>().unwrap(),
    };
    if !same {
        let (g, w) = (a.to_f64_vec(), b.to_f64_vec());
        let i = g
            .iter()
            .zip(&w)
            .position(|(x, y)| x.to_bits() != y.to_bits());
        panic!(
            "{what}: not bit-identical; first difference at {i:?}: lockstep {:?}, PyTorch {:?}",
            i.map(|i| g[i]),
            i.map(|i| w[i])
        );
    }
}

fn bits32(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect()
}

fn bits64(t: &Tensor) -> Vec<u64> {
    t.to_vec::<f64>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect()
}

/// Little-endian bytes of a tensor, as `t.numpy().tobytes()`.
fn le_bytes(t: &Tensor) -> Vec<u8> {
    let t = t.contiguous();
    match t.dtype() {
        DType::F32 => t
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
        DType::F64 => t
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
        DType::I64 => t
            .to_vec::<i64>()
            .unwrap()
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
        d => panic!("no bytes for {d:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Reading a Python constructor call: `nn.Conv2d(2, 3, 3, stride=2, padding=1)`

#[derive(Clone, Debug, PartialEq)]
enum Arg {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    None,
    Seq(Vec<Arg>),
}

impl Arg {
    fn int(&self) -> i64 {
        match self {
            Arg::Int(i) => *i,
            a => panic!("expected an integer, got {a:?}"),
        }
    }
    fn usize(&self) -> usize {
        self.int() as usize
    }
    fn float(&self) -> f64 {
        match self {
            Arg::Int(i) => *i as f64,
            Arg::Float(f) => *f,
            a => panic!("expected a number, got {a:?}"),
        }
    }
    fn bool(&self) -> bool {
        match self {
            Arg::Bool(b) => *b,
            a => panic!("expected a bool, got {a:?}"),
        }
    }
    fn str(&self) -> &str {
        match self {
            Arg::Str(s) => s,
            a => panic!("expected a string, got {a:?}"),
        }
    }
    /// An int or a sequence of ints (`3`, `(2, 3)`, `[2, 3]`).
    fn sizes(&self) -> Vec<usize> {
        match self {
            Arg::Seq(v) => v.iter().map(Arg::usize).collect(),
            a => vec![a.usize()],
        }
    }
    /// An int `k` as `(k, k)`, or a pair.
    fn pair(&self) -> (usize, usize) {
        match self.sizes()[..] {
            [k] => (k, k),
            [a, b] => (a, b),
            ref s => panic!("expected an int or a pair, got {s:?}"),
        }
    }
}

#[derive(Debug)]
struct Call {
    name: String,
    args: Vec<Arg>,
    kwargs: Vec<(String, Arg)>,
}

impl Call {
    fn pos(&self, i: usize) -> &Arg {
        self.args
            .get(i)
            .unwrap_or_else(|| panic!("{}: no argument {i}", self.name))
    }
    fn kw(&self, k: &str) -> Option<&Arg> {
        self.kwargs.iter().find(|(n, _)| n == k).map(|(_, a)| a)
    }
    fn kw_or<T>(&self, k: &str, default: T, f: impl Fn(&Arg) -> T) -> T {
        self.kw(k).map_or(default, f)
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn peek(&mut self) -> u8 {
        self.ws();
        self.s.get(self.i).copied().unwrap_or(0)
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == c {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn ident(&mut self) -> String {
        self.ws();
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || b"_.".contains(&self.s[self.i]))
        {
            self.i += 1;
        }
        String::from_utf8(self.s[start..self.i].to_vec()).unwrap()
    }
    fn value(&mut self) -> Arg {
        match self.peek() {
            open @ (b'(' | b'[') => {
                self.i += 1;
                let close = if open == b'(' { b')' } else { b']' };
                let mut v = Vec::new();
                while !self.eat(close) {
                    v.push(self.value());
                    self.eat(b',');
                }
                Arg::Seq(v)
            }
            q @ (b'\'' | b'"') => {
                self.i += 1;
                let start = self.i;
                while self.s[self.i] != q {
                    self.i += 1;
                }
                self.i += 1;
                Arg::Str(String::from_utf8(self.s[start..self.i - 1].to_vec()).unwrap())
            }
            c if c == b'-' || c.is_ascii_digit() => {
                let start = self.i;
                self.i += 1;
                while self.i < self.s.len()
                    && (self.s[self.i].is_ascii_digit() || b".eE-+".contains(&self.s[self.i]))
                {
                    self.i += 1;
                }
                let t = std::str::from_utf8(&self.s[start..self.i]).unwrap();
                t.parse::<i64>()
                    .map(Arg::Int)
                    .unwrap_or_else(|_| Arg::Float(t.parse().unwrap()))
            }
            _ => match self.ident().as_str() {
                "True" => Arg::Bool(true),
                "False" => Arg::Bool(false),
                "None" => Arg::None,
                other => panic!("cannot read the value {other:?}"),
            },
        }
    }
    fn call(&mut self) -> Call {
        let name = self.ident();
        assert!(self.eat(b'('), "{name}: expected '('");
        let (mut args, mut kwargs) = (Vec::new(), Vec::new());
        while !self.eat(b')') {
            let save = self.i;
            let key = self.ident();
            if !key.is_empty() && self.eat(b'=') {
                kwargs.push((key, self.value()));
            } else {
                self.i = save;
                args.push(self.value());
            }
            self.eat(b',');
        }
        Call { name, args, kwargs }
    }
}

fn parse(ctor: &str) -> Call {
    Parser {
        s: ctor.as_bytes(),
        i: 0,
    }
    .call()
}

// ---------------------------------------------------------------------------------------------
// Building the layers and models of the file

/// `LstmNet` of `torch_train.py`: children `lstm` (LSTM(8, H, num_layers=2, batch_first,
/// dropout=p)) and `head` (Linear(H, 10)); each 8×8 image is a sequence of 8 rows.
struct LstmNet {
    lstm: Rnn,
    head: Linear,
    training: Training,
}

impl LstmNet {
    fn new(hidden: usize, p: f64) -> Self {
        let lstm = Rnn::lstm(RnnConfig {
            num_layers: 2,
            batch_first: true,
            dropout: p,
            ..RnnConfig::new(8, hidden)
        })
        .unwrap();
        let head = Linear::new(hidden, 10, true).unwrap();
        Self {
            lstm,
            head,
            training: Training::default(),
        }
    }
}

impl Forward for LstmNet {
    fn forward(&self, x: &Var) -> Result<Var> {
        let out = self.lstm.forward(&x.reshape(&[-1, 8, 8])?)?;
        let last = out.select(1, out.shape()[1] - 1)?;
        self.head.forward(&last)
    }
}

impl Module for LstmNet {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("lstm", &self.lstm);
        v.child("head", &self.head);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `build_model(kind, hidden, p)` of `torch_train.py`.
fn build_model(kind: &str, hidden: usize, p: f64) -> Box<dyn Forward> {
    match kind {
        "mlp" => Box::new(
            Sequential::new()
                .add(Linear::new(64, hidden, true).unwrap())
                .add(ReLU::default())
                .add(Dropout::new(p).unwrap())
                .add(Linear::new(hidden, 10, true).unwrap()),
        ),
        "cnn" => Box::new(
            Sequential::new()
                .add(Unflatten::new(1, &[1, 8, 8]))
                .add(Conv2d::new(1, 16, 3, 1).unwrap())
                .add(BatchNorm::new_2d(16).unwrap())
                .add(ReLU::default())
                .add(Pool::max2d(2))
                .add(Conv2d::new(16, 32, 3, 1).unwrap())
                .add(ReLU::default())
                .add(Pool::adaptive_avg2d(1, 1))
                .add(Flatten::default())
                .add(Dropout::new(p).unwrap())
                .add(Linear::new(32, 10, true).unwrap()),
        ),
        "lstm" => Box::new(LstmNet::new(hidden, p)),
        k => panic!("unknown model {k}"),
    }
}

fn rnn_from(c: &Call) -> Option<Rnn> {
    let kind = c.name.strip_prefix("nn.")?;
    if !["RNN", "GRU", "LSTM"].contains(&kind) {
        return None;
    }
    let cfg = RnnConfig {
        num_layers: c.kw_or("num_layers", 1, Arg::usize),
        bias: c.kw_or("bias", true, Arg::bool),
        batch_first: c.kw_or("batch_first", false, Arg::bool),
        dropout: c.kw_or("dropout", 0.0, Arg::float),
        bidirectional: c.kw_or("bidirectional", false, Arg::bool),
        nonlinearity: c.kw_or("nonlinearity", "tanh".to_string(), |a| a.str().to_string()),
        ..RnnConfig::new(c.pos(0).usize(), c.pos(1).usize())
    };
    Some(
        match kind {
            "RNN" => Rnn::rnn(cfg),
            "GRU" => Rnn::gru(cfg),
            _ => Rnn::lstm(cfg),
        }
        .unwrap(),
    )
}

/// The module a constructor string describes, initialised from the default generator.
fn build(ctor: &str) -> Box<dyn Forward> {
    let c = parse(ctor);
    if let Some(r) = rnn_from(&c) {
        return Box::new(r);
    }
    match c.name.as_str() {
        "build_model" => build_model(c.pos(0).str(), c.pos(1).usize(), c.pos(2).float()),
        "nn.Linear" => Box::new(
            Linear::new(
                c.pos(0).usize(),
                c.pos(1).usize(),
                c.kw_or("bias", true, Arg::bool),
            )
            .unwrap(),
        ),
        "nn.Conv2d" => {
            let params = Conv2dParams {
                stride: c.kw_or("stride", (1, 1), Arg::pair),
                padding: c.kw_or("padding", (0, 0), Arg::pair),
                dilation: c.kw_or("dilation", (1, 1), Arg::pair),
                groups: c.kw_or("groups", 1, Arg::usize),
            };
            Box::new(
                Conv2d::with_options(
                    &mut lockstep_rng::default_generator(),
                    c.pos(0).usize(),
                    c.pos(1).usize(),
                    c.pos(2).pair(),
                    params,
                    c.kw_or("bias", true, Arg::bool),
                )
                .unwrap(),
            )
        }
        "nn.BatchNorm1d" | "nn.BatchNorm2d" => {
            let n = c.pos(0).usize();
            let mut bn = if c.name.ends_with("1d") {
                BatchNorm::new_1d(n)
            } else {
                BatchNorm::new_2d(n)
            }
            .unwrap();
            if let Some(m) = c.kw("momentum") {
                bn.momentum = if *m == Arg::None {
                    None
                } else {
                    Some(m.float())
                };
            }
            Box::new(bn)
        }
        "nn.LayerNorm" => Box::new(LayerNorm::new(&c.pos(0).sizes(), true).unwrap()),
        "nn.Embedding" => Box::new(
            Embedding::new(
                c.pos(0).usize(),
                c.pos(1).usize(),
                c.kw("padding_idx").map(Arg::usize),
            )
            .unwrap(),
        ),
        "nn.MaxPool2d" => Box::new(Pool::max2d(c.pos(0).usize())),
        "nn.AvgPool2d" => Box::new(Pool::avg2d(c.pos(0).usize())),
        "nn.AdaptiveAvgPool2d" => {
            let (h, w) = c.pos(0).pair();
            Box::new(Pool::new(PoolKind::AdaptiveAvg(h, w)))
        }
        "nn.ReLU" => Box::new(ReLU::default()),
        "nn.GELU" => Box::new(GELU::new(c.kw("approximate").map_or("none", Arg::str)).unwrap()),
        "nn.Tanh" => Box::new(Tanh::default()),
        "nn.Sigmoid" => Box::new(Sigmoid::default()),
        "nn.Flatten" => Box::new(Flatten::default()),
        "nn.Unflatten" => Box::new(Unflatten::new(c.pos(0).int() as isize, &c.pos(1).sizes())),
        other => panic!("no lockstep layer for {other} (from {ctor:?})"),
    }
}

/// Whether lockstep runs this layer in f32 only (Conv2d and the poolings).
fn f32_only(ctor: &str) -> bool {
    ctor.contains("Conv2d") || ctor.contains("Pool2d")
}

// ---------------------------------------------------------------------------------------------
// (a) Default initialisation, bit for bit

#[test]
fn init_bit_exact_with_generator_state() {
    let _g = gen_lock();
    let cases = golden()["init"].as_array().unwrap();
    assert!(cases.len() >= 36);
    for case in cases {
        let ctor = case["ctor"].as_str().unwrap();
        let seed = case["seed"].as_u64().unwrap();
        let what = format!("{ctor} after manual_seed({seed})");
        manual_seed(seed);
        let m = build(ctor);
        // The generator first: nothing below draws.
        assert_eq!(
            rng_sha256(),
            case["rng_after"]["sha256"].as_str().unwrap(),
            "{what}: generator state afterwards (PyTorch consumed {} 32-bit draws)",
            case["rng_after"]["u32_draws"]
        );
        let sd = m.state_dict();
        let want = case["state_dict"].as_array().unwrap();
        let names: Vec<&str> = sd.iter().map(|(n, _)| n.as_str()).collect();
        let want_names: Vec<&str> = want.iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert_eq!(names, want_names, "{what}: state_dict names");
        for ((name, t), w) in sd.iter().zip(want) {
            assert_bits(&format!("{what}: {name}"), t, w);
            assert_eq!(
                hex(&Sha256::digest(le_bytes(t))),
                w["sha256"].as_str().unwrap(),
                "{what}: {name}: sha256"
            );
        }
        let np: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
        let want_np: Vec<&str> = case["named_parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        assert_eq!(np, want_np, "{what}: named_parameters");
        let mut h = Sha256::new();
        for p in m.parameters() {
            h.update(le_bytes(&p.data()));
        }
        assert_eq!(
            hex(&h.finalize()),
            case["parameters_sha256"].as_str().unwrap(),
            "{what}: sha256 over parameters() (torch_train.py's init_sha256)"
        );
        // Buffers are buffers, parameters parameters.
        for n in m.named_all() {
            let is_param = want_np.contains(&n.name.as_str());
            assert_eq!(
                n.kind == Kind::Parameter,
                is_param,
                "{what}: kind of {}",
                n.name
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (b) Dropout masks

#[test]
fn dropout_bit_exact_with_generator_state() {
    let _g = gen_lock();
    for case in golden()["dropout"].as_array().unwrap() {
        let seed = case["seed"].as_u64().unwrap();
        let p = case["p"].as_f64().unwrap();
        let d = Dropout::new(p).unwrap();
        manual_seed(seed);
        let (shapes, outputs): (Vec<Vec<usize>>, Vec<&Value>) = match case.get("shapes") {
            Some(s) => (
                s.as_array()
                    .unwrap()
                    .iter()
                    .map(|s| {
                        s.as_array()
                            .unwrap()
                            .iter()
                            .map(|d| d.as_u64().unwrap() as usize)
                            .collect()
                    })
                    .collect(),
                case["outputs"].as_array().unwrap().iter().collect(),
            ),
            None => (
                vec![
                    case["shape"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|d| d.as_u64().unwrap() as usize)
                        .collect(),
                ],
                vec![&case["output"]],
            ),
        };
        let what = format!("Dropout({p}) after manual_seed({seed}) on {shapes:?}");
        for (k, (shape, want)) in shapes.iter().zip(outputs).enumerate() {
            let x = Var::new(Tensor::ones(shape, DType::F32).unwrap(), true);
            let y = d.forward(&x).unwrap();
            assert_bits(&format!("{what}: call {k}"), &y.data(), want);
        }
        assert_eq!(
            rng_sha256(),
            case["rng_after"]["sha256"].as_str().unwrap(),
            "{what}: generator state afterwards"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// (c) Forward and backward

/// Loads the case's `parameters` (names in order) into `m`.
fn load_parameters(what: &str, m: &dyn Module, params: &Value) {
    let want = params.as_array().unwrap();
    let mine = m.named_parameters();
    let names: Vec<&str> = mine.iter().map(|(n, _)| n.as_str()).collect();
    let want_names: Vec<&str> = want.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, want_names, "{what}: parameter names");
    for ((_, v), p) in mine.iter().zip(want) {
        v.set_data(tensor(p).to_dtype(v.dtype())).unwrap();
    }
}

fn check_param_grads(what: &str, m: &dyn Module, grads: &Value, tol: f64) {
    for ((name, v), g) in m.named_parameters().iter().zip(grads.as_array().unwrap()) {
        assert_eq!(name, g["name"].as_str().unwrap(), "{what}: gradient order");
        let got = v
            .grad()
            .unwrap_or_else(|| panic!("{what}: {name} has no gradient"));
        assert_close(&format!("{what}: grad of {name}"), &got, g, tol);
    }
}

fn weighted_sum(y: &Var, w: &Value, dtype: DType) -> Var {
    y.mul(&Var::constant(tensor(w).to_dtype(dtype)))
        .unwrap()
        .sum()
        .unwrap()
}

#[test]
fn recurrent_forward_backward_f64() {
    let _g = gen_lock();
    let cases = golden()["recurrent"].as_array().unwrap();
    assert!(cases.len() >= 14);
    for case in cases {
        let ctor = case["ctor"].as_str().unwrap();
        let dtype = dtype_of(case["dtype"].as_str().unwrap());
        let tol = if dtype == DType::F64 {
            F64_TOL
        } else {
            F32_TOL
        };
        let what = format!("{ctor} ({dtype:?})");
        let rnn = rnn_from(&parse(ctor)).expect("a recurrent layer");
        assert_eq!(
            rnn.config().batch_first,
            case["batch_first"].as_bool().unwrap()
        );
        rnn.to_dtype(dtype).unwrap();
        load_parameters(&what, &rnn, &case["parameters"]);
        let x = Var::new(tensor(&case["input"]), true);
        let state = |k: &str| (!case[k].is_null()).then(|| Var::new(tensor(&case[k]), true));
        let (h0, c0) = (state("h0"), state("c0"));
        let out = rnn
            .forward_with_state(&x, h0.as_ref(), c0.as_ref())
            .unwrap();
        assert_close(
            &format!("{what}: output"),
            &out.output.data(),
            &case["output"],
            tol,
        );
        assert_close(&format!("{what}: h_n"), &out.h_n.data(), &case["h_n"], tol);
        let mut loss = weighted_sum(&out.output, &case["W"], dtype)
            .add(&weighted_sum(&out.h_n, &case["V"], dtype))
            .unwrap();
        match (&out.c_n, case["c_n"].is_null()) {
            (Some(c), false) => {
                assert_close(&format!("{what}: c_n"), &c.data(), &case["c_n"], tol);
                loss = loss.add(&weighted_sum(c, &case["U"], dtype)).unwrap();
            }
            (None, true) => {}
            _ => panic!("{what}: c_n present in one and not the other"),
        }
        let l = loss.data().to_f64_vec()[0];
        assert_close_scalar(
            &format!("{what}: loss"),
            l,
            case["loss"].as_f64().unwrap(),
            tol,
        );
        loss.backward().unwrap();
        assert_close(
            &format!("{what}: grad_input"),
            &x.grad().unwrap(),
            &case["grad_input"],
            tol,
        );
        for (v, k) in [(&h0, "grad_h0"), (&c0, "grad_c0")] {
            if let Some(v) = v {
                assert_close(&format!("{what}: {k}"), &v.grad().unwrap(), &case[k], tol);
            }
        }
        check_param_grads(&what, &rnn, &case["grad_parameters"], tol);
    }
}

#[test]
fn modules_forward_backward_f64() {
    let _g = gen_lock();
    let cases = golden()["modules"].as_array().unwrap();
    assert!(cases.len() >= 25);
    for case in cases {
        let ctor = case["ctor"].as_str().unwrap();
        let (dtype, tol) = if f32_only(ctor) {
            (DType::F32, F32_TOL)
        } else {
            (dtype_of(case["dtype"].as_str().unwrap()), F64_TOL)
        };
        let what = format!("{ctor} in {dtype:?}");
        let mut m = build(ctor);
        m.to_dtype(dtype).unwrap();
        m.train(true);
        load_parameters(&what, &*m, &case["parameters"]);
        let xt = tensor(&case["input"]);
        let x = if xt.dtype().is_float() {
            Var::new(xt.to_dtype(dtype), true)
        } else {
            Var::constant(xt)
        };
        let y = m.forward(&x).unwrap();
        assert_close(&format!("{what}: output"), &y.data(), &case["output"], tol);
        let loss = weighted_sum(&y, &case["W"], dtype);
        let l = loss.data().to_f64_vec()[0];
        assert_close_scalar(
            &format!("{what}: loss"),
            l,
            case["loss"].as_f64().unwrap(),
            tol,
        );
        loss.backward().unwrap();
        match (x.grad(), case["grad_input"].is_null()) {
            (Some(g), false) => {
                assert_close(&format!("{what}: grad_input"), &g, &case["grad_input"], tol)
            }
            (None, true) => {}
            (g, _) => panic!("{what}: grad_input {g:?} vs {}", case["grad_input"]),
        }
        check_param_grads(&what, &*m, &case["grad_parameters"], tol);
        // BatchNorm: running statistics after each call, later calls, evaluation.
        let Some(after) = case.get("buffers_after_each_call") else {
            continue;
        };
        let after = after.as_array().unwrap();
        let check_buffers = |k: usize| {
            let mine: Vec<Named> = m
                .named_all()
                .into_iter()
                .filter(|n| n.kind == Kind::Buffer)
                .collect();
            let want = after[k].as_array().unwrap();
            assert_eq!(mine.len(), want.len(), "{what}: buffers");
            for (n, w) in mine.iter().zip(want) {
                assert_eq!(n.name, w["name"].as_str().unwrap(), "{what}: buffer order");
                let t = n.var.data();
                if t.dtype() == DType::I64 {
                    assert_bits(&format!("{what}: {} after call {k}", n.name), &t, w);
                } else {
                    assert_close(&format!("{what}: {} after call {k}", n.name), &t, w, tol);
                }
            }
        };
        check_buffers(0);
        for (k, more) in case["more_calls"].as_array().unwrap().iter().enumerate() {
            let x2 = Var::constant(tensor(&more["input"]).to_dtype(dtype));
            let y2 = no_grad(|| m.forward(&x2)).unwrap();
            assert_close(
                &format!("{what}: output of call {}", k + 1),
                &y2.data(),
                &more["output"],
                tol,
            );
            check_buffers(k + 1);
        }
        m.eval();
        let ye = no_grad(|| m.forward(&x)).unwrap();
        assert_close(
            &format!("{what}: eval output"),
            &ye.data(),
            &case["eval_output_on_input"],
            tol,
        );
    }
}

fn reduction(kwargs: &Value) -> Reduction {
    kwargs
        .get("reduction")
        .map_or(Reduction::Mean, |r| r.as_str().unwrap().parse().unwrap())
}

#[test]
fn losses_forward_backward_f64() {
    let cases = golden()["losses"].as_array().unwrap();
    assert!(cases.len() >= 36);
    for case in cases {
        let what = case["call"].as_str().unwrap();
        let kw = &case["kwargs"];
        let opt = |k: &str| kw.get(k).map(tensor);
        let x = Var::new(tensor(&case["input"]), true);
        let t = tensor(&case["target"]);
        let red = reduction(kw);
        let v = match case["fn"].as_str().unwrap() {
            "cross_entropy" => {
                let o = CrossEntropy {
                    weight: opt("weight"),
                    ignore_index: kw.get("ignore_index").map_or(-100, |v| v.as_i64().unwrap()),
                    label_smoothing: kw
                        .get("label_smoothing")
                        .map_or(0.0, |v| v.as_f64().unwrap()),
                    reduction: red,
                };
                F::cross_entropy_with(&x, &t, &o)
            }
            "nll_loss" => F::nll_loss_with(
                &x,
                &t,
                &F::NllLoss {
                    weight: opt("weight"),
                    ignore_index: kw.get("ignore_index").map_or(-100, |v| v.as_i64().unwrap()),
                    reduction: red,
                },
            ),
            "mse_loss" => F::mse_loss(&x, &Var::constant(t), red),
            "binary_cross_entropy_with_logits" => F::binary_cross_entropy_with_logits(
                &x,
                &t,
                opt("weight").as_ref(),
                opt("pos_weight").as_ref(),
                red,
            ),
            f => panic!("{what}: no lockstep function for {f}"),
        }
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_close(
            &format!("{what}: value"),
            &v.data(),
            &case["value"],
            F64_TOL,
        );
        match case["grad_output"].is_null() {
            true => v.backward().unwrap(),
            false => v.backward_with(&tensor(&case["grad_output"])).unwrap(),
        }
        assert_close(
            &format!("{what}: grad_input"),
            &x.grad().unwrap(),
            &case["grad_input"],
            F64_TOL,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The parser itself

#[test]
fn constructor_parser() {
    let c =
        parse("nn.LSTM(8, 5, num_layers=2, batch_first=True, dropout=0.3, nonlinearity='relu')");
    assert_eq!(c.name, "nn.LSTM");
    assert_eq!(c.args, [Arg::Int(8), Arg::Int(5)]);
    assert_eq!(c.kw("dropout"), Some(&Arg::Float(0.3)));
    assert_eq!(c.kw("batch_first"), Some(&Arg::Bool(true)));
    assert_eq!(c.kw("nonlinearity").unwrap().str(), "relu");
    let c = parse("nn.Unflatten(1, (1, 8, 8))");
    assert_eq!(c.pos(1).sizes(), [1, 8, 8]);
    let c = parse("nn.BatchNorm2d(3, momentum=None)");
    assert_eq!(c.kw("momentum"), Some(&Arg::None));
    let c = parse("build_model('cnn', 64, 0.1)");
    assert_eq!(c.pos(0).str(), "cnn");
    assert_eq!(parse("nn.LayerNorm([2, 3])").pos(0).sizes(), [2, 3]);
}
