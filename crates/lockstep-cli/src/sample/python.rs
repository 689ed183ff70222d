//! `lockstep sample python FN`: CPython 3.11 `random` (to be written).
use super::{Opts, SampleError, Values, fail};

pub fn run(func: &str, _opts: &Opts, _repeat: usize) -> Result<Values, SampleError> {
    fail(format!("python `{func}`: not available yet"))
}
