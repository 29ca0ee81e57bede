#!/usr/bin/env bash
# Installs every Debian package Spore's build, tests and benchmarks need. Idempotent: a package that
# is already installed is skipped, so a second run costs a second.
set -euo pipefail
BUILD_PKGS=(cmake g++ make pkg-config libdnnl-dev libopenblas-dev libhwy-dev libgtest-dev libgmock-dev
  libbenchmark-dev libcli11-dev nlohmann-json3-dev libcairo2-dev zlib1g-dev dataset-fashion-mnist
  libopenmpi-dev openmpi-bin libopencv-dev libturbojpeg0-dev libsimdjson-dev ocl-icd-opencl-dev)
# Only the peer benchmarks (bench/peers) need these; `setup.sh --bench` installs them.
BENCH_PKGS=(python3-torch python3-numpy python3-torchvision python3-pil)
# `make test-asan` (setup.sh --asan): GCC's AddressSanitizer and UBSan runtimes (g++ brings them;
# named so that a minimal image still gets them). `make fuzz` (setup.sh --fuzz): clang and its
# runtime libraries (libFuzzer, the sanitizers) and OpenMP for clang.
ASAN_PKGS=(libasan8 libubsan1)
FUZZ_PKGS=(clang libclang-rt-14-dev libomp-14-dev)
want=("${BUILD_PKGS[@]}")
case "${1:-}" in
  --bench) want+=("${BENCH_PKGS[@]}") ;;
  --asan) want+=("${ASAN_PKGS[@]}") ;;
  --fuzz) want+=("${FUZZ_PKGS[@]}") ;;
esac
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then exit 0; fi
echo "setup: installing ${missing[*]}"
SUDO=""; if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || true
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
