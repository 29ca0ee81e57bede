"""mindspore.communication.management, over Spore's C++ process groups (src/parallel)."""
from .. import _C

_BACKENDS = {None: "mpi", "mpi": "mpi", "hccl": "mpi", "nccl": "nccl", "local": "local"}


def init(backend_name=None):
    """Starts the group. "hccl" (MindSpore's Ascend default) runs on MPI here."""
    if backend_name not in _BACKENDS:
        raise ValueError(f"init: backend_name must be one of 'mpi', 'nccl', 'hccl', 'local', got {backend_name!r}")
    _C.parallel_init(_BACKENDS[backend_name])


def release():
    _C.parallel_release()


def get_rank(group=None):
    return _C.get_rank()


def get_group_size(group=None):
    return _C.get_group_size()
