#!/usr/bin/env python3
"""Golden values from real PyTorch for lockstep's nn layer (tests/golden/train/modules.json).

Run from the repository root with torch installed (CPU only; the script hides CUDA itself):

    python3 tools/golden_modules.py [PATH/TO/torch_train.py]

PATH (default ../shared/spec/train/torch_train.py) is imported for its build_model. Sections:

  init      default initialisation: after torch.manual_seed(s), s in (0, 5), each constructor in
            INIT_CTORS is evaluated (float32). Stored: the constructor string, state_dict names,
            shapes, dtypes and every value (exact: float32 -> Python float), named_parameters
            names, sha256 over parameters() as torch_train.py computes init_sha256, and the
            default generator afterwards: sha256 of torch.get_rng_state() bytes plus its
            decoded position (`u32_draws`: 32-bit outputs of mt19937 consumed since seeding,
            and the Box-Muller caches).
  dropout   nn.Dropout(p)(torch.ones(shape)) in train mode after manual_seed(s).
  forward   float64 forward and backward of recurrent layers, norms, conv, pools, activations,
            embedding, flatten and losses, on inputs drawn from a seeded torch.Generator
            (recorded). Parameters are overwritten with float64 draws (recorded) so the test
            exercises full double precision. Recurrent loss: (output*W).sum() + (h_n*V).sum()
            (+ (c_n*U).sum() for LSTM); other layers: (y*W).sum(); reduction='none' losses are
            backpropagated with a recorded grad_output. One float32 LSTM case is included because
            float32 LSTMs on CPU run through oneDNN (aten::mkldnn_rnn_layer), float64 ones do not.

Tensors are stored as {"shape": [...], "dtype": "...", "values": [flat, row-major]}.
Takes about 10 seconds.
"""
import hashlib
import importlib.util
import json
import os
import platform
import struct
import sys

os.environ["CUDA_VISIBLE_DEVICES"] = ""
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "train", "modules.json")
DEFAULT_SCRIPT = os.path.join(ROOT, "..", "shared", "spec", "train", "torch_train.py")
F64 = torch.float64


def T(t):
    t = t.detach()
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
            "values": t.contiguous().reshape(-1).tolist()}


def sha256_of(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


# ----------------------------------------------------------------------------------------------
# Default generator position

def _twisted_keys(seed, upto):
    """mt19937 key after 0, 1, 2, ... twists from init_genrand(seed) (NumPy's legacy seeding is
    the same init_genrand as torch.manual_seed for 32-bit seeds)."""
    bg = np.random.MT19937()
    bg._legacy_seeding(seed)
    keys = [bg.state["state"]["key"].astype(np.uint64).copy()]
    for _ in range(upto):
        bg.random_raw(624)
        keys.append(bg.state["state"]["key"].astype(np.uint64).copy())
    return keys


_KEYS = {}


def rng_position(seed):
    """Decode torch.get_rng_state(): layout (little-endian) u64 the_initial_seed, i32 left,
    i32 seeded, u64 next, u64 state[624], f64 normal_x, normal_y, normal_rho, i32
    normal_is_valid, f32 next_float_normal_sample, bool is_next_float_normal_sample_valid."""
    raw = torch.get_rng_state().numpy().tobytes()
    initial_seed, left, seeded = struct.unpack_from("<Qii", raw, 0)
    nxt, = struct.unpack_from("<Q", raw, 16)
    key = np.frombuffer(raw, dtype="<u8", count=624, offset=24)
    tail = 24 + 624 * 8
    normal_x, normal_y, normal_rho, normal_valid = struct.unpack_from("<dddi", raw, tail)
    f_sample, = struct.unpack_from("<f", raw, tail + 28)
    f_valid = raw[tail + 32]
    keys = _KEYS.setdefault(seed, _twisted_keys(seed, 400))
    twists = next(k for k, ref in enumerate(keys) if np.array_equal(ref, key))
    draws = 0 if twists == 0 else (twists - 1) * 624 + nxt
    return {
        "sha256": hashlib.sha256(raw).hexdigest(),
        "u32_draws": draws,
        "double_normal_cached": bool(normal_valid),
        "double_normal_cache": [normal_x, normal_y, normal_rho] if normal_valid else None,
        "float_normal_cached": bool(f_valid),
        "float_normal_cache": f_sample if f_valid else None,
        "initial_seed": initial_seed,
    }


# ----------------------------------------------------------------------------------------------
# a. default initialisation

INIT_CTORS = [
    "nn.Linear(5, 3)",
    "nn.Linear(4, 2, bias=False)",
    "nn.Conv2d(2, 3, 3, padding=1)",
    "nn.Conv2d(1, 16, 3, padding=1)",
    "nn.BatchNorm1d(4)",
    "nn.BatchNorm2d(3)",
    "nn.LayerNorm(6)",
    "nn.LayerNorm([2, 3])",
    "nn.Embedding(7, 3)",
    "nn.Embedding(5, 2, padding_idx=1)",
    "nn.RNN(3, 4)",
    "nn.RNN(3, 4, num_layers=2, nonlinearity='relu', bidirectional=True)",
    "nn.GRU(3, 4, num_layers=2, batch_first=True)",
    "nn.LSTM(3, 4)",
    "nn.LSTM(8, 5, num_layers=2, batch_first=True, dropout=0.3, bidirectional=True)",
    "build_model('mlp', 64, 0.1)",
    "build_model('cnn', 64, 0.1)",
    "build_model('lstm', 64, 0.1)",
]


def init_section(build_model):
    out = []
    for ctor in INIT_CTORS:
        for seed in (0, 5):
            torch.manual_seed(seed)
            m = eval(ctor, {"nn": nn, "build_model": build_model})
            sd = m.state_dict()
            out.append({
                "ctor": ctor,
                "seed": seed,
                "state_dict": [{"name": k, "sha256": sha256_of([v]), **T(v)}
                               for k, v in sd.items()],
                "named_parameters": [k for k, _ in m.named_parameters()],
                "parameters_sha256": sha256_of(m.parameters()),
                "rng_after": rng_position(seed),
            })
    return out


# ----------------------------------------------------------------------------------------------
# b. dropout masks

def dropout_section():
    out = []
    for seed in (0, 5):
        for p in (0.1, 0.5):
            # (3, 300): longer than one block of the sampler (256 values), with a partial tail.
            for shape in ((3, 5), (2, 3, 17), (3, 300)):
                torch.manual_seed(seed)
                d = nn.Dropout(p)
                d.train()
                y = d(torch.ones(shape))
                out.append({"seed": seed, "p": p, "shape": list(shape), "output": T(y),
                            "rng_after": rng_position(seed)})
    # Two Dropout calls in a row share the generator: the second mask continues the stream.
    torch.manual_seed(3)
    d = nn.Dropout(0.3)
    a, b = d(torch.ones(4, 6)), d(torch.ones(5))
    out.append({"seed": 3, "p": 0.3, "shapes": [[4, 6], [5]], "outputs": [T(a), T(b)],
                "rng_after": rng_position(3)})
    return out


# ----------------------------------------------------------------------------------------------
# c. forward / backward in float64

class Draw:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def randn(self, *shape, scale=1.0, dtype=F64):
        return torch.randn(shape, generator=self.g, dtype=F64).mul_(scale).to(dtype)

    def randint(self, high, *shape):
        return torch.randint(0, high, shape, generator=self.g)


def set_params(m, d, dtype=F64, scale=0.5):
    m.to(dtype)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(d.randn(*p.shape, scale=scale, dtype=dtype))


RNN_CASES = [
    # ctor, batch_first, has h0
    ("nn.RNN(3, 5)", False, False),
    ("nn.RNN(3, 5, nonlinearity='relu', batch_first=True)", True, False),
    ("nn.RNN(3, 5, num_layers=2, nonlinearity='relu', bidirectional=True, batch_first=True)", True, False),
    ("nn.RNN(3, 5, num_layers=2)", False, True),
    ("nn.GRU(3, 5)", False, False),
    ("nn.GRU(3, 5, batch_first=True)", True, True),
    ("nn.GRU(3, 5, num_layers=2, batch_first=True, bidirectional=True)", True, False),
    ("nn.LSTM(3, 5)", False, False),
    ("nn.LSTM(3, 5, batch_first=True)", True, True),
    ("nn.LSTM(3, 5, num_layers=2, batch_first=True)", True, False),
    ("nn.LSTM(3, 5, num_layers=2, bidirectional=True)", False, False),
    ("nn.LSTM(3, 5, num_layers=2, batch_first=True, bidirectional=True)", True, True),
    ("nn.LSTM(3, 5, bias=False)", False, False),
]
BATCH, SEQ, FEAT, HID = 3, 4, 3, 5


def rnn_case(k, ctor, batch_first, has_h0, dtype=F64):
    d = Draw(1000 + k)
    m = eval(ctor, {"nn": nn})
    set_params(m, d, dtype)
    m.train()
    is_lstm = isinstance(m, nn.LSTM)
    dirs = 2 if m.bidirectional else 1
    shape = (BATCH, SEQ, FEAT) if batch_first else (SEQ, BATCH, FEAT)
    x = d.randn(*shape, dtype=dtype).requires_grad_(True)
    hshape = (m.num_layers * dirs, BATCH, HID)
    h0 = c0 = None
    if has_h0:
        h0 = d.randn(*hshape, dtype=dtype).requires_grad_(True)
        if is_lstm:
            c0 = d.randn(*hshape, dtype=dtype).requires_grad_(True)
    if is_lstm:
        out, (hn, cn) = m(x, (h0, c0)) if has_h0 else m(x)
    else:
        out, hn = m(x, h0) if has_h0 else m(x)
        cn = None
    W = d.randn(*out.shape, dtype=dtype)
    V = d.randn(*hn.shape, dtype=dtype)
    loss = (out * W).sum() + (hn * V).sum()
    U = None
    if is_lstm:
        U = d.randn(*cn.shape, dtype=dtype)
        loss = loss + (cn * U).sum()
    loss.backward()
    case = {
        "ctor": ctor, "dtype": str(dtype).replace("torch.", ""), "batch_first": batch_first,
        "parameters": [{"name": n, **T(p)} for n, p in m.named_parameters()],
        "input": T(x), "h0": T(h0) if h0 is not None else None,
        "c0": T(c0) if c0 is not None else None,
        "W": T(W), "V": T(V), "U": T(U) if U is not None else None,
        "output": T(out), "h_n": T(hn), "c_n": T(cn) if cn is not None else None,
        "loss": loss.item(),
        "grad_input": T(x.grad),
        "grad_h0": T(h0.grad) if h0 is not None else None,
        "grad_c0": T(c0.grad) if c0 is not None else None,
        "grad_parameters": [{"name": n, **T(p.grad)} for n, p in m.named_parameters()],
    }
    return case


def module_case(k, ctor, x_shape, dtype=F64, x=None, random_params=True, calls=1):
    """y = m(x); loss = (y*W).sum(); backward. For norms, `calls` forward calls in train mode
    (the grads are those of the first call; running stats are recorded after every call)."""
    d = Draw(2000 + k)
    m = eval(ctor, {"nn": nn})
    m.to(dtype)
    if random_params:
        set_params(m, d, dtype)
    m.train()
    if x is None:
        x = d.randn(*x_shape, dtype=dtype)
    x = x.detach().clone().requires_grad_(x.is_floating_point())
    params = [{"name": n, **T(p)} for n, p in m.named_parameters()]
    y = m(x)
    W = d.randn(*y.shape, dtype=y.dtype)
    loss = (y * W).sum()
    loss.backward()
    case = {
        "ctor": ctor, "dtype": str(dtype).replace("torch.", ""), "parameters": params,
        "input": T(x), "W": T(W), "output": T(y), "loss": loss.item(),
        "grad_input": T(x.grad) if x.requires_grad else None,
        "grad_parameters": [{"name": n, **T(p.grad)} for n, p in m.named_parameters()],
    }
    if calls > 1 or list(m.buffers()):
        buffers = [[{"name": n, **T(b)} for n, b in m.named_buffers()]]
        more = []
        for _ in range(calls - 1):
            x2 = d.randn(*x_shape, dtype=dtype)
            with torch.no_grad():
                y2 = m(x2)
            more.append({"input": T(x2), "output": T(y2)})
            buffers.append([{"name": n, **T(b)} for n, b in m.named_buffers()])
        case["more_calls"] = more
        case["buffers_after_each_call"] = buffers
        m.eval()
        with torch.no_grad():
            case["eval_output_on_input"] = T(m(x))
    return case


def module_section():
    cases = []
    specs = [
        ("nn.Linear(3, 5)", (2, 4, 3)),
        ("nn.Linear(3, 5, bias=False)", (3, 3)),
        ("nn.BatchNorm2d(3)", (2, 3, 3, 4)),
        ("nn.BatchNorm2d(3, momentum=None)", (2, 3, 3, 4)),
        ("nn.BatchNorm1d(4)", (3, 4)),
        ("nn.BatchNorm1d(4)", (3, 4, 5)),
        ("nn.LayerNorm(5)", (3, 4, 5)),
        ("nn.LayerNorm([2, 3])", (3, 2, 3)),
        ("nn.Conv2d(2, 3, 3, stride=2, padding=1)", (2, 2, 5, 5)),
        ("nn.Conv2d(2, 3, 3, padding=1, bias=False)", (1, 2, 4, 3)),
        ("nn.MaxPool2d(2)", (2, 3, 5, 4)),
        ("nn.AvgPool2d(2)", (2, 3, 5, 4)),
        ("nn.AdaptiveAvgPool2d(1)", (2, 3, 5, 4)),
        ("nn.AdaptiveAvgPool2d((2, 3))", (1, 2, 5, 5)),
        ("nn.ReLU()", (3, 7)),
        ("nn.GELU()", (3, 7)),
        ("nn.GELU(approximate='tanh')", (3, 7)),
        ("nn.Tanh()", (3, 7)),
        ("nn.Sigmoid()", (3, 7)),
        ("nn.Flatten()", (2, 3, 2, 2)),
        ("nn.Unflatten(1, (2, 3))", (2, 6)),
        ("nn.Unflatten(1, (1, 8, 8))", (2, 64)),
    ]
    for k, (ctor, shape) in enumerate(specs):
        calls = 2 if "BatchNorm" in ctor else 1
        cases.append(module_case(k, ctor, shape, calls=calls))
    # MaxPool2d with ties (integer-valued input): which element receives the gradient.
    ties = torch.tensor([[[[1, 3, 3, 0], [3, 2, 1, 1], [0, 0, 2, 2], [0, 0, 2, 2]]]], dtype=F64)
    cases.append(module_case(100, "nn.MaxPool2d(2)", None, x=ties))
    # Embedding: repeated indices accumulate into the same weight row; padding_idx gets no grad.
    idx = torch.tensor([[1, 2, 1], [4, 1, 6]])
    cases.append(module_case(101, "nn.Embedding(7, 3)", None, x=idx))
    idx = torch.tensor([[1, 0, 1, 4], [3, 1, 3, 3]])
    cases.append(module_case(102, "nn.Embedding(5, 2, padding_idx=1)", None, x=idx))
    return cases


def loss_section():
    d = Draw(3000)
    N, C = 3, 5
    logits = d.randn(N, C)
    target = torch.tensor([1, 0, 4])
    weight = d.randn(C).abs_().add_(0.1)
    logits_k = d.randn(2, C, 3)
    target_k = torch.tensor([[0, 4, 2], [3, 3, 1]])
    x_reg, y_reg = d.randn(3, 4), d.randn(3, 4)
    x_bce = d.randn(3, 4)
    y_bce = torch.rand(3, 4, generator=d.g, dtype=F64).round_()
    y_soft = torch.rand(3, 4, generator=d.g, dtype=F64)
    pos_weight = d.randn(4).abs_().add_(0.5)
    bce_weight = d.randn(4).abs_()
    cases = []

    def add(fn, call, x, target, **kw):
        x = x.detach().clone().requires_grad_(True)
        v = getattr(F, fn)(x, target, **kw)
        gout = None
        if v.dim() == 0:
            v.backward()
        else:
            gout = d.randn(*v.shape)
            v.backward(gout)
        shown = {k: (T(a) if isinstance(a, torch.Tensor) else a) for k, a in kw.items()}
        cases.append({"fn": fn, "call": call, "input": T(x), "target": T(target), "kwargs": shown,
                      "value": T(v), "grad_output": T(gout) if gout is not None else None,
                      "grad_input": T(x.grad)})

    for red in ("mean", "sum", "none"):
        add("cross_entropy", f"F.cross_entropy(x, t, reduction='{red}')", logits, target,
            reduction=red)
        add("cross_entropy", f"F.cross_entropy(x, t, weight=w, reduction='{red}')", logits,
            target, weight=weight, reduction=red)
        add("cross_entropy", f"F.cross_entropy(x, t, label_smoothing=0.1, reduction='{red}')",
            logits, target, label_smoothing=0.1, reduction=red)
        add("cross_entropy", f"F.cross_entropy(x, t, ignore_index=0, reduction='{red}')",
            logits, target, ignore_index=0, reduction=red)
    add("cross_entropy", "F.cross_entropy(x, t) with t containing -100", logits,
        torch.tensor([1, -100, 4]))
    add("cross_entropy", "F.cross_entropy(x, t, weight=w, ignore_index=0)", logits, target,
        weight=weight, ignore_index=0)
    add("cross_entropy", "F.cross_entropy(x, t, weight=w, label_smoothing=0.1)", logits, target,
        weight=weight, label_smoothing=0.1)
    add("cross_entropy", "F.cross_entropy(x, t, ignore_index=0, label_smoothing=0.1)", logits,
        target, ignore_index=0, label_smoothing=0.1)
    add("cross_entropy", "F.cross_entropy(x, t) with x of shape (N, C, d)", logits_k, target_k)
    add("cross_entropy", "F.cross_entropy(x, t, label_smoothing=0.1, reduction='sum'), (N, C, d)",
        logits_k, target_k, label_smoothing=0.1, reduction="sum")
    for red in ("mean", "sum", "none"):
        add("nll_loss", f"F.nll_loss(x, t, reduction='{red}')", logits, target, reduction=red)
        add("nll_loss", f"F.nll_loss(x, t, weight=w, reduction='{red}')", logits, target,
            weight=weight, reduction=red)
    add("nll_loss", "F.nll_loss(x, t, ignore_index=4)", logits, target, ignore_index=4)
    add("nll_loss", "F.nll_loss(F.log_softmax(x0, 1)) with x = log_softmax(x0, 1)",
        F.log_softmax(logits, 1), target)
    for red in ("mean", "sum", "none"):
        add("mse_loss", f"F.mse_loss(x, y, reduction='{red}')", x_reg, y_reg, reduction=red)
        add("binary_cross_entropy_with_logits",
            f"F.binary_cross_entropy_with_logits(x, y, reduction='{red}')", x_bce, y_bce,
            reduction=red)
        add("binary_cross_entropy_with_logits",
            f"F.binary_cross_entropy_with_logits(x, y, pos_weight=pw, reduction='{red}')", x_bce,
            y_bce, pos_weight=pos_weight, reduction=red)
    add("binary_cross_entropy_with_logits",
        "F.binary_cross_entropy_with_logits(x, y_soft, weight=w, pos_weight=pw)", x_bce, y_soft,
        weight=bce_weight, pos_weight=pos_weight)
    return cases


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            return next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        return ""


def main():
    torch.set_num_threads(1)
    script = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_SCRIPT)
    spec = importlib.util.spec_from_file_location("torch_train", script)
    tt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tt)

    out = {
        "generator": "tools/golden_modules.py",
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "cpu": cpu_name(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "init": init_section(tt.build_model),
        "dropout": dropout_section(),
        "recurrent": [rnn_case(k, *c) for k, c in enumerate(RNN_CASES)],
        "modules": module_section(),
        "losses": loss_section(),
    }
    # float32 LSTM: the CPU path through oneDNN (aten::mkldnn_rnn_layer).
    out["recurrent"].append(rnn_case(99, "nn.LSTM(3, 5, num_layers=2, batch_first=True)", True,
                                     True, dtype=torch.float32))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
