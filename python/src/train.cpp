// spore._C: training (spore/train): the wrapper cells, Model, callbacks (the built-in ones and
// PyCallback, which forwards each hook to a Python object) and metrics (PyMetric likewise).
// Model.train / eval / fit release the GIL: the loop is C++, and Python callbacks, datasets and
// cells take it back only for their own calls.
#include "common.h"
#include "spore/parallel/parallel.h"
#include "spore/parallel/sharding.h"
#include "spore/profiler.h"

namespace spore::python {
namespace {

using nn::CellPtr;
using train::Callback;
using train::RunContext;

// Hooks of a Python callback, in the order of kHooks; None where the object does not override.
constexpr const char* kHooks[] = {
    "on_train_begin", "on_epoch_begin", "on_step_begin",      "on_step_end",      "on_epoch_end",
    "on_train_end",   "on_eval_begin",  "on_eval_step_begin", "on_eval_step_end", "on_eval_end"};
class PyCallback : public Callback {
 public:
  explicit PyCallback(py::list hooks) {
    for (size_t i = 0; i < 10; ++i)
      if (!hooks[i].is_none()) hooks_[i] = PyRef(hooks[i]);
  }
  void on_train_begin(RunContext& c) override { call(0, c); }
  void on_epoch_begin(RunContext& c) override { call(1, c); }
  void on_step_begin(RunContext& c) override { call(2, c); }
  void on_step_end(RunContext& c) override { call(3, c); }
  void on_epoch_end(RunContext& c) override { call(4, c); }
  void on_train_end(RunContext& c) override { call(5, c); }
  void on_eval_begin(RunContext& c) override { call(6, c); }
  void on_eval_step_begin(RunContext& c) override { call(7, c); }
  void on_eval_step_end(RunContext& c) override { call(8, c); }
  void on_eval_end(RunContext& c) override { call(9, c); }

 private:
  void call(int i, RunContext& c) {
    if (!hooks_[i]) return;
    py::gil_scoped_acquire gil;
    hooks_[i].get()(py::cast(&c, py::return_value_policy::reference));
  }
  PyRef hooks_[10];
};

// A metric written in Python: clear() / update(*inputs) / eval().
class PyMetric : public train::Metric {
 public:
  explicit PyMetric(py::object obj) : obj_(std::move(obj)) {}
  void clear() override {
    py::gil_scoped_acquire gil;
    obj_.get().attr("clear")();
  }
  void update(const std::vector<Tensor>& inputs) override {
    py::gil_scoped_acquire gil;
    py::tuple args(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) args[i] = py::cast(inputs[i]);
    obj_.get().attr("update")(*args);
  }
  double eval() const override {
    py::gil_scoped_acquire gil;
    return obj_.get().attr("eval")().cast<double>();
  }
  std::string name() const override {
    py::gil_scoped_acquire gil;
    return py::str(obj_.get().attr("__class__").attr("__name__")).cast<std::string>();
  }

 private:
  PyRef obj_;
};

std::vector<train::CallbackRef> callbacks_of(const std::vector<std::shared_ptr<Callback>>& cbs) {
  std::vector<train::CallbackRef> out;
  for (const auto& c : cbs) out.emplace_back(c);
  return out;
}

template <typename C>
auto cb_class(py::module_& m, const char* name) {
  return py::class_<C, Callback, std::shared_ptr<C>>(m, name);
}

}  // namespace

void bind_train(py::module_& m) {
  auto nogil = py::call_guard<py::gil_scoped_release>();
  using nn::Cell;
  // ---- communication and the auto-parallel context (mindspore.communication,
  // set_auto_parallel_context) ----
  m.def(
      "parallel_init", [](const std::string& backend) { parallel::init(backend); },
      py::arg("backend") = "mpi");
  m.def("parallel_release", &parallel::release);
  m.def("get_rank", [] { return parallel::get_rank(); });
  m.def("get_group_size", [] { return parallel::get_group_size(); });
  m.def("set_auto_parallel_context",
        [](const std::string& mode, bool gradients_mean, bool parallel_optimizer,
           int64_t grad_accum, std::vector<std::vector<int64_t>> dataset_strategy, bool full_batch,
           int64_t pipeline_stages, int64_t micro_batch_num, const std::string& search_mode) {
          SPORE_CHECK(mode == "stand_alone" || mode == "data_parallel" ||
                          mode == "semi_auto_parallel" || mode == "auto_parallel",
                      "set_auto_parallel_context: parallel_mode '", mode,
                      "' is unknown; use 'stand_alone', 'data_parallel', 'semi_auto_parallel' or "
                      "'auto_parallel'");
          parallel::AutoParallelContext ctx = parallel::get_auto_parallel_context();
          ctx.parallel_mode = mode == "data_parallel" ? parallel::ParallelMode::DataParallel
                              : mode == "semi_auto_parallel"
                                  ? parallel::ParallelMode::SemiAutoParallel
                              : mode == "auto_parallel" ? parallel::ParallelMode::AutoParallel
                                                        : parallel::ParallelMode::StandAlone;
          ctx.search_mode = search_mode;
          ctx.gradients_mean = gradients_mean;
          ctx.enable_parallel_optimizer = parallel_optimizer;
          ctx.gradient_accumulation_steps = grad_accum;
          ctx.dataset_strategy = std::move(dataset_strategy);
          ctx.full_batch = full_batch;
          ctx.pipeline_stages = pipeline_stages;
          ctx.micro_batch_num = micro_batch_num;
          parallel::set_auto_parallel_context(ctx);
        });
  m.def("reset_auto_parallel_context", &parallel::reset_auto_parallel_context);
  // Primitive.shard (spore/ops/operations.py): inside a sharded region, a primitive's inputs move
  // to its strategy's cut (differentiable redistributions) and the engine does the rest.
  m.def("shard_region_active",
        [] { return parallel::semi_auto_active() && parallel::in_sharded_region(); });
  m.def("shard_log", [] { return parallel::redistribution_log(); });  // tests: what moved
  m.def("shard_input", [](const Tensor& t, const std::vector<int64_t>& pieces) {
    return parallel::redistribute(
        t, parallel::layout_from_strategy(pieces, parallel::sharding_group()->size()));
  });
  // MatMul's out_strategy: the engine delivers the cut contraction's output in this layout (a
  // reduce-scatter) instead of whole (an all-reduce), as nn.Dense.shard's out_strategy does.
  struct MatmulOutScope {
    parallel::OpStrategy strategy;
    std::unique_ptr<parallel::OpStrategyScope> scope;
  };
  py::class_<MatmulOutScope>(m, "_MatmulOutScope")
      .def(py::init([](const std::vector<int64_t>& pieces) {
        auto s = std::make_unique<MatmulOutScope>();
        s->strategy.op = parallel::OpStrategy::Op::Matmul;
        s->strategy.output =
            parallel::layout_from_strategy(pieces, parallel::sharding_group()->size());
        return s;
      }))
      .def("__enter__",
           [](MatmulOutScope& s) {
             s.scope = std::make_unique<parallel::OpStrategyScope>(&s.strategy);
           })
      .def("__exit__", [](MatmulOutScope& s, py::args) { s.scope.reset(); });
  // ---- wrappers ----
  py::class_<train::WithLossCell, Cell, std::shared_ptr<train::WithLossCell>>(m, "WithLossCell")
      .def(py::init<CellPtr, CellPtr>());
  py::class_<train::WithEvalCell, Cell, std::shared_ptr<train::WithEvalCell>>(m, "WithEvalCell")
      .def(py::init<CellPtr, CellPtr>());
  py::class_<train::TrainOneStepCell, Cell, std::shared_ptr<train::TrainOneStepCell>>(
      m, "TrainOneStepCell")
      .def(py::init<CellPtr, optim::OptimizerPtr, double>())
      .def_property("sens", &train::TrainOneStepCell::sens, &train::TrainOneStepCell::set_sens)
      .def("last_grads", &train::TrainOneStepCell::last_grads)
      .def("last_aux", &train::TrainOneStepCell::last_aux)
      .def(
          "set_grad_accumulation",
          [](train::TrainOneStepCell& c, int64_t k, const std::string& mode) {
            SPORE_CHECK(mode == "mean" || mode == "sum", "set_grad_accumulation: mode '", mode,
                        "' is not known; use 'mean' (MindSpore's) or 'sum' (PyTorch's .grad)");
            c.set_grad_accumulation(
                k, mode == "sum" ? train::GradAccumulation::kSum : train::GradAccumulation::kMean);
          },
          py::arg("k"), py::arg("mode") = "mean")
      .def_property_readonly("grad_accumulation", &train::TrainOneStepCell::grad_accumulation)
      .def("jit_stats", &train::TrainOneStepCell::jit_stats);
  py::class_<train::TrainOneStepWithLossScaleCell, train::TrainOneStepCell,
             std::shared_ptr<train::TrainOneStepWithLossScaleCell>>(m,
                                                                    "TrainOneStepWithLossScaleCell")
      .def(py::init<CellPtr, optim::OptimizerPtr, amp::LossScaleManagerPtr>())
      .def(py::init<CellPtr, optim::OptimizerPtr, double>())
      .def("loss_scale", &train::TrainOneStepWithLossScaleCell::loss_scale)
      .def("last_overflow", &train::TrainOneStepWithLossScaleCell::last_overflow)
      .def("overflow_steps", &train::TrainOneStepWithLossScaleCell::overflow_steps)
      .def("decides_on_device", &train::TrainOneStepWithLossScaleCell::decides_on_device)
      .def("set_decide_on_device", &train::TrainOneStepWithLossScaleCell::set_decide_on_device);

  // ---- callbacks ----
  py::class_<RunContext>(m, "RunContext")
      .def_readonly("epoch", &RunContext::epoch)
      .def_readonly("epoch_num", &RunContext::epoch_num)
      .def_readonly("step", &RunContext::step)
      .def_readonly("steps_per_epoch", &RunContext::steps_per_epoch)
      .def_readonly("global_step", &RunContext::global_step)
      .def_readonly("batch_size", &RunContext::batch_size)
      .def_readonly("epoch_samples", &RunContext::epoch_samples)
      .def_readonly("loss", &RunContext::loss)
      .def_readonly("epoch_loss", &RunContext::epoch_loss)
      .def_readonly("lr", &RunContext::lr)
      .def_readonly("elapsed", &RunContext::elapsed)
      .def_readonly("epoch_elapsed", &RunContext::epoch_elapsed)
      .def_readonly("step_time", &RunContext::step_time)
      .def_readonly("epoch_train_time", &RunContext::epoch_train_time)
      .def_readonly("epoch_data_wait", &RunContext::epoch_data_wait)
      .def_readonly("epoch_device_idle", &RunContext::epoch_device_idle)
      .def_readonly("metrics", &RunContext::metrics)
      .def_readonly("eval_step", &RunContext::eval_step)
      .def_readonly("eval_steps", &RunContext::eval_steps)
      .def_readonly("stop_requested", &RunContext::stop_requested)
      .def("request_stop", &RunContext::request_stop);
  py::class_<Callback, std::shared_ptr<Callback>>(m, "CallbackBase");
  py::class_<PyCallback, Callback, std::shared_ptr<PyCallback>>(m, "PyCallback")
      .def(py::init<py::list>());
  m.attr("CALLBACK_HOOKS") =
      py::cast(std::vector<std::string>(std::begin(kHooks), std::end(kHooks)));
  cb_class<train::LossMonitor>(m, "LossMonitor")
      .def(py::init([](int64_t n) { return std::make_shared<train::LossMonitor>(n); }),
           py::arg("per_print_times") = 1);
  cb_class<train::TimeMonitor>(m, "TimeMonitor").def(py::init([] {
    return std::make_shared<train::TimeMonitor>();
  }));
  py::class_<train::CheckpointConfig>(m, "CheckpointConfig")
      .def(py::init([](int64_t steps, int64_t epochs, int64_t keep, bool opt_state, bool on_end) {
        return train::CheckpointConfig{steps, epochs, keep, opt_state, on_end};
      }))
      .def_readonly("save_checkpoint_steps", &train::CheckpointConfig::save_checkpoint_steps)
      .def_readonly("save_checkpoint_epochs", &train::CheckpointConfig::save_checkpoint_epochs)
      .def_readonly("keep_checkpoint_max", &train::CheckpointConfig::keep_checkpoint_max);
  cb_class<train::ModelCheckpoint>(m, "ModelCheckpoint")
      .def(py::init<std::string, std::string, train::CheckpointConfig>())
      .def("saved_files",
           [](const train::ModelCheckpoint& c) {
             return std::vector<std::string>(c.saved_files().begin(), c.saved_files().end());
           })
      .def("latest_checkpoint", &train::ModelCheckpoint::latest_checkpoint)
      .def("prefix", &train::ModelCheckpoint::prefix);
  cb_class<train::EarlyStopping>(m, "EarlyStopping")
      .def(py::init([](std::string monitor, int64_t patience, double min_delta, std::string mode,
                       std::optional<double> baseline, bool restore) {
        return std::make_shared<train::EarlyStopping>(
            train::EarlyStoppingOptions{monitor, patience, min_delta, mode, baseline, restore});
      }))
      .def("stopped_epoch", &train::EarlyStopping::stopped_epoch)
      .def("best", &train::EarlyStopping::best);
  cb_class<train::History>(m, "History")
      .def(py::init<>())
      .def("epochs", &train::History::epochs)
      .def("history", &train::History::history);

  // ---- metrics ----
  py::class_<train::Metric, train::MetricPtr>(m, "MetricBase")
      .def("clear", &train::Metric::clear)
      .def("update",
           [](train::Metric& mt, py::args a) {
             std::vector<Tensor> v;
             for (py::handle h : a) v.push_back(to_tensor(h));
             mt.update(v);
           })
      .def("eval", &train::Metric::eval)
      .def("name", &train::Metric::name);
  py::class_<PyMetric, train::Metric, std::shared_ptr<PyMetric>>(m, "PyMetric")
      .def(py::init<py::object>());
  m.def("make_metric", &train::make_metric);
  m.def("metric_names", &train::metric_names);
  m.def("TopKCategoricalAccuracy", [](int64_t k) -> train::MetricPtr {
    return std::make_shared<train::TopKCategoricalAccuracy>(k);
  });
  m.def("ConfusionMatrixMetric",
        [](int64_t n) -> train::MetricPtr { return std::make_shared<train::ConfusionMatrix>(n); });

  // ---- Model ----
  py::class_<train::Model>(m, "Model")
      .def(py::init([](CellPtr net, CellPtr loss, optim::OptimizerPtr opt,
                       std::vector<std::string> metrics, CellPtr eval_net, std::string amp_level,
                       amp::LossScaleManagerPtr lsm, std::optional<bool> keep_bn,
                       py::object cast_type) {
        std::optional<DType> ct;
        if (!cast_type.is_none()) ct = to_dtype(cast_type);
        return std::make_unique<train::Model>(net, loss, opt, metrics, eval_net, amp_level, lsm,
                                              keep_bn, ct);
      }))
      .def("add_metric", &train::Model::add_metric)
      .def(
          "train",
          [](train::Model& md, int64_t epoch, const data::Dataset& ds,
             const std::vector<std::shared_ptr<Callback>>& cbs, int64_t initial_epoch,
             int64_t sink_size) {
            md.train(epoch, ds, callbacks_of(cbs), initial_epoch, sink_size);
          },
          nogil)
      .def(
          "eval",
          [](train::Model& md, const data::Dataset& ds,
             const std::vector<std::shared_ptr<Callback>>& cbs) {
            return md.eval(ds, callbacks_of(cbs));
          },
          nogil)
      .def(
          "fit",
          [](train::Model& md, int64_t epoch, const data::Dataset& tr, const data::Dataset& va,
             const std::vector<std::shared_ptr<Callback>>& cbs, int64_t freq, int64_t initial_epoch,
             int64_t sink_size) {
            md.fit(epoch, tr, va, callbacks_of(cbs), freq, initial_epoch, sink_size);
          },
          nogil)
      .def(
          "predict", [](train::Model& md, const std::vector<Tensor>& in) { return md.predict(in); },
          nogil)
      .def("build", &train::Model::build, nogil)
      .def("strategy_report", &train::Model::strategy_report)
      .def("train_network", [](const train::Model& md) -> CellPtr { return md.train_network(); })
      .def("eval_network", [](const train::Model& md) { return md.eval_network(); });

  // mindspore.Profiler (spore/profiler.py): the C++ profiler the CLI's --profile runs.
  py::class_<Profiler>(m, "Profiler")
      .def(py::init([](std::string output_path) {
             return std::make_unique<Profiler>(
                 ProfilerOptions{.output_path = std::move(output_path)});
           }),
           py::arg("output_path"))
      .def("start", &Profiler::start)
      .def("stop", &Profiler::stop)
      .def("analyse", &Profiler::analyse, nogil);
}

}  // namespace spore::python
