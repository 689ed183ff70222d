//! `conv_transpose2d` (`F.conv_transpose2d`): the transposed convolution is the input gradient
//! of the convolution whose weight it shares, so it runs that gradient's kernels
//! (`conv2d_input_grad`'s GEMM + col2im, or Winograd where allowed) under its own op name, and
//! adds the bias. Its own backward needs no new kernel: the input's gradient is `conv2d` of the
//! output gradient, the weight's is `conv2d_weight_grad` with the roles of input and output
//! gradient swapped (see `lockstep_nn::functional::conv_transpose2d`).
//!
//! | op | implementations (algorithm id, guarantee) |
//! |---|---|
//! | `conv_transpose2d` | `conv_transpose2d.gemm_col2im` (thread-invariant), `conv_transpose2d.winograd_f4x3` (3×3, stride 1: thread-invariant, reduced accuracy, only where allowed) |

use super::{
    Conv2dParams, Geometry, InputGradFn, f32_data, input_grad_gemm, run, winograd,
    winograd_or_first,
};
use crate::error::{Error, Result};
use crate::op::{Guarantee, Impl, Op};
use crate::{Tensor, invalid};

/// `conv_transpose2d`: the transposed convolution (the kernels of `conv2d_input_grad`).
pub static CONV_TRANSPOSE2D: Op<InputGradFn> = Op {
    name: "conv_transpose2d",
    impls: &[
        Impl {
            algo: "conv_transpose2d.gemm_col2im",
            guarantee: Guarantee::ThreadInvariant,
            f: input_grad_gemm,
        },
        Impl {
            algo: "conv_transpose2d.winograd_f4x3",
            guarantee: Guarantee::ThreadInvariantReducedAccuracy,
            f: winograd::input_grad,
        },
    ],
};

/// The output size of one dimension: `(i − 1)·s − 2·p + d·(k − 1) + op + 1`, or `None` if it
/// is not positive or overflows.
fn out_size(i: usize, s: usize, p: usize, d: usize, k: usize, op: usize) -> Option<usize> {
    let pos = (i.checked_sub(1)?)
        .checked_mul(s)?
        .checked_add(d.checked_mul(k.checked_sub(1)?)?)?
        .checked_add(op)?
        .checked_add(1)?;
    pos.checked_sub(p.checked_mul(2)?).filter(|&o| o > 0)
}

impl Tensor {
    /// `F.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups,
    /// dilation)` for f32 NCHW input `[N, C_in, H, W]` and weight `[C_in, C_out/groups, kH,
    /// kW]` (PyTorch's layout for transposed weights): the output is `[N, C_out, H', W']` with
    /// `H' = (H − 1)·sH − 2·pH + dH·(kH − 1) + opH + 1`. Computed as the input gradient of the
    /// convolution with the same weight and `p` (PyTorch's definition), by that gradient's
    /// kernels: thread-invariant, the same bits at any thread count.
    ///
    /// # Errors
    /// Non-f32 or non-4-D operands, a weight whose first dimension is not `C_in`, channels not
    /// divisible by `groups`, zero stride/dilation/kernel, `output_padding` not smaller than the
    /// stride, an output size that is not positive, a bias that is not `[C_out]`.
    pub fn conv_transpose2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        p: Conv2dParams,
        output_padding: (usize, usize),
    ) -> Result<Tensor> {
        const OP: &str = "conv_transpose2d";
        let &[n, cin, h, w] = self.shape() else {
            return Err(invalid(
                OP,
                "input",
                format!("expected (N, C_in, H, W), got {:?}", self.shape()),
            ));
        };
        let &[wc, cg, kh, kw] = weight.shape() else {
            return Err(invalid(
                OP,
                "weight",
                format!(
                    "expected (C_in, C_out/groups, kH, kW), got {:?}",
                    weight.shape()
                ),
            ));
        };
        if wc != cin {
            return Err(invalid(
                OP,
                "weight",
                format!(
                    "expected a weight of shape ({cin}, C_out/groups, kH, kW) for an input of shape {:?} (C_in = {cin}), got {:?}",
                    self.shape(),
                    weight.shape()
                ),
            ));
        }
        let g = p.groups;
        if g == 0 || cin % g != 0 {
            return Err(invalid(
                OP,
                "groups",
                format!("groups={g} must divide C_in={cin}"),
            ));
        }
        let (sh, sw) = p.stride;
        let (dh, dw) = p.dilation;
        if sh == 0 || sw == 0 || dh == 0 || dw == 0 {
            return Err(invalid(
                OP,
                "stride",
                format!(
                    "stride {:?} and dilation {:?} must be positive",
                    p.stride, p.dilation
                ),
            ));
        }
        if output_padding.0 >= sh || output_padding.1 >= sw {
            return Err(invalid(
                OP,
                "output_padding",
                format!(
                    "output padding {output_padding:?} must be smaller than the stride {:?}",
                    p.stride
                ),
            ));
        }
        let cout = cg
            .checked_mul(g)
            .ok_or_else(|| invalid(OP, "weight", format!("{:?} is too large", weight.shape())))?;
        let (ho, wo) = match (
            out_size(h, sh, p.padding.0, dh, kh, output_padding.0),
            out_size(w, sw, p.padding.1, dw, kw, output_padding.1),
        ) {
            (Some(a), Some(b)) => (a, b),
            _ => {
                return Err(invalid(
                    OP,
                    "input",
                    format!(
                        "the output of an input {:?} with kernel ({kh}, {kw}), stride {:?}, padding {:?}, dilation {:?} and output padding {output_padding:?} would be empty",
                        self.shape(),
                        p.stride,
                        p.padding,
                        p.dilation
                    ),
                ));
            }
        };
        // The convolution this is the input gradient of: input [N, C_out, H', W'], output
        // [N, C_in, H, W] (as output_padding < stride, its output size is H exactly).
        let out_shape = [n, cout, ho, wo];
        let geo = Geometry::new(OP, &out_shape, weight.shape(), p)?;
        if (geo.oh, geo.ow) != (h, w) {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: self.shape().to_vec(),
                rhs: vec![n, cin, geo.oh, geo.ow],
            });
        }
        let b = match bias {
            Some(b) if b.shape() != [cout] => {
                return Err(Error::ShapeMismatch {
                    op: OP,
                    lhs: b.shape().to_vec(),
                    rhs: vec![cout],
                });
            }
            Some(b) => Some(b.contiguous_for(OP)?),
            None => None,
        };
        let (x, wt) = (self.contiguous_for(OP)?, weight.contiguous_for(OP)?);
        let (xs, ws) = (f32_data(OP, "input", &x)?, f32_data(OP, "weight", &wt)?);
        let bs = match &b {
            Some(b) => Some(f32_data(OP, "bias", b)?),
            None => None,
        };
        let mut inputs = vec![self, weight];
        inputs.extend(bias);
        let plane = ho * wo;
        run(
            &CONV_TRANSPOSE2D,
            &geo,
            &inputs,
            &out_shape,
            &|i| i.algo != "conv_transpose2d.winograd_f4x3" || winograd::applicable(&geo),
            &|c| {
                winograd_or_first(
                    c,
                    &geo,
                    "conv_transpose2d.winograd_f4x3",
                    winograd::preferred,
                )
            },
            |f, out, par| {
                f(&geo, xs, ws, out, par)?;
                // The bias is added before the output is traced: the trace holds the result.
                if let Some(bs) = bs {
                    for (k, chunk) in out.chunks_mut(plane.max(1)).enumerate() {
                        let v = bs[k % cout];
                        chunk.iter_mut().for_each(|o| *o += v);
                    }
                }
                Ok(())
            },
        )
    }
}
