// The model zoo: output shapes, parameter names and counts against the published architectures,
// and one training step that lowers the loss.
#include <gtest/gtest.h>

#include "models/lenet.h"
#include "models/mlp.h"
#include "models/resnet.h"
#include "spore/spore.h"

namespace spore {
namespace {

int64_t count(const nn::Cell& c) {
  int64_t n = 0;
  for (const Tensor& p : c.trainable_params()) n += p.numel();
  return n;
}

TEST(Zoo, LeNet5ShapesAndParameters) {
  models::LeNet5 net;
  EXPECT_EQ(net(zeros({2, 1, 28, 28})).shape(), (Shape{2, 10}));
  // bias-free convs: 6*25 + 16*6*25; Dense: 400*120+120, 120*84+84, 84*10+10
  EXPECT_EQ(count(net), 150 + 2400 + 48120 + 10164 + 850);
  auto names = net.named_parameters();
  EXPECT_EQ(names.front().first, "conv1.weight");
  EXPECT_EQ(names.back().first, "fc3.bias");
  models::LeNet5 zoo32(10, 1, /*pad_for_28x28=*/false);  // the zoo's 32x32 input
  EXPECT_EQ(zoo32(zeros({1, 1, 32, 32})).shape(), (Shape{1, 10}));
}

TEST(Zoo, ResNetParameterCounts) {
  // Published counts (torchvision-equivalent architectures, 1000 classes, ImageNet stem, with
  // bias-free convs and a biased final Dense): ResNet-18 11,689,512; ResNet-34 21,797,672;
  // ResNet-50 25,557,032.
  EXPECT_EQ(count(*models::resnet18(1000, models::ResNetStem::ImageNet)), 11689512);
  EXPECT_EQ(count(*models::resnet34(1000, models::ResNetStem::ImageNet)), 21797672);
  EXPECT_EQ(count(*models::resnet50(1000, models::ResNetStem::ImageNet)), 25557032);
}

TEST(Zoo, ResNet18CifarForwardAndTrainStep) {
  set_seed(0);
  auto net = models::resnet18(10, models::ResNetStem::Cifar);
  Tensor x = randn({2, 3, 32, 32});
  Tensor y = tensor({3, 7}, kInt32);
  EXPECT_EQ((*net)(x).shape(), (Shape{2, 10}));
  auto imagenet = models::resnet18(10, models::ResNetStem::ImageNet);
  EXPECT_EQ((*imagenet)(randn({1, 3, 64, 64})).shape(), (Shape{1, 10}));
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  train::TrainOneStepCell step(
      std::make_shared<train::WithLossCell>(net, loss),
      std::make_shared<optim::Momentum>(net->trainable_params(), 0.01, 0.9));
  const double l0 = step(x, y).item<double>();
  double l = l0;
  for (int i = 0; i < 5; ++i) l = step(x, y).item<double>();
  EXPECT_LT(l, l0);
}

TEST(Zoo, MlpChecksItsInput) {
  models::MLP mlp({784, 32, 10});
  EXPECT_EQ(mlp(zeros({4, 1, 28, 28})).shape(), (Shape{4, 10}));
  EXPECT_THROW(mlp(zeros({4, 100})), Error);
}

}  // namespace
}  // namespace spore
