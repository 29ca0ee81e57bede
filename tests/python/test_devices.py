"""Devices from Python: a MindSpore-style training script runs on another device with only a
`ms.set_device(...)` line added. CI has no GPU, so it runs on the test device (the CPU's kernels on
memory the host may not touch; SPORE_TEST_DEVICE=1 registers it): every Tensor made from numpy,
every batch from the dataset, every Python scalar and every .asnumpy() must take the right path, or
the run crashes. Bit-equal losses with the CPU run prove nothing was computed elsewhere."""
import json
import os
import subprocess
import sys

import pytest

FASHION = "/usr/share/datasets/fashion-mnist"
needs_fashion = pytest.mark.skipif(not os.path.isdir(FASHION), reason="dataset-fashion-mnist not installed")

# Runs an example's main() after set_device(target): the script itself is unchanged.
RUNNER = """
import json, runpy, sys
import spore as ms
target, path, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
ms.set_device(target)
losses, acc = runpy.run_path(path, run_name="example")["main"](args)
print("RESULT " + json.dumps({"losses": [float(x) for x in losses], "acc": float(acc),
                              "device": ms.get_context("device_target"), "num": ms.get_context("device_num")}))
"""


def run_on(target, root_dir, build_dir, args):
    env = dict(os.environ, SPORE_TEST_DEVICE="1", OMP_NUM_THREADS="2")
    env["PYTHONPATH"] = os.path.join(build_dir, "python") + os.pathsep + env.get("PYTHONPATH", "")
    script = os.path.join(root_dir, "examples", "python", "custom_training_loop.py")
    r = subprocess.run([sys.executable, "-c", RUNNER, target, script, json.dumps(args)], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


@needs_fashion
@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_custom_training_loop_on_the_test_device(root_dir, build_dir, mode):
    args = ["--epochs", "1", "--limit", "640", "--lr", "0.1", "--mode", mode]
    cpu = run_on("CPU", root_dir, build_dir, args)
    dev = run_on("Test", root_dir, build_dir, args)
    assert dev["device"] == "Test" and dev["num"] == 1
    assert len(dev["losses"]) == len(cpu["losses"]) > 0
    if mode == "pynative":  # the same kernels on the same inputs
        assert dev["losses"] == cpu["losses"] and dev["acc"] == cpu["acc"]
    else:  # the CPU's own graph passes change summation order
        for a, b in zip(cpu["losses"], dev["losses"]):
            assert abs(a - b) <= 1e-4 * max(1.0, abs(a))


def test_tensor_api_on_the_test_device(build_dir):
    code = """
import numpy as np
import spore as ms
ms.set_device("Test")
x = ms.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
assert x.device == "Test:0", x.device
y = x * 2.0 + 1                       # Python scalars join as host scalars
assert (y.asnumpy() == np.arange(6).reshape(2, 3) * 2 + 1).all()
assert float(y.sum().asnumpy()) == 36.0
c = y.move_to("CPU")
assert c.device == "CPU:0" and (c.asnumpy() == y.asnumpy()).all()
assert np.from_dlpack(y).shape == (2, 3)
try:
    ms.ops.add(c, y)
except RuntimeError as e:
    assert "CPU:0" in str(e) and "Test:0" in str(e), e
else:
    raise AssertionError("mixing devices did not raise")
print("OK")
"""
    env = dict(os.environ, SPORE_TEST_DEVICE="1")
    env["PYTHONPATH"] = os.path.join(build_dir, "python") + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]
