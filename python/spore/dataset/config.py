"""mindspore.dataset.config: engine-wide settings."""
from .. import _C

_workers = [None]  # set_num_parallel_workers: the workers of sources and maps that give none


def set_prefetch_size(size):
    _C.set_prefetch_size(int(size))


def get_prefetch_size():
    return _C.get_prefetch_size()


def set_num_parallel_workers(num):
    """The worker threads of every source and map that passes no num_parallel_workers."""
    if not isinstance(num, int) or isinstance(num, bool) or not 1 <= num <= 256:
        raise ValueError(f"set_num_parallel_workers: num must be an int in [1, 256], got {num!r}")
    _workers[0] = num


def get_num_parallel_workers():
    """What set_num_parallel_workers set, else the engine's default (the cores, at most 8)."""
    return _workers[0] if _workers[0] is not None else _C.default_num_workers()


def set_seed(seed):
    from ..context import set_seed as _set_seed
    _set_seed(seed)


def get_seed():
    return _C.get_seed()
