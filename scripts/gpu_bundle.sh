#!/usr/bin/env bash
# Builds what the GPU machine runs and packs it into gpu_bundle.tar.xz (docs/cuda.md, "The GPU
# machine"). That machine has the NVIDIA driver, the CUDA toolkit (cuBLAS/cuBLASLt), PyTorch with
# cuDNN/NCCL as pip packages, but no Debian development packages and no network, and at most 64 MiB
# of build outputs travel to it. So: the lean build (cmake/lean.cmake: no OpenCV, Cairo, MPI) with
# the CUDA backend for sm_90, and the non-system libraries the programs need (oneDNN, Highway,
# protobuf, ...; not glibc, not CUDA's own libraries, which the machine has).
#
#   bash scripts/gpu_bundle.sh [BUILD_DIR]      (default build-lean)
#
# Output: gpu_bundle/{bin,lib,bench,scripts}/ and gpu_bundle.tar.xz beside it (both git-ignored:
# pass `gpu_bundle.tar.xz` in the device run's carry), then scripts/gpu_check.sh on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-lean}
OUT=gpu_bundle
LIMIT_MIB=${LIMIT_MIB:-64}
export CCACHE_DIR=${CCACHE_DIR:-/work/.ccache} CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$PWD")} CCACHE_NOHASHDIR=1

gen=()
command -v ninja > /dev/null && gen=(-G Ninja)
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  launcher=()
  command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
    -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DSPORE_LEAN=ON -DSPORE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DSPORE_BUILD_BENCH=OFF "${launcher[@]}" > "$BUILD.configure.log"
fi
grep -q 'SPORE_LEAN:BOOL=ON' "$BUILD/CMakeCache.txt" || { echo "$BUILD is not a lean build (SPORE_LEAN=ON)"; exit 1; }
grep -q 'SPORE_CUDA:BOOL=ON' "$BUILD/CMakeCache.txt" || { echo "$BUILD has no CUDA backend (SPORE_CUDA=ON)"; exit 1; }
start=$(date +%s)
targets=(spore spore_c spore_cuda spore_cli test_cuda bench_cuda_ops bench_cuda_models)
cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" --target "${targets[@]}"
echo "built in $(( $(date +%s) - start )) s"

rm -rf "$OUT" "$OUT.tar.xz"
mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/bench/peers" "$OUT/scripts"
cp -P "$BUILD"/libspore.so* "$BUILD"/libspore_c.so* "$BUILD/libspore_cuda.so" "$OUT/lib/"
cp "$BUILD/spore" "$BUILD/tests/test_cuda" "$OUT/bin/"
# The C API's device-buffer test program, run by gpu_check.sh on a model compiled for the GPU.
cc -std=c99 -O2 -o "$OUT/bin/capi_device" tests/capi/capi_device.c -Iinclude -L"$BUILD" -lspore_c -lm \
  -Wl,-rpath,'$ORIGIN/../lib'

cp "$BUILD/bench/bench_cuda_ops" "$BUILD/bench/bench_cuda_models" "$OUT/bin/"
cp bench/peers/cuda_ops_torch.py bench/peers/cuda_models_torch.py "$OUT/bench/peers/"
cp scripts/gpu_check.sh "$OUT/scripts/"
# Fashion-MNIST (30 MB of .gz, already compressed) for the LeNet-5 main job on the GPU: the machine
# has no Debian packages. Left out with SPORE_BUNDLE_DATA=0.
fmnist=/usr/share/datasets/fashion-mnist
if [ "${SPORE_BUNDLE_DATA:-1}" = 1 ] && [ -f "$fmnist/train-images-idx3-ubyte.gz" ]; then
  mkdir -p "$OUT/data/fashion-mnist"
  cp "$fmnist"/*-ubyte.gz "$OUT/data/fashion-mnist/"
fi

# The libraries the programs need that a bare system lacks: everything ldd resolves except glibc's
# own (the machine's loader must match them) and CUDA's (the machine's toolkit and driver).
is_system() {
  case "$(basename "$1")" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libresolv.so*|libutil.so*) return 0 ;;
    libcuda.so*|libcudart.so*|libcublas*|libcudnn*|libnccl*|libnvrtc*|libnvJitLink*) return 0 ;;
  esac
  return 1
}
for f in "$OUT"/lib/libspore.so "$OUT"/lib/libspore_cuda.so "$OUT"/bin/*; do
  LD_LIBRARY_PATH="$OUT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$f" | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  is_system "$lib" || [ -e "$OUT/lib/$(basename "$lib")" ] || cp -L "$lib" "$OUT/lib/"
done
strip --strip-unneeded "$OUT"/bin/* "$OUT"/lib/*.so* 2> /dev/null || true
cat > "$OUT/MANIFEST" << EOF
spore GPU bundle: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src include CMakeLists.txt cmake || echo '+dirty')
built $(date -u +%FT%TZ) on $(hostname) from $BUILD (lean, CUDA sm_90, nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))
EOF
(cd "$OUT" && find . -type f -printf '%10s %p\n' | sort -k2) >> "$OUT/MANIFEST"
tar -C "$OUT/.." -cJf "$OUT.tar.xz" "$OUT"
raw=$(du -sb "$OUT" | cut -f1)
packed=$(stat -c %s "$OUT.tar.xz")
awk -v r="$raw" -v p="$packed" -v l="$LIMIT_MIB" \
  'BEGIN { printf "gpu_bundle: %.1f MiB unpacked, gpu_bundle.tar.xz %.1f MiB (limit %d MiB)\n", r / 1048576, p / 1048576, l }'
if [ "$packed" -gt $((LIMIT_MIB * 1048576)) ]; then
  echo "gpu_bundle.tar.xz is over the ${LIMIT_MIB} MiB the GPU machine accepts"
  exit 1
fi
