// YOLOv5's training loss (utils/loss.py ComputeLoss, v6/v7), split in two so Graph mode can
// compile it with fixed shapes:
//   build_targets (host): which (image, anchor, cell) each ground-truth box trains, from the boxes
//     and anchors only: anchors whose w / h ratio to the box is within anchor_t (4.0) in both
//     directions, the box's own cell and the two neighbour cells nearest its centre (offset 0.5).
//     The matches are padded to a fixed capacity with a mask, so a compiled step sees the same
//     shapes batch after batch.
//   yolo_loss (graph or eager): CIoU box loss, objectness BCE against the (detached, clamped) CIoU
//     of the matched predictions with per-level balance (4.0, 1.0, 0.4), class BCE; gains box 0.05
//     / obj 1.0 / cls 0.5 scaled as train.py does (scaled_hyp); returns the sum times the batch
//     size, as YOLOv5 does.
#pragma once
#include <array>
#include <vector>

#include "spore/tensor.h"

namespace spore::models {

struct YoloLossHyp {
  double box = 0.05, obj = 1.0, cls = 0.5;
  double anchor_t = 4.0;
  double label_smoothing = 0.0;
  std::array<double, 3> balance{4.0, 1.0, 0.4};
};
// train.py's scaling for 3 levels: cls *= nc / 80, obj *= (img / 640)^2 (box unchanged).
YoloLossHyp scaled_hyp(int64_t num_classes, int64_t img_size, YoloLossHyp base = {});

// One level's matches, padded to capacity M: the tensors a compiled loss takes.
struct LevelTargets {
  Tensor index;   // int64 (M): flat index into the level's (B, na, ny, nx) cells
  Tensor tbox;    // float32 (M, 4): [x, y] offset of the box centre from the cell's corner, [w, h]
                  // (grid units)
  Tensor anchor;  // float32 (M, 2): the matched anchor (grid units)
  Tensor cls;     // float32 (M, nc): class targets (1 - eps / 2 on the class, eps / 2 elsewhere)
  Tensor mask;    // float32 (M): 1 for a match, 0 for padding
  Tensor obj_write;  // float32 (M): 1 for the match that sets its cell's objectness target (the
                     // last one, as YOLOv5's tobj[b, a, gj, gi] = iou)
  int64_t count = 0;
  // The raw matches (unpadded), for inspection and tests: image, anchor, gj, gi, class.
  std::vector<std::array<int64_t, 5>> matches;
};

// targets: float (T, 6) [image index, class, cx, cy, w, h], centre and size normalised to [0, 1]
// (YOLOv5's label format). anchors: (3, 3, 2) in stride units (YoloDetect::anchors()). grids: per
// level (ny, nx). capacity 0: the largest level's count rounded up to a power of two (>= 256), the
// same for all three levels, so a run sees few distinct shapes.
std::array<LevelTargets, 3> build_targets(const Tensor& targets, int64_t batch,
                                          const Tensor& anchors,
                                          const std::array<std::pair<int64_t, int64_t>, 3>& grids,
                                          int64_t num_classes, const YoloLossHyp& hyp = {},
                                          int64_t capacity = 0);

// CIoU of (n, 4) [cx, cy, w, h] boxes, row by row (YOLOv5's bbox_iou(..., CIoU=True), eps 1e-7);
// differentiable in box1 and box2; alpha is held constant (no gradient) as in YOLOv5.
Tensor bbox_ciou(const Tensor& box1, const Tensor& box2);
// atan for positive x from ops (range reduction and a series; error < 1e-7): Spore has no atan
// primitive.
Tensor atan_positive(const Tensor& x);

struct YoloLoss {
  Tensor loss;              // (lbox + lobj + lcls) * batch, the value to differentiate
  Tensor lbox, lobj, lcls;  // scalars (already gained)
};
// raw: the three level outputs (B, na, ny, nx, 5 + nc); targets as built above.
YoloLoss yolo_loss(const std::vector<Tensor>& raw, const std::array<LevelTargets, 3>& targets,
                   const YoloLossHyp& hyp);
// The same with the target tensors flattened (6 per level: index, tbox, anchor, cls, mask,
// obj_write), the form a compiled step takes as inputs.
YoloLoss yolo_loss(const std::vector<Tensor>& raw, const std::vector<Tensor>& target_tensors,
                   const YoloLossHyp& hyp);
std::vector<Tensor> flatten_targets(const std::array<LevelTargets, 3>& targets);

}  // namespace spore::models
