//! Per-sample dropout ([`with_sample_keys`]) and the [`StreamKey`] streams behind it against
//! real NumPy (`tests/golden/nn/sample_keys.json`, from `tools/golden_sample_keys.py`): the
//! masks of consecutive dropout calls, for a batch along dimension 0 or 1, and each sample's
//! own stream (the data loader's).

use lockstep_nn::Var;
use lockstep_nn::rng::{SampleKeys, dropout_batch_dim, with_sample_keys};
use lockstep_rng::StreamKey;
use lockstep_tensor::{DType, Tensor};
use serde_json::Value;

fn golden() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/golden/nn/sample_keys.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

#[test]
fn per_sample_dropout_and_sample_streams_match_numpy() {
    let g = golden();
    let cases = g["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 3);
    for c in cases {
        let seed: u64 = c["seed"].as_str().unwrap().parse().unwrap();
        let epoch = c["epoch"].as_u64().unwrap();
        let indices = u64s(&c["indices"]);
        let p = c["p"].as_f64().unwrap();
        let shape: Vec<usize> = u64s(&c["shape"]).iter().map(|&d| d as usize).collect();
        let batch_dim = c["batch_dim"].as_u64().unwrap() as usize;
        let want: Vec<Vec<u64>> = c["outputs"].as_array().unwrap().iter().map(u64s).collect();
        let x = Var::constant(Tensor::ones(&shape, DType::F32).unwrap());
        let keys = SampleKeys::new(seed, epoch, indices.clone());
        let got: Vec<Vec<u64>> = with_sample_keys(keys, || {
            (0..want.len())
                .map(|_| {
                    let y = dropout_batch_dim(&x, p, true, batch_dim).unwrap();
                    y.data()
                        .to_vec::<f32>()
                        .unwrap()
                        .iter()
                        .map(|v| u64::from(v.to_bits()))
                        .collect()
                })
                .collect()
        });
        assert_eq!(got, want, "seed {seed} epoch {epoch}");
        for (i, own) in indices.iter().zip(c["own_stream"].as_array().unwrap()) {
            let mut u = [0f32; 4];
            StreamKey::sample(seed, epoch, *i)
                .generator()
                .random_f32(&mut u);
            let u: Vec<u64> = u.iter().map(|v| u64::from(v.to_bits())).collect();
            assert_eq!(u, u64s(own), "seed {seed} epoch {epoch} index {i}");
        }
    }
}
