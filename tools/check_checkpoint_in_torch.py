#!/usr/bin/env python3
"""A lockstep checkpoint evaluated in PyTorch (issue 11, interop).

Loads a checkpoint written by `lockstep train --checkpoint-dir` into the model of the normative
program ../shared/spec/train/torch_train.py (its build_model, imported with importlib) with
`model.load_state_dict(load_file(path), strict=False)` -- after checking that no key of the
model is missing and that every unexpected key is one of the checkpoint's own entries
(`optimizer.*`, `rng.*`, `loader.state`) -- recomputes the test split exactly as torch_train.py
does (random_split with torch.Generator().manual_seed(seed)), evaluates the test accuracy in
PyTorch and prints it next to the accuracy lockstep reported. It also checks that:

  * sha256 over the loaded model's state_dict values (torch_train.py's final_sha256) equals
    lockstep's final_sha256 when the checkpoint is the run's last state;
  * `rng.torch` is accepted by torch.set_rng_state and `rng.numpy` (624 little-endian u32
    words, u64 position, has-gauss byte, f64 cached gaussian) by np.random.set_state.

One checkpoint (PATH is a .safetensors file; the flags are torch_train.py's, only --model,
--seed, --hidden, --dropout, --test-size and --data matter):

    python3 tools/check_checkpoint_in_torch.py PATH --model cnn [--lockstep-accuracy A]

Everything (runs lockstep for the three models x sgd / adam, a checkpoint at the end of epoch 1
(step 45) and one mid-epoch 2 (step 70), each the last step of its run):

    cargo build --release -p lockstep-cli
    python3 tools/check_checkpoint_in_torch.py --all [--lockstep target/release/lockstep]

Exit status 1 if an accuracy or hash differs. CPU only; needs torch, numpy, safetensors.
"""
import argparse
import importlib.util
import json
import os
import struct
import subprocess
import sys
import tempfile

os.environ["CUDA_VISIBLE_DEVICES"] = ""

import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from torch.utils.data import random_split  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "crates", "lockstep-data", "data", "digits.csv.gz")
DEFAULT_SCRIPT = os.path.join(ROOT, "..", "shared", "spec", "train", "torch_train.py")
OWN_PREFIXES = ("optimizer.", "rng.", "loader.")


def load_program(path):
    spec = importlib.util.spec_from_file_location("torch_train", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def numpy_state(b):
    """lockstep's rng.numpy bytes -> np.random.set_state's tuple."""
    b = bytes(b)
    assert len(b) == 624 * 4 + 8 + 1 + 8, f"rng.numpy: {len(b)} bytes"
    key = np.frombuffer(b[:2496], dtype="<u4").astype(np.uint32)
    (pos,) = struct.unpack("<Q", b[2496:2504])
    has_gauss = b[2504]
    (gauss,) = struct.unpack("<d", b[2505:2513])
    return ("MT19937", key, int(pos), int(has_gauss), float(gauss))


def check(tt, path, model_kind, seed, hidden, dropout, test_size, data):
    """Returns a dict: PyTorch's test accuracy and the loaded state_dict's sha256, plus the
    checkpoint's step and epoch."""
    state = load_file(path)
    with safe_open(path, "pt") as f:
        meta = json.loads(f.metadata()["lockstep.meta"])
    model = tt.build_model(model_kind, hidden, dropout)
    result = model.load_state_dict(state, strict=False)
    if result.missing_keys:
        raise SystemExit(f"{path}: the model's keys {result.missing_keys} are missing")
    foreign = [k for k in result.unexpected_keys if not k.startswith(OWN_PREFIXES)]
    if foreign:
        raise SystemExit(f"{path}: unexpected keys {foreign}")

    # The generator states are in the formats PyTorch and NumPy accept.
    torch_state = torch.get_rng_state()
    torch.set_rng_state(state["rng.torch"])
    torch.set_rng_state(torch_state)
    np_state = np.random.get_state()
    np.random.set_state(numpy_state(state["rng.numpy"].numpy()))
    np.random.set_state(np_state)

    # torch_train.py's split and evaluation.
    x, y = tt.load_csv(data)
    n = len(y)
    _, test_idx = random_split(
        range(n), [n - test_size, test_size], generator=torch.Generator().manual_seed(seed))
    test_idx = list(test_idx)
    x_test, y_test = x[test_idx], y[test_idx]
    model.eval()
    with torch.no_grad():
        pred = model(x_test).argmax(1)
    acc = (pred == y_test).double().mean().item()
    return {
        "accuracy": acc,
        "state_sha256": tt.sha256_of(model.state_dict().values()),
        "step": meta["step"],
        "epoch": meta["epoch"],
    }


def run_all(tt, lockstep, data):
    # Default flags otherwise: 1437 training samples, 45 steps per epoch, hidden 64, dropout 0.1.
    cases = []
    for kind in ("mlp", "cnn", "lstm"):
        for opt in (["--optimizer", "sgd"], ["--optimizer", "adam", "--lr", "0.01"]):
            for steps in (45, 70):  # the end of epoch 1; mid-epoch 2
                cases.append((kind, opt, steps))
    ok = True
    print(f"{'model':5} {'optimizer':18} {'steps':>5} {'epoch':>5}  {'lockstep acc':>12}  "
          f"{'pytorch acc':>11}  final_sha256 = loaded state_dict")
    with tempfile.TemporaryDirectory() as tmp:
        for kind, opt, steps in cases:
            d = os.path.join(tmp, f"{kind}-{opt[1]}-{steps}")
            cmd = [lockstep, "train", "--model", kind, *opt, "--epochs", "2",
                   "--max-steps", str(steps), "--checkpoint-dir", d,
                   "--checkpoint-every", str(steps), "--json"]
            rep = json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                            text=True).stdout)
            path = os.path.join(d, f"ckpt-{steps:08}.safetensors")
            r = check(tt, path, kind, 0, 64, 0.1, 360, data)
            la = rep["test_accuracy"][-1]
            same_sha = r["state_sha256"] == rep["final_sha256"]
            ok &= la == r["accuracy"] and same_sha
            print(f"{kind:5} {' '.join(opt[1:]):18} {steps:5} {r['epoch']:5}  {la:12.10f}  "
                  f"{r['accuracy']:11.10f}  {'equal' if same_sha else 'DIFFERENT'}")
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("checkpoint", nargs="?")
    p.add_argument("--all", action="store_true")
    p.add_argument("--lockstep", default=os.path.join(ROOT, "target", "release", "lockstep"))
    p.add_argument("--torch-train", default=DEFAULT_SCRIPT)
    p.add_argument("--lockstep-accuracy", type=float)
    p.add_argument("--model", default="mlp")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--test-size", type=int, default=360)
    p.add_argument("--data", default=DATA)
    a, _ = p.parse_known_args()  # the other torch_train.py flags do not matter here
    tt = load_program(a.torch_train)
    print(f"torch {torch.__version__}, numpy {np.__version__}")
    if a.all:
        sys.exit(0 if run_all(tt, a.lockstep, a.data) else 1)
    if not a.checkpoint:
        p.error("a checkpoint file, or --all")
    r = check(tt, a.checkpoint, a.model, a.seed, a.hidden, a.dropout, a.test_size, a.data)
    print(f"{a.checkpoint}: step {r['step']}, epoch {r['epoch']}")
    print(f"  pytorch test accuracy  {r['accuracy']!r}")
    if a.lockstep_accuracy is not None:
        print(f"  lockstep test accuracy {a.lockstep_accuracy!r}")
    print(f"  sha256 of the loaded state_dict {r['state_sha256']}")
    if a.lockstep_accuracy is not None and a.lockstep_accuracy != r["accuracy"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
