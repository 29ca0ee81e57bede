#!/usr/bin/env python3
"""Cross-checks Spore's safetensors files against Hugging Face's reference `safetensors` package
(run by tests/io/checkpoint_test.cpp when `import safetensors` works; numpy is not needed).

  safetensors_crosscheck.py dump FILE OUT    the reference reader's view of FILE, one tensor a line:
                                             "name DTYPE d0,d1,.. hexbytes", then "meta key value"
  safetensors_crosscheck.py write FILE       the reference writer's file of a fixed tensor set
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


if __name__ == "__main__":
    if sys.argv[1] == "dump":
        dump(sys.argv[2], sys.argv[3])
    else:
        write(sys.argv[2])
