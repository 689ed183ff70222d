#!/usr/bin/env python3
"""pytorch/examples' dcgan/main.py (the CPU path), adapted to the embedded 8x8 digits.

The PyTorch twin of `crates/lockstep/examples/dcgan.rs`: both print the same JSON report.
Adaptations, each the smallest that fits (everything else is the original program):
- data: the UCI digits (crates/lockstep-data/data/digits.csv.gz, all 1797, pixels / 16, then
  `Normalize((0.5,), (0.5,))` in f32) instead of torchvision's MNIST resized to 64x64;
- the networks: 8x8 images need three layers each instead of five, in the original's pattern
  (G: ConvTranspose2d(nz, ngf*2, 2, 1, 0) -> BN -> ReLU -> ConvTranspose2d(ngf*2, ngf, 4, 2, 1)
  -> BN -> ReLU -> ConvTranspose2d(ngf, nc, 4, 2, 1) -> Tanh; D: Conv2d(nc, ndf, 4, 2, 1) ->
  LeakyReLU(0.2) -> Conv2d(ndf, ndf*2, 4, 2, 1) -> BN -> LeakyReLU(0.2) -> Conv2d(ndf*2, 1,
  2, 1, 0) -> Sigmoid), no bias, `weights_init` as the original;
- `--manualSeed` defaults to 1 (the original draws one from `random`); `--workers` 0;
- no images or checkpoints are saved (`netG(fixed_noise)` is still run every 100 steps);
- `--max-steps` (stop early, for tests), `--threads`; progress goes to stderr and the report
  (sha256 over G's then D's `parameters()` at the start and the end, of the fixed noise;
  every step's Loss_D (`losses`) and Loss_G (`loss_g`)) to stdout as JSON.

usage: python3 tools/examples/dcgan.py [--niter 25] [--batchSize 64] [--max-steps N] ...
Needs: pip install torch numpy (golden values made with torch 2.15.0).
"""
import argparse
import gzip
import hashlib
import json
import os
import random
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import torch.utils.data

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGITS = os.path.join(ROOT, "crates", "lockstep-data", "data", "digits.csv.gz")

parser = argparse.ArgumentParser()
parser.add_argument('--workers', type=int, help='number of data loading workers', default=0)
parser.add_argument('--batchSize', type=int, default=64, help='input batch size')
parser.add_argument('--nz', type=int, default=100, help='size of the latent z vector')
parser.add_argument('--ngf', type=int, default=64)
parser.add_argument('--ndf', type=int, default=64)
parser.add_argument('--niter', type=int, default=25, help='number of epochs to train for')
parser.add_argument('--lr', type=float, default=0.0002, help='learning rate, default=0.0002')
parser.add_argument('--beta1', type=float, default=0.5, help='beta1 for adam. default=0.5')
parser.add_argument('--dry-run', action='store_true', help='check a single training cycle works')
parser.add_argument('--manualSeed', type=int, default=1, help='manual seed')
parser.add_argument('--max-steps', type=int, default=0)
parser.add_argument('--threads', type=int, default=0)
opt = parser.parse_args()

if opt.threads:
    torch.set_num_threads(opt.threads)
random.seed(opt.manualSeed)
torch.manual_seed(opt.manualSeed)

with gzip.open(DIGITS, "rt") as f:
    rows = np.array([list(map(int, l.split(","))) for l in f if l.strip()], dtype=np.int64)
x = torch.from_numpy(rows[:, :64].astype(np.float32) / np.float32(16.0)).view(-1, 1, 8, 8)
x = x.sub_(torch.tensor(0.5)).div_(torch.tensor(0.5))
dataset = torch.utils.data.TensorDataset(x, torch.from_numpy(rows[:, 64].copy()))
nc = 1

dataloader = torch.utils.data.DataLoader(dataset, batch_size=opt.batchSize,
                                         shuffle=True, num_workers=int(opt.workers))
nz = int(opt.nz)
ngf = int(opt.ngf)
ndf = int(opt.ndf)


# custom weights initialization called on netG and netD
def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()
        self.main = nn.Sequential(
            # input is Z, going into a convolution
            nn.ConvTranspose2d(nz, ngf * 2, 2, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            # state size. (ngf*2) x 2 x 2
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            # state size. (ngf) x 4 x 4
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
            nn.Tanh()
            # state size. (nc) x 8 x 8
        )

    def forward(self, input):
        return self.main(input)


netG = Generator()
netG.apply(weights_init)


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()
        self.main = nn.Sequential(
            # input is (nc) x 8 x 8
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf) x 4 x 4
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf*2) x 2 x 2
            nn.Conv2d(ndf * 2, 1, 2, 1, 0, bias=False),
            nn.Sigmoid()
        )

    def forward(self, input):
        output = self.main(input)
        return output.view(-1, 1).squeeze(1)


netD = Discriminator()
netD.apply(weights_init)


def sha256_of(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


init_sha = sha256_of(list(netG.parameters()) + list(netD.parameters()))

criterion = nn.BCELoss()

fixed_noise = torch.randn(opt.batchSize, nz, 1, 1)
real_label = 1
fake_label = 0

# setup optimizer
optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))

losses_d, losses_g = [], []
for epoch in range(opt.niter):
    for i, data in enumerate(dataloader, 0):
        ############################
        # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
        ###########################
        # train with real
        netD.zero_grad()
        real_cpu = data[0]
        batch_size = real_cpu.size(0)
        label = torch.full((batch_size,), real_label,
                           dtype=real_cpu.dtype)

        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()

        # train with fake
        noise = torch.randn(batch_size, nz, 1, 1)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()

        ############################
        # (2) Update G network: maximize log(D(G(z)))
        ###########################
        netG.zero_grad()
        label.fill_(real_label)  # fake labels are real for generator cost
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()

        losses_d.append(errD.item())
        losses_g.append(errG.item())
        print('[%d/%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f'
              % (epoch, opt.niter, i, len(dataloader),
                 errD.item(), errG.item(), D_x, D_G_z1, D_G_z2), file=sys.stderr)
        if i % 100 == 0:
            fake = netG(fixed_noise)  # the original saves it as an image

        if opt.dry_run or (opt.max_steps and len(losses_d) >= opt.max_steps):
            break
    if opt.dry_run or (opt.max_steps and len(losses_d) >= opt.max_steps):
        break

json.dump({
    "example": "dcgan",
    "init_sha256": init_sha,
    "fixed_noise_sha256": sha256_of([fixed_noise]),
    "losses": losses_d,
    "loss_g": losses_g,
    "final_sha256": sha256_of(list(netG.parameters()) + list(netD.parameters())),
}, sys.stdout)
print()
