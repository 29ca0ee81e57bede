"""MindSpore .ckpt cross-check, run by ctest (mindspore_crosscheck) with the spore CLI:

    mindspore_crosscheck.py SPORE_BIN WORK_DIR [--make-fixtures]

With a Python that has `mindspore` (this one, or $SPORE_MINDSPORE_PYTHON):
  1. Spore trains LeNet-5 briefly and converts its checkpoint to .ckpt (spore convert);
  2. MindSpore loads it (load_checkpoint + load_param_into_net into the zoo's LeNet-5): its test
     accuracy equals `spore eval`'s on the same .ckpt, and its logits equal Spore's to 1e-5
     (Spore's: spore export + spore infer);
  3. MindSpore saves the net (save_checkpoint): Spore loads that file, same logits and accuracy;
     and Spore's writer reproduces MindSpore's bytes exactly (convert .ckpt -> safetensors -> .ckpt).
--make-fixtures then stores MindSpore's file, logits and accuracy in tests/io/fixtures/mindspore.
Without mindspore the same checks run against those committed fixtures.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FIX = HERE / "fixtures" / "mindspore"
N_TEST = 1000


def mindspore_python():
    for py in (sys.executable, os.environ.get("SPORE_MINDSPORE_PYTHON", "")):
        if py and subprocess.run([py, "-c", "import mindspore"], capture_output=True).returncode == 0:
            return py
    return None


def run(*cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAILED: {' '.join(map(str, cmd))}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def spore_accuracy(spore, ckpt):
    out = run(spore, "eval", "lenet", "--ckpt", ckpt, "--limit", N_TEST)
    return float(re.search(r"accuracy ([0-9.]+)", out).group(1))


def spore_logits(spore, ckpt, x, work):
    run(spore, "export", "lenet", "--ckpt", ckpt, "--out", work / "lenet.onnx")
    run(spore, "infer", work / "lenet.onnx", "--input", x, "--output", work / "spore_logits.npy")
    return np.load(work / "spore_logits.npy")


def check(spore, ms_ckpt, ms_logits, ms_acc, x, work):
    """Spore on MindSpore's file: logits to 1e-5, the same accuracy, and the same bytes written back."""
    got = spore_logits(spore, ms_ckpt, x, work)
    err = float(np.abs(got - ms_logits).max())
    assert err <= 1e-5, f"Spore's logits from {ms_ckpt} differ from MindSpore's by {err}"
    acc = spore_accuracy(spore, ms_ckpt)
    assert abs(acc - ms_acc) <= 1.0 / N_TEST + 1e-9, f"accuracy: Spore {acc}, MindSpore {ms_acc}"
    run(spore, "convert", ms_ckpt, work / "rt.safetensors")
    run(spore, "convert", work / "rt.safetensors", work / "rt.ckpt")
    same = (work / "rt.ckpt").read_bytes() == Path(ms_ckpt).read_bytes()
    assert same, "Spore's .ckpt writer does not reproduce MindSpore's bytes"
    print(f"MindSpore-written .ckpt in Spore: logits max error {err:.2e}, accuracy {acc:.4f} "
          f"(MindSpore {ms_acc:.4f}), rewritten byte for byte")


def main():
    spore, work = sys.argv[1], Path(sys.argv[2])
    make = "--make-fixtures" in sys.argv
    work.mkdir(parents=True, exist_ok=True)
    py = mindspore_python()
    if py is None:
        print("mindspore not importable (set SPORE_MINDSPORE_PYTHON to a Python that has it); checking the "
              "committed fixtures MindSpore 2.x made")
        acc = float((FIX / "accuracy.txt").read_text().split()[1])
        check(spore, FIX / "lenet_ms.ckpt", np.load(FIX / "logits.npy"), acc, FIX / "x.npy", work)
        print("mindspore cross-check (fixtures): passed")
        return
    side = HERE / "ms_lenet.py"
    # 1-2: a Spore checkpoint into MindSpore.
    run(spore, "train", "lenet", "--epochs", 3, "--limit", 12000, "--eval-limit", 500, "--lr", 0.05,
        "--out", work / "train")
    run(spore, "convert", work / "train" / "lenet.safetensors", work / "spore.ckpt")
    x = work / "x.npy"
    run(py, "-c", f"import sys; sys.path.insert(0, {str(HERE)!r}); import numpy as np, ms_lenet; "
                  f"np.save({str(x)!r}, ms_lenet.test_set(16)[0])")
    out = run(py, side, "eval", work / "spore.ckpt", x, work / "ms_logits.npy", N_TEST)
    ms_acc = float(re.search(r"accuracy ([0-9.]+)", out).group(1))
    acc = spore_accuracy(spore, work / "spore.ckpt")
    assert abs(acc - ms_acc) <= 1.0 / N_TEST + 1e-9, f"test accuracy: Spore {acc}, MindSpore {ms_acc}"
    ms_logits = np.load(work / "ms_logits.npy")
    err = float(np.abs(spore_logits(spore, work / "spore.ckpt", x, work) - ms_logits).max())
    assert err <= 1e-5, f"logits of Spore's .ckpt in MindSpore differ from Spore's by {err}"
    print(f"Spore-written .ckpt in MindSpore {subprocess.run([py, '-c', 'import mindspore; print(mindspore.__version__)'], capture_output=True, text=True).stdout.strip()}: "
          f"accuracy {ms_acc:.4f} (Spore {acc:.4f}), logits max error {err:.2e}")
    # 3: MindSpore's own file into Spore.
    run(py, side, "resave", work / "spore.ckpt", work / "lenet_ms.ckpt")
    check(spore, work / "lenet_ms.ckpt", ms_logits, ms_acc, x, work)
    if make:
        FIX.mkdir(parents=True, exist_ok=True)
        (FIX / "lenet_ms.ckpt").write_bytes((work / "lenet_ms.ckpt").read_bytes())
        np.save(FIX / "logits.npy", ms_logits)
        np.save(FIX / "x.npy", np.load(x))
        (FIX / "accuracy.txt").write_text(f"accuracy {ms_acc:.4f} on the first {N_TEST} Fashion-MNIST test images\n")
        print(f"fixtures written to {FIX}")
    print("mindspore cross-check (live): passed")


if __name__ == "__main__":
    main()
