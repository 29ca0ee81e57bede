// spore._C: detection (spore/detection/detection.h: box formats, IoU, NMS, YOLO post-processing),
// the COCO evaluator (spore/metrics/coco_eval.h, pycocotools' semantics) and the pieces of the
// model zoo's YOLOv5 that a network written in Python reuses: its loss (build_targets +
// yolo_loss, models/yolov5/loss.h) and the weight EMA (train::EMA). Each is the C++ definition,
// bound as it is; the Python faces are spore.ops (NMS), spore.train.coco (COCO / COCOeval) and
// spore.train.yolo (the loss).
#include <algorithm>
#include <numeric>

#include "common.h"
#include "models/yolov5/loss.h"
#include "spore/detection/detection.h"
#include "spore/metrics/coco_eval.h"
#include "spore/train/callbacks.h"

namespace spore::python {
namespace {

using metrics::Coco;
using metrics::CocoEval;

// (N, 5) [x1, y1, x2, y2, score] -> MindSpore's NMSWithMask outputs: the boxes sorted by score
// (highest first, ties in input order), their input indices (int32) and whether each is kept. The
// suppression itself is detection::nms (torchvision's rule: IoU > threshold drops a box).
std::vector<Tensor> nms_with_mask(const Tensor& bboxes, double iou_threshold) {
  SPORE_CHECK(bboxes.dim() == 2 && bboxes.size(1) == 5,
              "[NMSWithMask] bboxes must be (N, 5) [x1, y1, x2, y2, score], got shape ",
              shape_str(bboxes.shape()), "; put the scores in the last column");
  const Tensor b = bboxes.cpu().to(kFloat32).contiguous();
  const int64_t n = b.size(0);
  const std::vector<float> v = b.to_vector<float>();
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
    return v[size_t(i * 5 + 4)] > v[size_t(j * 5 + 4)];
  });
  const Tensor kept = detection::nms(b.slice(1, 0, 4), b.select(1, 4), iou_threshold);
  std::vector<uint8_t> is_kept(size_t(n), 0);
  for (int64_t k : kept.to_vector<int64_t>()) is_kept[size_t(k)] = 1;
  Tensor out = Tensor::empty({n, 5}, kFloat32), idx = Tensor::empty({n}, kInt32),
         mask = Tensor::empty({n}, kBool);
  for (int64_t r = 0; r < n; ++r) {
    const int64_t i = order[size_t(r)];
    std::copy_n(&v[size_t(i * 5)], 5, out.data<float>() + r * 5);
    idx.data<int32_t>()[r] = int32_t(i);
    mask.data<bool>()[r] = is_kept[size_t(i)] != 0;
  }
  return {out, idx, mask};
}

// Detections from Python: an (N, 7) array [image_id, x, y, w, h, score, category_id] (pycocotools'
// loadRes(ndarray) layout) or a list of {"image_id", "category_id", "bbox", "score"} dicts.
std::vector<metrics::CocoDetection> detections_of(py::handle h) {
  std::vector<metrics::CocoDetection> out;
  if (py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h)) {
    size_t i = 0;
    for (py::handle d : h) {
      SPORE_CHECK_TYPE(py::isinstance<py::dict>(d), "[COCO.loadRes] result ", i,
                       " is not a dict; expected {'image_id', 'category_id', 'bbox', 'score'}");
      py::dict r = py::reinterpret_borrow<py::dict>(d);
      for (const char* k : {"image_id", "category_id", "bbox", "score"})
        SPORE_CHECK(r.contains(k), "[COCO.loadRes] result ", i, " has no '", k,
                    "'; each result needs image_id, category_id, bbox [x, y, w, h] and score");
      metrics::CocoDetection det;
      det.image_id = r["image_id"].cast<int64_t>();
      det.category_id = r["category_id"].cast<int64_t>();
      const auto box = r["bbox"].cast<std::vector<double>>();
      SPORE_CHECK(box.size() == 4, "[COCO.loadRes] result ", i, "'s bbox has ", box.size(),
                  " numbers; expected [x, y, w, h]");
      std::copy(box.begin(), box.end(), det.bbox.begin());
      det.score = r["score"].cast<double>();
      out.push_back(det);
      ++i;
    }
    return out;
  }
  const Tensor a = to_tensor(h).cpu().to(kFloat64).contiguous();
  SPORE_CHECK(a.dim() == 2 && a.size(1) == 7,
              "[COCO.loadRes] an array of results must be (N, 7) [image_id, x, y, w, h, score, "
              "category_id], got shape ",
              shape_str(a.shape()));
  const std::vector<double> v = a.to_vector<double>();
  for (int64_t i = 0; i < a.size(0); ++i) {
    const double* r = &v[size_t(i * 7)];
    out.push_back({int64_t(r[0]), int64_t(r[6]), {r[1], r[2], r[3], r[4]}, r[5]});
  }
  return out;
}

py::dict image_dict(const metrics::CocoImage& i) {
  py::dict d;
  d["id"] = i.id, d["file_name"] = i.file_name, d["width"] = i.width, d["height"] = i.height;
  return d;
}
py::dict category_dict(const metrics::CocoCategory& c) {
  py::dict d;
  d["id"] = c.id, d["name"] = c.name, d["supercategory"] = c.supercategory;
  return d;
}
py::dict annotation_dict(const metrics::CocoAnnotation& a) {
  py::dict d;
  d["id"] = a.id, d["image_id"] = a.image_id, d["category_id"] = a.category_id;
  d["bbox"] = py::make_tuple(a.bbox[0], a.bbox[1], a.bbox[2], a.bbox[3]);
  d["area"] = a.area, d["iscrowd"] = int(a.iscrowd), d["score"] = a.score;
  return d;
}

models::YoloLossHyp hyp_of(py::dict d) {
  models::YoloLossHyp h;
  for (auto [k, v] : d) {
    const std::string key = k.cast<std::string>();
    if (key == "box")
      h.box = v.cast<double>();
    else if (key == "obj")
      h.obj = v.cast<double>();
    else if (key == "cls")
      h.cls = v.cast<double>();
    else if (key == "anchor_t")
      h.anchor_t = v.cast<double>();
    else if (key == "label_smoothing")
      h.label_smoothing = v.cast<double>();
    else if (key == "balance")
      h.balance = v.cast<std::array<double, 3>>();
    else
      SPORE_CHECK(false, "[yolo loss] unknown hyperparameter '", key,
                  "'; the known ones are box, obj, cls, anchor_t, label_smoothing, balance");
  }
  return h;
}
py::dict hyp_dict(const models::YoloLossHyp& h) {
  py::dict d;
  d["box"] = h.box, d["obj"] = h.obj, d["cls"] = h.cls, d["anchor_t"] = h.anchor_t;
  d["label_smoothing"] = h.label_smoothing, d["balance"] = h.balance;
  return d;
}

}  // namespace

void bind_detection(py::module_& m) {
  auto nogil = py::call_guard<py::gil_scoped_release>();
  // ---- boxes and NMS ----
  m.def("det_nms", &detection::nms, nogil);
  m.def("det_batched_nms", &detection::batched_nms, nogil);
  m.def("det_box_iou", &detection::box_iou, nogil);
  m.def("det_xywh2xyxy", &detection::xywh2xyxy);
  m.def("det_xyxy2xywh", &detection::xyxy2xywh);
  m.def("det_xyxy2ltwh", &detection::xyxy2ltwh);
  m.def("det_ltwh2xyxy", &detection::ltwh2xyxy);
  m.def("det_nms_with_mask", &nms_with_mask, nogil);
  m.def(
      "det_non_max_suppression",
      [](const Tensor& pred, double conf, double iou, bool multi_label, bool agnostic,
         int64_t max_det, int64_t max_nms) {
        return detection::non_max_suppression(pred,
                                              {conf, iou, multi_label, agnostic, max_det, max_nms});
      },
      nogil);
  m.def("det_unletterbox_boxes",
        [](const Tensor& boxes, int64_t h, int64_t w, int64_t th, int64_t tw, bool scaleup) {
          return detection::unletterbox_boxes(boxes,
                                              detection::letterbox_geometry(h, w, th, tw, scaleup));
        });

  // ---- COCO ground truth / results and the evaluator ----
  py::class_<Coco>(m, "CocoSet")
      .def(py::init<>())
      .def_static("load", &Coco::load, nogil)
      .def_static("parse", [](const std::string& json,
                              const std::string& source) { return Coco::parse(json, source); })
      .def("load_res_file", [](const Coco& c, const std::string& p) { return c.load_res(p); })
      .def("load_res",
           [](const Coco& c, py::handle dets) { return c.load_res(detections_of(dets)); })
      .def("save", &Coco::save)
      .def("images",
           [](const Coco& c) {
             py::list l;
             for (const auto& i : c.images()) l.append(image_dict(i));
             return l;
           })
      .def("categories",
           [](const Coco& c) {
             py::list l;
             for (const auto& i : c.categories()) l.append(category_dict(i));
             return l;
           })
      .def("annotations",
           [](const Coco& c) {
             py::list l;
             for (const auto& a : c.annotations()) l.append(annotation_dict(a));
             return l;
           })
      .def("image_ids", &Coco::image_ids)
      .def("category_ids", &Coco::category_ids);
  m.def("coco_save_detections", [](py::handle dets, const std::string& path) {
    metrics::save_detections(detections_of(dets), path);
  });

  py::class_<metrics::CocoEvalParams>(m, "CocoEvalParams")
      .def_readwrite("imgIds", &metrics::CocoEvalParams::img_ids)
      .def_readwrite("catIds", &metrics::CocoEvalParams::cat_ids)
      .def_readwrite("iouThrs", &metrics::CocoEvalParams::iou_thrs)
      .def_readwrite("recThrs", &metrics::CocoEvalParams::rec_thrs)
      .def_readwrite("maxDets", &metrics::CocoEvalParams::max_dets)
      .def_readwrite("areaRng", &metrics::CocoEvalParams::area_rng)
      .def_readwrite("areaRngLbl", &metrics::CocoEvalParams::area_lbl);
  py::class_<CocoEval>(m, "CocoEvaluator")
      .def(py::init<const Coco&, const Coco&, const std::string&>())
      .def_property(
          "params", [](CocoEval& e) -> metrics::CocoEvalParams& { return e.params; },
          [](CocoEval& e, const metrics::CocoEvalParams& p) { e.params = p; },
          py::return_value_policy::reference_internal)
      .def("evaluate", &CocoEval::evaluate, nogil)
      .def("accumulate", &CocoEval::accumulate, nogil)
      .def("summarize", &CocoEval::summarize, nogil)
      .def(
          "stats",
          [](const CocoEval& e) { return std::vector<double>(e.stats().begin(), e.stats().end()); })
      .def("precision", &CocoEval::precision)
      .def("recall", &CocoEval::recall);
  m.def("coco_stat_names", [] {
    const auto& n = CocoEval::stat_names();
    return std::vector<std::string>(n.begin(), n.end());
  });

  // ---- YOLOv5's loss (models/yolov5/loss.h) and the weight EMA ----
  m.def("yolo_scaled_hyp",
        [](int64_t nc, int64_t img) { return hyp_dict(models::scaled_hyp(nc, img)); });
  // targets (T, 6) [image, class, cx, cy, w, h] normalised -> the 18 tensors yolo_loss takes.
  m.def("yolo_build_targets", [](const Tensor& targets, int64_t batch, const Tensor& anchors,
                                 std::vector<std::pair<int64_t, int64_t>> grids, int64_t nc,
                                 py::dict hyp, int64_t capacity) {
    SPORE_CHECK(grids.size() == 3,
                "[yolo build_targets] expected 3 grids (P3, P4, P5) as (ny, nx), "
                "got ",
                grids.size());
    const models::YoloLossHyp h = hyp_of(hyp);
    py::gil_scoped_release r;
    return models::flatten_targets(models::build_targets(
        targets, batch, anchors, {grids[0], grids[1], grids[2]}, nc, h, capacity));
  });
  m.def("yolo_loss", [](const std::vector<Tensor>& raw, const std::vector<Tensor>& targets,
                        py::dict hyp) {
    SPORE_CHECK(raw.size() == 3 && targets.size() == 18,
                "[yolo loss] expected the 3 raw level outputs (B, 3, ny, nx, 5 + nc) and the 18 "
                "target tensors of yolo_build_targets, got ",
                raw.size(), " and ", targets.size());
    const models::YoloLossHyp h = hyp_of(hyp);
    const models::YoloLoss L = models::yolo_loss(raw, targets, h);
    return std::vector<Tensor>{L.loss, L.lbox, L.lobj, L.lcls};
  });
  py::class_<train::EMA, std::shared_ptr<train::EMA>>(m, "ModelEMA")
      .def(py::init([](const nn::CellPtr& model, nn::CellPtr ema, double decay, double tau) {
        return std::make_shared<train::EMA>(*model, std::move(ema), train::EMAOptions{decay, tau});
      }))
      .def(
          "update", [](train::EMA& e, const nn::CellPtr& model) { e.update(*model); }, nogil)
      .def_property("updates", &train::EMA::updates, &train::EMA::set_updates);
}

}  // namespace spore::python
