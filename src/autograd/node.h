// A tape entry: the op that produced some tensors, its inputs (which carry their own history) and
// its outputs saved without history (so a node never keeps itself alive through its outputs).
#pragma once
#include <cstdint>

#include "ops/op.h"
#include "ops/precision.h"

namespace spore::autograd {

struct Node {
  ops::OpId op;
  ops::Attrs attrs;
  ops::Tensors inputs;
  ops::Tensors outputs;  // detached aliases of the outputs
  std::vector<ops::TensorMeta> out_meta;
  uint64_t seq = 0;  // creation order: a node's inputs always have smaller seq
  const ops::PrecisionPolicy* precision =
      nullptr;  // the policy it ran under (its gradient rule runs under it too)
};

// Called by the dispatcher after running a differentiable op with an input that requires grad.
void record(ops::OpId op, const ops::Attrs& attrs, const ops::Tensors& inputs,
            ops::Tensors& outputs);
bool should_record(const ops::OpDef& def, const ops::Tensors& inputs);
// True while this thread runs a backward pass (the tracer marks the nodes it records then).
bool in_backward();
// True for the engine's all-zero cotangent of an output nobody used (Graph mode: symbolic, so
// gradient rules cannot look at its values).
bool is_zero_cotangent(const Tensor& g);

}  // namespace spore::autograd
