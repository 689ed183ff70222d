//! matmul / linear / gemm: every candidate against an f64 reference, thread invariance of the
//! deterministic candidates, same bits from every instruction set, PyTorch's shape rules, and
//! errors instead of panics.

use lockstep_tensor::deterministic::scope;
use lockstep_tensor::ops::matmul::{GemmFloat, Isa, MATMUL, gemm, gemm_with, is_skinny};
use lockstep_tensor::threads::{Par, with_num_threads};
use lockstep_tensor::{DType, Element, Error, Tensor};

fn data<T: Element>(n: usize, seed: u64) -> Vec<T> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            T::from_f64((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
        })
        .collect()
}

/// The exact chain every deterministic-blocked output follows: `c = fma(a, b, c)` for p in
/// order from +0.
fn fma_chain<T: GemmFloat>(m: usize, n: usize, k: usize, a: &[T], b: &[T]) -> Vec<T> {
    let mut c = vec![T::ZERO; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = T::ZERO;
            for p in 0..k {
                acc = a[i * k + p].mul_add(b[p * n + j], acc);
            }
            c[i * n + j] = acc;
        }
    }
    c
}

/// Checks `got` against the f64 product with a bound of `4·k·eps·Σ|a||b|` per element.
fn check_close<T: GemmFloat>(
    what: &str,
    m: usize,
    n: usize,
    k: usize,
    a: &[T],
    b: &[T],
    got: &[T],
) {
    let eps = if T::DTYPE == DType::F32 {
        f32::EPSILON as f64
    } else {
        f64::EPSILON
    };
    assert_eq!(got.len(), m * n, "{what}");
    for i in 0..m {
        for j in 0..n {
            let (mut s, mut mag) = (0f64, 0f64);
            for p in 0..k {
                let t = a[i * k + p].to_f64() * b[p * n + j].to_f64();
                s += t;
                mag += t.abs();
            }
            let g = got[i * n + j].to_f64();
            let tol = 4.0 * (k as f64 + 1.0) * eps * mag + 1e-300;
            assert!(
                (g - s).abs() <= tol,
                "{what} {m}x{n}x{k} at ({i},{j}): {g} vs {s}"
            );
        }
    }
}

const SHAPES: &[(usize, usize, usize)] = &[
    (0, 3, 4),
    (3, 0, 4),
    (3, 4, 0),
    (1, 1, 1),
    (1, 9, 1),
    (7, 13, 5),
    (6, 16, 256),
    (12, 32, 257),
    (13, 17, 300),
    (25, 33, 520),
    (97, 1, 40),
    (1, 70, 33),
    (5, 7, 2100), // skinny: split-K candidates split K
];

fn all_candidates<T: GemmFloat>() {
    for &(m, n, k) in SHAPES {
        let a = data::<T>(m * k, 1 + m as u64);
        let b = data::<T>(k * n, 2 + n as u64);
        let ta = Tensor::from_vec(a.clone(), &[m, k]).unwrap();
        let tb = Tensor::from_vec(b.clone(), &[k, n]).unwrap();
        for imp in MATMUL.impls {
            let out = (imp.f)(&ta, &tb, &Par::new(3)).unwrap();
            assert_eq!(out.shape(), [m, n]);
            check_close(imp.algo, m, n, k, &a, &b, &out.to_vec::<T>().unwrap());
        }
    }
    assert!(is_skinny(5, 7, 2100) && !is_skinny(1024, 1024, 1024));
}

#[test]
fn every_candidate_matches_the_f64_reference() {
    all_candidates::<f32>();
    all_candidates::<f64>();
}

#[test]
fn the_gemm_crate_is_a_candidate_only_with_its_feature() {
    let algos: Vec<&str> = MATMUL.impls.iter().map(|i| i.algo).collect();
    assert_eq!(
        algos.contains(&"matmul.gemm_crate"),
        cfg!(feature = "gemm-crate"),
        "{algos:?}"
    );
    assert_eq!(
        algos[..3],
        [
            "matmul.splitk_completion",
            "matmul.blocked",
            "matmul.splitk_fixed"
        ]
    );
}

fn same_bits_everywhere<T: GemmFloat>() {
    for &(m, n, k) in &[
        (1, 1, 1),
        (7, 13, 5),
        (13, 35, 300),
        (25, 33, 520),
        (30, 70, 9),
        // Full A panels whose K ends on a transposed 8-column block (the last column stored exactly).
        (12, 32, 16),
        (250, 20, 130), // more than one MC row of tiles: B packed up front, not per task
        // More than one NC column of tiles even at one thread (A packed up front), more than
        // one KC block (partial sums in the tile buffer), edge tiles in both directions.
        (19, 790, 260),
        // A last row panel of exactly 4 or 8 rows (the edge kernels write straight into C),
        // with dense B rows packed across several panels per block, and a ragged last panel.
        (64, 300, 140),
        (68, 1100, 300),
        // time_sequence_prediction's LSTM-cell products (f64, 97 waves, 51 hidden): forward,
        // both gradients, and the first cell's 1-wide input; full panels packed by the
        // AVX2 transposes (row-major A) and column moves (transposed A), a 1-row last panel.
        (97, 204, 51),
        (97, 51, 204),
        (204, 51, 97),
        (204, 1, 97),
        (97, 204, 1),
        // One column with A transposed: the matrix–vector path, in more than one block of
        // 512 rows.
        (1100, 1, 37),
    ] {
        let a = data::<T>(m * k, 3);
        let b = data::<T>(k * n, 4);
        let chain = fma_chain(m, n, k, &a, &b);
        // A transposed in memory (read with strides (1, m)), B row-major.
        let mut at = vec![T::ZERO; m * k];
        for i in 0..m {
            for p in 0..k {
                at[p * m + i] = a[i * k + p];
            }
        }
        // B transposed in memory (read with strides (1, k): the transposing B pack).
        let mut bt = vec![T::ZERO; k * n];
        for p in 0..k {
            for j in 0..n {
                bt[j * k + p] = b[p * n + j];
            }
        }
        for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
            if !isa.available() {
                continue;
            }
            for threads in [1, 2, 3, 8] {
                let par = Par::new(threads);
                let mut c = vec![T::from_f64(f64::NAN); m * n];
                gemm_with(isa, m, n, k, &a, (k, 1), &b, (n, 1), &mut c, (n, 1), &par).unwrap();
                let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&c), bits(&chain), "{isa:?} {threads}t {m}x{n}x{k}");
                // Transposed A, and C written transposed (column-major).
                let mut ct = vec![T::ZERO; m * n];
                gemm_with(isa, m, n, k, &at, (1, m), &b, (n, 1), &mut ct, (1, m), &par).unwrap();
                let back: Vec<T> = (0..m * n).map(|x| ct[(x % n) * m + x / n]).collect();
                assert_eq!(bits(&back), bits(&chain), "{isa:?} transposed {m}x{n}x{k}");
                let mut c = vec![T::from_f64(f64::NAN); m * n];
                gemm_with(isa, m, n, k, &a, (k, 1), &bt, (1, k), &mut c, (n, 1), &par).unwrap();
                assert_eq!(bits(&c), bits(&chain), "{isa:?} column-major B {m}x{n}x{k}");
            }
        }
    }
}

#[test]
fn portable_avx2_avx512_and_any_thread_count_give_the_same_bits() {
    same_bits_everywhere::<f32>();
    same_bits_everywhere::<f64>();
}

#[test]
fn deterministic_candidates_are_thread_invariant() {
    for &(m, n, k) in &[(70, 90, 600), (5, 7, 9000), (40, 3, 3000)] {
        let ta = Tensor::from_vec(data::<f32>(m * k, 5), &[m, k]).unwrap();
        let tb = Tensor::from_vec(data::<f32>(k * n, 6), &[k, n]).unwrap();
        for algo in ["matmul.blocked", "matmul.splitk_fixed"] {
            let imp = MATMUL.by_algo(algo).unwrap();
            let runs: Vec<Vec<u32>> = [1, 2, 3, 8]
                .iter()
                .map(|&t| {
                    let o = (imp.f)(&ta, &tb, &Par::new(t)).unwrap();
                    o.to_vec::<f32>()
                        .unwrap()
                        .iter()
                        .map(|x| x.to_bits())
                        .collect()
                })
                .collect();
            assert!(runs.iter().all(|r| r == &runs[0]), "{algo} {m}x{n}x{k}");
        }
        // Through dispatch: deterministic mode runs the blocked kernel at every thread count.
        let blocked = (MATMUL.by_algo("matmul.blocked").unwrap().f)(&ta, &tb, &Par::new(1))
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        for t in [1, 2, 3, 8] {
            let o = scope(true, false, || {
                with_num_threads(t, || ta.matmul(&tb).unwrap())
            });
            assert_eq!(
                o.to_vec::<f32>().unwrap(),
                blocked,
                "dispatch at {t} threads"
            );
        }
    }
}

/// Reference for the tensor API: per-matrix fma chains over contiguous copies.
/// The products that run on the team of threads give the fma chain's bits at 1, 2, 3 and 8
/// threads: a blocked product whose A and B are packed up front in parallel jobs (several row
/// tiles, two K blocks of which the last is short), and a batch of small products computed
/// one per part.
#[test]
fn team_products_give_the_chain_bits_at_every_thread_count() {
    let (m, n, k) = (500, 100, 300);
    let (a, b) = (data::<f32>(m * k, 11), data::<f32>(k * n, 12));
    let want = fma_chain(m, n, k, &a, &b);
    let (ta, tb) = (
        Tensor::from_vec(a, &[m, k]).unwrap(),
        Tensor::from_vec(b, &[k, n]).unwrap(),
    );
    let (items, s) = (40, 64);
    let (ba, bb) = (
        data::<f32>(items * s * s, 13),
        data::<f32>(items * s * s, 14),
    );
    let bwant: Vec<f32> = (0..items)
        .flat_map(|i| {
            let r = i * s * s..(i + 1) * s * s;
            fma_chain(s, s, s, &ba[r.clone()], &bb[r])
        })
        .collect();
    let (tba, tbb) = (
        Tensor::from_vec(ba, &[items, s, s]).unwrap(),
        Tensor::from_vec(bb, &[items, s, s]).unwrap(),
    );
    for t in [1, 2, 3, 8] {
        let (got, bgot) = scope(true, false, || {
            with_num_threads(t, || (ta.matmul(&tb).unwrap(), tba.matmul(&tbb).unwrap()))
        });
        assert_eq!(
            got.to_vec::<f32>().unwrap(),
            want,
            "{m}x{n}x{k} at {t} threads"
        );
        assert_eq!(bgot.to_vec::<f32>().unwrap(), bwant, "batch at {t} threads");
    }
}

fn mm_ref(a: &Tensor, b: &Tensor) -> Vec<f64> {
    let (m, k) = (a.shape()[0], a.shape()[1]);
    let n = b.shape()[1];
    fma_chain(
        m,
        n,
        k,
        &a.to_vec::<f64>().unwrap(),
        &b.to_vec::<f64>().unwrap(),
    )
}

fn t64(shape: &[usize], seed: u64) -> Tensor {
    Tensor::from_vec(data::<f64>(shape.iter().product(), seed), shape).unwrap()
}

#[test]
fn matmul_shape_rules() {
    let v = t64(&[4], 1);
    let w = t64(&[4], 2);
    let m = t64(&[4, 3], 3);
    let l = t64(&[5, 4], 4);
    // 1-D · 1-D: a 0-d dot product.
    let d = v.matmul(&w).unwrap();
    assert_eq!(d.shape(), [] as [usize; 0]);
    let vr = v.reshape(&[1, 4]).unwrap();
    let wc = w.reshape(&[4, 1]).unwrap();
    assert_eq!(d.to_vec::<f64>().unwrap(), mm_ref(&vr, &wc));
    // 1-D · 2-D and 2-D · 1-D.
    let vm = v.matmul(&m).unwrap();
    assert_eq!(vm.shape(), [3]);
    assert_eq!(vm.to_vec::<f64>().unwrap(), mm_ref(&vr, &m));
    let lv = l.matmul(&v).unwrap();
    assert_eq!(lv.shape(), [5]);
    assert_eq!(
        lv.to_vec::<f64>().unwrap(),
        mm_ref(&l, &v.reshape(&[4, 1]).unwrap())
    );
    // Batched with broadcast batch dims: [2,1,3,4] · [5,4,2] -> [2,5,3,2].
    let a = t64(&[2, 1, 3, 4], 5);
    let b = t64(&[5, 4, 2], 6);
    let c = a.matmul(&b).unwrap();
    assert_eq!(c.shape(), [2, 5, 3, 2]);
    let cv = c.to_vec::<f64>().unwrap();
    for i in 0..2 {
        for j in 0..5 {
            let ai = a.narrow(0, i, 1).unwrap().reshape(&[3, 4]).unwrap();
            let bj = b.narrow(0, j, 1).unwrap().reshape(&[4, 2]).unwrap();
            let off = (i * 5 + j) * 6;
            assert_eq!(cv[off..off + 6], mm_ref(&ai, &bj)[..], "batch ({i},{j})");
        }
    }
    // Batched · 2-D folds the batch into rows; 1-D · batched; batched · 1-D.
    let x = t64(&[2, 3, 4], 7);
    let xm = x.matmul(&m).unwrap();
    assert_eq!(xm.shape(), [2, 3, 3]);
    assert_eq!(
        xm.to_vec::<f64>().unwrap(),
        mm_ref(&x.reshape(&[6, 4]).unwrap(), &m)
    );
    assert_eq!(v.matmul(&t64(&[2, 4, 3], 8)).unwrap().shape(), [2, 3]);
    assert_eq!(x.matmul(&v).unwrap().shape(), [2, 3]);
    // Empty dims.
    assert_eq!(t64(&[0, 4], 1).matmul(&m).unwrap().shape(), [0, 3]);
    let z = t64(&[3, 0], 1).matmul(&t64(&[0, 2], 1)).unwrap();
    assert_eq!(z.to_vec::<f64>().unwrap(), vec![0.0; 6]);
    assert_eq!(
        t64(&[0, 3, 4], 1).matmul(&t64(&[4, 2], 1)).unwrap().shape(),
        [0, 3, 2]
    );
}

#[test]
fn strided_operands_give_the_same_bits_as_contiguous_copies() {
    let a = t64(&[37, 21], 9); // used as aᵀ: [21, 37]
    let b = t64(&[19, 37], 10); // used as bᵀ: [37, 19]
    let at = a.transpose(0, 1).unwrap();
    let bt = b.transpose(0, 1).unwrap();
    assert!(!at.is_contiguous() && !bt.is_contiguous());
    let got = at.matmul(&bt).unwrap().to_vec::<f64>().unwrap();
    let want = at
        .contiguous()
        .matmul(&bt.contiguous())
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert_eq!(got, want);
    assert_eq!(got, mm_ref(&at.contiguous(), &bt.contiguous()));
    // A sliced view (offset + row stride larger than the width).
    let s = a.narrow(1, 3, 10).unwrap().narrow(0, 2, 30).unwrap();
    let w = t64(&[10, 6], 11);
    assert_eq!(
        s.matmul(&w).unwrap().to_vec::<f64>().unwrap(),
        mm_ref(&s.contiguous(), &w)
    );
}

#[test]
fn linear_is_x_weight_t_plus_bias() {
    let x = Tensor::from_vec(data::<f32>(2 * 3 * 5, 12), &[2, 3, 5]).unwrap();
    let w = Tensor::from_vec(data::<f32>(4 * 5, 13), &[4, 5]).unwrap();
    let bias = Tensor::from_vec(data::<f32>(4, 14), &[4]).unwrap();
    let y = x.linear(&w, Some(&bias)).unwrap();
    assert_eq!(y.shape(), [2, 3, 4]);
    let p = x
        .matmul(&w.transpose(0, 1).unwrap())
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let bv = bias.to_vec::<f32>().unwrap();
    let want: Vec<f32> = p.iter().enumerate().map(|(i, &v)| v + bv[i % 4]).collect();
    assert_eq!(y.to_vec::<f32>().unwrap(), want);
    assert_eq!(x.linear(&w, None).unwrap().to_vec::<f32>().unwrap(), p);
    // Errors.
    assert!(matches!(
        x.linear(&w, Some(&w)),
        Err(Error::ShapeMismatch { op: "linear", .. })
    ));
    let b64 = Tensor::from_vec(vec![0f64; 4], &[4]).unwrap();
    assert!(matches!(
        x.linear(&w, Some(&b64)),
        Err(Error::DType { op: "linear", .. })
    ));
    assert!(x.linear(&bias, None).is_err());
    assert!(
        x.linear(&Tensor::from_vec(vec![0f32; 12], &[4, 3]).unwrap(), None)
            .is_err()
    );
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let a = t64(&[3, 4], 1);
    let b = t64(&[5, 2], 2);
    assert!(matches!(
        a.matmul(&b),
        Err(Error::ShapeMismatch { op: "matmul", .. })
    ));
    let f = Tensor::from_vec(vec![0f32; 8], &[4, 2]).unwrap();
    assert!(matches!(
        a.matmul(&f),
        Err(Error::DType { op: "matmul", .. })
    ));
    let i = Tensor::from_vec(vec![0i64; 8], &[4, 2]).unwrap();
    assert!(matches!(
        a.matmul(&i),
        Err(Error::DType { op: "matmul", .. })
    ));
    assert!(a.matmul(&Tensor::scalar(1.0f64)).is_err());
    let x = t64(&[2, 3, 4], 3);
    let y = t64(&[3, 4, 2], 4);
    assert!(matches!(x.matmul(&y), Err(Error::ShapeMismatch { .. })));
    // Slice-level checks.
    let par = Par::new(2);
    let mut c = vec![0f32; 6];
    let s = vec![1f32; 6];
    assert!(gemm(2, 3, 2, &s[..3], (2, 1), &s, (3, 1), &mut c, (3, 1), &par).is_err());
    assert!(
        gemm(2, 3, 2, &s, (2, 1), &s, (3, 1), &mut c, (1, 1), &par).is_err(),
        "overlap"
    );
    assert!(gemm(2, 3, 2, &s, (2, 1), &s, (3, 1), &mut c, (3, 1), &par).is_ok());
    assert_eq!(c, vec![2.0; 6]);
}

#[test]
fn dispatch_uses_split_k_for_skinny_shapes_only_when_allowed() {
    let (m, n, k) = (4, 6, 5000);
    let a = data::<f32>(m * k, 15);
    let b = data::<f32>(k * n, 16);
    let ta = Tensor::from_vec(a.clone(), &[m, k]).unwrap();
    let tb = Tensor::from_vec(b.clone(), &[k, n]).unwrap();
    let chain = fma_chain(m, n, k, &a, &b);
    let fast = scope(false, false, || {
        with_num_threads(2, || ta.matmul(&tb).unwrap())
    });
    check_close(
        "nondeterministic dispatch",
        m,
        n,
        k,
        &a,
        &b,
        &fast.to_vec::<f32>().unwrap(),
    );
    let det = scope(true, false, || {
        with_num_threads(2, || ta.matmul(&tb).unwrap())
    });
    assert_eq!(
        det.to_vec::<f32>().unwrap(),
        chain,
        "deterministic mode: blocked kernel bits"
    );
    // The fixed-order split-K is thread-invariant but adds its partial products in range order.
    let fixed = (MATMUL.by_algo("matmul.splitk_fixed").unwrap().f)(&ta, &tb, &Par::new(2)).unwrap();
    check_close(
        "splitk_fixed",
        m,
        n,
        k,
        &a,
        &b,
        &fixed.to_vec::<f32>().unwrap(),
    );
}

/// Issue 13 (defects 7/8): a product whose output cannot be allocated (or whose size overflows
/// `usize`) is an out-of-memory error, never an abort or a panic.
#[test]
fn huge_matmul_outputs_are_errors() {
    let col = Tensor::zeros(&[1, 1], DType::F32).unwrap();
    let a = col.expand(&[1 << 31, 1]).unwrap();
    let b = col.expand(&[1, 1 << 31]).unwrap();
    let e = a.matmul(&b).unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
    // Beyond isize::MAX bytes: a batch of empty-k products (no input element) whose output
    // would have 2^60 elements.
    let a = Tensor::zeros(&[1 << 20, 1 << 20, 0], DType::F32).unwrap();
    let b = Tensor::zeros(&[1 << 20, 0, 1 << 20], DType::F32).unwrap();
    let e = a.matmul(&b).unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
}
