// Optimizer fusion: the per-parameter update effects of one optimizer step (ApplyMomentum,
// ApplyAdam) with equal attributes and dtype become one FusedApplyMomentum / FusedApplyAdam node,
// whose kernel runs every update in a single parallel region split by total element count
// (backends/cpu/kernels/optim_update.cpp). LeNet-5: 8 apply_momentum nodes -> 1.
//
// Placement keeps effect order semantics: the fused node takes the place of the group's LAST
// member, so every gradient it consumes is computed by then, and an earlier member is moved down
// to it only when no node in between reads or writes that member's parameter or state (it would
// see the value before the update instead of after) or writes its gradient. Members that cannot
// move stay where they are, unfused. In Graph mode the optimizer passes its per-step scalars (lr,
// Adam's step) as a trailing hyper input (a captured float64 tensor, one per lr schedule) instead
// of attributes, so one graph serves a whole schedule: only updates reading the SAME hyper value
// (and with equal attributes) fuse, and the fused node ends with that hyper input. Parameter
// groups with their own lr or weight decay become separate fused nodes.
#include <unordered_set>

#include "graph/passes.h"

namespace spore::graph {
namespace {

// What two values must not share for a reorder to be safe: the storage of a captured tensor
// (two captures may alias one parameter, e.g. a detach()ed copy), else the view chain's base.
const void* alias_key(const Value* v) {
  const Value* b = view_base(v);
  if (b->kind != ValueKind::kComputed && b->tensor.defined()) return b->tensor.impl().storage.get();
  return b;
}

struct Family {
  ops::OpId single, fused;
  size_t per;  // operands per update: param, states..., grad
};
constexpr Family kFamilies[] = {
    {ops::OpId::ApplyMomentum, ops::OpId::FusedApplyMomentum, 3},
    {ops::OpId::ApplyAdam, ops::OpId::FusedApplyAdam, 4},
};

// The hyper input of a single update (its operand after the `per` tensors), or null.
const Value* hyper_of(const Node& n, const Family& f) {
  return n.attrs.get_bool("hyper_input", false) ? n.inputs[f.per] : nullptr;
}

// Whether update node `u` may be moved past node `y` (y scheduled after u). The hyper input is
// read by every update of its group and written by none, so it constrains nothing.
bool can_move_past(const Node& u, const Node& y, const Family& f) {
  std::unordered_set<const void*> written, read;
  for (size_t k = 0; k + 1 < f.per; ++k) written.insert(alias_key(u.inputs[k]));
  read.insert(alias_key(u.inputs[f.per - 1]));
  for (const Value* in : y.inputs) {
    const void* key = alias_key(in);
    if (written.count(key)) return false;                // y reads (or updates) u's param/state
    if (y.is_effect() && read.count(key)) return false;  // y may overwrite u's gradient
  }
  return true;
}

// Fuses one group of candidate nodes (schedule order) into one node at the last member's place;
// returns how many joined, and leaves in `rest` the members that could not move there.
size_t fuse_group(Graph& g, const Family& f, const std::vector<Node*>& members,
                  std::vector<Node*>& rest) {
  std::vector<size_t> pos_of;  // schedule positions of the members
  {
    std::unordered_set<const Node*> want(members.begin(), members.end());
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (want.count(g.nodes[i].get())) pos_of.push_back(i);
  }
  const size_t last = pos_of.back();
  // From the last member backwards: a member joins when it can move past every node up to the
  // last member, joined members included (inside the fused node the updates run concurrently, so
  // two updates of one parameter must never share it).
  std::vector<bool> joins(g.nodes.size(), false);
  joins[last] = true;
  size_t joined = 1;
  rest.clear();
  for (size_t m = pos_of.size() - 1; m-- > 0;) {
    const Node& u = *g.nodes[pos_of[m]];
    bool ok = true;
    for (size_t j = pos_of[m] + 1; j <= last && ok; ++j) ok = can_move_past(u, *g.nodes[j], f);
    if (ok) {
      joins[pos_of[m]] = true;
      ++joined;
    } else {
      rest.insert(rest.begin(), g.nodes[pos_of[m]].get());
    }
  }
  if (joined < 2) return 0;

  std::vector<Value*> ins(joined * f.per);
  std::unordered_set<const Node*> gone;
  size_t t = 0;
  for (size_t i : pos_of) {
    if (!joins[i]) continue;
    const Node& u = *g.nodes[i];
    for (size_t k = 0; k < f.per; ++k) ins[k * joined + t] = u.inputs[k];
    gone.insert(&u);
    ++t;
  }
  const Node& tail = *g.nodes[last];
  if (tail.attrs.get_bool("hyper_input", false)) ins.push_back(tail.inputs[f.per]);  // shared
  Node* fused = g.insert_node(last, f.fused, std::move(ins), tail.attrs, {});
  fused->precision = tail.precision;
  std::erase_if(g.nodes, [&](const std::unique_ptr<Node>& n) { return gone.count(n.get()) > 0; });
  return joined;
}

}  // namespace

size_t fuse_optimizer(Graph& g) {
  size_t fused = 0;
  for (const Family& f : kFamilies) {
    // Candidates grouped by (attributes, hyper value, dtype, device), each in schedule order.
    std::vector<std::vector<Node*>> groups;
    for (const auto& up : g.nodes) {
      Node* n = up.get();
      if (n->op != f.single || n->inputs.size() != f.per + (hyper_of(*n, f) ? 1 : 0)) continue;
      bool placed = false;
      for (auto& grp : groups) {
        const Node* r = grp.front();
        if (r->attrs == n->attrs && hyper_of(*r, f) == hyper_of(*n, f) &&
            r->inputs[0]->dtype == n->inputs[0]->dtype &&
            r->inputs[0]->device == n->inputs[0]->device) {
          grp.push_back(n);
          placed = true;
          break;
        }
      }
      if (!placed) groups.push_back({n});
    }
    // Members left out of one fused node (blocked by a reader or another update of their
    // parameter in between) try again among themselves, into a node of their own further up.
    for (std::vector<Node*> grp : groups) {
      std::vector<Node*> rest;
      while (grp.size() >= 2) {
        const size_t n = fuse_group(g, f, grp, rest);
        fused += n;
        if (n == 0)
          grp.pop_back();  // nothing can join the last one: try without it
        else
          grp.swap(rest);
      }
    }
  }
  return fused;
}

}  // namespace spore::graph
