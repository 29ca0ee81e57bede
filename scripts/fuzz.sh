#!/usr/bin/env bash
# Runs every libFuzzer target (tests/fuzz/fuzz_*.cpp) for SECONDS each, one after the other, one
# process each, and records what each run did: seconds, executions, execs/s, edges covered (libFuzzer's
# "cov"), features ("ft"), corpus size and crashes. `make fuzz FUZZ_S=60` calls it.
#
#   bash scripts/fuzz.sh [BUILD_DIR=build-fuzz] [SECONDS=60] [TARGET...]
#
# Configures BUILD_DIR with clang and -DSPORE_FUZZ=ON when needed and builds the targets. Inputs that
# grow coverage go to BUILD_DIR/corpus/<target>/ (kept between runs, not committed); the seeds in
# tests/fuzz/corpus/<target>/ are read, never written. A crash, leak, timeout or out-of-memory input
# is saved as BUILD_DIR/crashes/<target>/<kind>-<sha1> and reported; after fixing the library, copy
# it into tests/fuzz/corpus/<target>/ so that the replay tests keep it fixed.
# Results: one JSON line per target run appended to BUILD_DIR/fuzz-results.jsonl, and a table.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
seconds=${2:-60}
shift 2 2>/dev/null || shift $#
jobs=${JOBS:-$(nproc)}

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DSPORE_FUZZ=ON \
    -DSPORE_MPI=OFF -DSPORE_BUILD_BENCH=OFF || exit 1
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cpp; do t=$(basename "$f" .cpp); targets+=("${t#fuzz_}"); done
fi
cmake --build "$build" -j "$jobs" --target "${targets[@]/#/fuzz_}" || exit 1

results="$build/fuzz-results.jsonl"
failed=0
printf '%-20s %8s %12s %10s %8s %8s %8s %s\n' target seconds execs execs/s edges features corpus crashes
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t" crashes="$build/crashes/$t"
  mkdir -p "$corpus" "$crashes"
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  log="$build/fuzz-$t.log"
  before=$(find "$crashes" -type f | wc -l)
  start=$(date +%s)
  # -timeout: an input taking over 10 s is a hang; -rss_limit_mb: the default 2 GiB is the budget.
  # OPENCV_IO_MAX_IMAGE_PIXELS: OpenCV reads it when it loads; see tests/fuzz/fuzz_image_decode.cpp.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} OMP_NUM_THREADS=1 OPENCV_IO_MAX_IMAGE_PIXELS=4194304 \
    "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$crashes/" "${dict[@]}" "$corpus" "tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  execs=$(grep -m1 -oE 'stat::number_of_executed_units:[[:space:]]*[0-9]+' "$log" | grep -o '[0-9]*$')
  eps=$(grep -m1 -oE 'stat::average_exec_per_sec:[[:space:]]*[0-9]+' "$log" | grep -o '[0-9]*$')
  last=$(grep -E '^#[0-9]+' "$log" | grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*' | tail -1)
  cov=$(echo "$last" | awk '{print $2}') ft=$(echo "$last" | awk '{print $4}') corp=$(echo "$last" | awk '{print $6}')
  found=$(( $(find "$crashes" -type f | wc -l) - before ))
  [ "$rc" -ne 0 ] && [ "$found" -eq 0 ] && found=1   # a crash libFuzzer could not save
  printf '%-20s %8s %12s %10s %8s %8s %8s %s\n' "$t" "$secs" "${execs:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}" \
    "${corp:-?}" "$found"
  printf '{"target":"%s","date":"%s","seconds":%s,"execs":%s,"execs_per_s":%s,"edges":%s,"features":%s,"corpus":%s,"crashes":%s,"rc":%s}\n' \
    "$t" "$(date -u +%FT%TZ)" "$secs" "${execs:-0}" "${eps:-0}" "${cov:-0}" "${ft:-0}" "${corp:-0}" "$found" "$rc" >>"$results"
  if [ "$rc" -ne 0 ]; then
    failed=1
    echo "  $t: crash, see $log; inputs: $(ls -t "$crashes" | head -n "$found" | sed "s|^|$crashes/|" | tr '\n' ' ')"
    grep -m3 -E 'ERROR: |runtime error|uncaught|SUMMARY' "$log" | sed 's/^/    /'
  fi
done
echo "results appended to $results"
# Totals over every run recorded in this build folder (what the hardening notes report).
python3 - "$results" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
tot = {}
for r in runs:
    t = tot.setdefault(r["target"], {"runs": 0, "seconds": 0, "execs": 0, "edges": 0, "crashes": 0})
    t["runs"] += 1
    t["seconds"] += r["seconds"]
    t["execs"] += r["execs"]
    t["edges"] = max(t["edges"], r["edges"])
    t["crashes"] += r["crashes"]
print("all runs so far: %-18s %5s %8s %12s %9s %6s %7s" % ("target", "runs", "seconds", "execs", "execs/s", "edges", "crashes"))
for name, t in sorted(tot.items()):
    eps = t["execs"] / t["seconds"] if t["seconds"] else 0
    print("                 %-18s %5d %8d %12d %9.0f %6d %7d" % (name, t["runs"], t["seconds"], t["execs"], eps, t["edges"], t["crashes"]))
PY
exit $failed
