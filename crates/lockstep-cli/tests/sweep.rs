//! `lockstep sweep` through the binary: each seed's run equals a separate `lockstep train
//! --seed S`, the summary equals a plain recomputation from the runs, the report is
//! reproducible, the plots are valid files, and a failing seed fails the sweep by name.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const EXE: &str = env!("CARGO_BIN_EXE_lockstep");
const TRAIN: [&str; 11] = [
    "--model",
    "mlp",
    "--epochs",
    "1",
    "--max-steps",
    "3",
    "--hidden",
    "8",
    "--test-size",
    "1600",
    "--dropout=0.1",
];

fn out_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("sweep-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn lockstep(args: &[&str]) -> Output {
    Command::new(EXE).args(args).output().expect("run lockstep")
}

fn sweep(out: &Path, jobs: &str, extra: &[&str]) -> Output {
    let mut args = vec!["sweep", "--seeds", "3", "--jobs", jobs, "--out"];
    let out = out.to_str().unwrap();
    args.push(out);
    args.extend(extra);
    args.push("--");
    args.push("train");
    args.extend(TRAIN);
    lockstep(&args)
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-300),
        "{what}: {a} vs {b}"
    );
}

/// An unbiased index below n from 64-bit draws (as documented for the sweep's bootstrap).
fn index(g: &mut lockstep_rng::Generator, n: u64) -> usize {
    let rem = (u64::MAX % n + 1) % n;
    loop {
        let x = g.next_u64();
        if rem == 0 || x < 0u64.wrapping_sub(rem) {
            return (x % n) as usize;
        }
    }
}

/// The statistics recomputed plainly from the values.
fn check_summary(xs: &[f64], s: &Value, what: &str) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let std = var.sqrt();
    close(s["mean"].as_f64().unwrap(), mean, what);
    close(s["std"].as_f64().unwrap(), std, what);
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(s["min"].as_f64().unwrap(), min, "{what} min");
    assert_eq!(s["max"].as_f64().unwrap(), max, "{what} max");
    // t_{0.975, 2} = 4.302652729749464 (two degrees of freedom: three seeds).
    assert_eq!(xs.len(), 3);
    let h = 4.302652729749464 * std / n.sqrt();
    let t95 = f64s(&s["t95"]);
    close(t95[0], mean - h, what);
    close(t95[1], mean + h, what);
    // Bootstrap: 10,000 resamples from Generator::with_seed(0), NumPy-style linear percentiles.
    let mut g = lockstep_rng::Generator::with_seed(0);
    let mut means: Vec<f64> = (0..10_000)
        .map(|_| (0..xs.len()).map(|_| xs[index(&mut g, 3)]).sum::<f64>() / n)
        .collect();
    means.sort_by(f64::total_cmp);
    let pct = |q: f64| {
        let h = q * 9_999.0;
        let lo = h.floor() as usize;
        means[lo] + (h - lo as f64) * (means[lo + 1] - means[lo])
    };
    let b = f64s(&s["bootstrap95"]);
    close(b[0], pct(0.025), what);
    close(b[1], pct(0.975), what);
    assert!(min <= b[0] && b[0] <= b[1] && b[1] <= max, "{what}: {b:?}");
}

/// Well-formed XML: every tag closed in order, one root element `svg`.
fn check_svg(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut stack: Vec<String> = Vec::new();
    let mut roots = 0;
    let mut rest = text.as_str();
    while let Some(start) = rest.find('<') {
        assert!(
            !stack.is_empty() || rest[..start].trim().is_empty(),
            "{}: text outside the root",
            path.display()
        );
        rest = &rest[start..];
        if let Some(r) = rest.strip_prefix("<?") {
            rest = &r[r.find("?>").expect("?> closes <?") + 2..];
            continue;
        }
        if let Some(r) = rest.strip_prefix("<!--") {
            rest = &r[r.find("-->").expect("--> closes <!--") + 3..];
            continue;
        }
        if rest.starts_with("<!") {
            rest = &rest[rest.find('>').unwrap() + 1..];
            continue;
        }
        // A tag: find its end outside quoted attribute values.
        let mut quote = None;
        let mut end = None;
        for (i, c) in rest.char_indices().skip(1) {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '<') => panic!("{}: '<' inside a tag", path.display()),
                (None, '>') => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let end = end.expect("unterminated tag");
        let tag = &rest[1..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack.pop().expect("closing tag without an open one");
            assert_eq!(open, name.trim(), "{}: mismatched tags", path.display());
        } else {
            let name: String = tag
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '/')
                .collect();
            assert!(!name.is_empty(), "empty tag name");
            if stack.is_empty() {
                roots += 1;
                assert_eq!(name, "svg", "the root element");
            }
            if !tag.ends_with('/') {
                stack.push(name);
            }
        }
    }
    assert!(stack.is_empty(), "{}: unclosed {stack:?}", path.display());
    assert!(rest.trim().is_empty());
    assert_eq!(roots, 1);
}

fn check_png(path: &Path) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "{}", path.display());
    assert_eq!(&b[12..16], b"IHDR");
    let w = u32::from_be_bytes(b[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(b[20..24].try_into().unwrap());
    assert_eq!((w, h), (960, 560));
    assert_eq!(&b[b.len() - 8..b.len() - 4], b"IEND");
}

#[test]
fn sweep_equals_separate_runs_and_recomputed_statistics() {
    let dir = out_dir("main");
    let stdout = ok(&sweep(&dir, "2", &[]));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["seeds"], serde_json::json!([0, 1, 2]));
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);

    // Each seed's run is exactly `lockstep train ARGS --seed S` (threads left at the default).
    for (s, run) in runs.iter().enumerate() {
        let seed = s.to_string();
        let mut args = vec!["train"];
        args.extend(TRAIN);
        args.extend(["--seed", &seed, "--json"]);
        let alone: Value = serde_json::from_str(ok(&lockstep(&args)).trim()).unwrap();
        assert_eq!(run, &alone, "seed {s}");
        assert!(stdout.contains(&run["final_sha256"].as_str().unwrap()[..16]));
    }

    // The summary, recomputed.
    let acc: Vec<Vec<f64>> = runs.iter().map(|r| f64s(&r["test_accuracy"])).collect();
    let finals: Vec<f64> = acc.iter().map(|a| *a.last().unwrap()).collect();
    let best: Vec<f64> = acc
        .iter()
        .map(|a| a.iter().copied().fold(f64::NEG_INFINITY, f64::max))
        .collect();
    let losses: Vec<f64> = runs
        .iter()
        .map(|r| *f64s(&r["step_losses"]).last().unwrap())
        .collect();
    let summary = &report["summary"];
    check_summary(&finals, &summary["final_test_accuracy"], "final accuracy");
    check_summary(&losses, &summary["final_loss"], "final loss");
    check_summary(&best, &summary["best_test_accuracy"], "best accuracy");

    // report.csv: one row per seed with the same numbers.
    let csv = std::fs::read_to_string(dir.join("report.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 4);
    assert!(lines[0].starts_with("seed,steps,final_loss,final_test_accuracy,best_test_accuracy"));
    for (s, line) in lines[1..].iter().enumerate() {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells[0], s.to_string());
        assert_eq!(cells[1], "3");
        assert_eq!(cells[2].parse::<f64>().unwrap(), losses[s]);
        assert_eq!(cells[3].parse::<f64>().unwrap(), finals[s]);
        assert_eq!(cells[4].parse::<f64>().unwrap(), best[s]);
        assert_eq!(cells[6], runs[s]["final_sha256"].as_str().unwrap());
    }

    // The plots.
    for name in ["loss_curves", "final_accuracy"] {
        check_png(&dir.join(format!("{name}.png")));
        check_svg(&dir.join(format!("{name}.svg")));
    }
    let texts = |name: &str| -> Vec<String> {
        let svg = std::fs::read_to_string(dir.join(name)).unwrap();
        svg.split("<text")
            .skip(1)
            .map(|t| {
                let body = &t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()];
                body.trim().replace("&#177;", "±")
            })
            .collect()
    };
    let loss = texts("loss_curves.svg");
    for label in ["step", "loss", "mean", "each seed"] {
        assert!(loss.iter().any(|t| t == label), "{label} in {loss:?}");
    }
    let acc = texts("final_accuracy.svg");
    for label in ["seed", "final test accuracy (%)", "0", "1", "2"] {
        assert!(acc.iter().any(|t| t == label), "{label} in {acc:?}");
    }

    // Reproducible: one job at a time (other thread counts) writes the same report.
    let dir1 = out_dir("jobs1");
    ok(&sweep(&dir1, "1", &[]));
    assert_eq!(
        std::fs::read(dir.join("report.json")).unwrap(),
        std::fs::read(dir1.join("report.json")).unwrap()
    );
    assert_eq!(
        std::fs::read(dir.join("report.csv")).unwrap(),
        std::fs::read(dir1.join("report.csv")).unwrap()
    );
}

#[test]
fn seed_list_and_failures() {
    // --seed-list runs exactly those seeds, in that order.
    let dir = out_dir("list");
    let mut args = vec![
        "sweep",
        "--seed-list",
        "5,2",
        "--out",
        dir.to_str().unwrap(),
    ];
    args.extend(["--", "train"]);
    args.extend(TRAIN);
    ok(&lockstep(&args));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["seeds"], serde_json::json!([5, 2]));
    assert_eq!(report["runs"][0]["seed"], 5);
    assert_eq!(report["runs"][1]["seed"], 2);

    // A run that fails fails the sweep, naming the seed and showing train's error.
    let dir = out_dir("fail");
    let o = lockstep(&[
        "sweep",
        "--seeds",
        "2",
        "--out",
        dir.to_str().unwrap(),
        "--",
        "train",
        "--model",
        "nope",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("seed 0") && err.contains("nope"), "{err}");
    assert!(!dir.join("report.json").exists());

    // ARGS may not set the seed; the command must be train.
    for bad in [
        &["sweep", "--seeds", "2", "--", "train", "--seed", "3"][..],
        &["sweep", "--seeds", "2", "--", "demo"][..],
        &["sweep", "--seeds", "0", "--", "train"][..],
        &["sweep", "--seeds", "2", "--jobs", "0", "--", "train"][..],
    ] {
        let o = lockstep(bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
    }
}
