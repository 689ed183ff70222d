//! Issue 28's primitives on `Var` and in `nn`: `LayerNorm` without a bias, `masked_fill`,
//! `split`/`split_with_sizes`, and 4-D batched `matmul` gradients, against values from real
//! PyTorch (`tools/golden_transformer_prims.py` → `tests/golden/transformer_prims.json`).

use lockstep_nn::Var;
use lockstep_nn::layers::LayerNorm;
use lockstep_nn::module::{Forward, Module};
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};
use serde_json::Value;

fn golden() -> Value {
    let path = format!(
        "{}/../../tests/golden/transformer_prims.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn num(v: &Value) -> f64 {
    match v {
        Value::Number(x) => x.as_f64().expect("a number"),
        Value::String(s) if s == "nan" => f64::NAN,
        Value::String(s) if s == "inf" => f64::INFINITY,
        Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
        Value::Bool(b) => f64::from(u8::from(*b)),
        other => panic!("not a number: {other:?}"),
    }
}

/// A golden tensor in its own dtype.
fn tensor(j: &Value) -> Tensor {
    let shape: Vec<usize> = j["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    let data: Vec<f64> = j["data"].as_array().unwrap().iter().map(num).collect();
    match j["dtype"].as_str().unwrap() {
        "f32" => Tensor::from_vec(data.iter().map(|&v| v as f32).collect(), &shape),
        "f64" => Tensor::from_vec(data, &shape),
        "i64" => Tensor::from_vec(data.iter().map(|&v| v as i64).collect(), &shape),
        "u8" => Tensor::from_vec(data.iter().map(|&v| v as u8).collect(), &shape),
        "bool" => Tensor::from_vec(data.iter().map(|&v| v != 0.0).collect(), &shape),
        other => panic!("unknown dtype {other}"),
    }
    .unwrap()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).to_vec::<f64>().unwrap()
}

/// Same shape, and every value within `rel` of PyTorch's (relative to the largest magnitude of
/// the golden tensor: float sums may be ordered differently). Returns how many values are
/// bit-identical.
fn assert_close(what: &str, ours: &Tensor, want: &Value, rel: f64) -> (usize, usize) {
    let w = tensor(want);
    assert_eq!(ours.shape(), w.shape(), "{what}: shape");
    assert_eq!(ours.dtype(), w.dtype(), "{what}: dtype");
    let (a, b) = (f64s(ours), f64s(&w));
    let scale = b.iter().fold(0f64, |m, x| m.max(x.abs())).max(1e-30);
    let mut exact = 0;
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let same = x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
        assert!(
            same || (x - y).abs() <= rel * scale,
            "{what}[{i}]: ours {x}, torch {y}"
        );
        exact += usize::from(x.to_bits() == y.to_bits());
    }
    (exact, a.len())
}

#[test]
fn layer_norm_without_bias_has_a_weight_only() {
    let ln = LayerNorm::with_options(&[4], true, false).unwrap();
    let names: Vec<String> = ln.state_dict().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["weight"]);
    assert!(ln.bias.is_none());
    let with = LayerNorm::with_options(&[4], true, true).unwrap();
    let names: Vec<String> = with.state_dict().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["weight", "bias"]);
    // PyTorch ignores `bias` without an affine transform: no parameters at all.
    assert!(
        LayerNorm::with_options(&[4], false, true)
            .unwrap()
            .state_dict()
            .is_empty()
    );
    assert!(LayerNorm::with_options(&[], true, false).is_err());
}

/// `nn.LayerNorm(n, bias=False)`: output and the gradients of the input and the weight.
#[test]
fn layer_norm_without_bias_matches_pytorch() {
    let g = golden();
    for (i, c) in g["layer_norm"].as_array().unwrap().iter().enumerate() {
        let ns: Vec<usize> = c["normalized_shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        let ln = LayerNorm::with_options(&ns, true, false).unwrap();
        let names: Vec<String> = ln.state_dict().into_iter().map(|(n, _)| n).collect();
        let want: Vec<&str> = c["state_dict"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(names, want);
        ln.weight
            .as_ref()
            .unwrap()
            .set_data(tensor(&c["weight"]))
            .unwrap();
        let x = Var::new(tensor(&c["x"]), true);
        let y = ln.forward(&x).unwrap();
        assert_close(&format!("layer_norm {i} y"), &y.data(), &c["y"], 1e-6);
        y.backward_with(&tensor(&c["grad_out"])).unwrap();
        assert_close(
            &format!("layer_norm {i} grad x"),
            &x.grad().unwrap(),
            &c["grad_x"],
            1e-6,
        );
        let gw = ln.weight.as_ref().unwrap().grad().unwrap();
        assert_close(
            &format!("layer_norm {i} grad w"),
            &gw,
            &c["grad_weight"],
            1e-6,
        );
    }
}

/// `x.masked_fill(mask, v)` and its gradient (zero where the mask is true; summed back when
/// `x` was broadcast against a larger mask), bit for bit.
#[test]
fn masked_fill_gradient_matches_pytorch() {
    let g = golden();
    let mut graded = 0;
    for (i, c) in g["masked_fill"].as_array().unwrap().iter().enumerate() {
        let Some(go) = c.get("grad_out") else {
            continue;
        };
        let x = Var::new(tensor(&c["x"]), true);
        let y = x
            .masked_fill(&tensor(&c["mask"]), num(&c["value"]))
            .unwrap();
        let (e, n) = assert_close(&format!("masked_fill {i}"), &y.data(), &c["out"], 0.0);
        assert_eq!(e, n);
        y.backward_with(&tensor(go)).unwrap();
        let (e, n) = assert_close(
            &format!("masked_fill {i} grad"),
            &x.grad().unwrap(),
            &c["grad_x"],
            0.0,
        );
        assert_eq!(e, n, "masked_fill {i}: gradient bits");
        graded += 1;
    }
    assert!(graded >= 4);
    let x = Var::new(Tensor::ones(&[2, 2], DType::F32).unwrap(), true);
    assert!(
        x.masked_fill(&Tensor::ones(&[2, 2], DType::F32).unwrap(), 0.0)
            .is_err()
    );
}

/// `(B, H, T, d) @ (B, H, d, T)`, and with the right operand a `transpose(-2, -1)` view of a
/// `(B, H, T, d)` leaf: PyTorch's product and gradients of both operands.
#[test]
fn batched_4d_matmul_gradients_match_pytorch() {
    let g = golden();
    let (mut exact, mut total) = (0, 0);
    for (i, c) in g["matmul"].as_array().unwrap().iter().enumerate() {
        let a = Var::new(tensor(&c["a"]), true);
        let b = Var::new(tensor(&c["b"]), true);
        let rhs = if c["transpose_b"].as_bool().unwrap() {
            b.transpose(-2, -1).unwrap()
        } else {
            b.clone()
        };
        let y = a.matmul(&rhs).unwrap();
        let (e, n) = assert_close(&format!("matmul {i} y"), &y.data(), &c["y"], 1e-6);
        (exact, total) = (exact + e, total + n);
        y.backward_with(&tensor(&c["grad_out"])).unwrap();
        for (what, t, want) in [
            ("grad a", a.grad().unwrap(), &c["grad_a"]),
            ("grad b", b.grad().unwrap(), &c["grad_b"]),
        ] {
            let (e, n) = assert_close(&format!("matmul {i} {what}"), &t, want, 1e-6);
            (exact, total) = (exact + e, total + n);
        }
    }
    eprintln!("4-D matmul: {exact} of {total} values bit-identical to PyTorch");
}

/// `split` and `split_with_sizes` on a `Var`: the pieces, and each piece's gradient back in
/// its place.
#[test]
fn split_pieces_and_gradients() {
    let x = Var::new(
        Tensor::arange(0.0, 20.0, 1.0, DType::F32)
            .unwrap()
            .reshape(&[2, 10])
            .unwrap(),
        true,
    );
    let parts = x.split(3, 1).unwrap();
    assert_eq!(
        parts.iter().map(|p| p.shape()[1]).collect::<Vec<_>>(),
        [3, 3, 3, 1]
    );
    assert_eq!(f64s(&parts[3].data()), [9.0, 19.0]);
    // loss = Σ (k + 1) · piece_k: the gradient is k + 1 on piece k's columns.
    let mut loss: Option<Var> = None;
    for (k, p) in parts.iter().enumerate() {
        let s = p.mul_scalar(k as f64 + 1.0).unwrap().sum().unwrap();
        loss = Some(match loss {
            None => s,
            Some(l) => l.add(&s).unwrap(),
        });
    }
    loss.unwrap().backward().unwrap();
    let row = [1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 3.0, 3.0, 4.0];
    assert_eq!(f64s(&x.grad().unwrap()), [row, row].concat());
    let parts = x.split_with_sizes(&[1, 1], 0).unwrap();
    assert_eq!(parts[1].shape(), [1, 10]);
    assert!(x.split_with_sizes(&[1, 2], 0).is_err());
    assert!(x.split(0, 0).is_err());
    assert!(x.split(2, 2).is_err());
}

/// The Var ops' backward through dispatch at 1, 2, 3 and 8 threads: the same bits.
#[test]
fn masked_fill_backward_is_thread_invariant() {
    let (b, n) = (4, 150);
    let v: Vec<f32> = (0..b * n * n)
        .map(|k| ((k * 37 + 11) % 23) as f32 * 0.07)
        .collect();
    let run = || {
        let x = Var::new(Tensor::from_vec(v.clone(), &[b, n, n]).unwrap(), true);
        let causal = Tensor::ones(&[n, n], DType::Bool).unwrap().triu(1).unwrap();
        let y = x
            .masked_fill(&causal, f64::NEG_INFINITY)
            .unwrap()
            .softmax(-1)
            .unwrap();
        y.backward_with(&Tensor::from_vec(v.clone(), &[b, n, n]).unwrap())
            .unwrap();
        (
            y.data().to_vec::<f32>().unwrap(),
            x.grad().unwrap().to_vec::<f32>().unwrap(),
        )
    };
    let one = with_num_threads(1, run);
    for t in [2, 3, 8] {
        assert!(with_num_threads(t, run) == one, "threads = {t}");
    }
}
