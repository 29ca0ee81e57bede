// Graph mode for functions (MindSpore's @jit): jit(fn) returns a callable that, on the first call
// with a given input signature (shapes, dtypes, plus an optional extra key such as the train
// flag), traces fn with symbolic tensors into a graph, optimises it, plans its memory and then
// runs the compiled graph; later calls with the same signature run the cached graph directly.
//
//   auto f = spore::jit([&](const std::vector<Tensor>& a) { return std::vector{net(a[0])}; });
//   Tensor y = f({x})[0];
//
// Inside fn, tensors are symbolic: reading a value on the host (item(), to_vector(), data<T>())
// throws. Tensors fn uses but does not take as arguments (parameters, state) are captured by
// identity and read when the graph runs; in-place updates to them (optimizer steps) happen then.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "spore/tensor.h"

namespace spore {

namespace graph {
struct JitState;
}

struct JitOptions {
  std::string name = "jit";                // names the dumps (SPORE_DUMP_IR) and errors
  std::function<std::string()> extra_key;  // more of the signature (train flag, learning rate...)
  size_t max_cache = 8;                    // compiled signatures kept (oldest dropped first)
};

struct JitStats {
  int64_t traces = 0;      // compilations so far (a new signature, or a dropped one)
  int64_t cache_hits = 0;  // calls that ran a cached graph
  size_t cache_size = 0;
  // Of the graph the last call ran:
  size_t nodes_traced = 0, nodes = 0;  // before and after the passes
  size_t planned_peak_bytes = 0;       // the arena (intermediates and arguments)
  size_t unplanned_bytes = 0;          // the same buffers without reuse
};

class JitFunction {
 public:
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  JitFunction(Fn fn, JitOptions opts);
  std::vector<Tensor> operator()(const std::vector<Tensor>& args);
  JitStats stats() const;
  std::string graph_text() const;  // the optimised graph the last call ran ("" before any)

 private:
  std::shared_ptr<graph::JitState> state_;
};

JitFunction jit(JitFunction::Fn fn, JitOptions opts = {});

// True while a graph is being traced (code that must not run then can check).
bool is_tracing();

// Recompute (MindSpore's Cell.recompute()): while a graph is traced, the forward ops run inside
// a RecomputeScope are marked with the scope's id; the recompute pass then drops the activations
// they produce after the forward pass and recomputes them, from the scope's inputs, just before the
// backward pass needs them (less memory held between forward and backward, more compute).
// nn::Cell opens one around construct() for cells marked with recompute().
class RecomputeScope {
 public:
  RecomputeScope();
  ~RecomputeScope();
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  int prev_;
};
int current_recompute_scope();  // 0: none

}  // namespace spore
