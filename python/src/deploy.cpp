// spore._C: compiled model files (spore/deploy.h), for ms.export(file_format="MINDIR"), ms.load
// and nn.GraphCell (python/spore/train/serialization.py).
#include "spore/deploy.h"
#include "common.h"
#include "spore/onnx.h"

namespace spore::python {

void bind_deploy(py::module_& m) {
  py::class_<ModelTensorInfo>(m, "ModelTensorInfo")
      .def_readonly("name", &ModelTensorInfo::name)
      .def_readonly("shape", &ModelTensorInfo::shape)
      .def_readonly("dtype", &ModelTensorInfo::dtype);
  py::class_<CompiledModel>(m, "CompiledModel")
      .def_static("load", &CompiledModel::load, py::arg("path"),
                  py::call_guard<py::gil_scoped_release>())
      .def_static(
          "from_bytes",
          [](py::bytes b) {
            const std::string s = b;
            py::gil_scoped_release r;
            return CompiledModel::from_buffer(s.data(), s.size(), "<bytes>");
          },
          py::arg("data"))
      .def_static(
          "from_onnx",
          [](const std::string& path, std::vector<int64_t> batches) {
            return CompiledModel::from_onnx(path, {.batches = std::move(batches)});
          },
          py::arg("path"), py::arg("batches") = std::vector<int64_t>{},
          py::call_guard<py::gil_scoped_release>())
      // fn(list of tensors) -> list of tensors, traced once per batch (the GIL is held: the trace
      // runs Python code).
      .def_static(
          "from_function",
          [](py::function fn, const std::vector<Tensor>& examples, std::vector<int64_t> batches,
             bool dynamic, std::vector<std::string> input_names,
             std::vector<std::string> output_names, std::string source) {
            PyRef f(fn);
            return CompiledModel::from_function(
                [f](const std::vector<Tensor>& args) {
                  py::gil_scoped_acquire gil;
                  return f.get()(py::cast(args)).cast<std::vector<Tensor>>();
                },
                examples,
                // On the examples' device (the network's): a GPU network compiles for the GPU.
                {.batches = std::move(batches),
                 .source = std::move(source),
                 .device = examples.empty() ? Device{} : examples[0].device()},
                dynamic, std::move(input_names), std::move(output_names));
          },
          py::arg("fn"), py::arg("examples"), py::arg("batches") = std::vector<int64_t>{},
          py::arg("dynamic_batch") = true, py::arg("input_names") = std::vector<std::string>{},
          py::arg("output_names") = std::vector<std::string>{}, py::arg("source") = "")
      .def("save", &CompiledModel::save, py::arg("path"), py::call_guard<py::gil_scoped_release>())
      .def("to_bytes", [](const CompiledModel& c) { return py::bytes(c.to_bytes()); })
      .def_property_readonly("inputs", &CompiledModel::inputs)
      .def_property_readonly("outputs", &CompiledModel::outputs)
      .def_property_readonly("batches", &CompiledModel::batches)
      .def_property_readonly("producer", &CompiledModel::producer)
      .def_property_readonly("source", &CompiledModel::source)
      .def_property_readonly("device", &CompiledModel::device)
      .def("summary", &CompiledModel::summary)
      .def("run", &CompiledModel::run, py::arg("inputs"), py::call_guard<py::gil_scoped_release>());
  m.def("is_model_file", &CompiledModel::is_model_file, py::arg("path"));
  // ms.export(file_format="ONNX"): the C++ exporter (spore/onnx.h) traces the cell (a Python cell's
  // construct runs under the tracer, with the GIL held).
  m.def(
      "export_onnx",
      [](nn::Cell& net, const Tensor& example, const std::string& path, bool dynamic_batch) {
        export_onnx(net, example, path, {.dynamic_batch = dynamic_batch});
      },
      py::arg("net"), py::arg("example"), py::arg("path"), py::arg("dynamic_batch") = true);
}

}  // namespace spore::python
