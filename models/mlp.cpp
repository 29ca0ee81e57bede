#include "models/mlp.h"

namespace spore::models {

MLP::MLP(std::vector<int64_t> sizes, std::string activation, double dropout) {
  SPORE_CHECK(sizes.size() >= 2, "[MLP] needs at least {in, out} sizes, got ", sizes.size());
  set_cls_name("MLP");
  in_ = sizes.front();
  std::vector<nn::CellPtr> layers;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    const bool last = i + 2 == sizes.size();
    layers.push_back(std::make_shared<nn::Dense>(
        sizes[i], sizes[i + 1], nn::DenseOptions{.activation = last ? "" : activation}));
    if (!last && dropout > 0) layers.push_back(std::make_shared<nn::Dropout>(dropout));
  }
  body_ = std::make_shared<nn::SequentialCell>(layers);
  register_cell("layers", body_);
}

Tensor MLP::construct(const Tensor& x) {
  Tensor flat = x.dim() == 2 ? x : x.flatten(1);  // (N, in)
  SPORE_CHECK(flat.size(-1) == in_, "[MLP] expected ", in_, " input features, got shape ",
              shape_str(x.shape()));
  return (*body_)(flat);
}

}  // namespace spore::models
