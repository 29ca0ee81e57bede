// The dispatcher's precision hook: the one thing the ops layer knows about mixed precision.
//
// A layer above (amp, src/amp/policy.cpp) implements PrecisionPolicy and makes one current on the
// thread (PrecisionScope) while a Cell's construct runs. ops::call asks the current policy how each
// op computes and casts its inputs; the autograd tape and Graph-mode tracing record the policy on
// each node, so backward ops and the Graph-mode cast pass (graph/passes/amp_casts.cpp) follow
// the same rule. What an op does under a policy comes from its traits in ops.def (amp class).
//
// Policies are interned by their installer and live for the whole process: nodes keep raw
// pointers, and two nodes with the same policy hold the same pointer.
#pragma once
#include <cstdint>
#include <string>

#include "ops/op.h"

namespace spore::ops {

// What one op does under a policy.
struct OpPrecision {
  bool cast = false;         // false: run the op as it is
  DType compute = kFloat32;  // the dtype the cast inputs get
  uint32_t input_mask = 0;   // bit i: cast input i to `compute` when it is a float16/bfloat16/
                             // float32 tensor of another dtype (float64 and integers never cast)
  bool outputs_to_float32 = false;  // cast float16/bfloat16 outputs back to float32 (amp O1)
};

class PrecisionPolicy {
 public:
  virtual ~PrecisionPolicy() = default;
  virtual OpPrecision decide(OpId op) const = 0;
  virtual std::string str() const = 0;  // for IR dumps and errors, e.g. "O2/bfloat16"
};

// The policy ops run under on this thread; nullptr: none (every op as written).
const PrecisionPolicy* current_precision();
inline OpPrecision decide(const PrecisionPolicy* p, OpId op) {
  return p ? p->decide(op) : OpPrecision{};
}

// Makes p current on this thread (PrecisionScope restores the previous one; prefer it).
void set_current_precision(const PrecisionPolicy* p);
// Makes a policy current until destroyed (nests; restores the previous one).
class PrecisionScope {
 public:
  explicit PrecisionScope(const PrecisionPolicy* p);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  const PrecisionPolicy* prev_;
};

}  // namespace spore::ops
