#!/usr/bin/env python3
"""pytorch/examples' vae/main.py (the CPU path), adapted to the embedded 8x8 digits.

The PyTorch twin of `crates/lockstep/examples/vae.rs`: both print the same JSON report.
Adaptations, each the smallest that fits (everything else is the original program):
- data: the UCI digits (crates/lockstep-data/data/digits.csv.gz, pixels / 16, so in [0, 1]
  as `ToTensor()` makes MNIST's) instead of torchvision's MNIST: the first 1437 images train,
  the last 360 test; 784 -> 64 inputs (the 400 hidden and 20 latent units are kept);
- no images are saved (the samples drawn after each epoch are still drawn and decoded, so the
  generator moves as in the original);
- `--max-steps` (stop early, for tests), `--threads`; progress goes to stderr and the report
  (init/final sha256 over `model.parameters()` in order, little-endian; every step's loss,
  summed over the batch as `loss.item()`; average test loss per epoch) to stdout as JSON.

usage: python3 tools/examples/vae.py [--epochs 10] [--batch-size 128] [--max-steps N] ...
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
import torch.utils.data
from torch import nn, optim
from torch.nn import functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGITS = os.path.join(ROOT, "crates", "lockstep-data", "data", "digits.csv.gz")

parser = argparse.ArgumentParser(description='VAE MNIST Example')
parser.add_argument('--batch-size', type=int, default=128, metavar='N')
parser.add_argument('--epochs', type=int, default=10, metavar='N')
parser.add_argument('--seed', type=int, default=1, metavar='S')
parser.add_argument('--log-interval', type=int, default=10, metavar='N')
parser.add_argument('--max-steps', type=int, default=0)
parser.add_argument('--threads', type=int, default=0)
args = parser.parse_args()

if args.threads:
    torch.set_num_threads(args.threads)
torch.manual_seed(args.seed)


def load_digits():
    with gzip.open(DIGITS, "rt") as f:
        rows = np.array([list(map(int, l.split(","))) for l in f if l.strip()], dtype=np.int64)
    x = torch.from_numpy(rows[:, :64].astype(np.float32) / np.float32(16.0)).view(-1, 1, 8, 8)
    return x, torch.from_numpy(rows[:, 64].copy())


x, y = load_digits()
train_loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(x[:1437], y[:1437]),
    batch_size=args.batch_size, shuffle=True)
test_loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(x[1437:], y[1437:]),
    batch_size=args.batch_size, shuffle=False)


class VAE(nn.Module):
    def __init__(self):
        super(VAE, self).__init__()

        self.fc1 = nn.Linear(64, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 64)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5*logvar)
        eps = torch.randn_like(std)
        return mu + eps*std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 64))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def sha256_of(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


model = VAE()
init_sha = sha256_of(model.parameters())
optimizer = optim.Adam(model.parameters(), lr=1e-3)
losses, test_losses = [], []


# Reconstruction + KL divergence losses summed over all elements and batch
def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 64), reduction='sum')

    # see Appendix B from VAE paper:
    # Kingma and Welling. Auto-Encoding Variational Bayes. ICLR, 2014
    # https://arxiv.org/abs/1312.6114
    # 0.5 * sum(1 + log(sigma^2) - mu^2 - sigma^2)
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())

    return BCE + KLD


def done():
    return args.max_steps and len(losses) >= args.max_steps


def train(epoch):
    model.train()
    train_loss = 0
    for batch_idx, (data, _) in enumerate(train_loader):
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
        losses.append(loss.item())
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader),
                loss.item() / len(data)), file=sys.stderr)
        if done():
            break

    print('====> Epoch: {} Average loss: {:.4f}'.format(
          epoch, train_loss / len(train_loader.dataset)), file=sys.stderr)


def test(epoch):
    model.eval()
    test_loss = 0
    with torch.no_grad():
        for i, (data, _) in enumerate(test_loader):
            recon_batch, mu, logvar = model(data)
            test_loss += loss_function(recon_batch, data, mu, logvar).item()

    test_loss /= len(test_loader.dataset)
    print('====> Test set loss: {:.4f}'.format(test_loss), file=sys.stderr)
    test_losses.append(test_loss)


if __name__ == "__main__":
    for epoch in range(1, args.epochs + 1):
        train(epoch)
        test(epoch)
        with torch.no_grad():
            sample = torch.randn(64, 20)
            sample = model.decode(sample)
        if done():
            break
    json.dump({
        "example": "vae",
        "init_sha256": init_sha,
        "losses": losses,
        "test_loss": test_losses,
        "final_sha256": sha256_of(model.parameters()),
    }, sys.stdout)
    print()
