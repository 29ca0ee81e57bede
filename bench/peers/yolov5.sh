#!/usr/bin/env bash
# YOLOv5s (80 classes) at 320 x 320, 2 threads each: a training step at batch 16 and inference at
# batch 1 and 16, Spore Graph mode and PyNative (build/bench/bench_yolov5) against PyTorch eager
# (bench/peers/yolov5_torch.py, the same architecture and a loss of the same form). The two sides
# run in turn, REPS rounds; reported: median ms per step / batch and PyTorch time / Spore Graph time
# (> 1: Spore faster). Needs a build with -DSPORE_BUILD_BENCH=ON.
set -euo pipefail
BUILD=${1:-build}
REPS=${REPS:-3}
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
for r in $(seq "$REPS"); do
  OMP_NUM_THREADS=2 "$BUILD/bench/bench_yolov5" --benchmark_format=json > "$out/spore.$r.json" 2>/dev/null
  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/peers/yolov5_torch.py --threads 2 --runs 3 > "$out/torch.$r.json"
done
python3 - "$out" "$REPS" <<'PY'
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
spore, torch = {}, {}
for r in range(1, reps + 1):
    for b in json.load(open(f"{out}/spore.{r}.json"))["benchmarks"]:
        spore.setdefault(b["name"].split("/iterations")[0].split("/min_time")[0], []).append(b["real_time"])
    t = json.load(open(f"{out}/torch.{r}.json"))
    for k, v in t.items():
        if k.endswith("_ms_b1") or k.endswith("_ms_b16"): torch.setdefault(k, []).append(v)
med = statistics.median
def get(prefix, b):
    for k, v in spore.items():
        if k.startswith(prefix) and k.split("/")[1] == str(b): return med(v)
    return float("nan")
print(f"YOLOv5s at 320x320, 2 threads, median ms over {reps} rounds (torch {t['torch']}, {t['params']} parameters):")
g, p, e = get("BM_YoloV5sTrainStep_Graph", 16), get("BM_YoloV5sTrainStep_PyNative", 16), med(torch["train_ms_b16"])
print(f"  train step, batch 16: spore graph {g:9.1f} | spore pynative {p:9.1f} | pytorch eager {e:9.1f} ({e/g:.2f}x)")
for b in (1, 16):
    g, p, e = get("BM_YoloV5sInfer_Graph", b), get("BM_YoloV5sInfer_PyNative", b), med(torch[f"infer_ms_b{b}"])
    print(f"  inference, batch {b:2d}: spore graph {g:9.1f} | spore pynative {p:9.1f} | pytorch eager {e:9.1f} ({e/g:.2f}x)")
PY
rm -rf "$out"
