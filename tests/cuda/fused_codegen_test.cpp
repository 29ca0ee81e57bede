// Generated fused kernels (src/backends/cuda/fused_codegen.h, fused_nvrtc.h) without a GPU:
//  - layouts: which inputs are flat, scalar or strided, and the dims merged;
//  - NVRTC compiles the generated source for sm_90, for programs holding every opcode, in each
//    output dtype (bool inputs too) and both variants;
//  - semantics: the same source in host mode (the kernel body over a plain loop), compiled with the
//    system C++ compiler into a shared object, run on random inputs and compared element by
//    element with the CPU interpreter (ops/FusedElementwise on the CPU). Bit for bit where both
//    sides compute the same correctly rounded formula; a few ulps where the CPU's float32 path uses
//    its SIMD approximations (exp, log, sin, cos, tanh and what is built on them: see kF32Ulps);
//    float16 / bfloat16 results within 1 ulp of their format for those;
//  - the disk cache: a second compile is a hit, a damaged file is rebuilt, the key follows the
//    architecture; NVRTC's errors name the program and carry its log.
// Skipped with the reason where NVRTC or a C++ compiler is missing.
#include <dlfcn.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/fused_codegen.h"
#include "cuda/gpu_visible.h"
#include "ops/fused_program.h"
#include "ops/op.h"
#include "spore/spore.h"
#if SPORE_TEST_NVRTC
#include "backends/cuda/fused_nvrtc.h"
#endif

namespace spore {
namespace {
namespace fs = std::filesystem;
namespace gen = cuda::fusedgen;
namespace fz = ops::fused;
using fz::Opcode;

// ---- programs --------------------------------------------------------------------------------

struct Builder {
  int64_t next;
  std::vector<int64_t> prog, consts;
  explicit Builder(int64_t nin) : next(nin) {}
  int64_t konst(double v) {
    consts.push_back(fz::encode_double(v));
    return int64_t(consts.size()) - 1;
  }
  int64_t op(Opcode o, int64_t a, int64_t b = -1, int64_t c = -1) {
    prog.insert(prog.end(), {int64_t(o), a, b, c});
    return next++;
  }
};

// A unary opcode's instruction on value x, with the parameters a test gives it.
int64_t unary(Builder& B, Opcode op, int64_t x) {
  switch (op) {
    case Opcode::kLeakyRelu:
      return B.op(op, x, B.konst(0.2));
    case Opcode::kSoftplus:
      return B.op(op, x, B.konst(1.5), B.konst(2.0));
    case Opcode::kClamp:
      return B.op(op, x, B.konst(-0.3), B.konst(0.4));
    default:
      return B.op(op, x);
  }
}

bool needs_positive(Opcode op) {
  return op == Opcode::kLog || op == Opcode::kSqrt || op == Opcode::kRsqrt || op == Opcode::kPow;
}
bool is_logical(Opcode op) {
  return op == Opcode::kLogicalAnd || op == Opcode::kLogicalOr || op == Opcode::kLogicalXor ||
         op == Opcode::kLogicalNot || op == Opcode::kBoolToFloat;
}

std::vector<Opcode> every_opcode() {
  std::vector<Opcode> ops{Opcode::kConst, Opcode::kWhere};
  for (int64_t c = int64_t(Opcode::kNeg); c <= int64_t(Opcode::kLastUnary); ++c)
    ops.push_back(Opcode(c));
  for (int64_t c = int64_t(Opcode::kAdd); c <= int64_t(Opcode::kLastBinary); ++c)
    ops.push_back(Opcode(c));
  return ops;
}

// Inputs: 0 = x (any float), 1 = p (positive float), 2 = m (bool). Every opcode once, the
// results summed into the output.
Builder program_with_every_opcode() {
  Builder B(3);
  int64_t acc = B.op(Opcode::kConst, B.konst(0.125));
  auto add = [&](int64_t v) { acc = B.op(Opcode::kAdd, acc, v); };
  for (Opcode op : every_opcode()) {
    if (op == Opcode::kConst || op == Opcode::kAdd) continue;  // used by the sum itself
    if (op == Opcode::kWhere) {
      add(B.op(op, 2, 0, 1));
    } else if (op == Opcode::kLogicalNot || op == Opcode::kBoolToFloat) {
      add(B.op(Opcode::kBoolToFloat, op == Opcode::kLogicalNot ? B.op(op, 2) : 2));
    } else if (fz::is_unary(op)) {
      add(unary(B, op, needs_positive(op) ? 1 : 0));
    } else if (fz::is_bool_result(op)) {
      const int64_t a = is_logical(op) ? B.op(Opcode::kLess, 0, 1) : 0;
      add(B.op(Opcode::kBoolToFloat, B.op(op, a, is_logical(op) ? 2 : 1)));
    } else {
      add(B.op(op, needs_positive(op) ? 1 : 0, 1));
    }
  }
  return B;
}

// One opcode over fresh inputs (a bool result becomes float); *nin: its input count.
Builder program_of(Opcode op, int* nin) {
  if (op == Opcode::kConst) {  // const, added to an input (a program's result is per element)
    *nin = 1;
    Builder B(1);
    B.op(Opcode::kAdd, 0, B.op(Opcode::kConst, B.konst(-1.75)));
    return B;
  }
  *nin = op == Opcode::kWhere ? 3 : fz::is_unary(op) ? 1 : 2;
  Builder B(*nin);
  int64_t r;
  if (op == Opcode::kWhere)
    r = B.op(op, 0, 1, 2);
  else if (fz::is_unary(op))
    r = unary(B, op, 0);
  else
    r = B.op(op, 0, 1);
  if (fz::is_bool_result(op)) B.op(Opcode::kBoolToFloat, r);
  return B;
}

// Which inputs of program_of(op) are bool.
bool bool_input(Opcode op, int k) {
  if (op == Opcode::kWhere) return k == 0;
  return op == Opcode::kBoolToFloat || is_logical(op);
}

// ---- inputs and layouts ----------------------------------------------------------------------

constexpr int64_t kRows = 5, kCols = 37;  // 185 elements: every vector width leaves a tail

// Values on a grid of halves (so comparisons meet equal values and round meets ties) plus
// irregular ones; with specials (0, -0, inf, NaN) where `specials`.
std::vector<float> values(size_t n, bool positive, bool specials, std::mt19937& rng) {
  std::normal_distribution<float> N(0.0f, 2.0f);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    float x = N(rng);
    if (i % 3 == 0) x = std::round(x * 2) / 2;
    v[i] = positive ? std::fabs(x) + 0.25f : x;
  }
  if (specials && n > 8) {
    v[1] = 0.0f;
    v[2] = -0.0f;
    v[3] = INFINITY;
    v[4] = -INFINITY;
    v[5] = NAN;
  }
  return v;
}

// An input tensor of `shape` as the layout asks: "flat" (contiguous), "t" (a transposed view of a
// contiguous tensor), or any shape that broadcasts.
Tensor make_input(const Shape& shape, bool transposed, DType dt, bool is_bool, bool positive,
                  bool specials, std::mt19937& rng) {
  Shape s = shape;
  if (transposed) std::swap(s[0], s[1]);
  const std::vector<float> v = values(size_t(shape_numel(s)), positive, specials, rng);
  Tensor t = from_vector(v, s, Device{});
  t = is_bool ? greater(t, full({}, 0.0, kFloat32)) : t.to(dt);
  return transposed ? t.t() : t;
}

// The spec of a program over CPU tensors (the same layout rules as the GPU's hook).
gen::Spec spec_of(const Builder& B, const ops::Tensors& in, DType out, const Shape& shape) {
  gen::Spec s;
  s.program = B.prog;
  s.consts = B.consts;
  s.out = out;
  std::vector<std::vector<int64_t>> shapes, strides;
  for (const Tensor& t : in) {
    s.inputs.push_back(t.dtype());
    shapes.push_back(t.shape());
    strides.push_back(t.strides());
  }
  s.layout = gen::make_layout(shape, shapes, strides);
  return s;
}

// FusedElementwise on the inputs' device (the CPU interpreter for CPU tensors).
Tensor run_fused(const Builder& B, const ops::Tensors& in, DType out, const Shape& shape) {
  return ops::call(ops::OpId::FusedElementwise, in,
                   ops::Attrs()
                       .set("program", B.prog)
                       .set("consts", B.consts)
                       .set("shape", shape)
                       .set("dtype", out))[0];
}

const DType kOutDTypes[] = {kFloat32, kFloat16, kBFloat16, kFloat64};

// ---- layouts ---------------------------------------------------------------------------------

TEST(FusedCodegen, LayoutsClassifyAndMergeDims) {
  // Same shape contiguous: flat; a 0-d / all-ones input: scalar; a row (37,) over (5, 37):
  // strided with a zero outer stride; the dims of a (2, 3, 4) output merge around a strided input
  // that is contiguous in its inner two dims.
  gen::Layout L =
      gen::make_layout({5, 37}, {{5, 37}, {}, {1, 1}, {37}}, {{37, 1}, {}, {1, 1}, {1}});
  ASSERT_EQ(L.access.size(), 4u);
  EXPECT_EQ(L.access[0], gen::Access::kFlat);
  EXPECT_EQ(L.access[1], gen::Access::kScalar);
  EXPECT_EQ(L.access[2], gen::Access::kScalar);
  EXPECT_EQ(L.access[3], gen::Access::kStrided);
  EXPECT_FALSE(L.contiguous());
  EXPECT_EQ(L.sizes, (std::vector<int64_t>{5, 37}));
  EXPECT_EQ(L.stride[3], (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(L.index32);

  L = gen::make_layout({2, 3, 4}, {{2, 3, 4}, {2, 3, 4}}, {{12, 4, 1}, {40, 4, 1}});
  EXPECT_EQ(L.access[0], gen::Access::kFlat);
  EXPECT_EQ(L.access[1], gen::Access::kStrided);  // a slice of a wider tensor
  EXPECT_EQ(L.sizes, (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(L.stride[1], (std::vector<int64_t>{40, 1}));

  // A size-1 dim's stride does not matter; a row over a (4, 1, 6) output is strided (stride 0
  // over the 4), and those two dims do not merge.
  L = gen::make_layout({4, 1, 6}, {{4, 1, 6}, {6}}, {{6, 99, 1}, {1}});
  EXPECT_EQ(L.access[0], gen::Access::kFlat);
  EXPECT_EQ(L.access[1], gen::Access::kStrided);
  EXPECT_EQ(L.sizes, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(L.stride[1], (std::vector<int64_t>{0, 1}));

  // Missing leading dims of size 1 keep an input flat.
  L = gen::make_layout({1, 5}, {{5}}, {{1}});
  EXPECT_EQ(L.access[0], gen::Access::kFlat);

  // Offsets past 2^31 take 64-bit index arithmetic.
  L = gen::make_layout({2, 3}, {{2, 3}}, {{int64_t(1) << 31, 1}});
  EXPECT_FALSE(L.index32);
}

TEST(FusedCodegen, DeclinesCallAndNamesTheProgram) {
  Builder B(2);
  B.op(Opcode::kCall, 0, 1, 0);
  gen::Spec s;
  s.program = B.prog;
  s.out = kFloat32;
  s.inputs = {kFloat32, kFloat32};
  s.layout = gen::make_layout({3}, {{3}, {3}}, {{1}, {1}});
  const std::string why = gen::unsupported(s);
  EXPECT_NE(why.find("kCall"), std::string::npos) << why;
  try {
    gen::generate(s, gen::Target::kDevice);
    FAIL() << "generated a kCall program";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("v2 = call(op 0: v0, v1)"), std::string::npos) << e.what();
  }
  s.inputs = {kFloat32, kInt32};
  B = Builder(2);
  B.op(Opcode::kAdd, 0, 1);
  s.program = B.prog;
  EXPECT_NE(gen::unsupported(s).find("input 1 is int32"), std::string::npos);
}

// ---- NVRTC ------------------------------------------------------------------------------------

// Sets an environment variable for a scope, then puts back what was there.
struct ScopedEnv {
  std::string name;
  bool had;
  std::string old;
  ScopedEnv(const char* n, const char* value) : name(n) {
    const char* o = std::getenv(n);
    had = o != nullptr;
    old = o ? o : "";
    set(value);
  }
  void set(const char* value) const {
    if (value)
      ::setenv(name.c_str(), value, 1);
    else
      ::unsetenv(name.c_str());
  }
  ~ScopedEnv() { set(had ? old.c_str() : nullptr); }
};

// A cache folder of the test's own (removed at the end), so runs never touch ~/.cache.
struct TempCache {
  fs::path dir = fs::temp_directory_path() / ("spore_nvrtc_test_" + std::to_string(::getpid()));
  ScopedEnv env{"SPORE_CUDA_CACHE_DIR", dir.c_str()};
  TempCache() { fs::remove_all(dir); }
  ~TempCache() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

#if SPORE_TEST_NVRTC
TEST(FusedCodegenNvrtc, EveryOpcodeCompilesForSm90InEachDtypeAndVariant) {
  ASSERT_TRUE(cuda::nvrtc::supports_arch(90)) << "NVRTC " << cuda::nvrtc::version();
  TempCache tc;
  const Builder B = program_with_every_opcode();
  std::set<int64_t> used;
  for (size_t k = 0; k < B.prog.size(); k += 4) used.insert(B.prog[k]);
  for (Opcode op : every_opcode())
    EXPECT_TRUE(used.count(int64_t(op))) << gen::opcode_name(int64_t(op));
  const Shape shape{kRows, kCols};
  const auto t0 = std::chrono::steady_clock::now();
  int compiled = 0;
  for (DType dt : kOutDTypes) {
    for (bool strided : {false, true}) {
      std::mt19937 rng(1);
      const ops::Tensors in = {
          make_input(shape, strided, dt, false, false, false, rng),
          make_input(strided ? Shape{1, kCols} : shape, false, dt, false, true, false, rng),
          make_input(shape, false, dt, true, false, false, rng)};
      const gen::Spec s = spec_of(B, in, dt, shape);
      ASSERT_EQ(s.layout.contiguous(), !strided);
      const gen::Kernel k = gen::generate(s, gen::Target::kDevice);
      SCOPED_TRACE(std::string(dtype_name(dt)) + (strided ? " strided" : " contiguous") + "\n" +
                   k.source);
      const cuda::nvrtc::Compiled c = cuda::nvrtc::compile(k.source, 90, "every opcode");
      ASSERT_TRUE(c.cubin && c.cubin->size() > 1000);
      EXPECT_EQ(c.cubin->compare(0, 4,
                                 "\x7f"
                                 "ELF"),
                0);
      EXPECT_NE(c.cubin->find(k.name), std::string::npos) << "the entry point is in the CUBIN";
      ++compiled;
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("NVRTC %d: %d kernels (%zu instructions each) compiled for sm_90 in %.2f s\n",
              cuda::nvrtc::version(), compiled, B.prog.size() / 4, s);
}

TEST(FusedCodegenNvrtc, DiskCacheHitsRebuildsDamagedFilesAndKeysOnArch) {
  TempCache tc;
  Builder B(2);
  B.op(Opcode::kMul, B.op(Opcode::kExp, 0), 1);
  std::mt19937 rng(2);
  const Shape shape{kRows, kCols};
  const ops::Tensors in = {make_input(shape, false, kFloat32, false, false, false, rng),
                           make_input(shape, false, kFloat32, false, false, false, rng)};
  const std::string src =
      gen::generate(spec_of(B, in, kFloat32, shape), gen::Target::kDevice).source;
  namespace nv = cuda::nvrtc;
  using From = nv::Compiled::From;

  const nv::Compiled first = nv::compile(src, 90, "exp-mul");
  EXPECT_EQ(first.from, From::kCompiled);
  ASSERT_FALSE(first.path.empty());
  EXPECT_EQ(fs::path(first.path).parent_path(), tc.dir);
  ASSERT_TRUE(fs::exists(first.path));
  EXPECT_EQ(nv::compile(src, 90, "exp-mul").from, From::kMemory);
  nv::clear_memory_cache();
  const nv::Compiled again = nv::compile(src, 90, "exp-mul");
  EXPECT_EQ(again.from, From::kDisk);
  EXPECT_EQ(*again.cubin, *first.cubin);

  // A damaged file (truncated, then garbage) is ignored, compiled again and rewritten whole.
  for (int damage = 0; damage < 2; ++damage) {
    const auto size = fs::file_size(first.path);
    if (damage == 0) {
      fs::resize_file(first.path, size / 2);
    } else {
      std::fstream f(first.path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(std::streamoff(size - 40));
      f.write("garbage garbage garbage garbage garbage ", 40);
    }
    nv::clear_memory_cache();
    const int64_t bad = nv::stats().bad_files;
    const nv::Compiled rebuilt = nv::compile(src, 90, "exp-mul");
    EXPECT_EQ(rebuilt.from, From::kCompiled) << "damage " << damage;
    EXPECT_EQ(nv::stats().bad_files, bad + 1);
    EXPECT_EQ(*rebuilt.cubin, *first.cubin);
    nv::clear_memory_cache();
    EXPECT_EQ(nv::compile(src, 90, "exp-mul").from, From::kDisk) << "rewritten whole";
  }
  // No temporary file stays behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(tc.dir)) {
    ++files;
    EXPECT_EQ(e.path().extension(), ".cubin") << e.path();
  }
  EXPECT_EQ(files, 1);

  // The key follows the architecture (and the source).
  EXPECT_NE(nv::cache_key(src, 90), nv::cache_key(src, 80));
  EXPECT_NE(nv::cache_key(src, 90), nv::cache_key(src + " ", 90));
  ASSERT_TRUE(nv::supports_arch(80));
  const nv::Compiled a80 = nv::compile(src, 80, "exp-mul");
  EXPECT_EQ(a80.from, From::kCompiled);
  EXPECT_NE(a80.path, first.path);
  EXPECT_NE(*a80.cubin, *first.cubin);

  // SPORE_CUDA_CACHE_DIR=off: memory only.
  tc.env.set("off");
  EXPECT_EQ(nv::cache_dir(), "");
  nv::clear_memory_cache();
  const nv::Compiled mem = nv::compile(src, 90, "exp-mul");
  EXPECT_EQ(mem.from, From::kCompiled);
  EXPECT_TRUE(mem.path.empty());
  // Unset: $XDG_CACHE_HOME/spore/cuda, else ~/.cache/spore/cuda.
  tc.env.set(nullptr);
  {
    const ScopedEnv xdg("XDG_CACHE_HOME", "/xdg"), home("HOME", "/home/u");
    EXPECT_EQ(nv::cache_dir(), "/xdg/spore/cuda");
    xdg.set(nullptr);
    EXPECT_EQ(nv::cache_dir(), "/home/u/.cache/spore/cuda");
  }
}

TEST(FusedCodegenNvrtc, CompileErrorsNameTheProgramAndCarryTheLog) {
  TempCache tc;
  try {
    cuda::nvrtc::compile("extern \"C\" __global__ void spore_fused() { undeclared_thing(); }", 90,
                         "v1 = exp(v0)");
    FAIL() << "compiled a broken source";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("v1 = exp(v0)"), std::string::npos) << m;
    EXPECT_NE(m.find("sm_90"), std::string::npos) << m;
    EXPECT_NE(m.find("undeclared_thing"), std::string::npos) << "NVRTC's log: " << m;
  }
}
#else
TEST(FusedCodegenNvrtc, Skipped) {
  GTEST_SKIP() << "this build found no NVRTC (CUDA::nvrtc): the generated sources are not compiled";
}
#endif

// ---- host mode against the CPU interpreter ------------------------------------------------------

// Where the CPU's float32 path takes its SIMD approximations (fused_elementwise.cpp: simd_unary)
// rather than the C library the host mode calls: the ulps allowed (measured: 1 for exp, log, sin,
// cos; 2 for tanh, sigmoid, silu; gelu_tanh within 2^-23 absolute, see below).
int f32_ulps(Opcode op) {
  switch (op) {
    case Opcode::kExp:
    case Opcode::kLog:
    case Opcode::kSin:
    case Opcode::kCos:
    case Opcode::kTanh:
    case Opcode::kSigmoid:
    case Opcode::kSilu:
    case Opcode::kGeluTanh:
      return 4;
    default:
      return 0;
  }
}

// Distance in units in the last place of dtype t (0 for equal values, and for two NaNs).
int64_t ulp_distance(double a, double b, DType t) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  int64_t x, y;
  auto ordered = [](int64_t bits, int64_t sign) {
    return bits & sign ? -(bits & (sign - 1)) : bits;
  };
  switch (t) {
    case kFloat64: {
      std::memcpy(&x, &a, 8);
      std::memcpy(&y, &b, 8);
      return std::llabs(ordered(x, INT64_MIN) - ordered(y, INT64_MIN));
    }
    case kFloat32: {
      const float fa = float(a), fb = float(b);
      uint32_t ua, ub;
      std::memcpy(&ua, &fa, 4);
      std::memcpy(&ub, &fb, 4);
      return std::llabs(ordered(ua, 0x80000000ll) - ordered(ub, 0x80000000ll));
    }
    case kFloat16:
      return std::llabs(ordered(float_to_half(float(a)), 0x8000) -
                        ordered(float_to_half(float(b)), 0x8000));
    default:
      return std::llabs(ordered(BFloat16(float(a)).bits, 0x8000) -
                        ordered(BFloat16(float(b)).bits, 0x8000));
  }
}

struct HostCase {
  std::string label;
  Builder program{0};
  ops::Tensors inputs;
  DType dt;
  int64_t ulps;  // allowed distance from the CPU interpreter
  gen::Spec spec;
  gen::Kernel kernel;
};

// The system C++ compiler (the build's, else `c++`), or "" with *why.
std::string find_compiler(std::string* why) {
  std::vector<std::string> tries;
#ifdef SPORE_TEST_CXX
  tries.push_back(SPORE_TEST_CXX);
#endif
  tries.push_back("c++");
  for (const std::string& c : tries)
    if (std::system(("'" + c + "' --version > /dev/null 2>&1").c_str()) == 0) return c;
  *why = "no C++ compiler found (tried the build's and `c++`) to build the host-mode kernels";
  return "";
}

TEST(FusedCodegenHost, EveryOpcodeAndDtypeMatchesTheCpuInterpreter) {
  std::string why;
  const std::string cxx = find_compiler(&why);
  if (cxx.empty()) GTEST_SKIP() << why;
  const Shape shape{kRows, kCols};
  std::vector<HostCase> cases;
  int seed = 0;
  for (DType dt : kOutDTypes) {
    const bool half = dt == kFloat16 || dt == kBFloat16;
    // One opcode per program: contiguous inputs, then (float32 / float64) a transposed view and a
    // broadcast row / column: the strided variant.
    for (Opcode op : every_opcode()) {
      int nin = 0;
      const Builder B = program_of(op, &nin);
      const bool exact_op = f32_ulps(op) == 0;
      for (int variant = 0; variant < (half ? 1 : 2); ++variant) {
        std::mt19937 rng(uint32_t(++seed));
        HostCase c;
        c.label = fmt::format("{} {} {}", gen::opcode_name(int64_t(op)), dtype_name(dt),
                              variant ? "strided" : "contiguous");
        c.program = B;
        c.dt = dt;
        for (int k = 0; k < nin; ++k) {
          const Shape s = variant == 0 ? shape
                          : k == 1     ? Shape{kRows, 1}
                          : k == 2     ? Shape{kCols}
                                       : shape;
          c.inputs.push_back(make_input(s, variant == 1 && k == 0, dt, bool_input(op, k),
                                        needs_positive(op) && k == 0, exact_op, rng));
        }
        // float64 and correctly rounded formulas: the same C library calls on both sides.
        c.ulps = dt == kFloat64 || exact_op ? 0 : half ? 1 : f32_ulps(op);
        cases.push_back(std::move(c));
      }
    }
    // Every opcode in one program, both variants (a scalar input in the contiguous one).
    for (int variant = 0; variant < 2; ++variant) {
      std::mt19937 rng(uint32_t(++seed));
      HostCase c;
      c.label =
          fmt::format("every opcode {} {}", dtype_name(dt), variant ? "strided" : "contiguous");
      c.program = program_with_every_opcode();
      c.dt = dt;
      c.inputs = {
          make_input(shape, variant == 1, dt, false, false, false, rng),
          make_input(variant ? Shape{kRows, 1} : Shape{}, false, dt, false, true, false, rng),
          make_input(shape, false, dt, true, false, false, rng)};
      c.ulps = -1;  // a sum of 45 terms: compared relatively below
      cases.push_back(std::move(c));
    }
  }
  // Generate every case into one translation unit.
  struct TempDir {  // removed however the test ends
    fs::path path = fs::temp_directory_path() / ("spore_fused_host_" + std::to_string(::getpid()));
    TempDir() { fs::create_directories(path); }
    ~TempDir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } tmp;
  const fs::path& dir = tmp.path;
  std::string tu;
  for (size_t i = 0; i < cases.size(); ++i) {
    HostCase& c = cases[i];
    c.spec = spec_of(c.program, c.inputs, c.dt, shape);
    c.kernel = gen::generate(c.spec, gen::Target::kHost, "spore_case" + std::to_string(i));
    tu += c.kernel.source;
  }
  std::ofstream(dir / "kernels.cpp") << tu;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string cmd = "'" + cxx + "' -std=c++17 -O1 -ffp-contract=off -shared -fPIC -o '" +
                          (dir / "kernels.so").string() + "' '" + (dir / "kernels.cpp").string() +
                          "' > '" + (dir / "cc.log").string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rc != 0) {
    std::ifstream log(dir / "cc.log");
    FAIL() << cmd << " failed:\n" << std::string(std::istreambuf_iterator<char>(log), {});
  }
  void* so = dlopen((dir / "kernels.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_TRUE(so) << dlerror();
  std::printf("host mode: %zu kernels compiled in %.2f s\n", cases.size(), secs);

  std::map<std::string, int64_t> worst;  // opcode / dtype -> max ulps seen
  for (HostCase& c : cases) {
    SCOPED_TRACE(c.label);
    using Fn = void (*)(const void*);
    const auto fn = reinterpret_cast<Fn>(dlsym(so, c.kernel.name.c_str()));
    ASSERT_TRUE(fn) << c.kernel.name;
    const Tensor want = run_fused(c.program, c.inputs, c.dt, shape).to(kFloat64);
    const std::vector<double> w = want.to_vector<double>();
    std::vector<const void*> ptrs;
    for (const Tensor& t : c.inputs) ptrs.push_back(t.data_ptr());
    // Vector path on and off (the contiguous variant's tail and misaligned paths).
    for (bool vec_ok : {true, false}) {
      Tensor got = Tensor::empty(shape, c.dt, Device{});
      void* out = got.data_ptr();
      ASSERT_TRUE(!vec_ok || gen::vector_aligned(c.spec, out, ptrs));
      const std::vector<uint64_t> words =
          gen::arg_words(c.spec, c.kernel, out, ptrs, shape_numel(shape), vec_ok);
      fn(words.data());
      const std::vector<double> g = got.to(kFloat64).to_vector<double>();
      for (size_t i = 0; i < g.size(); ++i) {
        if (c.ulps < 0) {  // relative, for the long sums
          const double tol = (c.dt == kFloat64   ? 1e-13
                              : c.dt == kFloat32 ? 2e-6
                              : c.dt == kFloat16 ? 2e-3
                                                 : 1.6e-2) *
                             std::max(1.0, std::fabs(w[i]));
          ASSERT_TRUE(std::fabs(g[i] - w[i]) <= tol || (std::isnan(g[i]) && std::isnan(w[i])))
              << "element " << i << ": host " << g[i] << ", CPU " << w[i];
          continue;
        }
        const int64_t d = ulp_distance(g[i], w[i], c.dt);
        int64_t& wst = worst[c.label.substr(0, c.label.rfind(' '))];
        wst = std::max(wst, d);
        // After a cancellation (gelu_tanh near its minimum) the SIMD ops' ulps grow: there one
        // float32 ulp of 1.0 absolute.
        if (c.dt == kFloat32 && c.ulps > 0 && std::fabs(g[i] - w[i]) <= 0x1p-23) continue;
        ASSERT_LE(d, c.ulps) << "element " << i << " (vec_ok " << vec_ok << "): host " << g[i]
                             << ", CPU " << w[i];
      }
    }
  }
  std::string report;
  for (const auto& [k, v] : worst)
    if (v > 0) report += fmt::format(" {}: {};", k, v);
  std::printf("largest ulp distances from the CPU interpreter (0 elsewhere):%s\n", report.c_str());
  dlclose(so);
}

// ---- on a GPU (skipped without one) -----------------------------------------------------------

using test_support::gpu_visible;

// FusedElementwise on the GPU through the generated kernels (SPORE_CUDA_FUSED=nvrtc) against the
// GPU interpreter (the same formulas compiled by nvcc) and the CPU interpreter: every opcode alone
// (float32 both variants, float16), every dtype through the every-opcode program (vector path,
// misaligned input, strided over a grid of many waves), bool inputs throughout.
TEST(FusedGeneratedGpu, EveryOpcodeMatchesTheInterpreters) {
  std::string why;
  if (!gpu_visible(&why)) GTEST_SKIP() << why;
  if (get_backend(DeviceType::GPU).properties(0).name.find("emulator") != std::string::npos)
    GTEST_SKIP() << "the CUDA emulator cannot run a cubin (the host-mode tests above check these "
                    "kernels' semantics)";
  TempCache tc;
  const ScopedEnv mode("SPORE_CUDA_FUSED", nullptr);  // gpu_check.sh's value comes back after
  const Device gpu{DeviceType::GPU, 0};
  struct Run {
    std::string label;
    Builder program{0};
    ops::Tensors inputs;
    DType dt;
    Shape shape;
    bool exact;
  };
  std::vector<Run> runs;
  int seed = 100;
  const Shape shape{kRows, kCols};
  // One kernel per opcode in float32 (both variants) and float16 (contiguous): ~140 NVRTC
  // compiles, ~15 s; every dtype through the every-opcode program (aligned, misaligned, strided).
  for (DType dt : kOutDTypes) {
    for (Opcode op : every_opcode()) {
      if (dt != kFloat32 && dt != kFloat16) break;
      int nin = 0;
      const Builder B = program_of(op, &nin);
      for (int variant = 0; variant < (dt == kFloat32 ? 2 : 1); ++variant) {
        std::mt19937 rng(uint32_t(++seed));
        Run r{fmt::format("{} {} {}", gen::opcode_name(int64_t(op)), dtype_name(dt),
                          variant ? "strided" : "contiguous"),
              B,
              {},
              dt,
              shape,
              f32_ulps(op) == 0};
        for (int k = 0; k < nin; ++k) {
          const Shape s = variant == 0 ? shape
                          : k == 1     ? Shape{kRows, 1}
                          : k == 2     ? Shape{kCols}
                                       : shape;
          r.inputs.push_back(make_input(s, variant == 1 && k == 0, dt, bool_input(op, k),
                                        needs_positive(op) && k == 0, r.exact, rng));
        }
        runs.push_back(std::move(r));
      }
    }
    std::mt19937 rng(uint32_t(++seed));
    // Every opcode at once: aligned (the vector path), a misaligned flat input (offset by one
    // element: the element path), and strided over a grid of many waves.
    const Shape flat{kRows * kCols};
    const Tensor wide = make_input({kRows * kCols + 1}, false, dt, false, false, false, rng);
    runs.push_back(
        {fmt::format("every opcode {} aligned", dtype_name(dt)),
         program_with_every_opcode(),
         {wide.slice(0, 0, kRows * kCols), make_input({}, false, dt, false, true, false, rng),
          make_input(flat, false, dt, true, false, false, rng)},
         dt,
         flat,
         false});
    runs.push_back(
        {fmt::format("every opcode {} misaligned", dtype_name(dt)),
         program_with_every_opcode(),
         {wide.slice(0, 1, kRows * kCols + 1), make_input({}, false, dt, false, true, false, rng),
          make_input(flat, false, dt, true, false, false, rng)},
         dt,
         flat,
         false});
    const Shape big{1 << 20, 3};
    runs.push_back({fmt::format("every opcode {} long", dtype_name(dt)),
                    program_with_every_opcode(),
                    {make_input(big, false, dt, false, false, false, rng),
                     make_input({1, 3}, false, dt, false, true, false, rng),
                     make_input(big, false, dt, true, false, false, rng)},
                    dt,
                    big,
                    false});
  }
  std::map<std::string, int64_t> worst;  // ulps from the GPU interpreter, where not 0
  for (const Run& r : runs) {
    SCOPED_TRACE(r.label);
    ops::Tensors in;
    for (const Tensor& t : r.inputs) in.push_back(t.to(gpu));
    mode.set(nullptr);
    const std::vector<double> interp =
        run_fused(r.program, in, r.dt, r.shape).cpu().to(kFloat64).to_vector<double>();
    mode.set("nvrtc");
    const std::vector<double> generated =
        run_fused(r.program, in, r.dt, r.shape).cpu().to(kFloat64).to_vector<double>();
    mode.set(nullptr);
    const std::vector<double> cpu =
        run_fused(r.program, r.inputs, r.dt, r.shape).to(kFloat64).to_vector<double>();
    ASSERT_EQ(generated.size(), interp.size());
    const double rel = r.dt == kFloat64   ? 1e-12
                       : r.dt == kFloat32 ? 1e-5
                       : r.dt == kFloat16 ? 2e-3
                                          : 1.6e-2;
    for (size_t i = 0; i < generated.size(); ++i) {
      const double g = generated[i], w = interp[i], c = cpu[i];
      // The same formulas through the same compiler back end: equal, but for FMA contraction
      // and the half types' rounding of those.
      const int64_t d = ulp_distance(g, w, r.dt);
      if (d > 0) worst[r.label] = std::max(worst[r.label], d);
      ASSERT_TRUE(d <= (r.exact ? 0 : 2) ||
                  std::fabs(g - w) <= rel * 1e-2 * std::max(1.0, std::fabs(w)))
          << "element " << i << ": generated " << g << ", interpreter " << w;
      ASSERT_TRUE(g == c || std::fabs(g - c) <= rel * std::max(1.0, std::fabs(c)) ||
                  (std::isnan(g) && std::isnan(c)))
          << "element " << i << ": generated " << g << ", CPU " << c;
    }
  }
  int files = 0;
  if (fs::exists(tc.dir))
    for (const auto& e : fs::directory_iterator(tc.dir)) files += e.path().extension() == ".cubin";
  EXPECT_GT(files, 0) << "no kernel went through NVRTC: the interpreter ran every program";
  std::string report;
  for (const auto& [k, v] : worst) report += fmt::format(" {}: {};", k, v);
  std::printf("GPU: ulps from the interpreter (0 elsewhere):%s\n", report.c_str());
  std::printf(
      "GPU: %zu programs through generated kernels (%d compiled), equal to the interpreter\n",
      runs.size(), files);
}

}  // namespace
}  // namespace spore
