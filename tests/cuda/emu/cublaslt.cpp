// The emulated cuBLASLt: the calls the CUDA backend's matmul makes (kernels/matmul.cpp), computed
// by a plain loop as cuBLASLt defines the product: column-major matrices, element (i, j) of a
// rows x cols matrix at i + j * ld, batch b at b * stride; D = alpha op(A) op(B) + beta C, then the
// epilogue (bias along D's rows, ReLU or tanh-GELU). It checks what cuBLASLt checks (the layouts
// agree with the operations, ld >= rows, equal batch counts) and what it cannot (every operand
// lies inside a device allocation, the workspace is as large as the heuristic asked), so the
// backend's plumbing of transposes, leading dimensions and strided batches is exercised for real.
#include <cublasLt.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include "tests/cuda/emu/numeric.h"
#include "tests/cuda/emu/runtime.h"

namespace spore::emu {
namespace {

struct Desc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
};
struct MatrixLayout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int batch = 1;
  int64_t stride = 0;
};
constexpr size_t kWorkspace = 1 << 20;  // what the heuristic asks for: the backend must provide it

std::mutex mu;
std::map<const void*, Desc> descs;
std::map<const void*, MatrixLayout> layouts;

Elem elem_of(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F:
      return Elem::kF32;
    case CUDA_R_64F:
      return Elem::kF64;
    case CUDA_R_16F:
      return Elem::kF16;
    case CUDA_R_16BF:
      return Elem::kBF16;
    default:
      return Elem::kUnknown;
  }
}

cublasStatus_t bad(const std::string& why) {
  std::fprintf(stderr, "[CUDA emulator] cuBLASLt: %s\n", why.c_str());
  return CUBLAS_STATUS_INVALID_VALUE;
}

// The extent in elements of a layout's matrices, all batches.
int64_t extent(const MatrixLayout& l) {
  return int64_t(l.cols - 1) * l.ld + int64_t(l.rows) + int64_t(l.batch - 1) * l.stride;
}

}  // namespace
}  // namespace spore::emu

using namespace spore::emu;

size_t cublasLtGetVersion() { return CUBLAS_VERSION; }
cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
  *h = reinterpret_cast<cublasLtHandle_t>(new char(0));
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  delete reinterpret_cast<char*>(h);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  *d = new cublasLtMatmulDescOpaque_t{};
  std::lock_guard lock(mu);
  descs[*d] = Desc{compute, scale};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  std::lock_guard lock(mu);
  descs.erase(d);
  delete d;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t n) {
  std::lock_guard lock(mu);
  Desc& x = descs.at(d);
  auto get = [&](auto& field) {
    if (n != sizeof field) return bad("attribute " + std::to_string(int(attr)) + ": wrong size");
    std::memcpy(&field, buf, n);
    return CUBLAS_STATUS_SUCCESS;
  };
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return get(x.ta);
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return get(x.tb);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return get(x.epilogue);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return get(x.bias);
    default:
      return bad("matmul attribute " + std::to_string(int(attr)) + " is not emulated");
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  *l = new cublasLtMatrixLayoutOpaque_t{};
  std::lock_guard lock(mu);
  layouts[*l] = MatrixLayout{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  std::lock_guard lock(mu);
  layouts.erase(l);
  delete l;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t n) {
  std::lock_guard lock(mu);
  MatrixLayout& x = layouts.at(l);
  if (attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && n == sizeof(int)) {
    std::memcpy(&x.batch, buf, n);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (attr == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && n == sizeof(int64_t)) {
    std::memcpy(&x.stride, buf, n);
    return CUBLAS_STATUS_SUCCESS;
  }
  return bad("layout attribute " + std::to_string(int(attr)) + " (size " + std::to_string(n) +
             ") is not emulated");
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
  *p = new cublasLtMatmulPreferenceOpaque_t{};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t,
                                                    cublasLtMatmulPreferenceAttributes_t,
                                                    const void*, size_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatmulPreference_t, int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int* found) {
  if (requested < 1) return bad("the heuristic was asked for no algorithm");
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].workspaceSize = kWorkspace;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t adesc, const void* B,
                              cublasLtMatrixLayout_t bdesc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t cdesc, void* D, cublasLtMatrixLayout_t ddesc,
                              const cublasLtMatmulAlgo_t*, void* workspace, size_t ws_bytes,
                              cudaStream_t stream) {
  Desc d;
  MatrixLayout la, lb, lc, ld;
  {
    std::lock_guard lock(mu);
    d = descs.at(desc);
    la = layouts.at(adesc), lb = layouts.at(bdesc), lc = layouts.at(cdesc), ld = layouts.at(ddesc);
  }
  // op(A): m x k, op(B): k x n, C and D: m x n.
  const bool ta = d.ta == CUBLAS_OP_T, tb = d.tb == CUBLAS_OP_T;
  const int64_t m = int64_t(ld.rows), n = int64_t(ld.cols);
  const int64_t k = int64_t(ta ? la.rows : la.cols);
  if (int64_t(ta ? la.cols : la.rows) != m || int64_t(tb ? lb.rows : lb.cols) != n ||
      int64_t(tb ? lb.cols : lb.rows) != k || lc.rows != ld.rows || lc.cols != ld.cols)
    return bad("the layouts disagree: A " + std::to_string(la.rows) + "x" +
               std::to_string(la.cols) + (ta ? " (T)" : "") + ", B " + std::to_string(lb.rows) +
               "x" + std::to_string(lb.cols) + (tb ? " (T)" : "") + ", D " +
               std::to_string(ld.rows) + "x" + std::to_string(ld.cols));
  for (const MatrixLayout* l : {&la, &lb, &lc, &ld})
    if (l->ld < int64_t(l->rows) || l->batch != ld.batch || elem_of(l->type) == Elem::kUnknown)
      return bad("a layout has ld " + std::to_string(l->ld) + " < rows " + std::to_string(l->rows) +
                 ", a batch count other than D's, or an unknown type");
  if (ws_bytes < kWorkspace || !is_device_range(workspace, kWorkspace))
    return bad("the workspace is smaller than the heuristic asked for, or not device memory");
  const Elem ea = elem_of(la.type), eb = elem_of(lb.type), ec = elem_of(lc.type),
             ed = elem_of(ld.type);
  struct Operand {
    const void* p;
    const MatrixLayout* l;
    Elem e;
    const char* name;
  };
  for (const Operand& o : {Operand{A, &la, ea, "A"}, Operand{B, &lb, eb, "B"},
                           Operand{C, &lc, ec, "C"}, Operand{D, &ld, ed, "D"}})
    if (extent(*o.l) > 0 && !is_device_range(o.p, size_t(extent(*o.l)) * elem_size(o.e)))
      return bad(std::string("operand ") + o.name + " runs outside its device allocation");
  const bool has_bias = d.epilogue == CUBLASLT_EPILOGUE_BIAS ||
                        d.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS ||
                        d.epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
  if (d.epilogue != CUBLASLT_EPILOGUE_DEFAULT && !has_bias)
    return bad("epilogue " + std::to_string(int(d.epilogue)) + " is not emulated");
  if (has_bias && !is_device_range(d.bias, size_t(m) * elem_size(ed)))
    return bad("the bias (" + std::to_string(m) + " values) is not device memory");
  const bool dbl = d.scale == CUDA_R_64F;
  const double alpha_v =
      dbl ? *static_cast<const double*>(alpha) : *static_cast<const float*>(alpha);
  const double beta_v = dbl ? *static_cast<const double*>(beta) : *static_cast<const float*>(beta);
  const bool acc64 = d.compute == CUBLAS_COMPUTE_64F;
  const cudaError_t e = enqueue(stream, "cublasLtMatmul", [=]() -> std::string {
    for (int b = 0; b < ld.batch; ++b)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < m; ++i) {
          double acc64v = 0;
          float acc32 = 0;
          for (int64_t p = 0; p < k; ++p) {
            const int64_t ai = ta ? p + i * la.ld : i + p * la.ld;
            const int64_t bi = tb ? j + p * lb.ld : p + j * lb.ld;
            const double x = load(ea, A, b * la.stride + ai), y = load(eb, B, b * lb.stride + bi);
            if (acc64)
              acc64v += x * y;
            else
              acc32 = std::fma(float(x), float(y), acc32);
          }
          double v = alpha_v * (acc64 ? acc64v : double(acc32));
          if (beta_v != 0) v += beta_v * load(ec, C, b * lc.stride + i + j * lc.ld);
          if (has_bias) v += load(ed, d.bias, i);
          if (d.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS) v = v > 0 ? v : 0;
          if (d.epilogue == CUBLASLT_EPILOGUE_GELU_BIAS)
            v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
          store(ed, D, b * ld.stride + i + j * ld.ld, v);
        }
    return std::string();
  });
  return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
