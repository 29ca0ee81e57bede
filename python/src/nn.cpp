// spore._C: nn::Cell, the PyCell trampoline (a C++ cell whose construct runs a Python object's
// construct, so a Cell subclassed in Python works wherever C++ calls a cell: WithLossCell,
// TrainOneStepCell, Model, Graph-mode tracing), the layers, losses and initializers.
// The Python classes of spore.nn own one of these C++ cells each (their `_cpp`).
#include "common.h"
#include "spore/parallel/parallel.h"

namespace spore::python {
namespace {

using nn::Cell;
using CellPtr = std::shared_ptr<Cell>;

// A cell whose construct calls back into the Python Cell that owns it. The owner holds this
// object (so it lives at least as long); the back pointer is weak, cleared when the owner dies.
class PyCell : public Cell {
 public:
  PyCell(py::handle owner, const std::string& name) : owner_(owner.ptr()) { set_cls_name(name); }
  void release_owner() { owner_ = nullptr; }
  Tensor construct(const Tensor& x) override { return first(call({x}), "construct(x)"); }
  Tensor construct(const Tensor& x, const Tensor& y) override {
    return first(call({x, y}), "construct(x, y)");
  }
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override {
    std::optional<amp::PolicyScope> scope;
    if (amp_policy()) scope.emplace(*amp_policy());
    return call(inputs);
  }
  std::string extend_repr() const override {
    py::gil_scoped_acquire gil;
    if (!owner_) return "";
    return py::handle(owner_).attr("extend_repr")().cast<std::string>();
  }

 private:
  static Tensor first(const std::vector<Tensor>& v, const char* what) {
    SPORE_CHECK(!v.empty(), "[Cell] ", what, " returned no tensor");
    return v[0];
  }
  std::vector<Tensor> call(const std::vector<Tensor>& inputs) {
    py::gil_scoped_acquire gil;
    SPORE_CHECK_KIND(
        ErrorKind::RuntimeError, owner_, "[", cls_name(),
        "] the Python object of this cell was garbage collected while C++ still uses it; "
        "keep a reference to the network");
    py::tuple args(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) args[i] = py::cast(inputs[i]);
    py::object out = py::handle(owner_).attr("_construct_from_cpp")(*args);
    return tensors_in(out);
  }
  PyObject* owner_;
};

nn::Int2 int2(py::handle h) {
  auto v = to_ints(h);
  SPORE_CHECK(v.size() == 1 || v.size() == 2, "expected an int or a pair (h, w), got ", v.size(),
              " values");
  return v.size() == 1 ? nn::Int2(v[0]) : nn::Int2(v[0], v[1]);
}
nn::Pad4 pad4(py::handle h) {
  auto v = to_ints(h);
  if (v.size() == 1) return nn::Pad4(v[0]);
  if (v.size() == 2) return nn::Pad4{v[0], v[0], v[1], v[1]};  // (h, w): symmetric
  SPORE_CHECK(v.size() == 4, "padding must be an int, (h, w) or (top, bottom, left, right), got ",
              v.size(), " values");
  return nn::Pad4{v[0], v[1], v[2], v[3]};
}
nn::Initializer init_of(py::handle h) {
  if (h.is_none()) return {};
  if (py::isinstance<nn::Initializer>(h)) return h.cast<nn::Initializer>();
  if (py::isinstance<py::str>(h)) return nn::Initializer(h.cast<std::string>());
  if (py::hasattr(h, "_init")) return h.attr("_init").cast<nn::Initializer>();  // Python wrapper
  if (py::isinstance<py::float_>(h) || py::isinstance<py::int_>(h))
    return nn::Constant(h.cast<double>());
  return nn::Initializer(to_tensor(h));
}
DType dtype_or(py::handle h, DType d) { return h.is_none() ? d : to_dtype(h); }

template <typename C>
auto cell_class(py::module_& m, const char* name) {
  return py::class_<C, Cell, std::shared_ptr<C>>(m, name);
}

// nn.RNN / nn.LSTM / nn.GRU's C++ layer, MindSpore's arguments (nonlinearity: RNN's).
template <typename C>
void bind_rnn(py::module_& m, const char* name) {
  py::class_<C, nn::RNNBase, std::shared_ptr<C>>(m, name).def(
      py::init([](int64_t in, int64_t hidden, int64_t layers, bool has_bias, bool batch_first,
                  double dropout, bool bidirectional, std::string nonlinearity, py::object dt) {
        return std::make_shared<C>(
            in, hidden,
            nn::RNNOptions{layers, has_bias, batch_first, dropout, bidirectional, nonlinearity,
                           dtype_or(dt, kFloat32)});
      }),
      py::arg("input_size"), py::arg("hidden_size"), py::arg("num_layers") = 1,
      py::arg("has_bias") = true, py::arg("batch_first") = false, py::arg("dropout") = 0.0,
      py::arg("bidirectional") = false, py::arg("nonlinearity") = "tanh",
      py::arg("dtype") = py::none());
}

// nn.RNNCell / nn.LSTMCell / nn.GRUCell's C++ cell (nonlinearity: RNNCell's).
template <typename C>
void bind_rnn_cell(py::module_& m, const char* name) {
  py::class_<C, nn::RNNCellBase, std::shared_ptr<C>>(m, name).def(
      py::init(
          [](int64_t in, int64_t hidden, bool has_bias, std::string nonlinearity, py::object dt) {
            return std::make_shared<C>(
                in, hidden, nn::RNNCellOptions{has_bias, nonlinearity, dtype_or(dt, kFloat32)});
          }),
      py::arg("input_size"), py::arg("hidden_size"), py::arg("has_bias") = true,
      py::arg("nonlinearity") = "tanh", py::arg("dtype") = py::none());
}

}  // namespace

void bind_nn(py::module_& m) {
  auto nogil = py::call_guard<py::gil_scoped_release>();
  py::class_<Cell, CellPtr>(m, "CellBase")
      .def(
          "__call__", [](Cell& c, const Tensor& x) { return c(x); }, nogil)
      .def(
          "__call__", [](Cell& c, const Tensor& x, const Tensor& y) { return c(x, y); }, nogil)
      .def(
          "forward", [](Cell& c, const std::vector<Tensor>& in) { return c.forward(in); }, nogil)
      .def("register_parameter",
           [](Cell& c, const std::string& n, Tensor t, bool rg) { c.register_parameter(n, t, rg); })
      .def("register_buffer",
           [](Cell& c, const std::string& n, Tensor t) { c.register_buffer(n, t); })
      .def("register_cell",
           [](Cell& c, const std::string& n, CellPtr sub) { c.register_cell(n, sub); })
      .def("has_parameter",
           [](Cell& c, const std::string& n) {
             for (auto& [name, _] : c.named_parameters())
               if (name == n) return true;
             return false;
           })
      // Replaces a registered parameter or buffer slot (attribute re-assignment in Python).
      .def("set_parameter",
           [](Cell& c, const std::string& n, Tensor t) {
             Tensor& slot = c.parameter(n);
             if (!t.is_leaf()) t = t.detach();
             t.set_requires_grad(slot.requires_grad() && is_floating(t.dtype()));
             slot = t;
           })
      .def("set_buffer", [](Cell& c, const std::string& n, Tensor t) { c.buffer(n) = t.detach(); })
      .def("parameter", [](Cell& c, const std::string& n) { return c.parameter(n); })
      .def("buffer", [](Cell& c, const std::string& n) { return c.buffer(n); })
      .def("named_parameters", &Cell::named_parameters, py::arg("prefix") = "")
      .def("named_buffers", &Cell::named_buffers, py::arg("prefix") = "")
      .def("parameters_and_buffers", &Cell::parameters_and_buffers)
      .def("trainable_params", &Cell::trainable_params)
      .def("cell_names",
           [](const Cell& c) {
             std::vector<std::string> out;
             for (auto& [n, _] : c.named_cells()) out.push_back(n);
             return out;
           })
      .def("set_train", &Cell::set_train, py::arg("mode") = true)
      .def_property_readonly("training", &Cell::training)
      .def("to_float", [](Cell& c, py::object d) { c.to_float(to_dtype(d)); })
      .def("to_dtype", [](Cell& c, py::object d) { c.to(to_dtype(d)); })
      .def("amp_policy",
           [](const Cell& c) -> py::object {
             return c.amp_policy() ? py::cast(c.amp_policy()->str()) : py::none();
           })
      .def("clear_amp_policy", &Cell::clear_amp_policy)
      .def("trace_key", &Cell::trace_key)
      .def("recompute", &Cell::recompute, py::arg("mode") = true)
      .def("is_recompute", &Cell::is_recompute)
      .def_property("pipeline_stage", &Cell::pipeline_stage, &Cell::set_pipeline_stage)
      .def("cls_name", &Cell::cls_name)
      .def("extend_repr", &Cell::extend_repr)
      .def("str", &Cell::str, py::arg("indent") = 0);

  py::class_<PyCell, Cell, std::shared_ptr<PyCell>>(m, "PyCell")
      .def(py::init([](py::handle owner, const std::string& name) {
        return std::make_shared<PyCell>(owner, name);
      }))
      .def("release_owner", &PyCell::release_owner);

  // ---- initializers ----
  py::class_<nn::Initializer>(m, "Initializer")
      .def(py::init([](py::object v) { return init_of(v); }))
      .def("make", [](const nn::Initializer& i, py::object s,
                      py::object d) { return i.make(to_shape(s), dtype_or(d, kFloat32)); })
      .def("__repr__", &nn::Initializer::str);
  m.def("init_zero", &nn::Zero);
  m.def("init_one", &nn::One);
  m.def("init_constant", &nn::Constant);
  m.def("init_uniform", &nn::Uniform);
  m.def("init_normal", &nn::Normal);
  m.def("init_truncated_normal", &nn::TruncatedNormal);
  m.def("init_he_uniform", &nn::HeUniform);
  m.def("init_he_normal", &nn::HeNormal);
  m.def("init_xavier_uniform", &nn::XavierUniform);
  m.def("init_xavier_normal", &nn::XavierNormal);
  m.def("calculate_gain", &nn::calculate_gain, py::arg("nonlinearity"), py::arg("param") = 0.0);

  // ---- layers (MindSpore's argument names and defaults) ----
  cell_class<nn::Dense>(m, "Dense")
      .def(py::init([](int64_t in, int64_t out, py::object w, py::object b, bool has_bias,
                       py::object act, py::object dt) {
             std::string a = act.is_none() ? "" : act.cast<std::string>();
             return std::make_shared<nn::Dense>(
                 in, out,
                 nn::DenseOptions{has_bias, init_of(w), init_of(b), a, dtype_or(dt, kFloat32)});
           }),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("weight_init") = py::none(),
           py::arg("bias_init") = py::none(), py::arg("has_bias") = true,
           py::arg("activation") = py::none(), py::arg("dtype") = py::none())
      .def(
          "shard",
          [](nn::Dense& d, const parallel::Strategy& in, const parallel::Strategy& out) {
            d.shard(in, out);
          },
          py::arg("in_strategy"), py::arg("out_strategy") = parallel::Strategy{});
  cell_class<nn::Conv2d>(m, "Conv2d")
      .def(py::init([](int64_t in, int64_t out, py::object k, py::object stride,
                       std::string pad_mode, py::object padding, py::object dilation, int64_t group,
                       bool has_bias, py::object w, py::object b, py::object dt) {
             nn::Conv2dOptions o{int2(stride),   pad_mode,   pad4(padding),
                                 int2(dilation), group,      has_bias,
                                 init_of(w),     init_of(b), dtype_or(dt, kFloat32)};
             return std::make_shared<nn::Conv2d>(in, out, int2(k), o);
           }),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"),
           py::arg("stride") = 1, py::arg("pad_mode") = "same", py::arg("padding") = 0,
           py::arg("dilation") = 1, py::arg("group") = 1, py::arg("has_bias") = false,
           py::arg("weight_init") = py::none(), py::arg("bias_init") = py::none(),
           py::arg("dtype") = py::none());
  cell_class<nn::Conv1d>(m, "Conv1d")
      .def(py::init([](int64_t in, int64_t out, py::object k, int64_t stride, std::string pad_mode,
                       py::object padding, int64_t dilation, int64_t group, bool has_bias,
                       py::object w, py::object b, py::object dt) {
             const auto ks = to_ints(k);
             SPORE_CHECK(ks.size() == 1, "[Conv1d] kernel_size must be one int, got ", ks.size(),
                         " values");
             nn::Conv1dOptions o{stride,     pad_mode,   to_ints(padding),
                                 dilation,   group,      has_bias,
                                 init_of(w), init_of(b), dtype_or(dt, kFloat32)};
             return std::make_shared<nn::Conv1d>(in, out, ks[0], o);
           }),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"),
           py::arg("stride") = 1, py::arg("pad_mode") = "same", py::arg("padding") = 0,
           py::arg("dilation") = 1, py::arg("group") = 1, py::arg("has_bias") = false,
           py::arg("weight_init") = py::none(), py::arg("bias_init") = py::none(),
           py::arg("dtype") = py::none());
  cell_class<nn::Conv2dTranspose>(m, "Conv2dTranspose")
      .def(py::init([](int64_t in, int64_t out, py::object k, py::object stride,
                       std::string pad_mode, py::object padding, py::object output_padding,
                       py::object dilation, int64_t group, bool has_bias, py::object w,
                       py::object b, py::object dt) {
             nn::Conv2dTransposeOptions o{int2(stride),   pad_mode,
                                          pad4(padding),  int2(output_padding),
                                          int2(dilation), group,
                                          has_bias,       init_of(w),
                                          init_of(b),     dtype_or(dt, kFloat32)};
             return std::make_shared<nn::Conv2dTranspose>(in, out, int2(k), o);
           }),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"),
           py::arg("stride") = 1, py::arg("pad_mode") = "same", py::arg("padding") = 0,
           py::arg("output_padding") = 0, py::arg("dilation") = 1, py::arg("group") = 1,
           py::arg("has_bias") = false, py::arg("weight_init") = py::none(),
           py::arg("bias_init") = py::none(), py::arg("dtype") = py::none());
  cell_class<nn::Pad>(m, "PadCell")
      .def(  // "Pad" is the vision transform
          py::init([](std::vector<std::pair<int64_t, int64_t>> paddings, std::string mode) {
            return std::make_shared<nn::Pad>(std::move(paddings), std::move(mode));
          }),
          py::arg("paddings"), py::arg("mode") = "CONSTANT");
  cell_class<nn::Embedding>(m, "Embedding")
      .def(py::init([](int64_t vocab, int64_t dim, py::object init, py::object padding_idx,
                       py::object dt) {
             return std::make_shared<nn::Embedding>(
                 vocab, dim,
                 nn::EmbeddingOptions{init_of(init),
                                      padding_idx.is_none() ? -1 : padding_idx.cast<int64_t>(),
                                      dtype_or(dt, kFloat32)});
           }),
           py::arg("vocab_size"), py::arg("embedding_size"),
           py::arg("embedding_table") = py::none(), py::arg("padding_idx") = py::none(),
           py::arg("dtype") = py::none());
  // Recurrent layers: run(x, h0, c0, seq_length) (None: not given) -> [output, h_n(, c_n)].
  auto opt_t = [](py::handle h) { return h.is_none() ? Tensor() : to_tensor(h); };
  py::class_<nn::RNNBase, Cell, std::shared_ptr<nn::RNNBase>>(m, "RNNBase")
      .def(
          "run",
          [opt_t](nn::RNNBase& r, py::object x, py::object h0, py::object c0, py::object len) {
            const Tensor xt = to_tensor(x), h = opt_t(h0), c = opt_t(c0), l = opt_t(len);
            py::gil_scoped_release nogil;
            const nn::RNNOutput o = r.run(xt, h, c, l);
            return o.c_n.defined() ? std::vector<Tensor>{o.output, o.h_n, o.c_n}
                                   : std::vector<Tensor>{o.output, o.h_n};
          },
          py::arg("x"), py::arg("h0") = py::none(), py::arg("c0") = py::none(),
          py::arg("seq_length") = py::none())
      .def_property_readonly("num_layers", &nn::RNNBase::num_layers)
      .def_property_readonly("num_directions", &nn::RNNBase::num_directions);
  bind_rnn<nn::RNN>(m, "RNN");
  bind_rnn<nn::LSTM>(m, "LSTM");
  bind_rnn<nn::GRU>(m, "GRU");
  // The cells: step(x, h, c) (None: zeros) -> [h'] or [h', c'] (LSTMCell).
  py::class_<nn::RNNCellBase, Cell, std::shared_ptr<nn::RNNCellBase>>(m, "RNNCellBase")
      .def(
          "step",
          [opt_t](nn::RNNCellBase& r, py::object x, py::object h, py::object c) {
            const Tensor xt = to_tensor(x), ht = opt_t(h), ct = opt_t(c);
            py::gil_scoped_release nogil;
            const auto [h1, c1] = r.step(xt, ht, ct);
            return c1.defined() ? std::vector<Tensor>{h1, c1} : std::vector<Tensor>{h1};
          },
          py::arg("x"), py::arg("h") = py::none(), py::arg("c") = py::none());
  bind_rnn_cell<nn::RNNCell>(m, "RNNCell");
  bind_rnn_cell<nn::LSTMCell>(m, "LSTMCell");
  bind_rnn_cell<nn::GRUCell>(m, "GRUCell");
  // The C++ SequentialCell over Python cells' C++ sides: what Model cuts into pipeline stages.
  cell_class<nn::SequentialCell>(m, "SequentialCell")
      .def(py::init([](std::vector<std::pair<std::string, CellPtr>> cells) {
        return std::make_shared<nn::SequentialCell>(std::move(cells));
      }));
  cell_class<nn::Flatten>(m, "Flatten")
      .def(py::init<int64_t, int64_t>(), py::arg("start_dim") = 1, py::arg("end_dim") = -1);
  cell_class<nn::Dropout>(m, "Dropout")
      .def(py::init([](double p) { return std::make_shared<nn::Dropout>(p); }), py::arg("p") = 0.5);
  cell_class<nn::Upsample>(m, "Upsample")
      .def(py::init([](py::object size, py::object scale, std::string mode) {
             nn::UpsampleOptions o;
             if (!size.is_none()) o.size = to_ints(size);
             if (!scale.is_none())
               o.scale_factor = py::isinstance<py::float_>(scale) || py::isinstance<py::int_>(scale)
                                    ? std::vector<double>{scale.cast<double>()}
                                    : scale.cast<std::vector<double>>();
             o.mode = mode;
             return std::make_shared<nn::Upsample>(o);
           }),
           py::arg("size") = py::none(), py::arg("scale_factor") = py::none(),
           py::arg("mode") = "nearest");
  cell_class<nn::ReLU>(m, "ReLU").def(py::init<>());
  cell_class<nn::ReLU6>(m, "ReLU6").def(py::init<>());
  cell_class<nn::LeakyReLU>(m, "LeakyReLU").def(py::init<double>(), py::arg("alpha") = 0.2);
  cell_class<nn::SiLU>(m, "SiLU").def(py::init<>());
  cell_class<nn::Sigmoid>(m, "Sigmoid").def(py::init<>());
  cell_class<nn::Tanh>(m, "Tanh").def(py::init<>());
  cell_class<nn::GELU>(m, "GELU").def(py::init<bool>(), py::arg("approximate") = true);
  cell_class<nn::Softmax>(m, "Softmax").def(py::init<int64_t>(), py::arg("axis") = -1);
  cell_class<nn::LogSoftmax>(m, "LogSoftmax").def(py::init<int64_t>(), py::arg("axis") = -1);
  m.def("get_activation", &nn::get_activation);

  auto bn_opts = [](double eps, double momentum, bool affine, py::object g, py::object b,
                    py::object mm, py::object mv, py::object ubs, py::object dt) {
    return nn::BatchNormOptions{eps,
                                momentum,
                                affine,
                                init_of(g),
                                init_of(b),
                                init_of(mm),
                                init_of(mv),
                                ubs.is_none() ? std::optional<bool>() : ubs.cast<bool>(),
                                dtype_or(dt, kFloat32)};
  };
  py::class_<nn::BatchNorm, Cell, std::shared_ptr<nn::BatchNorm>>(m, "BatchNorm");
  auto bn1 = py::class_<nn::BatchNorm1d, nn::BatchNorm, std::shared_ptr<nn::BatchNorm1d>>(
      m, "BatchNorm1d");
  auto bn2 = py::class_<nn::BatchNorm2d, nn::BatchNorm, std::shared_ptr<nn::BatchNorm2d>>(
      m, "BatchNorm2d");
  bn1.def(
      py::init([bn_opts](int64_t n, double eps, double mom, bool affine, py::object g, py::object b,
                         py::object mm, py::object mv, py::object ubs, py::object dt) {
        return std::make_shared<nn::BatchNorm1d>(n,
                                                 bn_opts(eps, mom, affine, g, b, mm, mv, ubs, dt));
      }),
      py::arg("num_features"), py::arg("eps") = 1e-5, py::arg("momentum") = 0.9,
      py::arg("affine") = true, py::arg("gamma_init") = py::none(),
      py::arg("beta_init") = py::none(), py::arg("moving_mean_init") = py::none(),
      py::arg("moving_var_init") = py::none(), py::arg("use_batch_statistics") = py::none(),
      py::arg("dtype") = py::none());
  bn2.def(
      py::init([bn_opts](int64_t n, double eps, double mom, bool affine, py::object g, py::object b,
                         py::object mm, py::object mv, py::object ubs, py::object dt) {
        return std::make_shared<nn::BatchNorm2d>(n,
                                                 bn_opts(eps, mom, affine, g, b, mm, mv, ubs, dt));
      }),
      py::arg("num_features"), py::arg("eps") = 1e-5, py::arg("momentum") = 0.9,
      py::arg("affine") = true, py::arg("gamma_init") = py::none(),
      py::arg("beta_init") = py::none(), py::arg("moving_mean_init") = py::none(),
      py::arg("moving_var_init") = py::none(), py::arg("use_batch_statistics") = py::none(),
      py::arg("dtype") = py::none());
  // MindSpore's SyncBatchNorm: process_groups None (every rank) or lists of ranks that split the
  // ranks into groups; each rank's statistics are reduced over the list holding it.
  py::class_<nn::SyncBatchNorm, nn::BatchNorm, std::shared_ptr<nn::SyncBatchNorm>>(m,
                                                                                   "SyncBatchNorm")
      .def(py::init([bn_opts](int64_t n, double eps, double mom, bool affine, py::object g,
                              py::object b, py::object mm, py::object mv, py::object ubs,
                              py::object groups, py::object dt) {
             parallel::GroupPtr group;
             if (!groups.is_none()) {
               const auto lists = groups.cast<std::vector<std::vector<int>>>();
               const parallel::GroupPtr world = parallel::world();
               const int me = world->rank(), size = world->size();
               std::vector<int> owner(size_t(size), -1);
               for (size_t i = 0; i < lists.size(); ++i)
                 for (int r : lists[i]) {
                   SPORE_CHECK(r >= 0 && r < size, "[SyncBatchNorm] process_groups names rank ", r,
                               ", and the job has ranks 0 .. ", size - 1,
                               "; list ranks of this job");
                   SPORE_CHECK(owner[size_t(r)] < 0, "[SyncBatchNorm] process_groups lists rank ",
                               r, " twice; each rank belongs to one group");
                   owner[size_t(r)] = int(i);
                 }
               for (int r = 0; r < size; ++r)
                 SPORE_CHECK(owner[size_t(r)] >= 0,
                             "[SyncBatchNorm] process_groups leaves out rank ", r,
                             "; every rank of the job must be in one group (a group of one "
                             "for a rank that keeps its own statistics)");
               group = world->split(owner[size_t(me)], me);
             }
             return std::make_shared<nn::SyncBatchNorm>(
                 n, bn_opts(eps, mom, affine, g, b, mm, mv, ubs, dt), group);
           }),
           py::arg("num_features"), py::arg("eps") = 1e-5, py::arg("momentum") = 0.9,
           py::arg("affine") = true, py::arg("gamma_init") = py::none(),
           py::arg("beta_init") = py::none(), py::arg("moving_mean_init") = py::none(),
           py::arg("moving_var_init") = py::none(), py::arg("use_batch_statistics") = py::none(),
           py::arg("process_groups") = py::none(), py::arg("dtype") = py::none());
  cell_class<nn::LayerNorm>(m, "LayerNorm")
      .def(py::init([](py::object shape, int64_t bna, int64_t bpa, double eps, py::object g,
                       py::object b, py::object dt) {
             return std::make_shared<nn::LayerNorm>(
                 to_shape(shape), nn::LayerNormOptions{bna, bpa, eps, init_of(g), init_of(b),
                                                       dtype_or(dt, kFloat32)});
           }),
           py::arg("normalized_shape"), py::arg("begin_norm_axis") = -1,
           py::arg("begin_params_axis") = -1, py::arg("epsilon") = 1e-7,
           py::arg("gamma_init") = py::none(), py::arg("beta_init") = py::none(),
           py::arg("dtype") = py::none());

  cell_class<nn::GroupNorm>(m, "GroupNorm")
      .def(py::init([](int64_t groups, int64_t channels, double eps, bool affine, py::object g,
                       py::object b, py::object dt) {
             return std::make_shared<nn::GroupNorm>(
                 groups, channels,
                 nn::GroupNormOptions{eps, affine, init_of(g), init_of(b), dtype_or(dt, kFloat32)});
           }),
           py::arg("num_groups"), py::arg("num_channels"), py::arg("eps") = 1e-5,
           py::arg("affine") = true, py::arg("gamma_init") = py::none(),
           py::arg("beta_init") = py::none(), py::arg("dtype") = py::none());

  // ---- attention and the transformer layers (None: an absent mask) ----
  auto opt_mask = [](py::handle h) { return h.is_none() ? Tensor() : to_tensor(h); };
  cell_class<nn::MultiheadAttention>(m, "MultiheadAttention")
      .def(py::init([](int64_t e, int64_t h, double dropout, bool has_bias, bool add_bias_kv,
                       bool add_zero_attn, py::object kdim, py::object vdim, bool batch_first,
                       py::object dt) {
             auto dim = [](py::handle d, const char* what) -> int64_t {
               if (d.is_none()) return 0;
               const int64_t v = d.cast<int64_t>();
               SPORE_CHECK(v > 0, "[MultiheadAttention] ", what, " must be positive or None, got ",
                           v);
               return v;
             };
             return std::make_shared<nn::MultiheadAttention>(
                 e, h,
                 nn::MultiheadAttentionOptions{dropout, has_bias, add_bias_kv, add_zero_attn,
                                               dim(kdim, "kdim"), dim(vdim, "vdim"), batch_first,
                                               dtype_or(dt, kFloat32)});
           }),
           py::arg("embed_dim"), py::arg("num_heads"), py::arg("dropout") = 0.0,
           py::arg("has_bias") = true, py::arg("add_bias_kv") = false,
           py::arg("add_zero_attn") = false, py::arg("kdim") = py::none(),
           py::arg("vdim") = py::none(), py::arg("batch_first") = false,
           py::arg("dtype") = py::none())
      .def("call",
           [opt_mask](nn::MultiheadAttention& a, const Tensor& q, const Tensor& k, const Tensor& v,
                      py::object kpm, bool need_weights, py::object attn_mask, bool average) {
             nn::AttentionArgs args{opt_mask(kpm), need_weights, opt_mask(attn_mask), average};
             std::pair<Tensor, Tensor> r;
             {
               py::gil_scoped_release nogil;
               r = a.call(q, k, v, args);
             }
             return py::make_tuple(r.first, r.second.defined() ? py::cast(r.second) : py::none());
           });
  auto layer_opts = [](int64_t dff, double dropout, std::string act, double eps, bool bf, bool nf,
                       py::object dt) {
    return nn::TransformerLayerOptions{dff, dropout, std::move(act),        eps,
                                       bf,  nf,      dtype_or(dt, kFloat32)};
  };
  cell_class<nn::TransformerEncoderLayer>(m, "TransformerEncoderLayer")
      .def(py::init([layer_opts](int64_t d, int64_t h, int64_t dff, double dropout, std::string act,
                                 double eps, bool bf, bool nf, py::object dt) {
             return std::make_shared<nn::TransformerEncoderLayer>(
                 d, h, layer_opts(dff, dropout, act, eps, bf, nf, dt));
           }),
           py::arg("d_model"), py::arg("nhead"), py::arg("dim_feedforward") = 2048,
           py::arg("dropout") = 0.1, py::arg("activation") = "relu",
           py::arg("layer_norm_eps") = 1e-5, py::arg("batch_first") = false,
           py::arg("norm_first") = false, py::arg("dtype") = py::none())
      .def("call", [opt_mask](nn::TransformerEncoderLayer& l, const Tensor& src, py::object mask,
                              py::object kpm) {
        const Tensor m = opt_mask(mask), p = opt_mask(kpm);
        py::gil_scoped_release nogil;
        return l.call(src, m, p);
      });
  cell_class<nn::TransformerDecoderLayer>(m, "TransformerDecoderLayer")
      .def(py::init([layer_opts](int64_t d, int64_t h, int64_t dff, double dropout, std::string act,
                                 double eps, bool bf, bool nf, py::object dt) {
             return std::make_shared<nn::TransformerDecoderLayer>(
                 d, h, layer_opts(dff, dropout, act, eps, bf, nf, dt));
           }),
           py::arg("d_model"), py::arg("nhead"), py::arg("dim_feedforward") = 2048,
           py::arg("dropout") = 0.1, py::arg("activation") = "relu",
           py::arg("layer_norm_eps") = 1e-5, py::arg("batch_first") = false,
           py::arg("norm_first") = false, py::arg("dtype") = py::none())
      .def("call",
           [opt_mask](nn::TransformerDecoderLayer& l, const Tensor& tgt, const Tensor& memory,
                      py::object tm, py::object mm, py::object tk, py::object mk) {
             const Tensor a = opt_mask(tm), b = opt_mask(mm), c = opt_mask(tk), d = opt_mask(mk);
             py::gil_scoped_release nogil;
             return l.call(tgt, memory, a, b, c, d);
           });
  cell_class<nn::TransformerEncoder>(m, "TransformerEncoder")
      .def(py::init([](const nn::TransformerEncoderLayer& layer, int64_t n,
                       std::shared_ptr<nn::LayerNorm> norm) {
             return std::make_shared<nn::TransformerEncoder>(layer, n, std::move(norm));
           }),
           py::arg("encoder_layer"), py::arg("num_layers"), py::arg("norm") = nullptr)
      .def("call", [opt_mask](nn::TransformerEncoder& e, const Tensor& src, py::object mask,
                              py::object kpm) {
        const Tensor m = opt_mask(mask), p = opt_mask(kpm);
        py::gil_scoped_release nogil;
        return e.call(src, m, p);
      });
  cell_class<nn::TransformerDecoder>(m, "TransformerDecoder")
      .def(py::init([](const nn::TransformerDecoderLayer& layer, int64_t n,
                       std::shared_ptr<nn::LayerNorm> norm) {
             return std::make_shared<nn::TransformerDecoder>(layer, n, std::move(norm));
           }),
           py::arg("decoder_layer"), py::arg("num_layers"), py::arg("norm") = nullptr)
      .def("call", [opt_mask](nn::TransformerDecoder& dec, const Tensor& tgt, const Tensor& memory,
                              py::object tm, py::object mm, py::object tk, py::object mk) {
        const Tensor a = opt_mask(tm), b = opt_mask(mm), c = opt_mask(tk), d = opt_mask(mk);
        py::gil_scoped_release nogil;
        return dec.call(tgt, memory, a, b, c, d);
      });

  auto pool_init = [](bool is_max) {
    return [is_max](py::object k, py::object s, std::string pad_mode, py::object padding,
                    bool ceil_mode, bool count_include_pad) -> std::shared_ptr<nn::Pool2d> {
      nn::PoolOptions o{pad_mode, pad4(padding), ceil_mode, count_include_pad};
      if (is_max) return std::make_shared<nn::MaxPool2d>(int2(k), int2(s), o);
      return std::make_shared<nn::AvgPool2d>(int2(k), int2(s), o);
    };
  };
  py::class_<nn::Pool2d, Cell, std::shared_ptr<nn::Pool2d>>(m, "Pool2d");
  m.def("MaxPool2d", pool_init(true), py::arg("kernel_size") = 1, py::arg("stride") = 1,
        py::arg("pad_mode") = "valid", py::arg("padding") = 0, py::arg("ceil_mode") = false,
        py::arg("count_include_pad") = true);
  m.def("AvgPool2d", pool_init(false), py::arg("kernel_size") = 1, py::arg("stride") = 1,
        py::arg("pad_mode") = "valid", py::arg("padding") = 0, py::arg("ceil_mode") = false,
        py::arg("count_include_pad") = true);
  cell_class<nn::AdaptiveAvgPool2d>(m, "AdaptiveAvgPool2d")
      .def(py::init([](py::object s) { return std::make_shared<nn::AdaptiveAvgPool2d>(int2(s)); }),
           py::arg("output_size") = 1);

  // ---- losses ----
  cell_class<nn::SoftmaxCrossEntropyWithLogits>(m, "SoftmaxCrossEntropyWithLogits")
      .def(py::init([](bool sparse, std::string red) {
             return std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
                 nn::SoftmaxCrossEntropyWithLogitsOptions{sparse, red});
           }),
           py::arg("sparse") = false, py::arg("reduction") = "none");
  auto opt_tensor = [](py::object o) { return o.is_none() ? Tensor() : to_tensor(o); };
  cell_class<nn::CrossEntropyLoss>(m, "CrossEntropyLoss")
      .def(py::init([opt_tensor](py::object w, int64_t ignore, std::string red, double ls) {
             return std::make_shared<nn::CrossEntropyLoss>(
                 nn::CrossEntropyLossOptions{opt_tensor(w), ignore, red, ls});
           }),
           py::arg("weight") = py::none(), py::arg("ignore_index") = -100,
           py::arg("reduction") = "mean", py::arg("label_smoothing") = 0.0);
  cell_class<nn::NLLLoss>(m, "NLLLoss")
      .def(py::init([opt_tensor](py::object w, int64_t ignore, std::string red) {
             return std::make_shared<nn::NLLLoss>(nn::NLLLossOptions{opt_tensor(w), ignore, red});
           }),
           py::arg("weight") = py::none(), py::arg("ignore_index") = -100,
           py::arg("reduction") = "mean");
  cell_class<nn::MSELoss>(m, "MSELoss")
      .def(
          py::init([](std::string r) { return std::make_shared<nn::MSELoss>(nn::LossOptions{r}); }),
          py::arg("reduction") = "mean");
  cell_class<nn::L1Loss>(m, "L1Loss")
      .def(py::init([](std::string r) { return std::make_shared<nn::L1Loss>(nn::LossOptions{r}); }),
           py::arg("reduction") = "mean");
  cell_class<nn::SmoothL1Loss>(m, "SmoothL1Loss")
      .def(py::init([](double beta, std::string r) {
             return std::make_shared<nn::SmoothL1Loss>(nn::SmoothL1LossOptions{beta, r});
           }),
           py::arg("beta") = 1.0, py::arg("reduction") = "none");
  cell_class<nn::HuberLoss>(m, "HuberLoss")
      .def(py::init([](std::string r, double delta) {
             return std::make_shared<nn::HuberLoss>(nn::HuberLossOptions{r, delta});
           }),
           py::arg("reduction") = "mean", py::arg("delta") = 1.0);
  cell_class<nn::BCELoss>(m, "BCELoss")
      .def(py::init([opt_tensor](py::object w, std::string r) {
             return std::make_shared<nn::BCELoss>(nn::BCELossOptions{opt_tensor(w), r});
           }),
           py::arg("weight") = py::none(), py::arg("reduction") = "mean");
  cell_class<nn::BCEWithLogitsLoss>(m, "BCEWithLogitsLoss")
      .def(py::init([opt_tensor](std::string r, py::object w, py::object pw) {
             return std::make_shared<nn::BCEWithLogitsLoss>(
                 nn::BCEWithLogitsLossOptions{r, opt_tensor(w), opt_tensor(pw)});
           }),
           py::arg("reduction") = "mean", py::arg("weight") = py::none(),
           py::arg("pos_weight") = py::none());
}

}  // namespace spore::python
