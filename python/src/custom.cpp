// spore._C: the compiled half of ops.Custom (python/spore/ops/custom.py). A Python-defined op is
// registered as a C++ custom op (spore/custom_op.h, register_custom_op), so it runs like a
// built-in primitive in PyNative (autograd through its bprop) and in Graph mode (a node of the
// traced graph). Its callbacks are Python functions called with the GIL held:
//   infer(shapes, dtypes) -> (shape, dtype)    the output from the inputs' (out_shape / out_dtype)
//   kernel(*arrays) -> array                   func_type="pyfunc": numpy in, numpy out
//   bprop(inputs, out, dout) -> [grads]        spore ops, so it is traced in Graph mode too
// func_type="aot" has no Python in its kernel: the library's function (load_aot_kernel) is called
// on the tensors' memory directly.
#include "common.h"
#include "spore/custom_op.h"

namespace spore::python {
namespace {

// A read-only numpy view of an input: the function must not change the op's inputs in place.
py::array readonly_view(const Tensor& t) {
  py::array a = to_numpy(t);
  a.attr("setflags")(py::arg("write") = false);
  return a;
}

}  // namespace

void bind_custom(py::module_& m) {
  py::class_<CustomOpHandle>(m, "CustomOpHandle")
      .def("__call__",
           [](const CustomOpHandle& h, const std::vector<Tensor>& inputs) {
             py::gil_scoped_release nogil;  // the kernel takes it back when it is Python
             return h.call(inputs).at(0);
           })
      .def_property_readonly("name", &CustomOpHandle::name);

  // Fails here (not at the first call) when the library or the symbol is missing.
  m.def("check_aot_kernel", [](const std::string& library, const std::string& symbol) {
    load_aot_kernel(library, symbol);
  });

  m.def(
      "register_custom_op",
      [](const std::string& name, int num_inputs, py::function infer, py::object kernel,
         const std::string& aot_library, const std::string& aot_symbol, py::function bprop,
         const std::vector<DType>& dtypes) {
        CustomOp spec;
        spec.name = name;
        spec.num_inputs = num_inputs;
        spec.dtypes = dtypes;
        // Never cast by amp: the function sees the dtypes it is given, as written.
        spec.traits.amp = CustomOpTraits::Amp::kFollow;
        // A Python function may print, count or draw random numbers: Graph mode runs every call.
        spec.traits.impure = aot_library.empty();
        PyRef inf(infer), bp(bprop);
        spec.infer = [inf](const std::vector<Shape>& shapes, const std::vector<DType>& types) {
          py::gil_scoped_acquire gil;
          py::list s, d;
          for (const Shape& sh : shapes) s.append(py::tuple(py::cast(sh)));
          for (DType t : types) d.append(py::cast(t));
          const py::tuple r = inf.get()(s, d);
          return std::pair<Shape, DType>{to_shape(r[0]), to_dtype(r[1])};
        };
        spec.bprop = [bp, num_inputs](const std::vector<Tensor>& in, const Tensor& out,
                                      const Tensor& dout) {
          py::gil_scoped_acquire gil;
          std::vector<Tensor> g = bp.get()(py::cast(in), out, dout).cast<std::vector<Tensor>>();
          SPORE_CHECK(int(g.size()) == num_inputs, "[ops.Custom] bprop gave ", g.size(),
                      " gradients for ", num_inputs, " inputs");
          return g;
        };
        if (!aot_library.empty()) {
          spec.cpu_kernel = aot_cpu_kernel(load_aot_kernel(aot_library, aot_symbol), aot_symbol);
        } else {
          PyRef k(kernel);
          spec.cpu_kernel = [k, name](const std::vector<Tensor>& in, Tensor& out) {
            Tensor r;
            {
              py::gil_scoped_acquire gil;
              py::tuple args(in.size());
              for (size_t i = 0; i < in.size(); ++i) args[i] = readonly_view(in[i]);
              r = copy_from_numpy(k.get()(*args));  // checked against the infer below
            }
            SPORE_CHECK(r.shape() == out.shape() && r.dtype() == out.dtype(), "[ops.Custom] '",
                        name, "' returned ", shape_str(r.shape()), " ", dtype_name(r.dtype()),
                        " where its infer said ", shape_str(out.shape()), " ",
                        dtype_name(out.dtype()),
                        "; make the function return that (e.g. .astype(...)) or fix out_shape / "
                        "out_dtype");
            std::memcpy(out.data_ptr(), r.data_ptr(), out.nbytes());
          };
        }
        return register_custom_op(std::move(spec));
      },
      py::arg("name"), py::arg("num_inputs"), py::arg("infer"), py::arg("kernel"),
      py::arg("aot_library"), py::arg("aot_symbol"), py::arg("bprop"), py::arg("dtypes"));
}

}  // namespace spore::python
