"""Golden values for lockstep_nn::rng's per-sample dropout (`with_sample_keys`) and the
lockstep_rng::StreamKey streams behind it, from real NumPy.

Sample `idx`'s mask in dropout call `call` of a forward pass comes from
numpy.random.default_rng(numpy.random.SeedSequence(seed, spawn_key=(epoch, idx, 1 + call))):
an element is kept iff its random(dtype=float32) draw is below float32(1 - p), and a kept
element of the output is x * float32(1) / float32(1 - p). Writes, for each case, the output of
dropout on a tensor of ones (batch along dimension `batch_dim`) as float32 bits, plus the first
draws of the sample's own stream (spawn_key=(epoch, idx)), to tests/golden/nn/sample_keys.json.
Rerun: python3 tools/golden_sample_keys.py
"""
import json
import numpy as np

OUT = "tests/golden/nn/sample_keys.json"

CASES = [
    # seed, epoch, indices, p, shape, batch_dim, calls
    (0, 0, [0, 1, 2], 0.5, [3, 7], 0, 2),
    (12345678901, 2, [4, 0, 9], 0.3, [3, 5], 0, 3),
    (2**64 - 1, 7, [123456, 5], 0.1, [4, 2, 3], 1, 1),
]


def bits32(a):
    return np.asarray(a, dtype=np.float32).ravel().view(np.uint32).tolist()


def mask(seed, epoch, indices, p, shape, batch_dim, call):
    keep = np.float32(1.0 - p)
    scale = np.float32(1.0) / keep
    out = np.zeros(shape, dtype=np.float32)
    moved = np.moveaxis(out, batch_dim, 0)
    for b, idx in enumerate(indices):
        g = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(epoch, idx, 1 + call)))
        # The row's elements in row-major order of the other dimensions.
        rest = [s for k, s in enumerate(shape) if k != batch_dim]
        u = g.random(int(np.prod(rest)), dtype=np.float32).reshape(rest)
        moved[b] = np.where(u < keep, scale, np.float32(0.0))
    return out


cases = []
for seed, epoch, indices, p, shape, batch_dim, calls in CASES:
    outs = [bits32(mask(seed, epoch, indices, p, shape, batch_dim, c)) for c in range(calls)]
    own = [
        bits32(np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(epoch, i))).random(4, dtype=np.float32))
        for i in indices
    ]
    cases.append(
        {
            "seed": str(seed),
            "epoch": epoch,
            "indices": indices,
            "p": p,
            "shape": shape,
            "batch_dim": batch_dim,
            "outputs": outs,
            "own_stream": own,
        }
    )

with open(OUT, "w") as f:
    json.dump({"numpy": np.__version__, "cases": cases}, f)
    f.write("\n")
print("wrote", OUT)
