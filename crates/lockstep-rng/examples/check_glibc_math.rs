//! Checks lockstep's ports of glibc's `log`, `sin`, `cos` (`compat::glibc_math`) against the
//! platform's functions, bit for bit, on many inputs. Meaningful on Linux x86-64 with glibc
//! ≥ 2.28 on a CPU with FMA (where the platform's functions are the builds that were ported).
//!
//! usage: check_glibc_math [millions of inputs per range, default 10]
//! Prints, per function and range, the inputs compared and the mismatches (with the first few).

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
        }
        for i in 0..m {
            let xi = x[i];
            let (platform, scalar) = match f {
                F::Log => (xi.ln(), gm::log(xi)),
                F::Sin => (xi.sin(), gm::sin(xi)),
                F::Cos => (xi.cos(), gm::cos(xi)),
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

fn main() {
    let m: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let n = m * 1_000_000;
    let mut total = (0u64, 0u64);
    let mut add = |r: (u64, u64)| {
        total.0 += r.0;
        total.1 += r.1;
    };
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
