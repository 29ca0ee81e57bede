"""mindspore.ops: the functional API (ops.relu, ops.matmul, ...), the primitive classes
(ops.ReLU(), ops.MatMul(), ...), the gradient transforms (ops.value_and_grad, ops.grad,
ops.GradOperation), user-defined ops (ops.Custom, spore/ops/custom.py) and detection ops (NMS, box
IoU: spore/ops/detection.py). Every op is one C++ op (spore/ops.h; ops.Custom's through
spore/custom_op.h)."""
from . import composite, custom, detection, functional, operations
from .composite import GradOperation, grad, value_and_grad
from .custom import Custom, CustomRegOp, DataType
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
