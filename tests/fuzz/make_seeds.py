#!/usr/bin/env python3
"""Writes the hand-made seed files of the fuzz corpora (tests/fuzz/corpus/<target>/seed_*).

Run from anywhere: python3 tests/fuzz/make_seeds.py. Only the standard library is used. Image
seeds (JPEG variants) come from make_image_seeds.cpp (OpenCV); crash inputs that fuzzing found
are kept next to these as crash_* / oom_* / timeout_* files and are never regenerated.
"""
import gzip
import json
import os
import struct
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed_" + name), "wb") as f:
        f.write(data)


def idx(dims, fill=lambda i: i % 251):
    head = bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims)
    n = 1
    for d in dims:
        n *= d
    return head + bytes(fill(i) for i in range(n))


# -- IDX (MnistDataset): images (N, H, W) and labels (N,), raw and gzipped
put("idx", "images_2x4x3", idx([2, 4, 3]))
put("idx", "images_2x4x3.gz", gzip.compress(idx([2, 4, 3]), mtime=0))
put("idx", "images_2x28x28.gz", gzip.compress(idx([2, 28, 28]), mtime=0))
put("idx", "labels_2", idx([2], lambda i: 7))
put("idx", "labels_2.gz", gzip.compress(idx([2], lambda i: 3), mtime=0))
put("idx", "labels_3_mismatch", idx([3]))
put("idx", "images_0x4x3", idx([0, 4, 3]))

# -- CIFAR binary: one CIFAR-10 record (1 label + 3072 pixels), two CIFAR-100 records (2 + 3072)
put("cifar", "cifar10_1", bytes([3]) + bytes(i % 256 for i in range(3072)))
put("cifar", "cifar100_2", b"".join(bytes([k, 40 + k]) + bytes((i * 7) % 256 for i in range(3072)) for k in range(2)))


# -- safetensors
def st_header(tensors, meta=None):
    """tensors: [(name, dtype, shape, bytes)] -> (header JSON text, data bytes)"""
    h, off, data = {}, 0, b""
    if meta is not None:
        h["__metadata__"] = meta
    for name, dt, shape, b in tensors:
        h[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
        data += b
    text = json.dumps(h, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    return text, data


def st_file(tensors, meta=None):
    text, data = st_header(tensors, meta)
    return struct.pack("<Q", len(text)) + text.encode() + data


def f32(n, v=0.25):
    return struct.pack("<%df" % n, *([v] * n))


SMALL = [("a", "F32", [2, 3], f32(6)), ("b", "I64", [2], struct.pack("<2q", -1, 5)),
         ("c", "BOOL", [3], bytes([0, 1, 2])), ("d", "F16", [1], b"\x00\x3c"),
         ("e", "BF16", [2, 0], b""), ("f", "U8", [], b"\x07")]
put("safetensors", "small", st_file(SMALL, {"epoch": "3", "model": "lenet"}))
put("safetensors", "empty", st_file([]))
put("safetensors", "scalar_f64", st_file([("x", "F64", [], struct.pack("<d", 1.5))]))
put("safetensors", "i8_i32", st_file([("p", "I8", [4], bytes([1, 255, 3, 128])),
                                       ("q", "I32", [1, 1], struct.pack("<i", -7))]))

# header targets: "<JSON>\0<data>"
text, data = st_header(SMALL, {"epoch": "3"})
put("safetensors_header", "small", text.encode() + b"\0" + data)
text, data = st_header([])
put("safetensors_header", "empty", text.encode() + b"\0")
text, data = st_header([("x", "F32", [1, 2, 1], f32(2)), ("y", "I64", [0], b"")])
put("safetensors_header", "xy", text.encode() + b"\0" + data)

# checkpoint into LeNet-5: matching names and shapes, optimizer state, mismatches, other dtypes
LENET = [("conv1.weight", [6, 1, 5, 5]), ("fc3.weight", [10, 84]), ("fc3.bias", [10]),
         ("fc2.bias", [84]), ("fc1.bias", [120])]


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


ok = [(n, "F32", s, f32(numel(s), 0.01)) for n, s in LENET]
text, data = st_header(ok, {"epoch": "1", "step": "4", "global_step": "4"})
put("checkpoint_model", "lenet_part", text.encode() + b"\0" + data)
text, data = st_header(ok[2:] + [("moments.fc3.bias", "F32", [10], f32(10))])
put("checkpoint_model", "with_moments", text.encode() + b"\0" + data)
text, data = st_header([("fc3.bias", "F32", [5], f32(5)), ("fc2.bias", "F32", [84, 1], f32(84))])
put("checkpoint_model", "shape_mismatch", text.encode() + b"\0" + data)
text, data = st_header([("fc3.bias", "F16", [10], b"\x00\x3c" * 10), ("fc2.bias", "F64", [84], struct.pack("<84d", *([0.5] * 84))),
                        ("fc1.bias", "I32", [120], struct.pack("<120i", *range(120)))])
put("checkpoint_model", "other_dtypes", text.encode() + b"\0" + data)

# -- COCO annotations
coco = {
    "images": [{"id": 1, "file_name": "a.jpg", "width": 4, "height": 4},
               {"id": 7, "file_name": "a.jpg"}, {"id": 9, "file_name": "missing.jpg"}],
    "annotations": [{"id": 1, "image_id": 1, "category_id": 3, "bbox": [0, 0, 2, 2.5], "iscrowd": 0, "area": 5},
                    {"id": 2, "image_id": 7, "category_id": 1, "bbox": [1, 1, 1, 1], "iscrowd": 1},
                    {"id": 3, "image_id": 1, "category_id": 2, "bbox": [0.5, 0, 0, 1]}],
    "categories": [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}, {"id": 3, "name": "x"}],
}
put("coco", "three_images.json", json.dumps(coco, indent=1))
put("coco", "no_annotations.json", json.dumps({"images": [{"id": 0, "file_name": "a.jpg"}]}))
put("coco", "escaped.json", '{"info": {"v": "\\u00e9"}, "images": [{"file_name": "a\\u002ejpg", "id": 2}],'
    ' "annotations": [{"bbox": [1e0, 2E-1, 3, 4], "image_id": 2, "category_id": -1}]}')

# -- CSV (header mode: all text; given-columns mode: int32, float32, text)
put("csv", "header.csv", "i,f,s\n1,2.5,abc\n-3,1e3,\"quoted, with comma\"\n")
put("csv", "crlf.csv", "i,f,s\r\n7,0.5,x\r\n,,\r\n")
put("csv", "quotes.csv", "a,b,c\n\"multi\nline\",\"say \"\"hi\"\"\",3\n\n4,5,6")
put("csv", "numbers.csv", "2147483647,-1.5e-3,z\n-2147483648,inf,\n0,nan,\"\"\n")


# -- images: PNG variants built here (JPEGs come from make_image_seeds.cpp)
def png(w, h, color_type, depth, rows, palette=None, interlace=0):
    def chunk(t, b):
        return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b) & 0xffffffff)
    raw = b"".join(b"\0" + r for r in rows)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, interlace))
    if palette:
        out += chunk(b"PLTE", palette)
    return out + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


put("image_decode", "rgb_3x2.png", png(3, 2, 2, 8, [bytes(range(9)), bytes(range(9, 18))]))
put("image_decode", "gray_4x4.png", png(4, 4, 0, 8, [bytes([i * 60] * 4) for i in range(4)]))
put("image_decode", "rgba_2x2.png", png(2, 2, 6, 8, [bytes(range(8)), bytes(range(8, 16))]))
put("image_decode", "gray16_2x1.png", png(2, 1, 0, 16, [b"\x12\x34\xff\xff"]))
put("image_decode", "palette_2x2.png", png(2, 2, 3, 8, [b"\x00\x01", b"\x01\x00"], palette=b"\xff\x00\x00\x00\xff\x00"))
put("image_decode", "gray1bit_8x1.png", png(8, 1, 0, 1, [b"\xa5"]))
# a BMP (24-bit, 2x2)
bmp_px = b"".join(bytes([0, 0, 255, 0, 255, 0]) + b"\0\0" for _ in range(2))
put("image_decode", "rgb_2x2.bmp", b"BM" + struct.pack("<IHHI", 54 + len(bmp_px), 0, 0, 54) +
    struct.pack("<IiiHHIIiiII", 40, 2, 2, 1, 24, 0, len(bmp_px), 2835, 2835, 0, 0) + bmp_px)


# -- regression inputs for bugs found by review while writing the targets (each crashed a sanitizer
#    build or allocated without bound before its fix; see docs/hardening.md)
def put_regress(target, name, data):
    d = os.path.join(ROOT, target)
    with open(os.path.join(d, "regress_" + name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


# IDX dims multiplying past int64 (UB in the element count), then a huge allocation
put_regress("idx", "dims_2pow96", bytes([0, 0, 8, 3]) + b"\xff" * 12 + b"abc")
# no data (a zero dim) but the other dims overflow the strides
put_regress("idx", "zero_dim_huge_others", bytes([0, 0, 8, 3]) + b"\0\0\0\0" + b"\xff" * 8)
# safetensors: no data, yet dims whose product overflows int64 strides
put_regress("safetensors_header", "stride_overflow",
            '{"x":{"dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}}\0')
# float64 values beyond float32 into LeNet's float32 parameters (an out-of-range cast is UB)
text, data = st_header([("fc3.bias", "F64", [10], struct.pack("<10d", *([1e300, -1e300, float("nan"), 1.0, 0.0] * 2)))])
put_regress("checkpoint_model", "f64_beyond_float", text.encode() + b"\0" + data)
# COCO: a bbox value beyond float32; a category id beyond int32
put_regress("coco", "bbox_1e300.json", '{"images":[{"id":1,"file_name":"a.jpg"}],'
            '"annotations":[{"image_id":1,"category_id":1,"bbox":[1e300,0,1,1]}]}')
put_regress("coco", "category_2pow40.json", '{"images":[{"id":1,"file_name":"a.jpg"}],'
            '"annotations":[{"image_id":1,"category_id":1099511627776,"bbox":[0,0,1,1]}]}')
# CSV: a float32 column value beyond float32
put_regress("csv", "float_1e300.csv", "i,f,s\n1,1e300,x\n")
# JPEG whose header claims 65500 x 65500 pixels (12 GiB decoded) in a few hundred bytes
with open(os.path.join(ROOT, "image_decode", "seed_baseline_9x7.jpg"), "rb") as f:
    jpg = bytearray(f.read())
sof = jpg.find(b"\xff\xc0")
jpg[sof + 5:sof + 9] = struct.pack(">HH", 65500, 65500)
put_regress("image_decode", "jpeg_65500x65500.jpg", bytes(jpg))
print("seeds written under", ROOT)
