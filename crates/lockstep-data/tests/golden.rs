//! Known answers from real PyTorch 2.15 and NumPy 2.4, written by `tools/golden_data.py`
//! into `tests/golden/data/torch_data.json`.

mod common;

use common::{Range, global_lock};
use lockstep_data::transforms::{Compose, GaussianNoise, RandomCrop, RandomHorizontalFlip};
use lockstep_data::*;
use lockstep_rng::compat::numpy::RandomState;
use lockstep_rng::compat::python::Random;
use lockstep_rng::compat::torch as t;
use lockstep_rng::default_generator;
use serde_json::Value;
use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

fn golden() -> &'static Value {
    static G: OnceLock<Value> = OnceLock::new();
    G.get_or_init(|| {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/golden/data/torch_data.json"
        );
        serde_json::from_str(&std::fs::read_to_string(p).expect("golden file")).expect("json")
    })
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

fn nested(v: &Value) -> Vec<Vec<usize>> {
    v.as_array().unwrap().iter().map(usizes).collect()
}

fn default_next() -> u64 {
    let mut x = [0i64];
    t::random_(&mut default_generator(), &mut x, 0, 1 << 30).unwrap();
    x[0] as u64
}

#[test]
fn random_sampler_matches_torch() {
    let _g = global_lock();
    for c in golden()["random_sampler"].as_array().unwrap() {
        default_generator().manual_seed(c["seed"].as_u64().unwrap());
        let gen_ = c["generator_seed"].as_u64().map(SharedGenerator::with_seed);
        let mut s = RandomSampler::new(
            c["n"].as_u64().unwrap() as usize,
            c["replacement"].as_bool().unwrap(),
            c["num_samples"].as_u64().map(|x| x as usize),
            gen_,
        )
        .unwrap();
        for (k, want) in c["passes"].as_array().unwrap().iter().enumerate() {
            assert_eq!(s.pass().unwrap(), usizes(want), "case {c} pass {k}");
        }
        assert_eq!(default_next(), c["default_next"].as_u64().unwrap(), "{c}");
    }
}

#[test]
fn loader_order_matches_torch() {
    let _g = global_lock();
    for c in golden()["loader_order"].as_array().unwrap() {
        default_generator().manual_seed(c["seed"].as_u64().unwrap());
        let mut b = DataLoader::builder(Range(c["n"].as_u64().unwrap() as usize))
            .batch_size(c["batch_size"].as_u64().unwrap() as usize)
            .shuffle(true)
            .drop_last(c["drop_last"].as_bool().unwrap());
        if let Some(s) = c["generator_seed"].as_u64() {
            b = b.generator(SharedGenerator::with_seed(s));
        }
        let mut dl = b.build().unwrap();
        for want in c["epochs"].as_array().unwrap() {
            let got: Vec<Vec<usize>> = dl
                .iter()
                .map(|b| {
                    b.unwrap()
                        .to_vec::<i64>()
                        .unwrap()
                        .into_iter()
                        .map(|i| i as usize)
                        .collect()
                })
                .collect();
            assert_eq!(got, nested(want), "{c}");
        }
        assert_eq!(default_next(), c["default_next"].as_u64().unwrap(), "{c}");
    }
}

#[test]
fn distributed_sampler_matches_torch() {
    for c in golden()["distributed"].as_array().unwrap() {
        let r = c["num_replicas"].as_u64().unwrap() as usize;
        for (rank, epochs) in c["ranks"].as_array().unwrap().iter().enumerate() {
            let mut s = DistributedSampler::new(
                c["n"].as_u64().unwrap() as usize,
                r,
                rank,
                c["shuffle"].as_bool().unwrap(),
                c["seed"].as_u64().unwrap(),
                c["drop_last"].as_bool().unwrap(),
            )
            .unwrap();
            for (e, want) in epochs.as_array().unwrap().iter().enumerate() {
                s.set_epoch(e as u64);
                assert_eq!(s.len(), want.as_array().unwrap().len());
                assert_eq!(s.pass().unwrap(), usizes(want), "{c} rank {rank} epoch {e}");
            }
        }
    }
}

#[test]
fn random_split_matches_torch() {
    let _g = global_lock();
    for c in golden()["random_split"].as_array().unwrap() {
        let ds = Arc::new(Range(c["n"].as_u64().unwrap() as usize));
        let g = match c["generator_seed"].as_u64() {
            Some(s) => SharedGenerator::with_seed(s),
            None => {
                default_generator().manual_seed(c["default_seed"].as_u64().unwrap());
                SharedGenerator::Default
            }
        };
        let parts = if c["lengths"].is_null() {
            let f: Vec<f64> = c["fractions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect();
            random_split_fractions(ds, &f, &g).unwrap()
        } else {
            random_split(ds, &usizes(&c["lengths"]), &g).unwrap()
        };
        let got: Vec<Vec<usize>> = parts.iter().map(|p| p.indices().to_vec()).collect();
        assert_eq!(got, nested(&c["parts"]), "{c}");
    }
}

#[test]
fn other_samplers_match_torch() {
    let _g = global_lock();
    let c = &golden()["other_samplers"];
    default_generator().manual_seed(c["subset_seed"].as_u64().unwrap());
    let mut s = SubsetRandomSampler::new(usizes(&c["subset_indices"]), None);
    for want in c["subset"].as_array().unwrap() {
        assert_eq!(s.pass().unwrap(), usizes(want));
    }
    let w: Vec<f64> = c["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let g = SharedGenerator::with_seed(c["weighted_replacement_seed"].as_u64().unwrap());
    let mut s = WeightedRandomSampler::new(w.clone(), 12, true, Some(g)).unwrap();
    for want in c["weighted_replacement"].as_array().unwrap() {
        assert_eq!(s.pass().unwrap(), usizes(want));
    }
    let g = SharedGenerator::with_seed(c["weighted_no_replacement_seed"].as_u64().unwrap());
    let mut s = WeightedRandomSampler::new(w, 4, false, Some(g)).unwrap();
    for want in c["weighted_no_replacement"].as_array().unwrap() {
        assert_eq!(s.pass().unwrap(), usizes(want));
    }
    for (k, drop_last) in [false, true].into_iter().enumerate() {
        let mut b = BatchSampler::new(Box::new(SequentialSampler::new(10)), 4, drop_last).unwrap();
        assert_eq!(b.pass().unwrap(), nested(&c["batch"][k]));
        assert_eq!(b.len(), c["batch"][k].as_array().unwrap().len());
    }
}

/// What `SeedProbe.__getitem__` reports in the script.
#[derive(Debug)]
struct Probe {
    index: usize,
    worker: usize,
    seed: u64,
    initial_seed: u64,
    torch_rand: f32,
    py_random: f64,
    np_random: f64,
}

thread_local! {
    static WORKER_RNGS: RefCell<Option<(Random, RandomState)>> = const { RefCell::new(None) };
}

struct SeedProbe;

impl Dataset for SeedProbe {
    type Item = Probe;
    fn len(&self) -> usize {
        16
    }
    fn get(&self, index: usize, rng: &mut SampleRng<'_>) -> Result<Probe> {
        let info = get_worker_info().expect("in a worker");
        let initial_seed = rng.with_torch(|g| g.initial_seed()).unwrap();
        let torch_rand = rng.rand_f32();
        let (py_random, np_random) = WORKER_RNGS.with(|w| {
            let mut w = w.borrow_mut();
            let (py, np) = w.as_mut().expect("seeded by worker_init_fn");
            let mut x = [0f64];
            np.random_sample(&mut x);
            (py.random(), x[0])
        });
        Ok(Probe {
            index,
            worker: info.id,
            seed: info.seed,
            initial_seed,
            torch_rand,
            py_random,
            np_random,
        })
    }
}

#[test]
fn worker_seeds_and_worker_streams_match_torch() {
    let _g = global_lock();
    for c in golden()["worker_seeds"].as_array().unwrap() {
        default_generator().manual_seed(c["seed"].as_u64().unwrap());
        let mut dl = DataLoaderBuilder::new(SeedProbe)
            .batch_size(2)
            .shuffle(true)
            .num_workers(c["workers"].as_u64().unwrap() as usize)
            .worker_init_fn(|_| {
                // What PyTorch does in each worker: seed Python's `random` and NumPy.
                let info = get_worker_info().unwrap();
                WORKER_RNGS.with(|w| {
                    *w.borrow_mut() = Some((info.python_random(), info.numpy_random_state()))
                });
                Ok(())
            })
            .collate_fn(|b: Vec<Probe>| Ok(b))
            .build()
            .unwrap();
        for want in c["epochs"].as_array().unwrap() {
            let got: Vec<Vec<Probe>> = dl.iter().map(|b| b.unwrap()).collect();
            let want = want.as_array().unwrap();
            assert_eq!(got.len(), want.len());
            for (gb, wb) in got.iter().zip(want) {
                for (p, w) in gb.iter().zip(wb.as_array().unwrap()) {
                    assert_eq!(p.index as u64, w["index"].as_u64().unwrap(), "{c}");
                    assert_eq!(p.worker as u64, w["worker"].as_u64().unwrap());
                    assert_eq!(p.seed, w["seed"].as_u64().unwrap());
                    assert_eq!(p.initial_seed, w["initial_seed"].as_u64().unwrap());
                    assert_eq!(p.torch_rand as f64, w["torch_rand"].as_f64().unwrap());
                    assert_eq!(p.py_random, w["py_random"].as_f64().unwrap());
                    assert_eq!(p.np_random, w["np_random"].as_f64().unwrap());
                }
            }
        }
        assert_eq!(default_next(), c["default_next"].as_u64().unwrap(), "{c}");
    }
}

fn augmented_digits() -> CsvDataset {
    Digits::new().unwrap().with_transform(Compose(vec![
        Box::new(RandomCrop::new(8, 2)),
        Box::new(RandomHorizontalFlip::new(0.5)),
        Box::new(GaussianNoise::new(0.1)),
    ]))
}

#[test]
fn torch_compatible_augmented_batches_match_torch() {
    let _g = global_lock();
    let ds = Arc::new(augmented_digits());
    for c in golden()["augmented"].as_array().unwrap() {
        default_generator().manual_seed(c["seed"].as_u64().unwrap());
        let workers = c["workers"].as_u64().unwrap() as usize;
        let mut b = DataLoader::builder(Arc::clone(&ds))
            .batch_size(64)
            .shuffle(true)
            .num_workers(workers);
        if workers > 0 {
            b = b.prefetch_factor(2);
        }
        let mut dl = b.build().unwrap();
        let mut it = dl.iter();
        for (k, want) in c["batches"].as_array().unwrap().iter().enumerate() {
            let (x, y) = it.next().unwrap().unwrap();
            let wx: Vec<f32> = want["images"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect();
            let wy: Vec<i64> = want["labels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .collect();
            assert_eq!(
                y.to_vec::<i64>().unwrap(),
                wy,
                "workers {workers} batch {k}"
            );
            let gx = x.to_vec::<f32>().unwrap();
            for (i, (a, b)) in gx.iter().zip(&wx).enumerate() {
                assert_eq!(
                    a.to_bits(),
                    b.to_bits(),
                    "workers {workers} batch {k} value {i}: {a} vs {b}"
                );
            }
        }
    }
}

#[test]
fn per_sample_stream_and_augmentation_match_numpy() {
    let ds = augmented_digits();
    for c in golden()["per_sample"].as_array().unwrap() {
        let (seed, epoch, index) = (
            c["seed"].as_u64().unwrap(),
            c["epoch"].as_u64().unwrap(),
            c["index"].as_u64().unwrap() as usize,
        );
        let mut g = per_sample_generator(seed, epoch, index);
        let mut r = [0f64; 3];
        g.random(&mut r);
        let want: Vec<f64> = c["random3"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(r.to_vec(), want, "{c}");
        let (x, _) = ds
            .get(index, &mut SampleRng::per_sample(seed, epoch, index))
            .unwrap();
        let want: Vec<f32> = c["image"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(
            x.to_vec::<f32>().unwrap(),
            want,
            "seed {seed} epoch {epoch} index {index}"
        );
    }
}

#[test]
fn user_draw_between_iter_and_first_next_matches_torch() {
    let _g = global_lock();
    for c in golden()["draw_between"].as_array().unwrap() {
        default_generator().manual_seed(c["seed"].as_u64().unwrap());
        let workers = c["workers"].as_u64().unwrap() as usize;
        let mut dl = DataLoader::builder(Range(c["n"].as_u64().unwrap() as usize))
            .batch_size(c["batch_size"].as_u64().unwrap() as usize)
            .shuffle(true)
            .num_workers(workers)
            .build()
            .unwrap();
        let mut it = dl.iter();
        let u = default_generator().next_f32();
        assert_eq!(
            u as f64,
            c["user_rand"].as_f64().unwrap(),
            "workers {workers}"
        );
        let got: Vec<Vec<usize>> = it
            .by_ref()
            .map(|b| {
                b.unwrap()
                    .to_vec::<i64>()
                    .unwrap()
                    .into_iter()
                    .map(|i| i as usize)
                    .collect()
            })
            .collect();
        assert_eq!(got, nested(&c["batches"]), "workers {workers}");
    }
}
