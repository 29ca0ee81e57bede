// RNN, LSTM and GRU (spore/nn/rnn.h): outputs and gradients (input, initial states, every weight)
// equal to PyTorch's for the same weights (live when /usr/bin/python3 or $SPORE_PYTHON imports
// torch, else the committed fixtures/rnn_torch.json that tests/nn/rnn_crosscheck.py produced),
// central-difference gradient checks through each layer, per-sample lengths, dropout between
// layers, parameter names and shapes, and the errors. The cells (RNNCell, LSTMCell, GRUCell): one
// step against PyTorch's cells, finite differences, the unbatched form, and their errors.
#include <gtest/gtest.h>

#include <algorithm>

#include "nn/nn_test_util.h"
#include "nn/torch_reference.h"
#include "spore/nn/nn.h"
#include "test_util.h"

namespace spore {
namespace {

using nlohmann::json;

using torch_reference::tensor_of;

std::shared_ptr<nn::RNNBase> make_layer(const json& c, DType dt, double dropout = 0) {
  const std::string mode = c["mode"];
  nn::RNNOptions o{.num_layers = c["num_layers"],
                   .has_bias = c["has_bias"],
                   .batch_first = c["batch_first"],
                   .dropout = dropout,
                   .bidirectional = c["bidirectional"],
                   .nonlinearity = mode == "RNN_RELU" ? "relu" : "tanh",
                   .dtype = dt};
  const int64_t in = c["input_size"], hidden = c["hidden_size"];
  std::shared_ptr<nn::RNNBase> layer;
  if (mode == "LSTM")
    layer = std::make_shared<nn::LSTM>(in, hidden, o);
  else if (mode == "GRU")
    layer = std::make_shared<nn::GRU>(in, hidden, o);
  else
    layer = std::make_shared<nn::RNN>(in, hidden, o);
  NoGradGuard ng;
  for (const auto& [name, p] : c["params"].items()) {
    Tensor& slot = layer->parameter(name);
    EXPECT_EQ(slot.shape(), p["shape"].get<Shape>()) << name;
    assign(slot, tensor_of(p, dt));
  }
  EXPECT_EQ(layer->trainable_params().size(), c["params"].size());
  return layer;
}

double max_abs_diff(const Tensor& got, const json& want, const std::string& what) {
  EXPECT_EQ(got.shape(), want["shape"].get<Shape>()) << what;
  const std::vector<double> g = got.to(kFloat64).to_vector<double>();
  const std::vector<double> w = want["values"].get<std::vector<double>>();
  if (g.size() != w.size()) return 1e30;
  double m = 0;
  for (size_t i = 0; i < g.size(); ++i) m = std::max(m, std::abs(g[i] - w[i]));
  return m;
}

struct Diffs {
  double out = 0, grad = 0;
};

// One case in dtype dt: the outputs and every gradient against PyTorch's.
Diffs compare_case(const json& c, DType dt, double tol, const std::string& what) {
  auto layer = make_layer(c, dt);
  Tensor x = tensor_of(c["x"], dt).set_requires_grad(true);
  Tensor h0, c0, len;
  std::vector<Tensor> wrt{x};
  std::vector<std::string> names{"x"};
  if (c.contains("h0")) {
    h0 = tensor_of(c["h0"], dt).set_requires_grad(true);
    wrt.push_back(h0);
    names.push_back("h0");
  }
  if (c.contains("c0")) {
    c0 = tensor_of(c["c0"], dt).set_requires_grad(true);
    wrt.push_back(c0);
    names.push_back("c0");
  }
  if (!c["seq_length"].is_null()) {
    const auto l = c["seq_length"].get<std::vector<int64_t>>();
    len = from_vector(l, {int64_t(l.size())});
  }
  for (const auto& [name, p] : layer->named_parameters()) {
    wrt.push_back(p);
    names.push_back(name);
  }
  const nn::RNNOutput r = layer->run(x, h0, c0, len);
  Diffs d;
  d.out = std::max(max_abs_diff(r.output, c["output"], what + " output"),
                   max_abs_diff(r.h_n, c["h_n"], what + " h_n"));
  Tensor loss = sum(r.output * tensor_of(c["r_out"], dt)) + sum(r.h_n * tensor_of(c["r_h"], dt));
  if (c.contains("c_n")) {
    d.out = std::max(d.out, max_abs_diff(r.c_n, c["c_n"], what + " c_n"));
    loss = loss + sum(r.c_n * tensor_of(c["r_c"], dt));
  }
  EXPECT_LE(d.out, tol) << what << ": outputs";
  const std::vector<Tensor> g = autograd::grad(loss, wrt);
  for (size_t i = 0; i < g.size(); ++i) {
    if (!c["grads"].contains(names[i])) {
      ADD_FAILURE() << what << ": no reference gradient for " << names[i];
      continue;
    }
    const double e = max_abs_diff(g[i], c["grads"][names[i]], what + " d/d" + names[i]);
    EXPECT_LE(e, tol) << what << ": gradient of " << names[i];
    d.grad = std::max(d.grad, e);
  }
  return d;
}

std::string case_name(const json& c) {
  return std::string(c["mode"]) + "(layers " + std::to_string(int(c["num_layers"])) +
         (c["bidirectional"] ? ", bidirectional" : "") + (c["batch_first"] ? ", batch_first" : "") +
         (c["has_bias"] ? "" : ", no bias") + (c.contains("h0") ? ", h0" : "") +
         (c["seq_length"].is_null() ? "" : ", seq_length") + ")";
}

TEST(RNN, OutputsAndGradientsMatchPyTorch) {
  const torch_reference::Reference& ref = torch_reference::get();
  Diffs f64, f32;
  int n = 0;
  for (const json& c : ref.doc["layers"]) {
    const std::string what = case_name(c);
    const Diffs a = compare_case(c, kFloat64, 1e-10, what + " float64");
    const Diffs b = compare_case(c, kFloat32, 2e-5, what + " float32");
    f64 = {std::max(f64.out, a.out), std::max(f64.grad, a.grad)};
    f32 = {std::max(f32.out, b.out), std::max(f32.grad, b.grad)};
    ++n;
  }
  std::printf(
      "[rnn] %d RNN/LSTM/GRU cases vs %s: max |diff| float64 outputs %.3g, gradients %.3g; "
      "float32 outputs %.3g, gradients %.3g\n",
      n, ref.source.c_str(), f64.out, f64.grad, f32.out, f32.grad);
  EXPECT_EQ(n, 9);
}

// Central differences in float64 through each kind of layer, for the input, the initial state and
// a recurrent weight (the gradient that flows through time).
TEST(RNN, GradientsMatchFiniteDifferences) {
  set_seed(3);
  const nn::RNNOptions two_bi{.num_layers = 2, .bidirectional = true, .dtype = kFloat64};
  std::vector<std::pair<std::string, std::shared_ptr<nn::RNNBase>>> layers{
      {"RNN tanh", std::make_shared<nn::RNN>(3, 4, two_bi)},
      {"RNN relu",
       std::make_shared<nn::RNN>(3, 4, nn::RNNOptions{.nonlinearity = "relu", .dtype = kFloat64})},
      {"LSTM", std::make_shared<nn::LSTM>(3, 4, two_bi)},
      {"GRU", std::make_shared<nn::GRU>(3, 4, two_bi)}};
  for (auto& [name, layer] : layers) {
    const int64_t S = layer->num_layers() * layer->num_directions();
    const Tensor x = randn({4, 2, 3}, kFloat64);
    const Tensor h0 = randn({S, 2, 4}, kFloat64) * 0.5;
    const Tensor c0 =
        layer->mode() == nn::RNNBase::Mode::LSTM ? randn({S, 2, 4}, kFloat64) * 0.5 : Tensor();
    // Output and final states in one tensor, so every one of them is checked.
    auto all = [&](const nn::RNNOutput& r) {
      std::vector<Tensor> parts{r.output.reshape({-1}), r.h_n.reshape({-1})};
      if (r.c_n.defined()) parts.push_back(r.c_n.reshape({-1}));
      return concat(parts, 0);
    };
    nn_test::grad_check([&](const Tensor& v) { return all(layer->run(v, h0, c0)); }, x, 1e-6, 1e-6,
                        name + " d/dx");
    nn_test::grad_check([&](const Tensor& v) { return all(layer->run(x, v, c0)); }, h0, 1e-6, 1e-6,
                        name + " d/dh0");
    Tensor& w = layer->parameter("weight_hh_l0");
    const Tensor w0 = w;
    nn_test::grad_check(
        [&](const Tensor& v) {
          w = v;
          Tensor out = all(layer->run(x, h0, c0));
          w = w0;
          return out;
        },
        w0, 1e-6, 1e-6, name + " d/dweight_hh_l0");
  }
}

TEST(RNN, ParameterNamesShapesAndInit) {
  nn::LSTM lstm(3, 5, {.num_layers = 2, .bidirectional = true});
  std::vector<std::string> names;
  for (const auto& [n, p] : lstm.named_parameters()) names.push_back(n);
  const std::vector<std::string> want{
      "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
      "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
      "weight_ih_l1",         "weight_hh_l1",         "bias_ih_l1",         "bias_hh_l1",
      "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"};
  EXPECT_EQ(names, want);
  EXPECT_EQ(lstm.parameter("weight_ih_l0").shape(), (Shape{20, 3}));
  EXPECT_EQ(lstm.parameter("weight_ih_l1").shape(), (Shape{20, 10}));  // both directions feed it
  EXPECT_EQ(lstm.parameter("weight_hh_l1_reverse").shape(), (Shape{20, 5}));
  EXPECT_EQ(nn::GRU(3, 5).parameter("bias_hh_l0").shape(), (Shape{15}));
  EXPECT_EQ(nn::RNN(3, 5, {.has_bias = false}).named_parameters().size(), 2u);
  // U(-1/sqrt(hidden), 1/sqrt(hidden)): within the bound and not all zero.
  const std::vector<float> w = lstm.parameter("weight_hh_l0").to_vector<float>();
  const float bound = 1 / std::sqrt(5.0f);
  EXPECT_LE(*std::max_element(w.begin(), w.end()), bound);
  EXPECT_GE(*std::min_element(w.begin(), w.end()), -bound);
  EXPECT_GT(*std::max_element(w.begin(), w.end()), bound / 2);
  EXPECT_EQ(lstm.str(),
            "LSTM<input_size=3, hidden_size=5, num_layers=2, has_bias=True, batch_first=False, "
            "dropout=0, bidirectional=True>");
}

TEST(RNN, ShapesBatchFirstAndForwardEntryPoints) {
  set_seed(1);
  nn::GRU gru(3, 4, {.num_layers = 2, .batch_first = true, .bidirectional = true});
  const Tensor x = randn({2, 6, 3});  // (N, T, in)
  const nn::RNNOutput r = gru.run(x);
  EXPECT_EQ(r.output.shape(), (Shape{2, 6, 8}));
  EXPECT_EQ(r.h_n.shape(), (Shape{4, 2, 4}));
  EXPECT_FALSE(r.c_n.defined());
  // The forward output of the last step is h_n's last-layer forward state; the reverse one's
  // final state is its output at t = 0.
  nn_test::expect_close(r.output.select(1, 5).slice(1, 0, 4), r.h_n.select(0, 2), 1e-6, "fwd");
  nn_test::expect_close(r.output.select(1, 0).slice(1, 4, 8), r.h_n.select(0, 3), 1e-6, "rev");
  // construct() is the output; forward() returns the states too.
  nn_test::expect_close(gru(x), r.output, 0, "construct");
  const std::vector<Tensor> f = gru.forward({x, zeros({4, 2, 4})});
  ASSERT_EQ(f.size(), 2u);
  nn_test::expect_close(f[0], r.output, 0, "forward with zero h0");
  nn::LSTM lstm(3, 4);
  EXPECT_EQ(lstm.forward({randn({5, 2, 3})}).size(), 3u);
}

TEST(RNN, SeqLengthFreezesFinishedSamples) {
  // A sample of length 3 padded to 6 steps: its outputs after step 3 are zero and its final states
  // are those of running the 3 steps alone, in both directions.
  set_seed(2);
  nn::LSTM lstm(2, 3, {.bidirectional = true});
  const Tensor x = randn({6, 2, 2});
  const nn::RNNOutput r = lstm.run(x, {}, {}, from_vector<int64_t>({3, 6}, {2}));
  const nn::RNNOutput alone = lstm.run(x.slice(0, 0, 3).slice(1, 0, 1).contiguous());
  nn_test::expect_close(r.output.slice(0, 0, 3).slice(1, 0, 1), alone.output, 1e-6, "valid");
  nn_test::expect_close(r.output.slice(0, 3, 6).slice(1, 0, 1), std::vector<double>(18, 0.0), 0,
                        "padding");
  nn_test::expect_close(r.h_n.slice(1, 0, 1), alone.h_n, 1e-6, "h_n");
  nn_test::expect_close(r.c_n.slice(1, 0, 1), alone.c_n, 1e-6, "c_n");
  // Full-length samples are unaffected by the masks.
  const nn::RNNOutput full = lstm.run(x.slice(1, 1, 2).contiguous());
  nn_test::expect_close(r.output.slice(1, 1, 2), full.output, 1e-6, "full length");
}

TEST(RNN, DropoutBetweenLayersOnlyWhileTraining) {
  set_seed(4);
  nn::RNN a(3, 8, {.num_layers = 2, .dropout = 0.5});
  nn::RNN b(3, 8, {.num_layers = 2});
  {
    NoGradGuard ng;
    for (const auto& [n, p] : a.named_parameters()) assign(b.parameter(n), p);
  }
  const Tensor x = randn({4, 2, 3});
  a.set_train(false);
  nn_test::expect_close(a(x), b(x), 0, "eval: no dropout");
  a.set_train(true);
  const std::vector<float> ya = a(x).to_vector<float>(), yb = b(x).to_vector<float>();
  EXPECT_NE(ya, yb) << "training: layer 0's output is dropped before layer 1";
}

TEST(RNN, BadInputsAreErrors) {
  using nn_test::expect_error;
  nn::LSTM lstm(3, 4, {.num_layers = 2});
  expect_error(
      [&] {
        lstm(randn({5, 3}));
      },
      "[LSTM] expected input (T, N, input_size) with input_size 3, got shape (5, 3); add "
      "the batch dim");
  expect_error([&] { lstm(randn({5, 2, 4})); }, "with input_size 3, got shape (5, 2, 4)");
  expect_error(
      [&] {
        lstm(randn({5, 2, 3}, kFloat64));
      },
      "[LSTM] input is float64 but the weights are float32");
  expect_error(
      [&] {
        lstm.forward({randn({5, 2, 3}), zeros({2, 2, 4})});
      },
      "[LSTM] the initial state is the pair (h0, c0); got h0 without c0");
  expect_error(
      [&] {
        lstm.run(randn({5, 2, 3}), zeros({1, 2, 4}), zeros({1, 2, 4}));
      },
      "expected h0 of shape (num_layers * num_directions, batch, hidden_size) = (2, 2, "
      "4), got (1, 2, 4)");
  expect_error(
      [&] {
        lstm.run(randn({5, 2, 3}), {}, {}, from_vector<int64_t>({3, 7}, {2}));
      },
      "[LSTM] seq_length values must be whole numbers in [0, 5] (the time steps), got 7");
  expect_error(
      [&] {
        lstm.run(randn({5, 2, 3}), {}, {}, from_vector<int64_t>({3}, {1}));
      },
      "expected seq_length of shape (batch,) = (2,), got (1,)");
  nn::GRU gru(3, 4);
  expect_error(
      [&] {
        gru.run(randn({5, 2, 3}), zeros({1, 2, 4}), zeros({1, 2, 4}));
      },
      "[GRU] takes one initial state h0; c0 is LSTM's");
  expect_error(
      [&] {
        gru.forward({randn({5, 2, 3}), zeros({1, 2, 4}), zeros({1, 2, 4})});
      },
      "[GRU] takes (x) or (x, h0), got 3 inputs");
  expect_error([] { nn::RNN(3, 4, {.nonlinearity = "sigmoid"}); },
               "[RNN] nonlinearity must be 'tanh' or 'relu', got 'sigmoid'");
  expect_error([] { nn::LSTM(3, 4, {.nonlinearity = "relu"}); },
               "[LSTM] has no nonlinearity option");
  expect_error([] { nn::GRU(3, 4, {.num_layers = 0}); },
               "[GRU] num_layers must be at least 1, got 0");
  expect_error([] { nn::GRU(3, 4, {.dropout = 1.0}); },
               "[GRU] dropout is a drop probability in [0, 1), got 1");
  expect_error([] { nn::RNN(0, 4); }, "[RNN] input_size and hidden_size must be positive");
}

// ---- the cells ----

std::shared_ptr<nn::RNNCellBase> make_cell(const json& c, DType dt) {
  const std::string mode = c["mode"];
  const nn::RNNCellOptions o{
      .has_bias = c["has_bias"], .nonlinearity = mode == "RNN_RELU" ? "relu" : "tanh", .dtype = dt};
  const int64_t in = c["input_size"], hidden = c["hidden_size"];
  std::shared_ptr<nn::RNNCellBase> cell;
  if (mode == "LSTM")
    cell = std::make_shared<nn::LSTMCell>(in, hidden, o);
  else if (mode == "GRU")
    cell = std::make_shared<nn::GRUCell>(in, hidden, o);
  else
    cell = std::make_shared<nn::RNNCell>(in, hidden, o);
  NoGradGuard ng;
  for (const auto& [name, p] : c["params"].items()) {
    Tensor& slot = cell->parameter(name);
    EXPECT_EQ(slot.shape(), p["shape"].get<Shape>()) << name;
    assign(slot, tensor_of(p, dt));
  }
  EXPECT_EQ(cell->trainable_params().size(), c["params"].size());
  return cell;
}

// One step in dtype dt: h' (and c') and every gradient against PyTorch's; the largest difference.
double compare_cell(const json& c, DType dt, double tol, const std::string& what) {
  auto cell = make_cell(c, dt);
  Tensor x = tensor_of(c["x"], dt).set_requires_grad(true);
  Tensor h, st;
  std::vector<Tensor> wrt{x};
  std::vector<std::string> names{"x"};
  for (const char* s : {"h", "c"}) {
    if (!c.contains(s)) continue;
    (std::string(s) == "h" ? h : st) = tensor_of(c[s], dt).set_requires_grad(true);
    wrt.push_back(std::string(s) == "h" ? h : st);
    names.push_back(s);
  }
  for (const auto& [name, p] : cell->named_parameters()) {
    wrt.push_back(p);
    names.push_back(name);
  }
  const auto [h1, c1] = cell->step(x, h, st);
  double d = max_abs_diff(h1, c["h_next"], what + " h'");
  Tensor loss = sum(h1 * tensor_of(c["r_h"], dt));
  if (c.contains("c_next")) {
    d = std::max(d, max_abs_diff(c1, c["c_next"], what + " c'"));
    loss = loss + sum(c1 * tensor_of(c["r_c"], dt));
  } else {
    EXPECT_FALSE(c1.defined()) << what;
  }
  const std::vector<Tensor> g = autograd::grad(loss, wrt);
  for (size_t i = 0; i < g.size(); ++i)
    d = std::max(d, max_abs_diff(g[i], c["grads"][names[i]], what + " d/d" + names[i]));
  EXPECT_LE(d, tol) << what;
  return d;
}

TEST(RNNCell, OutputsAndGradientsMatchPyTorch) {
  const torch_reference::Reference& ref = torch_reference::get();
  ASSERT_TRUE(ref.doc.contains("cells")) << ref.source << " has no cell cases";
  double f64 = 0, f32 = 0;
  int n = 0;
  for (const json& c : ref.doc["cells"]) {
    const std::string what = std::string(c["mode"]) + "Cell case " + std::to_string(n);
    f64 = std::max(f64, compare_cell(c, kFloat64, 1e-12, what + " float64"));
    f32 = std::max(f32, compare_cell(c, kFloat32, 1e-5, what + " float32"));
    ++n;
  }
  std::printf(
      "[rnn] %d RNNCell/LSTMCell/GRUCell cases vs %s: max |diff| float64 %.3g, "
      "float32 %.3g (outputs and gradients)\n",
      n, ref.source.c_str(), f64, f32);
  EXPECT_EQ(n, 9);
}

// A cell is one step of its layer (the same step function): the one-layer layer over T = 1 with
// the cell's weights gives the cell's state.
TEST(RNNCell, OneStepOfTheLayerAndFiniteDifferences) {
  set_seed(6);
  for (const char* kind : {"RNN", "LSTM", "GRU"}) {
    const std::string k = kind;
    const nn::RNNOptions lo{.dtype = kFloat64};
    const nn::RNNCellOptions co{.dtype = kFloat64};
    std::shared_ptr<nn::RNNBase> layer;
    std::shared_ptr<nn::RNNCellBase> cell;
    if (k == "LSTM") {
      layer = std::make_shared<nn::LSTM>(3, 4, lo);
      cell = std::make_shared<nn::LSTMCell>(3, 4, co);
    } else if (k == "GRU") {
      layer = std::make_shared<nn::GRU>(3, 4, lo);
      cell = std::make_shared<nn::GRUCell>(3, 4, co);
    } else {
      layer = std::make_shared<nn::RNN>(3, 4, lo);
      cell = std::make_shared<nn::RNNCell>(3, 4, co);
    }
    {
      NoGradGuard ng;
      for (const auto& [n, p] : cell->named_parameters()) assign(p, layer->parameter(n + "_l0"));
    }
    const Tensor x = randn({2, 3}, kFloat64), h = randn({2, 4}, kFloat64) * 0.5;
    const Tensor c = k == "LSTM" ? randn({2, 4}, kFloat64) * 0.5 : Tensor();
    const nn::RNNOutput r =
        layer->run(x.unsqueeze(0), h.unsqueeze(0), c.defined() ? c.unsqueeze(0) : Tensor());
    const auto [h1, c1] = cell->step(x, h, c);
    nn_test::expect_close(h1, r.h_n.select(0, 0), 1e-14, k + "Cell h' = the layer's h_n");
    if (c.defined()) nn_test::expect_close(c1, r.c_n.select(0, 0), 1e-14, k + "Cell c'");
    // Unbatched: (input_size,) in, (hidden,) out, the batched result's row.
    const auto [hu, cu] =
        cell->step(x.select(0, 1), h.select(0, 1), c.defined() ? c.select(0, 1) : Tensor());
    EXPECT_EQ(hu.shape(), (Shape{4}));
    nn_test::expect_close(hu, h1.select(0, 1), 1e-14, k + "Cell unbatched");
    auto both = [&](const std::pair<Tensor, Tensor>& s) {
      return s.second.defined() ? concat({s.first, s.second}, 1) : s.first;
    };
    nn_test::grad_check([&](const Tensor& v) { return both(cell->step(v, h, c)); }, x, 1e-6, 1e-7,
                        k + "Cell d/dx");
    nn_test::grad_check([&](const Tensor& v) { return both(cell->step(x, v, c)); }, h, 1e-6, 1e-7,
                        k + "Cell d/dh");
    if (c.defined())
      nn_test::grad_check([&](const Tensor& v) { return both(cell->step(x, h, v)); }, c, 1e-6, 1e-7,
                          k + "Cell d/dc");
  }
}

TEST(RNNCell, NamesForwardAndBadInputs) {
  using nn_test::expect_error;
  nn::LSTMCell lstm(3, 4);
  std::vector<std::string> names;
  for (const auto& [n, p] : lstm.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"weight_ih", "weight_hh", "bias_ih", "bias_hh"}));
  EXPECT_EQ(lstm.parameter("weight_ih").shape(), (Shape{16, 3}));
  EXPECT_EQ(nn::GRUCell(3, 4).parameter("bias_hh").shape(), (Shape{12}));
  EXPECT_EQ(nn::RNNCell(3, 4, {.has_bias = false}).named_parameters().size(), 2u);
  EXPECT_EQ(nn::RNNCell(3, 4, {.nonlinearity = "relu"}).str(),
            "RNNCell<input_size=3, hidden_size=4, has_bias=True, nonlinearity=relu>");
  EXPECT_EQ(lstm.forward({randn({2, 3})}).size(), 2u);
  nn::GRUCell gru(3, 4);
  EXPECT_EQ(gru.forward({randn({2, 3}), zeros({2, 4})}).size(), 1u);
  EXPECT_EQ(gru(randn({2, 3})).shape(), (Shape{2, 4}));
  expect_error(
      [&] {
        lstm.step(randn({5, 2, 3}));
      },
      "[LSTMCell] expected input (batch, input_size) or (input_size,) with input_size "
      "3, got shape (5, 2, 3); a cell takes one time step");
  expect_error(
      [&] {
        lstm.step(randn({2, 3}), zeros({2, 4}));
      },
      "[LSTMCell] the state is the pair (h, c); got h without c");
  expect_error(
      [&] {
        lstm(randn({2, 3}), zeros({2, 4}));
      },
      "[LSTMCell] the state is the pair (h, c)");
  expect_error(
      [&] {
        lstm.step(randn({2, 3}), zeros({3, 4}), zeros({3, 4}));
      },
      "[LSTMCell] expected h of shape (batch, hidden_size) = (2, 4) for input of shape "
      "(2, 3), got (3, 4)");
  expect_error(
      [&] {
        gru.step(randn({2, 3}), zeros({2, 4}), zeros({2, 4}));
      },
      "[GRUCell] takes one state h; the (h, c) pair is LSTMCell's");
  expect_error(
      [&] {
        gru.step(randn({2, 3}, kFloat64));
      },
      "[GRUCell] input is float64 but the weights are float32");
  expect_error([] { nn::RNNCell(3, 4, {.nonlinearity = "gelu"}); },
               "[RNNCell] nonlinearity must be 'tanh' or 'relu', got 'gelu'");
  expect_error([] { nn::GRUCell(3, 4, {.nonlinearity = "relu"}); },
               "[GRUCell] has no nonlinearity option");
  expect_error([] { nn::LSTMCell(3, 0); },
               "[LSTMCell] input_size and hidden_size must be positive");
}

}  // namespace
}  // namespace spore
