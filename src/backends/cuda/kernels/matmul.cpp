// Matmul and batched matmul on the GPU through cuBLASLt: float32 (TF32 off: the CPU's numbers),
// float16 and bfloat16 with float32 accumulation, float64. Row-major C = A B is computed as the
// column-major C^T = B^T A^T, so no operand is transposed in memory. Batch dims broadcast as numpy
// does: one strided-batched call when each operand's batch is whole or absent, one call per batch
// otherwise. The algorithm comes from cuBLASLt's heuristic with the operands' real alignments and a
// workspace, cached per problem.
#include <cublasLt.h>

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_check.h"

#define SPORE_CUBLAS_CHECK(call)                                                                \
  do {                                                                                          \
    const cublasStatus_t spore_st_ = (call);                                                    \
    if (spore_st_ != CUBLAS_STATUS_SUCCESS)                                                     \
      SPORE_THROW(::spore::ErrorKind::RuntimeError, "[GPU] ", #call, " failed: cuBLAS status ", \
                  int(spore_st_));                                                              \
  } while (0)

namespace spore::cuda {
namespace {

cublasLtHandle_t handle() {
  static cublasLtHandle_t h = [] {
    cublasLtHandle_t x;
    SPORE_CUBLAS_CHECK(cublasLtCreate(&x));
    return x;
  }();
  return h;
}

struct Types {
  cudaDataType_t data;
  cublasComputeType_t compute;
  cudaDataType_t scale;
};
Types types_of(DType t) {
  switch (t) {
    case kFloat32:
      return {CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case kFloat16:
      return {CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case kBFloat16:
      return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case kFloat64:
      return {CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F};
    default:
      SPORE_THROW(ErrorKind::TypeError, "[GPU] matmul: no kernel for ", dtype_name(t));
  }
}

// A column-major rows x cols matrix (ld = rows), `batch` of them `stride` elements apart.
struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  Layout(cudaDataType_t t, uint64_t rows, uint64_t cols, int batch, int64_t stride) {
    SPORE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, rows, cols, int64_t(rows)));
    if (batch > 1) {
      SPORE_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                          &batch, sizeof batch));
      SPORE_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(l); }
};

// The largest power of two (at most 256) dividing the address: what the algorithm may assume.
uint32_t alignment_of(const void* p) {
  uint32_t a = 256;
  while (a > 1 && uintptr_t(p) % a != 0) a /= 2;
  return a;
}

// The algorithm cuBLASLt's heuristic picks for a problem, found once per problem: shapes, batch,
// strides, dtype and the operands' alignments (the default preferences assume 256-byte aligned
// pointers, which a view's offset or a broadcast batch's operand need not be).
struct AlgoKey {
  int dtype, batch;
  int64_t M, N, K, sa, sb, sc;
  uint32_t align_a, align_b, align_c;
  bool operator<(const AlgoKey& o) const {
    return std::tie(dtype, batch, M, N, K, sa, sb, sc, align_a, align_b, align_c) <
           std::tie(o.dtype, o.batch, o.M, o.N, o.K, o.sa, o.sb, o.sc, o.align_a, o.align_b,
                    o.align_c);
  }
};
constexpr size_t kMaxWorkspace = size_t(32) << 20;  // cuBLASLt's recommendation for Hopper

// C (M x N) = A (M x K) B (K x N), row-major, `batch` products with the given element strides.
void gemm(DType dt, const void* a, const void* b, void* c, int64_t M, int64_t N, int64_t K,
          int batch, int64_t sa, int64_t sb, int64_t sc, cudaStream_t stream, Device device) {
  const Types t = types_of(dt);
  cublasLtMatmulDesc_t desc;
  SPORE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, t.compute, t.scale));
  // Column-major view: C^T (N x M) = B^T (N x K) * A^T (K x M).
  Layout lb(t.data, uint64_t(N), uint64_t(K), batch, sb),
      la(t.data, uint64_t(K), uint64_t(M), batch, sa),
      lc(t.data, uint64_t(N), uint64_t(M), batch, sc);
  const AlgoKey key{int(dt),         batch,          M, N, K, sa, sb, sc, alignment_of(a),
                    alignment_of(b), alignment_of(c)};
  static std::mutex mu;
  static std::map<AlgoKey, cublasLtMatmulHeuristicResult_t> cache;
  cublasLtMatmulHeuristicResult_t algo{};
  bool known = false;
  {
    const std::lock_guard lock(mu);
    auto it = cache.find(key);
    if ((known = it != cache.end())) algo = it->second;
  }
  if (!known) {
    cublasLtMatmulPreference_t pref;
    SPORE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    auto set = [&](cublasLtMatmulPreferenceAttributes_t attr, const auto& v) {
      SPORE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof v));
    };
    set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(kMaxWorkspace));
    // cuBLASLt's A is our B and its B our A (the column-major view above).
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c);
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle(), desc, lb.l, la.l, lc.l, lc.l,
                                                             pref, 1, &algo, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
      cublasLtMatmulDescDestroy(desc);
      SPORE_THROW(ErrorKind::RuntimeError, "[GPU] matmul: cuBLASLt has no algorithm for ",
                  dtype_name(dt), " (", M, " x ", K, ") @ (", K, " x ", N, "), batch ", batch,
                  " (status ", int(st), ")");
    }
    const std::lock_guard lock(mu);
    cache.emplace(key, algo);
  }
  // The workspace comes from the stream-ordered allocator: free again once this call returns,
  // reused only by work queued after the matmul on this stream.
  const Tensor workspace = algo.workspaceSize > 0
                               ? Tensor::empty({int64_t(algo.workspaceSize)}, kUInt8, device)
                               : Tensor();
  const float one_f = 1, zero_f = 0;
  const double one_d = 1, zero_d = 0;
  const void* alpha = dt == kFloat64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = dt == kFloat64 ? static_cast<const void*>(&zero_d) : &zero_f;
  const cublasStatus_t st = cublasLtMatmul(
      handle(), desc, alpha, b, lb.l, a, la.l, beta, c, lc.l, c, lc.l, &algo.algo,
      workspace.defined() ? workspace.data_ptr() : nullptr, algo.workspaceSize, stream);
  cublasLtMatmulDescDestroy(desc);
  SPORE_CUBLAS_CHECK(st);
}

void matmul(ops::KernelContext& ctx) {
  // Contiguous operands (a copy kernel on this device when a view is strided).
  const Tensor a = ctx.inputs[0].contiguous(), b = ctx.inputs[1].contiguous();
  Tensor& c = ctx.outputs[0];
  SPORE_CHECK(a.dim() >= 2 && b.dim() >= 2,
              "[GPU] matmul takes operands of rank >= 2 (the op reshapes vectors)");
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  if (c.numel() == 0) return;
  cudaStream_t s = native(ctx.stream->native_handle());
  if (K == 0) {
    SPORE_CUDA_CHECK(cudaMemsetAsync(c.data_ptr(), 0, c.nbytes(), s));
    return;
  }
  const int64_t batch = c.numel() / (M * N);
  const int64_t a_batch = a.numel() / (M * K), b_batch = b.numel() / (K * N);
  const size_t item = itemsize(c.dtype());
  auto* pa = static_cast<const char*>(a.data_ptr());
  auto* pb = static_cast<const char*>(b.data_ptr());
  auto* pc = static_cast<char*>(c.data_ptr());
  if ((a_batch == batch || a_batch == 1) && (b_batch == batch || b_batch == 1) &&
      batch <= INT32_MAX) {
    gemm(c.dtype(), pa, pb, pc, M, N, K, int(batch), a_batch == 1 ? 0 : M * K,
         b_batch == 1 ? 0 : K * N, M * N, s, c.device());
    return;
  }
  // Broadcast batch dims (e.g. (B, 1, M, K) x (1, C, K, N)): each output batch finds its operands.
  const Shape cb(c.shape().begin(), c.shape().end() - 2);
  auto offset = [&](const Tensor& t, int64_t idx, int64_t mat) {
    const int64_t lead = int64_t(cb.size()) - (t.dim() - 2);
    int64_t off = 0, stride = 1;
    for (int64_t d = int64_t(cb.size()) - 1; d >= 0; --d) {
      const int64_t coord = idx % cb[size_t(d)];
      idx /= cb[size_t(d)];
      if (d < lead) continue;
      const int64_t size = t.size(d - lead);
      off += (size == 1 ? 0 : coord) * stride;
      stride *= size;
    }
    return off * mat;
  };
  for (int64_t i = 0; i < batch; ++i)
    gemm(c.dtype(), pa + offset(a, i, M * K) * int64_t(item),
         pb + offset(b, i, K * N) * int64_t(item), pc + i * M * N * int64_t(item), M, N, K, 1, 0, 0,
         0, s, c.device());
}

}  // namespace

SPORE_KERNEL(GPU, Matmul, matmul, kFloat32, kFloat16, kBFloat16, kFloat64);

}  // namespace spore::cuda
