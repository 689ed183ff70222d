//! Benchmark mode (PyTorch's `cudnn.benchmark`) with pinned choices.
//!
//! With [`set_benchmark`]`(true)`, the first call of a tunable op (matmul, convolution) for a
//! shape key times every allowed candidate once and caches the fastest; later calls reuse the
//! choice. With it off (the default, as in PyTorch) a fixed heuristic of the shapes chooses, so
//! the choice never depends on timing. In deterministic mode only thread-invariant candidates
//! are allowed.
//!
//! A tuned run can be repeated exactly: [`save`] writes the cache as JSON (with the lockstep
//! version and CPU features it was made on) and [`load`] reads it back; loaded choices are used
//! as they are, without timing. A file made by another lockstep version or on a CPU with other
//! features is refused with an error rather than silently used.
//!
//! [`with_algorithm`] pins one algorithm for the calls a closure makes on this thread, whatever
//! the heuristic or benchmark mode would choose — e.g. `conv2d.im2col_gemm` for GEMM-order sums
//! in a shape where benchmark mode might pick another candidate.
//!
//! [`set_allow_fast_conv`] (PyTorch's `torch.backends.cudnn.allow_tf32`, default off) lets the
//! heuristic and benchmark mode choose the fast-but-less-accurate convolution algorithms
//! (Winograd F(4×4, 3×3): about ten times the rounding error of a direct sum). Off, every
//! convolution sums its terms directly (one fma chain per output, as PyTorch's CPU kernels),
//! unless one of those algorithms is pinned with [`with_algorithm`].

use crate::error::{Error, Result};
use crate::op::Op;
use crate::policy::{self, Pin};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Mutex;

pub use crate::policy::{
    allow_fast_conv, benchmark, conv_deterministic, set_allow_fast_conv, set_benchmark,
    set_conv_deterministic, with_allow_fast_conv,
};

/// Runs `f` with the algorithm `algo` (an id such as `"conv2d.im2col_gemm"`; its op is the part
/// before the last `.`) pinned for the tunable calls `f` makes on this thread: where it applies
/// to the shapes it runs instead of the heuristic's or benchmark mode's choice; where it does
/// not (say, a 1×1 kernel pinned for a 3×3 convolution) the usual choice runs. Nested pins of
/// the same op: the innermost wins. Safe under `cargo test`'s parallel threads.
///
/// Calls then fail with [`Error::InvalidArgument`] if `algo` names no implementation of its
/// op, or if it is not thread-invariant while deterministic mode (or, for convolution,
/// [`set_conv_deterministic`]) requires that. A name that is no known algorithm at all (a
/// misspelling, or an op with nothing to tune) is reported on standard error here, once per
/// name; [`try_with_algorithm`] makes it an error instead.
pub fn with_algorithm<R>(algo: &'static str, f: impl FnOnce() -> R) -> R {
    let unknown = unknown_algo("autotune::with_algorithm", algo);
    if let Some(e) = &unknown {
        static SAID: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
        let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
        if !said.contains(&algo) {
            said.push(algo);
            eprintln!("warning: {e}: the pin has no effect");
        }
    }
    // Dispatch, which sees one op only, learns here whether another registration of the
    // same name has `algo` (`index_put` with and without accumulate).
    let known = unknown.is_none();
    policy::with_pin(Pin { algo, known }, f)
}

/// Makes a user-defined op's algorithm ids known to [`load`] and [`try_with_algorithm`]
/// before its first call (built-in ops are always known; an op is also registered by its
/// first tunable call, [`Op::tuned`]).
pub fn register<F: 'static>(op: &'static Op<F>) {
    policy::register(op.name, || op.impls.iter().map(|i| i.algo).collect());
}

/// Whether `op` is a known op (registered, or built in: [`crate::ops::builtin_ops`]), and
/// whether `algo` is one of its algorithm ids.
fn known(op: &str, algo: &str) -> (bool, bool) {
    if let Some(algos) = policy::registered(op) {
        return (true, algos.contains(&algo));
    }
    // Two registrations can share a name (`index_put` with and without accumulate): any of
    // them may hold `algo`.
    let same_name: Vec<_> = crate::ops::builtin_ops()
        .into_iter()
        .filter(|o| o.name == op)
        .collect();
    let has = same_name
        .iter()
        .any(|o| o.impls.iter().any(|(a, _)| *a == algo));
    (!same_name.is_empty(), has)
}

/// The error for an algorithm id that names no implementation of a known op (`op_name`
/// asks), or `None` for a good id.
fn unknown_algo(op_name: &'static str, algo: &str) -> Option<Error> {
    let op = algo.rsplit_once('.').map_or("", |(o, _)| o);
    let reason = match known(op, algo) {
        (_, true) => return None,
        (true, false) => format!("{algo} is not an implementation of {op}"),
        (false, _) => {
            format!("{algo} names no known op (an id is `OP.NAME`, e.g. `conv2d.im2col_gemm`)")
        }
    };
    Some(Error::InvalidArgument {
        op: op_name,
        arg: "algorithm",
        reason,
    })
}

/// [`with_algorithm`] that first checks `algo`: it must be the id of an implementation of a
/// built-in op or of a [`register`]ed one, so a misspelt name is an error before anything
/// runs (also for an op name that no call would ever read).
///
/// # Errors
/// [`Error::InvalidArgument`] naming the algorithm, before `f` runs.
pub fn try_with_algorithm<R>(algo: &'static str, f: impl FnOnce() -> R) -> Result<R> {
    if let Some(e) = unknown_algo("autotune::with_algorithm", algo) {
        return Err(e);
    }
    Ok(with_algorithm(algo, f))
}

/// The cached choices, as `(op, shape key, algorithm)` (for `lockstep doctor`).
pub fn choices() -> Vec<(String, String, String)> {
    policy::cache()
        .iter()
        .map(|((o, k), a)| (o.clone(), k.clone(), a.clone()))
        .collect()
}

/// Forgets every cached choice.
pub fn clear() {
    policy::cache().clear();
}

/// The CPU features that change which kernels can run (and so what a tuning file means).
pub fn cpu_features() -> Vec<&'static str> {
    let mut f = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            f.push("avx2");
        }
        if std::arch::is_x86_feature_detected!("fma") {
            f.push("fma");
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            f.push("avx512f");
        }
    }
    f
}

fn file_err(op: &'static str, path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::InvalidArgument {
        op,
        arg: "path",
        reason: format!("{}: {reason}", path.display()),
    }
}

/// Writes the cached choices to `path` as JSON with [`crate::io::write_atomic`] (a uniquely
/// named temporary file in the same directory, fsynced, renamed over `path`, the directory
/// fsynced): `path` holds the old or the new cache after any crash, no other file is touched,
/// and concurrent saves of one path do not fail.
///
/// # Errors
/// If the file cannot be written.
pub fn save(path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let entries: Vec<Value> = choices()
        .into_iter()
        .map(|(op, key, algo)| json!({"op": op, "key": key, "algo": algo}))
        .collect();
    let doc = json!({
        "format": "lockstep-autotune/1",
        "lockstep": env!("CARGO_PKG_VERSION"),
        "cpu_features": cpu_features(),
        "choices": entries,
    });
    let text = serde_json::to_string_pretty(&doc).expect("JSON of strings");
    crate::io::write_atomic(path, text.as_bytes()).map_err(|e| file_err("autotune::save", path, e))
}

/// Loads choices saved by [`save`]; they replace the cached ones for the same keys and are
/// used without timing. Returns how many were loaded.
///
/// # Errors
/// A missing or corrupt file, a file from another lockstep version or made on a CPU with other
/// features (stale: its choices may not exist or may not be the fastest here).
pub fn load(path: impl AsRef<Path>) -> Result<usize> {
    const OP: &str = "autotune::load";
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|e| file_err(OP, path, e))?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| file_err(OP, path, e))?;
    if doc["format"] != "lockstep-autotune/1" {
        return Err(file_err(OP, path, "not a lockstep autotune file"));
    }
    if doc["lockstep"] != env!("CARGO_PKG_VERSION") {
        return Err(file_err(
            OP,
            path,
            format!(
                "made by lockstep {}, this is {}: retune",
                doc["lockstep"],
                env!("CARGO_PKG_VERSION")
            ),
        ));
    }
    let features: Vec<&str> = doc["cpu_features"]
        .as_array()
        .and_then(|a| a.iter().map(Value::as_str).collect::<Option<Vec<_>>>())
        .ok_or_else(|| file_err(OP, path, "`cpu_features` is not a list of strings"))?;
    if features != cpu_features() {
        return Err(file_err(
            OP,
            path,
            format!(
                "made on a CPU with {features:?}, this one has {:?}: retune",
                cpu_features()
            ),
        ));
    }
    let entries = doc["choices"]
        .as_array()
        .ok_or_else(|| file_err(OP, path, "no `choices` list"))?;
    let mut parsed = Vec::with_capacity(entries.len());
    for e in entries {
        match (e["op"].as_str(), e["key"].as_str(), e["algo"].as_str()) {
            // An algorithm id is `OP.NAME` (e.g. `conv2d.im2col_gemm`) for its own op.
            (Some(o), Some(k), Some(a))
                if !o.is_empty()
                    && !k.is_empty()
                    && a.strip_prefix(o)
                        .and_then(|r| r.strip_prefix('.'))
                        .is_some_and(|n| !n.is_empty() && !n.contains('.')) =>
            {
                if let Some(err) = unknown_algo(OP, a) {
                    return Err(file_err(OP, path, format!("bad entry {e}: {err}")));
                }
                parsed.push(((o.to_string(), k.to_string()), a.to_string()))
            }
            _ => return Err(file_err(OP, path, format!("bad entry {e}"))),
        }
    }
    let n = parsed.len();
    policy::cache().extend(parsed);
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deterministic::scope;
    use crate::op::{Guarantee, Impl};

    type F = fn() -> u32;
    static TUNED: Op<F> = Op {
        name: "tuned_test_op",
        impls: &[
            Impl {
                algo: "tuned_test_op.slow_nondet",
                guarantee: Guarantee::NotGuaranteed,
                f: || 1,
            },
            Impl {
                algo: "tuned_test_op.fast_det",
                guarantee: Guarantee::ThreadInvariant,
                f: || 2,
            },
            Impl {
                algo: "tuned_test_op.slow_det",
                guarantee: Guarantee::ThreadInvariant,
                f: || 3,
            },
        ],
    };

    fn sleep_for(imp: &Impl<F>) {
        let ms = if imp.algo == "tuned_test_op.fast_det" {
            1
        } else {
            15
        };
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }

    /// Runs `op` tuned for `key` through dispatch with the first candidate as heuristic, the
    /// kernel sleeping as [`sleep_for`]: the algorithm that ran last (the chosen one) and how
    /// many times the kernel ran (more than once: the candidates were timed).
    fn tuned_run(op: &'static Op<F>, key: &str) -> Result<(&'static str, usize)> {
        let (last, calls) = (core::cell::Cell::new(""), core::cell::Cell::new(0));
        let first = |a: &[&'static Impl<F>]| a[0];
        op.tuned(key).heuristic(&first).run(&[], |imp, _| {
            sleep_for(imp);
            last.set(imp.algo);
            calls.set(calls.get() + 1);
            crate::Tensor::from_vec(vec![i64::from((imp.f)())], &[1])
        })?;
        Ok((last.get(), calls.get()))
    }

    // One test: benchmark mode and the cache are process-wide.
    #[test]
    fn heuristic_benchmark_save_load() {
        // Off: the heuristic, no timing.
        assert_eq!(
            tuned_run(&TUNED, "k1").unwrap(),
            ("tuned_test_op.slow_nondet", 1)
        );
        // Deterministic mode: only thread-invariant candidates.
        let c = scope(true, false, || tuned_run(&TUNED, "k1").unwrap());
        assert_eq!(c, ("tuned_test_op.fast_det", 1));
        // On: the fastest allowed (each of the three timed once, then the choice runs), cached.
        set_benchmark(true);
        assert_eq!(
            tuned_run(&TUNED, "k2").unwrap(),
            ("tuned_test_op.fast_det", 4)
        );
        assert_eq!(
            tuned_run(&TUNED, "k2").unwrap(),
            ("tuned_test_op.fast_det", 1),
            "cached"
        );
        // Save, clear, load: the choice comes back without timing.
        let dir = std::env::temp_dir().join(format!("lockstep-autotune-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("tune.json");
        save(&file).unwrap();
        clear();
        assert!(load(&file).unwrap() >= 1);
        assert_eq!(
            tuned_run(&TUNED, "k2").unwrap(),
            ("tuned_test_op.fast_det", 1),
            "loaded"
        );
        set_benchmark(false);
        // Stale and corrupt files are refused.
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, text.replace(env!("CARGO_PKG_VERSION"), "0.0.0-old")).unwrap();
        assert!(load(&file).unwrap_err().to_string().contains("retune"));
        std::fs::write(&file, "{ not json").unwrap();
        assert!(load(&file).is_err());
        assert!(load(dir.join("missing.json")).is_err());
        // Issue 13: non-string CPU features and algorithm ids of another op are refused.
        let good = |features: &str, op: &str, algo: &str| {
            format!(
                r#"{{"format": "lockstep-autotune/1", "lockstep": "{}", "cpu_features": {features}, "choices": [{{"op": "{op}", "key": "k", "algo": "{algo}"}}]}}"#,
                env!("CARGO_PKG_VERSION")
            )
        };
        let feats = serde_json::to_string(&cpu_features()).unwrap();
        std::fs::write(&file, good(&feats, "conv2d", "conv2d.im2col_gemm")).unwrap();
        assert_eq!(load(&file).unwrap(), 1);
        clear();
        let mut odd = cpu_features().iter().map(|f| json!(f)).collect::<Vec<_>>();
        odd.push(json!(7));
        std::fs::write(&file, good(&json!(odd).to_string(), "conv2d", "conv2d.x")).unwrap();
        assert!(
            load(&file)
                .unwrap_err()
                .to_string()
                .contains("cpu_features")
        );
        for (op, algo) in [
            ("conv2d", "matmul.blocked"),
            ("conv2d", "im2col"),
            ("", ".x"),
            ("conv2d", "conv2d."),
        ] {
            std::fs::write(&file, good(&feats, op, algo)).unwrap();
            assert!(
                load(&file).unwrap_err().to_string().contains("bad entry"),
                "{op} {algo}"
            );
        }
        // Issue 13: unknown ops and algorithm ids are refused, naming the entry.
        for (op, algo, why) in [
            (
                "conv2d",
                "conv2d.im2col_gemn",
                "not an implementation of conv2d",
            ),
            ("conv3d", "conv3d.direct", "no known op"),
        ] {
            std::fs::write(&file, good(&feats, op, algo)).unwrap();
            let e = load(&file).unwrap_err().to_string();
            assert!(e.contains("bad entry") && e.contains(why), "{e}");
        }
        // Saving never touches a sibling `tune.tmp` (it used to be the temporary file).
        std::fs::write(dir.join("tune.tmp"), "mine").unwrap();
        save(&file).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("tune.tmp")).unwrap(),
            "mine"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn misspelt_pins_are_errors() {
        // A non-tunable op's misspelt algorithm, an unknown op, and a correct name.
        let e = try_with_algorithm("sum.fixed_tre", || ())
            .unwrap_err()
            .to_string();
        assert!(e.contains("not an implementation of sum"), "{e}");
        let e = try_with_algorithm("summ.fixed_tree", || ())
            .unwrap_err()
            .to_string();
        assert!(e.contains("no known op"), "{e}");
        assert_eq!(try_with_algorithm("sum.fixed_tree", || 7).unwrap(), 7);
        // A user-defined tunable op is known once registered.
        assert!(try_with_algorithm("warn_test_op.b", || ()).is_err());
        register(&WARN_OP);
        assert!(try_with_algorithm("warn_test_op.b", || ()).is_ok());
    }

    static WARN_OP: Op<F> = Op {
        name: "warn_test_op",
        impls: &[
            Impl {
                algo: "warn_test_op.a",
                guarantee: Guarantee::NotGuaranteed,
                f: || 1,
            },
            Impl {
                algo: "warn_test_op.b",
                guarantee: Guarantee::NotGuaranteed,
                f: || 2,
            },
        ],
    };
    static WARN_OP2: Op<F> = Op {
        name: "warn_test_op2",
        impls: &[Impl {
            algo: "warn_test_op2.a",
            guarantee: Guarantee::NotGuaranteed,
            f: || 1,
        }],
    };

    #[test]
    fn warn_only_mode_warns_for_tunable_ops() {
        use crate::deterministic::warned_nondeterministic;
        assert!(!warned_nondeterministic("warn_test_op2"));
        let c = scope(true, true, || tuned_run(&WARN_OP2, "k"));
        assert_eq!(c.unwrap().0, "warn_test_op2.a");
        // Warned (on standard error: no logger is installed in tests), once per op.
        assert!(warned_nondeterministic("warn_test_op2"));
        assert!(!crate::deterministic::warn_nondeterministic(
            "warn_test_op2"
        ));
        // Not in warn-only mode: refused, as before.
        let e = scope(true, false, || tuned_run(&WARN_OP2, "k"));
        assert!(matches!(e, Err(Error::Nondeterministic { .. })));
    }
}
