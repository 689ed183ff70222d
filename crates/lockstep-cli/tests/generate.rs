//! `lockstep generate`: batch-invariant generation from a gpt checkpoint. Row 0's
//! `first_logits_sha256` and `sample_ids` are the same bits for `--batch` 1, 2, 7 and 32, with
//! `--kv-cache` true and false, greedy and sampled, at 1, 2 and 3 threads, including steps past
//! `block_size` (the context cropped). Bad input exits 2 with a message, never a panic. The
//! kernel's attention equals `F::scaled_dot_product_attention` to rounding.

use lockstep::{DType, Generator, Tensor};
use lockstep_nn::{Var, functional as F};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn data() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../crates/lockstep-data/data/tinyshakespeare.txt.gz")
        .display()
        .to_string()
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn dir() -> &'static PathBuf {
    static D: OnceLock<PathBuf> = OnceLock::new();
    D.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("lockstep-generate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    })
}

/// A small trained gpt (2 layers, block 16, dropout on in training) and its checkpoint.
fn checkpoint() -> &'static str {
    static C: OnceLock<String> = OnceLock::new();
    C.get_or_init(|| {
        let d = dir().join("ckpt");
        let (dd, ds) = (data(), d.display().to_string());
        let (code, _, err) = run(&[
            "train",
            "--model",
            "gpt",
            "--data",
            &dd,
            "--n-layer",
            "2",
            "--n-head",
            "2",
            "--n-embd",
            "16",
            "--block-size",
            "16",
            "--batch-size",
            "4",
            "--max-iters",
            "6",
            "--eval-interval",
            "0",
            "--sample-tokens",
            "0",
            "--threads",
            "1",
            "--checkpoint-dir",
            &ds,
            "--checkpoint-every",
            "6",
            "--json",
        ]);
        assert_eq!(code, 0, "{err}");
        d.join("ckpt-00000006.safetensors").display().to_string()
    })
}

fn generate(extra: &[&str]) -> Value {
    let mut a = vec!["generate", "--checkpoint", checkpoint(), "--json"];
    a.extend_from_slice(extra);
    let (code, out, err) = run(&a);
    assert_eq!(code, 0, "{a:?}: {err}");
    serde_json::from_str(out.lines().last().unwrap()).unwrap()
}

fn invariant(mode: &[&str], what: &str) {
    // 6 prompt characters + 24 tokens: past block_size 16, so the crop is covered too.
    let common = [&["--prompt", "ROMEO:", "--tokens", "24"], mode].concat();
    let base = [&common[..], &["--threads", "1"]].concat();
    let want = generate(&base);
    assert_eq!(want["sample_ids"].as_array().unwrap().len(), 24);
    for batch in ["1", "2", "7", "32"] {
        for cache in ["true", "false"] {
            let mut a = base.clone();
            a.extend(["--batch", batch, "--kv-cache", cache]);
            let got = generate(&a);
            for k in ["first_logits_sha256", "sample_ids", "sample"] {
                assert_eq!(
                    got[k], want[k],
                    "{what}: {k} at --batch {batch} --kv-cache {cache}"
                );
            }
        }
    }
    for threads in ["2", "3"] {
        let mut a = common.clone();
        a.extend(["--threads", threads, "--batch", "7"]);
        let got = generate(&a);
        assert_eq!(
            got["first_logits_sha256"], want["first_logits_sha256"],
            "{what}: {threads} threads"
        );
        assert_eq!(
            got["sample_ids"], want["sample_ids"],
            "{what}: {threads} threads"
        );
    }
}

#[test]
fn greedy_is_batch_cache_and_thread_invariant() {
    invariant(&["--temperature", "0"], "greedy");
}

#[test]
fn sampled_is_batch_cache_and_thread_invariant() {
    invariant(
        &["--temperature", "0.8", "--top-k", "5", "--seed", "7"],
        "sampled",
    );
}

#[test]
fn the_seed_and_the_prompt_matter() {
    let a = generate(&["--tokens", "30", "--seed", "1", "--top-k", "0"]);
    let b = generate(&["--tokens", "30", "--seed", "2", "--top-k", "0"]);
    assert_ne!(a["sample_ids"], b["sample_ids"]);
    assert_eq!(a["first_logits_sha256"].as_str().unwrap().len(), 64);
    let c = generate(&[
        "--tokens", "30", "--seed", "1", "--top-k", "0", "--prompt", "A",
    ]);
    assert_ne!(a["first_logits_sha256"], c["first_logits_sha256"]);
    // Offsets of the other rows, as documented: (r − 1)·997 mod (len(val) − L + 1).
    let r = generate(&["--tokens", "1", "--batch", "3"]);
    assert_eq!(r["prompt_offsets"], serde_json::json!([0, 997]));
}

#[test]
fn bad_input_exits_2_with_a_message() {
    let ck = checkpoint();
    let bad = dir().join("bad.safetensors");
    let bytes = std::fs::read(ck).unwrap();
    std::fs::write(&bad, &bytes[..bytes.len() - 100]).unwrap();
    let bad = bad.display().to_string();
    // An mlp checkpoint.
    let m = dir().join("mlp").display().to_string();
    let (code, _, err) = run(&[
        "train",
        "--model",
        "mlp",
        "--epochs",
        "1",
        "--max-steps",
        "1",
        "--checkpoint-dir",
        &m,
        "--checkpoint-every",
        "1",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let mlp = format!("{m}/ckpt-00000001.safetensors");
    let cases: &[(&[&str], &str)] = &[
        (
            &["--checkpoint", "/nonexistent/c.safetensors"],
            "/nonexistent/c.safetensors",
        ),
        (&["--checkpoint", &bad], "bad.safetensors"),
        (&["--checkpoint", &mlp], "not a gpt checkpoint"),
        (&["--checkpoint", ck, "--prompt", "€"], "--prompt"),
        (&["--checkpoint", ck, "--prompt", ""], "--prompt"),
        (&["--checkpoint", ck, "--batch", "0"], "--batch"),
        (
            &["--checkpoint", ck, "--temperature", "-1"],
            "--temperature",
        ),
        (
            &["--checkpoint", ck, "--temperature", "nan"],
            "--temperature",
        ),
        (
            &[
                "--checkpoint",
                ck,
                "--batch",
                "2",
                "--data",
                "/nonexistent/d.txt",
            ],
            "/nonexistent/d.txt",
        ),
    ];
    for (args, want) in cases {
        let mut a = vec!["generate", "--tokens", "3"];
        a.extend_from_slice(args);
        let (code, _, err) = run(&a);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains(want),
            "{args:?}: {err:?} does not say {want:?}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // top-k 0 (all) and a context far past block_size run.
    generate(&["--top-k", "0", "--tokens", "40"]);
}

#[test]
fn causal_attention_equals_sdpa_to_rounding() {
    let mut g = Generator::with_seed(3);
    let mut r = |s: &[usize]| Tensor::randn(s, DType::F32, Some(&mut g)).unwrap();
    let (q, k, v) = (r(&[2, 4, 17, 8]), r(&[2, 4, 17, 8]), r(&[2, 4, 17, 8]));
    let ours = q.causal_attention(&k, &v, 0, 1.0 / 8f64.sqrt()).unwrap();
    let c = |t: &Tensor| Var::constant(t.clone());
    let want = F::scaled_dot_product_attention(&c(&q), &c(&k), &c(&v), None, 0.0, true, None)
        .unwrap()
        .data();
    for (a, b) in ours
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .zip(want.to_vec::<f32>().unwrap())
    {
        assert!((a - b).abs() <= 2e-6 * (1.0 + b.abs()), "{a} vs {b}");
    }
}
