#!/usr/bin/env bash
# A/B of two builds of Spore on the Graph-mode training steps (bench/micro/graph_train.cpp), run
# side by side: the two builds' bench_graph_train take turns, ROUNDS times, each round running the
# *_Interleaved benchmarks (PyNative, Graph and Graph without blocked layouts step by step).
# Prints, per model, the medians over rounds of each build's graph ms, pynative ms and their ratio,
# and the B/A ratio of those ratios (1.00 = no change; the refactor check in issue 19 wants the
# Graph/PyNative ratio within 3%).
# BENCH=bench_yolov5 runs the YOLOv5s benchmarks instead (bench/micro/yolov5.cpp: training step and
# inference, Graph and PyNative) and prints each one's median time per build and B/A.
#   bash bench/peers/ab_builds.sh OLD_BUILD NEW_BUILD      (ROUNDS=5 by default)
set -euo pipefail
A=${1:?usage: ab_builds.sh OLD_BUILD NEW_BUILD}
B=${2:?usage: ab_builds.sh OLD_BUILD NEW_BUILD}
ROUNDS=${ROUNDS:-5}
BENCH=${BENCH:-bench_graph_train}
DEFAULT_FILTER=Interleaved
[ "$BENCH" = bench_graph_train ] || DEFAULT_FILTER=.
FILTER=${FILTER:-$DEFAULT_FILTER}  # e.g. LeNet5Step64_Interleaved for the quick half
for b in "$A" "$B"; do
  [ -x "$b/bench/$BENCH" ] || { echo "ab_builds: no $b/bench/$BENCH (configure with -DSPORE_BUILD_BENCH=ON, build target $BENCH)"; exit 2; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$ROUNDS"); do
  for side in A B; do
    dir=$A; [ "$side" = B ] && dir=$B
    OMP_NUM_THREADS=2 "$dir/bench/$BENCH" --benchmark_filter="$FILTER" \
      --benchmark_format=json > "$out/$side.$r.json" 2> "$out/$side.$r.err" || { cat "$out/$side.$r.err"; exit 1; }
  done
done
python3 - "$out" "$ROUNDS" "$A" "$B" "$BENCH" <<'PY'
import json, statistics as st, sys
out, rounds, a, b, bench = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def vals(side, bm, key):
    v = []
    for r in range(1, rounds + 1):
        for x in json.load(open(f"{out}/{side}.{r}.json"))["benchmarks"]:
            if x["run_name"].split("/")[0] == bm and key in x:
                v.append(x[key])
    return v
print(f"A = {a}, B = {b}; {bench}, medians over {rounds} alternating rounds")
if bench != "bench_graph_train":
    times = {}
    for side in "AB":
        for r in range(1, rounds + 1):
            for x in json.load(open(f"{out}/{side}.{r}.json"))["benchmarks"]:
                if x.get("run_type", "iteration") == "iteration":
                    times.setdefault(x["run_name"].split("/min_time")[0], {}).setdefault(side, []).append(x["real_time"])
    for name, t in times.items():
        ta, tb = st.median(t["A"]), st.median(t["B"])
        print(f"  {name:40s} A {ta:9.2f} ms | B {tb:9.2f} ms | B/A {tb/ta:.3f}")
    sys.exit(0)
for label, bm in (("LeNet-5 b64  ", "BM_LeNet5Step64_Interleaved"), ("ResNet-18 b32", "BM_ResNet18Step32_Interleaved")):
    if not vals("A", bm, "graph_ms"):
        continue
    row = {}
    for side in "AB":
        row[side] = (st.median(vals(side, bm, "graph_ms")), st.median(vals(side, bm, "pynative_ms")),
                     st.median(vals(side, bm, "graph_speedup")))
    (ga, pa, sa), (gb, pb, sb) = row["A"], row["B"]
    print(f"  {label}  A: graph {ga:8.3f} ms, pynative {pa:8.3f} ms, graph speed-up {sa:.3f}x | "
          f"B: graph {gb:8.3f} ms, pynative {pb:8.3f} ms, graph speed-up {sb:.3f}x | "
          f"B/A graph time {gb/ga:.3f}, B/A speed-up {sb/sa:.3f}")
PY
