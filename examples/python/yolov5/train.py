"""Seed 000's central program in MindSpore's API: YOLOv5s written in Python (model.py), fed by
GeneratorDataset over a user class that reads a COCO-layout folder with cv2 (or, without cv2, the
dataset.vision ops), trained with amp O2 and YOLOv5's recipe, evaluated with COCO mAP.

    build/spore data make-shapes --out data/shapes              # the generated shapes set
    PYTHONPATH=build/python python3 examples/python/yolov5/train.py --data data/shapes --epochs 3

The recipe is the one `spore train yolov5s` runs (models/yolov5/train.h), so the two can be compared
on the same data and epochs: SGD with Nesterov momentum 0.937 over three parameter groups (biases,
weights with decay 5e-4 * batch * accumulate / 64, BatchNorm gammas), gradients summed to a nominal
batch of 64 and clipped at norm 10, warm-up over max(3 epochs, 100) steps, a linear lr schedule, an
EMA of the weights (evaluated), float16 compute with a dynamic loss scale (amp O2), mosaic,
random affine, flips and colour jitter. The loss is the model zoo's (spore.train.yolo: one
definition for both), the evaluator pycocotools' semantics (spore.train.coco)."""
import argparse
import json
import os
import sys
import time

import numpy as np

import spore as ms
from spore import nn, ops
from spore.dataset import vision
from spore.train import yolo
from spore.train.coco import COCO, COCOeval

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import MODELS  # noqa: E402

try:
    import cv2
except ImportError:  # the dataset.vision ops decode instead
    cv2 = None


class ShapesData:
    """A COCO-layout split (DIR/{split}2017/, DIR/annotations/instances_{split}2017.json) as a
    random-access source: each item is (image uint8 (img, img, 3), labels float32 (K, 5) [class,
    cx, cy, w, h] normalised), augmented for training. Crowd boxes are left out (YOLOv5's labels)."""

    def __init__(self, root, split, img, augment, limit=None):
        with open(os.path.join(root, "annotations", f"instances_{split}2017.json")) as f:
            coco = json.load(f)
        self.img, self.augment = img, augment
        self.category_ids = sorted(c["id"] for c in coco["categories"])
        cls_of = {c: i for i, c in enumerate(self.category_ids)}
        images = coco["images"][:limit] if limit else coco["images"]
        self.ids = [i["id"] for i in images]
        self.sizes = [(i["height"], i["width"]) for i in images]
        self.files = [os.path.join(root, f"{split}2017", i["file_name"]) for i in images]
        row = {i: k for k, i in enumerate(self.ids)}
        self.boxes = [[] for _ in images]
        self.classes = [[] for _ in images]
        for a in coco["annotations"]:
            k = row.get(a["image_id"])
            if k is None or a.get("iscrowd", 0) or a["bbox"][2] <= 0 or a["bbox"][3] <= 0:
                continue
            self.boxes[k].append(a["bbox"])
            self.classes[k].append(cls_of[a["category_id"]])
        self.letterbox = vision.Letterbox(img)
        self.affine_mosaic = vision.RandomAffineWithBBox(translate=0.1, scale=0.5, size=img)
        self.affine = vision.RandomAffineWithBBox(translate=0.1, scale=0.5)
        self.mosaic = vision.Mosaic(img)
        self.flip = vision.RandomHorizontalFlipWithBBox(0.5)
        self.color = vision.RandomColorAdjust(brightness=0.4, saturation=0.7, hue=0.015)
        self.decode = vision.Decode()

    def __len__(self):
        return len(self.files)

    def read(self, i):
        if cv2 is not None:
            image = cv2.cvtColor(cv2.imread(self.files[i]), cv2.COLOR_BGR2RGB)
        else:
            image = self.decode(np.fromfile(self.files[i], np.uint8))
        boxes = np.array(self.boxes[i], np.float32).reshape(-1, 4)
        classes = np.array(self.classes[i], np.int32).reshape(-1, 1)
        return self.letterbox(image, boxes, classes)

    def __getitem__(self, i):
        if not self.augment:
            image, boxes, classes = self.read(i)
        elif np.random.rand() < 1.0:  # mosaic probability 1.0 (hyp.scratch-low)
            others = np.random.randint(0, len(self), 3)
            image, boxes, classes = self.affine_mosaic(*self.mosaic(self.read(i), *(self.read(j) for j in others)))
        else:
            image, boxes, classes = self.affine(*self.read(i))
        if self.augment:
            image, boxes, classes = self.flip(image, boxes, classes)
            image = self.color(image)
        h, w = image.shape[:2]
        labels = np.zeros((len(boxes), 5), np.float32)
        labels[:, 0] = classes[:, 0]
        labels[:, 1] = (boxes[:, 0] + boxes[:, 2] / 2) / w
        labels[:, 2] = (boxes[:, 1] + boxes[:, 3] / 2) / h
        labels[:, 3] = boxes[:, 2] / w
        labels[:, 4] = boxes[:, 3] / h
        return image, labels


class YoloWithLoss(nn.Cell):
    """net(images) -> the three raw levels -> the model zoo's loss (in float32: amp O2's output
    cast). Returns the loss, (lbox + lobj + lcls) * batch."""

    def __init__(self, net, hyp):
        super().__init__()
        self.net, self.hyp = net, hyp

    def construct(self, images, *targets):
        raw = [r.astype(ms.float32) for r in self.net(images)]
        return yolo.yolo_loss(raw, targets, self.hyp)[0]


def train_batches(data, batch, anchors, nc, hyp, workers):
    img = data.img
    grids = [(img // s, img // s) for s in (8, 16, 32)]

    def to_step(images, labels):  # a batch -> images float32 (B, 3, H, W) in [0, 1] + the 18 targets
        t = [np.concatenate((np.full((len(l), 1), b, np.float32), l), 1)
             for b, l in enumerate(labels) for l in [l[l[:, 0] >= 0]]]
        t = np.concatenate(t) if t else np.zeros((0, 6), np.float32)
        targets = yolo.build_targets(t, len(images), anchors, grids, nc, hyp)
        x = np.ascontiguousarray(images.transpose(0, 3, 1, 2), np.float32) / 255.0
        return (x, *[a.asnumpy() for a in targets])

    names = ["images"] + [f"{f}{level}" for level in range(3)
                          for f in ("index", "tbox", "anchor", "cls", "mask", "obj_write")]
    ds = ms.dataset.GeneratorDataset(data, ["image", "labels"], shuffle=True, num_parallel_workers=workers,
                                     python_multiprocessing=False)
    ds = ds.batch(batch, drop_remainder=False, pad_info={"labels": ([-1, 5], -1)})
    return ds.map(to_step, input_columns=["image", "labels"], output_columns=names)


def param_groups(net, weight_decay):
    """YOLOv5's smart_optimizer groups: biases (no decay) first, weights, BatchNorm gammas (no decay)."""
    biases, weights, bn = [], [], []
    for p in net.trainable_params():
        (biases if p.name.endswith(("bias", "beta")) else bn if p.name.endswith("gamma") else weights).append(p)
    return [{"params": biases, "weight_decay": 0.0}, {"params": weights, "weight_decay": weight_decay},
            {"params": bn, "weight_decay": 0.0}]


def evaluate(net, val, root, batch):
    """Letterboxed val images -> net (eval mode) -> NMS (conf 0.001, IoU 0.6, multi-label) -> boxes in
    the original image -> COCOeval against the split's annotation file. Returns the 12 numbers."""
    net.set_train(False)
    results = []
    for start in range(0, len(val), batch):
        idx = range(start, min(len(val), start + batch))
        x = np.stack([val.read(i)[0] for i in idx]).transpose(0, 3, 1, 2).astype(np.float32) / 255.0
        pred = net(ms.Tensor(x))
        for i, det in zip(idx, ops.non_max_suppression(pred, 0.001, 0.6, multi_label=True, max_det=300)):
            d = det.asnumpy()
            h, w = val.sizes[i]
            r = min(val.img / h, val.img / w)  # the letterbox's geometry (vision.Letterbox)
            nh, nw = round(h * r), round(w * r)
            left, top = (val.img - nw) // 2, (val.img - nh) // 2
            x1 = np.clip((d[:, 0] - left) / (nw / w), 0, w)
            y1 = np.clip((d[:, 1] - top) / (nh / h), 0, h)
            x2 = np.clip((d[:, 2] - left) / (nw / w), 0, w)
            y2 = np.clip((d[:, 3] - top) / (nh / h), 0, h)
            for k in range(len(d)):
                results.append({"image_id": val.ids[i], "category_id": val.category_ids[int(d[k, 5])],
                                "bbox": [float(x1[k]), float(y1[k]), float(x2[k] - x1[k]), float(y2[k] - y1[k])],
                                "score": float(d[k, 4])})
    gt = COCO(os.path.join(root, "annotations", "instances_val2017.json"))
    ev = COCOeval(gt, gt.loadRes(results), "bbox")
    ev.params.imgIds = val.ids
    ev.evaluate()
    ev.accumulate()
    ev.summarize()
    return ev.stats


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="a COCO-layout folder (spore data make-shapes --out DIR)")
    p.add_argument("--model", choices=sorted(MODELS), default="yolov5s")
    p.add_argument("--img", type=int, default=320)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--limit", type=int, default=None, help="use only the first N training images")
    p.add_argument("--eval-limit", type=int, default=None, help="use only the first N val images")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--mode", choices=["graph", "pynative"], default="graph")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    ms.set_context(mode=ms.GRAPH_MODE if args.mode == "graph" else ms.PYNATIVE_MODE)
    ms.set_seed(args.seed)

    train = ShapesData(args.data, "train", args.img, augment=True, limit=args.limit)
    val = ShapesData(args.data, "val", args.img, augment=False, limit=args.eval_limit)
    nc, bs, nbs, epochs = len(train.category_ids), args.batch_size, 64, args.epochs
    net, ema_net = MODELS[args.model](nc), MODELS[args.model](nc)
    print(f"{args.model} (Python): {sum(int(np.prod(q.shape)) for q in net.trainable_params())} parameters, {nc} "
          f"classes, {len(train)} training / {len(val)} validation images at {args.img} px, batch {bs}, "
          f"{epochs} epochs, {args.mode} mode, amp O2")

    hyp = yolo.scaled_hyp(nc, args.img)
    accumulate = max(round(nbs / bs), 1)
    lr0, lrf, momentum = 0.01, 0.01, 0.937
    opt = nn.Momentum(param_groups(net, 5e-4 * bs * accumulate / nbs), lr0, momentum, use_nesterov=True)
    opt.set_clip_grad_norm(10.0)  # YOLOv5 clips the gradient norm at 10, inside the compiled update
    ms.amp.auto_mixed_precision(net, "O2")  # float16 except BatchNorm; the loss stays float32
    step = nn.TrainOneStepWithLossScaleCell(YoloWithLoss(net, hyp), opt,
                                            ms.amp.DynamicLossScaleManager(65536, 2, 2000))
    step.set_grad_accumulation(1, "sum")  # the warm-up raises it to nbs / batch
    ema = yolo.ModelEMA(net, ema_net)
    data = train_batches(train, bs, net.detect.anchors, nc, hyp, args.workers)

    nb = data.get_dataset_size()
    warmup = max(round(3 * nb), 100)
    lf = lambda e: (1 - e / epochs) * (1.0 - lrf) + lrf  # noqa: E731  the linear schedule
    ni, last_update, times = 0, 0, []
    net.set_train(True)
    for epoch in range(epochs):
        lr_epoch = lr0 * lf(epoch)
        t0, seen, total = time.perf_counter(), 0, 0.0
        for batch in data.create_tuple_iterator():
            if ni <= warmup:  # YOLOv5's warm-up: np.interp over the first `warmup` steps
                f = ni / warmup
                step.set_grad_accumulation(max(1, round(1 + f * (nbs / bs - 1))), "sum")
                for g, start in enumerate((0.1, 0.0, 0.0)):
                    opt.set_group_lr(g, start + f * (lr_epoch - start))
                opt.set_momentum(0.8 + f * (momentum - 0.8))
            else:
                for g in range(3):
                    opt.set_group_lr(g, lr_epoch)
            loss, _, _ = step(*batch)
            updates = int(opt.global_step.asnumpy())
            if updates != last_update:  # an optimizer update happened (not accumulating or skipped)
                last_update = updates
                ema.update(net)
            total += float(loss.asnumpy())
            seen += batch[0].shape[0]
            ni += 1
        times.append(time.perf_counter() - t0)
        print(f"epoch {epoch + 1}/{epochs}: loss {total / max(seen, 1):.4f}, lr {lr_epoch:.5f}, "
              f"{seen / times[-1]:.1f} images/s, {times[-1]:.1f} s", flush=True)
    print("validation (EMA weights):")
    stats = evaluate(ema_net, val, args.data, bs)
    print(f"mAP@[.5:.95] {stats[0]:.4f}, mAP@.5 {stats[1]:.4f}; epoch times {[round(t, 1) for t in times]} s")
    return stats, times


if __name__ == "__main__":
    main()
