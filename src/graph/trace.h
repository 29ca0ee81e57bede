// Tracing (Graph mode): runs a function with symbolic arguments while the dispatcher hands every
// op to the tracer, which appends a node and returns symbolic outputs (and records the autograd
// tape for them, so autograd::grad inside the function traces the backward pass from the same
// gradient rules). Concrete tensors the ops meet become graph inputs by identity.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "graph/ir.h"

namespace spore::graph {

using TracedFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
// The raw traced graph (no passes). Captured tensors no one else holds become constants.
std::unique_ptr<Graph> trace(const TracedFn& fn, const std::vector<Tensor>& example_args,
                             const std::string& name = "graph");

}  // namespace spore::graph
