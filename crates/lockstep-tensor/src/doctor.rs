//! The determinism self-test behind `lockstep doctor --self-test`: runs every deterministic
//! kernel on seeded random inputs at 1, 2, 3 and the machine's thread count, in deterministic
//! mode, and reports op by op whether all the bits agree — a user's way to confirm
//! determinism on their own machine.

use crate::deterministic::scope;
use crate::threads::with_num_threads;
use crate::{DType, Result, Tensor};
use lockstep_rng::Generator;

/// The outcome for one op.
#[derive(Clone, Debug, PartialEq)]
pub struct SelfTestResult {
    /// The op (and the case, e.g. `sum[1000003]`).
    pub op: String,
    /// The thread counts it ran at.
    pub threads: Vec<usize>,
    /// Whether every run gave the same bits.
    pub identical: bool,
    /// An error, if the op failed to run at all.
    pub error: Option<String>,
    /// A hash of the output's shape and bits (first run; [`crate::trace::hash_bytes`]), to
    /// compare runs across processes, instruction-set paths ([`crate::isa`]) and machines.
    pub output_hash: Option<u64>,
}

/// A named case: a closure computing an output from nothing but its own seeded inputs.
pub type Case = (String, Box<dyn Fn() -> Result<Tensor> + Send + Sync>);

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F32, Some(&mut Generator::with_seed(seed))).expect("valid shape")
}

fn bits(t: &Tensor) -> Vec<u64> {
    t.to_f64_vec().into_iter().map(f64::to_bits).collect()
}

/// The hash of a shape and the output's bits (as `bits` lists them).
fn output_hash(shape: &[usize], bits: &[u64]) -> u64 {
    let bytes: Vec<u8> = (shape.iter().map(|&d| d as u64))
        .chain([u64::MAX])
        .chain(bits.iter().copied())
        .flat_map(u64::to_le_bytes)
        .collect();
    crate::trace::hash_bytes(&bytes)
}

fn indices(n: usize, high: i64, seed: u64) -> Tensor {
    Tensor::randint(
        0,
        high,
        &[n],
        DType::I64,
        Some(&mut Generator::with_seed(seed)),
    )
    .expect("valid range")
}

/// Adds a case named `name` computing `f` from the captured inputs.
fn case(v: &mut Vec<Case>, name: &str, f: impl Fn() -> Result<Tensor> + Send + Sync + 'static) {
    v.push((name.to_string(), Box::new(f)));
}

/// The built-in cases: every deterministic kernel of this crate, on shapes that exercise the
/// chunk and lane remainders.
pub fn cases() -> Vec<Case> {
    use crate::ops::index::BagMode;
    use crate::ops::pool::Pool2d;
    let mut v: Vec<Case> = Vec::new();
    for n in [1_000_003usize, 70_001] {
        let x = randn(&[n], n as u64);
        case(&mut v, &format!("sum[{n}]"), move || x.sum());
    }
    let x = randn(&[257, 129], 7);
    for d in [0isize, 1] {
        let y = x.clone();
        case(&mut v, &format!("sum_dim[257x129, dim={d}]"), move || {
            y.sum_dim(d, false)
        });
    }
    let y = x.clone();
    case(&mut v, "var[257x129]", move || y.var(1.0));
    let y = x.clone();
    case(&mut v, "var_dim[257x129, dim=0]", move || {
        y.var_dim(0, 1.0, false)
    });
    let y = x.clone();
    case(&mut v, "softmax[257x129, dim=1]", move || y.softmax(1));
    let y = x.clone();
    case(&mut v, "log_softmax[257x129, dim=0]", move || {
        y.log_softmax(0)
    });
    let y = x.clone();
    case(&mut v, "logsumexp[257x129, dim=1]", move || {
        y.logsumexp(1, false)
    });
    let y = x.clone();
    case(&mut v, "cumsum[257x129, dim=0]", move || y.cumsum(0));
    let y = x.clone();
    case(&mut v, "mul+tanh[257x129]", move || y.tanh()?.mul(&y));

    let src = randn(&[20_011, 33], 11);
    for dests in [7usize, 1000] {
        let (s, idx) = (src.clone(), indices(20_011, dests as i64, 12));
        let base = Tensor::zeros(&[dests, 33], DType::F32).expect("shape");
        case(
            &mut v,
            &format!("index_add[20011x33 -> {dests}]"),
            move || base.index_add(0, &idx, &s),
        );
    }
    let (s, idx) = (
        src.clone(),
        indices(20_011 * 33, 500, 13)
            .reshape(&[20_011, 33])
            .expect("shape"),
    );
    let base = Tensor::zeros(&[500, 33], DType::F32).expect("shape");
    case(&mut v, "scatter_add[20011x33 -> 500]", move || {
        base.scatter_add(0, &idx, &s)
    });
    let (s, idx) = (src.clone(), indices(20_011, 300, 14));
    let base = Tensor::zeros(&[300, 33], DType::F32).expect("shape");
    case(&mut v, "index_put(accumulate)[20011 -> 300]", move || {
        base.index_put(std::slice::from_ref(&idx), &s, true)
    });
    let (g, idx) = (src.clone(), indices(20_011, 777, 15));
    case(&mut v, "embedding_backward[20011x33 -> 777]", move || {
        Tensor::embedding_backward(&g, &idx, 777)
    });
    let (w, idx) = (randn(&[400, 17], 16), indices(5000, 400, 17));
    let offsets = Tensor::arange(0.0, 5000.0, 7.0, DType::I64).expect("range");
    case(&mut v, "embedding_bag(sum)[5000 -> 715 bags]", move || {
        w.embedding_bag(&idx, &offsets, BagMode::Sum)
    });
    let (idx, wts) = (indices(100_003, 1000, 18), randn(&[100_003], 19));
    case(&mut v, "bincount(weights)[100003 -> 1000]", move || {
        idx.bincount(Some(&wts), 0)
    });
    let h = randn(&[100_003], 20);
    case(&mut v, "histc[100003, 97 bins]", move || {
        h.histc(97, -3.0, 3.0)
    });

    let img = randn(&[3, 5, 17, 13], 21);
    let p = Pool2d {
        kernel: (3, 3),
        stride: (2, 2),
        padding: (1, 1),
        dilation: (1, 1),
        ceil_mode: true,
    };
    let y = img.clone();
    case(&mut v, "avg_pool2d_backward[3x5x17x13]", move || {
        let a = y.avg_pool2d(p, false)?;
        Tensor::avg_pool2d_backward(&a, y.shape(), p, false)
    });
    let y = img.clone();
    case(&mut v, "max_pool2d_backward[3x5x17x13]", move || {
        let (m, i) = y.max_pool2d(p)?;
        Tensor::max_pool2d_backward(&m, &i, y.shape())
    });

    for (m, k, n) in [(300usize, 257usize, 129usize), (64, 4099, 64)] {
        let (a, b) = (randn(&[m, k], 22), randn(&[k, n], 23));
        case(&mut v, &format!("matmul[{m}x{k} · {k}x{n}]"), move || {
            a.matmul(&b)
        });
    }
    let cp = crate::ops::conv::Conv2dParams {
        stride: (1, 1),
        padding: (1, 1),
        dilation: (1, 1),
        groups: 1,
    };
    let (x, w) = (randn(&[4, 8, 19, 17], 24), randn(&[12, 8, 3, 3], 25));
    let (xx, ww) = (x.clone(), w.clone());
    case(&mut v, "conv2d[4x8x19x17, 12x8x3x3]", move || {
        xx.conv2d(&ww, None, cp)
    });
    let gy = randn(&[4, 12, 19, 17], 26);
    let (g2, ww) = (gy.clone(), w.clone());
    case(&mut v, "conv2d_input_grad[4x8x19x17]", move || {
        Tensor::conv2d_backward_input(&g2, &[4, 8, 19, 17], &ww, cp)
    });
    case(&mut v, "conv2d_weight_grad[4x8x19x17]", move || {
        Tensor::conv2d_backward_weight(&gy, &x, w.shape(), cp)
    });
    // The Winograd kernels, pinned (an explicit opt-in, as for users).
    use crate::autotune::with_algorithm as pin;
    let (x, w) = (randn(&[9, 20, 13, 11], 27), randn(&[18, 20, 3, 3], 28));
    let gy = randn(&[9, 18, 13, 11], 29);
    let (xx, ww) = (x.clone(), w.clone());
    case(
        &mut v,
        "conv2d(winograd)[9x20x13x11, 18x20x3x3]",
        move || pin("conv2d.winograd_f4x3", || xx.conv2d(&ww, None, cp)),
    );
    let (g2, ww) = (gy.clone(), w.clone());
    case(
        &mut v,
        "conv2d_input_grad(winograd)[9x20x13x11]",
        move || {
            pin("conv2d_input_grad.winograd_f4x3", || {
                Tensor::conv2d_backward_input(&g2, &[9, 20, 13, 11], &ww, cp)
            })
        },
    );
    case(
        &mut v,
        "conv2d_weight_grad(winograd)[9x20x13x11]",
        move || {
            pin("conv2d_weight_grad.winograd_f4x3", || {
                Tensor::conv2d_backward_weight(&gy, &x, w.shape(), cp)
            })
        },
    );
    v
}

/// Runs `cases` at 1, 2, 3 and `get_num_threads()` threads (deduplicated) in deterministic
/// mode and compares the output bits.
pub fn run(cases: &[Case]) -> Vec<SelfTestResult> {
    let mut threads = vec![1, 2, 3, crate::threads::get_num_threads()];
    threads.sort_unstable();
    threads.dedup();
    cases
        .iter()
        .map(|(name, f)| {
            let mut outs = Vec::new();
            let mut error = None;
            for &t in &threads {
                match scope(true, false, || with_num_threads(t, f)) {
                    Ok(o) => outs.push((o.shape().to_vec(), bits(&o))),
                    Err(e) => {
                        error = Some(e.to_string());
                        break;
                    }
                }
            }
            SelfTestResult {
                op: name.clone(),
                threads: threads.clone(),
                identical: error.is_none() && outs.windows(2).all(|w| w[0] == w[1]),
                output_hash: outs.first().map(|(s, b)| output_hash(s, b)),
                error,
            }
        })
        .collect()
}

/// The CPU's model name (`/proc/cpuinfo` on Linux), if known.
pub fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| {
            l.starts_with("model name") || l.starts_with("Model") || l.starts_with("Hardware")
        })
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// The instruction-set path lockstep's vectorised kernels run (`avx512`, `avx2` or `portable`):
/// [`crate::isa::Isa::best`], i.e. forced by `set_isa`, asked for by `LOCKSTEP_ISA`, or the
/// fastest the CPU has. Deterministic kernels give the same bits on every path.
pub fn simd_in_use() -> &'static str {
    crate::isa::Isa::best().name()
}

/// Code whose results depend on the platform's math library (glibc, musl, macOS, MSVC), so
/// may differ in the last bit from one OS or libc to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlatformMath {
    /// What (a sampler or kernel, by its public name).
    pub what: &'static str,
    /// The C functions it calls.
    pub functions: &'static str,
    /// Whether it is one of lockstep's deterministic kernels (the promise "the same bits on
    /// every machine" covers those: this list should hold none) rather than a compat sampler
    /// (which calls what the library it mirrors calls, by design).
    pub deterministic_kernel: bool,
}

/// Everything in lockstep that calls the platform's math library. Deterministic kernels take
/// their transcendental functions from [`crate::math`] (portable); the compat samplers call the
/// functions the reference library calls, so that they match it on the same platform.
pub const PLATFORM_MATH: &[PlatformMath] = &[
    PlatformMath {
        what: "torch: randn/normal_ (float64, and float32 below 16 values), Tensor.normal_",
        functions: "log, log1p, sin, cos",
        deterministic_kernel: false,
    },
    PlatformMath {
        what: "torch: exponential_, geometric_, log_normal_, cauchy_",
        functions: "log, log1p, exp, tan",
        deterministic_kernel: false,
    },
    PlatformMath {
        what: "torch: poisson, binomial, gamma/dirichlet/beta/chi2/student_t (distributions)",
        functions: "log, log1p, exp, pow, lgamma, sin, cos",
        deterministic_kernel: false,
    },
    PlatformMath {
        what: "torch: trunc_normal_ (nn.init)",
        functions: "erf",
        deterministic_kernel: false,
    },
    PlatformMath {
        what: "python (CPython random): gauss, normalvariate, lognormvariate, expovariate, \
               vonmisesvariate, gammavariate, betavariate, paretovariate, weibullvariate, \
               binomialvariate, sample",
        functions: "log, exp, cos, sin, acos, pow, fmod, log2 (lgamma: CPython's own)",
        deterministic_kernel: false,
    },
    PlatformMath {
        what: "numpy (Generator and RandomState): normal tails, exponential tails, gamma, beta, \
               chisquare, f, standard_t, lognormal, logseries, poisson, binomial, \
               hypergeometric, vonmises, wald, weibull, pareto, power, gumbel, logistic, \
               zipf, geometric, rayleigh, laplace, gauss (legacy)",
        functions: "log1p, expm1, cos, acos, fmod, logf, powf, expf, log1pf (log, exp, pow: \
                    lockstep's bit-exact ports of glibc's)",
        deterministic_kernel: false,
    },
    PlatformMath {
        what: "nn schedulers: CosineAnnealingLR's learning rate (one scalar per step, as PyTorch's \
               Python `math.cos` computes it; the portable cos differs from glibc's in the last \
               bit on some of PyTorch's golden schedules)",
        functions: "cos",
        deterministic_kernel: false,
    },
];

/// The C library and its version (`glibc 2.39` from `gnu_get_libc_version`), which also
/// supplies the math library (`libm`) the compat samplers call ([`PLATFORM_MATH`]).
pub fn libc_version() -> String {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn gnu_get_libc_version() -> *const std::ffi::c_char;
        }
        // SAFETY: glibc returns a pointer to a static NUL-terminated string.
        let v = unsafe { std::ffi::CStr::from_ptr(gnu_get_libc_version()) };
        return format!("glibc {}", v.to_string_lossy());
    }
    #[allow(unreachable_code)]
    if cfg!(target_env = "musl") {
        "musl (version not exposed)".to_string()
    } else {
        format!("{} C library (version unknown)", std::env::consts::OS)
    }
}

/// The environment variables that can change threading or results here: `OMP_NUM_THREADS`,
/// `MKL_*`, `RAYON_NUM_THREADS`, `CUBLAS_WORKSPACE_CONFIG`, `OPENBLAS_*`, `PYTHONHASHSEED` and
/// every `LOCKSTEP_*`, as set (sorted).
pub fn relevant_env() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| {
            matches!(
                k.as_str(),
                "OMP_NUM_THREADS"
                    | "RAYON_NUM_THREADS"
                    | "CUBLAS_WORKSPACE_CONFIG"
                    | "PYTHONHASHSEED"
            ) || k.starts_with("MKL_")
                || k.starts_with("OPENBLAS_")
                || k.starts_with("LOCKSTEP_")
        })
        .collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn built_in_cases_pass() {
        for r in super::run(&super::cases()) {
            assert!(r.identical, "{r:?}");
            assert!(r.output_hash.is_some(), "{r:?}");
        }
    }

    #[test]
    fn no_deterministic_kernel_depends_on_the_platform_math_library() {
        assert!(super::PLATFORM_MATH.iter().all(|p| !p.deterministic_kernel));
    }

    #[test]
    fn the_path_reported_is_the_path_in_use() {
        assert_eq!(super::simd_in_use(), crate::isa::Isa::best().name());
    }
}
