//! `lockstep sample numpy-legacy|numpy FN` (to be written).
use super::{Opts, SampleError, Values, fail};

pub fn run_legacy(func: &str, _opts: &Opts, _repeat: usize) -> Result<Values, SampleError> {
    fail(format!("numpy-legacy `{func}`: not available yet"))
}

pub fn run_generator(func: &str, _opts: &Opts, _repeat: usize) -> Result<Values, SampleError> {
    fail(format!("numpy `{func}`: not available yet"))
}
