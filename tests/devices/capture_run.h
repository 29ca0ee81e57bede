// A few Graph-mode training steps with the executor's capture on or off (docs/graph.md, "Capture"),
// for the test device's tests (tests/devices) and the GPU's (tests/cuda): the same program on both.
#pragma once
#include <memory>
#include <vector>

#include "graph/executor.h"
#include "models/lenet.h"
#include "spore/spore.h"

namespace spore::test_support {

struct CaptureRun {
  std::vector<float> losses;
  std::vector<std::vector<float>> params;  // on the host, after the last step
  int64_t replays = 0;                     // of captured steps during the run
};

// LeNet-5 (or, with dropout, a Dense-Dropout-Dense net, whose step is not captured) trained for
// `steps` Graph-mode steps on `device` from fixed host batches; the learning rate changes before
// step 3, which must reach a recorded step.
inline CaptureRun train_captured(Device device, bool capture, bool dropout, int steps) {
  graph::set_capture(capture);
  set_context({.mode = Mode::Graph});
  const DeviceGuard on(device);
  set_seed(3);
  nn::CellPtr net;
  if (dropout)
    net = std::make_shared<nn::SequentialCell>(std::initializer_list<nn::CellPtr>{
        std::make_shared<nn::Dense>(16, 32, nn::DenseOptions{.activation = "relu"}),
        std::make_shared<nn::Dropout>(nn::DropoutOptions{.p = 0.3}),
        std::make_shared<nn::Dense>(32, 4)});
  else
    net = std::make_shared<models::LeNet5>();
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.01, 0.9);
  auto step = std::make_shared<train::TrainOneStepCell>(
      std::make_shared<train::WithLossCell>(net, loss), opt);
  const Shape x_shape = dropout ? Shape{8, 16} : Shape{8, 1, 28, 28};
  std::vector<Tensor> xs, ys;
  {
    const DeviceGuard host(Device{});
    for (int i = 0; i < steps; ++i) {
      xs.push_back(randn(x_shape));
      ys.push_back(randint(0, 4, {8}, kInt32));
    }
  }
  CaptureRun r;
  const int64_t replays0 = graph::capture_replays();
  for (int i = 0; i < steps; ++i) {
    if (i == 3) opt->set_group_lr(0, 0.05);
    const Tensor l = step->forward({xs[size_t(i)].to(device), ys[size_t(i)].to(device)})[0];
    r.losses.push_back(l.item<float>());
  }
  for (const Tensor& p : net->trainable_params()) r.params.push_back(p.to_vector<float>());
  r.replays = graph::capture_replays() - replays0;
  graph::set_capture(false);
  set_context({.mode = Mode::PyNative});
  return r;
}

}  // namespace spore::test_support
