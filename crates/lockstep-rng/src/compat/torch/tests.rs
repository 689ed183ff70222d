//! Known answers from torch.md §14 (PyTorch 2.15, x86-64 AVX2). The large golden sets, made by
//! `tools/golden_torch.py` with real PyTorch, are checked in `lockstep-cli/tests/golden.rs`.

use super::*;
use crate::Generator;

fn seeded(s: u64) -> Generator {
    Generator::with_seed(s)
}

#[test]
fn rand_known_answers() {
    let mut x = [0f32; 3];
    rand(&mut seeded(42), &mut x);
    assert_eq!(
        x,
        [0.8822692632675171, 0.9150039553642273, 0.38286375999450684]
    );
    let mut d = [0f64; 2];
    rand(&mut seeded(0), &mut d);
    assert_eq!(d, [0.9700530018065531, 0.707819864399788]);
}

#[test]
fn randn_scalar_and_block_paths() {
    let mut x = [0f32; 3];
    normal_(&mut seeded(0), &mut x, 0.0, 1.0).unwrap();
    assert_eq!(
        x,
        [1.5409960746765137, -0.293428897857666, -2.1787893772125244]
    );
    let mut d = [0f64; 2];
    normal_(&mut seeded(42), &mut d, 0.0, 1.0).unwrap();
    assert_eq!(d, [0.33669035438385886, 0.1288094051365897]);

    let mut x = [0f32; 16];
    normal_(&mut seeded(0), &mut x, 0.0, 1.0).unwrap();
    assert_eq!(
        [x[0], x[1], x[8], x[15]],
        [
            -1.1258398294448853,
            -1.152360200881958,
            0.32227492332458496,
            -0.2472781538963318
        ]
    );
    let mut x = [0f32; 17];
    normal_(&mut seeded(42), &mut x, 0.0, 1.0).unwrap();
    assert_eq!(
        [x[0], x[15], x[16]],
        [1.9269152879714966, 0.859858512878418, -0.3097267746925354]
    );
    let mut d = [0f64; 16];
    normal_(&mut seeded(0), &mut d, 0.0, 1.0).unwrap();
    assert_eq!([d[0], d[8]], [-2.310411800234176, -1.2956271403277857]);
}

#[test]
fn scalar_normal_cache_carries_over() {
    // randn(3) then randn(3) equals the first six values of one scalar stream.
    let mut g = seeded(5);
    let mut a = [0f64; 3];
    let mut b = [0f64; 3];
    normal_(&mut g, &mut a, 0.0, 1.0).unwrap();
    normal_(&mut g, &mut b, 0.0, 1.0).unwrap();
    let mut all = [0f64; 6];
    normal_scalar_path_(&mut seeded(5), &mut all, 0.0, 1.0).unwrap();
    assert_eq!([a, b].concat(), all);
}

#[test]
fn integer_known_answers() {
    let mut v = [0i64; 10];
    random_(&mut seeded(0), &mut v, 0, 10).unwrap();
    assert_eq!(v, [4, 9, 3, 0, 3, 9, 7, 3, 7, 3]);
    let mut v = [0i64; 2];
    random_(&mut seeded(42), &mut v, 0, 1 << 40).unwrap();
    assert_eq!(v, [441507790259, 395924837646]);
    assert_eq!(randperm(&mut seeded(0), 10), [4, 1, 7, 5, 3, 9, 0, 8, 6, 2]);
    assert_eq!(
        randperm(&mut seeded(42), 10),
        [2, 6, 1, 8, 4, 5, 0, 9, 3, 7]
    );
    assert!(random_(&mut seeded(0), &mut v, 5, 5).is_err());
}

#[test]
fn bernoulli_multinomial_exponential_known_answers() {
    let mut b = [0f32; 10];
    bernoulli_(&mut seeded(0), &mut b, 0.5).unwrap();
    assert_eq!(b, [0., 0., 1., 0., 0., 0., 1., 1., 0., 1.]);
    let p = [0.1f32, 0.2, 0.3, 0.4];
    assert_eq!(
        multinomial(&mut seeded(0), &p, 1, 4, 6, true).unwrap(),
        [3, 3, 2, 3, 3, 3]
    );
    assert_eq!(
        multinomial(&mut seeded(42), &p, 1, 4, 6, true).unwrap(),
        [0, 0, 1, 0, 2, 2]
    );
    assert_eq!(
        multinomial(&mut seeded(0), &p, 1, 4, 3, false).unwrap(),
        [2, 1, 3]
    );
    assert_eq!(
        multinomial(&mut seeded(42), &p, 1, 4, 3, false).unwrap(),
        [3, 1, 2]
    );
    let mut e = [0f64; 3];
    exponential_(&mut seeded(0), &mut e, 1.0).unwrap();
    assert_eq!(
        e,
        [3.508326186707642, 1.2303847641796768, 0.6150440938940115]
    );
}

#[test]
fn uniform_and_linear_known_answers() {
    let mut u = [0f32; 4];
    uniform_(&mut seeded(0), &mut u, -1.0 / 3.0, 1.0 / 3.0).unwrap();
    assert_eq!(
        u,
        [
            -0.0024956068955361843,
            0.17881453037261963,
            -0.2743483781814575,
            -0.24531301856040955
        ]
    );
    let (w, b) = init::linear::<f32>(&mut seeded(0), 3, 2, true).unwrap();
    assert_eq!(
        w,
        [
            -0.004322517663240433,
            0.3097158372402191,
            -0.4751853346824646,
            -0.4248946011066437,
            -0.2223689705133438,
            0.15482072532176971
        ]
    );
    assert_eq!(b.unwrap(), [-0.011439144611358643, 0.45777493715286255]);
    let (w, _) = init::linear::<f32>(&mut seeded(0), 20, 7, true).unwrap();
    assert_eq!(
        &w[..3],
        [
            -0.001674103899858892,
            0.11995243281126022,
            -0.18403849005699158
        ]
    );
}

#[test]
fn bad_arguments_are_errors() {
    let mut g = seeded(0);
    let mut x = [0f32; 4];
    assert!(uniform_(&mut g, &mut x, 1.0, 0.0).is_err());
    assert!(uniform_(&mut g, &mut x, 0.0, f64::INFINITY).is_err());
    assert!(normal_(&mut g, &mut x, 0.0, -1.0).is_err());
    assert!(bernoulli_(&mut g, &mut x, 1.5).is_err());
    assert!(bernoulli_tensor(&mut g, &[0.5f32, f32::NAN]).is_err());
    assert!(dropout(&mut g, &x, -0.1, true).is_err());
    assert!(exponential_(&mut g, &mut x, 0.0).is_err());
    assert!(multinomial(&mut g, &[0.5f32, -0.1], 1, 2, 1, true).is_err());
    assert!(multinomial(&mut g, &[0.0f32, 0.0], 1, 2, 1, true).is_err());
    assert!(multinomial(&mut g, &[0.5f32, 0.5], 1, 2, 3, false).is_err());
    assert!(multinomial(&mut g, &[0.5f32, 0.5], 1, 3, 1, false).is_err());
    assert!(
        init::kaiming_uniform_(&mut g, &mut x, &[4], 0.0, init::FanMode::FanIn, "relu").is_err()
    );
    assert!(init::calculate_gain("swish", None).is_err());
    assert!(init::trunc_normal_(&mut g, &mut x, 0.0, 1.0, 2.0, 1.0).is_err());
}

#[test]
fn bernoulli_integer_threshold_is_the_double_comparison() {
    // `bernoulli_` decides `u < p` on the 53-bit integers; the reference is the double
    // comparison of `next_f64`, drawn from an identically seeded generator. The `p` include
    // exact multiples of 2⁻⁵³ and their neighbours, where a threshold off by one would show.
    let ulp = 1.0 / (1u64 << 53) as f64;
    let mut ps = vec![
        0.0,
        1.0,
        0.5,
        0.1,
        0.9,
        1.0 / 3.0,
        ulp,
        2.0 * ulp,
        1.0 - ulp,
        0.75,
    ];
    let mut g = seeded(7);
    let mut r = [0f64; 64];
    rand(&mut g, &mut r);
    for &v in &r {
        let m = (v * (1u64 << 53) as f64) as u64;
        ps.extend([
            m as f64 * ulp,
            (m + 1) as f64 * ulp,
            v,
            f64::from_bits(v.to_bits() + 1),
        ]);
    }
    for (k, &p) in ps.iter().enumerate() {
        let n = 600; // more than one block of words
        let mut got = vec![0f32; n];
        bernoulli_(&mut seeded(k as u64), &mut got, p).unwrap();
        let mut g = seeded(k as u64);
        let want: Vec<f32> = (0..n)
            .map(|_| if g.next_f64() < p { 1.0 } else { 0.0 })
            .collect();
        assert_eq!(got, want, "p = {p:e}");
    }
    // Values equal to a draw: `u < p` is false at `p = u` and true just above it.
    let mut g = seeded(3);
    let u = g.next_f64();
    for (p, hit) in [(u, 0.0f64), (u + ulp, 1.0)] {
        let mut b = [0f64; 1];
        bernoulli_(&mut seeded(3), &mut b, p).unwrap();
        assert_eq!(b, [hit]);
    }
}

#[test]
fn dropout_mask_is_dropout_of_ones() {
    // The reference, written out: one 53-bit double per element from `next_f64`, kept when
    // below 1 − p, then bernoulli / (1 − p) in f32, times 1 (what `dropout` does to ones).
    let reference = |seed: u64, n: usize, p: f64| -> Vec<u32> {
        let mut g = seeded(seed);
        let keep = (1.0 - p) as f32;
        (0..n)
            .map(|_| {
                let b = if p == 1.0 {
                    0.0f32
                } else if g.next_f64() < 1.0 - p {
                    1.0
                } else {
                    0.0
                };
                (1.0f32 * (b / keep)).to_bits()
            })
            .collect()
    };
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for (n, p) in [(1, 0.5), (37, 0.1), (600, 0.3), (1000, 0.9), (5, 0.0)] {
        let want = reference(11, n, p);
        let mut g = seeded(11);
        assert_eq!(
            bits(&dropout_mask::<f32>(&mut g, n, p).unwrap()),
            want,
            "n = {n}, p = {p}"
        );
        let ones = vec![1f32; n];
        let mut h = seeded(11);
        assert_eq!(bits(&dropout(&mut h, &ones, p, true).unwrap()), want);
        // The same words consumed: the generators agree afterwards.
        assert_eq!(g.next_u32(), h.next_u32());
        let ones64 = vec![1f64; n];
        assert_eq!(
            dropout_mask::<f64>(&mut seeded(12), n, p).unwrap(),
            dropout(&mut seeded(12), &ones64, p, true).unwrap()
        );
    }
    assert_eq!(
        dropout_mask::<f32>(&mut seeded(0), 3, 1.0).unwrap(),
        [0.0; 3]
    );
    assert!(
        dropout_mask::<f32>(&mut seeded(0), 0, 0.5)
            .unwrap()
            .is_empty()
    );
    assert!(dropout_mask::<f32>(&mut seeded(0), 4, 1.5).is_err());
    assert!(dropout_mask::<f32>(&mut seeded(0), 4, f64::NAN).is_err());
}

#[test]
fn dropout_mask_in_parts_is_the_serial_mask() {
    // Parts run in reverse order on threads of their own: the mask of `dropout_mask` bit for
    // bit, and the generator left where the serial draw leaves it — for sizes below, at and
    // well past the split, from a fresh engine block and from the middle of one.
    let reverse = |parts: usize, f: &(dyn Fn(usize) + Sync)| {
        std::thread::scope(|s| {
            for i in (0..parts).rev() {
                s.spawn(move || f(i));
            }
        })
    };
    for n in [2 * PAR_PIECE - 1, 2 * PAR_PIECE, 2 * PAR_CHUNK + 777] {
        for skip in [0, 5, 623] {
            for p in [0.1, 0.5] {
                let (mut a, mut b) = (seeded(7), seeded(7));
                for _ in 0..skip {
                    a.next_u32();
                    b.next_u32();
                }
                let want = dropout_mask::<f32>(&mut a, n, p).unwrap();
                let got = dropout_mask_with::<f32>(&mut b, n, p, Some(&reverse)).unwrap();
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert!(bits(&got) == bits(&want), "n {n} skip {skip} p {p}");
                assert_eq!(a.next_u32(), b.next_u32(), "state after n {n} skip {skip}");
            }
        }
    }
}

#[test]
fn dropout_mask_parts_from_a_faulty_runner() {
    // A runner calling every part twice (the second call of each does nothing): the serial
    // mask. A runner that skips a part: an error, not a mask with unwritten elements.
    let n = 2 * PAR_CHUNK + 5;
    let twice = |parts: usize, f: &(dyn Fn(usize) + Sync)| {
        for i in (0..parts).chain(0..parts) {
            f(i);
        }
    };
    let want = dropout_mask::<f32>(&mut seeded(3), n, 0.3).unwrap();
    let got = dropout_mask_with::<f32>(&mut seeded(3), n, 0.3, Some(&twice)).unwrap();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert!(bits(&got) == bits(&want));
    let skip_last = |parts: usize, f: &(dyn Fn(usize) + Sync)| (0..parts - 1).for_each(f);
    let err = dropout_mask_with::<f32>(&mut seeded(3), n, 0.3, Some(&skip_last)).unwrap_err();
    assert!(err.to_string().contains("every part"), "{err}");
}
