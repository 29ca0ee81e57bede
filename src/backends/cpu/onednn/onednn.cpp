// oneDNN engine/stream singletons, error reporting and the primitive cache (see onednn.h).
#include "backends/cpu/onednn/onednn.h"

#include "core/parallel.h"

#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>

namespace spore::cpu::onednn {

dnnl::engine& engine() {
  static dnnl::engine e = SPORE_DNNL_CHECK(dnnl::engine(dnnl::engine::kind::cpu, 0),
                                           "oneDNN could not create a CPU engine");
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s = SPORE_DNNL_CHECK(dnnl::stream(engine()), "");
  return s;
}

bool has_type(DType t) { return t == kFloat32 || t == kBFloat16 || t == kFloat16; }

dt to_dnnl(DType t) {
  switch (t) {
    case kFloat32:
      return dt::f32;
    case kBFloat16:
      return dt::bf16;
    case kFloat16:
      return dt::f16;
    case kInt32:
      return dt::s32;
    case kInt8:
      return dt::s8;
    case kUInt8:
      return dt::u8;
    default:
      break;
  }
  SPORE_ASSERT(false, "dtype ", dtype_name(t), " has no oneDNN data type");
}

dnnl::primitive_attr default_attr() {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

const char* status_str(int status) {
  switch (dnnl_status_t(status)) {
    case dnnl_success:
      return "success";
    case dnnl_out_of_memory:
      return "out_of_memory";
    case dnnl_invalid_arguments:
      return "invalid_arguments";
    case dnnl_unimplemented:
      return "unimplemented";
    case dnnl_iterator_ends:
      return "iterator_ends";
    case dnnl_runtime_error:
      return "runtime_error";
    case dnnl_not_required:
      return "not_required";
    default:
      return "unknown status";
  }
}

void throw_dnnl_error(const char* call, int status, const char* what, const char* file, int line,
                      const char* hint) {
  std::string msg =
      std::string("oneDNN call failed: ") + call + "\n  status: " + status_str(status);
  if (what && *what) msg += std::string(" (") + what + ")";
  msg += std::string("\n  at ") + file + ":" + std::to_string(line);
  if (hint && *hint) {
    msg += std::string("\n  hint: ") + hint;
  } else if (dnnl_status_t(status) == dnnl_unimplemented) {
    msg +=
        "\n  hint: this CPU or oneDNN build has no implementation for these shapes/dtypes; "
        "try float32";
  }
  SPORE_THROW(dnnl_status_t(status) == dnnl_unimplemented ? ErrorKind::NotImplemented
                                                          : ErrorKind::RuntimeError,
              msg);
}

namespace {
std::atomic<size_t> g_blocked_arg_reorders{0};
}
size_t blocked_arg_reorders() { return g_blocked_arg_reorders.load(); }

size_t CacheKey::hash() const {
  size_t h = v_.size();
  for (int64_t e : v_) h ^= std::hash<int64_t>()(e) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

Compiled::Compiled(dnnl::primitive prim, const dnnl::primitive_desc_base& pd,
                   std::vector<ArgSpec> specs)
    : prim_(std::move(prim)), impl_(pd.impl_info_str()) {
  dnnl::engine& eng = engine();
  for (const ArgSpec& s : specs) {
    Arg a;
    a.arg = s.arg;
    a.output = s.output;
    a.accumulate = s.accumulate;
    a.user = dnnl::memory(s.user, eng, DNNL_MEMORY_NONE);
    a.user_blocked =
        s.user.data.format_kind == dnnl_blocked && s.user.data.format_desc.blocking.inner_nblks > 0;
    const dnnl::memory::desc pmd = pd.query_md(dnnl::query::exec_arg_md, s.arg);
    if (pmd != s.user) {
      a.prim = dnnl::memory(pmd, eng, DNNL_MEMORY_NONE);
      a.prim_bytes = pmd.get_size();
      auto rpd = s.output ? dnnl::reorder::primitive_desc(eng, pmd, eng, s.user)
                          : dnnl::reorder::primitive_desc(eng, s.user, eng, pmd);
      a.reorder = dnnl::reorder(rpd);
      if (s.accumulate)
        a.accum_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, s.user, eng, pmd));
    }
    args_.push_back(std::move(a));
  }
  const dnnl::memory::desc smd = pd.scratchpad_desc();
  scratch_bytes_ = smd.get_size();
  if (scratch_bytes_) scratch_ = dnnl::memory(smd, eng, DNNL_MEMORY_NONE);
  // Memory objects persist, so the argument map is built once; run() only rebinds pointers.
  for (const Arg& a : args_) exec_args_.emplace(a.arg, a.prim ? a.prim : a.user);
  if (scratch_bytes_) exec_args_.emplace(DNNL_ARG_SCRATCHPAD, scratch_);
}

std::vector<size_t> Compiled::arg_bytes() const {
  std::vector<size_t> r;
  for (const Arg& a : args_) r.push_back(a.user.get_desc().get_size());
  return r;
}

void Compiled::run(const void* const* ptr_array, size_t n, const void* dst_init) {
  SPORE_ASSERT(n == args_.size(), "oneDNN primitive run with ", n, " buffers, expected ",
               args_.size());
  use_fp_mode_on_pool();  // oneDNN's threads are the OpenMP pool's: flush-to-zero as ours
  std::lock_guard<std::mutex> lock(mu_);
  dnnl::stream& s = stream();
  // Temporaries live until the end of this call; the allocator caches them between calls.
  Tensor temps[8];
  for (size_t i = 0; i < n; ++i) {
    const void* p = ptr_array[i];
    Arg& a = args_[i];
    a.user.set_data_handle(const_cast<void*>(p));
    if (a.prim) {
      SPORE_ASSERT(i < 7, "too many reordered oneDNN arguments");
      temps[i] = Tensor::empty({int64_t(a.prim_bytes)}, kUInt8);
      a.prim.set_data_handle(temps[i].data_ptr());
      if (a.user_blocked) g_blocked_arg_reorders.fetch_add(1, std::memory_order_relaxed);
      if (!a.output) SPORE_DNNL_CHECK(a.reorder.execute(s, a.user, a.prim), "input reorder failed");
    }
    if (a.accumulate && dst_init) {
      if (a.prim) {  // reorder the initial contents straight into the blocked buffer
        SPORE_ASSERT(a.accum_reorder, "accumulating argument without its reorder");
        a.user.set_data_handle(const_cast<void*>(dst_init));
        SPORE_DNNL_CHECK(a.accum_reorder.execute(s, a.user, a.prim), "residual reorder failed");
        a.user.set_data_handle(const_cast<void*>(p));
      } else if (dst_init != p) {
        std::memcpy(const_cast<void*>(p), dst_init, a.user.get_desc().get_size());
      }
    }
  }
  Tensor scratch;
  if (scratch_bytes_) {
    scratch = Tensor::empty({int64_t(scratch_bytes_)}, kUInt8);
    scratch_.set_data_handle(scratch.data_ptr());
  }
  SPORE_DNNL_CHECK(prim_.execute(s, exec_args_), "primitive execution failed");
  for (Arg& a : args_)
    if (a.prim && a.output)
      SPORE_DNNL_CHECK(a.reorder.execute(s, a.prim, a.user), "output reorder failed");
  s.wait();
}

namespace {
// The activation names, in the order their codes go into cache keys.
constexpr const char* kActs[] = {"",     "relu",      "leaky_relu", "sigmoid", "tanh",
                                 "gelu", "gelu_tanh", "silu",       "clamp"};
int act_code(const ops::Attrs& a) {
  const std::string act = a.has("act") ? a.get_string("act") : std::string();
  for (int i = 0; i < int(std::size(kActs)); ++i)
    if (act == kActs[i]) return i;
  SPORE_THROW(ErrorKind::ValueError, "unknown fused activation '", act,
              "'; expected relu, leaky_relu, sigmoid, tanh, gelu, gelu_tanh, silu or clamp");
}
}  // namespace

std::vector<int> set_post_ops(dnnl::primitive_attr& attr, const ops::Attrs& a,
                              const dnnl::memory::desc* per_channel) {
  dnnl::post_ops po;
  std::vector<int> binary_args;
  if (a.get_bool("has_scale", false)) {
    SPORE_ASSERT(per_channel, "has_scale needs the per-channel descriptor");
    po.append_binary(dnnl::algorithm::binary_mul, *per_channel);
    po.append_binary(dnnl::algorithm::binary_add, *per_channel);
    binary_args = {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                   DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1};
  }
  if (a.get_bool("has_residual", false)) po.append_sum(1.0f);
  const float alpha = float(a.get_float("alpha", 0.0)), beta = float(a.get_float("beta", 0.0));
  using alg = dnnl::algorithm;
  switch (act_code(a)) {
    case 0:
      break;
    case 1:
      po.append_eltwise(1.0f, alg::eltwise_relu, 0.0f, 0.0f);
      break;
    case 2:
      po.append_eltwise(1.0f, alg::eltwise_relu, alpha, 0.0f);
      break;  // slope alpha below 0
    case 3:
      po.append_eltwise(1.0f, alg::eltwise_logistic, 0.0f, 0.0f);
      break;
    case 4:
      po.append_eltwise(1.0f, alg::eltwise_tanh, 0.0f, 0.0f);
      break;
    case 5:
      po.append_eltwise(1.0f, alg::eltwise_gelu_erf, 0.0f, 0.0f);
      break;
    case 6:
      po.append_eltwise(1.0f, alg::eltwise_gelu_tanh, 0.0f, 0.0f);
      break;
    case 7:
      po.append_eltwise(1.0f, alg::eltwise_swish, 1.0f, 0.0f);
      break;  // x * sigmoid(1 x)
    case 8:
      po.append_eltwise(1.0f, alg::eltwise_clip, alpha, beta);
      break;  // min(max(x, a), b)
  }
  attr.set_post_ops(po);
  return binary_args;
}

void add_post_op_key(CacheKey& key, const ops::Attrs& a) {
  float ab[2] = {float(a.get_float("alpha", 0.0)), float(a.get_float("beta", 0.0))};
  int32_t bits[2];
  std::memcpy(bits, ab, sizeof bits);
  key.add(int64_t(a.get_bool("has_residual", false))).add(int64_t(a.get_bool("has_scale", false)));
  key.add(act_code(a)).add(bits[0]).add(bits[1]);
}

Activation activation_of(const ops::Attrs& a) {
  return {act_code(a), a.get_float("alpha", 0.0), a.get_float("beta", 0.0)};
}

double Activation::operator()(double x) const {
  switch (code) {
    case 1:
      return x > 0 ? x : 0.0;
    case 2:
      return x > 0 ? x : alpha * x;
    case 3:
      return 1.0 / (1.0 + std::exp(-x));
    case 4:
      return std::tanh(x);
    case 5:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case 6:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case 7:
      return x / (1.0 + std::exp(-x));
    case 8:
      return std::min(std::max(x, alpha), beta);
    default:
      return x;
  }
}

namespace {
struct KeyHash {
  size_t operator()(const CacheKey& k) const { return k.hash(); }
};
std::mutex g_mu;
std::unordered_map<CacheKey, std::shared_ptr<Compiled>, KeyHash>& cache_map() {
  static auto* m = new std::unordered_map<CacheKey, std::shared_ptr<Compiled>, KeyHash>();
  return *m;  // leaked on purpose: primitives must not be destroyed after oneDNN's own statics
}
}  // namespace

std::shared_ptr<Compiled> cached(const CacheKey& key,
                                 const std::function<std::shared_ptr<Compiled>()>& make) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = cache_map().find(key);
    if (it != cache_map().end()) return it->second;
  }
  std::shared_ptr<Compiled> c = make();  // outside the lock: creating a primitive takes a while
  std::lock_guard<std::mutex> lock(g_mu);
  return cache_map().emplace(key, std::move(c)).first->second;
}

size_t cache_size() {
  std::lock_guard<std::mutex> lock(g_mu);
  return cache_map().size();
}

}  // namespace spore::cpu::onednn
