#!/usr/bin/env bash
# `spore infer --bench` vs ONNX Runtime on the same exported ResNet-18 (CIFAR stem, 3x32x32,
# opset 17, dynamic batch) at batch 1 and 64, 2 threads each, in one run: the sides take turns
# for REPS rounds (a load spike on a shared machine then hits all). Spore runs twice: the .onnx
# (compiled at load) and the .spore file `spore compile` made from it for these batches (the
# deployed form, docs/deploy.md). Reported: the median ms per batch over the rounds and ONNX
# Runtime time / Spore time (> 1: Spore faster). Needs onnxruntime (PyPI) for /usr/bin/python3,
# or ORT_PYTHONPATH=folder where it is installed; without it only Spore's figures are printed.
# MODEL=yolov5s (exported at 320 px, untrained weights) with BATCHES="1 8" times the detector.
set -euo pipefail
BUILD=${1:-build}
REPS=${REPS:-3}
MODEL=${MODEL:-resnet18}
BATCHES=${BATCHES:-1 64}
SECONDS_PER=${SECONDS_PER:-3}
cd "$(dirname "$0")/../.."
# OpenMP's spinning barriers (the default, active policy) wait out a descheduled thread's time
# slice when the machine is shared: 16 vs 330 ms per ResNet-18 batch 1 run at a load average of 4
# on 2 cores. Passive as in the tests, unless the caller says otherwise.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
extra=()
[[ $MODEL == yolov5* ]] && extra=(--img 320)
"$BUILD/spore" export "$MODEL" --out "$out/model.onnx" "${extra[@]}" > /dev/null
"$BUILD/spore" compile "$out/model.onnx" --batch "$(echo $BATCHES | tr ' ' ,)" -o "$out/model.spore" > /dev/null
export PYTHONPATH=${ORT_PYTHONPATH:-}
have_ort=1
/usr/bin/python3 -c "import onnxruntime" 2>/dev/null || have_ort=0
for r in $(seq "$REPS"); do
  for b in $BATCHES; do
    OMP_NUM_THREADS=2 "$BUILD/spore" infer "$out/model.onnx" --bench --batch "$b" --seconds "$SECONDS_PER" \
      | sed -n 's/^bench: .*median \([0-9.]*\) ms.*/\1/p' > "$out/spore.$b.$r"
    OMP_NUM_THREADS=2 "$BUILD/spore" infer "$out/model.spore" --bench --batch "$b" --seconds "$SECONDS_PER" \
      | sed -n 's/^bench: .*median \([0-9.]*\) ms.*/\1/p' > "$out/compiled.$b.$r"
    if [[ $have_ort == 1 ]]; then
      /usr/bin/python3 bench/peers/onnx_infer_ort.py "$out/model.onnx" "$b" 2 "$SECONDS_PER" > "$out/ort.$b.$r"
    fi
  done
done
python3 - "$out" "$REPS" "$have_ort" "$MODEL" $BATCHES <<'PY'
import json, statistics, sys
out, reps, have_ort, model = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
name = "ResNet-18 (CIFAR stem)" if model == "resnet18" else model
print(f"{name} from ONNX, 2 threads, median ms per batch over {reps} rounds:")
for b in map(int, sys.argv[5:]):
    s = statistics.median(float(open(f"{out}/spore.{b}.{r}").read()) for r in range(1, reps + 1))
    c = statistics.median(float(open(f"{out}/compiled.{b}.{r}").read()) for r in range(1, reps + 1))
    line = (f"  batch {b:3d}: spore infer .onnx {s:8.2f} ms ({b * 1000 / s:7.1f} img/s)"
            f" | .spore {c:8.2f} ms ({b * 1000 / c:7.1f} img/s)")
    if have_ort:
        rs = [json.load(open(f"{out}/ort.{b}.{r}")) for r in range(1, reps + 1)]
        o = statistics.median(x["median_ms"] for x in rs)
        line += (f" | onnxruntime {rs[0]['ort']} {o:8.2f} ms ({b * 1000 / o:7.1f} img/s)"
                 f" | ort/.onnx {o / s:.2f}x ort/.spore {o / c:.2f}x")
    print(line)
if not have_ort:
    print("  (onnxruntime not importable for /usr/bin/python3: pip install onnxruntime to compare)")
PY
