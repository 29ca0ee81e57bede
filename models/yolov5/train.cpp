// YOLOv5's training recipe and evaluation (models/yolov5/train.h). Training is train::Model's
// loop: the with-loss cell, the batched dataset (targets built on the host and padded to a
// power-of-two capacity so the graph's shapes repeat) and the optimizer / callback settings of
// train.py; the warm-up, schedule, accumulation and EMA are the framework's general ones.
#include "models/yolov5/train.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "spore/amp.h"
#include "spore/autograd.h"
#include "spore/context.h"
#include "spore/data/sample_rng.h"
#include "spore/data/vision.h"
#include "spore/detection/detection.h"
#include "spore/grad_mode.h"
#include "spore/metrics/coco_eval.h"
#include "spore/ops.h"
#include "spore/optim/optimizers.h"

namespace spore::models {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// (B, H, W, 3) uint8 images -> (B, 3, H, W) float32 in [0, 1].
Tensor batch_to_chw_float(const Tensor& imgs) {
  const Tensor src = imgs.contiguous();
  const int64_t B = src.size(0), H = src.size(1), W = src.size(2);
  Tensor x = Tensor::empty({B, 3, H, W}, kFloat32);
  float* dst = x.data<float>();
  const uint8_t* s = src.data<uint8_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t i = 0; i < H * W; ++i)
        dst[((b * 3 + c) * H * W) + i] = float(s[(b * H * W + i) * 3 + c]) * (1.f / 255.f);
  return x;
}

Tensor to_chw_float(const std::vector<Tensor>& imgs) {
  const int64_t B = int64_t(imgs.size()), H = imgs[0].size(0), W = imgs[0].size(1);
  Tensor x = Tensor::empty({B, 3, H, W}, kFloat32);
  float* dst = x.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    const Tensor src = imgs[size_t(b)].contiguous();
    SPORE_CHECK(src.size(0) == H && src.size(1) == W && src.size(2) == 3,
                "[yolov5] images of one batch must share (H, W, 3)");
    const uint8_t* s = src.data<uint8_t>();
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t i = 0; i < H * W; ++i)
        dst[((b * 3 + c) * H * W) + i] = float(s[i * 3 + c]) * (1.f / 255.f);
  }
  return x;
}

// YOLOv5's augment_hsv: random gains for hue, saturation and value applied through lookup tables.
void augment_hsv(Tensor& img, double hg, double sg, double vg) {
  if (hg == 0 && sg == 0 && vg == 0) return;
#ifdef SPORE_LEAN  // cmake/lean.cmake: no OpenCV library
  SPORE_THROW(ErrorKind::NotImplemented,
              "YOLOv5's HSV augmentation needs OpenCV, which this lean build "
              "(SPORE_LEAN) leaves out: set the hsv gains to 0 or use a full build");
#else
  auto& rng = data::sample_rng();
  const double r[3] = {rng.uniform(-1, 1) * hg + 1, rng.uniform(-1, 1) * sg + 1,
                       rng.uniform(-1, 1) * vg + 1};
  cv::Mat rgb(int(img.size(0)), int(img.size(1)), CV_8UC3, img.data_ptr()), hsv;
  cv::cvtColor(rgb, hsv, cv::COLOR_RGB2HSV);
  cv::Mat lut(1, 256, CV_8UC3);
  for (int i = 0; i < 256; ++i)
    lut.at<cv::Vec3b>(0, i) =
        cv::Vec3b(uchar(int(i * r[0]) % 180), cv::saturate_cast<uchar>(i * r[1]),
                  cv::saturate_cast<uchar>(i * r[2]));
  cv::LUT(hsv, lut, hsv);
  cv::cvtColor(hsv, rgb, cv::COLOR_HSV2RGB);
#endif
}

}  // namespace

// ---- the with-loss cell
// --------------------------------------------------------------------------

YoloWithLoss::YoloWithLoss(std::shared_ptr<YoloV5> net, const YoloLossHyp& hyp)
    : net_(std::move(net)), hyp_(hyp) {
  SPORE_CHECK(net_ != nullptr, "[YoloWithLoss] the network is null; pass models::yolov5(...)");
  set_cls_name("YoloWithLoss");
  register_cell("network", net_);
}

std::vector<Tensor> YoloWithLoss::forward(const std::vector<Tensor>& inputs) {
  SPORE_CHECK(inputs.size() == 19,
              "[YoloWithLoss] expected 19 inputs (images and the 18 target "
              "tensors of flatten_targets: 6 per level), got ",
              inputs.size(), "; feed it the rows of yolo_train_batches");
  std::vector<Tensor> raw = net_->forward({inputs[0]});
  for (Tensor& r : raw)  // mixed precision: the loss in float32 (MindSpore's O2 output cast)
    if (r.dtype() != kFloat32) r = r.to(kFloat32);
  const YoloLoss L = yolo_loss(raw, std::vector<Tensor>(inputs.begin() + 1, inputs.end()), hyp_);
  return {L.loss, L.lbox.detach(), L.lobj.detach(), L.lcls.detach()};
}

std::vector<optim::ParamGroup> yolo_param_groups(const nn::Cell& net, double weight_decay) {
  optim::ParamGroup biases, weights, bn;
  biases.weight_decay = 0.0;
  weights.weight_decay = weight_decay;
  bn.weight_decay = 0.0;
  for (const auto& [name, p] : net.named_parameters()) {
    optim::ParamGroup& g = ends_with(name, "bias") || ends_with(name, "beta") ? biases
                           : ends_with(name, "gamma")                         ? bn
                                                                              : weights;
    g.params.push_back(p);
    g.names.push_back(name);
  }
  return {biases, weights, bn};  // smart_optimizer's order: biases first (their warm-up lr falls)
}

// ---- data ---------------------------------------------------------------------------------------

YoloSplit load_yolo_split(const std::string& dir, const std::string& split) {
  YoloSplit s;
  s.image_dir = (fs::path(dir) / (split + "2017")).string();
  s.annotation_file =
      (fs::path(dir) / "annotations" / ("instances_" + split + "2017.json")).string();
  SPORE_CHECK_KIND(
      ErrorKind::IOError, fs::is_directory(s.image_dir) && fs::is_regular_file(s.annotation_file),
      "[yolov5] expected a COCO-layout data folder: ", s.image_dir, "/ and ", s.annotation_file,
      " (missing); generate one with `spore data make-shapes --out ", dir,
      "` or point --data at a folder holding train2017/, val2017/ and annotations/");
  const metrics::Coco gt = metrics::Coco::load(s.annotation_file);
  s.category_ids = gt.category_ids();
  SPORE_CHECK(!s.category_ids.empty(), "[yolov5] ", s.annotation_file, " has no categories");
  std::unordered_map<int64_t, int64_t> cls_of, img_of;
  for (size_t k = 0; k < s.category_ids.size(); ++k) cls_of[s.category_ids[k]] = int64_t(k);
  s.class_names.resize(s.category_ids.size());
  for (const auto& c : gt.categories()) s.class_names[size_t(cls_of[c.id])] = c.name;
  for (const auto& img : gt.images()) {
    img_of[img.id] = int64_t(s.image_ids.size());
    s.image_ids.push_back(img.id);
    s.files.push_back((fs::path(s.image_dir) / img.file_name).string());
    s.sizes.emplace_back(img.height, img.width);
  }
  s.labels.resize(s.image_ids.size());
  for (const auto& a : gt.annotations()) {
    if (a.iscrowd || a.bbox[2] <= 0 || a.bbox[3] <= 0)
      continue;  // YOLOv5's COCO labels leave crowds out
    const auto c = cls_of.find(a.category_id);
    if (c == cls_of.end()) continue;
    s.labels[size_t(img_of[a.image_id])].push_back(
        {float(c->second), float(a.bbox[0]), float(a.bbox[1]), float(a.bbox[2]), float(a.bbox[3])});
  }
  return s;
}

namespace {

// {image uint8 (H, W, 3), boxes float32 (K, 4) ltwh, classes int32 (K, 1)} of image i.
data::Row load_sample(const YoloSplit& s, int64_t i) {
  Tensor img = detection::read_image(s.files[size_t(i)]);
  const auto& L = s.labels[size_t(i)];
  const int64_t k = int64_t(L.size());
  Tensor boxes = Tensor::empty({k, 4}, kFloat32), cls = Tensor::empty({k, 1}, kInt32);
  for (int64_t j = 0; j < k; ++j) {
    std::memcpy(boxes.data<float>() + j * 4, &L[size_t(j)][1], 4 * sizeof(float));
    cls.data<int32_t>()[j] = int32_t(L[size_t(j)][0]);
  }
  return {img, boxes, cls};
}

}  // namespace

data::Dataset yolo_train_dataset(const YoloSplit& split, int64_t img, const YoloAugment& aug,
                                 int num_workers, bool shuffle) {
  const int64_t n = int64_t(split.files.size());
  SPORE_CHECK(n > 0, "[yolov5] the training split ", split.annotation_file, " has no images");
  auto sp = std::make_shared<const YoloSplit>(split);
  const vision::RowFn letterbox = vision::Letterbox({img, img});
  const vision::RowFn affine_mosaic = vision::RandomAffineWithBBox(
      {.translate = aug.translate, .scale = aug.scale, .size = {img, img}});
  const vision::RowFn affine =
      vision::RandomAffineWithBBox({.translate = aug.translate, .scale = aug.scale});
  const vision::RowFn flip = vision::RandomHorizontalFlipWithBBox(aug.fliplr);
  auto fn = [sp, n, img, aug, letterbox, affine_mosaic, affine, flip](int64_t i) -> data::Row {
    auto& rng = data::sample_rng();
    data::Row r;
    if (aug.mosaic > 0 && rng.bernoulli(aug.mosaic)) {
      std::vector<data::Row> four{letterbox(load_sample(*sp, i))};
      for (int k = 0; k < 3; ++k) four.push_back(letterbox(load_sample(*sp, rng.randint(0, n))));
      r = affine_mosaic(vision::mosaic(four, img));
    } else {
      r = affine(letterbox(load_sample(*sp, i)));
    }
    r = flip(r);
    Tensor image = r[0].contiguous().clone();
    augment_hsv(image, aug.hsv_h, aug.hsv_s, aug.hsv_v);
    // Labels: class, cx, cy, w, h normalised by the image size.
    const int64_t k = r[1].numel() / 4;
    Tensor labels = Tensor::empty({k, 5}, kFloat32);
    const std::vector<float> b = k ? r[1].to_vector<float>() : std::vector<float>{};
    const std::vector<int32_t> c = k ? r[2].to_vector<int32_t>() : std::vector<int32_t>{};
    const float W = float(image.size(1)), H = float(image.size(0));
    float* l = labels.data<float>();
    for (int64_t j = 0; j < k; ++j) {
      l[j * 5] = float(c[size_t(j)]);
      l[j * 5 + 1] = (b[size_t(j * 4)] + b[size_t(j * 4 + 2)] / 2) / W;
      l[j * 5 + 2] = (b[size_t(j * 4 + 1)] + b[size_t(j * 4 + 3)] / 2) / H;
      l[j * 5 + 3] = b[size_t(j * 4 + 2)] / W;
      l[j * 5 + 4] = b[size_t(j * 4 + 3)] / H;
    }
    return {image, labels};
  };
  return data::GeneratorDataset(
      std::function<data::Row(int64_t)>(fn), n, {"image", "labels"},
      {.shuffle = shuffle, .num_parallel_workers = std::max(1, num_workers)});
}

data::Dataset yolo_train_batches(const YoloSplit& split, int64_t img, int64_t batch,
                                 const YoloAugment& aug, int num_workers, const Tensor& anchors,
                                 int64_t num_classes, const YoloLossHyp& hyp, bool shuffle) {
  SPORE_CHECK(batch >= 1, "[yolov5] the batch size must be >= 1, got ", batch);
  const Tensor host_anchors = anchors.cpu().contiguous().clone();
  const std::array<std::pair<int64_t, int64_t>, 3> grids{
      {{img / 8, img / 8}, {img / 16, img / 16}, {img / 32, img / 32}}};
  // Images stack as they are; each image's (K, 5) labels are padded to the batch's largest K
  // with class -1, which the map below leaves out.
  data::BatchOptions bo;
  bo.pad_info["labels"] = data::PadInfo{.shape = {-1, 5}, .value = -1};
  data::RowOp to_step = [=](const data::Row& r) -> data::Row {
    const int64_t B = r[0].size(0), K = r[1].dim() == 3 ? r[1].size(1) : 0;
    std::vector<float> tv;
    if (K > 0) {
      const std::vector<float> l = r[1].contiguous().to_vector<float>();
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < K; ++j) {
          const float* x = &l[size_t((b * K + j) * 5)];
          if (x[0] < 0) continue;  // padding
          tv.push_back(float(b));
          tv.insert(tv.end(), x, x + 5);
        }
    }
    Tensor targets = Tensor::empty({int64_t(tv.size() / 6), 6}, kFloat32);
    if (!tv.empty()) std::memcpy(targets.data_ptr(), tv.data(), tv.size() * sizeof(float));
    data::Row out{batch_to_chw_float(r[0])};
    for (const Tensor& t :
         flatten_targets(build_targets(targets, B, host_anchors, grids, num_classes, hyp)))
      out.push_back(t);
    return out;
  };
  std::vector<std::string> names{"images"};
  for (int l = 0; l < 3; ++l)
    for (const char* f : {"index", "tbox", "anchor", "cls", "mask", "obj_write"})
      names.push_back(std::string(f) + std::to_string(l));
  return yolo_train_dataset(split, img, aug, num_workers, shuffle)
      .batch(batch, bo)
      .map({data::Operation(to_step)}, {"image", "labels"}, names, std::max(1, num_workers));
}

// ---- training ----------------------------------------------------------------------------------

namespace {

// Calls on_epoch with the epoch's means per image (the loss is already times the batch size;
// the components are per batch, so they are weighted by it), its time and images per second.
class YoloEpochLogger : public train::Callback {
 public:
  YoloEpochLogger(std::function<void(const YoloEpochLog&)> on_epoch,
                  std::function<double(int64_t)> lr_of_epoch)
      : on_epoch_(std::move(on_epoch)), lr_of_epoch_(std::move(lr_of_epoch)) {}
  void on_epoch_begin(train::RunContext&) override { sum_ = {}, seen_ = 0; }
  void on_step_end(train::RunContext& ctx) override {
    SPORE_CHECK(ctx.aux.size() == 3, "[yolov5] expected the step's (lbox, lobj, lcls), got ",
                ctx.aux.size(), " auxiliary outputs; train YoloWithLoss");
    const double B = double(ctx.batch_size);
    sum_[0] += ctx.loss;
    for (size_t k = 0; k < 3; ++k) sum_[k + 1] += ctx.aux[k].item<double>() * B;
    seen_ += ctx.batch_size;
  }
  void on_epoch_end(train::RunContext& ctx) override {
    if (!on_epoch_) return;
    const double n = double(std::max<int64_t>(seen_, 1));
    YoloEpochLog log;
    log.epoch = ctx.epoch;
    log.loss = sum_[0] / n;
    log.lbox = sum_[1] / n;
    log.lobj = sum_[2] / n;
    log.lcls = sum_[3] / n;
    log.seconds = ctx.epoch_elapsed;
    log.images_per_s = log.seconds > 0 ? double(seen_) / log.seconds : 0;
    log.lr = lr_of_epoch_(ctx.epoch - 1);
    on_epoch_(log);
  }

 private:
  std::function<void(const YoloEpochLog&)> on_epoch_;
  std::function<double(int64_t)> lr_of_epoch_;
  std::array<double, 4> sum_{};
  int64_t seen_ = 0;
};

}  // namespace

YoloTraining yolo_training(const std::shared_ptr<YoloV5>& net,
                           const std::shared_ptr<YoloV5>& ema_net, const YoloSplit& train,
                           const YoloTrainOptions& o,
                           const std::function<void(const YoloEpochLog&)>& on_epoch) {
  SPORE_CHECK(o.img % 32 == 0 && o.img >= 64,
              "[yolov5] --img must be a multiple of 32 and >= 64, got ", o.img);
  SPORE_CHECK(o.batch >= 1 && o.epochs >= 1, "[yolov5] batch and epochs must be >= 1, got batch ",
              o.batch, " and epochs ", o.epochs);
  SPORE_CHECK(o.nbs >= 1, "[yolov5] the nominal batch (nbs) must be >= 1, got ", o.nbs,
              "; YOLOv5 accumulates gradients to 64 images");
  SPORE_CHECK(net != nullptr && ema_net != nullptr,
              "[yolov5] yolo_training needs the network and a second one of the same "
              "configuration for the EMA");
  YoloSplit split = train;
  if (o.limit > 0 && o.limit < int64_t(split.files.size())) {
    split.files.resize(size_t(o.limit));
    split.labels.resize(size_t(o.limit));
    split.image_ids.resize(size_t(o.limit));
    split.sizes.resize(size_t(o.limit));
  }
  const int64_t nc = net->num_classes(), bs = o.batch;
  const double nbs_per_batch = double(o.nbs) / double(bs);
  const int64_t accumulate = std::max<int64_t>(int64_t(std::nearbyint(nbs_per_batch)), 1);
  const double wd = o.weight_decay * double(bs) * double(accumulate) / double(o.nbs);
  auto opt = std::make_shared<optim::Momentum>(yolo_param_groups(*net, wd), o.lr0, o.momentum,
                                               optim::MomentumOptions{.nesterov = true});
  if (o.clip_norm > 0) opt->set_clip_grad_norm(o.clip_norm);
  const YoloLossHyp hyp = scaled_hyp(nc, o.img);

  // Mixed precision: the network's cells compute in amp_dtype (the parameters stay float32);
  // float16 gradients are protected by a dynamic loss scale, and a batch whose gradients overflow
  // is skipped (YOLOv5's GradScaler: initial scale 2^16, doubled after 2000 clean steps).
  const amp::Level amp_level = amp::parse_level(o.amp);
  std::shared_ptr<amp::DynamicLossScaleManager> scaler;
  if (amp_level != amp::Level::O0) {
    amp::auto_mixed_precision(*net, amp_level, o.amp_dtype, amp_level == amp::Level::O2);
    if (o.amp_dtype == kFloat16)
      scaler = std::make_shared<amp::DynamicLossScaleManager>(65536.0, 2, 2000);
  }
  YoloTraining t;
  // The casts are on net already, so the model's own amp level stays O0 (the loss in float32).
  t.model = std::make_shared<train::Model>(std::make_shared<YoloWithLoss>(net, hyp), nullptr, opt,
                                           std::vector<std::string>{}, nullptr, "O0", scaler);
  t.model->train_network()->set_grad_accumulation(accumulate, train::GradAccumulation::kSum);
  t.dataset =
      yolo_train_batches(split, o.img, bs, o.aug, o.num_workers, net->detect().anchors(), nc, hyp);
  const auto lf =
      o.cos_lr ? train::one_cycle_lr(o.lrf, o.epochs) : train::linear_lr(o.lrf, o.epochs);
  t.ema = std::make_shared<train::EMA>(*net, ema_net);
  t.callbacks.push_back(std::make_shared<train::LambdaLR>(lf));
  // yolo_param_groups' order: biases first, their lr falls from warmup_bias_lr.
  t.callbacks.push_back(std::make_shared<train::WarmUp>(
      train::WarmUpOptions{.epochs = o.warmup_epochs,
                           .min_steps = 100,
                           .start_lrs = {o.warmup_bias_lr, 0.0, 0.0},
                           .momentum_start = o.warmup_momentum,
                           .momentum_end = o.momentum,
                           .accumulation = std::pair<double, double>{1.0, nbs_per_batch}}));
  t.callbacks.push_back(t.ema);
  const double lr0 = o.lr0;
  t.callbacks.push_back(
      std::make_shared<YoloEpochLogger>(on_epoch, [lr0, lf](int64_t e) { return lr0 * lf(e); }));
  net->set_train(true);
  return t;
}

// ---- evaluation --------------------------------------------------------------------------------

std::array<double, 12> evaluate_yolo(YoloV5& net, const YoloSplit& val, const YoloEvalOptions& o,
                                     std::string* summary, bool graph) {
  SPORE_CHECK(o.img % 32 == 0 && o.img >= 64,
              "[yolov5] --img must be a multiple of 32 and >= 64, got ", o.img);
  const int64_t n = o.limit > 0 ? std::min<int64_t>(o.limit, int64_t(val.files.size()))
                                : int64_t(val.files.size());
  SPORE_CHECK(n > 0, "[yolov5] the validation split ", val.annotation_file, " has no images");
  const bool was_training = net.training();
  net.set_train(false);
  const int64_t img = o.img;
  auto sp = std::make_shared<const YoloSplit>(val);
  const vision::RowFn letterbox = vision::Letterbox({img, img});
  data::Dataset ds = data::GeneratorDataset(
      std::function<data::Row(int64_t)>([sp, letterbox](int64_t i) -> data::Row {
        data::Row r = letterbox(
            {detection::read_image(sp->files[size_t(i)]), Tensor::empty({0, 4}, kFloat32)});
        return {r[0]};
      }),
      n, {"image"}, {.num_parallel_workers = 2});
  std::shared_ptr<JitFunction> compiled;
  if (graph)
    compiled = std::make_shared<JitFunction>(
        [&net](const std::vector<Tensor>& in) { return std::vector<Tensor>{net.construct(in[0])}; },
        JitOptions{.name = "yolo_eval", .extra_key = [&net] { return net.trace_key(); }});
  std::vector<metrics::CocoDetection> dets;
  auto it = ds.create_tuple_iterator();
  for (int64_t start = 0; start < n; start += o.batch) {
    std::vector<Tensor> imgs;
    for (int64_t k = start; k < std::min(n, start + o.batch); ++k) imgs.push_back((*it->next())[0]);
    const Tensor x = to_chw_float(imgs);
    Tensor pred;
    {
      NoGradGuard ng;
      pred = compiled ? (*compiled)({x})[0] : net.construct(x);
    }
    const auto out = detection::non_max_suppression(pred, {.conf_thres = o.conf_thres,
                                                           .iou_thres = o.iou_thres,
                                                           .multi_label = true,
                                                           .max_det = o.max_det});
    for (size_t b = 0; b < out.size(); ++b) {
      const int64_t i = start + int64_t(b);
      const auto g = detection::letterbox_geometry(val.sizes[size_t(i)].first,
                                                   val.sizes[size_t(i)].second, img, img);
      const Tensor& d = out[b];
      if (d.size(0) == 0) continue;
      const std::vector<float> boxes =
          detection::xyxy2ltwh(detection::unletterbox_boxes(d.slice(1, 0, 4), g))
              .to_vector<float>();
      const std::vector<float> v = d.contiguous().to_vector<float>();
      for (int64_t k = 0; k < d.size(0); ++k)
        dets.push_back({val.image_ids[size_t(i)],
                        val.category_ids[size_t(v[size_t(k * 6 + 5)])],
                        {boxes[size_t(k * 4)], boxes[size_t(k * 4 + 1)], boxes[size_t(k * 4 + 2)],
                         boxes[size_t(k * 4 + 3)]},
                        double(v[size_t(k * 6 + 4)])});
    }
  }
  net.set_train(was_training);
  if (!o.save_json.empty()) metrics::save_detections(dets, o.save_json);
  const metrics::Coco gt = metrics::Coco::load(val.annotation_file);
  metrics::CocoEval ev(gt, gt.load_res(dets));
  ev.params.img_ids = std::vector<int64_t>(val.image_ids.begin(), val.image_ids.begin() + n);
  ev.evaluate();
  ev.accumulate();
  const std::string text = ev.summarize();
  if (summary) *summary = text;
  return ev.stats();
}

}  // namespace spore::models
