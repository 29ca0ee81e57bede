// What a CUDA kernel file needs to compile as host C++ for the emulator (docs/cuda.md, "The
// emulator"). Included before everything else in each kernel file (-include), after which the
// file is the one nvcc compiles, its launches rewritten by rewrite_launches.py into
// spore::emu::launch(...). The CUDA headers compile for the host as they are (the half types have
// host arithmetic); this adds the thread indices, shared memory, barriers, shuffles, atomics and
// the device math CUDA declares only for device code.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>  // libstdc++'s: brings the float overloads (std::exp(float), ...) to global scope

#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>

#include "tests/cuda/emu/engine.h"

namespace spore::emu {

// Queues the grid on the stream, in stream order (runtime.cpp); body runs as each thread.
void enqueue_launch(const char* kernel, dim3 grid, dim3 block, size_t shared, cudaStream_t stream,
                    std::function<void()> body);

// kernel<<<grid, block, shared, stream>>>(args), as rewritten: the arguments are converted to the
// kernel's parameter types and copied at the launch, as CUDA copies them.
template <class... P>
struct Launch {
  const char* name;
  void (*kernel)(P...);
  dim3 grid, block;
  size_t shared;
  cudaStream_t stream;
  template <class... A>
  void operator()(A&&... a) const {
    static_assert(sizeof...(A) == sizeof...(P), "a launch passes one argument per parameter");
    auto k = kernel;
    enqueue_launch(
        name, grid, block, shared, stream,
        [k, args = std::tuple<std::decay_t<P>...>(std::forward<A>(a)...)] { std::apply(k, args); });
  }
};
template <class... P>
Launch<P...> launch(const char* name, void (*kernel)(P...), dim3 grid, dim3 block,
                    size_t shared = 0, cudaStream_t stream = nullptr) {
  return Launch<P...>{name, kernel, grid, block, shared, stream};
}

template <class T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move up to 8 bytes");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T>
T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}

}  // namespace spore::emu

// ---- the built-in variables and qualifiers ------------------------------------------------------
#define threadIdx (::spore::emu::thread().thread_idx)
#define blockIdx (::spore::emu::thread().block_idx)
#define blockDim (::spore::emu::thread().block_dim)
#define gridDim (::spore::emu::thread().grid_dim)
// One block runs at a time in the process, so a static is exactly the block's shared memory.
#undef __shared__
#define __shared__ static
#undef __grid_constant__
#define __grid_constant__
#undef __launch_bounds__
#define __launch_bounds__(...)

// ---- barriers and warp shuffles -----------------------------------------------------------------
inline void __syncthreads() { ::spore::emu::sync_block(0, 0); }
inline int __syncthreads_or(int p) { return ::spore::emu::sync_block(1, p); }
inline int __syncthreads_and(int p) { return ::spore::emu::sync_block(2, p); }
inline int __syncthreads_count(int p) { return ::spore::emu::sync_block(3, p); }
inline void __threadfence() {}
inline void __threadfence_block() {}

template <class T>
T __shfl_sync(unsigned, T v, int src, int width = 32) {
  return ::spore::emu::from_bits<T>(
      ::spore::emu::shuffle(::spore::emu::to_bits(v), ::spore::emu::Shuffle::kIdx, src, width));
}
template <class T>
T __shfl_up_sync(unsigned, T v, unsigned delta, int width = 32) {
  return ::spore::emu::from_bits<T>(::spore::emu::shuffle(
      ::spore::emu::to_bits(v), ::spore::emu::Shuffle::kUp, int(delta), width));
}
template <class T>
T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
  return ::spore::emu::from_bits<T>(::spore::emu::shuffle(
      ::spore::emu::to_bits(v), ::spore::emu::Shuffle::kDown, int(delta), width));
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
  return ::spore::emu::from_bits<T>(
      ::spore::emu::shuffle(::spore::emu::to_bits(v), ::spore::emu::Shuffle::kXor, mask, width));
}

// ---- atomics: the threads of the emulator never run at the same time
// ------------------------------
template <class T>
T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = T(old + v);
  return old;
}
template <class T>
T atomicMax(T* p, T v) {
  const T old = *p;
  if (v > old) *p = v;
  return old;
}
template <class T>
T atomicMin(T* p, T v) {
  const T old = *p;
  if (v < old) *p = v;
  return old;
}
template <class T>
T atomicExch(T* p, T v) {
  const T old = *p;
  *p = v;
  return old;
}
template <class T>
T atomicCAS(T* p, T compare, T v) {
  const T old = *p;
  if (old == compare) *p = v;
  return old;
}

// ---- device math the host lacks -----------------------------------------------------------------
// CUDA's min / max: fmin / fmax for floating types (a NaN operand gives the other), else the
// usual comparison in the common type.
template <class A, class B>
inline auto max(A a, B b) -> std::common_type_t<A, B> {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>)
    return std::fmax(C(a), C(b));
  else
    return C(a) < C(b) ? C(b) : C(a);
}
template <class A, class B>
inline auto min(A a, B b) -> std::common_type_t<A, B> {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>)
    return std::fmin(C(a), C(b));
  else
    return C(b) < C(a) ? C(b) : C(a);
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x < 0.f ? 0.f : x > 1.f ? 1.f : x; }
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
