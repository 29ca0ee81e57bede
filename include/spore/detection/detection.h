// Detection post-processing on the host: box formats, IoU, greedy NMS (torchvision's nms and
// batched_nms semantics), YOLO-style non_max_suppression over (B, N, 5 + classes) predictions and
// the letterbox geometry that maps boxes back to the original image.
//
//   auto dets = detection::non_max_suppression(pred, {.conf_thres = 0.25, .iou_thres = 0.45});
//   // dets[b]: (n, 6) float32 [x1, y1, x2, y2, score, class], highest score first
//   auto g = detection::letterbox_geometry(orig_h, orig_w, 320, 320);
//   Tensor boxes = detection::unletterbox_boxes(dets[b].slice(1, 0, 4), g);   // original pixels
//
// Boxes are float32 (N, 4); "xyxy" is [x1, y1, x2, y2], "xywh" is [center x, center y, w, h]
// (YOLO's output), COCO's [x, y, w, h] is "ltwh". Inputs are read on the CPU (any float dtype, any
// layout); results are new float32 / int64 tensors. These are not ops: no gradients, not traced.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "spore/tensor.h"

namespace spore::detection {

Tensor xywh2xyxy(const Tensor& boxes);  // (N, 4) center-size -> corners
Tensor xyxy2xywh(const Tensor& boxes);  // corners -> center-size
Tensor xyxy2ltwh(const Tensor& boxes);  // corners -> COCO [x, y, w, h]
Tensor ltwh2xyxy(const Tensor& boxes);  // COCO [x, y, w, h] -> corners

// (N, 4) x (M, 4) xyxy -> (N, M) float32 IoU (0 where the union is empty).
Tensor box_iou(const Tensor& a, const Tensor& b);

// Greedy NMS (torchvision.ops.nms): boxes in descending score order (ties: lower index first); a
// box is dropped when its IoU with a kept one is > iou_threshold. IoU in float32 as torchvision's
// CPU kernel. Returns the kept indices (int64), highest score first.
Tensor nms(const Tensor& boxes, const Tensor& scores, double iou_threshold);
// Class-aware NMS (torchvision.ops.batched_nms): boxes of different idxs (int, (N)) never
// suppress each other. Returns kept indices, highest score first.
Tensor batched_nms(const Tensor& boxes, const Tensor& scores, const Tensor& idxs,
                   double iou_threshold);

struct NmsOptions {
  double conf_thres = 0.25;  // YOLOv5's detect.py; its COCO evaluation uses 0.001
  double iou_thres = 0.45;   // its COCO evaluation uses 0.6
  bool multi_label = false;  // one candidate per (box, class) with obj * cls > conf_thres
  bool agnostic = false;     // true: classes suppress each other
  int64_t max_det = 300;
  int64_t max_nms = 30000;  // candidates kept (by score) before NMS
};
// YOLO predictions (B, N, 5 + C): [cx, cy, w, h, objectness, class probabilities...] (already
// sigmoid-ed, boxes in input pixels). Per image: candidates with objectness > conf_thres, score =
// objectness * class probability, then class-aware NMS. Returns B tensors (n, 6) float32
// [x1, y1, x2, y2, score, class], highest score first, n <= max_det.
std::vector<Tensor> non_max_suppression(const Tensor& prediction, const NmsOptions& opts = {});

// The geometry of vision::Letterbox (spore/data/vision.h) for an image of (h, w) put into (th, tw):
// scale r = min(th / h, tw / w) (at most 1 when !scaleup), resized to (round(h r), round(w r)),
// placed at (left, top) = ((tw - nw) / 2, (th - nh) / 2) (integer division).
struct LetterboxGeometry {
  int64_t h = 0, w = 0;    // the original image
  int64_t th = 0, tw = 0;  // the letterboxed image
  int64_t nh = 0, nw = 0;  // the resized image inside it
  int64_t left = 0, top = 0;
  float sx = 1, sy = 1;  // nw / w, nh / h (as float32, as the transform)
};
LetterboxGeometry letterbox_geometry(int64_t h, int64_t w, int64_t th, int64_t tw,
                                     bool scaleup = true);
// xyxy boxes in the letterboxed image -> the original image, clipped to [0, w] x [0, h].
Tensor unletterbox_boxes(const Tensor& boxes, const LetterboxGeometry& g);

// Images as RGB (H, W, 3) uint8 tensors (the data engine's decoded layout), through OpenCV.
Tensor read_image(const std::string& path);                      // JPEG, PNG, ...
void write_image(const std::string& path, const Tensor& image);  // format from the extension
// A copy of image with each detection (n, 6) [x1, y1, x2, y2, score, class] drawn as a box in its
// class's colour and labelled "name score" (names[class], or the class number).
Tensor draw_detections(const Tensor& image, const Tensor& dets,
                       const std::vector<std::string>& names = {});

}  // namespace spore::detection
