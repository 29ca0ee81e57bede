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


def _sink(dataset_sink_mode, sink_size, who):
    """The C++ loop's sink_size: 0 without sink mode, else -1 (a sink per epoch) or N steps."""
    if not isinstance(dataset_sink_mode, bool):
        raise TypeError(f"For '{who}', 'dataset_sink_mode' must be a bool, got {type(dataset_sink_mode).__name__}")
    if not isinstance(sink_size, int) or isinstance(sink_size, bool) or not (sink_size == -1 or sink_size > 0):
        raise ValueError(f"For '{who}', 'sink_size' must be -1 (the whole dataset per sink) or an int > 0, "
                         f"got {sink_size!r}")
    return sink_size if dataset_sink_mode else 0


def _no_eval_sink(flag, who, name):
    if flag:
        raise NotImplementedError(f"For '{who}', {name}=True is not supported: evaluation runs step by step and "
                                  f"its step callbacks see every step (the metrics are the same as in sink mode); "
                                  f"pass {name}=False")


class Model:
    def __init__(self, network, loss_fn=None, optimizer=None, metrics=None, eval_network=None, eval_indexes=None,
                 amp_level="O0", boost_level="O0", **kwargs):
        unknown = sorted(set(kwargs) - {"loss_scale_manager", "keep_batchnorm_fp32", "cast_model_type"})
        if unknown:
            raise TypeError(f"For 'Model', unexpected keyword argument(s) {', '.join(map(repr, unknown))}; Model takes "
                            f"network, loss_fn, optimizer, metrics, eval_network, eval_indexes, amp_level and "
                            f"loss_scale_manager, keep_batchnorm_fp32, cast_model_type")
        if boost_level != "O0":
            raise NotImplementedError(f"For 'Model', boost_level={boost_level!r} is not supported: Spore has no "
                                      f"boost (gradient freezing / adaptive summation) algorithms; use 'O0'")
        if eval_indexes is not None and list(eval_indexes) != [0, 1, 2]:
            raise NotImplementedError(f"For 'Model', eval_indexes={eval_indexes!r}: Spore's eval_network must return "
                                      f"(loss, outputs, label) in that order, i.e. eval_indexes [0, 1, 2]")
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
        """Trains `epoch` epochs (counting initial_epoch ones already done).

        dataset_sink_mode=True is MindSpore's sink mode: the steps of a sink run back to back in the
        C++ loop (in GRAPH_MODE each is the compiled step), and the callbacks see each sink as one
        step: on_train_step_begin before its first step, on_train_step_end after its last, with
        cur_step_num advanced by the sink's steps and net_outputs its last loss. sink_size=-1: one
        sink per epoch (a pass over the dataset); sink_size=N: every epoch is N steps, drawn from one
        iterator that continues across epochs (restarting the dataset when it runs out)."""
        if self._optimizer is None:
            raise ValueError("For 'Model.train', the model was built without an optimizer")
        sys.stdout.flush()  # the C++ callbacks print through std::cout
        self._cpp.train(int(epoch), train_dataset._ds, _cb.to_cpp(callbacks, self), int(initial_epoch),
                        _sink(dataset_sink_mode, sink_size, "Model.train"))

    def build(self, train_dataset=None, valid_dataset=None, sink_size=-1, epoch=1):
        """MindSpore's Model.build: makes the step ready before training. Under
        parallel_mode="auto_parallel" it runs the strategy search on the first batch of
        train_dataset (else valid_dataset); train/eval/predict run it themselves when it has not
        run. Otherwise there is nothing to build ahead."""
        from .. import _args
        _args.refuse("Model.build", "the search prices one step of the first batch; sink mode and "
                     "epochs do not change it, so leave them at their defaults",
                     sink_size=(sink_size, -1), epoch=(epoch, 1))
        dataset = train_dataset if train_dataset is not None else valid_dataset
        if dataset is None:
            raise ValueError("For 'Model.build', pass train_dataset or valid_dataset")
        self._cpp.build(dataset._ds)

    def strategy_report(self):
        """auto_parallel: the strategies the search chose, one line per layer (empty before)."""
        return list(self._cpp.strategy_report())

    def fit(self, epoch, train_dataset, valid_dataset=None, valid_frequency=1, callbacks=None,
            dataset_sink_mode=False, valid_dataset_sink_mode=False, sink_size=-1, initial_epoch=0):
        """train() with a validation pass every valid_frequency epochs (and after the last one)."""
        if valid_dataset is None:
            if valid_dataset_sink_mode:
                raise ValueError("For 'Model.fit', valid_dataset_sink_mode=True needs a valid_dataset")
            return self.train(epoch, train_dataset, callbacks, dataset_sink_mode, sink_size, initial_epoch)
        _no_eval_sink(valid_dataset_sink_mode, "Model.fit", "valid_dataset_sink_mode")
        sys.stdout.flush()
        self._cpp.fit(int(epoch), train_dataset._ds, valid_dataset._ds, _cb.to_cpp(callbacks, self),
                      int(valid_frequency), int(initial_epoch), _sink(dataset_sink_mode, sink_size, "Model.fit"))

    def eval(self, valid_dataset, callbacks=None, dataset_sink_mode=False):
        """Metrics over the whole dataset: {"accuracy": 0.91, ...}."""
        _no_eval_sink(dataset_sink_mode, "Model.eval", "dataset_sink_mode")
        return dict(self._cpp.eval(valid_dataset._ds, _cb.to_cpp(callbacks, self)))

    def predict(self, *predict_data, backend=None, config=None):
        if backend is not None or config is not None:
            raise NotImplementedError("For 'Model.predict', 'backend' and 'config' (MindSpore Lite inference) are "
                                      "not supported: Spore predicts with the network itself; drop them")
        out = self._cpp.predict([d if isinstance(d, Tensor) else Tensor(d) for d in predict_data])
        return out[0] if len(out) == 1 else tuple(out)
