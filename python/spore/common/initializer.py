"""MindSpore's mindspore.common.initializer: Normal, Uniform, HeUniform, ... and initializer().
Each class wraps the C++ initializer (spore/nn/init.h); values come from the seeded global
generator, so ms.set_seed reproduces a network's initial weights."""
from .. import _C


class Initializer:
    """Base class; `_init` is the C++ initializer."""

    def __init__(self, init):
        self._init = init

    def _make(self, shape, dtype):
        return self._init.make(list(shape), dtype)

    def __repr__(self):
        return repr(self._init)


class Zero(Initializer):
    def __init__(self):
        super().__init__(_C.init_zero())


class One(Initializer):
    def __init__(self):
        super().__init__(_C.init_one())


class Constant(Initializer):
    def __init__(self, value):
        super().__init__(_C.init_constant(float(value)))


class Uniform(Initializer):
    def __init__(self, scale=0.07):
        super().__init__(_C.init_uniform(float(scale)))


class Normal(Initializer):
    def __init__(self, sigma=0.01, mean=0.0):
        super().__init__(_C.init_normal(float(sigma), float(mean)))


class TruncatedNormal(Initializer):
    def __init__(self, sigma=0.01, mean=0.0, a=-2.0, b=2.0):
        super().__init__(_C.init_truncated_normal(float(sigma), float(mean), float(a), float(b)))


class HeUniform(Initializer):
    def __init__(self, negative_slope=0, mode="fan_in", nonlinearity="leaky_relu"):
        super().__init__(_C.init_he_uniform(float(negative_slope), mode, nonlinearity))


class HeNormal(Initializer):
    def __init__(self, negative_slope=0, mode="fan_in", nonlinearity="leaky_relu"):
        super().__init__(_C.init_he_normal(float(negative_slope), mode, nonlinearity))


class XavierUniform(Initializer):
    def __init__(self, gain=1):
        super().__init__(_C.init_xavier_uniform(float(gain)))


class XavierNormal(Initializer):
    def __init__(self, gain=1):
        super().__init__(_C.init_xavier_normal(float(gain)))


def _to_cpp(init):
    if init is None or isinstance(init, _C.Initializer):
        return init
    if isinstance(init, Initializer):
        return init._init
    return _C.Initializer(init)  # a name ("normal"), a number or a tensor


def initializer(init, shape=None, dtype=None):
    """A tensor of `shape` filled by `init` (an Initializer, a name such as "he_uniform", a number or
    a Tensor), as MindSpore's initializer()."""
    from .tensor import Tensor
    from . import dtype as mstype
    if isinstance(init, Tensor) and shape is None:
        return init
    if isinstance(shape, int):
        shape = (shape,)
    return _to_cpp(init).make(list(shape or ()), dtype or mstype.float32)


def calculate_gain(nonlinearity, param=None):
    return _C.calculate_gain(nonlinearity, 0.0 if param is None else float(param))
