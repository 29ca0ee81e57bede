#!/usr/bin/env python3
"""torchvision's nms and batched_nms on seeded random boxes (run by tests/detection/nms_test.cpp
when torch and torchvision are importable; the output for the default seed is also committed as
tests/detection/fixtures/nms_torchvision.json, which the test uses otherwise).

  nms_crosscheck.py OUT.json

Each case holds its inputs (float32 values written exactly, as doubles) and torchvision's kept
indices, so the C++ side needs nothing but the file.
"""
import json
import sys

import torch
import torchvision
from torchvision.ops import batched_nms, nms


def case(gen, n, classes, thr, spread, dup):
    # Coordinates on a 1/16 grid (exact in float32, short in JSON, and IoUs that land exactly on a
    # threshold happen); distinct scores k / 2048.
    xy = torch.randint(0, spread * 16, (n, 2), generator=gen).float() / 16
    wh = torch.randint(20 * 16, 60 * 16, (n, 2), generator=gen).float() / 16
    boxes = torch.cat([xy, xy + wh], 1).float()
    if dup and n >= 4:  # exact duplicates (IoU 1) and a box inside another
        boxes[1] = boxes[0]
        boxes[3] = torch.tensor([boxes[2, 0] + 1, boxes[2, 1] + 1, boxes[2, 2] - 1, boxes[2, 3] - 1])
    scores = (torch.randperm(n, generator=gen) + 1).float() / 2048
    idxs = torch.randint(0, classes, (n,), generator=gen)
    return {
        "iou": thr,
        "boxes": [[float(v) for v in b] for b in boxes.tolist()],
        "scores": [float(s) for s in scores.tolist()],
        "idxs": [int(i) for i in idxs],
        "nms": [int(i) for i in nms(boxes, scores, thr)],
        "batched_nms": [int(i) for i in batched_nms(boxes, scores, idxs, thr)],
    }


def main():
    gen = torch.Generator().manual_seed(14)
    cases = []
    k = 0
    for n in (0, 1, 2, 7, 40, 150):
        for thr in (0.3, 0.5, 0.7):
            for classes in (1, 3, 12):
                spread = 60 if k % 2 == 0 else 200
                cases.append(case(gen, n, classes, thr, spread, dup=k % 3 == 0))
                k += 1
    # 1100 boxes: more than 4000 numbers, torchvision's per-class path instead of the offset trick.
    cases.append(case(gen, 1100, 5, 0.45, 300, dup=True))
    doc = {"producer": "torch %s, torchvision %s" % (torch.__version__, torchvision.__version__), "cases": cases}
    with open(sys.argv[1], "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
