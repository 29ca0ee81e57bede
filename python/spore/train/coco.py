"""COCO detection evaluation with pycocotools' interface and exact numbers, over Spore's C++
evaluator (include/spore/metrics/coco_eval.h; the semantics are written down in
docs/detection.md). A MindSpore program's

    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

becomes ``from spore.train.coco import COCO, COCOeval``; the rest is unchanged:

    gt = COCO("annotations/instances_val2017.json")
    dt = gt.loadRes("detections.json")        # or a list of result dicts, or an (N, 7) array
    ev = COCOeval(gt, dt, "bbox")
    ev.evaluate(); ev.accumulate(); ev.summarize()
    ev.stats                                   # the 12 numbers (AP, AP50, ..., AR_large)

Only iouType="bbox" is computed (no masks or keypoints); useCats=0 is refused."""
import numpy as np

from .. import _C


class COCO:
    """A ground-truth set (an instances JSON) or a result set made by loadRes. The dicts imgs,
    anns, cats and dataset hold the file's records (segmentations and other unknown keys are not
    kept)."""

    def __init__(self, annotation_file=None):
        self._set = _C.CocoSet() if annotation_file is None else _C.CocoSet.load(str(annotation_file))
        self._index()

    @classmethod
    def _of(cls, cpp_set):
        c = cls.__new__(cls)
        c._set = cpp_set
        c._index()
        return c

    def _index(self):
        images, anns, cats = self._set.images(), self._set.annotations(), self._set.categories()
        self.dataset = {"images": images, "annotations": anns, "categories": cats}
        self.imgs = {i["id"]: i for i in images}
        self.anns = {a["id"]: a for a in anns}
        self.cats = {c["id"]: c for c in cats}
        self.imgToAnns, self.catToImgs = {}, {}
        for a in anns:
            self.imgToAnns.setdefault(a["image_id"], []).append(a)
            self.catToImgs.setdefault(a["category_id"], []).append(a["image_id"])

    @staticmethod
    def _ids(v):
        return list(v) if isinstance(v, (list, tuple, np.ndarray)) else [v]

    def getImgIds(self, imgIds=(), catIds=()):
        ids = set(self.imgs) if len(self._ids(imgIds)) == 0 else set(self._ids(imgIds))
        for c in self._ids(catIds):
            ids &= set(self.catToImgs.get(c, []))
        return sorted(ids)

    def getCatIds(self, catNms=(), supNms=(), catIds=()):
        cats = list(self.cats.values())
        if len(self._ids(catNms)):
            cats = [c for c in cats if c["name"] in self._ids(catNms)]
        if len(self._ids(supNms)):
            cats = [c for c in cats if c["supercategory"] in self._ids(supNms)]
        if len(self._ids(catIds)):
            cats = [c for c in cats if c["id"] in self._ids(catIds)]
        return [c["id"] for c in cats]

    def getAnnIds(self, imgIds=(), catIds=(), areaRng=(), iscrowd=None):
        img_ids, cat_ids = self._ids(imgIds), self._ids(catIds)
        anns = [a for i in img_ids for a in self.imgToAnns.get(i, [])] if len(img_ids) else \
            list(self.anns.values())
        if len(cat_ids):
            anns = [a for a in anns if a["category_id"] in cat_ids]
        if len(areaRng):
            anns = [a for a in anns if areaRng[0] < a["area"] < areaRng[1]]
        if iscrowd is not None:
            anns = [a for a in anns if a["iscrowd"] == iscrowd]
        return [a["id"] for a in anns]

    def loadImgs(self, ids=()):
        return [self.imgs[i] for i in self._ids(ids)]

    def loadAnns(self, ids=()):
        return [self.anns[i] for i in self._ids(ids)]

    def loadCats(self, ids=()):
        return [self.cats[i] for i in self._ids(ids)]

    def loadRes(self, resFile):
        """A result set over this set's images: resFile a results JSON path, a list of
        {image_id, category_id, bbox [x, y, w, h], score} dicts, or an (N, 7) array [image_id, x, y,
        w, h, score, category_id]. Ids are 1, 2, ... and area w * h, as pycocotools."""
        if isinstance(resFile, str):
            return COCO._of(self._set.load_res_file(resFile))
        return COCO._of(self._set.load_res(resFile))


def save_results(results, path):
    """Writes detections (the forms loadRes takes, not a path) as a COCO results JSON."""
    _C.coco_save_detections(results, str(path))


class Params:
    """COCOeval.params (pycocotools' names): imgIds, catIds, iouThrs, recThrs, maxDets, areaRng,
    areaRngLbl, useCats, iouType."""

    def __init__(self, iouType="bbox"):
        self.iouType = iouType
        self.imgIds, self.catIds = [], []
        self.iouThrs = np.linspace(.5, 0.95, int(np.round((0.95 - .5) / .05)) + 1, endpoint=True)
        self.recThrs = np.linspace(.0, 1.00, int(np.round((1.00 - .0) / .01)) + 1, endpoint=True)
        self.maxDets = [1, 10, 100]
        self.areaRng = [[0 ** 2, 1e5 ** 2], [0 ** 2, 32 ** 2], [32 ** 2, 96 ** 2], [96 ** 2, 1e5 ** 2]]
        self.areaRngLbl = ["all", "small", "medium", "large"]
        self.useCats = 1


class COCOeval:
    """pycocotools' COCOeval for iouType="bbox": evaluate(), accumulate(), summarize(); stats (12
    numbers) and eval["precision"] (T, R, K, A, M) / eval["recall"] (T, K, A, M), -1 where a cell
    has no ground truth."""

    def __init__(self, cocoGt=None, cocoDt=None, iouType="segm"):
        if iouType != "bbox":
            raise NotImplementedError(f"For 'COCOeval', iouType={iouType!r} is not supported: Spore's evaluator "
                                      f"scores boxes only; pass iouType='bbox'")
        if cocoGt is None or cocoDt is None:
            raise ValueError("COCOeval needs the ground truth and the results: COCOeval(cocoGt, cocoDt, 'bbox') "
                             "with cocoDt = cocoGt.loadRes(results)")
        self.cocoGt, self.cocoDt = cocoGt, cocoDt
        self.params = Params(iouType)
        self.params.imgIds = sorted(cocoGt.getImgIds())
        self.params.catIds = sorted(cocoGt.getCatIds())
        self._ev = _C.CocoEvaluator(cocoGt._set, cocoDt._set, iouType)
        self.eval, self.stats = {}, np.zeros(12)

    def _push_params(self):
        p = self.params
        if p.iouType != "bbox":
            raise NotImplementedError(f"For 'COCOeval', params.iouType={p.iouType!r} is not supported: Spore's "
                                      f"evaluator scores boxes only ('bbox')")
        if p.useCats != 1:
            raise NotImplementedError(f"For 'COCOeval', params.useCats={p.useCats!r} is not supported: detections "
                                      f"are matched per category (useCats=1)")
        c = self._ev.params
        c.imgIds = [int(i) for i in p.imgIds]
        c.catIds = [int(i) for i in p.catIds]
        c.iouThrs = [float(t) for t in p.iouThrs]
        c.recThrs = [float(t) for t in p.recThrs]
        c.maxDets = [int(m) for m in p.maxDets]
        c.areaRng = [[float(a), float(b)] for a, b in p.areaRng]
        c.areaRngLbl = list(p.areaRngLbl)

    def evaluate(self):
        self._push_params()
        self._ev.evaluate()

    def accumulate(self, p=None):
        if p is not None:
            self.params = p
            self._push_params()
        self._ev.accumulate()
        P = self.params
        T, R, K, A, M = len(P.iouThrs), len(P.recThrs), len(P.catIds), len(P.areaRng), len(P.maxDets)
        prec, rec = self._ev.precision, self._ev.recall
        self.eval = {
            "params": P, "counts": [T, R, K, A, M],
            "precision": np.array([[[[[prec(t, r, k, a, m) for m in range(M)] for a in range(A)] for k in range(K)]
                                    for r in range(R)] for t in range(T)]),
            "recall": np.array([[[[rec(t, k, a, m) for m in range(M)] for a in range(A)] for k in range(K)]
                                for t in range(T)]),
        }

    def summarize(self):
        """Prints pycocotools' 12 lines and sets stats."""
        print(self._ev.summarize())
        self.stats = np.array(self._ev.stats())


STAT_NAMES = tuple(_C.coco_stat_names())
