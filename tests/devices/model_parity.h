// Model parity between the CPU and another device: the same programs for the test device's tests
// (tests/devices, which run the CPU's kernels: bit-equal or to float32 rounding) and the GPU's
// (tests/cuda/model_parity_test.cpp: other kernels, so to a tolerance). Each returns what it
// computed on the host.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "models/lenet.h"
#include "models/resnet.h"
#include "models/yolov5/train.h"
#include "models/yolov5/yolov5.h"
#include "spore/onnx.h"
#include "spore/spore.h"

namespace spore::test_support {

struct TrainRun {
  std::vector<float> losses;
  std::vector<std::vector<float>> params;  // on the host, after the last step
};

// Trains `steps` of the net make() builds with Momentum on fixed random host batches moved to
// `device` (as Model would), in `mode`; the losses and the final parameters.
template <class Make>
TrainRun train_on(Device device, Make make, const Shape& x_shape, int64_t classes, int steps,
                  Mode mode) {
  set_context({.mode = mode});
  set_device(device_type_name(device.type), device.index);
  set_seed(7);
  auto net = make();  // parameters are made on the current device
  for (const Tensor& p : net->trainable_params()) EXPECT_EQ(p.device(), device);
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  auto step = std::make_shared<train::TrainOneStepCell>(
      std::make_shared<train::WithLossCell>(net, loss),
      std::make_shared<optim::Momentum>(net->trainable_params(), 0.01, 0.9));
  set_seed(11);
  std::vector<Tensor> xs, ys;
  {
    const DeviceGuard host(Device{});
    for (int i = 0; i < steps; ++i) {
      xs.push_back(randn(x_shape));
      ys.push_back(randint(0, classes, {x_shape[0]}, kInt32));
    }
  }
  TrainRun r;
  for (int i = 0; i < steps; ++i) {
    // In Graph mode TrainOneStepCell compiles the whole step itself.
    const Tensor l = step->forward({xs[size_t(i)].to(device), ys[size_t(i)].to(device)})[0];
    EXPECT_EQ(l.device(), device);
    r.losses.push_back(l.item<float>());
  }
  for (const Tensor& p : net->trainable_params()) r.params.push_back(p.to_vector<float>());
  set_device("CPU");
  set_context({.mode = Mode::PyNative});
  return r;
}

// The largest difference over the largest magnitude of a (1 when both are empty and equal).
inline double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 1e30;
  double scale = 0, err = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(double(a[i])));
    err = std::max(err, std::fabs(double(a[i]) - double(b[i])));
  }
  return err == 0 ? 0 : err / std::max(scale, 1e-30);
}

// tol 0: bit-equal. Otherwise each vector (the losses, each parameter) within tol of the CPU's,
// relative to its largest value. Returns the worst relative error seen (for the record).
inline double expect_same(const TrainRun& cpu, const TrainRun& dev, double tol = 0) {
  double worst = rel_error(cpu.losses, dev.losses);
  EXPECT_EQ(cpu.losses.size(), dev.losses.size());
  if (tol == 0)
    EXPECT_EQ(cpu.losses, dev.losses);
  else
    EXPECT_LE(rel_error(cpu.losses, dev.losses), tol)
        << "losses " << ::testing::PrintToString(cpu.losses) << " vs "
        << ::testing::PrintToString(dev.losses);
  EXPECT_EQ(cpu.params.size(), dev.params.size());
  for (size_t i = 0; i < cpu.params.size() && i < dev.params.size(); ++i) {
    const double e = rel_error(cpu.params[i], dev.params[i]);
    worst = std::max(worst, e);
    if (tol == 0)
      EXPECT_TRUE(cpu.params[i] == dev.params[i]) << "parameter " << i;
    else
      EXPECT_LE(e, tol) << "parameter " << i;
  }
  return worst;
}

// One YOLOv5n training step at 64 px (forward, the YOLO loss, the gradients) on `device`: the
// loss, its three parts and every gradient, on the host.
inline std::vector<Tensor> yolov5n_step(Device device) {
  constexpr int64_t kImg = 64;
  set_device(device_type_name(device.type), device.index);
  set_seed(5);
  auto net = models::yolov5("n", 3);
  net->set_train(true);
  const auto hyp = models::scaled_hyp(3, kImg);
  std::array<models::LevelTargets, 3> t;
  Tensor x;
  {
    const DeviceGuard host(Device{});  // the data engine's side: images and targets on the host
    x = rand({2, 3, kImg, kImg});
    const Tensor boxes = tensor(
        {{0, 1, 0.5, 0.5, 0.4, 0.3}, {0, 2, 0.25, 0.3, 0.2, 0.25}, {1, 0, 0.6, 0.55, 0.5, 0.6}});
    t = models::build_targets(
        boxes, 2, net->detect().anchors().cpu(),
        {{{kImg / 8, kImg / 8}, {kImg / 16, kImg / 16}, {kImg / 32, kImg / 32}}}, 3, hyp);
  }
  for (auto& level : t)
    for (Tensor* f :
         {&level.index, &level.tbox, &level.anchor, &level.cls, &level.mask, &level.obj_write})
      if (f->defined()) *f = f->to(device);
  models::YoloWithLoss with_loss(net, hyp);
  std::vector<Tensor> in{x.to(device)};
  for (const Tensor& v : models::flatten_targets(t)) in.push_back(v);
  EnableGradGuard eg;
  std::vector<Tensor> out = with_loss.forward(in);  // loss, lbox, lobj, lcls
  for (const Tensor& g : autograd::grad(out[0], net->trainable_params())) out.push_back(g);
  std::vector<Tensor> host;
  for (const Tensor& r : out) host.push_back(r.detach().cpu());
  set_device("CPU");
  return host;
}

// LeNet-5, ResNet-18 and YOLOv5n exported to ONNX (into dir) with their input shapes, in
// inference mode; the models a device's inference is checked on.
struct OnnxCase {
  std::string name, path;
  Shape input;
};
inline std::vector<OnnxCase> export_onnx_cases(const std::string& dir) {
  const DeviceGuard host(Device{});
  set_seed(3);
  struct Net {
    std::string name;
    std::shared_ptr<nn::Cell> net;
    Shape input;
  };
  std::vector<Net> nets{{"lenet", std::make_shared<models::LeNet5>(), {2, 1, 28, 28}},
                        {"resnet18", models::resnet18(10), {2, 3, 32, 32}},
                        {"yolov5n", models::yolov5("n", 3), {1, 3, 64, 64}}};
  std::vector<OnnxCase> cases;
  for (Net& n : nets) {
    n.net->set_train(false);
    const std::string path = dir + "/" + n.name + ".onnx";
    export_onnx(*n.net, Tensor::empty(n.input), path);
    cases.push_back({n.name, path, n.input});
  }
  return cases;
}

}  // namespace spore::test_support
