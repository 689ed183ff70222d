//! Every elementwise op, every pooling op (forward and backward), `embedding`, `sum_dim` and
//! `index_put` without accumulate reach their kernel through `Op::select`: each can be pinned
//! (an unknown algorithm is an error), exempted, is listed by `builtin_ops()` and is traced under
//! its own name. Also the broadcasting kernels against a plain reference at 1, 2, 3 and 8
//! threads, and huge sizes refused with an error instead of a panic or an abort.

use lockstep_tensor::autotune::with_algorithm;
use lockstep_tensor::deterministic::{allow_nondeterministic, scope};
use lockstep_tensor::dispatch::builtin_ops;
use lockstep_tensor::ops::pool::Pool2d;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Error, Result, Tensor, trace};

fn f32s(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape).unwrap()
}

fn ramp(n: usize, shape: &[usize]) -> Tensor {
    let v: Vec<f32> = (0..n)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0)
        .collect();
    f32s(&v, shape)
}

type Call = Box<dyn Fn() -> Result<Tensor>>;

/// `(op name, algorithm, a call that runs it once)` for every newly routed op.
fn cases() -> Vec<(&'static str, &'static str, Call)> {
    let a = ramp(6, &[2, 3]);
    let b = ramp(3, &[3]);
    let pos = a.abs().unwrap().add_scalar(0.5).unwrap();
    let m = a.gt(&b).unwrap();
    let x4 = ramp(32, &[1, 2, 4, 4]);
    let (mx, idx) = x4.max_pool2d(Pool2d::new(2)).unwrap();
    let g4 = mx.clone();
    let w = ramp(12, &[4, 3]);
    let tok = Tensor::from_vec(vec![1i64, 3, 1], &[3]).unwrap();
    let c = |f: Box<dyn Fn() -> Result<Tensor>>| f;
    let mut v: Vec<(&'static str, &'static str, Call)> = Vec::new();
    macro_rules! bin {
        ($($name:literal => $m:ident),*) => {$({
            let (a, b) = (a.clone(), b.clone());
            v.push(($name, concat!($name, ".chunked"), c(Box::new(move || a.$m(&b)))));
        })*};
    }
    bin!("add" => add, "sub" => sub, "mul" => mul, "div" => div, "maximum" => maximum,
         "minimum" => minimum, "eq" => eq, "ne" => ne, "lt" => lt, "le" => le, "gt" => gt,
         "ge" => ge);
    macro_rules! un {
        ($($name:literal => $m:ident),*) => {$({
            let a = pos.clone();
            v.push(($name, concat!($name, ".chunked"), c(Box::new(move || a.$m()))));
        })*};
    }
    un!("exp" => exp, "log" => log, "sqrt" => sqrt, "sigmoid" => sigmoid, "tanh" => tanh,
        "gelu" => gelu, "relu" => relu, "neg" => neg, "abs" => abs);
    let p = pos.clone();
    v.push(("gelu", "gelu.chunked", Box::new(move || p.gelu_tanh())));
    let p = pos.clone();
    v.push((
        "clamp",
        "clamp.chunked",
        Box::new(move || p.clamp(Some(0.7), Some(2.0))),
    ));
    let p = pos.clone();
    v.push(("pow", "pow.chunked", Box::new(move || p.pow_scalar(1.5))));
    let (p, q) = (pos.clone(), b.clone());
    v.push(("pow", "pow.chunked", Box::new(move || p.pow(&q.abs()?))));
    let (mm, p, q) = (m.clone(), a.clone(), b.clone());
    v.push((
        "where",
        "where.chunked",
        Box::new(move || Tensor::where_(&mm, &p, &q)),
    ));
    let (p, q) = (a.clone(), b.clone());
    v.push((
        "add_",
        "add_.chunked",
        Box::new(move || {
            let mut t = p.clone();
            t.add_(&q, 1.0)?;
            Ok(t)
        }),
    ));
    macro_rules! back {
        ($($name:literal => $m:ident),*) => {$({
            let (g, y) = (a.clone(), pos.clone());
            v.push(($name, concat!($name, ".chunked"), c(Box::new(move || Tensor::$m(&g, &y)))));
        })*};
    }
    back!("relu_backward" => relu_backward, "tanh_backward" => tanh_backward,
          "sigmoid_backward" => sigmoid_backward, "sqrt_backward" => sqrt_backward);
    let p = a.clone();
    v.push((
        "gelu_backward",
        "gelu_backward.chunked",
        Box::new(move || p.gelu_derivative(false)),
    ));
    let p = x4.clone();
    v.push((
        "max_pool2d",
        "max_pool2d.per_plane",
        Box::new(move || Ok(p.max_pool2d(Pool2d::new(2))?.0)),
    ));
    let (g, i) = (g4.clone(), idx.clone());
    v.push((
        "max_pool2d_backward",
        "max_pool2d_backward.per_plane",
        Box::new(move || Tensor::max_pool2d_backward(&g, &i, &[1, 2, 4, 4])),
    ));
    let p = x4.clone();
    v.push((
        "avg_pool2d",
        "avg_pool2d.per_plane",
        Box::new(move || p.avg_pool2d(Pool2d::new(2), true)),
    ));
    let g = g4.clone();
    v.push((
        "avg_pool2d_backward",
        "avg_pool2d_backward.per_plane",
        Box::new(move || Tensor::avg_pool2d_backward(&g, &[1, 2, 4, 4], Pool2d::new(2), true)),
    ));
    let p = x4.clone();
    v.push((
        "adaptive_avg_pool2d",
        "adaptive_avg_pool2d.per_plane",
        Box::new(move || p.adaptive_avg_pool2d((3, 2))),
    ));
    let g = ramp(12, &[1, 2, 3, 2]);
    v.push((
        "adaptive_avg_pool2d_backward",
        "adaptive_avg_pool2d_backward.per_plane",
        Box::new(move || Tensor::adaptive_avg_pool2d_backward(&g, &[1, 2, 4, 4])),
    ));
    let (ww, t) = (w.clone(), tok.clone());
    v.push((
        "embedding",
        "embedding.row_copy",
        Box::new(move || ww.embedding(&t)),
    ));
    let p = a.clone();
    v.push((
        "sum_dim",
        lockstep_tensor::ops::reduce::SUM_DIM.impls[0].algo,
        Box::new(move || p.sum_dim(0, false)),
    ));
    let (ww, t) = (w.clone(), Tensor::from_vec(vec![2i64, 0], &[2]).unwrap());
    v.push((
        "index_put",
        lockstep_tensor::ops::index::INDEX_PUT.impls[0].algo,
        Box::new(move || ww.index_put(std::slice::from_ref(&t), &ramp(6, &[2, 3]), false)),
    ));
    v
}

#[test]
fn every_routed_op_is_listed_pinned_exempted_and_traced() {
    let listed = builtin_ops();
    for (name, algo, call) in cases() {
        let info = listed
            .iter()
            .find(|o| o.name == name && o.impls.iter().any(|(a, _)| *a == algo));
        assert!(info.is_some(), "{name} / {algo} missing from builtin_ops()");
        let plain = call().unwrap();
        // Traced under its own name, with the algorithm dispatch chose.
        let (r, recs) = trace::capture(|| call().unwrap());
        assert_eq!(r.to_vec::<f32>().ok(), plain.to_vec::<f32>().ok(), "{name}");
        assert!(
            recs.iter().any(|x| x.op == name && x.algo == algo),
            "{name}: no {algo} record in {:?}",
            recs.iter().map(|r| (&r.op, &r.algo)).collect::<Vec<_>>()
        );
        // Pinned: its own algorithm runs; a misspelt one is an error naming the op.
        assert!(
            with_algorithm(algo, &call).is_ok(),
            "{name} pinned to {algo}"
        );
        let bogus: &'static str = Box::leak(format!("{name}.no_such_kernel").into_boxed_str());
        match with_algorithm(bogus, &call) {
            Err(Error::InvalidArgument { op, arg, reason }) => {
                assert_eq!((op, arg), (name, "algorithm"), "{reason}");
                assert!(reason.contains(bogus), "{reason}");
            }
            other => panic!("{name}: pin {bogus} gave {other:?}"),
        }
        // Deterministic mode, with and without an exemption for the op.
        scope(true, false, || {
            assert!(call().is_ok(), "{name} in deterministic mode");
            allow_nondeterministic(name, || assert!(call().is_ok(), "{name} exempted"));
        });
    }
}

#[test]
fn a_pin_of_the_accumulating_index_put_does_not_break_the_plain_one() {
    let w = ramp(12, &[4, 3]);
    let t = [Tensor::from_vec(vec![2i64, 0], &[2]).unwrap()];
    let v = ramp(6, &[2, 3]);
    let r = with_algorithm("index_put.dest_partitioned", || {
        (w.index_put(&t, &v, false), w.index_put(&t, &v, true))
    });
    assert!(r.0.is_ok() && r.1.is_ok());
}

/// The broadcast result computed one element at a time from its multi-index.
fn reference(a: &Tensor, b: &Tensor, f: impl Fn(f32, f32) -> f32) -> Vec<f32> {
    let shape =
        lockstep_tensor::ops::elementwise::broadcast_shapes("t", a.shape(), b.shape()).unwrap();
    let n: usize = shape.iter().product();
    let (va, vb) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    let at = |t: &Tensor, v: &[f32], idx: &[usize]| {
        let s = t.shape();
        let mut off = 0;
        for (k, &d) in s.iter().enumerate() {
            let i = idx[idx.len() - s.len() + k];
            off = off * d + if d == 1 { 0 } else { i };
        }
        v[off]
    };
    (0..n)
        .map(|mut l| {
            let mut idx = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                idx[d] = l % shape[d];
                l /= shape[d];
            }
            f(at(a, &va, &idx), at(b, &vb, &idx))
        })
        .collect()
}

#[test]
fn broadcasting_matches_a_reference_at_1_2_3_8_threads() {
    let shapes: &[(&[usize], &[usize])] = &[
        (&[300, 1, 70], &[1, 200, 1]),
        (&[7, 300, 40], &[40]),
        (&[7, 1, 40], &[7, 300, 1]),
        (&[1], &[50_000]),
        (&[50_000, 1], &[1, 1]),
        (&[3, 2, 1, 5], &[2, 7, 1]),
        (&[], &[4]),
        (&[0, 3], &[3]),
    ];
    for &(sa, sb) in shapes {
        let (na, nb): (usize, usize) = (sa.iter().product(), sb.iter().product());
        let (a, b) = (ramp(na, sa), ramp(nb, sb).mul_scalar(0.3).unwrap());
        let want = reference(&a, &b, |x, y| x * y + 0.25);
        let one = with_num_threads(1, || a.mul(&b).unwrap().add_scalar(0.25).unwrap());
        assert_eq!(one.to_vec::<f32>().unwrap(), want, "{sa:?} {sb:?}");
        let want_sub = reference(&a, &b, |x, y| x - y);
        let want_where = reference(&a, &b, |x, y| if x > y { x } else { y });
        for t in [1, 2, 3, 8] {
            let r = with_num_threads(t, || a.mul(&b).unwrap().add_scalar(0.25).unwrap());
            assert_eq!(r.to_vec::<f32>().unwrap(), want, "{sa:?} {sb:?} at {t}");
            let s = with_num_threads(t, || a.sub(&b).unwrap());
            assert_eq!(
                s.to_vec::<f32>().unwrap(),
                want_sub,
                "sub {sa:?} {sb:?} at {t}"
            );
            let w = with_num_threads(t, || Tensor::where_(&a.gt(&b)?, &a, &b)).unwrap();
            assert_eq!(w.to_vec::<f32>().unwrap(), want_where, "where at {t}");
            // In place: `a` broadcast to itself plus `b` where `b` fits inside `a`'s shape.
            if let Ok(shape) = lockstep_tensor::ops::elementwise::broadcast_shapes("t", sa, sb)
                && shape == sa
            {
                let mut d = a.clone();
                with_num_threads(t, || d.add_(&b, 1.0)).unwrap();
                let want_add = reference(&a, &b, |x, y| x + y);
                assert_eq!(d.to_vec::<f32>().unwrap(), want_add, "add_ at {t}");
            }
        }
    }
}

#[test]
fn unary_and_pool_kernels_are_thread_invariant() {
    let x = ramp(3 * 5 * 37 * 41, &[3, 5, 37, 41]);
    let run = || {
        let (m, i) = x.max_pool2d(Pool2d::new(3)).unwrap();
        vec![
            x.tanh().unwrap(),
            x.gelu().unwrap(),
            x.sigmoid().unwrap(),
            x.abs().unwrap().log().unwrap(),
            x.exp().unwrap(),
            x.gelu_derivative(true).unwrap(),
            m.clone(),
            Tensor::max_pool2d_backward(&m, &i, x.shape()).unwrap(),
            x.avg_pool2d(Pool2d::new(3), false).unwrap(),
            x.adaptive_avg_pool2d((7, 9)).unwrap(),
            Tensor::adaptive_avg_pool2d_backward(&m, x.shape()).unwrap(),
        ]
    };
    let one = with_num_threads(1, run);
    for t in [2, 3, 8] {
        let r = with_num_threads(t, run);
        for (k, (p, q)) in one.iter().zip(&r).enumerate() {
            let bits = |t: &Tensor| {
                t.to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect::<Vec<_>>()
            };
            assert_eq!(bits(p), bits(q), "kernel {k} at {t} threads");
        }
    }
}

#[test]
fn add_in_place_copies_shared_storage_and_checks_shapes() {
    let a = f32s(&[1., 2., 3., 4.], &[2, 2]);
    let mut b = a.clone();
    b.add_(&f32s(&[10., 20.], &[2]), 1.0).unwrap();
    assert_eq!(b.to_vec::<f32>().unwrap(), [11., 22., 13., 24.]);
    assert_eq!(
        a.to_vec::<f32>().unwrap(),
        [1., 2., 3., 4.],
        "a is not touched"
    );
    let mut t = a.transpose(0, 1).unwrap();
    t.add_(&f32s(&[1.], &[1]), 1.0).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), [2., 4., 3., 5.]);
    let mut c = f32s(&[1., 2.], &[2]);
    assert!(matches!(
        c.add_(&a, 1.0),
        Err(Error::ShapeMismatch { op: "add_", .. })
    ));
    assert!(
        c.add_(&Tensor::from_vec(vec![1i64], &[1]).unwrap(), 1.0)
            .is_err()
    );
}

#[test]
fn huge_sizes_are_errors_not_panics() {
    // issue 13 defect 8: "capacity overflow" panics.
    let x = Tensor::zeros(&[1, 1, 2, 2], DType::F32).unwrap();
    let e = x.adaptive_avg_pool2d((1 << 31, 1 << 31)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OutOfMemory {
                op: "adaptive_avg_pool2d",
                ..
            }
        ),
        "{e}"
    );
    let g = Tensor::zeros(&[1, 2], DType::F32).unwrap();
    let i = Tensor::from_vec(vec![0i64], &[1]).unwrap();
    let e = Tensor::embedding_backward(&g, &i, 1 << 60).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OutOfMemory {
                op: "embedding_backward",
                ..
            }
        ),
        "{e}"
    );
    let g1 = Tensor::zeros(&[1, 1, 1, 1], DType::F32).unwrap();
    let e = Tensor::adaptive_avg_pool2d_backward(&g1, &[1, 1, 1 << 40, 1 << 40]).unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
    let ix = Tensor::zeros(&[1, 1, 1, 1], DType::I64).unwrap();
    let e = Tensor::max_pool2d_backward(&g1, &ix, &[1, 1, 1 << 40, 1 << 40]).unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
    let e = Tensor::avg_pool2d_backward(&g1, &[1, 1, 1 << 40, 1 << 40], Pool2d::new(1 << 40), true)
        .unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
    // A broadcast far larger than its inputs, and a huge expanded view (read in place, never
    // copied: the output's allocation is what fails, with an error).
    let one = Tensor::zeros(&[1], DType::F32).unwrap();
    let a = one.expand(&[1 << 31, 1]).unwrap();
    let b = one.expand(&[1, 1 << 40]).unwrap();
    let e = a.add(&b).unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { op: "add", .. }), "{e}");
    let e = one.expand(&[1 << 44]).unwrap().exp().unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { op: "exp", .. }), "{e}");
    let e = Tensor::where_(&one.gt(&one).unwrap(), &a, &b).unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
}
