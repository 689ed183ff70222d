//! Property tests: views and broadcasting agree with index arithmetic done by hand, and bad
//! arguments are errors, never panics.

use lockstep_tensor::ops::elementwise::broadcast_shapes;
use lockstep_tensor::{DType, Tensor};
use proptest::prelude::*;

fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..5, 1..5)
}

fn iota(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec((0..n as i64).collect::<Vec<_>>(), shape).unwrap()
}

/// Row-major multi-index of flat position `i` in `shape`.
fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |a, (&i, &d)| a * d + i)
}

proptest! {
    #[test]
    fn permute_moves_elements_as_indexed(s in shape(), seed in any::<u64>()) {
        let n = s.len();
        let mut perm: Vec<usize> = (0..n).collect();
        // A seeded Fisher–Yates so each case is reproducible.
        let mut st = seed;
        for i in (1..n).rev() {
            st = st.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            perm.swap(i, (st >> 33) as usize % (i + 1));
        }
        let x = iota(&s);
        let p = x.permute(&perm.iter().map(|&d| d as isize).collect::<Vec<_>>()).unwrap();
        let out_shape: Vec<usize> = perm.iter().map(|&d| s[d]).collect();
        prop_assert_eq!(p.shape(), out_shape.as_slice());
        let v = p.to_vec::<i64>().unwrap();
        for (flat, &got) in v.iter().enumerate() {
            let oi = unravel(flat, &out_shape);
            let mut ii = vec![0; n];
            for (k, &d) in perm.iter().enumerate() {
                ii[d] = oi[k];
            }
            prop_assert_eq!(got as usize, ravel(&ii, &s));
        }
        // contiguous() and reshape of a permuted view copy the same values.
        prop_assert_eq!(p.contiguous().to_vec::<i64>().unwrap(), v.clone());
        prop_assert_eq!(p.reshape(&[-1]).unwrap().to_vec::<i64>().unwrap(), v);
    }

    #[test]
    fn narrow_selects_the_slice(s in shape(), d in 0usize..4, a in 0usize..5, l in 0usize..5) {
        let x = iota(&s);
        let d = d % s.len();
        let r = x.narrow(d as isize, a, l);
        if a + l > s[d] {
            prop_assert!(r.is_err());
        } else {
            let r = r.unwrap();
            let mut os = s.clone();
            os[d] = l;
            for (flat, &got) in r.to_vec::<i64>().unwrap().iter().enumerate() {
                let mut idx = unravel(flat, &os);
                idx[d] += a;
                prop_assert_eq!(got as usize, ravel(&idx, &s));
            }
        }
    }

    #[test]
    fn broadcasting_matches_manual_indexing(a in shape(), b in shape()) {
        let (x, y) = (iota(&a), iota(&b).mul_scalar(1000.0).unwrap());
        match broadcast_shapes("add", &a, &b) {
            Err(_) => prop_assert!(x.add(&y).is_err()),
            Ok(out) => {
                let z = x.add(&y).unwrap();
                prop_assert_eq!(z.shape(), out.as_slice());
                let (vx, vy) = (x.to_vec::<i64>().unwrap(), y.to_vec::<i64>().unwrap());
                for (flat, &got) in z.to_vec::<i64>().unwrap().iter().enumerate() {
                    let oi = unravel(flat, &out);
                    let pick = |s: &[usize]| {
                        let off = out.len() - s.len();
                        let idx: Vec<usize> = s.iter().enumerate().map(|(k, &d)| if d == 1 { 0 } else { oi[off + k] }).collect();
                        ravel(&idx, s)
                    };
                    prop_assert_eq!(got, vx[pick(&a)] + vy[pick(&b)]);
                }
            }
        }
    }

    #[test]
    fn bad_view_arguments_never_panic(
        s in shape(),
        dims in prop::collection::vec(-6isize..6, 0..6),
        sizes in prop::collection::vec(-3isize..9, 0..6),
        start in 0usize..9,
        len in 0usize..9,
    ) {
        let x = iota(&s);
        let r = std::panic::catch_unwind(|| {
            let _ = x.permute(&dims);
            let _ = x.view(&sizes);
            let _ = x.reshape(&sizes);
            let _ = x.expand(&sizes);
            for &d in &dims {
                let _ = x.narrow(d, start, len);
                let _ = x.squeeze(d);
                let _ = x.unsqueeze(d);
                let _ = x.transpose(d, 0);
                let _ = x.sum_dim(d, true);
                let _ = Tensor::cat(&[x.clone(), x.clone()], d);
                let _ = Tensor::stack(&[x.clone(), x.clone()], d);
            }
            let _ = x.add(&iota(&sizes.iter().map(|&v| v.unsigned_abs()).collect::<Vec<_>>()));
            let _ = Tensor::from_vec(vec![0f32; start], &s);
            let _ = Tensor::full(&[start, len], 1.0, DType::Bool);
        });
        prop_assert!(r.is_ok());
    }
}

#[test]
fn absurd_sizes_are_errors_not_panics() {
    use lockstep_tensor::ops::conv::Conv2dParams;
    use lockstep_tensor::ops::pool::Pool2d;
    let big = usize::MAX / 2;
    assert!(Tensor::zeros(&[big, 4], DType::F32).is_err());
    assert!(Tensor::arange(0.0, 1e300, 1.0, DType::F32).is_err());
    assert!(Tensor::randint(0, 5, &[big, 3], DType::I64, None).is_err());
    let x = Tensor::zeros(&[1, 1, 4, 4], DType::F32).unwrap();
    assert!(x.expand(&[isize::MAX, isize::MAX, 4, 4]).is_err());
    let w = Tensor::zeros(&[1, 1, 3, 3], DType::F32).unwrap();
    let huge = Conv2dParams {
        dilation: (big, 1),
        ..Conv2dParams::default()
    };
    assert!(x.conv2d(&w, None, huge).is_err());
    let pad = Conv2dParams {
        padding: (big, 0),
        ..Conv2dParams::default()
    };
    assert!(x.conv2d(&w, None, pad).is_err());
    let p = Pool2d {
        kernel: (big, 1),
        stride: (1, 1),
        padding: (big / 2, 0),
        dilation: (big, 1),
        ceil_mode: true,
    };
    assert!(x.max_pool2d(p).is_err());
}

/// Views of 64 Ki elements and more are copied by several threads: at 1, 2, 3 and 8 threads
/// the copy holds every element where index arithmetic puts it (unit-stride and strided last
/// dimensions, rows that do not fill the last piece, an offset).
#[test]
fn large_view_copies_are_the_same_at_every_thread_count() {
    use lockstep_tensor::threads::with_num_threads;
    let shape = [3usize, 37, 29, 41];
    let x = iota(&shape);
    let n: usize = shape.iter().product();
    let src = x.to_vec::<i64>().unwrap();
    for (perm, narrow) in [
        ([0usize, 2, 1, 3], false),
        ([3, 1, 0, 2], false),
        ([0, 2, 1, 3], true),
    ] {
        let mut v = x.permute(&perm.map(|d| d as isize)).unwrap();
        if narrow {
            v = v.narrow(1, 1, 27).unwrap();
        }
        let vs = v.shape().to_vec();
        let want: Vec<i64> = (0..vs.iter().product())
            .map(|i| {
                let idx = unravel(i, &vs);
                let mut orig = [0usize; 4];
                for (d, &p) in perm.iter().enumerate() {
                    orig[p] = idx[d] + usize::from(narrow && d == 1);
                }
                src[ravel(&orig, &shape)]
            })
            .collect();
        assert!(
            want.len() >= 1 << 16,
            "large enough to split: {} of {n}",
            want.len()
        );
        for threads in [1, 2, 3, 8] {
            let got = with_num_threads(threads, || v.contiguous().to_vec::<i64>().unwrap());
            assert!(
                got == want,
                "perm {perm:?} narrow {narrow} at {threads} threads"
            );
        }
    }
}
