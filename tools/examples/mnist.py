#!/usr/bin/env python3
"""pytorch/examples' mnist/main.py (the CPU path), adapted to the embedded 8x8 digits.

The PyTorch twin of `crates/lockstep/examples/mnist.rs`: both print the same JSON report.
Adaptations, each the smallest that fits (everything else is the original program):
- data: the UCI digits (crates/lockstep-data/data/digits.csv.gz, pixels / 16) instead of
  torchvision's MNIST: the first 1437 images train, the last 360 test; `Normalize((0.1307,),
  (0.3081,))` kept as the f32 arithmetic torchvision does (`sub_(mean).div_(std)`);
- the model: 8x8 inputs give 2x2 maps after the convolutions and the pool, so `fc1` takes
  64 * 2 * 2 = 256 inputs (9216 on MNIST); `--conv1`/`--conv2` set the convolutions' widths
  (32 and 64 by default, as the original);
- `torch.use_deterministic_algorithms(True)` (lockstep's deterministic mode, on in the port);
- `--max-steps` (stop early, for tests), `--threads`; progress goes to stderr and the report
  (init/final sha256 over `model.parameters()` in order, little-endian; every step's loss;
  test loss and accuracy per epoch) to stdout as one JSON object.

usage: python3 tools/examples/mnist.py [--epochs 14] [--batch-size 64] [--max-steps N] ...
Needs: pip install torch numpy (golden values made with torch 2.15.0).
"""
import argparse
import gzip
import hashlib
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import StepLR

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGITS = os.path.join(ROOT, "crates", "lockstep-data", "data", "digits.csv.gz")


class Net(nn.Module):
    def __init__(self, c1=32, c2=64):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, c1, 3, 1)
        self.conv2 = nn.Conv2d(c1, c2, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(c2 * 2 * 2, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def train(args, model, train_loader, optimizer, epoch, losses):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()), file=sys.stderr)
        if args.dry_run or (args.max_steps and len(losses) >= args.max_steps):
            break


def test(model, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()  # sum up batch loss
            pred = output.argmax(dim=1, keepdim=True)  # get the index of the max log-probability
            correct += pred.eq(target.view_as(pred)).sum().item()

    test_loss /= len(test_loader.dataset)

    print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(
        test_loss, correct, len(test_loader.dataset),
        100. * correct / len(test_loader.dataset)), file=sys.stderr)
    return test_loss, correct / len(test_loader.dataset)


def load_digits():
    """Images [n, 1, 8, 8] (pixel / 16, then Normalize) and labels."""
    with gzip.open(DIGITS, "rt") as f:
        rows = np.array([list(map(int, l.split(","))) for l in f if l.strip()], dtype=np.int64)
    x = torch.from_numpy(rows[:, :64].astype(np.float32) / np.float32(16.0)).view(-1, 1, 8, 8)
    x = x.sub_(torch.tensor(0.1307)).div_(torch.tensor(0.3081))
    return x, torch.from_numpy(rows[:, 64].copy())


def sha256_of(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    # Training settings
    parser = argparse.ArgumentParser(description='PyTorch MNIST Example')
    parser.add_argument('--batch-size', type=int, default=64, metavar='N')
    parser.add_argument('--test-batch-size', type=int, default=1000, metavar='N')
    parser.add_argument('--epochs', type=int, default=14, metavar='N')
    parser.add_argument('--lr', type=float, default=1.0, metavar='LR')
    parser.add_argument('--gamma', type=float, default=0.7, metavar='M')
    parser.add_argument('--dry-run', action='store_true')
    parser.add_argument('--seed', type=int, default=1, metavar='S')
    parser.add_argument('--log-interval', type=int, default=10, metavar='N')
    parser.add_argument('--conv1', type=int, default=32)
    parser.add_argument('--conv2', type=int, default=64)
    parser.add_argument('--max-steps', type=int, default=0)
    parser.add_argument('--threads', type=int, default=0)
    args = parser.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(args.seed)

    train_kwargs = {'batch_size': args.batch_size}
    test_kwargs = {'batch_size': args.test_batch_size}

    x, y = load_digits()
    dataset1 = torch.utils.data.TensorDataset(x[:1437], y[:1437])
    dataset2 = torch.utils.data.TensorDataset(x[1437:], y[1437:])
    train_loader = torch.utils.data.DataLoader(dataset1, **train_kwargs)
    test_loader = torch.utils.data.DataLoader(dataset2, **test_kwargs)

    model = Net(args.conv1, args.conv2)
    init_sha = sha256_of(model.parameters())
    optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr)

    losses, test_losses, accuracies = [], [], []
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        train(args, model, train_loader, optimizer, epoch, losses)
        test_loss, acc = test(model, test_loader)
        test_losses.append(test_loss)
        accuracies.append(acc)
        scheduler.step()
        if args.dry_run or (args.max_steps and len(losses) >= args.max_steps):
            break

    json.dump({
        "example": "mnist",
        "init_sha256": init_sha,
        "losses": losses,
        "test_loss": test_losses,
        "test_accuracy": accuracies,
        "final_sha256": sha256_of(model.parameters()),
    }, sys.stdout)
    print()


if __name__ == '__main__':
    main()
