//! The single dispatch point. Every op declares its implementations in an [`Op`], each with
//! the guarantee it gives; [`Op::select`] reads the calling thread's context once and returns
//! the implementation to run plus the [`Par`] it may use. Kernels never read global flags.
//!
//! User code can declare its own ops the same way (a `static` [`Op`] and a call to
//! [`Op::select`]), and they then take part in deterministic mode and its error like built-in
//! ops.

use crate::deterministic;
use crate::error::{Error, Result};
use crate::threads::Par;

/// What an implementation promises about its results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Guarantee {
    /// Results may vary between runs (atomics, completion-order combining).
    NotGuaranteed,
    /// Bitwise identical results for the same inputs whatever the number of threads or the
    /// timing: the order of every floating-point operation depends on the shapes only.
    ThreadInvariant,
}

/// One implementation of an op.
pub struct Impl<F: 'static> {
    /// Algorithm id, stable across versions (used in traces and tuning files).
    pub algo: &'static str,
    /// What it guarantees.
    pub guarantee: Guarantee,
    /// The kernel entry point.
    pub f: F,
}

/// An op and its implementations, fastest first. The first implementation is used when
/// deterministic mode is off; in deterministic mode, the first `ThreadInvariant` one.
pub struct Op<F: 'static> {
    /// The op's name, as users see it in errors (`index_add`, `sum`, …).
    pub name: &'static str,
    /// The implementations, fastest first.
    pub impls: &'static [Impl<F>],
}

/// What dispatch decided for one call.
pub struct Choice<'a, F: 'static> {
    /// The implementation to run.
    pub imp: &'a Impl<F>,
    /// The threads it may use.
    pub par: Par,
}

/// Warn-only mode's once-per-op warning (through `log` if a logger takes it, else stderr).
fn warn_once(op: &'static str) {
    crate::deterministic::warn_nondeterministic(op);
}

impl<F: Copy + 'static> Op<F> {
    /// Picks the implementation for a call from the calling thread's context.
    ///
    /// An algorithm pinned with [`with_algorithm`](crate::autotune::with_algorithm) for this op
    /// runs if the policy allows it. Otherwise the first implementation runs, or in
    /// deterministic mode the first `ThreadInvariant` one.
    ///
    /// # Errors
    /// [`Error::Nondeterministic`] in deterministic mode (not warn-only) when no implementation
    /// is `ThreadInvariant` and the op is not exempted by
    /// [`allow_nondeterministic`](crate::deterministic::allow_nondeterministic);
    /// [`Error::InvalidArgument`] when the pinned algorithm is not one of this op's, or is not
    /// thread-invariant where deterministic mode requires it.
    pub fn select(&'static self) -> Result<Choice<'static, F>> {
        let imp = self.select_impl()?;
        Ok(Choice {
            imp,
            par: Par::current(),
        })
    }

    /// [`select`](Self::select)'s choice without the [`Par`]: for kernels that look at the
    /// thread count only for large inputs (no reference count taken on the pool). The same
    /// policy and errors; no allocation and no lock (thread-local reads only).
    ///
    /// # Errors
    /// As [`select`](Self::select).
    #[inline]
    pub fn select_impl(&'static self) -> Result<&'static Impl<F>> {
        let (det, warn_only) = deterministic::mode();
        let strict = det && !deterministic::is_allowed_nondeterministic(self.name);
        if let Some(algo) = crate::autotune::pinned(self.name) {
            return self.pinned(algo, strict, warn_only);
        }
        self.select_unpinned(strict, warn_only)
    }

    #[inline]
    fn select_unpinned(&'static self, strict: bool, warn_only: bool) -> Result<&'static Impl<F>> {
        if !strict {
            return self.first();
        }
        match self
            .impls
            .iter()
            .find(|i| i.guarantee >= Guarantee::ThreadInvariant)
        {
            Some(i) => Ok(i),
            None if warn_only => {
                warn_once(self.name);
                self.first()
            }
            None => Err(Error::Nondeterministic {
                op: self.name.to_string(),
            }),
        }
    }

    /// The implementation `algo` pinned by `with_algorithm`, if the policy allows it.
    #[cold]
    fn pinned(
        &'static self,
        algo: &str,
        strict: bool,
        warn_only: bool,
    ) -> Result<&'static Impl<F>> {
        let bad = |reason: String| Error::InvalidArgument {
            op: self.name,
            arg: "algorithm",
            reason,
        };
        let Some(imp) = self.by_algo(algo) else {
            // Two registrations can share a name (`index_put` with and without accumulate):
            // a pin of the other one's algorithm does not apply here.
            if find_algo(algo).is_some_and(|(o, _)| o.name == self.name) {
                return self.select_unpinned(strict, warn_only);
            }
            let known: Vec<&str> = self.impls.iter().map(|i| i.algo).collect();
            return Err(bad(format!(
                "{algo} is not an implementation of {} (it has {})",
                self.name,
                known.join(", ")
            )));
        };
        // As `select_tuned`: deterministic mode allows the thread-invariant implementations,
        // or, in warn-only mode for an op that has none, all of them.
        if strict && imp.guarantee < Guarantee::ThreadInvariant {
            if self
                .impls
                .iter()
                .any(|i| i.guarantee >= Guarantee::ThreadInvariant)
            {
                return Err(bad(format!(
                    "{algo} is pinned but is not thread-invariant, and deterministic mode \
                     allows only thread-invariant implementations"
                )));
            }
            if !warn_only {
                return Err(Error::Nondeterministic {
                    op: self.name.to_string(),
                });
            }
            warn_once(self.name);
        }
        Ok(imp)
    }

    fn first(&'static self) -> Result<&'static Impl<F>> {
        self.impls.first().ok_or_else(|| Error::InvalidArgument {
            op: self.name,
            arg: "impls",
            reason: "the op has no implementation registered".into(),
        })
    }

    /// The implementation with algorithm id `algo`, bypassing the policy (tests, benches and
    /// `doctor --self-test` use it to run one kernel on purpose).
    pub fn by_algo(&'static self, algo: &str) -> Option<&'static Impl<F>> {
        self.impls.iter().find(|i| i.algo == algo)
    }
}

/// An op's registration without its kernels' types: name and `(algorithm id, guarantee)` of
/// each implementation (for `lockstep verify`, `doctor` and tools that explain a trace).
#[derive(Clone, Debug)]
pub struct OpInfo {
    /// The op's name.
    pub name: &'static str,
    /// Its implementations, fastest first.
    pub impls: Vec<(&'static str, Guarantee)>,
}

impl<F: 'static> Op<F> {
    /// This op's [`OpInfo`].
    pub fn info(&'static self) -> OpInfo {
        OpInfo {
            name: self.name,
            impls: self.impls.iter().map(|i| (i.algo, i.guarantee)).collect(),
        }
    }
}

/// Every built-in op of this crate registered with dispatch, and the single-implementation
/// families that do not go through it yet (random draws, `cat`), under the algorithm ids their
/// traces show. (`lockstep_nn::builtin_ops` lists the training layer's own.)
pub fn builtin_ops() -> Vec<OpInfo> {
    use crate::ops::{conv, elementwise, index, matmul, pool, reduce};
    let single = |name, algo| OpInfo {
        name,
        impls: vec![(algo, Guarantee::ThreadInvariant)],
    };
    let mut v = vec![
        reduce::SUM.info(),
        reduce::SUM_DIM.info(),
        reduce::MEAN_DIM.info(),
        reduce::VAR.info(),
        reduce::STD.info(),
        reduce::MAX.info(),
        reduce::MIN.info(),
        reduce::LOGSUMEXP.info(),
        reduce::SOFTMAX.info(),
        reduce::LOG_SOFTMAX.info(),
        reduce::CUMSUM.info(),
        matmul::MATMUL.info(),
        conv::CONV2D.info(),
        conv::CONV2D_INPUT_GRAD.info(),
        conv::CONV2D_WEIGHT_GRAD.info(),
        index::INDEX_ADD.info(),
        index::INDEX_PUT.info(),
        index::INDEX_PUT_ACCUMULATE.info(),
        index::SCATTER_ADD.info(),
        index::EMBEDDING_BACKWARD.info(),
        index::EMBEDDING_BAG.info(),
        index::INDEX_SELECT.info(),
        index::GATHER.info(),
        index::BINCOUNT.info(),
        index::HISTC.info(),
        index::EMBEDDING.info(),
        pool::MAX_POOL2D.info(),
        pool::MAX_POOL2D_BACKWARD.info(),
        pool::AVG_POOL2D.info(),
        pool::AVG_POOL2D_BACKWARD.info(),
        pool::ADAPTIVE_AVG_POOL2D.info(),
        pool::ADAPTIVE_AVG_POOL2D_BACKWARD.info(),
        single("random", crate::ops::random::ALGO),
        single("cat", "cat.copy"),
    ];
    v.extend(elementwise::OPS.iter().map(|o| o.info()));
    v.extend(crate::ops::inplace::OPS.iter().map(|o| o.info()));
    v
}

/// The registration whose implementations include `algo`, and that implementation's guarantee.
pub fn find_algo(algo: &str) -> Option<(OpInfo, Guarantee)> {
    builtin_ops().into_iter().find_map(|o| {
        let g = o.impls.iter().find(|(a, _)| *a == algo)?.1;
        Some((o, g))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deterministic::{allow_nondeterministic, scope};

    type F = fn(u32) -> u32;
    /// A user-defined op with only a nondeterministic implementation.
    static MY_OP: Op<F> = Op {
        name: "my_custom_op",
        impls: &[Impl {
            algo: "my_custom_op.atomic",
            guarantee: Guarantee::NotGuaranteed,
            f: |x| x + 1,
        }],
    };
    static BOTH: Op<F> = Op {
        name: "both",
        impls: &[
            Impl {
                algo: "fast",
                guarantee: Guarantee::NotGuaranteed,
                f: |x| x,
            },
            Impl {
                algo: "det",
                guarantee: Guarantee::ThreadInvariant,
                f: |x| x * 2,
            },
        ],
    };

    #[test]
    fn deterministic_mode_picks_or_refuses() {
        scope(false, false, || {
            assert_eq!((BOTH.select().unwrap().imp.f)(3), 3)
        });
        scope(true, false, || {
            assert_eq!((BOTH.select().unwrap().imp.f)(3), 6)
        });
        let err = scope(true, false, || MY_OP.select().err().unwrap());
        assert!(matches!(&err, Error::Nondeterministic { op } if op == "my_custom_op"));
        assert!(
            err.to_string()
                .starts_with("my_custom_op does not have a deterministic implementation")
        );
        scope(true, true, || {
            assert_eq!((MY_OP.select().unwrap().imp.f)(1), 2)
        });
        scope(true, false, || {
            allow_nondeterministic("my_custom_op", || assert!(MY_OP.select().is_ok()));
            assert!(MY_OP.select().is_err(), "the exemption ends with its scope");
        });
        assert_eq!(BOTH.by_algo("det").unwrap().algo, "det");
    }

    #[test]
    fn scopes_are_per_thread_and_restored_on_panic() {
        scope(true, false, || {
            let other =
                std::thread::spawn(crate::deterministic::are_deterministic_algorithms_enabled);
            assert!(
                !other.join().unwrap(),
                "another thread keeps the process default"
            );
            let r = std::panic::catch_unwind(|| scope(false, false, || panic!("boom")));
            assert!(r.is_err());
            assert!(crate::deterministic::are_deterministic_algorithms_enabled());
        });
    }

    #[test]
    fn empty_is_filled_in_deterministic_mode() {
        let e = scope(true, false, || {
            crate::Tensor::empty(&[3], crate::DType::F32).unwrap()
        });
        assert!(e.to_vec::<f32>().unwrap().iter().all(|x| x.is_nan()));
        let e = scope(true, false, || {
            crate::Tensor::empty(&[2], crate::DType::I64).unwrap()
        });
        assert_eq!(e.to_vec::<i64>().unwrap(), [i64::MAX; 2]);
    }
}
