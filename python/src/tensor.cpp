// spore._C: dtypes, Tensor (construction from numpy / scalars / lists, numpy and DLPack out and in,
// views, operators) and the context (mode, device, seed). Methods that are plain sugar over ops
// are added in Python (spore/common/tensor.py).
#include <cmath>

#include "common.h"

namespace spore::python {
namespace {

// ---- DLPack (the stable C ABI of dlpack.h v0.8, written out here) -----------------------------
struct DLDevice {
  int32_t device_type;  // kDLCPU = 1
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

DLDataType dl_dtype(DType t) {
  switch (t) {
    case DType::Bool:
      return {6, 8, 1};
    case DType::UInt8:
      return {1, 8, 1};
    case DType::Int8:
      return {0, 8, 1};
    case DType::Int32:
      return {0, 32, 1};
    case DType::Int64:
      return {0, 64, 1};
    case DType::Float16:
      return {2, 16, 1};
    case DType::BFloat16:
      return {4, 16, 1};
    case DType::Float32:
      return {2, 32, 1};
    case DType::Float64:
      return {2, 64, 1};
  }
  return {2, 32, 1};
}

DType from_dl_dtype(DLDataType d) {
  SPORE_CHECK_TYPE(d.lanes == 1, "from_dlpack: vector dtypes (lanes ", d.lanes,
                   ") are not supported");
  if (d.code == 6 && d.bits == 8) return kBool;
  if (d.code == 1 && d.bits == 8) return kUInt8;
  if (d.code == 0 && d.bits == 8) return kInt8;
  if (d.code == 0 && d.bits == 32) return kInt32;
  if (d.code == 0 && d.bits == 64) return kInt64;
  if (d.code == 2 && d.bits == 16) return kFloat16;
  if (d.code == 4 && d.bits == 16) return kBFloat16;
  if (d.code == 2 && d.bits == 32) return kFloat32;
  if (d.code == 2 && d.bits == 64) return kFloat64;
  SPORE_THROW(ErrorKind::TypeError, "from_dlpack: unsupported dtype (code ", int(d.code), ", ",
              int(d.bits), " bits)");
}

struct DLHolder {  // what an exported tensor's manager_ctx owns
  Tensor t;
  std::vector<int64_t> shape, strides;
  DLManagedTensor m;
};

py::capsule to_dlpack(const Tensor& t0) {
  SPORE_CHECK_KIND(ErrorKind::RuntimeError, !t0.is_symbolic(),
                   "__dlpack__: a tensor being traced (GRAPH_MODE) has no memory to share");
  const Tensor t = t0.device().type == DeviceType::CPU ? t0 : t0.cpu();  // shared as host memory
  auto* h = new DLHolder{t, t.shape(), t.strides(), {}};
  h->m.dl_tensor = {t.numel() ? t.data_ptr() : nullptr,
                    {1, 0},
                    int32_t(t.dim()),
                    dl_dtype(t.dtype()),
                    h->shape.data(),
                    h->strides.data(),
                    0};
  h->m.manager_ctx = h;
  h->m.deleter = [](DLManagedTensor* self) { delete static_cast<DLHolder*>(self->manager_ctx); };
  return py::capsule(&h->m, "dltensor", [](PyObject* cap) {
    // Not consumed (still named "dltensor"): we own it.
    if (PyCapsule_IsValid(cap, "dltensor")) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
      m->deleter(m);
    }
  });
}

Tensor from_dlpack(py::object obj) {
  py::object cap = obj;
  if (!PyCapsule_CheckExact(obj.ptr())) {
    SPORE_CHECK_TYPE(py::hasattr(obj, "__dlpack__"),
                     "from_dlpack: expected an object with __dlpack__ "
                     "or a DLPack capsule, got ",
                     py::repr(obj).cast<std::string>());
    if (py::hasattr(obj, "__dlpack_device__")) {
      auto dev = obj.attr("__dlpack_device__")().cast<std::pair<int, int>>();
      SPORE_CHECK_KIND(ErrorKind::ValueError, dev.first == 1,
                       "from_dlpack: the tensor is on DLPack device type ", dev.first,
                       "; this build of Spore reads CPU memory only");
    }
    cap = obj.attr("__dlpack__")();
  }
  SPORE_CHECK_TYPE(PyCapsule_IsValid(cap.ptr(), "dltensor"),
                   "from_dlpack: the capsule was already consumed or is not a DLPack tensor");
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), "dltensor"));
  PyCapsule_SetName(cap.ptr(), "used_dltensor");
  const DLTensor& d = m->dl_tensor;
  SPORE_CHECK_KIND(ErrorKind::ValueError, d.device.device_type == 1,
                   "from_dlpack: only CPU tensors");
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = from_dl_dtype(d.dtype);
  impl->shape.assign(d.shape, d.shape + d.ndim);
  impl->strides =
      d.strides ? Shape(d.strides, d.strides + d.ndim) : contiguous_strides(impl->shape);
  int64_t last = 0;
  for (int i = 0; i < d.ndim; ++i) {
    SPORE_CHECK(impl->strides[i] >= 0, "from_dlpack: negative strides are not supported");
    last += (impl->shape[i] - 1) * impl->strides[i];
  }
  const size_t item = itemsize(impl->dtype);
  SPORE_CHECK(d.byte_offset % item == 0,
              "from_dlpack: byte_offset not a multiple of the item size");
  const size_t nbytes = shape_numel(impl->shape) ? size_t(last + 1) * item : 0;
  char* base = static_cast<char*>(d.data) + d.byte_offset;
  impl->storage = std::make_shared<Storage>(base, nbytes, Device{}, [m](void*) {
    if (!m->deleter) return;
    if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
    py::gil_scoped_acquire gil;  // producers such as numpy release Python objects in the deleter
    m->deleter(m);
  });
  return Tensor(impl);
}

// "CPU" / "GPU" / "Ascend" (and the test device where registered), index 0, as set_device reads
// them.
Device device_from_target(const std::string& target) {
  std::string t = target;
  for (char& c : t) c = char(std::toupper(static_cast<unsigned char>(c)));
  for (int i = 0; i < kNumDeviceTypes; ++i) {
    std::string n = device_type_name(DeviceType(i));
    for (char& c : n) c = char(std::toupper(static_cast<unsigned char>(c)));
    // Tensor::to names the targets this build has when this one is absent.
    if (t == n || (t == "CUDA" && DeviceType(i) == DeviceType::GPU))
      return Device{DeviceType(i), 0};
  }
  SPORE_THROW(ErrorKind::ValueError, "move_to: unknown device target '", target,
              "'; expected 'CPU', 'GPU' or 'Ascend'");
}

// ---- construction ------------------------------------------------------------------------------

Tensor make_tensor(py::object data, py::object dtype, py::object shape, py::object init) {
  std::optional<DType> dt;
  if (!dtype.is_none()) dt = to_dtype(dtype);
  if (!data.is_none()) {
    Tensor t = to_tensor(data, dt);
    if (!shape.is_none()) t = t.reshape(to_shape(shape));
    // MindSpore: a Tensor made from Python data lives where the program runs (set_device).
    if (!py::isinstance<Tensor>(data)) t = t.to(current_device());
    return t;
  }
  SPORE_CHECK(!shape.is_none(), "Tensor(): give input_data, or shape and init");
  const Shape s = to_shape(shape);
  if (init.is_none()) return zeros(s, dt.value_or(kFloat32));
  return init.attr("_make")(py::cast(s), py::cast(dt.value_or(kFloat32))).cast<Tensor>();
}

}  // namespace

void bind_tensor(py::module_& m) {
  // MindSpore prints dtypes as Float32, Int64, ...
  py::enum_<DType> dtype(m, "DType");
  for (int i = 0; i < kNumDTypes; ++i) dtype.value(dtype_name(DType(i)), DType(i));
  // Replaces (not overloads) py::enum_'s own __repr__ / __str__.
  auto ms_name = [](DType t) {
    std::string n = dtype_name(t);
    if (n == "bfloat16") return std::string("BFloat16");
    if (n.rfind("uint", 0) == 0) return "UInt" + n.substr(4);
    n[0] = char(std::toupper(n[0]));
    return n;
  };
  dtype.attr("__repr__") = py::cpp_function(ms_name, py::name("__repr__"), py::is_method(dtype));
  dtype.attr("__str__") = py::cpp_function(ms_name, py::name("__str__"), py::is_method(dtype));
  dtype.def_property_readonly("itemsize", [](DType t) { return itemsize(t); });
  dtype.def_property_readonly("is_floating_point", [](DType t) { return is_floating(t); });
  m.def("dtype_from_any", &to_dtype);
  m.def("dtype_to_nptype", [](DType t) { return numpy_dtype(t).attr("type"); });
  m.def("promote_types", &promote_types);

  py::class_<Tensor> T(m, "Tensor");
  T.def(py::init(&make_tensor), py::arg("input_data") = py::none(), py::arg("dtype") = py::none(),
        py::arg("shape") = py::none(), py::arg("init") = py::none());
  py::implicitly_convertible<py::array, Tensor>();

  T.def_property_readonly("shape", [](const Tensor& t) { return py::tuple(py::cast(t.shape())); })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("ndim", &Tensor::dim)
      .def_property_readonly("size", &Tensor::numel)
      .def_property_readonly("itemsize", [](const Tensor& t) { return itemsize(t.dtype()); })
      .def_property_readonly("nbytes", [](const Tensor& t) { return t.nbytes(); })
      .def_property_readonly("strides",
                             [](const Tensor& t) {  // bytes, as numpy and MindSpore
                               std::vector<int64_t> s;
                               for (int64_t v : t.strides())
                                 s.push_back(v * int64_t(itemsize(t.dtype())));
                               return py::tuple(py::cast(s));
                             })
      .def_property_readonly("device", [](const Tensor& t) { return to_string(t.device()); })
      // MindSpore's Tensor.move_to("GPU" | "CPU" | "Ascend", blocking): a copy on that target.
      .def(
          "move_to",
          [](const Tensor& t, const std::string& to, bool blocking) {
            return t.to(device_from_target(to), !blocking);
          },
          py::arg("to"), py::arg("blocking") = true)
      .def("_to_current_device",
           [](const Tensor& t) { return t.to(current_device(), /*non_blocking=*/true); })
      .def_property_readonly("is_symbolic", [](const Tensor& t) { return t.is_symbolic(); })
      .def_property("requires_grad", &Tensor::requires_grad,
                    [](Tensor& t, bool r) { t.set_requires_grad(r); })
      .def_property_readonly("grad",
                             [](const Tensor& t) -> py::object {
                               Tensor g = t.grad();
                               return g.defined() ? py::cast(g) : py::none();
                             })
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("is_leaf", &Tensor::is_leaf)
      .def("_impl_id",
           [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.impl_ptr().get()); })
      .def("_same", &Tensor::is_same)
      .def("asnumpy", &to_numpy)
      .def("numpy", &to_numpy)
      // numpy 2's protocol: np.asarray(t, copy=False) asks for no copy (a CPU tensor's memory is
      // shared; a device tensor or a dtype change needs one: ValueError, as numpy's own rule);
      // copy=True always copies.
      .def(
          "__array__",
          [](const Tensor& t, py::object dtype, py::object copy) {
            const bool no_copy = !copy.is_none() && !copy.cast<bool>();
            const bool needs_copy =
                t.device().type != DeviceType::CPU || t.dtype() == kBFloat16 ||
                (!dtype.is_none() && !py::dtype::from_args(dtype).equal(numpy_dtype(t.dtype())));
            if (no_copy && needs_copy)
              throw py::value_error(
                  "__array__(copy=False): the tensor cannot be viewed without a copy (it is on " +
                  to_string(t.device()) + " or of another dtype); use np.asarray(t)");
            py::array a = to_numpy(t);
            if (!dtype.is_none()) a = py::array(a.attr("astype")(dtype));
            if (!copy.is_none() && copy.cast<bool>()) a = py::array(a.attr("copy")());
            return a;
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none())
      // The array API's keywords (numpy 2 passes max_version, and may pass dl_device / copy).
      .def(
          "__dlpack__",
          [](const Tensor& t, py::object, py::object, py::object dl_device, py::object copy) {
            if (!dl_device.is_none()) {
              const auto dev = dl_device.cast<std::pair<int, int>>();
              SPORE_CHECK_KIND(ErrorKind::ValueError, dev.first == 1, "__dlpack__: dl_device ",
                               dev.first,
                               " requested; Spore exports host (CPU, DLPack device type 1) memory");
            }
            SPORE_CHECK_KIND(
                ErrorKind::ValueError,
                copy.is_none() || copy.cast<bool>() || t.device().type == DeviceType::CPU,
                "__dlpack__(copy=False): the tensor is on ", to_string(t.device()),
                "; exporting it copies it to the host");
            return to_dlpack(copy.is_none() || !copy.cast<bool>() ? t : t.clone());
          },
          py::arg("stream") = py::none(), py::kw_only(), py::arg("max_version") = py::none(),
          py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
      .def("__dlpack_device__", [](const Tensor&) { return py::make_tuple(1, 0); })
      .def("item",
           [](const Tensor& t) -> py::object {
             if (t.dtype() == kBool) return py::bool_(t.item<bool>());
             if (is_integral(t.dtype())) return py::int_(t.item<int64_t>());
             return py::float_(t.item<double>());
           })
      .def("_str", &Tensor::str)
      .def("astype", [](const Tensor& t, py::object d) { return t.to(to_dtype(d)); })
      .def("to", [](const Tensor& t, py::object d) { return t.to(to_dtype(d)); })
      .def("contiguous", &Tensor::contiguous)
      .def("copy", &Tensor::clone)
      .def("clone", &Tensor::clone)
      .def("detach", &Tensor::detach)
      .def("_reshape", &Tensor::reshape)
      .def("_view", &Tensor::view)
      .def("permute",
           [](const Tensor& t, py::args axes) {
             if (axes.size() == 1 && !py::isinstance<py::int_>(axes[0]))
               return t.permute(to_ints(axes[0]));
             return t.permute(to_ints(axes));
           })
      .def("swapaxes", &Tensor::transpose)
      .def("_transpose2", &Tensor::transpose)
      .def("_slice", &Tensor::slice)
      .def("_select", &Tensor::select)
      .def("_squeeze_all", py::overload_cast<>(&Tensor::squeeze, py::const_))
      .def("_squeeze", py::overload_cast<int64_t>(&Tensor::squeeze, py::const_))
      .def("unsqueeze", &Tensor::unsqueeze)
      .def("expand_dims", &Tensor::unsqueeze)
      .def("_flatten", &Tensor::flatten)
      .def("broadcast_to", [](const Tensor& t, py::object s) { return t.expand(to_shape(s)); })
      .def("expand",
           [](const Tensor& t, py::args s) {
             return t.expand(s.size() == 1 && !py::isinstance<py::int_>(s[0]) ? to_shape(s[0])
                                                                              : to_shape(s));
           })
      .def(
          "set_requires_grad", [](Tensor& t, bool r) { return t.set_requires_grad(r); },
          py::arg("requires_grad") = true)
      .def("zero_grad", &Tensor::zero_grad)
      .def(
          "backward",
          [](const Tensor& t, py::object g) { t.backward(g.is_none() ? Tensor() : to_tensor(g)); },
          py::arg("gradient") = py::none(), py::call_guard<py::gil_scoped_release>())
      .def("assign_value",
           [](Tensor& t, py::object v) {  // in place (Parameter.set_data's core)
             NoGradGuard g;
             assign(t, scalar_or_tensor(v, t));
             return t;
           })
      .def("__len__",
           [](const Tensor& t) {
             if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");
             return t.size(0);
           })
      .def("__hash__", [](const Tensor& t) { return std::hash<const void*>()(t.impl_ptr().get()); })
      .def("__bool__",
           [](const Tensor& t) {
             SPORE_CHECK(t.numel() == 1,
                         "The truth value of a Tensor with more than one element is "
                         "ambiguous (shape ",
                         shape_str(t.shape()), "); use .any() or .all()");
             return t.to(kFloat64).item<double>() != 0;
           })
      .def("__float__", [](const Tensor& t) { return t.item<double>(); })
      .def("__int__", [](const Tensor& t) { return t.item<int64_t>(); })
      .def("__index__",
           [](const Tensor& t) {
             if (!is_integral(t.dtype()) && t.dtype() != kBool)
               throw py::type_error("only integer tensors can be indices");
             return t.item<int64_t>();
           })
      .def("__neg__", [](const Tensor& t) { return -t; })
      .def("__pos__", [](const Tensor& t) { return t; })
      .def("__abs__", [](const Tensor& t) { return abs(t); })
      .def("__invert__", [](const Tensor& t) { return logical_not(t); })
      .def("__matmul__", [](const Tensor& a, const Tensor& b) { return matmul(a, b); })
      .def("__rmatmul__", [](const Tensor& a, const Tensor& b) { return matmul(b, a); });

  // Arithmetic: the other operand may be a tensor, a Python scalar (takes this tensor's dtype
  // class) or anything array-like.
  auto binary = [&](const char* name, const char* rname,
                    Tensor (*fn)(const Tensor&, const Tensor&)) {
    T.def(name, [fn](const Tensor& a, const Tensor& b) { return fn(a, b); });
    T.def(name, [fn](const Tensor& a, py::object b) { return fn(a, scalar_or_tensor(b, a)); });
    if (rname)
      T.def(rname, [fn](const Tensor& a, py::object b) { return fn(scalar_or_tensor(b, a), a); });
  };
  binary("__add__", "__radd__", [](const Tensor& a, const Tensor& b) { return add(a, b); });
  binary("__sub__", "__rsub__", [](const Tensor& a, const Tensor& b) { return sub(a, b); });
  binary("__mul__", "__rmul__", [](const Tensor& a, const Tensor& b) { return mul(a, b); });
  binary("__truediv__", "__rtruediv__", [](const Tensor& a, const Tensor& b) {
    if (!is_floating(a.dtype()) && !is_floating(b.dtype()))
      return div(a.to(kFloat32), b.to(kFloat32));
    return div(a, b);
  });
  binary("__floordiv__", "__rfloordiv__", [](const Tensor& a, const Tensor& b) {
    const DType r = promote_types(a.dtype(), b.dtype());
    if (is_floating(r)) return floor(div(a, b));
    return floor(div(a.to(kFloat64), b.to(kFloat64))).to(r);
  });
  binary("__mod__", "__rmod__", [](const Tensor& a, const Tensor& b) {
    const DType r = promote_types(a.dtype(), b.dtype());
    const Tensor x = is_floating(r) ? a : a.to(kFloat64), y = is_floating(r) ? b : b.to(kFloat64);
    Tensor out = sub(x, mul(floor(div(x, y)), y));
    return is_floating(r) ? out : out.to(r);
  });
  binary("__pow__", "__rpow__", [](const Tensor& a, const Tensor& b) { return pow(a, b); });
  T.def("__eq__", [](const Tensor&, py::none) { return false; });
  T.def("__ne__", [](const Tensor&, py::none) { return true; });
  binary("__eq__", nullptr, [](const Tensor& a, const Tensor& b) { return equal(a, b); });
  binary("__ne__", nullptr, [](const Tensor& a, const Tensor& b) { return not_equal(a, b); });
  binary("__lt__", nullptr, [](const Tensor& a, const Tensor& b) { return less(a, b); });
  binary("__le__", nullptr, [](const Tensor& a, const Tensor& b) { return less_equal(a, b); });
  binary("__gt__", nullptr, [](const Tensor& a, const Tensor& b) { return greater(a, b); });
  binary("__ge__", nullptr, [](const Tensor& a, const Tensor& b) { return greater_equal(a, b); });
  binary("__and__", "__rand__", [](const Tensor& a, const Tensor& b) { return logical_and(a, b); });
  binary("__or__", "__ror__", [](const Tensor& a, const Tensor& b) { return logical_or(a, b); });
  binary("__xor__", "__rxor__", [](const Tensor& a, const Tensor& b) { return logical_xor(a, b); });
  T.attr("__array_priority__") = 100;  // numpy_array + tensor -> Tensor.__radd__

  m.def("from_numpy", [](py::array a) { return to_tensor(a); });
  m.def("to_numpy", &to_numpy);
  m.def("from_dlpack", &from_dlpack);
  m.def("to_dlpack", &to_dlpack);
  m.def("_tensor_like", [](py::object v, const Tensor& like) { return scalar_or_tensor(v, like); });

  // ---- factories ----
  auto dt = [](py::object d) { return d.is_none() ? kFloat32 : to_dtype(d); };
  m.def(
      "zeros", [dt](py::object s, py::object d) { return zeros(to_shape(s), dt(d)); },
      py::arg("shape"), py::arg("dtype") = py::none());
  m.def(
      "ones", [dt](py::object s, py::object d) { return ones(to_shape(s), dt(d)); },
      py::arg("shape"), py::arg("dtype") = py::none());
  m.def(
      "full", [dt](py::object s, double v, py::object d) { return full(to_shape(s), v, dt(d)); },
      py::arg("shape"), py::arg("fill_value"), py::arg("dtype") = py::none());
  m.def("arange",
        [](double a, double b, double s, py::object d) { return arange(a, b, s, to_dtype(d)); });
  m.def("linspace",
        [](double a, double b, int64_t n, py::object d) { return linspace(a, b, n, to_dtype(d)); });
  m.def("eye", [dt](int64_t n, int64_t k, py::object d) { return eye(n, k, dt(d)); });
  m.def("rand", [dt](py::object s, py::object d) { return rand(to_shape(s), dt(d)); });
  m.def("randn", [dt](py::object s, py::object d) { return randn(to_shape(s), dt(d)); });
  m.def("uniform", [dt](py::object s, double lo, double hi, py::object d) {
    return uniform(to_shape(s), lo, hi, dt(d));
  });
  m.def("normal", [dt](py::object s, double mean, double sd, py::object d) {
    return normal(to_shape(s), mean, sd, dt(d));
  });
  m.def("randint", [](int64_t lo, int64_t hi, py::object s, py::object d) {
    return randint(lo, hi, to_shape(s), to_dtype(d));
  });
  m.def("randperm", [](int64_t n, py::object d) { return randperm(n, to_dtype(d)); });

  // ---- context ----
  m.def("set_mode", [](int mode) {
    SPORE_CHECK(mode == 0 || mode == 1,
                "set_context: mode must be GRAPH_MODE (0) or PYNATIVE_MODE (1), got ", mode);
    set_context({.mode = Mode(mode)});
  });
  m.def("get_mode", [] { return int(get_context_mode()); });
  m.def("set_device", &set_device, py::arg("device_target"), py::arg("device_id") = 0);
  m.def("current_device", [] { return std::string(device_type_name(current_device().type)); });
  m.def("current_device_id", [] { return current_device().index; });
  m.def("device_count", [] { return device_count(); });
  m.def("device_count_of", [](const std::string& target) { return device_count(target); });
  m.def("synchronize", [] {
    py::gil_scoped_release release;  // other Python threads run while the host waits
    synchronize(current_device());
  });
  // set_context(save_graphs=..., save_graphs_path=...): Graph mode's IR dumps (graph/dump.cpp).
  m.def("set_save_graphs", [](bool on, std::optional<std::string> path) {
    set_context({.save_graphs = on, .save_graphs_path = std::move(path)});
  });
  m.def("save_graphs_path", [] { return save_graphs_path(); });
  m.def("set_seed", &set_seed);
  m.def("get_seed", &get_seed);
  m.def("set_num_threads", &set_num_threads);
  m.def("get_num_threads", &get_num_threads);
  m.def("is_tracing", &is_tracing);
  // `with _C.RecomputeScope():` around a Python cell's construct while tracing (Cell.recompute()).
  struct PyRecomputeScope {
    std::optional<RecomputeScope> scope;
  };
  py::class_<PyRecomputeScope>(m, "RecomputeScope")
      .def(py::init<>())
      .def("__enter__", [](PyRecomputeScope& s) { s.scope.emplace(); })
      .def("__exit__",
           [](PyRecomputeScope& s, py::object, py::object, py::object) { s.scope.reset(); });
  m.def("is_grad_enabled", &is_grad_enabled);
  m.attr("__version__") = SPORE_VERSION;
}

}  // namespace spore::python
