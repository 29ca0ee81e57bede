// Model::train / eval / fit / predict (train/model.h): the epoch and step loops, the RunContext
// bookkeeping and the callback calls. Training runs the TrainOneStepCell eagerly (PyNative).
#include "spore/train/model.h"
#include "spore/profiler.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "spore/autograd.h"
#include "spore/context.h"
#include "spore/jit.h"
#include "spore/nn/container.h"
#include "spore/ops.h"
#include "spore/parallel/auto_parallel.h"
#include "spore/parallel/parallel.h"
#include "spore/parallel/sharding.h"
#include "train/device_feeder.h"
#include "train/step_gaps.h"

namespace spore::train {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double scalar_of(const Tensor& loss) {
  NoGradGuard no_grad;
  if (loss.numel() == 1) return loss.item<double>();
  SPORE_CHECK(loss.numel() > 0, "[Model] the network returned an empty loss");
  double s = 0;
  for (double v : loss.contiguous().to_vector<double>()) s += v;
  return s / double(loss.numel());
}

int64_t batch_of(const data::Row& row) {
  return row.empty() || row[0].dim() == 0 ? 1 : row[0].size(0);
}

void check_row(const data::Row& row, const char* where) {
  SPORE_CHECK(row.size() >= 2, "[Model.", where,
              "] dataset rows must have at least 2 columns "
              "(data, label), got ",
              row.size());
}

// Where the network lives: its parameters' device (the current device for a network without any).
Device device_of(const nn::Cell& net) {
  for (const Tensor& p : net.parameters()) return p.device();
  return current_device();
}

template <typename Hook>
void each(const Callbacks& cbs, Hook hook) {
  for (const CallbackRef& c : cbs) hook(*c.get());
}

// Restores a cell's training flag on scope exit.
struct TrainModeGuard {
  nn::Cell& cell;
  bool prev;
  TrainModeGuard(nn::Cell& c, bool mode) : cell(c), prev(c.training()) { cell.set_train(mode); }
  ~TrainModeGuard() { cell.set_train(prev); }
};

// Runs net on inputs: in Graph mode through a spore::jit compilation kept in `slot` (one graph
// per input signature, so a last partial batch compiles a second one), else eagerly.
std::vector<Tensor> forward_maybe_compiled(const nn::CellPtr& net, std::shared_ptr<void>& slot,
                                           const std::vector<Tensor>& inputs, const char* name) {
  if (get_context_mode() != Mode::Graph || is_tracing()) return net->forward(inputs);
  if (!slot) {
    JitOptions opts;
    opts.name = name;
    opts.extra_key = [net] { return net->trace_key(); };  // train flags, amp policies
    slot = std::make_shared<JitFunction>(
        [net](const std::vector<Tensor>& in) { return net->forward(in); }, opts);
  }
  std::vector<Tensor> in;
  for (const Tensor& t : inputs) in.push_back(t.contiguous());
  return (*std::static_pointer_cast<JitFunction>(slot))(in);
}

// The user's kind of optimizer over `params` (some of its own), one group per parameter keeping
// its lr and weight decay, with fresh state: a pipeline stage's, or the pieces auto_parallel cut.
optim::OptimizerPtr rebuild_over(const optim::Optimizer& user, const std::vector<Tensor>& params,
                                 const char* who, const char* over) {
  std::vector<optim::ParamGroup> groups;
  const auto& all = user.parameters();
  const auto& names = user.parameter_names();
  for (const Tensor& p : params)
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i].is_same(p))
        groups.push_back({.params = {p},
                          .weight_decay = user.weight_decay_of(i),
                          .lr = user.lr_schedule(i),
                          .names = {i < names.size() ? names[i] : std::string()}});
  auto opt = user.rebuild(std::move(groups));
  SPORE_CHECK(opt != nullptr, "[Model] ", who, ": the optimizer ", user.name(),
              " cannot be rebuilt over ", over, " (it does not implement Optimizer::rebuild)");
  return opt;
}

}  // namespace

Model::Model(nn::CellPtr network, nn::CellPtr loss_fn, optim::OptimizerPtr optimizer,
             std::vector<std::string> metrics, nn::CellPtr eval_network,
             const std::string& amp_level, amp::LossScaleManagerPtr loss_scale_manager,
             std::optional<bool> keep_batchnorm_fp32, std::optional<DType> cast_model_type)
    : network_(std::move(network)),
      loss_fn_(std::move(loss_fn)),
      eval_network_(std::move(eval_network)),
      optimizer_(std::move(optimizer)) {
  SPORE_CHECK(network_ != nullptr, "[Model] network is null");
  for (const std::string& name : metrics) metrics_[name] = make_metric(name);
  BuildArgs args{amp_level, std::move(loss_scale_manager), keep_batchnorm_fp32, cast_model_type};
  // auto_parallel: the strategies are searched on the first batch (build), then the networks made.
  if (parallel::get_auto_parallel_context().parallel_mode == parallel::ParallelMode::AutoParallel &&
      parallel::get_group_size() > 1)
    pending_ = std::move(args);
  else
    build_networks(args);
}

void Model::build_networks(const BuildArgs& args) {
  const std::string& amp_level = args.amp_level;
  const amp::LossScaleManagerPtr& loss_scale_manager = args.loss_scale_manager;
  const std::optional<bool>& keep_batchnorm_fp32 = args.keep_batchnorm_fp32;
  const std::optional<DType>& cast_model_type = args.cast_model_type;
  const parallel::AutoParallelContext& pctx = parallel::get_auto_parallel_context();
  const bool data_parallel =
      pctx.parallel_mode == parallel::ParallelMode::DataParallel && parallel::get_group_size() > 1;
  // Optimizer sharding: every rank starts from rank 0's parameters, then each keeps 1/size of the
  // optimizer state (the gradients are reduce-scattered by the sharded optimizer, not all-reduced).
  // (With pipeline stages the stage optimizers are sharded over each stage's replicas instead:
  // setup_pipeline.)
  const bool sharded =
      optimizer_ && data_parallel && pctx.enable_parallel_optimizer && pctx.pipeline_stages <= 1;
  const bool semi_auto = parallel::semi_auto_active();
  if (optimizer_ && semi_auto && pctx.enable_parallel_optimizer && pctx.pipeline_stages <= 1) {
    // ZeRO-1 with operator sharding: each parameter's (piece's) state is cut over the ranks that
    // hold the same piece (its data-parallel group). The engine's mirrors already all-reduce the
    // gradients inside backward, so the sharded step only takes its range of them.
    std::vector<parallel::GroupPtr> groups;
    for (const Tensor& p : optimizer_->parameters())
      groups.push_back(parallel::replica_group_of(parallel::layout_of(p)));
    optimizer_ = std::make_shared<parallel::ShardedOptimizer>(optimizer_, std::move(groups),
                                                              pctx.gradients_mean, true);
  }
  if (sharded) {
    parallel::broadcast_parameters(network_->parameters_and_buffers(), *parallel::world());
    optimizer_ = std::make_shared<parallel::ShardedOptimizer>(optimizer_, parallel::world(),
                                                              pctx.gradients_mean);
  }
  const amp::Level level = amp::parse_level(amp_level);
  const bool amp_on = level != amp::Level::O0 || loss_scale_manager;
  if (optimizer_ && amp_on) {
    // semi_auto_parallel: the network is the sharded region (its input cut by the dataset
    // strategy, its output whole for the loss).
    nn::CellPtr amp_net = network_;
    if (semi_auto && pctx.pipeline_stages <= 1)
      amp_net = std::make_shared<parallel::ShardedCell>(network_);
    train_network_ = std::dynamic_pointer_cast<TrainOneStepCell>(
        amp::build_train_network(amp_net, optimizer_, loss_fn_, level, loss_scale_manager,
                                 keep_batchnorm_fp32, cast_model_type));
  } else if (level != amp::Level::O0) {
    amp::auto_mixed_precision(*network_, level, cast_model_type.value_or(kFloat16),
                              keep_batchnorm_fp32.value_or(level == amp::Level::O2));
  }
  if (optimizer_) {
    nn::CellPtr loss_net = loss_fn_ ? std::make_shared<WithLossCell>(network_, loss_fn_) : network_;
    // semi_auto_parallel: the step's forward pass is the sharded region (its inputs cut by the
    // dataset strategy, the loss whole); the mirrors all-reduce the gradients, so no reducer.
    if (semi_auto) loss_net = std::make_shared<parallel::ShardedCell>(loss_net);
    if (!train_network_) train_network_ = std::make_shared<TrainOneStepCell>(loss_net, optimizer_);
    // Data parallel (set_auto_parallel_context): broadcast rank 0's parameters, check that every
    // rank has the same ones, and all-reduce the gradients (MindSpore's Model does the same).
    if (data_parallel && !sharded)
      parallel::setup_data_parallel(*train_network_, network_->parameters_and_buffers());
    if (pctx.gradient_accumulation_steps > 1)
      train_network_->set_grad_accumulation(pctx.gradient_accumulation_steps);
  }
  if (optimizer_ && pctx.pipeline_stages > 1 && parallel::get_group_size() > 1) {
    // amp: the network's cells already carry their precision policies (build_train_network); the
    // pipeline scales the loss with the same manager as the one-process step would.
    amp::LossScaleManagerPtr manager = loss_scale_manager;
    if (auto ls = std::dynamic_pointer_cast<TrainOneStepWithLossScaleCell>(train_network_))
      manager = ls->loss_scale_manager();
    setup_pipeline(manager);
  }
  if (!eval_network_ && loss_fn_) {
    const bool to32 = level == amp::Level::O2 || level == amp::Level::O3;
    eval_network_ = std::make_shared<WithEvalCell>(
        to32 ? amp::with_float32_output(network_) : network_, loss_fn_);
    if (semi_auto) eval_network_ = std::make_shared<parallel::ShardedCell>(eval_network_);
  }
}

void Model::plan_auto_parallel(const std::vector<Tensor>& sample) {
  const bool training = optimizer_ && loss_fn_;
  // The search runs the sharded step's forward pass: the loss network's when training.
  nn::CellPtr body = training ? std::make_shared<WithLossCell>(network_, loss_fn_) : network_;
  parallel::ShardedCell region(body);
  std::vector<Tensor> in = sample;
  if (!training && in.size() > 1) in.resize(1);  // (data, label) rows: the network takes the data
  const parallel::StrategyPlan plan = parallel::search_strategies(*network_, region, in, training);
  const parallel::AutoParallelContext& pctx = parallel::get_auto_parallel_context();
  const std::string how = pctx.search_mode == "sharding_propagation"
                              ? pctx.search_mode
                              : pctx.search_mode + ", run as sharding_propagation";
  strategy_report_ = {"auto_parallel (" + how + "): " + plan.summary(),
                      "  priced at " + plan.rates.str()};
  for (const std::string& l : plan.lines()) strategy_report_.push_back("  " + l);
  if (optimizer_) {
    // The parameters are cut now: the optimizer's state (zeros, no step taken) is made again for
    // the pieces, each parameter keeping its lr and weight decay.
    const optim::OptimizerPtr user = optimizer_;
    optimizer_ = rebuild_over(*user, user->parameters(), "auto_parallel", "the cut parameters");
    optimizer_->set_global_step(user->global_step());
    optimizer_->set_clip_grad_norm(user->clip_grad_norm());
    optimizer_->set_loss_scale(user->loss_scale());
  }
  const BuildArgs args = *pending_;
  pending_.reset();
  build_networks(args);
}

void Model::build(const data::Dataset& dataset) {
  if (!pending_) return;
  SPORE_CHECK(dataset.defined(), "[Model.build] the dataset is empty");
  auto it = dataset.create_tuple_iterator();
  std::optional<data::Row> row = it->next();
  SPORE_CHECK(row.has_value(),
              "[Model.build] auto_parallel: the dataset yielded no rows, and the "
              "strategy search needs one batch");
  std::vector<Tensor> sample;
  for (const Tensor& t : *row) sample.push_back(t.to(device_of(*network_)));
  plan_auto_parallel(sample);
}

// pipeline_stages = P over R ranks: R / P replicas (data parallel) of P stages. The stages are runs
// of the SequentialCell's cells (by their pipeline_stage, or equal runs); each rank keeps only its
// stage (the other stages' parameters are released here) and trains it with an optimizer of the
// user's kind over that stage's parameters. Evaluation and predict run through the stages;
// checkpoints are per stage (ModelCheckpoint), gather_parameters() collects the whole network.
void Model::setup_pipeline(const amp::LossScaleManagerPtr& loss_scale_manager) {
  const parallel::AutoParallelContext& pctx = parallel::get_auto_parallel_context();
  const int64_t P = pctx.pipeline_stages, R = parallel::get_group_size();
  const char* who = "[Model] pipeline_stages";
  SPORE_CHECK(R % P == 0, who, " = ", P, " does not divide the ", R,
              " ranks; launch a multiple of ", P,
              " ranks (each replica of the pipeline needs one rank per stage)");
  auto seq = std::dynamic_pointer_cast<nn::SequentialCell>(network_);
  SPORE_CHECK(seq != nullptr, who,
              " needs the network as an nn::SequentialCell of its layers (set each one's "
              "pipeline_stage, or none for equal runs); got a ",
              network_->cls_name());
  SPORE_CHECK(loss_fn_ != nullptr, who, " needs a loss_fn: the last stage computes the loss");
  // semi_auto_parallel inside the stages (pp x mp): world rank r runs stage r % P; the R / P
  // ranks of a stage are the sharding group its layers' strategies cut over (dp and mp inside
  // the stage), so the stage replicas are not data-parallel replicas: every rank is given the
  // whole batch and each stage region cuts its batch by the dataset_strategy's dp.
  const bool semi_auto = pctx.parallel_mode == parallel::ParallelMode::SemiAutoParallel;
  if (semi_auto) {
    const int64_t dp = !pctx.dataset_strategy.empty() && !pctx.dataset_strategy[0].empty()
                           ? pctx.dataset_strategy[0][0]
                           : 1;
    SPORE_CHECK(pctx.full_batch || dp == 1, who,
                " with semi_auto_parallel gives every rank the whole batch (each stage cuts it "
                "over its ",
                R / P, " ranks by dataset_strategy); set full_batch = true");
    parallel::sharding_group();  // made now, by every rank at once (a collective over the world)
  }
  SPORE_CHECK(eval_network_ == nullptr, who,
              " evaluates through the stages with the loss_fn (each rank holds only its stage); a "
              "separate eval_network cannot run there. Leave eval_network out");
  const std::vector<nn::CellPtr>& cells = seq->cells();
  const int64_t n = int64_t(cells.size());
  SPORE_CHECK(n >= P, who, " = ", P, " but the network has only ", n, " cells");
  const bool marked = std::any_of(cells.begin(), cells.end(),
                                  [](const nn::CellPtr& c) { return c->pipeline_stage() >= 0; });
  std::vector<std::vector<nn::CellPtr>> runs(static_cast<size_t>(P));
  int64_t prev = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = marked ? cells[size_t(i)]->pipeline_stage() : i * P / n;
    SPORE_CHECK(s >= 0 && s < P, who, ": cell ", i, " (", cells[size_t(i)]->cls_name(),
                ") has pipeline_stage ", s, "; set every cell's stage to 0 .. ", P - 1,
                " (or none)");
    SPORE_CHECK(i == 0 || s >= prev, who, ": cell ", i, " (", cells[size_t(i)]->cls_name(),
                ") is on stage ", s, " after a cell on stage ", prev,
                "; a stage's cells must be consecutive, in stage order");
    prev = s;
    runs[size_t(s)].push_back(cells[size_t(i)]);
  }
  std::vector<nn::CellPtr> stages;
  for (int64_t s = 0; s < P; ++s) {
    SPORE_CHECK(!runs[size_t(s)].empty(), who, ": stage ", s, " has no cells");
    nn::CellPtr stage = std::make_shared<nn::SequentialCell>(runs[size_t(s)]);
    if (semi_auto) stage = std::make_shared<parallel::ShardedCell>(stage, /*pipeline_stage=*/true);
    stages.push_back(stage);
  }
  const auto named = network_->parameters_and_buffers();
  // (Cut parameters are this rank's pieces, which differ between ranks: under semi_auto_parallel
  // every rank builds the network from the same seed instead.)
  if (!semi_auto) parallel::broadcast_parameters(named, *parallel::world());
  stage_of_.assign(named.size(), -1);
  for (int64_t s = 0; s < P; ++s)
    for (const auto& [_, t] : stages[size_t(s)]->parameters_and_buffers())
      for (size_t i = 0; i < named.size(); ++i)
        if (stage_of_[i] < 0 && named[i].second.is_same(t)) stage_of_[i] = s;
  auto world = parallel::world();
  const int r = world->rank(), replica = int(r / P), stage = int(r % P);
  auto pipe_group = world->split(replica, stage);
  // semi_auto_parallel: the stage's ranks are its sharding group (the engine's mirrors reduce the
  // gradients), not replicas to average over.
  auto dp_group = R > P && !semi_auto ? world->split(stage, replica) : nullptr;
  optim::OptimizerPtr user = optimizer_;
  // enable_parallel_optimizer (ZeRO-1) with replicas: each stage's optimizer is sharded over the
  // replicas of that stage, which then reduce-scatter the stage's gradients themselves. With
  // semi_auto_parallel, each piece's state over the stage's ranks holding that piece.
  const parallel::GroupPtr shard_group =
      pctx.enable_parallel_optimizer && dp_group ? dp_group : nullptr;
  const bool zero_semi_auto = pctx.enable_parallel_optimizer && semi_auto;
  const bool mean = pctx.gradients_mean;
  auto make_opt = [user, shard_group, zero_semi_auto, mean](std::vector<Tensor> params) {
    auto opt = rebuild_over(*user, params, "pipeline_stages", "a stage's parameters");
    if (shard_group)
      return optim::OptimizerPtr(
          std::make_shared<parallel::ShardedOptimizer>(opt, shard_group, mean));
    if (zero_semi_auto) {
      std::vector<parallel::GroupPtr> groups;
      for (const Tensor& p : params)
        groups.push_back(parallel::replica_group_of(parallel::layout_of(p)));
      return optim::OptimizerPtr(
          std::make_shared<parallel::ShardedOptimizer>(opt, std::move(groups), mean, true));
    }
    return opt;
  };
  pipeline_ = std::make_shared<parallel::PipelineTrainer>(
      stages, loss_fn_, make_opt, pctx.micro_batch_num > 0 ? pctx.micro_batch_num : 2 * P,
      pipe_group, dp_group);
  if (pctx.gradient_accumulation_steps > 1)
    pipeline_->set_grad_accumulation(pctx.gradient_accumulation_steps);
  pipeline_->set_loss_scale_manager(loss_scale_manager);
  if (semi_auto) pipeline_->set_overflow_group(world);
  optimizer_ = pipeline_->optimizer();  // the one that steps (its lr and global step)
  // The user's optimizer held state for the whole network; the stage's rebuilt one replaces it.
  user->release_state("the optimizer of this rank's pipeline stage (pipeline_stages)");
}

void Model::add_metric(const std::string& name, MetricPtr metric) {
  SPORE_CHECK(metric != nullptr, "[Model.add_metric] metric '", name, "' is null");
  metrics_[name] = std::move(metric);
}

void Model::train(int64_t epoch, const data::Dataset& train_dataset, const Callbacks& callbacks,
                  int64_t initial_epoch, int64_t sink_size) {
  run(epoch, train_dataset, nullptr, callbacks, 1, initial_epoch, sink_size);
}

void Model::fit(int64_t epoch, const data::Dataset& train_dataset,
                const data::Dataset& valid_dataset, const Callbacks& callbacks,
                int64_t valid_frequency, int64_t initial_epoch, int64_t sink_size) {
  SPORE_CHECK(valid_dataset.defined(), "[Model.fit] valid_dataset is empty");
  SPORE_CHECK(valid_frequency >= 1, "[Model.fit] valid_frequency must be >= 1, got ",
              valid_frequency);
  // (auto_parallel: the eval network is made with the train network, after the search.)
  SPORE_CHECK(eval_network_ != nullptr || (pending_ && loss_fn_),
              "[Model.fit] validation needs a loss_fn or an "
              "eval_network");
  run(epoch, train_dataset, &valid_dataset, callbacks, valid_frequency, initial_epoch, sink_size);
}

void Model::run(int64_t epoch, const data::Dataset& ds, const data::Dataset* valid,
                const Callbacks& callbacks, int64_t valid_frequency, int64_t initial_epoch,
                int64_t sink_size) {
  SPORE_CHECK(ds.defined(), "[Model.train] train_dataset is empty");
  // auto_parallel: the first batch is the search's sample, then the first step's batch.
  std::unique_ptr<DeviceFeeder> feeder;
  std::optional<data::Row> held;
  if (pending_) {
    feeder = std::make_unique<DeviceFeeder>(ds.create_tuple_iterator(), device_of(*network_));
    held = feeder->next();
    SPORE_CHECK(held.has_value(), "[Model.train] the training dataset yielded no rows");
    check_row(*held, "train");
    plan_auto_parallel(*held);
  }
  SPORE_CHECK(train_network_ != nullptr,
              "[Model.train] the model has no optimizer; pass one to "
              "the constructor to train");
  SPORE_CHECK(epoch >= 1, "[Model.train] epoch must be >= 1, got ", epoch);
  SPORE_CHECK(initial_epoch >= 0 && initial_epoch < epoch,
              "[Model.train] initial_epoch must be "
              "in [0, epoch), got ",
              initial_epoch, " with epoch ", epoch);
  SPORE_CHECK(sink_size >= -1,
              "[Model.train] sink_size must be -1 (a sink per epoch), 0 (no sink) or a number of "
              "steps per sink, got ",
              sink_size);
  const bool sink = sink_size != 0;
  RunContext ctx;
  ctx.epoch_num = epoch;
  ctx.steps_per_epoch = sink_size > 0 ? sink_size : ds.get_dataset_size();
  ctx.global_step = initial_epoch * std::max<int64_t>(ctx.steps_per_epoch, 0);
  ctx.model = this;
  ctx.network = network_.get();
  ctx.optimizer = optimizer_.get();
  ctx.lr = optimizer_->current_lr();
  TrainModeGuard mode(*train_network_, true);
  StepGaps gaps(device_of(*network_));
  const auto t0 = Clock::now();
  // Rows since the iterator (re)started: an iterator that yields none ends the run.
  int64_t rows_from_feeder = 0;
  each(callbacks, [&](Callback& c) { c.on_train_begin(ctx); });
  for (int64_t e = initial_epoch + 1; e <= epoch && !ctx.stop_requested; ++e) {
    ctx.epoch = e;
    ctx.step = 0;
    ctx.epoch_samples = 0;
    ctx.epoch_loss = std::numeric_limits<double>::quiet_NaN();
    ctx.metrics.clear();
    const auto te = Clock::now();
    ctx.epoch_elapsed = 0;
    each(callbacks, [&](Callback& c) { c.on_epoch_begin(ctx); });
    double loss_sum = 0;
    // In a sink the host reads nothing until its end (on a device, reading a loss is a
    // synchronisation: the host would wait for every step): the losses add up on the device.
    Tensor sink_loss_sum, sink_last_loss;
    // sink_size > 0: one iterator for the whole run (an epoch is sink_size steps); else one per
    // epoch (a pass over the dataset).
    if (!feeder || (sink_size <= 0 && !held)) {
      feeder = std::make_unique<DeviceFeeder>(ds.create_tuple_iterator(), device_of(*network_));
      rows_from_feeder = 0;
    }
    if (sink) {
      each(callbacks, [&](Callback& c) { c.on_step_begin(ctx); });
      ctx.lr = optimizer_->current_lr();  // read once: per step it would wait for the last step
    }
    const auto tsink = Clock::now();
    double data_wait = 0;
    gaps.free_from_here();
    while (sink_size <= 0 || ctx.step < sink_size) {
      const auto tdata = Clock::now();
      std::optional<data::Row> row = held ? std::move(held) : feeder->next();
      held.reset();
      if (!row && sink_size > 0 && rows_from_feeder > 0) {  // run out: start again
        feeder = std::make_unique<DeviceFeeder>(ds.create_tuple_iterator(), device_of(*network_));
        row = feeder->next();
        rows_from_feeder = 0;
      }
      data_wait += seconds_since(tdata);
      if (!row) break;
      check_row(*row, "train");
      ++ctx.step;
      ++ctx.global_step;
      ++rows_from_feeder;
      ctx.batch_size = batch_of(*row);
      if (!sink) each(callbacks, [&](Callback& c) { c.on_step_begin(ctx); });
      const auto ts = Clock::now();
      if (!sink) ctx.lr = optimizer_->current_lr();  // the rate this step uses
      Tensor loss;
      gaps.busy_from_here();
      ctx.aux.clear();
      {
        const profiling::Span span("train", "step");
        if (pipeline_) {
          SPORE_CHECK(row->size() == 2,
                      "[Model.train] pipeline_stages needs (data, label) rows, got ", row->size(),
                      " columns");
          loss = pipeline_->step((*row)[0], (*row)[1]);
        } else {
          loss = train_network_->forward(*row).at(0);
          ctx.aux = train_network_->last_aux();
        }
      }
      gaps.free_from_here();
      if (sink) {
        NoGradGuard no_grad;
        const Tensor l = loss.to(kFloat64).mean();
        sink_loss_sum = sink_loss_sum.defined() ? sink_loss_sum + l : l;
        sink_last_loss = loss;
        ctx.epoch_samples += ctx.batch_size;
        continue;  // a sink's callbacks see it as one step, after its last
      }
      ctx.loss = scalar_of(loss);
      ctx.step_time = seconds_since(ts);
      ctx.epoch_samples += ctx.batch_size;
      loss_sum += ctx.loss;
      ctx.epoch_loss = loss_sum / double(ctx.step);
      ctx.epoch_elapsed = seconds_since(te);
      ctx.elapsed = seconds_since(t0);
      each(callbacks, [&](Callback& c) { c.on_step_end(ctx); });
      if (ctx.stop_requested) break;
    }
    ctx.epoch_data_wait = data_wait;
    ctx.epoch_device_idle = gaps.take_idle_seconds();  // waits for the last step
    ctx.epoch_train_time = seconds_since(te);
    if (sink && ctx.step > 0) {
      ctx.loss = scalar_of(sink_last_loss);  // the one synchronisation of the sink
      loss_sum = sink_loss_sum.item<double>();
      ctx.epoch_loss = loss_sum / double(ctx.step);
      ctx.epoch_elapsed = seconds_since(te);
      ctx.elapsed = seconds_since(t0);
      ctx.step_time = seconds_since(tsink);
      each(callbacks, [&](Callback& c) { c.on_step_end(ctx); });
    }
    if (ctx.steps_per_epoch <= 0) ctx.steps_per_epoch = ctx.step;
    if (valid && (e % valid_frequency == 0 || e == epoch || ctx.stop_requested)) {
      TrainModeGuard eval_mode(*train_network_, false);
      RunContext ectx = ctx;  // eval steps must not disturb the training counters
      ctx.metrics = evaluate(*valid, callbacks, ectx, true);
    }
    ctx.epoch_elapsed = seconds_since(te);
    ctx.elapsed = seconds_since(t0);
    each(callbacks, [&](Callback& c) { c.on_epoch_end(ctx); });
  }
  each(callbacks, [&](Callback& c) { c.on_train_end(ctx); });
}

std::map<std::string, double> Model::eval(const data::Dataset& valid_dataset,
                                          const Callbacks& callbacks) {
  SPORE_CHECK(valid_dataset.defined(), "[Model.eval] valid_dataset is empty");
  SPORE_CHECK(eval_network_ != nullptr || (pending_ && loss_fn_),
              "[Model.eval] evaluation needs a loss_fn or an "
              "eval_network returning (loss, outputs, label)");
  SPORE_CHECK(!metrics_.empty(),
              "[Model.eval] no metrics: pass metric names to the constructor "
              "(e.g. {\"accuracy\"}) or add_metric()");
  RunContext ctx;
  ctx.model = this;
  ctx.network = network_.get();
  ctx.optimizer = optimizer_.get();
  TrainModeGuard mode(*network_, false);
  return evaluate(valid_dataset, callbacks, ctx, false);
}

std::map<std::string, double> Model::evaluate(const data::Dataset& ds, const Callbacks& callbacks,
                                              RunContext& ctx, bool with_eval_loss) {
  // auto_parallel before any training: the first batch is the search's sample.
  DeviceFeeder it(ds.create_tuple_iterator(),
                  device_of(eval_network_ ? *eval_network_ : *network_));
  std::optional<data::Row> held;
  if (pending_) {
    held = it.next();
    SPORE_CHECK(held.has_value(), "[Model.eval] the evaluation dataset yielded no rows");
    check_row(*held, "eval");
    plan_auto_parallel(*held);
  }
  NoGradGuard no_grad;
  TrainModeGuard mode(*eval_network_, false);
  for (auto& [_, m] : metrics_) m->clear();
  ctx.eval_steps = ds.get_dataset_size();
  ctx.eval_step = 0;
  ctx.metrics.clear();
  each(callbacks, [&](Callback& c) { c.on_eval_begin(ctx); });
  double loss_sum = 0;
  for (std::optional<data::Row> row = held ? std::move(held) : it.next(); row; row = it.next()) {
    check_row(*row, "eval");
    ++ctx.eval_step;
    ctx.batch_size = batch_of(*row);
    each(callbacks, [&](Callback& c) { c.on_eval_step_begin(ctx); });
    std::vector<Tensor> out;
    if (pipeline_) {  // through the stages: the last one's output reaches every rank
      SPORE_CHECK(row->size() == 2, "[Model.eval] pipeline_stages needs (data, label) rows, got ",
                  row->size(), " columns");
      Tensor logits = pipeline_->predict((*row)[0]);
      // amp O2 / O3: the output reaches the loss and the metrics in float32 (with_float32_output)
      if (logits.dtype() == kFloat16 || logits.dtype() == kBFloat16) logits = logits.to(kFloat32);
      out = {(*loss_fn_)(logits, (*row)[1]), logits, (*row)[1]};
    } else {
      out = forward_maybe_compiled(eval_network_, compiled_eval_, *row, "eval");
    }
    SPORE_CHECK(out.size() == 3,
                "[Model.eval] the eval network must return (loss, outputs, "
                "label), got ",
                out.size(), " tensor(s)");
    loss_sum += scalar_of(out[0]);
    for (auto& [_, m] : metrics_) m->update_eval(out[0], out[1], out[2]);
    each(callbacks, [&](Callback& c) { c.on_eval_step_end(ctx); });
  }
  SPORE_CHECK(ctx.eval_step > 0, "[Model.eval] the evaluation dataset yielded no rows");
  std::map<std::string, double> results;
  for (auto& [name, m] : metrics_) results[name] = m->eval();
  ctx.metrics = results;
  if (with_eval_loss) ctx.metrics["eval_loss"] = loss_sum / double(ctx.eval_step);
  each(callbacks, [&](Callback& c) { c.on_eval_end(ctx); });
  return with_eval_loss ? ctx.metrics : results;
}

Tensor Model::predict(const Tensor& x) { return predict(std::vector<Tensor>{x}).at(0); }

std::vector<Tensor> Model::predict(const std::vector<Tensor>& inputs) {
  if (pending_) plan_auto_parallel(inputs);
  NoGradGuard no_grad;
  TrainModeGuard mode(*network_, false);
  const Device device = device_of(*network_);
  std::vector<Tensor> moved;
  for (const Tensor& x : inputs) moved.push_back(x.defined() ? x.to(device) : x);
  if (pipeline_) {
    SPORE_CHECK(moved.size() == 1,
                "[Model.predict] pipeline_stages: the network takes one input, "
                "got ",
                moved.size());
    return {pipeline_->predict(moved[0])};
  }
  return forward_maybe_compiled(network_, compiled_predict_, moved, "predict");
}

std::vector<std::pair<std::string, Tensor>> Model::held_parameters() const {
  auto named = network_->parameters_and_buffers();
  if (!pipeline_) return named;
  std::vector<std::pair<std::string, Tensor>> held;
  for (size_t i = 0; i < named.size(); ++i)
    if (stage_of_[i] == pipeline_->stage_index()) held.push_back(named[i]);
  return held;
}

std::vector<std::pair<std::string, Tensor>> Model::gather_parameters() const {
  if (!pipeline_) return network_->parameters_and_buffers();
  const auto& group = pipeline_->group();
  const int64_t stages = pipeline_->num_stages();
  // The first replica's stages (world ranks 0 .. stages - 1) send to its stage 0, world rank 0;
  // each stage sends its tensors in the network's order, so one tag per tensor matches them.
  auto named = network_->parameters_and_buffers();
  const int me = pipeline_->stage_index();
  // Operator-sharded stages (semi_auto_parallel): each stage's pieces are made whole first, by
  // every rank of the stage (a collective over the stage's ranks), in the network's order.
  std::vector<Shape> whole_shape;
  for (auto& [name, t] : named) {
    const parallel::Layout l = parallel::layout_of(t);
    Shape s = t.shape();
    for (size_t d = 0; d < s.size() && d < l.dims.size(); ++d) s[d] *= l.dims[d].parts;
    whole_shape.push_back(s);
  }
  for (size_t i = 0; i < named.size(); ++i)
    if (stage_of_[i] == me && !parallel::layout_of(named[i].second).is_whole())
      named[i].second = parallel::gather_whole(named[i].second);
  if (parallel::get_rank() >= stages) {
    std::vector<std::pair<std::string, Tensor>> held;
    for (size_t i = 0; i < named.size(); ++i)
      if (stage_of_[i] == me) held.push_back(named[i]);
    return held;
  }
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < named.size(); ++i) {
    const int owner = int(stage_of_[i]);
    const int tag = int(i % 30000);
    Tensor& t = named[i].second;
    if (me == 0) {
      if (owner == 0) {
        out.push_back(named[i]);
      } else {
        Tensor whole = Tensor::empty(whole_shape[i], t.dtype());
        group->recv(whole, owner, tag);
        out.emplace_back(named[i].first, whole);
      }
    } else if (owner == me) {
      group->send(t.contiguous(), 0, tag);
      out.push_back(named[i]);
    }
  }
  return out;
}

}  // namespace spore::train
