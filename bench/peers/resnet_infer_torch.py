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


from graph_train_torch import ResNet18Cifar  # the same model as the training peer (this folder)


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
