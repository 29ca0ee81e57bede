// YOLOv5's training recipe (train.py, hyp.scratch-low.yaml) for the model zoo's YOLOv5:
//   - SGD, nesterov, momentum 0.937, three parameter groups: biases (no decay), BatchNorm weights
//     (no decay), other weights (weight decay 5e-4 * batch * accumulate / 64);
//   - warm-up over max(3 epochs, 100) iterations: bias lr from 0.1 down, other lrs from 0 up to
//     the schedule's value, momentum from 0.8 up to 0.937, and the accumulation count from 1 up;
//   - lr schedule per epoch: linear (1 - e / E) (1 - lrf) + lrf, or one-cycle cosine;
//   - gradient accumulation to a nominal batch of 64, gradient clipping at norm 10;
//   - an EMA of weights and buffers (decay 0.9999 (1 - exp(-updates / 2000))) used for evaluation.
// Training runs through train::Model (yolo_training builds the model, dataset and callbacks);
// the data side (mosaic, letterbox, flips, HSV, batched targets) and evaluation (decode, NMS,
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
#include "spore/train/callbacks.h"
#include "spore/train/model.h"

namespace spore::models {

// YOLOv5 with its loss, as one cell for train::Model (loss_fn = nullptr: the network computes
// the loss): forward({images float32 (B, 3, H, W), the 18 target tensors of flatten_targets})
// returns {loss, lbox, lobj, lcls}; TrainOneStepCell differentiates the loss and hands the three
// components to callbacks (RunContext::aux). Under mixed precision the loss is computed in
// float32 (MindSpore's O2 output cast).
class YoloWithLoss : public nn::Cell {
 public:
  YoloWithLoss(std::shared_ptr<YoloV5> net, const YoloLossHyp& hyp);
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  const std::shared_ptr<YoloV5>& network() const { return net_; }

 private:
  std::shared_ptr<YoloV5> net_;
  YoloLossHyp hyp_;
};

// The three groups of YOLOv5's smart_optimizer: biases, BatchNorm gammas (no decay), others.
std::vector<optim::ParamGroup> yolo_param_groups(const nn::Cell& net, double weight_decay);

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
// yolo_train_dataset in batches, each row what YoloWithLoss takes: {images float32 (B, 3, img,
// img) in [0, 1], the 18 target tensors of build_targets (padded to a power-of-two capacity, so
// Graph mode's shapes repeat)}. anchors: the network's (YoloDetect::anchors()).
data::Dataset yolo_train_batches(const YoloSplit& split, int64_t img, int64_t batch,
                                 const YoloAugment& aug, int num_workers, const Tensor& anchors,
                                 int64_t num_classes, const YoloLossHyp& hyp, bool shuffle = true);

struct YoloTrainOptions {
  int64_t img = 320;
  int64_t epochs = 100;
  int64_t batch = 16;
  int64_t nbs = 64;  // nominal batch: gradients accumulate to it
  double lr0 = 0.01, lrf = 0.01, momentum = 0.937, weight_decay = 5e-4;
  double warmup_epochs = 3, warmup_momentum = 0.8, warmup_bias_lr = 0.1;
  bool cos_lr = false;
  double clip_norm = 10.0;
  bool graph = true;       // evaluation compiled (training follows set_context's mode)
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

// YOLOv5's recipe as train::Model pieces; run it with
//   auto t = yolo_training(net, ema_net, split, o, on_epoch);
//   t.model->train(o.epochs, t.dataset, t.callbacks);
// The model: YoloWithLoss + Momentum (nesterov) over yolo_param_groups with weight decay
// 5e-4 * batch * accumulate / 64, gradient clipping at norm o.clip_norm, summed gradient
// accumulation to the nominal batch (GradAccumulation::kSum), and for float16 a dynamic loss
// scale that skips overflowed batches. The callbacks: LambdaLR (linear or one-cycle), WarmUp
// (bias lr from 0.1 down, other lrs from 0 up, momentum 0.8 -> 0.937, accumulation count from 1
// up, over max(3 epochs, 100) steps), EMA into ema_net (the network to evaluate and save), and
// one that calls on_epoch with the epoch's means. Training follows set_context's mode.
struct YoloTraining {
  std::shared_ptr<train::Model> model;
  data::Dataset dataset;
  train::Callbacks callbacks;
  std::shared_ptr<train::EMA> ema;
};
YoloTraining yolo_training(const std::shared_ptr<YoloV5>& net,
                           const std::shared_ptr<YoloV5>& ema_net, const YoloSplit& train,
                           const YoloTrainOptions& o,
                           const std::function<void(const YoloEpochLog&)>& on_epoch = {});

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
