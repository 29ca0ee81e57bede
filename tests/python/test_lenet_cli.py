"""Same seed, same data: the Python LeNet-5 run (examples/python/lenet_fashion_mnist.py, a
MindSpore script with `import spore as ms`) gives the spore CLI's losses and final weights, to
1e-5, in GRAPH_MODE and PYNATIVE_MODE.

Both run as processes with the convolution kernels fixed (SPORE_CONV_IMPL=onednn_blocked):
by default each process times the candidate kernels on its first call and keeps the fastest, and
two kernels sum in different orders (the CLI differs from itself across runs then too)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import spore as ms

FASHION = "/usr/share/datasets/fashion-mnist"
LIMIT, EPOCHS = 3200, 2  # 50 steps of 64 per epoch


@pytest.mark.skipif(not os.path.isdir(FASHION), reason="dataset-fashion-mnist not installed")
@pytest.mark.parametrize("mode", ["graph", "pynative"])
def test_python_lenet_matches_cli(mode, tmp_path, build_dir, root_dir):
    env = dict(os.environ, SPORE_CONV_IMPL="onednn_blocked", OMP_NUM_THREADS="2")
    common = ["--epochs", str(EPOCHS), "--limit", str(LIMIT), "--eval-limit", "256", "--mode", mode, "--seed", "1"]
    out = tmp_path / "cli"
    subprocess.run([os.path.join(build_dir, "spore"), "train", "lenet", *common, "--out", str(out)], check=True,
                   stdout=subprocess.DEVNULL, env=env)
    cli_epochs = [json.loads(line) for line in open(out / "metrics.jsonl")]

    losses, ckpt = tmp_path / "py.json", tmp_path / "py.ckpt"
    subprocess.run([sys.executable, os.path.join(root_dir, "examples", "python", "lenet_fashion_mnist.py"), *common,
                    "--print-every", "1000", "--record-steps", "--losses-json", str(losses), "--ckpt", str(ckpt)],
                   check=True, stdout=subprocess.DEVNULL, env=env)
    py = json.load(open(losses))
    steps_per_epoch = LIMIT // 64
    assert len(py["steps"]) == EPOCHS * steps_per_epoch
    for e in range(EPOCHS):
        step_mean = float(np.mean(py["steps"][e * steps_per_epoch:(e + 1) * steps_per_epoch]))
        assert abs(py["epochs"][e] - cli_epochs[e]["loss"]) < 1e-5, (e, py["epochs"], cli_epochs)
        assert abs(step_mean - cli_epochs[e]["loss"]) < 1e-5
    assert abs(py["accuracy"] - cli_epochs[-1]["accuracy"]) < 1e-9
    assert py["epochs"][-1] < py["epochs"][0]  # it trained

    cli_weights = ms.load_checkpoint(str(out / "lenet.safetensors"))
    py_weights = ms.load_checkpoint(str(ckpt))
    names = sorted(k for k, v in py_weights.items() if isinstance(v, ms.Tensor))
    assert names == sorted(k for k, v in cli_weights.items() if isinstance(v, ms.Tensor))
    assert "conv1.weight" in names and "fc3.bias" in names
    for name in names:
        np.testing.assert_allclose(py_weights[name].asnumpy(), cli_weights[name].asnumpy(), rtol=0, atol=1e-5,
                                   err_msg=name)
