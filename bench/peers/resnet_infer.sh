#!/usr/bin/env bash
# ResNet-18 inference (CIFAR stem, 3x32x32, eval mode) at batch 1 and 128, 2 threads each, in one
# run: Spore Graph mode and PyNative (build/bench/bench_resnet_infer, Model::predict), PyTorch eager
# and TorchScript (jit.trace + jit.freeze) (bench/peers/resnet_infer_torch.py). Median ms per batch
# over REPS runs; ratios are PyTorch time / Spore Graph time (> 1: Spore Graph faster).
set -euo pipefail
BUILD=${1:-build}
REPS=${REPS:-3}
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
OMP_NUM_THREADS=2 "$BUILD/bench/bench_resnet_infer" --benchmark_filter=ResNet18 --benchmark_repetitions="$REPS" \
  --benchmark_report_aggregates_only=true --benchmark_format=json > "$out/spore.json" 2>/dev/null
OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/peers/resnet_infer_torch.py --threads 2 --runs "$REPS" > "$out/torch.json"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
spore = {b["run_name"]: b["real_time"] for b in json.load(open(f"{out}/spore.json"))["benchmarks"]
         if b.get("aggregate_name") == "median"}
torch = json.load(open(f"{out}/torch.json"))
print(f"ResNet-18 (CIFAR stem, 3x32x32) inference, 2 threads, median ms per batch (torch {torch['torch']}):")
for b in (1, 128):
    g = spore[f"BM_ResNet18Infer_Graph/{b}/real_time"]
    p = spore[f"BM_ResNet18Infer_PyNative/{b}/real_time"]
    e, s = torch[f"eager_ms_b{b}"], torch[f"torchscript_ms_b{b}"]
    print(f"  batch {b:3d}: spore graph {g:8.2f} | spore pynative {p:8.2f} ({p/g:.2f}x) | "
          f"pytorch eager {e:8.2f} ({e/g:.2f}x) | torchscript {s:8.2f} ({s/g:.2f}x)")
PY
rm -rf "$out"
