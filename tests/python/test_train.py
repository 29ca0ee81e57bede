"""Model.train / eval / predict with callbacks (built-in and Python subclasses), checkpoints and
amp, on generated data."""
import os

import numpy as np
import pytest

import spore as ms
from spore import nn
from blob_task import Classifier, blobs


class Recorder(ms.train.Callback):
    def __init__(self):
        self.events, self.losses, self.epochs = [], [], []

    def on_train_begin(self, run_context):
        self.events.append("begin")

    def on_train_epoch_begin(self, run_context):
        self.events.append("epoch_begin")

    def on_train_step_end(self, run_context):
        cb = run_context.original_args()
        self.losses.append(float(cb.net_outputs.asnumpy()))
        assert cb.batch_num == 8 and 1 <= cb.cur_step_num <= 16

    def epoch_end(self, run_context):  # the 1.x name works too
        cb = run_context.original_args()
        self.epochs.append(cb.cur_epoch_num)
        # Where the epoch's time went (Spore's fields): shares of its training time.
        assert 0 <= cb.epoch_data_wait <= cb.epoch_train_time
        assert 0 <= cb.epoch_device_idle <= cb.epoch_train_time <= cb.epoch_elapsed

    def on_train_end(self, run_context):
        self.events.append("end")


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_model_train_eval_predict(mode, capfd):
    ms.set_context(mode=mode)
    x, y = blobs()
    train = ms.dataset.NumpySlicesDataset({"x": x, "y": y}, shuffle=True).batch(32)
    net = Classifier()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = ms.train.Model(net, loss, nn.Momentum(net.trainable_params(), 0.05, 0.9), metrics={"accuracy", "loss"})
    rec = Recorder()
    model.train(2, train, callbacks=[ms.train.LossMonitor(4), rec])
    assert rec.events == ["begin", "epoch_begin", "epoch_begin", "end"]
    assert rec.epochs == [1, 2] and len(rec.losses) == 16
    out = capfd.readouterr().out
    assert "epoch: 1 step: 4, loss is" in out and "epoch: 2 step: 8, loss is" in out
    res = model.eval(ms.dataset.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(64))
    assert res["accuracy"] > 0.9 and res["loss"] < rec.losses[0]
    pred = model.predict(ms.Tensor(x[:5]))
    assert tuple(pred.shape) == (5, 3)
    np.testing.assert_allclose(pred.asnumpy(), net(ms.Tensor(x[:5])).asnumpy(), rtol=1e-5, atol=1e-6)


def test_request_stop_and_custom_metric():
    class StopAt3(ms.train.Callback):
        def on_train_step_end(self, run_context):
            if run_context.original_args().cur_step_num == 3:
                run_context.request_stop()

    class MeanPred(ms.train.Metric):
        def clear(self):
            self.s, self.n = 0.0, 0

        def update(self, logits, labels):
            self.s += float(logits.asnumpy().mean()) * logits.shape[0]
            self.n += logits.shape[0]

        def eval(self):
            return self.s / self.n

    x, y = blobs(64)
    data = ms.dataset.NumpySlicesDataset((x, y), ["x", "y"], shuffle=False).batch(8)
    net = Classifier()
    rec = Recorder()
    model = ms.train.Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                           nn.SGD(net.trainable_params(), 0.01), metrics={"mp": MeanPred()})
    model.train(5, data, callbacks=[StopAt3(), rec])
    assert len(rec.losses) == 3
    res = model.eval(data)
    expect = float(net(ms.Tensor(x)).asnumpy().mean())
    assert abs(res["mp"] - expect) < 1e-5


def test_callback_exception_propagates():
    class Boom(ms.train.Callback):
        def on_train_step_end(self, run_context):
            raise KeyError("boom from a callback")

    x, y = blobs(32)
    net = Classifier()
    model = ms.train.Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                           nn.SGD(net.trainable_params(), 0.01))
    with pytest.raises(KeyError, match="boom from a callback"):
        model.train(1, ms.dataset.NumpySlicesDataset((x, y), ["x", "y"]).batch(8), callbacks=[Boom()])


def test_checkpoints_roundtrip(tmp_path):
    net = Classifier()
    path = str(tmp_path / "net.ckpt")
    ms.save_checkpoint(net, path)
    params = ms.load_checkpoint(path)
    assert sorted(params) == sorted(n for n, _ in net.parameters_and_names())
    net2 = Classifier()
    not_loaded, unused = ms.load_param_into_net(net2, params)
    assert not_loaded == [] and unused == []
    for (n1, p1), (n2, p2) in zip(net.parameters_and_names(), net2.parameters_and_names()):
        np.testing.assert_array_equal(p1.asnumpy(), p2.asnumpy())
    ms.save_checkpoint([{"name": "a", "data": ms.Tensor(np.arange(3, dtype=np.float32))}], str(tmp_path / "a.ckpt"))
    assert ms.load_checkpoint(str(tmp_path / "a.ckpt"))["a"].asnumpy().tolist() == [0, 1, 2]
    with pytest.raises(OSError):
        ms.load_checkpoint(str(tmp_path / "missing.ckpt"))


def test_model_checkpoint_callback(tmp_path):
    x, y = blobs(64)
    net = Classifier()
    model = ms.train.Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                           nn.Momentum(net.trainable_params(), 0.01, 0.9))
    cfg = ms.train.CheckpointConfig(save_checkpoint_steps=4, keep_checkpoint_max=2)
    ck = ms.train.ModelCheckpoint(prefix="clf", directory=str(tmp_path), config=cfg)
    model.train(2, ms.dataset.NumpySlicesDataset((x, y), ["x", "y"]).batch(16), callbacks=[ck])
    files = sorted(os.listdir(tmp_path))
    assert len(files) == 2 and all(f.startswith("clf-") for f in files)
    saved = ms.load_checkpoint(ck.latest_ckpt_file_name)
    np.testing.assert_array_equal(saved["fc1.weight"].asnumpy(), net.fc1.weight.asnumpy())
    assert "moments.fc1.weight" in saved


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_amp_build_train_network_o2(mode):
    ms.set_context(mode=mode)
    x, y = blobs(64)
    net = Classifier()
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    step = ms.amp.build_train_network(net, opt, loss, level="O2",
                                      loss_scale_manager=ms.FixedLossScaleManager(1024.0))
    assert isinstance(step, nn.Cell)
    first = None
    for _ in range(20):
        out = step(ms.Tensor(x), ms.Tensor(y))
        loss_v, overflow, scale = out
        first = first if first is not None else float(loss_v.asnumpy())
        assert not bool(overflow) and float(scale.asnumpy()) == 1024.0
    assert float(loss_v.asnumpy()) < first
    assert net.fc1.weight.dtype == ms.float32  # master weights stay float32
    # a FixedLossScaleManager that does not drop overflowed steps: a TrainOneStepCell (loss only)
    plain = ms.amp.build_train_network(net, opt, loss, level="O2",
                                       loss_scale_manager=ms.FixedLossScaleManager(128.0, False))
    assert plain(ms.Tensor(x), ms.Tensor(y)).shape == ()


def test_mindspore_ckpt_format(tmp_path):
    """format="ckpt" writes MindSpore's protobuf .ckpt (first byte 0x0A); load_checkpoint reads it by content."""
    path = str(tmp_path / "ms.ckpt")
    ms.save_checkpoint([{"name": "a", "data": ms.Tensor(np.arange(3, dtype=np.float32))}], path, format="ckpt")
    with open(path, "rb") as f:
        assert f.read(1) == b"\x0a"
    assert ms.load_checkpoint(path)["a"].asnumpy().tolist() == [0, 1, 2]
    with pytest.raises(ValueError):
        ms.save_checkpoint([{"name": "a", "data": ms.Tensor(np.zeros(1, np.float32))}], path, format="npz")


def test_group_lr_momentum_and_sum_accumulation():
    """set_group_lr / set_momentum during training, and summed accumulation whose count changes."""
    net = nn.Dense(2, 3)
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    assert opt.group_lr(0) == pytest.approx(0.1)
    opt.set_group_lr(0, 0.05)
    opt.set_momentum(0.8)
    assert opt.group_lr(0) == pytest.approx(0.05)
    assert opt.momentum_value == pytest.approx(0.8)
    with pytest.raises(IndexError, match="group 4 does not exist"):
        opt.set_group_lr(4, 0.1)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True)),
                               opt)
    step.set_grad_accumulation(2, "sum")
    x = ms.Tensor(np.ones((4, 2), np.float32))
    y = ms.Tensor(np.zeros((4,), np.int32))
    step(x, y)
    step.set_grad_accumulation(3, "sum")  # mid-way: allowed for a sum
    step(x, y)
    step(x, y)
    assert opt.global_step == 1
    with pytest.raises(ValueError, match="mode 'max'"):
        step.set_grad_accumulation(2, "max")
