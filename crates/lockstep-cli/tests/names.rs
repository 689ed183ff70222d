//! `lockstep train`'s named choices on the command line: an unknown name is refused by the
//! parser (exit 2, before any work) with the accepted names, and `--help` shows its flags in
//! the order and with the defaults it always had.

use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_lockstep");

fn train(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(EXE)
        .arg("train")
        .args(args)
        .output()
        .expect("run lockstep");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unknown_names_are_refused_with_the_accepted_ones() {
    for (flag, bad, accepted) in [
        ("--model", "resnet", "mlp, cnn, lstm, gpt"),
        ("--optimizer", "lbfgs", "sgd, adam, adamw"),
        ("--scheduler", "linear", "none, step, cosine"),
        ("--aug", "cutout", "none, torch, numpy"),
        ("--seeding", "per-sample", "torch, invariant"),
    ] {
        let (code, out, err) = train(&[flag, bad, "--epochs", "0"]);
        assert_eq!(code, 2, "{flag} {bad}: {err}");
        assert!(out.is_empty(), "{flag} {bad}: nothing runs: {out}");
        assert!(
            err.contains(&format!("invalid value '{bad}' for '{flag} <")),
            "{flag} {bad}: {err}"
        );
        assert!(
            err.contains(&format!("[possible values: {accepted}]")),
            "{flag} {bad}: {err}"
        );
    }
    // `--reduction` (of `--distributed`) too, before anything checks MPI.
    let (code, out, err) = train(&[
        "--distributed",
        "--seeding",
        "invariant",
        "--reduction",
        "ring",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("invalid value 'ring' for '--reduction <"),
        "{err}"
    );
    assert!(
        err.contains("[possible values: gather, reduce-scatter]"),
        "{err}"
    );
    // Names are exact, as the JSON reports and checkpoints store them.
    let (code, _, err) = train(&["--optimizer", "AdamW", "--epochs", "0"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn help_keeps_its_flags_order_and_defaults() {
    for h in ["-h", "--help"] {
        let (code, out, err) = train(&[h]);
        assert_eq!(code, 0, "{err}");
        let flags: Vec<&str> = out
            .lines()
            .filter_map(|l| l.strip_prefix("      --"))
            .map(|l| l.split([' ', '\n']).next().unwrap_or(""))
            .collect();
        let want = "model seed epochs batch-size lr optimizer momentum nesterov weight-decay \
                    scheduler clip-grad-norm dropout hidden aug noise workers test-size \
                    max-steps threads data json seeding checkpoint-dir checkpoint-every keep \
                    resume init-from nondeterministic micro-batch n-layer n-head n-embd \
                    block-size bias grad-accum max-iters min-lr warmup-iters lr-decay-iters \
                    decay-lr beta1 beta2 grad-clip eval-interval eval-iters sample-tokens \
                    temperature top-k prompt val-fraction distributed collective-timeout \
                    reduction";
        assert_eq!(flags.join(" "), want, "{h}");
        // The names are in the texts, not repeated as clap's list; the defaults as before.
        assert!(!out.contains("possible values"), "{out}");
        for text in [
            "mlp | cnn | lstm | gpt [default: mlp]",
            "sgd | adam | adamw [default: sgd]",
            "none | step | cosine (stepped once per epoch) [default: none]",
            "none | torch | numpy: where the per-sample noise comes from [default: torch]",
            "--batch-size x --grad-accum) [default: torch]",
            "Seed of every generator (below 2^32) [default: 0; gpt: 1337]",
            "gpt: transformer blocks [default: 4]",
            "gpt: biases in linear layers and LayerNorms, 0 or 1 [default: 1]",
            "gpt: the sample's prompt [default: a newline]",
        ] {
            // Each text ends its flag's help: no second default follows.
            let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(
                flat.contains(&format!("{text} --")),
                "{h}: {text:?} in {out}"
            );
        }
    }
}
