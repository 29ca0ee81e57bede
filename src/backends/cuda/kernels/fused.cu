// FusedElementwise on the GPU: an interpreter of the program Graph mode's elementwise fusion
// writes (ops/fused_program.h), so fused nodes run on the GPU from the start. One thread per output
// element loads its inputs (each broadcast to the output shape through its own strides), runs the
// instructions over a small register file (float32 for float32/float16/bfloat16, float64 for
// float64; bools as 0 / 1) with the formulas of the CPU interpreter's scalar path
// (backends/cpu/kernels/fused_elementwise.cpp), and stores the last value. The decoded program,
// input pointers and strides travel to the device in one block per call. kCall instructions (ops
// that bring CPU row kernels) are not supported here. With SPORE_CUDA_FUSED=nvrtc the node runs a
// kernel generated for its program instead (fused_generated.cpp), where one can be generated; the
// interpreter is the default, the fallback and the reference.
#include <vector>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/fused_generated.h"
#include "ops/fused_program.h"

namespace spore::cuda {
namespace {
using ops::fused::Opcode;
namespace fz = ops::fused;

struct Instr {
  int32_t op = 0, a = 0, b = 0, c = 0;
  double p0 = 0, p1 = 0;
  int32_t has0 = 0, has1 = 0;
};

struct Program {
  int nin = 0, ni = 0, nd = 0;
  int64_t size[kWalkDims] = {};
  Instr instr[fz::kMaxInstructions];
  const void* in[fz::kMaxInputs] = {};
  int32_t in_bool[fz::kMaxInputs] = {};
  int64_t stride[fz::kMaxInputs][kWalkDims] = {};
};
static_assert(sizeof(Program) <= 32764,
              "a kernel parameter holds at most 32764 bytes (CUDA 12.1+)");

template <class C>
__device__ C unary(const Instr& I, C x) {
  switch (Opcode(I.op)) {
    case Opcode::kNeg:
      return -x;
    case Opcode::kAbs:
      return fabs(x);
    case Opcode::kExp:
      return exp(x);
    case Opcode::kLog:
      return log(x);
    case Opcode::kSqrt:
      return sqrt(x);
    case Opcode::kRsqrt:
      return C(1) / sqrt(x);
    case Opcode::kSin:
      return sin(x);
    case Opcode::kCos:
      return cos(x);
    case Opcode::kTanh:
      return tanh(x);
    case Opcode::kSigmoid:
      return C(1) / (C(1) + exp(-x));
    case Opcode::kRelu:
      return x < C(0) ? C(0) : x;
    case Opcode::kLeakyRelu:
      return x < C(0) ? C(x * C(I.p0)) : x;
    case Opcode::kSilu:
      return x / (C(1) + exp(-x));
    case Opcode::kGeluErf:
      return C(0.5) * x * (C(1) + erf(x * C(0.70710678118654752440)));
    case Opcode::kGeluTanh: {
      const C u = C(0.79788456080286535588) * (x + C(0.044715) * x * x * x);
      return C(0.5) * x * (C(1) + tanh(u));
    }
    case Opcode::kSoftplus: {
      const C bx = C(I.p0) * x;
      return bx > C(I.p1) ? x : C(log1p(exp(bx)) / C(I.p0));
    }
    case Opcode::kClamp:
      if (I.has0 && double(x) < I.p0) x = C(I.p0);
      if (I.has1 && double(x) > I.p1) x = C(I.p1);
      return x;
    case Opcode::kFloor:
      return floor(x);
    case Opcode::kCeil:
      return ceil(x);
    case Opcode::kRound:
      return rint(x);  // half to even
    case Opcode::kSign:
      return x > C(0) ? C(1) : x < C(0) ? C(-1) : x;
    case Opcode::kErf:
      return erf(x);
    case Opcode::kLogicalNot:
      return C(x == C(0));
    case Opcode::kBoolToFloat:
      return x;
    default:
      return C(NAN);
  }
}

template <class C>
__device__ C binary(Opcode op, C a, C b) {
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
      return pow(a, b);
    case Opcode::kMax:
      return (a > b || a != a) ? a : b;
    case Opcode::kMin:
      return (a < b || a != a) ? a : b;
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
      return C(NAN);
  }
}

// R: the register file's size (inputs + instructions), a compile-time bound. The program is a
// kernel parameter (~19 KB: CUDA 12.1 allows 32 KB), read through the constant cache; so a launch
// needs no copy, and a captured launch (a CUDA graph) keeps its own program.
template <class T, class C, int R>
__global__ void fused_kernel(T* out, const __grid_constant__ Program P, int64_t n) {
  C v[R];
  const int nin = P.nin, ni = P.ni, nd = P.nd;
  SPORE_GRID_LOOP(i, n) {
    for (int k = 0; k < nin; ++k) {
      int64_t off = 0, q = i;
      for (int d = nd - 1; d >= 0; --d) {
        off += (q % P.size[d]) * P.stride[k][d];
        q /= P.size[d];
      }
      v[k] = P.in_bool[k] ? C(static_cast<const bool*>(P.in[k])[off] ? 1 : 0)
                          : cvt<C>(static_cast<const T*>(P.in[k])[off]);
    }
    for (int k = 0; k < ni; ++k) {
      const Instr& I = P.instr[k];
      const Opcode op = Opcode(I.op);
      C r;
      if (op == Opcode::kConst)
        r = C(I.p0);
      else if (op == Opcode::kWhere)
        r = v[I.a] != C(0) ? v[I.b] : v[I.c];
      else if (I.op >= int32_t(Opcode::kNeg) && I.op <= int32_t(Opcode::kLastUnary))
        r = unary<C>(I, v[I.a]);
      else
        r = binary<C>(op, v[I.a], v[I.b]);
      v[nin + k] = r;
    }
    out[i] = cvt<T>(v[nin + ni - 1]);
  }
}

void fused_elementwise(ops::KernelContext& ctx) {
  if (fused_generated(ctx)) return;
  Tensor& out = ctx.outputs[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  const std::vector<int64_t>& prog = ctx.attrs.get_ints("program");
  const std::vector<int64_t>& consts = ctx.attrs.get_ints("consts");
  auto P = std::make_unique<Program>();
  P->nin = int(ctx.inputs.size());
  P->ni = int(prog.size()) / fz::kInstrWidth;
  SPORE_CHECK(P->nin <= fz::kMaxInputs && P->ni <= fz::kMaxInstructions && P->ni > 0,
              "[GPU] fused_elementwise: ", P->nin, " inputs and ", P->ni,
              " instructions exceed the kernel's tables");
  for (int k = 0; k < P->ni; ++k) {
    const int64_t* p = prog.data() + k * fz::kInstrWidth;
    Instr& I = P->instr[k];
    I.op = int32_t(p[0]);
    I.a = int32_t(p[1]);
    I.b = int32_t(p[2]);
    I.c = int32_t(p[3]);
    const Opcode op = Opcode(p[0]);
    SPORE_CHECK(op != Opcode::kCall, "[GPU] fused_elementwise: the program calls op ", p[3],
                "'s CPU row kernels (kCall), which the GPU interpreter cannot run");
    if (op == Opcode::kConst) {
      I.p0 = fz::decode_double(consts[size_t(p[1])]);
    } else if (fz::is_unary(op)) {
      if ((I.has0 = p[2] >= 0)) I.p0 = fz::decode_double(consts[size_t(p[2])]);
      if ((I.has1 = p[3] >= 0)) I.p1 = fz::decode_double(consts[size_t(p[3])]);
    }
  }
  // Inputs broadcast (numpy) to the output shape, read through their strides.
  const Shape& shape = out.shape();
  SPORE_CHECK(shape.size() <= size_t(kWalkDims), "[GPU] fused_elementwise: at most ", kWalkDims,
              " dims");
  P->nd = int(shape.size());
  for (int d = 0; d < P->nd; ++d) P->size[d] = shape[size_t(d)];
  for (int k = 0; k < P->nin; ++k) {
    const Tensor& t = ctx.inputs[size_t(k)];
    SPORE_CHECK(t.dtype() == out.dtype() || t.dtype() == kBool, "[GPU] fused_elementwise: input ",
                k, " is ", dtype_name(t.dtype()), ", the output ", dtype_name(out.dtype()));
    P->in[k] = t.data_ptr();
    P->in_bool[k] = t.dtype() == kBool;
    const int lead = P->nd - int(t.dim());
    for (int64_t d = 0; d < t.dim(); ++d)
      P->stride[k][lead + d] = t.size(d) == 1 ? 0 : t.strides()[size_t(d)];
  }
  const Launch1d l = launch_1d(n);
  const bool small = P->nin + P->ni <= 32;
  auto run = [&](auto tag, auto ctag) {
    using T = decltype(tag);
    using C = decltype(ctag);
    if (small)
      fused_kernel<T, C, 32><<<l.blocks, l.threads, 0, stream_of(ctx)>>>(data_of<T>(out), *P, n);
    else
      fused_kernel<T, C, fz::kMaxInputs + fz::kMaxInstructions>
          <<<l.blocks, l.threads, 0, stream_of(ctx)>>>(data_of<T>(out), *P, n);
  };
  switch (out.dtype()) {
    case kFloat32:
      run(float{}, float{});
      break;
    case kFloat64:
      run(double{}, double{});
      break;
    case kFloat16:
      run(__half{}, float{});
      break;
    case kBFloat16:
      run(__nv_bfloat16{}, float{});
      break;
    default:
      SPORE_THROW(ErrorKind::TypeError, "[GPU] fused_elementwise: output dtype ",
                  dtype_name(out.dtype()));
  }
  SPORE_CUDA_CHECK_LAUNCH();
}

}  // namespace

// Keyed on input 0's dtype: a float of the output dtype, or a bool (a condition).
SPORE_KERNEL(GPU, FusedElementwise, fused_elementwise, kFloat32, kFloat64, kFloat16, kBFloat16,
             kBool);

}  // namespace spore::cuda
