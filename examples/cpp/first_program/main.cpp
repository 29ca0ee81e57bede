// The README's first program: LeNet-5 trained on Fashion-MNIST (the Debian package
// dataset-fashion-mnist), then its test accuracy. `first_program [epochs] [images]` trains for
// `epochs` (default 5) on the first `images` of each split (default all; the install test runs 1
// 256).
#include <spore/spore.h>

#include <cstdlib>
#include <iostream>

using namespace spore;

struct LeNet5 : nn::Cell {
  nn::Conv2d conv1{1, 6, 5, {.pad_mode = "pad", .padding = 2}},
      conv2{6, 16, 5, {.pad_mode = "valid"}};
  nn::Dense fc1{400, 120}, fc2{120, 84}, fc3{84, 10};
  LeNet5() { register_cells("conv1", conv1, "conv2", conv2, "fc1", fc1, "fc2", fc2, "fc3", fc3); }
  Tensor construct(const Tensor& x) override {
    auto y = max_pool2d(relu(conv1(x)), 2);        // (N, 6, 14, 14)
    y = max_pool2d(relu(conv2(y)), 2).flatten(1);  // (N, 400)
    return fc3(relu(fc2(relu(fc1(y)))));           // (N, 10)
  }
};

int main(int argc, char** argv) {
  const int64_t epochs = argc > 1 ? std::atoll(argv[1]) : 5;
  const int64_t images = argc > 2 ? std::atoll(argv[2]) : -1;  // -1: the whole split
  set_context({.mode = Mode::PyNative});
  set_device("CPU");
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  auto train = data::MnistDataset(dir, "train", {.num_samples = images})
                   .map({vision::Rescale(1 / 255.0), vision::HWC2CHW()}, "image")
                   .shuffle(10000)
                   .batch(64);
  auto test = data::MnistDataset(dir, "test", {.num_samples = images})
                  .map({vision::Rescale(1 / 255.0), vision::HWC2CHW()}, "image")
                  .batch(256);
  auto net = std::make_shared<LeNet5>();
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  train::Model model(net, loss, optim::Momentum(net->trainable_params(), 0.01, 0.9), {"accuracy"});
  model.train(epochs, train, {train::LossMonitor(100), train::TimeMonitor()});
  std::cout << "test accuracy: " << model.eval(test)["accuracy"] << "\n";
}
