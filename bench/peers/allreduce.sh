#!/usr/bin/env bash
# Distributed benchmarks (bench/micro/allreduce.cpp) under mpirun with 2 ranks:
#   1) all-reduce bus bandwidth 1 KB..64 MB, parallel::Group vs MPI_Allreduce directly;
#   2) LeNet-5 training throughput, 2 ranks x 1 thread vs 1 rank x 2 threads (the ratio is what
#      data parallelism costs in communication and smaller per-rank batches);
#   3) bucket fusion on vs off.
# Usage: bench/peers/allreduce.sh [build-dir]   (configure with -DSPORE_BUILD_BENCH=ON)
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
B="$BUILD/bench/bench_allreduce"
# The same flags as spore launch and ctest (CMake's SPORE_MPIEXEC_FLAGS).
FLAGS=$(sed -n 's/^SPORE_MPIEXEC_FLAGS:STRING=//p' "$BUILD/CMakeCache.txt" | tr ';' ' ')
MPI="mpiexec ${FLAGS:---allow-run-as-root --oversubscribe} -np 2 -x OMP_NUM_THREADS=1"
echo "== all-reduce bandwidth (2 ranks)"; $MPI "$B" bandwidth
echo "== LeNet-5 training throughput"
two=$($MPI "$B" lenet 1 | tee /dev/stderr | sed -n 's/.*: \([0-9.]*\) images\/s.*/\1/p')
one=$(OMP_NUM_THREADS=2 "$B" lenet 2 | tee /dev/stderr | sed -n 's/.*: \([0-9.]*\) images\/s.*/\1/p')
python3 -c "print(f'2 ranks x 1 thread / 1 rank x 2 threads = {$two / $one:.3f}')"
echo "== bucket fusion (2 ranks)"; $MPI "$B" fusion
