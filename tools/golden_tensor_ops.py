#!/usr/bin/env python3
"""Golden values from real PyTorch for lockstep-tensor's reductions and indexing ops.

Writes tests/golden/tensor/ops.json, read by crates/lockstep-tensor/tests/reduce_index.rs.
Run from the repository root with the reference interpreter:

    /opt/pyref/bin/python tools/golden_tensor_ops.py

Every case holds its inputs (so the Rust side does not need PyTorch's RNG), the op and its
arguments, and PyTorch's output. Floats are written with repr (exact for f64, and f32 values
are exactly representable as f64); NaN and infinities as the strings "nan", "inf", "-inf".
Float reductions are compared within a few ulps (summation orders differ); index ops exactly.
"""

import json
import math
import os

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "tensor", "ops.json")
DT = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64"}


def enc(t):
    out = []
    for v in t.reshape(-1).tolist():
        if isinstance(v, float) and not math.isfinite(v):
            out.append("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
        else:
            out.append(v)
    return out


def tens(t):
    return {"dtype": DT[t.dtype], "shape": list(t.shape), "data": enc(t)}


cases = []


def case(op, inputs, args, outputs):
    cases.append(
        {
            "op": op,
            "inputs": {k: tens(v) for k, v in inputs.items()},
            "args": args,
            "outputs": [tens(o) for o in outputs],
        }
    )


def main():
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1234)
    for dt in (torch.float32, torch.float64):
        x = torch.randn(3, 5, generator=g, dtype=dt) * 3
        y = torch.randn(4, 7, 2, generator=g, dtype=dt)
        for t in (x, y):
            for dim in range(t.ndim):
                case("softmax", {"x": t}, {"dim": dim}, [torch.softmax(t, dim)])
                case("log_softmax", {"x": t}, {"dim": dim}, [torch.log_softmax(t, dim)])
                case("logsumexp", {"x": t}, {"dim": dim}, [torch.logsumexp(t, dim)])
                case("cumsum", {"x": t}, {"dim": dim}, [torch.cumsum(t, dim)])
                for c in (0, 1):
                    case("var_dim", {"x": t}, {"dim": dim, "correction": c}, [torch.var(t, dim, correction=c)])
                    case("std_dim", {"x": t}, {"dim": dim, "correction": c}, [torch.std(t, dim, correction=c)])
                case("mean_dim", {"x": t}, {"dim": dim}, [torch.mean(t, dim)])
            case("var", {"x": t}, {"correction": 1}, [torch.var(t, correction=1)])
            case("std", {"x": t}, {"correction": 0}, [torch.std(t, correction=0)])
        # Infinite and NaN lines.
        z = torch.tensor([[0.0, -math.inf, 1.0], [-math.inf, -math.inf, -math.inf], [1.0, math.nan, 2.0]], dtype=dt)
        case("logsumexp", {"x": z}, {"dim": 1}, [torch.logsumexp(z, 1)])
        case("softmax", {"x": z}, {"dim": 1}, [torch.softmax(z, 1)])
        # max/min with ties and NaN: exact.
        w = torch.tensor([[1.0, 3.0, 3.0, 2.0], [math.nan, 1.0, math.nan, 0.0], [-1.0, -1.0, -2.0, -2.0]], dtype=dt)
        for dim in (0, 1):
            v, i = torch.max(w, dim)
            case("max_dim", {"x": w}, {"dim": dim}, [v, i])
            v, i = torch.min(w, dim)
            case("min_dim", {"x": w}, {"dim": dim}, [v, i])
            case("argmax", {"x": w}, {"dim": dim}, [torch.argmax(w, dim)])

        # Index ops: exact.
        src = torch.randn(6, 4, generator=g, dtype=dt)
        idx = torch.tensor([4, 0, 4, 2, 1, 4])
        case("index_select", {"x": src, "index": idx}, {"dim": 0}, [torch.index_select(src, 0, idx)])
        idx1 = torch.tensor([3, 3, 0, 1, 3])
        case("index_select", {"x": src, "index": idx1}, {"dim": 1}, [torch.index_select(src, 1, idx1)])
        base = torch.randn(5, 4, generator=g, dtype=dt)
        case("index_add", {"x": base, "index": idx, "source": src}, {"dim": 0}, [base.index_add(0, idx, src)])
        b2 = torch.randn(6, 3, generator=g, dtype=dt)
        i2 = torch.tensor([2, 2, 0, 2])
        case("index_add", {"x": b2, "index": i2, "source": src}, {"dim": 1}, [b2.index_add(1, i2, src)])
        gi = torch.randint(0, 4, (6, 3), generator=g)
        case("gather", {"x": src, "index": gi}, {"dim": 1}, [torch.gather(src, 1, gi)])
        gi0 = torch.randint(0, 6, (2, 4), generator=g)
        case("gather", {"x": src, "index": gi0}, {"dim": 0}, [torch.gather(src, 0, gi0)])
        si = torch.randint(0, 3, (6, 4), generator=g)
        sb = torch.randn(3, 4, generator=g, dtype=dt)
        case("scatter_add", {"x": sb, "index": si, "src": src}, {"dim": 0}, [sb.scatter_add(0, si, src)])
        si1 = torch.randint(0, 2, (4, 3), generator=g)
        sb1 = torch.randn(6, 2, generator=g, dtype=dt)
        case("scatter_add", {"x": sb1, "index": si1, "src": src}, {"dim": 1}, [sb1.scatter_add(1, si1, src)])
        pi = torch.tensor([1, -1, 1, 0, 1, 2])
        case("index_put", {"x": base, "index": pi, "values": src}, {"accumulate": True},
             [base.index_put((pi,), src, accumulate=True)])
        pu = torch.tensor([3, 0, 2])
        case("index_put", {"x": base, "index": pu, "values": src[:3]}, {"accumulate": False},
             [base.index_put((pu,), src[:3], accumulate=False)])
        weight = torch.randn(7, 3, generator=g, dtype=dt)
        ei = torch.tensor([[1, 6, 1], [0, 2, 1]])
        case("embedding", {"x": weight, "index": ei}, {}, [torch.nn.functional.embedding(ei, weight)])
        gr = torch.randn(2, 3, 3, generator=g, dtype=dt)
        wt = weight.clone().requires_grad_(True)
        torch.nn.functional.embedding(ei, wt).backward(gr)
        case("embedding_backward", {"grad": gr, "index": ei}, {"num_weights": 7}, [wt.grad])
        bi = torch.tensor([1, 6, 1, 0, 2, 1, 5])
        off = torch.tensor([0, 3, 3, 5])
        for mode in ("sum", "mean", "max"):
            case("embedding_bag", {"x": weight, "index": bi, "offsets": off}, {"mode": mode},
                 [torch.nn.functional.embedding_bag(bi, weight, off, mode=mode)])
        hx = torch.randn(50, generator=g, dtype=dt)
        case("histc", {"x": hx}, {"bins": 7, "min": -1.5, "max": 2.0}, [torch.histc(hx, 7, -1.5, 2.0)])
        case("histc", {"x": hx}, {"bins": 5, "min": 0.0, "max": 0.0}, [torch.histc(hx, 5, 0, 0)])
        bw = torch.randn(7, generator=g, dtype=dt)
        case("bincount", {"x": bi, "weights": bw}, {"minlength": 9}, [torch.bincount(bi, bw, 9)])
    bi = torch.tensor([1, 6, 1, 0, 2, 1, 5])
    case("bincount", {"x": bi}, {"minlength": 0}, [torch.bincount(bi)])
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
