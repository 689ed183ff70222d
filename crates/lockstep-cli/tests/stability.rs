//! Value stability: the bits that deterministic runs produce are pinned here, so that no change
//! to a kernel, an op's summation order or the training layer alters them silently.
//!
//! Policy (README, "What is guaranteed"): within a minor version, the same seed and flags give
//! the same `final_sha256` and the same kernel outputs on every machine lockstep runs on. A
//! change that alters any value pinned here must update `PINNED` in the same commit and add a
//! line under "Value changes" in CHANGELOG.md saying what changed and why.

use lockstep_cli::train::{Quiet, TrainConfig, run};
use sha2::{Digest, Sha256};
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

/// `(what, sha256)` pinned at the last value change. On a mismatch the test prints the current
/// list in this form.
const PINNED: &[(&str, &str)] = &[
    (
        "train mlp 24 steps",
        "cd7123bc35be49b8448d53e9efced7e4233c9f2f3bd5f0c6bb787eddb713d629",
    ),
    (
        "train cnn 24 steps",
        "fe543789c4ff381ccc0d3e6b40e6c6ed44da448afbf2a7a9fa75caa8bb20dd06",
    ),
    (
        "train lstm 24 steps",
        "9d5136a5b1f1a025ab0459402f2e6702b8959b3be51d2cc19141305ffbeb1647",
    ),
    (
        "self-test sum[1000003]",
        "6155e54828ea0174f2d421b6b9e126e797e78b0a93e412640d1a24ff8c989dfc",
    ),
    (
        "self-test sum[70001]",
        "7f362044ce2a06a506d92dee7a3fecd0d928fab5219af6ff7acc1911290f1263",
    ),
    (
        "self-test sum_dim[257x129, dim=0]",
        "173f8d2476ced4ac3768099cd41b189387710a098a5a8691c38b61e596507f73",
    ),
    (
        "self-test sum_dim[257x129, dim=1]",
        "77f78a554e0e0a4ea668c0d782d3ccfc52c4d5313236bf5486393ef0734227cb",
    ),
    (
        "self-test var[257x129]",
        "d7856fa0f5b5b6f5424717759fc441c062430aaea8590b0b66acc66e9988f122",
    ),
    (
        "self-test var_dim[257x129, dim=0]",
        "df1e700b6ea26d9a7092691fab5d75cae84e3583311a2ee07ced96348fb61eb5",
    ),
    (
        "self-test softmax[257x129, dim=1]",
        "342f560c9d98036d01bcd29e06f901328783a3d1ba5865c9ef2460f2987577d2",
    ),
    (
        "self-test log_softmax[257x129, dim=0]",
        "d14710e89c76905ae07480bac2129b6ea8aa4c62f108a2c5fadd9dc194f94572",
    ),
    (
        "self-test logsumexp[257x129, dim=1]",
        "4285503849c89058c386a1ab2269c8b4e507cd36225d660da0a5750550554931",
    ),
    (
        "self-test cumsum[257x129, dim=0]",
        "b9151b6820be388b42cf9aad9e1d2893144358255ad33c845a9e540866253124",
    ),
    (
        "self-test mul+tanh[257x129]",
        "3ba638e053daafebe23dca71c9be6ad5a8c3a8055c2af5e417c998417c56b5f1",
    ),
    (
        "self-test index_add[20011x33 -> 7]",
        "af179e3873d710f98d19dc82af9963057bccbfe3cb3688ba432f83b5c0f4904d",
    ),
    (
        "self-test index_add[20011x33 -> 1000]",
        "bba32abe937a6ab0c6048a918082b2f5b0683233e272a721d9b2407204d02b78",
    ),
    (
        "self-test scatter_add[20011x33 -> 500]",
        "96be45b2c594bc9eb58ead9b8230553d4042931506b31c0da8c44d645c698d12",
    ),
    (
        "self-test index_put(accumulate)[20011 -> 300]",
        "aabbeed64c55c4b28710273e0423b92782e61cf99b9db745cccf076cf5c79dd0",
    ),
    (
        "self-test embedding_backward[20011x33 -> 777]",
        "cd144a818b42e89b2b8616b2841e142e63342bd54a36213af7c51f228a7f3997",
    ),
    (
        "self-test embedding_bag(sum)[5000 -> 715 bags]",
        "b9bea1b08ee504e7f8668e04a62a1ef85887133b5369f6f42e24a7aaae793b09",
    ),
    (
        "self-test bincount(weights)[100003 -> 1000]",
        "ce80436824bb35e428847326acd0ac3d037b86ec31d926347be210fde9d1195b",
    ),
    (
        "self-test histc[100003, 97 bins]",
        "f530c6ae5ee67dc033eb30b9a243c4b087f6adb17436a025350ae028649ad3bd",
    ),
    (
        "self-test avg_pool2d_backward[3x5x17x13]",
        "a3d3538fbc76d3e65ae180abc5b383e0730820e7f763de5f79a940229ec9fa0e",
    ),
    (
        "self-test max_pool2d_backward[3x5x17x13]",
        "394f7e0333ef4ee36caaf0b076b9dbae66e00b51ee7501eec3ebbfe953f22065",
    ),
    (
        "self-test matmul[300x257 · 257x129]",
        "9b56739a0328bd76d60631485d0592a2218aa7f6543d7d3e5b84f5fd27160784",
    ),
    (
        "self-test matmul[64x4099 · 4099x64]",
        "13678aed8e21d77a9d847fa2897d6b2be9ba9c49b024b3857cbade9cb108a494",
    ),
    (
        "self-test conv2d[4x8x19x17, 12x8x3x3]",
        "286cd0c0ef7df40459018643de85f5e34e7e4a1978ea69b1bc66991a72bf94ab",
    ),
    (
        "self-test conv2d_input_grad[4x8x19x17]",
        "966480b98cba9b6ed3be6f929f18cdaf3f5a1984a423c7945729d7b57b1acf13",
    ),
    (
        "self-test conv2d_weight_grad[4x8x19x17]",
        "fb43d8fb534ac1d113bea4447da4557ae29f1acba1ca997588cb5f83121a9dae",
    ),
    (
        "self-test conv2d(winograd)[9x20x13x11, 18x20x3x3]",
        "35b3713e10c404c3a0329926cae6a7338e203f190dc472245ad7ce779fad3fe9",
    ),
    (
        "self-test conv2d_input_grad(winograd)[9x20x13x11]",
        "8173933261ce30e23c1c3956345c9973ab9eeb5382355f0c6726d7eedd04fe85",
    ),
    (
        "self-test conv2d_weight_grad(winograd)[9x20x13x11]",
        "54f862ca5e22fe66344935c84d92c9fd17772bc42a0b430d7ec4d8d0fc9a1f41",
    ),
];

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn current() -> Vec<(String, String)> {
    let mut v = Vec::new();
    for model in ["mlp", "cnn", "lstm"] {
        let cfg = TrainConfig {
            model: model.parse().unwrap(),
            epochs: 1,
            max_steps: 24,
            hidden: 16,
            test_size: 1500,
            threads: 1,
            ..TrainConfig::default()
        };
        let r = run(&cfg, &mut Quiet).expect("train runs");
        v.push((format!("train {model} 24 steps"), r.final_sha256));
    }
    let cases = lockstep::tensor::doctor::cases();
    lockstep::tensor::deterministic::scope(true, false, || {
        lockstep::tensor::threads::with_num_threads(1, || {
            for (name, f) in &cases {
                let out = f().expect("self-test case runs");
                let mut h = Sha256::new();
                for x in out.to_f64_vec() {
                    h.update(x.to_bits().to_le_bytes());
                }
                v.push((format!("self-test {name}"), hex(&h.finalize())));
            }
        })
    });
    v
}

#[test]
fn pinned_values_have_not_changed() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let now = current();
    let listing: String = now
        .iter()
        .map(|(k, h)| format!("    ({k:?}, {h:?}),\n"))
        .collect();
    let pinned: Vec<(String, String)> = PINNED
        .iter()
        .map(|(k, h)| (k.to_string(), h.to_string()))
        .collect();
    assert!(
        pinned == now,
        "values changed. If intended, replace PINNED in {} with the list below and add a \
         \"Value changes\" entry to CHANGELOG.md:\n{listing}",
        file!()
    );
}
