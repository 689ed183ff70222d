//! `--seeding invariant` on one process: one forward and backward over the whole batch whose
//! parameter-gradient reductions go micro-shard by micro-shard
//! (`lockstep::nn::batch_blocks`) gives the bits of every micro-shard computed on its own,
//! as `--distributed` processes compute them.

use lockstep_cli::distributed::{Local, Shards};
use lockstep_cli::train::{Aug, Optimizer, Quiet, Report, Seeding, TrainConfig, run_distributed};
use std::sync::Mutex;

/// The runs use the process-wide generators: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// One process computing every micro-shard on its own (the path of several processes).
struct PerShard(Local);

impl Shards for PerShard {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn gather(
        &mut self,
        own: &[Vec<f32>],
        g: usize,
        len: usize,
    ) -> lockstep::Result<Vec<Vec<f32>>> {
        self.0.gather(own, g, len)
    }
    fn gather_f64(
        &mut self,
        own: &[Vec<f64>],
        g: usize,
        len: usize,
    ) -> lockstep::Result<Vec<Vec<f64>>> {
        self.0.gather_f64(own, g, len)
    }
    fn whole_batch(&self) -> bool {
        false
    }
}

fn both(cfg: &TrainConfig) -> (Report, Report) {
    let whole = run_distributed(cfg, &mut Quiet, &mut Local).expect("whole-batch run");
    let apart = run_distributed(cfg, &mut Quiet, &mut PerShard(Local)).expect("per-shard run");
    (whole, apart)
}

fn base(model: &str) -> TrainConfig {
    TrainConfig {
        model: model.parse().unwrap(),
        seeding: Seeding::Invariant,
        optimizer: Optimizer::Sgd,
        momentum: 0.9,
        lr: 0.05,
        dropout: 0.3,
        hidden: 12,
        test_size: 1700,
        epochs: 1,
        max_steps: 6,
        threads: 1,
        ..TrainConfig::default()
    }
}

#[test]
fn one_pass_over_the_batch_is_the_micro_shard_sum_bit_for_bit() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Batch 30 leaves a short last micro-shard; 8 is the default size, 4, 7 and a batch of
    // one micro-shard (32) are other trees.
    for model in ["mlp", "cnn"] {
        for (batch, micro) in [(32, 0), (30, 0), (30, 7), (30, 4), (20, 32)] {
            for threads in [1, 3] {
                let cfg = TrainConfig {
                    batch_size: batch,
                    micro_batch: micro,
                    threads,
                    ..base(model)
                };
                let (whole, apart) = both(&cfg);
                let at = format!("{model} batch {batch} micro {micro} threads {threads}");
                assert_eq!(whole.step_losses, apart.step_losses, "{at}: losses");
                assert_eq!(whole.final_sha256, apart.final_sha256, "{at}: state");
            }
        }
    }
}

#[test]
fn the_lstm_in_one_pass_is_the_micro_shard_sum_bit_for_bit() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Hidden 12: `linear`'s input projection and the GEMM weight gradient; 64: the fused
    // projection and `W_hh` read in place (on AVX2 and AVX-512). Two layers with dropout
    // between them.
    for hidden in [12, 64] {
        for (batch, micro) in [(32, 0), (30, 0), (30, 7), (20, 4), (24, 8)] {
            for threads in [1, 3] {
                let cfg = TrainConfig {
                    batch_size: batch,
                    micro_batch: micro,
                    threads,
                    hidden,
                    max_steps: 3,
                    ..base("lstm")
                };
                let (whole, apart) = both(&cfg);
                let at =
                    format!("lstm hidden {hidden} batch {batch} micro {micro} threads {threads}");
                assert_eq!(whole.step_losses, apart.step_losses, "{at}: losses");
                assert_eq!(whole.final_sha256, apart.final_sha256, "{at}: state");
            }
        }
    }
}

#[test]
fn with_adam_clipping_and_noise_as_well() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for model in ["mlp", "cnn", "lstm"] {
        let cfg = TrainConfig {
            optimizer: Optimizer::AdamW,
            lr: 0.01,
            weight_decay: 0.01,
            clip_grad_norm: 0.5,
            aug: Aug::Numpy,
            batch_size: 24,
            test_size: 1500,
            max_steps: 0,
            epochs: 1,
            ..base(model)
        };
        let (whole, apart) = both(&cfg);
        assert_eq!(whole.step_losses, apart.step_losses, "{model}: losses");
        assert_eq!(whole.final_sha256, apart.final_sha256, "{model}: state");
        assert!(whole.steps > 10, "{model}: {} steps", whole.steps);
    }
}

#[test]
fn the_cli_and_the_one_pass_step_add_in_one_tree() {
    use lockstep::Tensor;
    use lockstep::nn::batch_blocks::tree_reduce;
    use lockstep_cli::distributed::tree_sum;
    // Values whose f32 sum tells orders apart, for 1 to 9 parts.
    for g in 1..10usize {
        let parts: Vec<Vec<f32>> = (0..g)
            .map(|k| {
                let s = if k % 2 == 0 { 1.0 } else { -1.0 };
                vec![1e8 * s + k as f32, 0.1 * (k * k) as f32 + 1e-3, 3e7 * s]
            })
            .collect();
        let tensors: Vec<Tensor> = parts
            .iter()
            .map(|p| Tensor::from_vec(p.clone(), &[3]).unwrap())
            .collect();
        let t = tree_reduce(tensors, &mut |mut a: Tensor, b: Tensor| {
            a.add_(&b, 1.0)?;
            Ok::<_, lockstep::Error>(a)
        })
        .unwrap()
        .unwrap();
        let v = tree_sum(&parts);
        let bits = |x: &[f32]| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&t.to_vec::<f32>().unwrap()), bits(&v), "{g} parts");
    }
}
