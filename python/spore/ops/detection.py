"""Detection post-processing (spore/detection/detection.h, one C++ definition each):
MindSpore's ops.NMSWithMask primitive, torchvision-style ops.nms / ops.batched_nms / ops.box_iou,
and YOLOv5's ops.non_max_suppression over (B, N, 5 + classes) predictions. None of these has a
gradient (NMS is post-processing, as in MindSpore and torchvision); inputs are read on the host."""
from .. import _C
from ..common.tensor import Tensor
from .operations import Primitive


def _t(x):
    return x if isinstance(x, Tensor) else Tensor(x)


class NMSWithMask(Primitive):
    """MindSpore's NMSWithMask(iou_threshold=0.5): bboxes (N, 5) [x1, y1, x2, y2, score] ->
    (output_boxes (N, 5) sorted by score, highest first; output_idx (N,) int32, their input rows;
    selected_mask (N,) bool, True for the boxes NMS keeps). A box is suppressed when its IoU with a
    kept, higher-scoring box is > iou_threshold (ties in score keep the input order)."""

    def __init__(self, iou_threshold=0.5):
        super().__init__("NMSWithMask")
        self.iou_threshold = float(iou_threshold)
        self.add_prim_attr("iou_threshold", self.iou_threshold)

    def __call__(self, bboxes):
        return tuple(_C.det_nms_with_mask(_t(bboxes), self.iou_threshold))


def nms(boxes, scores, iou_threshold):
    """torchvision.ops.nms: indices (int64) of the boxes (N, 4) xyxy kept by greedy NMS, highest
    score first; a box is dropped when its IoU with a kept one is > iou_threshold."""
    return _C.det_nms(_t(boxes), _t(scores), float(iou_threshold))


def batched_nms(boxes, scores, idxs, iou_threshold):
    """torchvision.ops.batched_nms: per-class NMS (boxes of different idxs never suppress each
    other); kept indices (int64), highest score first."""
    return _C.det_batched_nms(_t(boxes), _t(scores), _t(idxs), float(iou_threshold))


def box_iou(boxes1, boxes2):
    """(N, 4) x (M, 4) xyxy boxes -> (N, M) float32 IoU."""
    return _C.det_box_iou(_t(boxes1), _t(boxes2))


def non_max_suppression(prediction, conf_thres=0.25, iou_thres=0.45, multi_label=False, agnostic=False,
                        max_det=300, max_nms=30000):
    """YOLOv5's non_max_suppression: prediction (B, N, 5 + nc) [cx, cy, w, h, objectness, class
    probabilities] (decoded, boxes in input pixels) -> a list of B tensors (n, 6) [x1, y1, x2, y2,
    score, class], highest score first. multi_label: one candidate per (box, class) above conf_thres
    (YOLOv5's evaluation); agnostic: classes suppress each other."""
    return _C.det_non_max_suppression(_t(prediction), float(conf_thres), float(iou_thres), bool(multi_label),
                                      bool(agnostic), int(max_det), int(max_nms))
