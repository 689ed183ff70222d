#!/usr/bin/env python3
"""Golden values from real PyTorch for lockstep's attention and transformer layers
(tests/golden/train/attention.json).

Run from the repository root with torch installed (CPU only; the script hides CUDA itself):

    python3 tools/golden_attention.py

Sections:

  sdpa      F.scaled_dot_product_attention on inputs drawn from a seeded torch.Generator
            (recorded): no mask, Bool and float masks (broadcast), a fully masked row, causal
            with L != S, custom and negative scale, 3-D inputs, and dropout (after
            torch.manual_seed(seed); the default generator's state afterwards is recorded as the
            sha256 of torch.get_rng_state()). Loss (out * W).sum() with W recorded; gradients of
            q, k, v.
  init      nn.MultiheadAttention / TransformerEncoderLayer / TransformerDecoderLayer / RMSNorm
            after torch.manual_seed(s): state_dict names and every float32 value, and the
            generator state afterwards.
  modules   float64 forward and backward: the module is made after manual_seed(seed) and
            converted with .double() (so the test makes it the same way and converts), inputs
            drawn from a seeded generator (recorded); outputs, attention weights, gradients of
            the inputs and of every parameter (by name), and the generator state after the
            forward pass (dropout draws).

Tensors are stored as {"shape": [...], "dtype": "...", "values": [flat, row-major]}; Bool masks
as dtype "bool" with 0/1 values; -inf as the string "-inf".
"""
import hashlib
import json
import math
import os
import platform
import sys

os.environ["CUDA_VISIBLE_DEVICES"] = ""
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "train", "attention.json")
F64 = torch.float64


def num(x):
    if isinstance(x, bool):
        return int(x)
    if math.isinf(x):
        return "-inf" if x < 0 else "inf"
    return x


def T(t):
    t = t.detach().contiguous()
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
            "values": [num(x) for x in t.reshape(-1).tolist()]}


def rng_sha():
    return hashlib.sha256(torch.get_rng_state().numpy().tobytes()).hexdigest()


def gen(seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def randn(g, shape, dtype=F64):
    return torch.randn(shape, generator=g, dtype=F64).to(dtype)


# ------------------------------------------------------------------------------------------
# SDPA

def sdpa_case(name, seed, qs, ks, vs, dtype=F64, mask=None, dropout_p=0.0, is_causal=False,
              scale=None, dropout_seed=None):
    g = gen(seed)
    q, k, v = randn(g, qs, dtype), randn(g, ks, dtype), randn(g, vs, dtype)
    for t in (q, k, v):
        t.requires_grad_(True)
    if dropout_seed is not None:
        torch.manual_seed(dropout_seed)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p,
                                         is_causal=is_causal, scale=scale)
    sha = rng_sha() if dropout_seed is not None else None
    w = randn(g, tuple(out.shape), dtype)
    (out * w).sum().backward()
    case = {"name": name, "q": T(q), "k": T(k), "v": T(v), "dropout_p": dropout_p,
            "is_causal": is_causal, "scale": scale, "w": T(w), "out": T(out),
            "grad_q": T(q.grad), "grad_k": T(k.grad), "grad_v": T(v.grad)}
    if mask is not None:
        case["mask"] = T(mask)
    if dropout_seed is not None:
        case["dropout_seed"] = dropout_seed
        case["rng_sha256_after"] = sha
    return case


def sdpa_cases():
    cases = []
    cases.append(sdpa_case("plain", 1, (2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 6)))
    cases.append(sdpa_case("plain_f32", 2, (2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8),
                           dtype=torch.float32))
    bm = torch.tensor([[1, 0, 1, 1, 0], [1, 1, 1, 1, 1], [0, 0, 1, 0, 0], [1, 1, 0, 0, 1]],
                      dtype=torch.bool)
    cases.append(sdpa_case("bool_mask", 3, (2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8), mask=bm))
    g = gen(40)
    fm = randn(g, (2, 1, 4, 5))
    fm[0, 0, 1, 2] = float("-inf")
    cases.append(sdpa_case("float_mask_broadcast", 4, (2, 3, 4, 8), (2, 3, 5, 8),
                           (2, 3, 5, 8), mask=fm))
    dead = bm.clone()
    dead[2] = False
    cases.append(sdpa_case("fully_masked_row", 5, (2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8),
                           mask=dead))
    cases.append(sdpa_case("causal_l_ne_s", 6, (2, 2, 4, 8), (2, 2, 6, 8), (2, 2, 6, 8),
                           is_causal=True))
    cases.append(sdpa_case("scale", 7, (2, 2, 4, 8), (2, 2, 5, 8), (2, 2, 5, 8), scale=0.3))
    cases.append(sdpa_case("negative_scale", 8, (2, 2, 4, 8), (2, 2, 5, 8), (2, 2, 5, 8),
                           scale=-0.5))
    cases.append(sdpa_case("three_d", 9, (3, 4, 8), (3, 6, 8), (3, 6, 5)))
    cases.append(sdpa_case("dropout", 10, (2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8),
                           dropout_p=0.3, dropout_seed=11))
    cases.append(sdpa_case("dropout_causal_f32", 12, (2, 2, 6, 8), (2, 2, 6, 8), (2, 2, 6, 8),
                           dtype=torch.float32, dropout_p=0.25, is_causal=True,
                           dropout_seed=13))
    cases.append(sdpa_case("dropout_bool_mask", 14, (2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8),
                           mask=bm, dropout_p=0.5, dropout_seed=15))
    return cases


# ------------------------------------------------------------------------------------------
# Module construction: the strings are parsed by the Rust test.

def make(ctor):
    return eval(ctor, {"nn": nn, "torch": torch})


INIT_CTORS = [
    "nn.MultiheadAttention(8, 2)",
    "nn.MultiheadAttention(6, 3, bias=False)",
    "nn.MultiheadAttention(4, 1, dropout=0.1, batch_first=True)",
    "nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)",
    "nn.TransformerEncoderLayer(8, 4, dim_feedforward=12, bias=False, norm_first=True)",
    "nn.TransformerDecoderLayer(8, 2, dim_feedforward=16)",
    "nn.TransformerDecoderLayer(6, 3, dim_feedforward=10, activation='gelu', bias=False)",
    "nn.RMSNorm([3, 4])",
    "nn.RMSNorm(5, eps=1e-3, elementwise_affine=False)",
]


def init_cases():
    out = []
    for ctor in INIT_CTORS:
        for seed in (0, 5):
            torch.manual_seed(seed)
            m = make(ctor)
            out.append({"ctor": ctor, "seed": seed,
                        "state_dict": [[k, T(v)] for k, v in m.state_dict().items()],
                        "named_parameters": [k for k, _ in m.named_parameters()],
                        "rng_sha256_after": rng_sha()})
    return out


def bool_t(rows):
    return torch.tensor(rows, dtype=torch.bool)


def causal_float(n):
    return nn.Transformer.generate_square_subsequent_mask(n, dtype=F64)


def module_case(name, ctor, seed, inputs, kwargs=None, train=True, self_attn=False,
                fwd_seed=None):
    """inputs: list of (name, shape); kwargs: extra forward arguments (masks)."""
    kwargs = kwargs or {}
    torch.manual_seed(seed)
    m = make(ctor).double()
    m.train(train)
    g = gen(1000 + seed)
    xs = [randn(g, shape).requires_grad_(True) for _, shape in inputs]
    if self_attn:
        args = [xs[0], xs[0], xs[0]]
    else:
        args = list(xs)
    if fwd_seed is not None:
        torch.manual_seed(fwd_seed)
    res = m(*args, **kwargs)
    sha = rng_sha()
    if isinstance(res, tuple):
        out, wts = res
    else:
        out, wts = res, None
    w = randn(g, tuple(out.shape))
    loss = (out * w).sum()
    case = {"name": name, "ctor": ctor, "seed": seed, "train": train, "self_attn": self_attn,
            "fwd_seed": fwd_seed, "inputs": [[n, T(x)] for (n, _), x in zip(inputs, xs)],
            "kwargs": {k: (T(v) if isinstance(v, torch.Tensor) else v)
                       for k, v in kwargs.items()},
            "w": T(w), "out": T(out), "rng_sha256_after": sha}
    if wts is not None:
        w2 = randn(g, tuple(wts.shape))
        loss = loss + (wts * w2).sum()
        case["w_weights"] = T(w2)
        case["weights"] = T(wts)
    loss.backward()
    case["grad_inputs"] = [T(x.grad) for x in xs]
    case["grad_params"] = [[k, T(p.grad)] for k, p in m.named_parameters()]
    return case


def module_cases():
    c = []
    kpm = bool_t([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0]])
    am = bool_t([[0, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 0, 1], [1, 0, 0, 0, 0],
                 [0, 0, 0, 1, 0]])
    mha = "nn.MultiheadAttention(8, 2)"
    c.append(module_case("mha_self_weights", mha, 1, [("x", (5, 2, 8))], self_attn=True))
    c.append(module_case("mha_self_no_weights", mha, 2, [("x", (5, 2, 8))], self_attn=True,
                         kwargs={"need_weights": False}))
    c.append(module_case("mha_masks_weights", mha, 3, [("x", (5, 2, 8))], self_attn=True,
                         kwargs={"key_padding_mask": kpm, "attn_mask": am,
                                 "average_attn_weights": False}))
    c.append(module_case("mha_masks_sdpa", mha, 4, [("x", (5, 2, 8))], self_attn=True,
                         kwargs={"key_padding_mask": kpm, "attn_mask": am,
                                 "need_weights": False}))
    g = gen(77)
    am3 = randn(g, (4, 5, 5))
    c.append(module_case("mha_float_mask_3d", mha, 5, [("x", (5, 2, 8))], self_attn=True,
                         kwargs={"attn_mask": am3}))
    c.append(module_case("mha_causal_hint", mha, 6, [("x", (5, 2, 8))], self_attn=True,
                         kwargs={"attn_mask": causal_float(5), "is_causal": True,
                                 "need_weights": False}))
    c.append(module_case("mha_cross", mha, 7, [("q", (4, 2, 8)), ("k", (6, 2, 8)),
                                               ("v", (6, 2, 8))]))
    c.append(module_case("mha_batch_first_bias_false",
                         "nn.MultiheadAttention(6, 3, bias=False, batch_first=True)", 8,
                         [("x", (2, 4, 6))], self_attn=True))
    c.append(module_case("mha_unbatched", mha, 9, [("x", (5, 8))], self_attn=True))
    drop = "nn.MultiheadAttention(8, 2, dropout=0.3)"
    c.append(module_case("mha_dropout_weights", drop, 10, [("x", (5, 2, 8))], self_attn=True,
                         fwd_seed=100))
    c.append(module_case("mha_dropout_sdpa", drop, 11, [("x", (5, 2, 8))], self_attn=True,
                         kwargs={"need_weights": False}, fwd_seed=101))
    c.append(module_case("mha_eval_dropout", drop, 12, [("x", (5, 2, 8))], self_attn=True,
                         train=False))

    enc = "nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)"
    c.append(module_case("enc_post", enc, 20, [("src", (5, 2, 8))]))
    c.append(module_case("enc_pre_gelu",
                         "nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, "
                         "activation='gelu', norm_first=True)", 21, [("src", (5, 2, 8))]))
    c.append(module_case("enc_masks", enc, 22, [("src", (5, 2, 8))],
                         kwargs={"src_mask": am, "src_key_padding_mask": kpm}))
    c.append(module_case("enc_dropout_batch_first",
                         "nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.2, "
                         "batch_first=True)", 23, [("src", (2, 5, 8))], fwd_seed=200))
    c.append(module_case("enc_dropout_pre_bias_false",
                         "nn.TransformerEncoderLayer(8, 4, dim_feedforward=12, dropout=0.1, "
                         "bias=False, norm_first=True)", 24, [("src", (5, 2, 8))],
                         fwd_seed=201))

    dec = "nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0)"
    c.append(module_case("dec_post", dec, 30, [("tgt", (4, 2, 8)), ("memory", (5, 2, 8))]))
    c.append(module_case("dec_pre_masks",
                         "nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, "
                         "norm_first=True, activation='gelu')", 31,
                         [("tgt", (4, 2, 8)), ("memory", (5, 2, 8))],
                         kwargs={"tgt_mask": causal_float(4), "tgt_is_causal": True,
                                 "memory_key_padding_mask": kpm}))
    c.append(module_case("dec_dropout",
                         "nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.2, "
                         "batch_first=True)", 32, [("tgt", (2, 4, 8)), ("memory", (2, 5, 8))],
                         fwd_seed=300))

    c.append(module_case("rms_default", "nn.RMSNorm([3, 4])", 40, [("x", (2, 3, 4))]))
    c.append(module_case("rms_eps_no_affine", "nn.RMSNorm(4, eps=1e-3, "
                         "elementwise_affine=False)", 41, [("x", (3, 4))]))
    return c


def rms_f32_case():
    # eps=None is finfo(float32).eps for a float32 input: visible on tiny inputs.
    g = gen(50)
    x = (randn(g, (2, 6)) * 1e-4).float().requires_grad_(True)
    m = nn.RMSNorm(6)
    y = m(x)
    w = randn(g, (2, 6)).float()
    (y * w).sum().backward()
    return {"x": T(x), "w": T(w), "out": T(y), "grad_x": T(x.grad),
            "grad_weight": T(m.weight.grad)}


def main():
    torch.set_num_threads(1)
    doc = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "sdpa": sdpa_cases(),
        "init": init_cases(),
        "modules": module_cases(),
        "rms_f32": rms_f32_case(),
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
