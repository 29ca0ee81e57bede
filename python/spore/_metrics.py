"""Metrics (mindspore.train.Metric family): the C++ ones (spore/train/metrics.h) under MindSpore's
names, and Metric, the base class of metrics written in Python (clear / update / eval)."""
from . import _C
from ._args import refuse


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
        # MindSpore's classification metrics take eval_type ("classification": Spore's only kind);
        # the others take nothing
        given = dict(zip(("eval_type",), args), **kwargs)
        if len(args) > 1 or set(given) - {"eval_type"} or given.get("eval_type", "classification") != "classification":
            raise NotImplementedError(f"For '{name}', the arguments {args!r} {kwargs!r} are not supported: Spore's "
                                      f"{name} is single-label classification / plain regression; make it with no "
                                      f"arguments (or eval_type='classification')")
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
        refuse("ConfusionMatrix", "Spore's ConfusionMatrix counts (no normalisation); normalise the result yourself",
               normalize=(normalize, "no_norm"), threshold=(threshold, 0.5))
        super().__init__()
        self._metric = _C.ConfusionMatrixMetric(num_classes)


def get_metric_fn(name, *args, **kwargs):
    """A metric by name; args / kwargs go to its constructor (MindSpore's get_metric_fn)."""
    return _builtin(name, name)(*args, **kwargs)


def names():
    return list(_C.metric_names())
