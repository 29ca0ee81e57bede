// TopK and Sort on the GPU, with the CPU kernels' order (backends/cpu/kernels/index.cpp): per lane
// along the axis, (value, position) pairs ordered by value (NaN above every number, as PyTorch),
// ties by the lower position, so the result is unique and equals the CPU's; the first k are
// written (values and int64 positions). A lane of up to 1024 elements is one block's bitonic sort
// in shared memory; a longer one is one thread's heap sort in a scratch block (correct, not fast:
// a segmented radix sort is the faster path still to write).
#include "backends/cuda/kernels/common.cuh"

namespace spore::cuda {
namespace {

constexpr int kBitonicMax = 1024;
constexpr int32_t kPad = INT32_MAX;  // padding slots sort after everything

template <class A>
__device__ __forceinline__ bool greater(A a, A b) {
  return !(b != b) && ((a != a) || a > b);
}
// Whether (a, ia) comes before (b, ib).
template <class A>
__device__ __forceinline__ bool before(A a, int64_t ia, A b, int64_t ib, bool descending) {
  if (ia == kPad) return false;
  if (ib == kPad) return true;
  if (descending ? greater(a, b) : greater(b, a)) return true;
  if (descending ? greater(b, a) : greater(a, b)) return false;
  return ia < ib;
}

// Lanes: the shape without the axis; st[0] x's strides, st[1] the outputs'.
template <class T, class A>
__global__ void bitonic_kernel(T* vals, int64_t* idxs, const T* x, Walk w, int64_t n, int64_t k,
                               int64_t xs, int64_t os, bool descending, int P) {
  __shared__ A key[kBitonicMax];
  __shared__ int32_t pos[kBitonicMax];
  int64_t off[3];
  walk_offsets(w, blockIdx.x, off);
  for (int i = threadIdx.x; i < P; i += blockDim.x) {
    pos[i] = i < n ? i : kPad;
    key[i] = i < n ? cvt<A>(x[off[0] + i * xs]) : A(0);
  }
  __syncthreads();
  for (int size = 2; size <= P; size <<= 1)
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      for (int i = threadIdx.x; i < P; i += blockDim.x) {
        const int j = i ^ stride;
        if (j <= i) continue;
        const bool up = (i & size) == 0;  // this run ascends (in `before` order)
        const bool swap = up ? before(key[j], pos[j], key[i], pos[i], descending)
                             : before(key[i], pos[i], key[j], pos[j], descending);
        if (swap) {
          const A tk = key[i];
          key[i] = key[j];
          key[j] = tk;
          const int32_t tp = pos[i];
          pos[i] = pos[j];
          pos[j] = tp;
        }
      }
      __syncthreads();
    }
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    vals[off[1] + i * os] = cvt<T>(key[i]);
    idxs[off[1] + i * os] = pos[i];
  }
}

// One thread per lane: a heap sort of the lane's pairs in scratch (key[], pos[] of n each).
template <class T, class A>
__global__ void heap_kernel(T* vals, int64_t* idxs, const T* x, A* keys, int64_t* poss, Walk w,
                            int64_t lanes, int64_t n, int64_t k, int64_t xs, int64_t os,
                            bool descending) {
  SPORE_GRID_LOOP(l, lanes) {
    int64_t off[3];
    walk_offsets(w, l, off);
    A* key = keys + l * n;
    int64_t* pos = poss + l * n;
    for (int64_t i = 0; i < n; ++i) key[i] = cvt<A>(x[off[0] + i * xs]), pos[i] = i;
    // A heap with the element that sorts last at the root; then the root goes to the end.
    auto sift = [&](int64_t root, int64_t end) {
      while (true) {
        int64_t child = 2 * root + 1;
        if (child >= end) return;
        if (child + 1 < end &&
            before(key[child], pos[child], key[child + 1], pos[child + 1], descending))
          ++child;
        if (!before(key[root], pos[root], key[child], pos[child], descending)) return;
        const A tk = key[root];
        key[root] = key[child];
        key[child] = tk;
        const int64_t tp = pos[root];
        pos[root] = pos[child];
        pos[child] = tp;
        root = child;
      }
    };
    for (int64_t i = n / 2; i-- > 0;) sift(i, n);
    for (int64_t end = n - 1; end > 0; --end) {
      const A tk = key[0];
      key[0] = key[end];
      key[end] = tk;
      const int64_t tp = pos[0];
      pos[0] = pos[end];
      pos[end] = tp;
      sift(0, end);
    }
    for (int64_t i = 0; i < k; ++i) {
      vals[off[1] + i * os] = cvt<T>(key[i]);
      idxs[off[1] + i * os] = pos[i];
    }
  }
}

void sort_lanes(ops::KernelContext& ctx, int64_t k, bool descending) {
  const Tensor& x = ctx.inputs[0];
  Tensor &vals = ctx.outputs[0], &idxs = ctx.outputs[1];
  if (vals.numel() == 0) return;
  const int64_t ax = x.dim() ? ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim()) : -1;
  const int64_t n = ax >= 0 ? x.size(ax) : 1;
  const int64_t xs = ax >= 0 ? x.strides()[size_t(ax)] : 0,
                os = ax >= 0 ? vals.strides()[size_t(ax)] : 0;
  Shape lane_shape, xst, ost;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != ax) {
      lane_shape.push_back(x.size(d));
      xst.push_back(x.strides()[size_t(d)]);
      ost.push_back(vals.strides()[size_t(d)]);
    }
  int64_t lanes = 1;
  for (int64_t s : lane_shape) lanes *= s;
  Walk w;
  SPORE_CHECK(lane_shape.size() <= size_t(kWalkDims), "[GPU] ", ctx.def.name, ": at most ",
              kWalkDims, " dims");
  w.nd = int(lane_shape.size());
  for (int d = 0; d < w.nd; ++d) {
    w.size[d] = lane_shape[size_t(d)];
    w.st[0][d] = xst[size_t(d)];
    w.st[1][d] = ost[size_t(d)];
  }
  cudaStream_t s = stream_of(ctx);
  visit_all(x.dtype(), ctx.def.name, [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<std::is_same_v<T, bool>, int32_t, calc_t<T>>;
    if constexpr (!std::is_same_v<T, bool>) {
      if (n <= kBitonicMax) {
        int P = 1;
        while (P < n) P *= 2;
        SPORE_CHECK(lanes <= INT32_MAX, "[GPU] ", ctx.def.name, ": too many lanes");
        bitonic_kernel<T, A><<<unsigned(lanes), 256, 0, s>>>(data_of<T>(vals),
                                                             data_of<int64_t>(idxs), data_of<T>(x),
                                                             w, n, k, xs, os, descending, P);
      } else {
        const Tensor keys = Tensor::empty({lanes * n * int64_t(sizeof(A))}, kUInt8, x.device()),
                     poss = Tensor::empty({lanes * n}, kInt64, x.device());
        const Launch1d l = launch_1d(lanes);
        heap_kernel<T, A><<<l.blocks, l.threads, 0, s>>>(
            data_of<T>(vals), data_of<int64_t>(idxs), data_of<T>(x), data_of<A>(keys),
            data_of<int64_t>(poss), w, lanes, n, k, xs, os, descending);
      }
    } else {
      SPORE_THROW(ErrorKind::TypeError, "[GPU] ", ctx.def.name, ": no kernel for bool");
    }
  });
  SPORE_CUDA_CHECK_LAUNCH();
}

// Always returns the k values in order (a valid result for sorted=false too), as the CPU.
void topk(ops::KernelContext& ctx) {
  sort_lanes(ctx, ctx.attrs.get_int("k"), ctx.attrs.get_bool("largest", true));
}
void sort(ops::KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  sort_lanes(ctx, x.dim() ? x.size(ops::normalize_axis(ctx.attrs.get_int("axis"), x.dim())) : 1,
             ctx.attrs.get_bool("descending", false));
}

}  // namespace

#define SPORE_NUM kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64
SPORE_KERNEL(GPU, TopK, topk, SPORE_NUM);
SPORE_KERNEL(GPU, Sort, sort, SPORE_NUM);
#undef SPORE_NUM

}  // namespace spore::cuda
