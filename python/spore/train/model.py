"""Model (mindspore.train.Model): train / eval / fit / predict over a Dataset, with callbacks and
metrics. The loop is the C++ Model's (the same as `spore train`'s), run with the GIL released:
Python callbacks, datasets and cells take it only for their own calls. In GRAPH_MODE the training
step (forward, loss, backward, optimizer) runs as one compiled graph."""
import sys

from .. import _C
from .. import context as _context
from .._metrics import Metric
from ..amp import _manager_of
from ..common.tensor import Tensor
from ..nn.cell import Cell, CppCell
from ..nn.cell import SequentialCell as _SequentialCell
from . import callback as _cb


def _cpp_of(cell, what):
    if cell is None:
        return None
    if not isinstance(cell, Cell):
        raise TypeError(f"For 'Model', '{what}' must be a Cell, got {type(cell).__name__}")
    return cell._cpp


class Model:
    def __init__(self, network, loss_fn=None, optimizer=None, metrics=None, eval_network=None, eval_indexes=None,
                 amp_level="O0", boost_level="O0", **kwargs):
        names, custom = [], {}
        if metrics is not None:
            if isinstance(metrics, dict):
                for k, v in metrics.items():
                    if isinstance(v, str):
                        names.append(v)
                    elif isinstance(v, Metric):
                        custom[k] = v
                    else:
                        raise TypeError(f"metric '{k}' must be a name or a Metric, got {type(v).__name__}")
            else:
                names = [m for m in metrics]
        lsm = kwargs.get("loss_scale_manager")
        self._network, self._loss_fn, self._optimizer = network, loss_fn, optimizer
        self._eval_network_user = eval_network
        net_cpp = _cpp_of(network, "network")
        if _context._AUTO_PARALLEL["pipeline_stages"] > 1 and isinstance(network, _SequentialCell):
            # Model cuts the C++ SequentialCell of these cells into the pipeline's stages
            net_cpp = _C.SequentialCell([(name, c._cpp) for name, c in network._cells.items()])
        self._cpp = _C.Model(net_cpp, _cpp_of(loss_fn, "loss_fn"),
                             optimizer._opt if optimizer is not None else None, names,
                             _cpp_of(eval_network, "eval_network"), amp_level,
                             _manager_of(lsm) if lsm is not None else None, kwargs.get("keep_batchnorm_fp32"),
                             kwargs.get("cast_model_type"))
        self._custom_metrics = custom
        for k, v in custom.items():
            self._cpp.add_metric(k, v._cpp_metric())
        self._train_network = None

    @property
    def train_network(self):
        if self._train_network is None and self._cpp.train_network() is not None:
            self._train_network = CppCell(self._cpp.train_network(), keep=(self,))
        return self._train_network

    @property
    def predict_network(self):
        return self._network

    @property
    def eval_network(self):
        return self._eval_network_user

    def train(self, epoch, train_dataset, callbacks=None, dataset_sink_mode=False, sink_size=-1, initial_epoch=0):
        """Trains `epoch` epochs (counting initial_epoch ones already done). dataset_sink_mode is
        accepted and ignored (CPU: no sink)."""
        if self._optimizer is None:
            raise ValueError("For 'Model.train', the model was built without an optimizer")
        sys.stdout.flush()  # the C++ callbacks print through std::cout
        self._cpp.train(int(epoch), train_dataset._ds, _cb.to_cpp(callbacks, self), int(initial_epoch))

    def fit(self, epoch, train_dataset, valid_dataset=None, valid_frequency=1, callbacks=None,
            dataset_sink_mode=False, valid_dataset_sink_mode=False, sink_size=-1, initial_epoch=0):
        if valid_dataset is None:
            return self.train(epoch, train_dataset, callbacks, initial_epoch=initial_epoch)
        sys.stdout.flush()
        self._cpp.fit(int(epoch), train_dataset._ds, valid_dataset._ds, _cb.to_cpp(callbacks, self),
                      int(valid_frequency), int(initial_epoch))

    def eval(self, valid_dataset, callbacks=None, dataset_sink_mode=False):
        """Metrics over the whole dataset: {"accuracy": 0.91, ...}."""
        return dict(self._cpp.eval(valid_dataset._ds, _cb.to_cpp(callbacks, self)))

    def predict(self, *predict_data, backend=None, config=None):
        out = self._cpp.predict([d if isinstance(d, Tensor) else Tensor(d) for d in predict_data])
        return out[0] if len(out) == 1 else tuple(out)
