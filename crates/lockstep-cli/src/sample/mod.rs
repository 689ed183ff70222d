//! `lockstep sample LIB FN [--opt=value ...]`: print what a function of another library's
//! random API draws, as one JSON object, so lockstep can be compared with the real library.
//!
//! Every sampler seeds a fresh generator with `--seed` (default 0), calls FN `--repeat` times
//! in a row on it (default 1) and reports everything drawn, flat and row-major, in `"values"`.
//!
//! [`LIBRARIES`] lists every library, function and option (`lockstep sample --list` prints
//! it); its tests run every function's example and check the list against the golden cases.

mod numpy;
mod python;
mod torch;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

/// Why a `sample` call failed: an unknown library or function, or a bad option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleError(pub String);

impl fmt::Display for SampleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SampleError {}

impl From<SampleError> for lockstep::Error {
    /// A refused `sample` call (a library, function or option it does not know, a value out
    /// of range): [`lockstep::Error::Config`] with the same message.
    fn from(e: SampleError) -> Self {
        lockstep::Error::Config(e.0)
    }
}

impl From<lockstep::rng::Error> for SampleError {
    fn from(e: lockstep::rng::Error) -> Self {
        SampleError(e.to_string())
    }
}

/// Shorthand for a failed sample call.
pub fn fail<T>(msg: impl Into<String>) -> Result<T, SampleError> {
    Err(SampleError(msg.into()))
}

/// What a sampler drew, in the dtype it drew it.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I64(Vec<i64>),
    U64(Vec<u64>),
    /// Integers of any size, as decimal strings (CPython's `getrandbits(200)`, NumPy seeds).
    BigInt(Vec<String>),
}

impl Values {
    /// Appends `other` (same dtype) to `self`: how `--repeat` concatenates its calls.
    pub fn extend(&mut self, other: Values) -> Result<(), SampleError> {
        match (self, other) {
            (Values::F32(a), Values::F32(b)) => a.extend(b),
            (Values::F64(a), Values::F64(b)) => a.extend(b),
            (Values::I64(a), Values::I64(b)) => a.extend(b),
            (Values::U64(a), Values::U64(b)) => a.extend(b),
            (Values::BigInt(a), Values::BigInt(b)) => a.extend(b),
            _ => return fail("internal: repeated calls returned different dtypes"),
        }
        Ok(())
    }

    /// The dtype name printed in the JSON output.
    pub fn dtype(&self) -> &'static str {
        match self {
            Values::F32(_) => "float32",
            Values::F64(_) => "float64",
            Values::I64(_) => "int64",
            Values::U64(_) => "uint64",
            Values::BigInt(_) => "int",
        }
    }

    /// The values as JSON numbers: floats in the shortest decimal that round-trips in their
    /// own dtype, integers exactly.
    pub fn to_json(&self) -> Result<serde_json::Value, SampleError> {
        use serde_json::Value as J;
        let arr: Vec<J> = match self {
            // serde_json writes an f32 with the shortest digits that round-trip in f32.
            Values::F32(v) => v.iter().map(|x| finite_json(*x)).collect(),
            Values::F64(v) => v.iter().map(|x| finite_json(*x)).collect(),
            Values::I64(v) => v.iter().map(|x| J::from(*x)).collect(),
            Values::U64(v) => v.iter().map(|x| J::from(*x)).collect(),
            Values::BigInt(v) => v
                .iter()
                .map(|s| {
                    s.parse::<serde_json::Number>()
                        .map(J::Number)
                        .map_err(|e| SampleError(format!("internal: bad integer `{s}`: {e}")))
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(J::Array(arr))
    }
}

fn finite_json<T: Into<serde_json::Value> + Copy + fmt::Display>(x: T) -> serde_json::Value {
    let v: serde_json::Value = x.into();
    if v.is_null() {
        // NaN or infinity has no JSON number; print it as a string so nothing is lost.
        serde_json::Value::String(x.to_string())
    } else {
        v
    }
}

/// The `--name=value` options of one call. Every option must be read by the sampler, so a
/// misspelt option is an error rather than silently ignored.
#[derive(Debug, Default)]
pub struct Opts {
    map: BTreeMap<String, String>,
    used: RefCell<BTreeSet<String>>,
}

impl Opts {
    /// Parses `--name=value` and `--name value` arguments. A bare `--flag` means `true`.
    pub fn parse(args: &[String]) -> Result<Self, SampleError> {
        let mut map = BTreeMap::new();
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            let Some(body) = a.strip_prefix("--") else {
                return fail(format!(
                    "unexpected argument `{a}`; options look like --name=value"
                ));
            };
            let (name, value) = match body.split_once('=') {
                Some((n, v)) => (n.to_string(), v.to_string()),
                None => match args.get(i + 1) {
                    Some(v) if !v.starts_with("--") || v.parse::<f64>().is_ok() => {
                        i += 1;
                        (body.to_string(), v.clone())
                    }
                    _ => (body.to_string(), "true".to_string()),
                },
            };
            let name = name.replace('_', "-");
            if map.insert(name.clone(), value).is_some() {
                return fail(format!("option --{name} given twice"));
            }
            i += 1;
        }
        Ok(Self {
            map,
            used: RefCell::default(),
        })
    }

    /// The raw text of option `name`, if given.
    pub fn raw(&self, name: &str) -> Option<&str> {
        self.used.borrow_mut().insert(name.to_string());
        self.map.get(name).map(String::as_str)
    }

    /// Option `name` parsed as `T`, if given.
    pub fn get<T: FromStr>(&self, name: &str) -> Result<Option<T>, SampleError>
    where
        T::Err: fmt::Display,
    {
        match self.raw(name) {
            None => Ok(None),
            Some(s) => s
                .trim()
                .parse()
                .map(Some)
                .map_err(|e| SampleError(format!("option --{name}={s}: {e}"))),
        }
    }

    /// Option `name` parsed as `T`, or `default`.
    pub fn get_or<T: FromStr>(&self, name: &str, default: T) -> Result<T, SampleError>
    where
        T::Err: fmt::Display,
    {
        Ok(self.get(name)?.unwrap_or(default))
    }

    /// Option `name`, which must be given.
    pub fn require<T: FromStr>(&self, name: &str) -> Result<T, SampleError>
    where
        T::Err: fmt::Display,
    {
        self.get(name)?
            .ok_or_else(|| SampleError(format!("option --{name} is required here")))
    }

    /// A boolean option: `true/false/1/0/yes/no`, default `default`.
    pub fn flag(&self, name: &str, default: bool) -> Result<bool, SampleError> {
        match self.raw(name) {
            None => Ok(default),
            Some(s) => match s.to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => Ok(true),
                "false" | "0" | "no" | "off" => Ok(false),
                _ => fail(format!("option --{name}={s}: expected true or false")),
            },
        }
    }

    /// A comma-separated list option, e.g. `--weights=0.1,0.2` or `--shape=2,3`.
    pub fn list<T: FromStr>(&self, name: &str) -> Result<Option<Vec<T>>, SampleError>
    where
        T::Err: fmt::Display,
    {
        let Some(s) = self.raw(name) else {
            return Ok(None);
        };
        let s = s
            .trim()
            .trim_start_matches(['[', '('])
            .trim_end_matches([']', ')']);
        if s.trim().is_empty() {
            return Ok(Some(Vec::new()));
        }
        s.split(',')
            .map(|p| {
                p.trim()
                    .parse()
                    .map_err(|e| SampleError(format!("option --{name}: `{p}`: {e}")))
            })
            .collect::<Result<Vec<T>, _>>()
            .map(Some)
    }

    /// `--shape=D0,D1,..` (default `default`); dimensions must be non-negative integers and
    /// hold at most [`MAX_VALUES`] elements.
    pub fn shape(&self, default: &[usize]) -> Result<Vec<usize>, SampleError> {
        let shape = self.list("shape")?.unwrap_or_else(|| default.to_vec());
        check_count(
            shape
                .iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .unwrap_or(usize::MAX),
        )?;
        Ok(shape)
    }

    /// A count option (`--n`, `--k`, …) that sizes the output: at most [`MAX_VALUES`].
    pub fn count(&self, name: &str) -> Result<Option<usize>, SampleError> {
        let n: Option<usize> = self.get(name)?;
        if let Some(n) = n {
            check_count(n).map_err(|e| SampleError(format!("option --{name}: {e}")))?;
        }
        Ok(n)
    }

    /// Errors naming every option that no sampler code asked for.
    pub fn finish(&self) -> Result<(), SampleError> {
        let used = self.used.borrow();
        let unknown: Vec<String> = self
            .map
            .keys()
            .filter(|k| !used.contains(*k))
            .map(|k| format!("--{k}"))
            .collect();
        if unknown.is_empty() {
            Ok(())
        } else {
            fail(format!(
                "unknown option(s) for this function: {}",
                unknown.join(", ")
            ))
        }
    }
}

/// The most values one `sample` call prints (about 1 GiB of JSON); larger requests are errors
/// rather than an allocation that takes the machine down.
pub const MAX_VALUES: usize = 1 << 26;

/// Errors if `n` values is more than one `sample` call prints.
pub fn check_count(n: usize) -> Result<(), SampleError> {
    if n <= MAX_VALUES {
        Ok(())
    } else {
        fail(format!(
            "asks for {n} values; `lockstep sample` prints at most {MAX_VALUES}"
        ))
    }
}

/// One option of a `lockstep sample` function, as [`list`] prints it.
#[derive(Debug, Clone, Copy)]
pub struct OptDoc {
    /// Its names without `--`: the first, then its aliases (`uniform`'s `--low` or `--a`).
    pub names: &'static [&'static str],
    /// Its default, or `required`, and the values it takes.
    pub default: &'static str,
}

/// `--name` (aliases) with `default`.
const fn opt(names: &'static [&'static str], default: &'static str) -> OptDoc {
    OptDoc { names, default }
}

/// One function of a library: `lockstep sample LIB FN`.
#[derive(Debug, Clone, Copy)]
pub struct FnDoc {
    /// FN.
    pub name: &'static str,
    /// What one call does, in the real library's terms.
    pub call: &'static str,
    /// Its own options (besides the library's common ones).
    pub options: &'static [OptDoc],
    /// The options of an example call, which give every option in `options` (by its first
    /// name); the tests run it.
    pub example: &'static str,
}

/// One library of `lockstep sample`.
#[derive(Debug, Clone, Copy)]
pub struct LibDoc {
    /// LIB.
    pub name: &'static str,
    /// How the generator is made from `--seed`.
    pub seeding: &'static str,
    /// The options every function of the library takes.
    pub common: &'static [OptDoc],
    /// Its functions.
    pub functions: &'static [FnDoc],
}

/// Every library `lockstep sample` knows, with its functions and their options.
pub const LIBRARIES: &[LibDoc] = &[torch::LIB, python::LIB, numpy::LEGACY, numpy::GENERATOR];

/// `--name (default)` for each option, aliases joined by `|`.
fn options_line(opts: &[OptDoc]) -> String {
    opts.iter()
        .map(|o| {
            let names: Vec<String> = o.names.iter().map(|n| format!("--{n}")).collect();
            format!("{} ({})", names.join("|"), o.default)
        })
        .collect::<Vec<_>>()
        .join("  ")
}

/// The text of `lockstep sample --list [LIB]`: every function of `lib` (of every library when
/// `None`), the call it mirrors, its options with their defaults, and an example.
///
/// # Errors
/// An unknown library.
pub fn list(lib: Option<&str>) -> Result<String, SampleError> {
    let libs: Vec<&LibDoc> = match lib {
        None => LIBRARIES.iter().collect(),
        Some(l) => match LIBRARIES.iter().find(|d| d.name == l) {
            Some(d) => vec![d],
            None => return fail(unknown_library(l)),
        },
    };
    let mut out = String::from(
        "lockstep sample LIB FN [options]: seeds a fresh generator, calls FN --repeat times \
         on it and prints\nall it drew as JSON. Options are --name=value; the default is in \
         parentheses.\n",
    );
    const W: usize = 22;
    for l in libs {
        out.push_str(&format!("\n{}: {}\n", l.name, l.seeding));
        out.push_str(&format!("  every FN: {}\n", options_line(l.common)));
        for f in l.functions {
            out.push_str(&format!("  {:<W$}{}\n", f.name, f.call));
            if !f.options.is_empty() {
                out.push_str(&format!("  {:<W$}{}\n", "", options_line(f.options)));
            }
            out.push_str(&format!(
                "  {:<W$}e.g. lockstep sample {} {} {}\n",
                "", l.name, f.name, f.example
            ));
        }
    }
    Ok(out)
}

/// The error for a function `lib` does not have, naming those it has.
fn unknown_function<T>(lib: &LibDoc, func: &str) -> Result<T, SampleError> {
    let names: Vec<&str> = lib.functions.iter().map(|f| f.name).collect();
    fail(format!(
        "{}: unknown function `{func}`; expected one of: {} (`lockstep sample --list {}` \
         lists them with their options)",
        lib.name,
        names.join(", "),
        lib.name
    ))
}

fn unknown_library(lib: &str) -> String {
    let names: Vec<&str> = LIBRARIES.iter().map(|l| l.name).collect();
    format!(
        "unknown library `{lib}`; expected one of: {}",
        names.join(", ")
    )
}

/// Runs `lockstep sample LIB FN [options]` and returns the JSON object to print.
pub fn run(lib: &str, func: &str, args: &[String]) -> Result<serde_json::Value, SampleError> {
    let (mut head, values) = run_parts(lib, func, args)?;
    head["values"] = values.to_json()?;
    Ok(head)
}

/// The output object without `values`, and the values.
fn run_parts(
    lib: &str,
    func: &str,
    args: &[String],
) -> Result<(serde_json::Value, Values), SampleError> {
    let opts = Opts::parse(args)?;
    let repeat: usize = opts.get_or("repeat", 1)?;
    let values = match lib {
        "torch" => {
            let seed = torch::seed_arg(&opts)?;
            torch::run(
                &mut lockstep::rng::Generator::with_seed(seed),
                func,
                &opts,
                repeat,
            )?
        }
        "python" => python::run(func, &opts, repeat)?,
        "numpy-legacy" => numpy::run_legacy(func, &opts, repeat)?,
        "numpy" => numpy::run_generator(func, &opts, repeat)?,
        _ => return fail(unknown_library(lib)),
    };
    opts.finish()?;
    let seed = opts.raw("seed").unwrap_or("0").to_string();
    let head = serde_json::json!({
        "lib": lib,
        "fn": func,
        "seed": seed,
        "repeat": repeat,
        "dtype": values.dtype(),
    });
    Ok((head, values))
}

/// Runs `lockstep sample LIB FN [options]` and writes the JSON object [`run`] returns (the
/// same text as printing it, then a newline) to `out`, one value at a time: the memory used is
/// the drawn values themselves, never a JSON tree of them.
///
/// # Errors
/// As [`run`], or if writing fails.
pub fn run_to(
    lib: &str,
    func: &str,
    args: &[String],
    out: &mut dyn std::io::Write,
) -> Result<(), SampleError> {
    let (head, values) = run_parts(lib, func, args)?;
    let io = |e: std::io::Error| SampleError(format!("cannot write the output: {e}"));
    // Keys print sorted and `values` is the last of them: close the head's object after it.
    let head = head.to_string();
    let head = head.strip_suffix('}').unwrap_or(&head);
    write!(out, "{head},\"values\":[").map_err(io)?;
    let mut first = true;
    let mut item =
        |v: serde_json::Value, out: &mut dyn std::io::Write| -> Result<(), SampleError> {
            if !first {
                out.write_all(b",").map_err(io)?;
            }
            first = false;
            write!(out, "{v}").map_err(io)
        };
    match &values {
        Values::F32(v) => v.iter().try_for_each(|x| item(finite_json(*x), out))?,
        Values::F64(v) => v.iter().try_for_each(|x| item(finite_json(*x), out))?,
        Values::I64(v) => v.iter().try_for_each(|x| item((*x).into(), out))?,
        Values::U64(v) => v.iter().try_for_each(|x| item((*x).into(), out))?,
        Values::BigInt(v) => v.iter().try_for_each(|s| {
            let n = s
                .parse::<serde_json::Number>()
                .map_err(|e| SampleError(format!("internal: bad integer `{s}`: {e}")))?;
            item(serde_json::Value::Number(n), out)
        })?,
    }
    out.write_all(b"]}\n").map_err(io)?;
    out.flush().map_err(io)
}

/// Runs torch function `func` with `args` on the caller's generator `g` (not reseeded), for
/// tests that inspect the generator state afterwards. `--seed` is accepted and ignored.
pub fn torch_on(
    g: &mut lockstep::rng::Generator,
    func: &str,
    args: &[String],
) -> Result<Values, SampleError> {
    let opts = Opts::parse(args)?;
    let repeat: usize = opts.get_or("repeat", 1)?;
    opts.raw("seed");
    let values = torch::run(g, func, &opts, repeat)?;
    opts.finish()?;
    Ok(values)
}

/// The most calls `--repeat` makes: a call that draws nothing (`--shape=0`, `--n=0`) still
/// takes time, so the count of calls is bounded on its own, not only the count of values.
pub const MAX_REPEAT: usize = 1 << 20;

/// The most bytes of decimal digits one `sample` call prints (huge `getrandbits` integers).
pub const MAX_OUTPUT_BYTES: usize = 1 << 30;

/// Calls `draw` `repeat` times and concatenates what it returns.
pub fn repeat_calls(
    repeat: usize,
    mut draw: impl FnMut() -> Result<Values, SampleError>,
) -> Result<Values, SampleError> {
    if repeat == 0 {
        return fail("option --repeat must be at least 1");
    }
    if repeat > MAX_REPEAT {
        return fail(format!(
            "option --repeat={repeat}: `lockstep sample` makes at most {MAX_REPEAT} calls"
        ));
    }
    let mut all = draw()?;
    for _ in 1..repeat {
        all.extend(draw()?)?;
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    /// Issue 13 defect 6: calls that draw nothing with a huge `--repeat` used to loop forever.
    #[test]
    fn huge_repeat_of_empty_calls_is_refused_quickly() {
        let t = std::time::Instant::now();
        for (lib, func, a) in [
            ("torch", "rand", "--shape=0 --repeat=18446744073709551615"),
            ("python", "random", "--n=0 --repeat=18446744073709551615"),
            ("numpy", "random", "--shape=0 --repeat=18446744073709551615"),
            ("numpy-legacy", "rand", "--shape=0 --repeat=1000000000"),
        ] {
            let e = run(lib, func, &args(a)).unwrap_err().to_string();
            assert!(e.contains("repeat"), "{lib} {func}: {e}");
        }
        assert!(t.elapsed().as_secs() < 5);
        // A large but allowed count of empty calls ends.
        assert!(run("python", "random", &args("--n=0 --repeat=1000")).is_ok());
    }

    /// `run_to` streams exactly what printing `run`'s object prints.
    #[test]
    fn streamed_output_equals_the_json_object() {
        for (lib, func, a) in [
            ("torch", "randn", "--shape=3 --seed=5"),
            ("python", "getrandbits", "--n=2 --k=100"),
            ("numpy", "random", "--shape=2 --repeat=2"),
        ] {
            let mut out = Vec::new();
            run_to(lib, func, &args(a), &mut out).unwrap();
            let want = format!("{}\n", run(lib, func, &args(a)).unwrap());
            assert_eq!(String::from_utf8(out).unwrap(), want);
        }
    }

    #[test]
    fn every_listed_example_runs_and_gives_every_option() {
        for l in LIBRARIES {
            for f in l.functions {
                let args: Vec<String> = f.example.split_whitespace().map(String::from).collect();
                let what = format!("lockstep sample {} {} {}", l.name, f.name, f.example);
                if let Err(e) = run(l.name, f.name, &args) {
                    panic!("{what}: {e}");
                }
                for o in f.options {
                    let first = format!("--{}=", o.names[0]);
                    let given = args.iter().find(|a| a.starts_with(&first));
                    let given = given.unwrap_or_else(|| panic!("{what}: no --{}", o.names[0]));
                    // Every alias is accepted in its place.
                    for alias in &o.names[1..] {
                        let value = &given[first.len()..];
                        let swapped: Vec<String> = args
                            .iter()
                            .map(|a| {
                                if a == given {
                                    format!("--{alias}={value}")
                                } else {
                                    a.clone()
                                }
                            })
                            .collect();
                        if let Err(e) = run(l.name, f.name, &swapped) {
                            panic!("{what} with --{alias}: {e}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_list_names_every_function_and_rejects_unknown_libraries() {
        let all = list(None).unwrap();
        for l in LIBRARIES {
            let one = list(Some(l.name)).unwrap();
            for f in l.functions {
                let line = format!("e.g. lockstep sample {} {} ", l.name, f.name);
                assert!(one.contains(&line) && all.contains(&line), "{line}");
            }
        }
        let e = list(Some("jax")).unwrap_err();
        assert!(e.0.contains("torch, python, numpy-legacy, numpy"), "{e}");
        assert!(
            run("jax", "rand", &[])
                .unwrap_err()
                .0
                .contains("unknown library")
        );
    }

    #[test]
    fn unlisted_functions_are_unknown() {
        for l in LIBRARIES {
            let e = run(l.name, "no_such_fn", &[]).unwrap_err();
            assert!(e.0.contains("unknown") && e.0.contains("no_such_fn"), "{e}");
            for f in l.functions {
                assert!(e.0.contains(f.name), "{}: {e}", l.name);
            }
        }
    }
}
