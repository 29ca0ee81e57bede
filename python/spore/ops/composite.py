"""Automatic differentiation with MindSpore's functional transforms: value_and_grad, grad,
GradOperation. PYNATIVE_MODE runs the function with the autograd tape and walks it back (C++
engine); GRAPH_MODE traces the whole call, forward and backward, into one compiled graph (the
same gradient rules, run by the C++ tracer), keyed by the input signature."""
from .. import _C
from ..common import api
from ..common.tensor import Tensor
from ..nn import cell as _cell
from .._args import refuse


def _weights_list(weights):
    if weights is None:
        return []
    if isinstance(weights, Tensor):
        return [weights]
    return list(weights)


def _positions(grad_position):
    if grad_position is None:
        return []
    if isinstance(grad_position, int):
        return [grad_position]
    return list(grad_position)


def _value_and_grad_eager(fn, args, grad_position, weights, has_aux, sens=None):
    pos = _positions(grad_position)
    args = list(args)
    inputs = []
    for i in pos:
        if i >= len(args) or not isinstance(args[i], Tensor):
            raise TypeError(f"value_and_grad: grad_position {i} is not a Tensor argument (got {len(args)} arguments)")
        a = args[i].detach()
        a.requires_grad = True
        args[i] = a
        inputs.append(a)
    ws = _weights_list(weights)
    prev = [w.requires_grad for w in ws]
    for w in ws:
        w.requires_grad = True
    _cell._grad_depth[0] += 1
    try:
        with _C._EnableGrad():
            out = fn(*args)
            if isinstance(out, (tuple, list)):
                value = out[0] if has_aux else None
                if value is None:  # several outputs, no aux: the gradient of their sum
                    value = out[0].sum()
                    for o in out[1:]:
                        value = value + o.sum()
            else:
                value = out
            if not isinstance(value, Tensor):
                raise TypeError(f"value_and_grad: the function must return a Tensor (or a tuple starting with one), "
                                f"got {type(value).__name__}")
        grads = _C.grad(value, inputs + ws, sens, False)
    finally:
        _cell._grad_depth[0] -= 1
        for w, r in zip(ws, prev):
            w.requires_grad = r
    g_in, g_w = grads[:len(inputs)], tuple(grads[len(inputs):])
    if isinstance(grad_position, int):
        g_in = g_in[0]
    else:
        g_in = tuple(g_in)
    if grad_position is None:
        g = g_w
    elif weights is None:
        g = g_in
    else:
        g = (g_in, g_w)
    if isinstance(out, (tuple, list)):
        out = type(out)(o.detach() if isinstance(o, Tensor) else o for o in out)
    else:
        out = out.detach()
    return out, g


def value_and_grad(fn, grad_position=0, weights=None, has_aux=False, return_ids=False):
    """f(*args) -> (fn's output, gradients). grad_position: which positional inputs (int, tuple or
    None); weights: Parameters (e.g. optimizer.parameters). has_aux: fn returns (loss, aux...) and
    only loss is differentiated."""
    refuse("ops.value_and_grad", "gradients come back in grad_position / weights order, without ids",
           return_ids=(return_ids, False))
    if grad_position is None and weights is None:
        raise ValueError("value_and_grad: 'grad_position' and 'weights' cannot both be None")
    cache = [None]

    def run(*args):
        return _value_and_grad_eager(fn, args, grad_position, weights, has_aux)

    def wrapper(*args):
        if api.is_graph_mode() and not _C.is_tracing():
            if cache[0] is None:
                cache[0] = api.GraphCache(run, "value_and_grad")
            return cache[0](args, {})
        return run(*args)

    wrapper.__wrapped__ = fn
    return wrapper


def grad(fn, grad_position=0, weights=None, has_aux=False, return_ids=False):
    """Gradients only (with has_aux: (gradients, aux))."""
    refuse("ops.grad", "gradients come back in grad_position / weights order, without ids", 
           return_ids=(return_ids, False))
    vg = value_and_grad(fn, grad_position, weights, has_aux)

    def wrapper(*args):
        out, g = vg(*args)
        if has_aux:
            return g, tuple(out[1:])
        return g

    return wrapper


class GradOperation:
    """MindSpore's GradOperation(get_all=False, get_by_list=False, sens_param=False):
    GradOperation(...)(fn, weights)(*inputs)."""

    def __init__(self, get_all=False, get_by_list=False, sens_param=False):
        self.get_all, self.get_by_list, self.sens_param = get_all, get_by_list, sens_param

    def __call__(self, fn, weights=None):
        def wrapper(*args):
            sens = None
            if self.sens_param:
                args, sens = args[:-1], args[-1]
            pos = tuple(range(len(args))) if self.get_all else (0 if not self.get_by_list else None)
            ws = weights if self.get_by_list else None
            if pos is None and ws is None:
                ws = []
            _, g = _value_and_grad_eager(fn, args, pos, ws, False, sens)
            if self.get_all and self.get_by_list:
                return g
            return g


        return wrapper
