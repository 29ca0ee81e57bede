// YOLOv5s (80 classes) at 320 x 320: a training step at batch 16 (forward, YOLOv5's loss, backward
// and the nesterov Momentum update over YOLOv5's groups: the TrainOneStepCell every model trains
// with) in Graph mode and PyNative, and inference (eval mode, decoded output) at
// batch 1 and 16 in Graph mode and PyNative. Synthetic images and six boxes per image, targets
// built once. bench/peers/yolov5.sh runs this next to PyTorch eager on the same shapes.
#include <benchmark/benchmark.h>

#include "models/yolov5/train.h"
#include "spore/spore.h"

using namespace spore;

namespace {

constexpr int64_t kImg = 320;

Tensor synthetic_targets(int64_t batch) {
  const int64_t per = 6;
  Tensor t = Tensor::empty({batch * per, 6}, kFloat32);
  const Tensor u = rand({batch * per, 4});
  const auto v = u.to_vector<float>();
  float* p = t.data<float>();
  for (int64_t i = 0; i < batch * per; ++i) {
    p[i * 6] = float(i / per);
    p[i * 6 + 1] = float(i % 80);
    p[i * 6 + 2] = 0.2f + 0.6f * v[size_t(i * 4)];
    p[i * 6 + 3] = 0.2f + 0.6f * v[size_t(i * 4 + 1)];
    p[i * 6 + 4] = 0.05f + 0.3f * v[size_t(i * 4 + 2)];
    p[i * 6 + 5] = 0.05f + 0.3f * v[size_t(i * 4 + 3)];
  }
  return t;
}

void train_step(benchmark::State& state, Mode mode) {
  set_num_threads(2);
  set_seed(0);
  set_context({.mode = mode});
  const int64_t batch = state.range(0);
  auto net = models::yolov5("s", 80);
  net->set_train(true);
  auto opt = std::make_shared<optim::Momentum>(models::yolo_param_groups(*net, 5e-4), 0.01, 0.937,
                                               optim::MomentumOptions{.nesterov = true});
  opt->set_clip_grad_norm(10.0);
  const auto hyp = models::scaled_hyp(80, kImg);
  auto step = std::make_shared<train::TrainOneStepCell>(
      std::make_shared<models::YoloWithLoss>(net, hyp), opt);
  std::vector<Tensor> in{rand({batch, 3, kImg, kImg})};
  for (const Tensor& t : models::flatten_targets(models::build_targets(
           synthetic_targets(batch), batch, net->detect().anchors(),
           {{{kImg / 8, kImg / 8}, {kImg / 16, kImg / 16}, {kImg / 32, kImg / 32}}}, 80, hyp)))
    in.push_back(t);
  auto one = [&] { return step->forward(in)[0]; };
  one();  // Graph: compiles
  for (auto _ : state) benchmark::DoNotOptimize(one());
  state.SetItemsProcessed(state.iterations() * batch);
  set_context({.mode = Mode::PyNative});
}

void infer(benchmark::State& state, Mode mode) {
  set_num_threads(2);
  set_seed(0);
  const int64_t batch = state.range(0);
  auto net = models::yolov5("s", 80);
  net->set_train(false);
  const Tensor x = rand({batch, 3, kImg, kImg});
  auto f = jit([&](const std::vector<Tensor>& a) { return std::vector<Tensor>{(*net)(a[0])}; },
               {.name = "yolo_infer"});
  auto one = [&] {
    NoGradGuard ng;
    return mode == Mode::Graph ? f({x})[0] : (*net)(x);
  };
  for (int i = 0; i < 2; ++i) benchmark::DoNotOptimize(one());
  for (auto _ : state) benchmark::DoNotOptimize(one());
  state.SetItemsProcessed(state.iterations() * batch);
}

}  // namespace

static void BM_YoloV5sTrainStep_Graph(benchmark::State& s) { train_step(s, Mode::Graph); }
static void BM_YoloV5sTrainStep_PyNative(benchmark::State& s) { train_step(s, Mode::PyNative); }
static void BM_YoloV5sInfer_Graph(benchmark::State& s) { infer(s, Mode::Graph); }
static void BM_YoloV5sInfer_PyNative(benchmark::State& s) { infer(s, Mode::PyNative); }
BENCHMARK(BM_YoloV5sTrainStep_Graph)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);
BENCHMARK(BM_YoloV5sTrainStep_PyNative)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);
BENCHMARK(BM_YoloV5sInfer_Graph)
    ->Arg(1)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);
BENCHMARK(BM_YoloV5sInfer_PyNative)
    ->Arg(1)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);

BENCHMARK_MAIN();
