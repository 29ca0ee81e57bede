// Shared by the Graph-mode tests: run a graph once through a fresh executor.
#pragma once
#include <memory>
#include <vector>

#include "graph/executor.h"
#include "spore/spore.h"

namespace spore::test {

// Every output of g for args, as float32 values.
inline std::vector<std::vector<float>> run_graph_all(std::unique_ptr<graph::Graph> g,
                                                     const std::vector<Tensor>& args) {
  graph::Executor ex(std::shared_ptr<graph::Graph>(std::move(g)));
  std::vector<std::vector<float>> out;
  for (const Tensor& t : ex.run(args)) out.push_back(t.to(kFloat32).to_vector<float>());
  return out;
}
// The first output.
inline std::vector<float> run_graph(std::unique_ptr<graph::Graph> g, const std::vector<Tensor>& args) {
  return run_graph_all(std::move(g), args).at(0);
}

}  // namespace spore::test
