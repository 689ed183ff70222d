//! Fused activations whose composition from other ops costs several passes and temporaries:
//! `leaky_relu` and its gradient, each one elementwise op (PyTorch's kernels are one pass too).
//! Each output element is computed from its own inputs only, so both are thread-invariant by
//! construction; they give the bits of the compositions they replace (`where(x > 0, x, x·s)`
//! and `where(x > 0, g, g·s)`), tested against them.

use super::elementwise::{Kernel, map1, map2};
use crate::Tensor;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{Guarantee, Impl, Op};

chunked_ops! {
    /// `F.leaky_relu(x, negative_slope)`.
    LEAKY_RELU = "leaky_relu";
    /// The gradient of `leaky_relu` (PyTorch's `leaky_relu_backward(g, x, negative_slope)`).
    LEAKY_RELU_BACKWARD = "leaky_relu_backward";
}

fn float_error(op: &'static str, got: DType) -> Error {
    Error::DType {
        op,
        expected: DType::F32,
        got,
    }
}

impl Tensor {
    /// `F.leaky_relu(x, negative_slope)`: `x` where `x > 0`, else `x · s` with `s` the slope
    /// rounded to the tensor's dtype (PyTorch's CPU kernel; NaN stays NaN). The same bits as
    /// `where(x > 0, x, x.mul_scalar(s))`, in one pass, at any thread count.
    ///
    /// # Errors
    /// A dtype that is not float; dispatch refuses the op; the output cannot be allocated.
    pub fn leaky_relu(&self, negative_slope: f64) -> Result<Tensor> {
        match self.dtype() {
            DType::F32 => {
                let s = negative_slope as f32;
                map1(
                    &LEAKY_RELU,
                    self,
                    move |x: f32| if x > 0.0 { x } else { x * s },
                )
            }
            DType::F64 => {
                let s = negative_slope;
                map1(
                    &LEAKY_RELU,
                    self,
                    move |x: f64| if x > 0.0 { x } else { x * s },
                )
            }
            got => Err(float_error(LEAKY_RELU.name, got)),
        }
    }

    /// The gradient of [`leaky_relu`](Self::leaky_relu) at `input` (PyTorch's
    /// `leaky_relu_backward`): `grad` where `input > 0`, else `grad · s` (`s` rounded to the
    /// dtype). `grad` and `input` broadcast against each other. The same bits as
    /// `where(input > 0, grad, grad.mul_scalar(s))`, in one pass.
    ///
    /// # Errors
    /// Dtypes that differ or are not float; shapes that do not broadcast; dispatch refuses
    /// the op; the output cannot be allocated.
    pub fn leaky_relu_backward(
        grad: &Tensor,
        input: &Tensor,
        negative_slope: f64,
    ) -> Result<Tensor> {
        let op = &LEAKY_RELU_BACKWARD;
        match grad.dtype() {
            DType::F32 => {
                let s = negative_slope as f32;
                map2(
                    op,
                    grad,
                    input,
                    move |g: f32, x: f32| if x > 0.0 { g } else { g * s },
                )
            }
            DType::F64 => {
                let s = negative_slope;
                map2(
                    op,
                    grad,
                    input,
                    move |g: f64, x: f64| if x > 0.0 { g } else { g * s },
                )
            }
            got => Err(float_error(op.name, got)),
        }
    }
}
