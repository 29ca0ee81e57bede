// The YOLOv5 training pieces: YoloWithLoss's compiled gradients equal the eager ones, the loss
// falls on a fixed batch in both modes through TrainOneStepCell (with its aux outputs), the
// optimizer's groups and nesterov update, the batched dataset, and yolo_training's pieces.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "models/yolov5/train.h"
#include "spore/amp.h"
#include "spore/autograd.h"
#include "spore/context.h"
#include "spore/detection/shapes.h"
#include "spore/grad_mode.h"
#include "spore/jit.h"
#include "spore/ops.h"
#include "spore/optim/optimizers.h"
#include "spore/train/wrappers.h"
#include "test_util.h"

namespace spore {
namespace {

constexpr int64_t kImg = 64;

std::array<models::LevelTargets, 3> two_image_targets(const models::YoloV5& net) {
  Tensor t = Tensor::empty({3, 6}, kFloat32);
  const float v[] = {0,    1,    0.5f,  0.5f, 0.4f, 0.3f, 0,     2,    0.25f,
                     0.3f, 0.2f, 0.25f, 1,    0,    0.6f, 0.55f, 0.5f, 0.6f};
  std::copy(v, v + 18, t.data<float>());
  return models::build_targets(
      t, 2, const_cast<models::YoloV5&>(net).detect().anchors(),
      {{{kImg / 8, kImg / 8}, {kImg / 16, kImg / 16}, {kImg / 32, kImg / 32}}}, 3,
      models::scaled_hyp(3, kImg));
}

// YoloWithLoss's loss, components and gradients: {loss, lbox, lobj, lcls, grads...}, eager or
// compiled (one graph per signature; the loss scale is an input, so one graph serves every scale).
class LossAndGrads {
 public:
  LossAndGrads(std::shared_ptr<models::YoloV5> net, const models::YoloLossHyp& hyp, bool graph)
      : cell_(std::make_shared<models::YoloWithLoss>(net, hyp)), params_(net->trainable_params()) {
    if (graph)
      jit_ =
          std::make_shared<JitFunction>([this](const std::vector<Tensor>& in) { return run(in); },
                                        JitOptions{.name = "yolo_grads"});
  }
  std::vector<Tensor> operator()(const Tensor& x, const std::array<models::LevelTargets, 3>& t,
                                 double scale = 1.0) {
    std::vector<Tensor> in{x};
    for (const Tensor& v : models::flatten_targets(t)) in.push_back(v);
    in.push_back(full({}, scale, kFloat32));
    return jit_ ? (*jit_)(in) : run(in);
  }
  JitStats stats() const { return jit_ ? jit_->stats() : JitStats{}; }

 private:
  std::vector<Tensor> run(const std::vector<Tensor>& in) {
    EnableGradGuard eg;
    std::vector<Tensor> out = cell_->forward(std::vector<Tensor>(in.begin(), in.end() - 1));
    const Tensor loss = out[0];
    out[0] = loss.detach();
    for (Tensor& g : autograd::grad(loss * in.back(), params_)) out.push_back(g);
    return out;
  }
  std::shared_ptr<models::YoloWithLoss> cell_;
  std::vector<Tensor> params_;
  std::shared_ptr<JitFunction> jit_;
};

TEST(YoloTrain, GraphStepEqualsPyNative) {
  set_seed(5);
  auto net = models::yolov5("n", 3);
  net->set_train(true);
  const Tensor x = rand({2, 3, kImg, kImg});
  const auto t = two_image_targets(*net);
  const auto hyp = models::scaled_hyp(3, kImg);
  // BatchNorm's moving statistics change with every step: save and restore them between the runs.
  std::vector<Tensor> saved;
  for (auto& [n, b] : net->named_buffers()) saved.push_back(b.clone());
  LossAndGrads eager(net, hyp, false);
  const auto e = eager(x, t);
  size_t k = 0;
  for (auto& [n, b] : net->named_buffers()) assign(b, saved[k++]);
  LossAndGrads graph(net, hyp, true);
  const auto g = graph(x, t);
  EXPECT_EQ(graph.stats().traces, 1);
  ASSERT_EQ(e.size(), g.size());
  EXPECT_NEAR(g[0].item<double>(), e[0].item<double>(), 1e-4 * std::abs(e[0].item<double>()));
  double worst = 0;
  for (size_t i = 4; i < e.size(); ++i) {
    const auto a = e[i].to_vector<float>(), b = g[i].to_vector<float>();
    double scale = 1e-6;
    for (float v : a) scale = std::max(scale, double(std::abs(v)));
    for (size_t j = 0; j < a.size(); ++j)
      worst = std::max(worst, std::abs(double(a[j]) - double(b[j])) / scale);
  }
  EXPECT_LT(worst, 2e-3);
}

// Through the one training path (TrainOneStepCell: forward, loss, backward, the nesterov Momentum
// over YOLOv5's groups with clipping, compiled whole in Graph mode); its aux outputs are the loss
// components.
void loss_falls(bool graph) {
  set_seed(6);
  set_context({.mode = graph ? Mode::Graph : Mode::PyNative});
  auto net = models::yolov5("n", 3);
  net->set_train(true);
  auto opt = std::make_shared<optim::Momentum>(models::yolo_param_groups(*net, 5e-4), 0.02, 0.9,
                                               optim::MomentumOptions{.nesterov = true});
  opt->set_clip_grad_norm(10.0);
  auto step = std::make_shared<train::TrainOneStepCell>(
      std::make_shared<models::YoloWithLoss>(net, models::scaled_hyp(3, kImg)), opt);
  const Tensor x = rand({2, 3, kImg, kImg});
  std::vector<Tensor> in{x};
  for (const Tensor& v : models::flatten_targets(two_image_targets(*net))) in.push_back(v);
  // The loss is noisy step to step (the objectness target is the prediction's own IoU): compare the
  // first step with the mean of the last four.
  double first = 0, last = 0;
  const int steps = 30;
  for (int i = 0; i < steps; ++i) {
    const auto out = step->forward(in);
    ASSERT_EQ(out.size(), 4u);
    ASSERT_EQ(step->last_aux().size(), 3u);
    const double parts = out[1].item<double>() + out[2].item<double>() + out[3].item<double>();
    EXPECT_NEAR(out[0].item<double>(), parts * 2, 1e-4 * std::abs(out[0].item<double>()));
    if (i == 0) first = out[0].item<double>();
    if (i >= steps - 4) last += out[0].item<double>() / 4;
    if (std::getenv("SPORE_TEST_VERBOSE"))
      std::printf("%s step %d loss %.6f\n", graph ? "graph" : "pynative", i, out[0].item<double>());
  }
  set_context({.mode = Mode::PyNative});
  // The convolution implementation is chosen by timing (conv_list.cpp), so a loaded machine may
  // pick another one; its rounding differs and 30 steps of this loss amplify it: last/first was
  // seen from 0.61 to 0.77 on one machine. 0.8 still fails a step that does not learn.
  EXPECT_LT(last, 0.8 * first) << (graph ? "graph" : "pynative") << ": " << first << " -> " << last;
  if (graph) EXPECT_EQ(step->jit_stats().traces, 1);
}
// The gradients (outputs 4..) as one vector: the cosine of the angle between two such vectors and
// the ratio of their lengths. `scale` divides b (a loss-scaled step's gradients).
struct GradientAgreement {
  double cosine, norm_ratio;
};
GradientAgreement agreement(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                            double scale = 1) {
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 4; i < a.size(); ++i) {
    const auto va = a[i].to_vector<float>(), vb = b[i].to_vector<float>();
    for (size_t j = 0; j < va.size(); ++j) {
      EXPECT_TRUE(std::isfinite(vb[j])) << "gradient " << i << " element " << j;
      const double bj = double(vb[j]) / scale;
      dot += double(va[j]) * bj, na += double(va[j]) * va[j], nb += bj * bj;
    }
  }
  return {dot / std::sqrt(na * nb), std::sqrt(nb / na)};
}

// Mixed precision (--amp O2): float16 compute with float32 BatchNorm and a loss scale. The unscaled
// gradients and the loss match the float32 step to float16 accuracy, and one compiled graph serves
// every scale (the scale is an input).
TEST(YoloTrain, MixedPrecisionStepMatchesFloat32) {
  set_seed(5);
  auto net = models::yolov5("n", 3);
  net->set_train(true);
  const Tensor x = rand({2, 3, kImg, kImg});
  const auto t = two_image_targets(*net);
  const auto hyp = models::scaled_hyp(3, kImg);
  auto half = models::yolov5("n", 3);  // the same weights and statistics, computing in float16
  for (size_t i = 0; i < half->parameters_and_buffers().size(); ++i)
    assign(half->parameters_and_buffers()[i].second, net->parameters_and_buffers()[i].second);
  half->set_train(true);
  amp::auto_mixed_precision(*half, amp::Level::O2, kFloat16, true);
  std::vector<Tensor> saved;  // BatchNorm's statistics move with every step: restore between runs
  for (auto& [n, b] : half->named_buffers()) saved.push_back(b.clone());
  LossAndGrads f32(net, hyp, true);
  const auto ref = f32(x, t);
  // How far float32's own gradients move when the input moves by float16's rounding (relative
  // 2^-11 .. 2^-10): at this random initialisation, with batch-2 BatchNorm over 2x2 maps, the
  // gradients are that sensitive (seen: cosine 0.993, norm ratio 1.018). float16 rounds every
  // activation, so it is held to this figure less a margin, not to a fixed one: float16 gave
  // cosine 0.991 on AVX2 (Zen 3) and 0.983 on another CI machine. A wrong gradient rule gives far
  // less, an unscaled gradient a norm ratio of 1024.
  const Tensor jitter = (rand({2, 3, kImg, kImg}) * 2.0 - 1.0) * 1e-3;  // uniform in [-1e-3, 1e-3]
  const auto moved = f32(x * (1.0 + jitter), t);
  const GradientAgreement floor = agreement(ref, moved);
  std::printf(
      "float32 with the input moved by 1e-3 relative: gradient cosine %.5f, norm ratio %.4f\n",
      floor.cosine, floor.norm_ratio);
  LossAndGrads step(half, hyp, true);
  for (const double scale : {1024.0, 65536.0}) {
    size_t k = 0;
    for (auto& [n, b] : half->named_buffers()) assign(b, saved[k++]);
    const auto out = step(x, t, scale);
    EXPECT_NEAR(out[0].item<double>(), ref[0].item<double>(),
                1e-3 * std::abs(ref[0].item<double>()));
    const GradientAgreement g = agreement(ref, out, scale);
    std::printf(
        "amp O2 float16, loss scale %g: loss %.6f vs %.6f (float32), gradient cosine %.5f, norm "
        "ratio %.4f\n",
        scale, out[0].item<double>(), ref[0].item<double>(), g.cosine, g.norm_ratio);
    EXPECT_GT(g.cosine, std::min(floor.cosine, 0.99) - 0.02) << "scale " << scale;
    EXPECT_GT(g.cosine, 0.95) << "scale " << scale;
    EXPECT_NEAR(g.norm_ratio, 1.0, std::max(0.02, 2 * std::abs(floor.norm_ratio - 1)))
        << "scale " << scale;
  }
  EXPECT_EQ(step.stats().traces, 1);  // the scale is an input: one graph for every scale
}

TEST(YoloTrain, LossFallsGraph) { loss_falls(true); }
TEST(YoloTrain, LossFallsPyNative) { loss_falls(false); }

TEST(YoloTrain, ParamGroupsAndNesterovUpdate) {
  auto net = models::yolov5("n", 3);
  const auto groups = models::yolo_param_groups(*net, 5e-4);
  ASSERT_EQ(groups.size(), 3u);
  // biases (conv biases + BN betas), conv weights (decay), BN gammas.
  EXPECT_EQ(groups[0].weight_decay.value(), 0.0);
  EXPECT_EQ(groups[1].weight_decay.value(), 5e-4);
  EXPECT_EQ(groups[2].weight_decay.value(), 0.0);
  for (const auto& n : groups[0].names)
    EXPECT_TRUE(n.ends_with("bias") || n.ends_with("beta")) << n;
  for (const auto& n : groups[2].names) EXPECT_TRUE(n.ends_with("gamma")) << n;
  EXPECT_EQ(groups[1].names.front(), "model.0.conv.weight");
  EXPECT_EQ(groups[0].params.size(), groups[2].params.size() + 3);  // + Detect's three conv biases
  // One parameter by hand with the nesterov Momentum YOLOv5 trains with: p = 1, g = 0.5, wd 0.1,
  // lr 0.1, momentum 0.9 (buf 0): g' = 0.6, buf = 0.6, p -= 0.1 (0.6 + 0.9 * 0.6) = 0.114 ->
  // 0.886; then set_momentum(0.5), same g: g' = 0.5 + 0.0886 = 0.5886, buf = 0.3 + 0.5886 =
  // 0.8886, p -= 0.1 (0.5886 + 0.4443).
  Tensor p = ones({1});
  p.set_requires_grad(true);
  optim::Momentum opt({{.params = {p}, .weight_decay = 0.1}}, 0.1, 0.9,
                      optim::MomentumOptions{.nesterov = true});
  opt.step({full_like(p.detach(), 0.5)});
  EXPECT_NEAR(p.item<double>(), 0.886, 1e-6);
  opt.set_momentum(0.5);
  opt.set_group_lr(0, 0.1);
  opt.step({full_like(p.detach(), 0.5)});
  EXPECT_NEAR(p.item<double>(), 0.886 - 0.1 * (0.5886 + 0.5 * 0.8886), 1e-6);
}

TEST(YoloTrain, EmaFollowsWithWarmingDecay) {
  set_seed(7);
  auto net = models::yolov5("n", 3), ema_net = models::yolov5("n", 3);
  train::EMA ema(*net, ema_net);
  const Tensor w = net->named_parameters()[0].second;
  const Tensor e = ema_net->named_parameters()[0].second;
  EXPECT_EQ(w.to_vector<float>(), e.to_vector<float>());  // starts as a copy
  const float w0 = w.to_vector<float>()[0];
  {
    NoGradGuard ng;
    assign(w, w + 1.0);
  }
  ema.update(*net);  // d = 0.9999 (1 - exp(-1 / 2000)) ~ 5e-4: the EMA moves almost all the way
  const double d = 0.9999 * (1 - std::exp(-1.0 / 2000));
  EXPECT_NEAR(e.to_vector<float>()[0], d * w0 + (1 - d) * (w0 + 1), 1e-5);
  EXPECT_FALSE(ema_net->training());
}

// The batched rows: images float32 (B, 3, img, img) in [0, 1] and the 18 target tensors, the
// labels of every image in (padding left out); yolo_training's pieces as the recipe says.
TEST(YoloTrain, BatchedDatasetAndRecipe) {
  const std::string data =
      (std::filesystem::temp_directory_path() / ("spore_yolo_batches_" + std::to_string(getpid())))
          .string();
  detection::make_shapes_dataset(data, {.train = 8, .val = 0, .size = 96, .seed = 4});
  const models::YoloSplit split = models::load_yolo_split(data, "train");
  auto net = models::yolov5("n", int64_t(split.category_ids.size()));
  const auto hyp = models::scaled_hyp(net->num_classes(), kImg);
  data::Dataset ds = models::yolo_train_batches(
      split, kImg, 4, {.mosaic = 0}, 1, net->detect().anchors(), net->num_classes(), hyp, false);
  auto it = ds.create_tuple_iterator();
  const auto row = it->next();
  ASSERT_TRUE(row.has_value());
  ASSERT_EQ(row->size(), 19u);
  EXPECT_EQ((*row)[0].shape(), (Shape{4, 3, kImg, kImg}));
  EXPECT_EQ((*row)[0].dtype(), kFloat32);
  const int64_t cap = (*row)[1].size(0);
  EXPECT_GE(cap, 256);
  EXPECT_EQ(cap & (cap - 1), 0) << "capacity " << cap << " is not a power of two";
  double matches = 0;
  for (int l = 0; l < 3; ++l) matches += (*row)[1 + 6 * l + 4].sum().item<double>();
  size_t labels = 0;
  for (int i = 0; i < 4; ++i) labels += split.labels[size_t(i)].size();
  EXPECT_GE(matches, double(labels)) << "every box trains at least one cell";

  auto ema_net = models::yolov5("n", net->num_classes());
  models::YoloTrainOptions o{.img = kImg, .epochs = 2, .batch = 8};
  const models::YoloTraining t = models::yolo_training(net, ema_net, split, o);
  ASSERT_EQ(t.callbacks.size(), 4u);  // LambdaLR, WarmUp, EMA, the epoch log
  EXPECT_EQ(t.model->train_network()->grad_accumulation(), 8);  // 64 / 8
  EXPECT_EQ(t.model->train_network()->grad_accumulation_mode(), train::GradAccumulation::kSum);
  const optim::Optimizer& opt = *t.model->optimizer();
  EXPECT_EQ(opt.name(), "Momentum");
  EXPECT_EQ(opt.num_groups(), 3u);
  EXPECT_EQ(opt.clip_grad_norm(), 10.0);
  EXPECT_NEAR(opt.momentum().value(), 0.937, 1e-12);
  // Model::train runs it (Graph mode): one update per step while the warm-up's count is 1, the
  // EMA after each, the epoch's means from the aux outputs.
  set_context({.mode = Mode::Graph});
  std::vector<models::YoloEpochLog> logs;
  const models::YoloTraining run = models::yolo_training(
      net, ema_net, split, o, [&](const models::YoloEpochLog& l) { logs.push_back(l); });
  run.model->train(o.epochs, run.dataset, run.callbacks);
  set_context({.mode = Mode::PyNative});
  ASSERT_EQ(logs.size(), 2u);
  for (const auto& l : logs) {
    EXPECT_TRUE(std::isfinite(l.loss) && l.loss > 0) << l.loss;
    EXPECT_NEAR(l.loss, l.lbox + l.lobj + l.lcls, 1e-4 * l.loss);
  }
  EXPECT_EQ(run.model->optimizer()->global_step(), 2);
  EXPECT_EQ(run.ema->updates(), 2);
  std::filesystem::remove_all(data);
}

}  // namespace
}  // namespace spore
