"""Byte builders for every file format Spore reads, used by the reliability harness (cases.py) to
write valid files and then break them. Standard library plus numpy only: the harness must not
depend on the `onnx` or `protobuf` packages, so the two protobuf formats (MindSpore .ckpt, ONNX)
are written by the small encoder below."""
import gzip
import io
import json
import struct
import zipfile
import zlib

import numpy as np


# -- protobuf wire format (enough for .ckpt and ONNX: varints and length-delimited fields)
def varint(n):
    n &= (1 << 64) - 1  # negative int64 values are 10-byte varints
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_int(field, n):
    return varint(field << 3) + varint(n)


def pb_bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return varint((field << 3) | 2) + varint(len(b)) + b


# -- safetensors: 8-byte little-endian header length, a JSON header, then the data
SAFETENSORS_DTYPES = {"float32": "F32", "float64": "F64", "float16": "F16", "int32": "I32", "int64": "I64",
                      "int8": "I8", "uint8": "U8", "bool": "BOOL"}


def safetensors(tensors, meta=None, header_text=None):
    """tensors: [(name, np.ndarray)]; header_text replaces the JSON (for duplicate keys etc.)."""
    h, data, off = {}, b"", 0
    if meta:
        h["__metadata__"] = meta
    for name, a in tensors:
        b = np.ascontiguousarray(a).tobytes()
        h[name] = {"dtype": SAFETENSORS_DTYPES[str(a.dtype)], "shape": list(a.shape),
                   "data_offsets": [off, off + len(b)]}
        off += len(b)
        data += b
    text = (header_text if header_text is not None else json.dumps(h, separators=(",", ":"))).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def read_safetensors(blob):
    """(header dict in file order as a list of (key, value), data bytes) of a safetensors file."""
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n], object_pairs_hook=list)
    return header, blob[8 + n:]


def safetensors_arrays(blob):
    """[(name, np.ndarray)], metadata of a safetensors file (for rewriting a checkpoint)."""
    header, data = read_safetensors(blob)
    inv = {v: k for k, v in SAFETENSORS_DTYPES.items()}
    out, meta = [], None
    for k, v in header:
        v = dict(v)
        if k == "__metadata__":
            meta = v
            continue
        a, b = v["data_offsets"]
        out.append((k, np.frombuffer(data[a:b], dtype=inv[v["dtype"]]).reshape(v["shape"]).copy()))
    return out, meta


# -- MindSpore .ckpt: Checkpoint { repeated Value value = 1 }, Value { tag = 1, TensorProto = 2 },
#    TensorProto { repeated int64 dims = 1, string tensor_type = 2, bytes tensor_content = 3 }
MS_TYPES = {"float32": "Float32", "float64": "Float64", "float16": "Float16", "int32": "Int32",
            "int64": "Int64", "int8": "Int8", "uint8": "UInt8", "bool": "Bool"}


def ms_ckpt(tensors, raw_names=False):
    """tensors: [(name (str or bytes), np.ndarray)]."""
    out = b""
    for name, a in tensors:
        dims = b"".join(pb_int(1, d) for d in (a.shape or (0,)))
        t = dims + pb_bytes(2, MS_TYPES[str(a.dtype)]) + pb_bytes(3, np.ascontiguousarray(a).tobytes())
        out += pb_bytes(1, pb_bytes(1, name) + pb_bytes(2, t))
    return out


# -- NumPy .npy / .npz (numpy writes them; these build the malformed ones by hand)
def npy(a):
    f = io.BytesIO()
    np.save(f, a)
    return f.getvalue()


def npy_raw(header_dict_text, data=b"", version=(1, 0)):
    """A .npy with a hand-written header dict text, padded as numpy pads it."""
    h = header_dict_text.encode("latin1")
    pre = 10 if version[0] == 1 else 12
    h += b" " * ((64 - (pre + len(h) + 1) % 64) % 64) + b"\n"
    size = struct.pack("<H", len(h)) if version[0] == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes(version) + size + h + data


def npz(arrays, compressed=False):
    f = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(f, **arrays)
    return f.getvalue()


def zip_members(members):
    """A zip of {name: bytes} (an .npz with members numpy would not write)."""
    f = io.BytesIO()
    with zipfile.ZipFile(f, "w") as z:
        for n, b in members.items():
            z.writestr(n, b)
    return f.getvalue()


# -- IDX (MNIST): magic 0 0 <type> <ndims>, big-endian dims, data
def idx(dims, data=None, type_code=8):
    n = 1
    for d in dims:
        n *= d
    if data is None:
        data = bytes(i % 251 for i in range(n))
    return bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + data


def mnist_set(n_train=64, n_test=32, size=(28, 28), gz=True):
    """{file name: bytes} of an MNIST-layout folder with n images per split, labels 0..9."""
    out = {}
    for split, n in (("train", n_train), ("t10k", n_test)):
        img = idx([n, *size], bytes((i * 7) % 256 for i in range(n * size[0] * size[1])))
        lab = idx([n], bytes(i % 10 for i in range(n)))
        for name, b in ((f"{split}-images-idx3-ubyte", img), (f"{split}-labels-idx1-ubyte", lab)):
            out[name + (".gz" if gz else "")] = gzip.compress(b, mtime=0) if gz else b
    return out


# -- CIFAR-10 / -100 binaries: per record 1 (or 2) label bytes + 3072 pixel bytes
def cifar10(n, label=3):
    return b"".join(bytes([label % 256]) + bytes((i + k) % 256 for i in range(3072)) for k in range(n))


def cifar100(n):
    return b"".join(bytes([k % 20, k % 100]) + bytes((i * 3 + k) % 256 for i in range(3072)) for k in range(n))


# -- images
def png_chunks(w, h, color_type=2, depth=8, rows=None, idat=None):
    """A PNG built chunk by chunk (for sizes no encoder would write)."""
    def chunk(t, b):
        return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b) & 0xffffffff)
    if idat is None:
        ch = {0: 1, 2: 3, 6: 4}[color_type]
        rows = rows if rows is not None else [bytes(w * ch)] * h
        idat = zlib.compress(b"".join(b"\0" + r for r in rows))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 0)) +
            chunk(b"IDAT", idat) + chunk(b"IEND", b""))


def pil_image(fmt, w=16, h=12, mode="RGB"):
    from PIL import Image
    a = (np.arange(w * h * 3, dtype=np.uint32).reshape(h, w, 3) * 37 % 256).astype(np.uint8)
    im = Image.fromarray(a, "RGB").convert(mode)
    f = io.BytesIO()
    im.save(f, fmt)
    return f.getvalue()


def jpeg_with_size(jpeg, w, h):
    """The JPEG with its SOF0 frame header claiming w x h pixels."""
    b = bytearray(jpeg)
    sof = b.find(b"\xff\xc0")
    b[sof + 5:sof + 9] = struct.pack(">HH", h, w)
    return bytes(b)


# -- ONNX: ModelProto { ir_version = 1, opset_import = 8 {domain = 1, version = 2}, graph = 7 },
#    GraphProto { node = 1, name = 2, initializer = 5, input = 11, output = 12 },
#    NodeProto { input = 1, output = 2, name = 3, op_type = 4, domain = 7 },
#    ValueInfoProto { name = 1, type = 2 { tensor_type = 1 { elem_type = 1, shape = 2 { dim = 1 } } } }
ONNX_FLOAT = 1


def onnx_value_info(name, shape, elem_type=ONNX_FLOAT):
    dims = b"".join(pb_bytes(1, pb_bytes(2, d) if isinstance(d, str) else pb_int(1, d)) for d in shape)
    tensor_type = pb_int(1, elem_type) + pb_bytes(2, dims)
    return pb_bytes(1, name) + pb_bytes(2, pb_bytes(1, tensor_type))


def onnx_node(op, inputs, outputs, name=""):
    return (b"".join(pb_bytes(1, i) for i in inputs) + b"".join(pb_bytes(2, o) for o in outputs) +
            pb_bytes(3, name or op.lower()) + pb_bytes(4, op))


def onnx_model(nodes, inputs, outputs, opset=17, ir_version=8, extra_graph=b""):
    """nodes: [(op, [in], [out])]; inputs/outputs: [(name, shape)]."""
    g = b"".join(pb_bytes(1, onnx_node(*n)) for n in nodes) + pb_bytes(2, "g")
    g += b"".join(pb_bytes(11, onnx_value_info(n, s)) for n, s in inputs)
    g += b"".join(pb_bytes(12, onnx_value_info(n, s)) for n, s in outputs) + extra_graph
    opset_b = b"" if opset is None else pb_bytes(8, pb_bytes(1, "") + pb_int(2, opset))
    return pb_int(1, ir_version) + pb_bytes(2, "reliability") + pb_bytes(7, g) + opset_b


def onnx_relu(opset=17, op="Relu", shape=("N", 4)):
    return onnx_model([(op, ["x"], ["y"])], [("x", list(shape))], [("y", list(shape))], opset=opset)


# -- COCO JSON
def coco_gt(n_images=2, boxes_per_image=2, categories=((1, "cat"), (2, "dog"))):
    images = [{"id": i + 1, "file_name": f"{i + 1:06d}.jpg", "width": 64, "height": 48} for i in range(n_images)]
    anns, k = [], 1
    for im in images:
        for j in range(boxes_per_image):
            anns.append({"id": k, "image_id": im["id"], "category_id": categories[j % len(categories)][0],
                         "bbox": [4.0 + 8 * j, 5.0, 10.0, 12.0], "area": 120.0, "iscrowd": 0})
            k += 1
    return {"images": images, "annotations": anns, "categories": [{"id": c, "name": n} for c, n in categories]}


def coco_results(gt, score=0.9):
    return [{"image_id": a["image_id"], "category_id": a["category_id"], "bbox": a["bbox"], "score": score}
            for a in gt["annotations"]]


# -- generic mutations
def truncations(blob, offsets=None):
    """(label, bytes) for the blob cut at several offsets: 0, 1, 7, 8, 9, 16, a quarter, half, and
    one byte short."""
    n = len(blob)
    cuts = sorted(set(c for c in (offsets or (0, 1, 7, 8, 9, 16, n // 4, n // 2, n - 1)) if 0 <= c < n))
    return [(f"cut{c}", blob[:c]) for c in cuts]


def random_bytes(seed, n):
    import random
    r = random.Random(seed)
    return bytes(r.getrandbits(8) for _ in range(n))


def flip_bytes(blob, seed, count=4, start=0, end=None):
    """The blob with `count` bytes in [start, end) replaced by random values (seeded)."""
    import random
    r = random.Random(seed)
    b = bytearray(blob)
    end = len(b) if end is None else min(end, len(b))
    for _ in range(count):
        if end > start:
            b[r.randrange(start, end)] = r.getrandbits(8)
    return bytes(b)
