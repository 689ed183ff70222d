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
use crate::module::{Forward, Module, Training, Visitor, check_input_dtype, module_error};
use crate::ops::invalid;
use crate::recurrent::{CellKind, layer, lstm_layer};
use lockstep_rng::compat::torch as t;
use lockstep_tensor::{Result, Tensor};

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
            crate::recurrent::project(seq, &cell.w_ih, cell.b_ih.as_ref())?
        } else {
            seq.linear(&cell.w_ih, cell.b_ih.as_ref())?
        };
        let order: Vec<usize> = if reverse {
            (0..steps).rev().collect()
        } else {
            (0..steps).collect()
        };
        let kind = match self.mode {
            Mode::Lstm => {
                return lstm_layer(&xw, &cell.w_hh, cell.b_hh.as_ref(), &h, &c, &order);
            }
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

/// An error about the recurrent state argument (`hx` in PyTorch), naming the module.
fn hx_error(module: String, reason: impl Into<String>) -> lockstep_tensor::Error {
    lockstep_tensor::Error::InvalidArgument {
        op: "forward",
        arg: "hx",
        reason: format!("{module}: {}", reason.into()),
    }
}
