//! Attention and transformer layers against real PyTorch (`tests/golden/train/attention.json`,
//! written by `tools/golden_attention.py`), plus thread invariance, gradchecks and errors.
//!
//! * Initialisation: after `manual_seed(s)` each constructor gives PyTorch's `state_dict`
//!   (names, order, every float32 value bit for bit), its `named_parameters` names, and leaves
//!   the default generator in the same state.
//! * Dropout: the generator state after each forward pass equals PyTorch's (the same number of
//!   draws), and the outputs with dropout agree with PyTorch's to rounding — a mask differing in
//!   one position would move them by O(1).
//! * Values: float64 outputs, attention weights and gradients within 1e-10 relative; float32
//!   within 2e-5. Relative means per element `|a − b| ≤ tol · max(|b|, rms(reference))`.
//!   They are not bit-equal because PyTorch's CPU matmul (and, without dropout, its fused
//!   flash-attention kernel with an online softmax) sums in other orders; the rounding of
//!   those sums is about 1e-16 relative in f64 and 1e-7 in f32, and the tolerances leave
//!   room for its growth through softmax, layer norm and two residual blocks.

use lockstep_nn::functional as F;
use lockstep_nn::gradcheck::{gradcheck, gradcheck_vars};
use lockstep_nn::transformer::{
    Activation, DecoderMasks, LayerConfig, Mha, MultiheadAttention, RMSNorm,
    TransformerDecoderLayer, TransformerEncoderLayer,
};
use lockstep_nn::{Error, Forward, Module, Result, Var};
use lockstep_tensor::{DType, Tensor};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::sync::{Mutex, MutexGuard, OnceLock};

const F64_TOL: f64 = 1e-10;
const F32_TOL: f64 = 2e-5;

fn golden() -> &'static Value {
    static G: OnceLock<Value> = OnceLock::new();
    G.get_or_init(|| {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/golden/train/attention.json"
        );
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("{path}: {e} (regenerate with tools/golden_attention.py)"));
        serde_json::from_str(&text).expect("attention.json parses")
    })
}

/// The default generator is process-wide: tests that seed it or draw from it take this lock.
fn gen_lock() -> MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    L.lock().unwrap_or_else(|e| e.into_inner())
}

fn manual_seed(s: u64) {
    lockstep_rng::default_generator().manual_seed(s);
}

fn rng_sha256() -> String {
    Sha256::digest(lockstep_rng::default_generator().get_state())
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

fn num(x: &Value) -> f64 {
    match x {
        Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
        Value::String(s) if s == "inf" => f64::INFINITY,
        _ => x.as_f64().expect("a number"),
    }
}

fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let vals: Vec<f64> = v["values"].as_array().unwrap().iter().map(num).collect();
    match v["dtype"].as_str().unwrap() {
        "float32" => Tensor::from_vec(vals.iter().map(|&x| x as f32).collect(), &shape).unwrap(),
        "float64" => Tensor::from_vec(vals, &shape).unwrap(),
        "bool" => Tensor::from_vec(vals.iter().map(|&x| x != 0.0).collect(), &shape).unwrap(),
        d => panic!("dtype {d}"),
    }
}

fn close(what: &str, got: &Tensor, want: &Value) {
    let w = tensor(want);
    assert_eq!(got.shape(), w.shape(), "{what}: shape");
    let tol = if w.dtype() == DType::F32 {
        F32_TOL
    } else {
        F64_TOL
    };
    let (a, b) = (got.to_f64_vec(), w.to_f64_vec());
    let rms = (b.iter().map(|x| x * x).sum::<f64>() / b.len().max(1) as f64).sqrt();
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() <= tol * y.abs().max(rms),
            "{what}[{i}]: got {x}, PyTorch {y} (tolerance {tol} relative)"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// F::scaled_dot_product_attention

#[test]
fn sdpa_matches_torch() {
    let _g = gen_lock();
    let cases = golden()["sdpa"].as_array().unwrap();
    assert!(cases.len() >= 12);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let q = Var::new(tensor(&c["q"]), true);
        let k = Var::new(tensor(&c["k"]), true);
        let v = Var::new(tensor(&c["v"]), true);
        let mask = c.get("mask").map(tensor);
        let seed = c.get("dropout_seed").and_then(Value::as_u64);
        if let Some(s) = seed {
            manual_seed(s);
        }
        let out = F::scaled_dot_product_attention(
            &q,
            &k,
            &v,
            mask.as_ref(),
            c["dropout_p"].as_f64().unwrap(),
            c["is_causal"].as_bool().unwrap(),
            c["scale"].as_f64(),
        )
        .unwrap();
        if seed.is_some() {
            assert_eq!(
                rng_sha256(),
                c["rng_sha256_after"].as_str().unwrap(),
                "{name}: generator state after the dropout draws"
            );
        }
        close(&format!("{name} out"), &out.data(), &c["out"]);
        out.mul(&Var::constant(tensor(&c["w"])))
            .unwrap()
            .sum()
            .unwrap()
            .backward()
            .unwrap();
        close(&format!("{name} grad q"), &q.grad().unwrap(), &c["grad_q"]);
        close(&format!("{name} grad k"), &k.grad().unwrap(), &c["grad_k"]);
        close(&format!("{name} grad v"), &v.grad().unwrap(), &c["grad_v"]);
    }
}

// ---------------------------------------------------------------------------------------------
// Constructors, parsed from the script's strings.

enum Built {
    Mha(MultiheadAttention),
    Enc(TransformerEncoderLayer),
    Dec(TransformerDecoderLayer),
    Rms(RMSNorm),
}

impl Built {
    fn module(&mut self) -> &mut dyn Module {
        match self {
            Built::Mha(m) => m,
            Built::Enc(m) => m,
            Built::Dec(m) => m,
            Built::Rms(m) => m,
        }
    }
}

/// Splits `a, [b, c], d=e` at the top-level commas.
fn split_args(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0);
    for ch in s.chars() {
        match ch {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

fn build(ctor: &str) -> Built {
    let (name, rest) = ctor.split_once('(').unwrap();
    let args = split_args(rest.strip_suffix(')').unwrap());
    let (pos, kw): (Vec<&String>, Vec<&String>) = args.iter().partition(|a| !a.contains('='));
    let kw: Vec<(&str, &str)> = kw
        .iter()
        .map(|a| {
            let (k, v) = a.split_once('=').unwrap();
            (k.trim(), v.trim())
        })
        .collect();
    let get = |k: &str| kw.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
    let flag = |k: &str, d: bool| get(k).map_or(d, |v| v == "True");
    let float = |k: &str, d: f64| get(k).map_or(d, |v| v.parse().unwrap());
    let int = |s: &str| s.parse::<usize>().unwrap();
    let cfg = || LayerConfig {
        dim_feedforward: get("dim_feedforward").map_or(2048, int),
        dropout: float("dropout", 0.1),
        activation: get("activation")
            .map_or(Activation::Relu, |a| a.trim_matches('\'').parse().unwrap()),
        layer_norm_eps: float("layer_norm_eps", 1e-5),
        batch_first: flag("batch_first", false),
        norm_first: flag("norm_first", false),
        bias: flag("bias", true),
    };
    match name {
        "nn.MultiheadAttention" => Built::Mha(
            MultiheadAttention::with_options(
                int(pos[0]),
                int(pos[1]),
                float("dropout", 0.0),
                flag("bias", true),
                flag("batch_first", false),
            )
            .unwrap(),
        ),
        "nn.TransformerEncoderLayer" => Built::Enc(
            TransformerEncoderLayer::with_config(int(pos[0]), int(pos[1]), &cfg()).unwrap(),
        ),
        "nn.TransformerDecoderLayer" => Built::Dec(
            TransformerDecoderLayer::with_config(int(pos[0]), int(pos[1]), &cfg()).unwrap(),
        ),
        "nn.RMSNorm" => {
            let shape: Vec<usize> = pos[0]
                .trim_matches(|c| c == '[' || c == ']')
                .split(',')
                .map(|d| int(d.trim()))
                .collect();
            Built::Rms(
                RMSNorm::new(
                    &shape,
                    get("eps").map(|e| e.parse().unwrap()),
                    flag("elementwise_affine", true),
                )
                .unwrap(),
            )
        }
        other => panic!("unknown module {other}"),
    }
}

#[test]
fn init_matches_torch_bit_for_bit() {
    let _g = gen_lock();
    for c in golden()["init"].as_array().unwrap() {
        let ctor = c["ctor"].as_str().unwrap();
        manual_seed(c["seed"].as_u64().unwrap());
        let mut b = build(ctor);
        let m = b.module();
        assert_eq!(
            rng_sha256(),
            c["rng_sha256_after"].as_str().unwrap(),
            "{ctor}: generator state after construction"
        );
        let sd = m.named_all();
        let want = c["state_dict"].as_array().unwrap();
        assert_eq!(sd.len(), want.len(), "{ctor}: state_dict length");
        for (n, w) in sd.iter().zip(want) {
            assert_eq!(n.name, w[0].as_str().unwrap(), "{ctor}: state_dict order");
            let t = tensor(&w[1]);
            let got = n.var.data();
            assert_eq!(got.shape(), t.shape(), "{ctor} {}", n.name);
            let (a, e) = (got.to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());
            assert!(
                a.iter().zip(&e).all(|(x, y)| x.to_bits() == y.to_bits()),
                "{ctor} {}: values differ from PyTorch's",
                n.name
            );
        }
        let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
        let want: Vec<&str> = c["named_parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(names, want, "{ctor}: named_parameters");
    }
}

// ---------------------------------------------------------------------------------------------
// Forward and backward in float64.

fn opt_mask(kw: &Value, k: &str) -> Option<Tensor> {
    kw.get(k).map(tensor)
}

fn kw_bool(kw: &Value, k: &str, d: bool) -> bool {
    kw.get(k).and_then(Value::as_bool).unwrap_or(d)
}

#[test]
fn modules_match_torch() {
    let _g = gen_lock();
    let cases = golden()["modules"].as_array().unwrap();
    assert!(cases.len() >= 20);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        manual_seed(c["seed"].as_u64().unwrap());
        let mut b = build(c["ctor"].as_str().unwrap());
        b.module().to_dtype(DType::F64).unwrap();
        b.module().train(c["train"].as_bool().unwrap());
        let xs: Vec<Var> = c["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| Var::new(tensor(&p[1]), true))
            .collect();
        if let Some(s) = c["fwd_seed"].as_u64() {
            manual_seed(s);
        }
        let kw = &c["kwargs"];
        let (out, weights) = match &b {
            Built::Mha(m) => {
                let (q, k, v) = if c["self_attn"].as_bool().unwrap() {
                    (&xs[0], &xs[0], &xs[0])
                } else {
                    (&xs[0], &xs[1], &xs[2])
                };
                let (am, kpm) = (opt_mask(kw, "attn_mask"), opt_mask(kw, "key_padding_mask"));
                let o = Mha {
                    key_padding_mask: kpm.as_ref(),
                    need_weights: kw_bool(kw, "need_weights", true),
                    attn_mask: am.as_ref(),
                    average_attn_weights: kw_bool(kw, "average_attn_weights", true),
                    is_causal: kw_bool(kw, "is_causal", false),
                };
                m.forward(q, k, v, &o).unwrap()
            }
            Built::Enc(m) => {
                let (am, kpm) = (
                    opt_mask(kw, "src_mask"),
                    opt_mask(kw, "src_key_padding_mask"),
                );
                let y = m
                    .forward_masked(
                        &xs[0],
                        am.as_ref(),
                        kpm.as_ref(),
                        kw_bool(kw, "is_causal", false),
                    )
                    .unwrap();
                (y, None)
            }
            Built::Dec(m) => {
                let (tm, mm) = (opt_mask(kw, "tgt_mask"), opt_mask(kw, "memory_mask"));
                let (tk, mk) = (
                    opt_mask(kw, "tgt_key_padding_mask"),
                    opt_mask(kw, "memory_key_padding_mask"),
                );
                let masks = DecoderMasks {
                    tgt_mask: tm.as_ref(),
                    memory_mask: mm.as_ref(),
                    tgt_key_padding_mask: tk.as_ref(),
                    memory_key_padding_mask: mk.as_ref(),
                    tgt_is_causal: kw_bool(kw, "tgt_is_causal", false),
                    memory_is_causal: kw_bool(kw, "memory_is_causal", false),
                };
                (m.forward(&xs[0], &xs[1], &masks).unwrap(), None)
            }
            Built::Rms(m) => (m.forward(&xs[0]).unwrap(), None),
        };
        assert_eq!(
            rng_sha256(),
            c["rng_sha256_after"].as_str().unwrap(),
            "{name}: generator state after the forward pass (dropout draws)"
        );
        close(&format!("{name} out"), &out.data(), &c["out"]);
        let mut loss = out
            .mul(&Var::constant(tensor(&c["w"])))
            .unwrap()
            .sum()
            .unwrap();
        match (&weights, c.get("weights")) {
            (Some(w), Some(want)) => {
                close(&format!("{name} weights"), &w.data(), want);
                let l2 = w
                    .mul(&Var::constant(tensor(&c["w_weights"])))
                    .unwrap()
                    .sum()
                    .unwrap();
                loss = loss.add(&l2).unwrap();
            }
            (None, None) => {}
            _ => panic!(
                "{name}: attention weights returned when PyTorch does not, or not when it does"
            ),
        }
        loss.backward().unwrap();
        for (k, (x, g)) in xs
            .iter()
            .zip(c["grad_inputs"].as_array().unwrap())
            .enumerate()
        {
            close(&format!("{name} grad input {k}"), &x.grad().unwrap(), g);
        }
        let params = b.module().named_parameters();
        let want = c["grad_params"].as_array().unwrap();
        assert_eq!(params.len(), want.len(), "{name}: parameters");
        for ((n, p), w) in params.iter().zip(want) {
            assert_eq!(n, w[0].as_str().unwrap(), "{name}: parameter order");
            close(&format!("{name} grad {n}"), &p.grad().unwrap(), &w[1]);
        }
    }
}

#[test]
fn rms_norm_f32_default_eps_is_float32_epsilon() {
    let c = &golden()["rms_f32"];
    let m = RMSNorm::new(&[6], None, true).unwrap();
    let x = Var::new(tensor(&c["x"]), true);
    let y = m.forward(&x).unwrap();
    close("rms f32 out", &y.data(), &c["out"]);
    y.mul(&Var::constant(tensor(&c["w"])))
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
    close("rms f32 grad x", &x.grad().unwrap(), &c["grad_x"]);
    close(
        "rms f32 grad weight",
        &m.weight.as_ref().unwrap().grad().unwrap(),
        &c["grad_weight"],
    );
    // With eps = f64::EPSILON instead the output would differ at these magnitudes (1e-4).
    let other = F::rms_norm(&x, &[6], m.weight.as_ref(), Some(f64::EPSILON)).unwrap();
    assert_ne!(
        other.data().to_vec::<f32>().unwrap(),
        y.data().to_vec::<f32>().unwrap()
    );
}

// ---------------------------------------------------------------------------------------------
// Same bits at every thread count.

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect()
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    let mut g = lockstep_rng::Generator::with_seed(seed);
    let n = shape.iter().product();
    let mut v = vec![0f32; n];
    lockstep_rng::compat::torch::normal_(&mut g, &mut v, 0.0, 1.0).unwrap();
    Tensor::from_vec(v, shape).unwrap()
}

#[test]
fn same_bits_at_1_2_3_8_threads() {
    let _g = gen_lock();
    let run = |threads: usize| {
        lockstep_tensor::threads::with_num_threads(threads, || {
            lockstep_tensor::deterministic::scope(true, false, || {
                manual_seed(3);
                let cfg = LayerConfig {
                    dim_feedforward: 256,
                    dropout: 0.1,
                    norm_first: true,
                    activation: Activation::Gelu,
                    ..LayerConfig::default()
                };
                let enc = TransformerEncoderLayer::with_config(64, 4, &cfg).unwrap();
                let dec = TransformerDecoderLayer::with_config(64, 4, &cfg).unwrap();
                // Scores [8, 4, 48, 48] and feed-forward activations [48·8, 256] are past the
                // elementwise kernels' serial limit (2^16), so the teams really split them.
                let src = Var::new(randn(&[48, 8, 64], 1), true);
                let tgt = Var::new(randn(&[48, 8, 64], 2), true);
                let causal: Vec<bool> = (0..48 * 48).map(|i| i % 48 > i / 48).collect();
                let causal = Tensor::from_vec(causal, &[48, 48]).unwrap();
                let mem = enc.forward(&src).unwrap();
                let masks = DecoderMasks {
                    tgt_mask: Some(&causal),
                    ..DecoderMasks::default()
                };
                let y = dec.forward(&tgt, &mem, &masks).unwrap();
                let sdpa =
                    F::scaled_dot_product_attention(&y, &y, &y, None, 0.2, true, None).unwrap();
                let loss = sdpa.mul(&sdpa).unwrap().sum().unwrap();
                loss.backward().unwrap();
                let mut all = vec![bits(&sdpa.data()), bits(&src.grad().unwrap())];
                for p in enc.parameters().iter().chain(&dec.parameters()) {
                    all.push(bits(&p.grad().unwrap()));
                }
                all
            })
        })
    };
    let one = run(1);
    for n in [2, 3, 8] {
        assert!(run(n) == one, "bits differ between 1 and {n} threads");
    }
}

// ---------------------------------------------------------------------------------------------
// Gradchecks in float64.

fn f64t(shape: &[usize], seed: u64) -> Tensor {
    randn(shape, seed).to_dtype(DType::F64)
}

#[test]
fn gradcheck_sdpa_with_masks_and_scale() {
    let mask = Tensor::from_vec(
        vec![
            true, false, true, true, true, true, false, true, true, true, true, false,
        ],
        &[3, 4],
    )
    .unwrap();
    let fmask = f64t(&[2, 1, 3, 4], 9);
    let inputs = [
        f64t(&[2, 2, 3, 5], 1),
        f64t(&[2, 2, 4, 5], 2),
        f64t(&[2, 2, 4, 3], 3),
    ];
    for (m, causal, scale) in [
        (Some(&mask), false, None),
        (Some(&fmask), false, Some(0.7)),
        (None, true, Some(-0.4)),
    ] {
        gradcheck(
            |v| F::scaled_dot_product_attention(&v[0], &v[1], &v[2], m, 0.0, causal, scale),
            &inputs,
            1e-6,
            1e-6,
        )
        .unwrap();
    }
}

#[test]
fn gradcheck_mha_and_layers() {
    let _g = gen_lock();
    manual_seed(0);
    let mha = MultiheadAttention::new(6, 2).unwrap();
    mha.to_dtype(DType::F64).unwrap();
    let x = Var::new(f64t(&[4, 2, 6], 4), true);
    let kpm = Tensor::from_vec(
        vec![false, false, true, false, false, false, false, false],
        &[2, 4],
    )
    .unwrap();
    let mut vars = mha.parameters();
    vars.push(x.clone());
    for need_weights in [true, false] {
        let o = Mha {
            key_padding_mask: Some(&kpm),
            need_weights,
            ..Mha::default()
        };
        gradcheck_vars(
            || {
                let (y, w) = mha.forward(&x, &x, &x, &o)?;
                match w {
                    Some(w) => y.sum()?.add(&w.mul(&w)?.sum()?),
                    None => Ok(y),
                }
            },
            &vars,
            1e-6,
            1e-6,
        )
        .unwrap();
    }
    let cfg = LayerConfig {
        dim_feedforward: 8,
        dropout: 0.0,
        norm_first: true,
        activation: Activation::Gelu,
        ..LayerConfig::default()
    };
    let dec = TransformerDecoderLayer::with_config(6, 3, &cfg).unwrap();
    dec.to_dtype(DType::F64).unwrap();
    let mem = Var::new(f64t(&[5, 2, 6], 5), true);
    let mut vars = dec.parameters();
    vars.extend([x.clone(), mem.clone()]);
    gradcheck_vars(
        || dec.forward(&x, &mem, &DecoderMasks::default()),
        &vars,
        1e-6,
        1e-6,
    )
    .unwrap();
    let rms = RMSNorm::new(&[2, 3], None, true).unwrap();
    rms.to_dtype(DType::F64).unwrap();
    let r = Var::new(f64t(&[4, 2, 3], 6), true);
    let mut vars = rms.parameters();
    vars.push(r.clone());
    gradcheck_vars(|| rms.forward(&r), &vars, 1e-6, 1e-6).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Errors name the argument.

fn arg_of<T>(r: Result<T>) -> &'static str {
    match r {
        Err(Error::InvalidArgument { arg, .. }) => arg,
        Err(e) => panic!("expected InvalidArgument, got {e:?}"),
        Ok(_) => panic!("expected an error"),
    }
}

#[test]
fn bad_arguments_are_named() {
    let _g = gen_lock();
    assert_eq!(arg_of(MultiheadAttention::new(10, 3)), "num_heads");
    assert_eq!(arg_of(MultiheadAttention::new(8, 0)), "num_heads");
    assert_eq!(arg_of(MultiheadAttention::new(0, 1)), "embed_dim");
    assert_eq!(
        arg_of(MultiheadAttention::with_options(8, 2, 1.5, true, false)),
        "dropout"
    );
    assert_eq!(arg_of(RMSNorm::new(&[], None, true)), "normalized_shape");
    assert_eq!(
        arg_of(TransformerEncoderLayer::with_config(
            6,
            4,
            &LayerConfig::default()
        )),
        "num_heads"
    );
    assert_eq!(arg_of("tanh".parse::<Activation>()), "activation");

    let mha = MultiheadAttention::new(8, 2).unwrap();
    let x = Var::constant(Tensor::zeros(&[5, 2, 8], DType::F32).unwrap());
    let fwd = |q: &Var, k: &Var, o: &Mha<'_>| mha.forward(q, k, k, o);
    let wrong = Var::constant(Tensor::zeros(&[5, 2, 6], DType::F32).unwrap());
    assert_eq!(arg_of(fwd(&wrong, &x, &Mha::default())), "query");
    assert_eq!(arg_of(fwd(&x, &wrong, &Mha::default())), "key");
    let other_batch = Var::constant(Tensor::zeros(&[5, 3, 8], DType::F32).unwrap());
    assert_eq!(arg_of(fwd(&x, &other_batch, &Mha::default())), "key");
    let m = Tensor::from_vec(vec![false; 20], &[4, 5]).unwrap();
    let o = Mha {
        attn_mask: Some(&m),
        ..Mha::default()
    };
    assert_eq!(arg_of(fwd(&x, &x, &o)), "attn_mask");
    let m3 = Tensor::zeros(&[3, 5, 5], DType::F32).unwrap();
    let o = Mha {
        attn_mask: Some(&m3),
        ..Mha::default()
    };
    assert_eq!(arg_of(fwd(&x, &x, &o)), "attn_mask");
    let wrong_dtype = Tensor::zeros(&[5, 5], DType::F64).unwrap();
    let o = Mha {
        attn_mask: Some(&wrong_dtype),
        ..Mha::default()
    };
    assert_eq!(arg_of(fwd(&x, &x, &o)), "attn_mask");
    let kpm = Tensor::from_vec(vec![false; 10], &[5, 2]).unwrap();
    let o = Mha {
        key_padding_mask: Some(&kpm),
        ..Mha::default()
    };
    assert_eq!(arg_of(fwd(&x, &x, &o)), "key_padding_mask");
    let o = Mha {
        is_causal: true,
        ..Mha::default()
    };
    assert_eq!(arg_of(fwd(&x, &x, &o)), "attn_mask");

    let q = Var::constant(Tensor::zeros(&[2, 4, 8], DType::F32).unwrap());
    let k = Var::constant(Tensor::zeros(&[2, 5, 8], DType::F32).unwrap());
    let k6 = Var::constant(Tensor::zeros(&[2, 5, 6], DType::F32).unwrap());
    let v4 = Var::constant(Tensor::zeros(&[2, 4, 8], DType::F32).unwrap());
    let v64 = Var::constant(Tensor::zeros(&[2, 5, 8], DType::F64).unwrap());
    let sdpa = |q: &Var, k: &Var, v: &Var, m: Option<&Tensor>, p: f64, c: bool| {
        F::scaled_dot_product_attention(q, k, v, m, p, c, None)
    };
    assert_eq!(arg_of(sdpa(&q, &k6, &k6, None, 0.0, false)), "key");
    assert_eq!(arg_of(sdpa(&q, &k, &v4, None, 0.0, false)), "value");
    assert_eq!(arg_of(sdpa(&q, &k, &v64, None, 0.0, false)), "value");
    assert_eq!(arg_of(sdpa(&q, &k, &k, None, 1.5, false)), "dropout_p");
    let bad_mask = Tensor::from_vec(vec![true; 16], &[4, 4]).unwrap();
    assert_eq!(
        arg_of(sdpa(&q, &k, &k, Some(&bad_mask), 0.0, false)),
        "attn_mask"
    );
    let big_mask = Tensor::from_vec(vec![true; 60], &[3, 4, 5]).unwrap();
    assert_eq!(
        arg_of(sdpa(&q, &k, &k, Some(&big_mask), 0.0, false)),
        "attn_mask"
    );
    let ok_mask = Tensor::from_vec(vec![true; 20], &[4, 5]).unwrap();
    assert_eq!(
        arg_of(sdpa(&q, &k, &k, Some(&ok_mask), 0.0, true)),
        "attn_mask"
    );
    assert!(sdpa(&q, &k, &k, Some(&ok_mask), 0.0, false).is_ok());
    let x1 = Var::constant(Tensor::zeros(&[3, 5], DType::F32).unwrap());
    assert_eq!(arg_of(F::rms_norm(&x1, &[4], None, None)), "input");
    let w = Var::constant(Tensor::zeros(&[4], DType::F32).unwrap());
    assert_eq!(arg_of(F::rms_norm(&x1, &[5], Some(&w), None)), "weight");
}
