// The training and evaluation jobs behind `spore train` / `spore eval`: the MindSpore six-step
// workflow (context, data, network, loss + optimizer + metrics, Model, train with callbacks) for
// the model zoo, writing a checkpoint, a metrics file and a training-curve PNG.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "core/parallel.h"
#include "core/random.h"
#include "jobs.h"
#include "models/lenet.h"
#include "models/mindspore_names.h"
#include "models/mlp.h"
#include "models/resnet.h"
#include "models/transformer.h"
#include "spore/data/dataset.h"
#include "spore/data/vision.h"
#include "spore/io/checkpoint.h"
#include "spore/io/metrics.h"
#include "spore/io/plot.h"
#include "spore/io/run_lock.h"
#include "spore/nn/nn.h"
#include "spore/optim/optimizers.h"
#include "spore/parallel/parallel.h"
#include "spore/parallel/sharding.h"
#include "spore/spore.h"
#include "spore/train/callbacks.h"
#include "spore/train/model.h"

namespace spore::cli {
namespace {

namespace fs = std::filesystem;

// Fashion-MNIST training-set statistics of x / 255; the images are normalised with them.
constexpr double kMean = 0.2860, kStd = 0.3530;

// Data parallel (size > 1): rank `shard` reads every size-th image, in batches of batch / size;
// drop_remainder keeps the ranks' step counts equal.
data::Dataset fashion(const std::string& dir, const std::string& usage, int64_t limit, bool train,
                      int64_t batch, const DistInfo& dist = {}, int64_t* rows = nullptr) {
  // num_samples counts one shard's rows (MindSpore's), so --limit N means N images in all.
  data::Dataset ds = data::MnistDataset(dir, usage,
                                        {.num_samples = limit > 0 ? limit / dist.size : limit,
                                         .num_shards = dist.size,
                                         .shard_id = dist.rank});
  if (rows) *rows = ds.get_dataset_size() * dist.size;
  if (train) ds = ds.shuffle(ds.get_dataset_size());
  ds = ds.batch(batch, /*drop_remainder=*/dist.size > 1);
  // Normalise whole batches, inline: one pass per batch instead of two per image, and no worker
  // threads competing with the training step for the same two cores.
  // (B, 28, 28, 1) uint8 -> (B, 1, 28, 28) float32; with one channel HWC and CHW share the order.
  const data::TensorOp rescale = vision::Rescale(1.0 / (255.0 * kStd), -kMean / kStd);
  // LeNet-5 and the MLP are built for Fashion-MNIST's 28x28: another size is the data's fault, said
  // at the first batch rather than by a layer's shape check inside the step.
  return ds.map({[rescale, dir, usage](const Tensor& x) {
                  SPORE_CHECK(
                      x.size(1) == 28 && x.size(2) == 28, "--data ", dir, ": the ", usage,
                      " images are ", x.size(1), "x", x.size(2),
                      "; lenet and mlp take Fashion-MNIST's 28x28 images: "
                      "point --data at Fashion-MNIST's IDX files (or train resnet18 on CIFAR-10)");
                  return rescale(x).reshape({x.size(0), 1, x.size(1), x.size(2)});
                }},
                "image", 1);
}

// CIFAR-10 for ResNet-18 (CIFAR stem): the standard augmentation (4-pixel padded random crop,
// horizontal flip) for training, normalised with the training set's per-channel statistics.
data::Dataset cifar10(const std::string& dir, const std::string& usage, int64_t limit, bool train,
                      int64_t batch, const DistInfo& dist = {}, int64_t* rows = nullptr) {
  data::Dataset ds = data::Cifar10Dataset(dir, usage,
                                          {.num_samples = limit > 0 ? limit / dist.size : limit,
                                           .num_shards = dist.size,
                                           .shard_id = dist.rank});
  if (rows) *rows = ds.get_dataset_size() * dist.size;
  std::vector<data::Operation> ops;
  if (train) ops = {vision::RandomCrop({32, 32}, {.padding = {4}}), vision::RandomHorizontalFlip()};
  ops.push_back(vision::Rescale(1.0 / 255.0));
  ops.push_back(
      vision::Normalize({0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616}, /*is_hwc=*/true));
  ops.push_back(vision::HWC2CHW());
  ds = ds.map(ops, "image");
  if (train) ds = ds.shuffle(ds.get_dataset_size());
  return ds.batch(batch, /*drop_remainder=*/dist.size > 1);
}

bool is_cifar_model(const std::string& model) { return model == "resnet18"; }
const char* data_name(const std::string& model) {
  return is_cifar_model(model) ? "CIFAR-10" : "Fashion-MNIST";
}

data::Dataset classifier_data(const std::string& model, const std::string& dir,
                              const std::string& usage, int64_t limit, bool train, int64_t batch,
                              const DistInfo& dist = {}, int64_t* rows = nullptr) {
  return is_cifar_model(model) ? cifar10(dir, usage, limit, train, batch, dist, rows)
                               : fashion(dir, usage, limit, train, batch, dist, rows);
}

nn::CellPtr make_classifier(const std::string& model) {
  if (model == "lenet") return std::make_shared<models::LeNet5>();
  if (model == "mlp") return std::make_shared<models::MLP>(std::vector<int64_t>{784, 512, 256, 10});
  if (model == "resnet18") return models::resnet18(10, models::ResNetStem::Cifar);
  SPORE_THROW(ErrorKind::ValueError, "unknown model '", model,
              "'; expected lenet, mlp or resnet18");
}

int64_t count_params(const nn::Cell& net) {
  int64_t n = 0;
  for (const Tensor& p : net.trainable_params()) n += p.numel();
  return n;
}

// Prints one line per epoch and records it in the metrics files.
// loss_scale (mixed precision with a loss-scale cell): the current scale, printed and recorded.
// replicas: data-parallel replicas reading different batches; images/s is the job's (this rank's
// samples times replicas).
train::LambdaCallback epoch_logger(io::MetricsWriter& writer, const std::string& metric,
                                   std::function<double()> loss_scale = nullptr,
                                   int64_t replicas = 1) {
  return train::LambdaCallback(
      {.on_epoch_end = [&writer, metric, loss_scale, replicas](train::RunContext& c) {
        const double ips =
            c.epoch_elapsed > 0 ? double(c.epoch_samples * replicas) / c.epoch_elapsed : 0;
        io::MetricValues rec{{"loss", c.epoch_loss}};
        std::printf("epoch %lld/%lld: train loss %.4f", (long long)c.epoch, (long long)c.epoch_num,
                    c.epoch_loss);
        for (const auto& [k, v] : c.metrics) {
          rec.emplace_back(k, v);
          std::printf(", %s %.4f", k == metric ? ("test " + k).c_str() : k.c_str(), v);
        }
        if (loss_scale) {
          rec.emplace_back("loss_scale", loss_scale());
          std::printf(", loss scale %g", loss_scale());
        }
        rec.emplace_back("images_per_s", ips);
        rec.emplace_back("seconds", c.epoch_elapsed);
        rec.emplace_back("data_wait_s", c.epoch_data_wait);
        rec.emplace_back("device_idle_s", c.epoch_device_idle);
        // Shares of the epoch's training time: the loop waiting for batches, and the device idle
        // between steps (for the batch, or for the host to queue the next step).
        const double t = std::max(c.epoch_train_time, 1e-9);
        std::printf(" (%.0f images/s, %.1f s; data wait %.0f%%, device idle %.0f%%)\n", ips,
                    c.epoch_elapsed, 100 * c.epoch_data_wait / t, 100 * c.epoch_device_idle / t);
        std::fflush(stdout);
        writer.write(c.epoch, rec);
      }});
}

void write_curves(const io::MetricsWriter& writer, const std::string& path,
                  const std::string& title, const std::string& metric) {
  io::TrainingCurves curves = io::curves_from_metrics(
      io::latest_history(io::read_metrics_jsonl(writer.jsonl_path())), metric);
  curves.title = title;
  for (auto* panel : {&curves.loss, &curves.metric})  // legends: what each curve was measured on
    for (io::CurveSeries& c : *panel)
      c.label = c.label == "loss"                                     ? "train"
                : c.label.rfind("eval_", 0) == 0 || c.label == metric ? "test"
                                                                      : c.label;
  io::save_training_curves(path, curves);
}

// Friedman #1 (Friedman 1991, the classic regression benchmark; scikit-learn's make_friedman1):
// x ~ U[0,1]^10, y = 10 sin(pi x0 x1) + 20 (x2 - 0.5)^2 + 10 x3 + 5 x4 + N(0, 1); x5..x9 are noise.
// Made on the host (a data set's columns live there) whatever --device says.
std::pair<Tensor, Tensor> friedman1(int64_t n) {
  const Device host{};
  Tensor x = rand({n, 10}, kFloat32, host);
  Tensor noise = randn({n}, kFloat32, host);
  std::vector<float> xv = x.to_vector<float>(), nv = noise.to_vector<float>();
  std::vector<float> y(static_cast<size_t>(n), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const float* r = &xv[size_t(i * 10)];
    y[size_t(i)] = float(10 * std::sin(M_PI * r[0] * r[1]) + 20 * (r[2] - 0.5) * (r[2] - 0.5) +
                         10 * r[3] + 5 * r[4] + nv[size_t(i)]);
  }
  return {x, from_vector(y, {n, 1}, host)};
}

// The run's hyper-parameters as RUN_DIR/run.json (what `spore dashboard` shows).
void write_run_json(const TrainArgs& a, const std::string& dir) {
  const nlohmann::json j = {{"model", a.model},
                            {"epochs", a.epochs},
                            {"batch_size", a.batch_size},
                            {"lr", a.lr},
                            {"momentum", a.momentum},
                            {"mode", a.mode},
                            {"seed", a.seed},
                            {"data", a.data},
                            {"amp", a.amp},
                            {"amp_dtype", a.amp_dtype},
                            {"threads", a.threads}};
  std::ofstream(fs::path(dir) / "run.json") << j.dump(2) << "\n";
}

int train_regression(const TrainArgs& a, const std::string& out) {
  const int64_t n_train = a.limit > 0 ? a.limit : 8000,
                n_test = a.eval_limit > 0 ? a.eval_limit : 2000;
  auto [xtr, ytr] = friedman1(n_train);
  auto [xte, yte] = friedman1(n_test);
  auto train_ds = data::TensorDataset({xtr, ytr}, {"x", "y"}).shuffle(n_train).batch(a.batch_size);
  auto test_ds = data::TensorDataset({xte, yte}, {"x", "y"}).batch(256);
  auto net = std::make_shared<models::MLP>(std::vector<int64_t>{10, 64, 64, 1});
  auto loss = std::make_shared<nn::MSELoss>();
  // Adam suits this small smooth problem; --lr keeps its meaning.
  auto opt = std::make_shared<optim::Adam>(net->trainable_params(), a.lr == 0.01 ? 3e-3 : a.lr);
  train::Model model(net, loss, opt, {"mse", "mae"});
  io::MetricsWriter writer(out + "/metrics");
  write_run_json(a, out);
  std::printf(
      "training mlp-regression on Friedman #1 (%lld train / %lld test samples, 10 features)\n",
      (long long)n_train, (long long)n_test);
  model.fit(a.epochs, train_ds, test_ds, {train::ProgressBar(), epoch_logger(writer, "mse")});
  if (a.verbose &&
      model.train_network()) {  // Graph mode: one compilation per batch shape, not per step
    const JitStats js = model.train_network()->jit_stats();
    if (js.traces > 0)
      std::printf("compiled train step: %lld compilations, %lld cache hits, %zu cached\n",
                  (long long)js.traces, (long long)js.cache_hits, js.cache_size);
  }
  io::save_checkpoint(*net, out + "/mlp-regression.safetensors", {{"model", "mlp-regression"}});
  write_curves(writer, out + "/curves.png", "MLP regression (Friedman #1)", "mae");
  std::printf("outputs: %s/{mlp-regression.safetensors, metrics.jsonl, metrics.csv, curves.png}\n",
              out.c_str());
  return 0;
}

// --parallel "dp=D,mp=M,pp=P" (any may be left out): the mesh over the launched ranks. Without it:
// data parallel over all of them. "auto" in the list (transformer): auto_parallel, one layer cut by
// hand and the others' strategies searched.
struct Mesh {
  int64_t dp = 1, mp = 1, pp = 1;
  bool search = false;
};
Mesh parse_parallel(const std::string& spec, int ranks) {
  if (spec.empty()) return {ranks, 1, 1};
  Mesh m{0, 1, 1};
  std::stringstream ss(spec);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part == "auto") {
      m.search = true;
      continue;
    }
    const size_t eq = part.find('=');
    const std::string key = eq == std::string::npos ? part : part.substr(0, eq);
    int64_t v = 0;
    const char* b = part.data() + (eq == std::string::npos ? part.size() : eq + 1);
    const auto [p, ec] = std::from_chars(b, part.data() + part.size(), v);
    SPORE_CHECK(eq != std::string::npos && ec == std::errc() && p == part.data() + part.size() &&
                    v >= 1 && (key == "dp" || key == "mp" || key == "pp"),
                "--parallel '", spec,
                "': expected a list like dp=2,mp=2 or dp=2,pp=2 (dp: data-parallel replicas, "
                "mp: ranks that share each layer, pp: pipeline stages, auto: search the "
                "strategies), got the part '",
                part, "'");
    (key == "dp" ? m.dp : key == "mp" ? m.mp : m.pp) = v;
  }
  if (m.dp == 0) m.dp = ranks / (m.mp * m.pp);
  SPORE_CHECK(m.dp * m.mp * m.pp == ranks, "--parallel ", spec, " needs ", m.dp * m.mp * m.pp,
              " ranks but the job has ", ranks, "; launch with spore launch -n ",
              m.dp * m.mp * m.pp, " or change the mesh");
  return m;
}

// `spore train transformer`: the operator-sharding showcase on a generated sequence task (the label
// is the most frequent token). Under spore launch with --parallel dp=D,mp=M, the blocks' Dense
// layers are cut Megatron-style over mp ranks and the batch over dp (semi_auto_parallel).
int train_transformer(const TrainArgs& a, const std::string& out) {
  const DistInfo dist = setup_distributed(a.comm_timeout);
  const Mesh mesh = parse_parallel(a.parallel, dist.size);
  const int64_t dp = mesh.dp, mp = mesh.mp, pp = mesh.pp;
  const models::TransformerOptions o;
  SPORE_CHECK(o.heads % mp == 0, "--parallel ", a.parallel, ": the transformer's ", o.heads,
              " heads do not split over mp = ", mp, "; use an mp that divides them");
  // With pipeline stages and dp or mp, each stage's blocks are cut over its dp x mp ranks
  // (semi_auto_parallel inside the stages; every rank reads the whole batch).
  const bool staged_cut = pp > 1 && dp * mp > 1;
  SPORE_CHECK(pp <= o.layers, "--parallel ", a.parallel, ": the transformer has ", o.layers,
              " blocks, so at most pp=", o.layers, " stages");
  const int64_t n_train = a.limit > 0 ? a.limit : 8192,
                n_test = a.eval_limit > 0 ? a.eval_limit : 1024;
  SPORE_CHECK(a.batch_size % dp == 0, "--batch-size ", a.batch_size,
              " must be a multiple of dp = ", dp);
  auto [xtr, ytr] = models::make_token_task(n_train, o, a.seed);
  auto [xte, yte] = models::make_token_task(n_test, o, a.seed + 1000);
  set_seed(a.seed);  // every rank draws the same batches: each takes its piece (full_batch)
  auto train_ds =
      data::TensorDataset({xtr, ytr}, {"ids", "label"}).shuffle(n_train).batch(a.batch_size, true);
  auto test_ds = data::TensorDataset({xte, yte}, {"ids", "label"}).batch(256 / dp * dp, true);
  if (dist.size > 1 && pp > 1 && !staged_cut) {  // Model cuts the network into stages
    parallel::AutoParallelContext ctx = parallel::get_auto_parallel_context();
    ctx.parallel_mode = parallel::ParallelMode::StandAlone;
    ctx.pipeline_stages = pp;
    parallel::set_auto_parallel_context(ctx);
  } else if (dist.size > 1) {
    SPORE_CHECK(!mesh.search || pp == 1, "--parallel ", a.parallel,
                ": the strategy search (auto) runs without pipeline stages; drop pp or auto");
    parallel::AutoParallelContext ctx = parallel::get_auto_parallel_context();
    ctx.pipeline_stages = pp;
    ctx.parallel_mode = mesh.search ? parallel::ParallelMode::AutoParallel
                                    : parallel::ParallelMode::SemiAutoParallel;
    ctx.device_num = dist.size;
    ctx.dataset_strategy = {{dp, 1}, {dp}};
    ctx.full_batch = true;
    parallel::set_auto_parallel_context(ctx);
  }
  // The pipeline's network is the same classifier as a SequentialCell of its blocks (built in the
  // same order: the same weights).
  nn::CellPtr net;
  if (pp > 1)
    net = models::transformer_sequential(o, pp);
  else
    net = std::make_shared<models::TransformerClassifier>(o);
  const int64_t params = count_params(*net);
  if (dist.size > 1 && pp == 1 && !mesh.search)
    std::static_pointer_cast<models::TransformerClassifier>(net)->shard(dp, mp);
  if (dist.size > 1 && mesh.search)  // one annotation: the first MLP layer column parallel
    for (auto& [name, cell] : net->named_cells())
      if (name == "block0.fc1") dynamic_cast<nn::Dense&>(*cell).shard({{dp, 1}, {mp, 1}});
  if (staged_cut)  // the blocks are cells 1 .. layers of the sequential network
    for (int64_t i = 0; i < o.layers; ++i)
      std::static_pointer_cast<models::TransformerBlock>(
          std::static_pointer_cast<nn::SequentialCell>(net)->cells()[size_t(1 + i)])
          ->shard(dp, mp);
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  auto opt = std::make_shared<optim::Adam>(net->trainable_params(), a.lr_given ? a.lr : 1e-3);
  train::Model model(net, loss, opt, {"accuracy"});
  if (dist.print) {
    std::printf(
        "training transformer (%lld blocks, width %lld, %lld heads) on the generated "
        "most-frequent-token "
        "task: %lld train / %lld test sequences of %lld tokens, batch %lld, Adam(lr=%g), %s mode, "
        "%lld "
        "parameters\n",
        (long long)o.layers, (long long)o.dim, (long long)o.heads, (long long)n_train,
        (long long)n_test, (long long)o.seq, (long long)a.batch_size, a.lr_given ? a.lr : 1e-3,
        a.mode.c_str(), (long long)params);
    if (dist.size > 1 && pp > 1)
      std::printf(
          "pipeline parallel: %lld stages%s, %lld micro-batches per step (1F1B); this rank "
          "holds %lld of the %lld parameters\n",
          (long long)pp,
          staged_cut ? (", each cut over dp=" + std::to_string(dp) + " x mp=" + std::to_string(mp) +
                        " ranks (semi_auto_parallel)")
                           .c_str()
                     : "",
          (long long)(2 * pp), (long long)count_params(*model.pipeline()->stage()),
          (long long)params);
    else if (dist.size > 1 && !mesh.search)
      std::printf(
          "semi_auto_parallel: %d ranks as dp=%lld x mp=%lld; this rank holds %lld of the %lld "
          "parameters\n",
          dist.size, (long long)dp, (long long)mp, (long long)count_params(*net),
          (long long)params);
  }
  const std::string rank_out = dist.rank == 0 ? out : out + "/rank" + std::to_string(dist.rank);
  if (dist.print) fs::create_directories(rank_out);
  // One run per directory: a second run into it stops here, naming this one.
  std::optional<io::RunLock> run_lock;
  if (dist.print) run_lock.emplace(rank_out);
  std::unique_ptr<io::MetricsWriter> writer;
  if (dist.print) writer = std::make_unique<io::MetricsWriter>(rank_out + "/metrics");
  if (dist.print) write_run_json(a, rank_out);
  train::Callbacks callbacks;
  if (dist.print)
    callbacks = {train::ProgressBar({.log_every = 200}), epoch_logger(*writer, "accuracy")};
  if (auto fault = fault_injector(dist.rank))
    callbacks.push_back(train::LambdaCallback(
        {.on_step_end = [fault](train::RunContext& c) { fault(c.global_step); }}));
  if (dist.print && mesh.search)  // the search runs on the first batch, before training begins
    callbacks.insert(callbacks.begin(),
                     train::LambdaCallback({.on_train_begin = [&](train::RunContext&) {
                       const auto& report = model.strategy_report();
                       for (size_t i = 0; i < report.size() && (i == 0 || a.verbose); ++i)
                         std::printf("%s\n", report[i].c_str());
                       std::printf("this rank holds %lld of the %lld parameters\n",
                                   (long long)count_params(*net), (long long)params);
                     }}));
  model.fit(a.epochs, train_ds, test_ds, callbacks);
  // The checkpoint holds whole tensors: every rank takes part in the gathers, rank 0 writes.
  io::NamedTensors whole;
  if (pp > 1) {  // the stages send theirs to rank 0, named as in TransformerClassifier
    for (const auto& [name, t] : model.gather_parameters())
      whole.push_back({models::transformer_classifier_name(name), t});
  } else {
    for (const auto& [name, t] : net->parameters_and_buffers())
      whole.push_back({name, dist.size > 1 ? parallel::gather_whole(t) : t});
  }
  if (a.verbose && dist.print)
    for (const std::string& line : parallel::redistribution_log())
      std::printf("redistribution: %s\n", line.c_str());
  if (dist.rank == 0) {
    const std::string path = out + "/transformer.safetensors";
    io::save_checkpoint(whole, path,
                        {{"model", "transformer"}, {"epochs", std::to_string(a.epochs)}});
    write_curves(*writer, out + "/curves.png", "transformer (generated token task)", "accuracy");
    std::printf("outputs: %s, %s/metrics.jsonl and .csv, %s/curves.png\n", path.c_str(),
                out.c_str(), out.c_str());
  }
  parallel::release();
  return 0;
}

// --resume auto: the file <dir>/latest names (ModelCheckpoint writes it after each save), or ""
// when the folder has none yet.
std::string latest_checkpoint(const fs::path& dir) {
  std::ifstream f(dir / "latest");
  std::string name;
  if (!std::getline(f, name) || name.empty()) return "";
  const fs::path file = dir / name;
  SPORE_CHECK_KIND(ErrorKind::IOError, fs::is_regular_file(file),
                   "--resume auto: ", (dir / "latest").string(), " names ", name,
                   ", which is not in ", dir.string(),
                   "; pass --resume FILE with a checkpoint "
                   "that exists");
  return file.string();
}

// The checkpoint this rank resumes from ("" for none). A run with sharded layers (mp), pipeline
// stages (pp) or a sharded optimizer (--parallel-optimizer on several ranks) wrote one checkpoint
// per rank, under <out>/checkpoints/rank_<r>/ (`per_rank`; `parallel` names the option that made it
// so): --resume auto reads this rank's rank_<r>/latest, and --resume FILE names one rank's file
// (.../rank_<k>/<name>), each rank reading <name> from its own rank_<r>/.
std::string resume_file_of_rank(const std::string& resume, const std::string& out, bool per_rank,
                                int rank, const std::string& parallel) {
  const fs::path dir = fs::path(out) / "checkpoints";
  const std::string mine = "rank_" + std::to_string(rank);
  if (resume == "auto") {
    if (!per_rank) {
      SPORE_CHECK(fs::exists(dir / "latest") || !fs::exists(dir / "rank_0" / "latest"),
                  "--resume auto: ", dir.string(),
                  " holds per-rank checkpoints (rank_<r>/, written by a run with --parallel "
                  "mp=... or pp=..., or --parallel-optimizer), and this run keeps whole ones; "
                  "resume with that run's options, or merge pipeline stages with spore convert "
                  "--merge and pass --resume FILE");
      return latest_checkpoint(dir);
    }
    const std::string f = latest_checkpoint(dir / mine);
    SPORE_CHECK(!f.empty() || !fs::exists(dir / "latest"), "--resume auto: ", dir.string(),
                " holds checkpoints of a run without --parallel mp or pp or --parallel-optimizer (",
                (dir / "latest").string(), "), and ", parallel,
                " resumes from one checkpoint per rank (rank_<r>/); resume with that run's "
                "options, or start a new --out");
    return f;
  }
  if (!per_rank) return resume;
  const fs::path p(resume);
  const std::string parent = p.parent_path().filename().string();
  const bool in_rank_dir = parent.size() > 5 && parent.rfind("rank_", 0) == 0 &&
                           parent.find_first_not_of("0123456789", 5) == std::string::npos;
  SPORE_CHECK(in_rank_dir, "--resume ", resume, ": ", parallel,
              " resumes from one checkpoint per rank, and this file is not in a rank_<r>/ "
              "folder; pass one rank's file, <out>/checkpoints/rank_0/<name>.safetensors (each "
              "rank reads <name> from its own rank_<r>/), or --resume auto");
  const fs::path f = p.parent_path().parent_path() / mine / p.filename();
  SPORE_CHECK_KIND(ErrorKind::IOError, fs::is_regular_file(f), "--resume ", resume, ": rank ", rank,
                   "'s checkpoint ", f.string(),
                   " does not exist (each rank resumes from the file of the same name in its own "
                   "rank_<r>/); pass a name that every rank_<r>/ holds, or --resume auto");
  return f.string();
}

// A non-negative integer from a checkpoint's metadata.
int64_t meta_int(const std::string& file, const io::Checkpoint& ck, const char* k) {
  auto it = ck.metadata.find(k);
  SPORE_CHECK(it != ck.metadata.end(), "--resume ", file, " has no '", k,
              "' metadata; use a checkpoint "
              "from <out>/checkpoints/ written by spore train");
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  SPORE_CHECK(ec == std::errc() && p == it->second.data() + it->second.size() && v >= 0,
              "--resume ", file, ": metadata '", k, "' is '", it->second,
              "', not a non-negative integer; use a checkpoint from "
              "<out>/checkpoints/ written by spore train");
  return v;
}

// Per-rank resume: every rank reads its own file, and all of them must continue from the same
// epoch. One all-reduce of each rank's outcome (found / none yet / failed) and epoch, so a rank
// that cannot read its file stops every rank with a message naming it, instead of leaving the
// others waiting in the first collective until the deadline.
std::optional<io::Checkpoint> load_resume_per_rank(const std::string& resume,
                                                   const std::string& out, int rank, int size,
                                                   const std::string& parallel, std::string& file) {
  std::optional<io::Checkpoint> ck;
  std::exception_ptr error;  // rethrown after the all-reduce, as it was (its kind and message)
  int64_t epoch = -1;
  try {
    file = resume_file_of_rank(resume, out, true, rank, parallel);
    if (!file.empty()) {
      ck = io::load_checkpoint(file);
      epoch = meta_int(file, *ck, "epoch");
    }
  } catch (const std::exception&) {
    error = std::current_exception();
  }
  Tensor t = zeros({2 * int64_t(size)}, kFloat64);
  double* v = t.data<double>();
  v[rank] = error ? -1 : ck ? 1 : 0;  // failed / found / none yet
  v[size + rank] = double(epoch);
  parallel::world()->all_reduce(t, parallel::ReduceOp::Sum);
  if (error) std::rethrow_exception(error);
  std::string failed, found, none, epochs;
  for (int r = 0; r < size; ++r) {
    (v[r] < 0 ? failed : v[r] > 0 ? found : none) += " " + std::to_string(r);
    epochs += (r ? ", " : "") + std::string("rank ") + std::to_string(r) + ": " +
              (v[r] > 0 ? std::to_string(int64_t(v[size + r])) : std::string("none"));
  }
  SPORE_CHECK(failed.empty(), "--resume ", resume, ": rank(s)", failed,
              " could not read their checkpoint (their own message says why); every rank "
              "resumes from its own rank_<r>/ file");
  SPORE_CHECK(found.empty() || none.empty(), "--resume ", resume, ": rank(s)", found,
              " found a checkpoint and rank(s)", none,
              " none; every rank_<r>/ of the run must hold one. Resume from a file all of them "
              "hold, or start a new --out");
  for (int r = 1; r < size; ++r)
    SPORE_CHECK(v[r] <= 0 || v[size + r] == v[size], "--resume ", resume,
                ": the ranks' checkpoints are of different epochs (", epochs,
                "); a run stopped between two ranks' saves. Pass --resume "
                "<out>/checkpoints/rank_0/<name> with an epoch every rank saved");
  return ck;
}

// A per-rank checkpoint fits this rank only when it was written by the same rank of the same
// mesh: the same number of ranks, the same pipeline stage, the same layouts of the cut tensors.
void check_rank_checkpoint(const std::string& file, const io::Checkpoint& ck, const DistInfo& dist,
                           const Mesh& mesh, const train::Model& model) {
  auto expect = [&](const std::string& k, const std::string& want, const char* what) {
    auto it = ck.metadata.find(k);
    const std::string found = it == ck.metadata.end() ? "(none)" : it->second;
    SPORE_CHECK(found == want, "--resume ", file, " was written by another layout of ranks: its '",
                k, "' is ", found, ", and this rank's is ", want, " (", what,
                "); resume with the --parallel, --parallel-optimizer and the number of ranks of "
                "the run that wrote it");
  };
  expect("group_size", std::to_string(dist.size), "the number of ranks");
  expect("rank", std::to_string(dist.rank), "this rank");
  if (mesh.pp > 1) {
    expect("pipeline_stages", std::to_string(mesh.pp), "pipeline stages");
    expect("pipeline_stage", std::to_string(model.pipeline()->stage_index()),
           "this rank's pipeline stage");
  }
  const auto* zero = dynamic_cast<const parallel::ShardedOptimizer*>(model.optimizer().get());
  expect("optimizer_shard", zero ? zero->shard_range() : "(none)",
         "the range of the optimizer state this rank keeps");
  if (mesh.mp > 1)
    for (const auto& [name, t] : model.network()->parameters_and_buffers()) {
      const parallel::Layout l = parallel::layout_of(t);
      expect("layout." + name, l.is_whole() ? "(none)" : l.str(), "how the tensor is cut");
    }
}

// --resume: parameters, optimizer state (moments) and step from an epoch-end checkpoint of
// ModelCheckpoint; returns the epochs already done. The shuffle is advanced past them so the
// resumed run sees the same batches as an uninterrupted one.
// `held`: what this rank holds (the whole network; with pipeline stages its stage; with sharded
// layers its pieces); `opt`: the optimizer that steps (a pipeline stage's own).
int64_t resume_from(const std::string& file, const io::Checkpoint& ck, io::NamedTensors held,
                    optim::Optimizer& opt, const data::Dataset& train_ds, int64_t epochs,
                    bool partial) {
  // Everything is restored or the run stops: the network, every optimizer moment (same shape and
  // dtype: a float64 moment would not resume bit for bit), and no entry left over. --resume-partial
  // restores what matches and lists what starts again from its initial value.
  io::NamedTensors targets = std::move(held);
  for (auto& st : opt.state()) targets.push_back(st);
  io::LoadReport rep;
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [n, t] : targets) by_name[n] = &t;
  std::set<std::string> in_file;
  for (const auto& [n, t] : ck.tensors) {
    in_file.insert(n);
    auto it = by_name.find(n);
    if (it == by_name.end())
      rep.unexpected.push_back(n);
    else if (it->second->shape() != t.shape() || it->second->dtype() != t.dtype())
      rep.mismatched.push_back(n + ": expected " + shape_str(it->second->shape()) + " " +
                               dtype_name(it->second->dtype()) + ", found " + shape_str(t.shape()) +
                               " " + dtype_name(t.dtype()));
  }
  for (const auto& [n, t] : targets)
    if (!in_file.count(n)) rep.missing.push_back(n);
  SPORE_CHECK(
      partial || rep.ok(), "--resume ", file, " cannot restore the run exactly: ", rep.summary(),
      ". Pass a checkpoint from <out>/checkpoints/ written by `spore train` for this model and "
      "optimizer, or add --resume-partial to restore what matches and restart the rest");
  if (!rep.ok())
    std::printf("--resume-partial: %s; these start from their initial values\n",
                rep.summary().c_str());
  io::NamedTensors matching;
  for (const auto& [n, t] : ck.tensors) {
    auto it = by_name.find(n);
    if (it != by_name.end() && it->second->shape() == t.shape() && it->second->dtype() == t.dtype())
      matching.emplace_back(n, t);
  }
  io::load_into_tensors(targets, matching);
  const int64_t epoch = meta_int(file, ck, "epoch"), step = meta_int(file, ck, "step"),
                global_step = meta_int(file, ck, "global_step");
  SPORE_CHECK(step == train_ds.get_dataset_size(), "--resume ", file, " was written at step ", step,
              " of epoch ", epoch, " (", train_ds.get_dataset_size(),
              " steps per epoch); resuming needs an epoch-end "
              "checkpoint with the same --batch-size, --limit and number of ranks");
  SPORE_CHECK(epoch < epochs, "--resume ", file, " already has ", epoch,
              " epochs; pass --epochs > ", epoch);
  opt.set_global_step(global_step);
  for (int64_t e = 0; e < epoch; ++e)
    train_ds.create_tuple_iterator();  // each one draws an epoch's order
  return epoch;
}

// --resume under --amp with a dynamic loss scale: the scale and its clean-step count continue from
// the checkpoint (ModelCheckpoint's append_info wrote them), or the run stops unless partial.
void restore_loss_scale(const std::string& file, const io::Checkpoint& ck,
                        amp::DynamicLossScaleManager& m, bool partial) {
  auto scale = ck.metadata.find("loss_scale"), good = ck.metadata.find("loss_scale_good_steps");
  if (scale == ck.metadata.end() || good == ck.metadata.end()) {
    SPORE_CHECK(
        partial, "--resume ", file,
        " cannot restore the run exactly: it holds no loss scale (it was written without "
        "--amp's dynamic loss scaling, or by an older spore), so the scale would restart at ",
        m.get_loss_scale(), "; add --resume-partial to continue with that scale");
    std::printf("--resume-partial: %s holds no loss scale; it starts again at %g\n", file.c_str(),
                m.get_loss_scale());
    return;
  }
  double s = 0;
  int64_t g = -1;
  const auto [p1, e1] =
      std::from_chars(scale->second.data(), scale->second.data() + scale->second.size(), s);
  const auto [p2, e2] =
      std::from_chars(good->second.data(), good->second.data() + good->second.size(), g);
  SPORE_CHECK(e1 == std::errc() && e2 == std::errc() &&
                  p1 == scale->second.data() + scale->second.size() &&
                  p2 == good->second.data() + good->second.size(),
              "--resume ", file, ": metadata loss_scale '", scale->second,
              "' / loss_scale_good_steps '", good->second,
              "' are not numbers; use a checkpoint from <out>/checkpoints/ written by spore train");
  m.restore(s, g);
}

// --out: created when missing, and written to once (a probe file) so that a folder that cannot be
// used is an error now, before the data is read and training starts, not at the first save.
void prepare_out_dir(const std::string& out) {
  const std::string fix =
      "; pass --out with a folder you can write to (it is created when missing)";
  std::error_code ec;
  const fs::file_status st = fs::status(out, ec);
  SPORE_CHECK_KIND(ErrorKind::IOError, !fs::exists(st) || fs::is_directory(st), "--out ", out,
                   " exists and is not a folder", fix);
  fs::create_directories(out, ec);
  SPORE_CHECK_KIND(ErrorKind::IOError, !ec && fs::is_directory(out), "--out ", out,
                   ": cannot create the folder: ", ec ? ec.message() : "it is not a folder", fix);
  const std::string probe = out + "/.spore-write-test." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = errno;
  if (fd >= 0) {
    ::close(fd);
    ::unlink(probe.c_str());
  }
  SPORE_CHECK_KIND(ErrorKind::IOError, fd >= 0, "--out ", out,
                   " is not writable: ", std::strerror(err), fix);
}

}  // namespace

int train_job(const TrainArgs& a) {
  // Checks that need no data first: the device, the output folder.
  set_device(a.device);
  const std::string out = a.out.empty() ? "out/" + a.model : a.out;
  prepare_out_dir(out);
  set_seed(a.seed);
  if (a.threads > 0) set_num_threads(a.threads);
  // Graph mode by default, for every model: the optimizer's lr and step (Adam's bias correction)
  // are read by the compiled step from tensors, so one graph serves every step.
  set_context({.mode = mode_from_name(a.mode)});
  // The MNIST pipeline is cheap next to a step: producing batches on demand beats a prefetch
  // thread that preempts the training step's OpenMP threads on a 2-core machine.
  if (!is_cifar_model(a.model)) data::set_prefetch_size(0);
  const amp::Level amp_level = amp::parse_level(a.amp);  // bad values: errors naming the valid ones
  const DType amp_dtype = amp::parse_dtype(a.amp_dtype);
  if (a.model == "transformer") return train_transformer(a, out);
  if (a.model == "mlp-regression") {
    SPORE_CHECK(amp_level == amp::Level::O0, "--amp ", a.amp,
                " is not supported for mlp-regression (it trains in float32); drop --amp or train "
                "an image model (lenet, mlp, resnet18)");
    return train_regression(a, out);
  }
  SPORE_CHECK(!is_cifar_model(a.model) || a.data != TrainArgs{}.data, a.model,
              " trains on CIFAR-10: pass --data DIR, a folder with the binary version's "
              "data_batch_1.bin ... data_batch_5.bin and test_batch.bin "
              "(www.cs.toronto.edu/~kriz/cifar.html)");

  // Under spore launch / mpirun: data parallel, a shard and batch / size images per rank.
  DistInfo dist = setup_distributed(a.comm_timeout);
  const Mesh mesh = parse_parallel(a.parallel, dist.size);
  SPORE_CHECK(!mesh.search, "--parallel ", a.parallel,
              ": the strategy search (auto) is set up for the transformer job; give ", a.model,
              " its mesh as dp=D,mp=M");
  SPORE_CHECK(mesh.mp == 1 || a.model == "lenet", "--parallel ", a.parallel,
              ": operator-level sharding (mp) has "
              "strategies for lenet and the transformer; train ",
              a.model, " with dp (data parallel)");
  SPORE_CHECK(mesh.pp == 1 || a.model == "lenet", "--parallel ", a.parallel,
              ": pipeline stages (pp) are set up "
              "for lenet and the transformer; train lenet or use dp");
  SPORE_CHECK(mesh.pp <= 4, "--parallel ", a.parallel,
              ": lenet is cut into at most 4 pipeline stages (each needs a layer with weights)");
  // The checkpoint to resume from; with mp / pp / a sharded optimizer each rank reads its own (its
  // pieces, its stage, or its part of the optimizer state).
  const bool per_rank = mesh.mp > 1 || mesh.pp > 1 || (a.parallel_optimizer && dist.size > 1);
  const std::string per_rank_why =
      mesh.mp > 1 || mesh.pp > 1 ? "--parallel " + a.parallel : std::string("--parallel-optimizer");
  std::optional<io::Checkpoint> resume_ck;
  std::string resume_file;
  if (!a.resume.empty() && per_rank)
    resume_ck =
        load_resume_per_rank(a.resume, out, dist.rank, dist.size, per_rank_why, resume_file);
  else if (!a.resume.empty())
    resume_file = resume_file_of_rank(a.resume, out, false, 0, per_rank_why);
  if (!resume_file.empty() && !resume_ck) resume_ck = io::load_checkpoint(resume_file);
  if (a.resume == "auto" && dist.print)
    std::printf(resume_file.empty()
                    ? "--resume auto: no checkpoint in %s/checkpoints yet; starting from scratch\n"
                    : "--resume auto: continuing from %s\n",
                resume_file.empty() ? out.c_str() : resume_file.c_str());

  {
    parallel::AutoParallelContext ctx = parallel::get_auto_parallel_context();
    ctx.gradient_accumulation_steps = a.grad_accum;
    ctx.enable_parallel_optimizer = a.parallel_optimizer;
    if (mesh.pp > 1) {  // Model runs the pipeline (and its dp replicas) itself
      ctx.parallel_mode = parallel::ParallelMode::StandAlone;
      ctx.pipeline_stages = mesh.pp;
    }
    // Operator-level sharding: every rank reads the whole batch, keeps its piece. With pipeline
    // stages, each stage's layers are cut over its dp x mp ranks.
    if (mesh.mp > 1) {
      ctx.parallel_mode = parallel::ParallelMode::SemiAutoParallel;
      ctx.device_num = dist.size;
      ctx.dataset_strategy = {{mesh.dp, 1, 1, 1}, {mesh.dp}};
      ctx.full_batch = true;
    }
    parallel::set_auto_parallel_context(ctx);
  }
  // The data is cut over the replicas: with pipeline stages, the ranks of one replica read the
  // same batches.
  DistInfo data_dist = dist;
  if (mesh.pp > 1) data_dist = {int(dist.rank / mesh.pp), int(mesh.dp), dist.print};
  if (mesh.mp > 1) data_dist = {0, 1, dist.print};
  SPORE_CHECK(a.batch_size % data_dist.size == 0, "--batch-size ", a.batch_size,
              " (the global batch) must be a "
              "multiple of the number of data-parallel replicas, ",
              data_dist.size);
  int64_t train_rows = 0, test_rows = 0;  // what the data holds (after --limit), for the banner
  auto train_ds = classifier_data(a.model, a.data, "train", a.limit, true,
                                  a.batch_size / data_dist.size, data_dist, &train_rows);
  auto test_ds = classifier_data(a.model, a.data, "test", a.eval_limit, false, 256, {}, &test_rows);
  nn::CellPtr net = mesh.pp > 1 ? models::lenet5_sequential(mesh.pp) : make_classifier(a.model);
  if (mesh.mp > 1 && mesh.pp > 1) {  // LeNet5::shard's cuts on the sequential network's layers
    const auto& c = std::static_pointer_cast<nn::SequentialCell>(net)->cells();
    std::static_pointer_cast<nn::Conv2d>(c[0])->shard({{mesh.dp, 1, 1, 1}, {mesh.mp, 1, 1, 1}});
    std::static_pointer_cast<nn::Conv2d>(c[3])->shard(
        {{mesh.dp, mesh.mp, 1, 1}, {1, mesh.mp, 1, 1}});
    std::static_pointer_cast<nn::Dense>(c[7])->shard({{mesh.dp, 1}, {mesh.mp, 1}});
    std::static_pointer_cast<nn::Dense>(c[9])->shard({{mesh.dp, mesh.mp}, {1, mesh.mp}});
  } else if (mesh.mp > 1) {
    std::static_pointer_cast<models::LeNet5>(net)->shard(mesh.dp, mesh.mp);  // before the optimizer
  }
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), a.lr, a.momentum);
  // data parallel: broadcasts rank 0's weights. --amp: MindSpore's Model(amp_level=...).
  train::Model model(net, loss, opt, {"accuracy"}, nullptr, amp::level_name(amp_level), nullptr,
                     std::nullopt, amp_dtype);
  auto loss_scale_cell =
      std::dynamic_pointer_cast<train::TrainOneStepWithLossScaleCell>(model.train_network());
  auto dynamic_scale = loss_scale_cell ? std::dynamic_pointer_cast<amp::DynamicLossScaleManager>(
                                             loss_scale_cell->loss_scale_manager())
                                       : nullptr;
  int64_t initial_epoch = 0;
  if (resume_ck) {
    // A pipeline rank restores its stage and the stage's optimizer; a sharded one its pieces.
    if (per_rank) check_rank_checkpoint(resume_file, *resume_ck, dist, mesh, model);
    initial_epoch =
        resume_from(resume_file, *resume_ck,
                    mesh.pp > 1 ? model.held_parameters() : net->parameters_and_buffers(),
                    *model.optimizer(), train_ds, a.epochs, a.resume_partial);
    if (dynamic_scale)
      restore_loss_scale(resume_file, *resume_ck, *dynamic_scale, a.resume_partial);
  }

  if (dist.size > 1 && dist.print && mesh.mp > 1 && mesh.pp > 1)
    std::printf(
        "pipeline x semi_auto_parallel: %lld stages, each cut over dp=%lld x mp=%lld ranks; every "
        "rank reads the global batch of %lld in %lld micro-batches (1F1B)\n",
        (long long)mesh.pp, (long long)mesh.dp, (long long)mesh.mp, (long long)a.batch_size,
        (long long)(2 * mesh.pp));
  else if (dist.size > 1 && dist.print && mesh.mp > 1)
    std::printf(
        "semi_auto_parallel: %d ranks as dp=%lld x mp=%lld (conv1, fc1 cut on outputs; conv2, fc2 "
        "on "
        "inputs); every rank reads the global batch of %lld and keeps its piece\n",
        dist.size, (long long)mesh.dp, (long long)mesh.mp, (long long)a.batch_size);
  else if (dist.size > 1 && dist.print && mesh.pp > 1)
    std::printf(
        "pipeline parallel: %lld stages x %lld replicas, %lld images per replica per step in %lld "
        "micro-batches (1F1B)\n",
        (long long)mesh.pp, (long long)mesh.dp, (long long)(a.batch_size / mesh.dp),
        (long long)(2 * mesh.pp));
  else if (dist.size > 1 && dist.print)
    std::printf("data parallel: %d ranks, rank %d printing, %lld images per rank per step\n",
                dist.size, dist.rank, (long long)(a.batch_size / dist.size));
  if (dist.print)
    std::printf(
        "training %s on %s (%s): %lld train / %lld test images, batch %lld, "
        "Momentum(lr=%g, momentum=%g), %s mode, %d threads, %lld parameters\n",
        a.model.c_str(), data_name(a.model), a.data.c_str(), (long long)train_rows,
        (long long)test_rows, (long long)a.batch_size, a.lr, a.momentum, a.mode.c_str(),
        get_num_threads(), (long long)count_params(*net));
  if (dist.print && a.grad_accum > 1)
    std::printf("gradient accumulation: %lld batches per update (effective batch %lld)\n",
                (long long)a.grad_accum, (long long)(a.grad_accum * a.batch_size));
  if (dist.print && a.parallel_optimizer && mesh.mp > 1 && dist.size > 1) {
    std::printf(
        "optimizer sharding: each piece's optimizer state is cut over the ranks holding that "
        "piece (1/%lld of a cut layer's, 1/%lld of a whole one's)\n",
        (long long)mesh.dp, (long long)(mesh.dp * mesh.mp));
  } else if (dist.print && a.parallel_optimizer) {
    // With pipeline stages a stage's optimizer state is cut over that stage's replicas.
    const int64_t over = mesh.pp > 1 ? mesh.dp : dist.size;
    const std::string whose =
        mesh.pp > 1 ? "its pipeline stage's optimizer state (the stage's replicas share it)"
                    : "the optimizer state";
    std::printf("optimizer sharding: %s\n",
                over > 1 ? ("each of the " + std::to_string(dist.size) + " ranks keeps 1/" +
                            std::to_string(over) + " of " + whose)
                               .c_str()
                         : "off (no data-parallel replicas to shard with)");
  }
  if (dist.print && amp_level != amp::Level::O0) {
    std::printf("mixed precision: %s, %s", amp::level_name(amp_level), dtype_name(amp_dtype));
    if (loss_scale_cell)
      std::printf(", %s (initial scale %g)", loss_scale_cell->loss_scale_manager()->name().c_str(),
                  loss_scale_cell->loss_scale());
    std::printf("\n");
  }
  if (a.verbose) std::cout << net->str() << "\n";
  std::fflush(stdout);

  // Rank 0 writes the outputs; other ranks print (--all-ranks-print) into out/rank<r>/ only.
  const std::string rank_out = dist.rank == 0 ? out : out + "/rank" + std::to_string(dist.rank);
  if (dist.print) fs::create_directories(rank_out);
  // One run per directory: a second run into it stops here, naming this one.
  std::optional<io::RunLock> run_lock;
  if (dist.print) run_lock.emplace(rank_out);
  std::unique_ptr<io::MetricsWriter> writer_ptr;
  // The run directory's metrics are appended across restarts, each row tagged with this run.
  if (dist.print)
    writer_ptr = std::make_unique<io::MetricsWriter>(
        rank_out + "/metrics",
        io::RunTag{io::new_run_id(),
                   resume_file.empty() ? "" : fs::path(resume_file).filename().string()});
  if (dist.print) write_run_json(a, rank_out);
  train::CheckpointConfig ckpt_config{.save_checkpoint_steps = 0,
                                      .save_checkpoint_epochs = 1,
                                      .keep_checkpoint_max = 3,
                                      .one_family = true};
  if (dynamic_scale)  // what --resume needs to continue the scale exactly
    ckpt_config.append_info = [dynamic_scale] {
      std::ostringstream scale;
      scale << std::setprecision(17) << dynamic_scale->get_loss_scale();
      return std::map<std::string, std::string>{
          {"loss_scale", scale.str()},
          {"loss_scale_good_steps", std::to_string(dynamic_scale->good_steps())}};
    };
  auto ckpt = std::make_shared<train::ModelCheckpoint>(a.model, out + "/checkpoints", ckpt_config);
  train::Callbacks callbacks;
  if (dist.print)
    callbacks = {train::ProgressBar({.log_every = 200, .replicas = data_dist.size}),
                 epoch_logger(*writer_ptr, "accuracy",
                              loss_scale_cell ? std::function<double()>([loss_scale_cell] {
                                return loss_scale_cell->loss_scale();
                              })
                                              : nullptr,
                              data_dist.size)};
  if (dist.rank == 0 || per_rank)
    callbacks.push_back(ckpt);  // sharded: each rank writes its pieces; pipeline: its stage;
                                // ZeRO-1: its part of the optimizer state
  if (auto fault = fault_injector(dist.rank))
    callbacks.push_back(train::LambdaCallback(
        {.on_step_end = [fault](train::RunContext& c) { fault(c.global_step); }}));
  // --verbose, Graph mode: the statistics of the compiled step with the largest planned arena
  // (the full batch; the last, smaller batch of an epoch is a second signature).
  JitStats graph_stats;
  if (a.verbose && model.train_network())
    callbacks.push_back(
        train::LambdaCallback({.on_step_end = [&graph_stats, &model](train::RunContext&) {
          const JitStats js = model.train_network()->jit_stats();
          if (js.planned_peak_bytes >= graph_stats.planned_peak_bytes) graph_stats = js;
          graph_stats.traces = js.traces, graph_stats.cache_hits = js.cache_hits,
          graph_stats.cache_size = js.cache_size;
        }}));
  model.fit(a.epochs, train_ds, test_ds, callbacks, 1, initial_epoch);
  // The final checkpoint holds whole tensors: with sharded layers every rank takes part in the
  // gathers.
  // With pipeline stages the stages send theirs to rank 0.
  io::NamedTensors final_tensors = model.gather_parameters();
  if (mesh.mp > 1 && mesh.pp == 1)  // (gather_parameters makes a stage's pieces whole itself)
    for (auto& [name, t] : final_tensors) t = parallel::gather_whole(t);
  if (!dist.print) {  // the other ranks' outputs are rank 0's
    parallel::release();
    return 0;
  }
  io::MetricsWriter& writer = *writer_ptr;

  const auto final_metrics = io::latest_history(io::read_metrics_jsonl(writer.jsonl_path()));
  double acc = NAN;
  if (!final_metrics.empty())
    for (const auto& [k, v] : final_metrics.back())
      if (k == "accuracy") acc = v;
  const std::string path = rank_out + "/" + a.model + ".safetensors";
  io::save_checkpoint(final_tensors, path,
                      {{"model", a.model},
                       {"epochs", std::to_string(a.epochs)},
                       {"test_accuracy", std::to_string(acc)}});
  write_curves(writer, rank_out + "/curves.png", a.model + " on " + data_name(a.model), "accuracy");
  if (a.verbose) {
    const AllocatorStats s = cpu_allocator().stats();
    std::printf(
        "memory: peak %.1f MiB in use, %.1f MiB cached, %llu allocations (%.1f%% cache hits)\n",
        double(s.peak_bytes_in_use) / 1048576.0, double(s.bytes_cached) / 1048576.0,
        (unsigned long long)s.num_allocs,
        100.0 * double(s.cache_hits) / double(std::max<uint64_t>(s.num_allocs, 1)));
    const JitStats& js = graph_stats;
    if (js.traces > 0)
      std::printf(
          "compiled train step: %zu nodes traced, %zu after the passes; planned peak %.1f MiB "
          "(%.1f MiB without reuse); %lld compilations, %lld cache hits, %zu cached\n",
          js.nodes_traced, js.nodes, double(js.planned_peak_bytes) / 1048576.0,
          double(js.unplanned_bytes) / 1048576.0, (long long)js.traces, (long long)js.cache_hits,
          js.cache_size);
  }
  std::printf(
      "final test accuracy: %.4f\noutputs: %s (checkpoint), %s/metrics.jsonl and .csv, "
      "%s/curves.png, "
      "%s/checkpoints/\n",
      acc, path.c_str(), out.c_str(), out.c_str(), out.c_str());
  parallel::release();
  return 0;
}

int train(const TrainArgs& a) {
  if (!a.dump_ir.empty()) {  // under spore launch each rank dumps its own graphs (rank<r>/)
    const auto [rank, size] = parallel::launcher_rank_size();
    set_context(
        {.save_graphs = true,
         .save_graphs_path = size > 1 ? a.dump_ir + "/rank" + std::to_string(rank) : a.dump_ir});
  }
  if (a.model.rfind("yolov5", 0) == 0) {
    if (a.profile.empty()) return train_detector(a);
    Profiler prof({.output_path = a.profile});
    const int rc = train_detector(a);
    std::cout << prof.analyse();
    return rc;
  }
  if (a.profile.empty()) return train_job(a);
  Profiler prof({.output_path = a.profile});
  const int rc = train_job(a);
  std::cout << prof.analyse();
  return rc;
}

int eval(const EvalArgs& a) {
  if (a.model.rfind("yolov5", 0) == 0) return eval_detector(a);
  set_device(a.device);
  nn::CellPtr net = make_classifier(a.model);
  io::Checkpoint ckpt = io::load_checkpoint(a.ckpt);
  // A MindSpore .ckpt names parameters as MindSpore's model zoo does.
  if (ckpt.format == io::CheckpointFormat::MindSpore)
    ckpt.tensors = models::from_mindspore_names(a.model, ckpt.tensors);
  // As MindSpore's load_param_into_net: the network's parameters are loaded; what the checkpoint
  // has beyond them (the optimizer's moments.* in an epoch checkpoint) is training state, skipped
  // and reported. A parameter the checkpoint lacks, or one of another shape, is an error.
  io::LoadReport rep = io::load_param_into_net(*net, ckpt, /*strict=*/false);
  const bool fits =
      rep.missing.empty() && rep.mismatched.empty() && (!a.strict_load || rep.unexpected.empty());
  SPORE_CHECK(fits, "checkpoint ", a.ckpt, " does not fit the ", a.model, " network",
              a.strict_load ? " (--strict-load)" : "", ": ", rep.summary(),
              "; pass a checkpoint written by `spore train ", a.model, "`",
              a.strict_load && rep.missing.empty() && rep.mismatched.empty()
                  ? " or drop --strict-load"
                  : "");
  if (!rep.unexpected.empty())
    std::printf(
        "loaded %zu parameters from %s; skipped %zu entries the network does not have (%s): "
        "training state, "
        "not needed to evaluate (--strict-load makes them an error)\n",
        net->parameters_and_buffers().size(), a.ckpt.c_str(), rep.unexpected.size(),
        io::summarize_names(rep.unexpected).c_str());
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  train::Model model(net, loss, nullptr, {"accuracy", "loss"});
  auto res = model.eval(classifier_data(a.model, a.data, "test", a.limit, false, a.batch_size));
  std::printf("%s on %s test (%s): accuracy %.4f, loss %.4f\n", a.model.c_str(), data_name(a.model),
              a.ckpt.c_str(), res["accuracy"], res["loss"]);
  return 0;
}

}  // namespace spore::cli
