"""mindspore.communication.management, over Spore's C++ process groups (src/parallel)."""
from .. import _C
from .._args import refuse

_BACKENDS = {None: "mpi", "mpi": "mpi", "hccl": "mpi", "nccl": "nccl", "local": "local"}


def init(backend_name=None):
    """Starts the group. "hccl" (MindSpore's Ascend default) runs on MPI here."""
    if backend_name not in _BACKENDS:
        raise ValueError(f"init: backend_name must be one of 'mpi', 'nccl', 'hccl', 'local', got {backend_name!r}")
    _C.parallel_init(_BACKENDS[backend_name])


def release():
    _C.parallel_release()


def get_rank(group=None):
    refuse("get_rank", "Spore has one communication group, the world",
           group=(group, (None, "hccl_world_group", "nccl_world_group")))
    return _C.get_rank()


def get_group_size(group=None):
    refuse("get_group_size", "Spore has one communication group, the world",
           group=(group, (None, "hccl_world_group", "nccl_world_group")))
    return _C.get_group_size()
