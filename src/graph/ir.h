// The Graph-mode IR: a Graph is a list of Nodes in execution order (the trace order, which is a
// valid schedule and keeps side effects ordered) over Values. A Value is a graph input (a batch
// placeholder, a captured concrete tensor such as a parameter, or an immutable constant) or a
// node output. Nodes reference Values by pointer; Values are owned by the Graph (shared_ptr so a
// symbolic Tensor can point at the Value it stands for while tracing).
//
// Passes (src/graph/passes/*.cpp) are graph -> graph functions declared in graph/passes.h; they
// edit nodes in place with the helpers below and must keep Graph::nodes topologically ordered.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/op.h"
#include "ops/precision.h"
#include "spore/tensor.h"

namespace spore::graph {

struct Node;

enum class ValueKind {
  kPlaceholder,  // the arg_index-th argument of the traced function (new data every call)
  kCapture,      // a concrete tensor used by identity (parameter, state); read at run time
  kConstant,     // a concrete tensor nobody else can see or change: passes may fold it
  kComputed,     // the output_nr-th output of producer
};

struct Value {
  int id = 0;
  ValueKind kind = ValueKind::kComputed;
  Shape shape, strides;  // strides: what the value's tensor has at run time (views keep theirs)
  int64_t offset = 0;
  DType dtype = kFloat32;
  Device device;
  Node* producer = nullptr;
  int output_nr = 0;
  int arg_index = -1;  // kPlaceholder
  Tensor tensor;       // kCapture / kConstant
  const void* graph_tag =
      nullptr;  // the Graph that owns it (catches symbolic tensors of another trace)
  bool is_input() const { return kind != ValueKind::kComputed; }
  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return size_t(numel()) * itemsize(dtype); }
  bool is_contiguous() const;
};

struct Node {
  int id = 0;
  ops::OpId op;
  ops::Attrs attrs;
  std::vector<Value*> inputs;
  std::vector<Value*> outputs;
  // The precision policy the op was traced under (forward: its Cell's; backward: its forward op's;
  // nullptr: none). Tracing records ops in their traced dtypes; passes/amp_casts.cpp applies this.
  const ops::PrecisionPolicy* precision = nullptr;
  int recompute_scope = 0;  // forward ops of a recompute cell: its scope's id (0: none)
  bool backward = false;    // traced by the backward pass (autograd::grad while tracing)
  // Where its kernel runs: its inputs' device (a 0-d CPU input joins as a scalar; the CPU when it
  // has no input). Its outputs are there too, except a kTransfer op's (ToDevice's target).
  Device device;
  const ops::OpDef& def() const { return ops::op_def(op); }
  bool is_effect() const { return def().has(ops::kInplace); }  // mutates inputs, no outputs
  bool is_view() const { return def().has(ops::kView); }
};

struct Graph {
  std::string name = "graph";
  std::vector<std::shared_ptr<Value>> values;  // every value ever made (some may be unused)
  std::vector<std::unique_ptr<Node>> nodes;    // the schedule
  std::vector<Value*> inputs;                  // placeholders, captures and constants
  std::vector<Value*> outputs;
  int num_args = 0;

  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  std::shared_ptr<Value> new_value(ValueKind kind, const Shape& shape, DType dtype, Device device);
  Value* add_placeholder(int arg_index, const Shape& shape, DType dtype, Device device);
  Value* add_capture(const Tensor& t, ValueKind kind = ValueKind::kCapture);
  // Appends a node; outputs get the given metas (contiguous strides unless `out_strides`).
  Node* add_node(ops::OpId op, std::vector<Value*> inputs, ops::Attrs attrs,
                 const ops::Metas& metas);
  // Inserts a node before position `pos` of nodes (used by passes).
  size_t index_of(const Node* n) const;  // its position in the schedule (internal error if absent)
  Node* insert_node(size_t pos, ops::OpId op, std::vector<Value*> inputs, ops::Attrs attrs,
                    const ops::Metas& metas);
  // Inserts before `pos` a node whose outputs get the metas its op infers from the inputs, under
  // `precision` (the node it stands for); returns it. What passes use to add arithmetic.
  Node* insert_inferred(size_t pos, ops::OpId op, std::vector<Value*> inputs, ops::Attrs attrs = {},
                        const ops::PrecisionPolicy* precision = nullptr);

  void replace_all_uses(Value* from, Value* to);  // in node inputs and graph outputs
  void remove_unused_inputs();                    // drops inputs no node or output uses
  size_t num_nodes() const { return nodes.size(); }
  size_t count(ops::OpId op) const;
  std::unique_ptr<Graph> clone() const;  // deep copy (captured tensors shared by identity)

 private:
  int next_value_id_ = 0;
  int next_node_id_ = 0;
};

// The values some effect node mutates (and, through views, their bases): passes must not assume
// these keep one value across the schedule.
std::vector<const Value*> mutated_values(const Graph& g);
// The value a view chain starts from (itself when not produced by a view).
const Value* view_base(const Value* v);
// How many times each value is read by nodes (with repeats); graph outputs count twice, so a count
// of 1 means "one node reads it, and it is not an output": what a pass may rewrite freely.
std::unordered_map<const Value*, int> count_reads(const Graph& g);

// Text form of a graph (what SPORE_DUMP_IR writes).
std::string to_text(const Graph& g);
std::string to_dot(const Graph& g);  // Graphviz: values and nodes, edges from producers
// Writes to_text(g) to <dir>/<name>.<index>.<stage>.txt, and for the "final" stage to_dot(g) to
// <...>.dot, when IR dumps are on (save_graphs_path(): set_context save_graphs or SPORE_DUMP_IR).
void dump_if_enabled(const Graph& g, int index, const std::string& stage);

}  // namespace spore::graph
