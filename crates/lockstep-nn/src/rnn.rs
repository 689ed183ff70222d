//! `nn.RNN`, `nn.GRU` and `nn.LSTM`: multi-layer, `batch_first`, inter-layer dropout,
//! bidirectional — with PyTorch's parameter names, order, initialisation and dropout draws.
//!
//! | PyTorch | lockstep-nn |
//! |---|---|
//! | `nn.LSTM(8, 64, num_layers=2, batch_first=True, dropout=p)` | `Rnn::lstm(RnnConfig { num_layers: 2, batch_first: true, dropout: p, ..RnnConfig::new(8, 64) })` |
//! | `nn.GRU(…)`, `nn.RNN(…, nonlinearity='relu')` | [`Rnn::gru`], [`Rnn::rnn`] with [`RnnConfig::nonlinearity`] |
//! | `out, (h_n, c_n) = lstm(x, (h0, c0))` | [`Rnn::forward_with_state`] |
//!
//! The input projection of a whole layer is one product; then each layer direction runs as one
//! fused op (`rnn_layer`, `gru_layer`, `lstm_layer`: f64 values bit for bit the op-by-op
//! graph's, f32 within a few ulp), with the same bits at any number of threads. Between
//! layers, in training with `dropout > 0`, the layer's output `[T, B, H·D]` (time-major,
//! whatever `batch_first`) gets a dropout mask drawn as PyTorch draws it.

use crate::autograd::Var;
use crate::lstm_kernel::{self, Out, Simd, fast};
use crate::module::{Forward, Module, Training, Visitor, check_input_dtype, module_error};
use crate::ops::invalid;
use crate::recurrent::{CellKind, layer};
use lockstep_rng::compat::torch as t;
use lockstep_tensor::dispatch::{Guarantee, Impl, Op};
use lockstep_tensor::ops::matmul::{GemmFloat, PackedB, gemm, gemm_packed_b};
use lockstep_tensor::threads::Par;
use lockstep_tensor::{DType, Result, Tensor};

/// Which recurrence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `nn.RNN(nonlinearity='tanh')`.
    RnnTanh,
    /// `nn.RNN(nonlinearity='relu')`.
    RnnRelu,
    /// `nn.GRU`: gates r, z, n.
    Gru,
    /// `nn.LSTM`: gates i, f, g, o.
    Lstm,
}

impl Mode {
    fn gates(self) -> usize {
        match self {
            Mode::RnnTanh | Mode::RnnRelu => 1,
            Mode::Gru => 3,
            Mode::Lstm => 4,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Mode::RnnTanh | Mode::RnnRelu => "RNN",
            Mode::Gru => "GRU",
            Mode::Lstm => "LSTM",
        }
    }
}

/// The constructor arguments of `nn.RNN` / `nn.GRU` / `nn.LSTM`, PyTorch's defaults by
/// [`RnnConfig::new`].
#[derive(Clone, Debug, PartialEq)]
pub struct RnnConfig {
    /// Features per time step.
    pub input_size: usize,
    /// Features of the hidden state.
    pub hidden_size: usize,
    /// Stacked layers (default 1).
    pub num_layers: usize,
    /// Whether the layers have biases (default true).
    pub bias: bool,
    /// Input and output as `[B, T, F]` instead of `[T, B, F]` (default false).
    pub batch_first: bool,
    /// Dropout on the outputs of every layer but the last, in training (default 0).
    pub dropout: f64,
    /// Run each layer in both directions (default false).
    pub bidirectional: bool,
    /// `"tanh"` (default) or `"relu"`, for [`Rnn::rnn`] only.
    pub nonlinearity: String,
}

impl RnnConfig {
    /// `input_size` and `hidden_size` with every other option at PyTorch's default.
    pub fn new(input_size: usize, hidden_size: usize) -> Self {
        Self {
            input_size,
            hidden_size,
            num_layers: 1,
            bias: true,
            batch_first: false,
            dropout: 0.0,
            bidirectional: false,
            nonlinearity: "tanh".into(),
        }
    }
}

/// One direction of one layer: `weight_ih`, `weight_hh`, `bias_ih`, `bias_hh`.
struct Cell {
    w_ih: Var,
    w_hh: Var,
    b_ih: Option<Var>,
    b_hh: Option<Var>,
    suffix: String,
}

/// A recurrent network (`nn.RNN`, `nn.GRU`, `nn.LSTM`).
pub struct Rnn {
    mode: Mode,
    cfg: RnnConfig,
    cells: Vec<Cell>,
    training: Training,
}

/// What [`Rnn::forward_with_state`] returns: the output and the final states.
pub struct RnnOutput {
    /// `[T, B, D·H]` (or `[B, T, D·H]` with `batch_first`).
    pub output: Var,
    /// `[L·D, B, H]`.
    pub h_n: Var,
    /// `[L·D, B, H]` (LSTM only).
    pub c_n: Option<Var>,
}

impl Rnn {
    /// `nn.RNN(…)`; `cfg.nonlinearity` is `"tanh"` or `"relu"`.
    ///
    /// # Errors
    /// As [`new`](Self::new), and an unknown nonlinearity.
    #[allow(clippy::self_named_constructors)] // `nn.RNN`, beside `gru` and `lstm`
    pub fn rnn(cfg: RnnConfig) -> Result<Self> {
        let mode = match cfg.nonlinearity.as_str() {
            "tanh" => Mode::RnnTanh,
            "relu" => Mode::RnnRelu,
            other => {
                return Err(invalid(
                    "RNN",
                    "nonlinearity",
                    format!("Unknown nonlinearity '{other}'. Select from 'tanh' or 'relu'."),
                ));
            }
        };
        Self::new(mode, cfg)
    }

    /// `nn.GRU(…)`.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn gru(cfg: RnnConfig) -> Result<Self> {
        Self::new(Mode::Gru, cfg)
    }

    /// `nn.LSTM(…)`.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn lstm(cfg: RnnConfig) -> Result<Self> {
        Self::new(Mode::Lstm, cfg)
    }

    /// Any recurrence, initialised as PyTorch: every parameter, in registration order,
    /// `uniform_(−1/√H, 1/√H)` from the default generator.
    ///
    /// # Errors
    /// Zero hidden size or layers, `dropout` outside `[0, 1]`, sizes that overflow.
    pub fn new(mode: Mode, cfg: RnnConfig) -> Result<Self> {
        register_ops();
        let op = mode.name();
        if cfg.hidden_size == 0 || cfg.num_layers == 0 {
            return Err(invalid(
                op,
                "hidden_size",
                "hidden_size and num_layers must be greater than 0",
            ));
        }
        if !(0.0..=1.0).contains(&cfg.dropout) {
            return Err(invalid(
                op,
                "dropout",
                format!(
                    "dropout should be a number in range [0, 1] representing the probability of an element being zeroed, got {}",
                    cfg.dropout
                ),
            ));
        }
        let (h, g) = (cfg.hidden_size, mode.gates());
        let dirs = if cfg.bidirectional { 2 } else { 1 };
        let too_big = || invalid(op, "hidden_size", "sizes too large");
        let gh = g.checked_mul(h).ok_or_else(too_big)?;
        let stdv = 1.0 / (h as f64).sqrt();
        let mut rng = lockstep_rng::default_generator();
        let mut draw = |shape: &[usize]| -> Result<Var> {
            let n = shape
                .iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .filter(|&n| n <= isize::MAX as usize / 8)
                .ok_or_else(too_big)?;
            let mut v = vec![0f32; n];
            t::uniform_(&mut rng, &mut v, -stdv, stdv)?;
            Ok(Var::new(Tensor::from_vec(v, shape)?, true))
        };
        let mut cells = Vec::new();
        for l in 0..cfg.num_layers {
            let inp = if l == 0 { cfg.input_size } else { h * dirs };
            for d in 0..dirs {
                let w_ih = draw(&[gh, inp])?;
                let w_hh = draw(&[gh, h])?;
                let (b_ih, b_hh) = if cfg.bias {
                    (Some(draw(&[gh])?), Some(draw(&[gh])?))
                } else {
                    (None, None)
                };
                cells.push(Cell {
                    w_ih,
                    w_hh,
                    b_ih,
                    b_hh,
                    suffix: format!("_l{l}{}", if d == 1 { "_reverse" } else { "" }),
                });
            }
        }
        Ok(Self {
            mode,
            cfg,
            cells,
            training: Training::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RnnConfig {
        &self.cfg
    }

    fn describe(&self) -> String {
        format!(
            "{}({}, {}, num_layers={})",
            self.mode.name(),
            self.cfg.input_size,
            self.cfg.hidden_size,
            self.cfg.num_layers
        )
    }

    /// The full forward pass: `x` is `[T, B, F]` (`[B, T, F]` with `batch_first`) or an
    /// unbatched `[T, F]`; `h0` (and `c0` for an LSTM) `[L·D, B, H]`, zeros when `None`.
    ///
    /// # Errors
    /// Inputs or states of the wrong shape (the error names the module and the shapes; a
    /// wrong state names the argument `hx`, as PyTorch's), an LSTM given `h0` without `c0`
    /// or `c0` without `h0` (PyTorch takes both or neither).
    pub fn forward_with_state(
        &self,
        x: &Var,
        h0: Option<&Var>,
        c0: Option<&Var>,
    ) -> Result<RnnOutput> {
        let c = &self.cfg;
        let (h, dirs) = (c.hidden_size, if c.bidirectional { 2 } else { 1 });
        let unbatched = x.ndim() == 2;
        if !(x.ndim() == 3 || unbatched) || x.shape()[x.ndim() - 1] != c.input_size {
            return Err(module_error(
                self.describe(),
                format!(
                    "expected input of shape {} with {} features, got {:?}",
                    if c.batch_first {
                        "[B, T, F]"
                    } else {
                        "[T, B, F]"
                    },
                    c.input_size,
                    x.shape().to_vec()
                ),
            ));
        }
        check_input_dtype(|| self.describe(), x, &self.cells[0].w_ih)?;
        if c0.is_some() && self.mode != Mode::Lstm {
            return Err(hx_error(
                self.describe(),
                "only an LSTM has a cell state; pass c0 = None",
            ));
        }
        if x.shape()[if c.batch_first && !unbatched { 1 } else { 0 }] == 0 {
            return Err(module_error(
                self.describe(),
                format!(
                    "Expected sequence length to be larger than 0 in RNN, got input {:?}",
                    x.shape().to_vec()
                ),
            ));
        }
        // Time-major [T, B, F].
        let mut seq = if unbatched {
            x.unsqueeze(1)?
        } else if c.batch_first {
            x.transpose(0, 1)?
        } else {
            x.clone()
        };
        let (steps, batch) = (seq.shape()[0], seq.shape()[1]);
        let state_shape = [c.num_layers * dirs, batch, h];
        let init = |s: Option<&Var>, what: &str| -> Result<Option<Var>> {
            let Some(s) = s else { return Ok(None) };
            let s = if unbatched {
                s.unsqueeze(1)?
            } else {
                s.clone()
            };
            if s.shape() != state_shape || s.dtype() != x.dtype() {
                return Err(hx_error(
                    self.describe(),
                    format!(
                        "expected {what} of shape {state_shape:?} and dtype {:?}, got {:?} ({:?})",
                        x.dtype(),
                        s.shape().to_vec(),
                        s.dtype()
                    ),
                ));
            }
            Ok(Some(s))
        };
        let (h0, c0) = (init(h0, "hidden state")?, init(c0, "cell state")?);
        if self.mode == Mode::Lstm && h0.is_some() != c0.is_some() {
            // PyTorch takes `(h0, c0)` or neither; one alone is an error, not a zero state.
            return Err(hx_error(
                self.describe(),
                format!(
                    "an LSTM takes both h0 and c0 or neither, got only {}",
                    if h0.is_some() { "h0" } else { "c0" }
                ),
            ));
        }
        let zeros = Var::constant(Tensor::zeros(&[batch, h], x.dtype())?);
        let mut h_n = Vec::new();
        let mut c_n = Vec::new();
        for l in 0..c.num_layers {
            let mut outs = Vec::with_capacity(dirs);
            for d in 0..dirs {
                let k = l * dirs + d;
                let cell = &self.cells[k];
                let hs = match &h0 {
                    Some(s) => s.select(0, k)?,
                    None => zeros.clone(),
                };
                let cs = match &c0 {
                    Some(s) => s.select(0, k)?,
                    None => zeros.clone(),
                };
                let (out, hl, cl) = self.run_direction(cell, &seq, hs, cs, d == 1, steps)?;
                outs.push(out);
                h_n.push(hl);
                c_n.push(cl);
            }
            seq = if dirs == 1 {
                outs.pop().expect("one direction")
            } else {
                Var::cat(&outs, 2)?
            };
            if self.training.get() && c.dropout > 0.0 && l + 1 < c.num_layers {
                seq = crate::rng::dropout_batch_dim(&seq, c.dropout, true, 1)?;
            }
        }
        let mut output = seq;
        let mut hn = Var::stack(&h_n, 0)?;
        let mut cn = if self.mode == Mode::Lstm {
            Some(Var::stack(&c_n, 0)?)
        } else {
            None
        };
        if unbatched {
            output = output.squeeze(1)?;
            hn = hn.squeeze(1)?;
            cn = cn.map(|c| c.squeeze(1)).transpose()?;
        } else if c.batch_first {
            output = output.transpose(0, 1)?;
        }
        Ok(RnnOutput {
            output,
            h_n: hn,
            c_n: cn,
        })
    }

    /// One direction of one layer over `seq` `[T, B, F]`: `(outputs [T, B, H], h_T, c_T)`.
    fn run_direction(
        &self,
        cell: &Cell,
        seq: &Var,
        h: Var,
        c: Var,
        reverse: bool,
        steps: usize,
    ) -> Result<(Var, Var, Var)> {
        // The input projection of every step at once: [T, B, G·H].
        let xw = if self.mode == Mode::Lstm {
            crate::lstm_input::project(seq, &cell.w_ih, cell.b_ih.as_ref())?
        } else {
            seq.linear(&cell.w_ih, cell.b_ih.as_ref())?
        };
        let order: Vec<usize> = if reverse {
            (0..steps).rev().collect()
        } else {
            (0..steps).collect()
        };
        let kind = match self.mode {
            Mode::Lstm => return lstm_fused(cell, &xw, &h, &c, &order),
            Mode::Gru => CellKind::Gru,
            Mode::RnnTanh => CellKind::Tanh,
            Mode::RnnRelu => CellKind::Relu,
        };
        let (y, h) = layer(kind, &xw, &cell.w_hh, cell.b_hh.as_ref(), &h, &order)?;
        Ok((y, h, c))
    }
}

impl Forward for Rnn {
    /// The output only (`out, _ = lstm(x)`); [`Rnn::forward_with_state`] takes and returns
    /// the states.
    fn forward(&self, x: &Var) -> Result<Var> {
        Ok(self.forward_with_state(x, None, None)?.output)
    }
}

impl Module for Rnn {
    fn visit(&self, v: &mut dyn Visitor) {
        for c in &self.cells {
            v.param(&format!("weight_ih{}", c.suffix), &c.w_ih);
            v.param(&format!("weight_hh{}", c.suffix), &c.w_hh);
            if let Some(b) = &c.b_ih {
                v.param(&format!("bias_ih{}", c.suffix), b);
            }
            if let Some(b) = &c.b_hh {
                v.param(&format!("bias_hh{}", c.suffix), b);
            }
        }
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// The float types the fused recurrent layers run in.
pub(crate) trait Real:
    GemmFloat
    + core::ops::Sub<Output = Self>
    + core::ops::Div<Output = Self>
    + core::ops::Neg<Output = Self>
{
    /// `tanh` of every element of `v`, in place.
    fn tanh_all(v: &mut [Self]);
    /// `1 / (1 + exp(−x))` of every element of `v`, in place.
    fn sigmoid_all(v: &mut [Self]);
    fn tanh(self) -> Self;
}

/// f64 (gradient checks, goldens): the portable `lockstep_tensor::math` functions, as the unfused ops.
impl Real for f64 {
    fn tanh_all(v: &mut [Self]) {
        v.iter_mut()
            .for_each(|x| *x = lockstep_tensor::math::tanh(*x));
    }
    fn sigmoid_all(v: &mut [Self]) {
        v.iter_mut()
            .for_each(|x| *x = lockstep_tensor::math::sigmoid(*x));
    }
    #[inline(always)]
    fn tanh(self) -> Self {
        lockstep_tensor::math::tanh(self)
    }
}

/// f32 (training): vectorised polynomial `exp`/`tanh` (see [`fast`]), a few ulp from the C
/// library's, where the scalar calls were a fifth of an LSTM training step.
impl Real for f32 {
    fn tanh_all(v: &mut [Self]) {
        fast::map(v, fast::tanh);
    }
    fn sigmoid_all(v: &mut [Self]) {
        fast::map(v, fast::sigmoid);
    }
    #[inline(always)]
    fn tanh(self) -> Self {
        fast::tanh(self)
    }
}

/// The fused layer's inputs, contiguous: `xw` `[T, B, 4H]` (the input projection with
/// `bias_ih`), `w` = `W_hh` `[4H, H]`, `b` = `b_hh` `[4H]`, `h0` and `c0` `[B, H]`; step `k`
/// handles time `order[k]`.
struct LayerIn {
    xw: Tensor,
    w: Tensor,
    b: Option<Tensor>,
    h0: Tensor,
    c0: Tensor,
    order: Vec<usize>,
}

impl LayerIn {
    /// `(T, B, H)`.
    fn dims(&self) -> (usize, usize, usize) {
        let s = self.xw.shape();
        (s[0], s[1], s[2] / 4)
    }
}

/// The forward's saved values in either float type.
enum SavedAny {
    F32(Saved<f32>),
    F64(Saved<f64>),
}

impl Drop for SavedAny {
    fn drop(&mut self) {
        // The next step allocates the same sizes: keep the storage on this thread.
        if let SavedAny::F32(s) = self {
            for v in [&mut s.acts, &mut s.cs, &mut s.tcs, &mut s.hprev] {
                lstm_kernel::recycle(core::mem::take(v));
            }
        }
    }
}

/// An implementation of the fused layer's forward: the value `[T + 1, B, H]` (outputs by time,
/// then the last cell state) and what the backward needs.
type ForwardFn = fn(&LayerIn, &Par) -> Result<(Tensor, SavedAny)>;

/// What an implementation of the backward gets.
struct BackwardIn<'a> {
    /// The gradient of the forward's value, contiguous.
    gy: &'a Tensor,
    input: &'a LayerIn,
    saved: &'a SavedAny,
    /// Whether `h0` needs its gradient (the first step's `dG · W_hh`).
    need_h0: bool,
}

/// The gradients of `xw`, `W_hh`, `b_hh` (if any), `h0`, `c0`.
struct Grads {
    dxw: Tensor,
    dw: Tensor,
    db: Option<Tensor>,
    dh0: Tensor,
    dc0: Tensor,
}

/// An implementation of the fused layer's backward.
type BackwardFn = fn(&BackwardIn, &Par) -> Result<Grads>;

/// The fused LSTM layer: one node per direction of a layer instead of ~15 per time step. Both
/// implementations give the same bits (the SIMD one follows the GEMM path's order of operations
/// exactly; see [`lstm_kernel`]) at any number of threads: `lstm_layer.simd` (f32 on x86-64
/// with AVX2+FMA or AVX-512) cuts the batch into row ranges that run through every step on
/// their own threads; `lstm_layer.gemm` (any float type, any CPU) runs each step's product
/// with the blocked GEMM on the calling thread. Pin one with
/// `lockstep_tensor::autotune::with_algorithm`.
static LSTM_LAYER: Op<ForwardFn> = Op {
    name: "lstm_layer",
    impls: &[
        Impl {
            algo: "lstm_layer.simd",
            guarantee: Guarantee::ThreadInvariant,
            f: forward_simd,
        },
        Impl {
            algo: "lstm_layer.gemm",
            guarantee: Guarantee::ThreadInvariant,
            f: forward_gemm,
        },
    ],
};

/// Its backward, the same two ways.
static LSTM_LAYER_BACKWARD: Op<BackwardFn> = Op {
    name: "lstm_layer_backward",
    impls: &[
        Impl {
            algo: "lstm_layer_backward.simd",
            guarantee: Guarantee::ThreadInvariant,
            f: backward_simd,
        },
        Impl {
            algo: "lstm_layer_backward.gemm",
            guarantee: Guarantee::ThreadInvariant,
            f: backward_gemm,
        },
    ],
};

/// Makes the fused layer's algorithm ids known to `autotune` (pins, tuning files) before its
/// first call.
fn register_ops() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        lockstep_tensor::autotune::register(&LSTM_LAYER);
        lockstep_tensor::autotune::register(&LSTM_LAYER_BACKWARD);
    });
    crate::lstm_input::register();
}

/// The fused LSTM, GRU and RNN layers' registrations (for `lockstep verify`'s advice and tools
/// that explain a trace).
pub fn ops() -> Vec<lockstep_tensor::dispatch::OpInfo> {
    let mut v = vec![LSTM_LAYER.info(), LSTM_LAYER_BACKWARD.info()];
    v.extend(crate::lstm_input::infos());
    v.extend(crate::recurrent::infos());
    v
}

/// Whether an implementation runs for this dtype on this CPU.
fn applies(algo: &str, dtype: DType) -> bool {
    !algo.ends_with(".simd") || (dtype == DType::F32 && Simd::detect().is_some())
}

/// What the backward of the fused layer needs, all in processing order (step `k` handles time
/// `order[k]`).
struct Saved<T> {
    /// `[T, B, 4H]`: i, f, g, o after their nonlinearities.
    acts: Vec<T>,
    /// `[T, B, H]`: the cell state after each step.
    cs: Vec<T>,
    /// `[T, B, H]`: its tanh.
    tcs: Vec<T>,
    /// `[T, B, H]`: the hidden state before each step.
    hprev: Vec<T>,
}

/// One direction of an LSTM layer as one differentiable op: `xw` `[T, B, 4H]` (the input
/// projection with `bias_ih`), then per step `gates = xw[t] + (h·W_hhᵀ + b_hh)`,
/// `c = f·c + i·g`, `h = o·tanh(c)` — the same operations, in the same order, as the op-by-op
/// cell, so the forward values are bit for bit those of the unfused graph. The backward
/// recomputes nothing: it walks the steps in reverse with the saved activations, one
/// `[B, 4H]·[4H, H]` product per step for the hidden state's gradient, then `W_hh`'s gradient
/// as one product over all steps (`dGᵀ · H_prev`, K = T·B) and `b_hh`'s as a sum in step order.
/// Traced (`lockstep_tensor::trace`) as `lstm_layer` (the value `[T + 1, B, H]`) and
/// `lstm_layer_backward` (one record per gradient: `xw`, `W_hh`, `b_hh`, `h0`, `c0`).
fn lstm_fused(
    cell: &Cell,
    xw: &Var,
    h0: &Var,
    c0: &Var,
    order: &[usize],
) -> Result<(Var, Var, Var)> {
    let dtype = xw.dtype();
    if !matches!(dtype, DType::F32 | DType::F64) {
        return Err(lockstep_tensor::Error::DType {
            op: "lstm_layer",
            expected: DType::F32,
            got: dtype,
        });
    }
    let input = LayerIn {
        xw: xw.data().try_contiguous()?,
        w: cell.w_hh.data().try_contiguous()?,
        b: cell
            .b_hh
            .as_ref()
            .map(|v| v.data().try_contiguous())
            .transpose()?,
        h0: h0.data().try_contiguous()?,
        c0: c0.data().try_contiguous()?,
        order: order.to_vec(),
    };
    let key = format!("{:?}:{dtype:?}", input.xw.shape());
    let (value, saved) = {
        let mut traced = vec![&input.xw, &input.w];
        traced.extend(input.b.as_ref());
        traced.extend([&input.h0, &input.c0]);
        LSTM_LAYER
            .tuned(&key)
            .applies(&|i| applies(i.algo, dtype))
            .run(&traced, |imp, par| (imp.f)(&input, par))?
    };
    let mut inputs = vec![xw, &cell.w_hh];
    inputs.extend(cell.b_hh.as_ref());
    inputs.extend([h0, c0]);
    let (need_h0, need_c0) = (h0.requires_grad(), c0.requires_grad());
    let steps = order.len();
    let last = *order.last().expect("at least one step");
    let y = Var::from_op("lstm_layer", value, &inputs, move |gy| {
        let gy = gy.try_contiguous()?;
        let bin = BackwardIn {
            gy: &gy,
            input: &input,
            saved: &saved,
            need_h0,
        };
        // Traced once per gradient.
        LSTM_LAYER_BACKWARD
            .tuned(&key)
            .applies(&|i| applies(i.algo, dtype))
            .run(&[&gy], |imp, par| {
                let g = (imp.f)(&bin, par)?;
                let mut out = vec![Some(g.dxw), Some(g.dw)];
                if let Some(db) = g.db {
                    out.push(Some(db));
                }
                out.push(need_h0.then_some(g.dh0));
                out.push(need_c0.then_some(g.dc0));
                Ok(out)
            })
    });
    let outs = y.narrow(0, 0, steps)?;
    let h_last = y.select(0, last)?;
    let c_last = y.select(0, steps)?;
    Ok((outs, h_last, c_last))
}

/// Runs `f(r0, r1)` over row ranges covering `0..rows`: on the calling thread, or cut into one
/// range per thread when `work` (multiply-adds) is large enough to pay for the hop: from 2^19,
/// ~10 µs of one core, which takes in the first layer's projections (2^20 at H = 128; the
/// two-thread LSTM step 1.5 % faster than from 2^21). [`Par::run_parts`]: the caller works
/// beside standing helpers, no sleep and wake per region. The ranges are the same whoever runs
/// them and never change the bits: each row is computed alone.
pub(crate) fn for_row_ranges(par: &Par, rows: usize, work: usize, f: impl Fn(usize, usize) + Sync) {
    let parts = par.threads().min(rows);
    if parts <= 1 || work < 1 << 19 {
        f(0, rows);
        return;
    }
    par.run_parts(parts, |p| f(p * rows / parts, (p + 1) * rows / parts));
}

/// `lstm_layer.simd`: the f32 forward of [`lstm_kernel`].
fn forward_simd(x: &LayerIn, par: &Par) -> Result<(Tensor, SavedAny)> {
    let simd = Simd::detect().ok_or_else(|| {
        invalid(
            "lstm_layer",
            "algorithm",
            "lstm_layer.simd needs AVX2+FMA or AVX-512",
        )
    })?;
    let (steps, b, hd) = x.dims();
    let (g4, bh) = (4 * hd, b * hd);
    let (xs, w) = (x.xw.data::<f32>()?, x.w.data::<f32>()?);
    let bias = x.b.as_ref().map(|t| t.data::<f32>()).transpose()?;
    let (h0, c0) = (x.h0.data::<f32>()?, x.c0.data::<f32>()?);
    let work = steps * b * hd * g4;
    let (wt, finite) = lstm_kernel::pack_forward(simd, w, hd, par, work)?;
    let mut sv = Saved {
        acts: lstm_kernel::scratch(steps * b * g4)?,
        cs: lstm_kernel::scratch(steps * bh)?,
        tcs: lstm_kernel::scratch(steps * bh)?,
        hprev: lstm_kernel::scratch(steps * bh)?,
    };
    // Every element is written by the steps (outputs, then the last cell state).
    let mut y = uninit("lstm_layer", (steps + 1) * bh)?;
    let f = lstm_kernel::Forward {
        steps,
        batch: b,
        hidden: hd,
        xw: xs,
        wt: &wt,
        bias,
        h0,
        c0,
        order: &x.order,
        skip_first: finite && lstm_kernel::all_zero(h0),
        acts: Out(sv.acts.as_mut_ptr()),
        cs: Out(sv.cs.as_mut_ptr()),
        tcs: Out(sv.tcs.as_mut_ptr()),
        hprev: Out(sv.hprev.as_mut_ptr()),
        y: Out(y.as_mut_ptr()),
    };
    for_row_ranges(par, b, work, |r0, r1| {
        lstm_kernel::forward_rows(simd, &f, r0, r1)
    });
    // SAFETY: every row of every step and of the last slot was written.
    unsafe { y.set_len((steps + 1) * bh) };
    Ok((Tensor::from_vec(y, &[steps + 1, b, hd])?, SavedAny::F32(sv)))
}

/// `lstm_layer_backward.simd`: the f32 backward of [`lstm_kernel`].
fn backward_simd(a: &BackwardIn, par: &Par) -> Result<Grads> {
    let simd = Simd::detect().ok_or_else(|| {
        invalid(
            "lstm_layer_backward",
            "algorithm",
            "lstm_layer_backward.simd needs AVX2+FMA or AVX-512",
        )
    })?;
    let SavedAny::F32(sv) = a.saved else {
        return Err(lockstep_tensor::Error::DType {
            op: "lstm_layer_backward",
            expected: DType::F32,
            got: DType::F64,
        });
    };
    let x = a.input;
    let (steps, b, hd) = x.dims();
    let (g4, bh) = (4 * hd, b * hd);
    let wfull = x.w.data::<f32>()?;
    let direct = lstm_kernel::direct(simd, hd);
    let q = lstm_kernel::NV * simd.lanes();
    let packed = (!direct)
        .then(|| lstm_kernel::pack_backward(simd, wfull, hd))
        .transpose()?;
    let (w, wks, wts) = match &packed {
        Some(p) => (p.as_slice(), q, g4 * q),
        None => (wfull, hd, q),
    };
    // Every element is written by the steps below (no zeroing).
    let mut dg = uninit("lstm_layer_backward", steps * b * g4)?;
    let mut dh0 = lockstep_tensor::try_filled_vec("lstm_layer_backward", bh, 0f32)?;
    let mut dc0 = lockstep_tensor::try_filled_vec("lstm_layer_backward", bh, 0f32)?;
    let bw = lstm_kernel::Backward {
        steps,
        batch: b,
        hidden: hd,
        gy: a.gy.data::<f32>()?,
        w,
        wks,
        wts,
        acts: &sv.acts,
        cs: &sv.cs,
        tcs: &sv.tcs,
        c0: x.c0.data::<f32>()?,
        order: &x.order,
        need_h0: a.need_h0,
        dg: Out(dg.as_mut_ptr()),
        dh0: Out(dh0.as_mut_ptr()),
        dc0: Out(dc0.as_mut_ptr()),
    };
    for_row_ranges(par, b, steps * b * hd * g4, |r0, r1| {
        lstm_kernel::backward_rows(simd, &bw, r0, r1)
    });
    // SAFETY: the steps wrote all `steps·b·g4` elements (every row of every step).
    unsafe { dg.set_len(steps * b * g4) };
    // The first step's rows add +0.0 to W_hh's gradient when h_prev is zero (and dG finite).
    let skip = usize::from(
        lstm_kernel::all_zero(&sv.hprev[..bh]) && lstm_kernel::all_finite(&dg[..b * g4]),
    );
    let (dw, db) = if direct {
        let mut dw = uninit("lstm_layer_backward", g4 * hd)?;
        let out = Out(dw.as_mut_ptr());
        // b_hh's gradient beside it, the same columns of dG: each element the sum of its
        // column over every row in processing order from +0.0, as `weight_grads`.
        let mut db =
            x.b.as_ref()
                .map(|_| lockstep_tensor::try_filled_vec("lstm_layer_backward", g4, 0f32))
                .transpose()?;
        let dbo = db.as_mut().map(|d| Out(d.as_mut_ptr()));
        let (dgs, hps) = (&dg[skip * b * g4..], &sv.hprev[skip * bh..]);
        let dga = &dg[..];
        // Blocks of DW_ROWS rows of W_hh's gradient per thread: each element is one chain
        // whoever computes it.
        let blocks = g4.div_ceil(lstm_kernel::DW_ROWS);
        for_row_ranges(par, blocks, (steps - skip) * b * g4 * hd, |p0, p1| {
            let (i0, i1) = (
                p0 * lstm_kernel::DW_ROWS,
                (p1 * lstm_kernel::DW_ROWS).min(g4),
            );
            // SAFETY: the ranges are disjoint; `dw` holds g4·hd elements.
            unsafe { lstm_kernel::weight_grad_rows(simd, dgs, hps, hd, out, i0, i1) }
            if let Some(dbo) = dbo {
                // SAFETY: elements i0..i1 of the g4 are this range's.
                let d = unsafe { core::slice::from_raw_parts_mut(dbo.at(i0), i1 - i0) };
                for row in dga.chunks_exact(g4) {
                    for (d, &v) in d.iter_mut().zip(&row[i0..i1]) {
                        *d += v;
                    }
                }
            }
        });
        // SAFETY: the ranges cover every row, each written whole.
        unsafe { dw.set_len(g4 * hd) };
        (Some(dw), db)
    } else {
        (None, None)
    };
    let (dxw, dw, db) = weight_grads(dg, &sv.hprev, x, skip, dw, db, par)?;
    Ok(Grads {
        dxw,
        dw,
        db,
        dh0: Tensor::from_vec(dh0, &[b, hd])?,
        dc0: Tensor::from_vec(dc0, &[b, hd])?,
    })
}

/// An empty vector with room for `n` elements, which the caller writes through its pointer
/// before `set_len`.
///
/// # Errors
/// `OutOfMemory` if the allocation fails.
pub(crate) fn uninit(op: &'static str, n: usize) -> Result<Vec<f32>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| lockstep_tensor::Error::OutOfMemory {
            op,
            bytes: n as u128 * 4,
        })?;
    Ok(v)
}

/// From the gates' gradients `dg` (processing order): `xw`'s gradient (time order), `W_hh`'s
/// (`Σ_k dG_kᵀ · h_{k-1}`, one product with K = T·B, from step `skip` on: the steps before add
/// `+0.0`) and `b_hh`'s (a sum in processing order); `dw` and `db`, when given, were already
/// computed with the same bits.
fn weight_grads<T: Real>(
    dg: Vec<T>,
    hprev: &[T],
    x: &LayerIn,
    skip: usize,
    dw: Option<Vec<T>>,
    db: Option<Vec<T>>,
    par: &Par,
) -> Result<(Tensor, Tensor, Option<Tensor>)> {
    let (steps, b, hd) = x.dims();
    let (g4, bh) = (4 * hd, b * hd);
    let dw = match dw {
        Some(dw) => dw,
        None => {
            let mut dw = lockstep_tensor::try_filled_vec("lstm_layer_backward", g4 * hd, T::ZERO)?;
            gemm(
                g4,
                hd,
                (steps - skip) * b,
                &dg[skip * b * g4..],
                (1, g4),
                &hprev[skip * bh..],
                (hd, 1),
                &mut dw,
                (hd, 1),
                par,
            )?;
            dw
        }
    };
    let db = match (x.b.as_ref(), db) {
        (Some(_), Some(db)) => Some(Tensor::from_vec(db, &[g4])?),
        (Some(_), None) => {
            let mut db = lockstep_tensor::try_filled_vec("lstm_layer_backward", g4, T::ZERO)?;
            for row in dg.chunks(g4) {
                for (d, &v) in db.iter_mut().zip(row) {
                    *d = *d + v;
                }
            }
            Some(Tensor::from_vec(db, &[g4])?)
        }
        (None, _) => None,
    };
    // In time order: the forward direction's processing order already is.
    let order = &x.order;
    let dxw = if order.iter().enumerate().all(|(k, &s)| k == s) {
        dg
    } else {
        let mut dxw = lockstep_tensor::try_filled_vec("lstm_layer_backward", dg.len(), T::ZERO)?;
        for (k, &s) in order.iter().enumerate() {
            dxw[s * b * g4..(s + 1) * b * g4].copy_from_slice(&dg[k * b * g4..(k + 1) * b * g4]);
        }
        dxw
    };
    Ok((
        Tensor::from_vec(dxw, &[steps, b, g4])?,
        Tensor::from_vec(dw, &[g4, hd])?,
        db,
    ))
}

/// `lstm_layer.gemm`.
fn forward_gemm(x: &LayerIn, par: &Par) -> Result<(Tensor, SavedAny)> {
    Ok(match x.xw.dtype() {
        DType::F32 => {
            let (v, s) = forward_gemm_t::<f32>(x, par)?;
            (v, SavedAny::F32(s))
        }
        _ => {
            let (v, s) = forward_gemm_t::<f64>(x, par)?;
            (v, SavedAny::F64(s))
        }
    })
}

/// `lstm_layer_backward.gemm`.
fn backward_gemm(a: &BackwardIn, par: &Par) -> Result<Grads> {
    match a.saved {
        SavedAny::F32(s) => backward_gemm_t::<f32>(a, s, par),
        SavedAny::F64(s) => backward_gemm_t::<f64>(a, s, par),
    }
}

/// `Wᵀ` (`W` `[g, h]`, row-major) packed as the B operand of `h·Wᵀ` products: dense `[h, g]`
/// first, in 16×16 tiles (the product packs rows of it with plain copies; packing the
/// transposed view gathers one element at a time, as slow as the product itself, and element
/// by element the strided side cost as much as a step's math), then packed once for all steps
/// in the product's own layout, so the bits are `gemm`'s.
///
/// # Errors
/// `OutOfMemory` if the buffers cannot be allocated.
pub(crate) fn packed_transpose<T: Real>(w: &[T], g: usize, h: usize) -> Result<PackedB<T>> {
    let mut wt = lockstep_tensor::try_filled_vec("rnn", g * h, T::ZERO)?;
    for j0 in (0..g).step_by(16) {
        for p0 in (0..h).step_by(16) {
            for j in j0..(j0 + 16).min(g) {
                for p in p0..(p0 + 16).min(h) {
                    wt[p * g + j] = w[j * h + p];
                }
            }
        }
    }
    PackedB::new(h, g, &wt, (g, 1))
}

/// [`for_row_ranges`] for work that can fail: the first error any range returns (the others
/// still run to their end).
///
/// # Errors
/// The first error of a range.
pub(crate) fn try_row_ranges(
    par: &Par,
    rows: usize,
    work: usize,
    f: impl Fn(usize, usize) -> Result<()> + Sync,
) -> Result<()> {
    let failed = std::sync::Mutex::new(None);
    for_row_ranges(par, rows, work, |r0, r1| {
        if let Err(e) = f(r0, r1) {
            failed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert(e);
        }
    });
    match failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The GEMM path's forward: per step one `[B, H]·[H, 4H]` product (W_hhᵀ packed once), then
/// the gates row by row.
fn forward_gemm_t<T: Real>(x: &LayerIn, par: &Par) -> Result<(Tensor, Saved<T>)> {
    let (steps, b, hd) = x.dims();
    let (g4, bh) = (4 * hd, b * hd);
    let (xs_all, w) = (x.xw.data::<T>()?, x.w.data::<T>()?);
    let bias = x.b.as_ref().map(|t| t.data::<T>()).transpose()?;
    let wt = packed_transpose(w, g4, hd)?;
    let mut sv = Saved {
        acts: vec![T::ZERO; steps * b * g4],
        cs: vec![T::ZERO; steps * bh],
        tcs: vec![T::ZERO; steps * bh],
        hprev: vec![T::ZERO; steps * bh],
    };
    let mut y = vec![T::ZERO; (steps + 1) * bh];
    let mut mm = vec![T::ZERO; b * g4];
    let mut h = x.h0.data::<T>()?.to_vec();
    let mut c = x.c0.data::<T>()?.to_vec();
    for (k, &s) in x.order.iter().enumerate() {
        sv.hprev[k * bh..(k + 1) * bh].copy_from_slice(&h);
        gemm_packed_b(b, &h, (hd, 1), &wt, &mut mm, (g4, 1), par)?;
        let xs = &xs_all[s * b * g4..(s + 1) * b * g4];
        let a = &mut sv.acts[k * b * g4..(k + 1) * b * g4];
        for r in 0..b {
            let (ar, xr, mr) = (
                &mut a[r * g4..(r + 1) * g4],
                &xs[r * g4..(r + 1) * g4],
                &mm[r * g4..(r + 1) * g4],
            );
            match bias {
                Some(bb) => {
                    for (((d, &x), &m), &bv) in ar.iter_mut().zip(xr).zip(mr).zip(bb) {
                        *d = x + (m + bv);
                    }
                }
                None => {
                    for ((d, &x), &m) in ar.iter_mut().zip(xr).zip(mr) {
                        *d = x + m;
                    }
                }
            }
            T::sigmoid_all(&mut ar[..2 * hd]);
            T::tanh_all(&mut ar[2 * hd..3 * hd]);
            T::sigmoid_all(&mut ar[3 * hd..]);
            let ar = &a[r * g4..(r + 1) * g4];
            for j in 0..hd {
                let (i, f, g, o) = (ar[j], ar[hd + j], ar[2 * hd + j], ar[3 * hd + j]);
                let e = r * hd + j;
                let cn = f * c[e] + i * g;
                let tc = cn.tanh();
                c[e] = cn;
                h[e] = o * tc;
                sv.cs[k * bh + e] = cn;
                sv.tcs[k * bh + e] = tc;
            }
        }
        y[s * bh..(s + 1) * bh].copy_from_slice(&h);
    }
    y[steps * bh..].copy_from_slice(&c);
    Ok((Tensor::from_vec(y, &[steps + 1, b, hd])?, sv))
}

/// The GEMM path's backward: per step (in reverse) the gates' gradients row by row, then one
/// `[B, 4H]·[4H, H]` product for the hidden state's.
fn backward_gemm_t<T: Real>(a: &BackwardIn, sv: &Saved<T>, par: &Par) -> Result<Grads> {
    let x = a.input;
    let (steps, b, hd) = x.dims();
    let (g4, bh) = (4 * hd, b * hd);
    let one = <T as lockstep_tensor::Element>::ONE;
    let gy = a.gy.data::<T>()?;
    let c0 = x.c0.data::<T>()?;
    // W_hh [4H, H] packed once for every step's dG·W_hh.
    let w = PackedB::new(g4, hd, x.w.data::<T>()?, (hd, 1))?;
    let mut dg_all = vec![T::ZERO; steps * b * g4];
    let mut dh = vec![T::ZERO; bh];
    let mut dc = gy[steps * bh..].to_vec();
    for k in (0..steps).rev() {
        let s = x.order[k];
        let gys = &gy[s * bh..(s + 1) * bh];
        let act = &sv.acts[k * b * g4..(k + 1) * b * g4];
        let dg = &mut dg_all[k * b * g4..(k + 1) * b * g4];
        let cprev = if k == 0 {
            c0
        } else {
            &sv.cs[(k - 1) * bh..k * bh]
        };
        let tcs = &sv.tcs[k * bh..(k + 1) * bh];
        for r in 0..b {
            let (ar, dr) = (&act[r * g4..(r + 1) * g4], &mut dg[r * g4..(r + 1) * g4]);
            for j in 0..hd {
                let e = r * hd + j;
                let (i, f, g, o) = (ar[j], ar[hd + j], ar[2 * hd + j], ar[3 * hd + j]);
                let dht = gys[e] + dh[e];
                let tc = tcs[e];
                let dct = dc[e] + (dht * o) * (one - tc * tc);
                dc[e] = dct * f;
                dr[j] = (dct * g) * ((one - i) * i);
                dr[hd + j] = (dct * cprev[e]) * ((one - f) * f);
                dr[2 * hd + j] = (dct * i) * (one - g * g);
                dr[3 * hd + j] = (dht * tc) * ((one - o) * o);
            }
        }
        if k > 0 || a.need_h0 {
            gemm_packed_b(b, dg, (g4, 1), &w, &mut dh, (hd, 1), par)?;
        }
    }
    let (dxw, dw, db) = weight_grads(dg_all, &sv.hprev, x, 0, None, None, par)?;
    Ok(Grads {
        dxw,
        dw,
        db,
        dh0: Tensor::from_vec(dh, &[b, hd])?,
        dc0: Tensor::from_vec(dc, &[b, hd])?,
    })
}

/// An error about the recurrent state argument (`hx` in PyTorch), naming the module.
fn hx_error(module: String, reason: impl Into<String>) -> lockstep_tensor::Error {
    lockstep_tensor::Error::InvalidArgument {
        op: "forward",
        arg: "hx",
        reason: format!("{module}: {}", reason.into()),
    }
}

#[cfg(test)]
mod tests {
    use crate::lstm_kernel::fast;
    use lockstep_tensor::threads::Par;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Every row once, in the ranges `threads` gives, whoever runs them: the calling thread
    /// with the helpers, or the pool while another thread holds the helpers.
    #[test]
    fn row_ranges_cover_every_row_once() {
        let check = || {
            for threads in [1, 2, 3, 8] {
                let par = Par::new(threads);
                for rows in [1, 5, 32, 100] {
                    let seen: Vec<AtomicUsize> = (0..rows).map(|_| AtomicUsize::new(0)).collect();
                    let ranges = AtomicUsize::new(0);
                    super::for_row_ranges(&par, rows, 1 << 22, |r0, r1| {
                        let parts = threads.min(rows);
                        let p = (0..parts)
                            .find(|&p| p * rows / parts == r0)
                            .expect("a range start");
                        assert_eq!(r1, (p + 1) * rows / parts);
                        ranges.fetch_add(1, Ordering::Relaxed);
                        for s in &seen[r0..r1] {
                            s.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                    assert!(seen.iter().all(|s| s.load(Ordering::Relaxed) == 1));
                    assert_eq!(ranges.load(Ordering::Relaxed), threads.min(rows));
                }
            }
        };
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(check);
            }
        });
    }

    #[test]
    fn all_finite_finds_every_infinity_and_nan() {
        use crate::lstm_kernel::all_finite;
        let ok = [
            0.0f32,
            -0.0,
            1.0,
            -f32::MAX,
            f32::MAX,
            f32::MIN_POSITIVE,
            1e-45,
            -1e-45,
        ];
        assert!(all_finite(&ok) && all_finite(&[]));
        for bad in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN] {
            for at in 0..ok.len() {
                let mut v = ok.to_vec();
                v.insert(at, bad);
                assert!(!all_finite(&v), "{bad} at {at}");
            }
        }
        assert!(!all_finite(&[f32::from_bits(0x7fff_ffff)]));
        assert!(!all_finite(&[f32::from_bits(0xff80_0001)]));
    }

    /// Distance in units in the last place between an f32 and the correctly rounded f64 value.
    fn ulps(got: f32, want: f64) -> f64 {
        let w = want as f32;
        if got == w {
            return 0.0;
        }
        let ulp = (f32::from_bits(w.abs().to_bits() + 1) - w.abs()) as f64;
        (got as f64 - want).abs() / ulp
    }

    /// The polynomial-only runs give `tanh`'s bits: runs all below the switch, runs that mix
    /// both forms, NaN, infinities, the switch itself, and a remainder shorter than a run.
    #[test]
    fn tanh_runs_are_tanh_element_by_element() {
        let mut v: Vec<f32> = (0..1000)
            .map(|i| ((i * 7919 % 1000) as f32 / 1000.0 - 0.5) * 1.2)
            .collect();
        for (i, x) in [
            (40, f32::NAN),
            (77, f32::INFINITY),
            (130, -f32::INFINITY),
            (200, fast::TANH_SMALL),
            (201, -fast::TANH_SMALL),
            (300, f32::from_bits(fast::TANH_SMALL.to_bits() - 1)),
            (999, 3.0),
        ] {
            v[i] = x;
        }
        // Some runs of every width entirely below the switch.
        for x in &mut v[400..600] {
            *x *= 0.5;
        }
        let want: Vec<u32> = v.iter().map(|&x| fast::tanh(x).to_bits()).collect();
        macro_rules! widths {
            ($($l:literal),*) => {$({
                let mut got = v.clone();
                fast::tanh_runs::<$l>(&mut got);
                let got: Vec<u32> = got.iter().map(|x| x.to_bits()).collect();
                assert_eq!(got, want, "runs of {}", $l);
            })*};
        }
        widths!(1, 4, 8, 16, 48);
        let want: Vec<u32> = v
            .iter()
            .map(|&x| fast::sigmoid(2.0 * x).to_bits())
            .collect();
        macro_rules! sigmoid_widths {
            ($($l:literal),*) => {$({
                let mut got: Vec<f32> = v.iter().map(|&x| 2.0 * x).collect();
                fast::sigmoid_runs::<$l>(&mut got);
                let got: Vec<u32> = got.iter().map(|x| x.to_bits()).collect();
                assert_eq!(got, want, "sigmoid runs of {}", $l);
            })*};
        }
        sigmoid_widths!(1, 4, 8, 16, 48);
    }

    #[test]
    fn fast_activations_are_within_a_few_ulp() {
        let (mut worst_s, mut worst_t) = (0f64, 0f64);
        let mut x = -30.0f32;
        while x < 30.0 {
            let xd = x as f64;
            worst_s = worst_s.max(ulps(fast::sigmoid(x), 1.0 / (1.0 + (-xd).exp())));
            // Both sides of the switch between the polynomial and the exponential form.
            let xs = x * (fast::SIGMOID_SMALL / 30.0);
            let xsd = xs as f64;
            worst_s = worst_s.max(ulps(fast::sigmoid(xs), 1.0 / (1.0 + (-xsd).exp())));
            worst_t = worst_t.max(ulps(fast::tanh(x), xd.tanh()));
            x += 1.7e-4;
        }
        for &x in &[
            1e-30f32, -1e-8, 1e-3, 0.624, 0.625, 0.626, 8.99, 9.0, 50.0, -100.0,
        ] {
            worst_t = worst_t.max(ulps(fast::tanh(x), (x as f64).tanh()));
        }
        assert!(worst_s <= 4.0, "sigmoid: {worst_s} ulp");
        assert!(worst_t <= 4.0, "tanh: {worst_t} ulp");
        assert!(fast::tanh(f32::NAN).is_nan() && fast::sigmoid(f32::NAN).is_nan());
        assert_eq!(fast::sigmoid(-200.0), 0.0f32.max(fast::sigmoid(-200.0)));
        assert_eq!(fast::tanh(-200.0), -1.0);
        assert_eq!(fast::sigmoid(200.0), 1.0);
    }
}
