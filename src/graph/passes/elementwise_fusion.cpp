// Elementwise fusion: connected groups of pointwise nodes become one FusedElementwise node whose
// program (ops/fused_program.h) the CPU kernel runs in one pass over the output, so the
// intermediates are never written to memory.
//
// Grouping, from the last node backwards: a float-valued pointwise node starts a group (its root)
// and absorbs the producers of its members' inputs while the producer
//   - is a supported pointwise op (unary, binary, where, bool -> float cast) on one device, with
//     float inputs of the root's dtype or bool ones;
//   - has the root's output shape (a smaller producer, e.g. a per-channel scale, would be
//     recomputed per output element: it stays outside and is read broadcast);
//   - has no reader outside the group and is not a graph output (no recomputation);
//   - is not moved across an effect that mutates what it reads.
// Groups of one node are left alone. Scalar constants are inlined into the program. The absorbed
// nodes are removed; the fused node takes the root's place in the schedule.
#include <algorithm>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "graph/passes.h"
#include "ops/fused_program.h"

namespace spore::graph {
namespace {
using ops::OpId;
using ops::fused::Opcode;
namespace fz = ops::fused;

constexpr size_t kMaxGroup = 64;  // nodes per group: keeps programs and their registers small

struct Lowered {
  Opcode op;
  // Unary parameters (constants) in the program's encoding: -1 when absent.
  bool has0 = false, has1 = false;
  double p0 = 0, p1 = 0;
};

// The program instruction of a node, from its op's trait (ops.def: fused) and its attributes
// (fz::lowering), when the kernel can run it.
bool lower(const Node& n, Lowered& L) {
  const Opcode op = n.def().traits.fused;
  if (op == Opcode::kNone) return false;
  const fz::Lowering lw = fz::lowering(op);
  if (lw.bool_input && (n.inputs[0]->dtype != kBool || !is_floating(n.outputs[0]->dtype)))
    return false;
  const ops::Attrs& a = n.attrs;
  L.op = lw.variant_attr && a.get_bool(lw.variant_attr, false) ? lw.variant : op;
  if (lw.param0) {
    L.has0 = !lw.optional_params || a.has(lw.param0);
    L.p0 = a.get_float(lw.param0, lw.default0);
  }
  if (lw.param1) {
    L.has1 = !lw.optional_params || a.has(lw.param1);
    L.p1 = a.get_float(lw.param1, lw.default1);
  }
  if (op == Opcode::kCall) {  // the backend must have the op's row kernels for the compute type
    const ops::KernelEntry* k = ops::find_kernel(n.op, n.device.type);
    const bool f64 = n.outputs[0]->dtype == kFloat64;
    return k && n.inputs.size() <= 2 && (f64 ? bool(k->rows.f64) : bool(k->rows.f32));
  }
  return true;
}

// Whether n can join (or root) a group computing in float dtype `t` over `shape`.
bool fusable(const Node& n, DType t, Lowered& L) {
  if (n.outputs.size() != 1 || n.is_effect() || n.is_view() || !lower(n, L)) return false;
  const Value* o = n.outputs[0];
  if (!(o->dtype == t || o->dtype == kBool)) return false;
  for (const Value* in : n.inputs)
    if (!(in->dtype == t || in->dtype == kBool) || in->device != o->device) return false;
  // The node's device must run fused programs (its FusedElementwise kernel reads
  // ops/fused_program.h).
  return is_floating(t) && o->device == n.device &&
         ops::find_kernel(ops::OpId::FusedElementwise, n.device.type);
}

const char* opcode_name(Opcode op) {
  switch (op) {
    case Opcode::kConst:
      return "const";
    case Opcode::kGeluErf:
      return "gelu";
    case Opcode::kGeluTanh:
      return "gelu_tanh";
    case Opcode::kBoolToFloat:
      return "to_float";
    default:
      break;
  }
  return nullptr;
}

}  // namespace

size_t fuse_elementwise(Graph& g) {
  // Dead readers (left by earlier fusions) would keep intermediates from joining a group.
  dead_code_elimination(g);
  point_relu_grads_at_outputs(g);  // the pre-activation can then fuse into the relu
  const size_t n_nodes = g.nodes.size();
  std::unordered_map<const Node*, size_t> pos;
  std::unordered_map<const Value*, std::vector<const Node*>> readers;
  std::vector<size_t> effects_before(n_nodes + 1, 0);
  for (size_t i = 0; i < n_nodes; ++i) {
    const Node* n = g.nodes[i].get();
    pos[n] = i;
    for (const Value* in : n->inputs) readers[in].push_back(n);
    effects_before[i + 1] = effects_before[i] + (n->is_effect() ? 1 : 0);
  }
  const std::unordered_set<const Value*> outputs(g.outputs.begin(), g.outputs.end());
  std::unordered_set<const Value*> mutated;
  for (const Value* v : mutated_values(g)) mutated.insert(v);

  struct Group {
    size_t root_pos;
    std::vector<const Node*> members;  // schedule order
  };
  std::vector<Group> groups;
  std::unordered_set<const Node*> taken;
  for (size_t ri = n_nodes; ri-- > 0;) {
    const Node* root = g.nodes[ri].get();
    Lowered L;
    if (taken.count(root) || root->outputs.size() != 1) continue;
    const DType t = root->outputs[0]->dtype;
    if (!is_floating(t) || !fusable(*root, t, L)) continue;
    const Shape& shape = root->outputs[0]->shape;
    std::unordered_set<const Node*> in_group{root};
    std::vector<const Node*> members{root};
    for (bool grew = true; grew && members.size() < kMaxGroup;) {
      grew = false;
      for (size_t mi = 0; mi < members.size() && members.size() < kMaxGroup; ++mi) {
        for (const Value* in : members[mi]->inputs) {
          const Node* p = in->producer;
          if (!p || in_group.count(p) || taken.count(p) || outputs.count(in)) continue;
          if (in->shape != shape || !fusable(*p, t, L)) continue;
          bool all_inside = true;
          for (const Node* r : readers[in]) all_inside = all_inside && in_group.count(r);
          if (!all_inside) continue;
          // Moving p down to the root must not cross an effect that changes what p reads.
          const size_t pp = pos.at(p);
          if (effects_before[ri] - effects_before[pp + 1] > 0) {
            bool reads_mutated = false;
            for (const Value* x : p->inputs)
              reads_mutated = reads_mutated || mutated.count(x) || mutated.count(view_base(x));
            if (reads_mutated) continue;
          }
          in_group.insert(p);
          members.push_back(p);
          grew = true;
        }
      }
    }
    if (members.size() < 2) continue;
    std::sort(members.begin(), members.end(),
              [&](const Node* a, const Node* b) { return pos.at(a) < pos.at(b); });
    for (const Node* m : members) taken.insert(m);
    groups.push_back({ri, std::move(members)});
  }

  // Build each group's program and node, latest first so earlier positions stay valid.
  size_t made = 0;
  std::unordered_set<const Node*> absorbed;
  for (Group& gr : groups) {  // already in descending root position
    const Node* root = gr.members.back();
    const Value* rout = root->outputs[0];
    std::vector<Value*> inputs;
    std::vector<int64_t> prog, consts;
    std::unordered_map<const Value*, int64_t> index;  // value -> program value number
    std::unordered_set<const Node*> members(gr.members.begin(), gr.members.end());
    // Numbering: inputs first (the program refers to them as 0..nin-1), so collect them first.
    std::vector<const Value*> inlined;
    for (const Node* m : gr.members)
      for (Value* in : m->inputs) {
        if ((in->producer && members.count(in->producer)) || index.count(in)) continue;
        if (in->kind == ValueKind::kConstant && in->numel() == 1) {
          index[in] = -1;  // placeholder: becomes a kConst instruction
          inlined.push_back(in);
          continue;
        }
        index[in] = int64_t(inputs.size());
        inputs.push_back(in);
      }
    if (inputs.empty() || inputs.size() > size_t(fz::kMaxInputs)) continue;
    int64_t next = int64_t(inputs.size());
    std::ostringstream expr;
    auto add_const = [&](double v) {
      consts.push_back(fz::encode_double(v));
      return int64_t(consts.size()) - 1;
    };
    for (const Value* c : inlined) {
      const int64_t ci = add_const(c->tensor.to_vector<double>()[0]);
      prog.insert(prog.end(), {int64_t(Opcode::kConst), ci, -1, -1});
      index[c] = next++;
    }
    for (const Node* m : gr.members) {
      Lowered L;
      lower(*m, L);
      int64_t ins[4] = {int64_t(L.op), -1, -1, -1};
      if (L.op == Opcode::kCall) {
        for (size_t j = 0; j < m->inputs.size(); ++j) ins[1 + j] = index.at(m->inputs[j]);
        ins[3] = int64_t(m->op);
      } else if (fz::is_unary(L.op)) {
        ins[1] = index.at(m->inputs[0]);
        if (L.has0) ins[2] = add_const(L.p0);
        if (L.has1) ins[3] = add_const(L.p1);
      } else {
        for (size_t j = 0; j < m->inputs.size(); ++j) ins[1 + j] = index.at(m->inputs[j]);
      }
      prog.insert(prog.end(), ins, ins + 4);
      index[m->outputs[0]] = next;
      const char* nm = opcode_name(L.op);
      expr << "%" << next << "=" << (nm ? nm : m->def().name) << "(";
      for (size_t j = 0; j < m->inputs.size(); ++j)
        expr << (j ? "," : "") << "%" << index.at(m->inputs[j]);
      expr << ") ";
      ++next;
    }
    if (prog.size() / 4 > size_t(fz::kMaxInstructions)) continue;
    std::string text = expr.str();
    if (!text.empty()) text.pop_back();
    ops::Attrs attrs;
    attrs.set("program", prog)
        .set("consts", consts)
        .set("shape", rout->shape)
        .set("dtype", rout->dtype)
        .set("expr", text);
    Node* f = g.insert_node(gr.root_pos, OpId::FusedElementwise, inputs, std::move(attrs),
                            {{rout->shape, rout->dtype}});
    f->precision = root->precision;
    g.replace_all_uses(const_cast<Value*>(rout), f->outputs[0]);
    for (const Node* m : gr.members) absorbed.insert(m);
    ++made;
  }
  if (made) {
    std::erase_if(g.nodes, [&](const auto& n) { return absorbed.count(n.get()) > 0; });
    g.remove_unused_inputs();
  }
  return made;
}

}  // namespace spore::graph
