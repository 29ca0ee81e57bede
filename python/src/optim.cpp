// spore._C: optimizers (spore/optim) and learning-rate schedules. Python builds the parameter
// groups (spore/nn/optim.py turns MindSpore's group dicts into (params, weight_decay, lr, names)).
#include "common.h"

namespace spore::python {
namespace {

using optim::LearningRate;
using optim::LrSchedule;
using optim::Optimizer;
using optim::ParamGroup;

// A C++ schedule handed to Python as an opaque callable (not converted to a Python function, so
// the optimizer calls it without the GIL).
struct LrFn {
  LrSchedule f;
};
template <typename... A>
auto sched(LrSchedule (*fn)(A...)) {
  return [fn](A... a) { return LrFn{fn(a...)}; };
}

// A learning rate from Python: a number, a per-step list, a C++ schedule or a Python callable of
// the step (called with the GIL held).
LearningRate lr_of(py::handle h) {
  if (py::isinstance<py::float_>(h) || py::isinstance<py::int_>(h))
    return LearningRate(h.cast<double>());
  if (py::isinstance<LrFn>(h)) return LearningRate(h.cast<LrFn>().f);
  if (py::isinstance<Tensor>(h)) {
    Tensor t = h.cast<Tensor>();
    if (t.numel() == 1) return LearningRate(t.item<double>());
    return LearningRate(t.to_vector<double>());
  }
  if (py::hasattr(h, "_schedule")) return lr_of(h.attr("_schedule"));
  if (PyCallable_Check(h.ptr())) {
    PyRef f(py::reinterpret_borrow<py::object>(h));
    return LearningRate(LrSchedule([f](int64_t step) {
      py::gil_scoped_acquire gil;
      py::object v = f.get()(step);
      return py::isinstance<Tensor>(v) ? v.cast<Tensor>().item<double>() : v.cast<double>();
    }));
  }
  return LearningRate(h.cast<std::vector<double>>());
}

// groups: [(params, weight_decay or None, lr or None, names)]
std::vector<ParamGroup> groups_of(py::list groups) {
  std::vector<ParamGroup> out;
  for (py::handle g : groups) {
    py::tuple t = py::reinterpret_borrow<py::tuple>(g);
    ParamGroup pg;
    pg.params = t[0].cast<std::vector<Tensor>>();
    if (!t[1].is_none()) pg.weight_decay = t[1].cast<double>();
    if (!t[2].is_none()) pg.lr = lr_of(t[2]);
    pg.names = t[3].cast<std::vector<std::string>>();
    out.push_back(std::move(pg));
  }
  return out;
}

template <typename O>
auto opt_class(py::module_& m, const char* name) {
  return py::class_<O, Optimizer, std::shared_ptr<O>>(m, name);
}

}  // namespace

void bind_optim(py::module_& m) {
  auto nogil = py::call_guard<py::gil_scoped_release>();
  py::class_<LrFn>(m, "LrSchedule").def("__call__", [](const LrFn& f, int64_t s) {
    return f.f(s);
  });
  py::class_<Optimizer, std::shared_ptr<Optimizer>>(m, "OptimizerBase")
      .def("step", &Optimizer::step, nogil)
      .def("parameters", &Optimizer::parameters)
      .def("parameter_names", &Optimizer::parameter_names)
      .def_property("global_step", &Optimizer::global_step, &Optimizer::set_global_step)
      .def("current_lr", &Optimizer::current_lr)
      .def("lr_of", &Optimizer::lr_of)
      .def("state", &Optimizer::state)
      .def("set_clip_grad_norm", &Optimizer::set_clip_grad_norm)
      .def("clip_grad_norm", &Optimizer::clip_grad_norm)
      .def("set_loss_scale", &Optimizer::set_loss_scale)
      .def_property_readonly("loss_scale", &Optimizer::loss_scale)
      .def("num_groups", &Optimizer::num_groups)
      .def("group_lr", &Optimizer::group_lr)
      .def("set_group_lr", py::overload_cast<size_t, double>(&Optimizer::set_group_lr))
      .def("momentum", &Optimizer::momentum)
      .def("set_momentum", &Optimizer::set_momentum)
      .def("takes_hyper", &Optimizer::takes_hyper)
      .def("write_hyper", &Optimizer::write_hyper)
      .def("name", &Optimizer::name);

  opt_class<optim::SGD>(m, "SGD").def(py::init(
      [](py::list g, py::object lr, double mom, double damp, double wd, bool nesterov, double ls) {
        return std::make_shared<optim::SGD>(groups_of(g), lr_of(lr),
                                            optim::SGDOptions{mom, damp, wd, nesterov, ls});
      }));
  opt_class<optim::Momentum>(m, "Momentum")
      .def(py::init([](py::list g, py::object lr, double mom, double wd, bool nesterov, double ls) {
        return std::make_shared<optim::Momentum>(groups_of(g), lr_of(lr), mom,
                                                 optim::MomentumOptions{wd, nesterov, ls});
      }));
  opt_class<optim::Adam>(m, "Adam").def(py::init(
      [](py::list g, py::object lr, double b1, double b2, double eps, double wd, double ls) {
        return std::make_shared<optim::Adam>(groups_of(g), lr_of(lr),
                                             optim::AdamOptions{b1, b2, eps, wd, ls});
      }));
  opt_class<optim::AdamWeightDecay>(m, "AdamWeightDecay")
      .def(py::init(
          [](py::list g, py::object lr, double b1, double b2, double eps, double wd, double ls) {
            return std::make_shared<optim::AdamWeightDecay>(
                groups_of(g), lr_of(lr), optim::AdamWeightDecayOptions{b1, b2, eps, wd, ls});
          }));
  opt_class<optim::RMSProp>(m, "RMSProp")
      .def(py::init([](py::list g, py::object lr, double decay, double mom, double eps, double wd,
                       double ls) {
        return std::make_shared<optim::RMSProp>(groups_of(g), lr_of(lr),
                                                optim::RMSPropOptions{decay, mom, eps, wd, ls});
      }));
  opt_class<optim::Adagrad>(m, "Adagrad")
      .def(py::init(
          [](py::list g, py::object lr, double accum, bool update_slots, double wd, double ls) {
            return std::make_shared<optim::Adagrad>(
                groups_of(g), lr_of(lr), optim::AdagradOptions{accum, update_slots, wd, ls});
          }));
  opt_class<optim::Lamb>(m, "Lamb").def(
      py::init([](py::list g, py::object lr, double b1, double b2, double eps, double wd,
                  std::optional<double> trust_wd) {
        return std::make_shared<optim::Lamb>(groups_of(g), lr_of(lr),
                                             optim::LambOptions{b1, b2, eps, wd, trust_wd});
      }));
  m.def("global_norm", &optim::global_norm);
  m.def("clip_by_global_norm", &optim::clip_by_global_norm);

  // Schedules of the global step (MindSpore's nn.*LR cells) and per-step lists (nn.*_lr).
  m.def("lr_constant", sched(&optim::constant));
  m.def("lr_piecewise_constant", sched(&optim::piecewise_constant));
  m.def("lr_exponential_decay", sched(&optim::exponential_decay));
  m.def("lr_natural_exp_decay", sched(&optim::natural_exp_decay));
  m.def("lr_inverse_decay", sched(&optim::inverse_decay));
  m.def("lr_cosine_decay", sched(&optim::cosine_decay));
  m.def("lr_polynomial_decay", sched(&optim::polynomial_decay));
  m.def("lr_warmup", sched(&optim::warmup));
  m.def("lr_linear_warmup",
        [](py::object s, int64_t n) { return LrFn{optim::linear_warmup(lr_of(s).fn, n)}; });
  m.def("piecewise_constant_lr", &optim::piecewise_constant_lr);
  m.def("exponential_decay_lr", &optim::exponential_decay_lr);
  m.def("natural_exp_decay_lr", &optim::natural_exp_decay_lr);
  m.def("inverse_decay_lr", &optim::inverse_decay_lr);
  m.def("cosine_decay_lr", &optim::cosine_decay_lr);
  m.def("polynomial_decay_lr", &optim::polynomial_decay_lr);
  m.def("warmup_lr", &optim::warmup_lr);
}

}  // namespace spore::python
