#!/usr/bin/env python3
"""Cross-checks Spore's safetensors files against Hugging Face's reference `safetensors` package
(run by tests/io/checkpoint_test.cpp; scripts/setup.sh installs safetensors and numpy).

  safetensors_crosscheck.py dump FILE OUT        the reference reader's view of FILE, one tensor a
                                                 line: "name DTYPE d0,d1,.. hexbytes", then
                                                 "meta key value" (the package's core API, no numpy)
  safetensors_crosscheck.py write FILE           the reference writer's file of a fixed tensor set
  safetensors_crosscheck.py numpy-dump FILE OUT  as dump, read the way most Python users do, with
                                                 safetensors.numpy.load_file into numpy arrays:
                                                 "name numpy-dtype d0,d1,.. hexbytes"
  safetensors_crosscheck.py numpy-write FILE     safetensors.numpy.save_file of numpy arrays whose
                                                 values the C++ side checks
"""
import ctypes
import json
import struct
import sys

import safetensors


def dump(path, out):
    with open(path, "rb") as f:
        data = f.read()
    lines = []
    for name, t in safetensors.deserialize(data):  # validates the whole file
        shape = ",".join(str(d) for d in t["shape"])
        lines.append(f"{name} {t['dtype'].upper()} {shape} {bytes(t['data']).hex()}")
    (n,) = struct.unpack("<Q", data[:8])
    meta = json.loads(data[8 : 8 + n]).get("__metadata__", {})
    lines += [f"meta {k} {v}" for k, v in sorted(meta.items())]
    with open(out, "w") as f:
        f.write("\n".join(sorted(lines)) + "\n")


# (name, reference dtype name, shape, bytes): the C++ side checks these exact values.
FIXED = [
    ("f32", "float32", [2, 3], bytes(range(24))),
    ("i64", "int64", [3], struct.pack("<3q", -1, 2**40, 7)),
    ("bf16", "bfloat16", [2], struct.pack("<2H", 0x3FC0, 0xC000)),  # 1.5, -2.0
    ("flags", "bool", [4], bytes([1, 0, 0, 1])),
    ("u8", "uint8", [], bytes([200])),
]


def write(path):
    keep = [ctypes.create_string_buffer(b, len(b)) for _, _, _, b in FIXED]
    specs = {
        name: safetensors.TensorSpec(dtype=dt, shape=shape, data_ptr=ctypes.addressof(buf),
                                     data_len=len(b))
        for (name, dt, shape, b), buf in zip(FIXED, keep)
    }
    with open(path, "wb") as f:
        f.write(safetensors.serialize(specs, metadata={"source": "python"}))


def numpy_dump(path, out):
    import safetensors.numpy

    lines = []
    for name, a in safetensors.numpy.load_file(path).items():
        shape = ",".join(str(d) for d in a.shape)
        lines.append(f"{name} {a.dtype} {shape} {a.tobytes().hex()}")
    with open(out, "w") as f:
        f.write("\n".join(sorted(lines)) + "\n")


def numpy_write(path):
    import numpy as np
    import safetensors.numpy

    arrays = {
        "weight": (np.arange(12, dtype=np.float32) / 4).reshape(3, 4),
        "half": np.array([0.5, -1.25, 65504.0], dtype=np.float16),
        "ids": np.array([[1, -2], [3, 2**40]], dtype=np.int64),
        "mask": np.array([True, False, True]),
        # safetensors 0.8.0's save_file writes a non-contiguous array's raw memory (the values of
        # a plain .T come out in the wrong order), so the transposed values are made contiguous.
        "transposed": np.ascontiguousarray(np.arange(6, dtype=np.int32).reshape(2, 3).T),
        "scalar": np.array(2.5, dtype=np.float64),
    }
    safetensors.numpy.save_file(arrays, path, metadata={"framework": "numpy"})


if __name__ == "__main__":
    {"dump": lambda: dump(sys.argv[2], sys.argv[3]), "write": lambda: write(sys.argv[2]),
     "numpy-dump": lambda: numpy_dump(sys.argv[2], sys.argv[3]),
     "numpy-write": lambda: numpy_write(sys.argv[2])}[sys.argv[1]]()
