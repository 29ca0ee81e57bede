// Model::train / eval / fit / predict and the callbacks, on a tiny linear regression.
#include "spore/train/model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "spore/io/checkpoint.h"
#include "spore/optim/optimizers.h"
#include "train/train_util.h"

using namespace spore;
using namespace spore::train;
using spore::test::Linear;
using spore::test::MSELossCell;
namespace fs = std::filesystem;

namespace {

struct Fixture {
  std::shared_ptr<Linear> net = std::make_shared<Linear>(3, 1);
  Model model;
  explicit Fixture(double lr = 0.5, std::vector<std::string> metrics = {"mse", "loss"})
      : model(net, std::make_shared<MSELossCell>(), optim::SGD(net->trainable_params(), lr),
              std::move(metrics)) {}
};

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::path(SPORE_BINARY_DIR) / "test_tmp" / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<std::string> files_in(const fs::path& d) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(d)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(Model, TrainLossFallsAndHistory) {
  Fixture f;
  auto ds = spore::test::regression_dataset(32, 8);  // 4 steps per epoch
  auto history = std::make_shared<History>();
  std::ostringstream log;
  f.model.train(6, ds, {history, LossMonitor(2, &log)});
  ASSERT_EQ(history->epochs(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  const auto& loss = (*history)["loss"];
  EXPECT_LT(loss.back(), loss.front() * 0.2) << loss.front() << " -> " << loss.back();
  EXPECT_EQ(f.model.optimizer()->global_step(), 24);
  // LossMonitor: MindSpore's line, every 2 steps.
  std::regex line(R"(epoch: 1 step: 2, loss is [0-9.e-]+\n)");
  const std::string text = log.str();
  EXPECT_TRUE(std::regex_search(text, line)) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 12);
  EXPECT_THROW((*history)["accuracy"], Error);
}

TEST(Model, EvalAndPredict) {
  Fixture f;
  auto ds = spore::test::regression_dataset(16, 8);
  auto before = f.model.eval(ds);
  ASSERT_EQ(before.count("mse"), 1u);
  ASSERT_EQ(before.count("loss"), 1u);
  // MSE (sum over samples / samples) equals the mean MSE loss for a (N, 1) output.
  EXPECT_NEAR(before["mse"], before["loss"], 1e-5);
  f.model.train(5, spore::test::regression_dataset(32, 8));
  auto after = f.model.eval(ds);
  EXPECT_LT(after["mse"], before["mse"]);
  Tensor y = f.model.predict(spore::test::regression_data(5).x);
  EXPECT_EQ(y.shape(), (Shape{5, 1}));
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(f.net->training());  // predict/eval restore the mode
}

TEST(Model, Errors) {
  auto net = std::make_shared<Linear>(3, 1);
  Model no_opt(net, std::make_shared<MSELossCell>());
  auto ds = spore::test::regression_dataset(8, 4);
  EXPECT_THROW(no_opt.train(1, ds), Error);
  EXPECT_THROW(no_opt.eval(ds), Error);  // no metrics
  EXPECT_THROW(Model(net, nullptr, nullptr, {"nope"}), Error);
  Fixture f;
  EXPECT_THROW(f.model.train(2, ds, {}, 2), Error);  // initial_epoch must be < epoch
}

TEST(Model, InitialEpochAndStop) {
  Fixture f;
  auto ds = spore::test::regression_dataset(32, 8);
  std::vector<std::pair<int64_t, int64_t>> seen;  // (epoch, global_step)
  LambdaCallback cb({.on_step_end = [&](RunContext& c) {
    seen.emplace_back(c.epoch, c.global_step);
    if (c.epoch == 3 && c.step == 2) c.request_stop();
  }});
  f.model.train(5, ds, {cb}, 1);
  ASSERT_EQ(seen.size(), 6u);  // epoch 2 (4 steps) + 2 steps of epoch 3
  EXPECT_EQ(seen.front(), (std::pair<int64_t, int64_t>{2, 5}));
  EXPECT_EQ(seen.back(), (std::pair<int64_t, int64_t>{3, 10}));
}

// MindSpore's dataset_sink_mode: the steps of a sink run back to back and the step callbacks see
// the sink as one step (begin before it at the old step count, end after it at the new one).
TEST(Model, SinkMode) {
  auto ds = spore::test::regression_dataset(32, 8);  // 4 steps per epoch
  using Seen = std::vector<std::pair<int64_t, int64_t>>;
  auto recorder = [](Seen& begins, Seen& ends, std::vector<int64_t>& per_epoch) {
    return LambdaCallback(
        {.on_step_begin = [&](RunContext& c) { begins.emplace_back(c.epoch, c.global_step); },
         .on_step_end = [&](RunContext& c) { ends.emplace_back(c.epoch, c.global_step); },
         .on_epoch_end = [&](RunContext& c) { per_epoch.push_back(c.steps_per_epoch); }});
  };
  Fixture plain, whole, sized;
  Seen b0, e0, b1, e1, b2, e2;
  std::vector<int64_t> n0, n1, n2;
  plain.model.train(2, ds, {recorder(b0, e0, n0)});
  whole.model.train(2, ds, {recorder(b1, e1, n1)}, 0, -1);
  EXPECT_EQ(b0.size(), 8u);
  EXPECT_EQ(b1, (Seen{{1, 0}, {2, 4}}));
  EXPECT_EQ(e1, (Seen{{1, 4}, {2, 8}}));
  EXPECT_EQ(n1, (std::vector<int64_t>{4, 4}));
  // The same steps in the same order: the same weights.
  const auto wp = plain.net->trainable_params(), ww = whole.net->trainable_params();
  for (size_t i = 0; i < wp.size(); ++i)
    EXPECT_EQ(wp[i].to_vector<float>(), ww[i].to_vector<float>()) << i;
  // sink_size 3: epochs of 3 steps from one iterator that restarts the dataset when it runs out.
  sized.model.train(4, ds, {recorder(b2, e2, n2)}, 0, 3);
  EXPECT_EQ(e2, (Seen{{1, 3}, {2, 6}, {3, 9}, {4, 12}}));
  EXPECT_EQ(n2, (std::vector<int64_t>{3, 3, 3, 3}));
  EXPECT_EQ(sized.model.optimizer()->global_step(), 12);
  Fixture three_epochs;
  three_epochs.model.train(3, ds);  // 12 steps: the same rows in the same order
  const auto w3 = three_epochs.net->trainable_params(), ws = sized.net->trainable_params();
  for (size_t i = 0; i < w3.size(); ++i)
    EXPECT_EQ(w3[i].to_vector<float>(), ws[i].to_vector<float>()) << i;
  EXPECT_THROW(plain.model.train(1, ds, {}, 0, -2), Error);
}

TEST(Callbacks, LambdaHookOrder) {
  Fixture f;
  auto train_ds = spore::test::regression_dataset(8, 4);  // 2 steps
  auto valid_ds = spore::test::regression_dataset(4, 4);  // 1 step
  std::vector<std::string> order;
  auto rec = [&](const char* s) { return [&order, s](RunContext&) { order.push_back(s); }; };
  LambdaCallback cb({.on_train_begin = rec("train_begin"),
                     .on_epoch_begin = rec("epoch_begin"),
                     .on_step_begin = rec("step_begin"),
                     .on_step_end = rec("step_end"),
                     .on_epoch_end = rec("epoch_end"),
                     .on_train_end = rec("train_end"),
                     .on_eval_begin = rec("eval_begin"),
                     .on_eval_step_begin = rec("eval_step_begin"),
                     .on_eval_step_end = rec("eval_step_end"),
                     .on_eval_end = rec("eval_end")});
  f.model.fit(2, train_ds, valid_ds, {cb}, 2);  // validation after epoch 2 only
  std::vector<std::string> want = {
      "train_begin", "epoch_begin",     "step_begin",    "step_end", "step_begin", "step_end",
      "epoch_end",   "epoch_begin",     "step_begin",    "step_end", "step_begin", "step_end",
      "eval_begin",  "eval_step_begin", "eval_step_end", "eval_end", "epoch_end",  "train_end"};
  EXPECT_EQ(order, want);
}

TEST(Callbacks, FitPutsEvalResultsInContext) {
  Fixture f;
  auto history = std::make_shared<History>();
  std::map<std::string, double> at_end;
  LambdaCallback cb({.on_epoch_end = [&](RunContext& c) { at_end = c.metrics; }});
  f.model.fit(3, spore::test::regression_dataset(16, 8), spore::test::regression_dataset(8, 8),
              {history, cb});
  EXPECT_EQ(at_end.count("eval_loss"), 1u);
  EXPECT_EQ(at_end.count("mse"), 1u);
  EXPECT_EQ((*history)["eval_loss"].size(), 3u);
  EXPECT_NEAR(at_end["eval_loss"], at_end["loss"], 1e-6);
}

TEST(Callbacks, EarlyStoppingStops) {
  // lr 0: the validation loss never improves after epoch 1; patience 2 stops after epoch 3.
  Fixture f(0.0);
  auto es = std::make_shared<EarlyStopping>("eval_loss", 2);
  auto history = std::make_shared<History>();
  f.model.fit(10, spore::test::regression_dataset(16, 8), spore::test::regression_dataset(8, 8),
              {es, history});
  EXPECT_EQ(es->stopped_epoch(), 3);
  EXPECT_EQ(es->best_epoch(), 1);
  EXPECT_EQ(history->epochs().size(), 3u);
  // A monitor the results lack is an error naming what is there.
  Fixture g;
  try {
    g.model.fit(2, spore::test::regression_dataset(8, 8), spore::test::regression_dataset(8, 8),
                {EarlyStopping("accuracy", 1)});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'eval_loss'"), std::string::npos) << e.what();
  }
  // Monitoring the training loss with a working optimizer keeps improving: no stop.
  Fixture h;
  auto es2 =
      std::make_shared<EarlyStopping>(EarlyStoppingOptions{.monitor = "loss", .patience = 1});
  h.model.train(4, spore::test::regression_dataset(16, 8), {es2});
  EXPECT_EQ(es2->stopped_epoch(), 0);
}

TEST(Callbacks, ModelCheckpointKeepsNewest) {
  fs::path dir = fresh_dir("ckpt_keep");
  Fixture f;
  auto ckpt = std::make_shared<ModelCheckpoint>(
      "CKP", dir.string(), CheckpointConfig{.save_checkpoint_steps = 1, .keep_checkpoint_max = 2});
  f.model.train(2, spore::test::regression_dataset(24, 8), {ckpt});  // 3 steps per epoch
  EXPECT_EQ(files_in(dir),
            (std::vector<std::string>{"CKP-2_2.safetensors", "CKP-2_3.safetensors"}));
  EXPECT_EQ(ckpt->latest_checkpoint(), (dir / "CKP-2_3.safetensors").string());
  auto loaded = io::load_checkpoint(ckpt->latest_checkpoint());
  EXPECT_NE(loaded.find("weight"), nullptr);
  EXPECT_NE(loaded.find("bias"), nullptr);
  EXPECT_EQ(loaded.metadata.at("global_step"), "6");
  EXPECT_EQ(loaded.metadata.at("epoch"), "2");
  // The saved weight is the trained one.
  EXPECT_EQ(loaded.find("weight")->to_vector<float>(),
            f.net->parameter("weight").to_vector<float>());
  // A second run in the same directory takes a fresh prefix instead of overwriting.
  auto again = std::make_shared<ModelCheckpoint>(
      "CKP", dir.string(),
      CheckpointConfig{.save_checkpoint_steps = 0, .save_checkpoint_epochs = 1});
  f.model.train(1, spore::test::regression_dataset(24, 8), {again});
  EXPECT_EQ(again->prefix(), "CKP_1");
  EXPECT_TRUE(fs::exists(dir / "CKP_1-1_3.safetensors"));
}

// A run killed mid-save leaves "<ckpt>.safetensors.tmp.<pid>" or "latest.tmp.<pid>"; the next run
// removes those of dead processes and leaves a live writer's alone.
TEST(Callbacks, ModelCheckpointRemovesDeadRunsTempFiles) {
  fs::path dir = fresh_dir("ckpt_stale_tmp");
  const std::string dead = "999999999",
                    alive = std::to_string(::getppid());  // a live process that is not this writer
  for (const std::string& n :
       {"CKP-1_3.safetensors.tmp." + dead, "latest.tmp." + dead, "CKP-1_3.safetensors.tmp." + alive,
        "latest.tmp." + alive, std::string("notes.tmp.1")})
    std::ofstream(dir / n) << "partial";
  Fixture f;
  auto ckpt = std::make_shared<ModelCheckpoint>(
      "CKP", dir.string(),
      CheckpointConfig{
          .save_checkpoint_steps = 0, .save_checkpoint_epochs = 1, .one_family = true});
  f.model.train(1, spore::test::regression_dataset(24, 8), {ckpt});
  EXPECT_EQ(files_in(dir), (std::vector<std::string>{
                               "CKP-1_3.safetensors", "CKP-1_3.safetensors.tmp." + alive, "latest",
                               "latest.tmp." + alive, std::string("notes.tmp.1")}));
}

TEST(Callbacks, ProgressBarPlainLines) {
  Fixture f;
  std::ostringstream out;
  ProgressBar bar({.stream = &out, .tty = false, .log_every = 2});
  f.model.train(1, spore::test::regression_dataset(40, 8), {bar});  // 5 steps
  std::string s = out.str();
  std::regex want(
      R"(^epoch 1/1 step 2/5 loss [0-9.]+ img/s [0-9.]+ eta [0-9]+s\n)"
      R"(epoch 1/1 step 4/5 loss [0-9.]+ img/s [0-9.]+ eta [0-9]+s\n)"
      R"(epoch 1/1 done 5/5 loss [0-9.]+ mean_loss [0-9.]+ img/s [0-9.]+ time [0-9.]+s\n$)");
  EXPECT_TRUE(std::regex_match(s, want)) << s;
}

TEST(Callbacks, ProgressBarTerminal) {
  Fixture f;
  std::ostringstream out;
  ProgressBar bar({.stream = &out, .tty = true, .min_interval = 0.0, .width = 10});
  f.model.fit(1, spore::test::regression_dataset(16, 8), spore::test::regression_dataset(8, 8),
              {bar});
  std::string s = out.str();
  EXPECT_EQ(s.front(), '\r');
  EXPECT_EQ(s.back(), '\n');
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 1);
  EXPECT_NE(s.find("epoch 1/1  2/2 [==========] loss"), std::string::npos) << s;
  EXPECT_NE(s.find("eval_loss"), std::string::npos) << s;
  EXPECT_NE(s.find("ETA"), std::string::npos) << s;
  EXPECT_EQ(format_duration(75), "01:15");
  EXPECT_EQ(format_duration(3725), "1:02:05");
}

TEST(Callbacks, TimeMonitorAndInvalidLoss) {
  Fixture f;
  std::ostringstream out;
  f.model.train(1, spore::test::regression_dataset(16, 8), {TimeMonitor(&out)});
  EXPECT_TRUE(std::regex_match(
      out.str(), std::regex(R"(epoch time: [0-9.]+ ms, per step time: [0-9.]+ ms\n)")))
      << out.str();
  RunContext ctx;
  ctx.loss = std::nan("");
  LossMonitor lm;
  EXPECT_THROW(lm.on_step_end(ctx), Error);
}

// The epoch's data wait and device idle time (RunContext): a source that takes 30 ms per row
// (batch 1, one worker) makes the loop wait for data; the device (the CPU here, timed by its
// events) is idle at least that long; both are shares of the epoch's training time. In a sink
// too. With rows already in memory the wait is a small share.
TEST(Model, EpochReportsDataWaitAndDeviceIdle) {
  constexpr int kRows = 6;
  constexpr double kSleep = 0.03;
  auto slow = data::GeneratorDataset(
      [](int64_t i) -> data::Row {
        usleep(useconds_t(kSleep * 1e6));
        return {full({1, 3}, double(i)), full({1, 1}, 1.0)};
      },
      kRows, {"x", "y"});
  for (int64_t sink_size : {0, -1}) {
    SCOPED_TRACE(sink_size ? "sink" : "no sink");
    Fixture f;
    std::vector<RunContext> seen;
    f.model.train(2, slow,
                  {LambdaCallback({.on_epoch_end = [&](RunContext& c) { seen.push_back(c); }})}, 0,
                  sink_size);
    ASSERT_EQ(seen.size(), 2u);
    for (const RunContext& c : seen) {
      // The rows take kRows * 30 ms to make; prefetching hides at most the few fast steps.
      EXPECT_GE(c.epoch_data_wait, 0.5 * kRows * kSleep);
      EXPECT_GE(c.epoch_device_idle, 0.9 * c.epoch_data_wait);
      EXPECT_LE(c.epoch_data_wait, c.epoch_train_time);
      EXPECT_LE(c.epoch_device_idle, c.epoch_train_time);
      EXPECT_LE(c.epoch_train_time, c.epoch_elapsed + 1e-9);
    }
  }
  Fixture fast;
  auto ds = spore::test::regression_dataset(32, 8);
  std::vector<RunContext> seen;
  fast.model.train(1, ds,
                   {LambdaCallback({.on_epoch_end = [&](RunContext& c) { seen.push_back(c); }})});
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_GT(seen[0].epoch_train_time, 0);
  EXPECT_LT(seen[0].epoch_data_wait, seen[0].epoch_train_time);
  EXPECT_GE(seen[0].epoch_device_idle, 0);
}
