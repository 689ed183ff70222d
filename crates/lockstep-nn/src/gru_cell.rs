//! The elementwise part of a GRU step as one differentiable op, instead of the ten ops
//! (`add`, `sigmoid` twice, `mul`, `add`, `tanh`, `sub`, `mul`, `add`, and `chunk`'s views)
//! that each allocated, recorded a node and came back in the backward:
//!
//! `r = σ(x_r + w_r)`, `z = σ(x_z + w_z)`, `n = tanh(x_n + r·w_n)`, `h' = n + z·(h − n)`
//!
//! with `x = x_t·W_ihᵀ + b_ih` and `w = h·W_hhᵀ + b_hh` (both `[B, 3H]`, gates in PyTorch's
//! `r, z, n` order), each operation rounded as the op-by-op graph rounds it. `sigmoid` and
//! `tanh` are those of the fused LSTM layer: f64 the portable `lockstep_tensor::math`
//! functions of the elementwise ops (so f64 values are bit for bit the op-by-op graph's),
//! f32 the vectorised polynomials (within 4 ulp). The backward writes the three gradients in
//! one pass. Every element is computed alone, so the result does not depend on threads.
//! Traced as `gru_cell` and `gru_cell_backward`.

use crate::autograd::Var;
use crate::ops::invalid;
use crate::rnn::Real;
use lockstep_tensor::dispatch::{Guarantee, Impl, Op};
use lockstep_tensor::{DType, Result, Tensor, trace};

/// `(x [B, 3H], w [B, 3H], h [B, H])` → `(h' [B, H], r|z|n [B, 3H])`.
type ForwardFn = fn(&Tensor, &Tensor, &Tensor) -> Result<(Tensor, Tensor)>;
/// `(dh', r|z|n, w, h)` → `(dx, dw, dh)`.
type BackwardFn = fn(&Tensor, &Tensor, &Tensor, &Tensor) -> Result<(Tensor, Tensor, Tensor)>;

static GRU_CELL: Op<ForwardFn> = Op {
    name: "gru_cell",
    impls: &[Impl {
        algo: "gru_cell.fused",
        guarantee: Guarantee::ThreadInvariant,
        f: forward,
    }],
};

static GRU_CELL_BACKWARD: Op<BackwardFn> = Op {
    name: "gru_cell_backward",
    impls: &[Impl {
        algo: "gru_cell_backward.fused",
        guarantee: Guarantee::ThreadInvariant,
        f: backward,
    }],
};

/// Makes the op's algorithm ids known to `autotune` before its first call.
pub(crate) fn register() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        lockstep_tensor::autotune::register(&GRU_CELL);
        lockstep_tensor::autotune::register(&GRU_CELL_BACKWARD);
    });
}

/// The op's registrations.
pub(crate) fn infos() -> [lockstep_tensor::dispatch::OpInfo; 2] {
    [GRU_CELL.info(), GRU_CELL_BACKWARD.info()]
}

/// The new hidden state from the step's input projection `x` `[B, 3H]`, the hidden
/// projection `w` `[B, 3H]` and the hidden state `h` `[B, H]`.
///
/// # Errors
/// Shapes that do not fit (`InvalidArgument` naming them), dtypes other than one float type
/// for all three.
pub(crate) fn gru_cell(x: &Var, w: &Var, h: &Var) -> Result<Var> {
    let (xs, ws, hs) = (x.shape(), w.shape(), h.shape());
    if hs.len() != 2 || xs != ws || xs.len() != 2 || xs[0] != hs[0] || xs[1] != 3 * hs[1] {
        return Err(invalid(
            "gru_cell",
            "shapes",
            format!("expected x and w [B, 3H] and h [B, H], got {xs:?}, {ws:?} and {hs:?}"),
        ));
    }
    let dtype = h.dtype();
    if !matches!(dtype, DType::F32 | DType::F64) || x.dtype() != dtype || w.dtype() != dtype {
        return Err(lockstep_tensor::Error::DType {
            op: "gru_cell",
            expected: dtype,
            got: if x.dtype() != dtype {
                x.dtype()
            } else {
                w.dtype()
            },
        });
    }
    register();
    let (xt, wt, ht) = (
        x.data().contiguous(),
        w.data().contiguous(),
        h.data().contiguous(),
    );
    let choice = GRU_CELL.select()?;
    let (value, acts) = (choice.imp.f)(&xt, &wt, &ht)?;
    trace::record(GRU_CELL.name, choice.imp.algo, &[&xt, &wt, &ht], &value);
    let need = [x.requires_grad(), w.requires_grad(), h.requires_grad()];
    Ok(Var::from_op("gru_cell", value, &[x, w, h], move |gy| {
        let gy = gy.contiguous();
        let choice = GRU_CELL_BACKWARD.select()?;
        let (dx, dw, dh) = (choice.imp.f)(&gy, &acts, &wt, &ht)?;
        let mut out = Vec::with_capacity(3);
        for (g, need) in [dx, dw, dh].into_iter().zip(need) {
            trace::record(GRU_CELL_BACKWARD.name, choice.imp.algo, &[&gy], &g);
            out.push(need.then_some(g));
        }
        Ok(out)
    }))
}

/// `gru_cell.fused`.
fn forward(x: &Tensor, w: &Tensor, h: &Tensor) -> Result<(Tensor, Tensor)> {
    match h.dtype() {
        DType::F32 => forward_t::<f32>(x, w, h),
        _ => forward_t::<f64>(x, w, h),
    }
}

fn forward_t<T: Real>(x: &Tensor, w: &Tensor, h: &Tensor) -> Result<(Tensor, Tensor)> {
    let (xs, ws, hs) = (x.data::<T>()?, w.data::<T>()?, h.data::<T>()?);
    let hd = h.shape()[1];
    let mut acts = lockstep_tensor::try_filled_vec("gru_cell", xs.len(), T::ZERO)?;
    let mut out = lockstep_tensor::try_filled_vec("gru_cell", hs.len(), T::ZERO)?;
    if hd > 0 {
        for (((a, x), w), (hp, o)) in acts
            .chunks_exact_mut(3 * hd)
            .zip(xs.chunks_exact(3 * hd))
            .zip(ws.chunks_exact(3 * hd))
            .zip(hs.chunks_exact(hd).zip(out.chunks_exact_mut(hd)))
        {
            let (rz, nn) = a.split_at_mut(2 * hd);
            for ((a, &x), &w) in rz.iter_mut().zip(&x[..2 * hd]).zip(&w[..2 * hd]) {
                *a = x + w;
            }
            T::sigmoid_all(rz);
            let (r, z) = rz.split_at(hd);
            for (((n, &x), &w), &r) in nn.iter_mut().zip(&x[2 * hd..]).zip(&w[2 * hd..]).zip(r) {
                *n = x + r * w;
            }
            T::tanh_all(nn);
            for (((o, &n), &z), &hp) in o.iter_mut().zip(&*nn).zip(z).zip(hp) {
                *o = n + z * (hp - n);
            }
        }
    }
    Ok((
        Tensor::from_vec(out, h.shape())?,
        Tensor::from_vec(acts, x.shape())?,
    ))
}

/// `gru_cell_backward.fused`: with `g = dh'`, `dz = g·(h − n)·z(1 − z)`,
/// `dn = g·(1 − z)·(1 − n²)`, `dr = dn·w_n·r(1 − r)`; `dx = [dr, dz, dn]`,
/// `dw = [dr, dz, dn·r]`, `dh = g·z`.
fn backward(
    gy: &Tensor,
    acts: &Tensor,
    w: &Tensor,
    h: &Tensor,
) -> Result<(Tensor, Tensor, Tensor)> {
    match h.dtype() {
        DType::F32 => backward_t::<f32>(gy, acts, w, h),
        _ => backward_t::<f64>(gy, acts, w, h),
    }
}

fn backward_t<T: Real>(
    gy: &Tensor,
    acts: &Tensor,
    w: &Tensor,
    h: &Tensor,
) -> Result<(Tensor, Tensor, Tensor)> {
    let (gs, a, ws, hs) = (
        gy.data::<T>()?,
        acts.data::<T>()?,
        w.data::<T>()?,
        h.data::<T>()?,
    );
    let hd = h.shape()[1];
    let one = T::ONE;
    let mut dx = lockstep_tensor::try_filled_vec("gru_cell_backward", a.len(), T::ZERO)?;
    let mut dw = lockstep_tensor::try_filled_vec("gru_cell_backward", a.len(), T::ZERO)?;
    let mut dh = lockstep_tensor::try_filled_vec("gru_cell_backward", hs.len(), T::ZERO)?;
    if hd > 0 {
        let rows = a
            .chunks_exact(3 * hd)
            .zip(ws.chunks_exact(3 * hd))
            .zip(gs.chunks_exact(hd).zip(hs.chunks_exact(hd)))
            .zip(
                dx.chunks_exact_mut(3 * hd)
                    .zip(dw.chunks_exact_mut(3 * hd))
                    .zip(dh.chunks_exact_mut(hd)),
            );
        for (((a, w), (g, hp)), ((dx, dw), dh)) in rows {
            for j in 0..hd {
                let (r, z, n) = (a[j], a[hd + j], a[2 * hd + j]);
                let gj = g[j];
                let dz = gj * (hp[j] - n) * (z * (one - z));
                let dn = gj * (one - z) * (one - n * n);
                let dr = dn * w[2 * hd + j] * (r * (one - r));
                dx[j] = dr;
                dx[hd + j] = dz;
                dx[2 * hd + j] = dn;
                dw[j] = dr;
                dw[hd + j] = dz;
                dw[2 * hd + j] = dn * r;
                dh[j] = gj * z;
            }
        }
    }
    Ok((
        Tensor::from_vec(dx, acts.shape())?,
        Tensor::from_vec(dw, acts.shape())?,
        Tensor::from_vec(dh, h.shape())?,
    ))
}

#[cfg(test)]
mod tests {
    use super::gru_cell;
    use crate::autograd::Var;
    use lockstep_rng::Generator;
    use lockstep_tensor::{DType, Tensor};

    /// The cell written with the differentiable ops, as `Rnn` wrote it before this op.
    fn op_by_op(x: &Var, w: &Var, h: &Var) -> Var {
        let xg = x.chunk(3, 1).unwrap();
        let hg = w.chunk(3, 1).unwrap();
        let r = xg[0].add(&hg[0]).unwrap().sigmoid().unwrap();
        let z = xg[1].add(&hg[1]).unwrap().sigmoid().unwrap();
        let n = xg[2].add(&r.mul(&hg[2]).unwrap()).unwrap().tanh().unwrap();
        n.add(&z.mul(&h.sub(&n).unwrap()).unwrap()).unwrap()
    }

    /// Inputs spanning unsaturated and saturated gates, with a random loss weighting.
    fn inputs(dtype: DType, seed: u64) -> [Tensor; 4] {
        let mut g = Generator::with_seed(seed);
        let (b, hd) = (5, 7);
        let mut t = |shape: &[usize], scale: f64| {
            Tensor::randn(shape, DType::F64, Some(&mut g))
                .unwrap()
                .mul_scalar(scale)
                .unwrap()
                .to_dtype(dtype)
        };
        [
            t(&[b, 3 * hd], 3.0),
            t(&[b, 3 * hd], 3.0),
            t(&[b, hd], 1.0),
            t(&[b, hd], 1.0),
        ]
    }

    /// Value and gradients (x, w, h) of `sum(cell(x, w, h) · weights)`, as f64.
    fn run(fused: bool, t: &[Tensor; 4]) -> Vec<Vec<f64>> {
        let (x, w, h) = (
            Var::new(t[0].clone(), true),
            Var::new(t[1].clone(), true),
            Var::new(t[2].clone(), true),
        );
        let y = if fused {
            gru_cell(&x, &w, &h).unwrap()
        } else {
            op_by_op(&x, &w, &h)
        };
        y.mul(&Var::constant(t[3].clone()))
            .unwrap()
            .sum()
            .unwrap()
            .backward()
            .unwrap();
        let v = |t: Tensor| t.to_dtype(DType::F64).to_vec::<f64>().unwrap();
        vec![
            v(y.data()),
            v(x.grad().unwrap()),
            v(w.grad().unwrap()),
            v(h.grad().unwrap()),
        ]
    }

    fn close(got: &[Vec<f64>], want: &[Vec<f64>], rel: f64) {
        for (k, (g, w)) in got.iter().zip(want).enumerate() {
            let scale = w.iter().fold(0f64, |m, x| m.max(x.abs()));
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                assert!((a - b).abs() <= rel * scale, "output {k}[{i}]: {a} vs {b}");
            }
        }
    }

    #[test]
    fn f64_value_is_the_op_by_op_graphs_bit_for_bit_and_gradients_agree() {
        for seed in 0..4 {
            let t = inputs(DType::F64, seed);
            let (fused, ops) = (run(true, &t), run(false, &t));
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&fused[0]), bits(&ops[0]), "seed {seed}");
            close(&fused[1..], &ops[1..], 1e-14);
        }
    }

    #[test]
    fn f32_within_rounding_of_the_op_by_op_graph() {
        for seed in 0..4 {
            let t = inputs(DType::F32, seed);
            close(&run(true, &t), &run(false, &t), 2e-6);
        }
    }

    #[test]
    fn bad_shapes_and_dtypes_are_errors() {
        let v = |shape: &[usize], dtype| Var::new(Tensor::zeros(shape, dtype).unwrap(), true);
        let e = gru_cell(
            &v(&[2, 6], DType::F32),
            &v(&[2, 6], DType::F32),
            &v(&[2, 3], DType::F32),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("gru_cell") && e.contains("[2, 6]") && e.contains("[2, 3]"),
            "{e}"
        );
        let e = gru_cell(
            &v(&[2, 6], DType::F32),
            &v(&[2, 6], DType::F64),
            &v(&[2, 2], DType::F32),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("gru_cell"), "{e}");
        assert!(
            gru_cell(
                &v(&[2, 6], DType::I64),
                &v(&[2, 6], DType::I64),
                &v(&[2, 2], DType::I64),
            )
            .is_err()
        );
        // Zero-sized batch and hidden size: empty results, no panic.
        let y = gru_cell(
            &v(&[0, 6], DType::F32),
            &v(&[0, 6], DType::F32),
            &v(&[0, 2], DType::F32),
        )
        .unwrap();
        assert_eq!(y.shape(), [0, 2]);
        let y = gru_cell(
            &v(&[3, 0], DType::F64),
            &v(&[3, 0], DType::F64),
            &v(&[3, 0], DType::F64),
        )
        .unwrap();
        y.sum().unwrap().backward().unwrap();
    }
}
