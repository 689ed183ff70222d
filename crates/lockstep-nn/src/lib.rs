//! # lockstep-nn
//!
//! The training layer: reverse-mode autograd ([`Var`]), the layers of `torch.nn` with
//! PyTorch's parameter names and bit-identical default initialisation ([`layers`], [`rnn`]),
//! the functional ops and losses ([`functional`]), optimizers, schedulers and gradient
//! clipping ([`optim`]).
//!
//! Every forward and backward kernel is a tensor op, so deterministic mode covers training:
//! with `use_deterministic_algorithms(true)` a training step gives the same bits at any number
//! of threads. Gradients that meet at one tensor are added in an order fixed by the graph.
//!
//! | PyTorch | lockstep-nn |
//! |---|---|
//! | `torch.tensor(x, requires_grad=True)`, `loss.backward()`, `x.grad` | [`Var::new`], [`Var::backward`], [`Var::grad`] |
//! | `with torch.no_grad():` | [`no_grad`] |
//! | `nn.Module`, `state_dict()`, `load_state_dict()`, `train()`/`eval()` | [`Module`]: parameters, buffers and children listed once in [`Module::visit`]; see [`module`] |
//! | `module(x)` | [`Forward::forward`]; a module with several inputs has its own `forward` |
//! | `nn.Sequential`, `nn.ModuleList`, `nn.ModuleDict` | [`layers::Sequential`], [`ModuleList`], [`ModuleDict`] |
//! | `nn.Linear`, `nn.Conv2d`, `nn.BatchNorm1d/2d`, `nn.LayerNorm`, `nn.Dropout`, `nn.Embedding` | [`layers`] |
//! | `nn.RNN`, `nn.GRU`, `nn.LSTM` | [`rnn::Rnn`] |
//! | `nn.MultiheadAttention`, `nn.TransformerEncoderLayer/DecoderLayer`, `nn.RMSNorm`, `F.scaled_dot_product_attention` | [`transformer`], [`functional::scaled_dot_product_attention`] (PyTorch's init bits and dropout draws) |
//! | `nn.LSTMCell`, `nn.GRUCell`, `nn.RNNCell` | [`cells`] |
//! | `F.cross_entropy`, `F.nll_loss`, `F.mse_loss`, `F.binary_cross_entropy_with_logits` | [`functional`] |
//! | `F.binary_cross_entropy`, `F.l1_loss`, `F.smooth_l1_loss`, `F.huber_loss`, `F.kl_div`, `F.leaky_relu`, `F.silu`, `F.softplus`, `F.conv1d`, `F.conv_transpose2d` | [`functional`] |
//! | `nn.Conv1d`, `nn.ConvTranspose2d`, `nn.LeakyReLU`, `nn.SiLU`, `nn.Softplus`, `nn.Identity` | [`layers`] |
//! | `torch.optim.SGD/Adam/AdamW`, `lr_scheduler.*`, `clip_grad_norm_` | [`optim`] |
//! | `nn.init.kaiming_uniform_(w)`, `xavier_normal_`, `trunc_normal_`, `eye_`, … | [`init`] (same draws as PyTorch) |
//!
//! ```
//! use lockstep_nn::{Forward, Module, Var, functional as F, layers::{Linear, ReLU, Sequential}};
//! use lockstep_tensor::Tensor;
//!
//! lockstep_rng::default_generator().manual_seed(0);          // torch.manual_seed(0)
//! let model = Sequential::new()
//!     .add(Linear::new(4, 8, true)?)
//!     .add(ReLU::default())
//!     .add(Linear::new(8, 3, true)?);
//! let x = Var::constant(Tensor::ones(&[2, 4], lockstep_tensor::DType::F32)?);
//! let y = Tensor::from_vec(vec![0i64, 2], &[2])?;
//! let loss = F::cross_entropy(&model.forward(&x)?, &y)?;
//! loss.backward()?;
//! assert_eq!(model.named_parameters()[0].0, "0.weight");
//! assert!(model.parameters()[0].grad().is_some());
//! # Ok::<(), lockstep_tensor::Error>(())
//! ```

pub mod autograd;
pub mod batch_blocks;
pub mod cells;
mod error;
pub mod functional;
pub mod gradcheck;
pub mod init;
pub mod layers;
pub mod module;
mod ops;
pub mod optim;
mod recurrent;
pub mod rng;
pub mod rnn;
pub mod sync_batch_norm;
pub mod transformer;

pub use autograd::{BackwardOptions, Var, is_grad_enabled, no_grad, set_grad_enabled};
pub use lockstep_tensor::{Error, Result};
pub use module::{Forward, Kind, Module, ModuleDict, ModuleList, Named, Training, Visitor};
pub use ops::{builtin_ops, sum_to};
