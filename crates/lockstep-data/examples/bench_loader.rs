//! Throughput of the digits pipeline (random crop with padding 2 + horizontal flip + Gaussian
//! noise, batch 64, shuffled), for `bench/dataloader.py`. Prints one JSON object of
//! samples per second, best of N epochs after a warm-up epoch.
//!
//! `cargo run --release -p lockstep-data --example bench_loader -- [epochs]`

use lockstep_data::transforms::{Compose, GaussianNoise, RandomCrop, RandomHorizontalFlip};
use lockstep_data::{CsvDataset, DataLoader, Digits, Seeding, SharedGenerator};
use std::sync::Arc;
use std::time::Instant;

fn dataset() -> Arc<CsvDataset> {
    Arc::new(
        Digits::new()
            .expect("embedded digits")
            .with_transform(Compose(vec![
                Box::new(RandomCrop::new(8, 2)),
                Box::new(RandomHorizontalFlip::new(0.5)),
                Box::new(GaussianNoise::new(0.1)),
            ])),
    )
}

fn samples_per_s(ds: &Arc<CsvDataset>, workers: usize, seeding: Seeding, epochs: usize) -> f64 {
    let mut b = DataLoader::builder(Arc::clone(ds))
        .batch_size(64)
        .shuffle(true)
        .generator(SharedGenerator::with_seed(0))
        .seeding(seeding)
        .num_workers(workers);
    if workers > 0 {
        b = b.persistent_workers(true);
    }
    let mut dl = b.build().expect("loader");
    let mut best = f64::INFINITY;
    for e in 0..=epochs {
        let t = Instant::now();
        let mut n = 0;
        for batch in dl.iter() {
            let (x, _) = batch.expect("batch");
            n += x.shape()[0];
        }
        let dt = t.elapsed().as_secs_f64();
        assert_eq!(n, Digits::LEN);
        if e > 0 {
            best = best.min(dt);
        }
    }
    Digits::LEN as f64 / best
}

fn main() {
    let epochs: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let ds = dataset();
    let mut out = Vec::new();
    for (name, seeding) in [
        ("PerSample", Seeding::PerSample { seed: 0 }),
        ("TorchCompatible", Seeding::TorchCompatible),
    ] {
        for w in [0, 2] {
            let r = samples_per_s(&ds, w, seeding, epochs);
            out.push(format!("\"lockstep {name} workers={w}\": {r:.0}"));
        }
    }
    println!("{{{}}}", out.join(", "));
}
