"""Spore's Python front end, with MindSpore's layout and names: `import spore as ms` and a
MindSpore program runs unchanged. One compiled module (spore._C, the C++ core) under thin Python
modules: nn (Cell, layers, losses, optimizers), ops, dataset, train (Model, callbacks), amp,
context, checkpoints. See docs/python.md."""
import os as _os
import sys as _sys

from . import _C
from ._C import __version__
from .common import dtype
from .common.api import jit, ms_function
from .common.dtype import (DType, bfloat16, bool_, double, float16, float32, float64, half, int8, int32, int64,
                           single, uint8, dtype_to_nptype, pytype_to_dtype)
from .common.initializer import initializer
from .common.tensor import Parameter, ParameterTuple, Tensor
from ._blas_threads import limit_blas_threads as _limit_blas_threads

_limit_blas_threads()  # numpy is imported by now (common.dtype): its BLAS and Spore's pool share the cores
from . import context
from .context import (GRAPH_MODE, PYNATIVE_MODE, ParallelMode, get_auto_parallel_context, get_context, get_seed,
                      reset_auto_parallel_context, set_auto_parallel_context, set_context, set_device, set_seed)
from . import communication
from . import hal
from . import runtime
from . import ops
from . import nn
from . import amp
from . import dataset
from . import train
from .profiler import Profiler
from .amp import DynamicLossScaleManager, FixedLossScaleManager, LossScaleManager
from .ops import grad, value_and_grad
from .train import (Callback, CheckpointConfig, EarlyStopping, LossMonitor, Model, ModelCheckpoint,
                    ReduceLROnPlateau, TimeMonitor,
                    export, load, load_checkpoint, load_param_into_net, save_checkpoint)

common = _sys.modules[__name__ + ".common"]
mstype = dtype


def from_numpy(array):
    """A Tensor sharing the array's memory (MindSpore's from_numpy)."""
    return Tensor(array)


def from_dlpack(ext):
    """A Tensor sharing the memory of a DLPack-capable object (numpy, torch ...)."""
    return _C.from_dlpack(ext)


def to_dlpack(tensor):
    return _C.to_dlpack(tensor)


def tensor(input_data=None, dtype=None):
    return Tensor(input_data, dtype)


def is_tensor(obj):
    return isinstance(obj, Tensor)


def get_grad_enabled():
    return _C.is_grad_enabled()


class _NoGrad:
    """with ms._no_grad(): ops record no gradient tape."""

    def __enter__(self):
        self._g = _C._NoGrad()
        self._g.__enter__()

    def __exit__(self, *a):
        self._g.__exit__(*a)


_no_grad = _NoGrad


def run_check():
    """Prints the version and checks that a small computation is right (MindSpore's run_check)."""
    import numpy as np
    print(f"MindSpore-compatible Spore version: {__version__}")
    x = Tensor(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    y = ops.matmul(x, x)
    expect = np.array([[7.0, 10.0], [15.0, 22.0]], np.float32)
    if not np.allclose(y.asnumpy(), expect):
        raise RuntimeError(f"run_check: matmul gave {y.asnumpy()}, expected {expect}")
    print(f"The result of multiplication calculation is correct, Spore has been installed on platform "
          f"[{_C.current_device()}] successfully!")


__all__ = ["Tensor", "Parameter", "ParameterTuple", "set_context", "get_context", "set_device", "set_seed",
           "GRAPH_MODE", "PYNATIVE_MODE", "nn", "ops", "dataset", "train", "amp", "Model", "jit", "value_and_grad",
           "grad", "save_checkpoint", "load_checkpoint", "load_param_into_net", "export", "load", "run_check",
           "Profiler"]
