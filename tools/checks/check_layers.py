#!/usr/bin/env python3
"""The include rule (docs/architecture.md, "Layers"): a file may include headers of its own layer
and of the layers below it, never one above. Run by ctest (include_layers); exits 1 and lists every
violation with the fix to make.

    python3 tools/checks/check_layers.py [REPO_ROOT]
"""
import re
import sys
from pathlib import Path

# Lowest first. A file's layer is that of the longest pattern matching its path (relative to the
# repository root); patterns ending in "/" match a folder, "*" matches within one folder name.
LAYERS = [
    ("core", [  # Tensor, DType, Error, Context, and the two contracts the devices implement
        "src/core/", "include/spore/dtype.h", "include/spore/error.h", "include/spore/device.h",
        "include/spore/allocator.h", "include/spore/tensor.h", "include/spore/context.h",
        "include/spore/grad_mode.h", "include/spore/profiler.h",
        "src/backends/backend.h", "src/backends/registry.cpp",  # the backend interface
        "src/ops/op.h", "src/ops/ops.def", "src/ops/precision.h",  # the op interface kernels see
        "src/ops/fused_program.h", "src/ops/blocked.h",
        # a backend's private ops by name (its kernels register on them): backends/<name>/ops/
        "src/backends/*/ops/ops.h", "src/backends/*/ops/ops.def"]),
    ("devices", ["src/backends/"]),  # kernels, allocators: backends/<name>/
    ("compiler", [  # op definitions and dispatch, autograd, Graph mode, backends' graph passes
        "src/ops/", "src/autograd/", "src/graph/", "src/backends/*/passes/",
        "src/backends/*/ops/",  # a backend's private ops: their registration and rules
        "include/spore/ops.h", "include/spore/autograd.h", "include/spore/jit.h",
        "include/spore/custom_op.h"]),
    ("framework", [  # what users call
        "src/nn/", "src/optim/", "src/train/", "src/amp/", "src/data/", "src/io/", "src/parallel/",
        "src/onnx/", "src/metrics/", "src/detection/", "src/deploy/",
        "include/spore/"]),
    ("apps", ["models/", "tools/", "examples/", "python/", "src/capi/"]),  # the model zoo, the CLI, examples, the Python bindings
]
# Within a layer, folders that are layers of their own, lowest first: a file of one may include the
# same layer's files of its own sub-layer and those below, never above (files of the layer in none
# of these are free within it). Patterns as above.
SUBLAYERS = {
    "compiler": [
        ("ops", ["src/ops/", "src/backends/*/ops/", "include/spore/ops.h", "include/spore/custom_op.h"]),
        ("autograd", ["src/autograd/", "include/spore/autograd.h"]),
        ("graph", ["src/graph/", "include/spore/jit.h"]),
    ],
    "framework": [
        ("nn", ["src/nn/", "include/spore/nn/"]),
        ("train", ["src/train/", "include/spore/train/"]),
        # include/spore/amp.h declares the policy and loss-scale types that cells and training
        # cells carry (it includes only core), so nn and train may include it; amp's code is above.
        ("amp", ["src/amp/"]),
    ],
}
# Pairs of folders of one layer where the first may not include the second at all.
APART = [
    (["src/io/", "include/spore/io/"], ["src/data/", "include/spore/data/"], "io reads and writes files; it "
     "does not reach into the data engine: move the shared helper into core (or io)"),
]
CHECKED = ("src/", "include/", "models/", "tools/", "examples/", "python/")
SUFFIXES = (".h", ".cpp", ".def", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+["<]([^">]+)[">]', re.M)


def pattern_regex(p):
    rx = re.escape(p).replace(r"\*", "[^/]+")
    return re.compile("^" + rx + ("" if p.endswith("/") else "$"))


RULES = sorted(((len(p), i, name, pattern_regex(p)) for i, (name, pats) in enumerate(LAYERS) for p in pats),
               key=lambda r: r[0],
               reverse=True)


def layer_of(rel):
    for _, i, name, rx in RULES:
        if rx.match(rel):
            return i, name
    return None


def longest_match(rel, patterns):
    best = -1
    for p in patterns:
        if pattern_regex(p).match(rel):
            best = max(best, len(p))
    return best


def sublayer_of(rel, layer):
    """(index, name) of rel's sub-layer within its layer, or None."""
    found = None
    for i, (name, pats) in enumerate(SUBLAYERS.get(layer, [])):
        n = longest_match(rel, pats)
        if n >= 0 and (found is None or n > found[2]):
            found = (i, name, n)
    return found[:2] if found else None


def apart_violation(rel, target):
    for mine, theirs, why in APART:
        if longest_match(rel, mine) >= 0 and longest_match(target, theirs) >= 0:
            return why
    return None


def resolve(root, src, inc):
    """The repository path an include names, or None for a system / third-party header."""
    for base in (src.parent, root / "src", root / "include", root):
        cand = (base / inc).resolve()
        if cand.is_file() and root in cand.parents:
            return cand.relative_to(root).as_posix()
    return None


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]).resolve()
    bad, files = [], 0
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if not rel.startswith(CHECKED) or path.suffix not in SUFFIXES or not path.is_file():
            continue
        mine = layer_of(rel)
        if mine is None:
            bad.append(f"{rel}: no layer; add its folder to LAYERS in tools/checks/check_layers.py")
            continue
        files += 1
        for inc in INCLUDE.findall(path.read_text(errors="replace")):
            target = resolve(root, path, inc)
            if target is None:
                continue
            theirs = layer_of(target)
            if theirs and theirs[0] > mine[0]:
                bad.append(f"{rel} ({mine[1]}) includes {target} ({theirs[1]}): a lower layer may not "
                           f"include a higher one; move the code, or give the lower layer an interface "
                           f"the higher one implements")
            elif theirs and theirs[0] == mine[0]:
                a, b = sublayer_of(rel, mine[1]), sublayer_of(target, mine[1])
                if a and b and b[0] > a[0]:
                    bad.append(f"{rel} ({mine[1]}/{a[1]}) includes {target} ({mine[1]}/{b[1]}): "
                               f"{a[1]} is below {b[1]}; move the code, or give {a[1]} an interface "
                               f"(a hook) that {b[1]} implements")
                why = apart_violation(rel, target)
                if why:
                    bad.append(f"{rel} includes {target}: {why}")
    if bad:
        print("include rule: %d violation(s)" % len(bad))
        print("\n".join("  " + b for b in bad))
        return 1
    subs = "; ".join(f"{k}: {' < '.join(n for n, _ in v)}" for k, v in SUBLAYERS.items())
    print(f"include rule: {files} files checked, every include points at the same or a lower layer "
          f"({' < '.join(n for n, _ in LAYERS)}; {subs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
