// nn::Cell, MindSpore's module: override construct(); register parameters, buffers and sub-cells
// by name; parameters() / trainable_params() / named_parameters() walk the tree in registration
// order with dotted names ("conv1.weight"). Sub-cells may be members (registered by reference,
// as in the README example) or shared_ptrs the parent owns.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spore/amp.h"
#include "spore/jit.h"
#include "spore/tensor.h"

namespace spore::nn {

class Cell {
 public:
  Cell() = default;
  virtual ~Cell() = default;
  Cell(const Cell&) = delete;
  Cell& operator=(const Cell&) = delete;

  // Override the arity you need. The general entry point is forward(), which calls construct()
  // with one or two inputs; cells returning several tensors (WithEvalCell) override forward().
  virtual Tensor construct(const Tensor& x);
  virtual Tensor construct(const Tensor& x, const Tensor& y);
  virtual std::vector<Tensor> forward(const std::vector<Tensor>& inputs);
  // Calls make the cell's amp policy current while construct runs (none: the caller's stays).
  // In Graph mode a cell marked with recompute() also opens a RecomputeScope (spore/jit.h).
  Tensor operator()(const Tensor& x) {
    if (!amp_ && !recompute_) return construct(x);
    CallScopes scopes(*this);
    return construct(x);
  }
  Tensor operator()(const Tensor& x, const Tensor& y) {
    if (!amp_ && !recompute_) return construct(x, y);
    CallScopes scopes(*this);
    return construct(x, y);
  }

  // MindSpore's Cell.recompute(): in Graph mode, the activations of this cell's forward pass are
  // not kept for the backward pass but recomputed from the cell's inputs when it needs them (the
  // recompute pass). Trades compute for memory; PyNative ignores it.
  void recompute(bool mode = true) { recompute_ = mode; }
  bool is_recompute() const { return recompute_; }
  // MindSpore's cell.pipeline_stage: the stage this cell runs on when the auto-parallel context
  // has pipeline_stages > 1 (-1: unassigned; Model then cuts the network into equal runs of cells).
  void set_pipeline_stage(int64_t stage) { pipeline_stage_ = stage; }
  int64_t pipeline_stage() const { return pipeline_stage_; }

  // Mixed precision (spore/amp.h): the policy this cell's ops run under. Usually set on the whole
  // tree by amp::auto_mixed_precision; to_float(dtype) is MindSpore's: this cell and its sub-cells
  // compute in dtype (float32: a float32 island, e.g. BatchNorm under O2).
  void set_amp_policy(const amp::Policy& p) { amp_ = p; }
  void clear_amp_policy() { amp_.reset(); }
  const std::optional<amp::Policy>& amp_policy() const { return amp_; }
  Cell& to_float(DType dtype);
  // What a compiled (Graph-mode) trace of this tree depends on besides its inputs: every cell's
  // train flag and amp policy. Compiled callers put it in their cache key.
  std::string trace_key() const;

  // Parameters are float tensors that require grad; buffers are state (e.g. moving statistics)
  // saved in checkpoints but not trained.
  std::vector<Tensor> parameters() const;
  std::vector<Tensor> trainable_params() const;  // requires_grad parameters
  std::vector<std::pair<std::string, Tensor>> named_parameters(
      const std::string& prefix = "") const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(const std::string& prefix = "") const;
  // Parameters and buffers: what a checkpoint holds.
  std::vector<std::pair<std::string, Tensor>> parameters_and_buffers() const;
  std::vector<std::pair<std::string, Cell*>> named_cells(const std::string& prefix = "") const;

  virtual void set_train(bool mode = true);
  bool training() const { return training_; }
  // Casts every floating parameter and buffer to dtype (in place in the tree).
  virtual void to(DType dtype);
  // Moves every parameter and buffer to `device`, in place: the same Tensor objects (an optimizer
  // built earlier keeps stepping them) now hold storage there. Gradients held are dropped.
  void to(Device device);
  std::string cls_name() const { return cls_name_; }
  virtual std::string extend_repr() const { return ""; }  // shown by str()
  std::string str(int indent = 0) const;                  // the tree, like MindSpore's repr

  Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor t);
  void register_cell(const std::string& name, Cell& cell);                  // member, not owned
  void register_cell(const std::string& name, std::shared_ptr<Cell> cell);  // owned
  // register_cells("conv1", conv1, "fc1", fc1, ...)
  template <typename... Rest>
  void register_cells(const std::string& name, Cell& cell, Rest&... rest) {
    register_cell(name, cell);
    if constexpr (sizeof...(rest) > 0) register_cells(rest...);
  }
  Tensor& parameter(const std::string& name);  // by local name; throws if absent
  Tensor& buffer(const std::string& name);

 protected:
  void set_cls_name(std::string n) { cls_name_ = std::move(n); }
  bool training_ = true;

 private:
  std::string cls_name_ = "Cell";
  std::vector<std::pair<std::string, Tensor>> params_, buffers_;
  std::vector<std::pair<std::string, Cell*>> cells_;
  std::vector<std::shared_ptr<Cell>> owned_;
  std::optional<amp::Policy> amp_;
  bool recompute_ = false;
  int64_t pipeline_stage_ = -1;

 protected:
  // While construct runs: the cell's amp policy, and (tracing a recompute cell) its recompute
  // scope. Cells with call methods of their own (nn::MultiheadAttention::call) open one too.
  struct CallScopes {
    std::optional<amp::PolicyScope> amp;
    std::optional<RecomputeScope> recompute;
    explicit CallScopes(const Cell& c) {
      if (c.amp_) amp.emplace(*c.amp_);
      if (c.recompute_ && is_tracing()) recompute.emplace();
    }
  };
};

using CellPtr = std::shared_ptr<Cell>;

}  // namespace spore::nn
