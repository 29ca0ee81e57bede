#!/usr/bin/env bash
# ResNet-18 inference (CIFAR stem, 3x32x32, eval mode) at batch 1 and 128, 2 threads each: Spore
# Graph mode and PyNative (build/bench/bench_resnet_infer, Model::predict), PyTorch eager and
# TorchScript (jit.trace + jit.freeze) (bench/peers/resnet_infer_torch.py). The two sides run in
# turn, REPS rounds (a load spike on a shared machine then hits both); reported: the median ms per
# batch over the rounds and the ratios PyTorch time / Spore Graph time (> 1: Spore Graph faster).
set -euo pipefail
BUILD=${1:-build}
REPS=${REPS:-3}
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
for r in $(seq "$REPS"); do
  OMP_NUM_THREADS=2 "$BUILD/bench/bench_resnet_infer" --benchmark_filter=ResNet18 \
    --benchmark_format=json > "$out/spore.$r.json" 2>/dev/null
  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/peers/resnet_infer_torch.py --threads 2 --runs 1 > "$out/torch.$r.json"
done
python3 - "$out" "$REPS" <<'PY'
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
spore, torch = {}, {}
for r in range(1, reps + 1):
    for b in json.load(open(f"{out}/spore.{r}.json"))["benchmarks"]:
        spore.setdefault(b["name"], []).append(b["real_time"])
    t = json.load(open(f"{out}/torch.{r}.json"))
    for k, v in t.items():
        if k.endswith("_ms_b1") or k.endswith("_ms_b128"): torch.setdefault(k, []).append(v)
med = lambda v: statistics.median(v)
print(f"ResNet-18 (CIFAR stem, 3x32x32) inference, 2 threads, median ms per batch over {reps} rounds (torch {t['torch']}):")
for b in (1, 128):
    g = med(spore[f"BM_ResNet18Infer_Graph/{b}/real_time"])
    p = med(spore[f"BM_ResNet18Infer_PyNative/{b}/real_time"])
    e, s = med(torch[f"eager_ms_b{b}"]), med(torch[f"torchscript_ms_b{b}"])
    print(f"  batch {b:3d}: spore graph {g:8.2f} | spore pynative {p:8.2f} ({p/g:.2f}x) | "
          f"pytorch eager {e:8.2f} ({e/g:.2f}x) | torchscript {s:8.2f} ({s/g:.2f}x)")
PY
rm -rf "$out"
