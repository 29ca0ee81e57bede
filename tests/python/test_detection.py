"""Detection from Python (issue 31): NMS (ops.NMSWithMask, ops.nms, ops.batched_nms) against a
reference greedy NMS (and torchvision.ops when importable), spore.train.coco's COCOeval against the
C++ evaluator (`spore coco-eval --json`) on the same files, dataset.CocoDataset's detection columns,
the fused decode + resize and the box-aware transforms, and the YOLOv5 loss binding."""
import json
import os
import subprocess

import numpy as np
import pytest

import spore as ms
from spore import ops
from spore.dataset import vision
from spore.train import yolo
from spore.train.coco import COCO, COCOeval, save_results
from conftest import BUILD


def _reference_nms(boxes, scores, thr):
    """torchvision's greedy NMS in float32: descending score (stable), drop IoU > thr."""
    order = np.argsort(-scores, kind="stable")
    keep, dead = [], np.zeros(len(boxes), bool)
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    for i in order:
        if dead[i]:
            continue
        keep.append(i)
        xx1 = np.maximum(boxes[i, 0], boxes[:, 0])
        yy1 = np.maximum(boxes[i, 1], boxes[:, 1])
        xx2 = np.minimum(boxes[i, 2], boxes[:, 2])
        yy2 = np.minimum(boxes[i, 3], boxes[:, 3])
        inter = np.clip(xx2 - xx1, 0, None) * np.clip(yy2 - yy1, 0, None)
        iou = inter / (area[i] + area - inter)
        dead |= iou > thr
    return np.array(keep, np.int64)


def _random_boxes(n, seed):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 100, (n, 2)).astype(np.float32)
    wh = rng.uniform(5, 40, (n, 2)).astype(np.float32)
    scores = rng.random(n).astype(np.float32)
    scores[::7] = scores[0]  # ties keep the input order
    return np.concatenate((xy, xy + wh), 1), scores


@pytest.mark.parametrize("thr", [0.3, 0.5, 0.7])
def test_nms_matches_the_reference(thr):
    boxes, scores = _random_boxes(300, int(thr * 10))
    keep = ops.nms(boxes, scores, thr).asnumpy()
    np.testing.assert_array_equal(keep, _reference_nms(boxes, scores, thr))
    try:
        import torch
        import torchvision
    except ImportError:
        return
    np.testing.assert_array_equal(keep, torchvision.ops.nms(torch.from_numpy(boxes), torch.from_numpy(scores),
                                                            thr).numpy())


def test_batched_nms_is_per_class():
    boxes, scores = _random_boxes(200, 3)
    idxs = np.random.default_rng(4).integers(0, 4, 200)
    keep = ops.batched_nms(boxes, scores, idxs, 0.5).asnumpy()
    want = []
    for c in range(4):
        sel = np.nonzero(idxs == c)[0]
        want += list(sel[_reference_nms(boxes[sel], scores[sel], 0.5)])
    want = np.array(sorted(want, key=lambda i: (-scores[i], i)))
    np.testing.assert_array_equal(keep, want)


def test_nms_with_mask_is_mindsporess_layout():
    boxes, scores = _random_boxes(64, 5)
    out_boxes, idx, mask = ops.NMSWithMask(0.5)(ms.Tensor(np.concatenate((boxes, scores[:, None]), 1)))
    idx, mask, out_boxes = idx.asnumpy(), mask.asnumpy(), out_boxes.asnumpy()
    assert idx.dtype == np.int32 and mask.dtype == np.bool_ and out_boxes.shape == (64, 5)
    np.testing.assert_array_equal(idx, np.argsort(-scores, kind="stable"))  # sorted by score
    np.testing.assert_array_equal(out_boxes[:, :4], boxes[idx])
    np.testing.assert_array_equal(idx[mask], _reference_nms(boxes, scores, 0.5))  # the kept ones, in order
    with pytest.raises(ValueError, match=r"NMSWithMask.*\(N, 5\)"):
        ops.NMSWithMask(0.5)(ms.Tensor(boxes))


def test_box_iou_and_yolo_non_max_suppression():
    a = np.array([[0, 0, 10, 10], [5, 5, 15, 15]], np.float32)
    np.testing.assert_allclose(ops.box_iou(a, a).asnumpy(), [[1, 25 / 175], [25 / 175, 1]], rtol=1e-6)
    # (1, 3, 5 + 2): two overlapping boxes of class 0 and one of class 1 at the same place
    pred = np.array([[[50, 50, 20, 20, 0.9, 0.9, 0.1], [51, 51, 20, 20, 0.8, 0.9, 0.1],
                      [50, 50, 20, 20, 0.7, 0.1, 0.9]]], np.float32)
    (d,) = ops.non_max_suppression(pred, conf_thres=0.25, iou_thres=0.45)
    d = d.asnumpy()
    assert d.shape == (2, 6) and list(d[:, 5]) == [0, 1]
    np.testing.assert_allclose(d[0, :5], [40, 40, 60, 60, 0.81], rtol=1e-6)


# ---- COCO evaluation ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("shapes"))
    cli = os.path.join(BUILD, "spore")
    if not os.path.exists(cli):
        pytest.skip(f"the spore CLI is not built ({cli})")
    subprocess.run([cli, "data", "make-shapes", "--out", root, "--train", "8", "--val", "40", "--size", "96"],
                   check=True, capture_output=True)
    return root, cli


def _noisy_results(gt, seed):
    """Detections near the ground truth (some missed, some wrong class, random scores)."""
    rng = np.random.default_rng(seed)
    out = []
    for a in gt.dataset["annotations"]:
        if rng.random() < 0.15:
            continue
        box = np.array(a["bbox"]) + rng.normal(0, 1.5, 4)
        cat = a["category_id"] if rng.random() > 0.1 else int(rng.integers(1, 9))
        out.append({"image_id": a["image_id"], "category_id": cat, "bbox": [float(v) for v in box],
                    "score": float(rng.random())})
    return out


def test_cocoeval_matches_the_cpp_evaluator(shapes, tmp_path):
    root, cli = shapes
    ann = os.path.join(root, "annotations", "instances_val2017.json")
    gt = COCO(ann)
    res = _noisy_results(gt, 0)
    path = str(tmp_path / "dets.json")
    save_results(res, path)
    ev = COCOeval(gt, gt.loadRes(path), "bbox")
    ev.evaluate()
    ev.accumulate()
    ev.summarize()
    cpp = json.loads(subprocess.run([cli, "coco-eval", ann, path, "--json"], check=True, capture_output=True,
                                    text=True).stdout)
    assert sorted(cpp) == sorted(ms.train.coco.STAT_NAMES)
    np.testing.assert_array_equal(ev.stats, [cpp[k] for k in ms.train.coco.STAT_NAMES])
    assert 0.2 < ev.stats[0] < 0.9  # a real score, not a degenerate one
    # pycocotools' arrays: precision (T, R, K, A, M), recall (T, K, A, M); stats[1] is AP50's mean
    p = ev.eval["precision"]
    assert p.shape == (10, 101, 8, 4, 3) and ev.eval["recall"].shape == (10, 8, 4, 3)
    pr = p[0, :, :, 0, 2]
    assert ev.stats[1] == pytest.approx(np.mean(pr[pr > -1]))


def test_loadres_forms_agree_and_params_restrict(shapes):
    root, _ = shapes
    gt = COCO(os.path.join(root, "annotations", "instances_val2017.json"))
    res = _noisy_results(gt, 1)
    arr = np.array([[r["image_id"], *r["bbox"], r["score"], r["category_id"]] for r in res])
    stats = []
    for dt in (gt.loadRes(res), gt.loadRes(arr)):
        ev = COCOeval(gt, dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
        stats.append(ev.stats)
    np.testing.assert_allclose(stats[0], stats[1], rtol=0, atol=1e-12)
    # the pycocotools lookups
    img = gt.getImgIds()[0]
    anns = gt.loadAnns(gt.getAnnIds(imgIds=[img]))
    assert all(a["image_id"] == img for a in anns) and gt.loadImgs(img)[0]["id"] == img
    assert gt.getCatIds(catNms=["circle"]) == [1] and len(gt.getCatIds()) == 8
    # fewer images: params.imgIds as pycocotools
    ev = COCOeval(gt, gt.loadRes(res), "bbox")
    ev.params.imgIds = gt.getImgIds()[:5]
    ev.evaluate()
    ev.accumulate()
    ev.summarize()
    assert not np.allclose(ev.stats, stats[0])
    with pytest.raises(NotImplementedError, match="iouType='segm'"):
        COCOeval(gt, gt.loadRes(res))
    with pytest.raises(ValueError, match="image"):
        gt.loadRes([{"image_id": 10 ** 9, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 0.5}])


def test_coco_dataset_detection_columns(shapes):
    root, _ = shapes
    ann = os.path.join(root, "annotations", "instances_val2017.json")
    ds = ms.dataset.CocoDataset(os.path.join(root, "val2017"), ann, task="Detection", decode=True, shuffle=False)
    assert ds.get_col_names() == ["image", "bbox", "category_id", "iscrowd"]
    coco = json.load(open(ann))
    first = coco["images"][0]
    want = [a for a in coco["annotations"] if a["image_id"] == first["id"]]
    image, bbox, cat, crowd = next(ds.create_tuple_iterator(output_numpy=True))
    assert image.shape == (first["height"], first["width"], 3)
    np.testing.assert_allclose(bbox, [a["bbox"] for a in want], rtol=1e-6)
    assert cat[:, 0].tolist() == [a["category_id"] for a in want]
    assert crowd[:, 0].tolist() == [a["iscrowd"] for a in want]
    # a box-aware transform in the pipeline keeps the per-box columns with their boxes
    lb = ds.map(vision.Letterbox(128), input_columns=["image", "bbox", "category_id", "iscrowd"])
    image2, bbox2, cat2, _ = next(lb.create_tuple_iterator(output_numpy=True))
    r = min(128 / first["height"], 128 / first["width"])
    assert image2.shape == (128, 128, 3) and cat2.tolist() == cat.tolist()
    np.testing.assert_allclose(bbox2[:, 2:], bbox[:, 2:] * np.float32(round(first["width"] * r) / first["width"]),
                               rtol=1e-4)


# ---- transforms ---------------------------------------------------------------------------------

def test_fused_decode_resize_matches_decode_then_resize(shapes):
    root, _ = shapes
    files = sorted(os.listdir(os.path.join(root, "val2017")))
    raw = np.fromfile(os.path.join(root, "val2017", files[0]), np.uint8)
    fused = vision.DecodeResize((24, 32))(raw)
    plain = vision.Resize((24, 32))(vision.Decode()(raw))
    assert fused.shape == plain.shape == (24, 32, 3)
    assert np.abs(fused.astype(float) - plain.astype(float)).mean() < 6  # DCT-scaled decode vs full
    ms.dataset.config.set_seed(0)
    crop = vision.RandomCropDecodeResize(32)(raw)
    assert crop.shape == (32, 32, 3) and crop.dtype == np.uint8
    with pytest.raises(NotImplementedError, match="max_attempts"):
        vision.RandomCropDecodeResize(32, max_attempts=3)


def test_box_transforms():
    img = np.zeros((60, 80, 3), np.uint8)
    boxes = np.array([[10, 20, 30, 10]], np.float32)
    cls = np.array([[3]], np.int32)
    out, b, c = vision.Letterbox(160)(img, boxes, cls)
    assert out.shape == (160, 160, 3) and c.tolist() == [[3]]
    np.testing.assert_allclose(b, [[20, 40 + 20, 60, 20]])  # scale 2, 20 px of padding on top
    _, fb, _ = vision.RandomHorizontalFlipWithBBox(1.0)(img, boxes, cls)
    np.testing.assert_allclose(fb, [[80 - 40, 20, 30, 10]])
    _, ab, _ = vision.RandomAffineWithBBox(translate=0.0, scale=0.0)(img, boxes, cls)
    np.testing.assert_allclose(ab, boxes, atol=1e-3)  # no rotation, scale or shift: the same box
    tiles = [vision.Letterbox(64)(img, boxes, cls) for _ in range(4)]
    canvas, mb, mc = vision.Mosaic(64)(*tiles)
    assert canvas.shape == (128, 128, 3) and len(mb) == len(mc) <= 4
    assert (mb[:, :2] >= 0).all() and (mb[:, 0] + mb[:, 2] <= 128 + 1e-3).all()
    with pytest.raises(TypeError, match="four samples"):
        vision.Mosaic(64)(tiles[0])


# ---- the YOLOv5 loss binding --------------------------------------------------------------------

def test_yolo_loss_binding_trains_in_both_modes():
    nc, img, B = 3, 64, 2
    anchors = (np.array([[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]],
                        np.float32).reshape(3, 3, 2) / np.array([8, 16, 32], np.float32)[:, None, None])
    hyp = yolo.scaled_hyp(nc, img)
    assert hyp["cls"] == pytest.approx(0.5 * nc / 80) and hyp["obj"] == pytest.approx((img / 640) ** 2)
    labels = np.array([[0, 1, 0.5, 0.5, 0.3, 0.4], [1, 2, 0.25, 0.7, 0.1, 0.1]], np.float32)
    grids = [(img // s, img // s) for s in (8, 16, 32)]
    targets = yolo.build_targets(labels, B, anchors, grids, nc, hyp)
    assert len(targets) == 18 and float(targets[4].asnumpy().sum()) > 0  # level 0 has matches
    rng = np.random.default_rng(0)
    raw = [ms.Parameter(ms.Tensor(rng.normal(0, 0.5, (B, 3, g[0], g[1], 5 + nc)).astype(np.float32)), name=f"r{i}")
           for i, g in enumerate(grids)]

    def f(r0, r1, r2):
        return yolo.yolo_loss([r0, r1, r2], targets, hyp)[0]

    values = []
    for mode in (ms.PYNATIVE_MODE, ms.GRAPH_MODE):
        ms.set_context(mode=mode)
        fn = ms.jit(ops.value_and_grad(f, grad_position=(0, 1, 2))) if mode == ms.GRAPH_MODE else \
            ops.value_and_grad(f, grad_position=(0, 1, 2))
        loss, grads = fn(*raw)
        values.append((float(loss.asnumpy()), [g.asnumpy() for g in grads]))
        assert np.isfinite(values[-1][0]) and values[-1][0] > 0 and all(np.abs(g).sum() > 0 for g in values[-1][1])
    assert values[0][0] == pytest.approx(values[1][0], rel=1e-5)
    for a, b in zip(values[0][1], values[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)
    with pytest.raises(ValueError, match="unknown hyperparameter 'boxx'"):
        yolo.yolo_loss(raw, targets, {"boxx": 1.0})
