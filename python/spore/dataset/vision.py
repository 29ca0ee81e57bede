"""mindspore.dataset.vision: image transforms (C++, on OpenCV and libjpeg-turbo). Images are HWC
uint8 or float32 arrays; each transform is usable in Dataset.map and callable on one image."""
import numpy as np

from .. import _C
from ..common.tensor import Tensor
from .transforms import TensorOperation
from .._args import refuse

Inter = _C.Inter
Border = _C.Border


class ImageBatchFormat:
    NHWC = "NHWC"
    NCHW = "NCHW"


def _size(size):
    return [size] if isinstance(size, int) else list(size)


class Rescale(TensorOperation):
    """x * rescale + shift, as float32."""

    def __init__(self, rescale, shift):
        self._op = _C.Rescale(float(rescale), float(shift))


class Normalize(TensorOperation):
    """(x - mean) / std per channel, as float32; is_hwc: channels last (MindSpore's default)."""

    def __init__(self, mean, std, is_hwc=True):
        self._op = _C.Normalize([float(m) for m in mean], [float(s) for s in std], bool(is_hwc))


class HWC2CHW(TensorOperation):
    """(H, W, C) -> (C, H, W); a batch (N, H, W, C) -> (N, C, H, W)."""

    def __init__(self):
        self._op = _C.HWC2CHW()


class Decode(TensorOperation):
    def __init__(self, to_pil=False):
        if to_pil:
            raise NotImplementedError("Decode(to_pil=True): PIL images are not supported; images are numpy arrays")
        self._op = _C.Decode()


class Resize(TensorOperation):
    def __init__(self, size, interpolation=Inter.LINEAR):
        self._op = _C.Resize(_size(size), interpolation)


class CenterCrop(TensorOperation):
    def __init__(self, size):
        self._op = _C.CenterCrop(_size(size))


class RandomCrop(TensorOperation):
    def __init__(self, size, padding=None, pad_if_needed=False, fill_value=0, padding_mode=Border.CONSTANT):
        pad = [] if padding is None else _size(padding)
        fill = [float(fill_value)] if np.isscalar(fill_value) else [float(f) for f in fill_value]
        self._op = _C.RandomCrop(_size(size), pad, bool(pad_if_needed), fill, padding_mode)


class RandomResizedCrop(TensorOperation):
    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0), interpolation=Inter.BILINEAR,
                 max_attempts=10):
        refuse("vision.RandomResizedCrop", "Spore's crop tries 10 times, as MindSpore's default",
               max_attempts=(max_attempts, 10))
        self._op = _C.RandomResizedCrop(_size(size), list(scale), list(ratio), interpolation)


class RandomHorizontalFlip(TensorOperation):
    def __init__(self, prob=0.5):
        self._op = _C.RandomHorizontalFlip(float(prob))


class RandomVerticalFlip(TensorOperation):
    def __init__(self, prob=0.5):
        self._op = _C.RandomVerticalFlip(float(prob))


class HorizontalFlip(TensorOperation):
    def __init__(self):
        self._op = _C.HorizontalFlip()


class VerticalFlip(TensorOperation):
    def __init__(self):
        self._op = _C.VerticalFlip()


class Pad(TensorOperation):
    def __init__(self, padding, fill_value=0, padding_mode=Border.CONSTANT):
        fill = [float(fill_value)] if np.isscalar(fill_value) else [float(f) for f in fill_value]
        self._op = _C.Pad(_size(padding), fill, padding_mode)


class Rotate(TensorOperation):
    def __init__(self, degrees, resample=Inter.NEAREST, expand=False, center=None, fill_value=0):
        fill = [float(fill_value)] if np.isscalar(fill_value) else [float(f) for f in fill_value]
        self._op = _C.Rotate(float(degrees), resample, bool(expand), list(center or []), fill)


class CutOut(TensorOperation):
    def __init__(self, length, num_patches=1, is_hwc=True):
        refuse("vision.CutOut", "Spore's CutOut takes HWC images", is_hwc=(is_hwc, True))
        self._op = _C.CutOut(int(length), int(num_patches), [0.0])


def _range(v):  # a scalar is expanded by the C++ transform (MindSpore's rule)
    if isinstance(v, (list, tuple)):
        return [float(x) for x in v]
    return [float(v)]


class RandomColorAdjust(TensorOperation):
    def __init__(self, brightness=(1, 1), contrast=(1, 1), saturation=(1, 1), hue=(0, 0)):
        self._op = _C.RandomColorAdjust(_range(brightness), _range(contrast), _range(saturation), _range(hue))


class ToTensor(TensorOperation):
    """HWC uint8 -> CHW float32 in [0, 1] (Rescale(1/255) then HWC2CHW)."""

    def __init__(self, output_type=np.float32):
        if np.dtype(output_type) != np.float32:
            raise NotImplementedError(f"For 'vision.ToTensor', output_type={output_type!r} is not supported: the "
                                      f"output is float32; add transforms.TypeCast after it")
        self._op = _C.Compose([_C.Rescale(1.0 / 255.0, 0.0), _C.HWC2CHW()])


class ToType(TensorOperation):
    def __init__(self, data_type):
        self._op = _C.TypeCast(data_type)


class MixUpBatch:
    def __init__(self, alpha=1.0):
        self._op = _C.MixUp(float(alpha))


class CutMixBatch:
    def __init__(self, image_batch_format=ImageBatchFormat.NHWC, alpha=1.0, prob=1.0):
        if image_batch_format != ImageBatchFormat.NHWC:
            raise NotImplementedError("CutMixBatch: NHWC batches only")
        self._op = _C.CutMix(float(alpha), float(prob))


# ---- fused decode + resize (DVPP's counterpart) --------------------------------------------------

class DecodeResize(TensorOperation):
    """Decode + Resize fused (Spore's; MindSpore reaches it through DVPP): a JPEG is decoded by
    libjpeg-turbo at the smallest DCT scale (1/8 .. 1) that still covers `size`, then resized.
    size (h, w), or an int for the shorter side. Other formats: Decode then Resize."""

    def __init__(self, size, interpolation=Inter.LINEAR):
        self._op = _C.DecodeResize(_size(size), interpolation)


class RandomCropDecodeResize(TensorOperation):
    """MindSpore's RandomCropDecodeResize: RandomResizedCrop fused with the decode (the crop drawn on
    the JPEG header's size, the image decoded at the smallest DCT scale whose crop covers `size`)."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0), interpolation=Inter.BILINEAR,
                 max_attempts=10):
        refuse("vision.RandomCropDecodeResize", "Spore's crop tries 10 times, as MindSpore's default",
               max_attempts=(max_attempts, 10))
        self._op = _C.RandomCropDecodeResize(_size(size), [float(s) for s in scale], [float(r) for r in ratio],
                                             interpolation)


# ---- detection: rows (image, bboxes (K, 4) [x, y, w, h], per-box columns...) -----------------------

class _RowOperation:
    """A C++ transform of a whole row (image, bboxes, per-box columns such as category_id and
    iscrowd), for Dataset.map(op, input_columns=["image", "bbox", "category_id", ...]) or called on
    the arrays directly: op(image, bboxes, labels) -> a tuple of arrays. Boxes are float32 COCO
    [x, y, w, h] in pixels; per-box columns (dim 0 = K) follow the boxes that are kept."""

    _op = None

    def __call__(self, *columns):
        out = self._op([Tensor(np.ascontiguousarray(np.asarray(c))) for c in columns])
        return tuple(t.asnumpy() for t in out)


class Letterbox(_RowOperation):
    """YOLOv5's letterbox: resize keeping the aspect (scale min(h / H, w / W); never enlarging when
    scaleup is False), pad to size (h, w) with fill, image centered; boxes scaled and shifted."""

    def __init__(self, size, fill_value=114, scaleup=True):
        s = _size(size)
        self._op = _C.Letterbox(s * 2 if len(s) == 1 else s, float(fill_value), bool(scaleup))


class RandomHorizontalFlipWithBBox(_RowOperation):
    """MindSpore's RandomHorizontalFlipWithBBox(prob): flips the image and its boxes."""

    def __init__(self, prob=0.5):
        self._op = _C.RandomHorizontalFlipWithBBox(float(prob))


class RandomAffineWithBBox(_RowOperation):
    """YOLOv5's random_perspective without perspective: rotation U(+-degrees), scale U(1 +- scale),
    shear U(+-shear), translation U(0.5 +- translate) of the output size (h, w) (default the input's);
    boxes whose transformed w or h <= min_wh pixels, area < min_area_ratio of the original, or
    aspect >= max_aspect are dropped."""

    def __init__(self, degrees=0.0, translate=0.1, scale=0.5, shear=0.0, fill_value=114, size=None, min_wh=2.0,
                 min_area_ratio=0.1, max_aspect=100.0):
        out = [] if size is None else _size(size)
        self._op = _C.RandomAffineWithBBox(float(degrees), float(translate), float(scale), float(shear),
                                           float(fill_value), out * 2 if len(out) == 1 else out, float(min_wh),
                                           float(min_area_ratio), float(max_aspect))


class Mosaic(_RowOperation):
    """YOLOv5's 4-image mosaic on a (2 size, 2 size) canvas filled with fill_value, meeting at a random
    center in [size / 2, 3 size / 2]. Called with four samples, each a tuple (image, bboxes, per-box
    columns...) of the same column count (resize them first, e.g. Letterbox(size)); returns (canvas,
    bboxes, per-box columns...). In Dataset.map the row holds the four samples' columns one after
    the other."""

    def __init__(self, size, fill_value=114):
        self.size, self.fill_value = int(size), float(fill_value)
        self._op = _C.Mosaic(self.size, self.fill_value)

    def __call__(self, *samples):
        if len(samples) != 4 or not all(isinstance(s, (tuple, list)) for s in samples):
            raise TypeError(f"Mosaic takes four samples, each a tuple (image, bboxes, ...), got {len(samples)} "
                            f"arguments")
        rows = [[Tensor(np.ascontiguousarray(np.asarray(c))) for c in s] for s in samples]
        return tuple(t.asnumpy() for t in _C.mosaic(rows, self.size, self.fill_value))
