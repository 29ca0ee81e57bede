// Shared by the Graph-mode tests: run a graph once through a fresh executor; compare outputs;
// set an environment switch for a scope.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
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
inline std::vector<float> run_graph(std::unique_ptr<graph::Graph> g,
                                    const std::vector<Tensor>& args) {
  return run_graph_all(std::move(g), args).at(0);
}

// |got - want| <= tol * max(1, |want|) for every element: relative for large values, absolute near
// zero (fused and blocked kernels accumulate in another order).
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                         double tol = 1e-5, const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst,
                     std::abs(double(got[i]) - want[i]) / std::max(1.0, std::abs(double(want[i]))));
  EXPECT_LE(worst, tol) << what;
}

// Parameters after training in two ways: within 1e-6 + 1e-5 |b| element by element.
inline void expect_params_close(const std::vector<std::vector<float>>& a,
                                const std::vector<std::vector<float>>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t p = 0; p < a.size(); ++p) {
    ASSERT_EQ(a[p].size(), b[p].size()) << what;
    for (size_t i = 0; i < a[p].size(); ++i)
      ASSERT_NEAR(a[p][i], b[p][i], 1e-6 + 1e-5 * std::abs(b[p][i]))
          << what << ": parameter " << p << " element " << i;
  }
}

// Sets an environment variable (a pass's off switch) for a scope.
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

}  // namespace spore::test
