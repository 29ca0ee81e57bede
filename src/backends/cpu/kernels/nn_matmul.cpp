// Matmul on the CPU: oneDNN's matmul primitive for float32 / bfloat16 (float16 too where the CPU
// has it, else through float32), and a plain blocked loop for float64 (grad checks only).
//
// Operands keep their strides when oneDNN can read them directly (row- or column-major inner
// matrices, one collapsible batch stride), so a transposed view (the vjp's b^T) costs no copy.
// Batch dims that broadcast (a (B, M, K) @ b (K, N)) fold into M when they can, else go to oneDNN
// as a batch of 1; any other layout is made contiguous first.
//
// MatmulFused (graph-internal, from backends/cpu/passes/dnnl_fusion.cpp): the same primitive with a
// bias (N) broadcast over rows, a sum post-op for a residual and an eltwise activation.
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels/nn_util.h"
#include "backends/cpu/onednn/onednn.h"
#include "backends/cpu/ops/ops.h"
#include "core/parallel.h"

namespace spore::cpu {
namespace {

// One operand as a (batch, rows, cols) strided matrix stack.
struct Mat {
  int64_t batch = 1, rows = 0, cols = 0, sb = 0, sr = 0, sc = 0;
};

// Describes t broadcast over out_batch, or returns false when oneDNN cannot read its layout.
bool describe(const Tensor& t, const Shape& out_batch, Mat& m) {
  const int64_t r = t.dim();
  m.rows = t.size(-2);
  m.cols = t.size(-1);
  int64_t sr = t.strides()[size_t(r - 2)], sc = t.strides()[size_t(r - 1)];
  if (sc == 1 || m.cols == 1) {  // row-major
    sc = 1;
    sr = m.rows == 1 ? m.cols : std::max(sr, m.cols);
    if (m.rows > 1 && t.strides()[size_t(r - 2)] < m.cols) return false;
  } else if (sr == 1 || m.rows == 1) {  // column-major
    sr = 1;
    sc = m.cols == 1 ? m.rows : std::max(sc, m.rows);
    if (m.cols > 1 && t.strides()[size_t(r - 1)] < m.rows) return false;
  } else {
    return false;
  }
  m.sr = sr;
  m.sc = sc;
  // Batch dims, right-aligned to out_batch; size-1 output dims never move a pointer.
  const size_t nb = out_batch.size(), tb = size_t(r - 2), off = nb - tb;
  int64_t batch = 1, sb = 0, expect = -1;
  bool any_zero = false, any_nonzero = false;
  for (size_t d = nb; d-- > 0;) {
    const int64_t n = out_batch[d];
    if (n == 1) continue;
    const int64_t st = d >= off && t.shape()[d - off] != 1 ? t.strides()[d - off] : 0;
    if (st == 0) {
      any_zero = true;
      continue;
    }
    any_nonzero = true;
    if (expect >= 0 && st != expect) return false;
    if (batch == 1) sb = st;
    batch *= n;
    expect = st * n;
  }
  if (any_zero && any_nonzero) return false;
  m.batch = batch;
  m.sb = batch == 1 ? std::max(m.rows * m.sr, m.cols * m.sc) : sb;
  return true;
}

dnnl::memory::desc md_of(const Mat& m, onednn::dt t, bool three_d) {
  if (!three_d) return dnnl::memory::desc({m.batch * m.rows, m.cols}, t, {m.sr, m.sc});
  return dnnl::memory::desc({m.batch, m.rows, m.cols}, t, {m.sb, m.sr, m.sc});
}

// The fused epilogue: bias (N) contiguous, residual shaped like c, post-op attributes.
struct Epilogue {
  const ops::Attrs* post = nullptr;
  const void* bias = nullptr;
  const void* residual = nullptr;
};

// c (B, M, N) contiguous = a @ b through a cached oneDNN matmul; false when oneDNN has no
// implementation for this dtype here.
bool dnnl_matmul(const Tensor& a, const Tensor& b, Tensor& c, Mat ma, Mat mb,
                 const Epilogue& ep = {}) {
  const DType t = c.dtype();
  Mat mc{std::max(ma.batch, mb.batch), ma.rows, mb.cols, ma.rows * mb.cols, mb.cols, 1};
  // Broadcast weights with a row-major batch of A: fold the batch into A's rows (one big GEMM).
  bool three_d = mc.batch > 1;
  if (mb.batch == 1 && ma.batch > 1 && ma.sc == 1 && ma.sb == ma.rows * ma.sr) three_d = false;
  if (!three_d) {
    ma.rows *= ma.batch;
    ma.batch = 1;
    mc.rows *= mc.batch;
    mc.batch = 1;
  }
  onednn::CacheKey key;
  const bool bias = ep.bias != nullptr, res = ep.residual != nullptr;
  key.add(int64_t(ep.post ? op::MatmulFused() : ops::OpId::Matmul)).add(int64_t(t)).add(three_d);
  for (const Mat* m : {&ma, &mb, &mc}) key.add({m->batch, m->rows, m->cols, m->sb, m->sr, m->sc});
  if (ep.post) onednn::add_post_op_key(key.add(bias), *ep.post);
  auto prim = onednn::cached(key, [&]() -> std::shared_ptr<onednn::Compiled> {
    const onednn::dt d = onednn::to_dnnl(t);
    auto amd = md_of(ma, d, three_d), bmd = md_of(mb, d, three_d), cmd = md_of(mc, d, three_d);
    try {
      dnnl::primitive_attr attr = onednn::default_attr();
      if (ep.post) onednn::set_post_ops(attr, *ep.post);
      // The bias broadcasts over every dim but the last.
      const dnnl::memory::desc bmd_bias =
          three_d ? dnnl::memory::desc({1, 1, mc.cols}, d, onednn::tag::abc)
                  : dnnl::memory::desc({1, mc.cols}, d, onednn::tag::ab);
      auto desc =
          bias ? dnnl::matmul::desc(amd, bmd, bmd_bias, cmd) : dnnl::matmul::desc(amd, bmd, cmd);
      dnnl::matmul::primitive_desc pd(desc, attr, onednn::engine());
      std::vector<onednn::ArgSpec> args{{DNNL_ARG_SRC, amd}, {DNNL_ARG_WEIGHTS, bmd}};
      if (bias) args.push_back({DNNL_ARG_BIAS, bmd_bias});
      args.push_back({DNNL_ARG_DST, cmd, true, res});
      return std::make_shared<onednn::Compiled>(dnnl::matmul(pd), pd, std::move(args));
    } catch (const dnnl::error& e) {
      if (e.status == dnnl_unimplemented) return nullptr;  // the caller falls back
      onednn::throw_dnnl_error("dnnl::matmul::primitive_desc", int(e.status), e.what(), __FILE__,
                               __LINE__, "check the operand shapes and strides");
    }
  });
  if (!prim) return false;
  if (bias)
    prim->run({a.data_ptr(), b.data_ptr(), ep.bias, c.data_ptr()}, ep.residual);
  else
    prim->run({a.data_ptr(), b.data_ptr(), c.data_ptr()}, ep.residual);
  return true;
}

// float64: C[b] = A[b] @ B[b] on contiguous broadcast copies; i-k-j order so the inner loop is a
// contiguous axpy the compiler vectorises.
void matmul_f64(const Tensor& a, const Tensor& b, Tensor& c, const Shape& out_batch) {
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  Shape as = out_batch, bs = out_batch;
  as.insert(as.end(), {M, K});
  bs.insert(bs.end(), {K, N});
  Tensor A = dense(a.expand(as)), B = dense(b.expand(bs));
  const double *pa = A.data<double>(), *pb = B.data<double>();
  double* pc = c.data<double>();
  const int64_t batch = shape_numel(out_batch);
  parallel_for(0, batch * M, std::max<int64_t>(1, 4096 / std::max<int64_t>(K * N, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const int64_t bi = r / M, i = r % M;
                   const double* arow = pa + (bi * M + i) * K;
                   const double* bmat = pb + bi * K * N;
                   double* crow = pc + (bi * M + i) * N;
                   std::fill(crow, crow + N, 0.0);
                   for (int64_t k = 0; k < K; ++k) {
                     const double av = arow[k];
                     const double* brow = bmat + k * N;
                     for (int64_t j = 0; j < N; ++j) crow[j] += av * brow[j];
                   }
                 }
               });
}

// Runs c = a @ b (+ the epilogue) for any operand layouts.
void matmul_into(ops::KernelContext& ctx, const Tensor& a, const Tensor& b, Tensor& c,
                 const Epilogue& ep, void (*self)(ops::KernelContext&)) {
  const Shape out_batch(c.shape().begin(), c.shape().end() - 2);
  Tensor A = a, B = b;
  Mat ma, mb;
  if (!describe(A, out_batch, ma)) {
    Shape s = out_batch;
    s.insert(s.end(), {a.size(-2), a.size(-1)});
    A = dense(a.expand(s));
    describe(A, out_batch, ma);
  }
  if (!describe(B, out_batch, mb)) {
    Shape s = out_batch;
    s.insert(s.end(), {b.size(-2), b.size(-1)});
    B = dense(b.expand(s));
    describe(B, out_batch, mb);
  }
  // A broadcast left operand against a batched right one: materialise it (oneDNN wants src batch
  // to match unless weights broadcast).
  if (ma.batch == 1 && mb.batch > 1) {
    Shape s = out_batch;
    s.insert(s.end(), {a.size(-2), a.size(-1)});
    A = dense(a.expand(s));
    describe(A, out_batch, ma);
  }
  if (dnnl_matmul(A, B, c, ma, mb, ep)) return;
  run_via_f32(ctx, self);  // float16 without hardware support
}

void matmul_kernel(ops::KernelContext& ctx) {
  const Tensor &a = ctx.inputs[0], &b = ctx.inputs[1];
  Tensor& c = ctx.outputs[0];
  const Shape out_batch(c.shape().begin(), c.shape().end() - 2);
  if (c.numel() == 0) return;
  if (a.size(-1) == 0) {  // empty inner dim: a sum of nothing
    std::memset(c.data_ptr(), 0, c.nbytes());
    return;
  }
  if (c.dtype() == kFloat64) return matmul_f64(a, b, c, out_batch);
  matmul_into(ctx, a, b, c, {}, matmul_kernel);
}

// act(a @ b + bias + residual) for (a, b[, bias (N)][, residual like c]), attr act; `self` is the
// calling kernel (float16 without hardware support runs it again on float32 copies).
void matmul_post(ops::KernelContext& ctx, bool has_bias, bool has_res,
                 void (*self)(ops::KernelContext&)) {
  const Tensor &a = ctx.inputs[0], &b = ctx.inputs[1];
  Tensor bias = has_bias ? dense(ctx.inputs[2]) : Tensor();
  Tensor res = has_res ? dense(ctx.inputs[has_bias ? 3 : 2]) : Tensor();
  Tensor& c = ctx.outputs[0];
  if (c.numel() == 0) return;
  const Shape out_batch(c.shape().begin(), c.shape().end() - 2);
  if (c.dtype() == kFloat64 || a.size(-1) == 0) {  // plain product, then the epilogue per element
    if (c.dtype() != kFloat64 && c.dtype() != kFloat32) return run_via_f32(ctx, self);
    if (a.size(-1) == 0)
      std::memset(c.data_ptr(), 0, c.nbytes());
    else
      matmul_f64(a, b, c, out_batch);
    auto epilogue = [&](auto* cp) {
      using T = std::remove_pointer_t<decltype(cp)>;
      const T* bp = has_bias ? static_cast<const T*>(bias.data_ptr()) : nullptr;
      const T* rp = has_res ? static_cast<const T*>(res.data_ptr()) : nullptr;
      const int64_t N = c.size(-1);
      const onednn::Activation activation = onednn::activation_of(ctx.attrs);
      for (int64_t i = 0; i < c.numel(); ++i) {
        double v = double(cp[i]) + (bp ? double(bp[i % N]) : 0.0) + (rp ? double(rp[i]) : 0.0);
        cp[i] = T(activation(v));
      }
    };
    if (c.dtype() == kFloat64)
      epilogue(c.data<double>());
    else
      epilogue(c.data<float>());
    return;
  }
  Epilogue ep{&ctx.attrs, has_bias ? bias.data_ptr() : nullptr, has_res ? res.data_ptr() : nullptr};
  matmul_into(ctx, a, b, c, ep, self);
}

// MatmulFused (this backend's oneDNN post-op fusion): (a, b[, bias (N)][, residual like c]).
void matmul_fused_kernel(ops::KernelContext& ctx) {
  matmul_post(ctx, ctx.attrs.get_bool("has_bias", false), ctx.attrs.get_bool("has_residual", false),
              matmul_fused_kernel);
}

// MatmulEpilogue (the accelerators' fused op, graph/passes/matmul_epilogue.cpp: what the test
// device runs, and the reference of their kernels): (a, b (K, N), bias (N)) -> act(a @ b + bias).
void matmul_epilogue_kernel(ops::KernelContext& ctx) {
  matmul_post(ctx, true, false, matmul_epilogue_kernel);
}

}  // namespace

SPORE_KERNEL(CPU, Matmul, matmul_kernel, kFloat32, kFloat64, kBFloat16, kFloat16);
SPORE_CPU_KERNEL(MatmulFused, matmul_fused_kernel, kFloat32, kFloat64, kBFloat16, kFloat16);
SPORE_KERNEL(CPU, MatmulEpilogue, matmul_epilogue_kernel, kFloat32, kFloat64, kBFloat16, kFloat16);

}  // namespace spore::cpu
