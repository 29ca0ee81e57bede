"""YOLOv5's training pieces from the model zoo (models/yolov5/loss.h, include/spore/train/
callbacks.h), bound as they are so a YOLOv5 written in Python trains with the same definitions as
`spore train yolov5s`:

    hyp = yolo.scaled_hyp(num_classes, img_size)            # train.py's gains for nc and img
    targets = yolo.build_targets(labels, batch, anchors, grids, num_classes, hyp)   # host, per batch
    loss, lbox, lobj, lcls = yolo.yolo_loss([p3, p4, p5], targets, hyp)             # differentiable
    ema = yolo.ModelEMA(net, ema_net)  ...  ema.update(net)

build_targets runs on the host (in the data pipeline); yolo_loss is made of ops, so it runs in
PYNATIVE_MODE and compiles in GRAPH_MODE like any construct."""
from .. import _C
from ..common.tensor import Tensor


def scaled_hyp(num_classes, img_size):
    """YOLOv5's loss gains (box 0.05, obj 1.0, cls 0.5, anchor_t 4, balance (4, 1, 0.4)) scaled as
    train.py does: cls * nc / 80, obj * (img / 640)^2. A dict; edit it to change a gain."""
    return _C.yolo_scaled_hyp(int(num_classes), int(img_size))


def build_targets(labels, batch, anchors, grids, num_classes, hyp, capacity=0):
    """labels (T, 6) [image index in the batch, class, cx, cy, w, h] (centre and size normalised to
    [0, 1]); anchors (3, 3, 2) in stride units; grids ((ny, nx) of P3, P4, P5). Returns the 18
    target tensors yolo_loss takes (per level: index, tbox, anchor, cls, mask, obj_write), padded to
    `capacity` matches (0: a power of two >= 256, so a compiled step sees few shapes)."""
    t = labels if isinstance(labels, Tensor) else Tensor(labels)
    a = anchors if isinstance(anchors, Tensor) else Tensor(anchors)
    return _C.yolo_build_targets(t, int(batch), a, [tuple(int(v) for v in g) for g in grids], int(num_classes),
                                 dict(hyp), int(capacity))


def yolo_loss(raw, targets, hyp):
    """raw: the three level outputs (B, 3, ny, nx, 5 + nc) (float32); targets: build_targets'.
    Returns (loss, lbox, lobj, lcls): CIoU box loss, objectness BCE against the matched CIoU with
    per-level balance, class BCE; loss = (lbox + lobj + lcls) * batch, as YOLOv5."""
    return tuple(_C.yolo_loss(list(raw), list(targets), dict(hyp)))


class ModelEMA:
    """YOLOv5's ModelEMA (train::EMA): ema_net (same architecture) starts as a copy of net; each
    update(net) does ema = d ema + (1 - d) value over the parameters and floating buffers, with
    d = decay (1 - exp(-updates / tau)). ema_net is kept in eval mode: evaluate it."""

    def __init__(self, net, ema_net, decay=0.9999, tau=2000):
        self._ema = _C.ModelEMA(net._cpp, ema_net._cpp, float(decay), float(tau))
        self.ema_net = ema_net

    def update(self, net):
        self._ema.update(net._cpp)

    @property
    def updates(self):
        return self._ema.updates
