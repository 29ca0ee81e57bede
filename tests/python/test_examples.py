"""The MindSpore-style scripts in examples/python run (short settings) and learn."""
import os
import runpy
import sys

import numpy as np
import pytest

import spore as ms

FASHION = "/usr/share/datasets/fashion-mnist"
needs_fashion = pytest.mark.skipif(not os.path.isdir(FASHION), reason="dataset-fashion-mnist not installed")


def run_example(root, name, args):
    path = os.path.join(root, "examples", "python", name)
    with open(path) as f:
        src = f.read()
    # "only the import changed": no other Spore-specific import in the script
    imports = [line.strip() for line in src.splitlines() if line.startswith(("import ", "from "))]
    assert "import spore as ms" in imports
    assert all(i in ("import spore as ms", "import argparse", "import json", "import os", "import numpy as np")
               for i in imports), imports
    mod = runpy.run_path(path, run_name="example")
    old = sys.argv
    try:
        return mod["main"](args)
    finally:
        sys.argv = old


@needs_fashion
def test_lenet_model_train(root_dir, capfd):
    net, record, acc = run_example(root_dir, "lenet_fashion_mnist.py",
                                   ["--epochs", "1", "--limit", "5120", "--lr", "0.1", "--eval-limit", "512",
                                    "--print-every", "10", "--record-steps"])
    out = capfd.readouterr().out
    assert "epoch: 1 step: 10, loss is" in out and "per step time" in out
    assert len(record.steps) == 80
    assert np.mean(record.steps[-10:]) < np.mean(record.steps[:10]) - 0.2 and acc > 0.3


@needs_fashion
@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_custom_training_loop(root_dir, mode):
    losses, acc = run_example(root_dir, "custom_training_loop.py", ["--epochs", "1", "--limit", "1920",
                                                                    "--lr", "0.1", "--mode", mode])
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.3 and acc > 0.5


def test_generator_dataset_prefetch(root_dir):
    acc = run_example(root_dir, "generator_dataset.py", ["--samples", "960", "--epochs", "2"])
    assert acc > 0.8
    assert ms.dataset.config.get_prefetch_size() == 32


@needs_fashion
def test_amp_o2(root_dir):
    losses = run_example(root_dir, "amp_o2.py", ["--steps", "60"])
    assert np.isfinite(losses).all() and np.mean(losses[-10:]) < np.mean(losses[:10])


def test_linear_regression(root_dir, tmp_path):
    curve = tmp_path / "curve.csv"
    w, b, losses = run_example(root_dir, "linear_regression.py", ["--epochs", "8", "--curve", str(curve)])
    assert abs(w - 2) < 0.1 and abs(b - 3) < 0.5
    assert losses[-1] < 0.2 * losses[0] and losses[-1] < 1.6  # the noise has variance 1
    assert curve.read_text().splitlines()[0] == "epoch,loss" and len(curve.read_text().splitlines()) == 9


@pytest.mark.parametrize("mode,optimizer,epochs", [("pynative", "adam", 5), ("graph", "lamb", 10)])
def test_timeseries_lstm_forecast_beats_last_value(root_dir, tmp_path, mode, optimizer, epochs):
    r = run_example(root_dir, "timeseries/lstm_forecast.py",
                    ["--epochs", str(epochs), "--mode", mode, "--optimizer", optimizer, "--out", str(tmp_path)])
    assert r["mse"] < 0.5 * r["naive_mse"] and r["mae"] < r["naive_mae"], r
    assert r["epoch_losses"][-1] < 0.2 * r["epoch_losses"][0]
    loss = (tmp_path / "loss.csv").read_text().splitlines()
    forecast = (tmp_path / "forecast.csv").read_text().splitlines()
    assert loss[0] == "epoch,loss" and len(loss) == epochs + 1
    assert forecast[0] == "step,truth,forecast,naive" and len(forecast) == 1 + len(r["truth"]) == 241
    # forecast.csv holds what was scored: its MSE is Model.eval's
    rows = np.array([[float(v) for v in line.split(",")] for line in forecast[1:]])
    np.testing.assert_allclose(np.mean((rows[:, 2] - rows[:, 1]) ** 2), r["mse"], rtol=1e-4)


def test_yolov5_python_example_trains_and_scores(root_dir, build_dir, tmp_path, capfd):
    """examples/python/yolov5: the Python YOLOv5s (the model zoo's network: same parameter count)
    runs a short amp-O2 training on generated shapes and is scored by COCOeval (tiny settings: the
    figures beside `spore train yolov5s` are in docs/python.md)."""
    import subprocess
    cli = os.path.join(build_dir, "spore")
    if not os.path.exists(cli):
        pytest.skip(f"the spore CLI is not built ({cli})")
    data = str(tmp_path / "shapes")
    subprocess.run([cli, "data", "make-shapes", "--out", data, "--train", "8", "--val", "4", "--size", "64"],
                   check=True, capture_output=True)
    mod = runpy.run_path(os.path.join(root_dir, "examples", "python", "yolov5", "train.py"), run_name="example")
    stats, times = mod["main"](["--data", data, "--img", "64", "--epochs", "1", "--batch-size", "4",
                                "--mode", "pynative", "--workers", "1"])
    out = capfd.readouterr().out
    assert "yolov5s (Python): 7041205 parameters, 8 classes" in out  # the C++ yolov5s at 8 classes
    assert "Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ]" in out
    assert len(stats) == 12 and all(-1 <= s <= 1 for s in stats) and len(times) == 1
    loss = float(out.split("epoch 1/1: loss ")[1].split(",")[0])
    assert np.isfinite(loss) and loss > 0
