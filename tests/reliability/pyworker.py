"""The Python side of the reliability harness: imports spore once, then runs the Python cases it
is sent, one JSON line each on stdin ({"id", "code", "dir", "fx"}), and answers one JSON line each
on stdout: {"id", "status": "ok"|"exc", "type", "msg", "result"}. Before each case it writes
"@start <id>" so that the harness can tell which case a crash (a signal) happened in; the harness
then starts a new worker for the rest."""
import json
import os
import sys
import traceback
import warnings

import numpy as np

import spore as ms
from spore import dataset as ds
from spore.dataset import vision

out = sys.stdout
sys.stdout = sys.stderr  # what the cases print must not mix with the answers


def answer(obj):
    out.write("@result " + json.dumps(obj) + "\n")
    out.flush()


for line in sys.stdin:
    req = json.loads(line)
    out.write("@start " + req["id"] + "\n")
    out.flush()
    ns = {"ms": ms, "ds": ds, "vision": vision, "np": np, "os": os, "d": req["dir"], "fx": req["fx"],
          "result": None}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exec(compile(req["code"], req["id"], "exec"), ns)
        answer({"id": req["id"], "status": "ok", "result": repr(ns.get("result"))[:2000],
                "warnings": [str(w.message)[:500] for w in caught]})
    except BaseException as e:  # noqa: B902 -- every exception is an outcome to classify
        tb = traceback.extract_tb(e.__traceback__)
        answer({"id": req["id"], "status": "exc", "type": type(e).__name__, "msg": str(e)[:4000],
                "where": f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""})
