#!/usr/bin/env bash
# ResNet-18 (CIFAR stem, batch 32) training step: Spore Graph mode with Winograd (the convolution
# lists whole), without it (SPORE_CONV_IMPL=-winograd), and PyTorch 1.13 eager, 2 threads, in
# ROUNDS rounds (each: bench_winograd_train's BM_ResNet18Step32_WinogradAB, 8 steps of each Spore
# way in turn; then bench/peers/graph_train_torch.py with OPENBLAS_NUM_THREADS=1 and once more
# with OMP_WAIT_POLICY=PASSIVE, the faster kept, as graph_train.sh does), medians over the rounds.
# Prints the step times, the ratios and the effective GFLOP/s (the direct convolutions' 106.6
# GFLOP per step over the step time).
#   ISA=AVX2 (default): both frameworks as on an AVX2 machine, on a machine with AVX-512 too:
#     oneDNN's ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA (Spore's and PyTorch's), PyTorch's
#     ATEN_CPU_CAPABILITY=avx2 and Spore's Highway kernels on their AVX2 target
#     (SPORE_BENCH_HWY_TARGET, read by the bench).
#   ISA=native: whatever the CPU has.
# Run: bash bench/peers/winograd_train.sh [build]   (ROUNDS=3 by default)
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${ROUNDS:-3}
ISA=${ISA:-AVX2}
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if [ "$ISA" = AVX2 ]; then
  export ONEDNN_MAX_CPU_ISA=AVX2 DNNL_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 SPORE_BENCH_HWY_TARGET=AVX2
fi
for r in $(seq "$ROUNDS"); do
  OMP_NUM_THREADS=2 "$BUILD/bench/bench_winograd_train" --benchmark_filter=WinogradAB \
    --benchmark_format=json > "$out/spore_$r.json" 2> "$out/spore.err" || { cat "$out/spore.err"; exit 1; }
  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/peers/graph_train_torch.py --threads 2 --reps 1 \
    --lenet-steps 1 > "$out/torch_a_$r.json"
  OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/peers/graph_train_torch.py \
    --threads 2 --reps 1 --lenet-steps 1 > "$out/torch_b_$r.json"
done

/usr/bin/python3 - "$out" "$ROUNDS" "$ISA" "$(uptime)" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)" <<'PY'
import json, statistics as st, sys
out, rounds, isa, up, cpu = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5].strip()
gflop = 106.6
w, o, ta, tb = [], [], [], []
for r in range(1, rounds + 1):
    b = [x for x in json.load(open(f"{out}/spore_{r}.json"))["benchmarks"] if "WinogradAB" in x["name"]][0]
    w.append(b["winograd_ms"]); o.append(b["no_winograd_ms"])
    ta += json.load(open(f"{out}/torch_a_{r}.json"))["resnet18_b32_ms"]
    tb += json.load(open(f"{out}/torch_b_{r}.json"))["resnet18_b32_ms"]
mw, mo = st.median(w), st.median(o)
mt, how = min((st.median(ta), "OPENBLAS_NUM_THREADS=1"), (st.median(tb), "+ OMP_WAIT_POLICY=PASSIVE"))
print(f"ResNet-18 CIFAR b32 training step, 2 threads, ISA={isa}, {cpu}, medians of {rounds} rounds ({up.strip()})")
print(f"  spore graph, winograd     {mw:8.1f} ms  {gflop / mw * 1e3:6.1f} GFLOP/s effective")
print(f"  spore graph, -winograd    {mo:8.1f} ms  {gflop / mo * 1e3:6.1f} GFLOP/s effective")
print(f"  pytorch eager ({how}) {mt:8.1f} ms  {gflop / mt * 1e3:6.1f} GFLOP/s effective")
print(f"  winograd speed-up {mo / mw:.2f}x; vs pytorch: winograd {mt / mw:.2f}x, -winograd {mt / mo:.2f}x (target 1.3x)")
print(f"  (per round: winograd {[round(v) for v in w]}, -winograd {[round(v) for v in o]}, "
      f"pytorch {[round(v) for v in ta]} / {[round(v) for v in tb]} ms)")
PY
