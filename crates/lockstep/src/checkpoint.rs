//! Checkpoints: one `.safetensors` file that PyTorch's `safetensors` package reads, written
//! atomically, checked on load.
//!
//! What a file holds (all names documented, so a checkpoint can be read from Python):
//!
//! | name | what |
//! |---|---|
//! | the model's `state_dict` names (`0.weight`, `lstm.weight_ih_l0`, `1.running_mean`, …) | parameters and buffers, so `model.load_state_dict(load_file(path), strict=False)` works in PyTorch |
//! | `optimizer.state.{i}.{momentum_buffer,exp_avg,exp_avg_sq,max_exp_avg_sq,step}` | the optimizer's per-parameter state ([`Optimizer::state`]) |
//! | `rng.torch` (`uint8`, 5,056 bytes) | the default generator: the bytes `torch.set_rng_state` accepts |
//! | `rng.python`, `rng.numpy` (`uint8`) | Python's global `random` and NumPy's global `RandomState`: 624 little-endian `u32` words of the Mersenne Twister, the position (`u64`), a flag byte for a cached Gaussian and that value (`f64`) |
//! | `loader.state` (`uint8`) | the data loader's position and generators ([`LoaderState::to_bytes`]) |
//! | `rng.registered.{i}` (`uint8`) | the state of the `i`-th generator added with [`register_rng`](crate::register_rng), if it can give one ([`Reseed::state_bytes`](crate::Reseed::state_bytes)) |
//! | any other name | tensors the caller added with [`Checkpoint::put_tensor`] |
//!
//! The safetensors metadata (string to string) holds `lockstep.format` (this module's
//! [`FORMAT_VERSION`]), `lockstep.version` (the crate version), `lockstep.autotune` (the
//! autotuner's pinned choices: op, shape key, algorithm), `lockstep.optimizer` and
//! `lockstep.scheduler` (JSON), `lockstep.meta` (the caller's JSON object: epoch, step,
//! configuration, …) and `lockstep.checksum`: the SHA-256 of every tensor (name, dtype, shape,
//! bytes, in name order) and every other metadata entry (in key order). A file whose checksum
//! does not match, that is truncated, or that another format version wrote, is refused.
//!
//! Saving writes a unique temporary file in the target directory, flushes it to disk, renames
//! it over the target and flushes the directory: a crash at any moment leaves the previous file
//! intact, never a file that loads as valid but is not.

use crate::Error;
use crate::data::LoaderState;
use crate::nn::Module;
use crate::nn::optim::{LrScheduler, Optimizer, SchedulerState};
use lockstep_rng::compat::numpy::LegacyState;
use lockstep_rng::compat::python::PyState;
use lockstep_tensor::{DType, Tensor};
use safetensors::{Dtype, SafeTensors, View};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The checkpoint format version this lockstep writes and reads.
pub const FORMAT_VERSION: &str = "1";

/// What is wrong with a checkpoint, by kind ([`Error::Checkpoint`] carries it). Its message
/// names the file, the entry, the setting or the tensor concerned, so a user can tell a
/// damaged file from another run's or another version's.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// The file (or its directory) cannot be read or written: the action (`read`, `write`,
    /// `create directory`, …), the path and the operating system's message.
    #[error("cannot {action} {}: {message}", path.display())]
    Io {
        /// What was attempted, e.g. `read`.
        action: String,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// An error in the file at `path`.
    #[error("{}: {error}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        error: Box<CheckpointError>,
    },
    /// Not a safetensors file, or a truncated one: the parser's message.
    #[error("not a valid safetensors file: {0}")]
    NotSafetensors(String),
    /// A safetensors file without `lockstep.format`: not written by lockstep.
    #[error("not a lockstep checkpoint (no lockstep.format)")]
    NotLockstep,
    /// A checkpoint of another format version.
    #[error("format version {found}; this lockstep reads version {FORMAT_VERSION}")]
    Version {
        /// The version the file declares.
        found: String,
    },
    /// The file has no checksum.
    #[error("no checksum")]
    NoChecksum,
    /// The checksum does not match the contents: the file was changed or damaged.
    #[error("checksum mismatch: the file is corrupt")]
    ChecksumMismatch,
    /// An entry the reader needs is absent (e.g. `optimizer`, `rng.torch`).
    #[error("no {0} in the checkpoint")]
    Missing(String),
    /// A tensor whose bytes are not a valid value of its dtype, or whose dtype is not
    /// supported.
    #[error("tensor {name}: {reason}")]
    Tensor {
        /// The tensor's name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// An entry that is present but invalid (e.g. a generator state of the wrong length).
    #[error("{entry}: {reason}")]
    Invalid {
        /// The entry (`optimizer`, `scheduler`, `rng.python`, a metadata key, …).
        entry: String,
        /// What is wrong.
        reason: String,
    },
    /// The checkpoint's tensors do not fit the model it is loaded into.
    #[error("the checkpoint is for another model: {0}")]
    OtherModel(String),
    /// The checkpoint was written by a run with other settings: each setting that differs
    /// (`seed 1, lr 0.05`: the checkpoint's values).
    #[error(
        "the checkpoint is from another run: its configuration {theirs} differs from this one \
         {ours}"
    )]
    OtherRun {
        /// The checkpoint's configuration.
        theirs: String,
        /// This run's configuration.
        ours: String,
    },
    /// The checkpoint was written by a run whose named flags differ from this run's.
    #[error("the checkpoint is from a run with other settings: {}", list_flags(.0))]
    OtherFlags(Vec<FlagDifference>),
    /// Tensors that nothing of the run reads (another kind of run wrote it).
    #[error("the checkpoint has unexpected tensors {0:?}")]
    Unexpected(Vec<String>),
    /// A checkpoint directory that holds only other runs' checkpoints: each file with the
    /// settings that differ, and this run's settings where known.
    #[error(
        "no checkpoint of this run in {}: it holds {} checkpoint(s) of other runs: {}{}. \
         Resume with the flags of that run, or use another --checkpoint-dir",
        dir.display(),
        others.len(),
        others.join("; "),
        ours.as_ref().map_or(String::new(), |o| format!("; this run has {o}"))
    )]
    NoneOfThisRun {
        /// The directory.
        dir: PathBuf,
        /// `FILE (differences)` for each checkpoint of another run.
        others: Vec<String>,
        /// This run's settings.
        ours: Option<String>,
    },
    /// A checkpoint directory where no checkpoint loads: the last file's error.
    #[error("no valid checkpoint in {}: {last}", dir.display())]
    NoneValid {
        /// The directory.
        dir: PathBuf,
        /// Why the last checkpoint tried did not load.
        last: Box<Error>,
    },
    /// The metadata contradicts itself (e.g. a step outside its epoch).
    #[error("metadata contradicts itself: {0}")]
    Contradiction(String),
    /// The checkpoint cannot be serialized.
    #[error("cannot serialize: {0}")]
    Serialize(String),
}

/// One flag whose value in a checkpoint's run differs from this run's.
#[derive(Debug, Clone, PartialEq)]
pub struct FlagDifference {
    /// The flag, e.g. `--seed` (with a note where the flag is derived).
    pub flag: String,
    /// Its value in the checkpoint's run (JSON).
    pub checkpoint: String,
    /// Its value in this run (JSON).
    pub run: String,
}

impl std::fmt::Display for FlagDifference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} in the checkpoint, {} in this run",
            self.flag, self.checkpoint, self.run
        )
    }
}

fn list_flags(d: &[FlagDifference]) -> String {
    if d.is_empty() {
        // Keys only the checkpoint has (a newer or older lockstep).
        return "other settings".into();
    }
    d.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl CheckpointError {
    /// [`CheckpointError::Io`] from an I/O error.
    pub fn io(action: impl Into<String>, path: &Path, e: &std::io::Error) -> Self {
        Self::Io {
            action: action.into(),
            path: path.to_path_buf(),
            message: e.to_string(),
        }
    }

    /// [`CheckpointError::Invalid`].
    pub fn invalid(entry: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Invalid {
            entry: entry.into(),
            reason: reason.into(),
        }
    }
}

impl From<CheckpointError> for Error {
    fn from(e: CheckpointError) -> Self {
        Error::Checkpoint(e)
    }
}

use CheckpointError as E;

fn tensor_err(name: &str, reason: impl ToString) -> Error {
    E::Tensor {
        name: name.to_string(),
        reason: reason.to_string(),
    }
    .into()
}

/// The contents of one checkpoint: named tensors and metadata.
#[derive(Clone, Debug, Default)]
pub struct Checkpoint {
    tensors: BTreeMap<String, Tensor>,
    meta: BTreeMap<String, String>,
}

struct Bytes<'a> {
    dtype: Dtype,
    shape: &'a [usize],
    data: Vec<u8>,
}

impl View for &Bytes<'_> {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

fn le_bytes(t: &Tensor) -> (Dtype, Vec<u8>) {
    let c = t.contiguous();
    match c.dtype() {
        DType::F32 => (
            Dtype::F32,
            c.data::<f32>()
                .expect("dtype")
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
        DType::F64 => (
            Dtype::F64,
            c.data::<f64>()
                .expect("dtype")
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
        DType::I64 => (
            Dtype::I64,
            c.data::<i64>()
                .expect("dtype")
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
        DType::U8 => (Dtype::U8, c.data::<u8>().expect("dtype").to_vec()),
        DType::Bool => (
            Dtype::BOOL,
            c.data::<bool>()
                .expect("dtype")
                .iter()
                .map(|&b| b as u8)
                .collect(),
        ),
    }
}

fn from_le_bytes(name: &str, dtype: Dtype, shape: &[usize], data: &[u8]) -> Result<Tensor, Error> {
    fn words<const N: usize, T>(data: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
        data.chunks_exact(N)
            .map(|c| f(c.try_into().expect("chunk of N")))
            .collect()
    }
    let t = match dtype {
        Dtype::F32 => Tensor::from_vec(words(data, f32::from_le_bytes), shape),
        Dtype::F64 => Tensor::from_vec(words(data, f64::from_le_bytes), shape),
        Dtype::I64 => Tensor::from_vec(words(data, i64::from_le_bytes), shape),
        Dtype::U8 => Tensor::from_vec(data.to_vec(), shape),
        Dtype::BOOL => {
            if data.iter().any(|&b| b > 1) {
                return Err(tensor_err(name, "a bool that is neither 0 nor 1"));
            }
            Tensor::from_vec(data.iter().map(|&b| b == 1).collect::<Vec<bool>>(), shape)
        }
        other => {
            return Err(tensor_err(
                name,
                format!("dtype {other:?} is not supported"),
            ));
        }
    };
    t.map_err(|e| tensor_err(name, e))
}

pub(crate) fn mt_state_bytes(words: &[u32], pos: usize, gauss: Option<f64>) -> Vec<u8> {
    let mut b = Vec::with_capacity(words.len() * 4 + 17);
    for w in words {
        b.extend(w.to_le_bytes());
    }
    b.extend((pos as u64).to_le_bytes());
    b.push(gauss.is_some() as u8);
    b.extend(gauss.unwrap_or(0.0).to_le_bytes());
    b
}

/// [`mt_state_parse`] with the RNG layer's error.
pub(crate) fn mt_state_parse_rng(b: &[u8]) -> lockstep_rng::Result<(Vec<u32>, usize, Option<f64>)> {
    mt_state_parse("state", b).map_err(|e| lockstep_rng::Error::InvalidArgument {
        op: "set_state_bytes",
        arg: "state",
        reason: e.to_string(),
    })
}

fn mt_state_parse(name: &str, b: &[u8]) -> Result<(Vec<u32>, usize, Option<f64>), Error> {
    if b.len() != 624 * 4 + 17 {
        return Err(E::invalid(
            name,
            format!("{} bytes, expected {}", b.len(), 624 * 4 + 17),
        )
        .into());
    }
    let words = b[..2496]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    let pos = u64::from_le_bytes(b[2496..2504].try_into().expect("8 bytes"));
    let gauss = match b[2504] {
        0 => None,
        1 => Some(f64::from_le_bytes(
            b[2505..2513].try_into().expect("8 bytes"),
        )),
        _ => return Err(E::invalid(name, "invalid Gaussian flag").into()),
    };
    let pos = usize::try_from(pos).map_err(|_| E::invalid(name, "position out of range"))?;
    Ok((words, pos, gauss))
}

impl Checkpoint {
    /// An empty checkpoint.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a tensor under `name`.
    pub fn put_tensor(&mut self, name: impl Into<String>, t: Tensor) {
        self.tensors.insert(name.into(), t);
    }

    /// The tensor under `name`.
    pub fn tensor(&self, name: &str) -> Option<&Tensor> {
        self.tensors.get(name)
    }

    /// Every tensor name, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(|s| s.as_str())
    }

    /// Sets the caller's metadata (`lockstep.meta`): any JSON object.
    pub fn set_meta(&mut self, meta: &serde_json::Value) {
        self.meta.insert("lockstep.meta".into(), meta.to_string());
    }

    /// The caller's metadata (`Null` if none was set).
    pub fn meta(&self) -> serde_json::Value {
        self.meta
            .get("lockstep.meta")
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or(serde_json::Value::Null)
    }

    /// Adds a module's `state_dict` under its own names (no prefix).
    pub fn put_module(&mut self, m: &dyn Module) {
        for (k, t) in m.state_dict() {
            self.tensors.insert(k, t);
        }
    }

    /// Loads the module's `state_dict` from the tensors of its names (strict on the module's
    /// names: each must be present with its shape and dtype).
    ///
    /// # Errors
    /// A missing name or a shape or dtype mismatch; the module is then unchanged.
    pub fn load_module(&self, m: &dyn Module) -> Result<(), Error> {
        let mut state = Vec::new();
        let mut missing = Vec::new();
        for n in m.named_all() {
            match self.tensors.get(&n.name) {
                Some(t) => state.push((n.name, t.clone())),
                None => missing.push(n.name),
            }
        }
        if !missing.is_empty() {
            return Err(E::OtherModel(format!("missing {missing:?}")).into());
        }
        m.load_state_dict(&state)
            .map_err(|e| E::OtherModel(e.to_string()).into())
    }

    /// Adds an optimizer's state (`optimizer.state.…`) and its learning rates (each
    /// parameter group's, `lrs` and `initial_lrs`; `lr` and `initial_lr` are the first
    /// group's, which is what checkpoints before parameter groups held).
    pub fn put_optimizer(&mut self, opt: &dyn Optimizer) {
        for (k, t) in opt.state() {
            self.tensors.insert(format!("optimizer.{k}"), t);
        }
        let groups = opt.param_groups();
        let lrs: Vec<f64> = groups.iter().map(|g| g.lr).collect();
        let initial: Vec<Option<f64>> = groups.iter().map(|g| g.initial_lr).collect();
        let j = serde_json::json!({
            "lr": opt.lr(),
            "initial_lr": opt.initial_lr(),
            "lrs": lrs,
            "initial_lrs": initial,
        });
        self.meta.insert("lockstep.optimizer".into(), j.to_string());
    }

    /// Restores an optimizer's state and learning rates.
    ///
    /// # Errors
    /// Missing or ill-fitting state (the optimizer is then unchanged).
    pub fn load_optimizer(&self, opt: &mut dyn Optimizer) -> Result<(), Error> {
        let state: Vec<(String, Tensor)> = self
            .tensors
            .iter()
            .filter_map(|(k, t)| {
                k.strip_prefix("optimizer.")
                    .map(|s| (s.to_string(), t.clone()))
            })
            .collect();
        let j: serde_json::Value = self
            .meta
            .get("lockstep.optimizer")
            .and_then(|s| serde_json::from_str(s).ok())
            .ok_or_else(|| E::Missing("optimizer".into()))?;
        let lr = j["lr"]
            .as_f64()
            .ok_or_else(|| E::invalid("optimizer", "no learning rate"))?;
        let n = opt.param_groups().len();
        // Per-group rates; a checkpoint from before parameter groups has only `lr`.
        let lrs: Vec<(f64, Option<f64>)> = match j["lrs"].as_array() {
            Some(a) => {
                let init = j["initial_lrs"].as_array();
                if a.len() != n || init.is_some_and(|i| i.len() != n) {
                    return Err(E::invalid(
                        "optimizer",
                        format!(
                            "the checkpoint has {} parameter group(s), the optimizer {n}",
                            a.len()
                        ),
                    )
                    .into());
                }
                let mut v = Vec::with_capacity(n);
                for (g, x) in a.iter().enumerate() {
                    let lr = x
                        .as_f64()
                        .ok_or_else(|| E::invalid("optimizer", "a bad learning rate"))?;
                    v.push((lr, init.and_then(|i| i[g].as_f64())));
                }
                v
            }
            None => vec![(lr, j["initial_lr"].as_f64()); n],
        };
        opt.load_state(&state)?;
        for (g, (lr, initial)) in opt.param_groups_mut().iter_mut().zip(lrs) {
            g.lr = lr;
            g.initial_lr = initial;
        }
        Ok(())
    }

    /// Adds a scheduler's position.
    pub fn put_scheduler(&mut self, s: &dyn LrScheduler) {
        let st = s.state();
        let j = serde_json::json!({
            "last_epoch": st.last_epoch,
            "_step_count": st.step_count,
            "base_lrs": st.base_lrs,
            "_last_lr": st.last_lrs,
        });
        self.meta.insert("lockstep.scheduler".into(), j.to_string());
    }

    /// Restores a scheduler's position.
    ///
    /// # Errors
    /// No scheduler in the checkpoint, or an invalid position.
    pub fn load_scheduler(&self, s: &mut dyn LrScheduler) -> Result<(), Error> {
        let j: serde_json::Value = self
            .meta
            .get("lockstep.scheduler")
            .and_then(|s| serde_json::from_str(s).ok())
            .ok_or_else(|| E::Missing("scheduler".into()))?;
        // One rate per group (`base_lrs`, `_last_lr` lists); checkpoints from before
        // parameter groups hold one number each (`base_lr`, `_last_lr`).
        let rates = |v: &serde_json::Value| -> Option<Vec<f64>> {
            match v.as_array() {
                Some(a) => a.iter().map(serde_json::Value::as_f64).collect(),
                None => v.as_f64().map(|x| vec![x]),
            }
        };
        let base = if j["base_lrs"].is_null() {
            &j["base_lr"]
        } else {
            &j["base_lrs"]
        };
        let bad = |k: &str| E::invalid("scheduler", format!("no {k}, or not a number"));
        let st = SchedulerState {
            last_epoch: j["last_epoch"].as_i64().ok_or_else(|| bad("last_epoch"))?,
            step_count: j["_step_count"]
                .as_u64()
                .ok_or_else(|| bad("_step_count"))?,
            base_lrs: rates(base).ok_or_else(|| bad("base_lrs"))?,
            last_lrs: rates(&j["_last_lr"]).ok_or_else(|| bad("_last_lr"))?,
        };
        s.load_state(&st)?;
        Ok(())
    }

    /// Adds the data loader's state (`loader.state`).
    pub fn put_loader(&mut self, st: &LoaderState) {
        let b = st.to_bytes();
        let n = b.len();
        self.put_tensor("loader.state", Tensor::from_vec(b, &[n]).expect("1-D"));
    }

    /// The data loader's state.
    ///
    /// # Errors
    /// None saved, or bytes that are not a loader state.
    pub fn loader(&self) -> Result<LoaderState, Error> {
        let t = self
            .tensors
            .get("loader.state")
            .ok_or_else(|| E::Missing("loader state".into()))?;
        Ok(LoaderState::from_bytes(&t.to_vec::<u8>()?)?)
    }

    /// Adds the states of the process-wide generators: the default torch generator
    /// (`rng.torch`), Python's `random` (`rng.python`) and NumPy's global `RandomState`
    /// (`rng.numpy`).
    pub fn put_global_rngs(&mut self) {
        let u8s = |b: Vec<u8>| {
            let n = b.len();
            Tensor::from_vec(b, &[n]).expect("1-D")
        };
        self.put_tensor("rng.torch", u8s(crate::get_rng_state()));
        let p = crate::python_random().getstate();
        self.put_tensor(
            "rng.python",
            u8s(mt_state_bytes(&p.mt, p.pos, p.gauss_next)),
        );
        let n = crate::numpy_random().get_state();
        let g = n.has_gauss.then_some(n.cached_gaussian);
        self.put_tensor("rng.numpy", u8s(mt_state_bytes(&n.key, n.pos, g)));
        for (i, r) in crate::registered_rngs().iter().enumerate() {
            let state = r.lock().unwrap_or_else(|e| e.into_inner()).state_bytes();
            if let Some(b) = state {
                self.put_tensor(format!("rng.registered.{i}"), u8s(b));
            }
        }
        let choices: Vec<serde_json::Value> = lockstep_tensor::autotune::choices()
            .into_iter()
            .map(|(op, key, algo)| serde_json::json!({"op": op, "key": key, "algo": algo}))
            .collect();
        self.meta.insert(
            "lockstep.autotune".into(),
            serde_json::Value::Array(choices).to_string(),
        );
    }

    /// Restores the process-wide generators saved by [`put_global_rngs`](Self::put_global_rngs).
    /// All three states are checked before any is set.
    ///
    /// # Errors
    /// A missing or invalid state (no generator is changed then).
    pub fn restore_global_rngs(&self) -> Result<(), Error> {
        let get = |k: &str| -> Result<Vec<u8>, Error> {
            Ok(self
                .tensors
                .get(k)
                .ok_or_else(|| E::Missing(k.into()))?
                .to_vec::<u8>()?)
        };
        let torch = get("rng.torch")?;
        let mut g = crate::Generator::new();
        g.set_state(&torch)?;
        let (mt, pos, gauss_next) = mt_state_parse("rng.python", &get("rng.python")?)?;
        let py = PyState {
            mt,
            pos,
            gauss_next,
        };
        let mut pr = lockstep_rng::compat::python::Random::from_u64(0);
        pr.setstate(&py)?;
        let (key, pos, gauss) = mt_state_parse("rng.numpy", &get("rng.numpy")?)?;
        let np = LegacyState {
            key,
            pos,
            has_gauss: gauss.is_some(),
            cached_gaussian: gauss.unwrap_or(0.0),
        };
        let mut nr = lockstep_rng::compat::numpy::RandomState::new(0);
        nr.set_state(&np)?;
        let registered = crate::registered_rngs();
        for (i, r) in registered.iter().enumerate() {
            if let Some(t) = self.tensors.get(&format!("rng.registered.{i}")) {
                let b = t.to_vec::<u8>()?;
                r.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .set_state_bytes(&b)?;
            }
        }
        *crate::default_generator() = g;
        *crate::python_random() = pr;
        *crate::numpy_random() = nr;
        Ok(())
    }

    fn checksum(&self, parts: &[(String, Dtype, Vec<usize>, Vec<u8>)]) -> String {
        let mut h = Sha256::new();
        for (name, dtype, shape, data) in parts {
            h.update((name.len() as u64).to_le_bytes());
            h.update(name.as_bytes());
            h.update(format!("{dtype:?}").as_bytes());
            h.update((shape.len() as u64).to_le_bytes());
            for &d in shape {
                h.update((d as u64).to_le_bytes());
            }
            h.update((data.len() as u64).to_le_bytes());
            h.update(data);
        }
        for (k, v) in &self.meta {
            if k == "lockstep.checksum" {
                continue;
            }
            h.update((k.len() as u64).to_le_bytes());
            h.update(k.as_bytes());
            h.update((v.len() as u64).to_le_bytes());
            h.update(v.as_bytes());
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The file's bytes.
    ///
    /// # Errors
    /// If safetensors refuses the tensors (e.g. a header too large).
    pub fn to_bytes(&self) -> Result<Vec<u8>, Error> {
        let mut me = self.clone();
        me.meta
            .insert("lockstep.format".into(), FORMAT_VERSION.into());
        me.meta
            .insert("lockstep.version".into(), env!("CARGO_PKG_VERSION").into());
        let parts: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = me
            .tensors
            .iter()
            .map(|(k, t)| {
                let (d, b) = le_bytes(t);
                (k.clone(), d, t.shape().to_vec(), b)
            })
            .collect();
        let sum = me.checksum(&parts);
        me.meta.insert("lockstep.checksum".into(), sum);
        let views: Vec<(String, Bytes)> = parts
            .iter()
            .map(|(k, d, s, b)| {
                (
                    k.clone(),
                    Bytes {
                        dtype: *d,
                        shape: s,
                        data: b.clone(),
                    },
                )
            })
            .collect();
        let meta: HashMap<String, String> = me.meta.into_iter().collect();
        safetensors::serialize(views.iter().map(|(k, v)| (k.as_str(), v)), Some(meta))
            .map_err(|e| E::Serialize(e.to_string()).into())
    }

    /// Parses and checks a file's bytes.
    ///
    /// # Errors
    /// Not a safetensors file, truncated, another format version, a checksum that does not
    /// match, an unsupported dtype.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| E::NotSafetensors(e.to_string()))?;
        let (_, header) =
            SafeTensors::read_metadata(bytes).map_err(|e| E::NotSafetensors(e.to_string()))?;
        let meta: BTreeMap<String, String> = header
            .metadata()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        match meta.get("lockstep.format").map(String::as_str) {
            Some(FORMAT_VERSION) => {}
            Some(v) => return Err(E::Version { found: v.into() }.into()),
            None => return Err(E::NotLockstep.into()),
        }
        let mut parts = Vec::new();
        let mut tensors = BTreeMap::new();
        for (name, v) in st.tensors() {
            let t = from_le_bytes(&name, v.dtype(), v.shape(), v.data())?;
            parts.push((
                name.clone(),
                v.dtype(),
                v.shape().to_vec(),
                v.data().to_vec(),
            ));
            tensors.insert(name, t);
        }
        parts.sort_by(|a, b| a.0.cmp(&b.0));
        let me = Self { tensors, meta };
        let want = me.meta.get("lockstep.checksum").ok_or(E::NoChecksum)?;
        if me.checksum(&parts) != *want {
            return Err(E::ChecksumMismatch.into());
        }
        Ok(me)
    }

    /// Writes the checkpoint to `path` atomically (see the module docs).
    ///
    /// # Errors
    /// I/O errors (the previous file at `path`, if any, is then intact).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), Error> {
        let path = path.as_ref();
        let bytes = self.to_bytes()?;
        lockstep_tensor::io::write_atomic(path, &bytes).map_err(|e| E::io("write", path, &e).into())
    }

    /// Reads and checks the checkpoint at `path`.
    ///
    /// # Errors
    /// I/O errors and everything [`from_bytes`](Self::from_bytes) refuses.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| E::io("read", path, &e))?;
        Self::from_bytes(&bytes).map_err(|e| match e {
            Error::Checkpoint(e) => E::InFile {
                path: path.to_path_buf(),
                error: Box::new(e),
            }
            .into(),
            e => e,
        })
    }
}

/// The tensors of any safetensors file (e.g. `safetensors.torch.save_file(model.state_dict(),
/// path)` in PyTorch), by name, without the checks of a lockstep checkpoint.
///
/// # Errors
/// An unreadable or invalid file, or an unsupported dtype.
pub fn read_state_dict(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>, Error> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| E::io("read", path, &e))?;
    let st = SafeTensors::deserialize(&bytes).map_err(|e| E::InFile {
        path: path.to_path_buf(),
        error: Box::new(E::NotSafetensors(e.to_string())),
    })?;
    let mut out = Vec::new();
    for (name, v) in st.tensors() {
        let t = from_le_bytes(&name, v.dtype(), v.shape(), v.data())?;
        out.push((name, t));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::Var;
    use crate::nn::optim::{Group, Sgd, SgdOptions, StepLR};

    fn sgd(groups: &[f64]) -> Sgd {
        let g = groups
            .iter()
            .map(|&lr| {
                let p = Var::new(Tensor::zeros(&[2], DType::F32).unwrap(), true);
                Group::new(
                    vec![p],
                    SgdOptions {
                        lr,
                        ..Default::default()
                    },
                )
            })
            .collect();
        Sgd::with_groups(g).unwrap()
    }

    /// Every group's rates and the scheduler's per-group rates come back.
    #[test]
    fn two_groups_round_trip() {
        let mut opt = sgd(&[0.1, 0.03]);
        let mut s = StepLR::new(&mut opt, 1, 0.5).unwrap();
        s.step(&mut opt);
        let mut c = Checkpoint::new();
        c.put_optimizer(&opt);
        c.put_scheduler(&s);
        let c = Checkpoint::from_bytes(&c.to_bytes().unwrap()).unwrap();
        let mut back = sgd(&[0.1, 0.03]);
        let mut s2 = StepLR::new(&mut back, 1, 0.5).unwrap();
        c.load_optimizer(&mut back).unwrap();
        c.load_scheduler(&mut s2).unwrap();
        let lrs = |o: &Sgd| o.param_groups().iter().map(|g| g.lr).collect::<Vec<_>>();
        assert_eq!(lrs(&back), [0.05, 0.015]);
        assert_eq!(s2.state(), s.state());
        // A checkpoint of two groups does not load into one group.
        let mut one = sgd(&[0.1]);
        assert!(c.load_optimizer(&mut one).is_err());
        assert!(
            c.load_scheduler(&mut StepLR::new(&mut one, 1, 0.5).unwrap())
                .is_err()
        );
    }

    /// Checkpoints written before parameter groups (one rate each) still load.
    #[test]
    fn one_rate_checkpoints_still_load() {
        let mut c = Checkpoint::new();
        c.meta.insert(
            "lockstep.optimizer".into(),
            r#"{"lr":0.025,"initial_lr":0.1}"#.into(),
        );
        c.meta.insert(
            "lockstep.scheduler".into(),
            r#"{"last_epoch":2,"_step_count":3,"base_lr":0.1,"_last_lr":0.025}"#.into(),
        );
        let mut opt = sgd(&[0.1]);
        let mut s = StepLR::new(&mut opt, 1, 0.5).unwrap();
        c.load_optimizer(&mut opt).unwrap();
        c.load_scheduler(&mut s).unwrap();
        assert_eq!((opt.lr(), opt.initial_lr()), (0.025, Some(0.1)));
        assert_eq!(s.state().base_lrs, [0.1]);
        s.step(&mut opt);
        assert_eq!(opt.lr(), 0.0125);
    }
}
