"""No reference-counting leaks: training-step loops (PyNative, Graph, a Python cell inside the C++
TrainOneStepCell, a dataset with Python code) keep a steady RSS. The full 10,000-step check is
bench/python/leak_check.py; this runs a shorter version of it."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "python"))
import leak_check  # noqa: E402


def test_steady_rss():
    results = leak_check.run(steps=3000, warmup=500)
    for r in results:
        # A leaked 32x32 float32 tensor per step would add ~4 MiB per 1000 steps.
        assert r["mib_per_1000"] < 0.5, r
