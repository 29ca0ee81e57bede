// Graph construction and editing helpers (graph/ir.h).
#include "graph/ir.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace spore::graph {

bool Value::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

std::shared_ptr<Value> Graph::new_value(ValueKind kind, const Shape& shape, DType dtype,
                                        Device device) {
  auto v = std::make_shared<Value>();
  v->id = next_value_id_++;
  v->kind = kind;
  v->shape = shape;
  v->strides = contiguous_strides(shape);
  v->dtype = dtype;
  v->device = device;
  v->graph_tag = this;
  values.push_back(v);
  return v;
}

Value* Graph::add_placeholder(int arg_index, const Shape& shape, DType dtype, Device device) {
  Value* v = new_value(ValueKind::kPlaceholder, shape, dtype, device).get();
  v->arg_index = arg_index;
  num_args = std::max(num_args, arg_index + 1);
  inputs.push_back(v);
  return v;
}

Value* Graph::add_capture(const Tensor& t, ValueKind kind) {
  Value* v = new_value(kind, t.shape(), t.dtype(), t.device()).get();
  v->strides = t.strides();
  v->offset = t.offset();
  v->tensor = t;
  inputs.push_back(v);
  return v;
}

size_t Graph::index_of(const Node* n) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].get() == n) return i;
  SPORE_ASSERT(false, "node ", n->id, " (", n->def().name, ") is not in graph ", name,
               "'s schedule");
  return 0;
}

Node* Graph::insert_inferred(size_t pos, ops::OpId op, std::vector<Value*> ins, ops::Attrs attrs,
                             const ops::PrecisionPolicy* precision) {
  ops::Metas metas;
  for (const Value* v : ins) metas.push_back({v->shape, v->dtype});
  const ops::Metas out = ops::op_def(op).rules.infer(metas, attrs);
  Node* n = insert_node(pos, op, std::move(ins), std::move(attrs), out);
  n->precision = precision;
  return n;
}

Node* Graph::insert_node(size_t pos, ops::OpId op, std::vector<Value*> ins, ops::Attrs attrs,
                         const ops::Metas& metas) {
  auto n = std::make_unique<Node>();
  n->id = next_node_id_++;
  n->op = op;
  n->attrs = std::move(attrs);
  n->inputs = std::move(ins);
  n->device = n->inputs.empty() ? current_device() : n->inputs[0]->device;
  for (const Value* in : n->inputs)
    if (!(in->shape.empty() && in->device.type == DeviceType::CPU)) {  // not a host scalar
      n->device = in->device;
      break;
    }
  const Device dev = n->def().has(ops::kTransfer) ? ops::transfer_target(n->attrs) : n->device;
  for (size_t i = 0; i < metas.size(); ++i) {
    Value* v = new_value(ValueKind::kComputed, metas[i].shape, metas[i].dtype, dev).get();
    v->producer = n.get();
    v->output_nr = int(i);
    n->outputs.push_back(v);
  }
  Node* raw = n.get();
  nodes.insert(nodes.begin() + std::ptrdiff_t(std::min(pos, nodes.size())), std::move(n));
  return raw;
}

Node* Graph::add_node(ops::OpId op, std::vector<Value*> ins, ops::Attrs attrs,
                      const ops::Metas& metas) {
  return insert_node(nodes.size(), op, std::move(ins), std::move(attrs), metas);
}

void Graph::replace_all_uses(Value* from, Value* to) {
  for (auto& n : nodes)
    for (Value*& in : n->inputs)
      if (in == from) in = to;
  for (Value*& o : outputs)
    if (o == from) o = to;
}

void Graph::remove_unused_inputs() {
  std::unordered_set<const Value*> used(outputs.begin(), outputs.end());
  for (auto& n : nodes) used.insert(n->inputs.begin(), n->inputs.end());
  inputs.erase(std::remove_if(
                   inputs.begin(), inputs.end(),
                   [&](Value* v) { return v->kind != ValueKind::kPlaceholder && !used.count(v); }),
               inputs.end());
}

size_t Graph::count(ops::OpId op) const {
  return size_t(
      std::count_if(nodes.begin(), nodes.end(), [&](const auto& n) { return n->op == op; }));
}

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>();
  g->name = name;
  g->num_args = num_args;
  std::unordered_map<const Value*, Value*> map;
  for (const Value* in : inputs) {
    Value* v = g->new_value(in->kind, in->shape, in->dtype, in->device).get();
    v->strides = in->strides;
    v->offset = in->offset;
    v->arg_index = in->arg_index;
    v->tensor = in->tensor;
    g->inputs.push_back(v);
    map[in] = v;
  }
  for (const auto& n : nodes) {
    std::vector<Value*> ins;
    for (const Value* in : n->inputs) {
      SPORE_ASSERT(map.count(in), "clone: node ", n->id, " uses a value defined nowhere");
      ins.push_back(map[in]);
    }
    ops::Metas metas;
    for (const Value* o : n->outputs) metas.push_back({o->shape, o->dtype});
    Node* m = g->add_node(n->op, std::move(ins), n->attrs, metas);
    m->precision = n->precision;
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      m->outputs[i]->strides = n->outputs[i]->strides;
      m->outputs[i]->offset = n->outputs[i]->offset;
      map[n->outputs[i]] = m->outputs[i];
    }
  }
  for (const Value* o : outputs) g->outputs.push_back(map.at(o));
  return g;
}

const Value* view_base(const Value* v) {
  while (v->producer && v->producer->is_view()) v = v->producer->inputs[0];
  return v;
}

std::unordered_map<const Value*, int> count_reads(const Graph& g) {
  std::unordered_map<const Value*, int> reads;
  for (const auto& n : g.nodes)
    for (const Value* in : n->inputs) ++reads[in];
  for (const Value* o : g.outputs) reads[o] += 2;  // never "single"
  return reads;
}

std::vector<const Value*> mutated_values(const Graph& g) {
  std::vector<const Value*> out;
  for (const auto& n : g.nodes) {
    if (!n->is_effect()) continue;
    // Every optimizer primitive mutates all inputs but the last (the gradient); Assign mutates
    // input 0. Taking all but the last is right for both. The fused updates take n groups of
    // tensors (params..., states..., grads...): all but the last group. A trailing hyper input
    // (the per-step lr / step scalars, hyper_input=true) is read only.
    size_t mutated = n->inputs.size() - 1;
    if (n->attrs.get_bool("hyper_input", false)) mutated = n->inputs.size() - 2;
    if (n->op == ops::OpId::FusedApplyMomentum) mutated = n->inputs.size() / 3 * 2;
    if (n->op == ops::OpId::FusedApplyAdam) mutated = n->inputs.size() / 4 * 3;
    for (size_t i = 0; i < mutated; ++i) {
      out.push_back(n->inputs[i]);
      out.push_back(view_base(n->inputs[i]));
    }
  }
  return out;
}

}  // namespace spore::graph
