// CUDA C for fused elementwise programs (see fused_codegen.h). The source is built as text: a
// prelude of macros and conversion helpers (which differ between the device and the host target),
// spore_body() (the program, one statement per instruction), then the kernel for the layout's
// variant.
#include "backends/cuda/fused_codegen.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "ops/fused_program.h"
#include "spore/error.h"

namespace spore::cuda::fusedgen {
namespace {
using ops::fused::Opcode;
namespace fz = ops::fused;

// The kernel-parameter block stays under the classic 4 KiB limit of every architecture.
constexpr int kMaxArgWords = 4096 / 8;

bool valid_dtype(DType t) {
  return t == kFloat32 || t == kFloat64 || t == kFloat16 || t == kBFloat16;
}

// The C type and math-function suffix of the compute type: float32 for the half types.
struct Compute {
  const char* type;
  const char* fn;  // "f" for float: expf, ...
};
Compute compute_of(DType out) {
  return out == kFloat64 ? Compute{"double", ""} : Compute{"float", "f"};
}

// The storage type of a pointer to elements of dtype t.
const char* storage_of(DType t) {
  switch (t) {
    case kFloat32:
      return "float";
    case kFloat64:
      return "double";
    case kFloat16:
    case kBFloat16:
      return "unsigned short";
    default:
      return "unsigned char";  // bool
  }
}

// A double as an exact C++ literal (hex float for finite values, the bit pattern otherwise).
std::string literal(double v) {
  if (std::isfinite(v)) return fmt::format("{:a}", v);
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  return fmt::format("spore_as_f64(0x{:x}ULL)", bits);
}

// `(C)v`: a parameter rounded to the compute type, as the interpreters' C(I.p0).
std::string param(const Compute& c, double v) {
  return fmt::format("(({}){})", c.type, literal(v));
}

// One element of input k read from pointer expression p at index expression idx.
std::string load(DType t, const Compute& c, const std::string& p, const std::string& idx) {
  switch (t) {
    case kFloat16:
      return fmt::format("spore_h2f({}[{}])", p, idx);
    case kBFloat16:
      return fmt::format("spore_bf2f({}[{}])", p, idx);
    case kBool:
      return fmt::format("({}[{}] ? ({})1 : ({})0)", p, idx, c.type, c.type);
    default:
      return fmt::format("{}[{}]", p, idx);
  }
}

// The storage value of compute value v for the output dtype.
std::string to_storage(DType t, const std::string& v) {
  switch (t) {
    case kFloat16:
      return fmt::format("spore_f2h({})", v);
    case kBFloat16:
      return fmt::format("spore_f2bf({})", v);
    default:
      return v;
  }
}

const char* kPreludeIncludes = R"(#ifdef SPORE_HOST
#include <math.h>
#include <string.h>
#endif
)";

const char* kPreludeCommon = R"(#ifdef SPORE_HOST
#define SPORE_FN static inline
#define SPORE_KERNEL(name) extern "C" void name(const spore_args* spore_p)
#define SPORE_ARGS (*spore_p)
#define SPORE_LOOP(t, count) for (long long t = 0; t < (count); ++t)
SPORE_FN float spore_as_f32(unsigned int u) { float f; memcpy(&f, &u, 4); return f; }
SPORE_FN unsigned int spore_f32_bits(float f) { unsigned int u; memcpy(&u, &f, 4); return u; }
SPORE_FN double spore_as_f64(unsigned long long u) { double f; memcpy(&f, &u, 8); return f; }
#else
#define SPORE_FN static __device__ __forceinline__
#define SPORE_KERNEL(name) \
  extern "C" __global__ void __launch_bounds__(256) name(const spore_args spore_p)
#define SPORE_ARGS spore_p
#define SPORE_LOOP(t, count)                                                     \
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < (count); \
       t += (long long)gridDim.x * blockDim.x)
SPORE_FN float spore_as_f32(unsigned int u) { return __uint_as_float(u); }
SPORE_FN unsigned int spore_f32_bits(float f) { return __float_as_uint(f); }
SPORE_FN double spore_as_f64(unsigned long long u) { return __longlong_as_double((long long)u); }
#endif
// 16 bytes, for the contiguous variant's vector loads and stores.
struct alignas(16) spore_v16 { unsigned long long w[2]; };
)";

// float16 <-> float32: the PTX conversions on the device (round to nearest even), the same
// rounding in integer / float arithmetic on the host.
const char* kPreludeHalf = R"(#ifdef SPORE_HOST
SPORE_FN float spore_h2f(unsigned short h) {
  const unsigned int s = (unsigned int)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return spore_as_f32(s | 0x7f800000u | (m << 13));
  if (e == 0u) return (s ? -1.0f : 1.0f) * (float)m * 5.9604644775390625e-8f;  /* m * 2^-24 */
  return spore_as_f32(s | ((e + 112u) << 23) | (m << 13));
}
SPORE_FN unsigned short spore_f2h(float f) {
  const unsigned int u = spore_f32_bits(f), s = (u >> 16) & 0x8000u;
  unsigned int a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned short)(s | 0x7e00u);   /* NaN */
  if (a >= 0x477ff000u) return (unsigned short)(s | 0x7c00u);  /* rounds to inf */
  if (a >= 0x38800000u) {                                      /* a normal half */
    a += 0xfffu + ((a >> 13) & 1u);
    return (unsigned short)(s | ((a - 0x38000000u) >> 13));
  }
  /* a subnormal half (or zero): |f| * 2^24 is exact; rintf rounds it to nearest even */
  return (unsigned short)(s | (unsigned int)rintf(spore_as_f32(a) * 16777216.0f));
}
#else
SPORE_FN float spore_h2f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
SPORE_FN unsigned short spore_f2h(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
#endif
)";

// bfloat16 <-> float32 (round to nearest even, NaN kept quiet): integer arithmetic on both.
const char* kPreludeBf16 =
    R"(SPORE_FN float spore_bf2f(unsigned short h) { return spore_as_f32((unsigned int)h << 16); }
SPORE_FN unsigned short spore_f2bf(float f) {
  const unsigned int u = spore_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
)";

// The statement computing value `v` of instruction (op, a, b, c); parameters from consts.
std::string instruction(const Compute& C, int v, const int64_t* ins,
                        const std::vector<int64_t>& consts) {
  const Opcode op = Opcode(ins[0]);
  const std::string T = C.type, f = C.fn;
  auto val = [](int64_t k) { return fmt::format("v{}", k); };
  auto cst = [&](int64_t k) { return fz::decode_double(consts[size_t(k)]); };
  const std::string x = val(ins[1]), y = op == Opcode::kConst ? "" : val(ins[2]);
  const std::string one = "(" + T + ")1", zero = "(" + T + ")0";
  std::string e;  // the value's expression
  switch (op) {
    case Opcode::kConst:
      e = param(C, cst(ins[1]));
      break;
    case Opcode::kNeg:
      e = "-" + x;
      break;
    case Opcode::kAbs:
      e = fmt::format("fabs{}({})", f, x);
      break;
    case Opcode::kExp:
      e = fmt::format("exp{}({})", f, x);
      break;
    case Opcode::kLog:
      e = fmt::format("log{}({})", f, x);
      break;
    case Opcode::kSqrt:
      e = fmt::format("sqrt{}({})", f, x);
      break;
    case Opcode::kRsqrt:
      e = fmt::format("{} / sqrt{}({})", one, f, x);
      break;
    case Opcode::kSin:
      e = fmt::format("sin{}({})", f, x);
      break;
    case Opcode::kCos:
      e = fmt::format("cos{}({})", f, x);
      break;
    case Opcode::kTanh:
      e = fmt::format("tanh{}({})", f, x);
      break;
    case Opcode::kSigmoid:
      e = fmt::format("{0} / ({0} + exp{1}(-{2}))", one, f, x);
      break;
    case Opcode::kRelu:
      e = fmt::format("{0} < {1} ? {1} : {0}", x, zero);
      break;
    case Opcode::kLeakyRelu:
      e = fmt::format("{0} < {1} ? ({2})({0} * {3}) : {0}", x, zero, T, param(C, cst(ins[2])));
      break;
    case Opcode::kSilu:
      e = fmt::format("{0} / ({1} + exp{2}(-{0}))", x, one, f);
      break;
    case Opcode::kGeluErf:
      e = fmt::format("({1})0.5 * {0} * ({2} + erf{3}({0} * ({1})0.70710678118654752440))", x, T,
                      one, f);
      break;
    case Opcode::kGeluTanh:
      return fmt::format(
          "  const {1} u{2} = ({1})0.79788456080286535588 * ({0} + ({1})0.044715 * {0} * {0} * "
          "{0});\n  const {1} v{2} = ({1})0.5 * {0} * ({3} + tanh{4}(u{2}));\n",
          x, T, v, one, f);
    case Opcode::kSoftplus: {
      const std::string beta = param(C, cst(ins[2])), thr = param(C, cst(ins[3]));
      return fmt::format(
          "  const {1} b{2} = {3} * {0};\n"
          "  const {1} v{2} = b{2} > {4} ? {0} : ({1})(log1p{5}(exp{5}(b{2})) / {3});\n",
          x, T, v, beta, thr, f);
    }
    case Opcode::kClamp: {
      // The bounds compare in double, as the interpreters' `double(x) < I.p0`.
      std::string s = fmt::format("  {} v{} = {};\n", T, v, x);
      if (ins[2] >= 0)
        s += fmt::format("  if ((double)v{0} < {1}) v{0} = {2};\n", v, literal(cst(ins[2])),
                         param(C, cst(ins[2])));
      if (ins[3] >= 0)
        s += fmt::format("  if ((double)v{0} > {1}) v{0} = {2};\n", v, literal(cst(ins[3])),
                         param(C, cst(ins[3])));
      return s;
    }
    case Opcode::kFloor:
      e = fmt::format("floor{}({})", f, x);
      break;
    case Opcode::kCeil:
      e = fmt::format("ceil{}({})", f, x);
      break;
    case Opcode::kRound:
      e = fmt::format("rint{}({})", f, x);  // half to even
      break;
    case Opcode::kSign:
      e = fmt::format("{0} > {1} ? {2} : {0} < {1} ? -{2} : {0}", x, zero, one);
      break;
    case Opcode::kErf:
      e = fmt::format("erf{}({})", f, x);
      break;
    case Opcode::kLogicalNot:
      e = fmt::format("{0} == {1} ? {2} : {1}", x, zero, one);
      break;
    case Opcode::kBoolToFloat:
      e = x;
      break;
    case Opcode::kAdd:
      e = x + " + " + y;
      break;
    case Opcode::kSub:
      e = x + " - " + y;
      break;
    case Opcode::kMul:
      e = x + " * " + y;
      break;
    case Opcode::kDiv:
      e = x + " / " + y;
      break;
    case Opcode::kPow:
      e = fmt::format("pow{}({}, {})", f, x, y);
      break;
    case Opcode::kMax:  // NaN in a wins; NaN in b loses to nothing (as the interpreters)
      e = fmt::format("({0} > {1} || {0} != {0}) ? {0} : {1}", x, y);
      break;
    case Opcode::kMin:
      e = fmt::format("({0} < {1} || {0} != {0}) ? {0} : {1}", x, y);
      break;
    case Opcode::kReluGrad:
      e = fmt::format("{1} > {2} ? {0} : {2}", x, y, zero);
      break;
    case Opcode::kEqual:
    case Opcode::kNotEqual:
    case Opcode::kLess:
    case Opcode::kLessEqual:
    case Opcode::kGreater:
    case Opcode::kGreaterEqual: {
      static const char* rel[] = {"==", "!=", "<", "<=", ">", ">="};
      e = fmt::format("({} {} {}) ? {} : {}", x, rel[int(op) - int(Opcode::kEqual)], y, one, zero);
      break;
    }
    case Opcode::kLogicalAnd:
      e = fmt::format("({0} != {2} && {1} != {2}) ? {3} : {2}", x, y, zero, one);
      break;
    case Opcode::kLogicalOr:
      e = fmt::format("({0} != {2} || {1} != {2}) ? {3} : {2}", x, y, zero, one);
      break;
    case Opcode::kLogicalXor:
      e = fmt::format("(({0} != {2}) != ({1} != {2})) ? {3} : {2}", x, y, zero, one);
      break;
    case Opcode::kWhere:
      e = fmt::format("{} != {} ? {} : {}", x, zero, y, val(ins[3]));
      break;
    default:
      SPORE_THROW(ErrorKind::ValueError, "fused kernel generator: opcode ", ins[0],
                  " cannot be generated");
  }
  return fmt::format("  const {} v{} = {};\n", T, v, e);
}

int vec_of(DType out) { return 16 / int(itemsize(out)); }

// The words of the argument block before the strides: out, inputs, n, vec_ok.
int head_words(size_t nin) { return int(nin) + 3; }

int count_strided(const Layout& L) {
  return int(std::count(L.access.begin(), L.access.end(), Access::kStrided));
}

int words_of(const Spec& s) {
  const Layout& L = s.layout;
  int w = head_words(s.inputs.size());
  if (!L.contiguous()) w += int(L.sizes.size()) * (1 + count_strided(L));
  return w;
}

}  // namespace

bool Layout::contiguous() const {
  return std::none_of(access.begin(), access.end(), [](Access a) { return a == Access::kStrided; });
}

Layout make_layout(const std::vector<int64_t>& out_shape,
                   const std::vector<std::vector<int64_t>>& in_shapes,
                   const std::vector<std::vector<int64_t>>& in_strides) {
  const size_t nin = in_shapes.size(), rank = out_shape.size();
  SPORE_ASSERT(in_strides.size() == nin, "make_layout: shapes and strides differ in count");
  Layout L;
  L.access.assign(nin, Access::kFlat);
  // Each input's strides aligned to the output's dims (0 where broadcast or of size 1).
  std::vector<std::vector<int64_t>> st(nin, std::vector<int64_t>(rank, 0));
  std::vector<int64_t> contiguous(rank, 0);
  int64_t n = 1;
  for (size_t d = rank; d-- > 0;) {
    contiguous[d] = n;
    n *= out_shape[d];
  }
  for (size_t k = 0; k < nin; ++k) {
    const std::vector<int64_t>& s = in_shapes[k];
    SPORE_ASSERT(s.size() <= rank && in_strides[k].size() == s.size(), "make_layout: input ", k,
                 " does not broadcast to the output");
    const size_t lead = rank - s.size();
    // Flat: every output dim of size > 1 is the input's, with the output's contiguous stride.
    bool flat = true, scalar = true;
    for (size_t d = 0; d < lead; ++d) flat = flat && out_shape[d] == 1;
    for (size_t d = 0; d < s.size(); ++d) {
      st[k][lead + d] = s[d] == 1 ? 0 : in_strides[k][d];
      if (s[d] != 1 && st[k][lead + d] != 0) scalar = false;
      if (out_shape[lead + d] != 1 &&
          (s[d] != out_shape[lead + d] || st[k][lead + d] != contiguous[lead + d]))
        flat = false;
    }
    L.access[k] = scalar ? Access::kScalar : flat ? Access::kFlat : Access::kStrided;
  }
  // Output dims without those of size 1, merged where every strided input steps evenly.
  std::vector<int64_t> sz;
  std::vector<std::vector<int64_t>> ms(nin);
  for (size_t d = 0; d < rank; ++d) {
    if (out_shape[d] == 1) continue;
    bool merge = !sz.empty();
    for (size_t k = 0; k < nin && merge; ++k)
      if (L.access[k] == Access::kStrided) merge = ms[k].back() == st[k][d] * out_shape[d];
    if (merge) {
      sz.back() *= out_shape[d];
      for (size_t k = 0; k < nin; ++k)
        if (L.access[k] == Access::kStrided) ms[k].back() = st[k][d];
    } else {
      sz.push_back(out_shape[d]);
      for (size_t k = 0; k < nin; ++k)
        if (L.access[k] == Access::kStrided) ms[k].push_back(st[k][d]);
    }
  }
  L.sizes = sz;
  L.stride.assign(nin, {});
  bool fits = n < (int64_t(1) << 31);
  for (size_t k = 0; k < nin; ++k) {
    if (L.access[k] != Access::kStrided) continue;
    int64_t reach = 0;
    for (size_t d = 0; d < sz.size(); ++d) reach += (sz[d] - 1) * std::abs(ms[k][d]);
    fits = fits && reach < (int64_t(1) << 31);
    L.stride[k] = ms[k];
  }
  L.index32 = fits;
  return L;
}

std::string unsupported(const Spec& s) {
  if (!valid_dtype(s.out))
    return fmt::format("the output dtype {} is not a float dtype", dtype_name(s.out));
  if (s.inputs.empty() || s.inputs.size() > size_t(fz::kMaxInputs))
    return fmt::format("{} inputs (1 to {} allowed)", s.inputs.size(), fz::kMaxInputs);
  if (s.layout.access.size() != s.inputs.size()) return "the layout does not describe every input";
  for (size_t k = 0; k < s.inputs.size(); ++k)
    if (s.inputs[k] != s.out && s.inputs[k] != kBool)
      return fmt::format("input {} is {}, the output {}", k, dtype_name(s.inputs[k]),
                         dtype_name(s.out));
  const size_t ni = s.program.size() / fz::kInstrWidth;
  if (ni == 0 || s.program.size() % fz::kInstrWidth != 0) return "the program is empty or torn";
  for (size_t k = 0; k < ni; ++k) {
    const int64_t* ins = s.program.data() + k * fz::kInstrWidth;
    const Opcode op = Opcode(ins[0]);
    if (op == Opcode::kCall)
      return fmt::format("instruction {} calls op {}'s CPU row kernels (kCall)", k, ins[3]);
    // An opcode newer than the generator (opcode_name() lists those it writes) stays with the
    // interpreter until it is added here.
    if (std::strcmp(opcode_name(ins[0]), "unknown") == 0)
      return fmt::format("instruction {} has opcode {}, which the generator does not know", k,
                         ins[0]);
  }
  if (words_of(s) > kMaxArgWords)
    return fmt::format("its argument block ({} words) is over the kernel-parameter limit",
                       words_of(s));
  return "";
}

Kernel generate(const Spec& s, Target target, const std::string& name) {
  const std::string why = unsupported(s);
  SPORE_CHECK(why.empty(), "fused kernel generator: cannot generate ",
              describe(s.program, s.inputs.size()), ": ", why);
  const Layout& L = s.layout;
  const Compute C = compute_of(s.out);
  const size_t nin = s.inputs.size(), ni = s.program.size() / fz::kInstrWidth;
  const bool contiguous = L.contiguous();
  const int nd = int(L.sizes.size());
  Kernel k;
  k.name = name;
  k.vec = contiguous ? vec_of(s.out) : 1;
  k.arg_words = words_of(s);

  std::string src = fmt::format(
      "// Generated by spore (src/backends/cuda/fused_codegen.cpp): {} -> {}, {} variant\n// {}\n",
      nin == 1 ? "1 input" : fmt::format("{} inputs", nin), dtype_name(s.out),
      contiguous ? "contiguous" : fmt::format("strided ({} dims)", nd), describe(s.program, nin));
  if (target == Target::kHost) src += "#define SPORE_HOST 1\n";
  src += kPreludeIncludes;
  // On the host, a namespace per kernel lets tests put many kernels in one translation unit.
  if (target == Target::kHost) src += fmt::format("namespace {}_ns {{\n", name);
  src += kPreludeCommon;
  const bool any_half = s.out == kFloat16, any_bf16 = s.out == kBFloat16;
  if (any_half) src += kPreludeHalf;
  if (any_bf16) src += kPreludeBf16;

  // The argument block (every member 8 bytes: no padding, as arg_words() packs it).
  src += "struct spore_args {\n";
  src += fmt::format("  {}* out;\n", storage_of(s.out));
  for (size_t i = 0; i < nin; ++i)
    src += fmt::format("  const {}* in{};\n", storage_of(s.inputs[i]), i);
  src += "  long long n;\n  long long vec_ok;\n";
  if (!contiguous) {
    src += fmt::format("  long long size[{}];\n", nd);
    for (size_t i = 0; i < nin; ++i)
      if (L.access[i] == Access::kStrided) src += fmt::format("  long long st{}[{}];\n", i, nd);
  }
  src += "};\n";

  // The program: inputs in, the last value out.
  src += fmt::format("SPORE_FN {} spore_body(", C.type);
  for (size_t i = 0; i < nin; ++i) src += fmt::format("{}const {} v{}", i ? ", " : "", C.type, i);
  src += ") {\n";
  for (size_t j = 0; j < ni; ++j)
    src += instruction(C, int(nin + j), s.program.data() + j * fz::kInstrWidth, s.consts);
  src += fmt::format("  return v{};\n}}\n", nin + ni - 1);

  // The kernel.
  src += fmt::format("SPORE_KERNEL({}) {{\n  const spore_args& A = SPORE_ARGS;\n", name);
  src += "  const long long n = A.n;\n";
  for (size_t i = 0; i < nin; ++i)  // scalar inputs: read once
    if (L.access[i] == Access::kScalar)
      src += fmt::format("  const {} s{} = {};\n", C.type, i,
                         load(s.inputs[i], C, fmt::format("A.in{}", i), "0"));
  auto args_at = [&](const std::string& idx, const std::vector<std::string>& strided) {
    std::string a;
    for (size_t i = 0; i < nin; ++i) {
      a += i ? ", " : "";
      if (L.access[i] == Access::kScalar)
        a += fmt::format("s{}", i);
      else if (L.access[i] == Access::kFlat)
        a += load(s.inputs[i], C, fmt::format("A.in{}", i), idx);
      else
        a += load(s.inputs[i], C, fmt::format("A.in{}", i), strided[i]);
    }
    return a;
  };
  if (contiguous) {
    const int V = k.vec;
    src += fmt::format(
        "  SPORE_LOOP(t, (n + {0} - 1) / {0}) {{\n    const long long i0 = t * {0};\n", V);
    src += fmt::format("    if (A.vec_ok && i0 + {} <= n) {{\n", V);
    // Vector loads: 16 bytes of each float input, V bytes of each bool input.
    for (size_t i = 0; i < nin; ++i) {
      if (L.access[i] != Access::kFlat) continue;
      if (s.inputs[i] == kBool) {
        const char* word = V == 2   ? "unsigned short"
                           : V == 4 ? "unsigned int"
                                    : "unsigned long long";
        src += fmt::format("      const unsigned long long l{0} = *(const {1}*)(A.in{0} + i0);\n",
                           i, word);
      } else {
        src += fmt::format("      const spore_v16 l{0} = *(const spore_v16*)(A.in{0} + i0);\n", i);
      }
    }
    auto shift = [](int b) { return b ? fmt::format(" >> {}", b) : std::string(); };
    auto lane = [&](size_t i, int j) -> std::string {
      if (L.access[i] == Access::kScalar) return fmt::format("s{}", i);
      switch (s.inputs[i]) {
        case kBool:
          return fmt::format("(((l{}{}) & 0xffu) ? ({})1 : ({})0)", i, shift(8 * j), C.type,
                             C.type);
        case kFloat32:
          return fmt::format("spore_as_f32((unsigned int)(l{}.w[{}]{}))", i, j / 2,
                             shift(32 * (j % 2)));
        case kFloat64:
          return fmt::format("spore_as_f64(l{}.w[{}])", i, j);
        case kFloat16:
          return fmt::format("spore_h2f((unsigned short)(l{}.w[{}]{}))", i, j / 4,
                             shift(16 * (j % 4)));
        default:
          return fmt::format("spore_bf2f((unsigned short)(l{}.w[{}]{}))", i, j / 4,
                             shift(16 * (j % 4)));
      }
    };
    for (int j = 0; j < V; ++j) {
      src += fmt::format("      const {} r{} = spore_body(", C.type, j);
      for (size_t i = 0; i < nin; ++i) src += (i ? ", " : "") + lane(i, j);
      src += ");\n";
    }
    // The output's 16 bytes from the V results.
    src += "      spore_v16 o;\n";
    for (int w = 0; w < 2; ++w) {
      std::string e;
      const int per = V / 2;  // results per 8-byte word
      for (int j = w * per; j < (w + 1) * per; ++j) {
        const int shift = (j - w * per) * (64 / per);
        std::string bits;
        if (s.out == kFloat32)
          bits = fmt::format("(unsigned long long)spore_f32_bits(r{})", j);
        else if (s.out == kFloat64)
          bits = fmt::format("(unsigned long long)spore_f64_bits(r{})", j);
        else
          bits = fmt::format("(unsigned long long){}", to_storage(s.out, fmt::format("r{}", j)));
        e += (e.empty() ? "" : " | ") + (shift ? fmt::format("({} << {})", bits, shift) : bits);
      }
      src += fmt::format("      o.w[{}] = {};\n", w, e);
    }
    src += "      *(spore_v16*)(A.out + i0) = o;\n";
    src += "    } else {\n";
    src += fmt::format("      const long long i1 = i0 + {} < n ? i0 + {} : n;\n", V, V);
    src += "      for (long long i = i0; i < i1; ++i)\n";
    src += fmt::format("        A.out[i] = {};\n",
                       to_storage(s.out, "spore_body(" + args_at("i", {}) + ")"));
    src += "    }\n  }\n}\n";
  } else {
    const char* I = L.index32 ? "int" : "long long";
    src += "  SPORE_LOOP(i, n) {\n";
    src += fmt::format("    {} q = ({})i;\n", I, I);
    std::vector<std::string> off(nin);
    for (size_t i = 0; i < nin; ++i) {
      if (L.access[i] != Access::kStrided) continue;
      off[i] = fmt::format("o{}", i);
      src += fmt::format("    {} o{} = 0;\n", I, i);
    }
    for (int d = nd - 1; d >= 0; --d) {  // inner dim first; the outermost needs no modulo
      if (d > 0)
        src +=
            fmt::format("    {{ const {0} c = q % ({0})A.size[{1}]; q /= ({0})A.size[{1}];", I, d);
      else
        src += fmt::format("    {{ const {} c = q;", I);
      for (size_t i = 0; i < nin; ++i)
        if (L.access[i] == Access::kStrided)
          src += fmt::format(" o{0} += c * ({1})A.st{0}[{2}];", i, I, d);
      src += " }\n";
    }
    src += fmt::format("    A.out[i] = {};\n",
                       to_storage(s.out, "spore_body(" + args_at("i", off) + ")"));
    src += "  }\n}\n";
  }
  if (s.out == kFloat64) {
    // spore_f64_bits is only needed by the float64 vector store; defined late so the host's and
    // device's helpers stay side by side.
    const std::string helper =
        "#ifdef SPORE_HOST\nSPORE_FN unsigned long long spore_f64_bits(double f) { unsigned long "
        "long u; memcpy(&u, &f, 8); return u; }\n#else\nSPORE_FN unsigned long long "
        "spore_f64_bits(double f) { return (unsigned long long)__double_as_longlong(f); }\n"
        "#endif\n";
    const size_t at = src.find("struct spore_args {");
    src.insert(at, helper);
  }
  if (target == Target::kHost) src += fmt::format("}}  // namespace {}_ns\n", name);
  k.source = std::move(src);
  return k;
}

std::vector<uint64_t> arg_words(const Spec& s, const Kernel& k, void* out,
                                const std::vector<const void*>& inputs, int64_t n, bool vec_ok) {
  const Layout& L = s.layout;
  std::vector<uint64_t> w;
  w.reserve(size_t(k.arg_words));
  w.push_back(uint64_t(reinterpret_cast<uintptr_t>(out)));
  for (const void* p : inputs) w.push_back(uint64_t(reinterpret_cast<uintptr_t>(p)));
  w.push_back(uint64_t(n));
  w.push_back(vec_ok ? 1 : 0);
  if (!L.contiguous()) {
    for (int64_t v : L.sizes) w.push_back(uint64_t(v));
    for (size_t i = 0; i < inputs.size(); ++i)
      if (L.access[i] == Access::kStrided)
        for (int64_t v : L.stride[i]) w.push_back(uint64_t(v));
  }
  SPORE_ASSERT(int(w.size()) == k.arg_words, "fused kernel arguments: ", w.size(), " words, the ",
               "kernel takes ", k.arg_words);
  return w;
}

bool vector_aligned(const Spec& s, const void* out, const std::vector<const void*>& inputs) {
  const int V = vec_of(s.out);
  auto aligned = [](const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; };
  if (!aligned(out, 16)) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (s.layout.access[i] != Access::kFlat) continue;
    if (!aligned(inputs[i], s.inputs[i] == kBool ? uintptr_t(V) : 16)) return false;
  }
  return true;
}

const char* opcode_name(int64_t opcode) {
  switch (Opcode(opcode)) {
    case Opcode::kConst:
      return "const";
    case Opcode::kNeg:
      return "neg";
    case Opcode::kAbs:
      return "abs";
    case Opcode::kExp:
      return "exp";
    case Opcode::kLog:
      return "log";
    case Opcode::kSqrt:
      return "sqrt";
    case Opcode::kRsqrt:
      return "rsqrt";
    case Opcode::kSin:
      return "sin";
    case Opcode::kCos:
      return "cos";
    case Opcode::kTanh:
      return "tanh";
    case Opcode::kSigmoid:
      return "sigmoid";
    case Opcode::kRelu:
      return "relu";
    case Opcode::kLeakyRelu:
      return "leaky_relu";
    case Opcode::kSilu:
      return "silu";
    case Opcode::kGeluErf:
      return "gelu";
    case Opcode::kGeluTanh:
      return "gelu_tanh";
    case Opcode::kSoftplus:
      return "softplus";
    case Opcode::kClamp:
      return "clamp";
    case Opcode::kFloor:
      return "floor";
    case Opcode::kCeil:
      return "ceil";
    case Opcode::kRound:
      return "round";
    case Opcode::kSign:
      return "sign";
    case Opcode::kErf:
      return "erf";
    case Opcode::kLogicalNot:
      return "logical_not";
    case Opcode::kBoolToFloat:
      return "bool_to_float";
    case Opcode::kAdd:
      return "add";
    case Opcode::kSub:
      return "sub";
    case Opcode::kMul:
      return "mul";
    case Opcode::kDiv:
      return "div";
    case Opcode::kPow:
      return "pow";
    case Opcode::kMax:
      return "maximum";
    case Opcode::kMin:
      return "minimum";
    case Opcode::kReluGrad:
      return "relu_grad";
    case Opcode::kEqual:
      return "equal";
    case Opcode::kNotEqual:
      return "not_equal";
    case Opcode::kLess:
      return "less";
    case Opcode::kLessEqual:
      return "less_equal";
    case Opcode::kGreater:
      return "greater";
    case Opcode::kGreaterEqual:
      return "greater_equal";
    case Opcode::kLogicalAnd:
      return "logical_and";
    case Opcode::kLogicalOr:
      return "logical_or";
    case Opcode::kLogicalXor:
      return "logical_xor";
    case Opcode::kWhere:
      return "where";
    case Opcode::kCall:
      return "call";
    default:
      return "unknown";
  }
}

std::string describe(const std::vector<int64_t>& program, size_t nin) {
  std::string s;
  const size_t ni = program.size() / fz::kInstrWidth;
  for (size_t k = 0; k < ni; ++k) {
    const int64_t* ins = program.data() + k * fz::kInstrWidth;
    const Opcode op = Opcode(ins[0]);
    s += fmt::format("{}v{} = {}(", k ? "; " : "", nin + k, opcode_name(ins[0]));
    if (op == Opcode::kConst)
      s += fmt::format("c{}", ins[1]);
    else if (fz::is_unary(op))
      s += fmt::format("v{}", ins[1]);
    else if (op == Opcode::kWhere)
      s += fmt::format("v{}, v{}, v{}", ins[1], ins[2], ins[3]);
    else if (op == Opcode::kCall)
      s += ins[2] >= 0 ? fmt::format("op {}: v{}, v{}", ins[3], ins[1], ins[2])
                       : fmt::format("op {}: v{}", ins[3], ins[1]);
    else
      s += fmt::format("v{}, v{}", ins[1], ins[2]);
    s += ")";
  }
  return s;
}

}  // namespace spore::cuda::fusedgen
