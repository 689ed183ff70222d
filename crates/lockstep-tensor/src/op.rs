//! What an op is ([`Op`], its [`Impl`]s and their [`Guarantee`]s) and the dispatch call
//! ([`Op::run`]), published as [`crate::dispatch`]. This file knows no op: it reads the policy
//! ([`crate::policy`], [`crate::deterministic`]) and the thread team, and the op files build on
//! it; the list of every op lives above them ([`crate::ops::builtin_ops`]).

use crate::Tensor;
use crate::deterministic;
use crate::error::{Error, Result};
use crate::policy;
use crate::threads::Par;

/// What an implementation promises about its results.
///
/// Ordered so that `g >= Guarantee::ThreadInvariant` holds for every thread-invariant one
/// ([`is_thread_invariant`](Self::is_thread_invariant)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Guarantee {
    /// Results may vary between runs (atomics, completion-order combining).
    NotGuaranteed,
    /// Bitwise identical results for the same inputs whatever the number of threads or the
    /// timing: the order of every floating-point operation depends on the shapes only.
    ThreadInvariant,
    /// Thread-invariant as [`ThreadInvariant`](Self::ThreadInvariant), but trading accuracy for
    /// speed (convolution's Winograd: about ten times a direct sum's rounding error). Dispatch
    /// chooses it only where fast algorithms are allowed
    /// ([`set_allow_fast_conv`](crate::autotune::set_allow_fast_conv), PyTorch's `allow_tf32`)
    /// or it is pinned ([`with_algorithm`](crate::autotune::with_algorithm)).
    ThreadInvariantReducedAccuracy,
}

impl Guarantee {
    /// Whether results are the same bits at any thread count.
    pub fn is_thread_invariant(self) -> bool {
        self >= Guarantee::ThreadInvariant
    }

    /// Whether the implementation trades accuracy for speed (chosen only where allowed).
    pub fn is_reduced_accuracy(self) -> bool {
        self == Guarantee::ThreadInvariantReducedAccuracy
    }
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

/// What dispatch decided for one call ([`Op::select`]).
pub struct Choice<'a, F: 'static> {
    /// The implementation to run.
    pub imp: &'a Impl<F>,
    /// The threads it may use.
    pub par: Par,
}

/// A kernel's result as the trace sees it: the tensors recorded as the call's output.
pub trait Output {
    /// Calls `record` on each tensor the trace records for this result, in order (an op
    /// records one record per tensor).
    fn traced(&self, record: &mut dyn FnMut(&Tensor));
}

impl Output for Tensor {
    fn traced(&self, record: &mut dyn FnMut(&Tensor)) {
        record(self)
    }
}

/// The first tensor (max pooling's values, not their indices; a layer's output, not what its
/// backward keeps).
impl<B> Output for (Tensor, B) {
    fn traced(&self, record: &mut dyn FnMut(&Tensor)) {
        record(&self.0)
    }
}

/// The first two tensors (an LSTM cell's `h'` and `c'`, not what its backward keeps).
impl<C> Output for (Tensor, Tensor, C) {
    fn traced(&self, record: &mut dyn FnMut(&Tensor)) {
        record(&self.0);
        record(&self.1)
    }
}

/// The first tensor: an op's primary output (`max`'s values before their indices).
impl Output for Vec<Tensor> {
    fn traced(&self, record: &mut dyn FnMut(&Tensor)) {
        if let Some(t) = self.first() {
            record(t)
        }
    }
}

/// Each present tensor, in order: a backward's gradients (`None` where none is needed).
impl Output for Vec<Option<Tensor>> {
    fn traced(&self, record: &mut dyn FnMut(&Tensor)) {
        self.iter().flatten().for_each(record)
    }
}

/// The tensor if there is one (`None`: the op handed the work elsewhere and records nothing).
impl Output for Option<Tensor> {
    fn traced(&self, record: &mut dyn FnMut(&Tensor)) {
        if let Some(t) = self {
            record(t)
        }
    }
}

/// A tunable call's heuristic: picks one of the allowed implementations.
pub type Heuristic<'a, F> = &'a dyn Fn(&[&'static Impl<F>]) -> &'static Impl<F>;

/// A tunable call's description: the shape key of the tuning cache, which implementations
/// apply to these shapes and the heuristic that chooses among the allowed ones when benchmark
/// mode is off. Made by [`Op::tuned`]; run by [`Tuned::run`].
pub struct Tuned<'a, F: 'static> {
    op: &'static Op<F>,
    key: &'a str,
    applies: Option<&'a dyn Fn(&'static Impl<F>) -> bool>,
    heuristic: Option<Heuristic<'a, F>>,
    convolution: bool,
}

impl<'a, F: Copy + 'static> Tuned<'a, F> {
    /// Only implementations for which `f` holds are candidates for these shapes (default: all).
    /// A pinned implementation that does not apply is ignored for this call.
    pub fn applies(mut self, f: &'a dyn Fn(&'static Impl<F>) -> bool) -> Self {
        self.applies = Some(f);
        self
    }

    /// With benchmark mode off, `f` chooses among the allowed, applicable candidates (never an
    /// empty list) from the shapes alone (default: the first).
    pub fn heuristic(mut self, f: Heuristic<'a, F>) -> Self {
        self.heuristic = Some(f);
        self
    }

    /// Marks the op as a convolution: [`set_conv_deterministic`](crate::autotune::set_conv_deterministic)
    /// (PyTorch's `cudnn.deterministic`) then restricts it to thread-invariant implementations.
    pub fn convolution(mut self) -> Self {
        self.convolution = true;
        self
    }

    /// Runs the call through dispatch: [`Op::run`] for a tunable op. An algorithm pinned by
    /// [`with_algorithm`](crate::autotune::with_algorithm) runs if the policy allows it and it
    /// applies. Otherwise only the candidates the policy permits ([`Op::allowed`]; reduced-
    /// accuracy ones only with [`allow_fast_conv`](crate::autotune::allow_fast_conv)) that apply are
    /// considered: with benchmark mode off the heuristic chooses; with it on, a cached or loaded
    /// choice for the key is reused if still a candidate, else `kernel` runs once per candidate
    /// (timed; those results are dropped) and the fastest is cached. The chosen one then runs
    /// and is traced.
    ///
    /// # Errors
    /// As [`Op::run`]; [`Error::InvalidArgument`] when no allowed implementation applies.
    pub fn run<R: Output>(
        self,
        inputs: &[&Tensor],
        mut kernel: impl FnMut(&'static Impl<F>, &Par) -> Result<R>,
    ) -> Result<R> {
        let op = self.op;
        op.dispatch(Some(&self), &mut kernel, |algo, out| {
            record(op.name, algo, inputs, out)
        })
    }
}

/// Warn-only mode's once-per-op warning (through `log` if a logger takes it, else stderr).
fn warn_once(op: &'static str) {
    crate::deterministic::warn_nondeterministic(op);
}

/// Records `out` (each of its traced tensors) as a call of `op` with `algo`.
#[inline]
fn record<R: Output>(op: &str, algo: &str, inputs: &[&Tensor], out: &R) {
    if crate::trace::enabled() {
        out.traced(&mut |t| crate::trace::record(op, algo, inputs, t));
    }
}

impl<F: Copy + 'static> Op<F> {
    /// The dispatch call: picks the implementation by the policy (see the module
    /// documentation), runs `kernel` with it and the thread team, and traces the result under
    /// this op's name and the algorithm chosen (`inputs` give the record's input shapes).
    ///
    /// ```
    /// use lockstep_tensor::dispatch::{Guarantee, Impl, Op};
    /// use lockstep_tensor::{Tensor, threads::Par};
    ///
    /// type Kernel = fn(&[f32], &Par) -> Vec<f32>;
    /// static DOUBLE: Op<Kernel> = Op {
    ///     name: "double",
    ///     impls: &[Impl {
    ///         algo: "double.serial",
    ///         guarantee: Guarantee::ThreadInvariant,
    ///         f: |x, _| x.iter().map(|v| v * 2.0).collect(),
    ///     }],
    /// };
    /// let x = Tensor::from_vec(vec![1f32, 2.0], &[2])?;
    /// let y = DOUBLE.run(&[&x], |imp, par| {
    ///     Tensor::from_vec((imp.f)(x.to_vec::<f32>()?.as_slice(), par), &[2])
    /// })?;
    /// assert_eq!(y.to_vec::<f32>()?, [2.0, 4.0]);
    /// # Ok::<(), lockstep_tensor::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Nondeterministic`] in deterministic mode (not warn-only) when no implementation
    /// is `ThreadInvariant` and the op is not exempted by
    /// [`allow_nondeterministic`](crate::deterministic::allow_nondeterministic);
    /// [`Error::InvalidArgument`] when the pinned algorithm is not one of this op's, or is not
    /// thread-invariant where deterministic mode requires it; the kernel's own errors.
    #[inline]
    pub fn run<R: Output>(
        &'static self,
        inputs: &[&Tensor],
        kernel: impl FnOnce(&'static Impl<F>, &Par) -> Result<R>,
    ) -> Result<R> {
        let mut kernel = Some(kernel);
        self.dispatch(
            None,
            &mut |imp, par| match kernel.take() {
                Some(k) => k(imp, par),
                None => unreachable!("an untuned call runs its kernel once"),
            },
            |algo, out| record(self.name, algo, inputs, out),
        )
    }

    /// [`run`](Self::run) for an op that writes `dst` in place: `kernel` gets `dst`, and the
    /// trace records `dst` afterwards as the output (inputs: `dst`, then `others`).
    ///
    /// # Errors
    /// As [`run`](Self::run).
    #[inline]
    pub fn run_inplace(
        &'static self,
        dst: &mut Tensor,
        others: &[&Tensor],
        kernel: impl FnOnce(&'static Impl<F>, &Par, &mut Tensor) -> Result<()>,
    ) -> Result<()> {
        let mut kernel = Some(kernel);
        let mut dst = Some(dst);
        self.dispatch(
            None,
            &mut |imp, par| match (kernel.take(), dst.take()) {
                (Some(k), Some(d)) => {
                    k(imp, par, d)?;
                    Ok(&*d)
                }
                _ => unreachable!("an untuned call runs its kernel once"),
            },
            |algo, out: &&Tensor| {
                if crate::trace::enabled() {
                    let mut inputs = Vec::with_capacity(others.len() + 1);
                    inputs.push(*out);
                    inputs.extend_from_slice(others);
                    crate::trace::record(self.name, algo, &inputs, out);
                }
            },
        )
        .map(drop)
    }

    /// A tunable call with shape key `key` (e.g. the operands' shapes and dtype): see
    /// [`Tuned::run`].
    pub fn tuned<'a>(&'static self, key: &'a str) -> Tuned<'a, F> {
        Tuned {
            op: self,
            key,
            applies: None,
            heuristic: None,
            convolution: false,
        }
    }

    /// The one function behind [`run`](Self::run), [`run_inplace`](Self::run_inplace) and
    /// [`Tuned::run`]: policy, team, kernel (under the tripwire), trace.
    #[inline]
    fn dispatch<R>(
        &'static self,
        tune: Option<&Tuned<'_, F>>,
        kernel: &mut dyn FnMut(&'static Impl<F>, &Par) -> Result<R>,
        trace: impl FnOnce(&'static str, &R),
    ) -> Result<R> {
        let par = Par::for_dispatch();
        let imp = match tune {
            None => self.select_impl()?,
            Some(t) => self.choose_tuned(t, &par, kernel)?,
        };
        let out = crate::threads::in_kernel(|| kernel(imp, &par))?;
        trace(imp.algo, &out);
        Ok(out)
    }

    /// The policy's choice and the thread team, without running or tracing anything: for code
    /// that runs its kernel itself (then it should record the call with
    /// [`trace::record`](crate::trace::record)). Built-in ops use [`run`](Self::run).
    ///
    /// An algorithm pinned with [`with_algorithm`](crate::autotune::with_algorithm) for this op
    /// runs if the policy allows it. Otherwise the first implementation runs, or in
    /// deterministic mode the first `ThreadInvariant` one.
    ///
    /// # Errors
    /// As [`run`](Self::run), less the kernel's.
    pub fn select(&'static self) -> Result<Choice<'static, F>> {
        let imp = self.select_impl()?;
        Ok(Choice {
            imp,
            par: Par::for_dispatch(),
        })
    }

    /// [`select`](Self::select)'s choice without the [`Par`]. The same policy and errors; no
    /// allocation and no lock (thread-local reads only).
    ///
    /// # Errors
    /// As [`select`](Self::select).
    #[inline]
    pub fn select_impl(&'static self) -> Result<&'static Impl<F>> {
        let (det, warn_only) = deterministic::mode();
        let strict = det && !deterministic::is_allowed_nondeterministic(self.name);
        if let Some(pin) = policy::pinned(self.name) {
            return self.pinned(pin, strict, warn_only);
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
            .find(|i| i.guarantee.is_thread_invariant())
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
        pin: policy::Pin,
        strict: bool,
        warn_only: bool,
    ) -> Result<&'static Impl<F>> {
        let bad = |reason: String| Error::InvalidArgument {
            op: self.name,
            arg: "algorithm",
            reason,
        };
        let algo = pin.algo;
        let Some(imp) = self.by_algo(algo) else {
            // Two registrations can share a name (`index_put` with and without accumulate):
            // a pin of the other one's algorithm does not apply here.
            if pin.known {
                return self.select_unpinned(strict, warn_only);
            }
            let known: Vec<&str> = self.impls.iter().map(|i| i.algo).collect();
            return Err(bad(format!(
                "{algo} is not an implementation of {} (it has {})",
                self.name,
                known.join(", ")
            )));
        };
        // As tunable ops: deterministic mode allows the thread-invariant implementations,
        // or, in warn-only mode for an op that has none, all of them.
        if strict && !imp.guarantee.is_thread_invariant() {
            if self.impls.iter().any(|i| i.guarantee.is_thread_invariant()) {
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

    /// A tunable call's choice (see [`Tuned::run`]); in benchmark mode `kernel` may run once
    /// per candidate to time it.
    fn choose_tuned<R>(
        &'static self,
        t: &Tuned<'_, F>,
        par: &Par,
        kernel: &mut dyn FnMut(&'static Impl<F>, &Par) -> Result<R>,
    ) -> Result<&'static Impl<F>> {
        policy::register(self.name, || self.impls.iter().map(|i| i.algo).collect());
        let applies = |i: &'static Impl<F>| t.applies.is_none_or(|f| f(i));
        let mut allowed = self.allowed(t.convolution && policy::conv_deterministic())?;
        if let Some(policy::Pin { algo, .. }) = policy::pinned(self.name) {
            let bad = |reason: String| Error::InvalidArgument {
                op: self.name,
                arg: "algorithm",
                reason,
            };
            let Some(imp) = self.by_algo(algo) else {
                return Err(bad(format!(
                    "{algo} is not an implementation of {}",
                    self.name
                )));
            };
            if !allowed.iter().any(|i| i.algo == algo) {
                return Err(bad(format!(
                    "{algo} is pinned but is not thread-invariant, and deterministic mode \
                     allows only thread-invariant implementations"
                )));
            }
            if applies(imp) {
                return Ok(imp);
            }
        }
        // Reduced-accuracy algorithms only where the caller opted in (or pinned one, above).
        let fast = policy::allow_fast_conv();
        allowed.retain(|i| applies(i) && (fast || !i.guarantee.is_reduced_accuracy()));
        if allowed.is_empty() {
            return Err(Error::InvalidArgument {
                op: self.name,
                arg: "input",
                reason: format!("no allowed implementation applies to shapes {}", t.key),
            });
        }
        if !policy::benchmark() || allowed.len() == 1 {
            return Ok(match t.heuristic {
                Some(h) => h(&allowed),
                None => allowed[0],
            });
        }
        if let Some(algo) = policy::cached(self.name, t.key)
            && let Some(imp) = allowed.iter().find(|i| i.algo == algo)
        {
            return Ok(imp);
        }
        let mut best: Option<(f64, &'static Impl<F>)> = None;
        for &imp in &allowed {
            let start = std::time::Instant::now();
            crate::threads::in_kernel(|| kernel(imp, par).map(drop))?;
            let s = start.elapsed().as_secs_f64();
            if best.is_none_or(|(b, _)| s < b) {
                best = Some((s, imp));
            }
        }
        let imp = best.map_or(allowed[0], |(_, i)| i);
        policy::cache_choice(self.name, t.key, imp.algo);
        Ok(imp)
    }

    /// The implementations the current policy allows: all of them, or only the
    /// thread-invariant ones in deterministic mode (or when `restrict_deterministic`, as
    /// [`set_conv_deterministic`](crate::autotune::set_conv_deterministic) asks for convolution).
    ///
    /// # Errors
    /// [`Error::Nondeterministic`] when none is allowed (not in warn-only mode).
    pub fn allowed(&'static self, restrict_deterministic: bool) -> Result<Vec<&'static Impl<F>>> {
        let (det, warn_only) = deterministic::mode();
        let det = (det && !deterministic::is_allowed_nondeterministic(self.name))
            || restrict_deterministic;
        if !det {
            return Ok(self.impls.iter().collect());
        }
        let v: Vec<_> = self
            .impls
            .iter()
            .filter(|i| i.guarantee.is_thread_invariant())
            .collect();
        if v.is_empty() {
            if warn_only && !restrict_deterministic {
                warn_once(self.name);
                return Ok(self.impls.iter().collect());
            }
            return Err(Error::Nondeterministic {
                op: self.name.to_string(),
            });
        }
        Ok(v)
    }

    fn first(&'static self) -> Result<&'static Impl<F>> {
        self.impls.first().ok_or_else(|| Error::InvalidArgument {
            op: self.name,
            arg: "impls",
            reason: "the op has no implementation registered".into(),
        })
    }
}

impl<F: 'static> Op<F> {
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

    static LOOKS: Op<()> = Op {
        name: "tripwire_test_op",
        impls: &[Impl {
            algo: "tripwire_test_op.a",
            guarantee: Guarantee::ThreadInvariant,
            f: (),
        }],
    };

    #[test]
    fn run_hands_the_team_and_traces_once() {
        let x = Tensor::from_vec(vec![1f32, 2.0], &[2]).unwrap();
        let (y, recs) = crate::trace::capture(|| {
            crate::threads::with_num_threads(3, || {
                LOOKS.run(&[&x], |imp, par| {
                    assert_eq!((imp.algo, par.threads()), ("tripwire_test_op.a", 3));
                    Tensor::from_vec(vec![par.threads() as f32], &[1])
                })
            })
        });
        assert_eq!(y.unwrap().to_vec::<f32>().unwrap(), [3.0]);
        assert_eq!(recs.len(), 1);
        assert_eq!(
            (recs[0].op.as_str(), recs[0].algo.as_str()),
            ("tripwire_test_op", "tripwire_test_op.a")
        );
        assert_eq!(recs[0].inputs, [vec![2]]);
        // A kernel's error is returned and nothing is traced.
        let (r, recs) = crate::trace::capture(|| {
            LOOKS.run(&[&x], |_, _| -> Result<Tensor> {
                Err(crate::error::invalid("tripwire_test_op", "x", "bad"))
            })
        });
        assert!(r.is_err() && recs.is_empty());
    }

    #[test]
    #[cfg(debug_assertions)]
    fn a_kernel_that_looks_the_team_up_trips_the_wire() {
        fn team() {
            drop(Par::current());
        }
        fn count() {
            let _ = crate::threads::get_num_threads();
        }
        for look in [team as fn(), count] {
            let r = std::panic::catch_unwind(|| {
                LOOKS.run(&[], |_, _| {
                    look();
                    Tensor::from_vec(vec![0f32], &[1])
                })
            });
            let msg = r.err().and_then(|e| e.downcast::<String>().ok());
            assert!(
                msg.is_some_and(|m| m.contains("inside a kernel run by dispatch")),
                "the lookup inside a kernel panics"
            );
        }
        // Disarmed after the panic, and never armed outside kernels; ops called from inside a
        // kernel go through their own dispatch, which may read the context.
        assert!(Par::current().threads() >= 1);
        let x = Tensor::from_vec(vec![1f32, 2.0], &[2]).unwrap();
        let y = LOOKS.run(&[&x], |_, _| x.add(&x)?.sum()).unwrap();
        assert_eq!(y.item::<f32>().unwrap(), 6.0);
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
