"""mindspore.dataset.config: engine-wide settings."""
from .. import _C

_workers = [8]


def set_prefetch_size(size):
    _C.set_prefetch_size(int(size))


def get_prefetch_size():
    return _C.get_prefetch_size()


def set_num_parallel_workers(num):
    _workers[0] = int(num)


def get_num_parallel_workers():
    return _workers[0]


def set_seed(seed):
    from ..context import set_seed as _set_seed
    _set_seed(seed)


def get_seed():
    return _C.get_seed()
