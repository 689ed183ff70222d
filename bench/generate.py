#!/usr/bin/env python3
"""Generation speed: `lockstep generate` with and without its key/value cache against PyTorch's
recompute loop (nanoGPT's `generate`: crop the context to block_size, run the whole window,
take the last logits, top-k, softmax, multinomial), on the same gpt checkpoint, batch 1 and 8.

Usage (from the repository root, after `cargo build --release -p lockstep-cli`):

    python3 bench/generate.py [--tokens 200] [--threads 1] [--steps 200]

It trains the spec's default gpt (4 layers, 4 heads, width 128, block 64) for --steps steps
into a temporary checkpoint with `lockstep train --model gpt`, then times each generator on it
(best of --repeat runs) and prints a Markdown table of tokens per second (all rows). PyTorch
builds `spec/train/torch_gpt.py`'s `Gpt` and loads the checkpoint's weights with
`safetensors.torch.load_file`.
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "lockstep")
SPEC = os.path.join(ROOT, "..", "shared", "spec", "train", "torch_gpt.py")


def lockstep(args, threads):
    out = subprocess.run([os.environ.get("LOCKSTEP_BIN", BIN)] + args + ["--threads", str(threads)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def torch_model(ckpt, cfg, vocab):
    spec = importlib.util.spec_from_file_location("torch_gpt", SPEC)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a = argparse.Namespace(n_layer=cfg["n_layer"], n_head=cfg["n_head"], n_embd=cfg["n_embd"],
                           block_size=cfg["block_size"], bias=cfg["bias"], dropout=0.0)
    m = mod.Gpt(a, len(vocab))
    state = load_file(ckpt)
    m.load_state_dict({k: v for k, v in state.items() if k in m.state_dict()}, strict=True)
    return m.eval()


@torch.no_grad()
def torch_generate(model, idx, tokens, block, temperature=0.8, top_k=20):
    for _ in range(tokens):
        ctx = idx if idx.size(1) <= block else idx[:, -block:]
        logits, _ = model(ctx)
        logits = logits[:, -1, :] / temperature
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits[logits < v[:, [-1]]] = -float("inf")
        nxt = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)
        idx = torch.cat((idx, nxt), dim=1)
    return idx


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=200)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    d = tempfile.mkdtemp(prefix="lockstep-bench-generate-")
    lockstep(["train", "--model", "gpt", "--max-iters", str(a.steps), "--sample-tokens", "0",
              "--eval-interval", "0", "--checkpoint-dir", d, "--checkpoint-every", str(a.steps),
              "--json"], a.threads)
    ckpt = os.path.join(d, f"ckpt-{a.steps:08d}.safetensors")
    from safetensors import safe_open
    with safe_open(ckpt, "pt") as f:
        meta = json.loads(f.metadata()["lockstep.meta"])
    cfg, vocab = meta["config"], meta["vocab"]
    model = torch_model(ckpt, cfg, vocab)
    prompt = [vocab.index("\n")]
    rows = []
    for batch in (1, 8):
        res = {}
        for cache in ("true", "false"):
            best = min(
                lockstep(["generate", "--checkpoint", ckpt, "--tokens", str(a.tokens),
                          "--batch", str(batch), "--kv-cache", cache, "--json"],
                         a.threads)["seconds"]
                for _ in range(a.repeat))
            res[cache] = batch * a.tokens / best
        times = []
        for _ in range(a.repeat):
            torch.manual_seed(1337)
            idx = torch.tensor([prompt] * batch, dtype=torch.long)
            t0 = time.perf_counter()
            torch_generate(model, idx, a.tokens, cfg["block_size"])
            times.append(time.perf_counter() - t0)
        res["torch"] = batch * a.tokens / min(times)
        rows.append((batch, res))
    print(f"gpt {cfg['n_layer']}x{cfg['n_embd']}, block {cfg['block_size']}, {a.tokens} tokens, "
          f"{a.threads} thread(s), torch {torch.__version__}; tokens/s over all rows (best of "
          f"{a.repeat})\n")
    print("| batch | lockstep, KV cache | lockstep, recompute | PyTorch recompute loop | "
          "cache vs PyTorch |")
    print("|---|---|---|---|---|")
    for batch, r in rows:
        print(f"| {batch} | {r['true']:.0f} | {r['false']:.0f} | {r['torch']:.0f} | "
              f"{r['true'] / r['torch']:.2f}x |")


if __name__ == "__main__":
    sys.exit(main())
