//! In-place arithmetic (`ops/inplace.rs`) bit-equal to PyTorch's CPU kernels on random inputs
//! (`tests/golden/tensor/inplace.json`, from `tools/golden_inplace.py`), the same bits at any
//! thread count, and read-only tensors refusing writes.

use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};
use serde_json::Value;

fn tensor(dtype: &str, shape: &[usize], bits: &[Value]) -> Tensor {
    match dtype {
        "f32" => {
            let v: Vec<f32> = bits
                .iter()
                .map(|b| f32::from_bits(b.as_i64().unwrap() as i32 as u32))
                .collect();
            Tensor::from_vec(v, shape).unwrap()
        }
        _ => {
            let v: Vec<f64> = bits
                .iter()
                .map(|b| f64::from_bits(b.as_i64().unwrap() as u64))
                .collect();
            Tensor::from_vec(v, shape).unwrap()
        }
    }
}

fn bits(t: &Tensor) -> Vec<u64> {
    match t.dtype() {
        DType::F32 => t
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits() as u64)
            .collect(),
        _ => t
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect(),
    }
}

fn shape(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect()
}

#[test]
fn inplace_ops_are_bit_equal_to_pytorch() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/golden/tensor/inplace.json"
    );
    let g: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut bad: Vec<String> = Vec::new();
    let cases = g["cases"].as_array().unwrap();
    for c in cases {
        let (op, dt) = (c["op"].as_str().unwrap(), c["dtype"].as_str().unwrap());
        let sh = shape(&c["shape"]);
        let mut x = tensor(dt, &sh, c["self"].as_array().unwrap());
        let o: Vec<Tensor> = c["operands"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| tensor(dt, &shape(&o["shape"]), o["bits"].as_array().unwrap()))
            .collect();
        let s: Vec<f64> = c["scalars"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        match op {
            "add_alpha_" => x.add_(&o[0], s[0]),
            "sub_" => x.sub_(&o[0], s[0]),
            "mul_" => x.mul_(&o[0]),
            "div_" => x.div_(&o[0]),
            "add_scalar_" => x.add_scalar_(s[0], s[1]),
            "mul_scalar_" => x.mul_scalar_(s[0]),
            "div_scalar_" => x.div_scalar_(s[0]),
            "addcmul_" => x.addcmul_(&o[0], &o[1], s[0]),
            "addcdiv_" => x.addcdiv_(&o[0], &o[1], s[0]),
            "lerp_" => x.lerp_(&o[0], s[0]),
            "lerp_tensor_" => x.lerp_tensor_(&o[0], &o[1]),
            "clamp_" => x.clamp_(Some(s[0]), Some(s[1])),
            "clamp_min_" => x.clamp_(Some(s[0]), None),
            "copy_" => x.copy_(&o[0]),
            "fill_" => x.fill_(s[0]),
            "zero_" => x.zero_(),
            _ => panic!("unknown op {op}"),
        }
        .unwrap();
        let want: Vec<u64> = c["out"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| match dt {
                "f32" => b.as_i64().unwrap() as i32 as u32 as u64,
                _ => b.as_i64().unwrap() as u64,
            })
            .collect();
        let got = bits(&x);
        let n = got.iter().zip(&want).filter(|(a, b)| a != b).count();
        if n > 0 {
            bad.push(format!(
                "{op} {dt} {sh:?} scalars {s:?}: {n} of {} differ",
                want.len()
            ));
        }
    }
    // Every case runs, the tail cases included (add_/sub_/add_ of a number with alpha ≠ 1 and
    // an operand constant along the innermost run).
    assert!(cases.len() > 800, "{} cases", cases.len());
    assert!(
        bad.is_empty(),
        "{} cases differ:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn same_bits_at_1_2_3_8_threads() {
    let n = 300_001;
    let v = |k: u64| {
        let x: Vec<f32> = (0..n as u64)
            .map(|i| ((i * 2654435761 + k) % 100_003) as f32 / 777.0 - 60.0)
            .collect();
        Tensor::from_vec(x, &[n]).unwrap()
    };
    let (a, b, c) = (v(1), v(2), v(3));
    let run = |t: usize| {
        with_num_threads(t, || {
            let mut x = a.clone();
            x.add_(&b, -0.0123).unwrap();
            // Constant operands: positions past the last whole vector round twice, by index.
            x.add_scalar_(0.3, 3.7).unwrap();
            x.sub_(&Tensor::scalar(1.5f32), 0.77).unwrap();
            x.addcmul_(&b, &c, 0.5).unwrap();
            x.lerp_(&c, 0.7).unwrap();
            x.clamp_(Some(-50.0), Some(50.0)).unwrap();
            bits(&x)
        })
    };
    let one = run(1);
    for t in [2, 3, 8] {
        assert_eq!(run(t), one, "{t} threads");
    }
    assert_eq!(
        bits(&a)[..3],
        bits(&v(1))[..3],
        "the clone's source is not written"
    );
}

#[test]
fn read_only_tensors_refuse_writes_naming_the_op() {
    let t = Tensor::from_vec(vec![1f32, 2.0], &[2])
        .unwrap()
        .into_read_only();
    let mut c = t.clone();
    let e = c.add_(&t, 2.0).unwrap_err().to_string();
    assert!(e.contains("add_alpha_") && e.contains("read-only"), "{e}");
    let mut v = t.view(&[1, 2]).unwrap();
    let e = v.uniform_(0.0, 1.0, None).unwrap_err().to_string();
    assert!(e.contains("uniform_") && e.contains("read-only"), "{e}");
    assert!(c.fill_(0.0).is_err() && c.add_(&t, 1.0).is_err());
    let mut w = t.try_deep_clone().unwrap();
    w.fill_(3.0).unwrap();
    assert_eq!(w.to_vec::<f32>().unwrap(), [3.0, 3.0]);
    assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 2.0]);
}

#[test]
fn bad_arguments_are_errors() {
    let mut x = Tensor::from_vec(vec![1f32, 2.0, 3.0], &[3]).unwrap();
    let y = Tensor::from_vec(vec![1f64, 2.0, 3.0], &[3]).unwrap();
    assert!(
        x.add_(&y, 0.5)
            .unwrap_err()
            .to_string()
            .contains("add_alpha_")
    );
    let z = Tensor::from_vec(vec![1f32, 2.0], &[2]).unwrap();
    assert!(x.mul_(&z).unwrap_err().to_string().contains("mul_"));
    assert!(
        x.clamp_(None, None)
            .unwrap_err()
            .to_string()
            .contains("At least one")
    );
    let mut i = Tensor::from_vec(vec![1i64], &[1]).unwrap();
    assert!(i.mul_scalar_(2.0).is_err());
    i.fill_(7.0).unwrap();
    assert_eq!(i.to_vec::<i64>().unwrap(), [7]);
}
