"""Golden values for lockstep_nn::init (crates/lockstep-nn/src/init.rs): torch.nn.init on
parameters.

For each case, seeds a generator (the default one via torch.manual_seed, or an explicit
torch.Generator), runs one torch.nn.init function on a float32/float64 parameter of a given
shape (including conv-shaped 4-D weights, so fans include the receptive field) and writes the
resulting values as raw bits, plus one uniform draw taken afterwards (so the number of draws
consumed is pinned too), to tests/golden/nn/init.json. Also records calculate_gain values and
which calls raise. Rerun: python3 tools/golden_init.py
"""
import json
import torch
import torch.nn as nn

torch.set_num_threads(1)
OUT = "tests/golden/nn/init.json"


def bits(t):
    t = t.detach().contiguous().flatten()
    if t.dtype == torch.float32:
        return t.view(torch.int32).tolist()
    return t.view(torch.int64).tolist()


DT = {"f32": torch.float32, "f64": torch.float64}

# (function, kwargs for lockstep's arguments, shape)
SPECS = [
    ("uniform_", {"a": -0.3, "b": 0.7}, [5, 7]),
    ("normal_", {"mean": 0.5, "std": 2.0}, [4, 9]),
    ("normal_", {"mean": 0.0, "std": 0.02}, [3]),
    ("constant_", {"val": 0.1}, [3, 4]),
    ("ones_", {}, [2, 3]),
    ("zeros_", {}, [2, 3]),
    ("eye_", {}, [3, 5]),
    ("eye_", {}, [4, 2]),
    ("xavier_uniform_", {"gain": 1.0}, [6, 4]),
    ("xavier_uniform_", {"gain": 5.0 / 3.0}, [8, 3, 3, 3]),
    ("xavier_normal_", {"gain": 1.0}, [16, 5]),
    ("xavier_normal_", {"gain": 2.0}, [4, 2, 5]),
    ("kaiming_uniform_", {"a": 5 ** 0.5, "mode": "fan_in", "nonlinearity": "leaky_relu"}, [7, 5]),
    ("kaiming_uniform_", {"a": 0.0, "mode": "fan_out", "nonlinearity": "relu"}, [6, 3, 3, 3]),
    ("kaiming_normal_", {"a": 0.0, "mode": "fan_in", "nonlinearity": "relu"}, [8, 4, 3, 3]),
    ("kaiming_normal_", {"a": 0.1, "mode": "fan_out", "nonlinearity": "leaky_relu"}, [10, 3]),
    ("kaiming_normal_", {"a": 0.0, "mode": "fan_in", "nonlinearity": "tanh"}, [0, 3]),
    ("trunc_normal_", {"mean": 0.0, "std": 1.0, "a": -2.0, "b": 2.0}, [6, 7]),
    ("trunc_normal_", {"mean": 0.0, "std": 0.02, "a": -0.04, "b": 0.04}, [20, 5]),
    ("trunc_normal_", {"mean": 1.0, "std": 1.0, "a": 2.5, "b": 3.0}, [4, 3]),
]


def call(name, w, kw, gen):
    f = getattr(nn.init, name)
    if name in ("constant_", "ones_", "zeros_", "eye_"):
        return f(w, **kw)
    return f(w, **kw, generator=gen)


cases = []
for seed in (0, 1234):
    for dt in ("f32", "f64"):
        for explicit in (False, True):
            for name, kw, shape in SPECS:
                w = nn.Parameter(torch.full(shape, 9.0, dtype=DT[dt]))
                if explicit:
                    gen = torch.Generator().manual_seed(seed)
                else:
                    torch.manual_seed(seed)
                    gen = None
                call(name, w, kw, gen)
                after = torch.rand(1, generator=gen, dtype=torch.float64)
                cases.append({
                    "fn": name, "kwargs": kw, "shape": shape, "dtype": dt, "seed": seed,
                    "explicit_generator": explicit, "bits": bits(w),
                    "next_uniform_bits": bits(after)[0],
                    "requires_grad": w.requires_grad,
                })

gains = []
for nl, p in [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None),
              ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)]:
    g = nn.init.calculate_gain(nl, p)
    gains.append({"nonlinearity": nl, "param": p, "gain": float(g).hex()})

raises = []
for label, fn in [
    ("eye_ 1-D", lambda: nn.init.eye_(torch.empty(3))),
    ("eye_ 3-D", lambda: nn.init.eye_(torch.empty(2, 2, 2))),
    ("xavier_uniform_ 1-D", lambda: nn.init.xavier_uniform_(torch.empty(5))),
    ("xavier_normal_ 0-D", lambda: nn.init.xavier_normal_(torch.empty(()))),
    ("kaiming_uniform_ 1-D", lambda: nn.init.kaiming_uniform_(torch.empty(5))),
    ("kaiming_normal_ bad nonlinearity", lambda: nn.init.kaiming_normal_(torch.empty(2, 2), nonlinearity="swish")),
    ("trunc_normal_ a > b", lambda: nn.init.trunc_normal_(torch.empty(4, 4), a=2.0, b=-2.0)),
    ("calculate_gain unknown", lambda: nn.init.calculate_gain("swish")),
]:
    try:
        fn()
        raised = False
    except Exception:
        raised = True
    raises.append({"case": label, "raises": raised})

with open(OUT, "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases, "gains": gains, "raises": raises}, f)
    f.write("\n")
print(f"{len(cases)} cases -> {OUT}")
print(raises)
