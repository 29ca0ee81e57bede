#!/usr/bin/env bash
# ImageFolder JPEG input pipeline, Spore vs torchvision in one run, on the same generated files:
# COUNT (default 2000) photo-like 500x375 JPEGs (quality 90) in 10 class folders; decode,
# RandomResizedCrop 224, RandomHorizontalFlip, Normalize, HWC2CHW / ToTensor, batch 32, shuffled,
# WORKERS (default 2) workers on each side, PASSES (default 3) whole passes each:
#   spore unfused  map({Decode, RandomResizedCrop, flip, Normalize, HWC2CHW}, workers)
#   spore fused    map({RandomCropDecodeResize, flip, Normalize, HWC2CHW}, workers)
#   torchvision    ImageFolder (PIL) + Compose + DataLoader(num_workers=workers), Debian's python3
# Prints the median images/s of each and the ratios; then DecodeResize vs decode-then-resize
# (bench_decode_resize, 1 thread) and the parse time of a COCO JSON of 100k annotations
# (bench_coco_parse). Needs a build with -DSPORE_BUILD_BENCH=ON and python3-torchvision
# (scripts/setup.sh --bench). Usage: bash bench/peers/imagefolder.sh BUILD_DIR
set -euo pipefail
BUILD=${1:-build}
COUNT=${COUNT:-2000}
PASSES=${PASSES:-3}
WORKERS=${WORKERS:-2}
NOISE=${NOISE:-1.5}  # generator noise: 1.5 about 68 KB per image, 3 about 100 KB
cd "$(dirname "$0")/../.."
tool="$BUILD/bench/bench_imagefolder_pipeline"
[[ -x "$tool" ]] || { echo "imagefolder.sh: $tool not found (configure with -DSPORE_BUILD_BENCH=ON and build bench_imagefolder_pipeline)" >&2; exit 1; }
if ! /usr/bin/python3 -c "import torchvision, PIL" 2>/dev/null; then
  echo "imagefolder.sh: /usr/bin/python3 cannot import torchvision / PIL: install python3-torchvision python3-pil (scripts/setup.sh --bench)" >&2
  exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=2

"$tool" --generate "$out/images" --count "$COUNT" --classes 10 --noise "$NOISE"
kb=$(( $(du -sb "$out/images" | cut -f1) / COUNT / 1000 ))
load="$(cut -d" " -f1 /proc/loadavg) on $(nproc) cores"  # other jobs skew images/s, less so CPU ms
# The passes alternate (spore unfused, spore fused, torchvision, then again) so
# a change in the machine's load during the run hits all three alike; a fresh process per pass.
for ((p = 0; p < PASSES; p++)); do
  "$tool" --dir "$out/images" --passes 1 --workers "$WORKERS" --variant both >> "$out/spore.jsonl"
  /usr/bin/python3 bench/peers/imagefolder_torch.py --dir "$out/images" --passes 1 \
    --workers "$WORKERS" >> "$out/torch.jsonl"
done

python3 - "$out" "$COUNT" "$PASSES" "$WORKERS" "$kb" "$load" <<'PY'
import json, statistics, sys
out, count, passes, workers, kb, load = sys.argv[1], int(sys.argv[2]), *sys.argv[3:7]
spore = {}
for d in map(json.loads, open(f"{out}/spore.jsonl")):
    v = spore.setdefault(d["variant"], {"images_per_s": [], "cpu_ms_per_image": []})
    for k in v: v[k] += d[k]
runs = [json.loads(l) for l in open(f"{out}/torch.jsonl")]
torch = dict(runs[0], **{k: [x for r in runs for x in r[k]] for k in ("images_per_s", "cpu_ms_per_image")})
med = statistics.median
t, tc = med(torch["images_per_s"]), med(torch["cpu_ms_per_image"])
print(f"ImageFolder JPEG pipeline: {count} generated 500x375 JPEGs (~{kb} KB), RandomResizedCrop 224 + flip + "
      f"normalize + CHW, batch 32, {workers} workers, medians of {passes} passes (load average {load}):")
fmt = lambda xs: " ".join(f"{x:.0f}" for x in xs)
print(f"  {'pipeline':<38} {'images/s':>9} {'vs torch':>9} {'CPU ms/img':>11} {'vs torch':>9}   images/s per pass")
rows = [("spore Decode + RandomResizedCrop", spore["unfused"]),
        ("spore RandomCropDecodeResize (fused)", spore["fused"]), ("torchvision DataLoader + PIL", torch)]
for name, d in rows:
    s, c = med(d["images_per_s"]), med(d["cpu_ms_per_image"])
    print(f"  {name:<38} {s:9.1f} {s / t:8.2f}x {c:11.2f} {tc / c:8.2f}x   {fmt(d['images_per_s'])}")
print(f"  (torch {torch['torch']}, torchvision {torch['torchvision']}; 'vs torch' for CPU is torch's ms / this one's)")
PY

dr="$BUILD/bench/bench_decode_resize"
if [[ -x "$dr" ]]; then
  echo "DecodeResize vs decode-then-resize (bench_decode_resize, 1 thread, median ms):"
  # The filter keeps Google Benchmark's table to the 500x375 RandomResizedCrop pair; main() then
  # prints the 1024x768 DecodeResize vs cv::imdecode + resize ratios.
  "$dr" --benchmark_filter='RandomCropDecodeResize|DecodeThenRandomResizedCrop' \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>/dev/null |
    grep -E '_median|->' | sed 's/^/  /'
else
  echo "(bench_decode_resize not built: skipped)"
fi
cp="$BUILD/bench/bench_coco_parse"
if [[ -x "$cp" ]]; then
  echo "COCO-style annotation JSON, 100k annotations (bench_coco_parse, CocoDataset construction):"
  "$cp" --benchmark_filter='coco_parse/100000' --benchmark_format=json 2>/dev/null | python3 -c "
import json, sys
for b in json.load(sys.stdin)['benchmarks']:
    print(f\"  parse + index {b['real_time']:.0f} ms for {b['MB']:.1f} MB ({b['MB/s']:.0f} MB/s)\")"
else
  echo "(bench_coco_parse not built: skipped)"
fi
