#!/usr/bin/env python3
"""pytorch/examples' time_sequence_prediction (generate_sine_wave.py + train.py), in one file.

The PyTorch twin of `crates/lockstep/examples/time_sequence_prediction.rs`: both print the same
JSON report. Adaptations, each the smallest that fits (everything else is the original):
- the waves are made in memory instead of through traindata.pt, by the original's code with
  NumPy's global generator (`np.random.seed(2)`); `--T`, `--L`, `--N` (20, 1000, 100 as the
  original) and `--future` (1000) can be made smaller, for tests;
- no plots; `--threads`; the report (sha256 over `seq.parameters()` after `seq.double()` and
  at the end; every closure's loss (`losses`); the test loss after each step; the sha256 of the
  waves) goes to stdout as one JSON object, progress to stderr.

usage: python3 tools/examples/time_sequence_prediction.py [--steps 15] [--L 1000] ...
Needs: pip install torch numpy (golden values made with torch 2.15.0, numpy 2.4.6).
"""
import argparse
import hashlib
import json
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim


class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):  # if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


def sha256_of(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def generate_sine_wave(T, L, N):
    np.random.seed(2)
    x = np.empty((N, L), 'int64')
    x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
    return np.sin(x / 1.0 / T).astype('float64')


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--steps', type=int, default=15, help='steps to run')
    parser.add_argument('--T', type=int, default=20)
    parser.add_argument('--L', type=int, default=1000)
    parser.add_argument('--N', type=int, default=100)
    parser.add_argument('--future', type=int, default=1000)
    parser.add_argument('--threads', type=int, default=0)
    opt = parser.parse_args()
    if opt.threads:
        torch.set_num_threads(opt.threads)
    data = generate_sine_wave(opt.T, opt.L, opt.N)
    # set random seed to 0
    np.random.seed(0)
    torch.manual_seed(0)
    # load data and make training set
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
    # build the model
    seq = Sequence()
    seq.double()
    init_sha = sha256_of(seq.parameters())
    criterion = nn.MSELoss()
    # use LBFGS as optimizer since we can load the whole data to train
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8)
    losses, test_losses = [], []
    # begin to train
    for i in range(opt.steps):
        print('STEP: ', i, file=sys.stderr)

        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            print('loss:', loss.item(), file=sys.stderr)
            losses.append(loss.item())
            loss.backward()
            return loss
        optimizer.step(closure)
        # begin to predict, no need to track gradient here
        with torch.no_grad():
            future = opt.future
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            print('test loss:', loss.item(), file=sys.stderr)
            test_losses.append(loss.item())
            y = pred.detach().numpy()

    json.dump({
        "example": "time_sequence_prediction",
        "data_sha256": sha256_of([torch.from_numpy(data)]),
        "init_sha256": init_sha,
        "losses": losses,
        "test_loss": test_losses,
        "final_sha256": sha256_of(seq.parameters()),
    }, sys.stdout)
    print()
