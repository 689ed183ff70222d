//! The determinism self-test behind `lockstep doctor --self-test`: runs every deterministic
//! kernel on seeded random inputs at 1, 2, 3 and the machine's thread count, in deterministic
//! mode, and reports op by op whether all the bits agree — a user's way to confirm
//! determinism on their own machine.

use crate::deterministic::scope;
use crate::threads::with_num_threads;
use crate::{DType, Result, Tensor};
use lockstep_rng::Generator;

/// The outcome for one op.
#[derive(Clone, Debug, PartialEq)]
pub struct SelfTestResult {
    /// The op (and the case, e.g. `sum[1000003]`).
    pub op: String,
    /// The thread counts it ran at.
    pub threads: Vec<usize>,
    /// Whether every run gave the same bits.
    pub identical: bool,
    /// An error, if the op failed to run at all.
    pub error: Option<String>,
}

/// A named case: a closure computing an output from nothing but its own seeded inputs.
pub type Case = (String, Box<dyn Fn() -> Result<Tensor> + Send + Sync>);

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F32, Some(&mut Generator::with_seed(seed))).expect("valid shape")
}

fn bits(t: &Tensor) -> Vec<u64> {
    t.to_f64_vec().into_iter().map(f64::to_bits).collect()
}

/// The built-in cases: every deterministic kernel of this crate, on shapes that exercise the
/// chunk and lane remainders.
pub fn cases() -> Vec<Case> {
    let mut v: Vec<Case> = Vec::new();
    for n in [1_000_003usize, 70_001] {
        let x = randn(&[n], n as u64);
        v.push((format!("sum[{n}]"), Box::new(move || x.sum())));
    }
    let x = randn(&[257, 129], 7);
    let y = x.clone();
    v.push((
        "sum_dim[257x129, dim=1]".into(),
        Box::new(move || y.sum_dim(1, false)),
    ));
    let y = x.clone();
    v.push((
        "sum_dim[257x129, dim=0]".into(),
        Box::new(move || y.sum_dim(0, false)),
    ));
    let y = x.clone();
    v.push((
        "mul+tanh[257x129]".into(),
        Box::new(move || y.tanh()?.mul(&y)),
    ));
    v
}

/// Runs `cases` at 1, 2, 3 and `get_num_threads()` threads (deduplicated) in deterministic
/// mode and compares the output bits.
pub fn run(cases: &[Case]) -> Vec<SelfTestResult> {
    let mut threads = vec![1, 2, 3, crate::threads::get_num_threads()];
    threads.sort_unstable();
    threads.dedup();
    cases
        .iter()
        .map(|(name, f)| {
            let mut outs = Vec::new();
            let mut error = None;
            for &t in &threads {
                match scope(true, false, || with_num_threads(t, f)) {
                    Ok(o) => outs.push((o.shape().to_vec(), bits(&o))),
                    Err(e) => {
                        error = Some(e.to_string());
                        break;
                    }
                }
            }
            SelfTestResult {
                op: name.clone(),
                threads: threads.clone(),
                identical: error.is_none() && outs.windows(2).all(|w| w[0] == w[1]),
                error,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn built_in_cases_pass() {
        for r in super::run(&super::cases()) {
            assert!(r.identical, "{r:?}");
        }
    }
}
