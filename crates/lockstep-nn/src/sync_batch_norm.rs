//! Synchronized BatchNorm over micro-shards (`nn.SyncBatchNorm`'s semantics) in an order that
//! does not depend on how many processes share the work.
//!
//! A batch is cut into `G` micro-shards, each run through the model on its own (its own
//! forward, loss and backward), on whichever process owns it. BatchNorm in training mode needs
//! statistics over the whole batch, so a micro-shard's forward cannot pass a BatchNorm before
//! every micro-shard has reached it. [`SyncStep`] drives that:
//!
//! - **Forward**, in passes. In pass `p` every listed micro-shard runs its forward; the
//!   BatchNorm calls `0..p` normalise with global statistics already known, and call `p`
//!   records the micro-shard's partial statistics (per channel: count, mean and the sum of
//!   squared deviations `M2`, in `f64`, two passes over the micro-shard) and stops the forward.
//!   The partials of all `G` micro-shards are gathered in micro-shard order
//!   ([`StatsExchange`]) and combined with Chan's parallel formula along a fixed binary tree
//!   over micro-shard index ([`combine_moments`]): the global mean and `M2` depend on `G` and
//!   the data only. A pass that meets no new BatchNorm is the last; its outputs are kept.
//! - **Backward**, the same way from the last BatchNorm call to the first: each owned
//!   micro-shard's backward runs down to the BatchNorm, records `Σdy` and `Σdy·(x − mean)` per
//!   channel and stops (a stopped backward leaves every gradient unchanged); the partial sums
//!   are gathered and added in the same fixed tree; then each micro-shard's real backward uses
//!   them: `dx = w·invstd·(dy − Σdy/N − (x − mean)·invstd²·Σdy(x − mean)/N)` over the global
//!   count `N`, and the micro-shard's own `Σdy·(x − mean)·invstd` and `Σdy` as its share of the
//!   weight and bias gradients.
//! - **Running statistics** are updated once per step, as `SyncBatchNorm` does:
//!   `running = (1 − momentum)·running + momentum·stat` with the global mean and the unbiased
//!   global variance `M2 / (N − 1)` (in `f64`, rounded to the buffer's dtype);
//!   `num_batches_tracked` counts steps, not micro-shards.
//!
//! The cost is replays: the forward up to BatchNorm `p` runs `p + 2` times in all, and the
//! backward above BatchNorm `l` runs once more per BatchNorm below it plus one. Outside a
//! [`SyncStep`] BatchNorm is the plain batch statistic of its input (`functional::batch_norm`).

use crate::autograd::Var;
use crate::ops::invalid;
use lockstep_tensor::{DType, Error, Result, Tensor};
use std::cell::RefCell;
use std::sync::Arc;

/// How the micro-shards' partial statistics meet: every process passes the vectors of the
/// micro-shards it owns and receives all `g` of them in micro-shard order.
pub trait StatsExchange {
    /// All `g` micro-shards' vectors (each `len` values) in micro-shard order, given this
    /// process's own in increasing micro-shard order. Every process must call it the same
    /// number of times with the same `g` and `len`.
    ///
    /// # Errors
    /// Vectors of the wrong number or length, or a failed exchange.
    fn gather(&mut self, own: &[Vec<f64>], g: usize, len: usize) -> Result<Vec<Vec<f64>>>;
}

/// One process owning every micro-shard.
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalExchange;

impl StatsExchange for LocalExchange {
    fn gather(&mut self, own: &[Vec<f64>], g: usize, len: usize) -> Result<Vec<Vec<f64>>> {
        if own.len() != g || own.iter().any(|v| v.len() != len) {
            return Err(invalid(
                "sync_batch_norm",
                "own",
                format!(
                    "expected {g} vectors of {len} values (one process owns every micro-shard), got {}",
                    own.len()
                ),
            ));
        }
        Ok(own.to_vec())
    }
}

/// One micro-shard this process runs: `index` in `0..g`; `owned` if its statistics and
/// gradients count. A process that owns none runs one micro-shard unowned (a shadow), so that
/// it meets every BatchNorm, takes part in every exchange and updates its running statistics
/// like the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MicroShard {
    /// The micro-shard's index in the batch.
    pub index: usize,
    /// Whether this process contributes it.
    pub owned: bool,
}

/// Per-channel moments of a set of values: their count, means and sums of squared deviations
/// from the mean (`M2`).
#[derive(Clone, Debug, PartialEq)]
pub struct Moments {
    /// Values per channel.
    pub count: f64,
    /// Per channel.
    pub mean: Vec<f64>,
    /// Per channel: `Σ (x − mean)²`.
    pub m2: Vec<f64>,
}

impl Moments {
    /// The moments of one micro-shard `x` (`[n, C, …]`, contiguous, as `f64`), channel by
    /// channel, samples then positions in order: the mean from the sum, then `M2` about it.
    fn of(x: &[f64], n: usize, c: usize, inner: usize) -> Self {
        let count = (n * inner) as f64;
        let mut mean = vec![0f64; c];
        let mut m2 = vec![0f64; c];
        if n * inner == 0 {
            return Self { count, mean, m2 };
        }
        let mut ch = 0;
        while ch < c {
            if c - ch >= CHAINS {
                moments_of::<CHAINS>(x, n, c, inner, ch, count, &mut mean, &mut m2);
                ch += CHAINS;
            } else {
                moments_of::<1>(x, n, c, inner, ch, count, &mut mean, &mut m2);
                ch += 1;
            }
        }
        Self { count, mean, m2 }
    }

    /// `[count, mean…, m2…]`, what the exchange carries.
    fn to_vec(&self) -> Vec<f64> {
        let mut v = Vec::with_capacity(1 + 2 * self.mean.len());
        v.push(self.count);
        v.extend(&self.mean);
        v.extend(&self.m2);
        v
    }

    fn from_slice(v: &[f64], c: usize) -> Self {
        Self {
            count: v[0],
            mean: v[1..1 + c].to_vec(),
            m2: v[1 + c..1 + 2 * c].to_vec(),
        }
    }

    /// Chan, Golub and LeVeque's pairwise update: the moments of the union of two disjoint sets.
    fn merge(a: &Self, b: &Self) -> Self {
        if b.count == 0.0 {
            return a.clone();
        }
        if a.count == 0.0 {
            return b.clone();
        }
        let n = a.count + b.count;
        let wb = b.count / n;
        let wab = a.count * b.count / n;
        let mut mean = Vec::with_capacity(a.mean.len());
        let mut m2 = Vec::with_capacity(a.mean.len());
        for ch in 0..a.mean.len() {
            let d = b.mean[ch] - a.mean[ch];
            mean.push(a.mean[ch] + d * wb);
            m2.push(a.m2[ch] + b.m2[ch] + d * d * wab);
        }
        Self { count: n, mean, m2 }
    }
}

/// Channels whose sums run side by side in [`Moments::of`] and the backward's block sums: each
/// channel's chain of additions keeps its order (the bits of one channel at a time), but the
/// chains of `CHAINS` channels overlap instead of each addition waiting on the one before.
const CHAINS: usize = 4;

/// Channels `ch..ch + L`'s mean and `M2` (see [`Moments::of`]): per channel the sum over
/// samples then positions in order, the mean, then `Σ (x − mean)²` in the same order.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn moments_of<const L: usize>(
    x: &[f64],
    n: usize,
    c: usize,
    inner: usize,
    ch: usize,
    count: f64,
    mean: &mut [f64],
    m2: &mut [f64],
) {
    let rows = |i: usize| -> [&[f64]; L] {
        core::array::from_fn(|l| &x[(i * c + ch + l) * inner..][..inner])
    };
    let mut s = [0f64; L];
    for i in 0..n {
        let r = rows(i);
        for j in 0..inner {
            for l in 0..L {
                s[l] += r[l][j];
            }
        }
    }
    let mu: [f64; L] = core::array::from_fn(|l| s[l] / count);
    let mut q = [0f64; L];
    for i in 0..n {
        let r = rows(i);
        for j in 0..inner {
            for l in 0..L {
                let d = r[l][j] - mu[l];
                q[l] += d * d;
            }
        }
    }
    mean[ch..ch + L].copy_from_slice(&mu);
    m2[ch..ch + L].copy_from_slice(&q);
}

/// Samples `first..first + k`'s `Σdy` (into `v[ch]`) and `Σdy·(x − mean)` (into `v[c + ch]`)
/// for channels `ch..ch + L`, each channel's sums over samples then positions in order.
#[inline(always)]
fn dy_sums<const L: usize>(
    dys: &[f64],
    xs: &[f64],
    mean: &[f64],
    c: usize,
    inner: usize,
    (first, k, ch): (usize, usize, usize),
    v: &mut [f64],
) {
    let (mut sd, mut sdx) = ([0f64; L], [0f64; L]);
    for i in first..first + k {
        let at = |l: usize| (i * c + ch + l) * inner;
        let g: [&[f64]; L] = core::array::from_fn(|l| &dys[at(l)..][..inner]);
        let x: [&[f64]; L] = core::array::from_fn(|l| &xs[at(l)..][..inner]);
        for j in 0..inner {
            for l in 0..L {
                sd[l] += g[l][j];
                sdx[l] += g[l][j] * (x[l][j] - mean[ch + l]);
            }
        }
    }
    v[ch..ch + L].copy_from_slice(&sd);
    v[c + ch..c + ch + L].copy_from_slice(&sdx);
}

/// The moments of the union of `parts` (in micro-shard order, at least one), merged along the
/// fixed tree `merge(lo..hi) = merge(merge(lo..mid), merge(mid..hi))`,
/// `mid = lo + ceil((hi − lo)/2)`: the result depends on the parts and their number only.
///
/// # Panics
/// If `parts` is empty (a broken internal invariant).
pub fn combine_moments(parts: &[Moments]) -> Moments {
    assert!(!parts.is_empty(), "combine_moments of nothing");
    if parts.len() == 1 {
        return parts[0].clone();
    }
    let mid = parts.len().div_ceil(2);
    Moments::merge(
        &combine_moments(&parts[..mid]),
        &combine_moments(&parts[mid..]),
    )
}

/// Element-wise sum of `parts` (equal lengths, at least one) along the same fixed tree as
/// [`combine_moments`].
///
/// # Panics
/// If `parts` is empty (a broken internal invariant).
pub fn tree_sum_f64(parts: &[Vec<f64>]) -> Vec<f64> {
    assert!(!parts.is_empty(), "tree_sum_f64 of nothing");
    if parts.len() == 1 {
        return parts[0].clone();
    }
    let mid = parts.len().div_ceil(2);
    let mut a = tree_sum_f64(&parts[..mid]);
    let b = tree_sum_f64(&parts[mid..]);
    for (x, y) in a.iter_mut().zip(&b) {
        *x += *y;
    }
    a
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Forward pass `p`: BatchNorm call `p` records its partial and stops.
    Forward(usize),
    /// Backward collecting BatchNorm call `l`'s partial sums.
    Backward(usize),
    /// Every statistic known.
    Final,
}

struct Ctx {
    mode: Mode,
    /// Position in the list of the micro-shard running now.
    pos: usize,
    /// BatchNorm calls so far in this micro-shard's forward.
    calls: usize,
    /// Global moments, by BatchNorm call index.
    stats: Vec<Arc<Moments>>,
    /// Global `[Σdy…, Σdy·(x − mean)…]`, by BatchNorm call index.
    sums: Vec<Option<Arc<Vec<f64>>>>,
    /// What the stopped call recorded.
    partial: Option<Vec<f64>>,
}

thread_local! {
    static CTX: RefCell<Option<Ctx>> = const { RefCell::new(None) };
}

fn internal(reason: impl Into<String>) -> Error {
    invalid("sync_batch_norm", "micro-shards", reason)
}

/// The error that stops a forward or backward at the BatchNorm whose statistics are being
/// gathered; the driver tells it from real errors by the recorded partial.
fn pause() -> Error {
    internal("paused to gather statistics over all micro-shards (not an error inside a SyncStep)")
}

/// Whether a [`SyncStep`] is running on this thread (BatchNorm in training mode then uses it).
pub fn is_active() -> bool {
    CTX.with(|c| c.borrow().is_some())
}

/// Removes the context however the driver's call ends.
struct Installed;
impl Drop for Installed {
    fn drop(&mut self) {
        CTX.with(|c| c.borrow_mut().take());
    }
}

fn install(stats: Vec<Arc<Moments>>, sums: Vec<Option<Arc<Vec<f64>>>>) -> Result<Installed> {
    CTX.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_some() {
            return Err(internal("a SyncStep is already running on this thread"));
        }
        *c = Some(Ctx {
            mode: Mode::Final,
            pos: 0,
            calls: 0,
            stats,
            sums,
            partial: None,
        });
        Ok(Installed)
    })
}

fn with_ctx<R>(f: impl FnOnce(&mut Ctx) -> R) -> Option<R> {
    CTX.with(|c| c.borrow_mut().as_mut().map(f))
}

/// Sets the mode and position for the next micro-shard; returns what the last one recorded.
fn begin(mode: Mode, pos: usize) {
    with_ctx(|c| {
        c.mode = mode;
        c.pos = pos;
        c.calls = 0;
        c.partial = None;
    });
}

fn take_partial() -> Option<Vec<f64>> {
    with_ctx(|c| c.partial.take()).flatten()
}

/// One training step's micro-shards on this process, with BatchNorm synchronized over all
/// `g` micro-shards of the batch (see the module docs). Use [`forward`](Self::forward), then
/// [`backward`](Self::backward) with its outputs.
pub struct SyncStep<'e> {
    exchange: &'e mut dyn StatsExchange,
    g: usize,
    shards: Vec<MicroShard>,
    stats: Vec<Arc<Moments>>,
}

/// More BatchNorm calls in one forward than this is a runaway model, not a network.
const MAX_CALLS: usize = 1 << 16;

impl<'e> SyncStep<'e> {
    /// A step of `g` micro-shards of which this process runs `shards` (at least one; owned
    /// ones in increasing index order, as the exchange expects them).
    ///
    /// # Errors
    /// No micro-shard, an index not below `g`.
    pub fn new(
        exchange: &'e mut dyn StatsExchange,
        g: usize,
        shards: Vec<MicroShard>,
    ) -> Result<Self> {
        if shards.is_empty() {
            return Err(invalid(
                "SyncStep",
                "shards",
                "every process runs at least one micro-shard (a shadow if it owns none)",
            ));
        }
        if let Some(s) = shards.iter().find(|s| s.index >= g) {
            return Err(invalid(
                "SyncStep",
                "shards",
                format!("micro-shard {} of {g}", s.index),
            ));
        }
        Ok(Self {
            exchange,
            g,
            shards,
            stats: Vec::new(),
        })
    }

    /// Runs `f(index)` (the forward and loss of micro-shard `index`) for every listed
    /// micro-shard, with BatchNorm statistics over all `g` micro-shards; returns the outputs in
    /// list order. `f` is called several times per micro-shard (once per BatchNorm, plus one)
    /// and must compute the same thing each time (dropout keyed by sample, not drawn from a
    /// running generator).
    ///
    /// # Errors
    /// An error of `f`; micro-shards that meet different BatchNorm calls; a batch with one
    /// value per channel; a failed exchange.
    pub fn forward(&mut self, mut f: impl FnMut(usize) -> Result<Var>) -> Result<Vec<Var>> {
        let _ctx = install(Vec::new(), Vec::new())?;
        for pass in 0..=MAX_CALLS {
            let mut own = Vec::new();
            let mut outs = Vec::new();
            let mut width = None;
            for (pos, s) in self.shards.iter().enumerate() {
                begin(Mode::Forward(pass), pos);
                let r = f(s.index);
                match (r, take_partial()) {
                    (_, Some(p)) => {
                        if width.is_some_and(|w| w != p.len()) {
                            return Err(internal(
                                "micro-shards meet BatchNorms of different widths",
                            ));
                        }
                        width = Some(p.len());
                        if s.owned {
                            own.push(p);
                        }
                    }
                    (Ok(v), None) => outs.push(v),
                    (Err(e), None) => return Err(e),
                }
            }
            let Some(len) = width else {
                self.stats = with_ctx(|c| std::mem::take(&mut c.stats)).unwrap_or_default();
                return Ok(outs);
            };
            if !outs.is_empty() {
                return Err(internal(
                    "micro-shards meet different numbers of BatchNorm calls",
                ));
            }
            let all = self.exchange.gather(&own, self.g, len)?;
            let c = (len - 1) / 2;
            if all.len() != self.g || all.iter().any(|v| v.len() != len) {
                return Err(internal("the exchange returned vectors of the wrong shape"));
            }
            let parts: Vec<Moments> = all.iter().map(|v| Moments::from_slice(v, c)).collect();
            let global = combine_moments(&parts);
            if global.count <= 1.0 {
                return Err(invalid(
                    "batch_norm",
                    "input",
                    format!(
                        "Expected more than 1 value per channel when training (the whole batch has {} per channel)",
                        global.count
                    ),
                ));
            }
            with_ctx(|ctx| ctx.stats.push(Arc::new(global)));
        }
        Err(internal(format!(
            "more than {MAX_CALLS} BatchNorm calls in one forward"
        )))
    }

    /// Back-propagates the owned micro-shards' `losses` (the outputs of
    /// [`forward`](Self::forward), in list order; unowned entries are skipped): first the
    /// passes that gather each BatchNorm's `Σdy` and `Σdy·(x − mean)`, then, for each owned
    /// micro-shard in list order, `each(index, loss)`, which runs the real backward
    /// (`loss.backward()`) and takes the gradients; the BatchNorms use the global sums there.
    ///
    /// # Errors
    /// A length mismatch, an error of a backward or of `each`, a failed exchange.
    pub fn backward(
        &mut self,
        losses: &[Var],
        mut each: impl FnMut(usize, &Var) -> Result<()>,
    ) -> Result<()> {
        if losses.len() != self.shards.len() {
            return Err(invalid(
                "SyncStep::backward",
                "losses",
                format!(
                    "expected {} outputs of forward, got {}",
                    self.shards.len(),
                    losses.len()
                ),
            ));
        }
        let layers = self.stats.len();
        let _ctx = install(self.stats.clone(), vec![None; layers])?;
        for target in (0..layers).rev() {
            let len = 2 * self.stats[target].mean.len();
            let mut own = Vec::new();
            for (pos, (s, loss)) in self.shards.iter().zip(losses).enumerate() {
                if !s.owned {
                    continue;
                }
                begin(Mode::Backward(target), pos);
                // The graph is needed again by the later passes and by `each`.
                let r = loss.backward_options(&crate::BackwardOptions {
                    gradient: None,
                    retain_graph: true,
                });
                match (r, take_partial()) {
                    (_, Some(p)) => own.push(p),
                    // The loss does not depend on this BatchNorm's output: no gradient.
                    (Ok(()), None) => own.push(vec![0f64; len]),
                    (Err(e), None) => return Err(e),
                }
            }
            let all = self.exchange.gather(&own, self.g, len)?;
            if all.len() != self.g || all.iter().any(|v| v.len() != len) {
                return Err(internal("the exchange returned vectors of the wrong shape"));
            }
            let sum = Arc::new(tree_sum_f64(&all));
            with_ctx(|c| c.sums[target] = Some(sum));
        }
        for (pos, (s, loss)) in self.shards.iter().zip(losses).enumerate() {
            if s.owned {
                begin(Mode::Final, pos);
                each(s.index, loss)?;
            }
        }
        Ok(())
    }
}

/// A BatchNorm layer's tensors and settings, for [`batch_norm_hook`].
pub(crate) struct BatchNormRefs<'a> {
    pub weight: &'a Var,
    pub bias: &'a Var,
    pub running_mean: &'a Var,
    pub running_var: &'a Var,
    pub num_batches_tracked: &'a Var,
    pub eps: f64,
    pub momentum: Option<f64>,
}

fn f64_data(t: &Tensor) -> Result<Vec<f64>> {
    t.try_to_dtype(DType::F64)?.to_vec::<f64>()
}

fn tensor_as(v: Vec<f64>, shape: &[usize], dtype: DType) -> Result<Tensor> {
    Ok(Tensor::from_vec(v, shape)?.to_dtype(dtype))
}

/// BatchNorm in training mode inside a [`SyncStep`], or recorded inside
/// [`with_batch_blocks`](crate::batch_blocks::with_batch_blocks) over the whole batch:
/// `Ok(None)` when neither applies (the layer then computes plain batch statistics); else the
/// normalised output, or the pause that stops a forward pass at the BatchNorm being gathered.
/// `x` is `[N, C, …]`, checked by the layer.
///
/// Over the whole batch, block `k` stands for micro-shard `k`: its partial moments, its
/// `Σdy` and `Σdy·(x − mean)` and its share of the weight and bias gradients are computed as
/// the micro-shard's own, and merged or added in the same tree, so the values are a
/// [`SyncStep`]'s bits.
pub(crate) fn batch_norm_hook(x: &Var, bn: &BatchNormRefs<'_>) -> Result<Option<Var>> {
    let in_step = with_ctx(|c| {
        let l = c.calls;
        c.calls += 1;
        (l, c.mode, c.pos, c.stats.get(l).cloned())
    });
    let shape = x.shape().to_vec();
    let blocks = match in_step {
        Some(_) => None,
        None => match crate::batch_blocks::for_batch(shape[0]) {
            Some(b) => Some(b),
            None => return Ok(None),
        },
    };
    let (n, c) = (shape[0], shape[1]);
    let inner: usize = shape[2..].iter().product();
    let xs = f64_data(&x.data())?;
    // The step's call index `l` inside a SyncStep; `None` over the whole batch.
    let (st, l) = match (in_step, blocks) {
        (Some((l, mode, pos, known)), _) => {
            let Some(st) = known else {
                if mode != Mode::Forward(l) {
                    return Err(internal(format!(
                        "BatchNorm call {l} without statistics ({mode:?})"
                    )));
                }
                let partial = Moments::of(&xs, n, c, inner).to_vec();
                with_ctx(|ctx| ctx.partial = Some(partial));
                return Err(pause());
            };
            if st.mean.len() != c {
                return Err(internal(format!(
                    "BatchNorm call {l} has {c} channels, {} when its statistics were gathered",
                    st.mean.len()
                )));
            }
            // Once per step: in the first pass that knows call l's statistics, on the first
            // listed micro-shard (every process has one, owned or shadow).
            if mode == Mode::Forward(l + 1) && pos == 0 {
                update_running(bn, &st)?;
            }
            (st, Some(l))
        }
        (None, Some(b)) => {
            let per = c * inner;
            let parts: Vec<Moments> = b
                .ranges()
                .map(|(s, k)| Moments::of(&xs[s * per..(s + k) * per], k, c, inner))
                .collect();
            let st = combine_moments(&parts);
            if st.count <= 1.0 {
                return Err(invalid(
                    "batch_norm",
                    "input",
                    format!(
                        "Expected more than 1 value per channel when training (the whole batch has {} per channel)",
                        st.count
                    ),
                ));
            }
            update_running(bn, &st)?;
            (Arc::new(st), None)
        }
        (None, None) => return Ok(None),
    };
    let big_n = st.count;
    let invstd: Vec<f64> = st
        .m2
        .iter()
        .map(|&m2| 1.0 / (m2 / big_n + bn.eps).sqrt())
        .collect();
    let w = f64_data(&bn.weight.data())?;
    let b = f64_data(&bn.bias.data())?;
    let mut y = lockstep_tensor::try_filled_vec("sync_batch_norm", xs.len(), 0f64)?;
    for i in 0..n {
        for ch in 0..c {
            let at = (i * c + ch) * inner;
            let (mu, s, wc, bc) = (st.mean[ch], invstd[ch], w[ch], b[ch]);
            for (o, &v) in y[at..at + inner].iter_mut().zip(&xs[at..at + inner]) {
                *o = (v - mu) * s * wc + bc;
            }
        }
    }
    let dtype = x.dtype();
    let value = tensor_as(y, &shape, dtype)?;
    let wdtype = bn.weight.dtype();
    let mean = st.mean.clone();
    Ok(Some(Var::from_op(
        "sync_batch_norm",
        value,
        &[x, bn.weight, bn.bias],
        move |dy: &Tensor| {
            let dys = f64_data(dy)?;
            // Samples `first..first + k`'s Σdy and Σdy·(x − mean), per channel, in order.
            let local = |first: usize, k: usize| {
                let mut v = vec![0f64; 2 * c];
                let mut ch = 0;
                while ch < c {
                    let w = if c - ch >= CHAINS { CHAINS } else { 1 };
                    let at = (first, k, ch);
                    if w == CHAINS {
                        dy_sums::<CHAINS>(&dys, &xs, &mean, c, inner, at, &mut v);
                    } else {
                        dy_sums::<1>(&dys, &xs, &mean, c, inner, at, &mut v);
                    }
                    ch += w;
                }
                v
            };
            // This micro-shard's or every block's sums.
            let locals: Vec<Vec<f64>> = match blocks {
                None => vec![local(0, n)],
                Some(b) => b.ranges().map(|(s, k)| local(s, k)).collect(),
            };
            let global = match l {
                None => Arc::new(tree_sum_f64(&locals)),
                Some(l) => {
                    let global = with_ctx(|ctx| match ctx.sums.get(l).cloned().flatten() {
                        Some(s) => Ok(Some(s)),
                        None if ctx.mode == Mode::Backward(l) => {
                            ctx.partial = Some(locals[0].clone());
                            Ok(None)
                        }
                        None => Err(internal(format!(
                            "BatchNorm call {l}'s backward without its sums ({:?})",
                            ctx.mode
                        ))),
                    })
                    .unwrap_or_else(|| {
                        Err(internal(
                            "a synchronized BatchNorm's backward outside its SyncStep",
                        ))
                    })?;
                    let Some(global) = global else {
                        return Err(pause());
                    };
                    global
                }
            };
            let mut dx = lockstep_tensor::try_filled_vec("sync_batch_norm", dys.len(), 0f64)?;
            for i in 0..n {
                for ch in 0..c {
                    let at = (i * c + ch) * inner;
                    let s = invstd[ch];
                    let mean_dy = global[ch] / big_n;
                    let proj = global[c + ch] / big_n * s * s;
                    let scale = w[ch] * s;
                    for ((o, &g), &v) in dx[at..at + inner]
                        .iter_mut()
                        .zip(&dys[at..at + inner])
                        .zip(&xs[at..at + inner])
                    {
                        *o = (g - mean_dy - (v - mean[ch]) * proj) * scale;
                    }
                }
            }
            // Each micro-shard's (block's) share in the parameters' dtype, then the tree.
            let mut dws = Vec::with_capacity(locals.len());
            let mut dbs = Vec::with_capacity(locals.len());
            for local in &locals {
                let dw: Vec<f64> = (0..c).map(|ch| local[c + ch] * invstd[ch]).collect();
                dws.push(tensor_as(dw, &[c], wdtype)?);
                dbs.push(tensor_as(local[..c].to_vec(), &[c], wdtype)?);
            }
            Ok(vec![
                Some(tensor_as(dx, &shape, dtype)?),
                Some(crate::batch_blocks::tree_sum(dws)?),
                Some(crate::batch_blocks::tree_sum(dbs)?),
            ])
        },
    )))
}

/// `SyncBatchNorm`'s running statistics: the global mean and unbiased variance.
fn update_running(bn: &BatchNormRefs<'_>, st: &Moments) -> Result<()> {
    let tracked = bn.num_batches_tracked.data().item::<i64>()? + 1;
    bn.num_batches_tracked.set_data(Tensor::scalar(tracked))?;
    let f = bn.momentum.unwrap_or(1.0 / tracked as f64);
    let unbiased = 1.0 / (st.count - 1.0);
    let rm = f64_data(&bn.running_mean.data())?;
    let rv = f64_data(&bn.running_var.data())?;
    let rm: Vec<f64> = rm
        .iter()
        .zip(&st.mean)
        .map(|(&r, &m)| (1.0 - f) * r + f * m)
        .collect();
    let rv: Vec<f64> = rv
        .iter()
        .zip(&st.m2)
        .map(|(&r, &m2)| (1.0 - f) * r + f * (m2 * unbiased))
        .collect();
    let shape = [st.mean.len()];
    bn.running_mean
        .set_data(tensor_as(rm, &shape, bn.running_mean.dtype())?)?;
    bn.running_var
        .set_data(tensor_as(rv, &shape, bn.running_var.dtype())?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::{BatchNorm, Linear, ReLU, Sequential};
    use crate::{Forward, Module};
    use std::sync::{Barrier, Mutex};

    type GatherFn<'a> = dyn FnMut(&[Vec<f64>], usize, usize) -> Result<Vec<Vec<f64>>> + 'a;

    /// A value of sample `i`, feature `j`: spread out, not symmetric, exactly representable.
    fn input(n: usize) -> Tensor {
        let v: Vec<f32> = (0..n * 4)
            .map(|t| ((t * 37 % 23) as f32 - 9.0) / 8.0 + (t % 4) as f32)
            .collect();
        Tensor::from_vec(v, &[n, 4]).unwrap()
    }

    /// Linear → BatchNorm1d → ReLU → Linear → BatchNorm1d, weights from a formula (no draws).
    fn model() -> Sequential {
        let l1 = Linear::new(4, 3, true).unwrap();
        let l2 = Linear::new(3, 3, true).unwrap();
        for (k, p) in l1.parameters().iter().chain(&l2.parameters()).enumerate() {
            let v: Vec<f32> = (0..p.numel())
                .map(|t| (((t + 3 * k) * 29 % 17) as f32 - 8.0) / 16.0)
                .collect();
            p.set_data(Tensor::from_vec(v, p.shape()).unwrap()).unwrap();
        }
        Sequential::new()
            .add(l1)
            .add(BatchNorm::new_1d(3).unwrap())
            .add(ReLU::default())
            .add(l2)
            .add(BatchNorm::new_1d(3).unwrap())
    }

    fn weights(n: usize) -> Tensor {
        let v: Vec<f32> = (0..n * 3)
            .map(|t| ((t * 13 % 7) as f32 - 3.0) / 4.0)
            .collect();
        Tensor::from_vec(v, &[n, 3]).unwrap()
    }

    /// Rank `rank` of `w` ranks sharing micro-shards of `m` rows through `ex`: the fixed-tree
    /// sum of the micro-shards' gradients, and the model's state afterwards.
    fn step(
        ex: &mut GatherFn<'_>,
        rank: usize,
        w: usize,
        n: usize,
        m: usize,
    ) -> (Vec<f32>, Vec<f32>) {
        struct Ex<'a>(&'a mut GatherFn<'a>);
        impl StatsExchange for Ex<'_> {
            fn gather(&mut self, own: &[Vec<f64>], g: usize, len: usize) -> Result<Vec<Vec<f64>>> {
                (self.0)(own, g, len)
            }
        }
        let net = model();
        let params = net.parameters();
        let (x, r) = (input(n), weights(n));
        let g = n.div_ceil(m);
        let mut shards: Vec<MicroShard> = (0..g)
            .filter(|k| k % w == rank)
            .map(|index| MicroShard { index, owned: true })
            .collect();
        if shards.is_empty() {
            shards.push(MicroShard {
                index: rank % g,
                owned: false,
            });
        }
        let mut exchange = Ex(ex);
        let mut own_grads: Vec<Vec<f64>> = Vec::new();
        {
            let mut s = SyncStep::new(&mut exchange, g, shards).unwrap();
            let losses = s
                .forward(|k| {
                    let rows = m.min(n - k * m);
                    let xk = Var::constant(x.narrow(0, k * m, rows)?);
                    let rk = Var::constant(r.narrow(0, k * m, rows)?.contiguous());
                    net.forward(&xk)?.mul(&rk)?.sum()
                })
                .unwrap();
            s.backward(&losses, |_, loss| {
                params.iter().for_each(Var::zero_grad);
                loss.backward()?;
                let mut v = Vec::new();
                for p in &params {
                    v.extend(p.grad().unwrap().to_vec::<f32>()?.iter().map(|&g| g as f64));
                }
                own_grads.push(v);
                Ok(())
            })
            .unwrap();
        }
        let len: usize = params.iter().map(Var::numel).sum();
        let all = exchange.0(&own_grads, g, len).unwrap();
        let all: Vec<Vec<f32>> = all
            .iter()
            .map(|v| v.iter().map(|&x| x as f32).collect())
            .collect();
        fn tree(parts: &[Vec<f32>]) -> Vec<f32> {
            if parts.len() == 1 {
                return parts[0].clone();
            }
            let mid = parts.len().div_ceil(2);
            let mut a = tree(&parts[..mid]);
            for (x, y) in a.iter_mut().zip(&tree(&parts[mid..])) {
                *x += *y;
            }
            a
        }
        let sum = tree(&all);
        let mut state = Vec::new();
        for (_, t) in net.state_dict() {
            if t.dtype() == DType::F32 {
                state.extend(t.to_vec::<f32>().unwrap());
            } else {
                state.push(t.item::<i64>().unwrap() as f32);
            }
        }
        (sum, state)
    }

    /// `w` threads acting as ranks, meeting at a barrier: rank `r` owns `r, r + w, …`.
    fn world(w: usize, n: usize, m: usize) -> Vec<(Vec<f32>, Vec<f32>)> {
        let slots: Arc<Mutex<Vec<Vec<Vec<f64>>>>> = Arc::new(Mutex::new(vec![Vec::new(); w]));
        let barrier = Arc::new(Barrier::new(w));
        let handles: Vec<_> = (0..w)
            .map(|rank| {
                let (slots, barrier) = (slots.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let mut ex = |own: &[Vec<f64>], g: usize, len: usize| {
                        slots.lock().unwrap()[rank] = own.to_vec();
                        barrier.wait();
                        let all: Vec<Vec<f64>> = {
                            let s = slots.lock().unwrap();
                            (0..g).map(|k| s[k % w][k / w].clone()).collect()
                        };
                        barrier.wait();
                        assert!(all.iter().all(|v| v.len() == len));
                        Ok(all)
                    };
                    step(&mut ex, rank, w, n, m)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn same_bits_for_any_number_of_ranks_and_threads() {
        let (n, m) = (30, 8);
        let reference = {
            let mut ex = |own: &[Vec<f64>], g: usize, len: usize| LocalExchange.gather(own, g, len);
            step(&mut ex, 0, 1, n, m)
        };
        for threads in [1, 2, 3, 8] {
            let r = lockstep_tensor::threads::with_num_threads(threads, || {
                let mut ex =
                    |own: &[Vec<f64>], g: usize, len: usize| LocalExchange.gather(own, g, len);
                step(&mut ex, 0, 1, n, m)
            });
            assert_eq!(bits(&r.0), bits(&reference.0), "{threads} threads");
            assert_eq!(bits(&r.1), bits(&reference.1), "{threads} threads");
        }
        // W = 5 leaves rank 4 without a micro-shard (a shadow).
        for w in 1..=5 {
            for (rank, r) in world(w, n, m).into_iter().enumerate() {
                assert_eq!(
                    bits(&r.0),
                    bits(&reference.0),
                    "W = {w}, rank {rank}: gradients"
                );
                assert_eq!(
                    bits(&r.1),
                    bits(&reference.1),
                    "W = {w}, rank {rank}: state"
                );
            }
        }
    }

    #[test]
    fn agrees_with_plain_batch_norm_over_the_whole_batch() {
        let (n, m) = (30, 8);
        let mut ex = |own: &[Vec<f64>], g: usize, len: usize| LocalExchange.gather(own, g, len);
        let (grads, state) = step(&mut ex, 0, 1, n, m);
        // The same model and loss over the whole batch at once, without a SyncStep.
        let net = model();
        let loss = net
            .forward(&Var::constant(input(n)))
            .unwrap()
            .mul(&Var::constant(weights(n)))
            .unwrap()
            .sum()
            .unwrap();
        loss.backward().unwrap();
        let mut want = Vec::new();
        for p in net.parameters() {
            want.extend(p.grad().unwrap().to_vec::<f32>().unwrap());
        }
        let mut want_state = Vec::new();
        for (_, t) in net.state_dict() {
            if t.dtype() == DType::F32 {
                want_state.extend(t.to_vec::<f32>().unwrap());
            } else {
                want_state.push(t.item::<i64>().unwrap() as f32);
            }
        }
        for (a, b) in grads.iter().zip(&want) {
            assert!(
                (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                "{grads:?}\n{want:?}"
            );
        }
        for (a, b) in state.iter().zip(&want_state) {
            assert!(
                (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                "{state:?}\n{want_state:?}"
            );
        }
        assert_eq!(
            state.last(),
            Some(&1.0),
            "num_batches_tracked counts the step once"
        );
    }

    #[test]
    fn one_pass_in_batch_blocks_gives_the_micro_shards_bits() {
        // Linear and BatchNorm gradients reduced block by block over the whole batch: the
        // fixed-tree sum of separate micro-shards, and the same running statistics.
        let mut differs = false;
        for (n, m) in [(30, 8), (30, 7), (16, 16), (9, 2)] {
            let mut ex = |own: &[Vec<f64>], g: usize, len: usize| LocalExchange.gather(own, g, len);
            let (want, want_state) = step(&mut ex, 0, 1, n, m);
            let net = model();
            crate::batch_blocks::with_batch_blocks(n, m, || {
                net.forward(&Var::constant(input(n)))?
                    .mul(&Var::constant(weights(n)))?
                    .sum()?
                    .backward()
            })
            .unwrap();
            let mut got = Vec::new();
            for p in net.parameters() {
                got.extend(p.grad().unwrap().to_vec::<f32>().unwrap());
            }
            let mut state = Vec::new();
            for (_, t) in net.state_dict() {
                if t.dtype() == DType::F32 {
                    state.extend(t.to_vec::<f32>().unwrap());
                } else {
                    state.push(t.item::<i64>().unwrap() as f32);
                }
            }
            assert_eq!(bits(&got), bits(&want), "n {n} m {m}: gradients");
            assert_eq!(bits(&state), bits(&want_state), "n {n} m {m}: state");
            // One block is one sum over the batch: other bits somewhere (the test can fail).
            if n > m {
                let plain = model();
                crate::batch_blocks::with_batch_blocks(n, n, || {
                    plain
                        .forward(&Var::constant(input(n)))?
                        .mul(&Var::constant(weights(n)))?
                        .sum()?
                        .backward()
                })
                .unwrap();
                let mut one = Vec::new();
                for p in plain.parameters() {
                    one.extend(p.grad().unwrap().to_vec::<f32>().unwrap());
                }
                differs |= bits(&one) != bits(&want);
            }
        }
        assert!(differs, "the block size never changed a bit");
    }

    #[test]
    fn chan_merge_matches_the_moments_of_the_union() {
        let x: Vec<f64> = (0..40)
            .map(|t| ((t * 7 % 11) as f64) * 0.25 + 1e3)
            .collect();
        let whole = Moments::of(&x, 20, 2, 1);
        let parts: Vec<Moments> = (0..3)
            .map(|k| {
                let (a, b) = ([0, 7, 14][k], [7, 14, 20][k]);
                Moments::of(&x[a * 2..b * 2], b - a, 2, 1)
            })
            .collect();
        let merged = combine_moments(&parts);
        assert_eq!(merged.count, 20.0);
        for ch in 0..2 {
            assert!((merged.mean[ch] - whole.mean[ch]).abs() < 1e-12);
            assert!((merged.m2[ch] - whole.m2[ch]).abs() < 1e-9 * whole.m2[ch]);
        }
        let empty = Moments::of(&[], 0, 2, 1);
        assert_eq!(Moments::merge(&empty, &whole), whole);
    }

    #[test]
    fn errors_instead_of_panics() {
        let mut ex = LocalExchange;
        assert!(SyncStep::new(&mut ex, 2, vec![]).is_err());
        assert!(
            SyncStep::new(
                &mut ex,
                2,
                vec![MicroShard {
                    index: 2,
                    owned: true
                }]
            )
            .is_err()
        );
        // One value per channel over the whole batch.
        let bn = BatchNorm::new_1d(3).unwrap();
        let mut s = SyncStep::new(
            &mut ex,
            1,
            vec![MicroShard {
                index: 0,
                owned: true,
            }],
        )
        .unwrap();
        let e = s
            .forward(|_| bn.forward(&Var::constant(Tensor::ones(&[1, 3], DType::F32)?)))
            .unwrap_err();
        assert!(
            e.to_string().contains("more than 1 value per channel"),
            "{e}"
        );
        assert!(!is_active());
    }
}
