#!/usr/bin/env python3
"""Where the lstm training step's gate inputs lie (issue 31): trains `torch_train.py`'s lstm
(H 128, batch 32, `bench/train.py`'s step: SGD lr 0.01 momentum 0.9 on one batch) and, at
steps 0, 10, 100 and 200, recomputes each layer's gate pre-activations and cell states from the
weights, printing the share of lanes below the polynomial switches of lockstep's f32 sigmoid
(|x| < 1.25) and tanh (|x| < 0.625) and of 8-lane vectors all below, all above, or mixed.

Usage (from the repository root): python3 bench/lstm_gate_ranges.py [path/to/torch_train.py]"""
import importlib.util, os, sys
import torch, torch.nn.functional as F
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared", "spec", "train", "torch_train.py")
spec = importlib.util.spec_from_file_location("tt", SPEC); tt = importlib.util.module_from_spec(spec); spec.loader.exec_module(tt)
torch.set_num_threads(1); torch.manual_seed(0)
model = tt.build_model("lstm", 128, 0.1); model.train()
x = torch.rand(32, 64); y = torch.randint(0, 10, (32,))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
def stats(step):
    l = model.lstm
    with torch.no_grad():
        inp = x.view(-1, 8, 8)
        for layer in range(2):
            wih, whh = getattr(l, f"weight_ih_l{layer}"), getattr(l, f"weight_hh_l{layer}")
            bih, bhh = getattr(l, f"bias_ih_l{layer}"), getattr(l, f"bias_hh_l{layer}")
            h = torch.zeros(32, 128); c = torch.zeros(32, 128); outs = []
            pre = {"sig": [], "g": [], "c": []}
            for t in range(8):
                a = inp[:, t] @ wih.T + bih + h @ whh.T + bhh
                i, f, g, o = a.chunk(4, 1)
                pre["sig"] += [i, f, o]; pre["g"].append(g)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                pre["c"].append(c)
                h = torch.sigmoid(o) * torch.tanh(c); outs.append(h)
            inp = torch.stack(outs, 1)
            for k, bound in (("sig", 1.25), ("g", 0.625), ("c", 0.625)):
                v = torch.cat([p.reshape(-1, 8) for p in pre[k]])
                small = v.abs() < bound
                lanes = small.float().mean().item()
                allsmall = small.all(1).float().mean().item()
                allbig = (~small).all(1).float().mean().item()
                print(f"step {step} layer {layer} {k}: small lanes {lanes:.3f}, 8-vectors all small {allsmall:.3f}, all big {allbig:.3f}, mixed {1-allsmall-allbig:.3f}")
for s in range(201):
    if s in (0, 10, 100, 200): stats(s)
    loss = F.cross_entropy(model(x), y); opt.zero_grad(); loss.backward(); opt.step()
