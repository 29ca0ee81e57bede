// Conversions between Python values and spore Tensors / DTypes / Shapes (common.h), and PyRef.
#include <cstring>

#include "common.h"

namespace spore::python {

PyRef::PyRef(py::object o)
    : obj_(new py::object(std::move(o)), [](py::object* p) {
        if (!Py_IsInitialized() || _Py_IsFinalizing()) {
          p->release();  // the interpreter is going away: leak rather than touch it
          delete p;
          return;
        }
        py::gil_scoped_acquire gil;
        delete p;
      }) {}

// ---- dtypes ------------------------------------------------------------------------------------

bool numpy_to_dtype(const py::dtype& d, DType* out) {
  const char kind = d.kind();
  const ssize_t size = d.itemsize();
  if (kind == 'b')
    *out = kBool;
  else if (kind == 'u' && size == 1)
    *out = kUInt8;
  else if (kind == 'i' && size == 1)
    *out = kInt8;
  else if (kind == 'i' && size == 4)
    *out = kInt32;
  else if (kind == 'i' && size == 8)
    *out = kInt64;
  else if (kind == 'f' && size == 2)
    *out = kFloat16;
  else if (kind == 'f' && size == 4)
    *out = kFloat32;
  else if (kind == 'f' && size == 8)
    *out = kFloat64;
  else
    return false;
  return true;
}

py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::Bool:
      return py::dtype("bool");
    case DType::UInt8:
      return py::dtype("uint8");
    case DType::Int8:
      return py::dtype("int8");
    case DType::Int32:
      return py::dtype("int32");
    case DType::Int64:
      return py::dtype("int64");
    case DType::Float16:
      return py::dtype("float16");
    case DType::Float32:
      return py::dtype("float32");
    case DType::Float64:
      return py::dtype("float64");
    case DType::BFloat16:
      break;
  }
  throw py::type_error("numpy has no bfloat16 dtype; cast the tensor first (x.astype(ms.float32))");
}

DType to_dtype(py::handle h) {
  if (py::isinstance<DType>(h)) return h.cast<DType>();
  if (py::isinstance<py::str>(h)) return dtype_from_name(h.cast<std::string>());
  if (h.ptr() == reinterpret_cast<PyObject*>(&PyFloat_Type)) return kFloat32;
  if (h.ptr() == reinterpret_cast<PyObject*>(&PyLong_Type)) return kInt64;
  if (h.ptr() == reinterpret_cast<PyObject*>(&PyBool_Type)) return kBool;
  // numpy dtypes and scalar types (np.float32, np.dtype("int32"))
  try {
    py::dtype d = py::dtype::from_args(py::reinterpret_borrow<py::object>(h));
    DType t;
    if (numpy_to_dtype(d, &t)) return t;
  } catch (const py::error_already_set&) {
  }
  throw py::type_error("expected a dtype (ms.float32, ms.int32, ...), got " +
                       py::repr(h).cast<std::string>());
}

// ---- shapes ------------------------------------------------------------------------------------

std::vector<int64_t> to_ints(py::handle h) {
  if (py::isinstance<py::int_>(h)) return {h.cast<int64_t>()};
  if (py::isinstance<Tensor>(h)) return h.cast<Tensor>().to_vector<int64_t>();
  std::vector<int64_t> out;
  for (py::handle v : h) out.push_back(v.cast<int64_t>());
  return out;
}
Shape to_shape(py::handle h) { return to_ints(h); }

// ---- numpy -------------------------------------------------------------------------------------

namespace {

// Wraps a numpy array's memory (no copy); the array is kept alive by the storage.
Tensor wrap_numpy(const py::array& a, DType dt) {
  const ssize_t item = a.itemsize();
  Shape shape(a.shape(), a.shape() + a.ndim()), strides(a.ndim());
  for (ssize_t i = 0; i < a.ndim(); ++i) strides[i] = a.strides()[i] / item;
  size_t extent = 0;  // bytes from the first element to one past the last
  if (a.size() > 0) {
    int64_t last = 0;
    for (ssize_t i = 0; i < a.ndim(); ++i) last += (shape[i] - 1) * strides[i];
    extent = size_t(last + 1) * size_t(item);
  }
  auto* keep = new py::object(a);  // released by the storage's deleter
  void* data = const_cast<void*>(a.data());
  auto storage = std::make_shared<Storage>(data, extent, Device{}, [keep](void*) {
    if (!Py_IsInitialized() || _Py_IsFinalizing()) {
      keep->release();
      delete keep;
      return;
    }
    py::gil_scoped_acquire gil;
    delete keep;
  });
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = dt;
  return Tensor(impl);
}

// Whether the array's memory can be shared as it is: writeable (ops may write into a tensor),
// native byte order, element-aligned, non-negative strides that are whole elements. Read through
// pybind11's accessors only (numpy's structs changed layout in numpy 2).
bool shareable(const py::array& a) {
  const ssize_t item = a.itemsize();
  if (item <= 0 || !a.writeable() || !a.dtype().attr("isnative").cast<bool>()) return false;
  if (reinterpret_cast<uintptr_t>(a.data()) % uintptr_t(item) != 0) return false;
  for (ssize_t i = 0; i < a.ndim(); ++i)
    if (a.strides(i) < 0 || a.strides(i) % item != 0) return false;
  return true;
}

// numpy dtypes Spore has no type for, converted without losing a value (int16/uint16 -> int32,
// uint32 -> int64, uint64 -> int64 when every value fits), or refused naming what to do.
py::array widen_or_refuse(py::array a) {
  const py::dtype d = a.dtype();
  const char kind = d.kind();
  const ssize_t size = d.itemsize();
  auto cast = [&](const char* to) { return py::array::ensure(a.attr("astype")(to)); };
  if ((kind == 'i' || kind == 'u') && size == 2) return cast("int32");
  if (kind == 'u' && size == 4) return cast("int64");
  if (kind == 'u' && size == 8) {
    const bool fits = a.attr("size").cast<ssize_t>() == 0 ||
                      py::int_(a.attr("max")()).cast<uint64_t>() <= uint64_t(INT64_MAX);
    if (!fits)
      throw py::value_error(
          "cannot make a Tensor from a uint64 array with values above 2**63 - 1 (int64's "
          "largest, Spore's widest integer); reduce them or use float64");
    return cast("int64");
  }
  const std::string name = py::str(static_cast<py::handle>(d)).cast<std::string>();
  if (kind == 'f' || kind == 'c')
    throw py::type_error("cannot make a Tensor from a numpy array of dtype " + name +
                         " without losing "
                         "precision or the imaginary part; Spore has float16/32/64: convert with "
                         ".astype(np.float64) (or .real) first");
  throw py::type_error("cannot make a Tensor from a numpy array of dtype " + name +
                       "; Spore takes bool, "
                       "int8/16/32/64, uint8/16/32/64 and float16/32/64 arrays");
}

Tensor from_array(py::array a, std::optional<DType> dtype) {
  // Big-endian (or other non-native) data: numpy swaps it to the native order, values kept.
  if (!a.dtype().attr("isnative").cast<bool>())
    a = py::array::ensure(a.attr("astype")(a.dtype().attr("newbyteorder")("=")));
  DType dt;
  if (!numpy_to_dtype(a.dtype(), &dt)) {
    a = widen_or_refuse(a);
    numpy_to_dtype(a.dtype(), &dt);
  }
  // Negative strides, misaligned or read-only memory: a fresh C-ordered copy (numpy makes it).
  if (!shareable(a))
    a = py::array::ensure(py::module_::import("numpy").attr("array")(a, py::arg("order") = "C"));
  SPORE_CHECK_KIND(ErrorKind::RuntimeError, shareable(a),
                   "Tensor(numpy array): numpy's copy of the array is ",
                   "still not shareable; please report this with the array's dtype and flags");
  Tensor t = wrap_numpy(a, dt);
  if (dtype && *dtype != dt) t = t.to(*dtype);
  return t;
}

}  // namespace

Tensor to_tensor(py::handle h, std::optional<DType> dtype) {
  if (py::isinstance<Tensor>(h)) {
    Tensor t = h.cast<Tensor>();
    return dtype && *dtype != t.dtype() ? t.to(*dtype) : t;
  }
  if (py::isinstance<py::bool_>(h)) return scalar_tensor(h.cast<bool>(), dtype.value_or(kBool));
  if (py::isinstance<py::int_>(h))
    return scalar_tensor(double(h.cast<int64_t>()), dtype.value_or(kInt64));
  // A Python float is float32 (MindSpore's rule); numpy's float64 scalar (a float subclass) keeps
  // its dtype through numpy below.
  if (PyFloat_CheckExact(h.ptr())) return scalar_tensor(h.cast<double>(), dtype.value_or(kFloat32));
  if (py::isinstance<py::array>(h)) return from_array(py::reinterpret_borrow<py::array>(h), dtype);
  if (py::hasattr(h, "__dlpack__") && !py::isinstance<py::list>(h) &&
      !py::isinstance<py::tuple>(h)) {
    py::module_ C = py::module_::import("spore._C");
    Tensor t = C.attr("from_dlpack")(h).cast<Tensor>();
    return dtype && *dtype != t.dtype() ? t.to(*dtype) : t;
  }
  // Nested sequences and numpy scalars: numpy decides the shape; Python floats become float32
  // (MindSpore: Tensor([1.0, 2.0]) is Float32), ints int64.
  py::module_ np = py::module_::import("numpy");
  py::array a = np.attr("asarray")(h);
  if (!dtype && a.dtype().kind() == 'f' && !py::isinstance<py::array>(h) &&
      !py::hasattr(h, "dtype"))
    a = np.attr("asarray")(h, "float32");
  if (a.dtype().kind() == 'O')
    throw py::type_error("cannot make a Tensor from " + py::repr(h).cast<std::string>());
  return from_array(a, dtype);
}

Tensor scalar_or_tensor(py::handle h, const Tensor& like) {
  if (py::isinstance<Tensor>(h)) return h.cast<Tensor>();
  // Python scalars are 0-d host tensors: they join an op on any device without an upload.
  if (py::isinstance<py::bool_>(h)) return scalar_tensor(h.cast<bool>(), like.dtype(), Device{});
  if (py::isinstance<py::int_>(h))
    return scalar_tensor(double(h.cast<int64_t>()), like.dtype() == kBool ? kInt64 : like.dtype(),
                         Device{});
  if (py::isinstance<py::float_>(h))
    return scalar_tensor(h.cast<double>(), is_floating(like.dtype()) ? like.dtype() : kFloat32,
                         Device{});
  return to_tensor(h);
}

py::array to_numpy(const Tensor& t0) {
  SPORE_CHECK_KIND(ErrorKind::RuntimeError, !t0.is_symbolic(),
                   "asnumpy(): cannot read the value of a tensor while a graph is being traced "
                   "(GRAPH_MODE construct): its value is only known when the compiled graph runs. "
                   "Compute with ops instead, or run in PYNATIVE_MODE");
  Tensor t = t0.device().type == DeviceType::CPU ? t0 : t0.cpu();  // numpy reads host memory
  if (t.dtype() == kBFloat16) t = t.to(kFloat32);
  const size_t item = itemsize(t.dtype());
  std::vector<ssize_t> shape(t.shape().begin(), t.shape().end()), strides(t.dim());
  for (int64_t i = 0; i < t.dim(); ++i) strides[i] = ssize_t(t.strides()[i] * int64_t(item));
  // The capsule owns a handle on the tensor, so the memory outlives every array viewing it.
  auto* owner = new Tensor(t);
  py::capsule base(owner, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(numpy_dtype(t.dtype()), shape, strides, t.numel() ? t.data_ptr() : nullptr,
                   base);
}

Tensor copy_from_numpy(py::handle h) {
  if (py::isinstance<Tensor>(h)) return h.cast<Tensor>();
  NoGradGuard no_grad;
  return to_tensor(h).clone();
}

py::object tensors_out(const std::vector<Tensor>& ts) {
  if (ts.size() == 1) return py::cast(ts[0]);
  py::tuple out(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) out[i] = py::cast(ts[i]);
  return std::move(out);
}

std::vector<Tensor> tensors_in(py::handle h) {
  if (py::isinstance<Tensor>(h)) return {h.cast<Tensor>()};
  std::vector<Tensor> out;
  for (py::handle v : h) {
    if (py::isinstance<py::tuple>(v) || py::isinstance<py::list>(v))
      for (py::handle w : v) out.push_back(to_tensor(w));
    else
      out.push_back(to_tensor(v));
  }
  return out;
}

}  // namespace spore::python
