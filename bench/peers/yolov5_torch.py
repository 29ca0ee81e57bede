#!/usr/bin/python3
"""PyTorch peer of bench_yolov5: YOLOv5s (v6/v7 layout, 80 classes, 7,235,389 parameters, the same
architecture as models/yolov5/yolov5.cpp) at 320 x 320, eager. Measures a training step at batch 16
(forward, a YOLOv5-style loss on the same number of matched predictions as Spore's padded targets:
CIoU box loss, objectness BCE over every cell against the detached IoU, class BCE; backward; SGD
nesterov with weight decay) and inference (eval mode, decoded boxes) at batch 1 and 16. Prints one
JSON line: median milliseconds over --runs.

Run with Debian's interpreter (python3-torch); torch.set_num_threads(--threads).
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn


class Conv(nn.Module):
    def __init__(self, c1, c2, k=1, s=1, p=None):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2 if p is None else p, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c1, c2, shortcut=True):
        super().__init__()
        self.cv1, self.cv2 = Conv(c1, c2, 1), Conv(c2, c2, 3)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3(nn.Module):
    def __init__(self, c1, c2, n=1, shortcut=True):
        super().__init__()
        c = c2 // 2
        self.cv1, self.cv2, self.cv3 = Conv(c1, c, 1), Conv(c1, c, 1), Conv(2 * c, c2, 1)
        self.m = nn.Sequential(*(Bottleneck(c, c, shortcut) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2, k=5):
        super().__init__()
        c = c1 // 2
        self.cv1, self.cv2 = Conv(c1, c, 1), Conv(4 * c, c2, 1)
        self.m = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))


ANCHORS = [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]]
STRIDES = [8, 16, 32]


class YoloV5s(nn.Module):
    def __init__(self, nc=80, gd=0.33, gw=0.5):
        super().__init__()
        d = lambda n: max(round(n * gd), 1) if n > 1 else n
        w = lambda c: math.ceil(c * gw / 8) * 8
        c64, c128, c256, c512, c1024 = (w(c) for c in (64, 128, 256, 512, 1024))
        self.b = nn.ModuleList([Conv(3, c64, 6, 2, 2), Conv(c64, c128, 3, 2), C3(c128, c128, d(3)), Conv(c128, c256, 3, 2),
                                C3(c256, c256, d(6)), Conv(c256, c512, 3, 2), C3(c512, c512, d(9)), Conv(c512, c1024, 3, 2),
                                C3(c1024, c1024, d(3)), SPPF(c1024, c1024)])
        self.h10, self.h13 = Conv(c1024, c512, 1), C3(2 * c512, c512, d(3), False)
        self.h14, self.h17 = Conv(c512, c256, 1), C3(2 * c256, c256, d(3), False)
        self.h18, self.h20 = Conv(c256, c256, 3, 2), C3(2 * c256, c512, d(3), False)
        self.h21, self.h23 = Conv(c512, c512, 3, 2), C3(2 * c512, c1024, d(3), False)
        self.nc, self.no, self.na = nc, nc + 5, 3
        self.m = nn.ModuleList(nn.Conv2d(c, self.no * 3, 1) for c in (c256, c512, c1024))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.register_buffer("anchor_grid", torch.tensor(ANCHORS, dtype=torch.float32).view(3, 1, 3, 1, 1, 2))

    def raw(self, x):
        for i in range(4):
            x = self.b[i](x)
        p3 = self.b[4](x)
        p4 = self.b[6](self.b[5](p3))
        x = self.b[9](self.b[8](self.b[7](p4)))
        h10 = self.h10(x)
        h14 = self.h14(self.h13(torch.cat((self.up(h10), p4), 1)))
        o17 = self.h17(torch.cat((self.up(h14), p3), 1))
        o20 = self.h20(torch.cat((self.h18(o17), h14), 1))
        o23 = self.h23(torch.cat((self.h21(o20), h10), 1))
        out = []
        for i, f in enumerate((o17, o20, o23)):
            y = self.m[i](f)
            bs, _, ny, nx = y.shape
            out.append(y.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous())
        return out

    def decode(self, raw):
        z = []
        for i, r in enumerate(raw):
            bs, _, ny, nx, _ = r.shape
            yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
            grid = torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2).float() - 0.5
            y = r.sigmoid()
            xy = (y[..., :2] * 2 + grid) * STRIDES[i]
            wh = (y[..., 2:4] * 2) ** 2 * self.anchor_grid[i]
            z.append(torch.cat((xy, wh, y[..., 4:]), -1).view(bs, -1, self.no))
        return torch.cat(z, 1)

    def forward(self, x):
        r = self.raw(x)
        return r if self.training else self.decode(r)


def ciou(b1, b2, eps=1e-7):
    (x1, y1, w1, h1), (x2, y2, w2, h2) = b1.chunk(4, -1), b2.chunk(4, -1)
    b1x1, b1x2, b1y1, b1y2 = x1 - w1 / 2, x1 + w1 / 2, y1 - h1 / 2, y1 + h1 / 2
    b2x1, b2x2, b2y1, b2y2 = x2 - w2 / 2, x2 + w2 / 2, y2 - h2 / 2, y2 + h2 / 2
    inter = (torch.min(b1x2, b2x2) - torch.max(b1x1, b2x1)).clamp(0) * (torch.min(b1y2, b2y2) - torch.max(b1y1, b2y1)).clamp(0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    cw, ch = torch.max(b1x2, b2x2) - torch.min(b1x1, b2x1), torch.max(b1y2, b2y2) - torch.min(b1y1, b2y1)
    c2 = cw ** 2 + ch ** 2 + eps
    rho2 = ((b2x1 + b2x2 - b1x1 - b1x2) ** 2 + (b2y1 + b2y2 - b1y1 - b1y2) ** 2) / 4
    v = (4 / math.pi ** 2) * torch.pow(torch.atan(w2 / h2) - torch.atan(w1 / h1), 2)
    with torch.no_grad():
        alpha = v / (v - iou + (1 + eps))
    return (iou - (rho2 / c2 + v * alpha)).squeeze(-1)


def loss_fn(raw, idx, tbox, anch, tcls, balance=(4.0, 1.0, 0.4)):
    bce = nn.BCEWithLogitsLoss()
    lbox = lobj = lcls = 0
    for i, p in enumerate(raw):
        flat = p.view(-1, p.shape[-1])
        ps = flat[idx[i]]
        pxy = ps[:, :2].sigmoid() * 2 - 0.5
        pwh = (ps[:, 2:4].sigmoid() * 2) ** 2 * anch[i]
        iou = ciou(torch.cat((pxy, pwh), 1), tbox[i])
        lbox = lbox + (1.0 - iou).mean()
        tobj = torch.zeros(flat.shape[0])
        tobj[idx[i]] = iou.detach().clamp(0)
        lobj = lobj + bce(flat[:, 4], tobj) * balance[i]
        lcls = lcls + bce(ps[:, 5:], tcls[i])
    return (lbox * 0.05 + lobj * 0.25 + lcls * 0.5) * raw[0].shape[0]


def median_ms(fn, runs, warm=1):
    for _ in range(warm):
        fn()
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--matches", type=int, default=512, help="matched predictions per level (Spore's padded capacity)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = YoloV5s()
    out = {"threads": args.threads, "torch": torch.__version__, "params": sum(p.numel() for p in model.parameters())}
    # Training step, batch 16.
    bs, img = 16, 320
    x = torch.rand(bs, 3, img, img)
    model.train()
    cells = [bs * 3 * (img // s) ** 2 for s in STRIDES]
    idx = [torch.randint(0, c, (args.matches,)) for c in cells]
    tbox = [torch.cat((torch.rand(args.matches, 2), torch.rand(args.matches, 2) * 4 + 0.5), 1) for _ in STRIDES]
    anch = [torch.rand(args.matches, 2) * 4 + 0.5 for _ in STRIDES]
    tcls = [torch.zeros(args.matches, 80).scatter_(1, torch.randint(0, 80, (args.matches, 1)), 1.0) for _ in STRIDES]
    g_bias = [p for n, p in model.named_parameters() if n.endswith("bias")]
    g_bn = [p for n, p in model.named_parameters() if n.endswith("bn.weight")]
    g_w = [p for n, p in model.named_parameters() if not n.endswith("bias") and not n.endswith("bn.weight")]
    opt = torch.optim.SGD(g_bias, lr=0.01, momentum=0.937, nesterov=True)
    opt.add_param_group({"params": g_w, "weight_decay": 5e-4})
    opt.add_param_group({"params": g_bn, "weight_decay": 0.0})

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), idx, tbox, anch, tcls)
        loss.backward()
        opt.step()

    out["train_ms_b16"] = median_ms(step, args.runs)
    model.eval()
    with torch.no_grad():
        for b in (1, 16):
            xb = torch.rand(b, 3, img, img)
            out[f"infer_ms_b{b}"] = median_ms(lambda: model(xb), args.runs * (5 if b == 1 else 1), warm=2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
