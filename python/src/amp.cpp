// spore._C: mixed precision (spore/amp.h): loss-scale managers, auto_mixed_precision,
// build_train_network and all_finite.
#include "common.h"

namespace spore::python {

void bind_amp(py::module_& m) {
  using amp::LossScaleManager;
  py::class_<LossScaleManager, amp::LossScaleManagerPtr>(m, "LossScaleManager")
      .def("get_loss_scale", &LossScaleManager::get_loss_scale)
      .def("update_loss_scale", &LossScaleManager::update_loss_scale)
      .def("get_drop_overflow_update", &LossScaleManager::get_drop_overflow_update)
      .def("updates_scale", &LossScaleManager::updates_scale)
      .def("name", &LossScaleManager::name);
  py::class_<amp::FixedLossScaleManager, LossScaleManager,
             std::shared_ptr<amp::FixedLossScaleManager>>(m, "FixedLossScaleManager")
      .def(py::init<double, bool>(), py::arg("loss_scale") = 128.0,
           py::arg("drop_overflow_update") = true);
  py::class_<amp::DynamicLossScaleManager, LossScaleManager,
             std::shared_ptr<amp::DynamicLossScaleManager>>(m, "DynamicLossScaleManager")
      .def(py::init<double, double, int64_t>(), py::arg("init_loss_scale") = 16777216.0,
           py::arg("scale_factor") = 2.0, py::arg("scale_window") = 2000)
      .def("good_steps", &amp::DynamicLossScaleManager::good_steps);
  m.def("parse_amp_level",
        [](const std::string& s) { return std::string(amp::level_name(amp::parse_level(s))); });
  m.def("auto_mixed_precision",
        [](const nn::CellPtr& net, const std::string& level, py::object dtype, bool keep_bn) {
          amp::auto_mixed_precision(*net, amp::parse_level(level),
                                    dtype.is_none() ? kFloat16 : to_dtype(dtype), keep_bn);
        });
  m.def("build_train_network", [](nn::CellPtr net, optim::OptimizerPtr opt, nn::CellPtr loss,
                                  const std::string& level, amp::LossScaleManagerPtr lsm,
                                  std::optional<bool> keep_bn, py::object cast_type) {
    std::optional<DType> ct;
    if (!cast_type.is_none()) ct = to_dtype(cast_type);
    return amp::build_train_network(net, opt, loss, amp::parse_level(level), lsm, keep_bn, ct);
  });
  m.def("with_float32_output", &amp::with_float32_output);
  m.def("all_finite", &amp::all_finite);
}

}  // namespace spore::python
