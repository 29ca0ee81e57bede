#!/usr/bin/env bash
# LeNet-5 on Fashion-MNIST, Spore vs PyTorch in one run: the same model, data pipeline (normalised
# x/255, reshuffled each epoch, batch 64) and optimizer (Momentum 0.01/0.9), 2 threads. Reports
# the median images/s over whole epochs (data loading included) and the ratios, plus inference
# images/s at batch 256. PyTorch is measured tuned (set_num_threads(2), OPENBLAS_NUM_THREADS=1)
# and as shipped.
set -euo pipefail
BUILD=${1:-build}
EPOCHS=${EPOCHS:-5}
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
median() { python3 -c "import sys,statistics; print(statistics.median([float(x) for x in sys.argv[1:]]))" "$@"; }

"$BUILD/spore" train lenet --epochs "$EPOCHS" --threads 2 --out "$out/spore" > "$out/spore.log"
spore_ips=$(python3 -c "import json; print(' '.join(str(json.loads(l)['images_per_s']) for l in open('$out/spore/metrics.jsonl')))")
spore_acc=$(python3 -c "import json; print([json.loads(l) for l in open('$out/spore/metrics.jsonl')][-1]['accuracy'])")
spore_infer=$(OMP_NUM_THREADS=2 "$BUILD/bench/bench_lenet" --benchmark_filter=Infer256 --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true --benchmark_format=json 2>/dev/null |
  python3 -c "import json,sys; d=json.load(sys.stdin); print([b['items_per_second'] for b in d['benchmarks'] if b['name'].endswith('_median')][0])")

OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/peers/lenet_torch.py --epochs "$EPOCHS" --threads 2 > "$out/torch_tuned.json"
/usr/bin/python3 bench/peers/lenet_torch.py --epochs "$EPOCHS" --as-shipped > "$out/torch_shipped.json"

python3 - "$out" "$spore_infer" $spore_ips <<'PY'
import json, statistics, sys
out, spore_infer, spore_ips = sys.argv[1], float(sys.argv[2]), [float(x) for x in sys.argv[3:]]
tuned = json.load(open(f"{out}/torch_tuned.json")); shipped = json.load(open(f"{out}/torch_shipped.json"))
s = statistics.median(spore_ips); t = statistics.median(tuned["train_images_per_s"]); a = statistics.median(shipped["train_images_per_s"])
acc = [json.loads(l) for l in open(f"{out}/spore/metrics.jsonl")][-1]["accuracy"]
print(f"LeNet-5 training, batch 64, median images/s over {len(spore_ips)} epochs (data loading included):")
print(f"  spore (pynative)        {s:9.0f}   test acc {acc:.4f}")
print(f"  pytorch tuned           {t:9.0f}   test acc {tuned['test_accuracy']:.4f}   spore/pytorch = {s/t:.2f}x")
print(f"  pytorch as shipped      {a:9.0f}   test acc {shipped['test_accuracy']:.4f}   spore/pytorch = {s/a:.2f}x")
ti, ai = tuned["infer_images_per_s_b256"], shipped["infer_images_per_s_b256"]
print(f"LeNet-5 inference, batch 256, images/s: spore {spore_infer:.0f}, pytorch tuned {ti:.0f} ({spore_infer/ti:.2f}x), as shipped {ai:.0f} ({spore_infer/ai:.2f}x)")
PY
rm -rf "$out"
