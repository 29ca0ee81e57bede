#!/usr/bin/env bash
# A libFuzzer run of one fuzz target in minutes rather than hours: only the parser's own sources
# are compiled with clang, ASan and the fuzzer's coverage; the rest of libspore comes from the
# normal build (BUILD, default build/), whose symbols the instrumented copies override (libspore
# has default visibility). ASan then watches every allocation, and checks every access the
# parser's own code makes; scripts/fuzz.sh builds everything instrumented (the full ASan build,
# about 90 minutes on 2 cores) for the deeper run.
#
#   bash scripts/fuzz_parser.sh TARGET SECONDS SOURCE...
#   bash scripts/fuzz_parser.sh model_file 600 src/graph/model_file.cpp src/deploy/compiled_model.cpp
#
# Work folder: /tmp/spore_fuzz_<target>/ (corpus seeded from tests/fuzz/corpus/<target>/, crashes/,
# fuzz.log). Exits non-zero when libFuzzer found a crash, leak or timeout.
set -euo pipefail
cd "$(dirname "$0")/.."
target=$1 seconds=$2
shift 2
build=${BUILD:-build}
[ -f "$build/libspore.so" ] || { echo "no $build/libspore.so: build the library first (make build)"; exit 2; }
work=/tmp/spore_fuzz_$target
mkdir -p "$work/obj" "$work/corpus" "$work/crashes"
cp -n tests/fuzz/corpus/"$target"/* "$work/corpus/" 2> /dev/null || true
flags=(-DFMT_SHARED -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB -DHWY_SHARED_DEFINE
  -Iinclude -I"$build/include" -Isrc -I. -Itests/fuzz -isystem "$build/proto" -isystem /usr/local/cuda/include
  -std=c++20 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address)
objs=()
for src in "$@" "tests/fuzz/fuzz_$target.cpp"; do
  obj="$work/obj/$(basename "$src").o"
  clang++ "${flags[@]}" -c "$src" -o "$obj"
  objs+=("$obj")
done
clang++ -fsanitize=fuzzer,address "${objs[@]}" -o "$work/fuzz_$target" -L"$build" -lspore -lz -lfmt \
  -l:libgomp.so.1 -Wl,-rpath,"$(cd "$build" && pwd)"
dict=()
[ -f "tests/fuzz/$target.dict" ] && dict=(-dict="tests/fuzz/$target.dict")
set +e
OMP_NUM_THREADS=1 LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/lsan.supp \
  "$work/fuzz_$target" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=3072 \
  -artifact_prefix="$work/crashes/" -print_final_stats=1 "${dict[@]}" "$work/corpus" > "$work/fuzz.log" 2>&1
rc=$?
set -e
grep -E "^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|Done [0-9]+ runs" "$work/fuzz.log"
tail -1 "$work/fuzz.log" | grep -o "cov: [0-9]* ft: [0-9]*" || true
echo "crashes: $(find "$work/crashes" -type f | wc -l) (in $work/crashes; copy one into tests/fuzz/corpus/$target/ after fixing it)"
exit $rc
