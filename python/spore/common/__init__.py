"""mindspore.common: Tensor, Parameter, dtypes, initializers, jit."""
from . import dtype, initializer
from .api import jit, ms_function
from .dtype import *  # noqa: F401,F403
from .initializer import initializer as _initializer_fn  # noqa: F401
from .tensor import Parameter, ParameterTuple, Tensor
