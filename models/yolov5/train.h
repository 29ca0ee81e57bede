// YOLOv5's training recipe (train.py, hyp.scratch-low.yaml) for the model zoo's YOLOv5:
//   - SGD, nesterov, momentum 0.937, three parameter groups: biases (no decay), BatchNorm weights
//     (no decay), other weights (weight decay 5e-4 * batch * accumulate / 64);
//   - warm-up over max(3 epochs, 100) iterations: bias lr from 0.1 down, other lrs from 0 up to
//     the schedule's value, momentum from 0.8 up to 0.937, and the accumulation count from 1 up;
//   - lr schedule per epoch: linear (1 - e / E) (1 - lrf) + lrf, or one-cycle cosine;
//   - gradient accumulation to a nominal batch of 64, gradient clipping at norm 10;
//   - an EMA of weights and buffers (decay 0.9999 (1 - exp(-updates / 2000))) used for evaluation.
// The data side (YoloDataSource, mosaic, letterbox, flips, HSV) and evaluation (decode, NMS,
// letterbox inverse, CocoEval) are here too, so the CLI's train / eval / predict are thin.
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/yolov5/loss.h"
#include "models/yolov5/yolov5.h"
#include "spore/data/dataset.h"
#include "spore/jit.h"
#include "spore/optim/optimizer.h"

namespace spore::models {

// SGD with nesterov momentum whose momentum can change per step (YOLOv5's warm-up):
// buf = m buf + (g + wd p); p -= lr (g + wd p + m buf). Groups: biases, BN weights, the rest.
class YoloSGD : public optim::Optimizer {
 public:
  YoloSGD(std::vector<optim::ParamGroup> groups, double lr, double momentum);
  std::string name() const override { return "YoloSGD"; }
  void set_momentum(double m) { momentum_ = m; }
  // Per-group learning rates, set by the schedule each step (group order as constructed).
  void set_group_lr(size_t group, double lr);
  size_t num_groups() const { return group_lr_.size(); }
  std::vector<std::pair<std::string, Tensor>> state() const override;

 protected:
  void update(size_t i, const Tensor& grad, double lr, double weight_decay) override;

 private:
  double momentum_;
  std::vector<double> group_lr_;
  std::vector<size_t> group_of_;
  std::vector<Tensor> bufs_;
};

// One training step's forward, loss and backward: {loss, lbox, lobj, lcls, grads of params
// (default net->trainable_params(); pass an optimizer's parameters() to get its order)...}. Graph
// mode: one compiled graph per input signature (the targets' padded capacity is part of it);
// PyNative: eager with the tape.
class YoloStep {
 public:
  // loss_scaled: the step takes a loss scale (mixed precision) and returns the gradients of
  // loss * scale (the caller unscales them); the scale is an input, so one compiled graph serves
  // every scale.
  YoloStep(std::shared_ptr<YoloV5> net, const YoloLossHyp& hyp, bool graph,
           std::vector<Tensor> params = {}, bool loss_scaled = false);
  // Returns (loss, lbox, lobj, lcls, gradients...).
  std::vector<Tensor> operator()(const Tensor& images, const std::array<LevelTargets, 3>& targets,
                                 double loss_scale = 1.0);
  const std::vector<Tensor>& params() const { return params_; }
  JitStats stats() const;

 private:
  std::vector<Tensor> run(const std::vector<Tensor>& in);
  std::shared_ptr<YoloV5> net_;
  YoloLossHyp hyp_;
  std::vector<Tensor> params_;
  bool loss_scaled_ = false;
  std::shared_ptr<JitFunction> compiled_;
};

// The three groups of YOLOv5's smart_optimizer: biases, BatchNorm gammas (no decay), others.
std::vector<optim::ParamGroup> yolo_param_groups(const nn::Cell& net, double weight_decay);

// Exponential moving average of a network's parameters and float buffers, kept in a second network
// of the same architecture (the one to evaluate and save).
class ModelEMA {
 public:
  ModelEMA(const nn::Cell& model, std::shared_ptr<nn::Cell> ema, double decay = 0.9999,
           double tau = 2000);
  void update(const nn::Cell& model);
  const std::shared_ptr<nn::Cell>& model() const { return ema_; }
  int64_t updates() const { return updates_; }
  void set_updates(int64_t u) { updates_ = u; }

 private:
  std::shared_ptr<nn::Cell> ema_;
  double decay_, tau_;
  int64_t updates_ = 0;
};

// A COCO-layout folder (DIR/{train2017,val2017}/, DIR/annotations/instances_*2017.json): the image
// files, each image's non-crowd boxes as YOLO labels (class index among the sorted category ids,
// [cx, cy, w, h] in pixels of the original image) and the category ids.
struct YoloSplit {
  std::string image_dir, annotation_file;
  std::vector<int64_t> image_ids;
  std::vector<std::string> files;
  std::vector<std::pair<int64_t, int64_t>> sizes;  // (h, w) from the annotation file
  std::vector<std::vector<std::array<float, 5>>>
      labels;                         // per image: class, x, y, w, h (COCO ltwh, pixels)
  std::vector<int64_t> category_ids;  // class index -> COCO category id
  std::vector<std::string> class_names;
};
YoloSplit load_yolo_split(const std::string& data_dir,
                          const std::string& split);  // "train" | "val"

struct YoloAugment {
  double mosaic = 1.0;  // probability of a 4-image mosaic
  double fliplr = 0.5;
  double hsv_h = 0.015, hsv_s = 0.7, hsv_v = 0.4;
  double translate = 0.1, scale = 0.5;
};
// Training samples: {image uint8 (img, img, 3), labels float32 (K, 5) [class, cx, cy, w, h]
// normalised}. Random choices come from data::sample_rng(), so results do not depend on workers.
data::Dataset yolo_train_dataset(const YoloSplit& split, int64_t img, const YoloAugment& aug,
                                 int num_workers, bool shuffle = true);

struct YoloTrainOptions {
  int64_t img = 320;
  int64_t epochs = 100;
  int64_t batch = 16;
  int64_t nbs = 64;  // nominal batch: gradients accumulate to it
  double lr0 = 0.01, lrf = 0.01, momentum = 0.937, weight_decay = 5e-4;
  double warmup_epochs = 3, warmup_momentum = 0.8, warmup_bias_lr = 0.1;
  bool cos_lr = false;
  double clip_norm = 10.0;
  bool graph = true;       // the forward + loss + backward as one compiled graph
  std::string amp = "O0";  // "O2" / "O3": low-precision compute (BatchNorm in float32 under O2)
  DType amp_dtype =
      kFloat16;  // float16: dynamic loss scaling (YOLOv5's GradScaler); bfloat16: none
  YoloAugment aug{};
  int num_workers = 2;
  int64_t limit = -1;  // use only the first N training images
};

struct YoloEpochLog {
  int64_t epoch = 0;
  double loss = 0, lbox = 0, lobj = 0, lcls = 0;  // epoch means (per image: loss / batch)
  double seconds = 0, images_per_s = 0, lr = 0;
};

// Runs YOLOv5's training loop on net; after each epoch calls on_epoch (which may evaluate the EMA
// model, save checkpoints, write metrics). Returns the EMA (the model to evaluate and save).
struct YoloStepStats {
  int64_t traces = 0, steps = 0;
};
std::shared_ptr<ModelEMA> train_yolo(
    const std::shared_ptr<YoloV5>& net, const std::shared_ptr<YoloV5>& ema_net,
    const YoloSplit& train, const YoloTrainOptions& o,
    const std::function<void(const YoloEpochLog&)>& on_epoch,
    const std::function<void(int64_t step, double loss)>& on_step = {});

struct YoloEvalOptions {
  int64_t img = 320;
  int64_t batch = 16;
  double conf_thres = 0.001, iou_thres = 0.6;
  int64_t max_det = 300;
  int64_t limit = -1;
  std::string save_json;  // write the detections as a COCO results file
};
// Letterboxes each val image, runs net (eval mode, compiled when graph), NMS, maps the boxes back
// and scores them with CocoEval against the split's annotation file. Returns the 12 numbers;
// summary (if given) receives pycocotools' 12 lines.
std::array<double, 12> evaluate_yolo(YoloV5& net, const YoloSplit& val, const YoloEvalOptions& o,
                                     std::string* summary = nullptr, bool graph = true);

}  // namespace spore::models
