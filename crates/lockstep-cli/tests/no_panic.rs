//! Property test: whatever options `lockstep sample` gets, it returns values or a clear error,
//! never a panic (and never an allocation beyond its output cap).

use proptest::prelude::*;

const LIBS: &[(&str, &[&str])] = &[
    (
        "torch",
        &[
            "rand",
            "randn",
            "normal",
            "uniform",
            "exponential",
            "bernoulli",
            "dropout",
            "randint",
            "randperm",
            "multinomial",
            "kaiming_uniform",
            "kaiming_normal",
            "xavier_uniform",
            "xavier_normal",
            "trunc_normal",
            "linear",
            "dataloader",
            "worker-seeds",
            "nope",
        ],
    ),
    (
        "python",
        &[
            "random",
            "randint",
            "gauss",
            "shuffle",
            "uniform",
            "choice",
            "getrandbits",
        ],
    ),
    (
        "numpy-legacy",
        &[
            "rand",
            "randn",
            "randint",
            "permutation",
            "uniform",
            "normal",
        ],
    ),
    (
        "numpy",
        &[
            "random",
            "standard_normal",
            "integers",
            "permutation",
            "uniform",
            "normal",
            "exponential",
            "standard_exponential",
        ],
    ),
];

const KEYS: &[&str] = &[
    "seed",
    "shape",
    "dtype",
    "repeat",
    "low",
    "high",
    "mean",
    "std",
    "lambd",
    "p",
    "n",
    "weights",
    "num-samples",
    "replacement",
    "a",
    "b",
    "gain",
    "mode",
    "nonlinearity",
    "in-features",
    "out-features",
    "batch-size",
    "epochs",
    "workers",
    "mu",
    "sigma",
    "k",
    "loc",
    "scale",
    "endpoint",
    "bias",
    "shuffle",
    "bogus",
];

const VALUES: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "17",
    "-1",
    "-7",
    "0.5",
    "1.5",
    "-0.5",
    "1e308",
    "-1e308",
    "nan",
    "inf",
    "-inf",
    "abc",
    "",
    "1,2",
    "0,0",
    "2,3",
    "1,-1",
    "0.1,0.9",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "340282366920938463463374607431768211456",
    "4294967296",
    "true",
    "false",
    "float32",
    "float64",
    "int64",
    "int32",
    "fan_out",
    "relu",
    "tanh",
    "swish",
];

fn args() -> impl Strategy<Value = (usize, usize, Vec<(usize, usize)>)> {
    (
        0..LIBS.len(),
        0..20usize,
        prop::collection::vec((0..KEYS.len(), 0..VALUES.len()), 0..6),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
    #[test]
    fn sample_never_panics((lib, func, opts) in args()) {
        let (lib, funcs) = LIBS[lib];
        let func = funcs[func % funcs.len()];
        let mut seen = std::collections::HashSet::new();
        let argv: Vec<String> = opts
            .into_iter()
            .filter(|(k, _)| seen.insert(*k))
            .map(|(k, v)| format!("--{}={}", KEYS[k], VALUES[v]))
            .collect();
        let result = std::panic::catch_unwind(|| lockstep_cli::sample::run(lib, func, &argv));
        prop_assert!(result.is_ok(), "panic: lockstep sample {lib} {func} {}", argv.join(" "));
        if let Ok(Err(e)) = result {
            prop_assert!(!e.to_string().is_empty());
        }
    }
}

/// `train::check_config` (the CLI fuzz target's entry for `lockstep train`) refuses exactly
/// what a run refuses before training, with the same message, and accepts valid flags.
#[test]
fn train_check_config_agrees_with_the_run() {
    use lockstep_cli::train::{
        Model, Optimizer, Quiet, Scheduler, Seeding, TrainConfig, check_config, run,
    };
    let base = TrainConfig {
        epochs: 1,
        max_steps: 1,
        ..TrainConfig::default()
    };
    let bad: Vec<TrainConfig> = vec![
        // Unknown names are refused by clap (tests/names.rs); gpt is not `train`'s.
        TrainConfig {
            model: Model::Gpt,
            ..base.clone()
        },
        TrainConfig {
            scheduler: Scheduler::Cosine,
            epochs: 0,
            ..base.clone()
        },
        TrainConfig {
            test_size: 1797,
            ..base.clone()
        },
        TrainConfig {
            checkpoint_every: 5,
            ..base.clone()
        },
        TrainConfig {
            micro_batch: 8,
            ..base.clone()
        },
        TrainConfig {
            nesterov: true,
            ..base.clone()
        },
        TrainConfig {
            dropout: 1.5,
            ..base.clone()
        },
        TrainConfig {
            lr: f64::INFINITY,
            ..base.clone()
        },
        TrainConfig {
            threads: usize::MAX,
            ..base.clone()
        },
        TrainConfig {
            hidden: usize::MAX,
            ..base.clone()
        },
    ];
    for cfg in &bad {
        let checked = check_config(cfg, 1).map_err(|e| e.to_string());
        let ran = run(cfg, &mut Quiet).map(drop).map_err(|e| e.to_string());
        assert!(checked.is_err(), "{cfg:?}");
        assert_eq!(checked, ran, "{cfg:?}");
    }
    for cfg in [
        base.clone(),
        TrainConfig {
            scheduler: Scheduler::Cosine,
            optimizer: Optimizer::AdamW,
            ..base.clone()
        },
        TrainConfig {
            seeding: Seeding::Invariant,
            micro_batch: 4,
            test_size: 1796,
            ..base.clone()
        },
    ] {
        check_config(&cfg, 1).unwrap();
    }
}
