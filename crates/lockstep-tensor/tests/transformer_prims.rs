//! Issue 28's tensor primitives against real PyTorch (`tools/golden_transformer_prims.py` →
//! `tests/golden/transformer_prims.json`): comparisons with PyTorch's promotion and their
//! scalar forms, `masked_fill`, `tril`/`triu`, `topk` with PyTorch's CPU order of ties and NaN,
//! `split` lengths, `arange`; every value bit for bit. Bad input is an error naming the op.

use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Error, Tensor};
use serde_json::Value;

fn golden() -> Value {
    let path = format!(
        "{}/../../tests/golden/transformer_prims.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A number of the golden file (NaN and the infinities are strings there).
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

fn dtype(s: &str) -> DType {
    match s {
        "f32" => DType::F32,
        "f64" => DType::F64,
        "i64" => DType::I64,
        "u8" => DType::U8,
        "bool" => DType::Bool,
        other => panic!("unknown dtype {other}"),
    }
}

/// A golden tensor, built in its own dtype from exact values.
fn tensor(j: &Value) -> Tensor {
    let shape: Vec<usize> = j["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    let data: Vec<f64> = j["data"].as_array().unwrap().iter().map(num).collect();
    match dtype(j["dtype"].as_str().unwrap()) {
        DType::F32 => Tensor::from_vec(data.iter().map(|&v| v as f32).collect(), &shape),
        DType::F64 => Tensor::from_vec(data, &shape),
        DType::I64 => Tensor::from_vec(data.iter().map(|&v| v as i64).collect(), &shape),
        DType::U8 => Tensor::from_vec(data.iter().map(|&v| v as u8).collect(), &shape),
        DType::Bool => Tensor::from_vec(data.iter().map(|&v| v != 0.0).collect(), &shape),
    }
    .unwrap()
}

/// The values as `f64` bit patterns (every dtype here widens exactly; NaN as one pattern).
fn bits(t: &Tensor) -> Vec<u64> {
    t.to_dtype(DType::F64)
        .to_vec::<f64>()
        .unwrap()
        .iter()
        .map(|x| if x.is_nan() { u64::MAX } else { x.to_bits() })
        .collect()
}

/// `ours` has the golden tensor's dtype, shape and bits.
fn assert_same(what: &str, ours: &Tensor, want: &Value) {
    let w = tensor(want);
    assert_eq!(ours.dtype(), w.dtype(), "{what}: dtype");
    assert_eq!(ours.shape(), w.shape(), "{what}: shape");
    assert_eq!(bits(ours), bits(&w), "{what}: values");
}

fn compare(op: &str, a: &Tensor, b: &Tensor) -> lockstep_tensor::Result<Tensor> {
    match op {
        "eq" => a.eq(b),
        "ne" => a.ne(b),
        "lt" => a.lt(b),
        "le" => a.le(b),
        "gt" => a.gt(b),
        "ge" => a.ge(b),
        other => panic!("unknown comparison {other}"),
    }
}

fn compare_scalar(op: &str, a: &Tensor, s: f64) -> lockstep_tensor::Result<Tensor> {
    match op {
        "eq" => a.eq_scalar(s),
        "ne" => a.ne_scalar(s),
        "lt" => a.lt_scalar(s),
        "le" => a.le_scalar(s),
        "gt" => a.gt_scalar(s),
        "ge" => a.ge_scalar(s),
        other => panic!("unknown comparison {other}"),
    }
}

#[test]
fn comparisons_promote_broadcast_and_treat_nan_as_pytorch() {
    let g = golden();
    let cases = g["compare"].as_array().unwrap();
    for (i, c) in cases.iter().enumerate() {
        let op = c["op"].as_str().unwrap();
        let out = compare(op, &tensor(&c["a"]), &tensor(&c["b"])).unwrap();
        assert_same(&format!("compare case {i} ({op})"), &out, &c["out"]);
    }
    let cases = g["compare_scalar"].as_array().unwrap();
    for (i, c) in cases.iter().enumerate() {
        let op = c["op"].as_str().unwrap();
        let out = compare_scalar(op, &tensor(&c["a"]), num(&c["scalar"])).unwrap();
        assert_same(&format!("scalar case {i} ({op})"), &out, &c["out"]);
    }
    assert!(cases.len() >= 200);
}

#[test]
fn masked_fill_tril_triu_match_pytorch() {
    let g = golden();
    for (i, c) in g["masked_fill"].as_array().unwrap().iter().enumerate() {
        let out = tensor(&c["x"])
            .masked_fill(&tensor(&c["mask"]), num(&c["value"]))
            .unwrap();
        assert_same(&format!("masked_fill case {i}"), &out, &c["out"]);
    }
    let cases = g["triangles"].as_array().unwrap();
    for (i, c) in cases.iter().enumerate() {
        let (x, d) = (tensor(&c["x"]), c["diagonal"].as_i64().unwrap());
        assert_same(&format!("tril case {i}"), &x.tril(d).unwrap(), &c["tril"]);
        assert_same(&format!("triu case {i}"), &x.triu(d).unwrap(), &c["triu"]);
    }
    assert!(cases.len() >= 30);
}

/// The order of ties and NaN is PyTorch's CPU kernel's, in both of its code paths.
#[test]
fn topk_matches_pytorch_ties_and_nan() {
    let g = golden();
    let cases = g["topk"].as_array().unwrap();
    let (mut ties, mut partial) = (0, 0);
    for (i, c) in cases.iter().enumerate() {
        let x = tensor(&c["x"]);
        let k = c["k"].as_u64().unwrap() as usize;
        let dim = c["dim"].as_i64().unwrap() as isize;
        let (largest, sorted) = (
            c["largest"].as_bool().unwrap(),
            c["sorted"].as_bool().unwrap(),
        );
        let (v, idx) = x.topk(k, dim, largest, sorted).unwrap();
        let what = format!("topk case {i} (k {k}, dim {dim}, largest {largest}, sorted {sorted})");
        assert_same(&what, &v, &c["values"]);
        assert_same(&what, &idx, &c["indices"]);
        let n = x.shape()[dim as usize];
        let distinct = {
            let mut b = bits(&x);
            b.sort_unstable();
            b.dedup();
            b.len()
        };
        ties += usize::from(distinct < x.numel());
        partial += usize::from(k > 0 && k * 64 <= n);
    }
    assert!(
        ties > 150 && partial > 5,
        "ties {ties}, partial_sort path {partial}"
    );
}

#[test]
fn split_and_arange_match_pytorch() {
    let g = golden();
    for c in g["split"].as_array().unwrap() {
        let n = c["n"].as_u64().unwrap() as usize;
        let size = c["split_size"].as_u64().unwrap() as usize;
        let want: Vec<usize> = c["lengths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        let x = Tensor::arange(0.0, n as f64, 1.0, DType::F32)
            .unwrap()
            .reshape(&[1, n as isize])
            .unwrap();
        let parts = x.split(size, 1).unwrap();
        let lens: Vec<usize> = parts.iter().map(|p| p.shape()[1]).collect();
        assert_eq!(lens, want, "split({n}, {size})");
        // Views in order, covering the dimension.
        let back = Tensor::cat(&parts, 1).unwrap();
        assert_eq!(bits(&back), bits(&x));
        let sizes = x.split_with_sizes(&want, -1).unwrap();
        assert_eq!(sizes.iter().map(|p| p.shape()[1]).collect::<Vec<_>>(), want);
    }
    for c in g["arange"].as_array().unwrap() {
        let dt = dtype(c["dtype"].as_str().unwrap());
        let t = Tensor::arange(num(&c["start"]), num(&c["end"]), num(&c["step"]), dt).unwrap();
        assert_same("arange", &t, &c["out"]);
    }
}

/// Promoted comparisons (a copy in the common dtype, then the chunked kernel) above the serial
/// size: the same bits at 1, 2, 3 and 8 threads.
#[test]
fn promoted_comparisons_are_thread_invariant() {
    let n = 200_003;
    let a = Tensor::from_vec((0..n).map(|i| (i % 97) as i64 - 40).collect(), &[n]).unwrap();
    let b = Tensor::from_vec(
        (0..n).map(|i| ((i % 89) as f32 - 40.0) * 0.75).collect(),
        &[n],
    )
    .unwrap();
    let run = || {
        [
            a.lt(&b).unwrap(),
            a.eq_scalar(3.0).unwrap(),
            b.ge_scalar(-0.75).unwrap(),
        ]
        .map(|t| t.to_vec::<bool>().unwrap())
    };
    let one = with_num_threads(1, run);
    for t in [2, 3, 8] {
        assert!(with_num_threads(t, run) == one, "threads = {t}");
    }
}

fn arg_error(e: Error) -> (&'static str, String) {
    match e {
        Error::InvalidArgument { op, arg, .. } => (op, arg.to_string()),
        Error::ShapeMismatch { op, .. } => (op, "shape".to_string()),
        Error::DType { op, .. } => (op, "dtype".to_string()),
        Error::DimOutOfRange { op, .. } => (op, "dim".to_string()),
        other => panic!("unexpected error {other:?}"),
    }
}

#[test]
fn bad_input_is_an_error_naming_the_op() {
    let x = Tensor::from_vec(vec![1f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let mask_u8 = Tensor::from_vec(vec![1u8, 0, 1], &[3]).unwrap();
    let mask = Tensor::from_vec(vec![true, false], &[2]).unwrap();
    let cases: Vec<(lockstep_tensor::Result<()>, (&str, &str))> = vec![
        (
            x.masked_fill(&mask_u8, 0.0).map(drop),
            ("masked_fill", "dtype"),
        ),
        (
            x.masked_fill(&mask, 0.0).map(drop),
            ("masked_fill", "shape"),
        ),
        (
            x.lt(&Tensor::zeros(&[2], DType::F64).unwrap()).map(drop),
            ("lt", "shape"),
        ),
        (x.topk(4, 1, true, true).map(drop), ("topk", "k")),
        (x.topk(1, 2, true, true).map(drop), ("topk", "dim")),
        (mask.topk(1, 0, true, true).map(drop), ("topk", "input")),
        (
            x.reshape(&[-1]).unwrap().tril(0).map(drop),
            ("tril", "input"),
        ),
        (Tensor::scalar(1f32).triu(0).map(drop), ("triu", "input")),
        (x.split(0, 1).map(drop), ("split", "split_size")),
        (x.split(1, -3).map(drop), ("split", "dim")),
        (
            x.split_with_sizes(&[1, 1], 1).map(drop),
            ("split_with_sizes", "split_sizes"),
        ),
    ];
    for (r, (op, arg)) in cases {
        let (got_op, got_arg) = arg_error(r.unwrap_err());
        assert_eq!(got_op, op);
        assert_eq!(got_arg, arg, "{op}");
    }
}

/// `masked_fill` with a dense mask over the trailing dimensions (attention's causal mask over
/// batch × heads: the straight-loop path) gives, element by element, the input or the fill as
/// the mask says, at 1, 2, 3 and 8 threads and with leading size-1 mask dimensions; a
/// transposed input (the strided path) agrees.
#[test]
fn masked_fill_of_a_trailing_mask_is_elementwise_at_any_thread_count() {
    let (b, h, t) = (16, 4, 64);
    let n = b * h * t * t;
    let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
    let m: Vec<bool> = (0..t * t).map(|i| i % t > i / t).collect();
    let xt = Tensor::from_vec(x.clone(), &[b, h, t, t]).unwrap();
    let mt = Tensor::from_vec(m.clone(), &[t, t]).unwrap();
    let want: Vec<u32> = (0..n)
        .map(|i| {
            if m[i % (t * t)] {
                f32::NEG_INFINITY
            } else {
                x[i]
            }
            .to_bits()
        })
        .collect();
    for threads in [1, 2, 3, 8] {
        for mask in [
            mt.clone(),
            mt.reshape(&[1, 1, t as isize, t as isize]).unwrap(),
        ] {
            let got = with_num_threads(threads, || {
                xt.masked_fill(&mask, f64::NEG_INFINITY)
                    .unwrap()
                    .to_vec::<f32>()
                    .unwrap()
            });
            let bits: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
            assert!(bits == want, "{threads} threads, mask {:?}", mask.shape());
        }
        // Through a view: the transpose of the last two dimensions, the mask transposed too.
        let got = with_num_threads(threads, || {
            xt.transpose(2, 3)
                .unwrap()
                .masked_fill(&mt.transpose(0, 1).unwrap(), f64::NEG_INFINITY)
                .unwrap()
                .transpose(2, 3)
                .unwrap()
                .contiguous()
                .to_vec::<f32>()
                .unwrap()
        });
        let bits: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
        assert!(bits == want, "{threads} threads, through a view");
    }
}
