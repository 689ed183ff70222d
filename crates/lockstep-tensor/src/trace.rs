//! Tracing: a record of every op call, so that two runs can be compared and the first op where
//! they part named (`lockstep verify`).
//!
//! Dispatch ([`Op::run`](crate::dispatch::Op::run)) calls [`record`] after each op's kernel
//! ran, with its name, the algorithm chosen, its inputs and its output (the random draws, which
//! have one implementation, call it themselves). When tracing is off that costs one relaxed
//! atomic load. When it is on, a [`Record`] — call index, training step ([`set_step`]), op,
//! algorithm, input and output shapes, dtype, the backward node it ran for (if any) and a hash
//! of the output's bits — goes to the sink as one JSON line.
//!
//! Two sinks:
//! - a file: `LOCKSTEP_TRACE=path` in the environment (read at the first op; records the ops of
//!   the process's main thread), or [`start`]/[`stop`]/[`to_file`] (records the ops of the
//!   calling thread). Buffered; flushed by [`stop`], [`flush`] and at process exit (the
//!   `LOCKSTEP_TRACE` sink is flushed by an `atexit` hook).
//! - [`capture`]: the records of one closure on this thread, in memory (tests).
//!
//! Only ops called on the traced thread are recorded: ops run inside a kernel's worker threads
//! or in data-loader workers are not, so that a trace's order never depends on scheduling.
//!
//! # The hash
//! `hash` is 16 hex digits of a 64-bit FNV-1a–style hash of the output's elements in logical
//! (row-major) order, as their little-endian bytes: four lanes, each starting at the FNV offset
//! basis `0xcbf29ce484222325` xor its index, take 8-byte words in turn (`h = (h ^ w) *
//! 0x100000001b3`); the bytes after the last full 32-byte block go byte by byte into lane 0 as
//! FNV-1a; the result is FNV-1a over the four lanes' little-endian bytes and the byte length.
//! Not cryptographic: equal outputs hash equal; different ones almost surely differ.
//!
//! # Values for one call
//! With `LOCKSTEP_TRACE_DUMP=N`, the record of call `N` also holds its output's values (as
//! `f64`), which `lockstep verify` uses to report the largest difference between two runs.

use crate::Tensor;
use std::cell::{Cell, RefCell};
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering::Relaxed};
use std::thread::ThreadId;

/// One op call.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Index of this call among the traced calls (from 0).
    pub call: u64,
    /// The training step set by [`set_step`] (`None` before the first).
    pub step: Option<i64>,
    /// The op's name, as dispatch and errors name it.
    pub op: String,
    /// The algorithm id of the implementation that ran.
    pub algo: String,
    /// The backward node this call ran for (`Var::backward`), `None` in the forward pass.
    pub backward: Option<String>,
    /// The inputs' shapes.
    pub inputs: Vec<Vec<usize>>,
    /// The output's shape.
    pub output: Vec<usize>,
    /// The output's dtype (`f32`, `f64`, `i64`, `u8`, `bool`).
    pub dtype: String,
    /// The hash of the output's bits (see the module documentation).
    pub hash: String,
    /// The output's values, for the call named by `LOCKSTEP_TRACE_DUMP` only.
    pub values: Option<Vec<f64>>,
}

impl Record {
    /// The record as one JSON object (a trace file's line).
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "call": self.call, "step": self.step, "op": self.op, "algo": self.algo,
            "inputs": self.inputs, "output": self.output, "dtype": self.dtype, "hash": self.hash,
        });
        if let Some(b) = &self.backward {
            v["backward"] = b.as_str().into();
        }
        if let Some(x) = &self.values {
            // JSON has no NaN or infinity: those travel as strings.
            v["values"] = x
                .iter()
                .map(|&f| {
                    if f.is_finite() {
                        serde_json::json!(f)
                    } else {
                        serde_json::json!(f.to_string())
                    }
                })
                .collect();
        }
        v
    }

    /// A record from [`to_json`](Self::to_json)'s object.
    pub fn from_json(v: &serde_json::Value) -> Option<Record> {
        let shape = |v: &serde_json::Value| -> Option<Vec<usize>> {
            v.as_array()?
                .iter()
                .map(|d| d.as_u64().map(|d| d as usize))
                .collect()
        };
        Some(Record {
            call: v["call"].as_u64()?,
            step: v["step"].as_i64(),
            op: v["op"].as_str()?.to_string(),
            algo: v["algo"].as_str()?.to_string(),
            backward: v["backward"].as_str().map(str::to_string),
            inputs: v["inputs"]
                .as_array()?
                .iter()
                .map(shape)
                .collect::<Option<_>>()?,
            output: shape(&v["output"])?,
            dtype: v["dtype"].as_str()?.to_string(),
            hash: v["hash"].as_str()?.to_string(),
            values: v["values"].as_array().map(|a| {
                a.iter()
                    .map(|x| {
                        x.as_f64()
                            .or_else(|| x.as_str().and_then(|s| s.parse().ok()))
                            .unwrap_or(f64::NAN)
                    })
                    .collect()
            }),
        })
    }
}

/// `usize::MAX`: the environment has not been read yet; otherwise the number of active sinks
/// (file sink and captures, on any thread). Zero: tracing is off everywhere.
static ACTIVE: AtomicUsize = AtomicUsize::new(usize::MAX);
static STEP: AtomicI64 = AtomicI64::new(i64::MIN);
static SINK: Mutex<Option<FileSink>> = Mutex::new(None);
static ENV_ONCE: std::sync::Once = std::sync::Once::new();

struct FileSink {
    out: std::io::BufWriter<std::fs::File>,
    thread: Traced,
    call: u64,
    dump: Option<u64>,
}

thread_local! {
    static CAPTURE: RefCell<Option<(u64, Vec<Record>)>> = const { RefCell::new(None) };
    static BACKWARD: Cell<Option<&'static str>> = const { Cell::new(None) };
}

fn lock() -> std::sync::MutexGuard<'static, Option<FileSink>> {
    SINK.lock().unwrap_or_else(|e| e.into_inner())
}

#[cold]
fn init_from_env() {
    ENV_ONCE.call_once(|| {
        let _ = ACTIVE.compare_exchange(usize::MAX, 0, Relaxed, Relaxed);
        let Some(path) = std::env::var_os("LOCKSTEP_TRACE").filter(|p| !p.is_empty()) else {
            return;
        };
        // The main thread's ops (a program's training loop), whichever thread reads this.
        match open(std::path::Path::new(&path), Traced::Main) {
            Ok(s) => {
                install(s);
                extern "C" fn flush_at_exit() {
                    flush();
                }
                unsafe extern "C" {
                    safe fn atexit(f: extern "C" fn()) -> i32;
                }
                atexit(flush_at_exit);
            }
            Err(e) => log::warn!("LOCKSTEP_TRACE={}: {e}", path.to_string_lossy()),
        }
    });
}

/// Which thread a file sink records.
#[derive(Clone, Copy, PartialEq)]
enum Traced {
    /// The process's main thread (`LOCKSTEP_TRACE`).
    Main,
    /// The thread that called [`start`].
    Thread(ThreadId),
}

impl Traced {
    fn is_current(self) -> bool {
        let t = std::thread::current();
        match self {
            Traced::Main => t.name() == Some("main"),
            Traced::Thread(id) => t.id() == id,
        }
    }
}

fn open(path: &std::path::Path, thread: Traced) -> std::io::Result<FileSink> {
    let dump = std::env::var("LOCKSTEP_TRACE_DUMP")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    Ok(FileSink {
        out: std::io::BufWriter::with_capacity(1 << 16, std::fs::File::create(path)?),
        thread,
        call: 0,
        dump,
    })
}

fn install(s: FileSink) {
    let mut g = lock();
    if g.is_none() {
        ACTIVE.fetch_add(1, Relaxed);
    }
    *g = Some(s);
}

/// Starts writing the calling thread's op calls to `path` (JSON lines), replacing any file sink
/// (the old one is flushed). Call indices start at 0 and the step is reset.
///
/// # Errors
/// If the file cannot be created.
pub fn start(path: impl AsRef<std::path::Path>) -> std::io::Result<()> {
    init_from_env();
    stop()?;
    STEP.store(i64::MIN, Relaxed);
    install(open(
        path.as_ref(),
        Traced::Thread(std::thread::current().id()),
    )?);
    Ok(())
}

/// Stops the file sink (if any) and flushes it.
///
/// # Errors
/// If flushing fails.
pub fn stop() -> std::io::Result<()> {
    let mut g = lock();
    if let Some(mut s) = g.take() {
        ACTIVE.fetch_sub(1, Relaxed);
        s.out.flush()?;
    }
    Ok(())
}

/// Flushes the file sink's buffer (it stays open).
pub fn flush() {
    if let Some(s) = lock().as_mut() {
        let _ = s.out.flush();
    }
}

/// Traces the calling thread's ops to `path` while `f` runs, then stops and flushes.
///
/// # Errors
/// If the file cannot be created or flushed.
pub fn to_file<R>(path: impl AsRef<std::path::Path>, f: impl FnOnce() -> R) -> std::io::Result<R> {
    struct Stop;
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = stop();
        }
    }
    start(path)?;
    let guard = Stop;
    let r = f();
    drop(guard);
    Ok(r)
}

/// Runs `f` and returns the records of the ops it called on this thread (whatever the file
/// sink does). Nested captures: the inner one takes the records.
pub fn capture<R>(f: impl FnOnce() -> R) -> (R, Vec<Record>) {
    type Slot = Option<(u64, Vec<Record>)>;
    /// Puts the outer capture back if `f` panics.
    struct Restore(Option<Slot>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(outer) = self.0.take() {
                CAPTURE.with(|c| *c.borrow_mut() = outer);
                ACTIVE.fetch_sub(1, Relaxed);
            }
        }
    }
    init_from_env();
    let outer = CAPTURE.with(|c| c.borrow_mut().replace((0, Vec::new())));
    ACTIVE.fetch_add(1, Relaxed);
    let mut guard = Restore(Some(outer));
    let r = f();
    let outer = guard.0.take().flatten();
    let mine = CAPTURE.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer));
    ACTIVE.fetch_sub(1, Relaxed);
    (r, mine.map(|m| m.1).unwrap_or_default())
}

/// Sets the training step recorded with the following calls (the training loop calls it once
/// per step; `lockstep train` does).
pub fn set_step(step: usize) {
    STEP.store(step as i64, Relaxed);
}

/// Runs `f` (a backward closure of the node `name`) with its op calls marked as backward.
pub fn backward_scope<R>(name: &'static str, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<&'static str>);
    impl Drop for Restore {
        fn drop(&mut self) {
            BACKWARD.with(|b| b.set(self.0));
        }
    }
    let _g = Restore(BACKWARD.with(|b| b.replace(Some(name))));
    f()
}

/// Whether a call on this thread would be recorded now. One relaxed load when tracing is off.
#[inline]
pub fn enabled() -> bool {
    let a = ACTIVE.load(Relaxed);
    a != 0 && enabled_slow(a)
}

#[cold]
#[inline(never)]
fn enabled_slow(a: usize) -> bool {
    if a == usize::MAX {
        init_from_env();
        if ACTIVE.load(Relaxed) == 0 {
            return false;
        }
    }
    CAPTURE.with(|c| c.borrow().is_some()) || lock().as_ref().is_some_and(|s| s.thread.is_current())
}

/// Records one op call (see the module documentation). Ops call it after their kernel, with the
/// algorithm id dispatch chose; a no-op (one relaxed load) when tracing is off.
#[inline]
pub fn record(op: &str, algo: &str, inputs: &[&Tensor], output: &Tensor) {
    if enabled() {
        record_slow(op, algo, inputs, output);
    }
}

/// [`record`] on an op's result, passed through: `trace::traced(OP.name, c.imp.algo, &[a, b],
/// (c.imp.f)(a, b, &c.par))` in the op's last line.
#[inline]
pub fn traced(
    op: &str,
    algo: &str,
    inputs: &[&Tensor],
    out: crate::Result<Tensor>,
) -> crate::Result<Tensor> {
    if let Ok(t) = &out {
        record(op, algo, inputs, t);
    }
    out
}

/// [`record`] for a kernel whose output is a flat `f32` buffer not yet shaped into a tensor
/// (the output's shape is then recorded as `[len]`, and no input shapes).
#[inline]
pub fn record_f32(op: &str, algo: &str, output: &[f32]) {
    if enabled() {
        let t = Tensor::from_slice(output, &[output.len()]);
        if let Ok(t) = t {
            record_slow(op, algo, &[], &t);
        }
    }
}

#[cold]
#[inline(never)]
fn record_slow(op: &str, algo: &str, inputs: &[&Tensor], output: &Tensor) {
    let out = output.contiguous();
    let hash = crate::with_dtype!(out.dtype(), T => out.data::<T>().map(|d| hash_bytes(as_bytes(d))).unwrap_or(0));
    let mut r = Record {
        call: 0,
        step: match STEP.load(Relaxed) {
            i64::MIN => None,
            s => Some(s),
        },
        op: op.to_string(),
        algo: algo.to_string(),
        backward: BACKWARD.with(|b| b.get()).map(str::to_string),
        inputs: inputs.iter().map(|t| t.shape().to_vec()).collect(),
        output: out.shape().to_vec(),
        dtype: format!("{:?}", out.dtype()).to_lowercase(),
        hash: format!("{hash:016x}"),
        values: None,
    };
    let captured = CAPTURE.with(|c| {
        let mut c = c.borrow_mut();
        match c.as_mut() {
            Some((n, v)) => {
                r.call = *n;
                *n += 1;
                v.push(r.clone());
                true
            }
            None => false,
        }
    });
    if captured {
        return;
    }
    let mut g = lock();
    let Some(s) = g.as_mut() else { return };
    if !s.thread.is_current() {
        return;
    }
    r.call = s.call;
    s.call += 1;
    if s.dump == Some(r.call) {
        r.values = Some(out.to_f64_vec());
    }
    let _ = writeln!(s.out, "{}", r.to_json());
}

fn as_bytes<T: crate::Element>(d: &[T]) -> &[u8] {
    // SAFETY: every `Element` (f32, f64, i64, u8, bool) is plain data without padding; any
    // initialised value is valid to read as bytes.
    unsafe { std::slice::from_raw_parts(d.as_ptr().cast::<u8>(), std::mem::size_of_val(d)) }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The trace's output hash of a byte string (see the module documentation).
pub fn hash_bytes(b: &[u8]) -> u64 {
    let mut lanes = [0u64; 4];
    for (i, l) in lanes.iter_mut().enumerate() {
        *l = FNV_OFFSET ^ i as u64;
    }
    let mut blocks = b.chunks_exact(32);
    for blk in &mut blocks {
        for (i, l) in lanes.iter_mut().enumerate() {
            let w = u64::from_le_bytes(blk[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
            *l = (*l ^ w).wrapping_mul(FNV_PRIME);
        }
    }
    for &byte in blocks.remainder() {
        lanes[0] = (lanes[0] ^ byte as u64).wrapping_mul(FNV_PRIME);
    }
    let mut h = FNV_OFFSET;
    for byte in lanes
        .iter()
        .flat_map(|l| l.to_le_bytes())
        .chain((b.len() as u64).to_le_bytes())
    {
        h = (h ^ byte as u64).wrapping_mul(FNV_PRIME);
    }
    h
}

/// Reads a trace file (JSON lines) back.
///
/// # Errors
/// If the file cannot be read or a line is not a record.
pub fn read(path: impl AsRef<std::path::Path>) -> std::io::Result<Vec<Record>> {
    let text = std::fs::read_to_string(path)?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).map_err(std::io::Error::other)?;
            Record::from_json(&v)
                .ok_or_else(|| std::io::Error::other(format!("not a trace record: {l}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_records_calls_with_step_and_backward() {
        let a = Tensor::from_vec(vec![1f32, 2., 3.], &[3]).unwrap();
        let ((), recs) = capture(|| {
            let b = a.add(&a).unwrap();
            backward_scope("mul", || b.mul(&a).unwrap());
        });
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].op, "add");
        assert_eq!(recs[0].call, 0);
        assert_eq!(recs[1].call, 1);
        assert_eq!(recs[0].inputs, vec![vec![3], vec![3]]);
        assert_eq!(recs[0].dtype, "f32");
        assert_eq!(recs[1].backward.as_deref(), Some("mul"));
        let two = Tensor::from_vec(vec![2f32, 4., 6.], &[3]).unwrap();
        assert_eq!(
            recs[0].hash,
            format!("{:016x}", hash_bytes(as_bytes(two.data::<f32>().unwrap())))
        );
        // Not captured outside, nor on another thread.
        assert!(!enabled());
        let ((), r) = capture(|| {
            std::thread::spawn(move || a.add(&a).unwrap())
                .join()
                .unwrap();
        });
        assert!(r.is_empty());
    }

    #[test]
    fn hash_sees_every_byte() {
        let base: Vec<u8> = (0..77).collect();
        let h = hash_bytes(&base);
        for i in 0..base.len() {
            let mut v = base.clone();
            v[i] ^= 1;
            assert_ne!(hash_bytes(&v), h, "byte {i}");
        }
        assert_ne!(hash_bytes(&base[..76]), h);
    }

    #[test]
    fn file_sink_round_trips() {
        let p = std::env::temp_dir().join(format!("lockstep-trace-{}.jsonl", std::process::id()));
        let a = Tensor::from_vec(vec![1f64, 2.], &[2]).unwrap();
        to_file(&p, || {
            set_step(3);
            a.exp().unwrap();
        })
        .unwrap();
        let r = read(&p).unwrap();
        std::fs::remove_file(&p).ok();
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].op.as_str(), r[0].step), ("exp", Some(3)));
    }
}
