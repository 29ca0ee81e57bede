// The executor: binds a planned graph to memory once (arena slots for placeholders and node
// outputs, the captured tensors themselves for parameters and state, aliasing views built once),
// then each run() copies the arguments into their slots and calls the registered kernels in
// schedule order with no allocation. Outputs are copied out of the arena.
//
// Capture (docs/graph.md): on a device whose backend can capture a stream (CUDA graphs; the test
// device emulates them), with capture on, the second run records the kernels once and every run
// from then on replays the recording with one call: no per-kernel launch cost on the host.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "graph/ir.h"
#include "graph/memory_plan.h"

namespace spore::graph {

// Whether executors capture their steps (above): SPORE_GRAPH_CAPTURE=1 in the environment, or
// set_capture (which wins). Off by default until the CUDA path has run on a GPU (docs/cuda.md).
void set_capture(bool on);
bool capture_enabled();
int64_t capture_replays();  // replays of captured steps in this process (tests, benchmarks)

class Executor {
 public:
  explicit Executor(std::shared_ptr<Graph> graph);
  // With a plan made earlier (a compiled model file's, checked by memory_plan_error when read).
  Executor(std::shared_ptr<Graph> graph, MemoryPlan plan);
  std::vector<Tensor> run(const std::vector<Tensor>& args);
  // SPORE_PROFILE=1: per-op wall time is accumulated over runs and printed (to stderr) when the
  // executor is destroyed, most expensive op first.
  ~Executor();
  const Graph& graph() const { return *graph_; }
  const MemoryPlan& plan() const { return plan_; }
  bool captured() const { return captured_ != nullptr; }  // runs replay a capture
  const std::string& why_not_captured() const { return no_capture_; }

 private:
  struct Step {
    const ops::OpDef* def;
    ops::KernelFn fn;
    Device device;  // where the kernel runs
    const ops::Attrs* attrs;
    ops::Tensors inputs, outputs, slots;  // slots: the planned outputs
    std::string prof_args;                // the profiler's description of the node
  };
  void bind();  // (re)builds the runtime tensors; again when a captured tensor's storage changed
  void run_steps();
  void decide_capture();
  std::unique_ptr<CapturedWork> captured_;  // the steps, recorded once (after the warm-up run)
  std::string no_capture_;                  // why this graph is not captured ("" while it may be)
  std::shared_ptr<Graph> graph_;
  MemoryPlan plan_;
  std::vector<std::shared_ptr<Storage>> arenas_;  // one per device, as plan_.arenas
  std::shared_ptr<Storage> arena_for(Device d) const;
  std::vector<Step> steps_;
  std::vector<std::pair<const Value*, Tensor>> args_;  // placeholder -> its arena slot
  std::vector<Tensor> outputs_;
  std::vector<std::pair<const Value*, const Storage*>> captured_storage_;
  void copy(const Tensor& src, const Tensor& dst) const;  // src's device's Copy kernel
  bool profile_ = false;
  bool profile_nodes_ = false;         // SPORE_PROFILE=nodes: one line per node as well
  std::vector<double> step_seconds_;   // per step, when profiling (the first run kept apart: it
  std::vector<double> first_seconds_;  // includes one-time kernel choices and primitive builds)
  int64_t runs_ = 0;
};

}  // namespace spore::graph
