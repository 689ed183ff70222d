//! One entry per reader of outside input (issue 13). Each takes arbitrary bytes and must
//! return: a refusal is fine, a panic, abort, hang or broken invariant is a bug (the
//! `assert!`s below state the invariants). Shared by the `cargo fuzz` targets (fuzz/) and
//! the stable replay of the committed corpus (crates/lockstep-cli/tests/fuzz_corpus_replay.rs).

use lockstep::data::{self, LoaderState};
use lockstep::rng::Generator;
use lockstep::rng::compat::{numpy, python};
use lockstep::tensor::Tensor;
use std::path::{Path, PathBuf};

const NAME: &str = "<fuzz input>";

fn touch(t: &Tensor) {
    // Read every value: a tensor whose layout leaves its storage would panic here.
    let v = t.to_f64_vec();
    assert_eq!(v.len(), t.numel());
}

/// `.npy` bytes through `parse_npy`.
pub fn npy(data: &[u8]) {
    if let Ok(t) = data::parse_npy(data, Path::new(NAME)) {
        touch(&t);
    }
}

/// `.npz` bytes through `parse_npz`.
pub fn npz(data: &[u8]) {
    if let Ok(entries) = data::parse_npz(data, Path::new(NAME)) {
        for (_, t) in &entries {
            touch(t);
        }
    }
}

/// CSV bytes (plain or gzip) through `parse_csv_bytes` and `CsvDataset::from_bytes`. The
/// first byte picks the header flag and the label column.
pub fn csv(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let header = sel & 1 == 1;
    let label = (sel >> 1) as i8 as isize % 5;
    let table = data::parse_csv_bytes(rest.to_vec(), header, Path::new(NAME));
    let ds = data::CsvDataset::from_bytes(rest.to_vec(), header, label, Path::new(NAME));
    if let Ok(ds) = ds {
        assert_eq!(ds.labels().len(), table.map_or(0, |t| t.rows.len()));
        let _ = ds.with_shape(&[usize::from(sel), usize::MAX]);
    }
}

/// IDX bytes (plain or gzip) through `parse_idx`.
pub fn idx(data: &[u8]) {
    if let Ok(t) = data::parse_idx(data, Path::new(NAME)) {
        touch(&t);
    }
}

/// `LoaderState` bytes: an accepted state re-encodes to the same bytes (one encoding per
/// state) and is consistent.
pub fn loader_state(data: &[u8]) {
    if let Ok(st) = LoaderState::from_bytes(data) {
        assert_eq!(
            st.to_bytes(),
            data,
            "non-canonical LoaderState encoding accepted"
        );
        assert!(st.batches_done <= st.batches.len());
    }
}

/// The torch generator's state bytes (`Generator::set_state`): a refused state leaves the
/// generator unchanged; an accepted one draws.
pub fn rng_torch(data: &[u8]) {
    let mut g = Generator::with_seed(5489);
    let before = g.get_state();
    match g.set_state(data) {
        Ok(()) => {
            let mut h = Generator::new();
            h.set_state(&g.get_state())
                .expect("a state read back is accepted");
            for _ in 0..4 {
                assert_eq!(g.next_u64(), h.next_u64());
            }
            let _ = g.next_f64();
        }
        Err(_) => assert_eq!(
            g.get_state(),
            before,
            "a refused state changed the generator"
        ),
    }
}

fn words(b: &[u8]) -> Vec<u32> {
    b.chunks(4)
        .map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(w)
        })
        .collect()
}

/// CPython's `random.setstate((version, internal, gauss_next))` (decoded from the bytes:
/// version byte, gauss flag, 8 gauss bytes, then 32-bit words) and `Random(int)` from decimal
/// text.
pub fn rng_python(data: &[u8]) {
    if data.len() < 10 {
        let _ = python::Random::from_decimal(&String::from_utf8_lossy(data));
        return;
    }
    let version = u32::from(data[0]);
    let gauss = (data[1] & 1 == 1).then(|| f64::from_le_bytes(data[2..10].try_into().unwrap()));
    let mut internal = words(&data[10..]);
    // Mostly the right length, so the checks past the length are reached too.
    if data[1] & 2 == 2 && internal.len() < 625 {
        internal.resize(625, 0x9e37_79b9);
    }
    let mut r = python::Random::from_u64(1);
    let before = r.getstate();
    match python::PyState::from_tuple(version, &internal, gauss) {
        Ok(st) => match r.setstate(&st) {
            Ok(()) => {
                let _ = (
                    r.random(),
                    r.gauss(0.0, 1.0),
                    r.getrandbits(u32::from(data[1])),
                );
                let _ = r.randbelow(u64::from(data[0]));
            }
            Err(_) => assert_eq!(r.getstate(), before),
        },
        Err(_) => assert_eq!(r.getstate(), before),
    }
    let _ = python::Random::from_decimal(&String::from_utf8_lossy(&data[10..]));
}

fn u64s(b: &[u8]) -> impl Iterator<Item = u64> + '_ {
    b.chunks(8).map(|c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(w)
    })
}

/// NumPy states: the legacy `RandomState.set_state` (selector 0) and the bit generators'
/// state setters (PCG64DXSM, Philox, SFC64), then a few draws.
pub fn rng_numpy(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let mut w = u64s(rest).chain(std::iter::repeat(0x0123_4567_89ab_cdef));
    let mut next = || w.next().unwrap();
    let pending = (sel & 8 == 8).then(|| next() as u32);
    match sel % 4 {
        0 => {
            let mut key = words(rest.get(16..).unwrap_or_default());
            if sel & 16 == 16 {
                key.resize(624, 7);
            }
            let st = numpy::LegacyState {
                key,
                pos: rest.first().map_or(0, |&b| usize::from(b) * 3),
                has_gauss: sel & 32 == 32,
                cached_gaussian: f64::from_le_bytes(
                    rest.get(1..9).map_or([0; 8], |b| b.try_into().unwrap()),
                ),
            };
            let mut rs = numpy::RandomState::new(1);
            let before = format!("{:?}", rs.get_state());
            match rs.set_state(&st) {
                Ok(()) => {
                    let _ = (rs.gauss(), rs.random_sample_one());
                }
                Err(_) => assert_eq!(format!("{:?}", rs.get_state()), before),
            }
        }
        1 => {
            let s = u128::from(next()) << 64 | u128::from(next());
            let inc = u128::from(next()) << 64 | u128::from(next());
            if let Some(mut b) = numpy::Pcg64Dxsm::from_parts(s, inc, pending) {
                let _ = (b.next_u64(), b.next_u64());
            }
        }
        2 => {
            let ctr = [next(), next(), next(), next()];
            let key = [next(), next()];
            let buffer = [next(), next(), next(), next()];
            let pos = (next() % 8) as usize;
            if let Some(mut b) = numpy::Philox::from_parts(ctr, key, buffer, pos, pending) {
                for _ in 0..6 {
                    let _ = b.next_u64();
                }
            }
        }
        _ => {
            let mut b = numpy::Sfc64::from_parts([next(), next(), next(), next()], pending);
            let _ = (b.next_u64(), b.next_u64());
        }
    }
}

fn scratch(name: &str) -> PathBuf {
    // One file per process and target, rewritten for every input; on tmpfs where there is
    // one, so that an execution costs the reader's work, not a disk write (~1,000/s on disk).
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        }
    });
    dir.join(format!("lockstep-fuzz-{}-{name}", std::process::id()))
}

/// The autotune file, through its public reader (`autotune::load` reads a path). An accepted
/// file's choices are cleared again, so every input starts from the same (empty) cache.
pub fn autotune(data: &[u8]) {
    use lockstep::tensor::autotune;
    let path = scratch("autotune.json");
    if std::fs::write(&path, data).is_ok() {
        if autotune::load(&path).is_ok() {
            autotune::clear();
        }
        let _ = std::fs::remove_file(&path);
    }
}

/// Checkpoint bytes through `Checkpoint::from_bytes` and the readers of what it holds. An
/// accepted checkpoint re-encodes and reads back.
pub fn checkpoint(data: &[u8]) {
    use lockstep::checkpoint::Checkpoint;
    let Ok(c) = Checkpoint::from_bytes(data) else {
        return;
    };
    let _ = c.meta();
    for name in c.names() {
        if let Some(t) = c.tensor(name) {
            touch(t);
        }
    }
    let _ = c.loader();
    if let Ok(m) = lockstep_cli::train::build_model("mlp", 8, 0.1) {
        let _ = c.load_module(&*m);
    }
    let bytes = c.to_bytes().expect("an accepted checkpoint re-encodes");
    Checkpoint::from_bytes(&bytes).expect("a re-encoded checkpoint reads back");
}

/// Command lines: the bytes split at NUL into arguments after `lockstep`, parsed by clap and
/// checked as each subcommand checks them before running (without running).
pub fn cli(data: &[u8]) {
    let mut argv = vec![std::ffi::OsString::from("lockstep")];
    argv.extend(
        data.split(|&b| b == 0)
            .map(|a| std::ffi::OsString::from(String::from_utf8_lossy(a).into_owned())),
    );
    if argv.get(1).is_some_and(|a| a == "sample") && argv.iter().any(|a| big_but_valid(a)) {
        // `sample` draws what it is asked (up to 2^26 values, seconds): sizes in this band
        // are slow, not wrong. Larger ones must be refused at once and are still run.
        return;
    }
    let _ = crate::cli_main::check_args(&argv);
}

/// Whether `a` holds a number in 10^5..2^34 (a draw size `sample` may accept).
fn big_but_valid(a: &std::ffi::OsStr) -> bool {
    a.to_string_lossy()
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|d| d.parse::<u128>().ok())
        .any(|v| (100_000..1 << 34).contains(&v))
}

/// The entry of each target, by name (the corpus directory's name).
/// A fuzz target's entry point: one input, any outcome but a panic.
pub type Entry = fn(&[u8]);

pub const TARGETS: &[(&str, Entry)] = &[
    ("npy", npy),
    ("npz", npz),
    ("csv", csv),
    ("idx", idx),
    ("loader_state", loader_state),
    ("rng_torch", rng_torch),
    ("rng_python", rng_python),
    ("rng_numpy", rng_numpy),
    ("autotune", autotune),
    ("checkpoint", checkpoint),
    ("cli", cli),
];
