#!/usr/bin/env python3
"""pycocotools' COCOeval on cases written by tests/metrics/coco_eval_test.cpp (run by that test when
pycocotools is importable; its output for the generated cases is also committed as
tests/metrics/fixtures/coco_eval_pycocotools.json, which the test uses when it is not).

  coco_eval_crosscheck.py CASES_DIR OUT.json

CASES_DIR holds one folder per case with gt.json (instances) and res.json (results). OUT.json maps
each case name to pycocotools' 12 stats, written with repr() so every double round-trips.
"""
import contextlib
import io
import json
import os
import sys

from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval


def stats_of(case_dir):
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(os.path.join(case_dir, "gt.json"))
        dt = gt.loadRes(os.path.join(case_dir, "res.json"))
        ev = COCOeval(gt, dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return [float(s) for s in ev.stats]


def main():
    cases_dir, out = sys.argv[1], sys.argv[2]
    result = {}
    for name in sorted(os.listdir(cases_dir)):
        if os.path.isdir(os.path.join(cases_dir, name)):
            result[name] = stats_of(os.path.join(cases_dir, name))
    from importlib.metadata import version
    doc = {"producer": "pycocotools " + version("pycocotools"), "stats": result}
    with open(out, "w") as f:
        # json writes floats with repr(): the shortest string that reads back as the same double.
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
