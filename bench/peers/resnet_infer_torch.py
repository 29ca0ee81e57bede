#!/usr/bin/python3
"""PyTorch peer of bench_resnet_infer: ResNet-18 with the CIFAR stem (3x3 stride-1 conv, no max
pool; 3x32x32 input, 10 classes; bias-free convs, BatchNorm eps 1e-4, as models/resnet.cpp) in
eval mode, inference at batch 1 and 128, eager and TorchScript (torch.jit.trace +
torch.jit.freeze, which folds BatchNorm into the convs). Prints one JSON line with the median
milliseconds per batch over --runs timed runs (each the mean of a few calls).

Run with Debian's interpreter (/usr/bin/python3 has python3-torch 1.13). Tuned as a careful user
would on a 2-core machine: torch.set_num_threads(2), OPENBLAS_NUM_THREADS=1 in the environment.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout, eps=1e-4)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, eps=1e-4)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, 0, bias=False),
                                      nn.BatchNorm2d(cout, eps=1e-4))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


class ResNet18Cifar(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64, eps=1e-4),
                                  nn.ReLU())
        layers, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        y = self.layers(self.stem(x))
        return self.fc(y.mean((2, 3)))


def time_ms(fn, x, runs, calls):
    with torch.no_grad():
        for _ in range(2):
            fn(x)  # warm-up (TorchScript optimises on the first two calls)
        per_run = []
        for _ in range(runs):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn(x)
            per_run.append((time.perf_counter() - t0) * 1e3 / calls)
    return statistics.median(per_run)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = ResNet18Cifar().eval()
    for m in model.modules():  # non-trivial statistics, so BatchNorm does work
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 2.0)
    out = {"threads": args.threads, "torch": torch.__version__}
    for batch, calls in ((1, 20), (128, 1)):
        x = torch.randn(batch, 3, 32, 32)
        with torch.no_grad():
            script = torch.jit.freeze(torch.jit.trace(model, x))
            ref = model(x)
            assert torch.allclose(script(x), ref, rtol=1e-3, atol=1e-4), "TorchScript differs from eager"
        out[f"eager_ms_b{batch}"] = time_ms(model, x, args.runs, calls)
        out[f"torchscript_ms_b{batch}"] = time_ms(script, x, args.runs, calls)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
