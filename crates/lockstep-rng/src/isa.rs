//! The one instruction-set switch of lockstep: which vector path (`portable`, `avx2`,
//! `avx512`) every kernel with more than one build runs.
//!
//! Every deterministic kernel computes the same bits on every path (a fused multiply-add rounds
//! once whatever the vector width, and the order of operations is fixed by the shapes), so the
//! path changes speed only. Forcing one lets a user check that claim on their own machine, and
//! lets a machine with AVX-512 reproduce exactly what a machine without it (or an ARM machine,
//! which runs the portable path) computes.
//!
//! The path in use ([`Isa::best`]) is, in order of precedence:
//! 1. the one passed to [`set_isa`] (process-wide; an ISA the CPU lacks is an error);
//! 2. the environment variable `LOCKSTEP_ISA` = `portable` | `avx2` | `avx512` (any case), read
//!    once, at the first call. A value that names no ISA, or an ISA this CPU cannot run, is
//!    not used: a warning is printed once on standard error and the detected path is taken
//!    (results are the same bits either way). Programs that prefer to refuse it call
//!    [`isa_from_env`] at start-up, as the `lockstep` binary does;
//! 3. the fastest path the CPU supports ([`Isa::detected`]).

use crate::{Error, Result, invalid};
use core::fmt;
use core::str::FromStr;
use std::sync::atomic::{AtomicU8, Ordering};

/// The environment variable that selects the instruction-set path.
pub const ISA_ENV: &str = "LOCKSTEP_ISA";

/// An instruction-set path of lockstep's vectorised kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Isa {
    /// Scalar code (true fused multiply-adds via `mul_add`): runs on every CPU.
    Portable,
    /// 256-bit AVX2 with FMA (x86-64).
    Avx2,
    /// 512-bit AVX-512F (x86-64).
    Avx512,
}

/// Where the path in use came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IsaSource {
    /// The fastest path the CPU supports.
    Detected,
    /// The `LOCKSTEP_ISA` environment variable.
    Environment,
    /// A call to [`set_isa`].
    Forced,
}

impl IsaSource {
    /// `detected`, `environment` or `forced`.
    pub fn name(self) -> &'static str {
        match self {
            IsaSource::Detected => "detected",
            IsaSource::Environment => "environment",
            IsaSource::Forced => "forced",
        }
    }
}

impl Isa {
    /// Every path, slowest first.
    pub const ALL: [Isa; 3] = [Isa::Portable, Isa::Avx2, Isa::Avx512];

    /// The name `LOCKSTEP_ISA` and [`FromStr`] accept: `portable`, `avx2` or `avx512`.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// Whether the running CPU can execute kernels of this instruction set (`avx2` needs AVX2
    /// and FMA, `avx512` needs AVX-512F).
    pub fn available(self) -> bool {
        match self {
            Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The fastest path the running CPU supports, whatever was forced.
    pub fn detected() -> Isa {
        if Isa::Avx512.available() {
            Isa::Avx512
        } else if Isa::Avx2.available() {
            Isa::Avx2
        } else {
            Isa::Portable
        }
    }

    /// The path in use: [`set_isa`], else `LOCKSTEP_ISA`, else [`Isa::detected`] (see the
    /// module documentation). Always one the CPU supports. Cheap (one relaxed atomic load after
    /// the first call): kernels ask for it per call.
    #[inline]
    pub fn best() -> Isa {
        match decode(STATE.load(Ordering::Relaxed)) {
            Some((isa, _)) => isa,
            None => resolve().0,
        }
    }

    /// Whether kernels of this path may run now: it is available and not faster than the path
    /// in use. Sites that test one CPU feature themselves (an AVX2 build of a loop) ask
    /// `Isa::Avx2.enabled()` instead, so that forcing `portable` reaches them too.
    #[inline]
    pub fn enabled(self) -> bool {
        self <= Isa::best()
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Isa {
    type Err = Error;

    /// Parses `portable`, `avx2` or `avx512` (any case, surrounding spaces ignored).
    fn from_str(s: &str) -> Result<Isa> {
        let t = s.trim();
        Isa::ALL
            .into_iter()
            .find(|i| i.name().eq_ignore_ascii_case(t))
            .ok_or_else(|| {
                invalid(
                    "Isa::from_str",
                    "isa",
                    format!("{s:?} is not an instruction-set path: use portable, avx2 or avx512"),
                )
            })
    }
}

/// 0 until resolved; else `isa code (1..=3) | source << 2`.
static STATE: AtomicU8 = AtomicU8::new(0);

fn encode(isa: Isa, src: IsaSource) -> u8 {
    let i = match isa {
        Isa::Portable => 1,
        Isa::Avx2 => 2,
        Isa::Avx512 => 3,
    };
    let s = match src {
        IsaSource::Detected => 0,
        IsaSource::Environment => 1,
        IsaSource::Forced => 2,
    };
    i | s << 2
}

fn decode(v: u8) -> Option<(Isa, IsaSource)> {
    let isa = match v & 3 {
        1 => Isa::Portable,
        2 => Isa::Avx2,
        3 => Isa::Avx512,
        _ => return None,
    };
    let src = match v >> 2 {
        1 => IsaSource::Environment,
        2 => IsaSource::Forced,
        _ => IsaSource::Detected,
    };
    Some((isa, src))
}

/// The path `LOCKSTEP_ISA` asks for: `Ok(None)` when it is unset or empty, an error when it
/// names no path or one this CPU cannot run. Programs call this at start-up to refuse a bad
/// value (the library itself warns and falls back, see the module documentation).
///
/// # Errors
/// [`Error::InvalidArgument`] naming `LOCKSTEP_ISA`, the value and the paths this CPU has.
pub fn isa_from_env() -> Result<Option<Isa>> {
    let v = match std::env::var(ISA_ENV) {
        Ok(v) if v.trim().is_empty() => return Ok(None),
        Ok(v) => v,
        Err(std::env::VarError::NotPresent) => return Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(invalid(
                ISA_ENV,
                "value",
                "not valid Unicode: use portable, avx2 or avx512",
            ));
        }
    };
    let isa = v.parse::<Isa>().map_err(|_| {
        invalid(
            ISA_ENV,
            "value",
            format!("{v:?} is not an instruction-set path: use portable, avx2 or avx512"),
        )
    })?;
    check_available(ISA_ENV, isa)?;
    Ok(Some(isa))
}

fn check_available(op: &'static str, isa: Isa) -> Result<()> {
    if isa.available() {
        return Ok(());
    }
    let have: Vec<&str> = Isa::ALL
        .into_iter()
        .filter(|i| i.available())
        .map(Isa::name)
        .collect();
    Err(invalid(
        op,
        "isa",
        format!(
            "this CPU cannot run the {isa} path (it can run: {})",
            have.join(", ")
        ),
    ))
}

/// The unforced choice: `LOCKSTEP_ISA` if valid (a warning on standard error otherwise), else
/// the detected path.
fn from_env_or_detected() -> (Isa, IsaSource) {
    match isa_from_env() {
        Ok(Some(isa)) => (isa, IsaSource::Environment),
        Ok(None) => (Isa::detected(), IsaSource::Detected),
        Err(e) => {
            let d = Isa::detected();
            eprintln!("warning: lockstep: {e}; using the {d} path (the same bits, other speed)");
            (d, IsaSource::Detected)
        }
    }
}

#[cold]
fn resolve() -> (Isa, IsaSource) {
    let (isa, src) = from_env_or_detected();
    // A concurrent `set_isa` wins over the environment.
    match STATE.compare_exchange(0, encode(isa, src), Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => (isa, src),
        Err(v) => decode(v).unwrap_or((isa, src)),
    }
}

/// The path in use and where it came from (for `lockstep doctor`).
pub fn isa_in_use() -> (Isa, IsaSource) {
    match decode(STATE.load(Ordering::Relaxed)) {
        Some(v) => v,
        None => resolve(),
    }
}

/// Forces every kernel of the process onto `isa` (`Some`), or returns to the environment's or
/// the detected choice (`None`); returns the path now in use. Process-wide, like
/// `set_num_threads`: call it before the work whose path it should decide (kernels already
/// running finish on the path they started with). Since every deterministic kernel gives the
/// same bits on every path, it changes speed, never results.
///
/// # Errors
/// [`Error::InvalidArgument`] when the CPU cannot run `isa` (the path in use is unchanged).
pub fn set_isa(isa: Option<Isa>) -> Result<Isa> {
    let (isa, src) = match isa {
        Some(i) => {
            check_available("set_isa", i)?;
            (i, IsaSource::Forced)
        }
        None => from_env_or_detected(),
    };
    STATE.store(encode(isa, src), Ordering::Relaxed);
    Ok(isa)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_names_are_errors() {
        for i in Isa::ALL {
            assert_eq!(i.name().parse::<Isa>(), Ok(i));
            assert_eq!(i.name().to_uppercase().parse::<Isa>(), Ok(i));
        }
        let e = "avx-512".parse::<Isa>().unwrap_err().to_string();
        assert!(
            e.contains("avx-512") && e.contains("portable, avx2 or avx512"),
            "{e}"
        );
    }

    #[test]
    fn forcing_is_checked_and_reversible() {
        assert!(Isa::Portable.available());
        assert!(Isa::detected().available());
        for i in Isa::ALL {
            match set_isa(Some(i)) {
                Ok(now) => {
                    assert!(i.available());
                    assert_eq!((now, Isa::best()), (i, i));
                    assert_eq!(isa_in_use(), (i, IsaSource::Forced));
                    assert!(Isa::Portable.enabled() && i.enabled());
                }
                Err(e) => {
                    assert!(!i.available());
                    assert!(e.to_string().contains("cannot run"), "{e}");
                }
            }
        }
        let back = set_isa(None).expect("unforcing never fails");
        assert!(back.available());
        assert_eq!(Isa::best(), back);
        assert_ne!(isa_in_use().1, IsaSource::Forced);
    }
}
