// The amp precision rule (amp/policy.h).
#include "amp/policy.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>
#include <vector>

#include "spore/error.h"

namespace spore::amp {
namespace {
using ops::AmpClass;
using ops::OpId;

// The inputs cast to float32 in a keep_float32 cell: all but a norm op's leading activations.
uint32_t keep_float32_mask(const ops::OpDef& d) {
  if (d.traits.amp != AmpClass::kNorm) return ~0u;  // not a norm op: every input
  return ~0u << d.traits.amp_activations;
}

// An interned policy: the dispatcher's view of one Policy.
class PolicyPrecision final : public ops::PrecisionPolicy {
 public:
  explicit PolicyPrecision(const Policy& p) : policy(p) {}
  ops::OpPrecision decide(OpId op) const override { return amp::decide(op, policy); }
  std::string str() const override { return policy.str(); }
  const Policy policy;
};
}  // namespace

const char* level_name(Level l) {
  switch (l) {
    case Level::O0:
      return "O0";
    case Level::O1:
      return "O1";
    case Level::O2:
      return "O2";
    case Level::O3:
      return "O3";
  }
  return "?";
}

Level parse_level(const std::string& s) {
  std::string u = s;
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return std::toupper(c); });
  if (u == "O0") return Level::O0;
  if (u == "O1") return Level::O1;
  if (u == "O2") return Level::O2;
  if (u == "O3") return Level::O3;
  SPORE_THROW(ErrorKind::ValueError, "amp level '", s,
              "' is not one of 'O0', 'O1', 'O2', 'O3' (O0: float32; O1: white-list ops in low "
              "precision; O2: all but BatchNorm/LayerNorm; O3: everything)");
}

DType parse_dtype(const std::string& s) {
  std::string u = s;
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return std::tolower(c); });
  if (u == "fp16" || u == "float16" || u == "half") return kFloat16;
  if (u == "bf16" || u == "bfloat16") return kBFloat16;
  SPORE_THROW(ErrorKind::ValueError, "amp dtype '", s,
              "' is not one of 'fp16' (float16) or 'bf16' (bfloat16)");
}

std::string Policy::str() const {
  if (!active()) return "O0";
  std::string s = std::string(level_name(level)) + "/" + dtype_name(dtype);
  if (keep_float32) s += "/fp32-cell";
  return s;
}

OpPrecision decide(OpId op, const Policy& p) {
  OpPrecision r;
  const ops::OpDef& d = ops::op_def(op);
  // Views pass their input's dtype through; in-place updates keep their state's dtype.
  if (!p.active() || d.has(ops::kView) || d.has(ops::kInplace) || d.traits.amp == AmpClass::kFollow)
    return r;
  switch (p.level) {
    case Level::O0:
      return r;
    case Level::O1:
      if (d.traits.amp != AmpClass::kAllow16) return r;
      r.cast = true;
      r.compute = p.dtype;
      r.input_mask = ~0u;
      r.outputs_to_float32 = true;
      return r;
    case Level::O2:
      if (p.keep_float32) {
        r.cast = true;
        r.compute = kFloat32;
        r.input_mask = keep_float32_mask(d);
        return r;
      }
      [[fallthrough]];
    case Level::O3:
      r.cast = true;
      r.compute = p.dtype;
      r.input_mask = ~0u;
      return r;
  }
  return r;
}

const ops::PrecisionPolicy* interned(const Policy& p) {
  if (!p.active()) return nullptr;
  // Every (level, dtype, keep_float32): a handful, made once, never freed (nodes point at them).
  static std::mutex mutex;
  static std::vector<std::unique_ptr<PolicyPrecision>> all;
  const std::lock_guard lock(mutex);
  for (const auto& q : all)
    if (q->policy == p) return q.get();
  all.push_back(std::make_unique<PolicyPrecision>(p));
  return all.back().get();
}

const Policy& policy_of(const ops::PrecisionPolicy* p) {
  static const Policy kNone;
  const auto* q = dynamic_cast<const PolicyPrecision*>(p);
  return q ? q->policy : kNone;
}

const Policy& current_policy() { return policy_of(ops::current_precision()); }

PolicyScope::PolicyScope(const Policy& p) : prev_(ops::current_precision()) {
  ops::set_current_precision(interned(p));
}
PolicyScope::~PolicyScope() { ops::set_current_precision(prev_); }

}  // namespace spore::amp
