"""``mindspore.hal``: the devices this process sees and waiting for them.

A device's ops return once queued, so a timing needs ``synchronize()`` before it reads the clock
(``torch.cuda.synchronize()`` in PyTorch)::

    ms.set_device("GPU")
    start = time.perf_counter(); y = net(x); ms.hal.synchronize(); elapsed = time.perf_counter() - start
"""
from . import _C

__all__ = ["synchronize", "device_count", "is_available"]

_TARGETS = ("CPU", "GPU", "Ascend")


def _target(device_target):
    if device_target is None:
        return _C.current_device()
    if not isinstance(device_target, str):
        raise TypeError(f"For 'hal', 'device_target' must be a str, got {type(device_target).__name__}")
    if device_target.upper() not in ("CPU", "GPU", "CUDA", "ASCEND", "NPU"):
        raise ValueError(f"For 'hal', 'device_target' must be one of {_TARGETS}, got '{device_target}'")
    return device_target


def synchronize():
    """Wait until every op queued on the current device has run (a no-op on the CPU)."""
    _C.synchronize()


def device_count(device_target=None):
    """How many devices of ``device_target`` (default: the current target) this process sees: 0 when
    this build has no such backend or no such device is visible."""
    return _C.device_count_of(_target(device_target))


def is_available(device_target):
    """Whether ``device_target`` has at least one device here (``set_device`` would succeed)."""
    return device_count(device_target) > 0
