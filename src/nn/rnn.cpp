// RNN, LSTM and GRU (spore/nn/rnn.h) as composites: each layer and direction projects the whole
// sequence once (one matmul, x W_ih^T + b_ih), then steps through time with one matmul per step
// (h W_hh^T) and the gate arithmetic. Autograd sees ordinary ops; a Graph-mode trace unrolls the
// loop. Per-sample lengths become 0/1 masks per step: a finished sample keeps its state and
// outputs zeros, and the reverse direction, walking t = T-1 .. 0, starts at its last valid step.
#include "spore/nn/rnn.h"

#include <cmath>

#include "nn/util.h"
#include "spore/autograd.h"
#include "spore/nn/init.h"
#include "spore/ops.h"

namespace spore::nn {

using detail::fmt;
using detail::fmt_bool;

namespace {

const char* mode_name(RNNBase::Mode m) {
  switch (m) {
    case RNNBase::Mode::LSTM:
      return "LSTM";
    case RNNBase::Mode::GRU:
      return "GRU";
    default:
      return "RNN";
  }
}

int64_t gates_of(RNNBase::Mode m) {
  return m == RNNBase::Mode::LSTM ? 4 : m == RNNBase::Mode::GRU ? 3 : 1;
}

RNNBase::Mode rnn_mode(const char* who, const std::string& nonlinearity) {
  SPORE_CHECK(nonlinearity == "tanh" || nonlinearity == "relu", "[", who,
              "] nonlinearity must be 'tanh' or 'relu', got '", nonlinearity, "'");
  return nonlinearity == "relu" ? RNNBase::Mode::RNN_RELU : RNNBase::Mode::RNN_TANH;
}

template <class Options>
Options no_nonlinearity(const char* who, Options opt) {
  SPORE_CHECK(opt.nonlinearity == "tanh", "[", who, "] has no nonlinearity option (its gates are ",
              "fixed sigmoid / tanh), got nonlinearity '", opt.nonlinearity,
              "'; leave it at its default or use nn::RNN / nn::RNNCell for a relu recurrence");
  return opt;
}

// The bias added to the input's projection: RNN and LSTM add both biases before the
// nonlinearity, so b_hh is folded in once; GRU keeps b_hh for the hidden side (b_hn sits inside
// r * (...)).
Tensor input_bias(RNNBase::Mode mode, const Tensor& b_ih, const Tensor& b_hh) {
  return mode == RNNBase::Mode::GRU ? b_ih : b_ih + b_hh;
}

// MindSpore and PyTorch: every weight and bias U(-1/sqrt(hidden), 1/sqrt(hidden)).
Initializer weight_init(int64_t hidden) { return Uniform(1.0 / std::sqrt(double(hidden))); }

}  // namespace

std::string RNNBase::param_name(const char* kind, int64_t layer, bool reverse) {
  return std::string(kind) + "_l" + std::to_string(layer) + (reverse ? "_reverse" : "");
}

RNNBase::RNNBase(Mode mode, int64_t input_size, int64_t hidden_size, RNNOptions opt)
    : mode_(mode),
      input_(input_size),
      hidden_(hidden_size),
      gates_(gates_of(mode)),
      opt_(std::move(opt)) {
  const char* n = mode_name(mode);
  set_cls_name(n);
  SPORE_CHECK(input_ > 0 && hidden_ > 0, "[", n,
              "] input_size and hidden_size must be positive, got ", input_, " and ", hidden_);
  SPORE_CHECK(opt_.num_layers >= 1, "[", n, "] num_layers must be at least 1, got ",
              opt_.num_layers);
  SPORE_CHECK(opt_.dropout >= 0 && opt_.dropout < 1, "[", n,
              "] dropout is a drop probability in [0, 1), got ", fmt(opt_.dropout));
  SPORE_CHECK_TYPE(is_floating(opt_.dtype), "[", n, "] dtype must be floating point, got ",
                   dtype_name(opt_.dtype));
  const Initializer init = weight_init(hidden_);
  const int64_t g = gates_ * hidden_;
  for (int64_t l = 0; l < opt_.num_layers; ++l) {
    const int64_t in = l == 0 ? input_ : hidden_ * num_directions();
    for (int64_t d = 0; d < num_directions(); ++d) {
      register_parameter(param_name("weight_ih", l, d == 1), init.make({g, in}, opt_.dtype));
      register_parameter(param_name("weight_hh", l, d == 1), init.make({g, hidden_}, opt_.dtype));
      if (opt_.has_bias) {
        register_parameter(param_name("bias_ih", l, d == 1), init.make({g}, opt_.dtype));
        register_parameter(param_name("bias_hh", l, d == 1), init.make({g}, opt_.dtype));
      }
    }
  }
}

RNN::RNN(int64_t input_size, int64_t hidden_size, RNNOptions opt)
    : RNNBase(rnn_mode("RNN", opt.nonlinearity), input_size, hidden_size, opt) {}
LSTM::LSTM(int64_t input_size, int64_t hidden_size, RNNOptions opt)
    : RNNBase(Mode::LSTM, input_size, hidden_size, no_nonlinearity("LSTM", opt)) {}
GRU::GRU(int64_t input_size, int64_t hidden_size, RNNOptions opt)
    : RNNBase(Mode::GRU, input_size, hidden_size, no_nonlinearity("GRU", opt)) {}

std::pair<Tensor, Tensor> rnn_cell_step(RNNBase::Mode mode, const Tensor& xp, const Tensor& gh,
                                        const Tensor& h, const Tensor& c) {
  using Mode = RNNBase::Mode;
  const int64_t H = h.size(-1);
  switch (mode) {
    case Mode::RNN_TANH:
      return {tanh(xp + gh), Tensor()};  // both biases are in xp
    case Mode::RNN_RELU:
      return {relu(xp + gh), Tensor()};
    case Mode::LSTM: {
      const Tensor gates = xp + gh;  // (i, f, g, o)
      const Tensor i = sigmoid(gates.slice(1, 0, H)), f = sigmoid(gates.slice(1, H, 2 * H));
      const Tensor g = tanh(gates.slice(1, 2 * H, 3 * H)),
                   o = sigmoid(gates.slice(1, 3 * H, 4 * H));
      Tensor c_new = f * c + i * g;
      Tensor h_new = o * tanh(c_new);
      return {h_new, c_new};
    }
    case Mode::GRU: {
      const Tensor r = sigmoid(xp.slice(1, 0, H) + gh.slice(1, 0, H));
      const Tensor z = sigmoid(xp.slice(1, H, 2 * H) + gh.slice(1, H, 2 * H));
      const Tensor n = tanh(xp.slice(1, 2 * H, 3 * H) + r * gh.slice(1, 2 * H, 3 * H));
      return {n + z * (h - n), Tensor()};  // (1 - z) * n + z * h
    }
  }
  return {};
}

Tensor RNNBase::run_direction(const Tensor& xp, Tensor& h, Tensor& c, const Tensor& w_hh,
                              const Tensor& b_hh, bool reverse, const std::vector<Tensor>& masks) {
  const int64_t T = xp.size(0);
  const Tensor w_t = w_hh.t().contiguous();  // (H, G * H), once per call
  std::vector<Tensor> hs(static_cast<size_t>(T));
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s;
    const Tensor x_t = xp.select(0, t);                        // (N, G * H)
    Tensor gh = matmul(h, w_t);                                // (N, G * H)
    if (mode_ == Mode::GRU && b_hh.defined()) gh = gh + b_hh;  // b_hn stays inside r * (...)
    auto [h_new, c_new] = rnn_cell_step(mode_, x_t, gh, h, c);
    if (masks.empty()) {
      h = h_new;
      if (c_new.defined()) c = c_new;
      hs[size_t(t)] = h_new;
    } else {  // m = 1 while sample b is inside its length: exact selects, 0 * x + 1 * y = y
      const Tensor& m = masks[size_t(t)];  // (N, 1)
      const Tensor keep = 1.0 - m;
      h = m * h_new + keep * h;
      if (c_new.defined()) c = m * c_new + keep * c;
      hs[size_t(t)] = m * h_new;
    }
  }
  return stack(hs, 0);  // (T, N, H)
}

RNNOutput RNNBase::run(const Tensor& x_in, const Tensor& h0, const Tensor& c0,
                       const Tensor& seq_length) {
  const char* n = mode_name(mode_);
  const int64_t L = opt_.num_layers, D = num_directions(), H = hidden_;
  const std::string layout = opt_.batch_first ? "(N, T, input_size)" : "(T, N, input_size)";
  SPORE_CHECK(x_in.defined() && x_in.dim() == 3 && x_in.size(2) == input_, "[", n,
              "] expected input ", layout, " with input_size ", input_, ", got shape ",
              x_in.defined() ? shape_str(x_in.shape()) : std::string("(undefined)"),
              x_in.defined() && x_in.dim() == 2 ? "; add the batch dim (x.unsqueeze(1))" : "");
  const Tensor& w0 = parameter(param_name("weight_ih", 0, false));
  // (Under a mixed-precision policy the ops cast their operands themselves.)
  SPORE_CHECK_TYPE(x_in.dtype() == w0.dtype() || amp::current_policy().active(), "[", n,
                   "] input is ", dtype_name(x_in.dtype()), " but the weights are ",
                   dtype_name(w0.dtype()),
                   "; cast the input (x.astype) or build the layer with that dtype");
  const Tensor x = opt_.batch_first ? x_in.transpose(0, 1) : x_in;  // (T, N, in)
  const int64_t T = x.size(0), N = x.size(1);
  SPORE_CHECK(T > 0, "[", n, "] the input has no time steps (shape ", shape_str(x_in.shape()), ")");
  const Shape state{L * D, N, H};
  auto check_state = [&](const Tensor& s, const char* what) {
    SPORE_CHECK(s.shape() == state, "[", n, "] expected ", what, " of shape (num_layers * ",
                "num_directions, batch, hidden_size) = ", shape_str(state), ", got ",
                shape_str(s.shape()));
    SPORE_CHECK_TYPE(s.dtype() == x.dtype() || amp::current_policy().active(), "[", n, "] ", what,
                     " is ", dtype_name(s.dtype()), " but the input is ", dtype_name(x.dtype()));
  };
  if (h0.defined()) check_state(h0, "h0");
  if (mode_ == Mode::LSTM) {
    SPORE_CHECK(h0.defined() == c0.defined(), "[LSTM] the initial state is the pair (h0, c0); got ",
                h0.defined() ? "h0 without c0" : "c0 without h0", ": pass both or neither");
    if (c0.defined()) check_state(c0, "c0");
  } else {
    SPORE_CHECK(!c0.defined(), "[", n, "] takes one initial state h0; c0 is LSTM's");
  }
  std::vector<Tensor> masks;
  if (seq_length.defined()) {
    SPORE_CHECK(seq_length.shape() == Shape{N}, "[", n,
                "] expected seq_length of shape (batch,) = (", N, ",), got ",
                shape_str(seq_length.shape()));
    if (!seq_length.is_symbolic()) {  // a traced length is checked by nobody: its value is unknown
      for (double v : seq_length.to_vector<double>())
        SPORE_CHECK(v >= 0 && v <= double(T) && v == std::floor(v), "[", n,
                    "] seq_length values must be whole numbers in [0, ", T,
                    "] (the time steps), got ", fmt(v));
    }
    const Tensor len = seq_length.to(x.dtype()).reshape({N, 1});
    masks.reserve(size_t(T));
    for (int64_t t = 0; t < T; ++t)
      masks.push_back(greater(len, scalar_tensor(double(t), x.dtype(), x.device())).to(x.dtype()));
  }

  Tensor layer_in = x;
  std::vector<Tensor> h_n, c_n;
  for (int64_t l = 0; l < L; ++l) {
    const int64_t in = layer_in.size(2);
    std::vector<Tensor> outs;
    for (int64_t d = 0; d < D; ++d) {
      const bool rev = d == 1;
      const Tensor& w_ih = parameter(param_name("weight_ih", l, rev));
      const Tensor& w_hh = parameter(param_name("weight_hh", l, rev));
      Tensor b_hh;
      Tensor xp = matmul(layer_in.reshape({T * N, in}), w_ih.t());  // (T * N, G * H)
      if (opt_.has_bias) {
        const Tensor& b_ih = parameter(param_name("bias_ih", l, rev));
        b_hh = parameter(param_name("bias_hh", l, rev));
        xp = xp + input_bias(mode_, b_ih, b_hh);
      }
      xp = xp.reshape({T, N, gates_ * H});
      const int64_t k = l * D + d;
      Tensor h = h0.defined() ? h0.select(0, k) : zeros({N, H}, x.dtype(), x.device());
      Tensor c;
      if (mode_ == Mode::LSTM)
        c = c0.defined() ? c0.select(0, k) : zeros({N, H}, x.dtype(), x.device());
      outs.push_back(
          run_direction(xp, h, c, w_hh, mode_ == Mode::GRU ? b_hh : Tensor(), rev, masks));
      h_n.push_back(h);
      if (c.defined()) c_n.push_back(c);
    }
    layer_in = D == 2 ? concat(outs, 2) : outs[0];  // (T, N, D * H)
    if (l + 1 < L && opt_.dropout > 0 && training())
      layer_in = dropout(layer_in, opt_.dropout, true);
  }
  RNNOutput out;
  out.output = opt_.batch_first ? layer_in.transpose(0, 1).contiguous() : layer_in;
  out.h_n = stack(h_n, 0);
  if (mode_ == Mode::LSTM) out.c_n = stack(c_n, 0);
  return out;
}

Tensor RNNBase::construct(const Tensor& x) { return run(x).output; }

std::vector<Tensor> RNNBase::forward(const std::vector<Tensor>& inputs) {
  const char* n = mode_name(mode_);
  const size_t most = mode_ == Mode::LSTM ? 3 : 2;
  SPORE_CHECK(!inputs.empty() && inputs.size() <= most, "[", n, "] takes ",
              mode_ == Mode::LSTM ? "(x), (x, h0) or (x, h0, c0)" : "(x) or (x, h0)", ", got ",
              inputs.size(), " inputs");
  RNNOutput r = run(inputs[0], inputs.size() > 1 ? inputs[1] : Tensor(),
                    inputs.size() > 2 ? inputs[2] : Tensor());
  if (mode_ == Mode::LSTM) return {r.output, r.h_n, r.c_n};
  return {r.output, r.h_n};
}

std::string RNNBase::extend_repr() const {
  std::string s =
      "input_size=" + std::to_string(input_) + ", hidden_size=" + std::to_string(hidden_) +
      ", num_layers=" + std::to_string(opt_.num_layers) + ", has_bias=" + fmt_bool(opt_.has_bias) +
      ", batch_first=" + fmt_bool(opt_.batch_first) + ", dropout=" + fmt(opt_.dropout) +
      ", bidirectional=" + fmt_bool(opt_.bidirectional);
  if (mode_ == Mode::RNN_RELU) s += ", nonlinearity=relu";
  return s;
}

// ---- the cells: one step ----

namespace {
const char* cell_name(RNNBase::Mode m) {
  return m == RNNBase::Mode::LSTM ? "LSTMCell" : m == RNNBase::Mode::GRU ? "GRUCell" : "RNNCell";
}
}  // namespace

RNNCellBase::RNNCellBase(RNNBase::Mode mode, int64_t input_size, int64_t hidden_size,
                         RNNCellOptions opt)
    : mode_(mode), input_(input_size), hidden_(hidden_size), opt_(std::move(opt)) {
  const char* n = cell_name(mode);
  set_cls_name(n);
  SPORE_CHECK(input_ > 0 && hidden_ > 0, "[", n,
              "] input_size and hidden_size must be positive, got ", input_, " and ", hidden_);
  SPORE_CHECK_TYPE(is_floating(opt_.dtype), "[", n, "] dtype must be floating point, got ",
                   dtype_name(opt_.dtype));
  const Initializer init = weight_init(hidden_);
  const int64_t g = gates_of(mode) * hidden_;
  register_parameter("weight_ih", init.make({g, input_}, opt_.dtype));
  register_parameter("weight_hh", init.make({g, hidden_}, opt_.dtype));
  if (opt_.has_bias) {
    register_parameter("bias_ih", init.make({g}, opt_.dtype));
    register_parameter("bias_hh", init.make({g}, opt_.dtype));
  }
}

RNNCell::RNNCell(int64_t input_size, int64_t hidden_size, RNNCellOptions opt)
    : RNNCellBase(rnn_mode("RNNCell", opt.nonlinearity), input_size, hidden_size, opt) {}
LSTMCell::LSTMCell(int64_t input_size, int64_t hidden_size, RNNCellOptions opt)
    : RNNCellBase(RNNBase::Mode::LSTM, input_size, hidden_size, no_nonlinearity("LSTMCell", opt)) {}
GRUCell::GRUCell(int64_t input_size, int64_t hidden_size, RNNCellOptions opt)
    : RNNCellBase(RNNBase::Mode::GRU, input_size, hidden_size, no_nonlinearity("GRUCell", opt)) {}

std::pair<Tensor, Tensor> RNNCellBase::step(const Tensor& x_in, const Tensor& h_in,
                                            const Tensor& c_in) {
  const char* n = cell_name(mode_);
  SPORE_CHECK(x_in.defined() && (x_in.dim() == 1 || x_in.dim() == 2) && x_in.size(-1) == input_,
              "[", n, "] expected input (batch, input_size) or (input_size,) with input_size ",
              input_, ", got shape ",
              x_in.defined() ? shape_str(x_in.shape()) : std::string("(undefined)"),
              x_in.defined() && x_in.dim() == 3
                  ? "; a cell takes one time step: loop over the sequence, or use the layer"
                  : "");
  const Tensor& w_ih = parameter("weight_ih");
  SPORE_CHECK_TYPE(x_in.dtype() == w_ih.dtype() || amp::current_policy().active(), "[", n,
                   "] input is ", dtype_name(x_in.dtype()), " but the weights are ",
                   dtype_name(w_ih.dtype()),
                   "; cast the input (x.astype) or build the cell with that dtype");
  const bool unbatched = x_in.dim() == 1;
  const Tensor x = unbatched ? x_in.unsqueeze(0) : x_in;
  const int64_t N = x.size(0);
  const Shape want = unbatched ? Shape{hidden_} : Shape{N, hidden_};
  auto state = [&](const Tensor& s, const char* what) {
    if (!s.defined()) return zeros({N, hidden_}, x.dtype(), x.device());
    SPORE_CHECK(s.shape() == want, "[", n, "] expected ", what, " of shape ",
                unbatched ? "(hidden_size,) = " : "(batch, hidden_size) = ", shape_str(want),
                " for input of shape ", shape_str(x_in.shape()), ", got ", shape_str(s.shape()));
    SPORE_CHECK_TYPE(s.dtype() == x.dtype() || amp::current_policy().active(), "[", n, "] ", what,
                     " is ", dtype_name(s.dtype()), " but the input is ", dtype_name(x.dtype()));
    return unbatched ? s.unsqueeze(0) : s;
  };
  const Tensor h = state(h_in, "h");
  Tensor c;
  if (mode_ == RNNBase::Mode::LSTM) {
    SPORE_CHECK(h_in.defined() == c_in.defined(), "[LSTMCell] the state is the pair (h, c); got ",
                h_in.defined() ? "h without c" : "c without h", ": pass both or neither");
    c = state(c_in, "c");
  } else {
    SPORE_CHECK(!c_in.defined(), "[", n, "] takes one state h; the (h, c) pair is LSTMCell's");
  }
  Tensor xp = matmul(x, w_ih.t());
  Tensor gh = matmul(h, parameter("weight_hh").t());
  if (opt_.has_bias) {
    const Tensor &b_ih = parameter("bias_ih"), &b_hh = parameter("bias_hh");
    xp = xp + input_bias(mode_, b_ih, b_hh);
    if (mode_ == RNNBase::Mode::GRU) gh = gh + b_hh;
  }
  auto [h_new, c_new] = rnn_cell_step(mode_, xp, gh, h, c);
  if (unbatched) {
    h_new = h_new.squeeze(0);
    if (c_new.defined()) c_new = c_new.squeeze(0);
  }
  return {h_new, c_new};
}

Tensor RNNCellBase::construct(const Tensor& x) { return step(x).first; }

Tensor RNNCellBase::construct(const Tensor& x, const Tensor& h) {
  SPORE_CHECK(mode_ != RNNBase::Mode::LSTM,
              "[LSTMCell] the state is the pair (h, c): call forward({x, h, c}) or step(x, h, c)");
  return step(x, h).first;
}

std::vector<Tensor> RNNCellBase::forward(const std::vector<Tensor>& inputs) {
  const bool lstm = mode_ == RNNBase::Mode::LSTM;
  SPORE_CHECK(!inputs.empty() && inputs.size() <= (lstm ? 3u : 2u), "[", cell_name(mode_),
              "] takes ", lstm ? "(x), (x, h, c)" : "(x) or (x, h)", ", got ", inputs.size(),
              " inputs");
  SPORE_CHECK(!lstm || inputs.size() != 2,
              "[LSTMCell] the state is the pair (h, c): pass (x, h, c), or (x) for zero states");
  auto [h, c] = step(inputs[0], inputs.size() > 1 ? inputs[1] : Tensor(),
                     inputs.size() > 2 ? inputs[2] : Tensor());
  if (lstm) return {h, c};
  return {h};
}

std::string RNNCellBase::extend_repr() const {
  std::string s = "input_size=" + std::to_string(input_) +
                  ", hidden_size=" + std::to_string(hidden_) +
                  ", has_bias=" + fmt_bool(opt_.has_bias);
  if (mode_ == RNNBase::Mode::RNN_RELU) s += ", nonlinearity=relu";
  return s;
}

}  // namespace spore::nn
