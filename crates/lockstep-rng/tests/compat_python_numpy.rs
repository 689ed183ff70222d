//! State round trips and library-level functions against values recorded from the real
//! CPython 3.11.7 and NumPy 2.4.6 by `tools/golden_python_numpy.py`
//! (`tests/golden/state/{python,numpy}_state.json`).

use std::path::Path;

use lockstep_rng::compat::numpy::{
    Generator, LegacyState, RandomState, SeedSequence, default_rng, default_rng_from,
};
use lockstep_rng::compat::python::{PyState, Random};
use lockstep_rng::engines::Pcg64;
use serde_json::Value;

fn load(name: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/golden/state")
        .join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).expect("valid JSON")
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

fn i64s(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

fn usizes(v: &Value) -> Vec<usize> {
    u64s(v).into_iter().map(|x| x as usize).collect()
}

fn u128_of(v: &Value) -> u128 {
    v.as_str().unwrap().parse().unwrap()
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

// ------------------------------------------------------------------------------------ CPython

#[test]
fn python_state_round_trip() {
    let doc = load("python_state.json");
    let cases = doc["states"].as_array().unwrap();
    assert!(!cases.is_empty());
    for c in cases {
        let seed = c["seed"].as_str().unwrap();
        let mut r = Random::from_decimal(seed).unwrap();
        for _ in 0..c["n_random"].as_u64().unwrap() {
            r.random();
        }
        for _ in 0..c["n_gauss"].as_u64().unwrap() {
            r.gauss(0.0, 1.0);
        }
        let internal: Vec<u32> = u64s(&c["internal"]).into_iter().map(|x| x as u32).collect();
        let gauss_next = c["gauss_next"].as_f64();
        let want =
            PyState::from_tuple(c["version"].as_u64().unwrap() as u32, &internal, gauss_next)
                .unwrap();
        let got = r.getstate();
        assert_eq!(got.internal_state(), internal, "seed {seed}: state words");
        assert_eq!(
            got.gauss_next.map(f64::to_bits),
            gauss_next.map(f64::to_bits),
            "seed {seed}: gauss_next"
        );
        // Python's state loaded into a fresh generator continues Python's stream.
        let mut fresh = Random::from_u64(12345);
        fresh.setstate(&want).unwrap();
        let nr: Vec<f64> = (0..5).map(|_| fresh.random()).collect();
        let ng: Vec<f64> = (0..3).map(|_| fresh.gauss(0.0, 1.0)).collect();
        assert_eq!(bits(&nr), bits(&f64s(&c["next_random"])), "seed {seed}");
        assert_eq!(bits(&ng), bits(&f64s(&c["next_gauss"])), "seed {seed}");
    }
}

fn python_seeded(seed: &Value) -> Random {
    if let Some(s) = seed.get("int") {
        Random::from_decimal(s.as_str().unwrap()).unwrap()
    } else if let Some(s) = seed.get("str") {
        Random::from_str_seed(s.as_str().unwrap())
    } else if let Some(s) = seed.get("bytes_hex") {
        let h = s.as_str().unwrap();
        let b: Vec<u8> = (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect();
        Random::from_bytes(&b)
    } else if let Some(s) = seed.get("float") {
        let x: f64 = s.as_str().unwrap().parse().unwrap();
        Random::from_f64(x).unwrap()
    } else {
        panic!("unknown seed {seed}")
    }
}

#[test]
fn python_library_functions() {
    let doc = load("python_state.json");
    let funcs = doc["functions"].as_array().unwrap();
    assert!(funcs.len() > 50);
    for f in funcs {
        let mut r = python_seeded(&f["seed"]);
        let p = f["params"].as_array().unwrap();
        let call = f["call"].as_str().unwrap();
        let what = format!("{call} {} {:?}", f["seed"], p);
        match call {
            "sample" => {
                let (n, k) = (
                    p[0].as_u64().unwrap() as usize,
                    p[1].as_u64().unwrap() as usize,
                );
                assert_eq!(
                    r.sample_indices(n, k).unwrap(),
                    usizes(&f["values"]),
                    "{what}"
                );
            }
            "choices" => {
                let (n, k) = (
                    p[0].as_u64().unwrap() as usize,
                    p[1].as_u64().unwrap() as usize,
                );
                assert_eq!(
                    r.choices_indices(n, None, k).unwrap(),
                    usizes(&f["values"]),
                    "{what}"
                );
            }
            "choices_weighted" => {
                let (n, k) = (
                    p[0].as_u64().unwrap() as usize,
                    p[1].as_u64().unwrap() as usize,
                );
                let w = f64s(&p[2]);
                assert_eq!(
                    r.choices_indices(n, Some(&w), k).unwrap(),
                    usizes(&f["values"]),
                    "{what}"
                );
            }
            "normalvariate" => {
                let (mu, s, n) = (
                    p[0].as_f64().unwrap(),
                    p[1].as_f64().unwrap(),
                    p[2].as_u64().unwrap(),
                );
                let got: Vec<f64> = (0..n).map(|_| r.normalvariate(mu, s)).collect();
                assert_eq!(bits(&got), bits(&f64s(&f["values"])), "{what}");
            }
            "expovariate" => {
                let (l, n) = (p[0].as_f64().unwrap(), p[1].as_u64().unwrap());
                let got: Vec<f64> = (0..n).map(|_| r.expovariate(l).unwrap()).collect();
                assert_eq!(bits(&got), bits(&f64s(&f["values"])), "{what}");
            }
            "randrange" => {
                let q: Vec<i64> = p.iter().map(|x| x.as_i64().unwrap()).collect();
                let got: Vec<i64> = (0..q[3])
                    .map(|_| r.randrange(q[0], q[1], q[2]).unwrap())
                    .collect();
                assert_eq!(got, i64s(&f["values"]), "{what}");
            }
            "random" => {
                let n = p[0].as_u64().unwrap();
                let got: Vec<f64> = (0..n).map(|_| r.random()).collect();
                assert_eq!(bits(&got), bits(&f64s(&f["values"])), "{what}");
            }
            other => panic!("unknown call {other}"),
        }
    }
}

// ------------------------------------------------------------------------------------ NumPy

#[test]
fn numpy_legacy_state_round_trip() {
    let doc = load("numpy_state.json");
    for c in doc["legacy"].as_array().unwrap() {
        let seed = c["seed"].as_str().unwrap();
        let mut rs = if seed.contains(',') {
            let key: Vec<u32> = seed.split(',').map(|x| x.parse().unwrap()).collect();
            RandomState::from_key(&key).unwrap()
        } else {
            RandomState::new(seed.parse().unwrap())
        };
        let mut a = vec![0.0; c["n_rand"].as_u64().unwrap() as usize];
        rs.random_sample(&mut a);
        let mut b = vec![0.0; c["n_randn"].as_u64().unwrap() as usize];
        rs.standard_normal(&mut b);
        let want = LegacyState {
            key: u64s(&c["key"]).into_iter().map(|x| x as u32).collect(),
            pos: c["pos"].as_u64().unwrap() as usize,
            has_gauss: c["has_gauss"].as_u64().unwrap() == 1,
            cached_gaussian: c["cached_gaussian"].as_f64().unwrap(),
        };
        let got = rs.get_state();
        assert_eq!(got.key, want.key, "seed {seed}");
        assert_eq!(got.pos, want.pos, "seed {seed}");
        assert_eq!(got.has_gauss, want.has_gauss, "seed {seed}");
        assert_eq!(
            got.cached_gaussian.to_bits(),
            want.cached_gaussian.to_bits()
        );
        let mut fresh = RandomState::new(999);
        fresh.set_state(&want).unwrap();
        let mut x = [0.0; 3];
        fresh.random_sample(&mut x);
        assert_eq!(bits(&x), bits(&f64s(&c["next_rand"])), "seed {seed}");
        fresh.standard_normal(&mut x);
        assert_eq!(bits(&x), bits(&f64s(&c["next_randn"])), "seed {seed}");
    }
}

fn p_of(v: &Value) -> Option<Vec<f64>> {
    (!v.is_null()).then(|| f64s(v))
}

#[test]
fn numpy_legacy_functions() {
    let doc = load("numpy_state.json");
    for f in doc["legacy_functions"].as_array().unwrap() {
        let mut rs = RandomState::new(f["seed"].as_u64().unwrap() as u32);
        let p = f["params"].as_array().unwrap();
        let what = format!("{} {:?}", f["call"], p);
        match f["call"].as_str().unwrap() {
            "shuffle" => {
                let mut x: Vec<i64> = (0..p[0].as_i64().unwrap()).collect();
                rs.shuffle(&mut x);
                assert_eq!(x, i64s(&f["values"]), "{what}");
            }
            "choice" => {
                let probs = p_of(&p[3]);
                let got = rs
                    .choice(
                        p[0].as_u64().unwrap() as usize,
                        p[1].as_u64().unwrap() as usize,
                        p[2].as_bool().unwrap(),
                        probs.as_deref(),
                    )
                    .unwrap();
                assert_eq!(got, usizes(&f["values"]), "{what}");
            }
            "standard_exponential" => {
                let mut x = vec![0.0; p[0].as_u64().unwrap() as usize];
                rs.standard_exponential(&mut x);
                assert_eq!(bits(&x), bits(&f64s(&f["values"])), "{what}");
            }
            other => panic!("unknown call {other}"),
        }
    }
}

fn seed_sequence_of(v: &Value) -> SeedSequence {
    match v {
        Value::String(s) => SeedSequence::from_int(s.parse().unwrap()),
        Value::Array(a) => {
            let ns: Vec<u128> = a.iter().map(u128_of).collect();
            SeedSequence::from_ints(&ns).unwrap()
        }
        _ => panic!("bad entropy {v}"),
    }
}

#[test]
fn numpy_seed_sequences() {
    let doc = load("numpy_state.json");
    for c in doc["seed_sequences"].as_array().unwrap() {
        let mut ss = seed_sequence_of(&c["entropy"]);
        let what = format!("entropy {}", c["entropy"]);
        let pool: Vec<u64> = ss.pool().iter().map(|&x| x as u64).collect();
        assert_eq!(pool, u64s(&c["pool"]), "{what}");
        let s32: Vec<u64> = ss
            .generate_state_u32(8)
            .into_iter()
            .map(u64::from)
            .collect();
        assert_eq!(s32, u64s(&c["state_u32"]), "{what}");
        let s64: Vec<u128> = ss
            .generate_state_u64(4)
            .into_iter()
            .map(u128::from)
            .collect();
        let want64: Vec<u128> = c["state_u64"]
            .as_array()
            .unwrap()
            .iter()
            .map(u128_of)
            .collect();
        assert_eq!(s64, want64, "{what}");
        let mut kids = ss.spawn(3);
        kids.extend(ss.spawn(2));
        let grand = kids[1].spawn(2);
        kids.extend(grand);
        let want = c["children"].as_array().unwrap();
        assert_eq!(kids.len(), want.len());
        for (k, w) in kids.iter().zip(want) {
            let key: Vec<u128> = w["spawn_key"]
                .as_array()
                .unwrap()
                .iter()
                .map(u128_of)
                .collect();
            assert_eq!(k.spawn_key(), key.as_slice(), "{what}");
            let st: Vec<u64> = k.generate_state_u32(4).into_iter().map(u64::from).collect();
            assert_eq!(st, u64s(&w["state_u32"]), "{what} child {key:?}");
        }
    }
}

/// Inputs of many words (past the 24 that are assembled on the stack), spawn keys of large
/// integers and several pool sizes: the pool and the state words NumPy gives
/// (`tools/golden_seed_sequence_words.py`).
#[test]
fn numpy_seed_sequences_of_many_words() {
    let doc = load("numpy_seed_sequence_words.json");
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() > 100);
    for c in cases {
        let entropy: Vec<u32> = u64s(&c["entropy"]).into_iter().map(|w| w as u32).collect();
        let key: Vec<u128> = c["spawn_key"]
            .as_array()
            .unwrap()
            .iter()
            .map(u128_of)
            .collect();
        let pool_size = c["pool_size"].as_u64().unwrap() as usize;
        let what = format!("{} words, key {key:?}, pool {pool_size}", entropy.len());
        let ss = SeedSequence::new(entropy, key, pool_size).unwrap();
        let pool: Vec<u64> = ss.pool().iter().map(|&x| u64::from(x)).collect();
        assert_eq!(pool, u64s(&c["pool"]), "{what}");
        let st: Vec<u64> = ss
            .generate_state_u32(6)
            .into_iter()
            .map(u64::from)
            .collect();
        assert_eq!(st, u64s(&c["state_u32"]), "{what}");
    }
}

#[test]
fn numpy_pcg64_advance_and_jumped() {
    let doc = load("numpy_state.json");
    for c in doc["pcg64"].as_array().unwrap() {
        let seed: u128 = c["seed"].as_str().unwrap().parse().unwrap();
        let base = SeedSequence::from_int(seed).pcg64();
        assert_eq!(base.state(), u128_of(&c["state"]));
        assert_eq!(base.inc(), u128_of(&c["inc"]));
        for a in c["advance"].as_array().unwrap() {
            let mut p = base.clone();
            p.advance(u128_of(&a["delta"]));
            assert_eq!(p.state(), u128_of(&a["state"]), "advance {}", a["delta"]);
            let raw: Vec<u128> = (0..3).map(|_| p.next_u64() as u128).collect();
            let want: Vec<u128> = a["raw"].as_array().unwrap().iter().map(u128_of).collect();
            assert_eq!(raw, want);
        }
        for j in c["jumped"].as_array().unwrap() {
            let mut p = base.jumped(j["jumps"].as_u64().unwrap() as u128);
            assert_eq!(p.state(), u128_of(&j["state"]), "jumped {}", j["jumps"]);
            let raw: Vec<u128> = (0..3).map(|_| p.next_u64() as u128).collect();
            let want: Vec<u128> = j["raw"].as_array().unwrap().iter().map(u128_of).collect();
            assert_eq!(raw, want);
        }
        let mut g = Generator::from_pcg64(base.clone());
        let mut x = [0f32; 3];
        g.random_f32(&mut x);
        let w = &c["after_3_f32"];
        let bg = g.bit_generator();
        assert_eq!(bg.state(), u128_of(&w["state"]));
        let want_pending =
            (w["has_uint32"].as_u64() == Some(1)).then(|| w["uinteger"].as_u64().unwrap() as u32);
        assert_eq!(bg.pending(), want_pending);
        let again = Pcg64::from_parts_buffered(bg.state(), bg.inc(), bg.pending()).unwrap();
        assert_eq!(&again, bg);
    }
}

#[test]
fn numpy_generator_functions() {
    let doc = load("numpy_state.json");
    for f in doc["generator_functions"].as_array().unwrap() {
        let seed = f["seed"].as_u64().unwrap() as u128;
        let mut g = default_rng(seed);
        let p = f["params"].as_array().unwrap();
        let what = format!("seed {seed} {} {:?}", f["call"], p);
        match f["call"].as_str().unwrap() {
            "choice" => {
                let probs = p_of(&p[3]);
                let got = g
                    .choice(
                        p[0].as_u64().unwrap() as usize,
                        p[1].as_u64().unwrap() as usize,
                        p[2].as_bool().unwrap(),
                        probs.as_deref(),
                        p[4].as_bool().unwrap(),
                    )
                    .unwrap();
                assert_eq!(got, usizes(&f["values"]), "{what}");
            }
            "shuffle" => {
                let mut x: Vec<i64> = (0..p[0].as_i64().unwrap()).collect();
                g.shuffle(&mut x);
                assert_eq!(x, i64s(&f["values"]), "{what}");
            }
            "spawn_random" => {
                let mut got = Vec::new();
                for mut k in g.spawn(p[0].as_u64().unwrap() as usize).unwrap() {
                    let mut x = vec![0.0; p[1].as_u64().unwrap() as usize];
                    k.random(&mut x);
                    got.extend(x);
                }
                assert_eq!(bits(&got), bits(&f64s(&f["values"])), "{what}");
            }
            "mixed" => {
                let mut got = Vec::new();
                let mut a = [0f32; 1];
                g.random_f32(&mut a);
                got.push(a[0] as f64);
                let mut b = [0.0; 2];
                g.random(&mut b);
                got.extend(b);
                g.random_f32(&mut a);
                got.push(a[0] as f64);
                let mut c = [0i64; 3];
                g.integers_i64(0, 7, false, &mut c).unwrap();
                got.extend(c.iter().map(|&v| v as f64));
                g.standard_normal_f32(&mut a);
                got.push(a[0] as f64);
                assert_eq!(bits(&got), bits(&f64s(&f["values"])), "{what}");
            }
            other => panic!("unknown call {other}"),
        }
    }
}

#[test]
fn from_u64_constructors_match_library_seeding() {
    assert_eq!(Random::from_u64(7), Random::from_decimal("7").unwrap());
    assert_eq!(
        RandomState::from_u64(7).unwrap().get_state(),
        RandomState::new(7).get_state()
    );
    let mut a = Generator::from_u64(7);
    let mut b = default_rng_from(SeedSequence::from_int(7));
    assert_eq!(a.bit_generator(), b.bit_generator());
}
