// The importer's op table: one handler per ONNX op type (ops_onnx.cpp), called with the node, its
// input tensors (undefined for an omitted optional input) and the model's opset.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "onnx/onnx.pb.h"
#include "ops/op.h"
#include "spore/tensor.h"

namespace spore::onnx_detail {

// Turns the tracer off while constants are computed or read (the result is a concrete tensor;
// a dtype conversion inside to_vector / item would otherwise be traced).
struct NoTrace {
  ops::TraceHook* prev;
  NoTrace() : prev(ops::trace_hook()) { ops::set_trace_hook(nullptr); }
  ~NoTrace() { ops::set_trace_hook(prev); }
};

struct Ctx {
  const ::onnx::NodeProto& node;
  std::vector<Tensor> in;
  int64_t opset;
  std::string where;  // "[onnx] model.onnx: node #3 (Conv \"conv1\"): "

  const ::onnx::AttributeProto* attr(const char* name) const;
  int64_t i(const char* name, int64_t dflt) const;
  double f(const char* name, double dflt) const;
  std::string s(const char* name, const std::string& dflt) const;
  std::vector<int64_t> ints(const char* name, std::vector<int64_t> dflt = {}) const;
  bool has(const char* name) const { return attr(name) != nullptr; }
  // Input k, required (an error naming it when absent).
  const Tensor& x(size_t k) const;
  bool has_in(size_t k) const { return k < in.size() && in[k].defined(); }
  // Exactly n inputs (an op of fixed arity given more would silently ignore the rest).
  void inputs_exactly(size_t n) const;
  // The values of a constant input (initializer or computed from constants), as integers.
  std::vector<int64_t> const_ints(size_t k, const char* what) const;
  // The value of a one-element constant input.
  double const_scalar(size_t k, const char* what) const;
  [[noreturn]] void unsupported(const std::string& what) const;
  // Runs a subgraph attribute (If's branches, Loop's and Scan's body) with these inputs, in the
  // scope of the node (the subgraph may read every value defined before it); its outputs.
  std::function<std::vector<Tensor>(const ::onnx::GraphProto&, const std::vector<Tensor>&)>
      subgraph;
};

using Handler = std::function<std::vector<Tensor>(Ctx&)>;
// Runs the nodes of g in order over env (value names -> values; the graph's inputs and outer-scope
// values already in it), adding their outputs. `where` prefixes error messages.
void run_nodes(const ::onnx::GraphProto& g, std::map<std::string, Tensor>& env,
               const std::string& where, int64_t opset);
// The handler table's key of a node: its op type in the default domain ("" or "ai.onnx"), else
// "domain::OpType" ("ai.onnx.preview.training::Adam").
inline std::string op_key(const ::onnx::NodeProto& n) {
  const bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
  return default_domain ? n.op_type() : n.domain() + "::" + n.op_type();
}
const std::map<std::string, Handler>& handlers();
// The handlers of ops_onnx_extra.cpp (losses, resize modes, indexing, quantisation, ...), added to
// the table by handlers().
void add_extra_handlers(std::map<std::string, Handler>& table);

// The ops that need their inputs' values on the host: those whose output shape depends on them
// (NonZero, Unique, NonMaxSuppression), TfIdfVectorizer's n-gram lookup, and the random
// generators (a traced graph would hold one draw as a constant). A model that uses one runs op by
// op (OnnxModel::run's graph_mode is ignored), where every value is concrete.
bool needs_host_values(const std::string& op_type);
// Bernoulli, RandomUniform(Like), RandomNormal(Like).
bool is_random_op(const std::string& op_type);
// Whether input `index` of `op_type` is a parameter the importer needs as a number (Resize's roi
// and scales): a graph input that feeds one becomes a compile-time value, like small integer
// inputs, whatever its dtype.
bool is_parameter_input(const std::string& op_type, int index);

// Shared helpers of the handler files.
int64_t norm_axis(int64_t a, int64_t rank, const Ctx& c);  // an axis in [-rank, rank) as [0, rank)
inline Tensor scalar_like(double v, const Tensor& x) { return full({}, v, x.dtype()); }
// A tensor's values as doubles / integers, read outside the trace (the tensor must be concrete).
std::vector<double> values_of(const Tensor& t);

}  // namespace spore::onnx_detail
