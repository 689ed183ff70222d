//! Random tensors: the PyTorch-identical samplers of `lockstep_rng::compat::torch`, applied to
//! tensors with PyTorch's rules for which path and which element order a tensor gets.
//!
//! Every function takes `Option<&mut Generator>`: `None` draws from the default CPU generator
//! (`lockstep_rng::default_generator()`), held for the whole call so that no other thread's
//! draw lands in the middle. Samplers are serial, so results never depend on thread counts.
//!
//! Element order (PyTorch's): a contiguous tensor is filled in row-major order; a dense but
//! permuted tensor (e.g. a transpose) in storage order; any other view in row-major order of
//! the view. `normal_` takes the 16-block path only for contiguous tensors of 16 or more
//! elements, the scalar path otherwise.

/// The algorithm id of the random ops in traces: PyTorch's CPU streams (one implementation, the
/// draws in a fixed order from one generator).
pub const ALGO: &str = "random.torch_cpu_stream";

/// This family as dispatch lists it: one thread-invariant implementation, `random` (collected
/// by [`crate::ops::builtin_ops`]; the draws record their own names with [`ALGO`]).
pub fn ops() -> Vec<crate::op::OpInfo> {
    vec![crate::op::OpInfo {
        name: "random",
        impls: vec![(ALGO, crate::op::Guarantee::ThreadInvariant)],
    }]
}

fn traced_fill(op: &str, t: &Tensor, r: Result<()>) -> Result<()> {
    if r.is_ok() {
        crate::trace::record(op, ALGO, &[], t);
    }
    r
}

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::{Tensor, invalid};
use lockstep_rng::Generator;
use lockstep_rng::compat::torch as t;

/// Runs `f` on `g`, or on the locked default generator when `g` is `None`.
///
/// # Errors
/// `f`'s error; or, with `g = None`, an error (never a deadlock) when this thread already holds
/// `default_generator()`'s guard.
pub fn with_generator<R, E: From<lockstep_rng::Error>>(
    g: Option<&mut Generator>,
    f: impl FnOnce(&mut Generator) -> core::result::Result<R, E>,
) -> core::result::Result<R, E> {
    match g {
        Some(g) => f(g),
        None => f(&mut *lockstep_rng::try_default_generator()?),
    }
}

/// The RNG layer's out-of-memory error as the tensor layer's own variant (same op, same bytes).
fn rng_oom(e: lockstep_rng::Error) -> Error {
    match e {
        lockstep_rng::Error::OutOfMemory { op, bytes } => Error::OutOfMemory { op, bytes },
        e => e.into(),
    }
}

fn float_dtype(op: &'static str, dtype: DType) -> Result<()> {
    if dtype.is_float() {
        Ok(())
    } else {
        Err(Error::DType {
            op,
            expected: DType::F32,
            got: dtype,
        })
    }
}

/// How a tensor's elements are visited by an elementwise sampler.
enum Order {
    /// Contiguous: row-major, vector paths allowed.
    Contiguous,
    /// Dense but permuted: storage order, scalar paths.
    Storage,
    /// Any other view: row-major order of the view, scalar paths.
    Logical,
}

impl Tensor {
    fn order(&self) -> Order {
        let l = self.layout();
        if self.is_contiguous() {
            Order::Contiguous
        } else if l.offset() == 0 && self.storage().len() == self.numel() && {
            let mut s: Vec<(usize, usize)> = l
                .strides()
                .iter()
                .copied()
                .zip(l.shape().iter().copied())
                .collect();
            s.sort_unstable();
            let mut expect = 1;
            s.iter().all(|&(st, d)| {
                let ok = d == 1 || st == expect;
                expect *= d;
                ok
            })
        } {
            Order::Storage
        } else {
            Order::Logical
        }
    }

    /// Fills the elements with `fill(buffer, contiguous)` in PyTorch's element order, writing
    /// copy-on-write. `contiguous` tells the sampler whether vector paths are allowed.
    fn fill_with<T: Element>(
        &mut self,
        fill: impl FnOnce(&mut [T], bool) -> Result<()>,
    ) -> Result<()> {
        match self.order() {
            Order::Contiguous => {
                let d = self.data_mut::<T>()?;
                fill(d, true)
            }
            Order::Storage => {
                // Keep the permuted layout; fill the (private) storage in memory order.
                let layout = self.layout().clone();
                let mut storage = self.storage().clone();
                let buf = T::slice_mut(&mut storage).ok_or(Error::DType {
                    op: "fill",
                    expected: T::DTYPE,
                    got: self.dtype(),
                })?;
                fill(buf, false)?;
                *self = Tensor::from_parts(std::sync::Arc::new(storage), layout);
                Ok(())
            }
            Order::Logical => {
                let mut v = crate::error::try_filled_vec("fill", self.numel(), T::ZERO)?;
                fill(&mut v, false)?;
                *self = Tensor::from_vec(v, self.shape())?;
                Ok(())
            }
        }
    }

    /// `x.uniform_(a, b)` in place (float tensors).
    ///
    /// # Errors
    /// Non-float dtype; `a > b` or a non-finite range.
    pub fn uniform_(&mut self, a: f64, b: f64, g: Option<&mut Generator>) -> Result<()> {
        float_dtype("uniform_", self.dtype())?;
        self.check_writable("uniform_")?;
        let r = with_generator(g, |g| match self.dtype() {
            DType::F32 => self.fill_with::<f32>(|v, _| Ok(t::uniform_(g, v, a, b)?)),
            _ => self.fill_with::<f64>(|v, _| Ok(t::uniform_(g, v, a, b)?)),
        });
        traced_fill("uniform_", self, r)
    }

    /// `x.normal_(mean, std)` in place (float tensors), with PyTorch's choice of path.
    ///
    /// # Errors
    /// Non-float dtype; negative `std`.
    pub fn normal_(&mut self, mean: f64, std: f64, g: Option<&mut Generator>) -> Result<()> {
        float_dtype("normal_", self.dtype())?;
        self.check_writable("normal_")?;
        fn fill<T: t::Float>(
            g: &mut Generator,
            v: &mut [T],
            c: bool,
            mean: f64,
            std: f64,
        ) -> Result<()> {
            if c {
                Ok(t::normal_(g, v, mean, std)?)
            } else {
                Ok(t::normal_scalar_path_(g, v, mean, std)?)
            }
        }
        let r = with_generator(g, |g| match self.dtype() {
            DType::F32 => self.fill_with::<f32>(|v, c| fill(g, v, c, mean, std)),
            _ => self.fill_with::<f64>(|v, c| fill(g, v, c, mean, std)),
        });
        traced_fill("normal_", self, r)
    }

    /// `x.bernoulli_(p)` in place with a scalar probability (float tensors).
    ///
    /// # Errors
    /// Non-float dtype; `p` outside `[0, 1]`.
    pub fn bernoulli_(&mut self, p: f64, g: Option<&mut Generator>) -> Result<()> {
        float_dtype("bernoulli_", self.dtype())?;
        self.check_writable("bernoulli_")?;
        let r = with_generator(g, |g| match self.dtype() {
            DType::F32 => self.fill_with::<f32>(|v, _| Ok(t::bernoulli_(g, v, p)?)),
            _ => self.fill_with::<f64>(|v, _| Ok(t::bernoulli_(g, v, p)?)),
        });
        traced_fill("bernoulli_", self, r)
    }

    /// `x.exponential_(lambd)` in place (float tensors).
    ///
    /// # Errors
    /// Non-float dtype; `lambd <= 0`.
    pub fn exponential_(&mut self, lambd: f64, g: Option<&mut Generator>) -> Result<()> {
        float_dtype("exponential_", self.dtype())?;
        self.check_writable("exponential_")?;
        let r = with_generator(g, |g| match self.dtype() {
            DType::F32 => self.fill_with::<f32>(|v, _| Ok(t::exponential_(g, v, lambd)?)),
            _ => self.fill_with::<f64>(|v, _| Ok(t::exponential_(g, v, lambd)?)),
        });
        traced_fill("exponential_", self, r)
    }

    /// `torch.rand(shape, dtype)`: uniform in `[0, 1)`.
    ///
    /// # Errors
    /// Non-float dtype.
    pub fn rand(shape: &[usize], dtype: DType, g: Option<&mut Generator>) -> Result<Tensor> {
        let mut x = Tensor::zeros(shape, dtype)?;
        x.uniform_(0.0, 1.0, g)?;
        Ok(x)
    }

    /// `torch.randn(shape, dtype)`: standard normal, from `g` or the default generator
    /// (`None`), bit for bit as PyTorch's CPU draws.
    ///
    /// ```
    /// use lockstep_rng::Generator;
    /// use lockstep_tensor::{DType, Tensor};
    /// // torch.manual_seed(0); torch.randn(2, 3)
    /// let x = Tensor::randn(&[2, 3], DType::F32, Some(&mut Generator::with_seed(0)))?;
    /// assert_eq!(
    ///     x.to_vec::<f32>()?,
    ///     [1.5409961, -0.2934289, -2.1787894, 0.56843126, -1.0845224, -1.3985955]
    /// );
    /// # Ok::<(), lockstep_tensor::Error>(())
    /// ```
    ///
    /// # Errors
    /// Non-float dtype.
    pub fn randn(shape: &[usize], dtype: DType, g: Option<&mut Generator>) -> Result<Tensor> {
        let mut x = Tensor::zeros(shape, dtype)?;
        x.normal_(0.0, 1.0, g)?;
        Ok(x)
    }

    /// `torch.randint(low, high, shape)` as `I64` (or a float dtype).
    ///
    /// # Errors
    /// `low >= high`; `Bool`/`U8` dtype.
    pub fn randint(
        low: i64,
        high: i64,
        shape: &[usize],
        dtype: DType,
        g: Option<&mut Generator>,
    ) -> Result<Tensor> {
        const OP: &str = "randint";
        let n = crate::tensor::checked_numel(OP, shape)?;
        // Allocated before the generator is touched: a refused size draws nothing.
        with_generator(g, |g| match dtype {
            DType::I64 => {
                let mut v = crate::error::try_filled_vec(OP, n, 0i64)?;
                t::random_(g, &mut v, low, high)?;
                Tensor::from_vec(v, shape)
            }
            DType::F32 => {
                let mut v = crate::error::try_filled_vec(OP, n, 0f32)?;
                t::random_(g, &mut v, low, high)?;
                Tensor::from_vec(v, shape)
            }
            DType::F64 => {
                let mut v = crate::error::try_filled_vec(OP, n, 0f64)?;
                t::random_(g, &mut v, low, high)?;
                Tensor::from_vec(v, shape)
            }
            got => Err(Error::DType {
                op: "randint",
                expected: DType::I64,
                got,
            }),
        })
    }

    /// `torch.randperm(n)` as `I64`.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] if `n` values cannot be allocated, or `n` does not fit in
    /// `int64` (checked before anything is drawn).
    pub fn randperm(n: usize, g: Option<&mut Generator>) -> Result<Tensor> {
        let p = with_generator(g, |g| t::try_randperm(g, n)).map_err(rng_oom)?;
        crate::trace::traced("randperm", ALGO, &[], Tensor::from_vec(p, &[n]))
    }

    /// `torch.bernoulli(probs)`: one draw per probability, same dtype as `probs`.
    ///
    /// # Errors
    /// Non-float dtype; a probability outside `[0, 1]`.
    pub fn bernoulli(probs: &Tensor, g: Option<&mut Generator>) -> Result<Tensor> {
        let p = probs.contiguous_for("bernoulli")?;
        let out = with_generator(g, |g| match p.dtype() {
            DType::F32 => Tensor::from_vec(t::bernoulli_tensor(g, p.data::<f32>()?)?, p.shape()),
            DType::F64 => Tensor::from_vec(t::bernoulli_tensor(g, p.data::<f64>()?)?, p.shape()),
            got => Err(Error::DType {
                op: "bernoulli",
                expected: DType::F32,
                got,
            }),
        });
        crate::trace::traced("bernoulli", ALGO, &[probs], out)
    }

    /// `F.dropout(x, p, training)`: PyTorch's mask, scale and draws (row-major order of `x`).
    ///
    /// # Errors
    /// Non-float dtype; `p` outside `[0, 1]`.
    pub fn dropout(&self, p: f64, training: bool, g: Option<&mut Generator>) -> Result<Tensor> {
        let x = self.contiguous_for("dropout")?;
        let out = with_generator(g, |g| match x.dtype() {
            DType::F32 => {
                Tensor::from_vec(t::dropout(g, x.data::<f32>()?, p, training)?, x.shape())
            }
            DType::F64 => {
                Tensor::from_vec(t::dropout(g, x.data::<f64>()?, p, training)?, x.shape())
            }
            got => Err(Error::DType {
                op: "dropout",
                expected: DType::F32,
                got,
            }),
        });
        crate::trace::traced("dropout", ALGO, &[self], out)
    }

    /// The dropout mask `Tensor::ones(shape, dtype)?.dropout(p, true, g)` — `1 / (1 − p)` where
    /// kept, `0` where dropped, in row-major order — with the same draws and bits, without
    /// making the ones (traced as that `dropout` call).
    ///
    /// # Errors
    /// Non-float dtype; `p` outside `[0, 1]`.
    pub fn dropout_mask(
        shape: &[usize],
        dtype: DType,
        p: f64,
        g: Option<&mut Generator>,
    ) -> Result<Tensor> {
        let n = crate::tensor::checked_numel("dropout", shape)?;
        // A large mask's decisions on the team (the stream's words are the same whoever
        // tempers them); not from inside a kernel, whose team is busy. Not on two threads
        // either: one helper's share (tempering and deciding) does not pay for moving the
        // words from core to core (a 2-core Zen 4, 2^18 elements: 209–311 µs on the team
        // against 152–198 µs on the caller alone).
        let par = crate::threads::Par::for_dispatch();
        let run = |parts: usize, f: &(dyn Fn(usize) + Sync)| par.run_parts(parts, f);
        let parts: Option<t::Parts> =
            (par.threads() > 2 && !crate::threads::team_busy_here()).then_some(&run);
        let out = with_generator(g, |g| match dtype {
            DType::F32 => Tensor::from_vec(
                t::dropout_mask_with::<f32>(g, n, p, parts).map_err(rng_oom)?,
                shape,
            ),
            DType::F64 => Tensor::from_vec(
                t::dropout_mask_with::<f64>(g, n, p, parts).map_err(rng_oom)?,
                shape,
            ),
            got => Err(Error::DType {
                op: "dropout",
                expected: DType::F32,
                got,
            }),
        })?;
        if crate::trace::enabled() {
            let ones = Tensor::ones(shape, dtype)?;
            crate::trace::record("dropout", ALGO, &[&ones], &out);
        }
        Ok(out)
    }

    /// `torch.multinomial(probs, num_samples, replacement)` for 1-D or 2-D `probs`.
    ///
    /// # Errors
    /// As [`lockstep_rng::compat::torch::multinomial`]; `probs` of 0 or more than 2 dimensions.
    pub fn multinomial(
        probs: &Tensor,
        num_samples: usize,
        replacement: bool,
        g: Option<&mut Generator>,
    ) -> Result<Tensor> {
        let (rows, cols) = match probs.shape() {
            [c] => (1, *c),
            [r, c] => (*r, *c),
            s => {
                return Err(invalid(
                    "multinomial",
                    "input",
                    format!("prob_dist must be 1 or 2 dim, got shape {s:?}"),
                ));
            }
        };
        let p = probs.contiguous_for("multinomial")?;
        let out = with_generator(g, |g| -> Result<Vec<i64>> {
            Ok(match p.dtype() {
                DType::F32 => {
                    t::multinomial(g, p.data::<f32>()?, rows, cols, num_samples, replacement)
                        .map_err(rng_oom)?
                }
                DType::F64 => {
                    t::multinomial(g, p.data::<f64>()?, rows, cols, num_samples, replacement)
                        .map_err(rng_oom)?
                }
                got => {
                    return Err(Error::DType {
                        op: "multinomial",
                        expected: DType::F32,
                        got,
                    });
                }
            })
        })?;
        if probs.ndim() == 1 {
            Tensor::from_vec(out, &[num_samples])
        } else {
            Tensor::from_vec(out, &[rows, num_samples])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_slice_samplers() {
        // torch.manual_seed(0); torch.randn(16) — element 15 (torch.md §14).
        let x = Tensor::randn(&[4, 4], DType::F32, Some(&mut Generator::with_seed(0))).unwrap();
        assert_eq!(x.to_vec::<f32>().unwrap()[15], -0.2472781538963318);
        let r =
            Tensor::randint(0, 10, &[10], DType::I64, Some(&mut Generator::with_seed(0))).unwrap();
        assert_eq!(r.to_vec::<i64>().unwrap(), [4, 9, 3, 0, 3, 9, 7, 3, 7, 3]);
    }

    #[test]
    fn non_contiguous_tensors_take_the_scalar_path_in_pytorch_order() {
        // A transposed 4x4 (dense, permuted) is filled in storage order with the scalar path:
        // its storage equals a scalar-path fill of 16 values.
        let mut x = Tensor::zeros(&[4, 4], DType::F64)
            .unwrap()
            .transpose(0, 1)
            .unwrap();
        x.normal_(0.0, 1.0, Some(&mut Generator::with_seed(3)))
            .unwrap();
        let mut want = vec![0f64; 16];
        t::normal_scalar_path_(&mut Generator::with_seed(3), &mut want, 0.0, 1.0).unwrap();
        assert_eq!(
            x.contiguous()
                .transpose(0, 1)
                .unwrap()
                .to_vec::<f64>()
                .unwrap(),
            want
        );
        // A strided slice is filled in its own row-major order.
        let mut y = Tensor::zeros(&[4, 8], DType::F64)
            .unwrap()
            .narrow(1, 0, 4)
            .unwrap();
        y.normal_(0.0, 1.0, Some(&mut Generator::with_seed(3)))
            .unwrap();
        assert_eq!(y.to_vec::<f64>().unwrap(), want);
    }

    #[test]
    fn dropout_mask_is_the_same_at_every_thread_count() {
        // Large enough for the decisions on the team (from 3 threads): the mask `lockstep_rng`
        // draws serially, and the generator left in the same state, at 1, 2, 3 and 8 threads.
        use crate::threads::with_num_threads;
        let n = 7 * 10_001;
        let mut g = Generator::with_seed(11);
        let want: Vec<u32> = t::dropout_mask::<f32>(&mut g, n, 0.2)
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect();
        let after = g.next_u32();
        for threads in [1, 2, 3, 8] {
            let mut g = Generator::with_seed(11);
            let m = with_num_threads(threads, || {
                Tensor::dropout_mask(&[7, 10_001], DType::F32, 0.2, Some(&mut g)).unwrap()
            });
            let got: Vec<u32> = m
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect();
            assert!(got == want, "{threads} threads");
            assert_eq!(g.next_u32(), after, "{threads} threads");
        }
    }

    #[test]
    fn bad_arguments() {
        let mut i = Tensor::zeros(&[3], DType::I64).unwrap();
        assert!(i.normal_(0.0, 1.0, None).is_err());
        let mut f = Tensor::zeros(&[3], DType::F32).unwrap();
        assert!(f.uniform_(1.0, 0.0, Some(&mut Generator::new())).is_err());
        assert!(Tensor::randint(3, 3, &[2], DType::I64, Some(&mut Generator::new())).is_err());
        let p = Tensor::from_vec(vec![0.5f32; 8], &[2, 2, 2]).unwrap();
        assert!(Tensor::multinomial(&p, 1, true, Some(&mut Generator::new())).is_err());
    }
}
