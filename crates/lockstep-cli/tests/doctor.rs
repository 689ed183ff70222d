//! `lockstep doctor` reports the allocator policy (speed only: values never depend on it) and
//! its two opt-outs.

use serde_json::Value;
use std::process::Command;

fn memory(env: &[(&str, &str)]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .env_remove("LOCKSTEP_KEEP_FREED_MEMORY")
        .env_remove("LOCKSTEP_HUGE_PAGES")
        .envs(env.iter().copied())
        .args(["doctor", "--json"])
        .output()
        .expect("run lockstep");
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    v["environment"]["memory"].clone()
}

#[test]
fn doctor_reports_the_memory_policy_and_its_opt_outs() {
    let glibc_linux = cfg!(all(target_os = "linux", target_env = "gnu"));
    let m = memory(&[]);
    assert_eq!(m["keep_freed_memory"], true, "{m}");
    assert_eq!(m["huge_pages"], glibc_linux, "{m}");
    let m = memory(&[("LOCKSTEP_HUGE_PAGES", "0")]);
    assert_eq!(
        (&m["keep_freed_memory"], &m["huge_pages"]),
        (&true.into(), &false.into()),
        "{m}"
    );
    let m = memory(&[("LOCKSTEP_KEEP_FREED_MEMORY", "off")]);
    assert_eq!(
        (&m["keep_freed_memory"], &m["huge_pages"]),
        (&false.into(), &false.into()),
        "{m}"
    );
}
