#include "models/lenet.h"

namespace spore::models {

LeNet5::LeNet5(int64_t num_class, int64_t num_channel, bool pad_for_28x28)
    : conv1_(num_channel, 6, 5,
             pad_for_28x28 ? nn::Conv2dOptions{.pad_mode = "pad", .padding = 2}
                           : nn::Conv2dOptions{.pad_mode = "valid"}),
      conv2_(6, 16, 5, {.pad_mode = "valid"}),
      fc1_(16 * 5 * 5, 120, {.weight_init = nn::Normal(0.02)}),
      fc2_(120, 84, {.weight_init = nn::Normal(0.02)}),
      fc3_(84, num_class, {.weight_init = nn::Normal(0.02)}) {
  set_cls_name("LeNet5");
  register_cells("conv1", conv1_, "conv2", conv2_, "fc1", fc1_, "fc2", fc2_, "fc3", fc3_);
}

void LeNet5::shard(int64_t dp, int64_t mp) {
  conv1_.shard({{dp, 1, 1, 1}, {mp, 1, 1, 1}});
  conv2_.shard({{dp, mp, 1, 1}, {1, mp, 1, 1}});
  fc1_.shard({{dp, 1}, {mp, 1}});
  fc2_.shard({{dp, mp}, {1, mp}});
}

Tensor LeNet5::construct(const Tensor& x) {
  Tensor y = max_pool2d(relu(conv1_(x)), 2);      // (N, 6, 14, 14)
  y = max_pool2d(relu(conv2_(y)), 2).flatten(1);  // (N, 400)
  y = relu(fc1_(y));                              // (N, 120)
  y = relu(fc2_(y));                              // (N, 84)
  return fc3_(y);                                 // (N, num_class)
}

std::shared_ptr<nn::SequentialCell> lenet5_sequential(int64_t stages, int64_t num_class) {
  using nn::CellPtr;
  auto conv1 =
      std::make_shared<nn::Conv2d>(1, 6, 5, nn::Conv2dOptions{.pad_mode = "pad", .padding = 2});
  auto conv2 = std::make_shared<nn::Conv2d>(6, 16, 5, nn::Conv2dOptions{.pad_mode = "valid"});
  auto fc1 = std::make_shared<nn::Dense>(16 * 5 * 5, 120,
                                         nn::DenseOptions{.weight_init = nn::Normal(0.02)});
  auto fc2 =
      std::make_shared<nn::Dense>(120, 84, nn::DenseOptions{.weight_init = nn::Normal(0.02)});
  auto fc3 =
      std::make_shared<nn::Dense>(84, num_class, nn::DenseOptions{.weight_init = nn::Normal(0.02)});
  std::vector<std::pair<std::string, CellPtr>> cells = {
      {"conv1", conv1},
      {"relu1", std::make_shared<nn::ReLU>()},
      {"pool1", std::make_shared<nn::MaxPool2d>(2, 2)},
      {"conv2", conv2},
      {"relu2", std::make_shared<nn::ReLU>()},
      {"pool2", std::make_shared<nn::MaxPool2d>(2, 2)},
      {"flatten", std::make_shared<nn::Flatten>()},  // (N, 400): the end of stage 0
      {"fc1", fc1},
      {"relu3", std::make_shared<nn::ReLU>()},
      {"fc2", fc2},
      {"relu4", std::make_shared<nn::ReLU>()},
      {"fc3", fc3}};
  if (stages == 2)
    for (size_t i = 0; i < cells.size(); ++i) cells[i].second->set_pipeline_stage(i < 7 ? 0 : 1);
  auto net = std::make_shared<nn::SequentialCell>(cells);
  return net;
}

}  // namespace spore::models
