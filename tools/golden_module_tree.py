#!/usr/bin/env python3
"""Golden names from real PyTorch for nested modules (tests/golden/train/module_tree.json).

Run from the repository root with torch installed (CPU only; the script hides CUDA itself):

    python3 tools/golden_module_tree.py

Each case builds a module tree after torch.manual_seed(0) and records what nn.Module derives
from the registrations: state_dict() names (tied weights under each name), named_parameters()
and named_buffers() names (each tensor once, first name), named_modules() names (root left
out), the number of parameters(), and sha256 over parameters() (float32 bytes, in order, as
torch_train.py's init_sha256), which pins the construction draws too. Cases:

  gpt         a small GPT-2 shaped model: wte/wpe embeddings, h = ModuleList of blocks
              (ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj, dropout), ln_f, and
              lm_head whose weight is tied to wte.weight.
  order       a module that registers a child, then a parameter, a buffer, a parameter:
              state_dict puts its own parameters first, then its buffers, then the child's.
  containers  Sequential inside Sequential with BatchNorm1d, a ModuleList of four Linear, a
              ModuleDict whose first key is given again (the new module keeps the key's place).

Takes about a second.
"""
import hashlib
import json
import os
import platform
import sys

os.environ["CUDA_VISIBLE_DEVICES"] = ""
import torch  # noqa: E402
from torch import nn  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "train", "module_tree.json")

D, VOCAB, CTX = 8, 11, 5


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(D, 3 * D)
        self.c_proj = nn.Linear(D, D)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(D, 4 * D)
        self.c_proj = nn.Linear(4 * D, D)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(D)
        self.attn = Attn()
        self.ln_2 = nn.LayerNorm(D)
        self.mlp = Mlp()
        self.drop = nn.Dropout(0.1)


class Gpt(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, D)
        self.wpe = nn.Embedding(CTX, D)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList([Block() for _ in range(2)])
        self.ln_f = nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight


class Order(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.BatchNorm1d(2)
        self.scale = nn.Parameter(torch.ones(2))
        self.register_buffer("count", torch.zeros(1))
        self.shift = nn.Parameter(torch.zeros(2))


class Containers(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(
            nn.Linear(3, 4),
            nn.Sequential(nn.BatchNorm1d(4), nn.ReLU(), nn.Dropout(0.5)),
            nn.Linear(4, 2),
        )
        self.layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(4)])
        self.heads = nn.ModuleDict({"b": nn.Linear(2, 1), "a": nn.Linear(2, 1)})
        self.heads["b"] = nn.Linear(2, 3)


def sha256_of(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def case(name, ctor):
    torch.manual_seed(0)
    m = ctor()
    return {
        "name": name,
        "state_dict": list(m.state_dict().keys()),
        "named_parameters": [k for k, _ in m.named_parameters()],
        "named_buffers": [k for k, _ in m.named_buffers()],
        "named_modules": [k for k, _ in m.named_modules()][1:],
        "num_parameters": len(list(m.parameters())),
        "parameters_sha256": sha256_of(m.parameters()),
    }


def main():
    torch.set_num_threads(1)
    out = {
        "generator": "tools/golden_module_tree.py",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cases": [case("gpt", Gpt), case("order", Order), case("containers", Containers)],
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
