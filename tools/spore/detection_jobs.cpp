// The detection commands of `spore`: coco-eval (pycocotools' numbers for a results file), data
// make-shapes (the generated COCO-layout set), and train / eval / predict for yolov5n|s|m on a
// COCO-layout folder (docs/detection.md).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "jobs.h"
#include "models/yolov5/train.h"
#include "spore/amp.h"
#include "spore/context.h"
#include "spore/data/vision.h"
#include "spore/detection/detection.h"
#include "spore/detection/shapes.h"
#include "spore/grad_mode.h"
#include "spore/io/checkpoint.h"
#include "spore/io/metrics.h"
#include "spore/io/plot.h"
#include "spore/io/run_lock.h"
#include "spore/metrics/coco_eval.h"
#include "spore/ops.h"

namespace spore::cli {
namespace {

namespace fs = std::filesystem;

std::string variant_of(const std::string& model) {
  SPORE_CHECK(model.rfind("yolov5", 0) == 0 && model.size() == 7, "unknown detection model '",
              model, "'; expected yolov5n, yolov5s or yolov5m");
  return model.substr(6);
}

std::string join(const std::vector<std::string>& v, char sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? std::string(1, sep) : "") + v[i];
  return s;
}
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t a = 0;
  for (size_t b; (b = s.find(sep, a)) != std::string::npos; a = b + 1)
    out.push_back(s.substr(a, b - a));
  out.push_back(s.substr(a));
  return out;
}

// A YOLOv5 checkpoint: the EMA network's parameters and buffers, with what rebuilding it needs.
struct LoadedYolo {
  std::shared_ptr<models::YoloV5> net;
  std::vector<std::string> names;
  int64_t img = 320;
};
LoadedYolo load_yolo(const std::string& model, const std::string& path) {
  const io::Checkpoint ck = io::load_checkpoint(path);
  auto get = [&](const char* key) -> std::string {
    const auto it = ck.metadata.find(key);
    SPORE_CHECK(it != ck.metadata.end(), "checkpoint ", path, " has no '", key,
                "' metadata; pass a checkpoint written "
                "by `spore train ",
                model, "`");
    return it->second;
  };
  const std::string variant = variant_of(model);
  SPORE_CHECK(get("model") == model, "checkpoint ", path, " holds a ", get("model"), ", not a ",
              model, "; use `spore eval ", get("model"), "` or another checkpoint");
  LoadedYolo y;
  y.names = split(get("class_names"), '\n');
  y.img = std::stoll(get("img"));
  y.net = models::yolov5(variant, int64_t(y.names.size()));
  const io::LoadReport rep = io::load_param_into_net(*y.net, ck, false);
  SPORE_CHECK(rep.missing.empty() && rep.mismatched.empty(), "checkpoint ", path, " does not fit ",
              model, ": ", rep.summary());
  y.net->set_train(false);
  return y;
}

void print_stats(const std::string& summary) { std::fputs(summary.c_str(), stdout); }

}  // namespace

int coco_eval(const CocoEvalArgs& a) {
  const metrics::Coco gt = metrics::Coco::load(a.gt);
  const metrics::Coco dt = gt.load_res(a.results);
  // Detections in categories the ground truth lacks: load_res warns (metrics/coco.cpp).
  metrics::CocoEval ev(gt, dt, "bbox");
  ev.evaluate();
  ev.accumulate();
  const std::string text = ev.summarize();
  if (a.json) {
    nlohmann::json j;
    for (size_t i = 0; i < 12; ++i) j[metrics::CocoEval::stat_names()[i]] = ev.stats()[i];
    std::cout << j.dump(1) << "\n";
  } else {
    print_stats(text);
  }
  return 0;
}

int make_shapes(const MakeShapesArgs& a) {
  const auto s = detection::make_shapes_dataset(a.out, {.train = a.train,
                                                        .val = a.val,
                                                        .size = a.size,
                                                        .seed = a.seed,
                                                        .max_objects = a.max_objects});
  std::printf(
      "wrote %lld images (%lld annotations: %lld small, %lld medium, %lld large, %lld crowd) into "
      "%s: "
      "train2017/, val2017/, annotations/instances_{train,val}2017.json\n",
      (long long)s.images, (long long)s.annotations, (long long)s.small, (long long)s.medium,
      (long long)s.large, (long long)s.crowd, a.out.c_str());
  return 0;
}

int train_detector(const TrainArgs& a) {
  set_device(a.device);
  set_context({.mode = a.mode == "pynative" ? Mode::PyNative : Mode::Graph});
  set_seed(a.seed);
  if (a.threads > 0) set_num_threads(a.threads);
  SPORE_CHECK(a.grad_accum == 1 && !a.parallel_optimizer,
              "--grad-accum and --parallel-optimizer are for the "
              "classifiers; ",
              a.model,
              " accumulates gradients to a nominal batch of 64 by itself (YOLOv5's recipe)");
  SPORE_CHECK(a.resume.empty(), "--resume is for the classifiers; ", a.model,
              "'s checkpoints hold the EMA weights without "
              "the optimizer state: start from one with --weights ",
              a.resume, " (fine-tuning, as YOLOv5's --weights)");
  const std::string variant = variant_of(a.model);
  const std::string out = a.out.empty() ? "out/" + a.model : a.out;
  const io::RunLock run_lock(out);  // one run per directory (creates it)
  const models::YoloSplit train = models::load_yolo_split(a.data, "train");
  const models::YoloSplit val = models::load_yolo_split(a.data, "val");
  const int64_t nc = int64_t(train.category_ids.size());
  auto net = models::yolov5(variant, nc);
  auto ema_net = models::yolov5(variant, nc);
  if (!a.weights.empty()) {  // both start from the checkpoint (YOLOv5 fine-tuning: the EMA copies
                             // the model)
    LoadedYolo w = load_yolo(a.model, a.weights);
    SPORE_CHECK(w.names == train.class_names, "checkpoint ", a.weights,
                " was trained on other classes (", w.names.size(), ") than ", a.data, " has (",
                train.class_names.size(), "); pass weights trained on this data");
    const io::Checkpoint ck = io::load_checkpoint(a.weights);
    for (auto* dst : {net.get(), ema_net.get()}) {
      const io::LoadReport rep = io::load_param_into_net(*dst, ck, false);
      SPORE_CHECK(rep.missing.empty() && rep.mismatched.empty(), "checkpoint ", a.weights,
                  " does not fit ", a.model, ": ", rep.summary());
    }
    std::printf("starting from the weights in %s\n", a.weights.c_str());
  }
  int64_t nparams = 0;
  for (const Tensor& p : net->trainable_params()) nparams += p.numel();
  std::printf(
      "%s: %lld parameters, %lld classes, %zu training / %zu validation images at %lld px, batch "
      "%lld, "
      "%lld epochs, %s mode\n",
      a.model.c_str(), (long long)nparams, (long long)nc, train.files.size(), val.files.size(),
      (long long)a.img, (long long)(a.batch_given ? a.batch_size : 16), (long long)a.epochs,
      a.mode.c_str());
  std::fflush(stdout);
  models::YoloTrainOptions o;
  o.img = a.img;
  o.epochs = a.epochs;
  o.batch = a.batch_given ? a.batch_size : 16;  // YOLOv5's default batch (the classifiers' is 64)
  o.graph = a.mode != "pynative";
  o.limit = a.limit;
  o.num_workers = a.threads > 0 ? std::min(a.threads, 4) : 2;
  if (a.lr_given) o.lr0 = a.lr;
  if (a.no_mosaic) o.aug.mosaic = 0;
  o.cos_lr = a.cos_lr;
  o.amp = a.amp;
  o.amp_dtype = amp::parse_dtype(a.amp_dtype);
  if (amp::parse_level(a.amp) != amp::Level::O0)
    std::printf("mixed precision: %s, %s%s\n", a.amp.c_str(), dtype_name(o.amp_dtype),
                o.amp_dtype == kFloat16 ? ", dynamic loss scale (initial 65536)" : "");
  io::MetricsWriter writer(out + "/metrics");
  io::Metadata meta{{"model", a.model},
                    {"img", std::to_string(a.img)},
                    {"class_names", join(train.class_names, '\n')}};
  std::vector<double> losses, maps, map50s;
  auto on_epoch = [&](const models::YoloEpochLog& log) {
    io::MetricValues rec{
        {"loss", log.loss}, {"box_loss", log.lbox}, {"obj_loss", log.lobj}, {"cls_loss", log.lcls}};
    std::printf(
        "epoch %lld/%lld: loss %.4f (box %.4f, obj %.4f, cls %.4f), lr %.5f, %.1f images/s, %.1f s",
        (long long)log.epoch, (long long)a.epochs, log.loss, log.lbox, log.lobj, log.lcls, log.lr,
        log.images_per_s, log.seconds);
    std::fflush(stdout);
    const bool last = log.epoch == a.epochs;
    if (last || (a.eval_every > 0 && log.epoch % a.eval_every == 0)) {
      models::YoloEvalOptions eo{.img = a.img, .batch = o.batch, .limit = a.eval_limit};
      const auto s = models::evaluate_yolo(*ema_net, val, eo, nullptr, o.graph);
      rec.emplace_back("mAP", s[0]);
      rec.emplace_back("mAP50", s[1]);
      std::printf(", val mAP@[.5:.95] %.4f, mAP@.5 %.4f", s[0], s[1]);
    } else {  // not evaluated this epoch: null in metrics.jsonl, a gap in the curve
      rec.emplace_back("mAP", std::nan(""));
      rec.emplace_back("mAP50", std::nan(""));
    }
    std::printf("\n");
    std::fflush(stdout);
    rec.emplace_back("images_per_s", log.images_per_s);
    rec.emplace_back("seconds", log.seconds);
    writer.write(log.epoch, rec);
    meta["epoch"] = std::to_string(log.epoch);
    io::save_checkpoint(*ema_net, out + "/" + a.model + ".safetensors", meta);
    io::TrainingCurves curves =
        io::curves_from_metrics(io::read_metrics_jsonl(writer.jsonl_path()), "mAP");
    curves.title = a.model + " on " + a.data;
    io::save_training_curves(out + "/curves.png", curves);
  };
  const models::YoloTraining t = models::yolo_training(net, ema_net, train, o, on_epoch);
  t.model->train(o.epochs, t.dataset, t.callbacks);
  std::string summary;
  models::YoloEvalOptions eo{.img = a.img, .batch = o.batch, .limit = a.eval_limit};
  models::evaluate_yolo(*ema_net, val, eo, &summary, o.graph);
  std::printf("validation (EMA weights):\n");
  print_stats(summary);
  std::printf("outputs: %s/%s.safetensors, %s/metrics.jsonl and .csv, %s/curves.png\n", out.c_str(),
              a.model.c_str(), out.c_str(), out.c_str());
  return 0;
}

int eval_detector(const EvalArgs& a) {
  set_device(a.device);
  LoadedYolo y = load_yolo(a.model, a.ckpt);
  const models::YoloSplit val = models::load_yolo_split(a.data, "val");
  SPORE_CHECK(val.category_ids.size() == y.names.size(), "checkpoint ", a.ckpt, " has ",
              y.names.size(), " classes but ", val.annotation_file, " has ",
              val.category_ids.size(), "; evaluate on the data it was trained on");
  std::string summary;
  // The classifiers' default batch (256) is too much memory for a detector: at most 32 images.
  models::YoloEvalOptions eo{.img = a.img > 0 ? a.img : y.img,
                             .batch = std::min<int64_t>(a.batch_size, 32),
                             .limit = a.limit,
                             .save_json = a.save_json};
  models::evaluate_yolo(*y.net, val, eo, &summary, true);
  print_stats(summary);
  return 0;
}

// --out of predict: checked before the model runs, so a path that cannot be written is an error
// now, not after inference.
void check_image_out(const std::string& out) {
  const std::string ext = [&] {
    std::string e = fs::path(out).extension().string();
    for (char& c : e) c = char(std::tolower(static_cast<unsigned char>(c)));
    return e;
  }();
  static const char* kExts[] = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp"};
  SPORE_CHECK(
      std::any_of(std::begin(kExts), std::end(kExts), [&](const char* k) { return ext == k; }),
      "--out ", out,
      ": the picture's format comes from its extension; use .jpg, .png, .bmp, .tif or .webp");
  const fs::path dir =
      fs::path(out).has_parent_path() ? fs::path(out).parent_path() : fs::path(".");
  std::error_code ec;
  SPORE_CHECK_KIND(ErrorKind::IOError, fs::is_directory(dir, ec), "--out ", out, ": the folder ",
                   dir.string(), " does not exist; create it or pass another --out");
  SPORE_CHECK_KIND(ErrorKind::IOError, ::access(dir.c_str(), W_OK) == 0, "--out ", out,
                   ": the folder ", dir.string(), " is not writable; pass another --out");
}

int predict(const PredictArgs& a) {
  const std::string out = a.out.empty() ? fs::path(a.image).stem().string() + "_pred.jpg" : a.out;
  check_image_out(out);
  LoadedYolo y = load_yolo(a.model, a.ckpt);
  const int64_t img = a.img > 0 ? a.img : y.img;
  const Tensor image = detection::read_image(a.image);
  const auto g = detection::letterbox_geometry(image.size(0), image.size(1), img, img);
  const data::Row lb = vision::Letterbox({img, img})({image, Tensor::empty({0, 4}, kFloat32)});
  Tensor x = lb[0].contiguous().to(kFloat32).permute({2, 0, 1}).reshape({1, 3, img, img}) / 255.0;
  Tensor pred;
  {
    NoGradGuard ng;
    pred = (*y.net)(x.contiguous());
  }
  Tensor d = detection::non_max_suppression(pred, {.conf_thres = a.conf, .iou_thres = a.iou})[0];
  if (d.size(0) > 0)
    d = concat({detection::unletterbox_boxes(d.slice(1, 0, 4), g), d.slice(1, 4, 6)}, 1);
  detection::write_image(out, detection::draw_detections(image, d, y.names));
  const std::vector<float> v = d.contiguous().to_vector<float>();
  for (int64_t k = 0; k < d.size(0); ++k)
    std::printf("%s %.3f [%.1f, %.1f, %.1f, %.1f]\n", y.names[size_t(v[size_t(k * 6 + 5)])].c_str(),
                v[size_t(k * 6 + 4)], v[size_t(k * 6)], v[size_t(k * 6 + 1)], v[size_t(k * 6 + 2)],
                v[size_t(k * 6 + 3)]);
  std::printf("%lld detections; wrote %s\n", (long long)d.size(0), out.c_str());
  return 0;
}

}  // namespace spore::cli
