"""Deployment (docs/deploy.md): ms.export(file_format="MINDIR") writes Spore's compiled model file, ms.load +
nn.GraphCell run it, and the same file gives the network's outputs from the CLI (`spore infer`), from C
(examples/c/run_model.c, built here with cc against libspore_c) and through ctypes; the C API's error paths
(tests/capi/capi_errors.c) return their status with a message naming the problem."""
import ctypes
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import spore as ms
from spore import nn


class LeNet5(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, pad_mode="valid")
        self.conv2 = nn.Conv2d(6, 16, 5, pad_mode="valid")
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Dense(16 * 4 * 4, 120)
        self.fc2 = nn.Dense(120, 84)
        self.fc3 = nn.Dense(84, 10)

    def construct(self, x):
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        x = self.relu(self.fc1(self.flatten(x)))
        return self.fc3(self.relu(self.fc2(x)))


def _x(n, seed=0):
    return np.random.RandomState(seed).randn(n, 1, 28, 28).astype(np.float32)


@pytest.fixture
def lenet_file(tmp_path):
    net = LeNet5()
    net.set_train(False)
    path = ms.export(net, ms.Tensor(np.zeros((1, 1, 28, 28), np.float32)), file_name=str(tmp_path / "lenet"),
                     file_format="MINDIR", batches=[1, 4])
    return net, path


def _close(a, b):
    return np.abs(a - b).max() <= 1e-5 * max(1.0, np.abs(b).max())


def test_export_load_graphcell_equals_the_network(lenet_file):
    net, path = lenet_file
    assert path.endswith(".mindir")
    graph = ms.load(path)
    assert graph.inputs[0][1] == (-1, 1, 28, 28) and graph.outputs[0][1] == (-1, 10)
    assert graph.batches == [1, 4]
    cell = nn.GraphCell(graph)
    for n in (1, 4, 6):  # 6: chunks of the compiled batches
        x = _x(n, n)
        assert _close(cell(ms.Tensor(x)).asnumpy(), net(ms.Tensor(x)).asnumpy()), n
    ms.set_context(mode=ms.GRAPH_MODE)  # a compiled graph runs the same in either mode
    assert _close(cell(ms.Tensor(_x(2))).asnumpy(), net(ms.Tensor(_x(2))).asnumpy())


def test_graphcell_wrong_inputs_and_bad_files_are_errors(lenet_file, tmp_path):
    _, path = lenet_file
    cell = nn.GraphCell(ms.load(path))
    with pytest.raises(ValueError, match=r'input "input" must have shape \(N, 1, 28, 28\), got \(1, 3, 28, 28\)'):
        cell(ms.Tensor(np.zeros((1, 3, 28, 28), np.float32)))
    with pytest.raises(TypeError, match="must be float32, got float64"):
        cell(ms.Tensor(np.zeros((1, 1, 28, 28), np.float64)))
    bad = tmp_path / "bad.mindir"
    bad.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="not a Spore compiled model file"):
        ms.load(str(bad))
    cut = tmp_path / "cut.mindir"
    cut.write_bytes(open(path, "rb").read()[:-100])
    with pytest.raises(OSError, match="field file_size"):
        ms.load(str(cut))
    with pytest.raises(ValueError, match="file_format must be 'MINDIR' or 'ONNX'"):
        ms.export(LeNet5(), ms.Tensor(_x(1)), file_name=str(tmp_path / "x"), file_format="AIR")


def _cli(build_dir, *args):
    r = subprocess.run([os.path.join(build_dir, "spore"), *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_cli_runs_the_exported_files(lenet_file, build_dir, tmp_path):
    net, path = lenet_file
    x = _x(3, 7)
    want = net(ms.Tensor(x)).asnumpy()
    np.save(tmp_path / "x.npy", x)
    out = _cli(build_dir, "infer", path, "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"))
    assert "load to first result" in out
    assert _close(np.load(tmp_path / "y.npy"), want)
    info = _cli(build_dir, "info", path)
    assert "input:      input float32 (N, 1, 28, 28)" in info and "graph:      batch 4" in info
    # ONNX export, then `spore compile` of that ONNX file: the same outputs again.
    onnx = ms.export(net, ms.Tensor(np.zeros((1, 1, 28, 28), np.float32)), file_name=str(tmp_path / "lenet"),
                     file_format="ONNX")
    _cli(build_dir, "compile", onnx, "--batch", "1,2", "-o", str(tmp_path / "from_onnx.spore"))
    _cli(build_dir, "infer", str(tmp_path / "from_onnx.spore"), "--input", str(tmp_path / "x.npy"), "--output",
         str(tmp_path / "y2.npy"))
    assert _close(np.load(tmp_path / "y2.npy"), want)
    # --device: the ONNX model runs there (the test device: the CPU's kernels on memory the host
    # cannot touch), its outputs copied back; a compiled file is refused on another device.
    env = dict(os.environ, SPORE_TEST_DEVICE="1")
    for mode in ("graph", "pynative"):
        r = subprocess.run([os.path.join(build_dir, "spore"), "infer", onnx, "--device", "Test", "--mode", mode,
                            "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y3.npy")],
                           capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr
        assert _close(np.load(tmp_path / "y3.npy"), want)
    r = subprocess.run([os.path.join(build_dir, "spore"), "infer", str(tmp_path / "from_onnx.spore"), "--device",
                        "Test", "--input", str(tmp_path / "x.npy")], capture_output=True, text=True, timeout=300,
                       env=env)
    assert r.returncode != 0 and "is compiled for the CPU" in r.stderr and "--device Test" in r.stderr, r.stderr
    # Compiled for the device (format 3): its weights load onto it, and it gives the same outputs.
    test_spore = str(tmp_path / "for_test.spore")
    r = subprocess.run([os.path.join(build_dir, "spore"), "compile", onnx, "--batch", "1,2", "--device", "Test",
                        "-o", test_spore], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and "for the Test" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([os.path.join(build_dir, "spore"), "info", test_spore], capture_output=True, text=True,
                       timeout=300, env=env)
    assert "target:     Test" in r.stdout and "version 3" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([os.path.join(build_dir, "spore"), "infer", test_spore, "--device", "Test", "--input",
                        str(tmp_path / "x.npy"), "--output", str(tmp_path / "y4.npy")], capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert _close(np.load(tmp_path / "y4.npy"), want)
    # Without the device in the process: an error that names it, not a crash.
    r = subprocess.run([os.path.join(build_dir, "spore"), "info", test_spore], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode != 0 and "compiled for the Test" in r.stderr, r.stderr


def _cc(root_dir, build_dir, src, exe):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", exe, src, "-I" + os.path.join(root_dir,
                    "include"), "-L" + build_dir, "-lspore_c", "-lpthread", "-Wl,-rpath," + build_dir],
                   check=True, timeout=120)


def test_c_example_and_c_api_errors(lenet_file, root_dir, build_dir, tmp_path):
    net, path = lenet_file
    exe = str(tmp_path / "run_model")
    _cc(root_dir, build_dir, os.path.join(root_dir, "examples", "c", "run_model.c"), exe)
    x = _x(5, 3)
    x.tofile(tmp_path / "x.f32")
    r = subprocess.run([exe, path, str(tmp_path / "x.f32"), str(tmp_path / "y.f32")], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "output 0 shape (5, 10)" in r.stdout
    y = np.fromfile(tmp_path / "y.f32", dtype=np.float32).reshape(5, 10)
    assert _close(y, net(ms.Tensor(x)).asnumpy())
    errs = str(tmp_path / "capi_errors")
    _cc(root_dir, build_dir, os.path.join(root_dir, "tests", "capi", "capi_errors.c"), errs)
    r = subprocess.run([errs, path], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failure(s)" in r.stdout


def test_export_on_a_device_compiles_for_it(tmp_path):
    """ms.export of a network on a device (the test device here) compiles the model for that device: its
    weights load there, GraphCell runs it, and the outputs equal the network's own."""
    code = r"""
import numpy as np, sys
sys.path.insert(0, sys.argv[1])
import spore as ms
from spore import nn
from test_deploy import LeNet5, _x, _close
ms.set_device("Test")
ms.set_seed(1)
net = LeNet5()
net.set_train(False)
x = _x(3, 5)
want = net(ms.Tensor(x)).asnumpy()
example = ms.Tensor(np.zeros((1, 1, 28, 28), np.float32)).move_to("CPU")  # moved to the network's device
path = ms.export(net, example, file_name=sys.argv[2], file_format="MINDIR", batches=[1, 2])
graph = ms.load(path)
assert graph.device == "Test", graph.device
assert "target:     Test" in graph.summary()
got = nn.GraphCell(graph)(ms.Tensor(x))
assert got.device.startswith("Test"), got.device
assert _close(got.asnumpy(), want), np.abs(got.asnumpy() - want).max()
print("ok")
"""
    env = dict(os.environ, SPORE_TEST_DEVICE="1")
    r = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__), str(tmp_path / "lenet_test")],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


def test_c_api_device_buffers(lenet_file, root_dir, build_dir, tmp_path):
    """A model compiled for a device (the test device here) from C: host buffers, device buffers
    (spore_buffer_*), run_async, and the errors of buffers that do not fit."""
    net, _ = lenet_file
    onnx = ms.export(net, ms.Tensor(np.zeros((1, 1, 28, 28), np.float32)), file_name=str(tmp_path / "lenet"),
                     file_format="ONNX")
    env = dict(os.environ, SPORE_TEST_DEVICE="1")
    spore = os.path.join(build_dir, "spore")
    for out, extra in (("cpu.spore", []), ("test.spore", ["--device", "Test"])):
        subprocess.run([spore, "compile", onnx, "--batch", "1,2", "-o", str(tmp_path / out)] + extra, check=True,
                       capture_output=True, timeout=300, env=env)
    exe = str(tmp_path / "capi_device")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", exe,
                    os.path.join(root_dir, "tests", "capi", "capi_device.c"), "-I" + os.path.join(root_dir, "include"),
                    "-L" + build_dir, "-lspore_c", "-lm", "-Wl,-rpath," + build_dir], check=True, timeout=120)
    r = subprocess.run([exe, str(tmp_path / "test.spore"), str(tmp_path / "cpu.spore")], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0 and "0 failure(s)" in r.stdout, r.stdout + r.stderr
    assert "device model target: Test" in r.stdout


def test_ctypes_smoke(lenet_file, build_dir):
    net, path = lenet_file
    lib = ctypes.CDLL(os.path.join(build_dir, "libspore_c.so"))
    lib.spore_last_error.restype = ctypes.c_char_p
    lib.spore_version.restype = ctypes.c_char_p
    assert lib.spore_c_api_version() == 2
    assert lib.spore_version().decode() == ms.__version__
    rt, model, ctx = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    assert lib.spore_runtime_create(0, ctypes.byref(rt)) == 0
    assert lib.spore_model_load_file(rt, b"/nonexistent.spore", ctypes.byref(model)) == 2  # SPORE_ERROR_IO
    assert b"/nonexistent.spore" in lib.spore_last_error()
    assert lib.spore_model_load_file(rt, path.encode(), ctypes.byref(model)) == 0, lib.spore_last_error()
    assert lib.spore_context_create(model, ctypes.byref(ctx)) == 0
    x = _x(2, 11)
    shape = (ctypes.c_int64 * 4)(2, 1, 28, 28)
    lib.spore_context_set_input.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                                            ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t]
    assert lib.spore_context_set_input(ctx, 0, x.ctypes.data, x.nbytes, 7, shape, 4) == 0, lib.spore_last_error()
    assert lib.spore_context_run(ctx) == 0, lib.spore_last_error()
    y = np.zeros((2, 10), np.float32)
    lib.spore_context_get_output.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
    assert lib.spore_context_get_output(ctx, 0, y.ctypes.data, y.nbytes) == 0
    assert _close(y, net(ms.Tensor(x)).asnumpy())
    bad = (ctypes.c_int64 * 4)(2, 1, 27, 28)
    assert lib.spore_context_set_input(ctx, 0, x.ctypes.data, x.nbytes, 7, bad, 4) == 3  # SPORE_ERROR_SHAPE
    assert b"must have shape (N, 1, 28, 28), got (2, 1, 27, 28)" in lib.spore_last_error()
    assert lib.spore_context_destroy(ctx) == 0 and lib.spore_model_destroy(model) == 0
    assert lib.spore_runtime_destroy(rt) == 0
