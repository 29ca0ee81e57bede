// The operator library's core types: Attrs (an op's attributes), OpDef (inference + gradient rule),
// the kernel registry, and call() which every op function goes through (PyNative dispatch).
//
// To add a primitive: one row in ops.def; SPORE_DEFINE_OP in the family's file (infer, vjp);
// SPORE_KERNEL in backends/cpu/kernels/; a row in tests/ops/op_table.cpp. The registry self-test
// (tests/ops/registry_test.cpp) fails until all four exist.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <functional>

#include "ops/fused_program.h"
#include "spore/tensor.h"

namespace spore {
class Stream;  // backends/backend.h
}
namespace spore::ops {

// The built-in primitives (ops.def). Ops registered at run time (custom ops, spore/custom_op.h)
// take the ids from kCount on; num_ops() counts both.
enum class OpId : uint16_t {
#define SPORE_OP(Name, str, nin, nout, flags, ...) Name,
#include "ops/ops.def"
#undef SPORE_OP
  kCount
};
inline constexpr int kNumOps = int(OpId::kCount);  // built-in primitives
inline constexpr int kMaxOps = 1024;               // built-in + registered at run time
int num_ops();

enum OpFlags : uint32_t {
  kElementwise = 1u << 0,
  kUnary = 1u << 1,
  kBinary = 1u << 2,
  kReduce = 1u << 3,
  kView = 1u << 4,     // output aliases input 0's storage; `view` builds it, no kernel
  kNonDiff = 1u << 5,  // no gradient rule (outputs carry no history)
  kInplace = 1u << 6,  // mutates input 0 (and maybe more); no outputs
  kRandom = 1u << 7,   // draws from the global generator
  kCommutative = 1u << 8,
  kTransfer = 1u << 9,  // output on another device (attrs device_type, device_index): ToDevice
  kBackendPrivate = 1u << 10,  // a backend's own op (backends/<name>/ops.def): only its passes make
                               // it, only its device runs it
};

// How mixed precision treats an op (read by amp's rule, src/amp/policy.cpp).
enum class AmpClass : uint8_t {
  kDefault,  // low precision under O2 / O3, as written under O0 / O1
  kAllow16,  // also low precision under O1 (MindSpore's white list: conv, matmul, relu, gradients)
  kFollow,   // never cast: takes its inputs' dtypes as they come (casts, copies, argmax, one_hot)
  kNorm,     // in a keep_float32 cell (BatchNorm / LayerNorm under O2) computes in float32: its
             // first `amp_activations` inputs keep their dtype, the rest (parameters, statistics)
             // are cast to float32
};

// What the graph passes and amp may assume about an op: set in its ops.def row, read by name
// nowhere else. Fields in declaration order (designated initialisers).
struct OpTraits {
  fused::Opcode fused = fused::Opcode::kNone;  // its FusedElementwise instruction; kNone: not fused
                                               // (kCall: the program calls the op's row kernels)
  bool zero_preserving = false;                // f(0, ..., 0) = 0 (blocked layouts' padding)
  bool idempotent = false;                     // f(f(x)) = f(x)
  AmpClass amp = AmpClass::kDefault;
  int8_t amp_activations = 1;  // kNorm: leading inputs that keep their dtype
};

// ---- attributes ------------------------------------------------------------------------------
using AttrValue = std::variant<int64_t, double, bool, std::vector<int64_t>, DType, std::string>;

class Attrs {
 public:
  Attrs() = default;
  Attrs& set(const char* key, AttrValue v);
  Attrs& set(const char* key, int v) { return set(key, AttrValue(int64_t(v))); }
  Attrs& set(const char* key, int64_t v) { return set(key, AttrValue(v)); }
  Attrs& set(const char* key, float v) { return set(key, AttrValue(double(v))); }
  Attrs& set(const char* key, double v) { return set(key, AttrValue(v)); }
  Attrs& set(const char* key, bool v) { return set(key, AttrValue(v)); }
  Attrs& set(const char* key, DType v) { return set(key, AttrValue(v)); }
  Attrs& set(const char* key, std::vector<int64_t> v) { return set(key, AttrValue(std::move(v))); }
  Attrs& set(const char* key, const char* v) { return set(key, AttrValue(std::string(v))); }
  Attrs& set(const char* key, std::string v) { return set(key, AttrValue(std::move(v))); }
  bool has(const char* key) const { return find(key) != nullptr; }
  int64_t get_int(const char* key) const;
  int64_t get_int(const char* key, int64_t dflt) const;
  double get_float(const char* key) const;  // accepts an int too
  double get_float(const char* key, double dflt) const;
  bool get_bool(const char* key, bool dflt = false) const;
  const std::vector<int64_t>& get_ints(const char* key) const;
  std::vector<int64_t> get_ints(const char* key, std::vector<int64_t> dflt) const;
  DType get_dtype(const char* key) const;
  const std::string& get_string(const char* key) const;
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  std::string str() const;  // "axis=1, keepdims=true"
  size_t hash() const;
  bool operator==(const Attrs& o) const { return items_ == o.items_; }

 private:
  const AttrValue* find(const char* key) const;
  std::vector<std::pair<std::string, AttrValue>> items_;  // sorted by key
};

// ---- definitions -----------------------------------------------------------------------------
struct TensorMeta {
  Shape shape;
  DType dtype = kFloat32;
};
using Metas = std::vector<TensorMeta>;
using Tensors = std::vector<Tensor>;

struct VjpContext {
  const Tensors& inputs;
  const Tensors& outputs;     // saved outputs (no history of their own)
  const Tensors& cotangents;  // one per output: zeros for float outputs nobody used; undefined for
                              // integer/bool outputs
  const Attrs& attrs;
  const Tensor& in(size_t i) const { return inputs[i]; }
  const Tensor& out(size_t i) const { return outputs[i]; }
  const Tensor& g(size_t i = 0) const { return cotangents[i]; }
  // Whether input i wants a gradient: rules skip the work for the others (e.g. conv2d's data
  // gradient for the network input). PyNative: the input requires grad. While tracing (Graph
  // mode) every float input counts, and the graph passes prune the unused gradients.
  bool needs(size_t i) const;
};

// Output metadata from input metadata; throws spore::Error (the dispatcher prefixes "[op] ").
using InferFn = std::function<Metas(const Metas& in, const Attrs& attrs)>;
// One gradient per input (undefined = no gradient). Written with ops, so it runs in both modes.
// The engine sums a gradient down to its input's shape when it comes back broadcast, and casts
// it to the input's dtype, so rules need not do either.
using VjpFn = std::function<Tensors(const VjpContext& ctx)>;
// For kView ops: the aliasing output (metadata only).
using ViewFn = Tensor (*)(const Tensor& in, const Attrs& attrs, const TensorMeta& out);

struct OpRules {
  InferFn infer = nullptr;
  VjpFn vjp = nullptr;
  ViewFn view = nullptr;
};

struct OpDef {
  OpId id;
  const char* name;
  int num_inputs;   // -1: variadic
  int num_outputs;  // -1: decided by infer
  uint32_t flags;
  OpRules rules;
  OpTraits traits;
  bool has(uint32_t f) const { return (flags & f) != 0; }
};

const OpDef& op_def(OpId id);
const char* op_name(OpId id);

namespace detail {
bool register_rules(OpId id, OpRules rules);
}
// Adds a primitive at run time (custom ops: spore/custom_op.h) and returns its id. The name must
// be new; register before other threads run ops (the table grows, it never moves).
OpId register_op(std::string name, int num_inputs, int num_outputs, uint32_t flags, OpTraits traits,
                 OpRules rules);
// The op of that name (built-in or registered), or nullptr.
const OpDef* find_op(std::string_view name);
// SPORE_DEFINE_OP(Exp, {.infer = ..., .vjp = ...}); in the op family's .cpp file.
#define SPORE_DEFINE_OP(Name, ...)                                                                 \
  [[maybe_unused]] static const bool spore_op_rules_##Name = ::spore::ops::detail::register_rules( \
      ::spore::ops::OpId::Name, ::spore::ops::OpRules __VA_ARGS__)

// Autograd's tape (src/autograd, a layer above) registers itself here, so the dispatcher can
// offer it every op it ran, and gradient rules can ask about the engine's zero cotangents.
struct TapeHook {
  bool (*should_record)(const OpDef& def, const Tensors& inputs) = nullptr;
  void (*record)(OpId op, const Attrs& attrs, const Tensors& inputs, Tensors& outputs) = nullptr;
  // True for the engine's all-zero cotangent of an output nobody used (Graph mode: symbolic, so a
  // gradient rule cannot look at its values to skip the work).
  bool (*is_zero_cotangent)(const Tensor& g) = nullptr;
  // The op that produced x on the tape (*op) and its only input; undefined when x has no
  // recorded producer or that producer had other than one input.
  Tensor (*producer_input)(const Tensor& x, OpId* op) = nullptr;
};
void set_tape_hook(const TapeHook& hook);
bool is_zero_cotangent(const Tensor& g);

// The device an op with these inputs runs on: where its inputs are (a 0-d CPU tensor may join
// inputs on another device as a scalar); the current device when it has none. Throws naming
// both devices and the op when the inputs are on two devices.
Device op_device(const OpDef& def, const Tensors& inputs);
// Where a kTransfer op (ToDevice) puts its output: its attributes' device.
Device transfer_target(const Attrs& attrs);

// ---- kernels -----------------------------------------------------------------------------------
struct KernelContext {
  const OpDef& def;
  const Tensors& inputs;  // any strides; same device (a 0-d CPU tensor may join as a scalar)
  Tensors& outputs;       // allocated contiguous by the dispatcher from infer's metadata
  const Attrs& attrs;
  Stream* stream = nullptr;  // the device's current stream: queue the work here (null: the CPU's)
};
using KernelFn = std::function<void(KernelContext& ctx)>;

// A pointwise op's row kernels, for ops whose trait is fused = kCall: out[i] = f(a[i * sa],
// b[i * sb]) with strides 0 (broadcast) or 1; b is null for a unary op. The fused program calls
// them on its blocks (float32 also for float16 / bfloat16 values; float64 for float64).
template <class T>
using RowFn =
    std::function<void(const T* a, int64_t sa, const T* b, int64_t sb, T* out, int64_t n)>;
struct RowKernels {
  RowFn<float> f32;
  RowFn<double> f64;
};

struct KernelEntry {
  KernelFn fn;
  uint32_t dtype_mask = 0;  // bit i set: DType(i) supported (checked on the first input, or output)
  RowKernels rows;          // pointwise ops fused through kCall
  bool supports(DType t) const { return (dtype_mask >> int(t)) & 1u; }
};
namespace detail {
bool register_kernel(OpId id, DeviceType dev, KernelFn fn, std::initializer_list<DType> dtypes,
                     RowKernels rows = {});
void register_kernel_dtype(OpId id, DeviceType dev, DType dtype);  // one more supported dtype
}  // namespace detail
const KernelEntry* find_kernel(OpId id, DeviceType dev);

// SPORE_KERNEL(CPU, Exp, exp_kernel, kFloat32, kFloat64, ...);
// SPORE_KERNEL_ROWS(CPU, Name, kernel, (ops::RowKernels{f32_row, f64_row}), dtypes...): a pointwise
// op whose ops.def trait is fused = kCall also hands the fused program its row kernels.
#define SPORE_KERNEL(Dev, Name, fn, ...)                                                        \
  [[maybe_unused]] static const bool spore_kernel_##Dev##_##Name =                              \
      ::spore::ops::detail::register_kernel(::spore::ops::OpId::Name, ::spore::DeviceType::Dev, \
                                            fn, {__VA_ARGS__})
#define SPORE_KERNEL_ROWS(Dev, Name, fn, rows, ...)                                             \
  [[maybe_unused]] static const bool spore_kernel_##Dev##_##Name =                              \
      ::spore::ops::detail::register_kernel(::spore::ops::OpId::Name, ::spore::DeviceType::Dev, \
                                            fn, {__VA_ARGS__}, rows)

// ---- dispatch -----------------------------------------------------------------------------------
// Runs a primitive: infer, (trace in Graph mode), allocate, kernel, record for autograd.
Tensors call(OpId id, Tensors inputs, Attrs attrs = {});
inline Tensor call1(OpId id, Tensors inputs, Attrs attrs = {}) {
  return std::move(call(id, std::move(inputs), std::move(attrs))[0]);
}

// Graph mode hooks in here: when set, call() hands each op to the tracer instead of running it.
struct TraceHook {
  virtual ~TraceHook() = default;
  virtual Tensors record(const OpDef& def, const Tensors& inputs, const Attrs& attrs,
                         const Metas& outputs) = 0;
};
void set_trace_hook(TraceHook* hook);  // nullptr: PyNative
TraceHook* trace_hook();

inline bool VjpContext::needs(size_t i) const {
  if (i >= inputs.size() || !inputs[i].defined()) return false;
  if (trace_hook()) return is_floating(inputs[i].dtype());
  return inputs[i].requires_grad();
}

// The work PyNative's kernels do while a WorkCounter lives (the strategy search's cost model,
// spore/parallel/auto_parallel.h): floating-point operations of matmul and the convolutions (2 per
// multiply-add), and the bytes every other kernel reads and writes (views none). Every thread's
// ops count; one counter at a time.
struct WorkCount {
  int64_t flops = 0, bytes = 0;
};
class WorkCounter {
 public:
  WorkCounter();
  ~WorkCounter();
  WorkCounter(const WorkCounter&) = delete;
  WorkCounter& operator=(const WorkCounter&) = delete;
  WorkCount total() const;
};

// The profiler's description of an op's operands: "inputs": [...], "outputs": [...] (JSON members).
std::string profile_args(const Metas& in, const Metas& out);

// Shared inference helpers for op families.
Shape broadcast_shapes(const Shape& a, const Shape& b);  // throws with both shapes on mismatch
int64_t normalize_axis(int64_t axis, int64_t rank);      // throws IndexError when out of range
std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes,
                                    int64_t rank);  // sorted, unique

}  // namespace spore::ops
