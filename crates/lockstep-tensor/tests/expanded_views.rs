//! Issue 30: every op the dispatch table lists, given huge expanded (zero-stride) views, returns
//! `Ok` or an error (out of memory, or a shape error where the huge size makes the shapes
//! disagree), never a panic; given small strided, offset, transposed or expanded views, it
//! returns the bits it returns for a contiguous copy of the same values.
//!
//! Each op of `dispatch::builtin_ops()` has at least one case below (a test checks that), so a
//! new op without one fails here. A case builds small contiguous inputs and passes every tensor
//! input through `p`, which turns it into the view under test.

use lockstep_rng::Generator;
use lockstep_tensor::dispatch::builtin_ops;
use lockstep_tensor::ops::conv::Conv2dParams;
use lockstep_tensor::ops::index::BagMode;
use lockstep_tensor::ops::pool::Pool2d;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Error, Result, Tensor};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};

type Prep<'a> = &'a dyn Fn(Tensor) -> Tensor;
type Run = fn(Prep) -> Result<Vec<Tensor>>;

/// Deterministic values in about `[-2, 2]`, none zero (so `div` and `log` stay finite where
/// used on [`pos`]).
fn f(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|i| ((i * 37 + 11) % 23) as f32 * 0.17 - 1.93)
        .collect();
    Tensor::from_vec(v, shape).unwrap()
}

/// Positive values (inputs of `log`, `sqrt`, `pow`, probabilities).
fn pos(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|i| ((i * 29 + 5) % 19) as f32 * 0.05 + 0.03)
        .collect();
    Tensor::from_vec(v, shape).unwrap()
}

fn i64s(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn one(t: Result<Tensor>) -> Result<Vec<Tensor>> {
    t.map(|t| vec![t])
}

fn two(t: Result<(Tensor, Tensor)>) -> Result<Vec<Tensor>> {
    t.map(|(a, b)| vec![a, b])
}

fn gen_() -> Generator {
    Generator::with_seed(30)
}

/// `(op name as dispatch lists it, a call of it)`.
/// The fused recurrent layers' kernels on `[T = 5, B = 2]` with `H = 16` (`g`·H gate columns),
/// forward then backward with a ones gradient: the value and every gradient.
fn recurrent(kind: &str, p: Prep) -> Result<Vec<Tensor>> {
    use lockstep_tensor::ops::recurrent::{CellKind, LstmLayer, RecurrentLayer};
    let (hd, order) = (16, [0usize, 1, 2, 3, 4]);
    let g = match kind {
        "lstm" => 4,
        "gru" => 3,
        _ => 1,
    };
    let (xw, w, b, h0) = (
        p(f(&[5, 2, g * hd])),
        p(pos(&[g * hd, hd])),
        p(f(&[g * hd])),
        p(f(&[2, hd])),
    );
    let mut out = Vec::new();
    if kind == "lstm" {
        let c0 = p(pos(&[2, hd]));
        let (y, run) = LstmLayer::forward(&xw, &w, Some(&b), &h0, &c0, &order)?;
        let grads = run.backward(&Tensor::ones(y.shape(), DType::F32)?, true, true)?;
        out.push(y);
        out.extend(grads.into_iter().flatten());
    } else {
        let cell = if kind == "gru" {
            CellKind::Gru
        } else {
            CellKind::Tanh
        };
        let (y, run) = RecurrentLayer::forward(cell, &xw, &w, Some(&b), &h0, &order)?;
        let grads = run.backward(&Tensor::ones(y.shape(), DType::F32)?, true)?;
        out.push(y);
        out.extend(grads.into_iter().flatten());
    }
    Ok(out)
}

/// An LSTM layer's input projection (`x` `[5, 2, 8]`, `W` `[64, 8]`: whole tiles for AVX2 and
/// AVX-512), forward and backward; off x86-64 the inputs do not fit and the op refuses.
fn lstm_input(p: Prep) -> Result<Vec<Tensor>> {
    use lockstep_tensor::ops::recurrent::{lstm_input, lstm_input_backward};
    let (x, w, b) = (p(f(&[5, 2, 8])), p(pos(&[64, 8])), p(f(&[64])));
    let Some(y) = lstm_input(&x, &w, Some(&b))? else {
        return Ok(vec![]);
    };
    let gy = p(f(&[5, 2, 64]));
    let mut out = vec![y];
    out.extend(
        lstm_input_backward(&gy, &x, &w, true, true, true, true)?
            .into_iter()
            .flatten(),
    );
    Ok(out)
}

/// Batch normalisation's kernels on `x` `[4, 3, 2]` with weight, bias and running statistics,
/// in training (batch statistics) and evaluation (running ones), forward and backward.
fn batch_norm(p: Prep) -> Result<Vec<Tensor>> {
    use lockstep_tensor::ops::norm::BatchNorm;
    let (x, w, b) = (p(f(&[4, 3, 2])), p(pos(&[3])), p(f(&[3])));
    let (rm, rv) = (p(f(&[3])), p(pos(&[3])));
    let mut out = Vec::new();
    for training in [true, false] {
        let (y, _, run) =
            BatchNorm::forward(&x, Some((&rm, &rv)), Some(&w), Some(&b), training, 1e-5)?;
        out.extend(run.backward(&p(f(&[4, 3, 2])))?.into_iter().flatten());
        out.push(y);
    }
    Ok(out)
}

fn cases() -> Vec<(&'static str, Run)> {
    let c: Vec<(&'static str, Run)> = vec![
        ("sum", |p| one(p(f(&[3, 4])).sum())),
        ("sum", |p| one(p(i64s(&[1, -2, 3, 4, 5, 6], &[2, 3])).sum())),
        ("sum_dim", |p| one(p(f(&[3, 4])).sum_dim(1, false))),
        ("sum_dim", |p| one(p(f(&[3, 4, 2])).sum_dim(0, true))),
        ("sum_dim0_blocks", |p| one(p(f(&[7, 4])).sum_dim0_blocks(3))),
        ("mean", |p| one(p(f(&[3, 4])).mean())),
        ("mean", |p| one(p(f(&[3, 4])).mean_dim(0, false))),
        ("var", |p| one(p(f(&[3, 4])).var(1.0))),
        ("var", |p| one(p(f(&[3, 4])).var_dim(1, 0.0, true))),
        ("std", |p| one(p(f(&[3, 4])).std(1.0))),
        ("std", |p| one(p(f(&[3, 4])).std_dim(0, 1.0, false))),
        ("max", |p| one(p(f(&[3, 4])).max())),
        ("max", |p| two(p(f(&[3, 4])).max_dim(1, false))),
        ("max", |p| one(p(f(&[3, 4])).argmax(None, false))),
        ("max", |p| one(p(f(&[3, 4])).argmax(Some(0), true))),
        ("min", |p| one(p(f(&[3, 4])).min())),
        ("min", |p| two(p(f(&[3, 4])).min_dim(0, true))),
        ("min", |p| one(p(f(&[3, 4])).argmin(Some(1), false))),
        ("logsumexp", |p| one(p(f(&[3, 4])).logsumexp(1, false))),
        ("softmax", |p| one(p(f(&[3, 4])).softmax(1))),
        ("softmax", |p| one(p(f(&[3, 4])).softmax(0))),
        ("log_softmax", |p| one(p(f(&[3, 4])).log_softmax(-1))),
        ("log_softmax", |p| one(p(f(&[3, 4])).log_softmax(0))),
        ("cumsum", |p| one(p(f(&[3, 4])).cumsum(1))),
        ("cumsum", |p| one(p(f(&[3, 4])).cumsum(0))),
        ("matmul", |p| one(p(f(&[3, 4])).matmul(&p(pos(&[4, 5]))))),
        ("matmul_k_blocks", |p| {
            one(p(f(&[3, 7])).matmul_k_blocks(&p(pos(&[7, 5])), 3))
        }),
        ("matmul", |p| {
            one(p(f(&[2, 3, 4])).matmul(&p(pos(&[2, 4, 5]))))
        }),
        ("matmul", |p| {
            one(p(f(&[2, 3, 4])).matmul(&p(pos(&[1, 4, 5]))))
        }),
        ("matmul", |p| one(p(f(&[2, 3, 4])).matmul(&p(pos(&[4, 5]))))),
        ("matmul", |p| one(p(f(&[4])).matmul(&p(pos(&[4, 5]))))),
        ("matmul", |p| one(p(f(&[3, 4])).matmul(&p(pos(&[4]))))),
        ("matmul", |p| {
            one(p(f(&[3, 4])).linear(&p(pos(&[5, 4])), Some(&p(f(&[5])))))
        }),
        ("lstm_layer", |p| recurrent("lstm", p)),
        ("lstm_layer_backward", |p| recurrent("lstm", p)),
        ("gru_layer", |p| recurrent("gru", p)),
        ("gru_layer_backward", |p| recurrent("gru", p)),
        ("rnn_layer", |p| recurrent("rnn", p)),
        ("rnn_layer_backward", |p| recurrent("rnn", p)),
        ("lstm_input", lstm_input),
        ("batch_norm", batch_norm),
        ("batch_norm_backward", batch_norm),
        ("lstm_input_backward", lstm_input),
        ("conv2d", |p| {
            one(p(f(&[2, 3, 6, 6])).conv2d(
                &p(pos(&[4, 3, 3, 3])),
                Some(&p(f(&[4]))),
                Conv2dParams::default(),
            ))
        }),
        ("conv2d_input_grad", |p| {
            one(Tensor::conv2d_backward_input(
                &p(f(&[2, 4, 4, 4])),
                &[2, 3, 6, 6],
                &p(pos(&[4, 3, 3, 3])),
                Conv2dParams::default(),
            ))
        }),
        ("conv2d_weight_grad", |p| {
            one(Tensor::conv2d_backward_weight(
                &p(f(&[2, 4, 4, 4])),
                &p(pos(&[2, 3, 6, 6])),
                &[4, 3, 3, 3],
                Conv2dParams::default(),
            ))
        }),
        ("conv2d_weight_grad_blocks", |p| {
            one(Tensor::conv2d_backward_weight_blocks(
                &p(f(&[3, 4, 4, 4])),
                &p(pos(&[3, 3, 6, 6])),
                &[4, 3, 3, 3],
                Conv2dParams::default(),
                2,
            ))
        }),
        ("conv_transpose2d", |p| {
            let params = Conv2dParams {
                stride: (2, 2),
                padding: (1, 1),
                ..Conv2dParams::default()
            };
            one(p(f(&[2, 3, 4, 4])).conv_transpose2d(
                &p(pos(&[3, 4, 3, 3])),
                Some(&p(f(&[4]))),
                params,
                (1, 1),
            ))
        }),
        ("index_add", |p| {
            one(p(f(&[5, 3])).index_add(0, &p(i64s(&[1, 3, 1], &[3])), &p(pos(&[3, 3]))))
        }),
        ("index_put", |p| {
            one(p(f(&[5, 3])).index_put(&[p(i64s(&[4, 0, 2], &[3]))], &p(pos(&[3, 3])), false))
        }),
        ("index_put_accumulate", |p| {
            one(p(f(&[5, 3])).index_put(&[p(i64s(&[4, 0, 4], &[3]))], &p(pos(&[3, 3])), true))
        }),
        ("scatter_add", |p| {
            let idx = i64s(&[0, 3, 2, 2, 1, 0], &[3, 2]);
            one(p(f(&[3, 4])).scatter_add(1, &p(idx), &p(pos(&[3, 2]))))
        }),
        ("embedding_backward", |p| {
            one(Tensor::embedding_backward(
                &p(f(&[4, 3])),
                &p(i64s(&[5, 1, 5, 0], &[4])),
                6,
            ))
        }),
        ("embedding_bag", |p| {
            one(p(f(&[6, 3])).embedding_bag(
                &p(i64s(&[5, 1, 5, 0, 2], &[5])),
                &p(i64s(&[0, 2], &[2])),
                BagMode::Mean,
            ))
        }),
        ("embedding_bag", |p| {
            one(p(f(&[6, 3])).embedding_bag(
                &p(i64s(&[5, 1, 5, 0, 2], &[5])),
                &p(i64s(&[0, 3], &[2])),
                BagMode::Max,
            ))
        }),
        ("index_select", |p| {
            one(p(f(&[4, 3])).index_select(0, &p(i64s(&[3, 0, 3], &[3]))))
        }),
        ("index_select", |p| {
            one(p(f(&[4, 3])).index_select(1, &p(i64s(&[2, 1], &[2]))))
        }),
        ("gather", |p| {
            one(p(f(&[3, 4])).gather(1, &p(i64s(&[0, 3, 2, 2, 1, 0], &[3, 2]))))
        }),
        ("bincount", |p| {
            one(p(i64s(&[1, 4, 1, 0, 6, 2, 1], &[7])).bincount(None, 0))
        }),
        ("bincount", |p| {
            one(p(i64s(&[1, 4, 1, 0, 6, 2, 1], &[7])).bincount(Some(&p(pos(&[7]))), 9))
        }),
        ("histc", |p| one(p(f(&[3, 4])).histc(5, -2.0, 2.0))),
        ("embedding", |p| {
            one(p(f(&[6, 3])).embedding(&p(i64s(&[5, 1, 0, 5], &[2, 2]))))
        }),
        ("max_pool2d", |p| {
            two(p(f(&[2, 3, 6, 6])).max_pool2d(Pool2d::new(2)))
        }),
        ("max_pool2d_backward", |p| {
            let (_, ix) = f(&[2, 3, 6, 6]).max_pool2d(Pool2d::new(2)).unwrap();
            one(Tensor::max_pool2d_backward(
                &p(f(&[2, 3, 3, 3])),
                &p(ix),
                &[2, 3, 6, 6],
            ))
        }),
        ("avg_pool2d", |p| {
            one(p(f(&[2, 3, 6, 6])).avg_pool2d(Pool2d::new(2), true))
        }),
        ("avg_pool2d_backward", |p| {
            one(Tensor::avg_pool2d_backward(
                &p(f(&[2, 3, 3, 3])),
                &[2, 3, 6, 6],
                Pool2d::new(2),
                true,
            ))
        }),
        ("adaptive_avg_pool2d", |p| {
            one(p(f(&[2, 3, 6, 6])).adaptive_avg_pool2d((4, 4)))
        }),
        ("adaptive_avg_pool2d_backward", |p| {
            one(Tensor::adaptive_avg_pool2d_backward(
                &p(f(&[2, 3, 4, 4])),
                &[2, 3, 6, 6],
            ))
        }),
        ("random", |p| {
            one(p(f(&[3, 4])).dropout(0.5, true, Some(&mut gen_())))
        }),
        ("random", |p| {
            one(Tensor::bernoulli(&p(pos(&[3, 4])), Some(&mut gen_())))
        }),
        ("random", |p| {
            one(Tensor::multinomial(
                &p(pos(&[2, 5])),
                3,
                true,
                Some(&mut gen_()),
            ))
        }),
        ("random", |p| {
            one(Tensor::multinomial(
                &p(pos(&[5])),
                4,
                false,
                Some(&mut gen_()),
            ))
        }),
        ("cat", |p| {
            one(Tensor::cat(&[p(f(&[2, 3])), p(pos(&[4, 3]))], 0))
        }),
        ("cat", |p| {
            one(Tensor::stack(&[p(f(&[2, 3])), p(pos(&[2, 3]))], 1))
        }),
        ("add", |p| one(p(f(&[3, 4])).add(&p(pos(&[3, 4]))))),
        ("add", |p| one(p(f(&[3, 4])).add(&p(pos(&[4]))))),
        ("add", |p| {
            one(p(i64s(&[1, 2, 3, 4, 5, 6], &[2, 3])).add(&p(i64s(&[7, 8, 9], &[3]))))
        }),
        ("add_", |p| {
            let mut x = p(f(&[3, 4]));
            x.add_(&p(pos(&[3, 4])), 1.0)?;
            Ok(vec![x])
        }),
        ("pad_dim", |p| one(p(f(&[3, 4])).pad_dim(1, 2, 7))),
        // The in-place ops write into a dense tensor; their other operands are the views.
        ("add_alpha_", |p| {
            let mut x = f(&[3, 4]);
            x.add_(&p(pos(&[3, 4])), -0.3)?;
            Ok(vec![x])
        }),
        ("sub_", |p| {
            let mut x = f(&[3, 4]);
            x.sub_(&p(pos(&[3, 4])), 0.7)?;
            Ok(vec![x])
        }),
        ("mul_", |p| {
            let mut x = f(&[3, 4]);
            x.mul_(&p(pos(&[3, 4])))?;
            Ok(vec![x])
        }),
        ("div_", |p| {
            let mut x = f(&[3, 4]);
            x.div_(&p(pos(&[3, 4])))?;
            Ok(vec![x])
        }),
        ("addcmul_", |p| {
            let mut x = f(&[3, 4]);
            x.addcmul_(&p(pos(&[3, 4])), &p(f(&[3, 4])), 0.5)?;
            Ok(vec![x])
        }),
        ("addcdiv_", |p| {
            let mut x = f(&[3, 4]);
            x.addcdiv_(&p(f(&[3, 4])), &p(pos(&[3, 4])), 0.5)?;
            Ok(vec![x])
        }),
        ("lerp_", |p| {
            let mut x = f(&[3, 4]);
            x.lerp_tensor_(&p(pos(&[3, 4])), &p(pos(&[3, 4])))?;
            Ok(vec![x])
        }),
        ("clamp_", |p| {
            let mut x = p(f(&[3, 4]));
            x.clamp_(Some(-0.5), Some(0.5))?;
            Ok(vec![x])
        }),
        ("copy_", |p| {
            let mut x = f(&[3, 4]);
            x.copy_(&p(pos(&[3, 4])))?;
            Ok(vec![x])
        }),
        ("fill_", |p| {
            let mut x = p(f(&[3, 4]));
            x.fill_(0.25)?;
            Ok(vec![x])
        }),
        ("sub", |p| one(p(f(&[3, 4])).sub(&p(pos(&[3, 4]))))),
        ("mul", |p| one(p(f(&[3, 4])).mul(&p(pos(&[3, 4]))))),
        ("div", |p| one(p(f(&[3, 4])).div(&p(pos(&[3, 4]))))),
        ("maximum", |p| one(p(f(&[3, 4])).maximum(&p(pos(&[3, 4]))))),
        ("minimum", |p| one(p(f(&[3, 4])).minimum(&p(pos(&[3, 4]))))),
        ("eq", |p| one(p(f(&[3, 4])).eq(&p(f(&[3, 4]).abs()?)))),
        ("ne", |p| one(p(f(&[3, 4])).ne(&p(f(&[3, 4]).abs()?)))),
        ("lt", |p| one(p(f(&[3, 4])).lt(&p(pos(&[3, 4]))))),
        ("le", |p| one(p(f(&[3, 4])).le(&p(pos(&[3, 4]))))),
        ("gt", |p| one(p(f(&[3, 4])).gt(&p(pos(&[3, 4]))))),
        ("ge", |p| one(p(f(&[3, 4])).ge(&p(pos(&[3, 4]))))),
        // Issue 28: promotion and scalar forms of the comparisons, masking, triangles, topk.
        ("eq", |p| one(p(f(&[3, 4])).eq_scalar(-0.22))),
        ("lt", |p| {
            one(p(i64s(&[1, -2, 3, 0, 5, 1], &[2, 3])).lt(&p(f(&[2, 3]))))
        }),
        ("ge", |p| one(p(f(&[3, 4])).ge(&p(Tensor::scalar(0.5f64))))),
        ("masked_fill", |p| {
            let m = f(&[3, 4]).gt(&pos(&[3, 4]))?;
            one(p(f(&[3, 4])).masked_fill(&p(m), -1.5))
        }),
        ("masked_fill", |p| {
            let m = f(&[1, 4]).gt(&pos(&[1, 4]))?;
            one(p(f(&[3, 4])).masked_fill(&p(m), f64::NEG_INFINITY))
        }),
        ("tril", |p| one(p(f(&[3, 4])).tril(0))),
        ("tril", |p| one(p(f(&[2, 3, 4])).tril(-1))),
        ("triu", |p| one(p(f(&[3, 4])).triu(1))),
        ("triu", |p| one(p(f(&[2, 4, 3])).triu(-2))),
        ("topk", |p| two(p(f(&[3, 4])).topk(2, 1, true, true))),
        ("topk", |p| two(p(f(&[3, 4])).topk(3, 0, false, false))),
        ("topk", |p| two(p(f(&[2, 3, 4])).topk(4, -1, true, false))),
        ("causal_attention", |p| {
            let (q, k, v) = (f(&[1, 2, 3, 4]), pos(&[1, 2, 3, 4]), f(&[1, 2, 3, 4]));
            one(p(q).causal_attention(&p(k), &p(v), 0, 0.5))
        }),
        ("causal_attention", |p| {
            let (q, k, v) = (f(&[2, 1, 1, 9]), pos(&[2, 1, 5, 9]), f(&[2, 1, 5, 9]));
            one(p(q).causal_attention(&p(k), &p(v), 3, 0.3))
        }),
        ("causal_self_attention", |p| {
            let m = pos(&[2, 2, 5, 5]);
            two(p(f(&[2, 5, 12])).causal_self_attention(2, 0.5, Some(&p(m))))
        }),
        ("causal_self_attention_backward", |p| {
            let (qkv, m) = (f(&[2, 5, 12]), pos(&[2, 2, 5, 5]));
            let (_, att) = qkv.causal_self_attention(2, 0.5, Some(&m))?;
            one(p(f(&[2, 5, 4])).causal_self_attention_backward(
                &p(qkv),
                &p(att),
                Some(&p(m)),
                2,
                0.5,
            ))
        }),
        ("causal_softmax", |p| {
            one(p(f(&[2, 4, 4])).causal_softmax(0.5))
        }),
        (
            "causal_softmax",
            |p| one(p(f(&[3, 5])).causal_softmax(-0.3)),
        ),
        ("causal_softmax_backward", |p| {
            let y = f(&[2, 4, 4]).causal_softmax(0.5)?;
            one(p(f(&[2, 4, 4])).causal_softmax_backward(&p(y), 0.5))
        }),
        ("where", |p| {
            let cond = f(&[3, 4]).gt(&pos(&[3, 4]))?;
            one(Tensor::where_(&p(cond), &p(f(&[3, 4])), &p(pos(&[3, 4]))))
        }),
        ("exp", |p| one(p(f(&[3, 4])).exp())),
        ("log", |p| one(p(pos(&[3, 4])).log())),
        ("sqrt", |p| one(p(pos(&[3, 4])).sqrt())),
        ("sigmoid", |p| one(p(f(&[3, 4])).sigmoid())),
        ("tanh", |p| one(p(f(&[3, 4])).tanh())),
        ("gelu", |p| one(p(f(&[3, 4])).gelu())),
        ("gelu", |p| one(p(f(&[3, 4])).gelu_tanh())),
        ("relu", |p| one(p(f(&[3, 4])).relu())),
        ("neg", |p| one(p(f(&[3, 4])).neg())),
        ("abs", |p| one(p(f(&[3, 4])).abs())),
        (
            "clamp",
            |p| one(p(f(&[3, 4])).clamp(Some(-1.0), Some(0.75))),
        ),
        ("pow", |p| one(p(pos(&[3, 4])).pow(&p(f(&[3, 4]))))),
        ("pow", |p| one(p(pos(&[3, 4])).pow_scalar(1.5))),
        ("relu_backward", |p| {
            one(Tensor::relu_backward(&p(pos(&[3, 4])), &p(f(&[3, 4]))))
        }),
        ("tanh_backward", |p| {
            one(Tensor::tanh_backward(&p(pos(&[3, 4])), &p(f(&[3, 4]))))
        }),
        ("sigmoid_backward", |p| {
            one(Tensor::sigmoid_backward(&p(pos(&[3, 4])), &p(f(&[3, 4]))))
        }),
        ("gelu_backward", |p| {
            one(p(f(&[3, 4])).gelu_derivative(false))
        }),
        ("leaky_relu", |p| one(p(f(&[3, 4])).leaky_relu(0.2))),
        ("leaky_relu_backward", |p| {
            one(Tensor::leaky_relu_backward(
                &p(pos(&[3, 4])),
                &p(f(&[3, 4])),
                0.2,
            ))
        }),
        ("lstm_cell", |p| {
            let (hy, cy, saved) = Tensor::lstm_cell(
                &p(f(&[3, 8])),
                &p(pos(&[3, 8])),
                &p(f(&[3, 2])),
                Some((&p(f(&[8])), &p(f(&[8])))),
            )?;
            Ok(vec![hy, cy, saved])
        }),
        ("lstm_cell_backward", |p| {
            let (dz, dc) = Tensor::lstm_cell_backward(
                Some(&p(f(&[3, 2]))),
                Some(&p(f(&[3, 2]))),
                &p(pos(&[3, 10])),
                &p(f(&[3, 2])),
                true,
            )?;
            Ok(vec![dz, dc.expect("asked for")])
        }),
        (
            "gelu_backward",
            |p| one(p(f(&[3, 4])).gelu_derivative(true)),
        ),
        ("sqrt_backward", |p| {
            one(Tensor::sqrt_backward(&p(f(&[3, 4])), &p(pos(&[3, 4]))))
        }),
        // `reshape` is a view op outside dispatch, but copies a non-contiguous input.
        ("reshape", |p| one(p(f(&[3, 4])).reshape(&[-1]))),
    ];
    c
}

/// Cases whose values depend on the input's memory layout by design, so only the huge sweep
/// runs them: an in-place draw fills a dense permuted tensor in memory order, as PyTorch's
/// `normal_` does.
fn layout_dependent_cases() -> Vec<(&'static str, Run)> {
    vec![("random", |p| {
        let mut x = p(f(&[3, 4]));
        x.normal_(0.5, 2.0, Some(&mut gen_()))?;
        Ok(vec![x])
    })]
}

/// The names the sweep must cover: every op dispatch lists, and `reshape`.
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

/// A named way to turn an input into a view (`None` where it would be the input itself).
type View = (&'static str, fn(Tensor) -> Option<Tensor>);

/// The views a case's inputs are turned into; the reference run gets each view's contiguous
/// copy.
fn views() -> Vec<View> {
    vec![
        // Contiguous but from a nonzero storage offset.
        ("offset", |x| {
            if x.ndim() == 0 || x.shape()[0] == 0 {
                return None;
            }
            let n = x.shape()[0];
            let c = Tensor::cat(&[x.narrow(0, 0, 1).unwrap(), x], 0).unwrap();
            Some(c.narrow(0, 1, n).unwrap())
        }),
        // Every row followed by a gap: the rows' stride is twice their length.
        ("strided", |x| {
            if x.ndim() == 0 {
                return None;
            }
            let w = x.shape()[x.ndim() - 1];
            let c = Tensor::cat(&[x.clone(), x], -1).unwrap();
            Some(c.narrow(-1, 0, w).unwrap())
        }),
        // Column-major storage.
        ("transposed", |x| {
            if x.ndim() < 2 {
                return None;
            }
            let rev: Vec<isize> = (0..x.ndim() as isize).rev().collect();
            let t = x.permute(&rev).unwrap().contiguous();
            Some(t.permute(&rev).unwrap())
        }),
        // The first row repeated (stride 0) along the first dimension longer than 1.
        ("expanded", |x| {
            let d = x.shape().iter().position(|&s| s > 1)?;
            let shape: Vec<isize> = x.shape().iter().map(|&s| s as isize).collect();
            Some(x.narrow(d as isize, 0, 1).unwrap().expand(&shape).unwrap())
        }),
        // One element broadcast to the whole shape (every stride 0).
        ("broadcast", |x| {
            if x.numel() <= 1 {
                return None;
            }
            let mut e = x.clone();
            for d in 0..x.ndim() {
                e = e.narrow(d as isize, 0, 1).unwrap();
            }
            let shape: Vec<isize> = x.shape().iter().map(|&s| s as isize).collect();
            Some(e.expand(&shape).unwrap())
        }),
    ]
}

/// Shape, dtype and the bits of every element (through f64, exact for every dtype used here).
fn fingerprint(ts: &[Tensor]) -> Vec<(Vec<usize>, DType, Vec<u64>)> {
    ts.iter()
        .map(|t| {
            let bits = t.to_f64_vec().iter().map(|v| v.to_bits()).collect();
            (t.shape().to_vec(), t.dtype(), bits)
        })
        .collect()
}

fn panic_text(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Small views: the op's outputs (or its error) are those for the contiguous copy, bit for bit,
/// at 1 and 3 threads.
#[test]
fn small_views_give_the_contiguous_bits() {
    let mut compared = 0;
    let mut failures = Vec::new();
    for (op, run) in cases() {
        for (vname, view) in views() {
            let as_view = |x: Tensor| view(x.clone()).unwrap_or(x);
            let as_copy = |x: Tensor| view(x.clone()).map_or(x, |v| v.contiguous());
            for threads in [1, 3] {
                let got =
                    with_num_threads(threads, || catch_unwind(AssertUnwindSafe(|| run(&as_view))));
                let want = with_num_threads(threads, || run(&as_copy));
                let got = match got {
                    Ok(r) => r,
                    Err(e) => {
                        failures.push(format!(
                            "{op} on {vname} views panicked: {}",
                            panic_text(&*e)
                        ));
                        continue;
                    }
                };
                match (&got, &want) {
                    (Ok(g), Ok(w)) if fingerprint(g) == fingerprint(w) => {}
                    (Err(g), Err(w)) if g == w => {}
                    _ => failures.push(format!(
                        "{op} on {vname} views, {threads} threads: {:?} vs contiguous {:?}",
                        got.as_ref().map(|v| fingerprint(v)),
                        want.as_ref().map(|v| fingerprint(v))
                    )),
                }
                compared += 1;
            }
        }
    }
    eprintln!("small views: {compared} runs compared with the contiguous copy");
    assert!(
        failures.is_empty(),
        "{} of {compared}:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(compared > 400, "{compared} comparisons");
}

const HUGE: usize = 1 << 46;

/// `x` with dimension `d` stretched to [`HUGE`] by a zero stride (`None` if `x` has no such
/// dimension).
fn huge(x: &Tensor, d: usize) -> Option<Tensor> {
    if d >= x.ndim() {
        return None;
    }
    let mut shape: Vec<isize> = x.shape().iter().map(|&s| s as isize).collect();
    shape[d] = HUGE as isize;
    Some(x.narrow(d as isize, 0, 1).unwrap().expand(&shape).unwrap())
}

/// Outcomes of the huge-view sweep.
#[derive(Default, Debug)]
struct Tally {
    ok: usize,
    out_of_memory: usize,
    other_error: usize,
    panics: Vec<String>,
}

/// Huge views: each tensor input of each case in turn, then all of them at once, stretched
/// to 2^46 elements along each of its dimensions (2^48 bytes and more: no allocator can give
/// that, whatever the overcommit policy, and a failed `try_reserve` touches no memory).
/// Every outcome is `Ok` or an error; no op panics.
#[test]
fn huge_expanded_views_are_errors_not_panics() {
    let mut t = Tally::default();
    let trace = std::env::var_os("EXPANDED_VIEWS_TRACE").is_some();
    for (op, run) in cases().into_iter().chain(layout_dependent_cases()) {
        // How many tensor inputs the case has.
        let count = Cell::new(0usize);
        let _ = run(&|x| {
            count.set(count.get() + 1);
            x
        });
        let n = count.get();
        for which in 0..=n {
            // Stretching both operands of a product can make the inner dimension 2^46 long:
            // `matmul` reads strided operands in place and would do 2^46 products per output
            // element (work, not a failure), so that combination is not run.
            if op == "matmul" && which == n {
                continue;
            }
            for d in 0..4 {
                if trace {
                    eprintln!("{op}: input {which} of {n}, dim {d}");
                }
                let seen = Cell::new(0usize);
                let stretched = Cell::new(false);
                let prep = |x: Tensor| {
                    let i = seen.get();
                    seen.set(i + 1);
                    if (which == n || which == i)
                        && let Some(h) = huge(&x, d)
                    {
                        stretched.set(true);
                        return h;
                    }
                    x
                };
                let r = catch_unwind(AssertUnwindSafe(|| run(&prep)));
                if !stretched.get() {
                    continue;
                }
                match r {
                    Ok(Ok(_)) => t.ok += 1,
                    Ok(Err(Error::OutOfMemory { .. })) => t.out_of_memory += 1,
                    Ok(Err(_)) => t.other_error += 1,
                    Err(e) => t.panics.push(format!(
                        "{op}: input {} stretched along dim {d}: {}",
                        if which == n {
                            "all".to_string()
                        } else {
                            which.to_string()
                        },
                        panic_text(&*e)
                    )),
                }
            }
        }
    }
    eprintln!("huge expanded views: {t:?}");
    assert!(
        t.panics.is_empty(),
        "{} panics:\n{}",
        t.panics.len(),
        t.panics.join("\n")
    );
    assert!(t.out_of_memory > 100, "{t:?}");
}

/// The ops issue 30 saw panic with `contiguous: out of memory` on a huge expanded view: each is
/// now an [`Error::OutOfMemory`] naming the op (PyTorch raises a catchable error for most of
/// them; it computes `sum` and `reshape(-1)`, which lockstep would have to copy first).
#[test]
fn the_ops_of_issue_30_are_out_of_memory_errors() {
    let h = HUGE as isize;
    let e = Tensor::from_vec(vec![1f32], &[1])
        .unwrap()
        .expand(&[h])
        .unwrap();
    let e2 = Tensor::from_vec(vec![0.25f32, 0.75], &[1, 2])
        .unwrap()
        .expand(&[h, 2])
        .unwrap();
    let idx = i64s(&[0], &[1]);
    let mut g = gen_();
    let calls: Vec<(&str, Result<Tensor>)> = vec![
        ("reshape", e.reshape(&[-1])),
        ("sum", e.sum()),
        // `mean` is `sum` divided by the count, and `argmax` the index half of `max`: the error
        // names the op that ran.
        ("sum", e.mean()),
        ("var", e.var(1.0)),
        ("max", e.max()),
        ("max", e.argmax(None, false)),
        ("sum_dim", e2.sum_dim(0, false)),
        ("softmax", e2.softmax(0)),
        ("log_softmax", e2.log_softmax(1)),
        ("cumsum", e.cumsum(0)),
        ("index_select", e.index_select(0, &idx)),
        ("gather", e.gather(0, &idx)),
        ("histc", e.histc(4, 0.0, 1.0)),
        ("dropout", e.dropout(0.5, true, Some(&mut g))),
        (
            "multinomial",
            Tensor::multinomial(&e2, 1, true, Some(&mut g)),
        ),
        (
            "matmul",
            Tensor::from_vec(vec![1f32; 4], &[1, 2, 2])
                .unwrap()
                .expand(&[h, 2, 2])
                .unwrap()
                .matmul(&f(&[1, 2, 2])),
        ),
    ];
    let mut wrong = Vec::new();
    for (want, r) in calls {
        match r {
            Err(Error::OutOfMemory { op, bytes }) if op == want && bytes >= HUGE as u128 => {}
            r => wrong.push(format!("{want}: {:?}", r.map(|t| t.shape().to_vec()))),
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert_eq!(
        g.get_state(),
        gen_().get_state(),
        "a refused op draws nothing"
    );
}
