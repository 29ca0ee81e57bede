"""Training wrappers (MindSpore's nn.WithLossCell, nn.TrainOneStepCell, nn.WithEvalCell,
nn.TrainOneStepWithLossScaleCell): thin Python Cells over the C++ ones, which run the whole step
(in GRAPH_MODE compiled as one graph: forward, loss, backward and the optimizer update)."""
from .. import _C
from .cell import Cell
from .._args import refuse


def _cell_cpp(c, what):
    if not isinstance(c, Cell):
        raise TypeError(f"{what} must be a Cell, got {type(c).__name__}")
    return c._cpp


class WithLossCell(Cell):
    """loss_fn(backbone(data), label)."""

    def __init__(self, backbone, loss_fn):
        super().__init__(auto_prefix=False, _cpp=_C.WithLossCell(_cell_cpp(backbone, "backbone"),
                                                                 _cell_cpp(loss_fn, "loss_fn")))
        self._keep("_backbone", backbone)
        self._keep("_loss_fn", loss_fn)

    @property
    def backbone_network(self):
        return self._backbone


class WithEvalCell(Cell):
    """Returns (loss, outputs, label)."""

    _multi_out = True

    def __init__(self, network, loss_fn, add_cast_fp32=False):
        refuse("nn.WithEvalCell", "the outputs keep the network's dtype; cast them in the network",
               add_cast_fp32=(add_cast_fp32, False))
        super().__init__(auto_prefix=False, _cpp=_C.WithEvalCell(_cell_cpp(network, "network"),
                                                                 _cell_cpp(loss_fn, "loss_fn")))
        self._keep("_network", network)
        self._keep("_loss_fn", loss_fn)


class TrainOneStepCell(Cell):
    """One training step: loss = network(*inputs); gradients w.r.t. the optimizer's parameters
    (output gradient `sens`); optimizer update; returns the loss."""

    def __init__(self, network, optimizer, sens=1.0, return_grad=False):
        refuse("nn.TrainOneStepCell", "Spore's step returns the loss; take the gradients with value_and_grad",
               return_grad=(return_grad, False))
        super().__init__(auto_prefix=False, _cpp=_C.TrainOneStepCell(_cell_cpp(network, "network"),
                                                                     optimizer._opt, float(sens)))
        self._keep("network", network)
        self.__dict__["optimizer"] = optimizer
        self.__dict__["weights"] = optimizer.parameters

    @property
    def sens(self):
        return self._cpp.sens

    @sens.setter
    def sens(self, value):
        self._cpp.sens = float(value)

    def set_grad_accumulation(self, k, mode="mean"):
        """Accumulates k micro-batches per update: mode 'mean' (MindSpore's, gradients times 1/k)
        or 'sum' (PyTorch's summed .grad; k may then change at any step without recompiling)."""
        self._cpp.set_grad_accumulation(int(k), mode)

    def last_aux(self):
        """The network's outputs after the loss in the last step (has_aux), detached."""
        return self._cpp.last_aux()


class TrainOneStepWithLossScaleCell(TrainOneStepCell):
    """With loss scaling: returns (loss, overflow, scale); overflowed steps are skipped.
    scale_sense: a number / Tensor (a fixed scale) or a loss-scale manager's update cell."""

    _multi_out = True

    def __init__(self, network, optimizer, scale_sense):
        from ..amp import LossScaleManager, _manager_of
        if isinstance(scale_sense, LossScaleManager) or hasattr(scale_sense, "_lsm"):
            cpp = _C.TrainOneStepWithLossScaleCell(_cell_cpp(network, "network"), optimizer._opt,
                                                   _manager_of(scale_sense))
        else:
            cpp = _C.TrainOneStepWithLossScaleCell(_cell_cpp(network, "network"), optimizer._opt,
                                                   float(scale_sense))
        Cell.__init__(self, auto_prefix=False, _cpp=cpp)
        self._keep("network", network)
        self.__dict__["optimizer"] = optimizer
        self.__dict__["weights"] = optimizer.parameters

    @property
    def loss_scale(self):
        return self._cpp.loss_scale()
