"""Python LeNet-5 vs the spore CLI on Fashion-MNIST: epoch time in GRAPH_MODE and step time in
PYNATIVE_MODE, the same model, data pipeline, seed and optimizer on both sides (the Python side is
examples/python/lenet_fashion_mnist.py, a MindSpore script).

    PYTHONPATH=build/python python3 bench/python/bench_lenet.py --build build --limit 12800
Each side trains 2 epochs of --limit images; the second epoch is timed (the first compiles).
Prints the times and the ratios Python / C++ (targets: <= 1.15 in GRAPH_MODE, <= 1.5 per PyNative
step).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def cli_epoch_seconds(build, mode, limit, epochs):
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([os.path.join(build, "spore"), "train", "lenet", "--epochs", str(epochs), "--limit", str(limit),
                        "--eval-limit", "256", "--mode", mode, "--out", out], check=True, stdout=subprocess.DEVNULL)
        rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    return [r["seconds"] for r in rows]


def python_epoch_seconds(mode, limit, epochs):
    sys.path.insert(0, os.path.join(ROOT, "examples", "python"))
    import lenet_fashion_mnist as lenet
    import spore as ms

    class EpochTimes(ms.train.Callback):
        def __init__(self):
            self.seconds = []

        def on_train_epoch_end(self, run_context):
            self.seconds.append(run_context.original_args().epoch_elapsed)

    times = EpochTimes()
    orig = ms.train.Model.train

    def train(self, epoch, dataset, callbacks=None, **kw):  # add the timer to the example's callbacks
        return orig(self, epoch, dataset, callbacks=list(callbacks or []) + [times], **kw)

    ms.train.Model.train = train
    try:
        lenet.main(["--epochs", str(epochs), "--limit", str(limit), "--eval-limit", "256", "--mode", mode,
                    "--print-every", "100000"])
    finally:
        ms.train.Model.train = orig
    return times.seconds


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--limit", type=int, default=12800)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    steps = a.limit // 64
    res = {}
    for mode in ("graph", "pynative"):
        c = cli_epoch_seconds(a.build, mode, a.limit, a.epochs)[-1]
        py = python_epoch_seconds(mode, a.limit, a.epochs)[-1]
        res[mode] = {"cli_epoch_s": c, "python_epoch_s": py, "ratio": py / c, "cli_step_ms": 1000 * c / steps,
                     "python_step_ms": 1000 * py / steps}
        print(f"{mode:9s} epoch ({steps} steps of 64): C++ CLI {c:7.3f} s ({1000 * c / steps:6.2f} ms/step), "
              f"Python {py:7.3f} s ({1000 * py / steps:6.2f} ms/step), Python / C++ = {py / c:.3f}")
        sys.stdout.flush()
    print(f"targets: graph <= 1.15 (got {res['graph']['ratio']:.3f}), pynative step <= 1.5 "
          f"(got {res['pynative']['ratio']:.3f})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
