// Matmul and batched matmul on the GPU through cuBLASLt: float32 (TF32 off: the CPU's numbers),
// float16 and bfloat16 with float32 accumulation, float64. Row-major C = A B is computed as the
// column-major C^T = B^T A^T, so no operand is transposed in memory; an operand that is a
// transposed view (a Dense layer's weight, most backward products) is read in place with
// cuBLASLt's transpose flag, as is one with padded rows, instead of being copied first. Batch
// dims broadcast as numpy does: one strided-batched call when each operand's batch is whole or
// absent and its matrices are one stride apart, one call per batch (of contiguous copies)
// otherwise. MatmulEpilogue (Graph mode's Dense fusion, graph/passes/matmul_epilogue.cpp) adds the
// bias and applies relu / tanh-gelu in the same call, through cuBLASLt's epilogues (in float32
// before the one rounding to the output type). The algorithm comes from cuBLASLt's heuristic with
// the operands' real alignments and a workspace, cached per problem.
#include <cublasLt.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/matmul_plan.h"

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

// A column-major rows x cols matrix, columns ld elements apart, `batch` of them `stride` elements
// apart.
struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  Layout(cudaDataType_t t, uint64_t rows, uint64_t cols, int64_t ld, int batch, int64_t stride) {
    SPORE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld));
    if (batch > 1) {
      SPORE_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                          &batch, sizeof batch));
      SPORE_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(l); }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
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
  int64_t M, N, K, sa, sb, sc, lda, ldb;
  bool ta, tb;
  uint32_t align_a, align_b, align_c;
  int epilogue;
  bool operator<(const AlgoKey& o) const {
    return std::tie(dtype, batch, M, N, K, sa, sb, sc, lda, ldb, ta, tb, align_a, align_b, align_c,
                    epilogue) < std::tie(o.dtype, o.batch, o.M, o.N, o.K, o.sa, o.sb, o.sc, o.lda,
                                         o.ldb, o.ta, o.tb, o.align_a, o.align_b, o.align_c,
                                         o.epilogue);
  }
};
constexpr size_t kMaxWorkspace = size_t(32) << 20;  // cuBLASLt's recommendation for Hopper

// What cuBLASLt does as it writes the product: nothing, or add a bias (N) and maybe activate.
struct Epilogue {
  cublasLtEpilogue_t kind = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
};

// C (M x N, contiguous) = A (M x K) B (K x N), row-major, `batch` products with the given element
// strides; A and B as matmul_operand reads them (matmul_plan.h).
void gemm(DType dt, const void* a, const MatmulOperand& oa, const void* b, const MatmulOperand& ob,
          void* c, int64_t M, int64_t N, int64_t K, int batch, int64_t sa, int64_t sb, int64_t sc,
          cudaStream_t stream, Device device, const Epilogue& ep = {}) {
  const Types t = types_of(dt);
  const MatmulPlan plan = matmul_plan(oa, ob, M, N, K);
  cublasLtMatmulDesc_t desc;
  SPORE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, t.compute, t.scale));
  const cublasOperation_t op_a = plan.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
                          op_b = plan.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  SPORE_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
  SPORE_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
  if (ep.kind != CUBLASLT_EPILOGUE_DEFAULT) {
    // The bias runs along cuBLASLt's D rows: our C's columns (N), one value per output feature.
    SPORE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep.kind,
                                                      sizeof ep.kind));
    SPORE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &ep.bias, sizeof ep.bias));
  }
  auto layout = [&](const LtMatrix& m, int64_t stride) {
    return Layout(t.data, uint64_t(m.rows), uint64_t(m.cols), m.ld, batch, stride);
  };
  const Layout lb = layout(plan.a, sb), la = layout(plan.b, sa), lc = layout(plan.d, sc);
  const AlgoKey key{int(dt),
                    batch,
                    M,
                    N,
                    K,
                    sa,
                    sb,
                    sc,
                    oa.ld,
                    ob.ld,
                    oa.by_columns,
                    ob.by_columns,
                    alignment_of(a),
                    alignment_of(b),
                    alignment_of(c),
                    int(ep.kind)};
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
  const Tensor& a0 = ctx.inputs[0];
  const Tensor& b0 = ctx.inputs[1];
  Tensor& c = ctx.outputs[0];
  SPORE_CHECK(a0.dim() >= 2 && b0.dim() >= 2,
              "[GPU] matmul takes operands of rank >= 2 (the op reshapes vectors)");
  const int64_t M = a0.size(-2), K = a0.size(-1), N = b0.size(-1);
  if (c.numel() == 0) return;
  cudaStream_t s = native(ctx.stream->native_handle());
  if (K == 0) {
    SPORE_CUDA_CHECK(cudaMemsetAsync(c.data_ptr(), 0, c.nbytes(), s));
    return;
  }
  const int64_t batch = c.numel() / (M * N);
  // In place: both operands readable by cuBLASLt as they are, each batch whole or one matrix.
  const MatmulOperand oa = matmul_operand(a0.shape(), a0.strides()),
                      ob = matmul_operand(b0.shape(), b0.strides());
  if (oa.usable && ob.usable && (oa.batches == batch || oa.batches == 1) &&
      (ob.batches == batch || ob.batches == 1) && batch <= INT32_MAX) {
    gemm(c.dtype(), a0.data_ptr(), oa, b0.data_ptr(), ob, c.data_ptr(), M, N, K, int(batch),
         oa.batches == 1 ? 0 : oa.batch_stride, ob.batches == 1 ? 0 : ob.batch_stride, M * N, s,
         c.device());
    return;
  }
  // Otherwise contiguous operands (a copy kernel on this device when a view is strided).
  const Tensor a = a0.contiguous(), b = b0.contiguous();
  const int64_t a_batch = a.numel() / (M * K), b_batch = b.numel() / (K * N);
  const size_t item = itemsize(c.dtype());
  auto* pa = static_cast<const char*>(a.data_ptr());
  auto* pb = static_cast<const char*>(b.data_ptr());
  auto* pc = static_cast<char*>(c.data_ptr());
  if ((a_batch == batch || a_batch == 1) && (b_batch == batch || b_batch == 1) &&
      batch <= INT32_MAX) {
    gemm(c.dtype(), pa, contiguous_operand(K), pb, contiguous_operand(N), pc, M, N, K, int(batch),
         a_batch == 1 ? 0 : M * K, b_batch == 1 ? 0 : K * N, M * N, s, c.device());
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
    gemm(c.dtype(), pa + offset(a, i, M * K) * int64_t(item), contiguous_operand(K),
         pb + offset(b, i, K * N) * int64_t(item), contiguous_operand(N),
         pc + i * M * N * int64_t(item), M, N, K, 1, 0, 0, 0, s, c.device());
}

// MatmulEpilogue: (a (..., M, K), b (K, N), bias (N)) -> act(a @ b + bias), attr act.
void matmul_epilogue(ops::KernelContext& ctx) {
  const Tensor a = ctx.inputs[0].contiguous();  // its batch rows as one (rows x K) matrix
  const Tensor& b0 = ctx.inputs[1];
  const Tensor bias = ctx.inputs[2].contiguous();
  Tensor& c = ctx.outputs[0];
  if (c.numel() == 0) return;
  const int64_t K = a.size(-1), N = b0.size(1);
  SPORE_CHECK(K > 0,
              "[GPU] matmul_epilogue with an empty inner dimension (K = 0): the epilogue "
              "pass does not make one");
  const int64_t M = a.numel() / K;
  const std::string act = ctx.attrs.has("act") ? ctx.attrs.get_string("act") : std::string();
  SPORE_CHECK(act.empty() || act == "relu" || act == "gelu_tanh", "[GPU] matmul_epilogue: act '",
              act, "' has no cuBLASLt epilogue");
  Epilogue ep;
  ep.bias = bias.data_ptr();
  ep.kind = act == "relu"        ? CUBLASLT_EPILOGUE_RELU_BIAS
            : act == "gelu_tanh" ? CUBLASLT_EPILOGUE_GELU_BIAS
                                 : CUBLASLT_EPILOGUE_BIAS;
  MatmulOperand ob = matmul_operand(b0.shape(), b0.strides());
  Tensor b = b0;
  if (!ob.usable) {
    b = b0.contiguous();
    ob = contiguous_operand(N);
  }
  gemm(c.dtype(), a.data_ptr(), contiguous_operand(K), b.data_ptr(), ob, c.data_ptr(), M, N, K, 1,
       0, 0, 0, native(ctx.stream->native_handle()), c.device(), ep);
}

}  // namespace

SPORE_KERNEL(GPU, Matmul, matmul, kFloat32, kFloat16, kBFloat16, kFloat64);
SPORE_KERNEL(GPU, MatmulEpilogue, matmul_epilogue, kFloat32, kFloat16, kBFloat16);

}  // namespace spore::cuda
