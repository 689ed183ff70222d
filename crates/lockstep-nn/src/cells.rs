//! One step of a recurrent layer: `nn.LSTMCell`, `nn.GRUCell` and `nn.RNNCell`, with PyTorch's
//! parameter names (`weight_ih`, `weight_hh`, `bias_ih`, `bias_hh`), PyTorch's default
//! initialisation (each parameter in that order drawn `uniform_(−1/√h, 1/√h)` from the
//! generator, in `f32`: after `manual_seed(s)` the same bits as PyTorch) and PyTorch's CPU
//! formulas, op for op. Convert a cell with [`Module::to_dtype`] (`cell.double()`) to run it in
//! `f64`.
//!
//! A cell takes an input `[B, input_size]` (or `[input_size]`, unbatched) and an optional
//! state `[B, hidden_size]` (zeros when absent, as in PyTorch). Every step is made of
//! differentiable ops ([`Var::linear`], `sigmoid`, `tanh`, …), so gradients need nothing more
//! and each kernel is deterministic at any thread count. An `LSTMCell` step is one recorded op
//! with two outputs: its two linears, then the pointwise part as one fused op each way
//! ([`Tensor::lstm_cell`]), with the bits of those ops run one by one.

use crate::autograd::Var;
use crate::module::{Forward, Module, Training, Visitor, check_input_dtype, module_error};
use crate::ops::{LinearGrads, check_linear_bias, invalid};
use lockstep_rng::Generator;
use lockstep_rng::compat::torch as t;
use lockstep_tensor::{Result, Tensor};

/// The parameters every cell has: `gates·hidden_size` rows.
struct CellParams {
    weight_ih: Var,
    weight_hh: Var,
    bias_ih: Option<Var>,
    bias_hh: Option<Var>,
    input_size: usize,
    hidden_size: usize,
}

impl CellParams {
    /// `RNNCellBase.__init__` and `reset_parameters`: every parameter, in declaration order,
    /// `uniform_(−stdv, stdv)` with `stdv = 1/√hidden_size` (0 for a hidden size of 0).
    fn new(
        name: &'static str,
        g: &mut Generator,
        input_size: usize,
        hidden_size: usize,
        bias: bool,
        gates: usize,
    ) -> Result<Self> {
        let rows = hidden_size.checked_mul(gates);
        let size = |cols: usize| {
            rows.and_then(|r| r.checked_mul(cols))
                .filter(|&n| n <= isize::MAX as usize / 8)
                .ok_or_else(|| {
                    invalid(
                        name,
                        "hidden_size",
                        format!("{name}({input_size}, {hidden_size}) is too large"),
                    )
                })
        };
        let (n_ih, n_hh) = (size(input_size)?, size(hidden_size)?);
        let rows = gates * hidden_size;
        let stdv = if hidden_size > 0 {
            1.0 / (hidden_size as f64).sqrt()
        } else {
            0.0
        };
        let mut draw = |n: usize, shape: &[usize]| -> Result<Var> {
            let mut v = vec![0f32; n];
            t::uniform_(g, &mut v, -stdv, stdv)?;
            Ok(Var::new(Tensor::from_vec(v, shape)?, true))
        };
        let weight_ih = draw(n_ih, &[rows, input_size])?;
        let weight_hh = draw(n_hh, &[rows, hidden_size])?;
        let (bias_ih, bias_hh) = if bias {
            (Some(draw(rows, &[rows])?), Some(draw(rows, &[rows])?))
        } else {
            (None, None)
        };
        Ok(Self {
            weight_ih,
            weight_hh,
            bias_ih,
            bias_hh,
            input_size,
            hidden_size,
        })
    }

    fn visit(&self, v: &mut dyn Visitor) {
        v.param("weight_ih", &self.weight_ih);
        v.param("weight_hh", &self.weight_hh);
        if let Some(b) = &self.bias_ih {
            v.param("bias_ih", b);
        }
        if let Some(b) = &self.bias_hh {
            v.param("bias_hh", b);
        }
    }

    /// Checks the input and the states, and makes them batched: `(x, states, unbatched)`, the
    /// absent states zeros of the input's dtype.
    fn prepare(
        &self,
        describe: &dyn Fn() -> String,
        x: &Var,
        states: &[Option<&Var>],
    ) -> Result<(Var, Vec<Var>, bool)> {
        let (i, h) = (self.input_size, self.hidden_size);
        let unbatched = match x.shape() {
            [n] if *n == i => true,
            [_, n] if *n == i => false,
            s => {
                return Err(module_error(
                    describe(),
                    format!("expected input of shape [B, {i}] or [{i}], got {s:?}"),
                ));
            }
        };
        check_input_dtype(describe, x, &self.weight_ih)?;
        let x = if unbatched {
            x.unsqueeze(0)?
        } else {
            x.clone()
        };
        let b = x.shape()[0];
        let mut out = Vec::with_capacity(states.len());
        for s in states {
            let s = match s {
                Some(s) => {
                    let want: Vec<usize> = if unbatched { vec![h] } else { vec![b, h] };
                    if s.shape() != want.as_slice() || s.dtype() != x.dtype() {
                        return Err(module_error(
                            describe(),
                            format!(
                                "expected hidden state of shape {want:?} and dtype {:?} (the input's), got {:?} ({:?})",
                                x.dtype(),
                                s.shape(),
                                s.dtype()
                            ),
                        ));
                    }
                    if unbatched {
                        s.unsqueeze(0)?
                    } else {
                        (*s).clone()
                    }
                }
                None => Var::constant(Tensor::zeros(&[b, h], x.dtype())?),
            };
            out.push(s);
        }
        Ok((x, out, unbatched))
    }

    /// `linear(x, w_ih, b_ih)` and `linear(h, w_hh, b_hh)`.
    fn linears(&self, x: &Var, h: &Var) -> Result<(Var, Var)> {
        Ok((
            x.linear(&self.weight_ih, self.bias_ih.as_ref())?,
            h.linear(&self.weight_hh, self.bias_hh.as_ref())?,
        ))
    }

    fn describe(&self, name: &str, extra: &str) -> String {
        format!(
            "{name}({}, {}, bias={}{extra})",
            self.input_size,
            self.hidden_size,
            self.bias_ih.is_some()
        )
    }
}

fn unbatch(v: Var, unbatched: bool) -> Result<Var> {
    if unbatched { v.squeeze(0) } else { Ok(v) }
}

macro_rules! cell_accessors {
    ($name:ident) => {
        impl $name {
            /// `weight_ih`: `[gates·hidden_size, input_size]`, the gates stacked in PyTorch's
            /// order.
            pub fn weight_ih(&self) -> &Var {
                &self.p.weight_ih
            }
            /// `weight_hh`: `[gates·hidden_size, hidden_size]`.
            pub fn weight_hh(&self) -> &Var {
                &self.p.weight_hh
            }
            /// `bias_ih`: `[gates·hidden_size]` (absent with `bias=False`).
            pub fn bias_ih(&self) -> Option<&Var> {
                self.p.bias_ih.as_ref()
            }
            /// `bias_hh`: `[gates·hidden_size]` (absent with `bias=False`).
            pub fn bias_hh(&self) -> Option<&Var> {
                self.p.bias_hh.as_ref()
            }
            /// `input_size`.
            pub fn input_size(&self) -> usize {
                self.p.input_size
            }
            /// `hidden_size`.
            pub fn hidden_size(&self) -> usize {
                self.p.hidden_size
            }
        }
    };
}

/// `nn.LSTMCell(input_size, hidden_size, bias=True)`: gates `i, f, g, o` (in that order in
/// the weights' rows), `c' = f·c + i·g`, `h' = o·tanh(c')`.
pub struct LSTMCell {
    p: CellParams,
    training: Training,
}

cell_accessors!(LSTMCell);

impl LSTMCell {
    /// `nn.LSTMCell(input_size, hidden_size, bias)`, drawn from the default generator.
    ///
    /// # Errors
    /// Sizes whose product overflows.
    pub fn new(input_size: usize, hidden_size: usize, bias: bool) -> Result<Self> {
        Self::with_generator(
            &mut lockstep_rng::default_generator(),
            input_size,
            hidden_size,
            bias,
        )
    }

    /// The same, drawn from `g`.
    ///
    /// # Errors
    /// Sizes whose product overflows.
    pub fn with_generator(
        g: &mut Generator,
        input_size: usize,
        hidden_size: usize,
        bias: bool,
    ) -> Result<Self> {
        Ok(Self {
            p: CellParams::new("LSTMCell", g, input_size, hidden_size, bias, 4)?,
            training: Training::default(),
        })
    }

    /// `cell(input, (h, c))` or, with `None`, `cell(input)` (zero states): the new `(h, c)`.
    /// PyTorch's `LSTMCell` formulas: `gates = linear(h, w_hh, b_hh) + linear(x, w_ih, b_ih)`,
    /// `c' = σ(f)·c + σ(i)·tanh(g)`, `h' = σ(o)·tanh(c')`.
    ///
    /// # Errors
    /// An input not `[B, input_size]` or `[input_size]`, states not `[B, hidden_size]` (or
    /// `[hidden_size]`) of the input's dtype, an input dtype other than the parameters'.
    pub fn forward_with_state(&self, x: &Var, hx: Option<(&Var, &Var)>) -> Result<(Var, Var)> {
        let describe = || self.p.describe("LSTMCell", "");
        let (h, c) = match hx {
            Some((h, c)) => (Some(h), Some(c)),
            None => (None, None),
        };
        let (x, s, unbatched) = self.p.prepare(&describe, x, &[h, c])?;
        let (hy, cy) = lstm_step(&self.p, &x, &s[0], &s[1])?;
        Ok((unbatch(hy, unbatched)?, unbatch(cy, unbatched)?))
    }
}

/// One `LSTMCell` step as one recorded op with two outputs: `gi = linear(x, w_ih, b_ih)` and
/// `gh = linear(h, w_hh, b_hh)` (the products [`Var::linear`] runs; the bias adds inside the
/// cell op), then `gates = gh + gi`, chunked
/// into `i, f, g, o`, `c' = σ(f)·c + σ(i)·tanh(g)` and `h' = σ(o)·tanh(c')` as one op each way
/// ([`Tensor::lstm_cell`] and its backward). The bits of those ops run one by one, gradients
/// included (but for the sign of a zero in `c`'s), without their fifteen passes and
/// temporaries: the gates are not kept for the backward, the two bias gradients (equal, both
/// the gates' gradient summed over the batch) are computed once, and `h'` and `c'` are separate
/// tensors rather than views of one.
fn lstm_step(p: &CellParams, x: &Var, h: &Var, c: &Var) -> Result<(Var, Var)> {
    let (xt, ht, ct) = (x.data(), h.data(), c.data());
    let (w_ih, w_hh) = (p.weight_ih.data(), p.weight_hh.data());
    let (b_ih, b_hh) = (
        p.bias_ih.as_ref().map(Var::data),
        p.bias_hh.as_ref().map(Var::data),
    );
    // The products alone: the bias adds happen inside the cell op, with the same bits.
    let gi = xt.linear(&w_ih, None)?;
    let gh = ht.linear(&w_hh, None)?;
    let biases = match (&b_hh, &b_ih) {
        (Some(p), Some(q)) => {
            check_linear_bias(&gh, &w_hh, p)?;
            check_linear_bias(&gi, &w_ih, q)?;
            Some((p, q))
        }
        _ => None,
    };
    let (hy, cy, saved) = Tensor::lstm_cell(&gh, &gi, &ct, biases)?;
    drop((gi, gh));
    let needs = |v: Option<&Var>| v.is_some_and(Var::requires_grad);
    let (rb_ih, rb_hh) = (needs(p.bias_ih.as_ref()), needs(p.bias_hh.as_ref()));
    let need_c = c.requires_grad();
    // The bias gradient is taken with whichever linear wants one (both give the same bits).
    let grads_hh = LinearGrads::new(
        ht,
        w_hh,
        [
            h.requires_grad(),
            p.weight_hh.requires_grad(),
            rb_hh || rb_ih,
        ],
    );
    let grads_ih = LinearGrads::new(
        xt,
        w_ih,
        [x.requires_grad(), p.weight_ih.requires_grad(), false],
    );
    // Inputs in the order the unfused graph's gradients reached them (the cell's node, then
    // `linear(h, …)`'s, then `linear(x, …)`'s), so that an input passed twice sums the same.
    let mut inputs = vec![c, h, &p.weight_hh];
    inputs.extend(p.bias_hh.as_ref());
    inputs.extend([x, &p.weight_ih]);
    inputs.extend(p.bias_ih.as_ref());
    let has_bias = p.bias_hh.is_some();
    let out = Var::from_op_multi("lstm_cell", vec![hy, cy], &inputs, move |g| {
        let (dz, dc) =
            Tensor::lstm_cell_backward(g[0].as_ref(), g[1].as_ref(), &saved, &ct, need_c)?;
        let (dh, dw_hh, db) = grads_hh.of(&dz)?;
        let (dx, dw_ih, _) = grads_ih.of(&dz)?;
        let mut out = vec![dc, dh, dw_hh];
        if has_bias {
            out.push(if rb_hh { db.clone() } else { None });
        }
        out.extend([dx, dw_ih]);
        if has_bias {
            out.push(if rb_ih { db } else { None });
        }
        Ok(out)
    })?;
    let [hy, cy]: [Var; 2] = out
        .try_into()
        .map_err(|_| invalid("lstm_cell", "outputs", "expected two outputs"))?;
    Ok((hy, cy))
}

impl Module for LSTMCell {
    fn visit(&self, v: &mut dyn Visitor) {
        self.p.visit(v);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `nn.GRUCell(input_size, hidden_size, bias=True)`: gates `r, z, n` (in that order in the
/// weights' rows), `h' = (h − n)·z + n`.
pub struct GRUCell {
    p: CellParams,
    training: Training,
}

cell_accessors!(GRUCell);

impl GRUCell {
    /// `nn.GRUCell(input_size, hidden_size, bias)`, drawn from the default generator.
    ///
    /// # Errors
    /// Sizes whose product overflows.
    pub fn new(input_size: usize, hidden_size: usize, bias: bool) -> Result<Self> {
        Self::with_generator(
            &mut lockstep_rng::default_generator(),
            input_size,
            hidden_size,
            bias,
        )
    }

    /// The same, drawn from `g`.
    ///
    /// # Errors
    /// Sizes whose product overflows.
    pub fn with_generator(
        g: &mut Generator,
        input_size: usize,
        hidden_size: usize,
        bias: bool,
    ) -> Result<Self> {
        Ok(Self {
            p: CellParams::new("GRUCell", g, input_size, hidden_size, bias, 3)?,
            training: Training::default(),
        })
    }

    /// `cell(input, h)` or, with `None`, `cell(input)` (a zero state): the new `h`, by
    /// PyTorch's `GRUCell` formulas: `r = σ(hr + ir)`, `z = σ(hz + iz)`,
    /// `n = tanh(in + hn·r)`, `h' = (h − n)·z + n`.
    ///
    /// # Errors
    /// As [`LSTMCell::forward_with_state`].
    pub fn forward_with_state(&self, x: &Var, hx: Option<&Var>) -> Result<Var> {
        let describe = || self.p.describe("GRUCell", "");
        let (x, s, unbatched) = self.p.prepare(&describe, x, &[hx])?;
        let h = &s[0];
        let (gi, gh) = self.p.linears(&x, h)?;
        let (gi, gh) = (gi.chunk(3, 1)?, gh.chunk(3, 1)?);
        let r = gh[0].add(&gi[0])?.sigmoid()?;
        let z = gh[1].add(&gi[1])?.sigmoid()?;
        let n = gi[2].add(&gh[2].mul(&r)?)?.tanh()?;
        let hy = h.sub(&n)?.mul(&z)?.add(&n)?;
        unbatch(hy, unbatched)
    }
}

impl Forward for GRUCell {
    /// `cell(input)`: a zero initial state.
    fn forward(&self, x: &Var) -> Result<Var> {
        self.forward_with_state(x, None)
    }
}

impl Module for GRUCell {
    fn visit(&self, v: &mut dyn Visitor) {
        self.p.visit(v);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `nn.RNNCell(input_size, hidden_size, bias=True, nonlinearity='tanh')`:
/// `h' = act(linear(h, w_hh, b_hh) + linear(x, w_ih, b_ih))`.
pub struct RNNCell {
    p: CellParams,
    relu: bool,
    training: Training,
}

cell_accessors!(RNNCell);

impl RNNCell {
    /// `nn.RNNCell(input_size, hidden_size, bias, nonlinearity)` with `nonlinearity` `"tanh"`
    /// or `"relu"`, drawn from the default generator.
    ///
    /// # Errors
    /// Another nonlinearity; sizes whose product overflows.
    pub fn new(
        input_size: usize,
        hidden_size: usize,
        bias: bool,
        nonlinearity: &str,
    ) -> Result<Self> {
        Self::with_generator(
            &mut lockstep_rng::default_generator(),
            input_size,
            hidden_size,
            bias,
            nonlinearity,
        )
    }

    /// The same, drawn from `g`.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_generator(
        g: &mut Generator,
        input_size: usize,
        hidden_size: usize,
        bias: bool,
        nonlinearity: &str,
    ) -> Result<Self> {
        let relu = match nonlinearity {
            "tanh" => false,
            "relu" => true,
            other => {
                return Err(invalid(
                    "RNNCell",
                    "nonlinearity",
                    format!("Unknown nonlinearity: {other} (expected 'tanh' or 'relu')"),
                ));
            }
        };
        Ok(Self {
            p: CellParams::new("RNNCell", g, input_size, hidden_size, bias, 1)?,
            relu,
            training: Training::default(),
        })
    }

    /// `"tanh"` or `"relu"`.
    pub fn nonlinearity(&self) -> &'static str {
        if self.relu { "relu" } else { "tanh" }
    }

    /// `cell(input, h)` or, with `None`, `cell(input)` (a zero state): the new `h`.
    ///
    /// # Errors
    /// As [`LSTMCell::forward_with_state`].
    pub fn forward_with_state(&self, x: &Var, hx: Option<&Var>) -> Result<Var> {
        let extra = format!(", nonlinearity='{}'", self.nonlinearity());
        let describe = || self.p.describe("RNNCell", &extra);
        let (x, s, unbatched) = self.p.prepare(&describe, x, &[hx])?;
        let (gi, gh) = self.p.linears(&x, &s[0])?;
        let pre = gh.add(&gi)?;
        let hy = if self.relu { pre.relu()? } else { pre.tanh()? };
        unbatch(hy, unbatched)
    }
}

impl Forward for RNNCell {
    /// `cell(input)`: a zero initial state.
    fn forward(&self, x: &Var) -> Result<Var> {
        self.forward_with_state(x, None)
    }
}

impl Module for RNNCell {
    fn visit(&self, v: &mut dyn Visitor) {
        self.p.visit(v);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}
