// The graph passes: each a graph -> graph function in its own file under passes/, returning how
// many nodes it changed or removed. To add one: declare it here, write passes/<name>.cpp, add it
// to kPipeline in passes/pipeline.cpp and a test in tests/graph/passes_test.cpp.
#pragma once
#include <cstddef>

#include "graph/ir.h"

namespace spore::graph {

// Throws an internal error unless every node's inputs are defined before it and its outputs'
// shapes and dtypes are what the op's inference gives for its inputs, on one device.
void verify(const Graph& g);
// Removes nodes whose outputs nobody uses; effects (in-place updates) are always kept.
size_t dead_code_elimination(Graph& g);
// Merges nodes with the same op, attributes and inputs, and constants with the same bytes.
size_t common_subexpression_elimination(Graph& g);
// Runs nodes whose inputs are all constants once, at compile time.
size_t constant_folding(Graph& g);
// x*1, 1*x, x/1, x+0, 0+x, x-0 -> x; cast to the same dtype; reshape chains; double permutes;
// neg(neg(x)).
size_t algebraic_simplification(Graph& g);

// verify, then the passes in order until nothing changes (at most a few rounds), verify again;
// each stage is dumped when SPORE_DUMP_IR is set.
void run_pipeline(Graph& g);

}  // namespace spore::graph
