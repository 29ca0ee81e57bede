#!/usr/bin/env bash
# `make bench`: the micro benchmarks (Google Benchmark) and the peer comparisons (same job in
# Spore and PyTorch in one run). Figures are printed, never asserted.
set -uo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=2
for b in "$BUILD"/bench/bench_*; do
  [[ -x "$b" ]] || continue
  [[ "$(basename "$b")" == bench_amp ]] && continue  # bench/peers/amp.sh runs it and prints ratios
  echo "== $(basename "$b")"
  "$b" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true || echo "(failed: $b)"
done
for p in bench/peers/*.sh; do
  [[ -x "$p" ]] || continue
  echo "== $(basename "$p")"
  bash "$p" "$BUILD" || echo "(failed: $p)"
done
