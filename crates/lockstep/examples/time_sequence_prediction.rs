//! pytorch/examples' `time_sequence_prediction` (`generate_sine_wave.py` + `train.py`), ported
//! to lockstep against its public API: sine waves in float64 made with NumPy's global
//! generator, two `LSTMCell`s and a linear layer (`seq.double()`), `MSELoss`, and
//! `LBFGS(lr=0.8)` (PyTorch's algorithm without a line search), then predicting the future.
//!
//! `cargo run --release --example time_sequence_prediction -- [--steps 15] [--L 1000]
//! [--N 100] [--future 1000] [--threads T]` prints one JSON object on stdout, the same report
//! as its PyTorch twin `tools/examples/time_sequence_prediction.py`: the waves' sha256, the
//! sha256 of the initial and final parameters, every closure's loss, the test loss per step.
//! The waves and the initial parameters are PyTorch's and NumPy's bit for bit; the losses
//! agree to rounding, then drift.

use lockstep::nn::cells::LSTMCell;
use lockstep::nn::functional::{self as F, Reduction};
use lockstep::nn::layers::Linear;
use lockstep::nn::optim::{LBFGS, LBFGSOptions};
use lockstep::nn::{Forward, Module, Training, Var, Visitor, no_grad};
use lockstep::{DType, Tensor};
use serde_json::json;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The programs' flags (`--T`, `--L`, `--N`, `--future` are `generate_sine_wave.py`'s and
/// `train.py`'s constants; `--threads` is an addition).
#[derive(Clone, Debug)]
pub struct Args {
    pub steps: usize,
    pub t: usize,
    pub l: usize,
    pub n: usize,
    pub future: usize,
    /// Kernel threads (0 = leave the setting alone).
    pub threads: usize,
    /// Print the original's progress lines on stderr.
    pub verbose: bool,
    /// Leave deterministic mode off (`--nondeterministic`, for benchmarks): the default turns
    /// it on, as the tests need.
    pub nondeterministic: bool,
}

impl Default for Args {
    fn default() -> Self {
        Self {
            steps: 15,
            t: 20,
            l: 1000,
            n: 100,
            future: 1000,
            threads: 0,
            verbose: true,
            nondeterministic: false,
        }
    }
}

impl Args {
    /// Parses `--flag value` pairs (and `--quiet`).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, BoxError> {
        let mut a = Self::default();
        let mut it = args.into_iter();
        while let Some(flag) = it.next() {
            if flag == "--nondeterministic" {
                a.nondeterministic = true;
                continue;
            }
            if flag == "--quiet" {
                a.verbose = false;
                continue;
            }
            let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let n: usize = v
                .parse()
                .map_err(|e| format!("invalid value {v:?} for {flag}: {e}"))?;
            match flag.as_str() {
                "--steps" => a.steps = n,
                "--T" => a.t = n,
                "--L" => a.l = n,
                "--N" => a.n = n,
                "--future" => a.future = n,
                "--threads" => a.threads = n,
                _ => return Err(format!("unknown flag {flag}").into()),
            }
        }
        if a.t == 0 || a.l < 2 || a.n < 4 || a.t > 1 << 20 {
            return Err("--T must be in 1..=2^20, --L at least 2, --N at least 4".into());
        }
        Ok(a)
    }
}

/// The example's `Sequence`.
pub struct Sequence {
    lstm1: LSTMCell,
    lstm2: LSTMCell,
    linear: Linear,
    training: Training,
}

impl Sequence {
    /// Draws the parameters from the default generator in PyTorch's `__init__` order.
    pub fn new() -> lockstep::nn::Result<Self> {
        Ok(Self {
            lstm1: LSTMCell::new(1, 51, true)?,
            lstm2: LSTMCell::new(51, 51, true)?,
            linear: Linear::new(51, 1, true)?,
            training: Training::default(),
        })
    }

    /// The outputs for every step of `input` (`[N, L]`), then `future` predicted steps.
    pub fn forward(&self, input: &Var, future: usize) -> lockstep::nn::Result<Var> {
        let b = input.shape()[0];
        let zeros = || Tensor::zeros(&[b, 51], DType::F64).map(Var::constant);
        let (mut h_t, mut c_t, mut h_t2, mut c_t2) = (zeros()?, zeros()?, zeros()?, zeros()?);
        let mut outputs = Vec::with_capacity(input.shape()[1] + future);
        let step = |x: &Var,
                    h_t: &mut Var,
                    c_t: &mut Var,
                    h_t2: &mut Var,
                    c_t2: &mut Var|
         -> lockstep::nn::Result<Var> {
            (*h_t, *c_t) = self.lstm1.forward_with_state(x, Some((&*h_t, &*c_t)))?;
            (*h_t2, *c_t2) = self
                .lstm2
                .forward_with_state(&*h_t, Some((&*h_t2, &*c_t2)))?;
            self.linear.forward(&*h_t2)
        };
        for i in 0..input.shape()[1] {
            let input_t = input.narrow(1, i, 1)?;
            outputs.push(step(&input_t, &mut h_t, &mut c_t, &mut h_t2, &mut c_t2)?);
        }
        for _ in 0..future {
            let output = outputs.last().expect("at least one input step").clone();
            outputs.push(step(&output, &mut h_t, &mut c_t, &mut h_t2, &mut c_t2)?);
        }
        Var::cat(&outputs, 1)
    }
}

impl Module for Sequence {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("lstm1", &self.lstm1);
        v.child("lstm2", &self.lstm2);
        v.child("linear", &self.linear);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

fn params_sha(m: &Sequence) -> Result<String, BoxError> {
    let data: Vec<Tensor> = m.parameters().iter().map(|p| p.data()).collect();
    Ok(lockstep::sha256_of(&data))
}

/// `generate_sine_wave.py`: `N` waves of `L` points, each shifted by
/// `np.random.randint(-4T, 4T)` after `np.random.seed(2)`, `sin(x / 1.0 / T)`.
fn generate_sine_wave(a: &Args) -> Result<Vec<f64>, BoxError> {
    let mut shift = vec![0i64; a.n];
    {
        let mut np = lockstep::numpy_random();
        np.seed(2);
        let t = a.t as i64;
        np.randint_i64(-4 * t, 4 * t, &mut shift)?;
    }
    let mut data = Vec::with_capacity(a.n * a.l);
    for s in shift {
        for j in 0..a.l as i64 {
            data.push(((j + s) as f64 / 1.0 / a.t as f64).sin());
        }
    }
    Ok(data)
}

/// Rows `rows` of the waves, columns `cols`, as a `[rows, cols]` f64 tensor.
fn slice(
    data: &[f64],
    l: usize,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
) -> Result<Var, BoxError> {
    let (nr, nc) = (rows.len(), cols.len());
    let mut v = Vec::with_capacity(nr * nc);
    for r in rows {
        v.extend_from_slice(&data[r * l + cols.start..r * l + cols.end]);
    }
    Ok(Var::constant(Tensor::from_vec(v, &[nr, nc])?))
}

/// The whole program: trains and returns the JSON report the twin prints.
///
/// # Errors
/// Bad flags or an op error naming the op.
pub fn run(opt: &Args) -> Result<serde_json::Value, BoxError> {
    if opt.threads > 0 {
        lockstep::set_num_threads(opt.threads);
    }
    lockstep::use_deterministic_algorithms(!opt.nondeterministic);
    let data = generate_sine_wave(opt)?;
    // set random seed to 0
    lockstep::numpy_random().seed(0);
    lockstep::manual_seed(0);
    let (n, l) = (opt.n, opt.l);
    let input = slice(&data, l, 3..n, 0..l - 1)?;
    let target = slice(&data, l, 3..n, 1..l)?;
    let test_input = slice(&data, l, 0..3, 0..l - 1)?;
    let test_target = slice(&data, l, 0..3, 1..l)?;
    // build the model
    let seq = Sequence::new()?;
    seq.to_dtype(DType::F64)?;
    let init_sha256 = params_sha(&seq)?;
    let params = seq.parameters();
    let mut optimizer = LBFGS::new(
        params.clone(),
        LBFGSOptions {
            lr: 0.8,
            ..LBFGSOptions::default()
        },
    )?;
    let (mut losses, mut test_losses) = (Vec::new(), Vec::new());
    for i in 0..opt.steps {
        if opt.verbose {
            eprintln!("STEP:  {i}");
        }
        let mut closure = || {
            for p in &params {
                p.zero_grad();
            }
            let out = seq.forward(&input, 0)?;
            let loss = F::mse_loss(&out, &target, Reduction::Mean)?;
            let l = loss.data().item::<f64>()?;
            if opt.verbose {
                eprintln!("loss: {l}");
            }
            losses.push(l);
            loss.backward()?;
            Ok(loss)
        };
        optimizer.step(&mut closure)?;
        // begin to predict, no need to track gradient here
        let loss = no_grad(|| -> lockstep::nn::Result<f64> {
            let pred = seq.forward(&test_input, opt.future)?;
            let loss = F::mse_loss(&pred.narrow(1, 0, l - 1)?, &test_target, Reduction::Mean)?;
            loss.data().item::<f64>()
        })?;
        if opt.verbose {
            eprintln!("test loss: {loss}");
        }
        test_losses.push(loss);
    }
    let waves = Tensor::from_vec(data, &[n, l])?;
    Ok(json!({
        "example": "time_sequence_prediction",
        "data_sha256": lockstep::sha256_of([&waves]),
        "init_sha256": init_sha256,
        "losses": losses,
        "test_loss": test_losses,
        "final_sha256": params_sha(&seq)?,
    }))
}

fn main() -> std::process::ExitCode {
    match Args::parse(std::env::args().skip(1)).and_then(|a| run(&a)) {
        Ok(report) => {
            println!("{report}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
