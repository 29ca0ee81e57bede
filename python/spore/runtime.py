"""``mindspore.runtime`` (MindSpore 2.5's home of the device functions): ``synchronize``,
``device_count`` and ``is_available`` as in :mod:`spore.hal`."""
from .hal import device_count, is_available, synchronize

__all__ = ["synchronize", "device_count", "is_available"]
