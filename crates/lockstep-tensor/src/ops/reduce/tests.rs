use super::lanes::*;
use super::real::*;
use super::softmax::*;
use super::sum::*;
use crate::Tensor;
use crate::deterministic::scope;
use crate::ops::matmul::Isa;
use crate::threads::Par;
use crate::threads::with_num_threads;

fn data(n: usize) -> Vec<f32> {
    let mut g = lockstep_rng::Generator::with_seed(5);
    let mut v = vec![0f32; n];
    lockstep_rng::compat::torch::normal_(&mut g, &mut v, 0.0, 1.0).unwrap();
    v
}

#[test]
fn deterministic_sum_is_thread_invariant() {
    // Lengths around the chunk and lane boundaries.
    for n in [0, 1, 15, 17, CHUNK - 1, CHUNK + 3, 5 * CHUNK + 17, 100_003] {
        let x = Tensor::from_vec(data(n), &[n]).unwrap();
        let bits: Vec<u32> = [1, 2, 3, 8]
            .iter()
            .map(|&t| {
                scope(true, false, || {
                    with_num_threads(t, || x.sum().unwrap().item::<f32>().unwrap())
                })
                .to_bits()
            })
            .collect();
        assert!(bits.iter().all(|&b| b == bits[0]), "n = {n}: {bits:?}");
    }
}

/// Lengths that exercise the lane remainder, the prefetch threshold and the chunking.
const ISA_LENS: [usize; 12] = [
    0,
    1,
    7,
    15,
    16,
    17,
    31,
    255,
    4097,
    4111,
    CHUNK + 5,
    3 * CHUNK + 13,
];

fn isas() -> Vec<Isa> {
    [Isa::Portable, Isa::Avx2, Isa::Avx512]
        .into_iter()
        .filter(|i| i.available())
        .collect()
}

#[test]
fn every_isa_path_gives_the_same_lane_sums() {
    let isas = isas();
    assert!(isas.contains(&Isa::Portable));
    for n in ISA_LENS {
        let v = data(n);
        let v64: Vec<f64> = v.iter().map(|&x| x as f64 * 1.1).collect();
        let r32 = f32::lane_sums(&v, Isa::Portable).map(f32::to_bits);
        let r64 = f64::lane_sums(&v64, Isa::Portable).map(f64::to_bits);
        for &isa in &isas {
            assert_eq!(
                f32::lane_sums(&v, isa).map(f32::to_bits),
                r32,
                "{isa:?} n={n}"
            );
            assert_eq!(
                f64::lane_sums(&v64, isa).map(f64::to_bits),
                r64,
                "{isa:?} n={n}"
            );
        }
        // The portable path is the plain definition: lane i mod LANES, in index order.
        let mut want = [0f32; LANES];
        for (i, &x) in v.iter().enumerate() {
            want[i % LANES] += x;
        }
        assert_eq!(want.map(f32::to_bits), r32, "n={n}");
    }
}

/// The four-piece kernels (AVX-512 and AVX2) give each piece the portable lane sums, and
/// `piece_sums` the same bits on every path, across quads and a ragged tail.
#[test]
fn every_isa_path_gives_the_same_piece_sums() {
    let v = data(9 * CHUNK + 37);
    let quad = &v[..4 * CHUNK];
    let want: Vec<[u32; LANES]> = quad
        .chunks(CHUNK)
        .map(|c| f32::lane_sums(c, Isa::Portable).map(f32::to_bits))
        .collect();
    let mut portable = vec![0f32; v.len().div_ceil(CHUNK)];
    piece_sums(&v, &mut portable, Isa::Portable);
    for &isa in &isas() {
        if let Some(got) = f32::lane_sums4(quad, isa) {
            let got: Vec<[u32; LANES]> = got.iter().map(|l| l.map(f32::to_bits)).collect();
            assert_eq!(got, want, "{isa:?}");
        }
        let mut p = vec![0f32; portable.len()];
        piece_sums(&v, &mut p, isa);
        assert_eq!(
            p.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            portable.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            "{isa:?}"
        );
    }
    #[cfg(target_arch = "x86_64")]
    if Isa::Avx2.available() {
        assert!(
            f32::lane_sums4(quad, Isa::Avx2).is_some(),
            "AVX2 four-piece path"
        );
    }
}

#[test]
fn every_isa_path_gives_the_same_softmax() {
    for n in ISA_LENS {
        let mut v = data(n);
        if n > 20 {
            v[3] = -200.0; // exp underflows to 0
            v[9] = 80.0;
        }
        for log in [false, true] {
            let mut want = vec![0f32; n];
            softmax_line(&v, &mut want, log, Isa::Portable, false);
            // Reference: the unfused passes (max, exp, sum_lanes, scale).
            if n > 0 && !log {
                let m = line_max_value(&v);
                let sh: Vec<f32> = v.iter().map(|&x| x - m).collect();
                let mut e = vec![0f32; n];
                exp_f32_slice(&sh, &mut e);
                let inv = 1.0 / sum_lanes(&e);
                let r: Vec<u32> = e.iter().map(|&x| (x * inv).to_bits()).collect();
                let w: Vec<u32> = want.iter().map(|x| x.to_bits()).collect();
                assert_eq!(r, w, "n={n}");
            }
            for &isa in &isas() {
                let mut got = vec![0f32; n];
                softmax_line(&v, &mut got, log, isa, true);
                let g: Vec<u32> = got.iter().map(|x| x.to_bits()).collect();
                let w: Vec<u32> = want.iter().map(|x| x.to_bits()).collect();
                assert_eq!(g, w, "{isa:?} n={n} log={log}");
            }
        }
    }
}

/// The plain definition of the deterministic order: [`sum_lanes`] per [`CHUNK`] piece,
/// then [`tree_sum`] over the pieces.
fn reference_det<T: LaneSum>(x: &[T]) -> T {
    if x.len() <= CHUNK {
        return sum_lanes(x);
    }
    let mut p: Vec<T> = x.chunks(CHUNK).map(sum_lanes).collect();
    tree_sum(&mut p)
}

/// The unrolled tree of one lane group is [`tree_sum`]'s loop.
#[test]
fn the_lane_group_tree_is_the_loop() {
    let v = data(LANES * 200);
    for g in v.chunks(LANES) {
        let mut a: [f32; LANES] = g.try_into().unwrap();
        let mut b: [f64; LANES] = core::array::from_fn(|i| g[i] as f64 * 1e-3 + 1.0);
        assert_eq!(
            tree_sum(&mut a.clone()).to_bits(),
            tree_loop(&mut a).to_bits()
        );
        assert_eq!(
            tree_sum(&mut b.clone()).to_bits(),
            tree_loop(&mut b).to_bits()
        );
    }
}

#[test]
fn sum_det_is_the_piecewise_order_at_any_thread_count() {
    // Quads of pieces (the four-chain path), their remainders, and a partial last piece.
    for n in [4 * CHUNK, 4 * CHUNK + 1, 9 * CHUNK + 77, 13 * CHUNK] {
        let v = data(n);
        let v64: Vec<f64> = v.iter().map(|&x| x as f64 * 1.3).collect();
        let want = reference_det(&v).to_bits();
        let want64 = reference_det(&v64).to_bits();
        for t in [1, 2, 3, 8] {
            let par = Par::new(t);
            assert_eq!(sum_det(&v, &par).to_bits(), want, "n={n} t={t}");
            assert_eq!(sum_det(&v64, &par).to_bits(), want64, "n={n} t={t}");
        }
    }
}

#[test]
fn sum_dim_and_mean_dim_give_the_bits_of_the_line_sum() {
    // Strided lines: whole-row groups (small inner), column tiles (wide inner), several
    // pieces per line (n > CHUNK).
    for shape in [
        [2usize, 2 * CHUNK + 333, 3],
        [1, 40, 1300],
        [3, 17, 600],
        [2, 5, 1],
        // An LSTM's bias gradient ([T·B, 4H] summed over rows), with a partial lane group.
        [1, 250, 512],
        // Fewer rows than threads: each row's columns split among them (a range that is
        // not a whole number of lane groups).
        [1, 1030, 200],
        [2, 33, 40],
        // Lines of stride 1, several per thread (a conv bias gradient) or pieces each.
        [1024, 64, 1],
        [3, 2 * CHUNK + 5, 1],
    ] {
        let len: usize = shape.iter().product();
        let v = data(len);
        let x = Tensor::from_vec(v.clone(), &shape).unwrap();
        let [outer, n, inner] = shape;
        let mut want = Vec::new();
        let mut want_mean = Vec::new();
        for o in 0..outer {
            for c in 0..inner {
                let line: Vec<f32> = (0..n).map(|k| v[(o * n + k) * inner + c]).collect();
                let s = reference_det(&line);
                want.push(s.to_bits());
                want_mean.push((s / n as f32).to_bits());
            }
        }
        for t in [1, 2, 3, 8] {
            let (s, m) = with_num_threads(t, || {
                (x.sum_dim(1, false).unwrap(), x.mean_dim(1, false).unwrap())
            });
            let s: Vec<u32> = s
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect();
            let m: Vec<u32> = m
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect();
            assert_eq!(s, want, "{shape:?} t={t}");
            assert_eq!(m, want_mean, "{shape:?} t={t}");
        }
    }
}

/// Column sums of fewer rows than there are lanes skip the empty lanes' part of the tree;
/// the bits must stay those of the line sum, signed zeros, infinities and NaN included.
#[test]
fn short_column_sums_give_the_bits_of_the_line_sum() {
    let specials = [
        -0.0f32,
        0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-45,
        -3.5,
    ];
    for n in 1..=2 * LANES + 1 {
        for inner in [1usize, 7, 300] {
            // Column c: all -0 (c % 5 == 0), a special value in row c % n (c % 5 == 1), else data.
            let mut v = data(n * inner);
            for c in 0..inner {
                for k in 0..n {
                    let x = &mut v[k * inner + c];
                    match c % 5 {
                        0 => *x = -0.0,
                        1 if k == c % n => *x = specials[c % specials.len()],
                        _ => {}
                    }
                }
            }
            let x = Tensor::from_vec(v.clone(), &[n, inner]).unwrap();
            let want: Vec<u32> = (0..inner)
                .map(|c| {
                    let line: Vec<f32> = (0..n).map(|k| v[k * inner + c]).collect();
                    reference_det(&line).to_bits()
                })
                .collect();
            for t in [1, 2, 3, 8] {
                let got: Vec<u32> = with_num_threads(t, || x.sum_dim(0, false).unwrap())
                    .to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|x| x.to_bits())
                    .collect();
                assert_eq!(got, want, "n={n} inner={inner} t={t}");
            }
        }
    }
}

#[test]
fn sums_are_close_to_the_f64_reference() {
    let v = data(70_001);
    let exact: f64 = v.iter().map(|&x| x as f64).sum();
    let x = Tensor::from_vec(v, &[70_001]).unwrap();
    for det in [false, true] {
        let s = scope(det, false, || x.sum().unwrap().item::<f32>().unwrap());
        assert!((s as f64 - exact).abs() < 1e-3, "det={det}: {s} vs {exact}");
    }
}

#[test]
fn sum_dim_matches_reference_and_threads() {
    let x = Tensor::from_vec(data(3 * 50 * 7), &[3, 50, 7]).unwrap();
    let v = x.to_vec::<f32>().unwrap();
    for dim in [0isize, 1, 2, -1] {
        let r = with_num_threads(1, || x.sum_dim(dim, false).unwrap());
        for t in [2, 3, 8] {
            let o = with_num_threads(t, || x.sum_dim(dim, false).unwrap());
            assert_eq!(r.to_vec::<f32>().unwrap(), o.to_vec::<f32>().unwrap());
        }
        let d = if dim < 0 { 2 } else { dim as usize };
        let shape = [3usize, 50, 7];
        let got = r.to_vec::<f32>().unwrap();
        // Reference: f64 sums over the reduced axis.
        let mut idx = 0;
        for a in 0..(if d == 0 { 1 } else { 3 }) {
            for b in 0..(if d == 1 { 1 } else { 50 }) {
                for c in 0..(if d == 2 { 1 } else { 7 }) {
                    let mut s = 0f64;
                    for k in 0..shape[d] {
                        let (i, j, l) = match d {
                            0 => (k, b, c),
                            1 => (a, k, c),
                            _ => (a, b, k),
                        };
                        s += v[(i * 50 + j) * 7 + l] as f64;
                    }
                    assert!((got[idx] as f64 - s).abs() < 1e-4);
                    idx += 1;
                }
            }
        }
    }
    assert!(x.sum_dim(3, false).is_err());
}
