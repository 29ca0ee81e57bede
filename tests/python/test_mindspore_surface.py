"""Issue 31: every value the Python front end takes is honoured or refused with a message. One test
per item that used to be ignored or wrong (device_num, ReduceLROnPlateau, Cell.set_grad,
dataset_sink_mode, python_multiprocessing, save_graphs, Profiler, Primitive.shard), then a walk
over the package: every parameter a public function accepts is used, and every value it cannot
honour is refused naming the parameter."""
import os

import numpy as np
import pytest

import spore as ms
from spore import nn, ops
from blob_task import Classifier, blobs


def _model(lr=0.05, metrics=None):
    net = Classifier()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), lr, 0.9)
    return net, opt, ms.train.Model(net, loss, opt, metrics=metrics)


# ---- get_context("device_num") ----------------------------------------------------------------------

def _cuda_driver_device_count():
    """The GPUs the CUDA driver shows this process (CUDA_VISIBLE_DEVICES applies), or None."""
    import ctypes
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    n = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(n)) != 0:
        return None
    return n.value


def test_device_num_is_the_device_count_of_the_target():
    ms.set_device("CPU")
    assert ms.get_context("device_num") == ms._C.device_count() == 1
    # GPU: the CUDA backend's device count (what the driver shows this process).
    try:
        ms.set_device("GPU")
    except RuntimeError as e:  # no CUDA backend in this build, or no GPU visible
        assert "GPU" in str(e)
    else:
        try:
            assert ms.get_context("device_num") == _cuda_driver_device_count() >= 1
        finally:
            ms.set_device("CPU")
    # device_num is what the machine has, not a setting: set_context refuses it (MindSpore 2.x moved
    # it to set_auto_parallel_context, which checks it against the launched ranks).
    with pytest.raises(NotImplementedError, match="device_num=4.*set_auto_parallel_context"):
        ms.set_context(device_num=4)
    assert ms.get_context("device_num") == 1


# ---- ReduceLROnPlateau ------------------------------------------------------------------------------

class _LrLog(ms.train.Callback):
    def __init__(self, opt):
        self.opt, self.lrs = opt, []

    def on_train_epoch_end(self, run_context):
        self.lrs.append(float(self.opt.get_lr().asnumpy()))


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_reduce_lr_on_plateau_drops_after_patience(mode, capsys):
    ms.set_context(mode=mode)
    x, y = blobs(64)
    data = ms.dataset.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False).batch(16)
    net, opt, model = _model(0.05)
    # min_delta so large that only the first epoch counts as an improvement: epochs 2..4 are a
    # plateau, so at epoch 1 + patience(3) = 4 the lr is multiplied by 0.5; epoch 5 ends the cooldown
    # of 1 epoch and counts as waiting epoch 1 (MindSpore's / Keras's order), so 5, 6, 7 wait and the
    # second drop comes at epoch 7.
    plateau = ms.train.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=3, min_delta=1e9, cooldown=1,
                                         verbose=True)
    log = _LrLog(opt)
    model.train(9, data, callbacks=[plateau, log])
    assert log.lrs == pytest.approx([0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125, 0.0125, 0.0125])
    out = capsys.readouterr().out
    assert "Epoch 00004: ReduceLROnPlateau reducing learning rate to 0.025" in out
    assert "Epoch 00007: ReduceLROnPlateau reducing learning rate to 0.0125" in out


def test_reduce_lr_on_plateau_eval_loss_min_lr_and_refusals():
    x, y = blobs(64)
    train = ms.dataset.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False).batch(16)
    valid = ms.dataset.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False).batch(32)
    net, opt, model = _model(0.05, metrics={"accuracy"})
    # the default monitor is the validation loss of Model.fit; improving epochs keep the rate
    log = _LrLog(opt)
    model.fit(2, train, valid, callbacks=[ms.train.ReduceLROnPlateau(patience=1, min_delta=0.0), log])
    assert log.lrs == pytest.approx([0.05, 0.05])
    # never below min_lr
    log = _LrLog(opt)
    model.fit(4, train, valid, callbacks=[ms.train.ReduceLROnPlateau(patience=1, min_delta=1e9, factor=0.1,
                                                                     min_lr=0.01), log])
    assert log.lrs == pytest.approx([0.05, 0.01, 0.01, 0.01])
    with pytest.raises(ValueError, match="monitor 'eval_acc' is not among"):
        model.fit(1, train, valid, callbacks=[ms.train.ReduceLROnPlateau(monitor="eval_acc")])
    with pytest.raises(ValueError, match="factor"):
        ms.train.ReduceLROnPlateau(factor=1.5)
    with pytest.raises(ValueError, match="mode"):
        ms.train.ReduceLROnPlateau(mode="up")
    sched = nn.Momentum(net.trainable_params(), nn.ExponentialDecayLR(0.1, 0.9, 4), 0.9)
    m2 = ms.train.Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"), sched)
    with pytest.raises(ValueError, match="fixed number"):
        m2.train(1, train, callbacks=[ms.train.ReduceLROnPlateau(monitor="loss")])


# ---- Cell.set_grad ----------------------------------------------------------------------------------

def test_set_grad_is_the_forward_grad_mode():
    net = Classifier()
    x = ms.Tensor(np.ones((4, 2), np.float32))
    assert net(x).requires_grad  # default: the ambient grad mode (parameters require grad)
    assert net.set_grad(False) is net and net.requires_grad is False
    out = net(x)
    assert not out.requires_grad  # no tape: an inference forward
    # the grad transforms differentiate it anyway (MindSpore's grad sets the flag itself)
    loss_fn = lambda a: net(a).sum()  # noqa: E731
    _, g = ms.value_and_grad(loss_fn, None, net.trainable_params())(x)
    assert len(g) == 4 and float(np.abs(g[0].asnumpy()).sum()) > 0
    net.set_grad(True)
    with ms._no_grad():
        assert net(x).requires_grad  # True: records even inside a no-grad scope
        assert not Classifier()(x).requires_grad
    with pytest.raises(TypeError, match="requires_grad"):
        net.set_grad("yes")


# ---- dataset_sink_mode ------------------------------------------------------------------------------

class _Steps(ms.train.Callback):
    def __init__(self):
        self.began, self.ended, self.losses, self.epochs = [], [], [], []

    def on_train_step_begin(self, run_context):
        self.began.append(run_context.original_args().cur_step_num)

    def on_train_step_end(self, run_context):
        cb = run_context.original_args()
        self.ended.append(cb.cur_step_num)
        self.losses.append(float(cb.net_outputs.asnumpy()))

    def on_train_epoch_end(self, run_context):
        self.epochs.append((run_context.original_args().cur_epoch_num, run_context.original_args().batch_num))


def _weights_after(mode, **kw):
    ms.set_context(mode=mode)
    ms.set_seed(5)
    x, y = blobs(64)
    data = ms.dataset.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False).batch(16)  # 4 steps an epoch
    net, _, model = _model(0.05)
    rec = _Steps()
    model.train(kw.pop("epochs", 2), data, callbacks=[rec], **kw)
    return [p.asnumpy().copy() for p in net.trainable_params()], rec


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_dataset_sink_mode_is_mindspores_sink(mode):
    plain, rec = _weights_after(mode)
    assert rec.began == [1, 2, 3, 4, 5, 6, 7, 8] and rec.ended == [1, 2, 3, 4, 5, 6, 7, 8]
    # a sink per epoch: the same steps, so the same weights; the callbacks see one step per epoch,
    # begun at the step count before the sink and ended after it (MindSpore's order)
    sunk, rec = _weights_after(mode, dataset_sink_mode=True)
    for a, b in zip(plain, sunk):
        np.testing.assert_array_equal(a, b)
    assert rec.began == [0, 4] and rec.ended == [4, 8] and rec.epochs == [(1, 4), (2, 4)]
    # sink_size=3: every epoch is 3 steps from one iterator that goes on across epochs (and
    # restarts the dataset after its 4 batches): 8 epochs of 3 = 24 steps = 6 passes
    plain6, _ = _weights_after(mode, epochs=6)
    sized, rec = _weights_after(mode, epochs=8, dataset_sink_mode=True, sink_size=3)
    assert rec.ended == [3, 6, 9, 12, 15, 18, 21, 24] and rec.epochs[0] == (1, 3)
    for a, b in zip(plain6, sized):
        np.testing.assert_array_equal(a, b)
    # sink_size without sink mode is ignored, as in MindSpore (it only sizes the sinks)
    _, rec = _weights_after(mode, sink_size=3)
    assert rec.ended == [1, 2, 3, 4, 5, 6, 7, 8]
    with pytest.raises(ValueError, match="sink_size"):
        _weights_after(mode, dataset_sink_mode=True, sink_size=0)


def test_eval_sink_mode_is_refused():
    x, y = blobs(32)
    data = ms.dataset.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False).batch(16)
    _, _, model = _model(metrics={"accuracy"})
    with pytest.raises(NotImplementedError, match="dataset_sink_mode=True is not supported: evaluation"):
        model.eval(data, dataset_sink_mode=True)
    with pytest.raises(NotImplementedError, match="valid_dataset_sink_mode"):
        model.fit(1, data, data, valid_dataset_sink_mode=True)


# ---- python_multiprocessing -------------------------------------------------------------------------

def _pid_and_double(x):
    return (x * 2).astype(np.float32), np.array(os.getpid(), np.int64)


def test_python_multiprocessing_runs_python_callables_in_processes():
    data = np.arange(24, dtype=np.float32).reshape(12, 2)
    ds = ms.dataset.NumpySlicesDataset({"x": data}, shuffle=False)
    mp = ds.map(_pid_and_double, "x", ["x", "pid"], num_parallel_workers=2, python_multiprocessing=True)
    rows = list(mp.create_tuple_iterator(output_numpy=True))
    np.testing.assert_array_equal(np.stack([r[0] for r in rows]), data * 2)
    pids = {int(r[1]) for r in rows}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2  # ran in the pool's processes
    # threads (the default): the same values, computed in this process
    th = ds.map(_pid_and_double, "x", ["x", "pid"], num_parallel_workers=2)
    rows = list(th.create_tuple_iterator(output_numpy=True))
    assert {int(r[1]) for r in rows} == {os.getpid()}
    # a lambda works (the pool is forked; nothing is pickled but rows)
    lam = ds.map(lambda x: x + 1, "x", python_multiprocessing=True, num_parallel_workers=2)
    np.testing.assert_array_equal(np.stack([r[0] for r in lam.create_tuple_iterator(output_numpy=True)]), data + 1)

    class Source:
        def __len__(self):
            return 6

        def __getitem__(self, i):
            return np.array([i], np.int64), np.array(os.getpid(), np.int64)

    gen = ms.dataset.GeneratorDataset(Source(), ["i", "pid"], shuffle=False, num_parallel_workers=2,
                                      python_multiprocessing=True)
    rows = list(gen.create_tuple_iterator(output_numpy=True))
    assert [int(r[0][0]) for r in rows] == list(range(6)) and os.getpid() not in {int(r[1]) for r in rows}
    # a per_batch_map in processes
    b = ds.batch(4, per_batch_map=lambda x, info: ([r * 0 + info.get_batch_num() + os.getpid() for r in x],),
                 input_columns=["x"], python_multiprocessing=True, num_parallel_workers=2)
    got = [float(r[0][0, 0]) for r in b.create_tuple_iterator(output_numpy=True)]
    assert [g - int(g) for g in got] == [0.0] * 3 and os.getpid() not in {int(g) - k for k, g in enumerate(got)}
    with pytest.warns(UserWarning, match="num_parallel_workers=2: batching is one C\\+\\+ stage"):
        same = ds.batch(4, num_parallel_workers=2)  # only the speed could change: the same batches
    assert [r[0].tolist() for r in same.create_tuple_iterator(output_numpy=True)] == \
        [r[0].tolist() for r in ds.batch(4).create_tuple_iterator(output_numpy=True)]
    with pytest.raises(NotImplementedError, match="column_types"):
        ms.dataset.GeneratorDataset(Source(), ["i", "pid"], column_types=[ms.int64, ms.int64])


def test_dataset_config_workers_and_iterator_epochs():
    with pytest.warns(UserWarning, match="num_parallel_workers=4: the rows are slices"):
        ms.dataset.NumpySlicesDataset({"x": np.arange(4, dtype=np.float32)}, num_parallel_workers=4)
    ms.dataset.config.set_num_parallel_workers(3)
    try:
        assert ms.dataset.config.get_num_parallel_workers() == 3
    finally:
        ms.dataset.config._workers[0] = None
    assert ms.dataset.config.get_num_parallel_workers() == ms._C.default_num_workers() >= 1
    ds = ms.dataset.NumpySlicesDataset({"x": np.arange(4, dtype=np.float32)}, shuffle=False)
    it = ds.create_tuple_iterator(num_epochs=1, output_numpy=True)
    assert len(list(it)) == 4
    with pytest.raises(RuntimeError, match="num_epochs"):
        next(it)


# ---- save_graphs --------------------------------------------------------------------------------------

def test_save_graphs_writes_the_ir_dumps(tmp_path):
    out = str(tmp_path / "ir")
    ms.set_context(mode=ms.GRAPH_MODE, save_graphs=True, save_graphs_path=out)
    try:
        assert ms.get_context("save_graphs") is True and ms._C.save_graphs_path() == out
        net = Classifier()
        net(ms.Tensor(np.ones((4, 2), np.float32)))
    finally:
        ms.set_context(save_graphs=False)
    files = sorted(os.listdir(out))
    assert any(f.endswith(".txt") for f in files) and any(f.endswith(".dot") for f in files), files
    assert any("final" in f for f in files)
    assert ms._C.save_graphs_path() in ("", os.environ.get("SPORE_DUMP_IR", ""))
    with pytest.raises(ValueError, match="save_graphs"):
        ms.set_context(save_graphs="yes")


def test_set_context_options_are_honoured_warned_or_refused():
    before = ms._C.get_num_threads()
    try:
        ms.set_context(runtime_num_threads=1)
        assert ms._C.get_num_threads() == 1 and ms.get_context("runtime_num_threads") == 1
    finally:
        ms._C.set_num_threads(before)
    with pytest.warns(UserWarning, match="max_call_depth=10000 changes nothing in Spore"):
        ms.set_context(max_call_depth=10000)
    assert ms.get_context("max_call_depth") == 10000
    ms.set_context(max_call_depth=1000, jit_level="O0")  # MindSpore's defaults: nothing to say
    with pytest.raises(NotImplementedError, match="enable_profiling.*ms.Profiler"):
        ms.set_context(enable_profiling=True)
    with pytest.raises(NotImplementedError, match="deterministic='ON'"):
        ms.set_context(deterministic="ON", mode=ms.GRAPH_MODE)
    assert ms.get_context("mode") == ms.PYNATIVE_MODE  # nothing was changed
    ms.set_context(deterministic="OFF")


# ---- Profiler -----------------------------------------------------------------------------------------

def test_profiler_writes_the_cli_trace(tmp_path):
    import json
    out = str(tmp_path / "prof")
    x, y = blobs(32)
    data = ms.dataset.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False).batch(16)
    _, _, model = _model()
    profiler = ms.Profiler(output_path=out)
    model.train(1, data)
    summary = profiler.analyse()
    trace = json.load(open(os.path.join(out, "trace.json")))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = {e.get("name") for e in events}
    assert "step" in names and "matmul" in names, sorted(n for n in names if n)[:40]
    assert "matmul" in summary and os.path.exists(os.path.join(out, "summary.txt"))
    # start_profile=False records nothing until start()
    p2 = ms.Profiler(output_path=str(tmp_path / "p2"), start_profile=False)
    ops.relu(ms.Tensor(np.ones(3, np.float32)))
    p2.start()
    ops.sigmoid(ms.Tensor(np.ones(3, np.float32)))
    p2.analyse()
    names = {e.get("name") for e in json.load(open(str(tmp_path / "p2" / "trace.json")))["traceEvents"]}
    assert "sigmoid" in names and "relu" not in names
    with pytest.raises(NotImplementedError, match="aic_metrics"):
        ms.Profiler(output_path=out, aic_metrics="PipeUtilization")
    ms.Profiler(output_path=out, profile_communication=True).stop()  # what Spore records anyway


# ---- Primitive.shard ----------------------------------------------------------------------------------

def test_primitive_shard_checks_and_standalone_identity():
    a = ms.Tensor(np.arange(8, dtype=np.float32).reshape(2, 4))
    b = ms.Tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    mm = ops.MatMul().shard(((1, 2), (2, 1)))
    assert isinstance(mm, ops.MatMul) and mm.attrs["in_strategy"] == ((1, 2), (2, 1))
    # stand-alone (one rank): the strategy has no effect, as in MindSpore
    np.testing.assert_allclose(mm(a, b).asnumpy(), a.asnumpy() @ b.asnumpy())
    ops.ReduceSum().shard(((2, 1),))
    ops.Add().shard(((2, 1), (2, 1)))
    ops.MatMul().shard(((2, 1), (1, 1)), out_strategy=((2, 1),))
    with pytest.raises(NotImplementedError, match="no rule for this primitive.*MatMul"):
        ops.Concat().shard(((1, 2),))
    with pytest.raises(ValueError, match="one entry per tensor input \\(2\\)"):
        ops.MatMul().shard(((1, 2),))
    with pytest.raises(ValueError, match="tuple of tuples of ints >= 1"):
        ops.ReLU().shard(((0, 2),))
    with pytest.raises(NotImplementedError, match="out_strategy' is supported for MatMul only"):
        ops.Add().shard(((2, 1), (2, 1)), out_strategy=((2, 1),))


def test_primitive_shard_two_ranks_matches_one_process():
    """ops.MatMul().shard(...) under semi_auto_parallel on 2 MPI ranks, through Model: the same
    evaluation loss as one process."""
    from test_parallel import _one_and_two_ranks
    a, b = _one_and_two_ranks("sharded_primitive_job.py",
                              r"RANKS (\d+) EVAL_LOSS ([0-9.eE+-]+) MOVES (\d+) REDUCES (\d+)")
    assert a.group(1) == "1" and a.group(3) == "0"  # one process: the strategies do nothing
    assert b.group(1) == "2" and int(b.group(3)) > 0 and int(b.group(4)) > 0  # cut, partial sums reduced
    np.testing.assert_allclose(float(b.group(2)), float(a.group(2)), rtol=1e-5)


# ---- the walk: every argument is honoured or refused ------------------------------------------------

PKG = os.path.join(os.path.dirname(__file__), "..", "..", "python", "spore")

# Parameters a function does not read, each with the reason that is not an ignored argument.
# (file, "Class.function" or "function", parameter)
NOT_READ = {
    **{("train/callback.py", f"Callback.{h}", "run_context"): "a hook's default does nothing"
       for h in ("begin", "epoch_begin", "epoch_end", "step_begin", "step_end", "end", "on_eval_begin",
                 "on_eval_epoch_begin", "on_eval_epoch_end", "on_eval_step_begin", "on_eval_step_end", "on_eval_end")},
    ("train/callback.py", "ReduceLROnPlateau.on_train_begin", "run_context"): "resets its own counters",
    ("train/callback.py", "_StepTimer.on_train_step_begin", "run_context"): "test helper: times the step",
    ("train/callback.py", "_StepTimer.on_train_step_end", "run_context"): "test helper: times the step",
    ("nn/cell.py", "Cell.construct", "*inputs"): "the base class raises: construct is not defined",
    ("nn/cell.py", "Cell.construct", "**kwargs"): "the base class raises: construct is not defined",
    ("nn/cell.py", "CellList.construct", "*inputs"): "CellList has no construct; it raises",
    ("dataset/engine.py", "Dataset.device_que", "*args"): "device_que raises: sink mode takes the dataset",
    ("dataset/engine.py", "Dataset.device_que", "**kwargs"): "device_que raises: sink mode takes the dataset",
    ("dataset/engine.py", "Dataset.output_shapes", "estimate"): "the shapes of the first row, exact either way",
    ("dataset/engine.py", "Dataset.create_tuple_iterator", "do_copy"):
        "MindSpore's do_copy=False is a zero-copy Tensor; Spore's rows always are (same values)",
    ("dataset/engine.py", "Dataset.create_dict_iterator", "do_copy"):
        "MindSpore's do_copy=False is a zero-copy Tensor; Spore's rows always are (same values)",
    ("common/tensor.py", "__deepcopy__", "memo"): "a tensor's copy refers to nothing else (no cycles to track)",
    ("train/callback.py", "Callback.__exit__", "*err"): "a callback used as a context manager lets errors through",
    ("ops/__init__.py", "constexpr", "**kwargs"):
        "@constexpr's options (get_instance, reuse_result, check) tune MindSpore's compiler; the function "
        "runs as plain Python here, with the same result",
}


def _unread_parameters():
    import ast
    found = set()
    for dirpath, _, files in os.walk(PKG):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, PKG).replace(os.sep, "/")
            tree = ast.parse(open(path).read())

            def visit(node, prefix):
                for ch in ast.iter_child_nodes(node):
                    if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        a = ch.args
                        params = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
                        params += ["*" + a.vararg.arg] if a.vararg else []
                        params += ["**" + a.kwarg.arg] if a.kwarg else []
                        used = {n.id for n in ast.walk(ch) if isinstance(n, ast.Name)}
                        for prm in params:
                            if prm not in ("self", "cls") and prm.lstrip("*") not in used:
                                found.add((rel, prefix + ch.name, prm))
                        visit(ch, prefix + ch.name + ".")
                    elif isinstance(ch, ast.ClassDef):
                        visit(ch, prefix + ch.name + ".")
            visit(tree, "")
    return found


def test_no_parameter_is_accepted_and_ignored():
    """Every parameter of every function in the package is read (honoured, validated or refused),
    or is in NOT_READ with the reason it is not an ignored argument."""
    unread = _unread_parameters()
    new = sorted(unread - set(NOT_READ))
    assert not new, "parameters accepted and never read (honour them, refuse non-defaults with " \
                    "spore/_args.refuse, or add them to NOT_READ with the reason):\n" + "\n".join(map(str, new))
    stale = sorted(set(NOT_READ) - unread)
    assert not stale, f"NOT_READ entries that are read now (remove them): {stale}"


def test_no_parameter_is_only_stored():
    """A constructor argument that is only stored in an attribute nothing reads is ignored too."""
    import ast
    trees = {}
    for dirpath, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                trees[os.path.relpath(path, PKG)] = ast.parse(open(path).read())
    loads = set()
    for t in trees.values():
        for n in ast.walk(t):
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load):
                loads.add(n.attr)
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "getattr" and len(n.args) > 1 and \
                    isinstance(n.args[1], ast.Constant):
                loads.add(n.args[1].value)
    only_stored = []
    for rel, t in trees.items():
        for c in (n for n in ast.walk(t) if isinstance(n, ast.ClassDef)):
            for fn in (x for x in c.body if isinstance(x, ast.FunctionDef) and x.name == "__init__"):
                for prm in (a.arg for a in fn.args.args + fn.args.kwonlyargs if a.arg != "self"):
                    uses = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == prm]
                    dead = 0
                    for n in ast.walk(fn):
                        if isinstance(n, ast.Assign):
                            attrs = [x.attr for tg in n.targets for x in (tg.elts if isinstance(tg,
                            ast.Tuple) else [tg])
                                     if isinstance(x, ast.Attribute)]
                            if attrs and all(a not in loads for a in attrs):
                                dead += sum(isinstance(m, ast.Name) and m.id == prm for m in ast.walk(n.value))
                    if uses and dead == len(uses):
                        only_stored.append((rel, c.name, prm))
    assert not only_stored, f"constructor arguments only stored, never read: {only_stored}"


# The values that used to be accepted and ignored: each is refused now, naming the argument.
def _refusals():
    t = ms.Tensor(np.ones((2, 3), np.float32))
    net = Classifier()
    x, y = blobs(16)
    data = ms.dataset.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False).batch(8)
    return [
        ("set_context(enable_dump=True)", lambda: ms.set_context(enable_dump=True), "enable_dump"),
        ("set_context(parallel_mode=...)", lambda: ms.set_context(parallel_mode="data_parallel"), "parallel_mode"),
        ("Model(boost_level='O2')", lambda: ms.train.Model(net, boost_level="O2"), "boost_level"),
        ("Model(eval_indexes=[1, 0, 2])", lambda: ms.train.Model(net, eval_indexes=[1, 0, 2]), "eval_indexes"),
        ("Model(typo=...)", lambda: ms.train.Model(net, loss_scale_manger=None), "loss_scale_manger"),
        ("Model.predict(backend=...)", lambda: ms.train.Model(net).predict(t[:, :2], backend="lite"), "backend"),
        ("amp.build_train_network(boost_level)", lambda: ms.amp.build_train_network(
            net, nn.SGD(net.trainable_params()), boost_level="O1"), "boost_level"),
        ("jit(fullgraph=True)", lambda: ms.jit(lambda a: a, fullgraph=True), "fullgraph"),
        ("jit(unknown=...)", lambda: ms.jit(lambda a: a, unknown=1), "unknown"),
        ("Tensor.max(initial=)", lambda: t.max(initial=0.0), "initial"),
        ("ops.max(where=)", lambda: ops.max(t, where=t > 0), "where"),
        ("Tensor.flatten(order='F')", lambda: t.flatten(order="F"), "order"),
        ("ops.flatten(order='F')", lambda: ops.flatten(t, order="F"), "order"),
        ("Parameter.set_data(slice_shape=True)", lambda: ms.Parameter(t, "p").set_data(t, slice_shape=True),
         "slice_shape"),
        ("Parameter(layerwise_parallel=True)", lambda: ms.Parameter(t, "p", layerwise_parallel=True),
         "layerwise_parallel"),
        ("get_rank(group=...)", lambda: ms.communication.get_rank("my_group"), "group"),
        ("get_group_size(group=...)", lambda: ms.communication.get_group_size("my_group"), "group"),
        ("map(cache=...)", lambda: data.map(lambda a: a, "x", cache=object()), "cache"),
        ("MnistDataset(cache=...)", lambda: ms.dataset.MnistDataset("/nonexistent", cache=object()), "cache"),
        ("batch(python_multiprocessing=True)", lambda: data.batch(2, python_multiprocessing=True), "per_batch_map"),
        ("device_que()", lambda: data.device_que(), "device_que"),
        ("DistributedSampler(offset=2)", lambda: ms.dataset.DistributedSampler(2, 0, offset=2), "offset"),
        ("vision.CutOut(is_hwc=False)", lambda: ms.dataset.vision.CutOut(4, is_hwc=False), "is_hwc"),
        ("vision.ToTensor(output_type=float16)", lambda: ms.dataset.vision.ToTensor(np.float16), "output_type"),
        ("Cell.set_boost", lambda: net.set_boost("less_bn"), "boost_type"),
        ("Cell.recompute(mp_comm_recompute=False)", lambda: Classifier().recompute(mp_comm_recompute=False),
         "mp_comm_recompute"),
        ("Cell.recompute(typo=)", lambda: Classifier().recompute(typo=1), "typo"),
        ("nn.MaxPool2d(return_indices=True)", lambda: nn.MaxPool2d(2, return_indices=True), "return_indices"),
        ("nn.AvgPool2d(divisor_override=3)", lambda: nn.AvgPool2d(2, divisor_override=3), "divisor_override"),
        ("nn.Upsample(align_corners=True)", lambda: nn.Upsample(scale_factor=2.0, align_corners=True),
         "align_corners"),
        ("nn.Embedding(use_one_hot=True)", lambda: nn.Embedding(10, 4, use_one_hot=True), "use_one_hot"),
        ("nn.BatchNorm2d(data_format='NHWC')", lambda: nn.BatchNorm2d(3, data_format="NHWC"), "data_format"),
        ("nn.Adam(use_locking=True)", lambda: nn.Adam(net.trainable_params(), use_locking=True), "use_locking"),
        ("nn.TrainOneStepCell(return_grad=True)", lambda: nn.TrainOneStepCell(
            net, nn.SGD(net.trainable_params()), return_grad=True), "return_grad"),
        ("ops.value_and_grad(return_ids=True)", lambda: ops.value_and_grad(lambda a: a, return_ids=True),
         "return_ids"),
        ("ops.max_pool2d(dilation=2)", lambda: ops.max_pool2d(t.reshape(1, 1, 2, 3), 1, dilation=2), "dilation"),
        ("ops.dropout(seed=3)", lambda: ops.dropout(t, seed=3), "seed"),
        ("ops.rand(seed=3)", lambda: ops.rand(2, 2, seed=3), "seed"),
        ("ops.one_hot(axis=0)", lambda: ops.one_hot(ms.Tensor(np.array([0, 1], np.int32)), 3, axis=0), "axis"),
        ("ops.nll_loss(label_smoothing=0.1)", lambda: ops.nll_loss(t, ms.Tensor(np.array([0, 1], np.int32)),
                                                                    label_smoothing=0.1), "label_smoothing"),
        ("ops.gather(batch_dims=1)", lambda: ops.gather(t, ms.Tensor(np.array([0], np.int32)), 1, batch_dims=1),
         "batch_dims"),
        ("ops.norm(ord=2, matrix)", lambda: ops.norm(t, ord=2), "ord=2"),
        ("ops.Conv2D(data_format='NHWC')", lambda: ops.Conv2D(4, 3, data_format="NHWC"), "data_format"),
        ("ops.Dropout(Seed0=1)", lambda: ops.Dropout(0.5, Seed0=1), "Seed0"),
        ("ops.SparseSoftmaxCrossEntropyWithLogits(is_grad=True)",
         lambda: ops.SparseSoftmaxCrossEntropyWithLogits(is_grad=True), "is_grad"),
        ("TimeMonitor(data_time=True)", lambda: ms.train.TimeMonitor(data_time=True), "data_time"),
        ("CheckpointConfig(async_save=True)", lambda: ms.train.CheckpointConfig(async_save=True), "async_save"),
        ("CheckpointConfig(typo=)", lambda: ms.train.CheckpointConfig(save_checkpoint_step=3),
         "save_checkpoint_step"),
        ("EarlyStopping(verbose=True)", lambda: ms.train.EarlyStopping(verbose=True), "verbose"),
        ("ConfusionMatrix(normalize='all')", lambda: ms.train.ConfusionMatrix(3, normalize="all"), "normalize"),
        ("Accuracy('multilabel')", lambda: ms.train.Accuracy("multilabel"), "multilabel"),
        ("save_checkpoint(enc_key=...)", lambda: ms.save_checkpoint(net, "/tmp/x.ckpt", enc_key=b"k"), "enc_key"),
        ("load_checkpoint(dec_key=...)", lambda: ms.load_checkpoint("/tmp/x.ckpt", dec_key=b"k"), "dec_key"),
        ("load_param_into_net(remove_redundancy=True)", lambda: ms.load_param_into_net(net, {}, remove_redundancy=True),
         "remove_redundancy"),
        ("Profiler(profile_memory=True)", lambda: ms.Profiler(profile_memory=True), "profile_memory"),
        ("Profiler.analyse(step_list=...)", lambda: _analyse_step_list(), "step_list"),
        ("Primitive.shard on Concat", lambda: ops.Concat().shard(((1, 2),)), "Concat"),
        ("GeneratorDataset(schema=...)", lambda: ms.dataset.GeneratorDataset([(1,)], ["a"], schema="s.json"),
         "schema"),
    ]


def _analyse_step_list():
    p = ms.Profiler(output_path="/tmp/spore_prof_refusal", start_profile=False)
    try:
        p.analyse(step_list=[1])
    finally:
        p.stop()


def test_every_ignored_argument_is_refused_by_name():
    failures = []
    for what, call, needle in _refusals():
        try:
            call()
        except (NotImplementedError, TypeError, ValueError, KeyError) as e:
            if needle not in str(e):
                failures.append(f"{what}: the message does not name {needle!r}: {e}")
        else:
            failures.append(f"{what}: accepted")
    assert not failures, "\n".join(failures)


def test_cell_parameter_walks_honour_expand_and_recurse():
    net = Classifier()
    assert [n for n, _ in net.parameters_and_names()] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert list(net.parameters_and_names(expand=False)) == [] and net.trainable_params(recurse=False) == []
    assert len(net.fc1.trainable_params(recurse=False)) == 2
    p = ms.Parameter(ms.Tensor(np.ones(2, np.float32)), name="own")
    net.insert_param_to_cell("own", p)
    assert [q.name for q in net.trainable_params(recurse=False)] == ["own"]
    with pytest.raises(KeyError, match="contains '.'"):
        net.insert_param_to_cell("a.b", ms.Parameter(ms.Tensor(np.ones(2, np.float32)), name="ab"))
    c = p.clone(init="zeros")
    assert c.asnumpy().tolist() == [0.0, 0.0] and p.asnumpy().tolist() == [1.0, 1.0]


def test_norm_ord_and_metric_fn_arguments():
    v = ms.Tensor(np.array([3.0, -4.0, 0.0], np.float32))
    assert float(ops.norm(v).asnumpy()) == pytest.approx(5.0)
    assert float(ops.norm(v, ord=1).asnumpy()) == pytest.approx(7.0)
    assert float(ops.norm(v, ord=float("inf")).asnumpy()) == pytest.approx(4.0)
    assert float(ops.norm(v, ord=0).asnumpy()) == pytest.approx(2.0)
    assert float(ops.norm(v, ord=3).asnumpy()) == pytest.approx((27 + 64) ** (1 / 3), rel=1e-5)
    assert isinstance(ms.train.get_metric_fn("accuracy", "classification"), ms.train.Metric)
    with pytest.raises(NotImplementedError, match="multilabel"):
        ms.train.get_metric_fn("accuracy", eval_type="multilabel")


def test_hal_and_runtime_device_functions():
    # MindSpore's hal / runtime: device counts, availability, and waiting for the device.
    assert ms.hal.device_count("CPU") == 1 and ms.hal.is_available("cpu")
    ms.hal.synchronize()
    ms.runtime.synchronize()
    gpus = ms.hal.device_count("GPU")  # 0 without a GPU (or without the CUDA backend)
    assert ms.hal.is_available("GPU") == (gpus > 0) and ms.runtime.device_count("GPU") == gpus
    assert ms.hal.device_count() == 1  # the current target: the CPU
    with pytest.raises(ValueError, match="device_target"):
        ms.hal.device_count("TPU")
