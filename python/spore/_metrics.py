"""Metrics (mindspore.train.Metric family): the C++ ones (spore/train/metrics.h) under MindSpore's
names, and Metric, the base class of metrics written in Python (clear / update / eval)."""
from . import _C


class Metric:
    """Base class. A Python subclass implements clear(), update(*inputs) and eval()."""

    def __init__(self):
        self._metric = None

    def _cpp_metric(self):
        return self._metric if self._metric is not None else _C.PyMetric(self)

    def clear(self):
        self._metric.clear()

    def update(self, *inputs):
        self._metric.update(*inputs)

    def eval(self):
        return self._metric.eval()

    def __call__(self, *inputs):
        self.clear()
        self.update(*inputs)
        return self.eval()


def _builtin(name, cpp_name):
    def __init__(self, *args, **kwargs):
        Metric.__init__(self)
        self._metric = _C.make_metric(cpp_name)
    return type(name, (Metric,), {"__init__": __init__})


Accuracy = _builtin("Accuracy", "accuracy")
Precision = _builtin("Precision", "precision")
Recall = _builtin("Recall", "recall")
F1 = _builtin("F1", "f1")
MAE = _builtin("MAE", "mae")
MSE = _builtin("MSE", "mse")
Loss = _builtin("Loss", "loss")
Top1CategoricalAccuracy = _builtin("Top1CategoricalAccuracy", "top_1_accuracy")
Top5CategoricalAccuracy = _builtin("Top5CategoricalAccuracy", "top_5_accuracy")


class TopKCategoricalAccuracy(Metric):
    def __init__(self, k):
        super().__init__()
        self._metric = _C.TopKCategoricalAccuracy(k)


class ConfusionMatrix(Metric):
    def __init__(self, num_classes=0, normalize="no_norm", threshold=0.5):
        super().__init__()
        self._metric = _C.ConfusionMatrixMetric(num_classes)


def get_metric_fn(name, *args, **kwargs):
    return _builtin(name, name)()


def names():
    return list(_C.metric_names())
