#!/usr/bin/env bash
# Installs every package Spore's build, tests and benchmarks need. Idempotent: a Debian package that
# is already installed and a Python module that already imports are skipped, so a second run costs
# about a second.
set -euo pipefail
BUILD_PKGS=(cmake g++ make pkg-config libdnnl-dev libopenblas-dev libhwy-dev libgtest-dev libgmock-dev
  libbenchmark-dev libcli11-dev nlohmann-json3-dev libcairo2-dev zlib1g-dev dataset-fashion-mnist
  libopenmpi-dev openmpi-bin libopencv-dev libturbojpeg0-dev libsimdjson-dev ocl-icd-opencl-dev
  libspdlog-dev libfmt-dev libcpp-httplib-dev libjs-chart.js chromium
  python3-dev python3-venv libprotobuf-dev protobuf-compiler libonnx-dev
  python3 python3-pip python3-numpy python3-pytest libonnx-testdata python3-pil libzip-dev
  clang-format ccache python3-torch python3-torchvision)
# The tests' Python cross-checks (tests/io/safetensors_crosscheck.py) and the Python package's tests
# (tests/python, pytest) run on Debian's interpreter, /usr/bin/python3 (the one Debian's python3-*
# packages serve; CMake's SPORE_TEST_PYTHON), with the modules in PY_MODULES. Debian 12 packages
# numpy and pytest but not safetensors, nor scikit-build-core (`pip install .`), which come from PyPI.
# libonnx-testdata: the ONNX backend node tests the importer runs (tests/onnx). onnxruntime and
# mindspore (PyPI) are optional cross-check tools, not installed here: their tests check committed
# fixtures when the packages are not importable (docs/interop.md).
# python3-torch, python3-torchvision: the kernels' PyTorch cross-checks (tests/nn/torch_reference.h,
# tests/python/test_*torch*, the NMS and RNN cross-checks) skip without them, so a new machine would
# check less than this one; they are test packages, hence here. python3-pil: torchvision imports it.
# These test packages are in BUILD_PKGS itself (../shared/tools/check-fresh-deps reads that list).
TEST_PKGS=()
# pybind11 from PyPI: the bindings need >= 2.12 for numpy 2 (Debian 12's pybind11-dev is 2.10), and
# the same version pyproject.toml's [build-system] gives `pip install .`. A pinned module (==) is
# reinstalled when another version is there.
PY_MODULES=(safetensors==0.8.0 "scikit-build-core>=0.8" pybind11==2.13.6)
# Only the peer benchmarks (bench/peers) need these; `setup.sh --bench` installs them.
BENCH_PKGS=(python3-torch python3-numpy python3-torchvision python3-pil)
# `make test-asan` (setup.sh --asan): GCC's AddressSanitizer and UBSan runtimes (g++ brings them;
# named so that a minimal image still gets them). `make fuzz` (setup.sh --fuzz): clang and its
# runtime libraries (libFuzzer, the sanitizers) and OpenMP for clang.
ASAN_PKGS=(libasan8 libubsan1)
FUZZ_PKGS=(clang libclang-rt-14-dev libomp-14-dev)
want=("${BUILD_PKGS[@]}" "${TEST_PKGS[@]}")
case "${1:-}" in
  --bench) want+=("${BENCH_PKGS[@]}") ;;
  --asan) want+=("${ASAN_PKGS[@]}") ;;
  --fuzz) want+=("${FUZZ_PKGS[@]}") ;;
esac
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
# PyPI modules, into Debian's python3 only when they do not import already (Debian 12 marks its
# Python externally managed, hence --break-system-packages; nothing Debian ships is replaced).
PY=/usr/bin/python3
py_missing=()
for m in "${PY_MODULES[@]}"; do
  mod=${m%%[=<>]*}
  if [[ $m == *==* ]]; then
    "$PY" -c "import importlib.metadata as md, sys; sys.exit(md.version('$mod') != '${m##*==}')" 2>/dev/null ||
      py_missing+=("$m")
  else
    "$PY" -c "import ${mod//-/_}" 2>/dev/null || py_missing+=("$m")
  fi
done
if ((${#py_missing[@]} > 0)); then
  echo "setup: pip installing ${py_missing[*]} for $PY"
  $SUDO "$PY" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
    --no-warn-script-location --break-system-packages "${py_missing[@]}"
fi
