//! `lockstep_tensor::math` against correctly rounded results (mpmath, tools/golden_math.py →
//! tests/golden/math.json): every function's error stays within the bound its documentation
//! states, and special values (±0, ±inf, NaN, domain errors, C99's pow cases) match exactly.

use lockstep_tensor::math;
use serde_json::Value;

/// How a function is called, and its format's precision and minimum exponent.
#[derive(Clone, Copy)]
enum Fun {
    F64(fn(f64) -> f64),
    F32(fn(f32) -> f32),
    Pow64(fn(f64, f64) -> f64),
    Pow32(fn(f32, f32) -> f32),
}

impl Fun {
    fn is_f32(self) -> bool {
        matches!(self, Fun::F32(_) | Fun::Pow32(_))
    }
    /// The result, widened to f64 (exact for f32), from input bits.
    fn call(self, x: u64, y: u64) -> f64 {
        match self {
            Fun::F64(f) => f(f64::from_bits(x)),
            Fun::F32(f) => f(f32::from_bits(x as u32)) as f64,
            Fun::Pow64(f) => f(f64::from_bits(x), f64::from_bits(y)),
            Fun::Pow32(f) => f(f32::from_bits(x as u32), f32::from_bits(y as u32)) as f64,
        }
    }
    fn value(self, bits: u64) -> f64 {
        if self.is_f32() {
            f32::from_bits(bits as u32) as f64
        } else {
            f64::from_bits(bits)
        }
    }
    /// (precision, minimum exponent).
    fn format(self) -> (i32, i32) {
        if self.is_f32() {
            (24, -126)
        } else {
            (53, -1022)
        }
    }
}

/// Every public function of `math`, with the error bound (in ulps) its documentation states
/// for its main domain (see [`region`] for the rest).
const FUNS: &[(&str, Fun, f64)] = &[
    ("exp", Fun::F64(math::exp), 1.0),
    ("expf", Fun::F32(math::expf), 1.0),
    ("expm1", Fun::F64(math::expm1), 1.0),
    ("expm1f", Fun::F32(math::expm1f), 1.0),
    ("ln", Fun::F64(math::ln), 1.0),
    ("lnf", Fun::F32(math::lnf), 1.0),
    ("ln_1p", Fun::F64(math::ln_1p), 1.0),
    ("ln_1pf", Fun::F32(math::ln_1pf), 1.0),
    ("tanh", Fun::F64(math::tanh), 2.5),
    ("tanhf", Fun::F32(math::tanhf), 2.5),
    ("erf", Fun::F64(math::erf), 1.0),
    ("erff", Fun::F32(math::erff), 1.0),
    ("sin", Fun::F64(math::sin), 1.0),
    ("sinf", Fun::F32(math::sinf), 1.0),
    ("cos", Fun::F64(math::cos), 1.0),
    ("cosf", Fun::F32(math::cosf), 1.0),
    ("pow", Fun::Pow64(math::pow), 1.0),
    ("powf", Fun::Pow32(math::powf), 1.0),
    ("sigmoid", Fun::F64(math::sigmoid), 2.5),
    ("sigmoidf", Fun::F32(math::sigmoidf), 2.5),
];

/// Where a function's documentation states another bound than its main one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Region {
    Main,
    /// `sigmoid(x)` where `e^-x` overflows: the result is `+0` (PyTorch's formula does the
    /// same), whatever the exact value (below the smallest normal number).
    SigmoidFlush,
    /// `pow(x, y)` with `|y| >= 2^31` and `|x - 1| < 2^-20` (f64): the `libm` crate's pow
    /// takes a shortcut there.
    PowNearOne,
}

/// The bound for the non-main regions, in ulps.
const POW_NEAR_ONE_BOUND: f64 = 256.0;

fn region(name: &str, x: f64, y: f64) -> Region {
    match name {
        "sigmoid" if math::exp(-x) == f64::INFINITY => Region::SigmoidFlush,
        "sigmoidf" if math::expf(-x as f32) == f32::INFINITY => Region::SigmoidFlush,
        "pow" if y.abs() >= 2f64.powi(31) && (x - 1.0).abs() < 2f64.powi(-20) => Region::PowNearOne,
        _ => Region::Main,
    }
}

fn golden() -> Value {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/golden/math.json");
    let s = std::fs::read_to_string(p).expect("tests/golden/math.json (tools/golden_math.py)");
    serde_json::from_str(&s).expect("valid JSON")
}

fn hex(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().expect("hex string"), 16).expect("hex bits")
}

fn base64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let mut out = Vec::new();
    for q in s.as_bytes().chunks(4) {
        let n = q.iter().filter(|&&c| c != b'=').count();
        let mut w = 0u32;
        for (i, &c) in q.iter().enumerate() {
            w |= (if c == b'=' { 0 } else { val(c) } as u32) << (18 - 6 * i);
        }
        out.extend_from_slice(&w.to_be_bytes()[1..n]);
    }
    out
}

/// The script's input generator (integer arithmetic only, so both sides agree).
struct SplitMix64(u64);
impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn draw(&mut self, range: &Value, sign: &Value, sign_bit: u64) -> u64 {
        let (lo, hi) = (hex(&range[0]), hex(&range[1]));
        let b = lo + self.next() % (hi - lo + 1);
        let neg = match sign.as_str() {
            Some("-") => true,
            Some("±") => self.next() & 1 == 1,
            _ => false,
        };
        if neg { b | sign_bit } else { b }
    }
}

/// The bulk inputs of one function, as `(x bits, y bits)`.
fn inputs(spec: &Value, f32_: bool) -> Vec<(u64, u64)> {
    let sign_bit = if f32_ { 1 << 31 } else { 1 << 63 };
    let mut rng = SplitMix64(spec["seed"].as_u64().expect("seed"));
    let mut out = Vec::new();
    for s in spec["segments"].as_array().expect("segments") {
        for _ in 0..s["n"].as_u64().expect("n") {
            let x = rng.draw(&s["x"], &s["xs"], sign_bit);
            let y = if let Some(yi) = s.get("yint") {
                let (lo, hi) = (yi[0].as_i64().unwrap(), yi[1].as_i64().unwrap());
                let y = (lo + (rng.next() % (hi - lo + 1) as u64) as i64) as f64;
                if f32_ {
                    (y as f32).to_bits() as u64
                } else {
                    y.to_bits()
                }
            } else if s.get("y").is_some() {
                rng.draw(&s["y"], &s["ys"], sign_bit)
            } else {
                0
            };
            out.push((x, y));
        }
    }
    out
}

/// `2^q` for `-1074 <= q <= 1023`.
fn pow2(q: i32) -> f64 {
    if q >= -1022 {
        f64::from_bits(((q + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (q + 1074))
    }
}

/// The error of `ours` in ulps of the exact value `cr + d ulp` (infinite when a non-finite
/// result is wrong).
fn ulp_error(ours: f64, cr: f64, d: f64, (p, emin): (i32, i32)) -> f64 {
    if cr.is_nan() {
        return if ours.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if cr.is_infinite() || !ours.is_finite() {
        return if ours == cr { 0.0 } else { f64::INFINITY };
    }
    let mut k = if cr == 0.0 {
        emin
    } else {
        ((cr.to_bits() >> 52) & 0x7ff) as i32 - 1023
    };
    let power_of_two = cr.to_bits() & ((1 << 52) - 1) == 0;
    // The exact value lies in the binade below when it is just under a power of two.
    if cr != 0.0 && power_of_two && d != 0.0 && (d < 0.0) != (cr < 0.0) {
        k -= 1;
    }
    let u = pow2(k.max(emin) - (p - 1));
    ((ours - cr) / u - d).abs()
}

#[test]
fn every_function_is_within_its_bound_and_special_values_are_exact() {
    let g = golden();
    let funcs = g["functions"].as_object().expect("functions");
    let dq = g["d_units_per_ulp"].as_f64().expect("d units");
    assert_eq!(
        funcs.len(),
        FUNS.len(),
        "the golden file and the test list the same functions"
    );
    let mut report = String::from("function   max ulp   cases   not correctly rounded\n");
    let mut failures = Vec::new();
    for &(name, f, bound) in FUNS {
        let spec = &funcs[name];
        assert!(spec.is_object(), "no {name} in math.json");
        let width = if f.is_f32() { 4 } else { 8 };
        let blob = base64(spec["bulk"].as_str().expect("bulk"));
        let ins = inputs(spec, f.is_f32());
        assert_eq!(blob.len(), ins.len() * (width + 1), "{name}: bulk size");
        let mut rows: Vec<(u64, u64, u64, f64)> = ins
            .iter()
            .zip(blob.chunks_exact(width + 1))
            .map(|(&(x, y), c)| {
                let mut b = [0u8; 8];
                b[..width].copy_from_slice(&c[..width]);
                (x, y, u64::from_le_bytes(b), c[width] as i8 as f64 / dq)
            })
            .collect();
        let two = matches!(f, Fun::Pow64(_) | Fun::Pow32(_));
        for c in spec["cases"].as_array().expect("cases") {
            let c = c.as_array().expect("case row");
            let (y, r) = if two { (hex(&c[1]), 2) } else { (0, 1) };
            rows.push((
                hex(&c[0]),
                y,
                hex(&c[r]),
                c[r + 1].as_f64().expect("d") / dq,
            ));
        }
        let (mut worst, mut at, mut inexact) = (0f64, (0, 0), 0usize);
        let mut worst_near_one = 0f64;
        for &(x, y, r, d) in &rows {
            let ours = f.call(x, y);
            let cr = f.value(r);
            if ours.to_bits() != cr.to_bits() {
                inexact += 1;
            }
            match region(name, f.value(x), f.value(y)) {
                Region::SigmoidFlush => {
                    let tiny = if f.is_f32() {
                        2f64.powi(-126)
                    } else {
                        f64::MIN_POSITIVE
                    };
                    if ours.to_bits() != 0 || cr >= tiny {
                        failures.push(format!("{name}({x:#x}) = {ours:e}, exact {cr:e}"));
                    }
                }
                Region::PowNearOne => {
                    let e = ulp_error(ours, cr, d, f.format());
                    worst_near_one = worst_near_one.max(e);
                    if !(e <= POW_NEAR_ONE_BOUND) {
                        failures.push(format!("{name}({x:#x}, {y:#x}): error {e} ulp"));
                    }
                }
                Region::Main => {
                    let e = ulp_error(ours, cr, d, f.format());
                    if !(e <= worst) {
                        (worst, at) = (e, (x, y));
                    }
                }
            }
        }
        if worst_near_one > 0.0 {
            report +=
                &format!("{name:<10} {worst_near_one:>7.3}   (|y| >= 2^31, x within 2^-20 of 1)\n");
        }
        for s in spec["special"].as_array().expect("special") {
            let s = s.as_array().expect("special row");
            let (y, r) = if two { (hex(&s[1]), 2) } else { (0, 1) };
            let (x, want) = (hex(&s[0]), f.value(hex(&s[r])));
            let ours = f.call(x, y);
            let same = ours.to_bits() == want.to_bits() || (ours.is_nan() && want.is_nan());
            if !same {
                failures.push(format!(
                    "{name}({x:#x}, {y:#x}) = {ours:e}, the standard says {want:e}"
                ));
            }
        }
        report += &format!("{name:<10} {worst:>7.3}   {:>5}   {inexact}\n", rows.len());
        if !(worst <= bound) {
            failures.push(format!(
                "{name}: error {worst:.3} ulp > documented {bound} at x = {:#x}, y = {:#x}",
                at.0, at.1
            ));
        }
    }
    eprintln!("{report}");
    assert!(failures.is_empty(), "{}\n{report}", failures.join("\n"));
}

#[test]
fn regenerated_inputs_match_the_script() {
    // The generator agrees with the script's: as many inputs as the segments say, each inside
    // its segment (a mismatch would also show as large errors above).
    let g = golden();
    for (name, spec) in g["functions"].as_object().expect("functions") {
        let f32_ = spec["type"] == "f32";
        let ins = inputs(spec, f32_);
        let total: u64 = spec["segments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["n"].as_u64().unwrap())
            .sum();
        assert_eq!(ins.len() as u64, total, "{name}");
        let mask = if f32_ {
            (1u64 << 31) - 1
        } else {
            (1u64 << 63) - 1
        };
        let mut i = 0;
        for s in spec["segments"].as_array().unwrap() {
            let (lo, hi) = (hex(&s["x"][0]), hex(&s["x"][1]));
            for _ in 0..s["n"].as_u64().unwrap() {
                let m = ins[i].0 & mask;
                assert!(lo <= m && m <= hi, "{name} input {i}");
                i += 1;
            }
        }
    }
}
