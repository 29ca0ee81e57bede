#!/usr/bin/python3
"""PyTorch eager peer of bench/micro/graph_train.cpp (bench/peers/graph_train.sh): one training
step (forward, cross-entropy, backward, SGD momentum 0.01/0.9 step) on synthetic data, for
LeNet-5 at batch 64 (MindSpore zoo layout: bias-free convs, conv1 padded by 2) and ResNet-18 with
the CIFAR stem at batch 32 (3x3 stem conv, no max-pool, basic blocks [2, 2, 2, 2], bias-free
convs, BatchNorm eps 1e-4, 1x1 projection shortcuts, global average pool, Dense 512 -> 10).

Prints one JSON line: per model the step time in ms of each repetition (each repetition the mean
of `steps` steps after warm-up). Run with Debian's interpreter (/usr/bin/python3 has torch 1.13);
thread settings come from the caller (torch.set_num_threads(--threads), environment variables).
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


from lenet_torch import LeNet5  # the same model as the training-job peer (this folder)


def bn(c):
    return nn.BatchNorm2d(c, eps=1e-4, momentum=0.1)  # MindSpore momentum 0.9 = PyTorch 0.1


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = bn(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = bn(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), bn(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (self.down(x) if self.down is not None else x))


class ResNet18Cifar(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), bn(64), nn.ReLU())
        layers, cin = [], 64
        for i, cout in enumerate([64, 128, 256, 512]):
            for b in range(2):
                layers.append(Block(cin, cout, 2 if (b == 0 and i > 0) else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        return self.fc(self.layers(self.stem(x)).mean((2, 3)))


def step_times(net, shape, steps, reps, warmup):
    torch.manual_seed(0)
    x, y = torch.randn(shape), torch.randint(0, 10, (shape[0],))
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    net.train()

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(net(x), y).backward()
        opt.step()

    for _ in range(warmup):
        step()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        out.append(1e3 * (time.perf_counter() - t0) / steps)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--lenet-steps", type=int, default=200)
    ap.add_argument("--resnet-steps", type=int, default=4)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    res = {"framework": "pytorch " + torch.__version__, "threads": args.threads,
           "lenet5_b64_ms": step_times(LeNet5(), (64, 1, 28, 28), args.lenet_steps, args.reps, 20),
           "resnet18_b32_ms": step_times(ResNet18Cifar(), (32, 3, 32, 32), args.resnet_steps, args.reps, 2)}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
