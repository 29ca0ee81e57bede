// The recurrent layers (spore/nn/rnn.h) in Graph mode: a trace unrolls the time loop into ordinary
// ops, so a compiled forward (with per-sample lengths passed as a graph input) equals PyNative,
// a TrainOneStepCell step of an LSTM forecaster compiles once and trains exactly as PyNative, and
// a loop over the cells (LSTMCell, GRUCell, RNNCell) compiles to PyNative's values and gradients.
#include <gtest/gtest.h>

#include "graph/graph_test_util.h"
#include "spore/spore.h"

using namespace spore;

namespace {

struct PyNativeAfter {
  ~PyNativeAfter() { set_context({.mode = Mode::PyNative}); }
};

// (N, T, 3) -> LSTM (2 layers) -> the last step's state -> Dense -> (N, 1)
struct Forecaster : nn::Cell {
  nn::LSTM lstm{3, 8, {.num_layers = 2, .batch_first = true}};
  nn::Dense fc{8, 1};
  Forecaster() { register_cells("lstm", lstm, "fc", fc); }
  Tensor construct(const Tensor& x) override {
    const Tensor y = lstm(x);               // (N, T, 8)
    return fc(y.select(1, y.size(1) - 1));  // (N, 1)
  }
};

std::vector<std::vector<float>> params_of(const nn::Cell& net) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : net.trainable_params()) out.push_back(p.to_vector<float>());
  return out;
}

}  // namespace

TEST(RNNGraph, CompiledForwardEqualsPyNative) {
  set_seed(5);
  nn::GRU gru(3, 4, {.num_layers = 2, .bidirectional = true});
  const Tensor x = randn({6, 3, 3});
  const Tensor len = from_vector<int64_t>({6, 2, 4}, {3});
  const nn::RNNOutput eager = gru.run(x, {}, {}, len);
  auto f = jit(
      [&](const std::vector<Tensor>& a) {
        const nn::RNNOutput r = gru.run(a[0], {}, {}, a[1]);
        return std::vector<Tensor>{r.output, r.h_n};
      },
      {.name = "gru"});
  for (int call = 0; call < 2; ++call) {
    const std::vector<Tensor> g = f({x, len});
    test::expect_close(g[0].to_vector<float>(), eager.output.to_vector<float>(), 1e-6, "output");
    test::expect_close(g[1].to_vector<float>(), eager.h_n.to_vector<float>(), 1e-6, "h_n");
  }
  // Other lengths: the same graph (the lengths are an input, not traced in).
  const Tensor len2 = from_vector<int64_t>({1, 6, 3}, {3});
  test::expect_close(f({x, len2})[0].to_vector<float>(),
                     gru.run(x, {}, {}, len2).output.to_vector<float>(), 1e-6, "other lengths");
  EXPECT_EQ(f.stats().traces, 1);
}

TEST(RNNGraph, LstmTrainStepCompilesOnceAndMatchesPyNative) {
  auto run = [](Mode mode, int steps, std::vector<float>& losses) {
    PyNativeAfter restore;
    set_seed(11);
    auto net = std::make_shared<Forecaster>();
    auto opt = std::make_shared<optim::Adam>(net->trainable_params(), 1e-2);
    auto step = std::make_shared<train::TrainOneStepCell>(
        std::make_shared<train::WithLossCell>(net, std::make_shared<nn::MSELoss>()), opt);
    set_seed(12);
    const Tensor x = randn({4, 5, 3}), y = randn({4, 1});
    set_context({.mode = mode});
    for (int i = 0; i < steps; ++i) losses.push_back((*step)(x, y).item<float>());
    if (mode == Mode::Graph) {
      EXPECT_EQ(step->jit_stats().traces, 1);
      EXPECT_EQ(step->jit_stats().cache_hits, steps - 1);
    }
    return params_of(*net);
  };
  std::vector<float> lg, le;
  const auto pg = run(Mode::Graph, 6, lg), pe = run(Mode::PyNative, 6, le);
  for (size_t i = 0; i < lg.size(); ++i)
    EXPECT_NEAR(lg[i], le[i], 1e-5 * std::abs(le[i])) << "loss of step " << i;
  EXPECT_LT(le.back(), le.front());  // it trains
  test::expect_params_close(pg, pe, "LSTM forecaster, Adam");
}

// The cells stepped by hand over a sequence (a decoder's loop): a compiled forward and its
// gradients equal PyNative's.
TEST(RNNGraph, CellLoopCompiledEqualsPyNative) {
  set_seed(8);
  nn::LSTMCell lstm(3, 4);
  nn::GRUCell gru(4, 4);
  nn::RNNCell rnn(4, 2, {.nonlinearity = "relu"});
  const Tensor x = randn({5, 2, 3});
  auto fn = [&](const std::vector<Tensor>& a) {
    EnableGradGuard eg;  // (jit traces under no_grad; the gradient is part of the function)
    Tensor h, c, g, r;
    for (int64_t t = 0; t < a[0].size(0); ++t) {
      std::tie(h, c) = lstm.step(a[0].select(0, t), h, c);
      g = gru.step(h, g).first;
      r = rnn.step(g, r).first;
    }
    const Tensor loss = sum(r * r) + sum(c);
    std::vector<Tensor> out{loss};
    for (const Tensor& gr : autograd::grad(loss, lstm.trainable_params())) out.push_back(gr);
    return out;
  };
  const std::vector<Tensor> eager = fn({x});
  auto f = jit(fn, {.name = "cells"});
  for (int call = 0; call < 2; ++call) {
    const std::vector<Tensor> g = f({x});
    ASSERT_EQ(g.size(), eager.size());
    for (size_t i = 0; i < g.size(); ++i)
      test::expect_close(g[i].to_vector<float>(), eager[i].to_vector<float>(), 1e-6,
                         i == 0 ? "loss" : "gradient " + std::to_string(i));
  }
  EXPECT_EQ(f.stats().traces, 1);
}
