// Model (mindspore.train.Model): the high-level loop. Wraps network + loss + optimizer into a
// TrainOneStepCell and runs it over a Dataset (eagerly, PyNative), with callbacks and metrics:
//   auto net = std::make_shared<LeNet5>();
//   train::Model model(net, std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(...),
//                      optim::Momentum(net->trainable_params(), 0.01, 0.9), {"accuracy"});
//   model.train(5, train_ds, {train::LossMonitor(100), train::ProgressBar()});
//   auto res = model.eval(test_ds);   // {"accuracy": 0.98}
// Dataset rows are (data..., label); the network gets data, the loss (output, label).
#pragma once
#include <concepts>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "spore/data/dataset.h"
#include "spore/nn/cell.h"
#include "spore/optim/optimizer.h"
#include "spore/train/callbacks.h"
#include "spore/train/metrics.h"
#include "spore/train/wrappers.h"

namespace spore::parallel {
class PipelineTrainer;
}

namespace spore::train {

class Model {
 public:
  // loss_fn null: `network` computes the loss itself (a WithLossCell, or any cell returning the
  // loss from (data, label)); eval() then needs eval_network. optimizer null: eval/predict only.
  // eval_network: returns {loss, outputs, label} from (data, label) (default WithEvalCell).
  // amp_level "O0".."O3", loss_scale_manager, keep_batchnorm_fp32 and cast_model_type (the low
  // dtype, default float16) are MindSpore's: the train network comes from amp::build_train_network
  // and, for O2/O3, the default eval network casts the outputs to float32 before loss and metrics.
  Model(nn::CellPtr network, nn::CellPtr loss_fn = nullptr, optim::OptimizerPtr optimizer = nullptr,
        std::vector<std::string> metrics = {}, nn::CellPtr eval_network = nullptr,
        const std::string& amp_level = "O0", amp::LossScaleManagerPtr loss_scale_manager = nullptr,
        std::optional<bool> keep_batchnorm_fp32 = std::nullopt,
        std::optional<DType> cast_model_type = std::nullopt);
  // The optimizer by value: Model(net, loss, optim::Momentum(...), {"accuracy"}).
  template <typename O>
  requires std::derived_from<O, optim::Optimizer> Model(nn::CellPtr network, nn::CellPtr loss_fn,
                                                        O optimizer,
                                                        std::vector<std::string> metrics = {})
      : Model(std::move(network), std::move(loss_fn), std::make_shared<O>(std::move(optimizer)),
              std::move(metrics)) {}

  // Runs epochs [initial_epoch, epoch) over the dataset (epoch counts include the skipped ones,
  // as MindSpore's). Stops early when a callback calls ctx.request_stop().
  // sink_size (MindSpore's dataset_sink_mode): 0 runs the step callbacks around every step; -1
  // runs each epoch's steps as one sink (on_step_begin before its first step, on_step_end after
  // its last: ctx.step / global_step advance by the sink's steps, ctx.loss is its last step's
  // loss); N > 0 makes each epoch one sink of N steps drawn from one iterator that continues
  // across epochs (the dataset restarts when it runs out), as MindSpore's sink_size does.
  void train(int64_t epoch, const data::Dataset& train_dataset, const Callbacks& callbacks = {},
             int64_t initial_epoch = 0, int64_t sink_size = 0);
  // Metrics over the whole dataset, keyed by the names given to the constructor.
  std::map<std::string, double> eval(const data::Dataset& valid_dataset,
                                     const Callbacks& callbacks = {});
  // train() with a validation pass every valid_frequency epochs (and always after the last one);
  // the callbacks see the results in ctx.metrics ("eval_loss" and the metrics).
  void fit(int64_t epoch, const data::Dataset& train_dataset, const data::Dataset& valid_dataset,
           const Callbacks& callbacks = {}, int64_t valid_frequency = 1, int64_t initial_epoch = 0,
           int64_t sink_size = 0);
  // MindSpore's Model.build: makes the step ready before the first batch. Under auto_parallel it
  // runs the strategy search on the dataset's first row (train, eval and predict call it on their
  // first batch when it has not run); otherwise it does nothing.
  void build(const data::Dataset& dataset);
  // auto_parallel: the strategies the search chose (empty until build).
  const std::vector<std::string>& strategy_report() const { return strategy_report_; }

  // The network's output in inference mode (set_train(false), no gradients).
  Tensor predict(const Tensor& x);
  std::vector<Tensor> predict(const std::vector<Tensor>& inputs);

  // A metric object of your own, under `name` (evaluated with the named ones).
  void add_metric(const std::string& name, MetricPtr metric);
  const std::map<std::string, MetricPtr>& metrics() const { return metrics_; }

  const nn::CellPtr& network() const { return network_; }
  const optim::OptimizerPtr& optimizer() const { return optimizer_; }
  // The TrainOneStepCell (set_grad_reducer / set_sens on it); null without an optimizer.
  const std::shared_ptr<TrainOneStepCell>& train_network() const { return train_network_; }
  const nn::CellPtr& eval_network() const { return eval_network_; }
  // pipeline_stages > 1: the trainer of this rank's stage (null otherwise). This rank holds only
  // its stage's parameters; the network's other parameters are released here.
  const std::shared_ptr<parallel::PipelineTrainer>& pipeline() const { return pipeline_; }
  // The network's parameters and buffers (names as in the whole network) that this rank holds:
  // its stage's under pipeline_stages, all of them otherwise. What a per-stage checkpoint saves.
  std::vector<std::pair<std::string, Tensor>> held_parameters() const;
  // The whole network's parameters and buffers on world rank 0: under pipeline_stages every rank
  // calls it and the stages of the first replica send theirs to rank 0 (new tensors there; the
  // stages keep owning theirs). Other ranks get held_parameters(). Without a pipeline: the
  // network's own tensors on every rank.
  std::vector<std::pair<std::string, Tensor>> gather_parameters() const;

 private:
  void run(int64_t epoch, const data::Dataset& train_dataset, const data::Dataset* valid_dataset,
           const Callbacks& callbacks, int64_t valid_frequency, int64_t initial_epoch,
           int64_t sink_size);
  std::map<std::string, double> evaluate(const data::Dataset& ds, const Callbacks& callbacks,
                                         RunContext& ctx, bool with_eval_loss);
  // The constructor's amp arguments: the networks are built from them at once, or, under
  // auto_parallel, after the strategy search (build_networks).
  struct BuildArgs {
    std::string amp_level;
    amp::LossScaleManagerPtr loss_scale_manager;
    std::optional<bool> keep_batchnorm_fp32;
    std::optional<DType> cast_model_type;
  };
  void build_networks(const BuildArgs& args);
  // auto_parallel: searches the strategies on one batch (its rows: the step's inputs), rebuilds the
  // optimizer over the cut parameters, then builds the networks.
  void plan_auto_parallel(const std::vector<Tensor>& sample);
  std::optional<BuildArgs> pending_;  // set until the auto_parallel search has run
  std::vector<std::string> strategy_report_;
  nn::CellPtr network_, loss_fn_, eval_network_;
  optim::OptimizerPtr optimizer_;
  std::shared_ptr<TrainOneStepCell> train_network_;
  // pipeline_stages > 1 (the auto-parallel context): the 1F1B trainer that runs the steps.
  std::shared_ptr<parallel::PipelineTrainer> pipeline_;
  // Per entry of network_->parameters_and_buffers(): the pipeline stage that owns it.
  std::vector<int64_t> stage_of_;
  void setup_pipeline(const amp::LossScaleManagerPtr& loss_scale_manager);
  std::map<std::string, MetricPtr> metrics_;
  // Graph mode: the eval network and the network compiled by spore::jit (model.cpp).
  std::shared_ptr<void> compiled_eval_, compiled_predict_;
};

}  // namespace spore::train
