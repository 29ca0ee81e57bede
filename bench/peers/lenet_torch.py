#!/usr/bin/python3
"""PyTorch peer of `spore train lenet`: the same LeNet-5 (MindSpore model zoo layout: bias-free
convs, 28x28 input with conv1 padded by 2), the same data pipeline (Fashion-MNIST from the Debian
package, x/255 normalised with the data set's mean/std, shuffled every epoch, batch 64), the same
optimizer (Momentum 0.01/0.9). Prints one JSON line with images/s per epoch (data loading
included), test accuracy, and inference images/s at batch 256.

Run with Debian's interpreter (/usr/bin/python3 has python3-torch). Tuning as a careful user would
on a 2-core machine: torch.set_num_threads(2) and OPENBLAS_NUM_THREADS=1 in the environment
(otherwise OpenBLAS's pool and OpenMP's pool fight over the cores); --as-shipped skips both.
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST training-set statistics of x/255


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    dims = struct.unpack(">" + "I" * ndim, data[4 : 4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(data_dir, split):
    prefix = "train" if split == "train" else "t10k"
    def find(stem):
        for name in (stem + ".gz", stem):
            p = os.path.join(data_dir, name)
            if os.path.exists(p):
                return p
        sys.exit(f"missing {stem}(.gz) in {data_dir}")
    x = read_idx(find(f"{prefix}-images-idx3-ubyte"))
    y = read_idx(find(f"{prefix}-labels-idx1-ubyte"))
    return x, y.astype(np.int64)


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2, bias=False)
        self.conv2 = nn.Conv2d(6, 16, 5, bias=False)
        self.fc1 = nn.Linear(400, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2).flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def batches(x, y, batch, rng=None):
    idx = rng.permutation(len(x)) if rng is not None else np.arange(len(x))
    for i in range(0, len(x), batch):
        j = idx[i : i + batch]
        # the per-batch transform, as a data pipeline does it: uint8 HWC -> float CHW, normalised
        xb = torch.from_numpy(x[j].astype(np.float32)).unsqueeze(1).div_(255.0).sub_(MEAN).div_(STD)
        yield xb, torch.from_numpy(y[j])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=0, help="stop each epoch early (0: full)")
    ap.add_argument("--as-shipped", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if not args.as_shipped:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    xtr, ytr = load(args.data, "train")
    xte, yte = load(args.data, "test")
    net = LeNet5()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    ips = []
    for epoch in range(args.epochs):
        net.train()
        t0, n = time.perf_counter(), 0
        for step, (xb, yb) in enumerate(batches(xtr, ytr, args.batch_size, rng)):
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(net(xb), yb)
            loss.backward()
            opt.step()
            n += len(xb)
            if args.max_steps and step + 1 >= args.max_steps:
                break
        ips.append(n / (time.perf_counter() - t0))
    net.eval()
    correct = 0
    with torch.no_grad():
        for xb, yb in batches(xte, yte, 256):
            correct += int((net(xb).argmax(1) == yb).sum())
        xb = next(batches(xte, yte, 256))[0]
        for _ in range(3):
            net(xb)
        reps, t0 = 20, time.perf_counter()
        for _ in range(reps):
            net(xb)
        infer = reps * 256 / (time.perf_counter() - t0)
    print(json.dumps({"framework": "pytorch " + torch.__version__, "tuned": not args.as_shipped,
                      "train_images_per_s": ips, "test_accuracy": correct / len(xte),
                      "infer_images_per_s_b256": infer}))


if __name__ == "__main__":
    main()
