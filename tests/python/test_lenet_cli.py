"""Same seed, same data: the Python LeNet-5 run (examples/python/lenet_fashion_mnist.py, a
MindSpore script with `import spore as ms`) gives the spore CLI's losses and final weights, to
1e-5, in GRAPH_MODE and PYNATIVE_MODE."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import spore as ms

FASHION = "/usr/share/datasets/fashion-mnist"
LIMIT, EPOCHS = 1280, 2  # 20 steps of 64 per epoch


@pytest.mark.skipif(not os.path.isdir(FASHION), reason="dataset-fashion-mnist not installed")
@pytest.mark.parametrize("mode", ["graph", "pynative"])
def test_python_lenet_matches_cli(mode, tmp_path, build_dir, root_dir):
    cli = os.path.join(build_dir, "spore")
    out = tmp_path / "cli"
    subprocess.run([cli, "train", "lenet", "--epochs", str(EPOCHS), "--limit", str(LIMIT), "--eval-limit", "256",
                    "--mode", mode, "--seed", "1", "--out", str(out)], check=True, stdout=subprocess.DEVNULL)
    cli_epochs = [json.loads(line) for line in open(out / "metrics.jsonl")]

    sys.path.insert(0, os.path.join(root_dir, "examples", "python"))
    try:
        import lenet_fashion_mnist as lenet
    finally:
        sys.path.pop(0)
    net, record, acc = lenet.main(["--epochs", str(EPOCHS), "--limit", str(LIMIT), "--eval-limit", "256",
                                   "--mode", mode, "--seed", "1", "--print-every", "1000"])
    assert len(record.steps) == EPOCHS * LIMIT // 64
    py_epoch_means = [float(np.mean(record.steps[i * 20:(i + 1) * 20])) for i in range(EPOCHS)]
    for e in range(EPOCHS):
        assert abs(record.epochs[e] - cli_epochs[e]["loss"]) < 1e-5, (e, record.epochs, cli_epochs)
        assert abs(py_epoch_means[e] - cli_epochs[e]["loss"]) < 1e-5
    assert abs(acc - cli_epochs[-1]["accuracy"]) < 1e-9

    cli_weights = ms.load_checkpoint(str(out / "lenet.safetensors"))
    names = [n for n, _ in net.parameters_and_names()]
    assert sorted(names) == sorted(k for k, v in cli_weights.items() if isinstance(v, ms.Tensor))
    for name, p in net.parameters_and_names():
        np.testing.assert_allclose(p.asnumpy(), cli_weights[name].asnumpy(), rtol=0, atol=1e-5, err_msg=name)
