"""Losses with MindSpore's names and defaults (the C++ losses, spore/nn/loss.h), and LossBase for
losses written in Python (construct + get_loss)."""
from .. import _C
from .cell import Cell


class LossBase(Cell):
    """Base of Python losses: get_loss(x, weights) applies the weights and the reduction."""

    def __init__(self, reduction="mean"):
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"For 'LossBase', the 'reduction' must be in ['mean', 'sum', 'none'], but got "
                             f"{reduction!r}.")
        self.reduction = reduction

    def get_loss(self, x, weights=1.0):
        if not (isinstance(weights, float) and weights == 1.0):
            x = x * weights
        if self.reduction == "mean":
            return _C.mean(x, None, False)
        if self.reduction == "sum":
            return _C.sum(x, None, False)
        return x


def _loss(name, make, doc):
    def __init__(self, *args, **kwargs):
        Cell.__init__(self, _cpp=make(*args, **kwargs))
        self.reduction = kwargs.get("reduction")
    return type(name, (Cell,), {"__init__": __init__, "__doc__": doc})


SoftmaxCrossEntropyWithLogits = _loss(
    "SoftmaxCrossEntropyWithLogits", _C.SoftmaxCrossEntropyWithLogits,
    "SoftmaxCrossEntropyWithLogits(sparse=False, reduction='none'): labels are class ids when sparse.")
CrossEntropyLoss = _loss("CrossEntropyLoss", _C.CrossEntropyLoss,
                         "CrossEntropyLoss(weight=None, ignore_index=-100, reduction='mean', label_smoothing=0.0)")
NLLLoss = _loss("NLLLoss", _C.NLLLoss, "NLLLoss(weight=None, ignore_index=-100, reduction='mean')")
MSELoss = _loss("MSELoss", _C.MSELoss, "MSELoss(reduction='mean'): (x - y)^2")
L1Loss = _loss("L1Loss", _C.L1Loss, "L1Loss(reduction='mean'): |x - y|")
SmoothL1Loss = _loss("SmoothL1Loss", _C.SmoothL1Loss, "SmoothL1Loss(beta=1.0, reduction='none')")
HuberLoss = _loss("HuberLoss", _C.HuberLoss, "HuberLoss(reduction='mean', delta=1.0)")
BCELoss = _loss("BCELoss", _C.BCELoss, "BCELoss(weight=None, reduction='mean') on probabilities")
BCEWithLogitsLoss = _loss("BCEWithLogitsLoss", _C.BCEWithLogitsLoss,
                          "BCEWithLogitsLoss(reduction='mean', weight=None, pos_weight=None) on logits")
