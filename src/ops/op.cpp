// The op table (from ops.def), attribute storage, the kernel registry, and call(): PyNative
// dispatch of one primitive (infer -> trace or run -> record for autograd).
#include "ops/op.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>

#include "backends/backend.h"
#include "ops/precision.h"
#include "ops/sharding.h"
#include "spore/context.h"
#include "spore/profiler.h"

namespace spore::ops {

// ---- Attrs -------------------------------------------------------------------------------------
Attrs& Attrs::set(const char* key, AttrValue v) {
  auto it = std::lower_bound(items_.begin(), items_.end(), key,
                             [](const auto& kv, const char* k) { return kv.first < k; });
  if (it != items_.end() && it->first == key)
    it->second = std::move(v);
  else
    items_.insert(it, {key, std::move(v)});
  return *this;
}
const AttrValue* Attrs::find(const char* key) const {
  for (const auto& kv : items_)
    if (kv.first == key) return &kv.second;
  return nullptr;
}
#define SPORE_ATTR_MISSING(key) \
  SPORE_ASSERT(false, "missing attribute '", key, "' (have: ", str(), ")")
int64_t Attrs::get_int(const char* key) const {
  const AttrValue* v = find(key);
  if (!v) SPORE_ATTR_MISSING(key);
  if (auto* b = std::get_if<bool>(v)) return *b;
  SPORE_ASSERT(std::holds_alternative<int64_t>(*v), "attribute '", key, "' is not an int");
  return std::get<int64_t>(*v);
}
int64_t Attrs::get_int(const char* key, int64_t dflt) const {
  return has(key) ? get_int(key) : dflt;
}
double Attrs::get_float(const char* key) const {
  const AttrValue* v = find(key);
  if (!v) SPORE_ATTR_MISSING(key);
  if (auto* i = std::get_if<int64_t>(v)) return double(*i);
  SPORE_ASSERT(std::holds_alternative<double>(*v), "attribute '", key, "' is not a float");
  return std::get<double>(*v);
}
double Attrs::get_float(const char* key, double dflt) const {
  return has(key) ? get_float(key) : dflt;
}
bool Attrs::get_bool(const char* key, bool dflt) const {
  const AttrValue* v = find(key);
  if (!v) return dflt;
  if (auto* i = std::get_if<int64_t>(v)) return *i != 0;
  SPORE_ASSERT(std::holds_alternative<bool>(*v), "attribute '", key, "' is not a bool");
  return std::get<bool>(*v);
}
const std::vector<int64_t>& Attrs::get_ints(const char* key) const {
  const AttrValue* v = find(key);
  if (!v) SPORE_ATTR_MISSING(key);
  SPORE_ASSERT(std::holds_alternative<std::vector<int64_t>>(*v), "attribute '", key,
               "' is not a list");
  return std::get<std::vector<int64_t>>(*v);
}
std::vector<int64_t> Attrs::get_ints(const char* key, std::vector<int64_t> dflt) const {
  return has(key) ? get_ints(key) : dflt;
}
DType Attrs::get_dtype(const char* key) const {
  const AttrValue* v = find(key);
  if (!v) SPORE_ATTR_MISSING(key);
  SPORE_ASSERT(std::holds_alternative<DType>(*v), "attribute '", key, "' is not a dtype");
  return std::get<DType>(*v);
}
const std::string& Attrs::get_string(const char* key) const {
  const AttrValue* v = find(key);
  if (!v) SPORE_ATTR_MISSING(key);
  SPORE_ASSERT(std::holds_alternative<std::string>(*v), "attribute '", key, "' is not a string");
  return std::get<std::string>(*v);
}
std::string Attrs::str() const {
  std::string s;
  for (const auto& [k, v] : items_) {
    if (!s.empty()) s += ", ";
    s += k + "=";
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::vector<int64_t>>)
            s += shape_str(x);
          else if constexpr (std::is_same_v<T, DType>)
            s += dtype_name(x);
          else if constexpr (std::is_same_v<T, std::string>)
            s += "'" + x + "'";
          else if constexpr (std::is_same_v<T, bool>)
            s += x ? "true" : "false";
          else
            s += std::to_string(x);
        },
        v);
  }
  return s;
}
size_t Attrs::hash() const {
  size_t h = items_.size();
  auto combine = [&](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  for (const auto& [k, v] : items_) {
    combine(std::hash<std::string>()(k));
    combine(v.index());
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            for (int64_t e : x) combine(std::hash<int64_t>()(e));
          } else if constexpr (std::is_same_v<T, DType>) {
            combine(size_t(x));
          } else {
            combine(std::hash<T>()(x));
          }
        },
        v);
  }
  return h;
}

// ---- op table ----------------------------------------------------------------------------------
namespace {
using F = fused::Opcode;
using A = AmpClass;
// Fixed capacity, so a registration at run time never moves an OpDef others hold.
struct Table {
  std::array<OpDef, kMaxOps> defs{{
#define SPORE_OP(Name, str, nin, nout, flags, ...) \
  {OpId::Name, str, nin, nout, uint32_t(flags), {}, OpTraits{__VA_ARGS__}},
#include "ops/ops.def"
#undef SPORE_OP
  }};
  std::atomic<int> count{kNumOps};
  std::deque<std::string> names;  // of the ops registered at run time (stable addresses)
  std::mutex mutex;               // serialises registrations
};
Table& table() {
  static Table t;
  return t;
}
std::array<std::array<KernelEntry, kNumDeviceTypes>, kMaxOps>& kernels() {
  static std::array<std::array<KernelEntry, kNumDeviceTypes>, kMaxOps> k{};
  return k;
}
// Per thread: a graph traced on one thread must not capture ops other threads (data pipeline
// workers) run eagerly meanwhile.
thread_local TraceHook* g_trace_hook = nullptr;
thread_local const PrecisionPolicy* g_precision = nullptr;
thread_local ShardingHook* g_sharding = nullptr;
}  // namespace

int num_ops() { return table().count.load(std::memory_order_acquire); }
const OpDef& op_def(OpId id) {
  SPORE_ASSERT(int(id) < num_ops(), "op id ", int(id), " is not registered");
  return table().defs[size_t(id)];
}
const char* op_name(OpId id) { return op_def(id).name; }

const OpDef* find_op(std::string_view name) {
  const Table& t = table();
  for (int i = 0, n = num_ops(); i < n; ++i)
    if (name == t.defs[size_t(i)].name) return &t.defs[size_t(i)];
  return nullptr;
}

OpId register_op(std::string name, int num_inputs, int num_outputs, uint32_t flags, OpTraits traits,
                 OpRules rules) {
  Table& t = table();
  const std::lock_guard lock(t.mutex);
  SPORE_CHECK(!name.empty(), "[register_op] an op needs a name");
  SPORE_CHECK(!find_op(name), "[register_op] an op named '", name,
              "' already exists; give the custom op another name");
  SPORE_CHECK(rules.infer, "[register_op] op '", name, "' needs an inference rule (infer)");
  SPORE_CHECK((flags & kNonDiff) || rules.vjp, "[register_op] op '", name,
              "' needs a gradient rule (bprop), or mark it non-differentiable");
  const int i = t.count.load();
  SPORE_CHECK(i < kMaxOps, "[register_op] cannot register '", name, "': the op table holds ",
              kMaxOps, " ops");
  t.names.push_back(std::move(name));
  t.defs[size_t(i)] = OpDef{OpId(i), t.names.back().c_str(), num_inputs, num_outputs,
                            flags,   std::move(rules),       traits};
  t.count.store(i + 1, std::memory_order_release);
  return OpId(i);
}

namespace detail {
bool register_rules(OpId id, OpRules rules) {
  table().defs[size_t(id)].rules = std::move(rules);
  return true;
}
bool register_kernel(OpId id, DeviceType dev, KernelFn fn, std::initializer_list<DType> dtypes,
                     RowKernels rows) {
  KernelEntry& e = kernels()[size_t(id)][size_t(dev)];
  e.fn = std::move(fn);
  e.rows = std::move(rows);
  for (DType t : dtypes) e.dtype_mask |= 1u << int(t);
  return true;
}
void register_kernel_dtype(OpId id, DeviceType dev, DType dtype) {
  kernels()[size_t(id)][size_t(dev)].dtype_mask |= 1u << int(dtype);
}
}  // namespace detail

const KernelEntry* find_kernel(OpId id, DeviceType dev) {
  const KernelEntry& e = kernels()[size_t(id)][size_t(dev)];
  return e.fn ? &e : nullptr;
}

namespace {
TapeHook g_tape;  // set once at load time by src/autograd
}
void set_tape_hook(const TapeHook& hook) { g_tape = hook; }
bool is_zero_cotangent(const Tensor& g) {
  return g_tape.is_zero_cotangent && g_tape.is_zero_cotangent(g);
}

void set_trace_hook(TraceHook* hook) { g_trace_hook = hook; }
TraceHook* trace_hook() { return g_trace_hook; }

const PrecisionPolicy* current_precision() { return g_precision; }
void set_current_precision(const PrecisionPolicy* p) { g_precision = p; }
PrecisionScope::PrecisionScope(const PrecisionPolicy* p) : prev_(g_precision) { g_precision = p; }
PrecisionScope::~PrecisionScope() { g_precision = prev_; }

ShardingHook* current_sharding() { return g_sharding; }
ShardingHookScope::ShardingHookScope(ShardingHook* h) : prev_(g_sharding) { g_sharding = h; }
ShardingHookScope::~ShardingHookScope() { g_sharding = prev_; }

// ---- shared inference helpers -------------------------------------------------------------------
Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    SPORE_CHECK(da == db || da == 1 || db == 1, "shapes ", shape_str(a), " and ", shape_str(b),
                " cannot be broadcast together (dimension ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}
int64_t normalize_axis(int64_t axis, int64_t rank) {
  const int64_t r = std::max<int64_t>(rank, 1);  // a 0-d tensor accepts axis 0 / -1
  SPORE_CHECK_INDEX(axis >= -r && axis < r, "axis ", axis, " is out of range for a tensor of rank ",
                    rank, " (expected ", -r, " <= axis < ", r, ")");
  return axis < 0 ? axis + r : axis;
}
std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t a : axes) out.push_back(normalize_axis(a, rank));
  std::sort(out.begin(), out.end());
  SPORE_CHECK_INDEX(std::adjacent_find(out.begin(), out.end()) == out.end(), "repeated axis in ",
                    shape_str(axes));
  return out;
}

// ---- dispatch -----------------------------------------------------------------------------------
std::string profile_args(const Metas& in, const Metas& out) {
  auto list = [](const Metas& ms) {
    std::string s = "[";
    for (size_t i = 0; i < ms.size(); ++i)
      s += (i ? ", \"" : "\"") + std::string(dtype_name(ms[i].dtype)) + shape_str(ms[i].shape) +
           "\"";
    return s + "]";
  };
  return "\"inputs\": " + list(in) + ", \"outputs\": " + list(out);
}

// A 0-d host tensor next to tensors on a device joins the op as a scalar (PyTorch's rule), so
// `x * 2.0` uploads nothing; the device's kernels read it from the host.
static bool is_host_scalar(const Tensor& t) {
  return t.dim() == 0 && t.device().type == DeviceType::CPU;
}

Device op_device(const OpDef& def, const Tensors& inputs) {
  if (inputs.empty()) return current_device();
  size_t at = 0;  // the first input that decides: not a host scalar, if there is one
  while (at < inputs.size() && (!inputs[at].defined() || is_host_scalar(inputs[at]))) ++at;
  if (at == inputs.size()) return inputs[0].defined() ? inputs[0].device() : current_device();
  const Device device = inputs[at].device();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || inputs[i].device() == device || is_host_scalar(inputs[i])) continue;
    SPORE_THROW(ErrorKind::RuntimeError, "[", def.name,
                "] expected all inputs on one device, but input ", at, " is on ", to_string(device),
                " and input ", i, " is on ", to_string(inputs[i].device()),
                ". Move one with .to(device) first (only a 0-d CPU tensor may join an op on "
                "another device, "
                "as a scalar).");
  }
  return device;
}

namespace {
// WorkCounter (op.h): totals over every thread.
std::atomic<bool> g_count_work{false};
std::atomic<int64_t> g_work_flops{0}, g_work_bytes{0};

int64_t per_output_channel(const Tensor& w) {
  return w.numel() / std::max<int64_t>(w.shape()[0], 1);
}

void count_work(OpId id, const Tensors& in, const Tensors& out) {
  int64_t flops = 0;
  switch (id) {
    case OpId::Matmul:  // [..., m, k] x [..., k, n]: k multiply-adds per output element
      flops = 2 * out[0].numel() * in[0].shape().back();
      break;
    case OpId::Conv2d:              // (x, w[, b]): Cin/groups x kh x kw per output element
    case OpId::Conv2dBackwardData:  // (dy, w): the same per element of dy
      flops = 2 * (id == OpId::Conv2d ? out[0].numel() : in[0].numel()) * per_output_channel(in[1]);
      break;
    case OpId::Conv2dBackwardWeight:  // (dy, x) -> dw: as many per element of dy
      flops = 2 * in[0].numel() * per_output_channel(out[0]);
      break;
    default:
      break;
  }
  if (flops > 0) {
    g_work_flops += flops;
    return;
  }
  int64_t bytes = 0;
  for (const Tensor& t : in)
    if (t.defined()) bytes += int64_t(t.nbytes());
  for (const Tensor& t : out) bytes += int64_t(t.nbytes());
  g_work_bytes += bytes;
}

Tensors dispatch(OpId id, Tensors inputs, Attrs attrs) {
  const OpDef& def = op_def(id);
  SPORE_ASSERT(def.rules.infer, "op '", def.name, "' has no inference rule");
  SPORE_CHECK(def.num_inputs < 0 || int(inputs.size()) == def.num_inputs, "[", def.name,
              "] expected ", def.num_inputs, " inputs, got ", inputs.size());
  Metas in_meta;
  in_meta.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    SPORE_CHECK(inputs[i].defined(), "[", def.name, "] input ", i, " is an undefined tensor");
    in_meta.push_back({inputs[i].shape(), inputs[i].dtype()});
  }
  const Device device = op_device(def, inputs);
  Metas out_meta;
  try {
    out_meta = def.rules.infer(in_meta, attrs);
  } catch (const Error& e) {
    if (std::strncmp(e.what(), "[", 1) == 0) throw;
    throw Error(e.kind(), std::string("[") + def.name + "] " + e.what());
  }

  if (g_trace_hook) return g_trace_hook->record(def, inputs, attrs, out_meta);

  Tensors outputs;
  if (def.has(kView)) {
    outputs.push_back(def.rules.view(inputs[0], attrs, out_meta[0]));
  } else {
    const KernelEntry* k = find_kernel(id, device.type);
    if (!k) {
      get_backend(device.type);  // throws "Unsupported device target" when the backend is absent
      SPORE_THROW(ErrorKind::NotImplemented, "[", def.name, "] has no kernel for device ",
                  device_type_name(device.type));
    }
    const DType key = !inputs.empty()    ? inputs[0].dtype()
                      : out_meta.empty() ? kFloat32
                                         : out_meta[0].dtype;
    if (!k->supports(key)) {
      std::string list;
      for (int t = 0; t < kNumDTypes; ++t)
        if (k->supports(DType(t)))
          list += (list.empty() ? "" : ", ") + std::string(dtype_name(DType(t)));
      SPORE_THROW(ErrorKind::TypeError, "[", def.name, "] does not support dtype ", dtype_name(key),
                  " on ", device_type_name(device.type), "; supported: ", list);
    }
    std::string prof_args;  // the profiler's shapes, built only while it records
    profiling::Span span("op", def.name, &prof_args);
    outputs.reserve(out_meta.size());
    int64_t bytes = 0;
    const Device out_device = def.has(kTransfer) ? transfer_target(attrs) : device;
    for (const TensorMeta& m : out_meta) {
      outputs.push_back(Tensor::empty(m.shape, m.dtype, out_device));
      bytes += int64_t(outputs.back().nbytes());
    }
    if (span.active()) {
      prof_args = profile_args(in_meta, out_meta);
      span.set_bytes(bytes);
    }
    // Tensors a kernel makes for itself (factories inside it) go where it runs.
    const DeviceGuard here(device);
    KernelContext ctx{def, inputs, outputs, attrs, &current_stream(device)};
    k->fn(ctx);
    if (g_count_work.load(std::memory_order_relaxed)) count_work(id, inputs, outputs);
  }
  if (g_tape.should_record && g_tape.should_record(def, inputs))
    g_tape.record(id, attrs, inputs, outputs);
  return outputs;
}

// PyNative mixed precision (ops/precision.h): casts the inputs the current policy names, runs the
// op, and under O1 casts low-precision outputs back to float32. The casts are ordinary Cast ops, so
// the tape records them and float32 parameters get float32 gradients. Everything runs with the
// policy suspended: no recursion, and the tape nodes carry O0, so backward ops simply follow the
// dtypes of the tensors they were given (the forward's precision).
bool is_low_or_f32(DType t) { return t == kFloat16 || t == kBFloat16 || t == kFloat32; }

Tensor to_compute(const Tensor& x, DType c) {
  if (x.dtype() == c) return x;
  // A float32 tensor that is a widening cast of a `c` tensor (binary ops promote bf16 + f32 to
  // f32 first): narrowing it back gives the source exactly, so use the source and let the f32
  // copy die instead of being kept by the tape.
  if (x.dtype() == kFloat32 && x.impl().grad_fn && g_tape.producer_input) {
    OpId op{};
    const Tensor src = g_tape.producer_input(x, &op);
    if (op == OpId::Cast && src.defined() && src.dtype() == c) return src;
  }
  return dispatch(OpId::Cast, {x}, Attrs().set("dtype", c))[0];
}

Tensors autocast_call(OpId id, Tensors inputs, Attrs attrs, const PrecisionPolicy& p) {
  const OpPrecision pr = p.decide(id);
  const PrecisionScope suspended(nullptr);
  if (!pr.cast) return dispatch(id, std::move(inputs), std::move(attrs));
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor& x = inputs[i];
    if (i < 32 && ((pr.input_mask >> i) & 1u) && x.defined() && is_low_or_f32(x.dtype()))
      x = to_compute(x, pr.compute);
  }
  Tensors out = dispatch(id, std::move(inputs), std::move(attrs));
  if (pr.outputs_to_float32)
    for (Tensor& y : out)
      if (y.dtype() == kFloat16 || y.dtype() == kBFloat16)
        y = dispatch(OpId::Cast, {y}, Attrs().set("dtype", kFloat32))[0];
  return out;
}
}  // namespace

WorkCounter::WorkCounter() {
  SPORE_CHECK(!g_count_work.exchange(true),
              "[WorkCounter] one counts already; count one at a time");
  g_work_flops = 0;
  g_work_bytes = 0;
}
WorkCounter::~WorkCounter() { g_count_work = false; }
WorkCount WorkCounter::total() const { return {g_work_flops, g_work_bytes}; }

Tensors call(OpId id, Tensors inputs, Attrs attrs) {
  // Operator-level parallelism (ops/sharding.h): the hook runs sharded ops on local pieces.
  if (ShardingHook* h = g_sharding) [[unlikely]] {
    std::optional<Tensors> out;
    {
      const ShardingHookScope suspended(nullptr);
      out = h->call(id, inputs, attrs);
    }
    if (out) return std::move(*out);
  }
  // Graph mode records ops as traced (its pass inserts the amp casts); the no-policy path pays
  // one thread-local read.
  if (!g_trace_hook) {
    if (const PrecisionPolicy* p = g_precision) [[unlikely]]
      return autocast_call(id, std::move(inputs), std::move(attrs), *p);
  }
  return dispatch(id, std::move(inputs), std::move(attrs));
}

}  // namespace spore::ops
