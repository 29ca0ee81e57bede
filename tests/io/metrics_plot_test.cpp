// MetricsWriter (JSON lines + CSV) and the training-curve PNG.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "spore/error.h"
#include "spore/io/metrics.h"
#include "spore/io/plot.h"

using namespace spore;

namespace {
std::string temp_dir() {
  char tmpl[] = "/tmp/spore_plot_XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? std::string(d) : std::string("/tmp");
}
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
uint32_t be32(const std::string& s, size_t at) {
  return uint32_t(uint8_t(s[at])) << 24 | uint32_t(uint8_t(s[at + 1])) << 16 |
         uint32_t(uint8_t(s[at + 2])) << 8 | uint32_t(uint8_t(s[at + 3]));
}
}  // namespace

TEST(MetricsWriter, JsonLinesAndCsv) {
  const std::string prefix = temp_dir() + "/metrics";
  {
    io::MetricsWriter w(prefix);
    w.write(1, {{"loss", 0.5}, {"accuracy", 0.75}});
    w.write(2, {{"loss", 0.25}, {"accuracy", 0.875}});
    EXPECT_THROW(w.write(3, {{"new_metric", 1}}), Error);
  }
  EXPECT_EQ(slurp(prefix + ".jsonl"),
            "{\"epoch\":1,\"loss\":0.5,\"accuracy\":0.75}\n"
            "{\"epoch\":2,\"loss\":0.25,\"accuracy\":0.875}\n");
  EXPECT_EQ(slurp(prefix + ".csv"), "epoch,loss,accuracy\n1,0.5,0.75\n2,0.25,0.875\n");
  {
    io::MetricsWriter w(prefix, /*append=*/true);
    w.write(3, {{"accuracy", 0.9}, {"loss", 0.1}});  // columns keep the file's order
  }
  EXPECT_EQ(slurp(prefix + ".csv"), "epoch,loss,accuracy\n1,0.5,0.75\n2,0.25,0.875\n3,0.1,0.9\n");
  const auto recs = io::read_metrics_jsonl(prefix + ".jsonl");
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[2][0], (std::pair<std::string, double>{"epoch", 3}));
  auto curves = io::curves_from_metrics(recs);
  ASSERT_EQ(curves.loss.size(), 1u);
  EXPECT_EQ(curves.loss[0].values, (std::vector<double>{0.5, 0.25, 0.1}));
  ASSERT_EQ(curves.metric.size(), 1u);
  EXPECT_EQ(curves.metric[0].epochs, (std::vector<double>{1, 2, 3}));
}

// A run directory's files are appended across restarts, each row tagged with its run; the history
// is each epoch's last row up to the last row's epoch; files with other columns are kept aside.
TEST(MetricsWriter, RunDirectoryAppendsTaggedRowsAndKeepsOtherColumnsAside) {
  const std::string prefix = temp_dir() + "/metrics";
  {
    io::MetricsWriter w(prefix, io::RunTag{"r1", ""});
    w.write(1, {{"loss", 0.5}});
    w.write(2, {{"loss", 0.4}});
    w.write(3, {{"loss", 0.3}});  // run 1 was killed after epoch 3's row
  }
  {
    io::MetricsWriter w(prefix, io::RunTag{"r2", "lenet-2_4.safetensors"});  // resumed at 2
    w.write(3, {{"loss", 0.25}});
  }
  EXPECT_EQ(slurp(prefix + ".csv"),
            "epoch,run,resumed_from,loss\n1,r1,,0.5\n2,r1,,0.4\n3,r1,,0.3\n"
            "3,r2,lenet-2_4.safetensors,0.25\n");
  EXPECT_NE(slurp(prefix + ".jsonl")
                .find("{\"epoch\":3,\"run\":\"r2\",\"resumed_from\":\"lenet-2_4.safetensors\","
                      "\"loss\":0.25}"),
            std::string::npos);
  auto history = io::latest_history(io::read_metrics_jsonl(prefix + ".jsonl"));
  ASSERT_EQ(history.size(), 3u);
  EXPECT_EQ(history[2],
            (io::MetricValues{{"epoch", 3}, {"loss", 0.25}}));  // strings are not metrics
  {
    io::MetricsWriter w(prefix, io::RunTag{"r3", ""});  // a fresh restart: epoch 1 again
    w.write(1, {{"loss", 0.45}});
  }
  history = io::latest_history(io::read_metrics_jsonl(prefix + ".jsonl"));
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0], (io::MetricValues{{"epoch", 1}, {"loss", 0.45}}));
  EXPECT_EQ(io::read_metrics_jsonl(prefix + ".jsonl").size(), 5u) << "every run's rows are kept";
  {
    io::MetricsWriter w(prefix, io::RunTag{"r4", ""});  // other columns: the old files kept aside
    w.write(1, {{"loss", 0.5}, {"accuracy", 0.7}});
  }
  EXPECT_EQ(io::read_metrics_jsonl(prefix + ".1.jsonl").size(), 5u);
  EXPECT_EQ(slurp(prefix + ".csv"), "epoch,run,resumed_from,loss,accuracy\n1,r4,,0.5,0.7\n");
  EXPECT_EQ(io::new_run_id().size(),
            std::string("20261205T093000Z-").size() + std::to_string(::getpid()).size());
}

TEST(Plot, WritesDeterministicPng) {
  const std::string dir = temp_dir();
  io::TrainingCurves c;
  c.title = "LeNet5 on Fashion-MNIST";
  c.loss = {{"train loss", {2.3, 1.1, 0.7, 0.55, 0.48}, {}},
            {"eval loss", {1.9, 0.9, 0.68, 0.6, NAN}, {}}};
  c.metric = {{"eval accuracy", {0.42, 0.71, 0.80, 0.84, 0.86}, {}}};
  io::save_training_curves(dir + "/a.png", c);
  io::save_training_curves(dir + "/b.png", c);
  const std::string a = slurp(dir + "/a.png");
  ASSERT_GT(a.size(), 2000u);
  EXPECT_EQ(a.substr(1, 3), "PNG");
  EXPECT_EQ(be32(a, 16), 1200u);  // IHDR width, height
  EXPECT_EQ(be32(a, 20), 500u);
  EXPECT_EQ(a, slurp(dir + "/b.png"));
  // One point, one panel, and explicit epochs also work.
  io::TrainingCurves one;
  one.loss = {{"train", {0.3}, {}}};
  io::save_training_curves(dir + "/one.png", one);
  io::TrainingCurves xs;
  xs.metric = {{"acc", {0.1, 0.2}, {5, 10}}};
  io::save_training_curves(dir + "/xs.png", xs);
  // Bad input.
  EXPECT_THROW(io::save_training_curves(dir + "/e.png", io::TrainingCurves{}), Error);
  io::TrainingCurves bad;
  bad.loss = {{"train", {1, 2}, {1}}};
  EXPECT_THROW(io::save_training_curves(dir + "/e.png", bad), Error);
  EXPECT_THROW(io::save_training_curves("/no/such/dir/x.png", one), Error);
}
