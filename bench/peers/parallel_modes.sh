#!/usr/bin/env bash
# Training throughput of each parallel mode beside plain data parallel on the same ranks (issue 37:
# reported, not asserted). `spore launch -n N -- spore train MODEL` with each --parallel mesh, one
# thread per rank, the images/s of the second of two epochs the CLI prints (the first includes Graph mode's compile); medians over ROUNDS, the modes
# taking turns round by round. On a machine with fewer cores than ranks the ranks share cores,
# so the ratios measure each mode's extra work and communication, not a speed-up.
# Usage: bench/peers/parallel_modes.sh [build-dir]   (RANKS=4 MODEL=lenet|transformer ROUNDS=3
#        LIMIT=4096)
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
S="$BUILD/spore"
N=${RANKS:-4}
MODEL=${MODEL:-lenet}
ROUNDS=${ROUNDS:-3}
LIMIT=${LIMIT:-4096}
case $N in
  4) MODES=("dp=4" "dp=4 zero" "dp=2,mp=2" "dp=2,mp=2,auto" "dp=2,mp=2 zero" "pp=2,dp=2" "pp=4" "pp=2,mp=2" "pp=2,mp=2 zero") ;;
  8) MODES=("dp=8" "dp=8 zero" "dp=4,mp=2" "dp=2,mp=2,pp=2" "dp=2,mp=2,pp=2 zero") ;;
  2) MODES=("dp=2" "dp=2 zero" "mp=2" "mp=2,auto" "pp=2") ;;
  *) echo "RANKS must be 2, 4 or 8" >&2; exit 2 ;;
esac
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A runs
for ((r = 0; r < ROUNDS; ++r)); do
  for m in "${MODES[@]}"; do
    mesh=${m%% *}
    extra=()
    [[ $m == *zero ]] && extra=(--parallel-optimizer)
    ips=$(OMP_NUM_THREADS=1 "$S" launch -n "$N" -- "$S" train "$MODEL" --limit "$LIMIT" \
            --eval-limit 256 --epochs 2 --seed 3 --threads 1 --comm-timeout 120 \
            --parallel "$mesh" "${extra[@]}" --out "$out/run" 2>&1 |
          sed -n 's/^epoch 2\/2: .*(\([0-9.]*\) images\/s.*/\1/p' | head -1) || true
    runs[$m]+="$ips "
    rm -rf "$out/run"
  done
done
echo "$MODEL, $N ranks x 1 thread, $LIMIT images, medians of $ROUNDS ($(nproc) cores, $(uptime | sed 's/.*load/load/'))"
printf '%-22s %12s %10s\n' "mesh" "images/s" "vs ${MODES[0]}"
base=""
for m in "${MODES[@]}"; do
  # A mesh the model cannot take (lenet's 6 conv1 channels do not cut in 4) prints 0 images/s.
  med=$(python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[1:] if x]; print(statistics.median(v) if v else 0)" ${runs[$m]:-})
  [[ -z $base ]] && base=$med
  printf '%-22s %12.0f %10s\n' "${m/ zero/ + ZeRO-1}" "$med" \
    "$(python3 -c "print(f'{$med / $base:.2f}x' if $base > 0 else '-')")"
done
