"""ONNX export cross-check, run by ctest (onnx_crosscheck) with the spore CLI:

    onnx_crosscheck.py SPORE_BIN WORK_DIR [--make-fixtures]

For LeNet-5, the MLP, ResNet-18 and YOLOv5s (64 px; its decoded predictions) (initial weights,
fixed seed): `spore export` writes the
ONNX model and the network's own output on a fixed input. With `onnxruntime` importable, ONNX
Runtime runs the model on that input (batch 2) and on another batch size (the batch is dynamic):
its outputs equal Spore's to 1e-4. Without it, the outputs ONNX Runtime gave when the fixtures
were made (tests/onnx/fixtures) are the reference. Either way `spore infer` runs the exported
model through Spore's ONNX importer and must agree too.
"""
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FIX = HERE / "fixtures"
MODELS = {"lenet": (1, 28, 28), "mlp": (1, 28, 28), "resnet18": (3, 32, 32), "yolov5s": (3, 64, 64)}
TOL = 1e-4


def run(*cmd):
    import subprocess
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAILED: {' '.join(map(str, cmd))}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def main():
    spore, work = sys.argv[1], Path(sys.argv[2])
    make = "--make-fixtures" in sys.argv
    work.mkdir(parents=True, exist_ok=True)
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
        print("onnxruntime not importable; comparing with the outputs it gave when the fixtures were made")
    for name, chw in MODELS.items():
        x = np.random.RandomState(0).standard_normal((2, *chw)).astype(np.float32)
        np.save(work / "x.npy", x)
        onnx = work / f"{name}.onnx"
        extra = ["--img", str(chw[1])] if name.startswith("yolov5") else []
        run(spore, "export", name, "--out", onnx, "--input", work / "x.npy", "--output", work / "native.npy", *extra)
        native = np.load(work / "native.npy")
        run(spore, "infer", onnx, "--input", work / "x.npy", "--output", work / "imported.npy")
        imported = np.load(work / "imported.npy")
        e_imp = float(np.abs(imported - native).max())
        assert e_imp <= TOL, f"{name}: spore infer on the exported model differs from the network by {e_imp}"
        if ort is not None:
            sess = ort.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
            ref = sess.run(None, {"input": x})[0]
            x5 = np.random.RandomState(1).standard_normal((5, *chw)).astype(np.float32)
            y5 = sess.run(None, {"input": x5})[0]
            assert y5.shape == (5, *ref.shape[1:]), f"{name}: dynamic batch: ONNX Runtime gave shape {y5.shape} for batch 5"
            assert np.abs(y5[:2] - sess.run(None, {"input": x5[:2]})[0]).max() <= TOL
            if make:
                np.save(FIX / f"ort_{name}.npy", ref)
        else:
            ref = np.load(FIX / f"ort_{name}.npy")
        err = float(np.abs(native - ref).max())
        assert err <= TOL, (f"{name}: Spore's output and ONNX Runtime's differ by {err} (with fixtures: did the "
                            "initial weights change? regenerate with --make-fixtures where onnxruntime is installed)")
        print(f"{name}: ONNX Runtime{'' if ort else ' (fixture)'} vs Spore max error {err:.2e}; "
              f"spore infer vs Spore {e_imp:.2e}")
    check_npz(spore, work)
    print("onnx cross-check: passed")


def check_npz(spore, work):
    """spore infer with .npz in and out: a two-input model (inputs fed by name) and a three-output
    one (outputs written by name), from the ONNX node tests Debian ships."""
    node = Path("/usr/share/libonnx-testdata/data/node")
    if not node.is_dir():
        print("libonnx-testdata not installed; .npz leg skipped")
        return
    rng = np.random.RandomState(2)
    x, y = rng.standard_normal((3, 4, 5)).astype(np.float32), rng.standard_normal((3, 4, 5)).astype(np.float32)
    np.savez(work / "add_in.npz", y=y, x=x)  # by name, in any order
    run(spore, "infer", node / "test_add" / "model.onnx", "--input", work / "add_in.npz", "--output", work / "add_out.npz")
    out = np.load(work / "add_out.npz")
    assert out.files == ["sum"] and np.abs(out["sum"] - (x + y)).max() == 0, out.files
    np.savez_compressed(work / "split_in.npz", np.arange(6, dtype=np.float32))  # one input: any name
    model = node / "test_split_equal_parts_1d" / "model.onnx"
    run(spore, "infer", model, "--input", work / "split_in.npz", "--output", work / "split_out.npz")
    out = np.load(work / "split_out.npz")
    assert out.files == ["output_1", "output_2", "output_3"], out.files
    assert [out[k].tolist() for k in out.files] == [[0, 1], [2, 3], [4, 5]]
    import subprocess
    r = subprocess.run([str(spore), "infer", str(model), "--input", str(work / "split_in.npz"), "--output",
                        str(work / "split_out.npy")], capture_output=True, text=True)
    assert r.returncode != 0 and "out.npz" in r.stderr, r.stderr
    # The one array of a one-input model may have any name, and the run says which it took.
    r = subprocess.run([str(spore), "infer", str(model), "--input", str(work / "split_in.npz"), "--output",
                        str(work / "split_out.npz")], capture_output=True, text=True)
    assert r.returncode == 0 and "takes" in r.stderr and "'arr_0'" in r.stderr, r.stderr
    # An array no input takes (a misspelt name) is refused, naming it and the inputs.
    np.savez(work / "extra_in.npz", x=x, y=y, z=x)
    r = subprocess.run([str(spore), "infer", str(node / "test_add" / "model.onnx"), "--input",
                        str(work / "extra_in.npz"), "--output", str(work / "o.npz")], capture_output=True, text=True)
    assert r.returncode != 0 and "'z'" in r.stderr and "'x', 'y'" in r.stderr, r.stderr
    # --output's name says the format written: y.txt is refused before the model runs.
    r = subprocess.run([str(spore), "infer", str(node / "test_add" / "model.onnx"), "--input",
                        str(work / "add_in.npz"), "--output", str(work / "y.txt")], capture_output=True, text=True)
    assert r.returncode != 0 and "y.txt" in r.stderr and ".npy" in r.stderr, r.stderr
    assert not (work / "y.txt").exists()
    print("spore infer .npz in / out: passed")


if __name__ == "__main__":
    main()
