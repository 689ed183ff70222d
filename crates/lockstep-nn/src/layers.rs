//! The layers of `torch.nn`, initialised exactly as PyTorch initialises them: after
//! `manual_seed(s)`, constructing the same layers in the same order draws the same numbers
//! from the default generator and gives bit-identical parameters.

use crate::autograd::Var;
use crate::functional as F;
use crate::module::{Forward, Module, Training, Visitor, check_input_dtype, module_error};
use crate::ops::invalid;
use lockstep_rng::Generator;
use lockstep_rng::compat::torch::{self as t, init};
use lockstep_tensor::ops::conv::Conv2dParams;
use lockstep_tensor::ops::pool::Pool2d;
use lockstep_tensor::{DType, Result, Tensor};

fn param(v: Vec<f32>, shape: &[usize]) -> Result<Var> {
    Ok(Var::new(Tensor::from_vec(v, shape)?, true))
}

/// `uniform_(−b, b)` with `b = 1/sqrt(fan_in)` (0 when `fan_in` is 0), PyTorch's bias init.
fn bias_init(g: &mut Generator, n: usize, fan_in: usize) -> Result<Vec<f32>> {
    let bound = if fan_in > 0 {
        1.0 / (fan_in as f64).sqrt()
    } else {
        0.0
    };
    let mut b = vec![0f32; n];
    t::uniform_(g, &mut b, -bound, bound)?;
    Ok(b)
}

/// `nn.Linear(in_features, out_features, bias)`: `y = x·Wᵀ + b`.
pub struct Linear {
    /// `[out, in]`.
    pub weight: Var,
    /// `[out]`.
    pub bias: Option<Var>,
    training: Training,
}

impl Linear {
    /// Initialised from the default generator, as `nn.Linear(in, out, bias)`.
    ///
    /// # Errors
    /// Sizes whose product overflows.
    pub fn new(in_features: usize, out_features: usize, bias: bool) -> Result<Self> {
        Self::with_generator(
            &mut lockstep_rng::default_generator(),
            in_features,
            out_features,
            bias,
        )
    }

    /// Initialised from `g`.
    ///
    /// # Errors
    /// Sizes whose product overflows.
    pub fn with_generator(
        g: &mut Generator,
        in_features: usize,
        out_features: usize,
        bias: bool,
    ) -> Result<Self> {
        in_features
            .checked_mul(out_features)
            .filter(|&n| n <= isize::MAX as usize / 8)
            .ok_or_else(|| {
                invalid(
                    "Linear",
                    "in_features",
                    format!("Linear({in_features}, {out_features}) is too large"),
                )
            })?;
        let (w, b) = init::linear::<f32>(g, in_features, out_features, bias)?;
        Ok(Self {
            weight: param(w, &[out_features, in_features])?,
            bias: match b {
                Some(b) => Some(param(b, &[out_features])?),
                None => None,
            },
            training: Training::default(),
        })
    }

    fn describe(&self) -> String {
        let s = self.weight.shape();
        format!(
            "Linear(in_features={}, out_features={}, bias={})",
            s[1],
            s[0],
            self.bias.is_some()
        )
    }
}

impl Forward for Linear {
    fn forward(&self, x: &Var) -> Result<Var> {
        let i = self.weight.shape()[1];
        if x.ndim() == 0 || x.shape()[x.ndim() - 1] != i {
            return Err(module_error(
                self.describe(),
                format!(
                    "expected input of shape [*, {i}], got {:?}",
                    x.shape().to_vec()
                ),
            ));
        }
        check_input_dtype(|| self.describe(), x, &self.weight)?;
        x.linear(&self.weight, self.bias.as_ref())
    }
}

impl Module for Linear {
    fn visit(&self, v: &mut dyn Visitor) {
        v.param("weight", &self.weight);
        if let Some(b) = &self.bias {
            v.param("bias", b);
        }
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `nn.Conv2d(in, out, kernel_size, stride, padding, dilation, groups, bias)` (f32).
pub struct Conv2d {
    /// `[out, in/groups, kh, kw]`.
    pub weight: Var,
    /// `[out]`.
    pub bias: Option<Var>,
    /// Stride, padding, dilation, groups.
    pub params: Conv2dParams,
    training: Training,
}

impl Conv2d {
    /// `nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding)` with stride 1,
    /// initialised from the default generator.
    ///
    /// # Errors
    /// As [`with_options`](Self::with_options).
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel_size: usize,
        padding: usize,
    ) -> Result<Self> {
        let p = Conv2dParams {
            padding: (padding, padding),
            ..Conv2dParams::default()
        };
        Self::with_options(
            &mut lockstep_rng::default_generator(),
            in_channels,
            out_channels,
            (kernel_size, kernel_size),
            p,
            true,
        )
    }

    /// Every option, initialised from `g` as PyTorch: `kaiming_uniform_(a=√5)` on the weight,
    /// then `uniform_(±1/√fan_in)` on the bias.
    ///
    /// # Errors
    /// Zero groups, channels not divisible by `groups`, sizes that overflow.
    pub fn with_options(
        g: &mut Generator,
        in_channels: usize,
        out_channels: usize,
        kernel: (usize, usize),
        params: Conv2dParams,
        bias: bool,
    ) -> Result<Self> {
        let groups = params.groups;
        if groups == 0
            || !in_channels.is_multiple_of(groups)
            || !out_channels.is_multiple_of(groups)
        {
            return Err(invalid(
                "Conv2d",
                "groups",
                format!(
                    "in_channels ({in_channels}) and out_channels ({out_channels}) must be divisible by groups ({groups})"
                ),
            ));
        }
        let shape = [out_channels, in_channels / groups, kernel.0, kernel.1];
        let n = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .filter(|&n| n <= isize::MAX as usize / 8)
            .ok_or_else(|| invalid("Conv2d", "kernel_size", format!("{shape:?} is too large")))?;
        let mut w = vec![0f32; n];
        init::kaiming_uniform_(
            g,
            &mut w,
            &shape,
            5.0f64.sqrt(),
            init::FanMode::FanIn,
            "leaky_relu",
        )?;
        let fan_in = shape[1] * shape[2] * shape[3];
        let b = if bias {
            Some(param(bias_init(g, out_channels, fan_in)?, &[out_channels])?)
        } else {
            None
        };
        Ok(Self {
            weight: param(w, &shape)?,
            bias: b,
            params,
            training: Training::default(),
        })
    }
}

impl Forward for Conv2d {
    fn forward(&self, x: &Var) -> Result<Var> {
        let s = self.weight.shape();
        let cin = s[1] * self.params.groups;
        let describe = || format!("Conv2d({cin}, {}, kernel_size=({}, {}))", s[0], s[2], s[3]);
        if x.ndim() != 4 || x.shape()[1] != cin {
            return Err(module_error(
                describe(),
                format!(
                    "expected input of shape [N, {cin}, H, W], got {:?}",
                    x.shape().to_vec()
                ),
            ));
        }
        check_input_dtype(describe, x, &self.weight)?;
        F::conv2d(x, &self.weight, self.bias.as_ref(), self.params)
    }
}

impl Module for Conv2d {
    fn visit(&self, v: &mut dyn Visitor) {
        v.param("weight", &self.weight);
        if let Some(b) = &self.bias {
            v.param("bias", b);
        }
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `nn.BatchNorm1d` / `nn.BatchNorm2d`: weight 1, bias 0, running mean 0, running var 1,
/// `num_batches_tracked` 0 (no draws); `eps = 1e-5`, `momentum = 0.1` by default. In training
/// mode inside a [`SyncStep`](crate::sync_batch_norm::SyncStep) the statistics are over all the
/// step's micro-shards, combined in a fixed order (`nn.SyncBatchNorm`'s semantics).
pub struct BatchNorm {
    /// `[C]`, 1 at init.
    pub weight: Var,
    /// `[C]`, 0 at init.
    pub bias: Var,
    /// Buffer `[C]`.
    pub running_mean: Var,
    /// Buffer `[C]`.
    pub running_var: Var,
    /// Buffer, an `i64` scalar.
    pub num_batches_tracked: Var,
    /// Added to the variance.
    pub eps: f64,
    /// Weight of the new statistic in the running average (`momentum=0.1`); `None` for
    /// PyTorch's `momentum=None`, the cumulative average (weight `1/num_batches_tracked`).
    pub momentum: Option<f64>,
    dims: usize,
    training: Training,
}

impl BatchNorm {
    fn new(c: usize, dims: usize) -> Result<Self> {
        Ok(Self {
            weight: Var::new(Tensor::ones(&[c], DType::F32)?, true),
            bias: Var::new(Tensor::zeros(&[c], DType::F32)?, true),
            running_mean: Var::constant(Tensor::zeros(&[c], DType::F32)?),
            running_var: Var::constant(Tensor::ones(&[c], DType::F32)?),
            num_batches_tracked: Var::constant(Tensor::scalar(0i64)),
            eps: 1e-5,
            momentum: Some(0.1),
            dims,
            training: Training::default(),
        })
    }

    /// `nn.BatchNorm1d(num_features)`: input `[N, C]` or `[N, C, L]`.
    ///
    /// # Errors
    /// A size that overflows.
    pub fn new_1d(num_features: usize) -> Result<Self> {
        Self::new(num_features, 1)
    }

    /// `nn.BatchNorm2d(num_features)`: input `[N, C, H, W]`.
    ///
    /// # Errors
    /// A size that overflows.
    pub fn new_2d(num_features: usize) -> Result<Self> {
        Self::new(num_features, 2)
    }
}

impl Forward for BatchNorm {
    fn forward(&self, x: &Var) -> Result<Var> {
        let c = self.weight.shape()[0];
        let ok = match self.dims {
            1 => (x.ndim() == 2 || x.ndim() == 3) && x.shape()[1] == c,
            _ => x.ndim() == 4 && x.shape()[1] == c,
        };
        if !ok {
            let want = if self.dims == 1 {
                format!("[N, {c}] or [N, {c}, L]")
            } else {
                format!("[N, {c}, H, W]")
            };
            return Err(module_error(
                format!("BatchNorm{}d({c})", self.dims),
                format!(
                    "expected input of shape {want}, got {:?}",
                    x.shape().to_vec()
                ),
            ));
        }
        // Inside a micro-shard step (`sync_batch_norm::SyncStep`): statistics over all
        // micro-shards, running statistics updated once per step.
        let training = self.training.get();
        if training
            && let Some(y) = crate::sync_batch_norm::batch_norm_hook(
                x,
                &crate::sync_batch_norm::BatchNormRefs {
                    weight: &self.weight,
                    bias: &self.bias,
                    running_mean: &self.running_mean,
                    running_var: &self.running_var,
                    num_batches_tracked: &self.num_batches_tracked,
                    eps: self.eps,
                    momentum: self.momentum,
                },
            )?
        {
            return Ok(y);
        }
        // As `_BatchNorm.forward`: count the batch, then pick the running average's weight.
        let mut factor = self.momentum.unwrap_or(0.0);
        if training {
            let n = self.num_batches_tracked.data().item::<i64>()? + 1;
            self.num_batches_tracked.set_data(Tensor::scalar(n))?;
            if self.momentum.is_none() {
                factor = 1.0 / n as f64;
            }
        }
        F::batch_norm(
            x,
            Some(&self.running_mean),
            Some(&self.running_var),
            Some(&self.weight),
            Some(&self.bias),
            training,
            factor,
            self.eps,
        )
    }
}

impl Module for BatchNorm {
    fn visit(&self, v: &mut dyn Visitor) {
        v.param("weight", &self.weight);
        v.param("bias", &self.bias);
        v.buffer("running_mean", &self.running_mean);
        v.buffer("running_var", &self.running_var);
        v.buffer("num_batches_tracked", &self.num_batches_tracked);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `nn.LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True)`.
pub struct LayerNorm {
    /// The trailing shape normalised over.
    pub normalized_shape: Vec<usize>,
    /// 1 at init.
    pub weight: Option<Var>,
    /// 0 at init.
    pub bias: Option<Var>,
    /// Added to the variance.
    pub eps: f64,
    training: Training,
}

impl LayerNorm {
    /// `nn.LayerNorm(normalized_shape)` (no draws).
    ///
    /// # Errors
    /// An empty `normalized_shape` or one that overflows.
    pub fn new(normalized_shape: &[usize], elementwise_affine: bool) -> Result<Self> {
        if normalized_shape.is_empty() {
            return Err(invalid(
                "LayerNorm",
                "normalized_shape",
                "normalized_shape must have at least one dimension",
            ));
        }
        let (w, b) = if elementwise_affine {
            (
                Some(Var::new(Tensor::ones(normalized_shape, DType::F32)?, true)),
                Some(Var::new(Tensor::zeros(normalized_shape, DType::F32)?, true)),
            )
        } else {
            (None, None)
        };
        Ok(Self {
            normalized_shape: normalized_shape.to_vec(),
            weight: w,
            bias: b,
            eps: 1e-5,
            training: Training::default(),
        })
    }
}

impl Forward for LayerNorm {
    fn forward(&self, x: &Var) -> Result<Var> {
        F::layer_norm(
            x,
            &self.normalized_shape,
            self.weight.as_ref(),
            self.bias.as_ref(),
            self.eps,
        )
    }
}

impl Module for LayerNorm {
    fn visit(&self, v: &mut dyn Visitor) {
        if let Some(w) = &self.weight {
            v.param("weight", w);
        }
        if let Some(b) = &self.bias {
            v.param("bias", b);
        }
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `nn.Embedding(num_embeddings, embedding_dim, padding_idx)`: weight `normal_(0, 1)` from the
/// default generator, the padding row then zeroed.
pub struct Embedding {
    /// `[num_embeddings, embedding_dim]`.
    pub weight: Var,
    /// The row that gets no gradient.
    pub padding_idx: Option<usize>,
    training: Training,
}

impl Embedding {
    /// As `nn.Embedding(num_embeddings, embedding_dim, padding_idx=padding_idx)`.
    ///
    /// # Errors
    /// `padding_idx` outside `0..num_embeddings`; sizes that overflow.
    pub fn new(
        num_embeddings: usize,
        embedding_dim: usize,
        padding_idx: Option<usize>,
    ) -> Result<Self> {
        if let Some(p) = padding_idx
            && p >= num_embeddings
        {
            return Err(invalid(
                "Embedding",
                "padding_idx",
                format!("Padding_idx {p} must be within num_embeddings ({num_embeddings})"),
            ));
        }
        let n = num_embeddings
            .checked_mul(embedding_dim)
            .filter(|&n| n <= isize::MAX as usize / 8)
            .ok_or_else(|| invalid("Embedding", "embedding_dim", "too large"))?;
        let mut w = vec![0f32; n];
        t::normal_(&mut lockstep_rng::default_generator(), &mut w, 0.0, 1.0)?;
        if let Some(p) = padding_idx {
            w[p * embedding_dim..(p + 1) * embedding_dim].fill(0.0);
        }
        Ok(Self {
            weight: param(w, &[num_embeddings, embedding_dim])?,
            padding_idx,
            training: Training::default(),
        })
    }

    /// Looks up `indices` (`i64`, any shape) → `[*indices.shape, embedding_dim]`.
    ///
    /// # Errors
    /// Non-`i64` indices or one outside the table.
    pub fn lookup(&self, indices: &Tensor) -> Result<Var> {
        F::embedding(indices, &self.weight, self.padding_idx)
    }
}

impl Forward for Embedding {
    /// The input's value holds the indices (`i64`).
    fn forward(&self, x: &Var) -> Result<Var> {
        self.lookup(&x.data())
    }
}

impl Module for Embedding {
    fn visit(&self, v: &mut dyn Visitor) {
        v.param("weight", &self.weight);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `nn.Dropout(p)`: in training, zeroes each element with probability `p` and scales the rest
/// by `1/(1 − p)`, drawing PyTorch's mask from the default generator; the identity in eval.
pub struct Dropout {
    /// The probability of zeroing.
    pub p: f64,
    training: Training,
}

impl Dropout {
    /// `nn.Dropout(p)`.
    ///
    /// # Errors
    /// `p` outside `[0, 1]`.
    pub fn new(p: f64) -> Result<Self> {
        if !(0.0..=1.0).contains(&p) {
            return Err(invalid(
                "Dropout",
                "p",
                format!("dropout probability has to be between 0 and 1, but got {p}"),
            ));
        }
        Ok(Self {
            p,
            training: Training::default(),
        })
    }
}

impl Forward for Dropout {
    fn forward(&self, x: &Var) -> Result<Var> {
        crate::rng::dropout(x, self.p, self.training.get())
    }
}

impl Module for Dropout {
    fn visit(&self, _: &mut dyn Visitor) {}
    fn training(&self) -> &Training {
        &self.training
    }
}

macro_rules! stateless {
    ($($(#[$doc:meta])* $name:ident => |$x:ident, $s:ident| $e:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Debug, Default)]
        pub struct $name { training: Training }
        impl Forward for $name {
            fn forward(&self, $x: &Var) -> Result<Var> {
                let $s = self;
                let _ = $s;
                $e
            }
        }
        impl Module for $name {
            fn visit(&self, _: &mut dyn Visitor) {}
            fn training(&self) -> &Training { &self.training }
        }
    )*};
}

stateless! {
    /// `nn.ReLU()`.
    ReLU => |x, s| x.relu();
    /// `nn.Tanh()`.
    Tanh => |x, s| x.tanh();
    /// `nn.Sigmoid()`.
    Sigmoid => |x, s| x.sigmoid();
}

/// `nn.GELU(approximate='none')` (the exact, erf form; the default) or
/// `nn.GELU(approximate='tanh')`.
#[derive(Clone, Debug, Default)]
pub struct GELU {
    /// Whether the tanh approximation is used (`approximate='tanh'`).
    pub tanh_approximation: bool,
    training: Training,
}

impl GELU {
    /// `nn.GELU(approximate=…)` with `approximate` `"none"` or `"tanh"`.
    ///
    /// # Errors
    /// Any other `approximate`.
    pub fn new(approximate: &str) -> Result<Self> {
        let tanh_approximation = match approximate {
            "none" => false,
            "tanh" => true,
            other => {
                return Err(invalid(
                    "GELU",
                    "approximate",
                    format!("approximate argument must be either none or tanh, got '{other}'"),
                ));
            }
        };
        Ok(Self {
            tanh_approximation,
            training: Training::default(),
        })
    }
}

impl Forward for GELU {
    fn forward(&self, x: &Var) -> Result<Var> {
        if self.tanh_approximation {
            x.gelu_tanh()
        } else {
            x.gelu()
        }
    }
}

impl Module for GELU {
    fn visit(&self, _: &mut dyn Visitor) {}
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `nn.Flatten(start_dim=1, end_dim=-1)`.
#[derive(Clone, Debug)]
pub struct Flatten {
    /// First dimension flattened.
    pub start_dim: isize,
    /// Last dimension flattened.
    pub end_dim: isize,
    training: Training,
}

impl Default for Flatten {
    fn default() -> Self {
        Self {
            start_dim: 1,
            end_dim: -1,
            training: Training::default(),
        }
    }
}

impl Forward for Flatten {
    fn forward(&self, x: &Var) -> Result<Var> {
        x.flatten(self.start_dim, self.end_dim)
    }
}

impl Module for Flatten {
    fn visit(&self, _: &mut dyn Visitor) {}
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `nn.Unflatten(dim, sizes)`.
#[derive(Clone, Debug)]
pub struct Unflatten {
    /// The dimension split.
    pub dim: isize,
    /// What it becomes.
    pub sizes: Vec<usize>,
    training: Training,
}

impl Unflatten {
    /// `nn.Unflatten(dim, sizes)`.
    pub fn new(dim: isize, sizes: &[usize]) -> Self {
        Self {
            dim,
            sizes: sizes.to_vec(),
            training: Training::default(),
        }
    }
}

impl Forward for Unflatten {
    fn forward(&self, x: &Var) -> Result<Var> {
        let d = lockstep_tensor::layout::resolve_dim("Unflatten", self.dim, x.ndim())?;
        let prod: usize = self.sizes.iter().product();
        if x.shape()[d] != prod {
            return Err(module_error(
                format!(
                    "Unflatten(dim={}, unflattened_size={:?})",
                    self.dim, self.sizes
                ),
                format!(
                    "dimension {d} of input {:?} has size {}, not {prod}",
                    x.shape().to_vec(),
                    x.shape()[d]
                ),
            ));
        }
        let mut shape: Vec<isize> = x.shape()[..d].iter().map(|&v| v as isize).collect();
        shape.extend(self.sizes.iter().map(|&v| v as isize));
        shape.extend(x.shape()[d + 1..].iter().map(|&v| v as isize));
        x.reshape(&shape)
    }
}

impl Module for Unflatten {
    fn visit(&self, _: &mut dyn Visitor) {}
    fn training(&self) -> &Training {
        &self.training
    }
}

/// Which pooling a [`Pool`] layer does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PoolKind {
    /// `nn.MaxPool2d`.
    Max(Pool2d),
    /// `nn.AvgPool2d(…, count_include_pad)`.
    Avg(Pool2d, bool),
    /// `nn.AdaptiveAvgPool2d((oh, ow))`.
    AdaptiveAvg(usize, usize),
}

/// `nn.MaxPool2d`, `nn.AvgPool2d`, `nn.AdaptiveAvgPool2d` (f32, `[N, C, H, W]`).
#[derive(Clone, Debug)]
pub struct Pool {
    /// The pooling.
    pub kind: PoolKind,
    training: Training,
}

impl Pool {
    /// `nn.MaxPool2d(k)`.
    pub fn max2d(k: usize) -> Self {
        Self::new(PoolKind::Max(Pool2d::new(k)))
    }
    /// `nn.AvgPool2d(k)`.
    pub fn avg2d(k: usize) -> Self {
        Self::new(PoolKind::Avg(Pool2d::new(k), true))
    }
    /// `nn.AdaptiveAvgPool2d((oh, ow))`.
    pub fn adaptive_avg2d(oh: usize, ow: usize) -> Self {
        Self::new(PoolKind::AdaptiveAvg(oh, ow))
    }
    /// Any pooling.
    pub fn new(kind: PoolKind) -> Self {
        Self {
            kind,
            training: Training::default(),
        }
    }
}

impl Pool {
    fn describe(&self) -> String {
        let p2 = |p: &Pool2d| {
            format!(
                "kernel_size={:?}, stride={:?}, padding={:?}",
                p.kernel, p.stride, p.padding
            )
        };
        match &self.kind {
            PoolKind::Max(p) => format!(
                "MaxPool2d({}, dilation={:?}, ceil_mode={})",
                p2(p),
                p.dilation,
                p.ceil_mode
            ),
            PoolKind::Avg(p, cip) => format!(
                "AvgPool2d({}, ceil_mode={}, count_include_pad={cip})",
                p2(p),
                p.ceil_mode
            ),
            PoolKind::AdaptiveAvg(h, w) => format!("AdaptiveAvgPool2d(output_size=({h}, {w}))"),
        }
    }
}

impl Forward for Pool {
    fn forward(&self, x: &Var) -> Result<Var> {
        if x.ndim() != 4 {
            return Err(module_error(
                self.describe(),
                format!(
                    "expected input of shape [N, C, H, W], got {:?}",
                    x.shape().to_vec()
                ),
            ));
        }
        match self.kind {
            PoolKind::Max(p) => F::max_pool2d(x, p),
            PoolKind::Avg(p, cip) => F::avg_pool2d(x, p, cip),
            PoolKind::AdaptiveAvg(h, w) => F::adaptive_avg_pool2d(x, (h, w)),
        }
    }
}

impl Module for Pool {
    fn visit(&self, _: &mut dyn Visitor) {}
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `nn.Sequential(m0, m1, …)`: children named `0`, `1`, ….
pub struct Sequential {
    /// The layers, in order.
    pub layers: Vec<Box<dyn Forward>>,
    training: Training,
}

impl Sequential {
    /// An empty container (in training mode).
    pub fn new() -> Self {
        Self {
            layers: Vec::new(),
            training: Training::default(),
        }
    }

    /// Appends a layer (builder style).
    #[allow(clippy::should_implement_trait)]
    pub fn add(mut self, m: impl Forward + 'static) -> Self {
        self.layers.push(Box::new(m));
        self
    }

    /// Appends a layer (`append`).
    pub fn push(&mut self, m: impl Forward + 'static) {
        self.layers.push(Box::new(m));
    }
}

impl Default for Sequential {
    fn default() -> Self {
        Self::new()
    }
}

impl Forward for Sequential {
    fn forward(&self, x: &Var) -> Result<Var> {
        let mut h = x.clone();
        for m in &self.layers {
            h = m.forward(&h)?;
        }
        Ok(h)
    }
}

impl Module for Sequential {
    fn visit(&self, v: &mut dyn Visitor) {
        for (i, m) in self.layers.iter().enumerate() {
            v.child(&i.to_string(), &**m);
        }
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

stateless! {
    /// `nn.SiLU()`: [`F::silu`].
    SiLU => |x, s| F::silu(x);
    /// `nn.Identity()`: returns its input (the same `Var`, as PyTorch returns the same tensor).
    Identity => |x, s| Ok(x.clone());
}

/// `nn.LeakyReLU(negative_slope=0.01)`: [`F::leaky_relu`].
#[derive(Clone, Debug)]
pub struct LeakyReLU {
    /// The slope for negative inputs.
    pub negative_slope: f64,
    training: Training,
}

impl LeakyReLU {
    /// `nn.LeakyReLU(negative_slope)`.
    pub fn new(negative_slope: f64) -> Self {
        Self {
            negative_slope,
            training: Training::default(),
        }
    }
}

impl Default for LeakyReLU {
    /// PyTorch's default slope, 0.01.
    fn default() -> Self {
        Self::new(0.01)
    }
}

impl Forward for LeakyReLU {
    fn forward(&self, x: &Var) -> Result<Var> {
        F::leaky_relu(x, self.negative_slope)
    }
}

impl Module for LeakyReLU {
    fn visit(&self, _: &mut dyn Visitor) {}
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `nn.Softplus(beta=1, threshold=20)`: [`F::softplus`].
#[derive(Clone, Debug)]
pub struct Softplus {
    /// `beta` (default 1).
    pub beta: f64,
    /// `threshold` (default 20): above `beta·x > threshold` the input passes unchanged.
    pub threshold: f64,
    training: Training,
}

impl Softplus {
    /// `nn.Softplus(beta, threshold)`.
    pub fn new(beta: f64, threshold: f64) -> Self {
        Self {
            beta,
            threshold,
            training: Training::default(),
        }
    }
}

impl Default for Softplus {
    /// PyTorch's defaults: beta 1, threshold 20.
    fn default() -> Self {
        Self::new(1.0, 20.0)
    }
}

impl Forward for Softplus {
    fn forward(&self, x: &Var) -> Result<Var> {
        F::softplus(x, self.beta, self.threshold)
    }
}

impl Module for Softplus {
    fn visit(&self, _: &mut dyn Visitor) {}
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `nn.Conv1d(in, out, kernel_size, stride, padding, dilation, groups, bias)` (f32):
/// [`F::conv1d`].
pub struct Conv1d {
    /// `[out, in/groups, k]`.
    pub weight: Var,
    /// `[out]`.
    pub bias: Option<Var>,
    /// Stride, padding, dilation, groups.
    pub params: F::Conv1dParams,
    training: Training,
}

/// The `[out, in/groups, k…]` weight of a convolution, checked, with its element count.
fn conv_weight_shape(
    name: &'static str,
    in_channels: usize,
    out_channels: usize,
    groups: usize,
    shape: impl FnOnce() -> Vec<usize>,
) -> Result<(Vec<usize>, usize)> {
    if groups == 0 || !in_channels.is_multiple_of(groups) || !out_channels.is_multiple_of(groups) {
        return Err(invalid(
            name,
            "groups",
            format!(
                "in_channels ({in_channels}) and out_channels ({out_channels}) must be divisible by groups ({groups})"
            ),
        ));
    }
    let shape = shape();
    let n = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| n <= isize::MAX as usize / 8)
        .ok_or_else(|| invalid(name, "kernel_size", format!("{shape:?} is too large")))?;
    Ok((shape, n))
}

/// PyTorch's `_ConvNd.reset_parameters`: `kaiming_uniform_(a=√5)` on the weight (fan-in from
/// the weight's shape: `shape[1]·∏kernel`), then the bias `uniform_(±1/√fan_in)`.
fn conv_init(
    g: &mut Generator,
    shape: &[usize],
    n: usize,
    bias: bool,
    bias_len: usize,
) -> Result<(Var, Option<Var>)> {
    let mut w = vec![0f32; n];
    init::kaiming_uniform_(
        g,
        &mut w,
        shape,
        5.0f64.sqrt(),
        init::FanMode::FanIn,
        "leaky_relu",
    )?;
    let fan_in: usize = shape[1..].iter().product();
    let b = if bias {
        Some(param(bias_init(g, bias_len, fan_in)?, &[bias_len])?)
    } else {
        None
    };
    Ok((param(w, shape)?, b))
}

impl Conv1d {
    /// `nn.Conv1d(in_channels, out_channels, kernel_size)` (stride 1, no padding, bias),
    /// initialised from the default generator.
    ///
    /// # Errors
    /// As [`with_options`](Self::with_options).
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: usize) -> Result<Self> {
        Self::with_options(
            &mut lockstep_rng::default_generator(),
            in_channels,
            out_channels,
            kernel_size,
            F::Conv1dParams::default(),
            true,
        )
    }

    /// Every option, initialised from `g` as PyTorch (`kaiming_uniform_(a=√5)` on the weight,
    /// then `uniform_(±1/√fan_in)` on the bias).
    ///
    /// # Errors
    /// Zero groups, channels not divisible by `groups`, sizes that overflow.
    pub fn with_options(
        g: &mut Generator,
        in_channels: usize,
        out_channels: usize,
        kernel_size: usize,
        params: F::Conv1dParams,
        bias: bool,
    ) -> Result<Self> {
        let (shape, n) =
            conv_weight_shape("Conv1d", in_channels, out_channels, params.groups, || {
                vec![
                    out_channels,
                    in_channels / params.groups.max(1),
                    kernel_size,
                ]
            })?;
        let (weight, bias) = conv_init(g, &shape, n, bias, out_channels)?;
        Ok(Self {
            weight,
            bias,
            params,
            training: Training::default(),
        })
    }
}

impl Forward for Conv1d {
    fn forward(&self, x: &Var) -> Result<Var> {
        let s = self.weight.shape();
        let cin = s[1] * self.params.groups;
        let describe = || format!("Conv1d({cin}, {}, kernel_size=({},))", s[0], s[2]);
        if x.ndim() != 3 || x.shape()[1] != cin {
            return Err(module_error(
                describe(),
                format!(
                    "expected input of shape [N, {cin}, L], got {:?}",
                    x.shape().to_vec()
                ),
            ));
        }
        check_input_dtype(describe, x, &self.weight)?;
        F::conv1d(x, &self.weight, self.bias.as_ref(), self.params)
    }
}

impl Module for Conv1d {
    fn visit(&self, v: &mut dyn Visitor) {
        v.param("weight", &self.weight);
        if let Some(b) = &self.bias {
            v.param("bias", b);
        }
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `nn.ConvTranspose2d(in, out, kernel_size, stride, padding, output_padding, groups, bias,
/// dilation)` (f32): [`F::conv_transpose2d`].
pub struct ConvTranspose2d {
    /// `[in, out/groups, kh, kw]` (PyTorch's layout for transposed weights).
    pub weight: Var,
    /// `[out]`.
    pub bias: Option<Var>,
    /// Stride, padding, dilation, groups.
    pub params: Conv2dParams,
    /// `(oph, opw)`, each smaller than the stride.
    pub output_padding: (usize, usize),
    training: Training,
}

impl ConvTranspose2d {
    /// `nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride, padding)` with a
    /// bias, initialised from the default generator.
    ///
    /// # Errors
    /// As [`with_options`](Self::with_options).
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel_size: usize,
        stride: usize,
        padding: usize,
    ) -> Result<Self> {
        let p = Conv2dParams {
            stride: (stride, stride),
            padding: (padding, padding),
            ..Conv2dParams::default()
        };
        Self::with_options(
            &mut lockstep_rng::default_generator(),
            in_channels,
            out_channels,
            (kernel_size, kernel_size),
            p,
            (0, 0),
            true,
        )
    }

    /// Every option, initialised from `g` as PyTorch: `kaiming_uniform_(a=√5)` on the
    /// `[in, out/groups, kh, kw]` weight, whose fan-in PyTorch computes from that shape
    /// (`out/groups · kh · kw`), then the bias `uniform_(±1/√fan_in)`.
    ///
    /// # Errors
    /// Zero groups, channels not divisible by `groups`, an output padding not smaller than
    /// the stride (PyTorch also accepts one below the dilation), sizes that overflow.
    pub fn with_options(
        g: &mut Generator,
        in_channels: usize,
        out_channels: usize,
        kernel: (usize, usize),
        params: Conv2dParams,
        output_padding: (usize, usize),
        bias: bool,
    ) -> Result<Self> {
        if output_padding.0 >= params.stride.0 || output_padding.1 >= params.stride.1 {
            // PyTorch also allows output padding below the dilation; the kernel here (conv2d's
            // input gradient) needs it below the stride.
            return Err(invalid(
                "ConvTranspose2d",
                "output_padding",
                format!(
                    "output padding {output_padding:?} must be smaller than the stride {:?}",
                    params.stride
                ),
            ));
        }
        let (shape, n) = conv_weight_shape(
            "ConvTranspose2d",
            in_channels,
            out_channels,
            params.groups,
            || {
                vec![
                    in_channels,
                    out_channels / params.groups.max(1),
                    kernel.0,
                    kernel.1,
                ]
            },
        )?;
        let (weight, bias) = conv_init(g, &shape, n, bias, out_channels)?;
        Ok(Self {
            weight,
            bias,
            params,
            output_padding,
            training: Training::default(),
        })
    }
}

impl Forward for ConvTranspose2d {
    fn forward(&self, x: &Var) -> Result<Var> {
        let s = self.weight.shape();
        let cout = s[1] * self.params.groups;
        let describe = || {
            format!(
                "ConvTranspose2d({}, {cout}, kernel_size=({}, {}))",
                s[0], s[2], s[3]
            )
        };
        if x.ndim() != 4 || x.shape()[1] != s[0] {
            return Err(module_error(
                describe(),
                format!(
                    "expected input of shape [N, {}, H, W], got {:?}",
                    s[0],
                    x.shape().to_vec()
                ),
            ));
        }
        check_input_dtype(describe, x, &self.weight)?;
        F::conv_transpose2d(
            x,
            &self.weight,
            self.bias.as_ref(),
            self.params,
            self.output_padding,
        )
    }
}

impl Module for ConvTranspose2d {
    fn visit(&self, v: &mut dyn Visitor) {
        v.param("weight", &self.weight);
        if let Some(b) = &self.bias {
            v.param("bias", b);
        }
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rnn::{Rnn, RnnConfig};

    fn zeros(shape: &[usize], dtype: DType) -> Var {
        Var::new(Tensor::zeros(shape, dtype).unwrap(), true)
    }

    /// The error's message, checked to contain every piece.
    #[track_caller]
    fn err_with<T: core::fmt::Debug>(r: Result<T>, pieces: &[&str]) {
        let e = r.unwrap_err().to_string();
        for p in pieces {
            assert!(e.contains(p), "{e:?} lacks {p:?}");
        }
    }

    #[test]
    fn bad_inputs_are_clear_errors() {
        let g = &mut Generator::with_seed(0);
        let lin = Linear::with_generator(g, 4, 3, true).unwrap();
        err_with(
            lin.forward(&zeros(&[2, 5], DType::F32)),
            &["Linear(in_features=4, out_features=3", "[*, 4]", "[2, 5]"],
        );
        err_with(
            lin.forward(&zeros(&[2, 4], DType::F64)),
            &["Linear(", "F32", "F64", "[2, 4]"],
        );
        let conv = Conv2d::with_options(g, 2, 3, (3, 3), Conv2dParams::default(), true).unwrap();
        err_with(
            conv.forward(&zeros(&[1, 3, 5, 5], DType::F32)),
            &[
                "Conv2d(2, 3, kernel_size=(3, 3))",
                "[N, 2, H, W]",
                "[1, 3, 5, 5]",
            ],
        );
        err_with(
            conv.forward(&zeros(&[2, 5, 5], DType::F32)),
            &["Conv2d(", "[2, 5, 5]"],
        );
        err_with(
            conv.forward(&zeros(&[1, 2, 2, 2], DType::F32)),
            &["conv2d", "smaller than the dilated kernel"],
        );
        let lstm = Rnn::lstm(RnnConfig::new(3, 4)).unwrap();
        err_with(
            lstm.forward(&zeros(&[5, 2, 4], DType::F32)),
            &["LSTM(3, 4", "3 features", "[5, 2, 4]"],
        );
        err_with(
            lstm.forward_with_state(
                &zeros(&[5, 2, 3], DType::F32),
                Some(&zeros(&[1, 3, 4], DType::F32)),
                None,
            )
            .map(|o| o.output),
            &["LSTM(3, 4", "hidden state", "[1, 2, 4]", "[1, 3, 4]"],
        );
        err_with(
            lstm.forward(&zeros(&[0, 2, 3], DType::F32)),
            &["LSTM(", "sequence length", "[0, 2, 3]"],
        );
        let x = zeros(&[2, 3], DType::F32);
        err_with(
            x.mul(&x).unwrap().backward(),
            &["backward", "only for scalar outputs", "[2, 3]"],
        );
        let t = Tensor::from_vec(vec![0i64, 7], &[2]).unwrap();
        err_with(
            F::cross_entropy(&x, &t),
            &[
                "cross_entropy",
                "Target 7 is out of bounds",
                "[2, 3]",
                "3 classes",
            ],
        );
        let t = Tensor::from_vec(vec![0i64, 1, 2], &[3]).unwrap();
        err_with(
            F::cross_entropy(&x, &t),
            &["cross_entropy", "[2, 3]", "[3]"],
        );
        let bn = BatchNorm::new_1d(3).unwrap();
        err_with(
            bn.forward(&zeros(&[2, 4], DType::F32)),
            &["BatchNorm1d(3)", "[N, 3]", "[2, 4]"],
        );
        err_with(
            bn.forward(&zeros(&[1, 3], DType::F32)),
            &["batch_norm", "more than 1 value per channel", "[1, 3]"],
        );
        err_with(
            Pool::max2d(2).forward(&zeros(&[2, 4, 4], DType::F32)),
            &["MaxPool2d(kernel_size=(2, 2)", "[2, 4, 4]"],
        );
    }

    #[test]
    fn module_to_dtype_keeps_integer_buffers() {
        let bn = BatchNorm::new_2d(2).unwrap();
        bn.to_dtype(DType::F64).unwrap();
        for n in bn.named_all() {
            let want = if n.name == "num_batches_tracked" {
                DType::I64
            } else {
                DType::F64
            };
            assert_eq!(n.var.dtype(), want, "{}", n.name);
        }
        assert!(bn.to_dtype(DType::I64).is_err());
        let y = bn
            .forward(&Var::new(
                Tensor::ones(&[2, 2, 1, 2], DType::F64).unwrap(),
                true,
            ))
            .unwrap();
        assert_eq!(y.dtype(), DType::F64);
    }

    #[test]
    fn gelu_approximate_names() {
        assert!(!GELU::new("none").unwrap().tanh_approximation);
        assert!(GELU::new("tanh").unwrap().tanh_approximation);
        assert!(GELU::new("erf").is_err());
    }
}
