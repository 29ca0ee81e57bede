// spore._C: checkpoints (spore/io/checkpoint.h: safetensors, or MindSpore .ckpt with
// format="ckpt").
#include "common.h"

namespace spore::python {

void bind_io(py::module_& m) {
  m.def(
      "save_checkpoint",
      [](const io::NamedTensors& ts, const std::string& path, const io::Metadata& meta,
         const std::string& format) {
        SPORE_CHECK(format == "safetensors" || format == "ckpt",
                    "[save_checkpoint] format must be 'safetensors' or "
                    "'ckpt', got '",
                    format, "'");
        io::save_checkpoint(
            ts, path, meta,
            format == "ckpt" ? io::CheckpointFormat::MindSpore : io::CheckpointFormat::SafeTensors);
      },
      py::arg("tensors"), py::arg("path"), py::arg("metadata"), py::arg("format") = "safetensors",
      py::call_guard<py::gil_scoped_release>());
  m.def("load_checkpoint", [](const std::string& path) {
    io::Checkpoint c;
    {
      py::gil_scoped_release r;
      c = io::load_checkpoint(path);
    }
    return py::make_tuple(c.tensors, c.metadata);
  });
  // In place into the targets; returns (missing, unexpected, mismatched).
  m.def("load_into_tensors",
        [](const io::NamedTensors& targets, const io::NamedTensors& loaded, bool strict) {
          io::LoadReport r = io::load_into_tensors(targets, loaded, strict);
          return py::make_tuple(r.missing, r.unexpected, r.mismatched);
        });
}

}  // namespace spore::python
