//! pytorch/examples' `dcgan/main.py`, ported to lockstep against its public API, on the
//! embedded 8×8 digits: a generator (`ConvTranspose2d`, `BatchNorm2d`, ReLU, `Tanh`) and a
//! discriminator (`Conv2d`, `BatchNorm2d`, `LeakyReLU(0.2)`, `Sigmoid`) initialised by the
//! example's `weights_init`, `BCELoss`, two `Adam(lr=0.0002, betas=(0.5, 0.999))`, fixed noise
//! from `torch.randn`.
//!
//! `cargo run --release --example dcgan -- [--niter 25] [--batchSize 64] [--max-steps N]
//! [--threads T]` prints one JSON object on stdout, the same report as its PyTorch twin
//! `tools/examples/dcgan.py` (see there for the adaptations to 8×8 images): the sha256 of the
//! generator's then the discriminator's parameters at the start and the end and of the fixed
//! noise, every step's `Loss_D` (`losses`) and `Loss_G` (`loss_g`). The initial parameters,
//! the shuffling and every noise draw are PyTorch's bit for bit; the losses agree to rounding,
//! then drift.

use lockstep::data::{DataLoader, Dataset, Digits, SampleRng, TensorDataset};
use lockstep::nn::functional as F;
use lockstep::nn::init;
use lockstep::nn::layers::{
    BatchNorm, Conv2d, ConvTranspose2d, LeakyReLU, ReLU, Sequential, Sigmoid, Tanh,
};
use lockstep::nn::optim::{Adam, AdamOptions, Optimizer};
use lockstep::nn::{Forward, Module, Training, Var, Visitor};
use lockstep::tensor::ops::conv::Conv2dParams;
use lockstep::{DType, Generator, Tensor};
use serde_json::json;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The example's flags, with its defaults (`--max-steps`, `--threads` are additions for
/// tests and benchmarks; `--manualSeed` defaults to 1).
#[derive(Clone, Debug)]
pub struct Args {
    pub workers: usize,
    pub batch_size: usize,
    pub nz: usize,
    pub ngf: usize,
    pub ndf: usize,
    pub niter: usize,
    pub lr: f64,
    pub beta1: f64,
    pub dry_run: bool,
    pub manual_seed: u64,
    /// Stop after this many steps (0 = no limit).
    pub max_steps: usize,
    /// Kernel threads (0 = leave the setting alone).
    pub threads: usize,
    /// Print PyTorch's progress lines on stderr.
    pub verbose: bool,
    /// Leave deterministic mode off (`--nondeterministic`, for benchmarks): the default turns
    /// it on, as the tests need.
    pub nondeterministic: bool,
}

impl Default for Args {
    fn default() -> Self {
        Self {
            workers: 0,
            batch_size: 64,
            nz: 100,
            ngf: 64,
            ndf: 64,
            niter: 25,
            lr: 0.0002,
            beta1: 0.5,
            dry_run: false,
            manual_seed: 1,
            max_steps: 0,
            threads: 0,
            verbose: true,
            nondeterministic: false,
        }
    }
}

impl Args {
    /// Parses `--flag value` pairs (and `--dry-run`, `--quiet`).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, BoxError> {
        let mut a = Self::default();
        let mut it = args.into_iter();
        while let Some(flag) = it.next() {
            match flag.as_str() {
                "--dry-run" => a.dry_run = true,
                "--quiet" => a.verbose = false,
                "--nondeterministic" => a.nondeterministic = true,
                _ => {
                    let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
                    let bad =
                        |e: &dyn std::fmt::Display| format!("invalid value {v:?} for {flag}: {e}");
                    let n = || v.parse::<usize>().map_err(|e| bad(&e));
                    let x = || v.parse::<f64>().map_err(|e| bad(&e));
                    match flag.as_str() {
                        "--workers" => a.workers = n()?,
                        "--batchSize" => a.batch_size = n()?,
                        "--nz" => a.nz = n()?,
                        "--ngf" => a.ngf = n()?,
                        "--ndf" => a.ndf = n()?,
                        "--niter" => a.niter = n()?,
                        "--lr" => a.lr = x()?,
                        "--beta1" => a.beta1 = x()?,
                        "--manualSeed" => a.manual_seed = v.parse().map_err(|e| bad(&e))?,
                        "--max-steps" => a.max_steps = n()?,
                        "--threads" => a.threads = n()?,
                        _ => return Err(format!("unknown flag {flag}").into()),
                    }
                }
            }
        }
        if a.batch_size == 0 {
            return Err("--batchSize must be at least 1".into());
        }
        Ok(a)
    }
}

/// A module that is one `Sequential` named `main`, as the example's two networks.
pub struct Net {
    main: Sequential,
    /// The discriminator flattens its `[N, 1, 1, 1]` output to `[N]`.
    flatten: bool,
    training: Training,
}

impl Forward for Net {
    fn forward(&self, x: &Var) -> lockstep::nn::Result<Var> {
        let y = self.main.forward(x)?;
        if self.flatten {
            y.reshape(&[-1])
        } else {
            Ok(y)
        }
    }
}

impl Module for Net {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("main", &self.main);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

fn conv_params(stride: usize, padding: usize) -> Conv2dParams {
    Conv2dParams {
        stride: (stride, stride),
        padding: (padding, padding),
        ..Conv2dParams::default()
    }
}

fn conv_t(
    g: &mut Generator,
    cin: usize,
    cout: usize,
    k: usize,
    s: usize,
    p: usize,
) -> lockstep::nn::Result<ConvTranspose2d> {
    ConvTranspose2d::with_options(g, cin, cout, (k, k), conv_params(s, p), (0, 0), false)
}

fn conv(
    g: &mut Generator,
    cin: usize,
    cout: usize,
    k: usize,
    s: usize,
    p: usize,
) -> lockstep::nn::Result<Conv2d> {
    Conv2d::with_options(g, cin, cout, (k, k), conv_params(s, p), false)
}

/// `weights_init` on a convolution's weight: `normal_(0, 0.02)`.
fn init_conv(w: &Var) -> lockstep::nn::Result<()> {
    init::normal_(w, 0.0, 0.02, None)
}

/// `weights_init` on a batch norm: `normal_(weight, 1, 0.02)`, `zeros_(bias)`.
fn init_bn(bn: &BatchNorm) -> lockstep::nn::Result<()> {
    init::normal_(&bn.weight, 1.0, 0.02, None)?;
    init::zeros_(&bn.bias)
}

/// `Generator()` then `netG.apply(weights_init)`: every layer draws its default
/// initialisation first, then `weights_init` draws, layer by layer.
fn generator(a: &Args) -> lockstep::nn::Result<Net> {
    let (l0, l1, l3, l4, l6) = {
        let mut g = lockstep::default_generator();
        let l0 = conv_t(&mut g, a.nz, a.ngf * 2, 2, 1, 0)?;
        let l1 = BatchNorm::new_2d(a.ngf * 2)?;
        let l3 = conv_t(&mut g, a.ngf * 2, a.ngf, 4, 2, 1)?;
        let l4 = BatchNorm::new_2d(a.ngf)?;
        let l6 = conv_t(&mut g, a.ngf, 1, 4, 2, 1)?;
        (l0, l1, l3, l4, l6)
    };
    init_conv(&l0.weight)?;
    init_bn(&l1)?;
    init_conv(&l3.weight)?;
    init_bn(&l4)?;
    init_conv(&l6.weight)?;
    let main = Sequential::new()
        .add(l0)
        .add(l1)
        .add(ReLU::default())
        .add(l3)
        .add(l4)
        .add(ReLU::default())
        .add(l6)
        .add(Tanh::default());
    Ok(Net {
        main,
        flatten: false,
        training: Training::default(),
    })
}

/// `Discriminator()` then `netD.apply(weights_init)`.
fn discriminator(a: &Args) -> lockstep::nn::Result<Net> {
    let (l0, l2, l3, l5) = {
        let mut g = lockstep::default_generator();
        let l0 = conv(&mut g, 1, a.ndf, 4, 2, 1)?;
        let l2 = conv(&mut g, a.ndf, a.ndf * 2, 4, 2, 1)?;
        let l3 = BatchNorm::new_2d(a.ndf * 2)?;
        let l5 = conv(&mut g, a.ndf * 2, 1, 2, 1, 0)?;
        (l0, l2, l3, l5)
    };
    init_conv(&l0.weight)?;
    init_conv(&l2.weight)?;
    init_bn(&l3)?;
    init_conv(&l5.weight)?;
    let main = Sequential::new()
        .add(l0)
        .add(LeakyReLU::new(0.2))
        .add(l2)
        .add(l3)
        .add(LeakyReLU::new(0.2))
        .add(l5)
        .add(Sigmoid::default());
    Ok(Net {
        main,
        flatten: true,
        training: Training::default(),
    })
}

fn params_sha(nets: &[&Net]) -> Result<String, BoxError> {
    let data: Vec<Tensor> = nets
        .iter()
        .flat_map(|n| n.parameters())
        .map(|p| p.data())
        .collect();
    Ok(lockstep::sha256_of(&data))
}

/// All the digits as `[n, 1, 8, 8]` images, pixel / 16 then `Normalize((0.5,), (0.5,))`.
fn digits() -> Result<TensorDataset, BoxError> {
    let ds = Digits::new()?;
    let n = ds.len();
    let (mut x, mut y) = (Vec::with_capacity(n * 64), Vec::with_capacity(n));
    for i in 0..n {
        let (img, label) = ds.get(i, &mut SampleRng::global())?;
        x.extend(img.to_vec::<f32>()?.into_iter().map(|v| (v - 0.5) / 0.5));
        y.push(label);
    }
    Ok(TensorDataset::new(vec![
        Tensor::from_vec(x, &[n, 1, 8, 8])?,
        Tensor::from_vec(y, &[n])?,
    ])?)
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
    lockstep::manual_seed(opt.manual_seed);

    let mut dataloader = DataLoader::builder(digits()?)
        .batch_size(opt.batch_size)
        .shuffle(true)
        .num_workers(opt.workers)
        .build()?;
    let net_g = generator(opt)?;
    let net_d = discriminator(opt)?;
    let init_sha256 = params_sha(&[&net_g, &net_d])?;

    let fixed_noise = Var::constant(Tensor::randn(
        &[opt.batch_size, opt.nz, 1, 1],
        DType::F32,
        None,
    )?);
    let adam = |params| {
        Adam::new(
            params,
            AdamOptions {
                lr: opt.lr,
                betas: (opt.beta1, 0.999),
                ..AdamOptions::default()
            },
        )
    };
    let mut optimizer_d = adam(net_d.parameters())?;
    let mut optimizer_g = adam(net_g.parameters())?;

    let (mut losses_d, mut losses_g) = (Vec::new(), Vec::new());
    let done = |l: &Vec<f64>| opt.dry_run || (opt.max_steps > 0 && l.len() >= opt.max_steps);
    'epochs: for epoch in 0..opt.niter {
        let batches = dataloader.len();
        for (i, data) in dataloader.iter().enumerate() {
            // (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
            // train with real
            optimizer_d.zero_grad();
            let real = Var::constant(data?[0].clone());
            let batch_size = real.shape()[0];
            let ones = Tensor::full(&[batch_size], 1.0, DType::F32)?;
            let zeros = Tensor::full(&[batch_size], 0.0, DType::F32)?;
            let output = net_d.forward(&real)?;
            let err_d_real = F::binary_cross_entropy(&output, &ones)?;
            err_d_real.backward()?;
            let d_x = output.data().mean()?.item::<f32>()?;

            // train with fake
            let noise = Var::constant(Tensor::randn(
                &[batch_size, opt.nz, 1, 1],
                DType::F32,
                None,
            )?);
            let fake = net_g.forward(&noise)?;
            let output = net_d.forward(&fake.detach())?;
            let err_d_fake = F::binary_cross_entropy(&output, &zeros)?;
            err_d_fake.backward()?;
            let d_g_z1 = output.data().mean()?.item::<f32>()?;
            let err_d = err_d_real.data().item::<f32>()? + err_d_fake.data().item::<f32>()?;
            optimizer_d.step()?;

            // (2) Update G network: maximize log(D(G(z)))
            optimizer_g.zero_grad();
            let output = net_d.forward(&fake)?;
            let err_g = F::binary_cross_entropy(&output, &ones)?;
            err_g.backward()?;
            let d_g_z2 = output.data().mean()?.item::<f32>()?;
            optimizer_g.step()?;

            let err_g = err_g.data().item::<f32>()?;
            losses_d.push(err_d as f64);
            losses_g.push(err_g as f64);
            if opt.verbose {
                eprintln!(
                    "[{epoch}/{}][{i}/{batches}] Loss_D: {err_d:.4} Loss_G: {err_g:.4} D(x): {d_x:.4} D(G(z)): {d_g_z1:.4} / {d_g_z2:.4}",
                    opt.niter
                );
            }
            if i % 100 == 0 {
                // The original saves these as an image; the batch norms' running stats move.
                net_g.forward(&fixed_noise)?;
            }
            if done(&losses_d) {
                break 'epochs;
            }
        }
    }

    Ok(json!({
        "example": "dcgan",
        "init_sha256": init_sha256,
        "fixed_noise_sha256": lockstep::sha256_of([&fixed_noise.data()]),
        "losses": losses_d,
        "loss_g": losses_g,
        "final_sha256": params_sha(&[&net_g, &net_d])?,
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
