//! Determinism, ordering, faults and resume of the DataLoader.

mod common;

use common::{Range, global_lock};
use lockstep_data::transforms::{Compose, GaussianNoise, RandomCrop, RandomHorizontalFlip};
use lockstep_data::*;
use lockstep_rng::default_generator;
use lockstep_tensor::Tensor;
use std::sync::Arc;
use std::time::Duration;

fn augmented_digits() -> Arc<CsvDataset> {
    Arc::new(Digits::new().unwrap().with_transform(Compose(vec![
        Box::new(RandomCrop::new(8, 2)),
        Box::new(RandomHorizontalFlip::new(0.5)),
        Box::new(GaussianNoise::new(0.1)),
    ])))
}

type Batch = (Tensor, Tensor);

fn per_sample_loader(ds: &Arc<CsvDataset>, workers: usize) -> DataLoader<Arc<CsvDataset>> {
    let mut b = DataLoader::builder(Arc::clone(ds))
        .batch_size(64)
        .shuffle(true)
        .generator(SharedGenerator::with_seed(3))
        .seeding(Seeding::PerSample { seed: 11 })
        .num_workers(workers);
    if workers > 0 {
        b = b.prefetch_factor(3);
    }
    b.build().unwrap()
}

fn flat(batches: &[Batch]) -> Vec<(Vec<u32>, Vec<i64>)> {
    batches
        .iter()
        .map(|(x, y)| {
            (
                x.to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect(),
                y.to_vec::<i64>().unwrap(),
            )
        })
        .collect()
}

fn epochs(dl: &mut DataLoader<Arc<CsvDataset>>, n: usize) -> Vec<Vec<Batch>> {
    (0..n)
        .map(|_| dl.iter().map(|b| b.unwrap()).collect())
        .collect()
}

#[test]
fn per_sample_batches_identical_at_0_1_2_4_workers() {
    let _g = global_lock();
    let ds = augmented_digits();
    let reference: Vec<_> = epochs(&mut per_sample_loader(&ds, 0), 2)
        .iter()
        .map(|e| flat(e))
        .collect();
    assert_eq!(reference[0].len(), 29);
    assert_ne!(reference[0], reference[1], "epochs differ");
    for w in [1, 2, 4] {
        let got: Vec<_> = epochs(&mut per_sample_loader(&ds, w), 2)
            .iter()
            .map(|e| flat(e))
            .collect();
        assert_eq!(got, reference, "num_workers={w}");
    }
}

#[test]
fn per_sample_ignores_unrelated_default_generator_draws() {
    let _g = global_lock();
    let ds = augmented_digits();
    let a = flat(&epochs(&mut per_sample_loader(&ds, 2), 1)[0]);
    // An unrelated draw on the default generator: changes nothing in PerSample mode.
    default_generator().next_u64();
    let b = flat(&epochs(&mut per_sample_loader(&ds, 2), 1)[0]);
    assert_eq!(a, b);
}

/// A data set whose `get` sleeps a pseudo-random 0–3 ms, so workers finish out of order.
struct Slow(usize);

impl Dataset for Slow {
    type Item = i64;
    fn len(&self) -> usize {
        self.0
    }
    fn get(&self, index: usize, _rng: &mut SampleRng<'_>) -> Result<i64> {
        let h = (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60;
        std::thread::sleep(Duration::from_micros(250 * h));
        Ok(index as i64)
    }
}

#[test]
fn batches_come_in_sampler_order_under_random_delays() {
    let _g = global_lock();
    for w in [2, 3, 4] {
        let mut dl = DataLoader::builder(Slow(96))
            .batch_size(4)
            .shuffle(true)
            .generator(SharedGenerator::with_seed(5))
            .num_workers(w)
            .prefetch_factor(4)
            .build()
            .unwrap();
        let got: Vec<i64> = dl
            .iter()
            .flat_map(|b| b.unwrap().to_vec::<i64>().unwrap())
            .collect();
        // The same order without workers or delays: base_seed first, then randperm, from the
        // same generator.
        let g = SharedGenerator::with_seed(5);
        g.with(lockstep_rng::compat::torch::random_i64);
        let want: Vec<i64> = RandomSampler::new(96, false, None, Some(g))
            .unwrap()
            .pass()
            .unwrap()
            .into_iter()
            .map(|i| i as i64)
            .collect();
        assert_eq!(got, want, "workers {w}");
    }
}

#[test]
fn resume_mid_epoch_equals_uninterrupted_per_sample_any_workers() {
    let _g = global_lock();
    let ds = augmented_digits();
    let full: Vec<_> = epochs(&mut per_sample_loader(&ds, 2), 2)
        .iter()
        .map(|e| flat(e))
        .collect();
    for (w_before, w_after) in [(2, 2), (2, 0), (0, 4), (1, 3)] {
        let mut dl = per_sample_loader(&ds, w_before);
        let mut it = dl.iter();
        let head: Vec<Batch> = (0..7).map(|_| it.next().unwrap().unwrap()).collect();
        let state = it.state_dict();
        drop(it);
        assert_eq!(flat(&head), full[0][..7].to_vec());
        let mut dl2 = per_sample_loader(&ds, w_after);
        dl2.load_state_dict(state).unwrap();
        let rest: Vec<Batch> = dl2.iter().map(|b| b.unwrap()).collect();
        assert_eq!(
            flat(&rest),
            full[0][7..].to_vec(),
            "{w_before} -> {w_after}"
        );
        let next: Vec<Batch> = dl2.iter().map(|b| b.unwrap()).collect();
        assert_eq!(
            flat(&next),
            full[1],
            "next epoch after resume {w_before} -> {w_after}"
        );
    }
}

#[test]
fn resume_mid_epoch_equals_uninterrupted_torch_compatible() {
    let _g = global_lock();
    let ds = augmented_digits();
    for w in [0, 2] {
        let build = || {
            let mut b = DataLoader::builder(Arc::clone(&ds))
                .batch_size(64)
                .shuffle(true)
                .num_workers(w);
            if w > 0 {
                b = b.persistent_workers(false);
            }
            b.build().unwrap()
        };
        default_generator().manual_seed(21);
        let full: Vec<_> = epochs(&mut build(), 2).iter().map(|e| flat(e)).collect();
        default_generator().manual_seed(21);
        let mut dl = build();
        let mut it = dl.iter();
        for _ in 0..5 {
            it.next().unwrap().unwrap();
        }
        let state = it.state_dict();
        drop(it);
        default_generator().manual_seed(999); // the checkpoint restores it
        let mut dl2 = build();
        dl2.load_state_dict(state).unwrap();
        let rest: Vec<Batch> = dl2.iter().map(|b| b.unwrap()).collect();
        assert_eq!(flat(&rest), full[0][5..].to_vec(), "workers {w}");
        let next: Vec<Batch> = dl2.iter().map(|b| b.unwrap()).collect();
        assert_eq!(flat(&next), full[1], "workers {w}");
    }
}

#[test]
fn torch_compatible_resume_rejects_other_worker_count() {
    let _g = global_lock();
    let mut dl = DataLoader::builder(Range(20))
        .batch_size(4)
        .num_workers(2)
        .build()
        .unwrap();
    let mut it = dl.iter();
    it.next().unwrap().unwrap();
    let st = it.state_dict();
    drop(it);
    let mut dl2 = DataLoader::builder(Range(20))
        .batch_size(4)
        .num_workers(3)
        .build()
        .unwrap();
    assert!(matches!(dl2.load_state_dict(st), Err(Error::State { .. })));
}

struct Faulty {
    n: usize,
    bad: usize,
    panic: bool,
}

impl Dataset for Faulty {
    type Item = i64;
    fn len(&self) -> usize {
        self.n
    }
    fn get(&self, index: usize, _rng: &mut SampleRng<'_>) -> Result<i64> {
        if index == self.bad {
            if self.panic {
                panic!("boom at {index}");
            }
            return Err(Error::Io {
                op: "Faulty",
                path: "x".into(),
                reason: "disk on fire".into(),
            });
        }
        Ok(index as i64)
    }
}

#[test]
fn failing_or_panicking_sample_is_an_error_naming_it() {
    let _g = global_lock();
    for w in [0, 1, 2, 4] {
        for panic in [false, true] {
            let mut b = DataLoader::builder(Faulty {
                n: 40,
                bad: 13,
                panic,
            })
            .batch_size(4)
            .num_workers(w);
            if w > 0 {
                b = b.timeout(Duration::from_secs(20));
            }
            let mut dl = b.build().unwrap();
            let out: Vec<Result<Tensor>> = dl.iter().collect();
            // Batches 0..3 are fine, batch 3 (samples 12..16) fails, then the pass ends.
            assert_eq!(out.len(), 4, "workers {w} panic {panic}");
            for b in &out[..3] {
                assert!(b.is_ok());
            }
            match &out[3] {
                Err(Error::Sample {
                    index: 13, reason, ..
                }) => {
                    assert!(
                        reason.contains(if panic { "boom at 13" } else { "disk on fire" }),
                        "{reason}"
                    );
                }
                other => panic!("workers {w}: {other:?}"),
            }
            // The loader still works for the next pass.
            let again: Vec<_> = dl.iter().collect();
            assert_eq!(again.len(), 4);
        }
    }
}

#[test]
fn worker_init_fn_failure_and_timeout_are_errors() {
    let _g = global_lock();
    let mut dl = DataLoader::builder(Range(8))
        .num_workers(2)
        .worker_init_fn(|id| if id == 1 { panic!("init {id}") } else { Ok(()) })
        .build()
        .unwrap();
    let out: Vec<_> = dl.iter().collect();
    assert!(
        out.iter()
            .any(|r| matches!(r, Err(Error::Worker { worker: 1, .. }))),
        "{out:?}"
    );

    struct Stuck;
    impl Dataset for Stuck {
        type Item = i64;
        fn len(&self) -> usize {
            4
        }
        fn get(&self, _: usize, _: &mut SampleRng<'_>) -> Result<i64> {
            std::thread::sleep(Duration::from_millis(600));
            Ok(0)
        }
    }
    let mut dl = DataLoader::builder(Stuck)
        .num_workers(1)
        .timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let first = dl.iter().next().unwrap();
    assert!(
        matches!(first, Err(Error::Timeout { batch: 0, .. })),
        "{first:?}"
    );
}

#[test]
fn persistent_workers_keep_base_seed() {
    let _g = global_lock();
    default_generator().manual_seed(4);
    let mut dl = DataLoader::builder(Range(8))
        .batch_size(2)
        .num_workers(2)
        .persistent_workers(true)
        .build()
        .unwrap();
    let s0 = {
        let mut it = dl.iter();
        let s = it.base_seed();
        assert_eq!(it.by_ref().count(), 4);
        s
    };
    let s1 = dl.iter().base_seed();
    assert_eq!(s0, s1);
}

#[test]
fn argument_errors() {
    let _g = global_lock();
    assert!(DataLoader::builder(Range(4)).batch_size(0).build().is_err());
    assert!(
        DataLoader::builder(Range(4))
            .prefetch_factor(2)
            .build()
            .is_err()
    );
    assert!(
        DataLoader::builder(Range(4))
            .persistent_workers(true)
            .build()
            .is_err()
    );
    assert!(
        DataLoader::builder(Range(4))
            .shuffle(true)
            .sampler(SequentialSampler::new(4))
            .build()
            .is_err()
    );
    assert!(RandomSampler::new(0, false, None, None).is_err());
    assert!(DistributedSampler::new(4, 2, 2, true, 0, false).is_err());
    assert!(WeightedRandomSampler::new(vec![0.0, 0.0], 2, true, None).is_err());
    assert!(random_split(Arc::new(Range(4)), &[1, 2], &SharedGenerator::with_seed(0)).is_err());
}

#[test]
fn tensor_dataset_subset_and_collate() {
    let _g = global_lock();
    let x = Tensor::from_vec((0..12).map(|v| v as f32).collect::<Vec<_>>(), &[6, 2]).unwrap();
    let y = Tensor::from_vec((0..6).collect::<Vec<i64>>(), &[6]).unwrap();
    let ds = TensorDataset::new(vec![x, y]).unwrap();
    let mut dl = DataLoader::builder(ds).batch_size(4).build().unwrap();
    let b: Vec<Vec<Tensor>> = dl.iter().map(|b| b.unwrap()).collect();
    assert_eq!(b.len(), 2);
    assert_eq!(b[0][0].shape(), &[4, 2]);
    assert_eq!(b[1][0].to_vec::<f32>().unwrap(), vec![8.0, 9.0, 10.0, 11.0]);
    assert_eq!(b[1][1].to_vec::<i64>().unwrap(), vec![4, 5]);
    let sub = Subset::new(Arc::new(Range(10)), vec![9, 3]).unwrap();
    assert_eq!(sub.get(1, &mut SampleRng::per_sample(0, 0, 0)).unwrap(), 3);
    assert!(Subset::new(Arc::new(Range(3)), vec![3]).is_err());
}

#[test]
fn worker_info_numpy_seed_words() {
    let _g = global_lock();
    // numpy.random.SeedSequence([1, 5, 0]).generate_state(4) for base_seed 5, worker 1.
    let info = WorkerInfo {
        id: 1,
        num_workers: 2,
        seed: 6,
    };
    let w = info.numpy_seed_words();
    let want = lockstep_rng::compat::numpy::SeedSequence::from_ints(&[1, 5, 0])
        .unwrap()
        .generate_state_u32(4);
    assert_eq!(w.to_vec(), want);
    assert!(get_worker_info().is_none());
}

/// `range(n)` sharded PyTorch-style: worker `id` yields `id, id + W, …`; item `bad` fails.
struct Stream {
    n: usize,
    bad: Option<usize>,
}

impl IterableDataset for Stream {
    type Item = i64;
    fn iter(
        &self,
        worker: Option<&WorkerInfo>,
    ) -> Box<dyn Iterator<Item = Result<i64>> + Send + '_> {
        let (id, w) = worker.map_or((0, 1), |i| (i.id, i.num_workers));
        let bad = self.bad;
        Box::new((id..self.n).step_by(w).map(move |i| {
            // Uneven timing between workers.
            std::thread::sleep(Duration::from_micros(((i * 7919) % 5) as u64 * 200));
            if Some(i) == bad {
                Err(Error::Worker {
                    worker: id,
                    reason: "bad item".into(),
                })
            } else {
                Ok(i as i64)
            }
        }))
    }
}

#[test]
fn iterable_loader_round_robin_order() {
    let _g = global_lock();
    // PyTorch: DataLoader(Stream(10), batch_size=2, num_workers=2) with the sharding above
    // yields [0,2] [1,3] [4,6] [5,7] [8] [9].
    let mut dl = IterableLoader::new(Stream { n: 10, bad: None }, 2, false, 2).unwrap();
    let got: Vec<Vec<i64>> = dl
        .iter()
        .map(|b| b.unwrap().to_vec::<i64>().unwrap())
        .collect();
    assert_eq!(
        got,
        vec![
            vec![0, 2],
            vec![1, 3],
            vec![4, 6],
            vec![5, 7],
            vec![8],
            vec![9]
        ]
    );
    // Uneven shards: worker 0 of 3 has 0,3,6; worker 1 has 1,4; worker 2 has 2,5.
    let mut dl = IterableLoader::new(Stream { n: 7, bad: None }, 1, false, 3).unwrap();
    let got: Vec<i64> = dl
        .iter()
        .flat_map(|b| b.unwrap().to_vec::<i64>().unwrap())
        .collect();
    assert_eq!(got, vec![0, 1, 2, 3, 4, 5, 6]);
    let mut dl = IterableLoader::new(Stream { n: 5, bad: None }, 2, true, 0).unwrap();
    let got: Vec<Vec<i64>> = dl
        .iter()
        .map(|b| b.unwrap().to_vec::<i64>().unwrap())
        .collect();
    assert_eq!(got, vec![vec![0, 1], vec![2, 3]]);
    let mut dl = IterableLoader::new(
        Stream {
            n: 10,
            bad: Some(5),
        },
        2,
        false,
        2,
    )
    .unwrap();
    let out: Vec<_> = dl.iter().collect();
    assert!(
        matches!(out.last(), Some(Err(Error::Worker { worker: 1, .. }))),
        "{out:?}"
    );
}

#[test]
fn resume_with_persistent_torch_workers_equals_uninterrupted() {
    let _g = global_lock();
    let ds = augmented_digits();
    let build = || {
        DataLoader::builder(Arc::clone(&ds))
            .batch_size(64)
            .shuffle(true)
            .num_workers(2)
            .persistent_workers(true)
            .build()
            .unwrap()
    };
    default_generator().manual_seed(8);
    let full: Vec<_> = epochs(&mut build(), 3).iter().map(|e| flat(e)).collect();
    // Mid-epoch in the second epoch.
    default_generator().manual_seed(8);
    let mut dl = build();
    let _ = epochs(&mut dl, 1);
    let mut it = dl.iter();
    for _ in 0..4 {
        it.next().unwrap().unwrap();
    }
    let st = it.state_dict();
    drop(it);
    let mut dl2 = build();
    dl2.load_state_dict(st).unwrap();
    let rest: Vec<Batch> = dl2.iter().map(|b| b.unwrap()).collect();
    assert_eq!(flat(&rest), full[1][4..].to_vec());
    let next: Vec<Batch> = dl2.iter().map(|b| b.unwrap()).collect();
    assert_eq!(flat(&next), full[2]);
    // Between epochs.
    default_generator().manual_seed(8);
    let mut dl = build();
    let _ = epochs(&mut dl, 1);
    let st = dl.state_dict();
    let mut dl3 = build();
    dl3.load_state_dict(st.clone()).unwrap();
    let bytes = st.to_bytes();
    assert_eq!(LoaderState::from_bytes(&bytes).unwrap(), st);
    let e1: Vec<_> = epochs(&mut dl3, 2).iter().map(|e| flat(e)).collect();
    assert_eq!(e1, full[1..].to_vec());
}

#[test]
fn loader_state_bytes_round_trip_and_reject_truncation() {
    let _g = global_lock();
    let mut dl = DataLoader::builder(Range(10))
        .batch_size(3)
        .shuffle(true)
        .generator(SharedGenerator::with_seed(1))
        .seeding(Seeding::PerSample { seed: 5 })
        .build()
        .unwrap();
    let mut it = dl.iter();
    it.next().unwrap().unwrap();
    let st = it.state_dict();
    let b = st.to_bytes();
    assert_eq!(LoaderState::from_bytes(&b).unwrap(), st);
    for n in (0..b.len()).step_by(97) {
        assert!(matches!(
            LoaderState::from_bytes(&b[..n]),
            Err(Error::State { .. })
        ));
    }
    let mut long = b.clone();
    long.push(0);
    assert!(LoaderState::from_bytes(&long).is_err());
}

/// Issue 13, defect 4: a state with fewer worker generators than workers is refused (it used to
/// panic on iteration), and a refused state leaves the loader exactly as it was.
#[test]
fn bad_worker_generator_count_is_refused_and_load_is_atomic() {
    let _g = global_lock();
    let build = |seed: u64| {
        DataLoader::builder(Range(20))
            .batch_size(4)
            .shuffle(true)
            .generator(SharedGenerator::with_seed(seed))
            .num_workers(2)
            .build()
            .unwrap()
    };
    let mut dl = build(1);
    let mut it = dl.iter();
    it.next().unwrap().unwrap();
    let good = it.state_dict();
    drop(it);
    assert_eq!(good.worker_generators.len(), 2);
    // Fewer generators than workers: refused by from_bytes and by load_state_dict.
    let mut short = good.clone();
    short.worker_generators.truncate(1);
    assert!(matches!(
        LoaderState::from_bytes(&short.to_bytes()),
        Err(Error::State { .. })
    ));
    let mut dl2 = build(2);
    let before = dl2.state_dict();
    let default_before = default_generator().get_state();
    assert!(matches!(
        dl2.load_state_dict(short),
        Err(Error::State { .. })
    ));
    // A bad default-generator state after a good loader-generator state: nothing applied.
    let mut bad = good.clone();
    bad.default_generator = vec![1, 2, 3];
    assert!(dl2.load_state_dict(bad).is_err());
    let mut bad = good.clone();
    bad.worker_generators[1] = Some(vec![0; 5]);
    assert!(dl2.load_state_dict(bad).is_err());
    assert_eq!(
        dl2.state_dict(),
        before,
        "a refused state changed the loader"
    );
    assert_eq!(default_generator().get_state(), default_before);
    // The good state still loads and iterates.
    dl2.load_state_dict(good.clone()).unwrap();
    assert_eq!(dl2.iter().count(), 4);
    // Round trip of the bytes.
    assert_eq!(LoaderState::from_bytes(&good.to_bytes()).unwrap(), good);
}
