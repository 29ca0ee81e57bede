"""ONNX Runtime's side of bench/peers/deploy_load.sh: load-to-first-result of MODEL.onnx on INPUT.npy (session
creation + the first run, CPU provider, the given intra-op threads; the Python imports are outside the timed
part, as libspore's load is outside `spore infer`'s). Writes the output to OUT.npy; prints one JSON object."""
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort

model, inp_path, out_path, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
x = np.load(inp_path)
t0 = time.perf_counter()
opts = ort.SessionOptions()
opts.intra_op_num_threads = threads
opts.inter_op_num_threads = 1
# The same waiting policy as Spore's OpenMP threads: spinning off when OMP_WAIT_POLICY is passive
# (what the scripts set on a shared machine), ONNX Runtime's default (spinning) otherwise.
if os.environ.get("OMP_WAIT_POLICY", "").lower() == "passive":
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
y = sess.run(None, {sess.get_inputs()[0].name: x})[0]
ms = (time.perf_counter() - t0) * 1000
np.save(out_path, y)
print(json.dumps({"ort": ort.__version__, "first_ms": ms}))
