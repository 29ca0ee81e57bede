// Mixed precision in Graph mode. The tracer records every op in the dtypes the code computed in
// (float32) and tags it with the amp policy current when it ran (Node::amp). insert_amp_casts
// applies the policies with the same rule PyNative uses (amp::decide), as Cast nodes:
//
//   - a node under an active policy gets its masked float inputs cast to the compute dtype, and
//     its outputs are re-inferred (they become bfloat16/float16); under O1 its low-precision
//     outputs are cast back to float32 right after it;
//   - a node with no active policy (the loss, optimizer updates, the engine's gradient sums,
//     code outside the network), every effect, and the graph outputs see the dtypes they were
//     traced with: a value that arrives in another dtype is cast back (a float32 parameter's
//     gradient out of bfloat16 backward ops reaches ApplyMomentum as float32: master weights);
//   - views and the exempt ops (Cast, Copy, Argmax...) take their input as it comes.
//
// One cast per (value, dtype) is made and reused by every later consumer (until an effect
// mutates the value). The pass leaves cast(cast(x)) pairs, e.g. bf16 -> f32 -> bf16 between two
// O1 ops; remove_cast_pairs (in the pipeline's loop) removes those that are exact, and runs the
// engine's float32 gradient sums of two bf16 values in bf16 where only a cast back reads them.
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "graph/passes.h"

namespace spore::graph {
namespace {

bool is_amp_float(DType t) { return t == kFloat16 || t == kBFloat16 || t == kFloat32; }

std::string metas_str(const std::vector<Value*>& vs) {
  std::string s;
  for (const Value* v : vs)
    s += (s.empty() ? "" : ", ") + std::string(dtype_name(v->dtype)) + shape_str(v->shape);
  return s;
}

// Whether every value of dtype a is exactly representable in dtype b (so a -> b -> c equals
// a -> c, and a -> b -> a is the identity).
bool exact_in(DType a, DType b) {
  if (a == b || a == kBool) return true;
  switch (a) {
    case kUInt8:
    case kInt8:  // |v| <= 256: exact in every float (bfloat16 has 8 significant bits)
      return b == kInt32 || b == kInt64 || b == kFloat16 || b == kBFloat16 || b == kFloat32 ||
             b == kFloat64;
    case kInt32:
      return b == kInt64 || b == kFloat64;
    case kFloat16:
    case kBFloat16:
      return b == kFloat32 || b == kFloat64;
    case kFloat32:
      return b == kFloat64;
    default:
      return false;
  }
}

bool same_layout(const Value* a, const Value* b) {
  return a->shape == b->shape && a->dtype == b->dtype && a->strides == b->strides &&
         a->offset == b->offset;
}

}  // namespace

size_t insert_amp_casts(Graph& g) {
  bool any = false;
  for (const auto& n : g.nodes) any = any || n->precision != nullptr;
  if (!any) return 0;  // O0: the graph stays exactly as traced

  std::unordered_map<const Value*, DType> traced;  // every value's dtype before the pass
  for (const auto& v : g.values) traced[v.get()] = v->dtype;
  std::unordered_map<const Value*, Value*> subst;  // O1: an output -> its float32 cast
  std::map<std::pair<const Value*, DType>, Value*> casts;
  size_t inserted = 0;

  auto read = [&](Value* v) {
    auto it = subst.find(v);
    return it == subst.end() ? v : it->second;
  };
  // Appends (the schedule is being rebuilt in order) a cast of v to dtype t, or reuses one.
  auto cast_to = [&](Value* v, DType t) -> Value* {
    auto key = std::make_pair(static_cast<const Value*>(v), t);
    auto it = casts.find(key);
    if (it != casts.end()) return it->second;
    Node* c = g.add_node(ops::OpId::Cast, {v}, ops::Attrs().set("dtype", t), {{v->shape, t}});
    ++inserted;
    casts[key] = c->outputs[0];
    traced[c->outputs[0]] = t;
    return c->outputs[0];
  };

  std::vector<std::unique_ptr<Node>> old = std::move(g.nodes);
  g.nodes.clear();
  for (auto& up : old) {
    Node* n = up.get();
    const ops::OpDef& def = n->def();
    const bool keep_traced = n->is_effect() || !n->precision;
    const ops::OpPrecision prec = keep_traced ? ops::OpPrecision{} : n->precision->decide(n->op);
    bool changed = false;
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      Value* orig = n->inputs[i];
      Value* v = read(orig);
      DType want = v->dtype;
      if (n->is_view()) {
        // Views pass their input's dtype through (their strides were traced for that input).
      } else if (keep_traced) {
        want = traced.at(orig);
      } else if (prec.cast && ((prec.input_mask >> i) & 1u) && is_amp_float(v->dtype)) {
        want = prec.compute;
      }
      if (want != v->dtype) v = cast_to(v, want);
      // Re-infer when an input was replaced or changed dtype upstream (an O2 op fed bf16).
      if (v != orig || v->dtype != traced.at(orig)) changed = true;
      n->inputs[i] = v;
    }
    if (changed) {
      // The outputs follow the new input dtypes (shapes never change).
      ops::Metas in;
      for (const Value* v : n->inputs) in.push_back({v->shape, v->dtype});
      ops::Metas out;
      try {
        out = def.rules.infer(in, n->attrs);
      } catch (const Error& e) {
        SPORE_THROW(e.kind(), "[amp] ", def.name, " under policy ", n->precision->str(),
                    " cannot take inputs (", metas_str(n->inputs), "): ", e.what(),
                    ". Keep its cell in float32 (keep_float32) or use a lower amp level.");
      }
      SPORE_ASSERT(out.size() == n->outputs.size(), "[amp] ", def.name, " output count changed");
      for (size_t k = 0; k < out.size(); ++k) {
        SPORE_ASSERT(out[k].shape == n->outputs[k]->shape, "[amp] ", def.name,
                     " output shape changed with its dtype");
        n->outputs[k]->dtype = out[k].dtype;  // strides count elements: unchanged
      }
      if (!n->is_view()) {
        const Device dev = n->inputs.empty() ? Device{} : n->inputs[0]->device;
        const ops::KernelEntry* k = ops::find_kernel(n->op, dev.type);
        const DType key = !n->inputs.empty() ? n->inputs[0]->dtype : out[0].dtype;
        SPORE_CHECK_TYPE(k && k->supports(key), "[amp] ", def.name, " under policy ",
                         n->precision->str(), " would run in ", dtype_name(key), " (inputs ",
                         metas_str(n->inputs), ") but its ", device_type_name(dev.type),
                         " kernel does not support that dtype. Keep its cell in float32 "
                         "(keep_float32) or use amp level O1.");
      }
    }
    g.nodes.push_back(std::move(up));
    if (prec.outputs_to_float32)
      for (Value* o : n->outputs)
        if (o->dtype == kFloat16 || o->dtype == kBFloat16) subst[o] = cast_to(o, kFloat32);
    if (n->is_effect()) {
      // A cast made before this update must not stand in for the updated value later.
      std::unordered_set<const Value*> bases;
      for (size_t i = 0; i + 1 < n->inputs.size(); ++i) bases.insert(view_base(n->inputs[i]));
      std::erase_if(casts, [&](const auto& kv) { return bases.count(view_base(kv.first.first)); });
    }
  }
  for (Value*& o : g.outputs) {
    Value* v = read(o);
    const DType want = traced.at(o);
    if (v->dtype != want) v = cast_to(v, want);
    o = v;
  }
  return inserted;
}

namespace {
bool is_cast_from(const Value* v, DType from) {
  return v->producer && v->producer->op == ops::OpId::Cast && v->producer->inputs[0]->dtype == from;
}
}  // namespace

size_t remove_cast_pairs(Graph& g) {
  const auto mutated_list = mutated_values(g);
  const std::unordered_set<const Value*> mutated(mutated_list.begin(), mutated_list.end());
  std::unordered_map<const Value*, int> uses;  // readers (nodes and graph outputs) per value
  for (const auto& n : g.nodes)
    for (const Value* in : n->inputs) ++uses[in];
  for (const Value* o : g.outputs) ++uses[o];
  size_t changed = 0;
  for (auto& up : g.nodes) {
    Node* n = up.get();
    if (n->op != ops::OpId::Cast) continue;
    Value* x = n->inputs[0];
    Value* out = n->outputs[0];
    // cast(add(cast(a), cast(b)) -> L) with a, b in L (bf16/f16): the gradient sums the engine
    // makes without a policy, between low-precision backward ops. Add, Sub and Mul of two L
    // values are computed exactly as the float32 op (the L kernels compute in float and round
    // to nearest even once, like the cast), so run the op in L and drop the three casts.
    const DType low = out->dtype;
    Node* op = x->producer;
    if ((low == kBFloat16 || low == kFloat16) && x->dtype == kFloat32 && op &&
        (op->op == ops::OpId::Add || op->op == ops::OpId::Sub || op->op == ops::OpId::Mul) &&
        op->outputs.size() == 1 && uses[x] == 1) {
      bool ok = true;
      for (const Value* in : op->inputs)
        ok = ok && is_cast_from(in, low) && !mutated.count(view_base(in->producer->inputs[0]));
      const ops::KernelEntry* k = ops::find_kernel(op->op, x->device.type);
      if (ok && k && k->supports(low)) {
        for (Value*& in : op->inputs) in = in->producer->inputs[0];
        x->dtype = low;  // contiguous, same shape: the strides stand
        g.replace_all_uses(out, x);
        uses[x] += uses[out] - 1;
        uses[out] = 0;
        ++changed;
        continue;
      }
    }
    if (x->dtype == out->dtype) {  // to the same dtype
      if (same_layout(x, out)) {
        g.replace_all_uses(out, x);
        uses[x] += uses[out];
        uses[out] = 0;
        ++changed;
      }
      continue;
    }
    Node* inner = x->producer;
    if (!inner || inner->op != ops::OpId::Cast) continue;
    Value* a = inner->inputs[0];
    // a -> x exact: x holds a's values, so casting a directly gives the same result. (Reading a
    // later than the inner cast did is only safe when no effect changes a in between.)
    if (!exact_in(a->dtype, x->dtype) || mutated.count(view_base(a))) continue;
    if (a->dtype == out->dtype) {  // a round trip: bf16 -> f32 -> bf16 is bf16
      if (same_layout(a, out)) {
        g.replace_all_uses(out, a);
        uses[a] += uses[out];
        uses[out] = 0;
        ++changed;
      }
    } else {
      n->inputs[0] = a;  // a chain: one cast
      --uses[x];
      ++uses[a];
      ++changed;
    }
  }
  return changed;
}

}  // namespace spore::graph
