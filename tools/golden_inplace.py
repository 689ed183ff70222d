"""Golden values for lockstep-tensor's in-place arithmetic (crates/lockstep-tensor/src/ops/inplace.rs).

Runs PyTorch's CPU in-place ops on random float32/float64 inputs (lengths that are and are not
multiples of the vector width, broadcast operands, scalar operands) and writes every input and
output as raw bits to tests/golden/tensor/inplace.json. Rerun: python3 tools/golden_inplace.py
"""
import json, struct
import torch

torch.set_num_threads(1)
OUT = "tests/golden/tensor/inplace.json"


def bits(t):
    t = t.contiguous().flatten()
    if t.dtype == torch.float32:
        return t.view(torch.int32).tolist()
    return t.view(torch.int64).tolist()


def rnd(g, shape, dtype, kind="normal"):
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    if kind == "pos":
        x = x.abs() + 0.25
    if kind == "wide":
        x = x * torch.exp(torch.randn(shape, generator=g, dtype=torch.float64) * 4)
    return x.to(dtype)


cases = []
g = torch.Generator().manual_seed(2026)
for dtype in (torch.float32, torch.float64):
    dn = "f32" if dtype == torch.float32 else "f64"
    shapes = [([n], [n]) for n in (1, 7, 15, 16, 17, 33, 67)] + [([4, 5], [4, 1]), ([3, 4], [4]), ([2, 3, 5], [])]
    for shape, oshape in shapes:
        def case(op, fn, operands, scalars):
            s = rnd(g, shape, dtype, "wide")
            ops = [rnd(g, oshape if i == 0 else shape, dtype, k) for i, k in enumerate(operands)]
            out = s.clone()
            fn(out, *ops)
            cases.append({"op": op, "dtype": dn, "shape": shape, "self": bits(s),
                          "operands": [{"shape": list(o.shape), "bits": bits(o)} for o in ops],
                          "scalars": scalars, "out": bits(out)})
        for alpha in (1.0, -0.0123456789, 3.7):
            case("add_alpha_", lambda o, b, a=alpha: o.add_(b, alpha=a), ["wide"], [alpha])
            case("sub_", lambda o, b, a=alpha: o.sub_(b, alpha=a), ["wide"], [alpha])
        case("mul_", lambda o, b: o.mul_(b), ["normal"], [])
        case("div_", lambda o, b: o.div_(b), ["normal"], [])
        for v in (0.3, -1.7):
            case("add_scalar_", lambda o, v=v: o.add_(v, alpha=-0.77), [], [v, -0.77])
            case("mul_scalar_", lambda o, v=v: o.mul_(v), [], [v])
            case("div_scalar_", lambda o, v=v: o.div_(v), [], [v])
        for v in (1.0, -0.001, 0.9):
            # t1 broadcast like the other operands, t2 full shape
            case("addcmul_", lambda o, a, b, v=v: o.addcmul_(a, b, value=v), ["normal", "normal"], [v])
            case("addcdiv_", lambda o, a, b, v=v: o.addcdiv_(a, b, value=v), ["normal", "pos"], [v])
        for w in (0.1, 0.5, 0.75, -0.3, 1.2):
            case("lerp_", lambda o, e, w=w: o.lerp_(e, w), ["wide"], [w])
        if oshape == shape:
            wt = lambda o, e, w: o.lerp_(e, w)
            s = rnd(g, shape, dtype, "wide"); e = rnd(g, shape, dtype, "wide")
            w = (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 0.5).to(dtype)
            out = s.clone(); out.lerp_(e, w)
            cases.append({"op": "lerp_tensor_", "dtype": dn, "shape": shape, "self": bits(s),
                          "operands": [{"shape": shape, "bits": bits(e)}, {"shape": shape, "bits": bits(w)}],
                          "scalars": [], "out": bits(out)})
        case("clamp_", lambda o: o.clamp_(-0.5, 2.0), [], [-0.5, 2.0])
        case("clamp_min_", lambda o: o.clamp_(min=0.1), [], [0.1])
        case("copy_", lambda o, b: o.copy_(b), ["normal"], [])
        case("fill_", lambda o: o.fill_(0.1), [], [0.1])
        case("zero_", lambda o: o.zero_(), [], [])

# Tail cases: an operand constant along the innermost run (a number, a 0-d tensor, a [R, 1]
# column) with alpha != 1, where PyTorch's remainder loop rounds some positions twice. Runs of
# every remainder length of both dtypes' 64-byte vectors.
for dtype in (torch.float32, torch.float64):
    dn = "f32" if dtype == torch.float32 else "f64"
    shapes = [([n], []) for n in (3, 4, 5, 6, 9, 13, 15, 21, 31, 47, 70)]
    shapes += [([4, 37], [4, 1]), ([4, 5, 6], [4, 1, 1]), ([3, 37], []), ([2, 1, 13], [2, 1, 1]),
               ([9, 7], [9, 1]), ([4, 5, 6], [1, 5, 1]), ([5, 11], [11])]
    for shape, oshape in shapes:
        for alpha in (3.7, -0.0123456789):
            for op, fn in (("add_alpha_", lambda o, b, a=alpha: o.add_(b, alpha=a)),
                           ("sub_", lambda o, b, a=alpha: o.sub_(b, alpha=a))):
                s = rnd(g, shape, dtype, "wide")
                b = rnd(g, oshape, dtype, "wide")
                out = s.clone()
                fn(out, b)
                cases.append({"op": op, "dtype": dn, "shape": shape, "self": bits(s),
                              "operands": [{"shape": oshape, "bits": bits(b)}],
                              "scalars": [alpha], "out": bits(out)})
        if oshape == []:
            for v in (0.3, -1.7):
                s = rnd(g, shape, dtype, "wide")
                out = s.clone()
                out.add_(v, alpha=3.7)
                cases.append({"op": "add_scalar_", "dtype": dn, "shape": shape, "self": bits(s),
                              "operands": [], "scalars": [v, 3.7], "out": bits(out)})

json.dump({"generator": "tools/golden_inplace.py", "torch": torch.__version__,
           "cpu_capability": torch.backends.cpu.get_cpu_capability(), "cases": cases},
          open(OUT, "w"))
print(len(cases), "cases ->", OUT)
