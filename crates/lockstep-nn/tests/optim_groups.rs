//! Optimizers over several parameter groups, each with its own hyperparameters, and schedulers
//! over such groups: bit for bit against real PyTorch (`tests/golden/train/optim_groups.json`,
//! from `tools/golden_optim_groups.py`), plus the group API's checks.

mod common;

use common::{assert_bits, load, tensor, tensors};
use lockstep_nn::Var;
use lockstep_nn::optim::{
    Adam, AdamOptions, AdamW, AdamWOptions, CosineAnnealingLR, Group, LambdaLR, LinearLR,
    LrScheduler, Optimizer, SequentialLR, Sgd, SgdOptions, StepLR,
};
use lockstep_tensor::{DType, Tensor};
use serde_json::Value;

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).map(|x| x.as_f64().unwrap())
}

fn flag(v: &Value, key: &str) -> Option<bool> {
    v.get(key).map(|x| x.as_bool().unwrap())
}

fn betas(v: &Value) -> Option<(f64, f64)> {
    v.get("betas")
        .map(|b| (b[0].as_f64().unwrap(), b[1].as_f64().unwrap()))
}

/// `defaults` overridden by one group's keys, as PyTorch fills a group's missing keys.
fn merged(defaults: &Value, group: &Value) -> Value {
    let mut m = defaults.as_object().unwrap().clone();
    for (k, v) in group.as_object().unwrap() {
        if k != "params" {
            m.insert(k.clone(), v.clone());
        }
    }
    Value::Object(m)
}

fn sgd_options(o: &Value) -> SgdOptions {
    let d = SgdOptions::default();
    SgdOptions {
        lr: num(o, "lr").unwrap_or(d.lr),
        momentum: num(o, "momentum").unwrap_or(d.momentum),
        dampening: num(o, "dampening").unwrap_or(d.dampening),
        weight_decay: num(o, "weight_decay").unwrap_or(d.weight_decay),
        nesterov: flag(o, "nesterov").unwrap_or(d.nesterov),
        maximize: false,
    }
}

fn adam_options(o: &Value) -> AdamOptions {
    let d = AdamOptions::default();
    AdamOptions {
        lr: num(o, "lr").unwrap_or(d.lr),
        betas: betas(o).unwrap_or(d.betas),
        eps: num(o, "eps").unwrap_or(d.eps),
        weight_decay: num(o, "weight_decay").unwrap_or(d.weight_decay),
        amsgrad: flag(o, "amsgrad").unwrap_or(d.amsgrad),
        ..d
    }
}

fn adamw_options(o: &Value) -> AdamWOptions {
    let d = AdamWOptions::default();
    AdamWOptions {
        lr: num(o, "lr").unwrap_or(d.lr),
        betas: betas(o).unwrap_or(d.betas),
        eps: num(o, "eps").unwrap_or(d.eps),
        weight_decay: num(o, "weight_decay").unwrap_or(d.weight_decay),
        amsgrad: flag(o, "amsgrad").unwrap_or(d.amsgrad),
        maximize: false,
    }
}

/// The case's optimizer over `params`, its groups given to the constructor or (`how` =
/// `add_param_group`) the first to it and the others added after.
fn build(case: &Value, params: &[Var]) -> Box<dyn Optimizer> {
    let defaults = &case["defaults"];
    let groups = case["groups"].as_array().unwrap();
    let vars = |g: &Value| -> Vec<Var> {
        g["params"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| params[i.as_u64().unwrap() as usize].clone())
            .collect()
    };
    let split = if case["how"] == "add_param_group" {
        1
    } else {
        groups.len()
    };
    macro_rules! make {
        ($ty:ident, $opts:ident) => {{
            let gs: Vec<_> = groups
                .iter()
                .map(|g| Group::new(vars(g), $opts(&merged(defaults, g))))
                .collect();
            let mut rest = gs;
            let later = rest.split_off(split);
            let mut opt = $ty::with_groups(rest).unwrap();
            for g in later {
                opt.add_param_group(g).unwrap();
            }
            Box::new(opt)
        }};
    }
    match case["optimizer"].as_str().unwrap() {
        "SGD" => make!(Sgd, sgd_options),
        "Adam" => make!(Adam, adam_options),
        "AdamW" => make!(AdamW, adamw_options),
        o => panic!("optimizer {o}"),
    }
}

/// The recorded scheduler expressions, built on `opt`.
fn scheduler(expr: &str, opt: &mut dyn Optimizer) -> Box<dyn LrScheduler> {
    match expr {
        "S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.1, total_iters=3), \
         S.CosineAnnealingLR(opt, T_max=6)], milestones=[3])" => {
            let a = LinearLR::new(opt, 0.1, 1.0, 3).unwrap();
            let b = CosineAnnealingLR::new(opt, 6, 0.0).unwrap();
            Box::new(SequentialLR::new(opt, vec![Box::new(a), Box::new(b)], &[3]).unwrap())
        }
        "S.LambdaLR(opt, lambda e: min(1.0, (e + 1) / 4))" => {
            Box::new(LambdaLR::new(opt, |e| (1.0f64).min((e + 1) as f64 / 4.0)).unwrap())
        }
        "S.StepLR(opt, step_size=3, gamma=0.5)" => Box::new(StepLR::new(opt, 3, 0.5).unwrap()),
        e => panic!("scheduler {e}"),
    }
}

fn lr_bits(opt: &dyn Optimizer) -> Vec<u64> {
    opt.param_groups().iter().map(|g| g.lr.to_bits()).collect()
}

#[test]
fn groups_match_pytorch_bit_for_bit() {
    let g = load("optim_groups.json");
    let init = tensors(&g["init"]);
    let grads: Vec<Vec<Tensor>> = g["grads"].as_array().unwrap().iter().map(tensors).collect();
    let cases = g["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 8);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let params: Vec<Var> = init.iter().map(|t| Var::new(t.clone(), true)).collect();
        let mut opt = build(case, &params);
        let mut sched = case["scheduler"]
            .as_str()
            .map(|e| scheduler(e, opt.as_mut()));
        let want_lrs: Vec<Vec<u64>> = case["lrs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                s.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap().to_bits())
                    .collect()
            })
            .collect();
        assert_eq!(
            lr_bits(opt.as_ref()),
            want_lrs[0],
            "{name}: lrs at construction"
        );
        for (s, step_grads) in grads.iter().enumerate() {
            for (p, gr) in params.iter().zip(step_grads) {
                p.set_grad(Some(gr.clone())).unwrap();
            }
            opt.step().unwrap();
            if let Some(sc) = sched.as_mut() {
                sc.step(opt.as_mut());
                let last: Vec<u64> = sc.get_last_lrs().iter().map(|x| x.to_bits()).collect();
                assert_eq!(last, want_lrs[s + 1], "{name}: get_last_lrs at step {s}");
            }
            assert_eq!(
                lr_bits(opt.as_ref()),
                want_lrs[s + 1],
                "{name}: lrs at step {s}"
            );
            for (j, p) in params.iter().enumerate() {
                let want = tensor(&case["params_after_step"][s][j]);
                assert_bits(
                    &format!("{name}: param {j} after step {s}"),
                    &p.data(),
                    &want,
                );
            }
        }
        // The state under PyTorch's names, parameters numbered over the groups in order.
        let got = opt.state();
        let mut n = 0;
        for (i, st) in case["final_state"].as_object().unwrap() {
            for (key, t) in st.as_object().unwrap() {
                let full = format!("state.{i}.{key}");
                let (_, mine) = got
                    .iter()
                    .find(|(k, _)| *k == full)
                    .unwrap_or_else(|| panic!("{name}: no {full}"));
                let want = tensor(t);
                if key == "step" {
                    assert_eq!(mine.to_f64_vec(), want.to_f64_vec(), "{name}: {full}");
                } else {
                    assert_bits(&format!("{name}: {full}"), mine, &want);
                }
                n += 1;
            }
        }
        assert_eq!(got.len(), n, "{name}: the same state entries as PyTorch");
    }
}

/// One optimizer with two groups steps exactly as two optimizers of one group each (what
/// code written before groups did), and its state numbers the parameters over both groups.
#[test]
fn two_groups_equal_two_optimizers() {
    let vals = |n: usize, s: f32| -> Tensor {
        Tensor::from_vec((0..n).map(|i| (i as f32 * 0.37 + s).sin()).collect(), &[n]).unwrap()
    };
    let mk = || -> Vec<Var> {
        (0..3)
            .map(|i| Var::new(vals(5 + i, i as f32), true))
            .collect()
    };
    let (a, b) = (mk(), mk());
    let opts = AdamWOptions {
        lr: 0.01,
        ..Default::default()
    };
    let no_decay = AdamWOptions {
        weight_decay: 0.0,
        lr: 0.02,
        ..opts
    };
    let mut grouped = AdamW::with_groups(vec![
        Group::new(vec![a[0].clone(), a[2].clone()], opts),
        Group::new(vec![a[1].clone()], no_decay),
    ])
    .unwrap();
    let mut first = AdamW::new(vec![b[0].clone(), b[2].clone()], opts).unwrap();
    let mut second = AdamW::new(vec![b[1].clone()], no_decay).unwrap();
    for step in 0..4 {
        for (x, y) in a.iter().zip(&b) {
            let g = vals(x.numel(), 10.0 + step as f32);
            x.set_grad(Some(g.clone())).unwrap();
            y.set_grad(Some(g)).unwrap();
        }
        grouped.step().unwrap();
        first.step().unwrap();
        second.step().unwrap();
    }
    for (x, y) in a.iter().zip(&b) {
        assert_bits("grouped vs separate", &x.data(), &y.data());
    }
    let names: Vec<String> = grouped.state().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names.len(), 9);
    assert_eq!(
        &names[6..],
        ["state.2.step", "state.2.exp_avg", "state.2.exp_avg_sq"]
    );
    assert_bits(
        "state.2 is the second group's parameter",
        &grouped.state()[7].1,
        &second.state()[1].1,
    );
    assert_eq!(grouped.params().len(), 3);
    assert_eq!(grouped.param_groups()[1].first_index(), 2);
    assert!(grouped.param_groups()[1].params()[0].same(&a[1]));
    // A saved state loads back into an optimizer with the same groups.
    let saved = grouped.state();
    let mut again = AdamW::with_groups(vec![
        Group::new(vec![a[0].clone(), a[2].clone()], opts),
        Group::new(vec![a[1].clone()], no_decay),
    ])
    .unwrap();
    again.load_state(&saved).unwrap();
    assert_eq!(again.state().len(), saved.len());
}

#[test]
fn group_errors_name_their_argument() {
    let p = || Var::new(Tensor::zeros(&[3], DType::F32).unwrap(), true);
    let shared = p();
    let opts = SgdOptions::default();
    let e = Sgd::with_groups(vec![
        Group::new(vec![shared.clone()], opts),
        Group::new(vec![p(), shared.clone()], opts),
    ])
    .unwrap_err()
    .to_string();
    assert!(e.contains("more than one parameter group"), "{e}");
    let e = Sgd::with_groups(vec![]).unwrap_err().to_string();
    assert!(e.contains("params"), "{e}");
    // A bad option in a later group names the option; the optimizer is left unchanged.
    let mut opt = Sgd::new(vec![shared.clone()], opts).unwrap();
    let e = opt
        .add_param_group(Group::new(
            vec![p()],
            SgdOptions {
                momentum: -1.0,
                ..opts
            },
        ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("momentum"), "{e}");
    let e = opt
        .add_param_group(Group::new(vec![shared], opts))
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than one parameter group"), "{e}");
    assert_eq!(opt.param_groups().len(), 1);
    assert_eq!(opt.params().len(), 1);
    // set_lr and a scheduler over one group behave as before.
    opt.set_lr(0.5);
    assert_eq!(opt.lr(), 0.5);
    assert_eq!(opt.options().lr, 0.5);
    assert!(opt.group_options(1).is_none());
}

#[test]
fn sequential_lr_checks_its_arguments() {
    let p = Var::new(Tensor::zeros(&[1], DType::F32).unwrap(), true);
    let mut opt = Sgd::new(vec![p], SgdOptions::default()).unwrap();
    let e = SequentialLR::new(&mut opt, vec![], &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("schedulers") && e.contains("at least one"),
        "{e}"
    );
    let a = StepLR::new(&mut opt, 2, 0.5).unwrap();
    let b = StepLR::new(&mut opt, 3, 0.5).unwrap();
    let e = SequentialLR::new(
        &mut opt,
        vec![Box::new(a.clone()), Box::new(b.clone())],
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("milestones") && e.contains("one more"), "{e}");
    let c = StepLR::new(&mut opt, 3, 0.5).unwrap();
    let e = SequentialLR::new(
        &mut opt,
        vec![Box::new(a), Box::new(b), Box::new(c)],
        &[5, 2],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("milestones"), "{e}");
}
