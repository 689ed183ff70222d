//! Issue 13: loaders over absurd lengths fail with an error (defects 7 and 8), and a stuck
//! iterable data set ends its pass with a timeout instead of hanging (defect 13).

use lockstep_data::*;
use std::time::{Duration, Instant};

/// A data set that claims `len` samples (each is its own index).
struct Claims(usize);

impl Dataset for Claims {
    type Item = lockstep_tensor::Tensor;
    fn len(&self) -> usize {
        self.0
    }
    fn get(&self, index: usize, _rng: &mut SampleRng<'_>) -> Result<Self::Item> {
        Ok(lockstep_tensor::Tensor::scalar(index as i64))
    }
}

fn first_batch(len: usize, shuffle: bool, workers: usize) -> Error {
    let mut l = DataLoader::builder(Claims(len))
        .batch_size(4)
        .shuffle(shuffle)
        .num_workers(workers)
        .generator(SharedGenerator::new(lockstep_rng::Generator::with_seed(1)))
        .build()
        .unwrap();
    let mut it = l.iter();
    let e = match it.next() {
        Some(Err(e)) => e,
        Some(Ok(_)) => panic!("a batch of a {len}-sample pass"),
        None => panic!("no batch and no error for a {len}-sample pass"),
    };
    assert!(it.next().is_none(), "the pass ends after its error");
    e
}

#[test]
fn loaders_over_huge_lengths_are_errors() {
    for workers in [0, 2] {
        for shuffle in [false, true] {
            let e = first_batch(1 << 40, shuffle, workers);
            let oom = matches!(e, Error::OutOfMemory { bytes, .. } if bytes >= 8 << 40)
                || matches!(
                    &e,
                    Error::Rng(lockstep_rng::Error::OutOfMemory { bytes, .. }) if *bytes >= 8 << 40
                );
            assert!(oom, "2^40, shuffle {shuffle}, {workers} workers: {e}");
            assert!(e.to_string().contains("out of memory"), "{e}");
        }
        // usize::MAX samples: refused (no "capacity overflow" panic).
        for shuffle in [false, true] {
            let e = first_batch(usize::MAX, shuffle, workers);
            assert!(e.to_string().contains("out of memory"), "{e}");
        }
    }
}

#[test]
fn samplers_over_huge_lengths_are_errors() {
    let g = || Some(SharedGenerator::new(lockstep_rng::Generator::with_seed(1)));
    assert!(SequentialSampler::new(1 << 40).pass().is_err());
    assert!(
        RandomSampler::new(1 << 40, true, None, g())
            .unwrap()
            .pass()
            .is_err()
    );
    assert!(
        RandomSampler::new(3, false, Some(usize::MAX), g())
            .unwrap()
            .pass()
            .is_err()
    );
    assert!(SubsetRandomSampler::new(vec![1, 2, 3], g()).pass().is_ok());
    assert!(
        WeightedRandomSampler::new(vec![1.0, 2.0], usize::MAX, true, g())
            .unwrap()
            .pass()
            .is_err()
    );
    for shuffle in [false, true] {
        for n in [1 << 40, usize::MAX, usize::MAX - 1] {
            let mut d = DistributedSampler::new(n, 3, 1, shuffle, 0, false).unwrap();
            assert!(d.pass().is_err(), "{n} {shuffle}");
            let mut d = DistributedSampler::new(n, 3, 1, shuffle, 0, true).unwrap();
            assert!(d.pass().is_err(), "{n} {shuffle}");
        }
    }
    let mut b = BatchSampler::new(Box::new(SequentialSampler::new(10)), usize::MAX, false).unwrap();
    assert_eq!(b.pass().unwrap(), vec![(0..10).collect::<Vec<_>>()]);
}

/// Yields `stuck_after` items, then blocks for 3 s (a stuck reader), then ends.
struct Stuck {
    stuck_after: usize,
}

impl IterableDataset for Stuck {
    type Item = lockstep_tensor::Tensor;
    fn iter(
        &self,
        _worker: Option<&WorkerInfo>,
    ) -> Box<dyn Iterator<Item = Result<Self::Item>> + Send + '_> {
        let mut i = 0;
        Box::new(std::iter::from_fn(move || {
            if i == self.stuck_after {
                std::thread::sleep(Duration::from_secs(3));
                return None;
            }
            i += 1;
            Some(Ok(lockstep_tensor::Tensor::scalar(i as f32)))
        }))
    }
}

#[test]
fn a_stuck_iterable_times_out() {
    for workers in [0, 2] {
        let mut l = IterableLoader::new(Stuck { stuck_after: 5 }, 2, false, workers)
            .unwrap()
            .timeout(Duration::from_millis(200));
        let t = Instant::now();
        let got: Vec<_> = l.iter().collect();
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        let last = got.last().unwrap();
        match last {
            Err(Error::Timeout {
                batch,
                indices,
                worker,
                seconds,
            }) => {
                assert_eq!(*seconds, 0.2);
                if workers == 0 {
                    // Items 0..4 came as batches 0 and 1; batch 2 (items 4, 5) is stuck at 5.
                    assert_eq!((*batch, *worker, indices.as_slice()), (2, 0, &[4, 5][..]));
                }
                let msg = last.as_ref().unwrap_err().to_string();
                assert!(msg.contains("timed out") && msg.contains("batch"), "{msg}");
            }
            other => panic!("{workers} workers: {other:?}"),
        }
        assert!(got[..got.len() - 1].iter().all(Result::is_ok));
    }
    // Without a timeout the pass waits for the slow reader and then ends normally.
    let mut l = IterableLoader::new(Stuck { stuck_after: 1 }, 2, false, 0).unwrap();
    let got: Vec<_> = l.iter().collect();
    assert_eq!(got.len(), 1);
    assert!(got[0].is_ok());
}

#[test]
fn iterable_loader_refuses_absurd_worker_counts() {
    let r = IterableLoader::new(Stuck { stuck_after: 0 }, 2, false, 100_000_000);
    assert!(r.is_err());
    assert!(IterableLoader::new(Stuck { stuck_after: 0 }, usize::MAX, false, 0).is_ok());
}
