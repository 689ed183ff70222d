//! The per-parameter state of Adadelta, Adagrad and RMSprop: a `step` and a fixed list of
//! named buffers, saved and loaded under PyTorch's `state_dict` names.

use super::{Buf, fit_buffer, fit_step, parse_state_name};
use crate::autograd::Var;
use crate::ops::invalid;
use lockstep_tensor::{DType, Result, Tensor};

/// One parameter's state: PyTorch's `step` (a float32 tensor there) and the buffers named by
/// the optimizer's key list, in that order.
#[derive(Clone, Debug)]
pub(crate) struct Slots {
    pub(crate) step: f32,
    pub(crate) bufs: Vec<Buf>,
}

impl Slots {
    /// Step 0 and `k` buffers of zeros.
    pub(crate) fn zeros(dtype: DType, n: usize, k: usize) -> Slots {
        Slots {
            step: 0.0,
            bufs: (0..k).map(|_| Buf::zeros(dtype, n)).collect(),
        }
    }
}

/// `state.{i}.step`, then `state.{i}.{key}` for each buffer, parameters in order.
pub(crate) fn state_entries(
    params: &[Var],
    state: &[Option<Slots>],
    keys: &[&str],
) -> Vec<(String, Tensor)> {
    let mut out = Vec::new();
    for (i, s) in state.iter().enumerate() {
        let Some(s) = s else { continue };
        out.push((format!("state.{i}.step"), Tensor::scalar(s.step)));
        let shape = params[i].shape();
        for (key, b) in keys.iter().zip(&s.bufs) {
            out.push((format!("state.{i}.{key}"), b.to_tensor(shape)));
        }
    }
    out
}

/// Parses a whole state as written by [`state_entries`]: every parameter has all its entries
/// or none.
pub(crate) fn load_slots(
    op: &'static str,
    params: &[Var],
    state: &[(String, Tensor)],
    keys: &[&str],
) -> Result<Vec<Option<Slots>>> {
    let n = params.len();
    let mut steps: Vec<Option<f32>> = vec![None; n];
    let mut bufs: Vec<Vec<Option<Buf>>> = vec![vec![None; keys.len()]; n];
    for (full, t) in state {
        let (i, key) = parse_state_name(op, full, n)?;
        if key == "step" {
            steps[i] = Some(fit_step(op, full, t)?);
        } else if let Some(k) = keys.iter().position(|k| *k == key) {
            bufs[i][k] = Some(Buf::from_tensor(&fit_buffer(op, full, t, &params[i])?)?);
        } else {
            return Err(invalid(
                op,
                "state",
                format!("`{full}`: {op} keeps step, {}", keys.join(", ")),
            ));
        }
    }
    let mut out = Vec::with_capacity(n);
    for (i, (step, b)) in steps.into_iter().zip(bufs).enumerate() {
        if step.is_none() && b.iter().all(Option::is_none) {
            out.push(None);
            continue;
        }
        match (step, b.into_iter().collect::<Option<Vec<Buf>>>()) {
            (Some(step), Some(bufs)) => out.push(Some(Slots { step, bufs })),
            _ => {
                return Err(invalid(
                    op,
                    "state",
                    format!(
                        "the state of parameter {i} is incomplete: it needs step, {}",
                        keys.join(", ")
                    ),
                ));
            }
        }
    }
    Ok(out)
}
