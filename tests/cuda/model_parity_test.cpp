// Model parity, GPU against CPU (issue "CUDA backend"): LeNet-5, ResNet-18 and an MLP trained a
// few steps from one seed in PyNative and Graph mode, one YOLOv5n training step, the three
// models' ONNX exports run for inference, and Model.train's device data path. The programs are
// those the test device's tests run bit-equal (tests/devices/model_parity.h); here cuDNN and
// cuBLASLt add in other orders, so each result is compared to a tolerance relative to its largest
// value, and the worst error is printed for the record. Skipped where no GPU is visible.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "cuda/gpu_visible.h"
#include "devices/model_parity.h"
#include "graph/executor.h"

namespace {
using namespace spore;
using test_support::expect_same;
using test_support::rel_error;
using test_support::train_on;

class GpuModelParity : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!test_support::gpu_visible(&why)) GTEST_SKIP() << why;
  }
  void TearDown() override {
    set_device("CPU");
    set_context({.mode = Mode::PyNative});
  }
  const Device cpu{};
  const Device gpu{DeviceType::GPU, 0};
};

void report(const char* what, double worst, double tol) {
  std::printf("[parity] %-34s worst relative error %.3g (tolerance %.0e)\n", what, worst, tol);
}

// Five steps of the net make() builds, CPU against GPU, in PyNative and Graph mode, and Graph mode
// again with the executor's capture on (steps 3-5 replay a CUDA graph; docs/graph.md).
template <class Make>
void five_steps(const std::string& name, Make make, const Shape& x_shape, double tol) {
  struct Run {
    Mode mode;
    bool capture;
    const char* label;
  };
  for (const Run& r : {Run{Mode::PyNative, false, "PyNative"}, Run{Mode::Graph, false, "Graph"},
                       Run{Mode::Graph, true, "Graph, captured"}}) {
    const Device cpu{}, gpu{DeviceType::GPU, 0};
    const auto want = train_on(cpu, make, x_shape, 10, 5, r.mode);
    graph::set_capture(r.capture);
    const int64_t replays = graph::capture_replays();
    const auto got = train_on(gpu, make, x_shape, 10, 5, r.mode);
    const int64_t replayed = graph::capture_replays() - replays;
    graph::set_capture(false);
    if (r.capture) EXPECT_GE(replayed, 3) << name << ": the captured step did not replay";
    const double worst = expect_same(want, got, tol);
    report((name + " 5 steps, " + r.label).c_str(), worst, tol);
  }
}

TEST_F(GpuModelParity, LeNetFiveSteps) {
  five_steps(
      "LeNet-5", [] { return std::make_shared<models::LeNet5>(); }, {8, 1, 28, 28}, 1e-4);
}

TEST_F(GpuModelParity, ResNet18FiveSteps) {
  five_steps(
      "ResNet-18", [] { return models::resnet18(10); }, {4, 3, 32, 32}, 1e-3);
}

TEST_F(GpuModelParity, YoloV5nTrainingStep) {
  const std::vector<Tensor> c = test_support::yolov5n_step(cpu);
  const std::vector<Tensor> g = test_support::yolov5n_step(gpu);
  ASSERT_EQ(c.size(), g.size());
  double worst = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const double e = rel_error(c[i].to_vector<float>(), g[i].to_vector<float>());
    worst = std::max(worst, e);
    EXPECT_LE(e, 1e-3) << (i < 4 ? "loss part " : "gradient ") << i;
  }
  report("YOLOv5n step (loss, gradients)", worst, 1e-3);
}

TEST_F(GpuModelParity, OnnxInference) {
  const std::string dir = ::testing::TempDir() + "/spore_onnx_gpu";
  std::filesystem::create_directories(dir);
  for (const auto& c : test_support::export_onnx_cases(dir)) {
    SCOPED_TRACE(c.name);
    OnnxModel m = OnnxModel::load(c.path);
    const Tensor x = rand(c.input);
    const std::vector<Tensor> want = m.run({x}, /*graph_mode=*/false);
    for (bool graph : {true, false}) {
      const std::vector<Tensor> got = m.run({x.to(gpu)}, graph);
      ASSERT_EQ(got.size(), want.size());
      double worst = 0;
      for (size_t k = 0; k < got.size(); ++k) {
        EXPECT_EQ(got[k].device(), gpu);
        worst = std::max(worst, rel_error(want[k].to_vector<float>(), got[k].to_vector<float>()));
      }
      EXPECT_LE(worst, 1e-4);
      report((c.name + (graph ? " ONNX, compiled" : " ONNX, op by op")).c_str(), worst, 1e-4);
    }
  }
}

// Model.train's data path: rows staged in page-locked memory and copied on a copy stream, a sink
// reading the loss once; the parameters end where the CPU's do.
TEST_F(GpuModelParity, ModelTrainDataPath) {
  std::vector<std::vector<float>> params[2];
  double losses[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    const Device device = k ? gpu : cpu;
    set_device(device_type_name(device.type));
    set_context({.mode = Mode::Graph});
    set_seed(4);
    auto net = std::make_shared<models::LeNet5>();
    Tensor x, y;
    {
      const DeviceGuard host(cpu);
      x = randn({64, 1, 28, 28});
      y = randint(0, 10, {64}, kInt32);
    }
    auto ds = data::NumpySlicesDataset({x, y}, {"image", "label"}).batch(16);
    auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
        nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
    train::Model model(net, loss,
                       std::make_shared<optim::Momentum>(net->trainable_params(), 0.01, 0.9));
    double last = 0;
    train::LambdaCallback cb(
        {.on_epoch_end = [&](train::RunContext& ctx) { last = ctx.epoch_loss; }});
    model.train(2, ds, {cb}, 0, /*sink_size=*/-1);
    losses[k] = last;
    for (const Tensor& p : net->trainable_params()) params[k].push_back(p.to_vector<float>());
  }
  double worst = std::abs(losses[0] - losses[1]) / std::max(std::abs(losses[0]), 1e-30);
  for (size_t i = 0; i < params[0].size(); ++i)
    worst = std::max(worst, rel_error(params[0][i], params[1][i]));
  EXPECT_LE(worst, 1e-4);
  report("Model.train LeNet-5, sink, 2 epochs", worst, 1e-4);
}

}  // namespace
