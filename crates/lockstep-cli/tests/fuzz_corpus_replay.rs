//! Replays the committed fuzz corpus (fuzz/corpus/TARGET/*) through the fuzz targets' own
//! entry functions (fuzz/entries.rs), on stable Rust, in every test run: each file must be
//! handled without a panic (issue 13). The fuzzing itself: fuzz/README.md.

#[allow(dead_code, clippy::all)]
#[path = "../src/main.rs"]
mod cli_main;

#[path = "../../../fuzz/entries.rs"]
mod entries;

use std::path::{Path, PathBuf};

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

fn replay(target: &str) {
    let (_, f) = entries::TARGETS
        .iter()
        .find(|(n, _)| *n == target)
        .expect("a target of entries.rs");
    let dir = corpus(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir:?}: {e}"))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{target}: empty corpus");
    for p in &files {
        let bytes = std::fs::read(p).unwrap();
        if std::panic::catch_unwind(|| f(&bytes)).is_err() {
            panic!("{target}: {p:?} panicked");
        }
    }
}

macro_rules! targets {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                replay(stringify!($name));
            }
        )*

        #[test]
        fn every_target_has_a_replay_test() {
            let names = [$(stringify!($name)),*];
            for (n, _) in entries::TARGETS {
                assert!(names.contains(n), "{n} is not replayed");
            }
        }
    };
}

targets!(
    npy,
    npz,
    csv,
    idx,
    loader_state,
    rng_torch,
    rng_python,
    rng_numpy,
    autotune,
    checkpoint,
    cli,
);

/// Writes the seed inputs that cannot be copied from fixtures (states, checkpoints, command
/// lines) into fuzz/seeds/TARGET/; `cargo fuzz run` takes them as a second corpus directory.
/// Run: `cargo test -p lockstep-cli --test fuzz_corpus_replay -- --ignored write_seeds`.
#[test]
#[ignore]
fn write_seeds() {
    use lockstep::data::{DataLoader, SharedGenerator, TensorDataset};
    use lockstep::rng::Generator;
    use lockstep::rng::compat::python;
    use lockstep::tensor::{DType, Tensor};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    let put = |target: &str, name: &str, bytes: &[u8]| {
        let d = root.join(target);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(name), bytes).unwrap();
    };
    // Loader states: between epochs and mid-pass, with and without workers.
    let x = Tensor::arange(0.0, 10.0, 1.0, DType::F32).unwrap();
    for (i, workers) in [0usize, 2].into_iter().enumerate() {
        let mut l = DataLoader::builder(TensorDataset::new(vec![x.clone()]).unwrap())
            .batch_size(3)
            .shuffle(true)
            .num_workers(workers)
            .generator(SharedGenerator::new(Generator::with_seed(3)))
            .build()
            .unwrap();
        put(
            "loader_state",
            &format!("epoch-{i}"),
            &l.state_dict().to_bytes(),
        );
        let mut it = l.iter();
        it.next();
        let st = it.state_dict();
        put("loader_state", &format!("mid-{i}"), &st.to_bytes());
    }
    // Torch generator states.
    let mut g = Generator::with_seed(0);
    put("rng_torch", "seed0", &g.get_state());
    g.next_u64();
    g.next_f64();
    put("rng_torch", "drawn", &g.get_state());
    // CPython states: version, flags (gauss present), gauss bytes, 625 words.
    let mut r = python::Random::from_u64(0);
    r.gauss(0.0, 1.0);
    let st = r.getstate();
    let mut b = vec![3u8, 1];
    b.extend_from_slice(&st.gauss_next.unwrap_or(0.0).to_le_bytes());
    for w in st.internal_state() {
        b.extend_from_slice(&w.to_le_bytes());
    }
    put("rng_python", "gauss", &b);
    put("rng_python", "decimal", b"123456789012345678901234567890");
    // NumPy: one seed per state kind (selector byte then words).
    for sel in [0u8, 1, 2, 3, 16, 9] {
        let mut b = vec![sel];
        b.extend((0..64u8).map(|i| i.wrapping_mul(37).wrapping_add(sel)));
        put("rng_numpy", &format!("sel-{sel}"), &b);
    }
    // Autotune files: an empty one as saved, and a one-entry edit of it.
    let p = std::env::temp_dir().join(format!("lockstep-seed-{}.json", std::process::id()));
    lockstep::tensor::autotune::save(&p).unwrap();
    let text = std::fs::read(&p).unwrap();
    put("autotune", "saved", &text);
    std::fs::remove_file(&p).ok();
    // A checkpoint of the mlp `entries::checkpoint` loads into, with a loader state.
    let m = lockstep_cli::train::build_model("mlp", 8, 0.1).unwrap();
    let mut c = lockstep::checkpoint::Checkpoint::new();
    c.put_module(&*m);
    c.put_global_rngs();
    c.set_meta(&serde_json::json!({"step": 3}));
    put("checkpoint", "mlp8", &c.to_bytes().unwrap());
    // Command lines (arguments separated by NUL).
    for (i, line) in [
        "demo\0--hidden=100000000000",
        "demo\0--hidden=18446744073709551615",
        "demo\0--workers=100000000\0--threads=0",
        "demo\0--lr=inf",
        "train\0--threads\x00999999\0--hidden\x00100000000000",
        "train\0--micro-batch\08\0--seeding\0invariant\0--model\0cnn",
        "sample\0torch\0randn\0--seed=0\0--shape=2,3",
        "sample\0numpy\0standard_normal\0--shape=4\0--bit-generator=PCG64DXSM",
        "sample\0python\0random\0--n=3",
        "sample\0--list",
        "sample\0torch\0randperm\0--n=18446744073709551615",
        "sweep\0--seeds\x005\0--jobs\x002\0--\0train\0--epochs\x001",
        "verify\0--threads=1,2\0--\0train\0--model\0mlp",
        "doctor\0--json",
        "--help",
        "train\0--scheduler\0cosine\0--epochs\x000",
        "train\0--test-size\x001797\0--optimizer\0adamw\0--weight-decay\x000.01",
        "train\0--distributed\0--seeding\0invariant\0--reduction\0reduce-scatter",
        "train\0--checkpoint-every\x005\0--nesterov\0--momentum\x000.9",
        "train\0--dropout\x001.5\0--aug\0numpy\0--seed\x004294967296",
        "verify\0--json",
    ]
    .iter()
    .enumerate()
    {
        put("cli", &format!("line-{i:02}"), line.as_bytes());
    }
}
