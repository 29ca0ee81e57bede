"""YOLOv5s (Ultralytics v6.0 / v7.0 architecture) written in Python as MindSpore Cells: the same
network as the model zoo's C++ models/yolov5/yolov5.cpp (7.04 M parameters at 8 classes), built from
nn.Conv2d, nn.BatchNorm2d, nn.SiLU, nn.MaxPool2d and ops.concat / ops.interpolate.

    backbone  Conv 6x6/2, Conv 3x3/2, C3 x1, Conv/2, C3 x2, Conv/2, C3 x3, Conv/2, C3 x1, SPPF(5)
    neck      PANet: Conv 1x1, nearest x2, concat, C3 (no shortcut) ... to P3/8, P4/16, P5/32
    head      Detect: a 1x1 conv per level to 3 anchors x (5 + classes)

Training mode returns the three raw level outputs (B, 3, ny, nx, 5 + nc) for the loss; eval mode
the decoded predictions (B, N, 5 + nc) for ops.non_max_suppression."""
import math

import numpy as np

import spore as ms
from spore import nn, ops

STRIDES = (8, 16, 32)
ANCHORS = ((10, 13, 16, 30, 33, 23), (30, 61, 62, 45, 59, 119), (116, 90, 156, 198, 373, 326))


class Conv(nn.Cell):
    """conv (no bias, padding k // 2) + BatchNorm (eps 1e-3, momentum 0.97) + SiLU."""

    def __init__(self, c1, c2, k=1, s=1, p=None):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, pad_mode="pad", padding=k // 2 if p is None else p)
        self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.97)
        self.act = nn.SiLU()

    def construct(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Cell):
    def __init__(self, c1, c2, shortcut=True, e=0.5):
        super().__init__()
        c = int(c2 * e)
        self.cv1 = Conv(c1, c, 1, 1)
        self.cv2 = Conv(c, c2, 3, 1)
        self.add = shortcut and c1 == c2

    def construct(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3(nn.Cell):
    def __init__(self, c1, c2, n=1, shortcut=True):
        super().__init__()
        c = c2 // 2
        self.cv1 = Conv(c1, c, 1, 1)
        self.cv2 = Conv(c1, c, 1, 1)
        self.cv3 = Conv(2 * c, c2, 1)
        self.m = nn.SequentialCell([Bottleneck(c, c, shortcut, 1.0) for _ in range(n)])

    def construct(self, x):
        return self.cv3(ops.concat((self.m(self.cv1(x)), self.cv2(x)), 1))


class SPPF(nn.Cell):
    def __init__(self, c1, c2, k=5):
        super().__init__()
        c = c1 // 2
        self.cv1 = Conv(c1, c, 1, 1)
        self.cv2 = Conv(4 * c, c2, 1, 1)
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, pad_mode="same")

    def construct(self, x):
        a = self.cv1(x)
        y1 = self.m(a)
        y2 = self.m(y1)
        return self.cv2(ops.concat((a, y1, y2, self.m(y2)), 1))


class Detect(nn.Cell):
    """Per level a 1x1 conv to na * (5 + nc); biases start at YOLOv5's prior (about 8 objects per
    640 image, class probability 0.6 / nc)."""

    def __init__(self, nc, ch):
        super().__init__()
        self.nc, self.no, self.na = nc, nc + 5, 3
        self.m = nn.CellList([nn.Conv2d(c, self.no * self.na, 1, pad_mode="valid", has_bias=True) for c in ch])
        # anchors in stride units (build_targets' input) and in pixels per level (decode's)
        self.anchors = np.array(ANCHORS, np.float32).reshape(3, 3, 2) / np.array(STRIDES, np.float32)[:, None, None]
        self.anchor_px = [ms.Tensor(np.array(a, np.float32).reshape(1, 3, 1, 1, 2)) for a in ANCHORS]
        self._grids = {}
        for conv, s in zip(self.m, STRIDES):
            b = conv.bias.asnumpy().reshape(self.na, self.no).copy()
            b[:, 4] += math.log(8 / (640 / s) ** 2)
            b[:, 5:] += math.log(0.6 / (nc - 0.99999))
            conv.bias.set_data(ms.Tensor(b.reshape(-1)))

    def construct(self, p3, p4, p5):
        out = []
        for conv, x in zip(self.m, (p3, p4, p5)):
            y = conv(x)
            b, _, ny, nx = y.shape
            out.append(ops.transpose(ops.reshape(y, (b, self.na, self.no, ny, nx)), (0, 1, 3, 4, 2)))
        return tuple(out)

    def _grid(self, ny, nx):
        if (ny, nx) not in self._grids:
            yv, xv = np.meshgrid(np.arange(ny, dtype=np.float32), np.arange(nx, dtype=np.float32), indexing="ij")
            self._grids[(ny, nx)] = ms.Tensor(np.stack((xv, yv), -1).reshape(1, 1, ny, nx, 2) - 0.5)
        return self._grids[(ny, nx)]

    def decode(self, raw):
        """xy = (2 sigmoid - 0.5 + cell) stride, wh = (2 sigmoid)^2 anchor; (B, N, 5 + nc)."""
        z = []
        for i, r in enumerate(raw):
            y = ops.sigmoid(r.astype(ms.float32))
            b, _, ny, nx, _ = y.shape
            xy = (y[..., 0:2] * 2.0 + self._grid(ny, nx)) * float(STRIDES[i])
            wh = ops.square(y[..., 2:4] * 2.0) * self.anchor_px[i]
            z.append(ops.reshape(ops.concat((xy, wh, y[..., 4:]), -1), (b, -1, self.no)))
        return ops.concat(z, 1)


def _divisible(x, d=8):
    return int(math.ceil(x / d) * d)


class YOLOv5(nn.Cell):
    def __init__(self, num_classes, depth_multiple=0.33, width_multiple=0.50):
        super().__init__()
        def d(n):
            return max(round(n * depth_multiple), 1) if n > 1 else n

        def w(c):
            return _divisible(c * width_multiple)

        c64, c128, c256, c512, c1024 = w(64), w(128), w(256), w(512), w(1024)
        # backbone
        self.b0 = Conv(3, c64, 6, 2, 2)
        self.b1 = Conv(c64, c128, 3, 2)
        self.b2 = C3(c128, c128, d(3))
        self.b3 = Conv(c128, c256, 3, 2)
        self.b4 = C3(c256, c256, d(6))
        self.b5 = Conv(c256, c512, 3, 2)
        self.b6 = C3(c512, c512, d(9))
        self.b7 = Conv(c512, c1024, 3, 2)
        self.b8 = C3(c1024, c1024, d(3))
        self.b9 = SPPF(c1024, c1024, 5)
        # neck (PANet)
        self.h10 = Conv(c1024, c512, 1, 1)
        self.h13 = C3(c512 + c512, c512, d(3), False)
        self.h14 = Conv(c512, c256, 1, 1)
        self.h17 = C3(c256 + c256, c256, d(3), False)
        self.h18 = Conv(c256, c256, 3, 2)
        self.h20 = C3(c256 + c256, c512, d(3), False)
        self.h21 = Conv(c512, c512, 3, 2)
        self.h23 = C3(c512 + c512, c1024, d(3), False)
        self.detect = Detect(num_classes, (c256, c512, c1024))

    @staticmethod
    def _up(x):
        return ops.interpolate(x, size=(x.shape[2] * 2, x.shape[3] * 2), mode="nearest")

    def raw(self, x):
        y = self.b3(self.b2(self.b1(self.b0(x))))
        p3 = self.b4(y)
        p4 = self.b6(self.b5(p3))
        y = self.b9(self.b8(self.b7(p4)))
        h10 = self.h10(y)
        h14 = self.h14(self.h13(ops.concat((self._up(h10), p4), 1)))
        o17 = self.h17(ops.concat((self._up(h14), p3), 1))
        o20 = self.h20(ops.concat((self.h18(o17), h14), 1))
        o23 = self.h23(ops.concat((self.h21(o20), h10), 1))
        return self.detect(o17, o20, o23)

    def construct(self, x):
        raw = self.raw(x)
        return raw if self.training else self.detect.decode(raw)


def yolov5s(num_classes):
    return YOLOv5(num_classes, 0.33, 0.50)


def yolov5n(num_classes):
    return YOLOv5(num_classes, 0.33, 0.25)


MODELS = {"yolov5n": yolov5n, "yolov5s": yolov5s}  # the model zoo's sizes (models/yolov5/yolov5.h)
