"""mindspore.communication: init() starts the process group (MPI on the CPU: run the script under
`mpirun -n N` or `spore launch -n N -- python3 script.py`), get_rank() / get_group_size() name this
process's place in it, release() ends it."""
from .management import get_group_size, get_rank, init, release

__all__ = ["init", "release", "get_rank", "get_group_size"]
