// spore._C, the compiled half of the `spore` Python package: one module, bound area by area
// (tensor.cpp, ops.cpp, nn.cpp, optim.cpp, data.cpp, train.cpp, amp.cpp, io.cpp, custom.cpp,
// detection.cpp). The Python package (python/spore) gives it MindSpore's layout and names.
//
// Errors: a spore::Error becomes the Python exception of its kind, with the same message (no C++
// stack): ValueError, TypeError, IndexError, RuntimeError, NotImplementedError, OSError.
#include "common.h"

PYBIND11_MODULE(_C, m) {
  using namespace spore;
  m.doc() = "Spore's C++ core (the spore Python package's compiled module)";
  // The pybind11 the module was compiled with (numpy 2 needs >= 2.12;
  // tests/python/test_packaging.py).
  m.attr("_pybind11_version") = std::to_string(PYBIND11_VERSION_MAJOR) + "." +
                                std::to_string(PYBIND11_VERSION_MINOR) + "." +
                                std::to_string(PYBIND11_VERSION_PATCH);
#ifdef SPORE_PY_CUDA_BUILT
  m.attr("_cuda_backend_built") = true;  // libspore_cuda.so was built with this module
#else
  m.attr("_cuda_backend_built") = false;
#endif
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* type = PyExc_RuntimeError;
      switch (e.kind()) {
        case ErrorKind::ValueError:
          type = PyExc_ValueError;
          break;
        case ErrorKind::TypeError:
          type = PyExc_TypeError;
          break;
        case ErrorKind::IndexError:
          type = PyExc_IndexError;
          break;
        case ErrorKind::RuntimeError:
          type = PyExc_RuntimeError;
          break;
        case ErrorKind::NotImplemented:
          type = PyExc_NotImplementedError;
          break;
        case ErrorKind::IOError:
          type = PyExc_OSError;
          break;
      }
      PyErr_SetString(type, e.what());
    }
  });
  python::bind_tensor(m);
  python::bind_ops(m);
  python::bind_nn(m);
  python::bind_optim(m);
  python::bind_data(m);
  python::bind_train(m);
  python::bind_amp(m);
  python::bind_io(m);
  python::bind_custom(m);
  python::bind_detection(m);
  python::bind_deploy(m);
}
