#!/usr/bin/env python3
"""Golden values from real PyTorch (and NumPy) for lockstep-data.

Writes tests/golden/data/torch_data.json, read by crates/lockstep-data/tests/golden.rs.
Run from the repository root with the reference interpreter:

    /opt/pyref/bin/python tools/golden_data.py

Everything here is computed by torch.utils.data / NumPy themselves, never by lockstep.
"""

import gzip
import json
import os
import random

import numpy as np
import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    DistributedSampler,
    RandomSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
    get_worker_info,
    random_split,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "data", "torch_data.json")
DIGITS = os.path.join(ROOT, "crates", "lockstep-data", "data", "digits.csv.gz")


def random_sampler_cases():
    cases = []
    for seed in (0, 1234):
        for n, num_samples, replacement in ((10, None, False), (7, 17, False), (9, 70, True), (5, 3, False)):
            for with_gen in (False, True):
                torch.manual_seed(seed)
                g = None
                if with_gen:
                    g = torch.Generator()
                    g.manual_seed(seed + 1)
                s = RandomSampler(range(n), replacement=replacement, num_samples=num_samples, generator=g)
                passes = [list(iter(s)) for _ in range(3)]
                after = torch.randint(0, 1 << 30, (1,)).item()
                cases.append(dict(seed=seed, n=n, num_samples=num_samples, replacement=replacement,
                                  generator_seed=(seed + 1) if with_gen else None, passes=passes,
                                  default_next=after))
    return cases


def loader_order_cases():
    cases = []
    for seed in (0, 7):
        for n, bs, drop_last in ((10, 3, False), (10, 3, True), (16, 4, False)):
            for with_gen in (False, True):
                torch.manual_seed(seed)
                g = None
                if with_gen:
                    g = torch.Generator()
                    g.manual_seed(seed + 100)
                dl = DataLoader(range(n), batch_size=bs, shuffle=True, drop_last=drop_last, generator=g)
                epochs = [[b.tolist() for b in dl] for _ in range(3)]
                after = torch.randint(0, 1 << 30, (1,)).item()
                cases.append(dict(seed=seed, n=n, batch_size=bs, drop_last=drop_last,
                                  generator_seed=(seed + 100) if with_gen else None,
                                  epochs=epochs, default_next=after))
    return cases


def draw_between_cases():
    """A user draw between iter(loader) and the first next(): it comes before the sampler's
    seed draw with num_workers=0, after it with workers (spec section 12.1)."""
    cases = []
    for workers in (0, 2):
        torch.manual_seed(5)
        dl = DataLoader(range(12), batch_size=4, shuffle=True, num_workers=workers)
        it = iter(dl)
        u = torch.rand(()).item()
        order = [b.tolist() for b in it]
        cases.append(dict(workers=workers, seed=5, n=12, batch_size=4, user_rand=u, batches=order))
    return cases


def distributed_cases():
    cases = []
    for n in (10, 11, 17):
        for r in (3, 4):
            for drop_last in (False, True):
                for shuffle in (True, False):
                    ranks = []
                    for rank in range(r):
                        s = DistributedSampler(range(n), num_replicas=r, rank=rank, shuffle=shuffle, seed=5,
                                               drop_last=drop_last)
                        per_epoch = []
                        for e in range(3):
                            s.set_epoch(e)
                            per_epoch.append(list(iter(s)))
                        ranks.append(per_epoch)
                    cases.append(dict(n=n, num_replicas=r, drop_last=drop_last, shuffle=shuffle, seed=5,
                                      ranks=ranks))
    # padding longer than the data set
    ranks = []
    for rank in range(5):
        s = DistributedSampler(range(2), num_replicas=5, rank=rank, shuffle=True, seed=0)
        ranks.append([list(iter(s))])
    cases.append(dict(n=2, num_replicas=5, drop_last=False, shuffle=True, seed=0, ranks=ranks))
    return cases


def split_cases():
    cases = []
    g = torch.Generator().manual_seed(42)
    parts = random_split(range(10), [3, 7], generator=g)
    cases.append(dict(n=10, lengths=[3, 7], fractions=None, generator_seed=42, default_seed=None,
                      parts=[list(p.indices) for p in parts]))
    g = torch.Generator().manual_seed(3)
    parts = random_split(range(11), [0.3, 0.3, 0.4], generator=g)
    cases.append(dict(n=11, lengths=None, fractions=[0.3, 0.3, 0.4], generator_seed=3, default_seed=None,
                      parts=[list(p.indices) for p in parts]))
    torch.manual_seed(9)
    parts = random_split(range(20), [5, 5, 10])
    cases.append(dict(n=20, lengths=[5, 5, 10], fractions=None, generator_seed=None, default_seed=9,
                      parts=[list(p.indices) for p in parts]))
    return cases


def other_samplers():
    torch.manual_seed(3)
    sub = [list(iter(SubsetRandomSampler([10, 20, 30, 40, 50]))) for _ in range(2)]
    g = torch.Generator().manual_seed(11)
    w = [0.1, 2.0, 0.0, 5.0, 1.0]
    wr = [list(iter(WeightedRandomSampler(w, 12, replacement=True, generator=g))) for _ in range(2)]
    g = torch.Generator().manual_seed(12)
    wn = [list(iter(WeightedRandomSampler(w, 4, replacement=False, generator=g))) for _ in range(2)]
    bs = [list(BatchSampler(range(10), 4, dl)) for dl in (False, True)]
    return dict(subset_seed=3, subset_indices=[10, 20, 30, 40, 50], subset=sub,
                weights=w, weighted_replacement_seed=11, weighted_replacement=wr,
                weighted_no_replacement_seed=12, weighted_no_replacement=wn, batch=bs)


class SeedProbe(Dataset):
    """Each sample reports its worker's id and seed and one draw from each global RNG."""

    def __len__(self):
        return 16

    def __getitem__(self, i):
        info = get_worker_info()
        return dict(index=i, worker=info.id, seed=info.seed, initial_seed=torch.initial_seed(),
                    torch_rand=torch.rand(()).item(), py_random=random.random(),
                    np_random=float(np.random.random_sample()))


def worker_seed_cases():
    cases = []
    for workers in (2, 4):
        for seed in (0, 1234):
            torch.manual_seed(seed)
            dl = DataLoader(SeedProbe(), batch_size=2, shuffle=True, num_workers=workers,
                            collate_fn=lambda b: b)
            epochs = []
            for _ in range(2):
                epochs.append([[dict(s) for s in batch] for batch in dl])
            after = torch.randint(0, 1 << 30, (1,)).item()
            cases.append(dict(workers=workers, seed=seed, n=16, batch_size=2, epochs=epochs,
                              default_next=after))
    return cases


def load_digits():
    with gzip.open(DIGITS, "rt") as f:
        rows = [list(map(int, line.split(","))) for line in f if line.strip()]
    x = torch.tensor([r[:64] for r in rows], dtype=torch.float32).reshape(-1, 1, 8, 8) / 16
    y = torch.tensor([r[64] for r in rows], dtype=torch.int64)
    return x, y


class AugDigits(Dataset):
    """crop(8, padding 2) + horizontal flip + Gaussian noise, written with plain torch ops the
    way torchvision's RandomCrop / RandomHorizontalFlip draw."""

    def __init__(self, x, y, std=0.1):
        self.x, self.y, self.std = x, y, std

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        img = torch.nn.functional.pad(self.x[i], (2, 2, 2, 2))
        top = torch.randint(0, 12 - 8 + 1, size=(1,)).item()
        left = torch.randint(0, 12 - 8 + 1, size=(1,)).item()
        img = img[:, top:top + 8, left:left + 8]
        if torch.rand(1) < 0.5:
            img = img.flip(-1)
        img = img + torch.randn_like(img) * self.std
        return img, self.y[i]


def augmented_cases():
    x, y = load_digits()
    ds = AugDigits(x, y)
    cases = []
    for workers in (0, 2):
        torch.manual_seed(0)
        dl = DataLoader(ds, batch_size=64, shuffle=True, num_workers=workers)
        batches = []
        for k, (xb, yb) in enumerate(dl):
            if k < 2:
                batches.append(dict(images=xb.flatten().tolist(), labels=yb.tolist()))
        cases.append(dict(workers=workers, seed=0, batch_size=64, batches=batches))
    return cases


def per_sample_cases():
    """The PerSample stream and augmentation, computed with NumPy alone."""
    x, _ = load_digits()
    xs = x.numpy()
    out = []
    for seed, epoch, index in ((7, 0, 0), (7, 0, 5), (7, 1, 5), (2**40 + 3, 2, 1796)):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(epoch, index)))
        first = rng.random(3).tolist()
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(epoch, index)))
        img = np.pad(xs[index], ((0, 0), (2, 2), (2, 2)))
        top = int(rng.integers(0, 5))
        left = int(rng.integers(0, 5))
        img = img[:, top:top + 8, left:left + 8]
        if rng.random(dtype=np.float32) < np.float32(0.5):
            img = img[:, :, ::-1]
        z = rng.standard_normal(64, dtype=np.float32).reshape(1, 8, 8)
        img = (img + z * np.float32(0.1)).astype(np.float32)
        out.append(dict(seed=seed, epoch=epoch, index=index, random3=first, image=img.flatten().tolist()))
    return out


FIXTURES = os.path.join(ROOT, "tests", "golden", "data", "fixtures")


def write_fixtures():
    """Small files for the readers' tests; the values are simple formulas the tests recompute."""
    os.makedirs(FIXTURES, exist_ok=True)
    f4 = (np.arange(12, dtype=np.float32) * 0.5 - 1).reshape(3, 4)
    f8 = np.arange(5, dtype=np.float64) / 3
    i8 = np.arange(-3, 3, dtype=np.int64).reshape(2, 3)
    i4 = np.array([-(2**31), 0, 2**31 - 1], dtype=np.int32)
    u1 = np.arange(6, dtype=np.uint8)
    b1 = np.array([True, False, True])
    for name, a in dict(f4=f4, f8=f8, i8=i8, i4=i4, u1=u1, b1=b1).items():
        np.save(os.path.join(FIXTURES, f"{name}.npy"), a)
    np.savez(os.path.join(FIXTURES, "arrays.npz"), f4=f4, i8=i8)
    np.savez_compressed(os.path.join(FIXTURES, "arrays_compressed.npz"), f4=f4, i8=i8)
    images = (np.arange(3 * 4 * 5) % 256).astype(np.uint8).reshape(3, 4, 5)
    labels = np.array([7, 0, 9], dtype=np.uint8)

    def idx(a, code):
        head = bytes([0, 0, code, a.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in a.shape)
        return head + a.astype(a.dtype.newbyteorder(">")).tobytes()

    with open(os.path.join(FIXTURES, "images-idx3-ubyte"), "wb") as f:
        f.write(idx(images, 0x08))
    with open(os.path.join(FIXTURES, "labels-idx1-ubyte.gz"), "wb") as f:
        f.write(gzip.compress(idx(labels, 0x08), mtime=0))
    with open(os.path.join(FIXTURES, "f32-idx2"), "wb") as f:
        f.write(idx(f4, 0x0D))
    with open(os.path.join(FIXTURES, "table.csv"), "w") as f:
        f.write("a,b,label\n1.5,2,0\n-3,4e-1,1\n\n5,6,2\n")


def main():
    write_fixtures()
    data = dict(
        torch_version=torch.__version__,
        numpy_version=np.__version__,
        random_sampler=random_sampler_cases(),
        loader_order=loader_order_cases(),
        draw_between=draw_between_cases(),
        distributed=distributed_cases(),
        random_split=split_cases(),
        other_samplers=other_samplers(),
        worker_seeds=worker_seed_cases(),
        augmented=augmented_cases(),
        per_sample=per_sample_cases(),
    )
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(data, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
