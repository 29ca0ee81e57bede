// Recurrent layers with MindSpore's names, arguments and weight layout: RNN (tanh or relu), LSTM,
// GRU, each multi-layer, optionally bidirectional and batch_first, with optional initial states and
// per-sample sequence lengths.
//   nn::LSTM lstm{8, 32, {.num_layers = 2, .batch_first = true}};
//   auto [y, h_n, c_n] = lstm.run(x);             // y (N, T, 32), h_n / c_n (2, N, 32)
// Parameters per layer l and direction (suffix "_reverse" for the backward one), as MindSpore and
// PyTorch name and lay them out: weight_ih_l{l} (G * hidden, in), weight_hh_l{l} (G * hidden,
// hidden), bias_ih_l{l} and bias_hh_l{l} (G * hidden), with G gate blocks stacked along dim 0:
// LSTM (i, f, g, o), GRU (r, z, n), RNN one. All start U(-1/sqrt(hidden), 1/sqrt(hidden)).
// The layers are composites of matmul, sigmoid, tanh, slicing and stack/concat, so autograd and
// Graph mode (which unrolls the time loop) need nothing of their own.
// RNNCell, LSTMCell and GRUCell are one time step of the same recurrences (the same step
// function: rnn_cell_step), with parameters weight_ih, weight_hh, bias_ih, bias_hh.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "spore/nn/cell.h"

namespace spore::nn {

struct RNNOptions {
  int64_t num_layers = 1;
  bool has_bias = true;
  bool batch_first = false;  // x (N, T, in) instead of (T, N, in); the states stay (L*D, N, H)
  double dropout = 0;        // drop probability on each layer's output but the last (training)
  bool bidirectional = false;
  std::string nonlinearity = "tanh";  // RNN only: "tanh" | "relu"
  DType dtype = kFloat32;
};

// What a recurrent layer returns: the last layer's hidden state at every step (both directions
// concatenated), and each layer's and direction's final states (c_n: LSTM only).
struct RNNOutput {
  Tensor output;  // (T, N, D * hidden), or (N, T, D * hidden) with batch_first
  Tensor h_n;     // (num_layers * D, N, hidden): layer 0 forward, layer 0 reverse, layer 1 ...
  Tensor c_n;     // LSTM: like h_n; else undefined
};

class RNNBase : public Cell {
 public:
  enum class Mode { RNN_TANH, RNN_RELU, LSTM, GRU };
  RNNBase(Mode mode, int64_t input_size, int64_t hidden_size, RNNOptions opt);

  // x (T, N, input_size) (batch_first: (N, T, input_size)). h0 (and c0 for LSTM): the initial
  // states (num_layers * D, N, hidden), zeros when undefined. seq_length (N,) integers: sample b
  // is only its first seq_length[b] steps; its later outputs are zero, its final states those of
  // its last step (the reverse direction starts at that step), as MindSpore's seq_length and
  // PyTorch's packed sequences.
  RNNOutput run(const Tensor& x, const Tensor& h0 = {}, const Tensor& c0 = {},
                const Tensor& seq_length = {});
  Tensor construct(const Tensor& x) override;  // the output only
  // {x[, h0[, c0 (LSTM)]]} -> {output, h_n[, c_n (LSTM)]}
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  std::string extend_repr() const override;

  Mode mode() const { return mode_; }
  int64_t input_size() const { return input_; }
  int64_t hidden_size() const { return hidden_; }
  int64_t num_layers() const { return opt_.num_layers; }
  int64_t num_directions() const { return opt_.bidirectional ? 2 : 1; }
  const RNNOptions& options() const { return opt_; }
  // "weight_ih_l0", "bias_hh_l1_reverse", ...
  static std::string param_name(const char* kind, int64_t layer, bool reverse);

 private:
  // One layer in one direction over the projected inputs xp (T, N, G * hidden); returns the
  // hidden state at every step (T, N, hidden) and sets h / c to the final states.
  Tensor run_direction(const Tensor& xp, Tensor& h, Tensor& c, const Tensor& w_hh,
                       const Tensor& b_hh, bool reverse, const std::vector<Tensor>& masks);
  Mode mode_;
  int64_t input_, hidden_;
  int64_t gates_;  // 1, 4 or 3
  RNNOptions opt_;
};

// One time step of a recurrence, the arithmetic the layers and the cells share. xp: the input's
// projection x W_ih^T + b_ih (+ b_hh for RNN / LSTM, whose biases sum before the nonlinearity);
// gh: h W_hh^T (+ b_hh for GRU, whose b_hn sits inside r * (...)); both (N, G * hidden). h, c: the
// states (N, hidden) (c: LSTM only). Returns {h', c'} (c' undefined but for LSTM).
std::pair<Tensor, Tensor> rnn_cell_step(RNNBase::Mode mode, const Tensor& xp, const Tensor& gh,
                                        const Tensor& h, const Tensor& c);

// Elman RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (nonlinearity "relu": relu).
class RNN : public RNNBase {
 public:
  RNN(int64_t input_size, int64_t hidden_size, RNNOptions opt = {});
};

// i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of (x W_ih^T + b_ih + h W_hh^T + b_hh) split in 4;
// c' = f * c + i * g; h' = o * tanh(c').
class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, RNNOptions opt = {});
};

// r, z = sigmoid(x W_i{r,z}^T + b_i{r,z} + h W_h{r,z}^T + b_h{r,z});
// n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn)); h' = (1 - z) * n + z * h.
class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, RNNOptions opt = {});
};

struct RNNCellOptions {
  bool has_bias = true;
  std::string nonlinearity = "tanh";  // RNNCell only: "tanh" | "relu"
  DType dtype = kFloat32;
};

// One step of RNN / LSTM / GRU (MindSpore's nn.RNNCell, nn.LSTMCell, nn.GRUCell, PyTorch's
// layout): weight_ih (G * hidden, input_size), weight_hh (G * hidden, hidden), bias_ih and
// bias_hh (G * hidden), all U(-1/sqrt(hidden), 1/sqrt(hidden)).
//   nn::LSTMCell cell{8, 32};
//   auto [h1, c1] = cell.step(x, h0, c0);  // x (N, 8); h0, c0 (N, 32), zeros when undefined
class RNNCellBase : public Cell {
 public:
  RNNCellBase(RNNBase::Mode mode, int64_t input_size, int64_t hidden_size, RNNCellOptions opt);
  // x (N, input_size) or unbatched (input_size,); h (and c for LSTM) (N, hidden) or (hidden,),
  // zeros when undefined. Returns {h', c'} (c' defined for LSTM only), batched like x.
  std::pair<Tensor, Tensor> step(const Tensor& x, const Tensor& h = {}, const Tensor& c = {});
  Tensor construct(const Tensor& x) override;                   // h' from zero states
  Tensor construct(const Tensor& x, const Tensor& h) override;  // h' (not LSTM: it needs c too)
  // {x[, h[, c (LSTM)]]} -> {h'[, c' (LSTM)]}
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  std::string extend_repr() const override;

  RNNBase::Mode mode() const { return mode_; }
  int64_t input_size() const { return input_; }
  int64_t hidden_size() const { return hidden_; }

 private:
  RNNBase::Mode mode_;
  int64_t input_, hidden_;
  RNNCellOptions opt_;
};

// h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (nonlinearity "relu": relu).
class RNNCell : public RNNCellBase {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, RNNCellOptions opt = {});
};

// LSTM's step: (h', c') from (x, h, c).
class LSTMCell : public RNNCellBase {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, RNNCellOptions opt = {});
};

// GRU's step: h' from (x, h).
class GRUCell : public RNNCellBase {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, RNNCellOptions opt = {});
};

}  // namespace spore::nn
