//! The fused LSTM layer: its two implementations (`lstm_layer.simd`, f32 with AVX2+FMA or
//! AVX-512, and `lstm_layer.gemm`) give the same bits — forward values and every gradient — at
//! 1, 2, 3 and 8 threads, over shapes that exercise partial tiles, both directions, given and
//! zero initial states, no biases, and non-finite weights (where the SIMD path's zero-state
//! shortcuts must not apply); and the layer shows up in a trace, forward and backward.
//!
//! On a CPU without those instruction sets the SIMD path does not apply, the pin falls back to
//! the GEMM path, and the comparisons hold trivially.

mod common;

use lockstep_nn::rnn::{Rnn, RnnConfig, RnnOutput};
use lockstep_nn::{Forward, Module, Var};
use lockstep_tensor::autotune::with_algorithm;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};

/// SplitMix64: test data from a seed.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// f32 uniform in `[-scale, scale)`.
    fn f32s(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|_| ((self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale)
            .collect()
    }
}

fn tensor(shape: &[usize], scale: f32, seed: u64) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_vec(Mix(seed).f32s(n, scale), shape).unwrap()
}

/// One case: a layer configuration, the input's shape and how to fill things.
struct Case {
    cfg: RnnConfig,
    x_shape: Vec<usize>,
    /// Give `h0`/`c0` (non-zero, requiring gradients).
    states: bool,
    /// Scale of the weights (PyTorch's init is `1/√H`; larger reaches saturated gates).
    w_scale: f32,
    /// Put an infinity into `weight_hh_l0`.
    inf_weight: bool,
}

/// Bits of the outputs and of every gradient (parameters, input, initial states) of one
/// forward/backward with a fixed random loss weighting.
fn run(case: &Case, seed: u64) -> Vec<Vec<u32>> {
    lockstep_rng::default_generator().manual_seed(seed);
    let mut lstm = Rnn::lstm(case.cfg.clone()).unwrap();
    lstm.train(true);
    for (k, p) in lstm.parameters().iter().enumerate() {
        let mut t = tensor(p.shape(), case.w_scale, seed * 100 + k as u64);
        if case.inf_weight && k == 1 {
            let mut v = t.to_vec::<f32>().unwrap();
            v[3] = f32::INFINITY;
            t = Tensor::from_vec(v, p.shape()).unwrap();
        }
        p.set_data(t).unwrap();
    }
    let x = Var::new(tensor(&case.x_shape, 2.0, seed + 7), true);
    let dirs = if case.cfg.bidirectional { 2 } else { 1 };
    let batch = if case.x_shape.len() == 2 {
        None
    } else if case.cfg.batch_first {
        Some(case.x_shape[0])
    } else {
        Some(case.x_shape[1])
    };
    let mut state_shape = vec![case.cfg.num_layers * dirs];
    state_shape.extend(batch);
    state_shape.push(case.cfg.hidden_size);
    let h0 = Var::new(tensor(&state_shape, 0.5, seed + 8), true);
    let c0 = Var::new(tensor(&state_shape, 0.5, seed + 9), true);
    let RnnOutput { output, h_n, c_n } = if case.states {
        lstm.forward_with_state(&x, Some(&h0), Some(&c0)).unwrap()
    } else {
        lstm.forward_with_state(&x, None, None).unwrap()
    };
    let c_n = c_n.unwrap();
    let weigh = |v: &Var, s: u64| {
        v.mul(&Var::constant(tensor(v.shape(), 1.0, s)))
            .unwrap()
            .sum()
            .unwrap()
    };
    let loss = weigh(&output, seed + 10)
        .add(&weigh(&h_n, seed + 11))
        .unwrap()
        .add(&weigh(&c_n, seed + 12))
        .unwrap();
    loss.backward().unwrap();
    let bits = |t: &Tensor| -> Vec<u32> {
        t.to_vec::<f32>()
            .unwrap()
            .iter()
            // NaN: one pattern (IEEE 754 leaves a NaN result's sign and payload open).
            .map(|x| if x.is_nan() { 0x7fc0_0000 } else { x.to_bits() })
            .collect()
    };
    let mut out = vec![bits(&output.data()), bits(&h_n.data()), bits(&c_n.data())];
    for p in lstm.parameters() {
        out.push(bits(&p.grad().unwrap()));
    }
    out.push(bits(&x.grad().unwrap()));
    if case.states {
        out.push(bits(&h0.grad().unwrap()));
        out.push(bits(&c0.grad().unwrap()));
    }
    out
}

fn gemm_path<R>(f: impl FnOnce() -> R) -> R {
    with_algorithm("lstm_input.linear", || {
        with_algorithm("lstm_layer.gemm", || {
            with_algorithm("lstm_layer_backward.gemm", f)
        })
    })
}

fn simd_path<R>(f: impl FnOnce() -> R) -> R {
    with_algorithm("lstm_input.simd", || {
        with_algorithm("lstm_layer.simd", || {
            with_algorithm("lstm_layer_backward.simd", f)
        })
    })
}

fn check(name: &str, case: &Case) {
    // Constructing a layer registers its ops, so the pins below name known algorithms.
    let _ = Rnn::lstm(cfg(1, 1, 1));
    for det in [true, false] {
        let reference = lockstep_tensor::deterministic::scope(det, false, || {
            with_num_threads(1, || gemm_path(|| run(case, 5)))
        });
        for threads in [1, 2, 3, 8] {
            for (path, got) in [
                (
                    "simd",
                    with_num_threads(threads, || {
                        lockstep_tensor::deterministic::scope(det, false, || {
                            simd_path(|| run(case, 5))
                        })
                    }),
                ),
                (
                    "gemm",
                    with_num_threads(threads, || {
                        lockstep_tensor::deterministic::scope(det, false, || {
                            gemm_path(|| run(case, 5))
                        })
                    }),
                ),
            ] {
                assert_eq!(reference.len(), got.len());
                for (k, (a, b)) in reference.iter().zip(&got).enumerate() {
                    assert_eq!(a.len(), b.len(), "{name}: tensor {k}: lengths");
                    if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
                        panic!(
                            "{name}: tensor {k} differs ({path} path, {threads} threads, \
                             deterministic {det}) from the GEMM path at 1 thread: element {i}, \
                             {:#010x} ({}) vs {:#010x} ({})",
                            a[i],
                            f32::from_bits(a[i]),
                            b[i],
                            f32::from_bits(b[i])
                        );
                    }
                }
            }
        }
    }
}

fn cfg(input: usize, hidden: usize, layers: usize) -> RnnConfig {
    RnnConfig {
        num_layers: layers,
        ..RnnConfig::new(input, hidden)
    }
}

#[test]
fn training_model_shape() {
    let _turn = common::isa_turn();
    // The `lstm` model of `lockstep train`: H = 128, batch 32, 8 steps, two layers.
    check(
        "train",
        &Case {
            cfg: RnnConfig {
                batch_first: true,
                ..cfg(8, 128, 2)
            },
            x_shape: vec![32, 8, 8],
            states: false,
            w_scale: 0.0884,
            inf_weight: false,
        },
    );
}

#[test]
fn partial_tiles_bidirectional_and_given_states() {
    let _turn = common::isa_turn();
    // H = 20 and 5: unit tiles and column tiles cut short; batch 7 and 13: row tiles cut short
    // and uneven row ranges.
    check(
        "bidirectional",
        &Case {
            cfg: RnnConfig {
                bidirectional: true,
                ..cfg(6, 20, 2)
            },
            x_shape: vec![5, 7, 6],
            states: true,
            w_scale: 0.8,
            inf_weight: false,
        },
    );
    check(
        "small",
        &Case {
            cfg: cfg(3, 5, 1),
            x_shape: vec![4, 13, 3],
            states: true,
            w_scale: 1.5,
            inf_weight: false,
        },
    );
    check(
        "unbatched, one step",
        &Case {
            cfg: cfg(4, 33, 1),
            x_shape: vec![1, 4],
            states: false,
            w_scale: 0.3,
            inf_weight: false,
        },
    );
}

#[test]
fn no_bias_and_wide_batch() {
    let _turn = common::isa_turn();
    check(
        "no bias",
        &Case {
            cfg: RnnConfig {
                bias: false,
                ..cfg(16, 64, 1)
            },
            x_shape: vec![3, 70, 16],
            states: false,
            w_scale: 0.2,
            inf_weight: false,
        },
    );
}

#[test]
fn non_finite_weights_disable_the_zero_state_shortcuts() {
    let _turn = common::isa_turn();
    // With an infinite recurrent weight the first step's product is NaN in some columns even
    // from a zero state: the SIMD path must compute it, not assume +0.
    check(
        "inf",
        &Case {
            cfg: cfg(4, 16, 1),
            x_shape: vec![3, 5, 4],
            states: false,
            w_scale: 0.5,
            inf_weight: true,
        },
    );
}

#[test]
fn input_projection_kernels_give_linears_bits() {
    let _turn = common::isa_turn();
    // 64 and 128 inputs: the input projection's own kernels (whole tiles of 64 and 32
    // columns) on the first layer (x's gradient too) and on the second (both directions),
    // with 2·37 rows (not whole micro-tiles) and with no biases.
    use lockstep_tensor::isa::{Isa, set_isa};
    let cases = [
        Case {
            cfg: RnnConfig {
                bidirectional: true,
                ..cfg(64, 32, 2)
            },
            x_shape: vec![2, 37, 64],
            states: true,
            w_scale: 0.3,
            inf_weight: false,
        },
        Case {
            cfg: RnnConfig {
                bias: false,
                batch_first: true,
                ..cfg(128, 16, 1)
            },
            x_shape: vec![5, 3, 128],
            states: false,
            w_scale: 0.2,
            inf_weight: false,
        },
    ];
    for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
        set_isa(Some(isa)).unwrap();
        for (k, case) in cases.iter().enumerate() {
            check(&format!("projection {k} ({isa})"), case);
        }
    }
    set_isa(None).unwrap();
}

#[test]
fn concurrent_callers_get_the_same_bits() {
    let _turn = common::isa_turn();
    // One caller's row ranges run on it and the LSTM's helper threads; another's, meanwhile, in
    // the rayon pool: the same bits either way, at any number of threads.
    let _ = Rnn::lstm(cfg(1, 1, 1));
    let case = Case {
        cfg: RnnConfig {
            batch_first: true,
            ..cfg(8, 128, 2)
        },
        x_shape: vec![32, 8, 8],
        states: true,
        w_scale: 0.0884,
        inf_weight: false,
    };
    let reference = with_num_threads(1, || gemm_path(|| run(&case, 3)));
    std::thread::scope(|s| {
        let runs: Vec<_> = [2, 3, 2, 8, 2]
            .into_iter()
            .map(|threads| {
                let case = &case;
                s.spawn(move || {
                    (0..3)
                        .map(|_| with_num_threads(threads, || simd_path(|| run(case, 3))))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for r in runs {
            for got in r.join().unwrap() {
                assert!(
                    got == reference,
                    "a concurrent run differs from the GEMM path"
                );
            }
        }
    });
}

#[test]
fn every_instruction_set_gives_the_gemm_paths_bits() {
    let _turn = common::isa_turn();
    // H = 128 and 64 take the SIMD path's in-place W_hh and its own W_hh gradient with AVX-512
    // (64 columns a tile) and AVX2 (32); H = 20 the packed W_hh and the blocked product.
    use lockstep_tensor::isa::{Isa, set_isa};
    let cases = [
        (
            "train",
            Case {
                cfg: RnnConfig {
                    batch_first: true,
                    ..cfg(8, 128, 2)
                },
                x_shape: vec![32, 8, 8],
                states: false,
                w_scale: 0.0884,
                inf_weight: false,
            },
        ),
        (
            "given states",
            Case {
                cfg: cfg(5, 64, 1),
                x_shape: vec![4, 13, 5],
                states: true,
                w_scale: 0.3,
                inf_weight: false,
            },
        ),
        (
            "partial",
            Case {
                cfg: cfg(6, 20, 1),
                x_shape: vec![5, 7, 6],
                states: true,
                w_scale: 0.8,
                inf_weight: false,
            },
        ),
    ];
    for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
        set_isa(Some(isa)).unwrap();
        for (name, case) in &cases {
            check(&format!("{name} ({isa})"), case);
        }
    }
    set_isa(None).unwrap();
}

#[test]
fn trace_records_the_fused_layer_forward_and_backward() {
    let _turn = common::isa_turn();
    let case = Case {
        cfg: cfg(4, 16, 1),
        x_shape: vec![3, 5, 4],
        states: true,
        w_scale: 0.5,
        inf_weight: false,
    };
    let (_, recs) = lockstep_tensor::trace::capture(|| run(&case, 3));
    let fwd: Vec<_> = recs.iter().filter(|r| r.op == "lstm_layer").collect();
    assert_eq!(fwd.len(), 1, "one forward record");
    let f = fwd[0];
    assert!(f.algo.starts_with("lstm_layer."), "{}", f.algo);
    assert_eq!(f.backward, None);
    // xw [T, B, 4H], W_hh, b_hh, h0, c0 -> [T + 1, B, H].
    assert_eq!(
        f.inputs,
        vec![
            vec![3, 5, 64],
            vec![64, 16],
            vec![64],
            vec![5, 16],
            vec![5, 16]
        ]
    );
    assert_eq!(f.output, vec![4, 5, 16]);
    assert_eq!(f.dtype, "f32");
    let bwd: Vec<_> = recs
        .iter()
        .filter(|r| r.op == "lstm_layer_backward")
        .collect();
    // Gradients of xw, W_hh, b_hh, h0, c0.
    let shapes: Vec<_> = bwd.iter().map(|r| r.output.clone()).collect();
    assert_eq!(
        shapes,
        vec![
            vec![3, 5, 64],
            vec![64, 16],
            vec![64],
            vec![5, 16],
            vec![5, 16]
        ]
    );
    assert!(
        bwd.iter()
            .all(|r| r.backward.as_deref() == Some("lstm_layer")
                && r.algo.starts_with("lstm_layer_backward.")
                && r.call > f.call)
    );
    // Same inputs, same hashes, whichever implementation.
    let (_, gemm) = lockstep_tensor::trace::capture(|| gemm_path(|| run(&case, 3)));
    let (_, simd) = lockstep_tensor::trace::capture(|| simd_path(|| run(&case, 3)));
    let hashes = |r: &[lockstep_tensor::trace::Record]| -> Vec<String> {
        r.iter()
            .filter(|r| r.op.starts_with("lstm_layer"))
            .map(|r| r.hash.clone())
            .collect()
    };
    assert_eq!(hashes(&gemm), hashes(&simd));
    assert_eq!(hashes(&gemm).len(), 6);
}

#[test]
fn f64_runs_the_gemm_path() {
    let _turn = common::isa_turn();
    lockstep_rng::default_generator().manual_seed(1);
    let lstm = Rnn::lstm(cfg(3, 4, 1)).unwrap();
    lstm.to_dtype(DType::F64).unwrap();
    let x = Var::constant(Tensor::ones(&[2, 1, 3], DType::F64).unwrap());
    let (out, recs) =
        lockstep_tensor::trace::capture(|| simd_path(|| lstm.forward(&x).unwrap().data()));
    assert_eq!(out.dtype(), DType::F64);
    let r = recs.iter().find(|r| r.op == "lstm_layer").unwrap();
    assert_eq!(r.algo, "lstm_layer.gemm");
}
