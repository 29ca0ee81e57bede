// The default pass pipeline (run by the compiler on every traced graph). Each stage's output is
// dumped when SPORE_DUMP_IR is set: <dir>/<graph>.<NN>.<stage>.txt.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>

#include "graph/passes.h"

namespace spore::graph {
namespace {
std::vector<BackendPass>& registry() {
  static std::vector<BackendPass> r;
  return r;
}
size_t fuse_softmax_ce_then_fold_constants(Graph& g) {
  const size_t n = fuse_softmax_cross_entropy(g);
  if (n > 0) constant_folding(g);  // neg of a constant incoming gradient (a mean's -1/N)
  return n;
}
// Whether SPORE_GRAPH_DISABLE names this fusion-stage pass (names separated by anything that is
// not a letter, digit or underscore): the pipeline skips it, to measure or bisect.
bool disabled(const char* pass) {
  const char* e = std::getenv("SPORE_GRAPH_DISABLE");  // read per compile: cheap, and testable
  const std::string off = e ? e : "";
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = 0; i < off.size();) {
    size_t j = i;
    while (j < off.size() && word(off[j])) ++j;
    if (off.compare(i, j - i, pass) == 0 && j > i) return true;
    i = j + 1;
  }
  return false;
}
bool has_device(const Graph& g, DeviceType d) {
  for (const auto& n : g.nodes) {
    for (const Value* v : n->inputs)
      if (v->device.type == d) return true;
    for (const Value* v : n->outputs)
      if (v->device.type == d) return true;
  }
  return false;
}
}  // namespace

bool register_backend_pass(const BackendPass& p) {
  auto& r = registry();
  r.insert(std::upper_bound(
               r.begin(), r.end(), p,
               [](const BackendPass& a, const BackendPass& b) { return a.order < b.order; }),
           p);
  return true;
}
const std::vector<BackendPass>& backend_passes() { return registry(); }

void run_pipeline(Graph& g) {
  int index = 0;
  dump_if_enabled(g, index++, "traced");
  verify(g);
  if (insert_amp_casts(g) > 0) dump_if_enabled(g, index++, "amp_casts");  // once, before the loop
  struct Stage {
    const char* name;
    size_t (*fn)(Graph&);
  };
  static const Stage kPipeline[] = {
      {"dce", dead_code_elimination},
      {"cse", common_subexpression_elimination},
      {"constant_folding", constant_folding},
      {"algebraic_simplification", algebraic_simplification},
      {"remove_cast_pairs", remove_cast_pairs},
  };
  for (int round = 0; round < 4; ++round) {
    size_t changed = 0;
    for (const Stage& s : kPipeline) {
      changed += s.fn(g);
#ifndef NDEBUG
      verify(g);  // debug builds check the invariant after every pass
#endif
      dump_if_enabled(g, index++, s.name);
    }
    if (changed == 0) break;
  }
  // After the CSE loop (it would merge the copies back into the originals), before fusion (which
  // then fuses the copies as it fuses the originals).
  if (recompute(g) > 0) {
    verify(g);
    dump_if_enabled(g, index++, "recompute");
  }
  // Fusion: the generic passes and those the backends contribute, by order. Convs and matmuls
  // come first (a backend's BatchNorm folding and post-op fusion), so they get
  // first pick before the elementwise fusion; layout passes come last among the activation
  // rewrites, so they see the final nodes.
  struct FusionStage {
    const char* name;
    int order;
    PassFn fn;
  };
  std::vector<FusionStage> fusion = {
      {"softmax_ce_fusion", kOrderSoftmaxCrossEntropy, fuse_softmax_ce_then_fold_constants},
      {"elementwise_fusion", kOrderElementwise, fuse_elementwise},
      {"optimizer_fusion", kOrderOptimizer, fuse_optimizer},
  };
  for (const BackendPass& p : backend_passes())
    if (has_device(g, p.device)) fusion.push_back({p.name, p.order, p.fn});
  // Stable: a generic pass runs before a backend pass of the same order.
  std::stable_sort(fusion.begin(), fusion.end(),
                   [](const FusionStage& a, const FusionStage& b) { return a.order < b.order; });
  for (const FusionStage& st : fusion)
    if (!disabled(st.name) && st.fn(g) > 0) dump_if_enabled(g, index++, st.name);
  if (place_scalar_constants(g) > 0) dump_if_enabled(g, index++, "place_scalar_constants");
  dead_code_elimination(g);
  verify(g);
  dump_if_enabled(g, index++, "final");
}

}  // namespace spore::graph
