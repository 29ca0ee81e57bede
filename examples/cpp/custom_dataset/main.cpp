// A dataset of your own: any type with size() and operator[](i) returning a Row (one tensor per
// column) becomes a source with GeneratorDataset, and then shuffles, batches and trains like the
// built-in ones. Here: two interleaved spirals, generated on the fly, classified by an MLP.
// `custom_dataset [epochs]` (default 30).
#include <spore/spore.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <numbers>

using namespace spore;

struct Spirals {
  int64_t points_per_arm = 512;
  int64_t size() const { return 2 * points_per_arm; }
  data::Row operator[](int64_t i) const {  // columns "point" float32 (2,), "label" int32 ()
    const int label = int(i % 2);
    const double t = 0.25 + 2.5 * double(i / 2) / double(points_per_arm);  // along the arm
    const double angle = 2 * t + label * std::numbers::pi;
    return {tensor({t * std::cos(angle), t * std::sin(angle)}), scalar_tensor(label, kInt32)};
  }
};

int main(int argc, char** argv) {
  const int64_t epochs = argc > 1 ? std::atoll(argv[1]) : 30;
  set_seed(2);
  auto train = data::GeneratorDataset(Spirals{}, {"point", "label"}, {.shuffle = true}).batch(32);
  auto test = data::GeneratorDataset(Spirals{}, {"point", "label"}).batch(256);
  std::cout << "columns:";
  for (const auto& c : train.get_col_names()) std::cout << " " << c;
  std::cout << "; " << train.get_dataset_size() << " batches per epoch\n";

  auto net = std::make_shared<nn::SequentialCell>(std::initializer_list<nn::CellPtr>{
      std::make_shared<nn::Dense>(2, 64), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Dense>(64, 64), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Dense>(64, 2)});
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  train::Model model(net, loss, optim::Adam(net->trainable_params(), 0.01), {"accuracy"});
  std::cout << "accuracy before training: " << model.eval(test)["accuracy"] << "\n";
  model.train(epochs, train, {train::LossMonitor(32)});  // the loss at each epoch's last step
  std::cout << "accuracy after " << epochs << " epochs: " << model.eval(test)["accuracy"] << "\n";
}
