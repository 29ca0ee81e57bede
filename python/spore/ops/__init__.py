"""mindspore.ops: the functional API (ops.relu, ops.matmul, ...), the primitive classes
(ops.ReLU(), ops.MatMul(), ...) and the gradient transforms (ops.value_and_grad, ops.grad,
ops.GradOperation). Every op is one C++ op (spore/ops.h)."""
from . import composite, detection, functional, operations
from .composite import GradOperation, grad, value_and_grad
from .detection import NMSWithMask, batched_nms, box_iou, nms, non_max_suppression
from .functional import *  # noqa: F401,F403
from .functional import stop_gradient
from .operations import *  # noqa: F401,F403
from .operations import Primitive, PrimitiveWithCheck, PrimitiveWithInfer

P = operations
F = functional
C = composite


def constexpr(fn=None, **kwargs):
    """MindSpore's @constexpr: Python code on constants (runs as plain Python here)."""
    return fn if fn is not None else (lambda f: f)


def prim_attr_register(fn):
    return fn
