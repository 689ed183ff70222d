#!/usr/bin/env python3
"""PyTorch CPU timings for the cases of crates/lockstep-tensor/benches/reduce_index.rs.

    python3 bench/tensor_ops.py [--reps 7] [--threads 1 2] [--filter NAME]

Times each case at each thread count (torch.set_num_threads) and prints the best of --reps
runs in ms, in the same table layout as `LOCKSTEP_QUICK=1 cargo bench -p lockstep-tensor
--bench reduce_index`, so the two can be put side by side (the machine may be shared: take the
best of several runs on both sides).
"""

import argparse
import time

import torch


def cases():
    g = torch.Generator().manual_seed(0)
    n = 64 << 20
    x = torch.rand(n, generator=g) - 0.5
    yield "sum 64Mi f32", lambda: x.sum()
    del x
    rows, d = 1 << 20, 64
    src = torch.rand(rows, d, generator=g) - 0.5
    for dest in (100, 10_000, 1_000_000):
        idx = torch.randint(0, dest, (rows,), generator=g)
        base = torch.zeros(dest, d)
        yield f"index_add 1Mx64 -> {dest}", lambda b=base, i=idx: b.index_add(0, i, src)
        full = idx[:, None].expand(rows, d).contiguous()
        yield f"scatter_add 1Mx64 -> {dest}", lambda b=base, i=full: b.scatter_add(0, i, src)
        del full
    del src
    tok, dim, vocab = 32 << 10, 512, 50_000
    grad = torch.rand(tok, dim, generator=g) - 0.5
    ids = torch.randint(0, vocab, (tok,), generator=g)
    yield "embedding_backward 32k x 512 -> 50k", lambda: torch.ops.aten.embedding_dense_backward(
        grad, ids, vocab, -1, False
    )
    nb = 16 << 20
    for bins in (1000, 1_000_000):
        vals = torch.randint(0, bins, (nb,), generator=g)
        w = torch.rand(nb, generator=g) - 0.5
        yield f"bincount 16Mi weights -> {bins}", lambda v=vals, w=w, b=bins: torch.bincount(v, w, b)
    sm = torch.rand(4096, 4096, generator=g) - 0.5
    yield "softmax 4096x4096", lambda: torch.softmax(sm, -1)


def best_of(reps, f):
    f()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--filter", default="")
    a = ap.parse_args()
    print(f"torch {torch.__version__}")
    print(f"{'case':<38} {'thr':>3} {'torch ms':>10}")
    for name, f in cases():
        if a.filter not in name:
            continue
        for t in a.threads:
            torch.set_num_threads(t)
            ms = best_of(a.reps, f) * 1e3
            print(f"{name:<38} {t:>3} {ms:>10.2f}", flush=True)


if __name__ == "__main__":
    main()
