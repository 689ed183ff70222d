//! One epoch of the digits pipeline (random crop with padding 2 + flip + Gaussian noise,
//! batch 64, shuffled) at 0 and 2 workers, both seeding modes. `bench/dataloader.py` compares
//! the same pipeline with PyTorch's DataLoader.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lockstep_data::transforms::{Compose, GaussianNoise, RandomCrop, RandomHorizontalFlip};
use lockstep_data::{DataLoader, Digits, Seeding, SharedGenerator};
use std::hint::black_box;
use std::sync::Arc;

fn bench(c: &mut Criterion) {
    let ds = Arc::new(
        Digits::new()
            .expect("embedded digits")
            .with_transform(Compose(vec![
                Box::new(RandomCrop::new(8, 2)),
                Box::new(RandomHorizontalFlip::new(0.5)),
                Box::new(GaussianNoise::new(0.1)),
            ])),
    );
    let mut g = c.benchmark_group("digits_epoch_batch64");
    g.throughput(Throughput::Elements(Digits::LEN as u64));
    g.sample_size(20);
    for (name, seeding) in [
        ("per_sample", Seeding::PerSample { seed: 0 }),
        ("torch_compatible", Seeding::TorchCompatible),
    ] {
        for workers in [0usize, 2] {
            let mut b = DataLoader::builder(Arc::clone(&ds))
                .batch_size(64)
                .shuffle(true)
                .generator(SharedGenerator::with_seed(0))
                .seeding(seeding)
                .num_workers(workers);
            if workers > 0 {
                b = b.persistent_workers(true);
            }
            let mut dl = b.build().expect("loader");
            g.bench_function(format!("{name}/workers={workers}"), |bch| {
                bch.iter(|| {
                    for batch in dl.iter() {
                        black_box(batch.expect("batch"));
                    }
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
