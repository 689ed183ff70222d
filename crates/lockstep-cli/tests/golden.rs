//! Golden values recorded from the real libraries (`tools/golden_*.py`), checked against
//! `lockstep sample`, plus PyTorch generator states after the same calls.
//!
//! * `golden_files`: every case of every `tests/golden/*.json` through
//!   [`lockstep_cli::sample::run`], value by value, bit for bit.
//! * `torch_state_round_trip`: `tests/golden/state/torch_state.json`: our generator state
//!   after the calls equals `torch.get_rng_state()`, and torch's bytes loaded into a fresh
//!   generator draw what torch drew next.
//! * `bad_input_is_an_error_not_a_panic`.
//! * `every_golden_call_is_in_the_list`: every function and option the golden cases use is in
//!   [`lockstep_cli::sample::LIBRARIES`] (what `lockstep sample --list` prints).
//!
//! Failures are collected and reported together at the end, not one at a time.

use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use lockstep_cli::sample;
use lockstep_rng::Generator;
use serde_json::Value;

/// How many failing cases a report lists in full.
const MAX_LISTED: usize = 30;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The `cases` array of a golden file; empty for a file of another test's format (one with no
/// `cases` key at all, such as `math.json`), which other tests read.
fn cases_of<'a>(doc: &'a Value, path: &Path) -> &'a [Value] {
    match doc.get("cases") {
        None => &[],
        Some(c) => c
            .as_array()
            .unwrap_or_else(|| panic!("{}: \"cases\" is not an array", path.display())),
    }
}

fn string_list(v: &Value, what: &str) -> Result<Vec<String>, String> {
    v.as_array()
        .ok_or_else(|| format!("{what} is not an array"))?
        .iter()
        .map(|a| {
            a.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("{what} has a non-string entry {a}"))
        })
        .collect()
}

fn show_args(args: &[String]) -> String {
    args.join(" ")
}

// ---------------------------------------------------------------------------------------------
// Value comparison

/// A JSON value as f64: numbers exactly (serde_json parses with `float_roundtrip`), and the
/// strings lockstep prints for non-finite floats (`NaN`, `inf`, `-inf`).
fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64().or_else(|| n.to_string().parse().ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Whether `got` equals `want` under the rules of `dtype`.
fn same_value(dtype: &str, want: &Value, got: &Value) -> bool {
    match dtype {
        "float32" => match (as_f64(want), as_f64(got)) {
            (Some(w), Some(g)) => {
                let (w, g) = (w as f32, g as f32);
                w.to_bits() == g.to_bits() || (w.is_nan() && g.is_nan())
            }
            _ => false,
        },
        "float64" => match (as_f64(want), as_f64(got)) {
            (Some(w), Some(g)) => w.to_bits() == g.to_bits() || (w.is_nan() && g.is_nan()),
            _ => false,
        },
        // Integers: the exact decimal text (serde_json keeps it with `arbitrary_precision`).
        "int64" | "uint64" | "int" => match (want, got) {
            (Value::Number(w), Value::Number(g)) => w.to_string() == g.to_string(),
            _ => false,
        },
        _ => want == got,
    }
}

/// One value for a report: floats in their dtype with their bits, integers as written.
fn show_value(dtype: &str, v: &Value) -> String {
    match (dtype, as_f64(v)) {
        ("float32", Some(x)) => format!("{:?} (f32 bits 0x{:08x})", x as f32, (x as f32).to_bits()),
        ("float64", Some(x)) => format!("{x:?} (f64 bits 0x{:016x})", x.to_bits()),
        _ => v.to_string(),
    }
}

/// Compares two value arrays; `None` if equal, else a one-line description of the first
/// difference.
fn compare_values(dtype: &str, want: &Value, got: &Value) -> Option<String> {
    let Some(want) = want.as_array() else {
        return Some("expected values are not an array".into());
    };
    let Some(got) = got.as_array() else {
        return Some(format!("got values that are not an array: {got}"));
    };
    let first_diff = want
        .iter()
        .zip(got)
        .position(|(w, g)| !same_value(dtype, w, g));
    let n_diff = want
        .iter()
        .zip(got)
        .filter(|(w, g)| !same_value(dtype, w, g))
        .count();
    match first_diff {
        Some(i) => {
            let mut msg = format!(
                "{n_diff} of {} values differ; first at index {i}: expected {}, got {}",
                want.len().min(got.len()),
                show_value(dtype, &want[i]),
                show_value(dtype, &got[i])
            );
            if want.len() != got.len() {
                let _ = write!(
                    msg,
                    " (and lengths differ: expected {}, got {})",
                    want.len(),
                    got.len()
                );
            }
            Some(msg)
        }
        None if want.len() != got.len() => Some(format!(
            "length differs: expected {}, got {} (common prefix equal)",
            want.len(),
            got.len()
        )),
        None => None,
    }
}

/// Runs `f`, turning a panic into an error message.
fn no_panic<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "non-string panic payload".into());
            Err(format!("PANICKED: {msg}"))
        }
    }
}

/// Collected failures of one test, printed together.
#[derive(Default)]
struct Report {
    passed: usize,
    /// (group index, case, why).
    failures: Vec<(usize, String, String)>,
    /// (group, passed, failed), e.g. group "torch.json torch randn".
    groups: Vec<(String, usize, usize)>,
}

impl Report {
    fn record(&mut self, group: &str, case: String, result: Result<(), String>) {
        let idx = match self.groups.iter().position(|(g, _, _)| g == group) {
            Some(i) => i,
            None => {
                self.groups.push((group.to_string(), 0, 0));
                self.groups.len() - 1
            }
        };
        match result {
            Ok(()) => {
                self.passed += 1;
                self.groups[idx].1 += 1;
            }
            Err(why) => {
                self.failures.push((idx, case, why));
                self.groups[idx].2 += 1;
            }
        }
    }

    fn finish(self, title: &str) {
        if self.failures.is_empty() {
            eprintln!("{title}: all {} cases pass", self.passed);
            return;
        }
        let mut out = format!(
            "{title}: {} of {} cases FAIL ({} pass)\n\nper function (pass / fail):\n",
            self.failures.len(),
            self.passed + self.failures.len(),
            self.passed
        );
        for (g, p, f) in &self.groups {
            if *f > 0 {
                let _ = writeln!(out, "  {g:<44} {p:>4} / {f:<4}");
            }
        }
        // Round-robin over the functions so every failing function shows up in the list.
        let by_group: Vec<Vec<usize>> = (0..self.groups.len())
            .map(|g| {
                (0..self.failures.len())
                    .filter(|&i| self.failures[i].0 == g)
                    .collect()
            })
            .collect();
        let mut listed: Vec<usize> = Vec::new();
        let mut round = 0;
        while listed.len() < MAX_LISTED.min(self.failures.len()) {
            for &i in by_group.iter().filter_map(|of_group| of_group.get(round)) {
                if listed.len() < MAX_LISTED {
                    listed.push(i);
                }
            }
            round += 1;
        }
        listed.sort_unstable();
        let _ = writeln!(
            out,
            "\nfailing cases ({} of {}, taken round-robin over the functions):",
            listed.len(),
            self.failures.len()
        );
        for &i in &listed {
            let (_, case, why) = &self.failures[i];
            let _ = writeln!(out, "  {case}\n      {why}");
        }
        if self.failures.len() > listed.len() {
            let _ = writeln!(out, "  ... and {} more", self.failures.len() - listed.len());
        }
        panic!("{out}");
    }
}

// ---------------------------------------------------------------------------------------------
// Test 1: every golden file through `sample::run`

fn check_case(case: &Value) -> Result<(), String> {
    let args = string_list(&case["args"], "args")?;
    if args.len() < 2 {
        return Err(format!("args too short: {args:?}"));
    }
    let want_dtype = case["dtype"].as_str().ok_or("case has no dtype")?;
    let out = no_panic(|| {
        sample::run(&args[0], &args[1], &args[2..]).map_err(|e| format!("error: {e}"))
    })?;
    let got_dtype = out["dtype"].as_str().unwrap_or("<missing>");
    if got_dtype != want_dtype {
        return Err(format!("dtype: expected {want_dtype}, got {got_dtype}"));
    }
    if let Some(rtol) = case["rtol"].as_f64() {
        return compare_within(rtol, &case["values"], &out["values"]);
    }
    match compare_values(want_dtype, &case["values"], &out["values"]) {
        None => Ok(()),
        Some(why) => Err(why),
    }
}

/// For cases computed by the reference through LAPACK/BLAS (`"rtol"` in the case): every value
/// within `rtol` times the largest magnitude among the expected values (normwise relative).
fn compare_within(rtol: f64, want: &Value, got: &Value) -> Result<(), String> {
    let (Some(want), Some(got)) = (want.as_array(), got.as_array()) else {
        return Err("values are not arrays".into());
    };
    if want.len() != got.len() {
        return Err(format!(
            "lengths differ: expected {}, got {}",
            want.len(),
            got.len()
        ));
    }
    let w: Vec<f64> = want.iter().map(|v| as_f64(v).unwrap_or(f64::NAN)).collect();
    let g: Vec<f64> = got.iter().map(|v| as_f64(v).unwrap_or(f64::NAN)).collect();
    let scale = w.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    for (i, (a, b)) in w.iter().zip(&g).enumerate() {
        if !((a - b).abs() <= rtol * scale) {
            return Err(format!(
                "index {i}: expected {a:?}, got {b:?}: off by {:e} of the largest magnitude \
                 {scale:e} (allowed {rtol:e})",
                (a - b).abs() / scale
            ));
        }
    }
    Ok(())
}

#[test]
fn golden_files() {
    let dir = workspace_root().join("tests/golden");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no golden files in {}", dir.display());

    let mut report = Report::default();
    for path in &files {
        let doc = read_json(path);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for case in cases_of(&doc, path) {
            let args = string_list(&case["args"], "args").unwrap_or_default();
            let group = format!(
                "{name} {}",
                args.iter().take(2).cloned().collect::<Vec<_>>().join(" ")
            );
            let label = format!("[{name}] {}", show_args(&args));
            report.record(&group, label, check_case(case));
        }
    }
    report.finish(&format!("golden files ({} files)", files.len()));
}

// ---------------------------------------------------------------------------------------------
// Test 2: torch generator states

/// `--seed` exactly as `torch.manual_seed` takes it: an integer in [-2^63, 2^64-1], mod 2^64.
fn torch_seed(args: &[String]) -> Result<u64, String> {
    let mut text = "0";
    for (i, a) in args.iter().enumerate() {
        if let Some(v) = a.strip_prefix("--seed=") {
            text = v;
        } else if a == "--seed" {
            text = args.get(i + 1).map(String::as_str).unwrap_or("");
        }
    }
    match text.trim().parse::<i128>() {
        Ok(v) if (-(1i128 << 63)..(1i128 << 64)).contains(&v) => Ok(v as u64),
        _ => Err(format!("bad --seed `{text}`")),
    }
}

/// `args` without `--repeat=R` (or `--repeat R`).
fn without_repeat(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a.starts_with("--repeat=") {
        } else if a == "--repeat" {
            i += 1;
        } else {
            out.push(a.clone());
        }
        i += 1;
    }
    out
}

fn from_hex(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim();
    if !s.is_ascii() || !s.len().is_multiple_of(2) {
        return Err("state_hex is not an even-length hex string".into());
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|e| format!("bad hex at {i}: {e}")))
        .collect()
}

/// Names the field of PyTorch's 5056-byte state that byte `offset` belongs to.
fn state_field(offset: usize) -> String {
    match offset {
        0..8 => "seed".into(),
        8..12 => "left".into(),
        12..16 => "seeded".into(),
        16..24 => "next".into(),
        24..5016 => format!("state word {}", (offset - 24) / 8),
        5016..5024 => "normal_x (legacy)".into(),
        5024..5032 => "cached double normal".into(),
        5032..5040 => "normal_rho (legacy)".into(),
        5040..5044 => "double-cache flag".into(),
        5048..5052 => "cached float normal".into(),
        5052 => "float-cache flag".into(),
        _ => "padding".into(),
    }
}

fn read_u64(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

fn read_i32(b: &[u8], o: usize) -> i32 {
    i32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

/// `None` if the states are equal, else a description of where they differ.
fn compare_state(want: &[u8], got: &[u8]) -> Option<String> {
    if want.len() != got.len() {
        return Some(format!(
            "state size: expected {}, got {}",
            want.len(),
            got.len()
        ));
    }
    let diffs: Vec<usize> = (0..want.len()).filter(|&i| want[i] != got[i]).collect();
    let &first = diffs.first()?;
    let mut fields: Vec<String> = Vec::new();
    for &i in &diffs {
        let f = state_field(i);
        if !fields.contains(&f) {
            fields.push(f);
        }
    }
    let n_fields = fields.len();
    fields.truncate(6);
    Some(format!(
        "state differs in {} bytes, first at byte {first} ({}); fields: {}{} \
         [expected left={} next={} cache={}/{:?}; got left={} next={} cache={}/{:?}]",
        diffs.len(),
        state_field(first),
        fields.join(", "),
        if n_fields > 6 { ", ..." } else { "" },
        read_i32(want, 8),
        read_u64(want, 16),
        read_i32(want, 5040),
        f64::from_le_bytes(want[5024..5032].try_into().unwrap()),
        read_i32(got, 8),
        read_u64(got, 16),
        read_i32(got, 5040),
        f64::from_le_bytes(got[5024..5032].try_into().unwrap()),
    ))
}

fn check_state_case(case: &Value) -> Result<(), String> {
    let args = string_list(&case["args"], "args")?;
    if args.len() < 2 || args[0] != "torch" {
        return Err(format!("not a torch case: {args:?}"));
    }
    let func = &args[1];
    let opts = &args[2..];
    let want_state = from_hex(case["state_hex"].as_str().ok_or("no state_hex")?)?;
    let next_dtype = case["next_dtype"].as_str().ok_or("no next_dtype")?;
    let mut problems = Vec::new();

    // 1. Same calls from the seed: same state as torch afterwards.
    let seed = torch_seed(opts)?;
    let state = no_panic(|| {
        let mut g = Generator::with_seed(seed);
        sample::torch_on(&mut g, func, opts).map_err(|e| format!("error: {e}"))?;
        Ok(g.get_state())
    });
    match state {
        Ok(got) => {
            if let Some(why) = compare_state(&want_state, &got) {
                problems.push(format!("after the calls: {why}"));
            }
        }
        Err(e) => problems.push(format!("calls from the seed: {e}")),
    }

    // 2. torch's state loaded into a fresh generator: one more call draws `next_values`.
    let once = without_repeat(opts);
    let next = no_panic(|| {
        let mut h = Generator::new();
        h.set_state(&want_state)
            .map_err(|e| format!("set_state rejected torch's bytes: {e}"))?;
        let v = sample::torch_on(&mut h, func, &once).map_err(|e| format!("error: {e}"))?;
        let json = v.to_json().map_err(|e| format!("to_json: {e}"))?;
        Ok((v.dtype(), json))
    });
    match next {
        Ok((dtype, json)) => {
            if dtype != next_dtype {
                problems.push(format!(
                    "next call: dtype expected {next_dtype}, got {dtype}"
                ));
            } else if let Some(why) = compare_values(next_dtype, &case["next_values"], &json) {
                problems.push(format!("next call from torch's state: {why}"));
            }
        }
        Err(e) => problems.push(format!("next call from torch's state: {e}")),
    }

    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n      "))
    }
}

#[test]
fn torch_state_round_trip() {
    let path = workspace_root().join("tests/golden/state/torch_state.json");
    let doc = read_json(&path);
    let cases = cases_of(&doc, &path);
    assert!(!cases.is_empty(), "{}: no cases", path.display());
    let mut report = Report::default();
    for case in cases {
        let args = string_list(&case["args"], "args").unwrap_or_default();
        let group = format!("state {}", args.get(1).map(String::as_str).unwrap_or("?"));
        report.record(&group, show_args(&args), check_state_case(case));
    }
    report.finish("torch state round trip");
}

// ---------------------------------------------------------------------------------------------
// Test 3: bad input

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let bad: &[(&str, &str, &[&str])] = &[
        ("nolib", "rand", &["--seed=0"]),
        ("torch", "no_such_function", &["--seed=0"]),
        ("torch", "rand", &["--seed=0", "--bogus=1"]),
        ("torch", "rand", &["--seed=abc"]),
        ("torch", "rand", &["--seed=18446744073709551616"]),
        ("torch", "rand", &["--seed=-9223372036854775809"]),
        ("torch", "randint", &["--seed=0", "--low=5", "--high=5"]),
        ("torch", "randint", &["--seed=0", "--low=7", "--high=3"]),
        ("torch", "bernoulli", &["--seed=0", "--p=1.5"]),
        ("torch", "bernoulli", &["--seed=0", "--p=0.5,-0.1"]),
        (
            "torch",
            "multinomial",
            &["--seed=0", "--weights=0.5,-0.1", "--num-samples=1"],
        ),
        // torch: "cannot sample n_sample > prob_dist.size(-1) samples without replacement"
        (
            "torch",
            "multinomial",
            &["--seed=0", "--weights=0.5,0.5", "--num-samples=3"],
        ),
        // torch: "invalid multinomial distribution (sum of probabilities <= 0)"
        (
            "torch",
            "multinomial",
            &[
                "--seed=0",
                "--weights=0,0",
                "--num-samples=1",
                "--replacement=true",
            ],
        ),
        ("torch", "randperm", &["--seed=0", "--n=-1"]),
        ("torch", "rand", &["--seed=0", "--shape=2,x"]),
        ("torch", "rand", &["--seed=0", "--repeat=0"]),
    ];
    let mut failures = Vec::new();
    for (lib, func, args) in bad {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let call = format!("{lib} {func} {}", args.join(" "));
        match catch_unwind(AssertUnwindSafe(|| sample::run(lib, func, &args))) {
            Err(_) => failures.push(format!("{call}: PANICKED")),
            Ok(Ok(v)) => failures.push(format!("{call}: accepted, returned {v}")),
            Ok(Err(e)) if e.to_string().trim().is_empty() => {
                failures.push(format!("{call}: error with an empty message"))
            }
            Ok(Err(_)) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} bad inputs not rejected cleanly:\n  {}",
        failures.len(),
        bad.len(),
        failures.join("\n  ")
    );
}

// ---------------------------------------------------------------------------------------------
// Test 4: `lockstep sample --list` documents every function and option the golden cases use

#[test]
fn every_golden_call_is_in_the_list() {
    let dir = workspace_root().join("tests/golden");
    let mut missing = std::collections::BTreeSet::new();
    let mut calls = 0;
    for entry in std::fs::read_dir(&dir).expect("tests/golden") {
        let path = entry.expect("directory entry").path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let doc = read_json(&path);
        for case in cases_of(&doc, &path) {
            let args = string_list(&case["args"], "args").expect("args");
            let (lib, func) = (&args[0], &args[1]);
            calls += 1;
            let Some(l) = sample::LIBRARIES.iter().find(|l| l.name == lib.as_str()) else {
                missing.insert(format!("library {lib}"));
                continue;
            };
            let Some(f) = l.functions.iter().find(|f| f.name == func.as_str()) else {
                missing.insert(format!("{lib} {func}"));
                continue;
            };
            for a in &args[2..] {
                let Some(name) = a.strip_prefix("--") else {
                    continue; // the value of `--name value`
                };
                let name = name.split('=').next().unwrap_or(name).replace('_', "-");
                let known = l
                    .common
                    .iter()
                    .chain(f.options)
                    .any(|o| o.names.contains(&&*name));
                if !known {
                    missing.insert(format!("{lib} {func} --{name}"));
                }
            }
        }
    }
    assert!(
        calls > 100,
        "only {calls} golden calls in {}",
        dir.display()
    );
    assert!(
        missing.is_empty(),
        "used by golden cases but not in `lockstep sample --list`: {missing:?}"
    );
}
