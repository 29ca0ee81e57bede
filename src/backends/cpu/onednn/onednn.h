// oneDNN glue for the CPU kernels: the engine and stream, dtype mapping, SPORE_DNNL_CHECK, and a
// cache of ready-to-run primitives keyed by (op, shapes, strides, dtypes, attributes).
//
// A cached entry (Compiled) owns the primitive, the user-layout and primitive-layout memory
// descriptors of each argument, and the reorders between them (created once, at first use).
// Running it binds the caller's pointers, reorders inputs into temporaries when the primitive
// chose a blocked layout, executes, and reorders outputs back. Temporaries and the scratchpad
// (scratchpad_mode::user) come from Spore's caching allocator, so a steady training loop makes no
// system allocation here.
//
// To add a oneDNN-backed kernel: build a CacheKey from everything that changes the primitive, and
// in the make callback create the primitive_desc (with primitive_attr from default_attr()) and
// return std::make_shared<Compiled>(primitive, pd, {args...}).
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/op.h"
#include "spore/tensor.h"

namespace spore::cpu::onednn {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

dnnl::engine& engine();
dnnl::stream& stream();  // one per thread

bool has_type(DType t);  // float32, bfloat16, float16
dt to_dnnl(DType t);
inline dims to_dims(const Shape& s) { return dims(s.begin(), s.end()); }
// The format of Graph mode's blocked activations (ops/blocked.h) with L lanes: nChw8c / nChw16c.
inline tag blocked_tag(int64_t lanes) { return lanes == 8 ? tag::aBcd8b : tag::aBcd16b; }
// Scratchpad owned by the caller; every Spore primitive uses it.
dnnl::primitive_attr default_attr();

// Throws spore::Error for a failed oneDNN call (C++ API exception or C API status).
[[noreturn]] void throw_dnnl_error(const char* call, int status, const char* what, const char* file,
                                   int line, const char* hint);
const char* status_str(int status);

class CacheKey {
 public:
  CacheKey& add(int64_t v) {
    v_.push_back(v);
    return *this;
  }
  CacheKey& add(const std::vector<int64_t>& s) {
    v_.push_back(int64_t(s.size()));
    v_.insert(v_.end(), s.begin(), s.end());
    return *this;
  }
  CacheKey& add(const Tensor& t) {  // shape, strides and dtype
    add(t.shape());
    add(t.strides());
    return add(int64_t(t.dtype()));
  }
  bool operator==(const CacheKey& o) const { return v_ == o.v_; }
  size_t hash() const;
  const std::vector<int64_t>& values() const { return v_; }

 private:
  std::vector<int64_t> v_;
};

// One argument of a primitive as the caller holds it: its DNNL_ARG_*, the user-side layout, and
// whether the primitive writes it.
struct ArgSpec {
  int arg;
  dnnl::memory::desc user;
  bool output = false;
  // An output the primitive accumulates into (a sum post-op): run()'s `dst_init` is copied (or
  // reordered) into the primitive's buffer before it executes.
  bool accumulate = false;
};

class Compiled {
 public:
  Compiled(dnnl::primitive prim, const dnnl::primitive_desc_base& pd, std::vector<ArgSpec> args);
  // ptrs: the caller's buffers, in the order of the ArgSpecs given at construction. dst_init:
  // the initial contents of the `accumulate` output (same layout as that output), if any.
  void run(std::initializer_list<const void*> ptrs, const void* dst_init = nullptr) {
    run(ptrs.begin(), ptrs.size(), dst_init);
  }
  void run(const void* const* ptrs, size_t n, const void* dst_init = nullptr);
  // The user-side byte sizes of the arguments, in ArgSpec order (for benchmarking a primitive).
  std::vector<size_t> arg_bytes() const;
  const std::string& impl() const { return impl_; }  // oneDNN's implementation name

 private:
  struct Arg {
    int arg;
    bool output, accumulate;
    bool user_blocked = false;  // the caller's layout has inner blocks (nChw16c / nChw8c)
    dnnl::memory user, prim;    // prim is empty when the layouts agree
    dnnl::reorder reorder;
    dnnl::reorder accum_reorder;  // accumulate outputs: user -> prim, for the initial contents
    size_t prim_bytes = 0;
  };
  dnnl::primitive prim_;
  std::string impl_;
  std::vector<Arg> args_;
  dnnl::memory scratch_;
  size_t scratch_bytes_ = 0;
  std::unordered_map<int, dnnl::memory> exec_args_;
  std::mutex mu_;  // memory objects are rebound per call
};

// ---- post-ops (Conv2dFused / MatmulFused) -------------------------------------------------------
// The fused ops' attributes: has_scale (conv only: a per-channel scale then shift, two binary
// post-ops: BatchNorm folded in without rewriting the weight), has_residual (a sum post-op:
// dst += residual) and act ("" / "relu" / "leaky_relu" / "sigmoid" / "tanh" / "gelu" /
// "gelu_tanh" / "silu" / "clamp") with alpha / beta (leaky_relu's slope; clamp's bounds).
// Appends the post-ops to attr (per_channel: the (1, C, 1, 1) descriptor of scale and shift) and
// returns the execution argument ids of the binary post-ops' inputs (scale, shift), in order.
std::vector<int> set_post_ops(dnnl::primitive_attr& attr, const ops::Attrs& a,
                              const dnnl::memory::desc* per_channel = nullptr);
void add_post_op_key(CacheKey& key, const ops::Attrs& a);
// The fused activation decoded once from the attributes (act, alpha, beta), applied in double
// precision (the float64 fallback, the unfused epilogue loops and tests).
struct Activation {
  int code = 0;  // index into the activation names; 0: none
  double alpha = 0, beta = 0;
  double operator()(double x) const;
};
Activation activation_of(const ops::Attrs& a);

// Returns the cached entry for key, creating it with make() on the first call.
std::shared_ptr<Compiled> cached(const CacheKey& key,
                                 const std::function<std::shared_ptr<Compiled>()>& make);
size_t cache_size();  // number of cached primitives (tests check reuse)
// Reorders run by Compiled::run on arguments whose user layout is blocked (Graph mode's nChw16c /
// nChw8c activations) because the primitive wanted another layout: zero when the layout pass's
// block width matches the ISA's kernels (tests/graph/blocked_isa_test.cpp). Counted since start.
size_t blocked_arg_reorders();

}  // namespace spore::cpu::onednn

// Wraps a oneDNN C++ API expression: a dnnl::error becomes a spore::Error naming the call, the
// library's status, file:line and a hint. Usage: auto pd = SPORE_DNNL_CHECK(make_pd(), "hint");
#define SPORE_DNNL_CHECK(expr, hint)                                                               \
  [&]() -> decltype(auto) {                                                                        \
    try {                                                                                          \
      return expr;                                                                                 \
    } catch (const dnnl::error& spore_dnnl_e) {                                                    \
      ::spore::cpu::onednn::throw_dnnl_error(#expr, int(spore_dnnl_e.status), spore_dnnl_e.what(), \
                                             __FILE__, __LINE__, hint);                            \
    }                                                                                              \
  }()
// For C API calls returning dnnl_status_t (dnnl_sgemm, ...).
#define SPORE_DNNL_CHECK_STATUS(expr, hint)                                                    \
  do {                                                                                         \
    const dnnl_status_t spore_dnnl_s = (expr);                                                 \
    if (spore_dnnl_s != dnnl_success) [[unlikely]]                                             \
      ::spore::cpu::onednn::throw_dnnl_error(#expr, int(spore_dnnl_s), "", __FILE__, __LINE__, \
                                             hint);                                            \
  } while (0)
