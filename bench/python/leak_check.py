"""RSS leak check for the Python front end: loops of training steps (PYNATIVE value_and_grad +
optimizer, a GRAPH_MODE @ms.jit step, a Python-subclassed TrainOneStepCell, a GeneratorDataset
pass with a Python map) and tensor round trips through numpy, measuring the resident set size.
Reference counts that leak (a Tensor, a numpy array, a tape node or a Python row per step) show up
as RSS growing with the step count.

    PYTHONPATH=build/python python3 bench/python/leak_check.py --steps 10000
Prints one line per loop: RSS after warm-up and after all steps, and the growth per 1000 steps.
"""
import argparse
import gc
import json
import sys

import numpy as np

import spore as ms


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


class MLP(ms.nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = ms.nn.Dense(32, 64)
        self.fc2 = ms.nn.Dense(64, 10)
        self.relu = ms.nn.ReLU()

    def construct(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def measure(name, step, steps, warmup):
    for i in range(warmup):
        step(i)
    gc.collect()
    start = rss_mib()
    for i in range(steps):
        step(i)
    gc.collect()
    end = rss_mib()
    per_1000 = (end - start) / steps * 1000
    print(f"{name:28s} steps {steps:6d}  RSS {start:8.1f} -> {end:8.1f} MiB  growth {per_1000:+.3f} MiB / 1000 steps")
    sys.stdout.flush()
    return {"loop": name, "steps": steps, "rss_start_mib": start, "rss_end_mib": end, "mib_per_1000": per_1000}


def run(steps, warmup=500):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((32, 32)).astype(np.float32)
    ys = rng.integers(0, 10, 32).astype(np.int32)
    results = []

    # 1. PYNATIVE: value_and_grad + optimizer, inputs from numpy each step, the loss read back.
    ms.set_context(mode=ms.PYNATIVE_MODE)
    net = MLP()
    loss_fn = ms.nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = ms.nn.Momentum(net.trainable_params(), 0.01, 0.9)
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, opt.parameters)

    def eager(i):
        loss, grads = grad_fn(ms.Tensor(xs), ms.Tensor(ys))
        opt(grads)
        loss.asnumpy()

    results.append(measure("pynative value_and_grad", eager, steps, warmup))

    # 2. GRAPH_MODE: a compiled @ms.jit training step.
    ms.set_context(mode=ms.GRAPH_MODE)

    @ms.jit
    def train_step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss

    def graph(i):
        train_step(ms.Tensor(xs), ms.Tensor(ys)).asnumpy()

    results.append(measure("graph jit train step", graph, steps, warmup))

    # 3. TrainOneStepCell over a Python cell (the trampoline), PyNative.
    ms.set_context(mode=ms.PYNATIVE_MODE)
    step_cell = ms.nn.TrainOneStepCell(ms.nn.WithLossCell(net, loss_fn), opt)

    def cell_step(i):
        float(step_cell(ms.Tensor(xs), ms.Tensor(ys)).asnumpy())

    results.append(measure("TrainOneStepCell (Python)", cell_step, steps, warmup))

    # 4. A dataset pass: a Python source and a Python map function, rows converted both ways.
    class Source:
        def __getitem__(self, i):
            return xs[i % 32], ys[i % 32]

        def __len__(self):
            return 1000

    data = ms.dataset.GeneratorDataset(Source(), ["x", "y"], shuffle=False)
    data = data.map(operations=[lambda x: x * 2], input_columns="x").batch(10)
    it = data.create_tuple_iterator()

    def data_step(i):
        row = next(it, None)
        if row is None:
            row = next(it)
        row[0].asnumpy()

    results.append(measure("GeneratorDataset + map", data_step, steps, warmup))
    return results


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10000)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    res = run(a.steps)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
