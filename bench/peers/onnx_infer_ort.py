"""ONNX Runtime's side of bench/peers/onnx_infer.sh: median ms per run of MODEL at one batch size,
CPU provider, the given intra-op threads, after a warm-up; prints one JSON object."""
import json
import os
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort

model, batch, threads, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
opts = ort.SessionOptions()
opts.intra_op_num_threads = threads
opts.inter_op_num_threads = 1
# The same waiting policy as Spore's OpenMP threads: spinning off when OMP_WAIT_POLICY is passive
# (what the scripts set on a shared machine), ONNX Runtime's default (spinning) otherwise.
if os.environ.get("OMP_WAIT_POLICY", "").lower() == "passive":
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
inp = sess.get_inputs()[0]
shape = [batch if not isinstance(d, int) else d for d in inp.shape]
x = np.random.RandomState(0).standard_normal(shape).astype(np.float32)
for _ in range(3):
    sess.run(None, {inp.name: x})
times, t0 = [], time.perf_counter()
while len(times) < 5 or time.perf_counter() - t0 < seconds:
    s = time.perf_counter()
    sess.run(None, {inp.name: x})
    times.append((time.perf_counter() - s) * 1000)
print(json.dumps({"ort": ort.__version__, "median_ms": statistics.median(times), "best_ms": min(times), "runs": len(times)}))
