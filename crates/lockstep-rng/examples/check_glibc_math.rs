//! Checks lockstep's ports of glibc's `log`, `sin`, `cos`, `pow`, `exp` (`compat::glibc_math`)
//! against the platform's functions, bit for bit, on many inputs. Meaningful on Linux x86-64
//! with glibc ≥ 2.28 on a CPU with FMA (where the platform's functions are the builds that were
//! ported).
//!
//! usage: check_glibc_math [millions of inputs per range, default 10] [functions, default
//! log,sin,cos,pow,exp]
//! Prints, per function and range, the inputs compared and the mismatches (with the first few).
//!
//! `check_glibc_math bench`: ns per value of the ports and of the platform's `pow`/`exp`,
//! interleaved, best of 15 (release build).

use lockstep_rng::compat::glibc_math as gm;
use std::time::Instant;

/// A splitmix64 stream: reproducible inputs without depending on the crate's engines.
struct Mix(u64);
impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform on [0, 1) with 53 bits.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }
}

/// Which port a range exercises.
#[derive(Clone, Copy)]
enum F {
    Log,
    Sin,
    Cos,
    Exp,
}

/// Compares, on `n` inputs drawn by `input`, the scalar port and the slice (vector) port with
/// the platform's function; returns (comparisons, mismatches).
fn check(
    name: &str,
    n: u64,
    f: F,
    mut input: impl FnMut(&mut Mix) -> f64,
    seed: u64,
) -> (u64, u64) {
    const B: usize = 4096;
    let mut rng = Mix(seed);
    let mut bad = 0u64;
    let t = Instant::now();
    let (mut x, mut v, mut w) = (vec![0f64; B], vec![0f64; B], vec![0f64; B]);
    let mut done = 0u64;
    while done < n {
        let m = B.min((n - done) as usize);
        for e in &mut x[..m] {
            *e = input(&mut rng);
        }
        match f {
            F::Log => gm::log_all(&x[..m], &mut v[..m]),
            F::Sin => gm::sin_cos_all(&x[..m], &mut v[..m], &mut w[..m]),
            F::Cos => gm::sin_cos_all(&x[..m], &mut w[..m], &mut v[..m]),
            F::Exp => gm::exp_all(&x[..m], &mut v[..m]),
        }
        for i in 0..m {
            let xi = x[i];
            let (platform, scalar) = match f {
                F::Log => (xi.ln(), gm::log(xi)),
                F::Sin => (xi.sin(), gm::sin(xi)),
                F::Cos => (xi.cos(), gm::cos(xi)),
                F::Exp => (xi.exp(), gm::exp(xi)),
            };
            for (what, ours) in [("scalar", scalar), ("vector", v[i])] {
                if ours.to_bits() != platform.to_bits() && !(ours.is_nan() && platform.is_nan()) {
                    if bad < 5 {
                        println!(
                            "  MISMATCH {name} ({what}): x={xi:e} ({:#018x}) ours={ours:e} ({:#018x}) libm={platform:e} ({:#018x})",
                            xi.to_bits(),
                            ours.to_bits(),
                            platform.to_bits()
                        );
                    }
                    bad += 1;
                }
            }
        }
        done += m as u64;
    }
    println!(
        "{name}: {n} inputs x 2 ports, {bad} mismatches ({:.1} s)",
        t.elapsed().as_secs_f64()
    );
    (2 * n, bad)
}

fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Compares `pow` on `n` inputs: per batch of `batch` values one exponent `yb = yg()` for the
/// slice port, the scalar port and the platform on `(x, yb)`, and the scalar port and the
/// platform on `(x, y)` with a fresh `y = yg()` per value; returns (comparisons, mismatches).
fn check_pow(
    name: &str,
    n: u64,
    batch: usize,
    seed: u64,
    mut xg: impl FnMut(&mut Mix) -> f64,
    mut yg: impl FnMut(&mut Mix) -> f64,
) -> (u64, u64) {
    let mut rng = Mix(seed);
    let mut bad = 0u64;
    let t = Instant::now();
    let (mut x, mut v) = (vec![0f64; batch], vec![0f64; batch]);
    let mut done = 0u64;
    let mut report = |what: &str, x: f64, y: f64, ours: f64, libm: f64| {
        if bad < 5 {
            println!(
                "  MISMATCH {name} ({what}): x={x:e} ({:#018x}) y={y:e} ({:#018x}) ours={ours:e} ({:#018x}) libm={libm:e} ({:#018x})",
                x.to_bits(),
                y.to_bits(),
                ours.to_bits(),
                libm.to_bits()
            );
        }
        bad += 1;
    };
    while done < n {
        let m = batch.min((n - done) as usize);
        let yb = yg(&mut rng);
        for e in &mut x[..m] {
            *e = xg(&mut rng);
        }
        gm::pow_all(&x[..m], yb, &mut v[..m]);
        for i in 0..m {
            let xi = x[i];
            let platform = xi.powf(yb);
            for (what, ours) in [("scalar", gm::pow(xi, yb)), ("vector", v[i])] {
                if !same(ours, platform) {
                    report(what, xi, yb, ours, platform);
                }
            }
            let yi = yg(&mut rng);
            let (ours, platform) = (gm::pow(xi, yi), xi.powf(yi));
            if !same(ours, platform) {
                report("scalar", xi, yi, ours, platform);
            }
        }
        done += m as u64;
    }
    println!(
        "{name}: {n} inputs x 3 comparisons, {bad} mismatches ({:.1} s)",
        t.elapsed().as_secs_f64()
    );
    (3 * n, bad)
}

/// The `pow` ranges: the samplers' `pow(u, 1/shape)`, wide and full-range arguments, negative
/// `x` with integer `y`, subnormal `x`, results near the overflow and underflow limits.
fn pow_ranges(n: u64, add: &mut impl FnMut((u64, u64))) {
    let inv_shape = |r: &mut Mix| 1.0 / (0.01 + 0.99 * r.unit());
    let inv_shape_log = |r: &mut Mix| 1.0 / (0.01f64).powf(r.unit());
    add(check_pow(
        "pow(1-u, 1/shape)",
        n,
        4096,
        21,
        |r| 1.0 - r.unit(),
        inv_shape,
    ));
    add(check_pow(
        "pow(u, 1/shape log-uniform)",
        n / 2,
        4096,
        22,
        |r| r.unit(),
        inv_shape_log,
    ));
    add(check_pow(
        "pow((0,1024], 1/shape)",
        n,
        4096,
        23,
        |r| 1024.0 * (1.0 - r.unit()),
        inv_shape,
    ));
    add(check_pow(
        "pow((0,1024], [-20,20])",
        n / 2,
        256,
        24,
        |r| 1024.0 * (1.0 - r.unit()),
        |r| 40.0 * r.unit() - 20.0,
    ));
    // Any positive x; y = ±m·2^e with e in [-70, 12].
    add(check_pow(
        "pow(any positive, moderate y)",
        n / 2,
        64,
        25,
        |r| f64::from_bits(r.next() >> 1),
        |r| {
            let b = r.next();
            let e = (b % 83) as i32 - 70;
            let m = 1.0 + (b >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0);
            let y = m * 2f64.powi(e);
            if b & 1 << 10 != 0 { -y } else { y }
        },
    ));
    add(check_pow(
        "pow(any bits, any bits)",
        n / 10,
        16,
        26,
        |r| f64::from_bits(r.next()),
        |r| f64::from_bits(r.next()),
    ));
    // Negative x, integer y (odd and even, both signs).
    add(check_pow(
        "pow(negative, integer)",
        n / 4,
        64,
        27,
        |r| -f64::from_bits(0x3000_0000_0000_0000 + (r.next() >> 2) % 0x2000_0000_0000_0000),
        |r| (r.next() % 401) as f64 - 200.0,
    ));
    add(check_pow(
        "pow(subnormal, y)",
        n / 10,
        64,
        28,
        |r| f64::from_bits(r.next() >> 12),
        |r| 4.0 * r.unit() - 2.0,
    ));
    // y chosen so that x^y lands near 2^-1075..2^1024 (the exp specialcase paths).
    add(check_pow(
        "pow near over/underflow",
        n / 4,
        16,
        29,
        |r| 2.0 + 1000.0 * r.unit(),
        |r| {
            let t = if r.next() & 1 == 0 {
                1023.0 + 1.5 * r.unit()
            } else {
                -1076.0 + 56.0 * r.unit()
            };
            t * std::f64::consts::LN_2 / (2.0 + 1000.0 * r.unit()).ln()
        },
    ));
    add(check_pow(
        "pow(integer, integer)",
        n / 10,
        64,
        30,
        |r| (r.next() % 2001) as f64 - 1000.0,
        |r| (r.next() % 121) as f64 - 60.0,
    ));
    // Edges: specials and boundaries crossed with each other.
    let mut xs = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.0,
        -2.0,
        0.5,
        -0.5,
        f64::MIN_POSITIVE,
        -f64::MIN_POSITIVE,
        5e-324,
        -5e-324,
        f64::MAX,
        -f64::MAX,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        f64::from_bits(0x7ff0_0000_0000_0001), // signalling NaN
        10.0,
        -3.0,
        std::f64::consts::E,
    ];
    let mut ys = xs.clone();
    ys.extend([
        3.0,
        -3.0,
        0.5,
        -0.5,
        1e300,
        -1e300,
        2f64.powi(63),
        -(2f64.powi(63)),
        2f64.powi(-65),
        -(2f64.powi(-65)),
        2f64.powi(52),
        2f64.powi(53),
        1075.0,
        -1075.0,
        1024.0,
        -1022.0,
    ]);
    for hi in [0x0010_0000u64, 0x3fe6_9555, 0x3ff0_0000] {
        xs.push(f64::from_bits(hi << 32));
    }
    for hi in [0x3be0_0000u64, 0x43e0_0000, 0x3ff0_0000] {
        ys.push(f64::from_bits(hi << 32));
    }
    let near = |v: &[f64]| {
        let mut out = vec![];
        for &e in v {
            for d in -3i64..=3 {
                out.push(f64::from_bits((e.to_bits() as i64).wrapping_add(d) as u64));
            }
        }
        out
    };
    let (xs, ys) = (near(&xs), near(&ys));
    let mut v = vec![0.0; xs.len()];
    let mut bad = 0u64;
    for &y in &ys {
        gm::pow_all(&xs, y, &mut v);
        for (i, &x) in xs.iter().enumerate() {
            let p = x.powf(y);
            for (what, ours) in [("scalar", gm::pow(x, y)), ("vector", v[i])] {
                if !same(ours, p) {
                    if bad < 10 {
                        println!(
                            "  MISMATCH pow edge ({what}): x={x:e} ({:#018x}) y={y:e} ({:#018x}) ours={ours:e} libm={p:e}",
                            x.to_bits(),
                            y.to_bits()
                        );
                    }
                    bad += 1;
                }
            }
        }
    }
    println!(
        "pow edges: {} pairs x 2 ports, {bad} mismatches",
        xs.len() * ys.len()
    );
    add((2 * (xs.len() * ys.len()) as u64, bad));
}

/// The `exp` ranges: the whole finite range, [-1, 1], near the overflow and underflow limits
/// (the specialcase paths), tiny arguments, random bit patterns, edges.
fn exp_ranges(n: u64, add: &mut impl FnMut((u64, u64))) {
    add(check(
        "exp[-746,710]",
        n,
        F::Exp,
        |r| -746.0 + 1456.0 * r.unit(),
        31,
    ));
    add(check("exp[-1,1]", n, F::Exp, |r| 2.0 * r.unit() - 1.0, 32));
    add(check(
        "exp near overflow",
        n / 4,
        F::Exp,
        |r| 704.0 + 6.0 * r.unit(),
        33,
    ));
    add(check(
        "exp near underflow",
        n / 4,
        F::Exp,
        |r| -746.0 + 46.0 * r.unit(),
        34,
    ));
    add(check(
        "exp log-uniform |x|",
        n / 4,
        F::Exp,
        |r| {
            let b = r.next();
            let x = f64::from_bits(0x3c00_0000_0000_0000 + (b >> 2) % 0x0480_0000_0000_0000);
            if b & 1 == 0 { x } else { -x }
        },
        35,
    ));
    add(check(
        "exp any bits",
        n / 10,
        F::Exp,
        |r| f64::from_bits(r.next()),
        36,
    ));
    let mut edges = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::MIN_POSITIVE,
        5e-324,
        f64::MAX,
        -f64::MAX,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        709.782712893384,
        -708.3964185322641,
        -745.1332191019411,
        -745.1332191019412,
        512.0,
        -512.0,
        1024.0,
        -1024.0,
        2f64.powi(-54),
    ];
    for k in -1100..=1030 {
        edges.push(k as f64 * std::f64::consts::LN_2);
    }
    let mut all = vec![];
    for &e in &edges {
        for d in -64i64..=64 {
            let b = (e.to_bits() as i64).wrapping_add(d) as u64;
            all.push(f64::from_bits(b));
            all.push(-f64::from_bits(b));
        }
    }
    let mut v = vec![0.0; all.len()];
    gm::exp_all(&all, &mut v);
    let mut bad = 0u64;
    for (i, &x) in all.iter().enumerate() {
        let p = x.exp();
        for (what, ours) in [("scalar", gm::exp(x)), ("vector", v[i])] {
            if !same(ours, p) {
                if bad < 10 {
                    println!(
                        "  MISMATCH exp edge ({what}): x={x:e} ({:#018x}) ours={ours:e} libm={p:e}",
                        x.to_bits()
                    );
                }
                bad += 1;
            }
        }
    }
    println!(
        "exp edges: {} inputs x 2 ports, {bad} mismatches",
        all.len()
    );
    add((2 * all.len() as u64, bad));
}

/// Best-of-`reps` ns per value of each closure over `n` values, the closures run interleaved.
fn bench(n: usize, reps: usize, fs: &mut [(&str, &mut dyn FnMut())]) {
    let mut best = vec![f64::INFINITY; fs.len()];
    for _ in 0..reps {
        for (j, (_, f)) in fs.iter_mut().enumerate() {
            let t = Instant::now();
            for _ in 0..20 {
                f();
            }
            best[j] = best[j].min(t.elapsed().as_secs_f64() * 1e9 / (20 * n) as f64);
        }
    }
    for (j, (name, _)) in fs.iter().enumerate() {
        println!("  {name:<34} {:6.2} ns/value", best[j]);
    }
}

fn speed() {
    use std::hint::black_box;
    const N: usize = 4096;
    let mut r = Mix(99);
    let u: Vec<f64> = (0..N).map(|_| 1.0 - r.unit()).collect();
    let e: Vec<f64> = (0..N).map(|_| 60.0 * r.unit() - 30.0).collect();
    let y = 1.0 / 0.37; // pow(u, 1/shape), shape 0.37
    let mut out = vec![0.0; N];
    println!("pow(1 - u, 1/0.37), {N} values:");
    let (mut o1, mut o2, mut o3, mut o4) = (out.clone(), out.clone(), out.clone(), out.clone());
    bench(
        N,
        15,
        &mut [
            ("glibc pow (loop)", &mut || {
                for (o, &x) in o1.iter_mut().zip(&u) {
                    *o = black_box(x).powf(y);
                }
            }),
            ("gm::pow (scalar loop)", &mut || {
                for (o, &x) in o2.iter_mut().zip(&u) {
                    *o = gm::pow(black_box(x), y);
                }
            }),
            ("gm::pow_all", &mut || {
                gm::pow_all(black_box(&u), y, &mut o3)
            }),
            ("gm::pow_all, 1 < y < 100 varying", &mut || {
                gm::pow_all(
                    black_box(&u),
                    black_box(1.0 + 98.0 * o4[0].abs().fract()),
                    &mut o4,
                )
            }),
        ],
    );
    println!("exp(U(-30, 30)), {N} values:");
    bench(
        N,
        15,
        &mut [
            ("glibc exp (loop)", &mut || {
                for (o, &x) in o1.iter_mut().zip(&e) {
                    *o = black_box(x).exp();
                }
            }),
            ("gm::exp (scalar loop)", &mut || {
                for (o, &x) in o2.iter_mut().zip(&e) {
                    *o = gm::exp(black_box(x));
                }
            }),
            ("gm::exp_all", &mut || gm::exp_all(black_box(&e), &mut out)),
        ],
    );
    println!("log(1 - u), sin(2πu), {N} values:");
    let a: Vec<f64> = u
        .iter()
        .map(|&v| std::f64::consts::TAU * (1.0 - v))
        .collect();
    bench(
        N,
        15,
        &mut [
            ("glibc log (loop)", &mut || {
                for (o, &x) in o1.iter_mut().zip(&u) {
                    *o = black_box(x).ln();
                }
            }),
            ("gm::log (scalar loop)", &mut || {
                for (o, &x) in o2.iter_mut().zip(&u) {
                    *o = gm::log(black_box(x));
                }
            }),
            ("glibc sin (loop)", &mut || {
                for (o, &x) in o3.iter_mut().zip(&a) {
                    *o = black_box(x).sin();
                }
            }),
            ("gm::sin (scalar loop)", &mut || {
                for (o, &x) in o4.iter_mut().zip(&a) {
                    *o = gm::sin(black_box(x));
                }
            }),
        ],
    );
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("bench") {
        speed();
        return;
    }
    let m: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let which = std::env::args()
        .nth(2)
        .unwrap_or_else(|| "log,sin,cos,pow,exp".into());
    let want = |f: &str| which.split(',').any(|w| w == f);
    let n = m * 1_000_000;
    let mut total = (0u64, 0u64);
    let mut add = |r: (u64, u64)| {
        total.0 += r.0;
        total.1 += r.1;
    };
    if want("pow") {
        pow_ranges(n, &mut add);
    }
    if want("exp") {
        exp_ranges(n, &mut add);
    }
    if !(want("log") || want("sin") || want("cos")) {
        println!("TOTAL: {} comparisons, {} mismatches", total.0, total.1);
        return;
    }
    // log: 1 - u for a 53-bit uniform u (torch's radius input), uniform in (0,1], near 1,
    // random bit patterns of positive doubles (every exponent), and edge cases.
    add(check("log(1-u)", n, F::Log, |r| 1.0 - r.unit(), 1));
    add(check("log(u)", n, F::Log, |r| r.unit(), 2));
    add(check(
        "log near 1",
        n,
        F::Log,
        |r| 1.0 + (r.unit() - 0.5) * 0.25,
        3,
    ));
    add(check(
        "log any positive",
        n,
        F::Log,
        |r| f64::from_bits(r.next() >> 1),
        4,
    ));
    add(check(
        "log any bits",
        n / 10,
        F::Log,
        |r| f64::from_bits(r.next()),
        5,
    ));
    // sin/cos: 2π·u (torch's angle), [-8, 8], every reduced range up to the porting limit,
    // random bit patterns below it.
    let two_pi = std::f64::consts::TAU;
    for (name, f) in [("sin", F::Sin), ("cos", F::Cos)] {
        add(check(
            &format!("{name}(2πu)"),
            n,
            f,
            |r| two_pi * r.unit(),
            6,
        ));
        add(check(
            &format!("{name}[-8,8]"),
            n,
            f,
            |r| (r.unit() - 0.5) * 16.0,
            7,
        ));
        add(check(
            &format!("{name} |x|<1e8"),
            n / 4,
            f,
            |r| (r.unit() - 0.5) * 2e8,
            8,
        ));
        add(check(
            &format!("{name} log-uniform"),
            n / 4,
            f,
            |r| {
                let x = f64::from_bits(r.next() >> 1);
                if x < 1e8 { x } else { x.sqrt().sqrt().sqrt() }
            },
            9,
        ));
        add(check(
            &format!("{name} any bits"),
            n / 10,
            f,
            |r| f64::from_bits(r.next()),
            10,
        ));
    }
    // Edge cases: table boundaries, range limits and their neighbours.
    let mut edges = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::MIN_POSITIVE,
        5e-324,
        f64::MAX,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        0.126,
        0.855469,
        2.426265,
        105414350.0,
        two_pi,
        std::f64::consts::PI,
        std::f64::consts::FRAC_PI_2,
        1.0 - 1.0 / 16.0,
        1.0 + 0.064697265625,
    ];
    for k in 0..=120 {
        edges.push(k as f64 / 128.0);
        edges.push((k as f64 + 0.5) / 128.0);
    }
    for hi in [
        0x3e40_0000u64,
        0x3e50_0000,
        0x3feb_6000,
        0x4003_68fd,
        0x4199_21fb,
        0x3fee_0000,
        0x3ff1_0900,
    ] {
        edges.push(f64::from_bits(hi << 32));
    }
    let mut all = vec![];
    for &e in &edges {
        for d in -64i64..=64 {
            let b = (e.to_bits() as i64).wrapping_add(d) as u64;
            all.push(f64::from_bits(b));
            all.push(-f64::from_bits(b));
        }
    }
    let mut bad = 0;
    let (mut vl, mut vs, mut vc) = (
        vec![0.0; all.len()],
        vec![0.0; all.len()],
        vec![0.0; all.len()],
    );
    gm::log_all(&all, &mut vl);
    gm::sin_cos_all(&all, &mut vs, &mut vc);
    for (i, &x) in all.iter().enumerate() {
        for (name, a, b) in [
            ("log vector", vl[i], x.ln()),
            ("sin vector", vs[i], x.sin()),
            ("cos vector", vc[i], x.cos()),
        ] {
            if a.to_bits() != b.to_bits() && !(a.is_nan() && b.is_nan()) {
                if bad < 10 {
                    println!(
                        "  MISMATCH edge {name}: x={x:e} ({:#018x}) ours={a:e} libm={b:e}",
                        x.to_bits()
                    );
                }
                bad += 1;
            }
        }
    }
    for &x in &all {
        for (name, a, b) in [
            ("log", gm::log(x), x.ln()),
            ("sin", gm::sin(x), x.sin()),
            ("cos", gm::cos(x), x.cos()),
        ] {
            if a.to_bits() != b.to_bits() && !(a.is_nan() && b.is_nan()) {
                if bad < 10 {
                    println!(
                        "  MISMATCH edge {name}: x={x:e} ({:#018x}) ours={a:e} libm={b:e}",
                        x.to_bits()
                    );
                }
                bad += 1;
            }
        }
    }
    println!(
        "edges: {} inputs x 3 functions x 2 ports, {bad} mismatches",
        all.len()
    );
    add((6 * all.len() as u64, bad));
    println!("TOTAL: {} comparisons, {} mismatches", total.0, total.1);
}
