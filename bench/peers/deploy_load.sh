#!/usr/bin/env bash
# The compiled model file (docs/deploy.md) against compiling at load: for each MODEL of the zoo
# (exported to ONNX with its initial weights), load-to-first-result of `spore infer model.spore`
# vs `spore infer model.onnx` (import + trace + every pass at load) vs ONNX Runtime's session
# creation + first run (when importable; ORT_PYTHONPATH adds a folder for it), 2 threads each,
# batch 1. The sides take turns for REPS rounds (a load spike on the shared machine hits all);
# reported: medians and the ratios onnx/spore and ort/spore (> 1: the compiled file is faster),
# plus each process's whole wall time (which adds loading the libraries).
# First it checks the compiled file gives the source network's outputs (`spore export --input`
# runs the network itself) from the CLI, from C (examples/c/run_model.c) and from Python
# (ms.load + nn.GraphCell), at batch 1 and 4.
# usage: bench/peers/deploy_load.sh [BUILD]    (REPS=7 MODELS="lenet resnet18", or yolov5s at 320 px)
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
REPS=${REPS:-7}
MODELS=${MODELS:-lenet resnet18}
cd "$(dirname "$0")/../.."
ROOT=$PWD
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive
have_ort=1
PYTHONPATH=${ORT_PYTHONPATH:-} /usr/bin/python3 -c "import onnxruntime" 2>/dev/null || have_ort=0
cc -std=c99 -O2 -o "$out/run_model" examples/c/run_model.c -Iinclude -L"$BUILD" -lspore_c \
  -Wl,-rpath,"$BUILD"

for m in $MODELS; do
  extra=()
  case $m in
  lenet) shape="1, 28, 28" ;;
  resnet18) shape="3, 32, 32" ;;
  yolov5s) shape="3, 320, 320" extra=(--img 320) ;;  # untrained weights, the decoded predictions
  *) echo "unknown model $m (lenet, resnet18, yolov5s)" >&2; exit 2 ;;
  esac
  for b in 1 4; do
    /usr/bin/python3 -c "import numpy as np; np.save('$out/$m.x$b.npy', np.random.RandomState($b).randn($b, $shape).astype(np.float32))"
  done
  "$BUILD/spore" export "$m" "${extra[@]}" --out "$out/$m.onnx" --input "$out/$m.x4.npy" --output "$out/$m.ref4.npy" > /dev/null
  "$BUILD/spore" compile "$out/$m.onnx" --batch 1,4 -o "$out/$m.spore"
  "$BUILD/spore" infer "$out/$m.spore" --input "$out/$m.x4.npy" --output "$out/$m.cli4.npy" > /dev/null
  "$BUILD/spore" infer "$out/$m.onnx" --input "$out/$m.x4.npy" --output "$out/$m.onnx4.npy" > /dev/null
  /usr/bin/python3 -c "import numpy as np; np.load('$out/$m.x4.npy').tofile('$out/$m.x4.f32')"
  "$out/run_model" "$out/$m.spore" "$out/$m.x4.f32" "$out/$m.c4.f32" > /dev/null
  PYTHONPATH=$BUILD/python /usr/bin/python3 - "$out" "$m" <<'PY'
import sys
import numpy as np
import spore as ms
from spore import nn
out, m = sys.argv[1], sys.argv[2]
x = np.load(f"{out}/{m}.x4.npy")
ref = np.load(f"{out}/{m}.ref4.npy")
got = {
    "CLI (spore infer .spore)": np.load(f"{out}/{m}.cli4.npy"),
    "C (run_model)": np.fromfile(f"{out}/{m}.c4.f32", dtype=np.float32).reshape(ref.shape),
    "Python (GraphCell)": nn.GraphCell(ms.load(f"{out}/{m}.spore"))(ms.Tensor(x)).asnumpy(),
    "spore infer .onnx": np.load(f"{out}/{m}.onnx4.npy"),
}
scale = max(1.0, float(np.abs(ref).max()))
print(f"{m}: outputs vs the network itself (batch 4, |ref| max {np.abs(ref).max():.4g}):")
for k, v in got.items():
    d = float(np.abs(v - ref).max())
    print(f"  {k:26s} max |diff| {d:.3g} {'ok' if d <= 1e-4 * scale else 'DIFFERENT'}")
PY
done

for r in $(seq "$REPS"); do
  for m in $MODELS; do
    for kind in spore onnx; do
      s=$(date +%s.%N)
      "$BUILD/spore" infer "$out/$m.$kind" --input "$out/$m.x1.npy" |
        sed -n 's/^load to first result: \([0-9.]*\) ms.*/\1/p' > "$out/$m.$kind.$r"
      echo "$(date +%s.%N) - $s" | bc > "$out/$m.$kind.wall.$r"
    done
    if [[ $have_ort == 1 ]]; then
      s=$(date +%s.%N)
      PYTHONPATH=${ORT_PYTHONPATH:-} /usr/bin/python3 bench/peers/deploy_load_ort.py "$out/$m.onnx" \
        "$out/$m.x1.npy" "$out/$m.ort1.npy" 2 > "$out/$m.ort.$r"
      echo "$(date +%s.%N) - $s" | bc > "$out/$m.ort.wall.$r"
    fi
  done
done
/usr/bin/python3 - "$out" "$REPS" "$have_ort" $MODELS <<'PY'
import json, statistics, sys
out, reps, have_ort, models = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4:]
med = lambda xs: statistics.median(xs)
rd = lambda f: float(open(f).read())
print(f"load to first result, batch 1, 2 threads, median of {reps} rounds (ms; whole process wall in brackets):")
for m in models:
    s = med([rd(f"{out}/{m}.spore.{r}") for r in range(1, reps + 1)])
    o = med([rd(f"{out}/{m}.onnx.{r}") for r in range(1, reps + 1)])
    sw = med([rd(f"{out}/{m}.spore.wall.{r}") for r in range(1, reps + 1)]) * 1000
    ow = med([rd(f"{out}/{m}.onnx.wall.{r}") for r in range(1, reps + 1)]) * 1000
    line = (f"  {m:9s} compiled .spore {s:8.2f} [{sw:6.0f}] | spore infer .onnx {o:8.2f} [{ow:6.0f}] | "
            f"onnx/spore {o / s:5.2f}x")
    if have_ort:
        rs = [json.load(open(f"{out}/{m}.ort.{r}")) for r in range(1, reps + 1)]
        t = med([x["first_ms"] for x in rs])
        tw = med([rd(f"{out}/{m}.ort.wall.{r}") for r in range(1, reps + 1)]) * 1000
        line += f" | onnxruntime {rs[0]['ort']} {t:8.2f} [{tw:6.0f}] | ort/spore {t / s:5.2f}x"
    print(line)
if not have_ort:
    print("  (onnxruntime not importable: pip install onnxruntime, or ORT_PYTHONPATH=folder, to compare)")
PY
