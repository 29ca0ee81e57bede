// CPU kernel of FusedElementwise (program format: ops/fused_program.h). One pass over the
// contiguous output in blocks sized so that the block's live registers fit in L1; each input is
// read once per block (same-shape contiguous inputs in place, broadcast / strided / narrow ones
// gathered into a register), then the program runs instruction by instruction over the block:
// float32 through the elementwise kernels' Highway entry points (so fused results equal unfused
// ones bit for bit where those use SIMD) plus the comparisons / where below; float64 in scalar
// loops. Values that depend only on scalar inputs and constants are computed once per call; a
// per-channel input ((C, 1, 1) over (N, C, H, W)) is read as one value per block when the blocks
// are cut to lie inside its broadcast runs (H * W >= 256).
// Blocks run in parallel; the only per-call memory is a thread-local scratch that grows once.
// In-place safe (the planner may give the output an input's buffer): a block reads all of its
// inputs' elements before, or in the same SIMD step as, it writes the same output elements.
// foreach_target.h must come first: it re-includes this file once per target.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/fused_elementwise.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/kernels/elementwise.h"
#include "backends/cpu/kernels/simd_loops-inl.h"
#include "ops/fused_program.h"

#ifndef SPORE_FUSED_EW_KINDS
#define SPORE_FUSED_EW_KINDS
namespace spore::cpu::fused_ew {
// Comparison / logical kinds of CompareF32 (results 1.0f / 0.0f).
enum CmpKind : int { kEq, kNe, kLt, kLe, kGt, kGe, kAnd, kOr, kXor };
}  // namespace spore::cpu::fused_ew
#endif

HWY_BEFORE_NAMESPACE();
namespace spore::cpu::fused_ew {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

using simd::HWY_NAMESPACE::binary_loop;

template <int K>
HWY_INLINE void compare_loop(const float* a, int64_t sa, const float* b, int64_t sb, float* out,
                             int64_t n) {
  binary_loop(a, sa, b, sb, out, n, [](D d, V x, V y) {
    const V one = hn::Set(d, 1.0f), zero = hn::Zero(d);
    if constexpr (K == kEq) return hn::IfThenElseZero(hn::Eq(x, y), one);
    if constexpr (K == kNe) return hn::IfThenZeroElse(hn::Eq(x, y), one);  // NaN != NaN
    if constexpr (K == kLt) return hn::IfThenElseZero(hn::Lt(x, y), one);
    if constexpr (K == kLe) return hn::IfThenElseZero(hn::Le(x, y), one);
    if constexpr (K == kGt) return hn::IfThenElseZero(hn::Gt(x, y), one);
    if constexpr (K == kGe) return hn::IfThenElseZero(hn::Ge(x, y), one);
    if constexpr (K == kAnd)
      return hn::IfThenElseZero(hn::And(hn::Ne(x, zero), hn::Ne(y, zero)), one);
    if constexpr (K == kOr)
      return hn::IfThenElseZero(hn::Or(hn::Ne(x, zero), hn::Ne(y, zero)), one);
    if constexpr (K == kXor)
      return hn::IfThenElseZero(hn::Xor(hn::Ne(x, zero), hn::Ne(y, zero)), one);
  });
}

HWY_NOINLINE void CompareF32(int kind, const float* a, int64_t sa, const float* b, int64_t sb,
                             float* out, int64_t n) {
  switch (kind) {
    case kEq:
      return compare_loop<kEq>(a, sa, b, sb, out, n);
    case kNe:
      return compare_loop<kNe>(a, sa, b, sb, out, n);
    case kLt:
      return compare_loop<kLt>(a, sa, b, sb, out, n);
    case kLe:
      return compare_loop<kLe>(a, sa, b, sb, out, n);
    case kGt:
      return compare_loop<kGt>(a, sa, b, sb, out, n);
    case kGe:
      return compare_loop<kGe>(a, sa, b, sb, out, n);
    case kAnd:
      return compare_loop<kAnd>(a, sa, b, sb, out, n);
    case kOr:
      return compare_loop<kOr>(a, sa, b, sb, out, n);
    default:
      return compare_loop<kXor>(a, sa, b, sb, out, n);
  }
}

// out[i] = c[i * sc] != 0 ? x[i * sx] : y[i * sy], strides in {0, 1}.
HWY_NOINLINE void WhereF32(const float* c, int64_t sc, const float* x, int64_t sx, const float* y,
                           int64_t sy, float* out, int64_t n) {
  const D d;
  const int64_t L = int64_t(hn::Lanes(d));
  const V vc = hn::Set(d, c[0]), vx = hn::Set(d, x[0]), vy = hn::Set(d, y[0]), zero = hn::Zero(d);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const V m = sc ? hn::LoadU(d, c + i) : vc;
    hn::StoreU(hn::IfThenElse(hn::Ne(m, zero), sx ? hn::LoadU(d, x + i) : vx,
                              sy ? hn::LoadU(d, y + i) : vy),
               d, out + i);
  }
  for (; i < n; ++i) out[i] = c[i * sc] != 0.0f ? x[i * sx] : y[i * sy];
}

}  // namespace HWY_NAMESPACE
}  // namespace spore::cpu::fused_ew
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace spore::cpu::fused_ew {
HWY_EXPORT(CompareF32);
HWY_EXPORT(WhereF32);

namespace {
using ops::fused::Opcode;
namespace fz = ops::fused;

void compare_f32(int kind, const float* a, int64_t sa, const float* b, int64_t sb, float* out,
                 int64_t n) {
  HWY_DYNAMIC_DISPATCH(CompareF32)(kind, a, sa, b, sb, out, n);
}
void where_f32(const float* c, int64_t sc, const float* x, int64_t sx, const float* y, int64_t sy,
               float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(WhereF32)(c, sc, x, sx, y, sy, out, n);
}

// One decoded instruction (the program format is ops/fused_program.h).
struct Instr {
  Opcode op;
  int32_t a = 0, b = 0, c = 0;
  double p0 = 0, p1 = 0;  // the op's parameters (const: its value)
  bool has0 = false, has1 = false;
  const ops::RowKernels* rows = nullptr;  // kCall: the called op's row kernels
};

// ---- scalar definitions (float64, and float32 ops without a SIMD path); the same formulas as
// the unfused kernels' functors in elementwise_unary.cpp / elementwise_binary.cpp ----
template <class C>
C unary_scalar(const Instr& I, C x) {
  switch (I.op) {
    case Opcode::kNeg:
      return -x;
    case Opcode::kAbs:
      return std::fabs(x);
    case Opcode::kExp:
      return std::exp(x);
    case Opcode::kLog:
      return std::log(x);
    case Opcode::kSqrt:
      return std::sqrt(x);
    case Opcode::kRsqrt:
      return C(1) / std::sqrt(x);
    case Opcode::kSin:
      return std::sin(x);
    case Opcode::kCos:
      return std::cos(x);
    case Opcode::kTanh:
      return std::tanh(x);
    case Opcode::kSigmoid:
      return C(1) / (C(1) + std::exp(-x));
    case Opcode::kRelu:
      return x < C(0) ? C(0) : x;
    case Opcode::kLeakyRelu:
      return x < C(0) ? C(x * C(I.p0)) : x;
    case Opcode::kSilu:
      return x / (C(1) + std::exp(-x));
    case Opcode::kGeluErf:
      return C(0.5) * x * (C(1) + std::erf(x * C(0.70710678118654752440)));
    case Opcode::kGeluTanh: {
      const C u = C(0.79788456080286535588) * (x + C(0.044715) * x * x * x);
      return C(0.5) * x * (C(1) + std::tanh(u));
    }
    case Opcode::kSoftplus: {
      const C bx = C(I.p0) * x;
      return bx > C(I.p1) ? x : C(std::log1p(std::exp(bx)) / C(I.p0));
    }
    case Opcode::kClamp:
      if (I.has0 && double(x) < I.p0) x = C(I.p0);
      if (I.has1 && double(x) > I.p1) x = C(I.p1);
      return x;
    case Opcode::kFloor:
      return std::floor(x);
    case Opcode::kCeil:
      return std::ceil(x);
    case Opcode::kRound:
      return std::nearbyint(x);
    case Opcode::kSign:
      return x > C(0) ? C(1) : x < C(0) ? C(-1) : x;
    case Opcode::kErf:
      return std::erf(x);
    case Opcode::kLogicalNot:
      return C(x == C(0));
    case Opcode::kBoolToFloat:
      return x;
    default:
      break;
  }
  SPORE_ASSERT(false, "fused_elementwise: opcode ", int64_t(I.op), " is not unary");
  return x;
}

template <class C>
C binary_scalar(Opcode op, C a, C b) {
  switch (op) {
    case Opcode::kAdd:
      return a + b;
    case Opcode::kSub:
      return a - b;
    case Opcode::kMul:
      return a * b;
    case Opcode::kDiv:
      return a / b;
    case Opcode::kPow:
      return std::pow(a, b);
    case Opcode::kMax:
      return (a > b || std::isnan(a)) ? a : b;
    case Opcode::kMin:
      return (a < b || std::isnan(a)) ? a : b;
    case Opcode::kReluGrad:
      return b > C(0) ? a : C(0);
    case Opcode::kEqual:
      return C(a == b);
    case Opcode::kNotEqual:
      return C(a != b);
    case Opcode::kLess:
      return C(a < b);
    case Opcode::kLessEqual:
      return C(a <= b);
    case Opcode::kGreater:
      return C(a > b);
    case Opcode::kGreaterEqual:
      return C(a >= b);
    case Opcode::kLogicalAnd:
      return C((a != C(0)) && (b != C(0)));
    case Opcode::kLogicalOr:
      return C((a != C(0)) || (b != C(0)));
    case Opcode::kLogicalXor:
      return C((a != C(0)) != (b != C(0)));
    default:
      break;
  }
  SPORE_ASSERT(false, "fused_elementwise: opcode ", int64_t(op), " is not binary");
  return a;
}

ew::SimdUnary simd_unary(Opcode op) {
  using S = ew::SimdUnary;
  switch (op) {
    case Opcode::kNeg:
      return S::kNeg;
    case Opcode::kAbs:
      return S::kAbs;
    case Opcode::kExp:
      return S::kExp;
    case Opcode::kLog:
      return S::kLog;
    case Opcode::kSqrt:
      return S::kSqrt;
    case Opcode::kRsqrt:
      return S::kRsqrt;
    case Opcode::kSin:
      return S::kSin;
    case Opcode::kCos:
      return S::kCos;
    case Opcode::kTanh:
      return S::kTanh;
    case Opcode::kSigmoid:
      return S::kSigmoid;
    case Opcode::kRelu:
      return S::kRelu;
    case Opcode::kLeakyRelu:
      return S::kLeakyRelu;
    case Opcode::kSilu:
      return S::kSilu;
    case Opcode::kGeluTanh:
      return S::kGeluTanh;
    case Opcode::kClamp:
      return S::kClamp;
    case Opcode::kFloor:
      return S::kFloor;
    case Opcode::kCeil:
      return S::kCeil;
    case Opcode::kRound:
      return S::kRound;
    case Opcode::kSign:
      return S::kSign;
    default:
      return S::kNone;
  }
}
ew::SimdBinary simd_binary(Opcode op) {
  using S = ew::SimdBinary;
  switch (op) {
    case Opcode::kAdd:
      return S::kAdd;
    case Opcode::kSub:
      return S::kSub;
    case Opcode::kMul:
      return S::kMul;
    case Opcode::kDiv:
      return S::kDiv;
    case Opcode::kMax:
      return S::kMax;
    case Opcode::kMin:
      return S::kMin;
    case Opcode::kReluGrad:
      return S::kReluGrad;
    default:
      return S::kNone;
  }
}
int compare_kind(Opcode op) {
  switch (op) {
    case Opcode::kEqual:
      return kEq;
    case Opcode::kNotEqual:
      return kNe;
    case Opcode::kLess:
      return kLt;
    case Opcode::kLessEqual:
      return kLe;
    case Opcode::kGreater:
      return kGt;
    case Opcode::kGreaterEqual:
      return kGe;
    case Opcode::kLogicalAnd:
      return kAnd;
    case Opcode::kLogicalOr:
      return kOr;
    case Opcode::kLogicalXor:
      return kXor;
    default:
      return -1;
  }
}

// dst[0..n) = instruction I over its operands' registers (pointer + stride 0 or 1). dst may be
// one of the operands' registers (same element read, then written).
template <class C>
void exec(const Instr& I, const C* const* rp, const int64_t* rs, C* dst, int64_t n) {
  const C* a = rp[I.a];
  const int64_t sa = rs[I.a];
  if (I.op == Opcode::kCall) {  // a registered pointwise op: its row kernel
    const C* b = I.b >= 0 ? rp[I.b] : nullptr;
    const int64_t sb = I.b >= 0 ? rs[I.b] : 0;
    if constexpr (std::is_same_v<C, float>)
      return I.rows->f32(a, sa, b, sb, dst, n);
    else
      return I.rows->f64(a, sa, b, sb, dst, n);
  }
  if (fz::is_unary(I.op)) {
    if constexpr (std::is_same_v<C, float>) {
      const ew::SimdUnary k = simd_unary(I.op);
      if (k != ew::SimdUnary::kNone && sa == 1) {
        ew::UnaryParams p{float(I.p0), float(I.p1)};
        if (I.op == Opcode::kClamp) {
          constexpr float inf = std::numeric_limits<float>::infinity();
          p = {I.has0 ? float(I.p0) : -inf, I.has1 ? float(I.p1) : inf};
        }
        return ew::simd_unary_f32(k, a, dst, n, p);
      }
      if (I.op == Opcode::kLogicalNot) {
        const float zero = 0;
        return compare_f32(kEq, a, sa, &zero, 0, dst, n);
      }
    }
    if (I.op == Opcode::kBoolToFloat && sa == 1) {
      if (dst != a) std::memcpy(dst, a, size_t(n) * sizeof(C));
      return;
    }
    for (int64_t i = 0; i < n; ++i) dst[i] = unary_scalar(I, a[i * sa]);
    return;
  }
  const C* b = rp[I.b];
  const int64_t sb = rs[I.b];
  if (fz::is_binary(I.op)) {
    if constexpr (std::is_same_v<C, float>) {
      const ew::SimdBinary k = simd_binary(I.op);
      if (k != ew::SimdBinary::kNone) return ew::simd_binary_f32(k, a, sa, b, sb, dst, n);
      const int ck = compare_kind(I.op);
      if (ck >= 0) return compare_f32(ck, a, sa, b, sb, dst, n);
    }
    for (int64_t i = 0; i < n; ++i) dst[i] = binary_scalar(I.op, a[i * sa], b[i * sb]);
    return;
  }
  SPORE_ASSERT(I.op == Opcode::kWhere, "fused_elementwise: bad opcode ", int64_t(I.op));
  const C* c = rp[I.c];
  const int64_t sc = rs[I.c];
  if constexpr (std::is_same_v<C, float>) {
    return where_f32(a, sa, b, sb, c, sc, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = a[i * sa] != C(0) ? b[i * sb] : c[i * sc];
  }
}

// How one input is read: in place (same shape, contiguous, compute dtype), as a scalar, as one
// value per block (a per-channel input whose broadcast runs hold whole blocks), or gathered per
// block over its broadcast strides (merged dims over the output shape).
struct InputView {
  enum Kind { kDirect, kScalar, kBlockUniform, kGather } kind = kGather;
  const char* base = nullptr;
  DType dtype = kFloat32;
  int ndim = 0;
  int64_t sizes[kMaxDims] = {}, strides[kMaxDims] = {};
};

template <class C, class Tin>
void gather_typed(const InputView& v, int64_t f, int64_t n, C* dst) {
  const Tin* src = reinterpret_cast<const Tin*>(v.base);
  const int nd = v.ndim;
  int64_t idx[kMaxDims], off = 0, r = f;
  for (int d = nd - 1; d >= 0; --d) {  // unravel the block's first element
    idx[d] = r % v.sizes[d];
    r /= v.sizes[d];
    off += idx[d] * v.strides[d];
  }
  const int64_t inner = v.sizes[nd - 1], st = v.strides[nd - 1];
  int64_t j = 0;
  while (j < n) {
    const int64_t len = std::min(inner - idx[nd - 1], n - j);
    if (st == 1) {
#pragma omp simd
      for (int64_t i = 0; i < len; ++i) dst[j + i] = C(src[off + i]);
    } else if (st == 0) {
      const C val = C(src[off]);
#pragma omp simd
      for (int64_t i = 0; i < len; ++i) dst[j + i] = val;
    } else {
      for (int64_t i = 0; i < len; ++i) dst[j + i] = C(src[off + i * st]);
    }
    j += len;
    idx[nd - 1] += len;
    off += len * st;
    if (idx[nd - 1] < inner) break;  // the block ended inside this row
    off -= inner * st;
    idx[nd - 1] = 0;
    for (int d = nd - 2; d >= 0; --d) {  // odometer carry
      off += v.strides[d];
      if (++idx[d] < v.sizes[d]) break;
      off -= idx[d] * v.strides[d];
      idx[d] = 0;
    }
  }
}

template <class C>
void gather(const InputView& v, int64_t f, int64_t n, C* dst) {
  switch (v.dtype) {
    case kFloat32:
      return gather_typed<C, float>(v, f, n, dst);
    case kFloat64:
      return gather_typed<C, double>(v, f, n, dst);
    case kFloat16:
      return gather_typed<C, Half>(v, f, n, dst);
    case kBFloat16:
      return gather_typed<C, BFloat16>(v, f, n, dst);
    case kBool:
      return gather_typed<C, bool>(v, f, n, dst);
    default:
      SPORE_ASSERT(false, "fused_elementwise: input dtype ", dtype_name(v.dtype));
  }
}

// Element offset (in the input) of output element f.
int64_t offset_of(const InputView& v, int64_t f) {
  int64_t off = 0;
  for (int d = v.ndim - 1; d >= 0; --d) {
    off += (f % v.sizes[d]) * v.strides[d];
    f /= v.sizes[d];
  }
  return off;
}

template <class C>
C read_scalar(const InputView& v, int64_t off = 0) {
  switch (v.dtype) {
    case kFloat32:
      return C(reinterpret_cast<const float*>(v.base)[off]);
    case kFloat64:
      return C(reinterpret_cast<const double*>(v.base)[off]);
    case kFloat16:
      return C(float(reinterpret_cast<const Half*>(v.base)[off]));
    case kBFloat16:
      return C(float(reinterpret_cast<const BFloat16*>(v.base)[off]));
    case kBool:
      return C(reinterpret_cast<const bool*>(v.base)[off]);
    default:
      SPORE_ASSERT(false, "fused_elementwise: input dtype ", dtype_name(v.dtype));
  }
  return C(0);
}

constexpr int kMaxValues = fz::kMaxInputs + fz::kMaxInstructions;
constexpr size_t kL1Budget = 32 << 10;  // bytes of block registers per thread

// ---- decoder: the program attributes -> instructions -----------------------------------------
struct Program {
  Instr instr[fz::kMaxInstructions];
  int nin = 0, ni = 0;
  int nv() const { return nin + ni; }  // values: inputs, then one per instruction
  int final_value() const { return nv() - 1; }
};

void decode(const ops::Attrs& attrs, int nin, Program& P) {
  const std::vector<int64_t>& prog = attrs.get_ints("program");
  const std::vector<int64_t>& consts = attrs.get_ints("consts");
  P.nin = nin;
  P.ni = int(prog.size()) / fz::kInstrWidth;
  for (int k = 0; k < P.ni; ++k) {
    const int64_t* p = prog.data() + k * fz::kInstrWidth;
    Instr& I = P.instr[k];
    I.op = Opcode(p[0]);
    I.a = int32_t(p[1]);
    I.b = int32_t(p[2]);
    I.c = int32_t(p[3]);
    if (I.op == Opcode::kConst) {
      I.p0 = fz::decode_double(consts[size_t(p[1])]);
    } else if (I.op == Opcode::kCall) {
      const ops::KernelEntry* k = ops::find_kernel(ops::OpId(p[3]), DeviceType::CPU);
      SPORE_ASSERT(k, "fused_elementwise: called op ", p[3], " has no CPU kernel");
      I.rows = &k->rows;
    } else if (fz::is_unary(I.op)) {
      if ((I.has0 = p[2] >= 0)) I.p0 = fz::decode_double(consts[size_t(p[2])]);
      if ((I.has1 = p[3] >= 0)) I.p1 = fz::decode_double(consts[size_t(p[3])]);
    }
  }
}

// The values instruction I reads (-1: none).
void operands(const Instr& I, int (&u)[3]) {
  u[0] = I.op == Opcode::kConst ? -1 : I.a;
  u[1] = fz::is_unary(I.op) || I.op == Opcode::kConst ? -1 : I.b;  // kCall: -1 when unary
  u[2] = I.op == Opcode::kWhere ? I.c : -1;
}

// ---- planner: how inputs are read, which values are computed once / per block / per element,
// the block registers and the block length ------------------------------------------------------
enum ValueKind : uint8_t {
  kStatic,    // depends on scalar inputs and constants only: computed once per call
  kPerBlock,  // one value per block
  kVector,    // a block register
};

template <class C>
struct Plan {
  InputView view[fz::kMaxInputs];
  uint8_t kind[kMaxValues];
  C sval[kMaxValues];     // kStatic values
  int vslot[kMaxValues];  // the block register of each register-held value (-1: none)
  int n_slots = 0;
  int64_t B = 64;  // block length (elements)
};

template <class C>
void derive_kinds(const Program& P, Plan<C>& L) {
  for (int i = 0; i < P.nin; ++i)
    L.kind[i] = L.view[i].kind == InputView::kScalar         ? kStatic
                : L.view[i].kind == InputView::kBlockUniform ? kPerBlock
                                                             : kVector;
  for (int k = 0; k < P.ni; ++k) {
    int u[3];
    operands(P.instr[k], u);
    uint8_t kd = kStatic;
    for (int j : u)
      if (j >= 0) kd = std::max(kd, L.kind[j]);
    L.kind[P.nin + k] = kd;
  }
}

// Register allocation over block buffers: gathered inputs live from the start, kVector results
// from their instruction, each until its last reader; with direct_out the final result goes
// straight to the output (the output is in the compute dtype).
template <class C>
void allocate_registers(const Program& P, Plan<C>& L, bool direct_out) {
  const int nv = P.nv();
  int last_use[kMaxValues];
  for (int v = 0; v < nv; ++v) last_use[v] = -1;
  for (int k = 0; k < P.ni; ++k) {
    int u[3];
    operands(P.instr[k], u);
    for (int j : u)
      if (j >= 0) last_use[j] = k;
  }
  int slot[kMaxValues];  // the register a value holds while live
  int free_slots[kMaxValues], n_free = 0, n_slots = 0;
  auto take = [&]() { return n_free > 0 ? free_slots[--n_free] : n_slots++; };
  for (int v = 0; v < nv; ++v) slot[v] = L.vslot[v] = -1;
  for (int i = 0; i < P.nin; ++i)
    if (L.view[i].kind == InputView::kGather && last_use[i] >= 0) L.vslot[i] = slot[i] = take();
  for (int k = 0; k < P.ni; ++k) {
    const int v = P.nin + k;
    if (L.kind[v] != kVector) continue;
    int u[3];
    operands(P.instr[k], u);
    for (int j : u) {
      if (j < 0 || slot[j] < 0 || last_use[j] != k) continue;
      free_slots[n_free++] = slot[j];  // the result may take it: same element read, then written
      slot[j] = -1;                    // released once even when read twice
    }
    if (v == P.final_value() && direct_out) continue;
    L.vslot[v] = slot[v] = take();
  }
  L.n_slots = n_slots;
}

template <class C>
Plan<C> plan(const Program& P, const ops::KernelContext& ctx, bool direct_out) {
  Plan<C> L;
  const Shape& oshape = ctx.outputs[0].shape();
  const Shape ostrides = contiguous_strides(oshape);
  for (int i = 0; i < P.nin; ++i) {
    const Tensor& x = ctx.inputs[size_t(i)];
    InputView& v = L.view[i];
    v.base = static_cast<const char*>(x.data_ptr());
    v.dtype = x.dtype();
    const auto it = make_iter<2>(oshape, {ostrides, broadcast_strides(x, oshape)});
    bool all_zero = true;
    for (int d = 0; d < it.ndim; ++d) all_zero = all_zero && it.strides[1][d] == 0;
    if (all_zero) {
      v.kind = InputView::kScalar;
      L.sval[i] = read_scalar<C>(v);
    } else if (it.ndim == 1 && it.strides[1][0] == 1 && x.dtype() == dtype_of_v<C>) {
      v.kind = InputView::kDirect;
    } else {
      v.kind = InputView::kGather;
      v.ndim = it.ndim;
      for (int d = 0; d < it.ndim; ++d) {
        v.sizes[d] = it.sizes[d];
        v.strides[d] = it.strides[1][d];
      }
    }
  }
  derive_kinds(P, L);
  // kStatic instructions run once here, on one element (stride 1: the blocks' SIMD paths).
  const C* rp0[kMaxValues];
  int64_t rs0[kMaxValues];
  for (int v = 0; v < P.nv(); ++v) {
    rp0[v] = &L.sval[v];
    rs0[v] = 1;
  }
  for (int k = 0; k < P.ni; ++k) {
    const Instr& I = P.instr[k];
    if (L.kind[P.nin + k] != kStatic) continue;
    if (I.op == Opcode::kConst)
      L.sval[P.nin + k] = C(I.p0);
    else
      exec<C>(I, rp0, rs0, &L.sval[P.nin + k], 1);
  }
  allocate_registers(P, L, direct_out);
  // Block length: a multiple of 64 elements, registers within the L1 budget...
  int64_t B = int64_t(kL1Budget / (size_t(std::max(L.n_slots, 1)) * sizeof(C)));
  B = std::clamp<int64_t>(B / 64 * 64, 64, 4096);
  // ...or the length R of a per-channel input's broadcast run (H * W for (C, 1, 1)), or a divisor
  // of it, when R >= 256: every block then lies inside one run and reads that input as one value.
  int64_t run_len = 0;
  for (int i = 0; i < P.nin; ++i) {
    const InputView& v = L.view[i];
    if (v.kind != InputView::kGather || v.strides[v.ndim - 1] != 0) continue;
    const int64_t r = v.sizes[v.ndim - 1];
    if (r >= 256 && (run_len == 0 || r < run_len)) run_len = r;
  }
  if (run_len > 0) {
    int64_t k = (run_len + B - 1) / B;  // the fewest pieces of at most B elements...
    while (k <= run_len / 256 && (run_len % k != 0 || run_len / k % 16 != 0))
      ++k;  // ...that divide R evenly into multiples of 16
    if (k <= run_len / 256) {
      B = run_len / k;
      for (int i = 0; i < P.nin; ++i) {
        InputView& v = L.view[i];
        if (v.kind == InputView::kGather && v.strides[v.ndim - 1] == 0 &&
            v.sizes[v.ndim - 1] % B == 0)
          v.kind = InputView::kBlockUniform;
      }
      derive_kinds(P, L);
      allocate_registers(P, L, direct_out);
    }
  }
  L.B = B;
  return L;
}

// ---- the block loop: T is the output's storage type, C the compute type (float, or double for
// float64)
// ------------------------------------------------------------------------------------------
template <class T, class C>
void run(ops::KernelContext& ctx) {
  Tensor& out = ctx.outputs[0];
  const int64_t N = out.numel();
  if (N == 0) return;
  constexpr bool kDirectOut = std::is_same_v<T, C>;
  Program P;
  decode(ctx.attrs, int(ctx.inputs.size()), P);
  const Plan<C> L = plan<C>(P, ctx, kDirectOut);
  const int nin = P.nin, nv = P.nv(), final_v = P.final_value();
  const int64_t B = L.B, nblocks = (N + B - 1) / B;
  T* dst = static_cast<T*>(out.data_ptr());

  parallel_for(0, nblocks, std::max<int64_t>(1, 32768 / B), [&](int64_t b0, int64_t b1) {
    thread_local std::vector<C> scratch;
    if (scratch.size() < size_t(L.n_slots * B)) scratch.resize(size_t(L.n_slots * B));
    C* regs = scratch.data();
    const C* rp[kMaxValues];
    int64_t rs[kMaxValues];
    C bval[kMaxValues];  // kPerBlock values of the current block
    for (int v = 0; v < nv; ++v) {
      rp[v] = L.kind[v] == kStatic ? &L.sval[v] : &bval[v];  // kVector ones are set per block
      rs[v] = 0;
    }
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t f = blk * B, n = std::min(B, N - f);
      for (int i = 0; i < nin; ++i) {
        const InputView& v = L.view[i];
        if (v.kind == InputView::kDirect) {
          rp[i] = reinterpret_cast<const C*>(v.base) + f;
          rs[i] = 1;
        } else if (v.kind == InputView::kBlockUniform) {
          bval[i] = read_scalar<C>(v, offset_of(v, f));
        } else if (v.kind == InputView::kGather && L.vslot[i] >= 0) {
          C* r = regs + L.vslot[i] * B;
          gather<C>(v, f, n, r);
          rp[i] = r;
          rs[i] = 1;
        }
      }
      for (int k = 0; k < P.ni; ++k) {
        const int v = nin + k;
        if (L.kind[v] == kStatic) continue;
        if (L.kind[v] == kPerBlock) {
          exec<C>(P.instr[k], rp, rs, &bval[v], 1);
          continue;
        }
        C* d;
        if constexpr (kDirectOut) {
          d = v == final_v ? reinterpret_cast<C*>(dst) + f : regs + L.vslot[v] * B;
        } else {
          d = regs + L.vslot[v] * B;
        }
        exec<C>(P.instr[k], rp, rs, d, n);
        rp[v] = d;
        rs[v] = 1;
      }
      if (L.kind[final_v] != kVector) {
        const T val = T(rp[final_v][0]);
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) dst[f + i] = val;
      } else if constexpr (!kDirectOut) {
        const C* r = rp[final_v];
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) dst[f + i] = T(r[i]);
      }
    }
  });
}

void fused_elementwise_kernel(ops::KernelContext& ctx) {
  switch (ctx.outputs[0].dtype()) {
    case kFloat32:
      return run<float, float>(ctx);
    case kFloat64:
      return run<double, double>(ctx);
    case kFloat16:
      return run<Half, float>(ctx);
    case kBFloat16:
      return run<BFloat16, float>(ctx);
    default:
      SPORE_ASSERT(false, "fused_elementwise: output dtype ", dtype_name(ctx.outputs[0].dtype()));
  }
}

}  // namespace

// The registry checks input 0's dtype: a float of the output dtype, or a bool (a condition).
SPORE_KERNEL(CPU, FusedElementwise, fused_elementwise_kernel, kFloat32, kFloat64, kFloat16,
             kBFloat16, kBool);

}  // namespace spore::cpu::fused_ew
#endif  // HWY_ONCE
