"""mindspore.dataset.transforms: TypeCast, OneHot, Compose, ... (C++ transforms). Each is also
callable on one array: transforms.TypeCast(ms.int32)(np.array([1.5]))."""
import numpy as np

from .. import _C
from ..common.tensor import Tensor


class TensorOperation:
    """A C++ transform (`_op`) usable in Dataset.map and callable on a numpy array or Tensor."""

    _op = None

    def __call__(self, *inputs):
        if len(inputs) != 1:
            raise TypeError(f"{type(self).__name__} takes one input, got {len(inputs)}")
        x = inputs[0]
        out = self._op(x if isinstance(x, Tensor) else np.ascontiguousarray(np.asarray(x)))
        return out if isinstance(x, Tensor) else out.asnumpy()


PyTensorOperation = TensorOperation


class TypeCast(TensorOperation):
    def __init__(self, data_type):
        self._op = _C.TypeCast(data_type)


class OneHot(TensorOperation):
    def __init__(self, num_classes, smoothing_rate=0.0):
        self._op = _C.OneHot(int(num_classes), float(smoothing_rate))


class Compose(TensorOperation):
    """C++ transforms chained into one (Python callables in the list are chained in Python)."""

    def __init__(self, transforms):
        self.transforms = list(transforms)
        if all(hasattr(t, "_op") and t._op is not None for t in self.transforms):
            self._op = _C.Compose([t._op for t in self.transforms])

    def __call__(self, *inputs):
        if self._op is not None:
            return TensorOperation.__call__(self, *inputs)
        out = inputs
        for t in self.transforms:
            out = t(*out)
            out = out if isinstance(out, tuple) else (out,)
        return out[0] if len(out) == 1 else out


class Duplicate:
    def __call__(self, x):
        return x, np.copy(x)


class Fill:
    def __init__(self, fill_value):
        self.fill_value = fill_value

    def __call__(self, x):
        return np.full_like(x, self.fill_value)


class Concatenate:
    def __init__(self, axis=0, prepend=None, append=None):
        self.axis, self.prepend, self.append = axis, prepend, append

    def __call__(self, x):
        parts = [p for p in (self.prepend, x, self.append) if p is not None]
        return np.concatenate(parts, self.axis)
