// spore._C: the dataset engine (spore/data): sources, pipeline ops, iterators, samplers and the
// vision transforms. Python callables (GeneratorDataset sources, map functions, per_batch_map) run
// on the engine's worker threads: each takes the GIL only for its own call, so C++ transforms in
// the same pipeline run in parallel with it. Rows crossing into Python are numpy views of the
// tensors; rows coming back are copied, so no tensor in the pipeline holds a Python object.
#include "common.h"
#include "spore/data/vision.h"

namespace spore::python {
namespace {

using data::Dataset;
using data::Row;

// A C++ transform handed to Python (vision.Rescale(...), transforms.TypeCast(...)).
struct TensorOpHandle {
  data::TensorOp op;
};
struct RowOpHandle {
  data::RowOp op;
};
struct SamplerHandle {  // samplers are shared_ptr<const Sampler>, which pybind11 cannot hold
  data::SamplerPtr p;
};
// An epoch's iterator. Its worker threads may be waiting for the GIL (Python transforms), so it
// is destroyed with the GIL released.
struct IterHandle {
  std::unique_ptr<data::Iterator> it;
  ~IterHandle() {
    if (!it) return;
    if (!Py_IsInitialized() || _Py_IsFinalizing()) {
      (void)it.release();  // workers may be parked on the GIL for good: do not join them
    } else if (PyGILState_Check()) {
      py::gil_scoped_release r;
      it.reset();
    }
  }
};

Row row_from_python(py::handle out) {
  Row r;
  if (py::isinstance<py::tuple>(out)) {
    for (py::handle v : out) r.push_back(copy_from_numpy(v));
  } else {
    r.push_back(copy_from_numpy(out));
  }
  return r;
}

py::tuple row_to_python(const Row& row) {
  py::tuple t(row.size());
  for (size_t i = 0; i < row.size(); ++i) t[i] = to_numpy(row[i]);
  return t;
}

// One map() operation from Python: a C++ transform, or a Python callable taking the input columns
// as numpy arrays and returning one array or a tuple of them.
data::Operation operation_of(py::handle h) {
  if (py::hasattr(h, "_op")) return operation_of(h.attr("_op"));
  if (py::isinstance<TensorOpHandle>(h)) return h.cast<TensorOpHandle>().op;
  if (py::isinstance<RowOpHandle>(h)) return h.cast<RowOpHandle>().op;
  SPORE_CHECK_TYPE(PyCallable_Check(h.ptr()),
                   "[Dataset.map] an operation must be a transform or a callable, got ",
                   py::repr(h).cast<std::string>());
  PyRef f(py::reinterpret_borrow<py::object>(h));
  return data::RowOp([f](const Row& in) {
    py::gil_scoped_acquire gil;
    return row_from_python(f.get()(*row_to_python(in)));
  });
}

data::SourceOptions source_options(int64_t num_samples, bool shuffle, int64_t num_shards,
                                   int64_t shard_id, py::object sampler, int workers) {
  data::SourceOptions o;
  o.num_samples = num_samples;
  o.shuffle = shuffle;
  o.num_shards = num_shards;
  o.shard_id = shard_id;
  if (!sampler.is_none()) o.sampler = sampler.cast<SamplerHandle>().p;
  o.num_parallel_workers = workers;
  return o;
}

Dataset generator_dataset(py::object source, std::vector<std::string> names,
                          data::SourceOptions o) {
  PyRef src(source);
  if (py::hasattr(source, "__getitem__") && py::hasattr(source, "__len__")) {
    const int64_t n = py::len(source);
    return data::GeneratorDataset(std::function<Row(int64_t)>([src](int64_t i) {
                                    py::gil_scoped_acquire gil;
                                    return row_from_python(src.get()[py::int_(i)]);
                                  }),
                                  n, std::move(names), o);
  }
  SPORE_CHECK_TYPE(
      PyCallable_Check(source.ptr()) || py::hasattr(source, "__iter__"),
      "[GeneratorDataset] source must be random-accessible (__getitem__ and __len__), iterable, "
      "or a generator function; got ",
      py::repr(source).cast<std::string>());
  return data::GeneratorDataset(
      std::function<std::function<std::optional<Row>()>()>([src]() {
        py::gil_scoped_acquire gil;
        py::object s = src.get();
        PyRef it(py::reinterpret_steal<py::object>(PyObject_GetIter(
            (PyCallable_Check(s.ptr()) && !py::hasattr(s, "__iter__") ? s() : s).ptr())));
        if (!it) throw py::error_already_set();
        return std::function<std::optional<Row>()>([it]() -> std::optional<Row> {
          py::gil_scoped_acquire gil;
          PyObject* v = PyIter_Next(it.get().ptr());
          if (!v) {
            if (PyErr_Occurred()) throw py::error_already_set();
            return std::nullopt;
          }
          return row_from_python(py::reinterpret_steal<py::object>(v));
        });
      }),
      std::move(names), o);
}

data::BatchMap batch_map_of(py::object f) {
  PyRef fn(f);
  return [fn](std::vector<std::vector<Tensor>> cols, const data::BatchInfo& info) {
    py::gil_scoped_acquire gil;
    py::tuple args(cols.size() + 1);
    for (size_t c = 0; c < cols.size(); ++c) {
      py::list l;
      for (const Tensor& t : cols[c]) l.append(to_numpy(t));
      args[c] = l;
    }
    args[cols.size()] = py::make_tuple(info.batch_num, info.epoch_num);
    py::object out = fn.get()(*args);
    std::vector<std::vector<Tensor>> res;
    for (py::handle col : out) {
      std::vector<Tensor> v;
      for (py::handle x : col) v.push_back(copy_from_numpy(x));
      res.push_back(std::move(v));
    }
    return res;
  };
}

}  // namespace

void bind_data(py::module_& m) {
  auto nogil = py::call_guard<py::gil_scoped_release>();
  py::class_<TensorOpHandle>(m, "TensorOp")
      .def("__call__", [](const TensorOpHandle& h, py::object x) {
        Tensor in = to_tensor(x);
        Tensor out;
        {
          py::gil_scoped_release r;
          out = h.op(in);
        }
        return out;
      });
  py::class_<RowOpHandle>(m, "RowOp")
      .def("__call__", [](const RowOpHandle& h, std::vector<Tensor> in) {
        py::gil_scoped_release r;
        return h.op(in);
      });
  py::class_<SamplerHandle>(m, "Sampler")
      .def("indices",
           [](const SamplerHandle& s, int64_t n, uint64_t seed) { return s.p->indices(n, seed); })
      .def("size", [](const SamplerHandle& s, int64_t n) { return s.p->size(n); })
      .def("name", [](const SamplerHandle& s) { return s.p->name(); });
  using SH = SamplerHandle;
  m.def("SequentialSampler",
        [](int64_t s, int64_t n) { return SH{data::SequentialSampler(s, n)}; });
  m.def("RandomSampler", [](bool r, int64_t n) { return SH{data::RandomSampler(r, n)}; });
  m.def("DistributedSampler", [](int64_t ns, int64_t id, bool sh, int64_t n) {
    return SH{data::DistributedSampler(ns, id, sh, n)};
  });
  m.def("SubsetRandomSampler",
        [](std::vector<int64_t> i, int64_t n) { return SH{data::SubsetRandomSampler(i, n)}; });
  m.def("SubsetSampler",
        [](std::vector<int64_t> i, int64_t n) { return SH{data::SubsetSampler(i, n)}; });
  m.def("WeightedRandomSampler", [](std::vector<double> w, int64_t n, bool r) {
    return SH{data::WeightedRandomSampler(w, n, r)};
  });

  py::class_<IterHandle>(m, "DataIterator")
      .def(
          "next", [](IterHandle& h) { return h.it->next(); }, nogil);
  py::class_<Dataset>(m, "Dataset")
      .def("map",
           [](const Dataset& d, py::list ops, std::vector<std::string> in,
              std::vector<std::string> out, int workers) {
             std::vector<data::Operation> v;
             for (py::handle o : ops) v.push_back(operation_of(o));
             return d.map(v, in, out, workers);
           })
      .def("shuffle", &Dataset::shuffle)
      .def("batch",
           [](const Dataset& d, int64_t n, bool drop, py::object per_batch_map,
              std::vector<std::string> in, py::dict pad_info) {
             data::BatchOptions o;
             o.drop_remainder = drop;
             if (!per_batch_map.is_none()) o.per_batch_map = batch_map_of(per_batch_map);
             o.input_columns = std::move(in);
             for (auto [k, v] : pad_info) {
               data::PadInfo p;
               py::tuple t = py::reinterpret_borrow<py::tuple>(v);
               if (!t[0].is_none()) p.shape = to_ints(t[0]);
               p.value = t[1].cast<double>();
               o.pad_info[k.cast<std::string>()] = p;
             }
             return d.batch(n, o);
           })
      .def("take", &Dataset::take)
      .def("skip", &Dataset::skip)
      .def("repeat", &Dataset::repeat)
      .def("project", [](const Dataset& d, std::vector<std::string> c) { return d.project(c); })
      .def("rename", [](const Dataset& d, std::vector<std::string> a,
                        std::vector<std::string> b) { return d.rename(a, b); })
      .def("zip", &Dataset::zip)
      .def("concat", &Dataset::concat)
      .def("split", &Dataset::split)
      .def("create_tuple_iterator",
           [](const Dataset& d) {
             auto h = std::make_unique<IterHandle>();
             py::gil_scoped_release r;
             h->it = d.create_tuple_iterator();
             return h;
           })
      .def("get_dataset_size", &Dataset::get_dataset_size, nogil)
      .def("get_batch_size", &Dataset::get_batch_size)
      .def("get_column_names", &Dataset::get_column_names);

  m.def("MnistDataset", [](std::string dir, std::string usage, int64_t ns, bool sh, int64_t nsh,
                           int64_t sid, py::object sampler, int w) {
    return data::MnistDataset(dir, usage, source_options(ns, sh, nsh, sid, sampler, w));
  });
  // MindSpore's CSVDataset: column_defaults give each column's type (int, float or str) and the
  // value of an empty field; without them every column is text.
  m.def("CSVDataset",
        [](std::vector<std::string> files, std::string delim, py::list defaults,
           std::vector<std::string> names, int64_t ns, bool sh, int64_t nsh, int64_t sid, int w) {
          SPORE_CHECK(delim.size() == 1, "[CSVDataset] field_delim must be one character, got '",
                      delim, "'");
          data::CSVOptions o;
          o.field_delim = delim[0];
          o.column_names = std::move(names);
          for (size_t i = 0; i < defaults.size(); ++i) {
            const py::handle v = defaults[i];
            if (py::isinstance<py::bool_>(v) ||
                !(py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v) ||
                  py::isinstance<py::str>(v)))
              SPORE_THROW(ErrorKind::TypeError, "[CSVDataset] column_defaults[", i,
                          "]: expected an int, a float or a str (the column's type), got ",
                          std::string(py::str(py::type::of(v).attr("__name__"))));
            if (py::isinstance<py::int_>(v))
              o.column_defaults.emplace_back(v.cast<int64_t>());
            else if (py::isinstance<py::float_>(v))
              o.column_defaults.emplace_back(v.cast<double>());
            else
              o.column_defaults.emplace_back(v.cast<std::string>());
          }
          const data::SourceOptions s = source_options(ns, sh, nsh, sid, py::none(), w);
          o.num_samples = s.num_samples;
          o.shuffle = s.shuffle;
          o.num_shards = s.num_shards;
          o.shard_id = s.shard_id;
          o.num_parallel_workers = s.num_parallel_workers;
          return data::CSVDataset(files, o);
        });
  m.def("Cifar10Dataset", [](std::string dir, std::string usage, int64_t ns, bool sh, int64_t nsh,
                             int64_t sid, py::object sampler, int w) {
    return data::Cifar10Dataset(dir, usage, source_options(ns, sh, nsh, sid, sampler, w));
  });
  m.def("Cifar100Dataset", [](std::string dir, std::string usage, int64_t ns, bool sh, int64_t nsh,
                              int64_t sid, py::object sampler, int w) {
    return data::Cifar100Dataset(dir, usage, source_options(ns, sh, nsh, sid, sampler, w));
  });
  m.def("ImageFolderDataset",
        [](std::string dir, std::vector<std::string> ext, std::map<std::string, int> ci,
           bool decode, int64_t ns, bool sh, int64_t nsh, int64_t sid, py::object sampler, int w) {
          data::ImageFolderOptions o;
          o.extensions = ext, o.class_indexing = ci, o.decode = decode;
          o.num_samples = ns, o.shuffle = sh, o.num_shards = nsh, o.shard_id = sid,
          o.num_parallel_workers = w;
          if (!sampler.is_none()) o.sampler = sampler.cast<SamplerHandle>().p;
          return data::ImageFolderDataset(dir, o);
        });
  m.def("CocoDataset",
        [](std::string dir, std::string ann, std::string task, bool decode, int64_t ns, bool sh,
           int64_t nsh, int64_t sid, py::object sampler, int w) {
          data::CocoOptions o;
          o.task = task, o.decode = decode;
          o.num_samples = ns, o.shuffle = sh, o.num_shards = nsh, o.shard_id = sid,
          o.num_parallel_workers = w;
          if (!sampler.is_none()) o.sampler = sampler.cast<SamplerHandle>().p;
          return data::CocoDataset(dir, ann, o);
        });
  m.def("TensorDataset", [](std::vector<Tensor> cols, std::vector<std::string> names) {
    return data::TensorDataset(cols, names);
  });
  m.def("GeneratorDataset", [](py::object source, std::vector<std::string> names, int64_t ns,
                               bool sh, int64_t nsh, int64_t sid, py::object sampler, int w) {
    return generator_dataset(source, names, source_options(ns, sh, nsh, sid, sampler, w));
  });
  m.def("default_num_workers", &data::default_num_workers);  // ds.config's default
  m.def("set_prefetch_size", &data::set_prefetch_size);
  m.def("get_prefetch_size", &data::get_prefetch_size);
  m.def("default_num_workers", &data::default_num_workers);

  // ---- transforms (dataset.vision, dataset.transforms) ----
  auto op = [](data::TensorOp f) { return TensorOpHandle{std::move(f)}; };
  py::enum_<vision::Inter>(m, "Inter")
      .value("LINEAR", vision::Inter::Linear)
      .value("NEAREST", vision::Inter::Nearest)
      .value("CUBIC", vision::Inter::Cubic)
      .value("AREA", vision::Inter::Area)
      .value("LANCZOS", vision::Inter::Lanczos)
      .value("BILINEAR", vision::Inter::Linear);
  py::enum_<vision::Border>(m, "Border")
      .value("CONSTANT", vision::Border::Constant)
      .value("EDGE", vision::Border::Edge)
      .value("REFLECT", vision::Border::Reflect)
      .value("SYMMETRIC", vision::Border::Symmetric);
  m.def("Rescale", [op](double r, double s) { return op(vision::Rescale(r, s)); });
  // A batch (N, H, W, C) also works (-> (N, C, H, W)), so a pipeline can batch first and then
  // transform whole batches, as `spore train` does.
  m.def("HWC2CHW", [op] {
    return op([f = vision::HWC2CHW()](const Tensor& x) {
      return x.dim() == 4 ? x.permute({0, 3, 1, 2}).contiguous() : f(x);
    });
  });
  m.def("Normalize", [op](std::vector<double> mean, std::vector<double> std, bool hwc) {
    return op(vision::Normalize(mean, std, hwc));
  });
  m.def("Decode", [op] { return op(vision::Decode()); });
  m.def("Resize",
        [op](std::vector<int64_t> s, vision::Inter i) { return op(vision::Resize(s, i)); });
  m.def("CenterCrop", [op](std::vector<int64_t> s) { return op(vision::CenterCrop(s)); });
  m.def("RandomCrop", [op](std::vector<int64_t> s, std::vector<int64_t> p, bool pin,
                           std::vector<double> fill, vision::Border b) {
    return op(vision::RandomCrop(s, {p, pin, fill, b}));
  });
  m.def("RandomResizedCrop",
        [op](std::vector<int64_t> s, std::vector<double> sc, std::vector<double> r,
             vision::Inter i) { return op(vision::RandomResizedCrop(s, sc, r, i)); });
  m.def("RandomHorizontalFlip", [op](double p) { return op(vision::RandomHorizontalFlip(p)); });
  m.def("RandomVerticalFlip", [op](double p) { return op(vision::RandomVerticalFlip(p)); });
  m.def("HorizontalFlip", [op] { return op(vision::HorizontalFlip()); });
  m.def("VerticalFlip", [op] { return op(vision::VerticalFlip()); });
  m.def("Pad", [op](std::vector<int64_t> p, std::vector<double> fill, vision::Border b) {
    return op(vision::Pad(p, fill, b));
  });
  m.def("Rotate",
        [op](double deg, vision::Inter i, bool expand, std::vector<double> c,
             std::vector<double> fill) { return op(vision::Rotate(deg, i, expand, c, fill)); });
  m.def("CutOut", [op](int64_t len, int64_t n, std::vector<double> fill) {
    return op(vision::CutOut(len, n, fill));
  });
  m.def("RandomColorAdjust",
        [op](std::vector<double> b, std::vector<double> c, std::vector<double> s,
             std::vector<double> h) { return op(vision::RandomColorAdjust(b, c, s, h)); });
  m.def("TypeCast", [op](py::object d) { return op(vision::TypeCast(to_dtype(d))); });
  m.def("OneHot", [op](int64_t n, double s) { return op(vision::OneHot(n, s)); });
  m.def("Compose", [op](std::vector<TensorOpHandle> ts) {
    std::vector<data::TensorOp> v;
    for (auto& t : ts) v.push_back(t.op);
    return op(vision::Compose(v));
  });
  // The fused decode + resize (DVPP's counterpart): JPEGs decode at a reduced DCT scale.
  m.def("DecodeResize",
        [op](std::vector<int64_t> s, vision::Inter i) { return op(vision::DecodeResize(s, i)); });
  m.def("RandomCropDecodeResize",
        [op](std::vector<int64_t> s, std::vector<double> sc, std::vector<double> r,
             vision::Inter i) { return op(vision::RandomCropDecodeResize(s, sc, r, i)); });
  // Detection transforms: rows {image, bboxes (K, 4) [x, y, w, h], per-box columns...}.
  m.def("Letterbox", [](std::vector<int64_t> s, double fill, bool scaleup) {
    return RowOpHandle{vision::Letterbox(s, fill, scaleup)};
  });
  m.def("RandomHorizontalFlipWithBBox",
        [](double p) { return RowOpHandle{vision::RandomHorizontalFlipWithBBox(p)}; });
  m.def("RandomAffineWithBBox",
        [](double degrees, double translate, double scale, double shear, double fill,
           std::vector<int64_t> size, double min_wh, double min_area_ratio, double max_aspect) {
          return RowOpHandle{vision::RandomAffineWithBBox(
              {degrees, translate, scale, shear, fill, size, min_wh, min_area_ratio, max_aspect})};
        });
  m.def("Mosaic", [](int64_t s, double fill) { return RowOpHandle{vision::Mosaic(s, fill)}; });
  m.def(
      "mosaic",
      [](const std::vector<Row>& samples, int64_t s, double fill) {
        return vision::mosaic(samples, s, fill);
      },
      py::call_guard<py::gil_scoped_release>());
  m.def("MixUp", [](double a) { return RowOpHandle{vision::MixUp(a)}; });
  m.def("CutMix", [](double a, double p) { return RowOpHandle{vision::CutMix(a, p)}; });
}

}  // namespace spore::python
