// Devices are real: tensors live on a device and move between devices, and everything above the
// backends follows them. Proven on the test device (src/backends/test_device), whose memory the
// host cannot touch outside a kernel or a copy: a layer that reads device memory on the host
// without a transfer crashes these tests.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "backends/backend.h"
#include "backends/test_device/test_device.h"
#include "devices/capture_run.h"
#include "devices/model_parity.h"
#include "graph/executor.h"
#include "graph/passes.h"
#include "graph/trace.h"
#include "models/mlp.h"
#include "spore/deploy.h"
#include "spore/io/checkpoint.h"

namespace spore {
namespace {

const Device kCpu{};
const Device kTest{DeviceType::Test, 0};

class Devices : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { enable_test_device(); }
  void TearDown() override {
    graph::set_capture(false);
    set_device("CPU");
    set_context({.mode = Mode::PyNative});
  }
};

// ---- tensors on a device ------------------------------------------------------------------------
TEST_F(Devices, ToAndBackKeepsValuesAndStrides) {
  const Tensor x = arange(0, 12).reshape({3, 4});
  const Tensor d = x.to(kTest);
  EXPECT_EQ(d.device(), kTest);
  EXPECT_EQ(d.to_vector<float>(), x.to_vector<float>());  // to_vector copies to the host
  EXPECT_EQ(d.t().cpu().to_vector<float>(),
            x.t().contiguous().to_vector<float>());  // packed on the device
  EXPECT_EQ(d.sum().item<float>(), 66.0f);           // item copies to the host
  EXPECT_TRUE(x.to(kCpu).is_same(x));                // already there: no copy
  EXPECT_NE(d.str().find("11"), std::string::npos);  // printing copies to the host
}

TEST_F(Devices, HostAccessToDeviceMemoryFailsLoudly) {
  const Tensor d = ones({4}).to(kTest);
  EXPECT_DEATH({ [[maybe_unused]] volatile float v = *static_cast<const float*>(d.data_ptr()); },
               "touched Test-device memory");
}

TEST_F(Devices, FactoriesFollowTheCurrentDevice) {
  EXPECT_EQ(zeros({2}).device(), kCpu);
  set_device("Test");
  EXPECT_EQ(current_device(), kTest);
  EXPECT_EQ(zeros({2}).device(), kTest);
  EXPECT_EQ(randn({2, 2}).device(), kTest);
  EXPECT_EQ(tensor({1.0, 2.0}).device(), kTest);
  {
    const DeviceGuard host(kCpu);
    EXPECT_EQ(ones({2}).device(), kCpu);
  }
  set_device("CPU");
  EXPECT_EQ(zeros_like(ones({2}, kFloat32, kTest)).device(), kTest);  // *_like follow the argument
  // The same seed gives the same values wherever they are made.
  set_seed(5);
  const Tensor a = randn({3});
  set_seed(5);
  EXPECT_EQ(randn({3}, kFloat32, kTest).to_vector<float>(), a.to_vector<float>());
}

TEST_F(Devices, MixingDevicesIsAClearError) {
  const Tensor a = ones({2}), b = ones({2}).to(kTest);
  try {
    (void)add(a, b);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[add]"), std::string::npos) << m;
    EXPECT_NE(m.find("CPU:0"), std::string::npos) << m;
    EXPECT_NE(m.find("Test:0"), std::string::npos) << m;
    EXPECT_NE(m.find(".to(device)"), std::string::npos) << m;
  }
}

TEST_F(Devices, HostScalarJoinsWithoutAnUpload) {
  const Tensor d = full({3}, 2.0).to(kTest);
  test_device_copies().reset();
  const Tensor y = d * 3.0 + 1.0;  // 0-d host scalars join the op
  EXPECT_EQ(y.device(), kTest);
  EXPECT_EQ(test_device_copies().host_to_device(), 0u);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{7, 7, 7}));
}

TEST_F(Devices, GradientGoesBackToTheSourceDevice) {
  Tensor x = tensor({1.0, 2.0, 3.0});
  x.set_requires_grad();
  const Tensor loss = (x.to(kTest) * x.to(kTest)).sum();  // on the test device
  EXPECT_EQ(loss.device(), kTest);
  const Tensor g = autograd::grad(loss, {x})[0];
  EXPECT_EQ(g.device(), kCpu);
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{2, 4, 6}));
}

TEST_F(Devices, StreamsAndEventsOfTheContract) {
  Backend& b = get_backend(DeviceType::Test);
  EXPECT_EQ(current_stream(kTest).device(), kTest);
  auto s = b.new_stream(0);
  {
    const StreamGuard g(*s);
    EXPECT_EQ(&current_stream(kTest), s.get());
  }
  EXPECT_EQ(&current_stream(kTest), &b.default_stream(0));
  auto e = b.new_event(0);
  e->record(*s);
  e->wait(b.default_stream(0));
  e->synchronize();
  EXPECT_TRUE(e->query());
  EXPECT_FALSE(b.host_accessible());
  EXPECT_TRUE(get_backend(DeviceType::CPU).host_accessible());
}

// ---- training follows the device ----------------------------------------------------------------
using test_support::expect_same;
using test_support::train_on;
using test_support::TrainRun;

TEST_F(Devices, LeNetPyNativeEqualsCpu) {
  auto make = [] { return std::make_shared<models::LeNet5>(); };
  expect_same(train_on(kCpu, make, {8, 1, 28, 28}, 10, 3, Mode::PyNative),
              train_on(kTest, make, {8, 1, 28, 28}, 10, 3, Mode::PyNative));
}

TEST_F(Devices, LeNetGraphEqualsCpu) {
  auto make = [] { return std::make_shared<models::LeNet5>(); };
  expect_same(train_on(kCpu, make, {8, 1, 28, 28}, 10, 3, Mode::Graph),
              train_on(kTest, make, {8, 1, 28, 28}, 10, 3, Mode::Graph), 1e-5);
}

TEST_F(Devices, ResNet18GraphEqualsCpu) {
  auto make = [] { return models::resnet18(10); };
  expect_same(train_on(kCpu, make, {2, 3, 32, 32}, 10, 2, Mode::Graph),
              train_on(kTest, make, {2, 3, 32, 32}, 10, 2, Mode::Graph), 1e-4);
}

TEST_F(Devices, ResNet18PyNativeEqualsCpu) {
  auto make = [] { return models::resnet18(10); };
  expect_same(train_on(kCpu, make, {2, 3, 32, 32}, 10, 2, Mode::PyNative),
              train_on(kTest, make, {2, 3, 32, 32}, 10, 2, Mode::PyNative));
}

TEST_F(Devices, MlpRegressionEqualsCpu) {
  // The regression example's shape: MSE on a small MLP (PyNative and Graph).
  for (Mode mode : {Mode::PyNative, Mode::Graph}) {
    TrainRun runs[2];
    for (int k = 0; k < 2; ++k) {
      const Device device = k ? kTest : kCpu;
      set_context({.mode = mode});
      set_device(k ? "Test" : "CPU");
      set_seed(2);
      auto net = std::make_shared<nn::SequentialCell>(
          std::vector<nn::CellPtr>{std::make_shared<nn::Dense>(4, 16), std::make_shared<nn::ReLU>(),
                                   std::make_shared<nn::Dense>(16, 1)});
      auto step = std::make_shared<train::TrainOneStepCell>(
          std::make_shared<train::WithLossCell>(net, std::make_shared<nn::MSELoss>()),
          std::make_shared<optim::Adam>(net->trainable_params(), 0.01));
      Tensor x, y;
      {
        const DeviceGuard host(kCpu);
        x = randn({16, 4});
        y = x.sum({1}, true) * 0.5;
      }
      for (int i = 0; i < 4; ++i)
        runs[k].losses.push_back(step->forward({x.to(device), y.to(device)})[0].item<float>());
      for (const Tensor& p : net->trainable_params())
        runs[k].params.push_back(p.to_vector<float>());
    }
    expect_same(runs[0], runs[1], mode == Mode::Graph ? 1e-5 : 0);
  }
}

// One YOLOv5n training step (forward, the YOLO loss, gradients) on the test device equals the
// CPU's.
TEST_F(Devices, YoloV5nStepEqualsCpu) {
  const std::vector<Tensor> cpu = test_support::yolov5n_step(kCpu);
  const std::vector<Tensor> dev = test_support::yolov5n_step(kTest);
  ASSERT_EQ(cpu.size(), dev.size());
  for (size_t i = 0; i < cpu.size(); ++i)
    EXPECT_EQ(cpu[i].to_vector<float>(), dev[i].to_vector<float>()) << "output " << i;
}

// One compiled training step moves only the batch in and the loss out.
TEST_F(Devices, GraphStepTransfersOnlyTheBatchAndTheLoss) {
  set_context({.mode = Mode::Graph});
  set_device("Test");
  set_seed(1);
  auto net = std::make_shared<models::LeNet5>();
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  auto step = std::make_shared<train::TrainOneStepCell>(
      std::make_shared<train::WithLossCell>(net, loss),
      std::make_shared<optim::Momentum>(net->trainable_params(), 0.01, 0.9));
  Tensor x, y;
  {
    const DeviceGuard host(kCpu);
    x = randn({8, 1, 28, 28});
    y = randint(0, 10, {8}, kInt32);
  }
  (void)step->forward({x.to(kTest), y.to(kTest)})[0].item<float>();  // compiles
  test_device_copies().reset();
  const Tensor l = step->forward({x.to(kTest), y.to(kTest)})[0];
  const float v = l.item<float>();
  EXPECT_TRUE(std::isfinite(v));
  // The optimizer's hyper-parameters (a constant rate) are uploaded only when they change.
  EXPECT_EQ(test_device_copies().host_to_device(), 2u);  // data and label
  EXPECT_EQ(test_device_copies().device_to_host(), 1u);  // the loss
}

// A loss-scaled compiled step (amp's dynamic loss scale) on the device equals the CPU's, and its
// scale stays on the device: a step copies in only its batch, and out only its overflow flag (the
// device decides; the host books the outcome later).
TEST_F(Devices, LossScaledGraphStepEqualsCpuAndUploadsOnlyTheBatch) {
  TrainRun runs[2];
  for (int k = 0; k < 2; ++k) {
    const Device device = k ? kTest : kCpu;
    set_context({.mode = Mode::Graph});
    set_device(k ? "Test" : "CPU");
    set_seed(6);
    auto net = std::make_shared<models::LeNet5>();
    auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
        nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
    auto step = std::make_shared<train::TrainOneStepWithLossScaleCell>(
        std::make_shared<train::WithLossCell>(net, loss),
        std::make_shared<optim::Momentum>(net->trainable_params(), 0.01, 0.9),
        std::make_shared<amp::DynamicLossScaleManager>(1024.0, 2.0, 1000));
    Tensor x, y;
    {
      const DeviceGuard host(kCpu);
      x = randn({8, 1, 28, 28});
      y = randint(0, 10, {8}, kInt32);
    }
    EXPECT_TRUE(step->decides_on_device());
    for (int i = 0; i < 4; ++i) {
      test_device_copies().reset();
      const Tensor l = step->forward({x.to(device), y.to(device)})[0];
      if (k == 1 && i >= 2) {
        EXPECT_EQ(test_device_copies().host_to_device(), 2u) << "step " << i;
        // The step's overflow flag, queued behind it for the host to book later; nothing else.
        EXPECT_EQ(test_device_copies().device_to_host(), 1u) << "step " << i;
      }
      runs[k].losses.push_back(l.item<float>());
    }
    EXPECT_EQ(step->overflow_steps(), 0);
    EXPECT_EQ(step->loss_scale(), 1024.0);
    EXPECT_EQ(step->optimizer()->global_step(), 4);
    for (const Tensor& p : net->trainable_params()) runs[k].params.push_back(p.to_vector<float>());
  }
  expect_same(runs[0], runs[1], 1e-5);
}

TEST_F(Devices, CellToMovesParametersInPlace) {
  set_seed(3);
  auto net = std::make_shared<models::LeNet5>();
  const std::vector<Tensor> before = net->trainable_params();
  const std::vector<float> w = before[0].to_vector<float>();
  net->to(kTest);
  const std::vector<Tensor> after = net->trainable_params();
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].device(), kTest);
    EXPECT_TRUE(after[i].is_same(before[i]));  // the same parameter objects
  }
  EXPECT_EQ(after[0].to_vector<float>(), w);
  const Tensor out = (*net)(randn({2, 1, 28, 28}, kFloat32, kTest));
  EXPECT_EQ(out.device(), kTest);
}

// A model on a device saves as it is (MindSpore's save_checkpoint, torch.save): the tensors are
// copied to the host for the file, in both formats, and load back with their values.
TEST_F(Devices, CheckpointOfADeviceModelSavesItsValues) {
  set_seed(5);
  auto net = std::make_shared<models::LeNet5>();
  net->to(kTest);
  const std::string dir = ::testing::TempDir();
  for (const std::string ext : {".safetensors", ".ckpt"}) {
    const std::string path = dir + "/device_model" + ext;
    io::save_checkpoint(*net, path);
    const io::Checkpoint ck = io::load_checkpoint(path);
    for (const auto& [name, t] : net->parameters_and_buffers()) {
      const Tensor* saved = ck.find(name);
      ASSERT_NE(saved, nullptr) << name << ext;
      EXPECT_EQ(saved->to(kFloat32).to_vector<float>(), t.cpu().to(kFloat32).to_vector<float>())
          << name << ext;
    }
    EXPECT_EQ(net->trainable_params()[0].device(), kTest) << "the model stays where it was";
  }
}

TEST_F(Devices, ModelTrainMovesHostBatchesToTheNetwork) {
  set_seed(4);
  set_device("Test");
  auto net = std::make_shared<models::LeNet5>();
  set_device("CPU");
  Tensor x, y;
  x = randn({32, 1, 28, 28});
  y = randint(0, 10, {32}, kInt32);
  auto ds = data::NumpySlicesDataset({x, y}, {"image", "label"}).batch(8);
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  train::Model model(net, loss,
                     std::make_shared<optim::Momentum>(net->trainable_params(), 0.01, 0.9),
                     {"accuracy"});
  // The batches are staged in page-locked memory (two buffers per column, alternating) and copied
  // from there; the staging memory is given back when the loop ends.
  Allocator& pinned = get_backend(DeviceType::Test).pinned_allocator();
  const AllocatorStats before = pinned.stats();
  test_device_copies().reset();
  model.train(1, ds);
  EXPECT_EQ(pinned.stats().num_allocs - before.num_allocs, 4u);  // 2 columns x 2 slots
  EXPECT_EQ(pinned.stats().bytes_in_use, before.bytes_in_use);
  EXPECT_GE(test_device_copies().host_to_device(), 8u);  // 4 batches x (image, label)
  const uint64_t per_step_reads = test_device_copies().device_to_host();
  EXPECT_GE(per_step_reads, 4u);  // each step's loss, for the step callbacks
  // A sink (dataset_sink_mode) reads on the host only at its end: the last loss and the sum.
  test_device_copies().reset();
  model.train(1, ds, {}, 0, /*sink_size=*/-1);
  EXPECT_EQ(test_device_copies().device_to_host(), per_step_reads - 4 + 2);
  const auto m = model.eval(ds);
  EXPECT_GE(m.at("accuracy"), 0.0);
  EXPECT_EQ(model.predict(x.slice(0, 0, 2)).device(), kTest);
}

// A compiled graph's 0-d host constants (`x * 2.0`) read by device nodes are uploaded once, at
// compile time: no per-call copy from the host, which a captured step could not record.
TEST_F(Devices, CompiledGraphsHoldTheirScalarsOnTheDevice) {
  Tensor x;
  {
    const DeviceGuard host(kCpu);
    x = randn({4, 3});
  }
  auto fn = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{relu(a[0] * 2.0 + 1.0) - 0.5};
  };
  auto g = graph::trace(fn, {x.to(kTest)});
  auto host_scalars = [&] {
    size_t n = 0;
    for (const auto& node : g->nodes)
      for (const graph::Value* in : node->inputs)
        n += in->kind == graph::ValueKind::kConstant && in->device == kCpu && in->shape.empty() &&
             node->device == kTest;
    return n;
  };
  const size_t before = host_scalars();
  EXPECT_GE(before, 3u);
  EXPECT_EQ(graph::place_scalar_constants(*g), before);
  EXPECT_EQ(host_scalars(), 0u);
  graph::verify(*g);
  // End to end (the whole pipeline): the values of the op-by-op run on the CPU.
  set_context({.mode = Mode::Graph});
  auto compiled = jit(fn);
  EXPECT_EQ(compiled({x.to(kTest)})[0].to_vector<float>(), fn({x})[0].to_vector<float>());
}

// ---- inference: an ONNX model runs where its inputs are (spore infer --device)
// ------------------ LeNet-5, ResNet-18 and YOLOv5n exported to ONNX, run on the test device op by
// op and compiled, against the same model on the CPU. A compiled run uploads its weights once (into
// the graph), so a later run copies only its input in.
TEST_F(Devices, OnnxModelsRunWhereTheirInputsAre) {
  const std::string dir = ::testing::TempDir() + "/spore_onnx_devices";
  std::filesystem::create_directories(dir);
  for (const auto& c : test_support::export_onnx_cases(dir)) {
    SCOPED_TRACE(c.name);
    OnnxModel m = OnnxModel::load(c.path);
    const Tensor x = rand(c.input);
    const std::vector<Tensor> want = m.run({x}, /*graph_mode=*/false);  // the CPU, op by op
    for (bool graph : {true, false}) {
      SCOPED_TRACE(graph ? "graph" : "op by op");
      for (int run = 0; run < 2; ++run) {
        test_device_copies().reset();
        const std::vector<Tensor> got = m.run({x.to(kTest)}, graph);
        if (graph && run == 1) {
          EXPECT_EQ(test_device_copies().host_to_device(), 1u);  // the input only
          EXPECT_EQ(test_device_copies().device_to_host(), 0u);
        }
        ASSERT_EQ(got.size(), want.size());
        for (size_t k = 0; k < got.size(); ++k) {
          EXPECT_EQ(got[k].device(), kTest);
          // Op by op: the same kernels. Compiled: the CPU's graph has its own passes.
          EXPECT_LE(test_support::rel_error(want[k].to_vector<float>(), got[k].to_vector<float>()),
                    graph ? 1e-5 : 0.0)
              << "output " << k;
        }
      }
    }
  }
}

// A model compiled for a device (spore compile --device; format 3): traced and optimised there,
// its weights stored from the device and uploaded in one copy when the file loads, its runs taking
// host or device inputs and leaving the outputs on the device.
TEST_F(Devices, CompiledModelsRunOnTheirDevice) {
  const std::string dir = ::testing::TempDir() + "/spore_compiled_devices";
  std::filesystem::create_directories(dir);
  for (const auto& c : test_support::export_onnx_cases(dir)) {
    SCOPED_TRACE(c.name);
    const Tensor x = rand(c.input);
    const std::vector<Tensor> want = OnnxModel::load(c.path).run({x}, /*graph_mode=*/false);
    const std::string bytes =
        CompiledModel::from_onnx(c.path, {.batches = {1, c.input[0]}, .device = kTest}).to_bytes();
    test_device_copies().reset();
    const CompiledModel m = CompiledModel::from_buffer(bytes.data(), bytes.size(), c.name);
    EXPECT_EQ(test_device_copies().host_to_device(), 1u);  // every weight in one copy
    EXPECT_EQ(m.device(), "Test");
    EXPECT_NE(m.summary().find("version 3"), std::string::npos);
    const Tensor xd = x.to(kTest);
    for (int run = 0; run < 3; ++run) {
      test_device_copies().reset();
      const std::vector<Tensor> got = m.run({run == 0 ? x : xd});  // host, then device inputs
      if (run == 2) {
        EXPECT_EQ(test_device_copies().host_to_device(), 0u);
        EXPECT_EQ(test_device_copies().device_to_host(), 0u);
      }
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < got.size(); ++k) {
        EXPECT_EQ(got[k].device(), kTest);
        EXPECT_LE(test_support::rel_error(want[k].to_vector<float>(), got[k].to_vector<float>()),
                  1e-5)
            << "output " << k;
      }
    }
    if (c.input[0] > 1) {  // a batch of 1 and one the file has not: run as compiled chunks
      const Tensor x3 = concat({x, x.slice(0, 0, 1)}, 0);
      const std::vector<Tensor> got = m.run({x3.to(kTest)});
      EXPECT_EQ(got[0].shape()[0], x3.shape()[0]);
      // Image 2 (a copy of image 0) ran in the batch-1 graph, image 0 in the batch-2 one.
      EXPECT_LE(test_support::rel_error(got[0].slice(0, 2, 3).to_vector<float>(),
                                        got[0].slice(0, 0, 1).to_vector<float>()),
                1e-5);
    }
  }
  // A CPU model takes host tensors only, and names the device it was given.
  const auto cases = test_support::export_onnx_cases(dir);
  const CompiledModel cpu = CompiledModel::from_onnx(cases[0].path);
  try {
    (void)cpu.run({rand(cases[0].input).to(kTest)});
    ADD_FAILURE() << "a device input to a CPU model ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is on Test:0; this model runs on CPU:0"),
              std::string::npos)
        << e.what();
  }
}

// ---- capture: Graph mode's step recorded once and replayed (CUDA graphs; docs/graph.md)
// ------------ The test device records a captured stream's kernels and copies instead of running
// them, as a CUDA stream under capture does, so the executor's capture logic is tested here without
// a GPU (tests/cuda/capture_test.cpp runs the same program on a GPU).
using test_support::CaptureRun;
using test_support::train_captured;

TEST_F(Devices, CapturedGraphStepEqualsPlainRuns) {
  const CaptureRun plain = train_captured(kTest, false, false, 6);
  const CaptureRun captured = train_captured(kTest, true, false, 6);
  EXPECT_EQ(plain.replays, 0);
  // The first step runs plainly (one-time kernel choices), the second is recorded and replayed,
  // every later one is a replay; a learning-rate change is an upload into the tensor the
  // recording reads, not a new graph.
  EXPECT_EQ(captured.replays, 5);
  expect_same(
      {plain.losses, plain.params},
      {captured.losses, captured.params});  // the same kernels on the same buffers: bit-equal
}

TEST_F(Devices, AFailedCaptureRunsTheKernelsOneByOne) {
  const CaptureRun plain = train_captured(kTest, false, false, 4);
  fail_next_capture() = true;
  const CaptureRun failed = train_captured(kTest, true, false, 4);
  EXPECT_FALSE(fail_next_capture());  // the capture was tried once, and not again
  EXPECT_EQ(failed.replays, 0);
  expect_same({plain.losses, plain.params}, {failed.losses, failed.params});
}

TEST_F(Devices, StepsWithRandomOpsAreNotCaptured) {
  // Dropout draws its seed from the host's generator at each call: a replay would repeat the
  // first mask, so the executor declines to capture, and the masks still change every step.
  const CaptureRun plain = train_captured(kTest, false, true, 5);
  const CaptureRun captured = train_captured(kTest, true, true, 5);
  EXPECT_EQ(captured.replays, 0);
  expect_same({plain.losses, plain.params}, {captured.losses, captured.params});
}

TEST_F(Devices, ReplacedParametersAreRecaptured) {
  graph::set_capture(true);
  set_context({.mode = Mode::Graph});
  set_device("Test");
  Tensor w = ones({4}, kFloat32, kTest);
  auto fn = jit([&](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] * w + 1.0}; });
  const Tensor x = full({4}, 2.0, kFloat32, kTest);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(fn({x})[0].to_vector<float>(), std::vector<float>(4, 3.0f));
  const int64_t before = graph::capture_replays();
  w.impl().storage = full({4}, 5.0, kFloat32, kTest).impl().storage;  // what a checkpoint load does
  // The executor rebinds and drops the recording (it wrote the old buffer); the kernels' one-time
  // choices are made, so it records again at once.
  EXPECT_EQ(fn({x})[0].to_vector<float>(), std::vector<float>(4, 11.0f));
  EXPECT_EQ(fn({x})[0].to_vector<float>(), std::vector<float>(4, 11.0f));
  EXPECT_EQ(graph::capture_replays() - before, 2);
}

// The accelerators' Dense fusion (graph/passes/matmul_epilogue.cpp) on the test device: an MLP's
// matmul + bias + relu become matmul_epilogue nodes in inference and in a training step (relu's
// gradient pointed at its output), and the results equal the CPU's (whose oneDNN fusion is its
// own) to float32 rounding.
TEST_F(Devices, DenseLayersFuseIntoMatmulEpilogues) {
  std::vector<float> out[2];
  std::string text[2], train_text[2];
  std::vector<std::vector<float>> params[2];
  for (int k = 0; k < 2; ++k) {
    const Device device = k ? kTest : kCpu;
    set_device(k ? "Test" : "CPU");
    set_context({.mode = Mode::Graph});
    set_seed(8);
    auto net = std::make_shared<models::MLP>(std::vector<int64_t>{12, 32, 16, 4});
    Tensor x, y;
    {
      const DeviceGuard host(kCpu);
      x = randn({8, 12});
      y = randint(0, 4, {8}, kInt32);
    }
    auto infer =
        jit([&](const std::vector<Tensor>& a) { return std::vector<Tensor>{(*net)(a[0])}; });
    out[k] = infer({x.to(device)})[0].to(kCpu).to_vector<float>();
    text[k] = infer.graph_text();
    auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
        nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
    auto step = std::make_shared<train::TrainOneStepCell>(
        std::make_shared<train::WithLossCell>(net, loss),
        std::make_shared<optim::Momentum>(net->trainable_params(), 0.1, 0.9));
    // The whole step traced as one graph, so its text can be read.
    auto train = jit([&](const std::vector<Tensor>& a) { return step->forward(a); });
    for (int i = 0; i < 3; ++i) train({x.to(device), y.to(device)});
    train_text[k] = train.graph_text();
    for (const Tensor& p : net->trainable_params()) params[k].push_back(p.to_vector<float>());
    set_context({.mode = Mode::PyNative});
  }
  auto count = [](const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
    return n;
  };
  // Two hidden Dense + ReLU and the output Dense (bias only): three epilogues on the test device.
  EXPECT_EQ(count(text[1], "matmul_epilogue("), 3u) << text[1];
  EXPECT_EQ(count(text[1], "act='relu'"), 2u) << text[1];
  EXPECT_EQ(count(text[0], "matmul_epilogue("), 0u) << "the CPU fuses through oneDNN instead";
  // Training: the forward's three, the ReLUs' gradients reading the fused outputs.
  EXPECT_EQ(count(train_text[1], "matmul_epilogue("), 3u) << train_text[1];
  EXPECT_EQ(count(train_text[1], "act='relu'"), 2u) << train_text[1];
  ASSERT_EQ(out[0].size(), out[1].size());
  for (size_t i = 0; i < out[0].size(); ++i)
    EXPECT_NEAR(out[1][i], out[0][i], 1e-5 * (1 + std::abs(out[0][i]))) << i;
  for (size_t p = 0; p < params[0].size(); ++p)
    for (size_t i = 0; i < params[0][p].size(); ++i)
      EXPECT_NEAR(params[1][p][i], params[0][p][i], 1e-5) << "param " << p << " element " << i;
}

}  // namespace
}  // namespace spore
