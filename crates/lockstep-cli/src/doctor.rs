//! `lockstep doctor`: what on this machine can break reproducibility, and (with `--self-test`)
//! whether every deterministic kernel gives the same bits at 1, 2, 3 and all threads.

use lockstep::tensor::doctor::{self, SelfTestResult};
use lockstep::tensor::isa::{self, Isa};
use serde_json::json;

/// Refuses a `LOCKSTEP_ISA` that names no instruction-set path or one this CPU cannot run,
/// with the message to print (the library alone would warn and take the detected path). The
/// `lockstep` binary calls this before running any command.
///
/// # Errors
/// [`lockstep::Error::Rng`], naming the variable, its value and the paths this CPU can run.
pub fn check_isa_env() -> lockstep::Result<()> {
    isa::isa_from_env()?;
    Ok(())
}

/// The instruction-set section of the report: the path in use, where it came from, and the
/// paths this CPU can run.
fn isa_report() -> serde_json::Value {
    let (in_use, source) = isa::isa_in_use();
    json!({
        "in_use": in_use.name(),
        "source": source.name(),
        "detected": Isa::detected().name(),
        "available": Isa::ALL
            .into_iter()
            .filter(|i| i.available())
            .map(Isa::name)
            .collect::<Vec<_>>(),
    })
}

/// The platform-math section: what calls the C library's math functions.
fn platform_math_report() -> serde_json::Value {
    let list = doctor::PLATFORM_MATH;
    json!({
        "deterministic_kernels": list
            .iter()
            .filter(|p| p.deterministic_kernel)
            .map(|p| json!({"what": p.what, "functions": p.functions}))
            .collect::<Vec<_>>(),
        "compat_samplers": list
            .iter()
            .filter(|p| !p.deterministic_kernel)
            .map(|p| json!({"what": p.what, "functions": p.functions}))
            .collect::<Vec<_>>(),
    })
}

/// The environment report as JSON.
pub fn report() -> serde_json::Value {
    let features = lockstep::tensor::autotune::cpu_features();
    let mut notes = Vec::new();
    if !(features.contains(&"avx2") && features.contains(&"fma")) {
        notes.push(
            "no AVX2+FMA: lockstep's results are unchanged (its portable kernels compute the \
             same bits) but slower; PyTorch on this CPU runs its DEFAULT kernels, whose \
             uniform_/normal_ results differ in the last bits from the AVX2 build lockstep \
             reproduces",
        );
    }
    if !cfg!(target_os = "linux") {
        notes.push(
            "not Linux: float64 samplers use this platform's C library (log, log1p, sin, cos), \
             which may differ from glibc, the library PyTorch/NumPy/CPython match on Linux",
        );
    }
    let env: serde_json::Map<String, serde_json::Value> = doctor::relevant_env()
        .into_iter()
        .map(|(k, v)| (k, v.into()))
        .collect();
    for k in ["OMP_NUM_THREADS", "RAYON_NUM_THREADS"] {
        if env.contains_key(k) {
            notes.push(
                "OMP_NUM_THREADS / RAYON_NUM_THREADS are set: lockstep's own pool ignores them \
                 (use --threads or set_num_threads), but other libraries in the process may not",
            );
            break;
        }
    }
    if env.contains_key("LOCKSTEP_TRACE") {
        notes.push("LOCKSTEP_TRACE is set: every op call is traced (slower)");
    }
    let available = std::thread::available_parallelism().map_or(0, |n| n.get());
    json!({
        "lockstep": env!("CARGO_PKG_VERSION"),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "cpu_model": doctor::cpu_model(),
        "cpu_features": features,
        "simd_in_use": doctor::simd_in_use(),
        "isa": isa_report(),
        "platform_math": platform_math_report(),
        "libc": doctor::libc_version(),
        "threads": lockstep::tensor::get_num_threads(),
        "available_parallelism": available,
        "environment": env,
        "deterministic_algorithms": lockstep::tensor::are_deterministic_algorithms_enabled(),
        "warn_only": lockstep::tensor::is_deterministic_algorithms_warn_only_enabled(),
        "fill_uninitialized_memory": lockstep::tensor::deterministic::fill_uninitialized_memory(),
        "memory": {
            "keep_freed_memory": lockstep::tensor::memory::keeps_freed_memory(),
            "huge_pages": lockstep::tensor::memory::huge_pages(),
            "transparent_hugepage": lockstep::tensor::memory::transparent_hugepage_mode(),
            "thp_enabled_for_process": lockstep::tensor::memory::transparent_hugepage_for_process(),
        },
        "benchmark": lockstep::tensor::autotune::benchmark(),
        "conv_deterministic": lockstep::tensor::autotune::conv_deterministic(),
        "tracing": std::env::var("LOCKSTEP_TRACE").ok(),
        "autotune_choices": lockstep::tensor::autotune::choices()
            .into_iter()
            .map(|(op, key, algo)| json!({"op": op, "key": key, "algo": algo}))
            .collect::<Vec<_>>(),
        "notes": notes,
    })
}

/// Runs the self-test of every deterministic kernel.
pub fn self_test() -> Vec<SelfTestResult> {
    doctor::run(&doctor::cases())
}

/// Prints the report (and the self-test); returns whether everything passed. A bad
/// `LOCKSTEP_ISA` is refused (an error on standard error, `false`).
pub fn run(self_test_too: bool, as_json: bool) -> bool {
    if let Err(e) = check_isa_env() {
        eprintln!("error: lockstep doctor: {e}");
        return false;
    }
    let env = report();
    let results = if self_test_too {
        Some(self_test())
    } else {
        None
    };
    let ok = results
        .as_ref()
        .is_none_or(|r| r.iter().all(|r| r.identical));
    if as_json {
        let tests = results.as_ref().map(|r| {
            r.iter()
                .map(|r| {
                    json!({
                        "op": r.op,
                        "threads": r.threads,
                        "identical": r.identical,
                        "error": r.error,
                        "output_hash": r.output_hash.map(|h| format!("{h:016x}")),
                    })
                })
                .collect::<Vec<_>>()
        });
        println!(
            "{}",
            json!({"environment": env, "self_test": tests, "ok": ok})
        );
        return ok;
    }
    println!(
        "lockstep {} on {} {}",
        env["lockstep"].as_str().unwrap_or("?"),
        env["os"].as_str().unwrap_or("?"),
        env["arch"].as_str().unwrap_or("?")
    );
    println!(
        "  CPU:                       {}",
        env["cpu_model"].as_str().unwrap_or("unknown")
    );
    println!("  CPU features:              {}", env["cpu_features"]);
    let isa = &env["isa"];
    println!(
        "  instruction-set path:      {} ({}; this CPU can run {}; LOCKSTEP_ISA or \
         isa::set_isa force one; same bits on every path)",
        isa["in_use"].as_str().unwrap_or("?"),
        isa["source"].as_str().unwrap_or("?"),
        isa["available"]
            .as_array()
            .map(|a| a
                .iter()
                .filter_map(|v| v.as_str())
                .collect::<Vec<_>>()
                .join(", "))
            .unwrap_or_default()
    );
    let pm = &env["platform_math"];
    let kernels = pm["deterministic_kernels"].as_array().map_or(0, Vec::len);
    if kernels == 0 {
        println!(
            "  platform math library:     no deterministic kernel uses it (portable \
             lockstep::tensor::math)"
        );
    } else {
        println!("  platform math library:     used by {kernels} deterministic kernel(s):");
        for p in pm["deterministic_kernels"].as_array().into_iter().flatten() {
            println!(
                "    {} ({})",
                p["what"].as_str().unwrap_or("?"),
                p["functions"].as_str().unwrap_or("?")
            );
        }
    }
    println!("  compat samplers calling it (as their reference library does):");
    for p in pm["compat_samplers"].as_array().into_iter().flatten() {
        println!(
            "    {} [{}]",
            p["what"].as_str().unwrap_or("?"),
            p["functions"].as_str().unwrap_or("?")
        );
    }
    println!(
        "  C library (and libm):      {}",
        env["libc"].as_str().unwrap_or("?")
    );
    println!(
        "  threads:                   {} (of {} available)",
        env["threads"], env["available_parallelism"]
    );
    match env["environment"].as_object() {
        Some(vars) if !vars.is_empty() => {
            println!("  environment:");
            for (k, v) in vars {
                println!("    {k}={}", v.as_str().unwrap_or_default());
            }
        }
        _ => {
            println!("  environment:               no OMP_/MKL_/RAYON_/CUBLAS_/LOCKSTEP_ variables")
        }
    }
    println!(
        "  deterministic algorithms:  {} (warn-only {})",
        env["deterministic_algorithms"], env["warn_only"]
    );
    println!(
        "  fill_uninitialized_memory: {}",
        env["fill_uninitialized_memory"]
    );
    let mem = &env["memory"];
    println!(
        "  memory (speed only):       keep freed memory {}, heap advised for huge pages {} (system THP mode: {}{})",
        mem["keep_freed_memory"],
        mem["huge_pages"],
        mem["transparent_hugepage"].as_str().unwrap_or("none"),
        match mem["thp_enabled_for_process"].as_bool() {
            Some(false) => "; off for this process",
            _ => "",
        }
    );
    println!(
        "  benchmark (autotune):      {} (conv deterministic {}), {} cached choice(s)",
        env["benchmark"],
        env["conv_deterministic"],
        env["autotune_choices"].as_array().map_or(0, Vec::len)
    );
    for c in env["autotune_choices"].as_array().into_iter().flatten() {
        println!("    {} [{}] -> {}", c["op"], c["key"], c["algo"]);
    }
    for n in env["notes"].as_array().into_iter().flatten() {
        println!("  note: {}", n.as_str().unwrap_or_default());
    }
    if let Some(results) = results {
        println!("self-test (same bits at every thread count, deterministic mode):");
        for r in &results {
            let status = match (&r.error, r.identical) {
                (Some(e), _) => format!("ERROR {e}"),
                (None, true) => "ok".to_string(),
                (None, false) => "DIFFERENT BITS".to_string(),
            };
            println!("  {:<40} threads {:?}: {status}", r.op, r.threads);
        }
        println!(
            "{} of {} ops identical",
            results.iter().filter(|r| r.identical).count(),
            results.len()
        );
    }
    ok
}

#[cfg(test)]
mod tests {
    #[test]
    fn report_names_what_can_break_reproducibility() {
        let r = super::report();
        for k in [
            "lockstep",
            "cpu_model",
            "cpu_features",
            "simd_in_use",
            "isa",
            "platform_math",
            "libc",
            "threads",
            "available_parallelism",
            "environment",
            "deterministic_algorithms",
            "benchmark",
            "autotune_choices",
        ] {
            assert!(r.get(k).is_some(), "no {k} in {r}");
        }
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert!(r["libc"].as_str().unwrap().starts_with("glibc 2."), "{r}");
        }
        assert!(r["environment"].is_object());
        assert_eq!(r["isa"]["in_use"], r["simd_in_use"]);
        assert!(
            r["isa"]["available"]
                .as_array()
                .unwrap()
                .contains(&"portable".into())
        );
        assert_eq!(
            r["platform_math"]["deterministic_kernels"],
            serde_json::json!([])
        );
    }
}
