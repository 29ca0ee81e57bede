"""The reliability list: every bad input and fault the harness (run.py) tries, and the fixtures
they start from. Each case is generated here, deterministically (seeded), so the list and its
counts can be rerun; `python3 tests/reliability/run.py --list --full` prints it.

A case is one of:
- cli:   `spore <argv>` in the case's folder, after writing its files;
- py:    a Python snippet run in the worker (pyworker.py: `ms`, `ds`, `vision`, `np`, `d` and `fx`
         are defined; `{d}` and `{fx}` in the text are the case folder and the fixtures folder);
- fault: a function that runs processes, kills them, and checks what is left (faults below).
`expect` is "error" (it must fail, clearly), "ok" (a valid edge case that must be accepted) or
"any" (a fuzz-corpus file: either is fine, but no crash or internal error). `names` are the
words a clear message must contain (at least one): the bad file's base name, the flag, the key.
`item` is the number in issue 33's list that the case re-checks ("33.8"), if any.
"""
import glob
import gzip
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import time
from dataclasses import dataclass, field

import numpy as np

import formats as F

SOURCE = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CORPUS = os.path.join(SOURCE, "tests", "fuzz", "corpus")


class Unavailable(Exception):
    """A fixture that cannot be built on this machine (its cases are reported as skipped)."""


@dataclass
class Case:
    id: str
    area: str
    kind: str  # cli | py | fault
    expect: str = "error"  # error | ok | any
    names: tuple = ()
    item: str = ""
    fast: bool = False
    argv: object = None  # list of str, or fn(ctx, d) -> list
    files: object = None  # {relative path: bytes}, or fn(ctx, d) -> dict
    code: str = ""
    needs: tuple = ()
    check: object = None  # fn(ctx, d, result) -> None | (class, note), for accepted runs
    fault: object = None  # fn(ctx, d) -> result dict (class, message)
    env: dict = field(default_factory=dict)
    timeout: float = None


# ---------------------------------------------------------------------------------------------
# fixtures: small valid inputs the bad ones are made from (built once per run, in <work>/fx)
def _check(r, what):
    if r["rc"] != 0:
        raise Unavailable(f"{what} failed (exit {r['rc']}): {(r['err'] + r['out']).strip()[-400:]}")


def fx_mnist(ctx):
    d = os.path.join(ctx.fx_dir, "mnist")
    os.makedirs(d, exist_ok=True)
    for n, b in F.mnist_set(n_train=1024).items():  # (the lost-rank case needs 4 steps per rank)
        with open(os.path.join(d, n), "wb") as f:
            f.write(b)
    return d


LENET_TRAIN = ["--epochs", "2", "--batch-size", "16", "--limit", "64", "--eval-limit", "32"]


def fx_lenet(ctx):
    """LeNet-5 trained 2 epochs on the generated IDX set: the final and the epoch checkpoints."""
    mn = ctx.fx("mnist")
    out = os.path.join(ctx.fx_dir, "lenet")
    _check(ctx.cli(["train", "lenet", "--data", mn, "--out", out] + LENET_TRAIN), "spore train lenet")
    epochs = sorted(glob.glob(os.path.join(out, "checkpoints", "lenet-*.safetensors")))
    if not epochs:
        raise Unavailable("spore train lenet wrote no epoch checkpoint")
    return {"final": os.path.join(out, "lenet.safetensors"), "epoch": epochs[-1], "out": out}


def fx_lenet_onnx(ctx):
    p = os.path.join(ctx.fx_dir, "lenet.onnx")
    _check(ctx.cli(["export", "lenet", "--ckpt", ctx.fx("lenet")["final"], "--out", p]), "spore export")
    return p


def fx_lenet_ckpt(ctx):
    p = os.path.join(ctx.fx_dir, "lenet.ckpt")
    _check(ctx.cli(["convert", ctx.fx("lenet")["final"], p]), "spore convert")
    return p


def fx_relu_onnx(ctx):
    p = os.path.join(ctx.fx_dir, "relu.onnx")
    with open(p, "wb") as f:
        f.write(F.onnx_relu())
    return p


def fx_yolo(ctx):
    """A YOLOv5n checkpoint (1 epoch at 64 px on 4 generated images), for `spore predict`."""
    shapes = os.path.join(ctx.fx_dir, "shapes")
    _check(ctx.cli(["data", "make-shapes", "--out", shapes, "--train", "4", "--val", "2", "--size", "64"]),
           "spore data make-shapes")
    out = os.path.join(ctx.fx_dir, "yolo")
    _check(ctx.cli(["train", "yolov5n", "--data", shapes, "--epochs", "1", "--img", "64", "--batch-size", "2",
                    "--out", out], timeout=600), "spore train yolov5n")
    p = os.path.join(out, "yolov5n.safetensors")
    if not os.path.exists(p):
        raise Unavailable("spore train yolov5n wrote no yolov5n.safetensors")
    return {"ckpt": p, "shapes": shapes}


def fx_mpi(ctx):
    if not shutil.which("mpiexec"):
        raise Unavailable("no mpiexec")
    return shutil.which("mpiexec")


FIXTURES = {"mnist": fx_mnist, "lenet": fx_lenet, "lenet_onnx": fx_lenet_onnx, "lenet_ckpt": fx_lenet_ckpt,
            "relu_onnx": fx_relu_onnx, "yolo": fx_yolo, "mpi": fx_mpi}


def warned(*words):
    """A check for an accepted run where Spore deliberately follows a reference tool (pycocotools
    evaluates detections of unknown categories as nothing): a stderr line naming every one of
    `words` makes it clear (not silent); without one it is wrong."""
    def check(ctx, d, r):
        line = next((ln for ln in r.get("err", "").splitlines() if all(w in ln for w in words)), "")
        return ("clear", "warning: " + line) if line else None
    return check


def read(p):
    with open(p, "rb") as f:
        return f.read()


# ---------------------------------------------------------------------------------------------
# checkpoints: safetensors and MindSpore .ckpt, through eval, convert and Python's load_checkpoint
def _ckpt_paths(cases, area, cid, name, blob_fn, names=None, item="", fast=False, paths=("eval", "convert", "py"),
                expect="error"):
    """The same bad checkpoint through `spore eval`, `spore convert` and ms.load_checkpoint."""
    nm = tuple(names or (name,))

    def files(ctx, d, blob_fn=blob_fn):
        return {name: blob_fn(ctx)}
    if "eval" in paths:
        cases.append(Case(f"{area}/{cid}/eval", area, "cli", expect, nm, item, fast,
                          argv=["eval", "lenet", "--ckpt", name, "--data", "{fx}/mnist", "--limit", "16"],
                          files=files, needs=("lenet", "mnist")))
    if "convert" in paths:
        out = "out.ckpt" if name.endswith(".safetensors") else "out.safetensors"
        cases.append(Case(f"{area}/{cid}/convert", area, "cli", expect, nm, item, fast,
                          argv=["convert", name, out], files=files, needs=("lenet",)))
    if "py" in paths:
        cases.append(Case(f"{area}/{cid}/py", area, "py", expect, nm, item, fast,
                          code=f"result = sorted(ms.load_checkpoint(os.path.join(d, {name!r})))",
                          files=files, needs=("lenet",)))


def _lenet_arrays(ctx, which="final"):
    return F.safetensors_arrays(read(ctx.fx("lenet")[which]))


def _replace(arrays, name, new):
    return [(n, new if n == name else a) for n, a in arrays]


def safetensors_cases():
    cases = []
    A = "safetensors"
    base = lambda ctx: read(ctx.fx("lenet")["final"])  # noqa: E731
    # truncated at several offsets (header length, header, data)
    for off in ("0", "1", "7", "8", "9", "16", "q", "h", "e"):
        def cut(ctx, off=off):
            b = base(ctx)
            n = {"q": len(b) // 4, "h": len(b) // 2, "e": len(b) - 1}.get(off)
            return b[:int(off) if n is None else n]
        _ckpt_paths(cases, A, f"truncated_{off}", f"cut_{off}.safetensors", cut, fast=off in ("0", "h"))
    for n in (1, 100, 5000):
        _ckpt_paths(cases, A, f"random_{n}", f"random_{n}.safetensors", lambda ctx, n=n: F.random_bytes(n, n),
                    fast=n == 100)

    def hdr(text, data=b""):
        t = text.encode() if isinstance(text, str) else text
        return lambda ctx: struct.pack("<Q", len(t)) + t + data
    one = '"fc3.bias":{"dtype":"F32","shape":[10],"data_offsets":[0,40]}'
    bad_headers = {
        "header_len_huge": lambda ctx: struct.pack("<Q", 2**63) + b"{}",
        "header_len_past_end": lambda ctx: struct.pack("<Q", 4096) + b"{}",
        "header_not_json": hdr("not json at all", b""),
        "header_json_array": hdr("[1,2,3]"),
        "header_json_string": hdr('"x"'),
        "dtype_unknown": hdr('{"fc3.bias":{"dtype":"F33","shape":[10],"data_offsets":[0,40]}}', b"\0" * 40),
        "dtype_with_nul": hdr(b'{"fc3.bias":{"dtype":"F3\\u00002","shape":[10],"data_offsets":[0,40]}}',
                              b"\0" * 40),
        "shape_negative": hdr('{"fc3.bias":{"dtype":"F32","shape":[-10],"data_offsets":[0,40]}}', b"\0" * 40),
        "shape_not_list": hdr('{"fc3.bias":{"dtype":"F32","shape":10,"data_offsets":[0,40]}}', b"\0" * 40),
        "offsets_past_data": hdr("{" + one + "}", b"\0" * 8),
        "offsets_reversed": hdr('{"fc3.bias":{"dtype":"F32","shape":[10],"data_offsets":[40,0]}}', b"\0" * 40),
        "offsets_size_mismatch": hdr('{"fc3.bias":{"dtype":"F32","shape":[10],"data_offsets":[0,36]}}',
                                     b"\0" * 40),
        "offsets_overlap": hdr('{"a":{"dtype":"F32","shape":[10],"data_offsets":[0,40]},'
                               '"b":{"dtype":"F32","shape":[10],"data_offsets":[20,60]}}', b"\0" * 60),
        "shape_overflow": hdr('{"x":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,0]}}'),
        "entry_missing_dtype": hdr('{"fc3.bias":{"shape":[10],"data_offsets":[0,40]}}', b"\0" * 40),
        "metadata_not_strings": hdr('{"__metadata__":{"epoch":3},' + one + "}", b"\0" * 40),
        "name_not_utf8": hdr(b'{"fc3.bi\xff\xfes":{"dtype":"F32","shape":[10],"data_offsets":[0,40]}}',
                             b"\0" * 40),
    }
    for cid, fn in bad_headers.items():
        _ckpt_paths(cases, A, cid, f"{cid}.safetensors", fn, fast=cid in ("header_not_json", "dtype_unknown"))
    # a duplicate key: JSON allows it, safetensors does not (item 9: the last one won, silently)
    dup = hdr('{"fc3.bias":{"dtype":"F32","shape":[10],"data_offsets":[0,40]},'
              '"fc3.bias":{"dtype":"F32","shape":[10],"data_offsets":[40,80]}}', b"\0" * 80)
    _ckpt_paths(cases, A, "duplicate_key", "duplicate_key.safetensors", dup, names=("fc3.bias", "duplicate_key"),
                item="33.9", fast=True)

    # integer data declared for float parameters (item 4): refused, naming the tensor and dtypes
    def int_weight(ctx):
        arrays, meta = _lenet_arrays(ctx)
        w = dict(arrays)["fc1.weight"]
        return F.safetensors(_replace(arrays, "fc1.weight", (w * 1000).astype(np.int32)), meta)
    cases.append(Case(f"{A}/int32_weight/eval", A, "cli", "error", ("fc1.weight",), "33.4", True,
                      argv=["eval", "lenet", "--ckpt", "int.safetensors", "--data", "{fx}/mnist", "--limit", "16"],
                      files=lambda ctx, d: {"int.safetensors": int_weight(ctx)}, needs=("lenet",)))
    cases.append(Case(f"{A}/int32_weight/py_load_param_into_net", A, "py", "error", ("weight",), "33.4", True,
                      code="net = ms.nn.Dense(120, 84)\n"
                           "p = ms.load_checkpoint(os.path.join(fx, 'lenet', 'lenet.safetensors'))\n"
                           "w = ms.Parameter(ms.Tensor(p['fc2.weight'].asnumpy().astype(np.int32)), 'weight')\n"
                           "ms.load_param_into_net(net, {'weight': w})", needs=("lenet",)))
    # a wrong shape and a missing parameter: eval names the tensor
    def reshaped(ctx):
        arrays, meta = _lenet_arrays(ctx)
        return F.safetensors(_replace(arrays, "fc3.bias", np.zeros(11, np.float32)), meta)
    cases.append(Case(f"{A}/wrong_shape/eval", A, "cli", "error", ("fc3.bias",), "", True,
                      argv=["eval", "lenet", "--ckpt", "shape.safetensors", "--data", "{fx}/mnist"],
                      files=lambda ctx, d: {"shape.safetensors": reshaped(ctx)}, needs=("lenet",)))

    def missing(ctx):
        arrays, meta = _lenet_arrays(ctx)
        return F.safetensors([(n, a) for n, a in arrays if n != "fc2.bias"], meta)
    cases.append(Case(f"{A}/missing_param/eval", A, "cli", "error", ("fc2.bias",), "", False,
                      argv=["eval", "lenet", "--ckpt", "missing.safetensors", "--data", "{fx}/mnist"],
                      files=lambda ctx, d: {"missing.safetensors": missing(ctx)}, needs=("lenet",)))
    # a checkpoint of another model
    cases.append(Case(f"{A}/other_model/eval_resnet18", A, "cli", "error", ("lenet.safetensors", "resnet18"), "",
                      False, argv=["eval", "resnet18", "--ckpt", "{fx}/lenet/lenet.safetensors", "--data", "{d}"],
                      needs=("lenet",)))
    # valid edge cases: an empty checkpoint converts; a NaN weight loads (eval runs)
    _ckpt_paths(cases, A, "empty_valid", "empty.safetensors", lambda ctx: F.safetensors([]),
                paths=("convert", "py"), expect="ok")
    return cases


def ckpt_cases():
    cases = []
    A = "ckpt"
    base = lambda ctx: read(ctx.fx("lenet_ckpt"))  # noqa: E731
    for off in ("1", "2", "9", "q", "h", "e"):
        def cut(ctx, off=off):
            b = base(ctx)
            n = {"q": len(b) // 4, "h": len(b) // 2, "e": len(b) - 1}.get(off)
            return b[:int(off) if n is None else n]
        c = []
        _ckpt_paths(c, A, f"truncated_{off}", f"cut_{off}.ckpt", cut, fast=off == "h")
        for x in c:
            x.needs = x.needs + ("lenet_ckpt",)
        cases += c
    # empty and random .ckpt files (item 8: were reported as a bad "safetensors header")
    _ckpt_paths(cases, A, "empty", "empty.ckpt", lambda ctx: b"", item="33.8", fast=True)
    for n in (3, 200, 5000):
        _ckpt_paths(cases, A, f"random_{n}", f"random_{n}.ckpt", lambda ctx, n=n: F.random_bytes(1000 + n, n),
                    item="33.8", fast=n == 200)
    a10 = np.arange(10, dtype=np.float32)
    bad = {
        # a tensor name that is not UTF-8 (item 5: convert ended in `internal error: json ... 316`)
        "name_not_utf8": (lambda ctx: F.ms_ckpt([(b"fc3.bi\xff\xfes", a10)]), "33.5"),
        "type_unknown": (lambda ctx: F.ms_ckpt([("fc3.bias", a10)]).replace(b"Float32", b"Float99"), ""),
        "content_short": (lambda ctx: F.ms_ckpt([("fc3.bias", a10)])[:-8][:4] + b"", ""),
        "dims_product_mismatch": (lambda ctx: F.ms_ckpt([("fc3.bias", a10.reshape(2, 5))]).replace(
            F.pb_int(1, 2) + F.pb_int(1, 5), F.pb_int(1, 3) + F.pb_int(1, 5)), ""),
        "dims_negative": (lambda ctx: F.ms_ckpt([("fc3.bias", a10)]).replace(F.pb_int(1, 10), F.pb_int(1, -10)), ""),
        "wrong_wire_type": (lambda ctx: b"\x0b" + F.ms_ckpt([("x", a10)]), ""),
    }
    for cid, (fn, item) in bad.items():
        _ckpt_paths(cases, A, cid, f"{cid}.ckpt", fn, names=(f"{cid}.ckpt",), item=item,
                    fast=cid in ("name_not_utf8", "type_unknown"))
    # a valid .ckpt of the zoo's LeNet evaluates (names mapped) and converts back
    cases.append(Case(f"{A}/valid/eval", A, "cli", "ok", (), "", True,
                      argv=["eval", "lenet", "--ckpt", "{fx}/lenet.ckpt", "--data", "{fx}/mnist", "--limit", "16"],
                      needs=("lenet_ckpt", "mnist")))
    return cases


# ---------------------------------------------------------------------------------------------
# .npy / .npz through `spore infer` (and `spore export --input`)
def npy_cases():
    cases = []
    A = "npy"
    x = np.random.default_rng(0).standard_normal((2, 1, 28, 28)).astype(np.float32)
    good = F.npy(x)

    def infer(cid, name, blob, expect="error", names=None, item="", fast=False, model="{fx}/lenet.onnx",
              needs=("lenet_onnx",), out="y.npy", check=None):
        cases.append(Case(f"{A}/{cid}", A, "cli", expect, names or (name,), item, fast,
                          argv=["infer", model, "--input", name, "--output", out],
                          files={name: blob} if blob is not None else {}, needs=needs, check=check))
    for label, b in F.truncations(good, (0, 5, 8, 10, 40, 127, 128, 1000, len(good) - 1)):
        infer(f"truncated_{label}", f"{label}.npy", b, fast=label in ("cut8", "cut1000"))
    for n in (1, 64, 4000):
        infer(f"random_{n}", f"random_{n}.npy", F.random_bytes(2000 + n, n), fast=n == 64)
    hdrs = {
        "magic_wrong": b"\x93NUMPX" + good[6:],
        "version_9": good[:6] + b"\x09\x00" + good[8:],
        "no_shape_key": F.npy_raw("{'descr': '<f4', 'fortran_order': False, }", x.tobytes()),
        "descr_complex": F.npy_raw("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 1, 28, 28), }",
                                   x.tobytes() * 2),
        "descr_object": F.npy_raw("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", b"\0" * 16),
        "descr_bigendian": F.npy_raw("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 1, 28, 28), }",
                                     x.byteswap().tobytes()),
        "shape_negative": F.npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 1, 28, 28), }",
                                    x.tobytes()),
        "shape_huge": F.npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"),
        "data_short": F.npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 1, 28, 28), }",
                                x.tobytes()),
        "header_garbage": F.npy_raw("{'descr': <f4 'shape': ((", x.tobytes()),
        "header_len_past_end": b"\x93NUMPY\x01\x00\xff\xff{'descr'",
    }
    for cid, b in hdrs.items():
        infer(cid, f"{cid}.npy", b, fast=cid in ("descr_complex", "shape_huge"))
    # arrays of the wrong shape or dtype for the model: the error names the input
    # (one --input: naming the model's input it feeds names the thing)
    infer("wrong_rank", "rank3.npy", F.npy(x[:, 0]), names=("rank3.npy", 'input "input"'))
    infer("wrong_size", "size32.npy", F.npy(np.zeros((2, 1, 32, 32), np.float32)),
          names=("size32.npy", 'input "input"'))
    infer("int64_input", "int64.npy", F.npy(np.zeros((2, 1, 28, 28), np.int64)), expect="any",
          names=("int64.npy", 'input "input"'))
    infer("float64_input", "f64.npy", F.npy(x.astype(np.float64)), expect="any", names=("f64.npy", 'input "input"'))
    infer("fortran_order", "fortran.npy", F.npy(np.asfortranarray(x)), expect="ok")
    # item 6: a valid .npy with a zero-length dimension was refused for a false reason
    infer("zero_length_dim", "empty.npy", F.npy(np.zeros((0, 4), np.float32)), expect="ok", item="33.6", fast=True,
          model="{fx}/relu.onnx", needs=("relu_onnx",),
          check=lambda ctx, d, r: None if np.load(os.path.join(d, "y.npy")).shape == (0, 4)
          else ("wrong", f"output shape {np.load(os.path.join(d, 'y.npy')).shape}, expected (0, 4)"))
    # item 9: --output y.txt was written as .npy
    infer("output_txt", "x.npy", good, names=("--output", "y.txt"), item="33.9", fast=True, out="y.txt")
    cases.append(Case(f"{A}/export_output_txt", A, "cli", "error", ("--output", "y.txt"), "33.9", False,
                      argv=["export", "lenet", "--out", "l.onnx", "--input", "x.npy", "--output", "y.txt"],
                      files={"x.npy": good}))
    cases.append(Case(f"{A}/export_input_truncated", A, "cli", "error", ("x.npy",), "", False,
                      argv=["export", "lenet", "--out", "l.onnx", "--input", "x.npy", "--output", "y.npy"],
                      files={"x.npy": good[:100]}))

    # .npz: names that match no input, extra arrays (item 9), broken archives
    R = "{fx}/relu.onnx"
    v = np.ones((2, 4), np.float32)
    npz = {
        "npz_extra_array": (F.npz({"x": v, "extra": v}), "error", ("extra",), "33.9", True),
        "npz_no_matching_name_two_arrays": (F.npz({"a": v, "b": v}), "error", ("'x'",), "33.9", True),
        "npz_one_array_other_name": (F.npz({"a": v}), "ok", (), "33.9", False),
        "npz_valid_compressed": (F.npz({"x": v}, compressed=True), "ok", (), "", False),
        "npz_empty_zip": (F.zip_members({}), "error", ("npz_empty_zip.npz",), "", False),
        "npz_member_not_npy": (F.zip_members({"x.npy": b"hello"}), "error", ("npz_member_not_npy.npz", "x.npy"),
                               "", False),
        "npz_member_text": (F.zip_members({"notes.txt": b"hello"}), "error", ("npz_member_text.npz",), "", False),
        "npz_random": (F.random_bytes(77, 300), "error", ("npz_random.npz",), "", True),
    }
    for cid, (b, exp, names, item, fast) in npz.items():
        cases.append(Case(f"{A}/{cid}", A, "cli", exp, names, item, fast,
                          argv=["infer", R, "--input", f"{cid}.npz", "--output", "y.npz"],
                          files={f"{cid}.npz": b}, needs=("relu_onnx",)))
    zgood = F.npz({"x": v})
    for label, b in F.truncations(zgood, (0, 4, 30, len(zgood) // 2, len(zgood) - 1)):
        cases.append(Case(f"{A}/npz_truncated_{label}", A, "cli", "error", (f"{label}.npz",), "", False,
                          argv=["infer", R, "--input", f"{label}.npz", "--output", "y.npz"],
                          files={f"{label}.npz": b}, needs=("relu_onnx",)))
    return cases


# ---------------------------------------------------------------------------------------------
# IDX (MNIST) through `spore eval` / `spore train` and ds.MnistDataset
def idx_cases():
    cases = []
    A = "idx"
    ok_set = F.mnist_set()
    n_test = 32

    def variant(cid, file, blob, names=None, item="", fast=False, paths=("eval", "py"), expect="error",
                drop=()):
        files = {f"m/{k}": v for k, v in ok_set.items() if k not in drop and k != file}
        if blob is not None:
            files[f"m/{file}"] = blob
        nm = tuple(names or (file,))
        split = "train" if file.startswith("train") else "test"
        if "eval" in paths and split == "test":
            cases.append(Case(f"{A}/{cid}/eval", A, "cli", expect, nm + ("--data m",), item, fast,
                              argv=["eval", "lenet", "--ckpt", "{fx}/lenet/lenet.safetensors", "--data", "m"],
                              files=files, needs=("lenet",)))
        if "train" in paths or ("eval" in paths and split == "train"):
            cases.append(Case(f"{A}/{cid}/train", A, "cli", expect, nm + ("--data m",), item, fast,
                              argv=["train", "lenet", "--data", "m", "--epochs", "1", "--batch-size", "16",
                                    "--limit", "32", "--eval-limit", "16", "--out", "o"], files=files))
        if "py" in paths:
            cases.append(Case(f"{A}/{cid}/py", A, "py", expect, nm, item, fast,
                              code=f"n = 0\nfor row in ds.MnistDataset(os.path.join(d, 'm'), usage={split!r})"
                                   ".create_tuple_iterator():\n    n += 1\nresult = n",
                              files=files))
    img, lab = "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"
    raw_img = F.idx([n_test, 28, 28])
    gz = lambda b: gzip.compress(b, mtime=0)  # noqa: E731
    # item 8: 0 images ("0 rows cannot be split into 1 non-empty shards", no file named)
    variant("zero_images", img, gz(F.idx([0, 28, 28])), names=(img, "t10k-images"), item="33.8", fast=True,
            paths=("eval", "py"))
    variant("zero_images_and_labels", img, gz(F.idx([0, 28, 28])), item="33.8", names=(img, "t10k"),
            paths=("eval",))
    # item 8: images that are not 28x28 were reported by Conv2d/Dense instead of the data file
    variant("images_32x32", img, gz(F.idx([n_test, 32, 32])), item="33.8", fast=True, paths=("eval",))
    variant("images_28x27", img, gz(F.idx([n_test, 28, 27])), item="33.8", paths=("eval",))
    variant("train_images_32x32", "train-images-idx3-ubyte.gz", gz(F.idx([64, 32, 32])), item="33.8",
            paths=("train",))
    for label, b in F.truncations(raw_img, (0, 3, 4, 10, 16, 17, 100, len(raw_img) // 2, len(raw_img) - 1)):
        variant(f"raw_{label}", img, gz(b), fast=label == "cut100", paths=("eval",))
    gzb = gz(raw_img)
    for label, b in F.truncations(gzb, (5, 10, len(gzb) // 2, len(gzb) - 1)):
        # (the last byte is the top of the gzip trailer's length field: every image is still there)
        variant(f"gzip_{label}", img, b, fast=label == "cut10", paths=("eval",),
                expect="any" if label == f"cut{len(gzb) - 1}" else "error")
    variant("random_bytes", img, F.random_bytes(5, 4000), paths=("eval", "py"))
    variant("magic_float", img, gz(F.idx([n_test, 28, 28], type_code=0x0D, data=b"\0" * (n_test * 784 * 4))),
            paths=("eval",))
    variant("ndims_4", img, gz(F.idx([n_test, 1, 28, 28])), paths=("eval",))
    variant("ndims_1", img, gz(F.idx([n_test * 784])), paths=("eval",))
    variant("dims_2pow32", img, gz(bytes([0, 0, 8, 3]) + b"\xff\xff\xff\xff" * 3), paths=("eval", "py"))
    variant("labels_count_mismatch", lab, gz(F.idx([n_test - 5], bytes(n_test - 5))), names=(lab, img, "t10k"),
            fast=True, paths=("eval", "py"))
    variant("label_200", lab, gz(F.idx([n_test], bytes([200] * n_test))), names=(lab,), paths=("eval",))
    variant("labels_are_images", lab, gz(raw_img), names=(lab,), paths=("eval",))
    variant("missing_labels", lab, None, names=("t10k-labels", "labels"), paths=("eval", "py"), fast=True)
    variant("missing_images", img, None, names=("t10k-images", "images"), paths=("eval",))
    variant("folder_empty", img, None, names=("m",), drop=tuple(ok_set), paths=("eval",))
    variant("images_is_folder", img, None, paths=("eval",), names=(img, "t10k-images"))
    cases[-1].files = dict(cases[-1].files, **{f"m/{img}/x": b""})
    variant("raw_and_gz_both", "t10k-images-idx3-ubyte", raw_img, expect="any", paths=("eval",))
    cases.append(Case(f"{A}/data_is_file/train", A, "cli", "error", ("notadir",), "", True,
                      argv=["train", "lenet", "--data", "notadir", "--epochs", "1", "--out", "o"],
                      files={"notadir": b"x"}))
    cases.append(Case(f"{A}/data_missing/train", A, "cli", "error", ("/nonexistent/fmnist",), "", True,
                      argv=["train", "lenet", "--data", "/nonexistent/fmnist", "--epochs", "1", "--out", "o"]))
    cases.append(Case(f"{A}/py_usage_bad", A, "py", "error", ("usage", "valid"), "", False,
                      code="ds.MnistDataset(fx + '/mnist', usage='valid')", needs=("mnist",)))
    return cases


# ---------------------------------------------------------------------------------------------
# CIFAR-10 / -100 binaries through ds.Cifar10Dataset / Cifar100Dataset and `spore train resnet18`
def cifar_cases():
    cases = []
    A = "cifar"
    good10 = F.cifar10(4)

    def variant(cid, blob, names=None, fast=False, cifar100=False, expect="error", extra=None, cli=False):
        name = "test.bin" if cifar100 else "test_batch.bin"
        files = {f"c/{name}": blob} if blob is not None else {}
        files.update(extra or {})
        fn = "Cifar100Dataset" if cifar100 else "Cifar10Dataset"
        cases.append(Case(f"{A}/{cid}/py", A, "py", expect, names or (name,), "", fast,
                          code=f"result = sum(1 for _ in ds.{fn}(os.path.join(d, 'c'), usage='test')"
                               ".create_tuple_iterator())", files=files))
        if cli:
            tr = {f"c/data_batch_{i}.bin": F.cifar10(2) for i in range(1, 6)}
            cases.append(Case(f"{A}/{cid}/train_resnet18", A, "cli", expect, names or (name,), "", False,
                              argv=["train", "resnet18", "--data", "c", "--epochs", "1", "--batch-size", "2",
                                    "--limit", "4", "--eval-limit", "4", "--out", "o"], files=dict(files, **tr)))
    variant("empty_file", b"", fast=True, cli=True)
    for label, b in F.truncations(good10, (1, 100, 3073, 3074, len(good10) - 1)):
        # (cut at 3073 bytes leaves exactly one whole record: a valid file)
        variant(f"truncated_{label}", b, fast=label == "cut3074", cli=label == "cut100",
                expect="ok" if label == "cut3073" else "error")
    variant("random_size", F.random_bytes(9, 5000))
    variant("label_10", F.cifar10(2, label=10), names=("test_batch.bin", "label"), cli=True)
    variant("label_255", F.cifar10(2, label=255), names=("test_batch.bin", "label"))
    variant("missing_file", None, names=("test_batch.bin",), fast=True, extra={"c/readme.txt": b"no data"})
    variant("is_folder", None, names=("test_batch.bin",), extra={"c/test_batch.bin/x": b""})
    variant("cifar100_truncated", F.cifar100(3)[:5000], cifar100=True, names=("test.bin",))
    variant("cifar100_fine_label_150", bytes([1, 150]) + bytes(3072), cifar100=True, names=("test.bin", "label"))
    variant("cifar100_valid", F.cifar100(3), cifar100=True, expect="ok")
    variant("valid", good10, expect="ok")
    return cases


# ---------------------------------------------------------------------------------------------
# CSV through ds.CSVDataset (header mode: text columns; typed mode: int, float, str defaults)
def csv_cases():
    cases = []
    A = "csv"
    typed = "column_defaults=[-1, 0.5, 'none'], column_names=['i', 'f', 's'], "

    def read_all(cid, blob, expect="error", names=None, mode=typed, fast=False, name="t.csv"):
        cases.append(Case(f"{A}/{cid}", A, "py", expect, names or (name,), "", fast,
                          code=f"result = [tuple(str(x) for x in r) for r in ds.CSVDataset(os.path.join(d, {name!r}), "
                               f"{mode}shuffle=False).create_tuple_iterator(output_numpy=True)]",
                          files={name: blob} if blob is not None else {}))
    good = b'1,2.5,abc\n-3,1e3,"quoted, with comma"\n7,,\n'
    read_all("valid_typed", good, expect="ok", fast=True)
    read_all("valid_header", b"a,b,c\n" + good, expect="ok", mode="")
    read_all("valid_crlf", good.replace(b"\n", b"\r\n"), expect="ok")
    read_all("unterminated_quote", b'1,2.5,"abc\n2,3.5,x\n', fast=True)
    read_all("too_many_fields", b"1,2.5,abc,extra\n", fast=True)
    read_all("too_few_fields", b"1,2.5\n", expect="any")
    read_all("int_not_a_number", b"abc,2.5,x\n", names=("t.csv", "abc"), fast=True)
    read_all("int_overflow", b"99999999999999999999,2.5,x\n", names=("t.csv", "99999999999999999999"))
    read_all("float_not_a_number", b"1,two,x\n", names=("t.csv", "two"))
    read_all("float_beyond_float32", b"1,1e300,x\n", expect="any")
    read_all("nul_byte", b"1,2.5,a\0b\n", expect="any")
    read_all("not_utf8", b"1,2.5,\xff\xfe\n", expect="any")
    read_all("empty_file", b"", expect="any")
    read_all("empty_file_header_mode", b"", expect="any", mode="")
    read_all("header_only", b"a,b,c\n", expect="any", mode="")
    read_all("random_bytes", F.random_bytes(21, 400), expect="any")
    read_all("quote_in_unquoted_field", b'1,2.5,ab"c\n', expect="any")
    read_all("missing_file", None, names=("t.csv",), fast=True)
    cases.append(Case(f"{A}/folder", A, "py", "error", ("csvdir",), "", False,
                      code="list(ds.CSVDataset(os.path.join(d, 'csvdir')).create_tuple_iterator())",
                      files={"csvdir/x.csv": b"a\n1\n"}))
    cases.append(Case(f"{A}/defaults_wrong_type", A, "py", "error", ("column_defaults",), "", False,
                      code="ds.CSVDataset(os.path.join(d, 't.csv'), column_defaults=[1, [2], 'x'])",
                      files={"t.csv": good}))
    cases.append(Case(f"{A}/defaults_and_names_differ", A, "py", "error", ("column_defaults", "column_names"), "",
                      False, code="list(ds.CSVDataset(os.path.join(d, 't.csv'), column_defaults=[1, 2.5], "
                                  "column_names=['i', 'f', 's']).create_tuple_iterator())", files={"t.csv": good}))
    for label, b in F.truncations(good, (5, 15, 25)):
        read_all(f"truncated_{label}", b, expect="any")
    return cases


# ---------------------------------------------------------------------------------------------
# COCO JSON: ground truth and results through `spore coco-eval`; ground truth through ds.CocoDataset
def coco_cases():
    cases = []
    A = "coco"
    gt = F.coco_gt()
    res = F.coco_results(gt)
    gt_text, res_text = json.dumps(gt), json.dumps(res)

    def ev(cid, gt_blob, res_blob, names, item="", fast=False, expect="error", py=False, check=None):
        files = {"gt.json": gt_blob, "res.json": res_blob}
        cases.append(Case(f"{A}/{cid}", A, "cli", expect, names, item, fast, argv=["coco-eval", "gt.json", "res.json"],
                          files=files, check=check))
        if py:
            imgs = {f"img/{im['file_name']}": F.pil_image("JPEG") for im in gt["images"]}
            cases.append(Case(f"{A}/{cid}/py", A, "py", expect, names, item, fast,
                              code="result = sum(1 for _ in ds.CocoDataset(os.path.join(d, 'img'), "
                                   "os.path.join(d, 'gt.json')).create_tuple_iterator())",
                              files=dict(files, **imgs)))
    ev("valid", gt_text, res_text, (), expect="ok", fast=True, py=True)
    # item 8: truncated JSON was reported as "the top level is not a JSON object"
    for label, b in F.truncations(gt_text.encode(), (0, 1, 2, 20, len(gt_text) // 2, len(gt_text) - 1)):
        ev(f"gt_truncated_{label}", b, res_text, ("gt.json",), "33.8", label == "cut20", py=label in ("cut1", "cut20"))
    # item 8: a bad results file was called "annotation file"
    for label, b in F.truncations(res_text.encode(), (0, 1, 30, len(res_text) - 1)):
        ev(f"results_truncated_{label}", gt_text, b, ("res.json",), "33.8", label == "cut30",
           check=None)
    bad_gt = {
        "gt_not_json": "hello",
        "gt_array": "[1, 2]",
        "gt_no_images": json.dumps({"annotations": gt["annotations"], "categories": gt["categories"]}),
        "gt_bbox_3_numbers": json.dumps(dict(gt, annotations=[dict(gt["annotations"][0], bbox=[1, 2, 3])])),
        "gt_bbox_strings": json.dumps(dict(gt, annotations=[dict(gt["annotations"][0], bbox=["1", 2, 3, 4])])),
        "gt_image_id_string": json.dumps(dict(gt, images=[dict(gt["images"][0], id="one")])),
        "gt_annotation_unknown_image": json.dumps(dict(gt, annotations=[dict(gt["annotations"][0], image_id=999)])),
        "gt_duplicate_image_ids": json.dumps(dict(gt, images=[gt["images"][0], gt["images"][0]])),
        "gt_random": F.random_bytes(11, 300),
        "gt_utf16": gt_text.encode("utf-16"),
    }
    for cid, b in bad_gt.items():
        ev(cid, b, res_text, ("gt.json",), fast=cid in ("gt_array", "gt_bbox_3_numbers"),
           py=cid in ("gt_bbox_3_numbers", "gt_no_images"))
    # item 9: negative box sizes and category ids absent from `categories` were accepted
    ev("gt_negative_width", json.dumps(dict(gt, annotations=[dict(gt["annotations"][0], bbox=[1, 2, -3, 4])])),
       res_text, ("gt.json", "bbox"), "33.9", True, py=True)
    ev("gt_category_not_listed", json.dumps(dict(gt, annotations=[dict(gt["annotations"][0], category_id=77)])),
       res_text, ("gt.json", "77"), "33.9", True, py=True)
    bad_res = {
        "results_object": json.dumps({"image_id": 1}),
        "results_no_score": json.dumps([{k: v for k, v in r.items() if k != "score"} for r in res]),
        "results_bbox_3": json.dumps([dict(res[0], bbox=[1, 2, 3])]),
        "results_unknown_image": json.dumps([dict(res[0], image_id=999)]),
        "results_negative_width": json.dumps([dict(res[0], bbox=[1, 2, -3, 4])]),
        "results_score_string": json.dumps([dict(res[0], score="high")]),
        "results_random": F.random_bytes(12, 300),
        # stop 40's note: still open
        "results_category_not_in_gt": json.dumps([dict(res[0], category_id=77)]),
    }
    for cid, b in bad_res.items():
        ev(cid, gt_text, b, ("res.json",), item="33.9" if cid == "results_category_not_in_gt" else "",
           fast=cid in ("results_object", "results_category_not_in_gt"),
           check=warned("res.json", "77") if cid == "results_category_not_in_gt" else None)
    ev("results_empty_list", gt_text, "[]", ("res.json",), expect="any")
    cases.append(Case(f"{A}/gt_missing", A, "cli", "error", ("nope.json",), "", True,
                      argv=["coco-eval", "nope.json", "res.json"], files={"res.json": res_text}))
    cases.append(Case(f"{A}/gt_is_folder", A, "cli", "error", ("gtdir",), "", False,
                      argv=["coco-eval", "gtdir", "res.json"], files={"res.json": res_text, "gtdir/x": ""}))
    return cases


# ---------------------------------------------------------------------------------------------
# images: ds.ImageFolderDataset(decode=True), vision.Decode, and `spore predict`
def image_cases():
    cases = []
    A = "image"
    jpg, png = F.pil_image("JPEG"), F.pil_image("PNG")

    def folder(cid, name, blob, expect="error", names=None, item="", fast=False, decode=True):
        files = {f"f/a/{name}": blob, "f/a/ok.png": png}
        cases.append(Case(f"{A}/{cid}/folder", A, "py", expect, names or (name,), item, fast,
                          code="result = [r[0].shape for r in ds.ImageFolderDataset(os.path.join(d, 'f'), "
                               "decode=True, shuffle=False).create_tuple_iterator(output_numpy=True)]",
                          files=files))
        if decode:
            cases.append(Case(f"{A}/{cid}/decode", A, "py", expect, ("Decode",) + tuple(names or ()), item, False,
                              code="result = vision.Decode()(np.fromfile(os.path.join(d, 'f/a', "
                                   f"{name!r}), np.uint8)).shape", files=files))
    folder("valid_jpeg", "x.jpg", jpg, expect="ok", fast=True)
    folder("valid_png", "x.png", png, expect="ok")
    folder("valid_gray_png", "g.png", F.pil_image("PNG", mode="L"), expect="ok")
    folder("empty_jpg", "empty.jpg", b"", fast=True)
    folder("text_as_jpg", "text.jpg", b"this is not an image\n" * 10)
    folder("gif", "x.gif", F.pil_image("GIF"), expect="any")
    for label, b in F.truncations(jpg, (2, 20, 100, len(jpg) // 2)):
        folder(f"jpeg_truncated_{label}", f"{label}.jpg", b, expect="error" if label in ("cut2", "cut20") else "any",
               fast=label == "cut20")
    for label, b in F.truncations(png, (4, 8, 20, 40, len(png) - 13)):
        folder(f"png_truncated_{label}", f"{label}.png", b, expect="error" if label != f"cut{len(png) - 13}" else "any")
    folder("png_bad_crc", "crc.png", png[:29] + b"\0\0\0\0" + png[33:], expect="any")
    folder("png_zero_width", "zero.png", F.png_chunks(0, 4, 0, rows=[b""] * 4))
    folder("random_png", "random.png", b"\x89PNG\r\n\x1a\n" + F.random_bytes(3, 500))
    folder("random_jpg", "random.jpg", b"\xff\xd8\xff" + F.random_bytes(4, 500))
    # item 8: huge sizes were answered with OpenCV's assertion text and the wrong variable name
    folder("jpeg_65500x65500", "huge.jpg", F.jpeg_with_size(jpg, 65500, 65500), item="33.8", fast=True,
           names=("huge.jpg", "OPENCV_IO_MAX_IMAGE_PIXELS"))
    folder("png_100000x100000", "huge.png", F.png_chunks(100000, 100000, 0, idat=b"x"), item="33.8", fast=True,
           names=("huge.png", "OPENCV_IO_MAX_IMAGE_PIXELS"))
    # `spore predict` (needs a trained YOLOv5n checkpoint: full run only)
    for cid, name, blob, names in (("huge_jpeg", "huge.jpg", F.jpeg_with_size(jpg, 65500, 65500),
                                    ("huge.jpg", "OPENCV_IO_MAX_IMAGE_PIXELS")),
                                   ("huge_png", "huge.png", F.png_chunks(100000, 100000, 0, idat=b"x"),
                                    ("huge.png", "OPENCV_IO_MAX_IMAGE_PIXELS")),
                                   ("truncated_jpeg", "cut.jpg", jpg[:20], ("cut.jpg",)),
                                   ("random_jpeg", "r.jpg", F.random_bytes(8, 400), ("r.jpg",)),
                                   ("missing", "nope.jpg", None, ("nope.jpg",))):
        cases.append(Case(f"{A}/predict_{cid}", A, "cli", "error", names, "33.8" if "huge" in cid else "", False,
                          argv=lambda ctx, d, name=name: ["predict", "yolov5n", name, "--ckpt", ctx.fx("yolo")["ckpt"],
                                                          "--out", "o.jpg"],
                          files={name: blob} if blob is not None else {}, needs=("yolo",)))
    cases.append(Case(f"{A}/predict_valid", A, "cli", "ok", (), "", False,
                      argv=lambda ctx, d: ["predict", "yolov5n", "x.jpg", "--ckpt", ctx.fx("yolo")["ckpt"], "--out",
                                           "o.jpg"], files={"x.jpg": jpg}, needs=("yolo",)))
    # a broken image inside a training set (the run must name it)
    def broken_train(ctx, d):
        dst = os.path.join(d, "shapes")
        shutil.copytree(ctx.fx("yolo")["shapes"], dst)
        first = sorted(glob.glob(os.path.join(dst, "train2017", "*")))[0]
        with open(first, "wb") as f:
            f.write(b"\xff\xd8\xff\xe0 broken")
        return ["train", "yolov5n", "--data", "shapes", "--epochs", "1", "--img", "64", "--batch-size", "2",
                "--out", "o"]
    cases.append(Case(f"{A}/yolo_train_broken_image", A, "cli", "error", ("000000",), "", False,
                      argv=broken_train, needs=("yolo",), timeout=600))
    return cases


# ---------------------------------------------------------------------------------------------
# ONNX models through `spore infer`
def onnx_cases():
    cases = []
    A = "onnx"

    def infer(cid, name, blob_fn, expect="error", names=None, item="", fast=False, needs=()):
        cases.append(Case(f"{A}/{cid}", A, "cli", expect, names or (name,), item, fast,
                          argv=["infer", name, "--bench", "--batch", "1", "--seconds", "0.01"],
                          files=lambda ctx, d, name=name, blob_fn=blob_fn: {name: blob_fn(ctx)}, needs=needs))
    infer("valid_relu", "relu.onnx", lambda ctx: F.onnx_relu(), expect="ok", fast=True)
    # item 9: an ONNX model declaring opset 99 was accepted
    infer("opset_99", "opset99.onnx", lambda ctx: F.onnx_relu(opset=99), names=("opset99.onnx", "99"), item="33.9",
          fast=True)
    infer("opset_missing", "noopset.onnx", lambda ctx: F.onnx_relu(opset=None), expect="any")
    infer("opset_5", "opset5.onnx", lambda ctx: F.onnx_relu(opset=5), expect="any")
    infer("unknown_op", "frob.onnx", lambda ctx: F.onnx_relu(op="Frobnicate"), names=("frob.onnx", "Frobnicate"),
          fast=True)
    infer("undefined_input", "undef.onnx", lambda ctx: F.onnx_model([("Relu", ["nothere"], ["y"])], [("x", ["N", 4])],
                                                                    [("y", ["N", 4])]), names=("undef.onnx", "nothere"))
    infer("no_outputs", "noout.onnx", lambda ctx: F.onnx_model([("Relu", ["x"], ["y"])], [("x", ["N", 4])], []),
          names=("noout.onnx",))
    infer("output_not_produced", "nop.onnx", lambda ctx: F.onnx_model([("Relu", ["x"], ["y"])], [("x", ["N", 4])],
                                                                      [("z", ["N", 4])]), names=("nop.onnx", "'z'"))
    infer("no_nodes", "nonodes.onnx", lambda ctx: F.onnx_model([], [("x", ["N", 4])], [("x", ["N", 4])]),
          expect="any")
    infer("relu_wrong_arity", "arity.onnx", lambda ctx: F.onnx_model([("Relu", ["x", "x"], ["y"])],
                                                                     [("x", ["N", 4])], [("y", ["N", 4])]),
          names=("arity.onnx", "Relu"))
    infer("empty", "empty.onnx", lambda ctx: b"", fast=True)
    infer("text", "text.onnx", lambda ctx: b"ir_version: 8\ngraph { }\n")
    for n in (10, 1000):
        infer(f"random_{n}", f"random_{n}.onnx", lambda ctx, n=n: F.random_bytes(300 + n, n))
    for frac in ("0.01", "0.1", "0.5", "0.9", "0.999"):
        infer(f"lenet_truncated_{frac}", f"cut{frac}.onnx",
              lambda ctx, frac=frac: read(ctx.fx("lenet_onnx"))[:int(len(read(ctx.fx("lenet_onnx"))) * float(frac))],
              fast=frac == "0.5", needs=("lenet_onnx",))
    for seed in range(3):
        infer(f"lenet_flipped_{seed}", f"flip{seed}.onnx",
              lambda ctx, seed=seed: F.flip_bytes(read(ctx.fx("lenet_onnx")), seed, 8, 0, 400), expect="any",
              needs=("lenet_onnx",))
    cases.append(Case(f"{A}/model_missing", A, "cli", "error", ("nope.onnx",), "", True,
                      argv=["infer", "nope.onnx", "--bench"]))
    cases.append(Case(f"{A}/model_is_folder", A, "cli", "error", ("dir.onnx",), "", False,
                      argv=["infer", "dir.onnx", "--bench"], files={"dir.onnx/x": b""}))
    cases.append(Case(f"{A}/no_input_no_bench", A, "cli", "error", ("--input",), "", False,
                      argv=["infer", "relu.onnx"], files={"relu.onnx": F.onnx_relu()}))
    return cases


# ---------------------------------------------------------------------------------------------
# the command line: subcommands, flags, values, paths
NUMERIC = {  # command prefix -> {flag: bad values}
    ("train", "lenet"): {"--epochs": ["0", "-5", "abc", "1.5", "1e3", "", "99999999999999999999"],
                         "--batch-size": ["0", "-1", "65537", "x"], "--lr": ["0", "-0.1", "nan", "inf", "101"],
                         "--momentum": ["1", "-0.5", "nan"], "--seed": ["-1", "18446744073709551616", "s"],
                         "--threads": ["-1", "1025"], "--limit": ["0", "-3", "2147483648"],
                         "--eval-limit": ["0"], "--comm-timeout": ["0", "-1", "86401", "inf"],
                         "--grad-accum": ["0", "4097"], "--img": ["63", "4097"], "--eval-every": ["0"]},
    ("eval", "lenet", "--ckpt", "x.safetensors"): {"--batch-size": ["0", "1e9"], "--limit": ["0", "-1"],
                                                   "--img": ["1"]},
    ("launch",): {"-n": ["0", "1025", "two"], "--comm-timeout": ["0"]},
    ("infer", "m.onnx"): {"--batch": ["0"], "--seconds": ["0", "-1", "nan"]},
    ("predict", "yolov5n", "x.jpg", "--ckpt", "c.safetensors"): {"--conf": ["-0.1", "1.5", "nan"],
                                                                "--iou": ["2"], "--img": ["0"]},
    ("data", "make-shapes", "--out", "s"): {"--train": ["-1", "10000001"], "--size": ["10"],
                                            "--max-objects": ["0", "101"], "--seed": ["-2"]},
    ("dashboard", "run"): {"--port": ["0", "65536", "http"]},
    ("export", "lenet"): {"--batch": ["0"], "--img": ["31", "5000"]},
}
ENUMS = [
    (["train", "resnet50"], ("resnet50", "model")), (["train", "lenet", "--mode", "eager"], ("--mode", "eager")),
    (["train", "lenet", "--amp", "O9"], ("--amp", "O9")), (["train", "lenet", "--amp-dtype", "fp8"], ("--amp-dtype", "fp8")),
    (["train", "lenet", "--device", "TPU"], ("TPU", "device")),
    (["train", "lenet", "--parallel", "dp=x"], ("--parallel", "dp=x")),
    (["eval", "vgg", "--ckpt", "x"], ("vgg", "model")), (["convert", "a", "b", "--model", "vgg"], ("--model", "vgg")),
    (["export", "lenet", "--format", "tflite"], ("--format", "tflite")),
    (["infer", "m.onnx", "--mode", "jit"], ("--mode", "jit")), (["run-check", "--device", "FPGA"], ("FPGA",)),
    (["predict", "lenet", "x.jpg", "--ckpt", "c"], ("lenet", "model")),
]
STRUCTURE = [  # (id, argv, names, item, fast)
    ("unknown_command", ["frobnicate"], ("frobnicate",), "33.8", True),
    ("typo_command", ["trian", "lenet"], ("trian",), "33.8", False),
    ("empty_command", [""], ("''", "command"), "", False),
    ("no_command", [], ("train, ",), "", True),  # (the list of commands)
    ("unknown_flag", ["train", "lenet", "--epoch", "1"], ("--epoch",), "", True),
    ("flag_without_value", ["train", "lenet", "--epochs"], ("--epochs",), "", False),
    ("extra_positional", ["train", "lenet", "mlp"], ("mlp",), "", False),
    ("eval_without_ckpt", ["eval", "lenet"], ("--ckpt",), "", True),
    ("predict_without_args", ["predict"], ("model", "image", "--ckpt"), "", False),
    ("coco_eval_one_file", ["coco-eval", "gt.json"], ("results",), "", False),
    ("data_without_sub", ["data"], ("make-shapes",), "", False),
    ("data_unknown_sub", ["data", "make-circles"], ("make-circles",), "", False),
    ("launch_without_command", ["launch", "-n", "2"], ("command",), "", False),
    ("convert_one_arg", ["convert", "a.safetensors"], ("out",), "", False),
    ("img_for_lenet", ["eval", "lenet", "--ckpt", "{fx}/lenet/lenet.safetensors", "--img", "64"], ("--img",), "",
     False),
    ("weights_for_lenet", ["train", "lenet", "--weights", "w.safetensors", "--epochs", "1", "--limit", "16",
                           "--eval-limit", "16", "--data", "{fx}/mnist", "--out", "o"], ("--weights",), "", False),
    ("eval_every_for_lenet", ["train", "lenet", "--eval-every", "2", "--epochs", "1", "--limit", "16",
                              "--eval-limit", "16", "--data", "{fx}/mnist", "--out", "o"], ("--eval-every",), "", False),
    ("parallel_without_launch", ["train", "transformer", "--parallel", "dp=1,mp=2", "--epochs", "1", "--out", "o"],
     ("--parallel", "launch", "mp"), "", False),
]
PATHS = [  # (id, argv, names, fast)
    ("eval_ckpt_missing", ["eval", "lenet", "--ckpt", "nope.safetensors"], ("nope.safetensors",), True),
    ("eval_ckpt_folder", ["eval", "lenet", "--ckpt", "{d}"], ("{d}",), False),
    ("eval_data_missing", ["eval", "lenet", "--ckpt", "{fx}/lenet/lenet.safetensors", "--data", "nodata"],
     ("nodata",), False),
    ("resume_missing", ["train", "lenet", "--resume", "nope.safetensors", "--epochs", "1", "--out", "o"],
     ("nope.safetensors",), True),
    ("weights_missing", ["train", "yolov5n", "--weights", "nope.safetensors", "--data", "nodata", "--out", "o"],
     ("nope.safetensors", "nodata"), False),
    ("convert_in_missing", ["convert", "nope.safetensors", "o.ckpt"], ("nope.safetensors",), True),
    ("convert_out_extension", ["convert", "{fx}/lenet/lenet.safetensors", "o.bin"], ("o.bin",), False),
    ("convert_out_txt", ["convert", "{fx}/lenet/lenet.safetensors", "o.txt"], ("o.txt",), False),
    ("export_ckpt_missing", ["export", "lenet", "--ckpt", "nope.safetensors", "--out", "l.onnx"],
     ("nope.safetensors",), False),
    ("export_ckpt_other_model", ["export", "mlp", "--ckpt", "{fx}/lenet/lenet.safetensors", "--out", "m.onnx"],
     ("lenet.safetensors", "mlp"), False),
    ("infer_input_missing", ["infer", "{fx}/relu.onnx", "--input", "nope.npy"], ("nope.npy",), True),
    ("dashboard_missing_dir", ["dashboard", "nope_run"], ("nope_run",), False),
    ("coco_results_missing", ["coco-eval", "gt.json", "nope.json"], ("nope.json", "gt.json"), False),
]


def cli_cases():
    cases = []
    A = "cli"
    for prefix, flags in NUMERIC.items():
        for flag, values in flags.items():
            for k, v in enumerate(values):
                cid = f"{A}/value/{prefix[0]}{flag}={v or 'empty'}"
                cases.append(Case(cid, A, "cli", "error", (flag,), "", k == 0,
                                  argv=list(prefix) + [flag, v]))
    for argv, names in ENUMS:
        cases.append(Case(f"{A}/enum/{argv[0]}_{names[0].strip('-')}={argv[argv.index(names[0]) + 1] if names[0] in argv[:-1] and names[0].startswith('-') else names[0]}", A, "cli", "error",
                          names, "", False, argv=argv))
    for cid, argv, names, item, fast in STRUCTURE:
        needs = ("lenet",) if any("{fx}" in a for a in argv) else ()
        cases.append(Case(f"{A}/{cid}", A, "cli", "error", names, item, fast, argv=argv, needs=needs))
    for cid, argv, names, fast in PATHS:
        needs = ("lenet", "relu_onnx") if any("{fx}" in a for a in argv) else ()
        cases.append(Case(f"{A}/path/{cid}", A, "cli", "error", names, "", fast, argv=argv, needs=needs,
                          files={"gt.json": json.dumps(F.coco_gt())} if "coco" in cid else {}))
    cases.append(Case(f"{A}/help", A, "cli", "ok", (), "", True, argv=["--help"]))
    cases.append(Case(f"{A}/version", A, "cli", "ok", (), "", True, argv=["--version"]))
    cases.append(Case(f"{A}/train_help", A, "cli", "ok", (), "", False, argv=["train", "--help"]))
    return cases


# ---------------------------------------------------------------------------------------------
# the Python front end
PY = [  # (id, code, names, expect, item, fast)
    ("set_context_unknown_key", "ms.set_context(foo_bar=1)", ("foo_bar",), "error", "33.9", True),
    ("set_context_mode_5", "ms.set_context(mode=5)", ("mode",), "error", "", True),
    ("set_context_device_tpu", "ms.set_context(device_target='TPU')", ("TPU", "device_target"), "error", "", False),
    ("set_context_threads_negative", "ms.set_context(runtime_num_threads=-2)", ("runtime_num_threads",), "error", "",
     False),
    ("set_context_save_graphs_7", "ms.set_context(save_graphs=7)", ("save_graphs",), "error", "", False),
    ("set_context_typo", "ms.set_context(device_traget='CPU')", ("device_traget",), "error", "", False),
    ("load_checkpoint_missing", "ms.load_checkpoint(os.path.join(d, 'nope.ckpt'))", ("nope.ckpt",), "error", "", True),
    ("load_checkpoint_folder", "ms.load_checkpoint(d)", ("{d}",), "error", "", False),
    ("load_checkpoint_dec_key", "ms.load_checkpoint(fx + '/lenet/lenet.safetensors', dec_key=b'k')",
     ("dec_key",), "error", "", False),
    ("save_checkpoint_to_proc", "ms.save_checkpoint(ms.nn.Dense(2, 2), '/proc/nope/x.ckpt')", ("/proc/nope",),
     "error", "", False),
    ("load_param_shape_mismatch",
     "net = ms.nn.Dense(3, 2)\nms.load_param_into_net(net, {'weight': ms.Parameter(ms.Tensor(np.zeros((5, 5), "
     "np.float32)), 'weight')})", ("weight",), "error", "", True),
    ("load_param_int_into_float",
     "net = ms.nn.Dense(3, 2)\nms.load_param_into_net(net, {'weight': ms.Parameter(ms.Tensor(np.zeros((2, 3), "
     "np.int32)), 'weight')})", ("weight",), "error", "33.4", True),
    ("load_param_strict_extra",
     "net = ms.nn.Dense(3, 2)\np = {k: v for k, v in ms.load_checkpoint(fx + '/lenet/lenet.safetensors').items()}\n"
     "ms.load_param_into_net(net, p, strict_load=True)", ("conv1.weight", "fc1", "weight"), "error", "", False),
    ("mnist_dir_missing", "ds.MnistDataset('/nonexistent/mnist')", ("/nonexistent/mnist",), "error", "", True),
    ("cifar_dir_missing", "ds.Cifar10Dataset('/nonexistent/cifar')", ("/nonexistent/cifar",), "error", "", False),
    ("coco_annotation_missing", "ds.CocoDataset(d, os.path.join(d, 'nope.json'))", ("nope.json",), "error", "", False),
    ("imagefolder_missing", "ds.ImageFolderDataset('/nonexistent/imgs')", ("/nonexistent/imgs",), "error", "", False),
    ("imagefolder_empty", "list(ds.ImageFolderDataset(d).create_tuple_iterator())", ("class", "image", "folder"),
     "any", "", False),
]


def python_cases():
    cases = []
    for cid, code, names, expect, item, fast in PY:
        needs = ("lenet",) if "fx +" in code else ()
        cases.append(Case(f"python/{cid}", "python", "py", expect, names, item, fast, code=code, needs=needs))
    # item 5: a .ckpt whose tensor name is not UTF-8, through Python (was a bare UnicodeDecodeError)
    cases.append(Case("python/load_checkpoint_name_not_utf8", "python", "py", "error", ("bad_name.ckpt",), "33.5",
                      True, code="ms.load_checkpoint(os.path.join(d, 'bad_name.ckpt'))",
                      files={"bad_name.ckpt": F.ms_ckpt([(b"fc\xff\xfe.bias", np.ones(3, np.float32))])}))
    return cases


# ---------------------------------------------------------------------------------------------
# faults: concurrent runs, kill -9, restarts, resume mismatches, unwritable outputs, size limits
def _load_ok(ctx, path):
    """Whether a checkpoint loads (through `spore convert` to a scratch file)."""
    r = ctx.cli(["convert", path, path + ".check.safetensors", "--model", "none"])
    if os.path.exists(path + ".check.safetensors"):
        os.remove(path + ".check.safetensors")
    return r["rc"] == 0, (r["err"] + r["out"]).strip()[-300:]


def _jsonl_rows(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for ln in f:
                if ln.strip():
                    rows.append(json.loads(ln))
    return rows


def _spawn(ctx, args, cwd, env=None, preexec=None):
    return subprocess.Popen([ctx.spore] + args, cwd=cwd, env=dict(ctx.env, **(env or {})), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=preexec, start_new_session=True)


def fault_concurrent(ctx, d):
    """Item 1: a second run into the same --out must stop at once, naming the holder; the first run's
    outputs stay whole."""
    mn = ctx.fx("mnist")
    args = ["train", "lenet", "--data", mn, "--out", "c", "--epochs", "100", "--batch-size", "16", "--limit", "64",
            "--eval-limit", "32"]
    a = _spawn(ctx, args, d)
    t0 = time.time()
    while not os.path.exists(os.path.join(d, "c", ".spore.lock")) and time.time() - t0 < 60 and a.poll() is None:
        time.sleep(0.02)
    b = ctx.cli(args + ["--seed", "2"], cwd=d)
    if a.poll() is not None:
        a.communicate()
        return {"class": "harness_error", "message": "the first run ended before the second started; inconclusive"}
    a_out, a_err = a.communicate(timeout=300)
    msg = [ln for ln in b["err"].splitlines() if ln.startswith("spore")]
    msg = "\n".join(msg) or b["err"].strip()[-300:]
    if a.returncode != 0:
        return {"class": "data_lost", "message": f"the first run failed: {a_err.decode()[-300:]}"}
    final = os.path.join(d, "c", "lenet.safetensors")
    ok, why = _load_ok(ctx, final) if os.path.exists(final) else (False, "missing")
    if not ok:
        return {"class": "data_lost", "message": f"the first run's final checkpoint: {why}"}
    try:
        _jsonl_rows(os.path.join(d, "c", "metrics.jsonl"))
    except ValueError as e:
        return {"class": "data_lost", "message": f"metrics.jsonl is corrupt: {e}"}
    if b["rc"] == 0:
        return {"class": "wrong", "message": "the second run into the same --out succeeded"}
    cls = "clear" if ("in use" in msg and "pid" in msg and "--out" in msg and "c" in msg) else "unclear"
    return {"class": cls, "message": msg}


def _kill_loop(ctx, d, tries, seed, when, epochs):
    """`tries` runs of `train --resume auto` into one --out, each killed with -9 (`when` decides the
    moment), then one run to the end. Returns (class, message)."""
    mn = ctx.fx("mnist")
    # epochs: more than ten killed runs complete (an epoch of 64 samples takes ~20 ms), so every
    # kill lands mid-training
    args = ["train", "lenet", "--data", mn, "--out", "r", "--epochs", str(epochs), "--batch-size", "16", "--limit",
            "64", "--eval-limit", "32", "--resume", "auto"]
    rng = random.Random(seed)
    ck = os.path.join(d, "r", "checkpoints")
    rows_before, killed_mid_save = 0, 0
    for i in range(tries):
        p = _spawn(ctx, args, d)
        mid = when(p, ck, rng)
        killed_mid_save += mid
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.communicate()
        rows = len(_jsonl_rows(os.path.join(d, "r", "metrics.jsonl")))
        if rows < rows_before:
            return "data_lost", f"after kill {i + 1}: metrics.jsonl has {rows} rows, had {rows_before}"
        rows_before = rows
        for f in glob.glob(os.path.join(ck, "*.safetensors")):
            ok, why = _load_ok(ctx, f)
            if not ok:
                return "data_lost", f"after kill {i + 1}: {os.path.basename(f)} does not load: {why}"
    r = ctx.cli(args, cwd=d)
    done = f"already has {epochs} epochs" in r["err"]  # a killed run had finished: nothing left to do
    if r["rc"] != 0 and not done:
        return "data_lost", f"the final --resume auto run failed: {(r['err'] + r['out']).strip()[-400:]}"
    files = glob.glob(os.path.join(ck, "*.safetensors"))
    if len(files) > 3:
        return "data_lost", f"{len(files)} checkpoints kept (keep_checkpoint_max is 3): unbounded"
    rows = _jsonl_rows(os.path.join(d, "r", "metrics.jsonl"))
    if len(rows) < rows_before:
        return "data_lost", f"the final run left {len(rows)} metrics rows, had {rows_before}"
    seen = {int(x.get("epoch", -1)) for x in rows}
    if not set(range(1, epochs + 1)) <= seen:
        return "data_lost", f"metrics rows cover epochs {sorted(seen)}, expected 1..{epochs}"
    final = os.path.join(d, "r", "lenet.safetensors")
    ok, why = _load_ok(ctx, final)
    if not ok:
        return "data_lost", f"final checkpoint: {why}"
    return "ok", (f"{tries} kills ({killed_mid_save} during a save), {len(rows)} metrics rows from "
                  f"{len({x.get('run') for x in rows})} runs, {len(files)} checkpoints kept")


def _when_random(p, ck, rng):
    time.sleep(rng.uniform(0.3, 2.0))
    return 0


def _when_saving(p, ck, rng):
    """Kills while a checkpoint's temp file exists (polls every millisecond), or after 20 s."""
    t0 = time.time()
    wanted = rng.randint(1, 2)
    seen = set()
    while time.time() - t0 < 20 and p.poll() is None:
        tmp = glob.glob(os.path.join(ck, "*.tmp.*"))
        for t in tmp:
            seen.add(t)
        if tmp and len(seen) >= wanted:
            time.sleep(rng.uniform(0, 0.004))
            return 1
        time.sleep(0.001)
    return 0


def fault_restarts(ctx, d):
    cls, msg = _kill_loop(ctx, d, 10, 1, _when_random, 1000)
    return {"class": cls, "message": msg}


def fault_kill_during_saves(ctx, d):
    cls, msg = _kill_loop(ctx, d, 10, 2, _when_saving, 60)
    return {"class": cls, "message": msg}


def _resume_variant(mutate, partial=False, names=(), expect="error"):
    def run(ctx, d):
        arrays, meta = F.safetensors_arrays(read(ctx.fx("lenet")["epoch"]))
        with open(os.path.join(d, "bad.safetensors"), "wb") as f:
            f.write(F.safetensors(mutate(arrays), meta))
        args = ["train", "lenet", "--data", ctx.fx("mnist"), "--out", "o", "--resume", "bad.safetensors"] + LENET_TRAIN
        args[args.index("--epochs") + 1] = "3"
        r = ctx.cli(args + (["--resume-partial"] if partial else []), cwd=d)
        msg = "\n".join(ln for ln in r["err"].splitlines() if ln.startswith("spore")) or r["err"].strip()[-300:]
        if r["signal"]:
            return {"class": "crash", "message": msg}
        if "internal error" in r["err"]:
            return {"class": "internal", "message": msg}
        if expect == "ok":
            text = r["out"] + r["err"]
            if r["rc"] != 0:
                return {"class": "wrong", "message": "refused with --resume-partial: " + msg}
            listed = all(n in text for n in names)
            return {"class": "ok" if listed else "wrong",
                    "message": "" if listed else f"--resume-partial did not list {names}: {text.strip()[-300:]}"}
        if r["rc"] == 0:
            return {"class": "wrong", "message": "resumed (exit 0) from a checkpoint it cannot restore exactly"}
        import run as R
        return {"class": "clear" if R.is_clear(msg, names) else "unclear", "message": msg}
    return run


def _moment(arrays):
    """The Momentum optimizer's moment of fc2.weight (moments.param<k>, in parameter order)."""
    names = [n for n, _ in arrays if not n.startswith("moments.")]
    return f"moments.param{names.index('fc2.weight')}"


RESUME = {  # item 3: --resume silently dropped optimizer state it could not match; item 4: ints
    "missing_moment": (lambda a: [(n, x) for n, x in a if n != _moment(a)], ("moments.",)),
    "reshaped_moment": (lambda a: [(n, x.reshape(-1) if n == _moment(a) else x) for n, x in a], ("moments.",)),
    "float64_moment": (lambda a: [(n, x.astype(np.float64) if n == _moment(a) else x) for n, x in a],
                       ("moments.", "float64", "F64")),
    "extra_entry": (lambda a: a + [("moments.unknown.weight", np.zeros(3, np.float32))], ("moments.unknown.weight",)),
    "int32_weight": (lambda a: [(n, (x * 100).astype(np.int32) if n == "fc1.weight" else x) for n, x in a],
                     ("fc1.weight",)),
}


def fault_cases():
    A = "faults"
    cases = [
        Case(f"{A}/two_runs_one_out", A, "fault", item="33.1", fast=True, fault=fault_concurrent, needs=("mnist",)),
        Case(f"{A}/ten_restarts_killed", A, "fault", item="33.2", fault=fault_restarts, needs=("mnist",),
             expect="ok"),
        Case(f"{A}/kill_during_saves", A, "fault", item="33.2", fault=fault_kill_during_saves, needs=("mnist",),
             expect="ok"),
    ]
    for cid, (mutate, names) in RESUME.items():
        item = "33.4" if "int" in cid else "33.3"
        cases.append(Case(f"{A}/resume_{cid}", A, "fault", "error", names, item, cid in ("missing_moment",
                                                                                        "int32_weight"),
                          fault=_resume_variant(mutate, names=names), needs=("lenet",)))
        if cid != "int32_weight":
            cases.append(Case(f"{A}/resume_partial_{cid}", A, "fault", "ok", names, item, False,
                              fault=_resume_variant(mutate, partial=True, names=names[:1], expect="ok"),
                              needs=("lenet",)))
    # unusable output paths: refused before any work, naming the path
    outs = [
        ("train_out_is_file", ["train", "lenet", "--out", "afile", "--epochs", "1"], ("afile",)),
        ("train_out_under_file", ["train", "lenet", "--out", "afile/sub", "--epochs", "1"], ("afile",)),
        ("train_out_proc", ["train", "lenet", "--out", "/proc/spore_out", "--epochs", "1"], ("/proc/spore_out",)),
        ("train_out_sys", ["train", "lenet", "--out", "/sys/spore_out", "--epochs", "1"], ("/sys/spore_out",)),
        ("train_profile_proc", ["train", "lenet", "--out", "o", "--profile", "/proc/p", "--epochs", "1"], ("/proc/p",)),
        ("train_dump_ir_proc", ["train", "lenet", "--out", "o", "--dump-ir", "/proc/ir", "--epochs", "1"],
         ("/proc/ir",)),
        ("convert_out_proc", ["convert", "{fx}/lenet/lenet.safetensors", "/proc/x.ckpt"], ("/proc/x.ckpt",)),
        ("export_out_proc", ["export", "lenet", "--out", "/proc/x.onnx"], ("/proc/x.onnx",)),
        ("infer_output_proc", ["infer", "{fx}/relu.onnx", "--bench", "--seconds", "0.01", "--output", "/proc/y.npy"],
         ("/proc/y.npy",)),
        ("make_shapes_out_proc", ["data", "make-shapes", "--out", "/proc/shapes", "--train", "1", "--val", "1"],
         ("/proc/shapes",)),
    ]
    for cid, argv, names in outs:
        cases.append(Case(f"{A}/{cid}", A, "cli", "error", names, "", cid in ("train_out_is_file",
                                                                              "convert_out_proc"),
                          argv=argv + (["--data", "{fx}/mnist", "--limit", "16", "--eval-limit", "16"]
                                       if argv[0] == "train" else []),
                          files={"afile": b"x"}, needs=("lenet", "relu_onnx", "mnist")))
    # item 8: predict with an unwritable --out failed only after the inference
    cases.append(Case(f"{A}/predict_out_proc", A, "cli", "error", ("/proc/o.jpg",), "33.8", False,
                      argv=lambda ctx, d: ["predict", "yolov5n", "x.jpg", "--ckpt", ctx.fx("yolo")["ckpt"],
                                           "--out", "/proc/o.jpg"],
                      files={"x.jpg": F.pil_image("JPEG")}, needs=("yolo",),
                      check=None))
    # a file-size limit (ulimit -f) while checkpoints are written: one clear line, nothing lost
    def fsize(ctx, d):
        import resource
        args = ["train", "lenet", "--data", ctx.fx("mnist"), "--out", "o"] + LENET_TRAIN
        limit = os.path.getsize(ctx.fx("lenet")["epoch"]) // 2
        r = ctx.cli(args, cwd=d, preexec=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
        msg = "\n".join(ln for ln in r["err"].splitlines() if ln.startswith("spore")) or r["err"].strip()[-300:]
        if r["signal"]:
            return {"class": "crash", "message": f"signal {r['signal']}: {msg}"}
        if r["rc"] == 0:
            return {"class": "wrong", "message": "a run under a file-size limit smaller than a checkpoint succeeded"}
        left = glob.glob(os.path.join(d, "o", "checkpoints", "*.tmp.*"))
        if left:
            return {"class": "data_lost", "message": f"temp files left: {left}"}
        import run as R
        return {"class": "clear" if R.is_clear(msg, (".safetensors", "limit")) else "unclear", "message": msg}
    cases.append(Case(f"{A}/file_size_limit", A, "fault", fault=fsize, needs=("lenet", "mnist")))

    # item 7: a rank killed under mpiexec is named by Spore before mpiexec's own line
    def lost_rank(ctx, d):
        flags = ["--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader,tcp"]
        cmd = [ctx.fx("mpi"), "-np", "2"] + flags + [ctx.spore, "train", "lenet", "--data", ctx.fx("mnist"),
                                                     "--epochs", "1", "--limit", "512", "--eval-limit", "64",
                                                     "--batch-size", "64", "--out", "o"]
        p = subprocess.run(cmd, cwd=d, env=dict(ctx.env, OMP_NUM_THREADS="1", SPORE_FAULT_INJECT="1:3:kill"),
                           capture_output=True, timeout=300)
        text = (p.stdout + p.stderr).decode("utf-8", "replace")
        line = next((ln for ln in text.splitlines() if "is lost" in ln), "")
        if p.returncode == 0:
            return {"class": "wrong", "message": "the job with a killed rank exited 0"}
        return {"class": "clear" if "rank 1" in line and "--resume" in line else "unclear",
                "message": line or text.strip()[-400:]}
    cases.append(Case(f"{A}/lost_rank_named", A, "fault", item="33.7", fault=lost_rank, needs=("mpi", "mnist")))
    return cases


# ---------------------------------------------------------------------------------------------
# every fuzz-corpus file through the CLI paths and the Python loaders that read its format
def corpus_cases():
    cases = []
    A = "corpus"

    def listing(target):
        return sorted(glob.glob(os.path.join(CORPUS, target, "*")))

    def add(cid, argv, name, blob, needs=(), kind="cli", code="", names=()):
        cases.append(Case(f"{A}/{cid}", A, kind, "any", (name,) + tuple(names), "", False, argv=argv, code=code,
                          files={name: blob}, needs=needs))
    for target in ("safetensors", "mindspore_ckpt"):
        ext = ".safetensors" if target == "safetensors" else ".ckpt"
        for p in listing(target):
            n = os.path.basename(p) + ext
            add(f"{target}/{os.path.basename(p)}/eval", ["eval", "lenet", "--ckpt", n, "--data", "{fx}/mnist",
                                                         "--limit", "16"], n, read(p), ("lenet", "mnist"))
            add(f"{target}/{os.path.basename(p)}/convert", ["convert", n, "o" + (".ckpt" if ext != ".ckpt" else
                                                                                  ".safetensors")], n, read(p))
            add(f"{target}/{os.path.basename(p)}/py", None, n, read(p), kind="py",
                code=f"result = len(ms.load_checkpoint(os.path.join(d, {n!r})))")
    # header-target inputs ("<JSON>\0<data>") made into whole safetensors files
    for target in ("safetensors_header", "checkpoint_model"):
        for p in listing(target):
            b = read(p)
            text, _, data = b.partition(b"\0")
            n = os.path.basename(p) + ".safetensors"
            whole = struct.pack("<Q", len(text)) + text + data
            add(f"{target}/{os.path.basename(p)}/eval", ["eval", "lenet", "--ckpt", n, "--data", "{fx}/mnist",
                                                         "--limit", "16"], n, whole, ("lenet", "mnist"))
            add(f"{target}/{os.path.basename(p)}/convert", ["convert", n, "o.ckpt"], n, whole)
    for p in listing("onnx_model"):
        n = os.path.basename(p) + ".onnx"
        add(f"onnx_model/{os.path.basename(p)}", ["infer", n, "--bench", "--batch", "1", "--seconds", "0.01"], n,
            read(p))
    for target in ("npy", "npz"):
        for p in listing(target):
            n = os.path.basename(p) + ("" if p.endswith("." + target) else "." + target)
            add(f"{target}/{os.path.basename(p)}", ["infer", "{fx}/relu.onnx", "--input", n, "--output", "y.npz"], n,
                read(p), ("relu_onnx",), names=('input "x"',))
    for p in listing("coco"):
        n = os.path.basename(p)
        add(f"coco/{n}/gt", ["coco-eval", n, "res.json"], n, read(p), names=("res.json",))
        cases[-1].files = dict(cases[-1].files, **{"res.json": json.dumps(F.coco_results(F.coco_gt()))})
        add(f"coco/{n}/results", ["coco-eval", "gt.json", n], n, read(p))
        cases[-1].files = dict(cases[-1].files, **{"gt.json": json.dumps(F.coco_gt())})
    for p in listing("image_decode"):
        n = os.path.basename(p)
        add(f"image_decode/{n}", None, n, read(p), kind="py", names=("vision.Decode",),
            code=f"result = vision.Decode()(np.fromfile(os.path.join(d, {n!r}), np.uint8)).shape")
    for p in listing("idx"):
        n = os.path.basename(p)
        add(f"idx/{n}", None, n, read(p), kind="py",
            code=f"import shutil\nos.makedirs(os.path.join(d, 'm'))\n"
                 f"gz = {n!r}.endswith('.gz')\n"
                 f"shutil.copy(os.path.join(d, {n!r}), os.path.join(d, 'm', 't10k-images-idx3-ubyte' + "
                 f"('.gz' if gz else '')))\n"
                 f"shutil.copy(fx + '/mnist/t10k-labels-idx1-ubyte.gz', os.path.join(d, 'm'))\n"
                 f"result = sum(1 for _ in ds.MnistDataset(os.path.join(d, 'm'), usage='test')"
                 f".create_tuple_iterator())")
        cases[-1].needs = ("mnist",)
    for p in listing("cifar"):
        n = os.path.basename(p)
        add(f"cifar/{n}", None, n, read(p), kind="py",
            code=f"import shutil\nos.makedirs(os.path.join(d, 'c'))\n"
                 f"shutil.copy(os.path.join(d, {n!r}), os.path.join(d, 'c', 'test_batch.bin'))\n"
                 f"result = sum(1 for _ in ds.Cifar10Dataset(os.path.join(d, 'c'), usage='test')"
                 f".create_tuple_iterator())")
    return cases


def all_cases():
    return (cli_cases() + safetensors_cases() + ckpt_cases() + npy_cases() + idx_cases() + cifar_cases() +
            coco_cases() + csv_cases() + image_cases() + onnx_cases() + python_cases() + fault_cases() + corpus_cases())
