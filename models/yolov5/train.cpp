// YOLOv5's training recipe and evaluation (models/yolov5/train.h). The step (forward, loss,
// backward) runs as one compiled graph in Graph mode; targets are built on the host and padded to
// a power-of-two capacity so the graph's shapes repeat; accumulation, the optimizer, the EMA and
// the warm-up / schedule run on the host between steps, as in train.py.
#include "models/yolov5/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numbers>
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

namespace spore::models {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

double interp(double x, double x0, double x1, double y0, double y1) {  // np.interp on [x0, x1]
  if (x <= x0) return y0;
  if (x >= x1) return y1;
  return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
}

// (B, H, W, 3) uint8 images -> (B, 3, H, W) float32 in [0, 1].
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

// ---- the step ----------------------------------------------------------------------------------

YoloStep::YoloStep(std::shared_ptr<YoloV5> net, const YoloLossHyp& hyp, bool graph,
                   std::vector<Tensor> params, bool loss_scaled)
    : net_(std::move(net)),
      hyp_(hyp),
      params_(params.empty() ? net_->trainable_params() : std::move(params)),
      loss_scaled_(loss_scaled) {
  if (graph) {
    auto* net_ptr = net_.get();
    compiled_ = std::make_shared<JitFunction>(
        [this](const std::vector<Tensor>& in) { return run(in); },
        JitOptions{.name = "yolo_train_step",
                   .extra_key = [net_ptr] { return net_ptr->trace_key(); },
                   .max_cache = 16});
  }
}

std::vector<Tensor> YoloStep::run(const std::vector<Tensor>& in) {
  EnableGradGuard eg;
  std::vector<Tensor> raw = net_->forward({in[0]});
  for (Tensor& r : raw)  // mixed precision: the loss in float32 (MindSpore's O2 output cast)
    if (r.dtype() != kFloat32) r = r.to(kFloat32);
  const size_t n_targets = in.size() - (loss_scaled_ ? 2 : 1);
  const YoloLoss L =
      yolo_loss(raw, std::vector<Tensor>(in.begin() + 1, in.begin() + 1 + long(n_targets)), hyp_);
  std::vector<Tensor> out{L.loss.detach(), L.lbox.detach(), L.lobj.detach(), L.lcls.detach()};
  const Tensor scaled = loss_scaled_ ? L.loss * in.back() : L.loss;
  for (Tensor& g : autograd::grad(scaled, params_)) out.push_back(g);
  return out;
}

std::vector<Tensor> YoloStep::operator()(const Tensor& images,
                                         const std::array<LevelTargets, 3>& targets,
                                         double loss_scale) {
  std::vector<Tensor> in{images};
  for (const Tensor& t : flatten_targets(targets)) in.push_back(t);
  if (loss_scaled_) in.push_back(full({}, loss_scale, kFloat32));
  return compiled_ ? (*compiled_)(in) : run(in);
}

JitStats YoloStep::stats() const { return compiled_ ? compiled_->stats() : JitStats{}; }

// ---- optimizer and EMA ------------------------------------------------------------------------

YoloSGD::YoloSGD(std::vector<optim::ParamGroup> groups, double lr, double momentum)
    : Optimizer(groups, lr, 0.0), momentum_(momentum) {
  for (size_t g = 0; g < groups.size(); ++g) {
    group_lr_.push_back(lr);
    group_of_.insert(group_of_.end(), groups[g].params.size(), g);
  }
  bufs_ = zeros_like_params();
}

void YoloSGD::set_group_lr(size_t group, double lr) {
  SPORE_CHECK(group < group_lr_.size(), "[YoloSGD] group ", group, " out of range (",
              group_lr_.size(), " groups)");
  group_lr_[group] = lr;
}

std::vector<std::pair<std::string, Tensor>> YoloSGD::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  append_state(out, "moments", bufs_);
  return out;
}

void YoloSGD::update(size_t i, const Tensor& grad, double, double weight_decay) {
  NoGradGuard ng;
  const Tensor& p = params_[i];
  const double lr = group_lr_[group_of_[i]];
  const Tensor g = weight_decay != 0 ? grad + p * weight_decay : grad;
  assign(bufs_[i], bufs_[i] * momentum_ + g);
  assign(p, p - (g + bufs_[i] * momentum_) * lr);  // nesterov
}

std::vector<optim::ParamGroup> yolo_param_groups(const nn::Cell& net, double weight_decay) {
  optim::ParamGroup biases{.weight_decay = 0.0}, weights{.weight_decay = weight_decay},
      bn{.weight_decay = 0.0};
  for (const auto& [name, p] : net.named_parameters()) {
    optim::ParamGroup& g = ends_with(name, "bias") || ends_with(name, "beta") ? biases
                           : ends_with(name, "gamma")                         ? bn
                                                                              : weights;
    g.params.push_back(p);
    g.names.push_back(name);
  }
  return {biases, weights, bn};  // smart_optimizer's order: biases first (their warm-up lr falls)
}

ModelEMA::ModelEMA(const nn::Cell& model, std::shared_ptr<nn::Cell> ema, double decay, double tau)
    : ema_(std::move(ema)), decay_(decay), tau_(tau) {
  const auto src = model.parameters_and_buffers();
  const auto dst = ema_->parameters_and_buffers();
  SPORE_CHECK(src.size() == dst.size(), "[ModelEMA] the EMA network has ", dst.size(),
              " tensors, the model ", src.size(), "; build both with the same configuration");
  NoGradGuard ng;
  for (size_t i = 0; i < src.size(); ++i) assign(dst[i].second, src[i].second);
  ema_->set_train(false);
}

void ModelEMA::update(const nn::Cell& model) {
  ++updates_;
  const double d = decay_ * (1 - std::exp(-double(updates_) / tau_));
  const auto src = model.parameters_and_buffers();
  const auto dst = ema_->parameters_and_buffers();
  NoGradGuard ng;
  for (size_t i = 0; i < src.size(); ++i) {
    if (!is_floating(dst[i].second.dtype())) continue;
    assign(dst[i].second, dst[i].second * d + src[i].second.detach() * (1 - d));
  }
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

// ---- training ----------------------------------------------------------------------------------

std::shared_ptr<ModelEMA> train_yolo(const std::shared_ptr<YoloV5>& net,
                                     const std::shared_ptr<YoloV5>& ema_net, const YoloSplit& train,
                                     const YoloTrainOptions& o,
                                     const std::function<void(const YoloEpochLog&)>& on_epoch,
                                     const std::function<void(int64_t, double)>& on_step) {
  SPORE_CHECK(o.img % 32 == 0 && o.img >= 64,
              "[yolov5] --img must be a multiple of 32 and >= 64, got ", o.img);
  SPORE_CHECK(o.batch >= 1 && o.epochs >= 1, "[yolov5] batch and epochs must be >= 1");
  YoloSplit split = train;
  if (o.limit > 0 && o.limit < int64_t(split.files.size())) {
    split.files.resize(size_t(o.limit));
    split.labels.resize(size_t(o.limit));
    split.image_ids.resize(size_t(o.limit));
    split.sizes.resize(size_t(o.limit));
  }
  const int64_t nc = net->num_classes(), bs = o.batch;
  const int64_t n_img = int64_t(split.files.size());
  const int64_t nb = (n_img + bs - 1) / bs;  // batches per epoch (the last may be smaller)
  const int64_t accumulate_full =
      std::max<int64_t>(int64_t(std::nearbyint(double(o.nbs) / double(bs))), 1);
  const double wd = o.weight_decay * double(bs) * double(accumulate_full) / double(o.nbs);
  auto opt = std::make_shared<YoloSGD>(yolo_param_groups(*net, wd), o.lr0, o.momentum);
  if (o.clip_norm > 0) opt->set_clip_grad_norm(o.clip_norm);
  auto ema = std::make_shared<ModelEMA>(*net, ema_net);
  const YoloLossHyp hyp = scaled_hyp(nc, o.img);
  auto lf = [&](int64_t e) {
    if (o.cos_lr)
      return ((1 - std::cos(double(e) * std::numbers::pi / double(o.epochs))) / 2) * (o.lrf - 1) +
             1;
    return (1 - double(e) / double(o.epochs)) * (1.0 - o.lrf) + o.lrf;
  };
  const int64_t nw = std::max<int64_t>(int64_t(std::llround(o.warmup_epochs * double(nb))), 100);
  const Tensor anchors = net->detect().anchors();
  const std::array<std::pair<int64_t, int64_t>, 3> grids{
      {{o.img / 8, o.img / 8}, {o.img / 16, o.img / 16}, {o.img / 32, o.img / 32}}};

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
  YoloStep step(net, hyp, o.graph, opt->parameters(),
                scaler != nullptr);  // gradients in the optimizer's order
  net->set_train(true);
  data::Dataset ds = yolo_train_dataset(split, o.img, o.aug, o.num_workers);
  std::vector<Tensor> acc;
  int64_t last_opt_step = -1, accumulate = accumulate_full, global = 0;
  for (int64_t epoch = 0; epoch < o.epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    double sum_loss = 0, sum_box = 0, sum_obj = 0, sum_cls = 0;
    int64_t seen = 0, batches = 0;
    auto it = ds.create_tuple_iterator();
    for (int64_t bi = 0; bi < nb; ++bi) {
      std::vector<Tensor> imgs;
      std::vector<float> tv;
      for (int64_t k = 0; k < bs; ++k) {
        auto row = it->next();
        if (!row) break;
        const std::vector<float> l =
            (*row)[1].numel() ? (*row)[1].to_vector<float>() : std::vector<float>{};
        for (size_t j = 0; j + 4 < l.size(); j += 5) {
          tv.push_back(float(imgs.size()));
          tv.insert(tv.end(), l.begin() + long(j), l.begin() + long(j) + 5);
        }
        imgs.push_back((*row)[0]);
      }
      if (imgs.empty()) break;
      const int64_t B = int64_t(imgs.size());
      Tensor targets = Tensor::empty({int64_t(tv.size() / 6), 6}, kFloat32);
      if (!tv.empty()) std::memcpy(targets.data_ptr(), tv.data(), tv.size() * sizeof(float));
      const int64_t ni = bi + nb * epoch;
      // Warm-up: accumulation, learning rates and momentum ramp in.
      if (ni <= nw) {
        accumulate =
            std::max<int64_t>(1, int64_t(std::nearbyint(interp(double(ni), 0, double(nw), 1,
                                                               double(o.nbs) / double(bs)))));
        for (size_t g = 0; g < opt->num_groups(); ++g)
          opt->set_group_lr(g, interp(double(ni), 0, double(nw), g == 0 ? o.warmup_bias_lr : 0.0,
                                      o.lr0 * lf(epoch)));
        opt->set_momentum(interp(double(ni), 0, double(nw), o.warmup_momentum, o.momentum));
      } else {
        for (size_t g = 0; g < opt->num_groups(); ++g) opt->set_group_lr(g, o.lr0 * lf(epoch));
        opt->set_momentum(o.momentum);
      }
      const double scale = scaler ? scaler->get_loss_scale() : 1.0;
      const std::vector<Tensor> out =
          step(to_chw_float(imgs), build_targets(targets, B, anchors, grids, nc, hyp), scale);
      const std::vector<Tensor> grads(out.begin() + 4, out.end());  // times scale
      bool overflow = false;
      if (scaler) {
        overflow = !amp::all_finite(grads).item<bool>();  // one pass over every gradient
        scaler->update_loss_scale(overflow);
      }
      if (!overflow) {  // accumulate the unscaled gradients
        NoGradGuard ng;
        const double inv = 1.0 / scale;
        if (acc.empty()) acc.resize(grads.size());
        for (size_t i = 0; i < grads.size(); ++i) {
          const Tensor g = scaler ? grads[i] * inv : grads[i];
          acc[i] = acc[i].defined() ? acc[i] + g : g;
        }
      }
      if (ni - last_opt_step >= accumulate && !acc.empty()) {
        opt->step(acc);
        ema->update(*net);
        acc.clear();
        last_opt_step = ni;
      }
      const double l = out[0].item<double>();
      sum_loss += l;
      sum_box += out[1].item<double>() * double(B);
      sum_obj += out[2].item<double>() * double(B);
      sum_cls += out[3].item<double>() * double(B);
      seen += B;
      ++batches;
      ++global;
      if (on_step) on_step(global, l / double(B));
    }
    YoloEpochLog log;
    log.epoch = epoch + 1;
    log.loss = sum_loss / double(std::max<int64_t>(seen, 1));
    log.lbox = sum_box / double(std::max<int64_t>(seen, 1));
    log.lobj = sum_obj / double(std::max<int64_t>(seen, 1));
    log.lcls = sum_cls / double(std::max<int64_t>(seen, 1));
    log.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    log.images_per_s = log.seconds > 0 ? double(seen) / log.seconds : 0;
    log.lr = o.lr0 * lf(epoch);
    if (on_epoch) on_epoch(log);
    net->set_train(true);
  }
  return ema;
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
