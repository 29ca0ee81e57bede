"""mindspore.dataset.vision: image transforms (C++, on OpenCV and libjpeg-turbo). Images are HWC
uint8 or float32 arrays; each transform is usable in Dataset.map and callable on one image."""
import numpy as np

from .. import _C
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
