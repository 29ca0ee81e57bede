"""PyTorch eager on the GPU for bench/peers/cuda_models.cpp: the same LeNet-5 (batch 64) and
ResNet-18 with the CIFAR stem (batch 128), cross-entropy and SGD momentum 0.01/0.9, synthetic data
on the GPU, float32 (TF32 off: what Spore computes) and bfloat16 (autocast), timed the same way
(groups of steps closed by torch.cuda.synchronize(), the median per step). One JSON object per
line, with "mode": "eager". Also "channels_last" rows for ResNet-18 bfloat16 (the issue's goal
compares with PyTorch's best eager setting).
    python3 bench/peers/cuda_models_torch.py [--quick] [--filter substring]
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2).flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


class ResNet18Cifar(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.layers(F.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--filter", default="")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no GPU visible to PyTorch"}))
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda", 0)
    reps = 3 if args.quick else 5
    configs = [(m, dt, cl) for m in ("lenet", "resnet18") for dt in ("float32", "bfloat16") for cl in (False,)]
    configs.append(("resnet18", "bfloat16", True))
    for model, dtype, channels_last in configs:
        name = f"{model}/eager/{dtype}" + ("/channels_last" if channels_last else "")
        if args.filter and args.filter not in name:
            continue
        torch.manual_seed(0)
        resnet = model == "resnet18"
        n = 128 if resnet else 64
        net = (ResNet18Cifar() if resnet else LeNet5()).to(dev)
        x = torch.randn(n, 3, 32, 32, device=dev) if resnet else torch.randn(n, 1, 28, 28, device=dev)
        if channels_last:
            net = net.to(memory_format=torch.channels_last)
            x = x.to(memory_format=torch.channels_last)
        y = torch.randint(0, 10, (n,), device=dev)
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dtype == "bfloat16"):
                loss = F.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            return loss

        loss_first = step().item()
        step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        one = time.perf_counter() - t0
        iters = int(min(max((0.5 if args.quick else 1.5) / max(one, 1e-6), 3), 50))
        per_step, last = [], None
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(iters):
                last = step()
            torch.cuda.synchronize()
            per_step.append((time.perf_counter() - t0) / iters)
        s = statistics.median(per_step)
        rec = {"model": model, "mode": "eager" + ("_channels_last" if channels_last else ""), "dtype": dtype,
               "batch": n, "ms": round(s * 1e3, 3), "images_per_s": round(n / s, 1),
               "loss_first": round(loss_first, 5), "loss_last": round(last.item(), 5)}
        print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
