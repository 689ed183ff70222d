//! `lockstep sample torch FN` (to be written).
use super::{Opts, SampleError, Values, fail};
use lockstep_rng::Generator;

/// `--seed`, any integer PyTorch's `manual_seed` accepts (`-2^63 ..= 2^64-1`), mod 2^64.
pub fn seed_arg(opts: &Opts) -> Result<u64, SampleError> {
    let s = opts.raw("seed").unwrap_or("0");
    match s.trim().parse::<i128>() {
        Ok(v) if (-(1i128 << 63)..(1i128 << 64)).contains(&v) => Ok(v as u64),
        _ => fail(format!(
            "option --seed={s}: PyTorch seeds are integers in [-2^63, 2^64 - 1]"
        )),
    }
}

pub fn run(_g: &mut Generator, func: &str, _opts: &Opts, _repeat: usize) -> Result<Values, SampleError> {
    fail(format!("torch `{func}`: not available yet"))
}
