#!/usr/bin/env python3
"""Initial weights saved from PyTorch, for `lockstep train --init-from` (issue 11).

For each model of the normative program ../shared/spec/train/torch_train.py (its build_model,
imported with importlib), builds it with hidden width 16 after torch.manual_seed(5), saves
`safetensors.torch.save_file(model.state_dict(), path)` to
tests/golden/train/init_from/{model}.safetensors and records in
tests/golden/train/init_from/expected.json the init_sha256 as torch_train.py computes it
(sha256 over the little-endian bytes of model.parameters(), in order).

crates/lockstep-cli/tests/interop.rs loads each file with --init-from and must report the same
init_sha256. Run from the repository root (torch, numpy and safetensors installed; CPU only):

    python3 tools/golden_init_from.py [PATH/TO/torch_train.py]

Seed 5 differs from the test's --seed 0, so a run that ignored --init-from would not match.
Deterministic: the same files on every run.
"""
import hashlib
import importlib.util
import json
import os
import sys

os.environ["CUDA_VISIBLE_DEVICES"] = ""

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "train", "init_from")
DEFAULT_SCRIPT = os.path.join(ROOT, "..", "shared", "spec", "train", "torch_train.py")
MODELS = ["mlp", "cnn", "lstm"]
SEED, HIDDEN, DROPOUT = 5, 16, 0.1


def load_program(path):
    spec = importlib.util.spec_from_file_location("torch_train", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    script = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_SCRIPT
    tt = load_program(script)
    os.makedirs(OUT, exist_ok=True)
    models = {}
    for kind in MODELS:
        torch.manual_seed(SEED)
        model = tt.build_model(kind, HIDDEN, DROPOUT)
        path = os.path.join(OUT, f"{kind}.safetensors")
        save_file(model.state_dict(), path)
        with open(path, "rb") as f:
            file_sha = hashlib.sha256(f.read()).hexdigest()
        models[kind] = {
            "file": f"{kind}.safetensors",
            "file_sha256": file_sha,
            "init_sha256": tt.sha256_of(model.parameters()),
            "state_dict_names": list(model.state_dict().keys()),
        }
        print(kind, models[kind]["init_sha256"])
    out = {
        "generator": "tools/golden_init_from.py",
        "library": f"torch {torch.__version__}",
        "torch_manual_seed": SEED,
        "hidden": HIDDEN,
        "dropout": DROPOUT,
        "models": models,
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
