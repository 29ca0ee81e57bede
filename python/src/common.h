// Shared helpers of the Python bindings (spore._C): conversions between Python values (numpy
// arrays, scalars, nested lists, dtype names) and spore Tensors / DTypes / Shapes, and the
// GIL-safe holder for Python objects that C++ code keeps (dataset callables, LR schedules).
// Each area binds itself in its own file (tensor.cpp, ops.cpp, nn.cpp, optim.cpp, data.cpp,
// train.cpp, amp.cpp, io.cpp, custom.cpp,
// detection.cpp) through the bind_* functions declared at the bottom.
#pragma once
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "spore/spore.h"

namespace py = pybind11;

namespace spore::python {

// A Python object held by C++ code that may drop it on any thread: the last reference is released
// with the GIL held (and not at all once the interpreter is shutting down).
class PyRef {
 public:
  PyRef() = default;
  explicit PyRef(py::object o);
  const py::object& get() const { return *obj_; }
  explicit operator bool() const { return obj_ && *obj_; }

 private:
  std::shared_ptr<py::object> obj_;
};

// DType <-> Python: spore dtypes, numpy dtypes, and names ("float32", "Float32", "fp16", ...).
DType to_dtype(py::handle h);
py::dtype numpy_dtype(DType t);  // bfloat16 has none: a TypeError
bool numpy_to_dtype(const py::dtype& d, DType* out);

// A shape from an int or a sequence of ints.
Shape to_shape(py::handle h);
std::vector<int64_t> to_ints(py::handle h);  // int -> {v}, sequence -> values

// Any array-like -> Tensor: a Tensor (itself), a numpy array (shared without a copy when its
// layout allows: supported dtype, aligned, non-negative strides, writeable), a Python scalar
// (float32 for float, int64 for int, bool), or a nested list / tuple (via numpy). `dtype` casts.
Tensor to_tensor(py::handle h, std::optional<DType> dtype = std::nullopt);
// As to_tensor, but a Python scalar takes `like`'s dtype class (MindSpore's scalar rule): used by
// binary operators so x_int32 + 1 stays int32 and x_float16 * 2.0 stays float16.
Tensor scalar_or_tensor(py::handle h, const Tensor& like);
// A numpy array sharing the tensor's memory (kept alive by the array); bfloat16 becomes a
// float32 copy (numpy has no bfloat16). Symbolic tensors (Graph-mode tracing) raise.
py::array to_numpy(const Tensor& t);
// Copies a numpy array into a fresh tensor (rows that C++ keeps beyond the Python call).
Tensor copy_from_numpy(py::handle h);

// Python values out: a Tensor or a tuple of them.
py::object tensors_out(const std::vector<Tensor>& ts);
// A Tensor or a sequence of Tensors (nested tuples flattened one level) -> vector.
std::vector<Tensor> tensors_in(py::handle h);

void bind_tensor(py::module_& m);
void bind_ops(py::module_& m);
void bind_nn(py::module_& m);
void bind_optim(py::module_& m);
void bind_data(py::module_& m);
void bind_train(py::module_& m);
void bind_amp(py::module_& m);
void bind_io(py::module_& m);
void bind_custom(py::module_& m);
void bind_detection(py::module_& m);
void bind_deploy(py::module_& m);  // deploy.cpp: compiled model files

}  // namespace spore::python
