//! nanoGPT's explicit causal self-attention from the fused `q, k, v` projection, as one
//! autograd op: the heads are strided views of the projection (no `chunk` copies), and the
//! gradient of all three comes back as one dense `[B, T, 3C]` tensor (no zero-padded pieces
//! added together). The products, the causal softmax and the dropout are the same tensor ops,
//! on the same shapes, as the composed graph's, so value and gradient keep its bits.

use crate::autograd::Var;
use lockstep_tensor::ops::matmul::is_skinny;
use lockstep_tensor::{DType, Result, Tensor};

/// The autograd op's name, in errors and in the graph.
const OP: &str = "causal_self_attention";

/// `q, k, v = qkv.chunk(3, 2)`, each split into `n_head` heads (`[B, nh, T, hd]`),
/// `att = softmax((q·kᵀ · scale).masked_fill(causal == 0, −∞))`, dropout on `att`
/// (`dropout_p` in training, its mask from the current dropout source of [`crate::rng`],
/// drawn exactly as `nn.Dropout` on `att` draws it), `y = att · v` with the heads merged back:
/// `[B, T, C]` for `qkv` `[B, T, 3C]`.
///
/// Bit for bit the value and the gradient of that graph composed of `chunk`, `reshape`,
/// `transpose`, `matmul`, [`causal_softmax`](super::causal_softmax) and `Dropout` (tested),
/// including a zero gradient element coming back as `+0.0` as the zero-padded pieces of
/// `chunk`'s backward make it; deterministic at any thread count, as those ops are. Runs as
/// the fused ops [`Tensor::causal_self_attention`] and its backward (head by head, about half
/// the products) wherever `matmul` would use its blocked kernel, as the composed ops else.
///
/// # Errors
/// `qkv` not 3-D or not float, its last dimension not a multiple of `3 · n_head`, `n_head`
/// 0, `dropout_p` outside `[0, 1]`; a failing product or allocation.
pub fn causal_self_attention(
    qkv: &Var,
    n_head: usize,
    scale: f64,
    dropout_p: f64,
    training: bool,
) -> Result<Var> {
    let [b, t, c, hd] =
        lockstep_tensor::ops::self_attention::qkv_dims(OP, qkv.shape(), qkv.dtype(), n_head)?;
    let x = qkv.data().try_contiguous()?;
    // The fused heads have the composed graph's bits wherever `matmul` runs its blocked
    // kernel on these shapes (split-K only for `hd ≥ 2048` and `hd ≥ 4·T`).
    if b > 0 && t > 0 && hd > 0 && !is_skinny(t, t, hd) {
        let mask =
            crate::rng::dropout_mask_like(&[b, n_head, t, t], x.dtype(), dropout_p, training)?;
        let (y, att) = x.causal_self_attention(n_head, scale, mask.as_ref())?;
        if !qkv.requires_grad() {
            return Ok(Var::constant(y));
        }
        return Ok(Var::from_op(OP, y, &[qkv], move |g| {
            let gx = g.causal_self_attention_backward(&x, &att, mask.as_ref(), n_head, scale)?;
            Ok(vec![Some(gx)])
        }));
    }
    composed(qkv, &x, [b, t, c], n_head, scale, dropout_p, training)
}

/// The composed ops, for the shapes the fused heads do not take.
fn composed(
    qkv: &Var,
    x: &Tensor,
    [b, t, c]: [usize; 3],
    n_head: usize,
    scale: f64,
    dropout_p: f64,
    training: bool,
) -> Result<Var> {
    let hd = c / n_head;
    // [B, T, 3, nh, hd] → [3, B, nh, T, hd]: piece `i` is `chunk(3, 2)[i]`'s heads, a view.
    let parts = x
        .view(&[b as isize, t as isize, 3, n_head as isize, hd as isize])?
        .permute(&[2, 0, 3, 1, 4])?;
    let piece = |i: usize| parts.narrow(0, i, 1)?.squeeze(0);
    let (q, k, v) = (piece(0)?, piece(1)?, piece(2)?);
    let kt = k.transpose(-2, -1)?;
    let att = q.matmul(&kt)?.causal_softmax(scale)?;
    let mask = crate::rng::dropout_mask_like(att.shape(), att.dtype(), dropout_p, training)?;
    let att_d = match &mask {
        Some(m) => att.mul(m)?,
        None => att.clone(),
    };
    let y = att_d
        .matmul(&v)?
        .transpose(1, 2)?
        .reshape(&[b as isize, t as isize, c as isize])?;
    if !qkv.requires_grad() {
        return Ok(Var::constant(y));
    }
    Ok(Var::from_op(OP, y, &[qkv], move |g| {
        // The composed graph's backward, op by op: the merged heads' gradient made dense,
        // the product with v, the dropout mask, the softmax, the product q·kᵀ.
        let gy = g
            .reshape(&[b as isize, t as isize, n_head as isize, hd as isize])?
            .transpose(1, 2)?
            .try_contiguous()?;
        let g_att_d = gy.matmul(&v.transpose(-1, -2)?)?;
        let gv = att_d.transpose(-1, -2)?.matmul(&gy)?;
        let g_att = match &mask {
            Some(m) => g_att_d.mul(m)?,
            None => g_att_d,
        };
        let gs = g_att.causal_softmax_backward(&att, scale)?;
        let gq = gs.matmul(&k)?;
        // k's gradient as `gsᵀ · q` rather than the composed graph's `(qᵀ · gs)ᵀ`: element
        // (j, d) is the same chain over i of the same products (an fma's two factors commute
        // exactly), so the same bits, already in q's layout for the merge.
        let gk = gs.transpose(-1, -2)?.matmul(&q)?;
        Ok(vec![Some(merge_heads([&gq, &gk, &gv], [b, t, c])?)])
    }))
}

/// The `[B, T, 3C]` gradient of `qkv` from q's, k's and v's `[B, nh, T, hd]` gradients,
/// each element `g + 0.0`: what adding the three zero-padded pieces of `chunk`'s backward
/// gives (a `-0.0` meets a `+0.0` padding zero).
fn merge_heads(pieces: [&Tensor; 3], [b, t, c]: [usize; 3]) -> Result<Tensor> {
    match pieces[0].dtype() {
        DType::F32 => merge::<f32>(pieces, [b, t, c]),
        _ => merge::<f64>(pieces, [b, t, c]),
    }
}

/// Token rows per piece of [`merge`]'s copy.
const MERGE_ROWS: usize = 64;

fn merge<T>(pieces: [&Tensor; 3], [b, t, c]: [usize; 3]) -> Result<Tensor>
where
    T: lockstep_tensor::Element + core::ops::Add<Output = T> + Default + Send + Sync,
{
    let (nh, hd) = (pieces[0].shape()[1], pieces[0].shape()[3]);
    let dense: Vec<Tensor> = pieces
        .iter()
        .map(|p| p.try_contiguous())
        .collect::<Result<_>>()?;
    let [q, k, v] = [0, 1, 2].map(|i| dense[i].data::<T>());
    let (q, k, v) = (q?, k?, v?);
    let n = b * t * 3 * c;
    let zero = T::default();
    assert_eq!(nh * hd, c, "heads × head size is the width");
    // A copy: rows of `3C` (one per token) in pieces on the team, whoever copies them.
    let chunk = (MERGE_ROWS * 3 * c).max(1);
    crate::ops::MERGE_HEADS.run(&[pieces[0], pieces[1], pieces[2]], |_, par| {
        let mut out = lockstep_rng::try_with_capacity::<T>("causal_self_attention", n)?;
        par.for_each_chunk_mut(&mut out.spare_capacity_mut()[..n], chunk, |p, dst| {
            for (i, row) in dst.chunks_mut(3 * c).enumerate() {
                let (bi, ti) = ((p * MERGE_ROWS + i) / t, (p * MERGE_ROWS + i) % t);
                let mut cells = row.iter_mut();
                for src in [q, k, v] {
                    for h in 0..nh {
                        let o = ((bi * nh + h) * t + ti) * hd;
                        // The source first: `zip` then stops without taking a cell.
                        for (&x, d) in src[o..o + hd].iter().zip(&mut cells) {
                            d.write(x + zero);
                        }
                    }
                }
            }
        });
        // SAFETY: the pieces cover all `n` elements, and each row wrote its `3C` (`nh · hd`
        // is `C`).
        unsafe { out.set_len(n) };
        Tensor::from_vec(out, &[b, t, 3 * c])
    })
}
