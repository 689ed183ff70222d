//! Issue 30 for the training layer: every op `lockstep_nn::builtin_ops()` lists (and the
//! `expand` and `dropout` of a `Var`), given huge expanded (zero-stride) views, returns `Ok` or
//! an error, never a panic; given small strided or expanded views, the bits it returns for a
//! contiguous copy of the same values.

use lockstep_nn::rnn::{Rnn, RnnConfig, RnnOutput};
use lockstep_nn::{Module, Var, builtin_ops, optim};
use lockstep_rng::Generator;
use lockstep_tensor::{Error, Result, Tensor};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};

type Prep<'a> = &'a dyn Fn(Tensor) -> Tensor;
type Run = fn(Prep) -> Result<Vec<Tensor>>;
type View = (&'static str, fn(Tensor) -> Tensor);

fn f(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|i| ((i * 37 + 11) % 23) as f32 * 0.07 - 0.73)
        .collect();
    Tensor::from_vec(v, shape).unwrap()
}

/// A recurrent layer of `mode` with parameters set from [`f`] (no draws), run forward and
/// backward on `x` (`[T, B, 3]`) and `h0` (`[1, B, 4]`): the output, `x`'s gradient and the
/// first weight's gradient.
fn recurrent(mode: &str, p: Prep) -> Result<Vec<Tensor>> {
    let cfg = RnnConfig::new(3, 4);
    let m = match mode {
        "lstm" => Rnn::lstm(cfg)?,
        "gru" => Rnn::gru(cfg)?,
        _ => Rnn::rnn(cfg)?,
    };
    for w in m.parameters() {
        w.set_data(f(w.shape()))?;
    }
    let x = Var::new(p(f(&[5, 2, 3])), true);
    let h0 = Var::new(p(f(&[1, 2, 4])), true);
    let c0 = Var::new(p(f(&[1, 2, 4])), false);
    let c0 = (mode == "lstm").then_some(&c0);
    let RnnOutput { output, .. } = m.forward_with_state(&x, Some(&h0), c0)?;
    output.sum()?.backward()?;
    let w0 = m.parameters()[0].grad();
    Ok(vec![output.data(), x.grad().unwrap(), w0.unwrap()])
}

/// Training-mode batch norm of `x` (`[4, 3, 2]`) with affine parameters and running
/// statistics, forward and backward: the output, `x`'s gradient and the running mean.
fn batch_norm(p: Prep) -> Result<Vec<Tensor>> {
    let x = Var::new(p(f(&[4, 3, 2])), true);
    let (rm, rv) = (Var::new(f(&[3]), false), Var::new(f(&[3]).abs()?, false));
    let (w, b) = (Var::new(f(&[3]), true), Var::new(f(&[3]), true));
    let y = lockstep_nn::functional::batch_norm(
        &x,
        Some(&rm),
        Some(&rv),
        Some(&w),
        Some(&b),
        true,
        0.1,
        1e-5,
    )?;
    y.sum()?.backward()?;
    Ok(vec![y.data(), x.grad().unwrap(), rm.data()])
}

/// LayerNorm of `x` (`[3, 4]`) over its last dimension with weight and bias, forward and
/// backward: the output, `x`'s gradient and the weight's.
fn layer_norm(p: Prep) -> Result<Vec<Tensor>> {
    let x = Var::new(p(f(&[3, 4])), true);
    let (w, b) = (Var::new(f(&[4]), true), Var::new(f(&[4]), true));
    let y = lockstep_nn::functional::layer_norm(&x, &[4], Some(&w), Some(&b), 1e-5)?;
    y.mul_scalar(1.5)?.sum()?.backward()?;
    Ok(vec![y.data(), x.grad().unwrap(), w.grad().unwrap()])
}

fn cases() -> Vec<(&'static str, Run)> {
    vec![
        ("get_total_norm", |p| {
            Ok(vec![optim::get_total_norm(
                &[p(f(&[3, 4])), p(f(&[5]))],
                2.0,
                false,
            )?])
        }),
        ("clip_grads_with_norm_", |p| {
            let v = Var::new(p(f(&[3, 4])), true);
            v.set_grad(Some(p(f(&[3, 4]))))?;
            optim::clip_grads_with_norm_(std::slice::from_ref(&v), 0.5, &Tensor::scalar(2f32))?;
            Ok(vec![v.grad().unwrap()])
        }),
        ("clip_grad_value_", |p| {
            let v = Var::new(p(f(&[3, 4])), true);
            v.set_grad(Some(p(f(&[3, 4]))))?;
            optim::clip_grad_value_(std::slice::from_ref(&v), 0.25)?;
            Ok(vec![v.grad().unwrap()])
        }),
        ("lstm_layer", |p| recurrent("lstm", p)),
        ("lstm_layer_backward", |p| recurrent("lstm", p)),
        ("lstm_input", |p| recurrent("lstm", p)),
        ("lstm_input_backward", |p| recurrent("lstm", p)),
        ("batch_norm", batch_norm),
        ("batch_norm_backward", batch_norm),
        ("layer_norm", layer_norm),
        ("layer_norm_backward", layer_norm),
        ("merge_heads", |p| {
            let qkv = Var::new(p(f(&[2, 3, 12])), true);
            let y = lockstep_nn::functional::causal_self_attention(&qkv, 2, 0.5, 0.0, false)?;
            y.sum()?.backward()?;
            Ok(vec![y.data(), qkv.grad().unwrap()])
        }),
        ("sgd", |p| {
            let w = Var::new(f(&[3, 4]), true);
            w.set_grad(Some(p(f(&[3, 4]))))?;
            let opts = optim::SgdOptions {
                lr: 0.1,
                momentum: 0.9,
                ..Default::default()
            };
            let mut sgd = optim::Sgd::new(vec![w.clone()], opts)?;
            optim::Optimizer::step(&mut sgd)?;
            Ok(vec![w.data()])
        }),
        ("adam", |p| {
            let w = Var::new(f(&[3, 4]), true);
            w.set_grad(Some(p(f(&[3, 4]))))?;
            let opts = optim::AdamOptions {
                lr: 0.1,
                amsgrad: true,
                ..Default::default()
            };
            let mut adam = optim::Adam::new(vec![w.clone()], opts)?;
            optim::Optimizer::step(&mut adam)?;
            optim::Optimizer::step(&mut adam)?;
            Ok(vec![w.data()])
        }),
        ("gru_layer", |p| recurrent("gru", p)),
        ("gru_layer_backward", |p| recurrent("gru", p)),
        ("rnn_layer", |p| recurrent("rnn", p)),
        ("rnn_layer_backward", |p| recurrent("rnn", p)),
        ("expand", |p| {
            let x = Var::new(p(f(&[3, 1])), true);
            let y = x.expand(&[3, 4])?;
            y.sum()?.backward()?;
            Ok(vec![y.data(), x.grad().unwrap()])
        }),
        ("masked_fill", |p| {
            let x = Var::new(p(f(&[3, 4])), true);
            let m = f(&[1, 4]).gt(&f(&[1, 4]).abs()?.mul_scalar(0.5)?)?;
            let y = x.masked_fill(&p(m), -1.5)?;
            y.sum()?.backward()?;
            Ok(vec![y.data(), x.grad().unwrap()])
        }),
        ("split", |p| {
            let x = Var::new(p(f(&[3, 5])), true);
            let parts = x.split(2, 1)?;
            parts[2]
                .mul_scalar(3.0)?
                .sum()?
                .add(&parts[0].sum()?)?
                .backward()?;
            Ok(vec![parts[1].data(), x.grad().unwrap()])
        }),
        ("dropout", |p| {
            let x = Var::new(p(f(&[3, 4])), true);
            let y = x.dropout(0.5, true, Some(&mut Generator::with_seed(30)))?;
            Ok(vec![y.data()])
        }),
    ]
}

#[test]
fn every_listed_op_has_a_case() {
    let have: Vec<&str> = cases().iter().map(|c| c.0).collect();
    let missing: Vec<&str> = builtin_ops()
        .iter()
        .map(|o| o.name)
        .filter(|n| !have.contains(n))
        .collect();
    assert!(missing.is_empty(), "ops without a case: {missing:?}");
}

fn bits(ts: &[Tensor]) -> Vec<(Vec<usize>, Vec<u64>)> {
    ts.iter()
        .map(|t| {
            let b = t.to_f64_vec().iter().map(|v| v.to_bits()).collect();
            (t.shape().to_vec(), b)
        })
        .collect()
}

/// Strided (every row followed by a gap) and expanded (first row repeated) views give the
/// contiguous copy's bits.
#[test]
fn small_views_give_the_contiguous_bits() {
    let views: [View; 2] = [
        ("strided", |x| {
            let w = x.shape()[x.ndim() - 1];
            Tensor::cat(&[x.clone(), x], -1)
                .unwrap()
                .narrow(-1, 0, w)
                .unwrap()
        }),
        ("expanded", |x| {
            match x.shape().iter().position(|&s| s > 1) {
                Some(d) => {
                    let shape: Vec<isize> = x.shape().iter().map(|&s| s as isize).collect();
                    x.narrow(d as isize, 0, 1).unwrap().expand(&shape).unwrap()
                }
                None => x,
            }
        }),
    ];
    let mut n = 0;
    for (op, run) in cases() {
        for (vname, view) in views {
            let got = run(&|x| view(x)).map(|v| bits(&v));
            let want = run(&|x| view(x).contiguous()).map(|v| bits(&v));
            assert_eq!(got, want, "{op} on {vname} views");
            n += 1;
        }
    }
    assert_eq!(n, 2 * cases().len());
}

/// Each tensor input in turn, then all of them, stretched to 2^46 elements along each of its
/// dimensions: `Ok` or an error, never a panic.
#[test]
fn huge_expanded_views_are_errors_not_panics() {
    const HUGE: isize = 1 << 46;
    let (mut ok, mut oom, mut other, mut panics) = (0, 0, 0, Vec::new());
    for (op, run) in cases() {
        let count = Cell::new(0usize);
        let _ = run(&|x| {
            count.set(count.get() + 1);
            x
        });
        let n = count.get();
        for which in 0..=n {
            for d in 0..3 {
                let (seen, stretched) = (Cell::new(0usize), Cell::new(false));
                let prep = |x: Tensor| {
                    let i = seen.replace(seen.get() + 1);
                    if (which == n || which == i) && d < x.ndim() {
                        stretched.set(true);
                        let mut shape: Vec<isize> = x.shape().iter().map(|&s| s as isize).collect();
                        shape[d] = HUGE;
                        return x.narrow(d as isize, 0, 1).unwrap().expand(&shape).unwrap();
                    }
                    x
                };
                let r = catch_unwind(AssertUnwindSafe(|| run(&prep)));
                if !stretched.get() {
                    continue;
                }
                match r {
                    Ok(Ok(_)) => ok += 1,
                    Ok(Err(Error::OutOfMemory { .. })) => oom += 1,
                    Ok(Err(_)) => other += 1,
                    Err(_) => panics.push(format!("{op}: input {which} of {n}, dim {d}")),
                }
            }
        }
    }
    eprintln!("huge expanded views: ok {ok}, out of memory {oom}, other errors {other}");
    assert!(panics.is_empty(), "{panics:#?}");
    assert!(oom > 20, "{oom}");
}
