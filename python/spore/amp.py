"""Mixed precision (mindspore.amp): build_train_network, auto_mixed_precision, the loss-scale
managers, and the functional loss scalers for custom loops (StaticLossScaler, DynamicLossScaler,
all_finite). The levels are MindSpore's (O0..O3); see docs/amp.md."""
from . import _C
from .common.tensor import Tensor


class LossScaleManager:
    """Base of the loss-scale managers; `_lsm` is the C++ manager."""

    def get_loss_scale(self):
        return self._lsm.get_loss_scale()

    def get_drop_overflow_update(self):
        return self._lsm.get_drop_overflow_update()

    def update_loss_scale(self, overflow):
        self._lsm.update_loss_scale(bool(overflow))

    def get_update_cell(self):
        return self if self._lsm.updates_scale() else None


class FixedLossScaleManager(LossScaleManager):
    def __init__(self, loss_scale=128.0, drop_overflow_update=True):
        self._lsm = _C.FixedLossScaleManager(float(loss_scale), bool(drop_overflow_update))


class DynamicLossScaleManager(LossScaleManager):
    def __init__(self, init_loss_scale=2 ** 24, scale_factor=2, scale_window=2000):
        self._lsm = _C.DynamicLossScaleManager(float(init_loss_scale), float(scale_factor), int(scale_window))


def _manager_of(m):
    return m._lsm if hasattr(m, "_lsm") else m


def _dtype(d):
    return None if d is None else _C.dtype_from_any(d)


def auto_mixed_precision(network, amp_level="O0", dtype=None):
    """Sets the precision policy of every cell of the network (in place); returns the network."""
    _C.auto_mixed_precision(network._cpp, amp_level, _dtype(dtype), amp_level.upper() == "O2")
    return network


def build_train_network(network, optimizer, loss_fn=None, level="O0", boost_level="O0", **kwargs):
    """The training step for `level`: a TrainOneStepWithLossScaleCell when the loss-scale manager
    updates the scale (O2's default DynamicLossScaleManager, or a FixedLossScaleManager that drops
    overflowed steps), else a TrainOneStepCell. Calling it runs one step."""
    from .nn.cell import CppCell
    from ._args import refuse, refuse_kwargs
    refuse("amp.build_train_network", "Spore has no boost algorithms; use 'O0'", boost_level=(boost_level, "O0"))
    refuse_kwargs("amp.build_train_network", kwargs, ("loss_scale_manager", "keep_batchnorm_fp32", "cast_model_type"))
    lsm = kwargs.get("loss_scale_manager")
    cpp = _C.build_train_network(network._cpp, optimizer._opt, None if loss_fn is None else loss_fn._cpp, level,
                                 None if lsm is None else _manager_of(lsm), kwargs.get("keep_batchnorm_fp32"),
                                 _dtype(kwargs.get("cast_model_type")))
    multi = isinstance(cpp, _C.TrainOneStepWithLossScaleCell)
    return CppCell(cpp, keep=(network, optimizer, loss_fn, lsm), multi_out=multi)


def all_finite(inputs):
    return _C.all_finite(list(inputs))


class LossScaler:
    """Base class: subclasses implement scale(inputs), unscale(inputs), adjust(grads_finite)."""

    def scale(self, inputs):
        raise NotImplementedError(f"{type(self).__name__}.scale(inputs) is not implemented "
                                  f"(got {type(inputs).__name__})")

    def unscale(self, inputs):
        raise NotImplementedError(f"{type(self).__name__}.unscale(inputs) is not implemented "
                                  f"(got {type(inputs).__name__})")

    def adjust(self, grads_finite):
        raise NotImplementedError(f"{type(self).__name__}.adjust(grads_finite) is not implemented "
                                  f"(got {grads_finite!r})")


def _map(fn, inputs):
    if isinstance(inputs, (tuple, list)):
        return type(inputs)(fn(x) for x in inputs)
    return fn(inputs)


class StaticLossScaler(LossScaler):
    def __init__(self, scale_value):
        self.scale_value = Tensor(float(scale_value))

    def scale(self, inputs):
        return _map(lambda x: x * self.scale_value.astype(x.dtype), inputs)

    def unscale(self, inputs):
        return _map(lambda x: x / self.scale_value.astype(x.dtype), inputs)

    def adjust(self, grads_finite):
        """A static scale never changes, whether or not the gradients are finite."""
        return False if grads_finite is not None else False


class DynamicLossScaler(LossScaler):
    def __init__(self, scale_value, scale_factor, scale_window):
        self.scale_value = Tensor(float(scale_value))
        self.scale_factor, self.scale_window, self.counter = scale_factor, scale_window, 0

    def scale(self, inputs):
        return _map(lambda x: x * self.scale_value.astype(x.dtype), inputs)

    def unscale(self, inputs):
        return _map(lambda x: x / self.scale_value.astype(x.dtype), inputs)

    def adjust(self, grads_finite):
        if bool(grads_finite):
            self.counter += 1
            if self.counter >= self.scale_window:
                self.scale_value = self.scale_value * self.scale_factor
                self.counter = 0
        else:
            self.scale_value = Tensor(max(float(self.scale_value) / self.scale_factor, 1.0))
            self.counter = 0
        return True
