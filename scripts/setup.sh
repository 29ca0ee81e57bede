#!/usr/bin/env bash
# Installs every Debian package Spore's build, tests and benchmarks need. Idempotent: a package that
# is already installed is skipped, so a second run costs a second.
set -euo pipefail
BUILD_PKGS=(cmake g++ make pkg-config libdnnl-dev libopenblas-dev libhwy-dev libgtest-dev libgmock-dev
  libbenchmark-dev libcli11-dev nlohmann-json3-dev libcairo2-dev zlib1g-dev dataset-fashion-mnist
  libopenmpi-dev openmpi-bin libopencv-dev libturbojpeg0-dev libsimdjson-dev ocl-icd-opencl-dev
  pybind11-dev python3-dev python3-numpy python3-pytest python3-pip)
# Only the peer benchmarks (bench/peers) need these; `setup.sh --bench` installs them.
BENCH_PKGS=(python3-torch python3-numpy python3-torchvision python3-pil)
want=("${BUILD_PKGS[@]}")
if [[ "${1:-}" == "--bench" ]]; then want+=("${BENCH_PKGS[@]}"); fi
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""; if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
if ((${#missing[@]} > 0)); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq || true
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The Python package (python/spore) is built for Debian's interpreter, the one python3-numpy and
# python3-pytest serve. `pip install .` needs scikit-build-core, which Debian 12 does not package:
# it comes from PyPI, only when that interpreter cannot import it.
PY=/usr/bin/python3
if ! $PY -c "import scikit_build_core" 2>/dev/null; then
  echo "setup: installing scikit-build-core (PyPI) for $PY"
  $SUDO $PY -m pip install -q --break-system-packages "scikit-build-core>=0.8" ||
    echo "setup: warning: could not install scikit-build-core; 'make' and 'make test' do not need it, 'pip install .' does"
fi
