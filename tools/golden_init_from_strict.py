#!/usr/bin/env python3
"""What PyTorch's load_state_dict(strict=True) does with ill-fitting files, for
`lockstep train --init-from` (issue 30).

For each case, builds a model of ../shared/spec/train/torch_train.py (its build_model, hidden 16,
after torch.manual_seed(5)), writes a safetensors file derived from its state_dict (a misspelt
key, extra keys, a missing key, another hidden width, float64 values), then loads
`safetensors.torch.load_file(path)` into a fresh model with `model.load_state_dict(sd)`
(strict=True, the default) and records either the RuntimeError's message or, when it loads,
the init_sha256 (sha256 over the loaded model.parameters(), as torch_train.py computes it).

Files: tests/golden/train/init_from/strict/{case}.safetensors and strict/expected.json.
crates/lockstep-cli/tests/init_from_strict.rs loads each file with --init-from and compares.
Run from the repository root (torch and safetensors installed; CPU only):

    python3 tools/golden_init_from_strict.py [PATH/TO/torch_train.py]

Deterministic: the same files on every run.
"""
import importlib.util
import json
import os
import sys

os.environ["CUDA_VISIBLE_DEVICES"] = ""

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "train", "init_from", "strict")
DEFAULT_SCRIPT = os.path.join(ROOT, "..", "shared", "spec", "train", "torch_train.py")
SEED, HIDDEN, DROPOUT = 5, 16, 0.1


def load_program(path):
    spec = importlib.util.spec_from_file_location("torch_train", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def state(tt, kind, hidden=HIDDEN):
    torch.manual_seed(SEED)
    return dict(tt.build_model(kind, hidden, DROPOUT).state_dict())


def f64_off_grid(sd):
    """Float tensors as float64 values that float32 cannot hold: x (1 + 3 * 2^-25), about 0.75
    to 1.5 of x's float32 spacing away, so the cast rounds to other float32 values than x
    (the init_sha256 differs from the float32 file's); integer buffers unchanged."""
    return {
        k: (v.double() * (1 + 3 * 2.0**-25)) if v.is_floating_point() else v
        for k, v in sd.items()
    }


def cases(tt):
    out = {}
    sd = state(tt, "mlp")
    sd["0.weigth"] = sd.pop("0.weight")
    out["mlp_misspelt"] = ("mlp", sd)
    sd = state(tt, "mlp")
    sd["extra.bias"] = torch.zeros(3)
    sd["3.scale"] = torch.ones(1)
    sd["1.weight"] = torch.ones(2)  # module 1 is a ReLU: no tensors of its own
    sd["0.weight.x"] = torch.ones(1)
    out["mlp_extra"] = ("mlp", sd)
    sd = state(tt, "mlp")
    del sd["3.bias"]
    out["mlp_missing"] = ("mlp", sd)
    out["mlp_hidden8"] = ("mlp", state(tt, "mlp", hidden=8))
    sd = state(tt, "cnn")
    del sd["2.running_var"]
    sd["1.weight"] = torch.zeros(16, 1, 2, 2)
    sd["9.foo"] = torch.zeros(1)
    out["cnn_mixed"] = ("cnn", sd)
    sd = state(tt, "lstm")
    sd["lstm.weight_ih_l2"] = sd["lstm.weight_ih_l1"].clone()
    sd["head.weigth"] = sd.pop("head.weight")
    out["lstm_misspelt"] = ("lstm", sd)
    out["mlp_f64"] = ("mlp", f64_off_grid(state(tt, "mlp")))
    out["cnn_f64"] = ("cnn", f64_off_grid(state(tt, "cnn")))
    out["lstm_f64"] = ("lstm", f64_off_grid(state(tt, "lstm")))
    return out


def main():
    script = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_SCRIPT
    tt = load_program(script)
    os.makedirs(OUT, exist_ok=True)
    results = {}
    for name, (kind, sd) in cases(tt).items():
        path = os.path.join(OUT, f"{name}.safetensors")
        save_file({k: v.contiguous() for k, v in sd.items()}, path)
        torch.manual_seed(0)
        model = tt.build_model(kind, HIDDEN, DROPOUT)
        try:
            model.load_state_dict(load_file(path))
            results[name] = {"model": kind, "init_sha256": tt.sha256_of(model.parameters())}
        except RuntimeError as e:
            results[name] = {"model": kind, "error": str(e)}
        print(name, results[name])
    out = {
        "generator": "tools/golden_init_from_strict.py",
        "library": f"torch {torch.__version__}",
        "torch_manual_seed": SEED,
        "hidden": HIDDEN,
        "cases": results,
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
