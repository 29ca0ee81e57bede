// The default pass pipeline (run by the compiler on every traced graph). Each stage's output is
// dumped when SPORE_DUMP_IR is set: <dir>/<graph>.<NN>.<stage>.txt.
#include <string>

#include "graph/passes.h"

namespace spore::graph {

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
  // fusion
  // conv/matmul first (BatchNorm folded into its conv, then its bias / residual / activation
  // taken as oneDNN post-ops), so they get first pick before the elementwise fusion.
  if (fold_batchnorm(g) > 0) {
    dump_if_enabled(g, index++, "fold_batchnorm");
    constant_folding(g);  // the folding nodes, when the parameters are constants
  }
  if (fuse_conv_matmul(g) > 0) dump_if_enabled(g, index++, "fuse_conv_matmul");
  if (fuse_softmax_cross_entropy(g) > 0) {
    dump_if_enabled(g, index++, "softmax_ce_fusion");
    constant_folding(g);  // neg of a constant incoming gradient (a mean's -1/N)
  }
  if (fuse_elementwise(g) > 0) dump_if_enabled(g, index++, "elementwise_fusion");
  // Layouts last among the activation rewrites: it sees the final conv / pool / pointwise nodes.
  if (blocked_layout(g) > 0) dump_if_enabled(g, index++, "blocked_layout");
  if (fuse_conv_pool(g) > 0) dump_if_enabled(g, index++, "conv_pool_fusion");
  if (fuse_optimizer(g) > 0) dump_if_enabled(g, index++, "optimizer_fusion");
  dead_code_elimination(g);
  verify(g);
  dump_if_enabled(g, index++, "final");
}

}  // namespace spore::graph
