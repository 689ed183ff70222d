//! Where the training layer's random draws come from.
//!
//! By default `Dropout` (and an RNN's inter-layer dropout) draws its mask from the default
//! generator, as PyTorch does, so a PyTorch program and its port draw the same masks.
//! [`with_dropout_generator`] hands a forward pass another generator instead (for example one
//! keyed by the sample, so that masks do not depend on the number of threads or workers).

use crate::autograd::Var;
use lockstep_rng::Generator;
use lockstep_tensor::Result;
use std::cell::RefCell;

thread_local! {
    static DROPOUT_GEN: RefCell<Option<Generator>> = const { RefCell::new(None) };
}

/// Runs `f` with dropout masks on this thread drawn from `g` instead of the default
/// generator; returns `f`'s result and the generator as it is afterwards.
pub fn with_dropout_generator<R>(g: Generator, f: impl FnOnce() -> R) -> (R, Generator) {
    struct Restore(Option<Generator>);
    impl Drop for Restore {
        fn drop(&mut self) {
            DROPOUT_GEN.with(|d| *d.borrow_mut() = self.0.take());
        }
    }
    let prev = DROPOUT_GEN.with(|d| d.borrow_mut().replace(g));
    let restore = Restore(prev);
    let r = f();
    let g = DROPOUT_GEN
        .with(|d| d.borrow_mut().take())
        .expect("set above and only taken here");
    drop(restore);
    (r, g)
}

/// `F.dropout(x, p, training)` from the current dropout source (see the module docs).
///
/// # Errors
/// Non-float dtype; `p` outside `[0, 1]`.
pub fn dropout(x: &Var, p: f64, training: bool) -> Result<Var> {
    DROPOUT_GEN.with(|d| match d.borrow_mut().as_mut() {
        Some(g) => x.dropout(p, training, Some(g)),
        None => x.dropout(p, training, None),
    })
}
