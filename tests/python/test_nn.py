"""nn.Cell subclassed in Python, layers, losses, optimizers, value_and_grad and TrainOneStepCell in
PYNATIVE_MODE, checked against numpy."""
import numpy as np
import pytest

import spore as ms
from spore import nn, ops
from spore.common.initializer import Normal


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(4, 8)
        self.relu = nn.ReLU()
        self.fc2 = nn.Dense(8, 3, has_bias=False)
        self.scale = ms.Parameter(ms.Tensor(np.array([2.0], np.float32)), name="scale")
        self.offset = ms.Tensor(np.zeros(3, np.float32))  # a plain tensor: not a parameter

    def construct(self, x):
        return self.fc2(self.relu(self.fc1(x))) * self.scale + self.offset


def np_forward(net, x):
    p = {n: v.asnumpy() for n, v in net.parameters_and_names()}
    h = np.maximum(x @ p["fc1.weight"].T + p["fc1.bias"], 0)
    return (h @ p["fc2.weight"].T) * p["scale"]


def test_registration_and_names():
    net = Net()
    names = [n for n, _ in net.parameters_and_names()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "fc2.weight"]
    assert [p.name for p in net.trainable_params()] == names
    assert net.scale is net.trainable_params()[0]  # the Parameter objects the user made come back
    assert net.fc1.weight.shape == (8, 4)
    assert isinstance(net.fc1.weight, ms.Parameter)
    assert len(list(net.get_parameters())) == 4
    assert [n for n, _ in net.cells_and_names()] == ["", "fc1", "relu", "fc2"]
    assert "Net<" in repr(net) and "(fc1): Dense<" in repr(net)
    net.scale.requires_grad = False
    assert [p.name for p in net.trainable_params()] == names[1:]


def test_forward_matches_numpy():
    net = Net()
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(net(ms.Tensor(x)).asnumpy(), np_forward(net, x), rtol=1e-5, atol=1e-6)


def test_set_train_and_dropout():
    class D(nn.Cell):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(p=0.5)

        def construct(self, x):
            return self.drop(x)

    d = D()
    x = ms.Tensor(np.ones((100, 100), np.float32))
    assert d.training
    y = d(x).asnumpy()
    assert 0.3 < (y == 0).mean() < 0.7 and set(np.unique(y)) <= {0.0, 2.0}
    d.set_train(False)
    assert not d.training and not d.drop.training
    np.testing.assert_array_equal(d(x).asnumpy(), x.asnumpy())


def test_super_init_required():
    class Bad(nn.Cell):
        def __init__(self):
            self.fc = nn.Dense(2, 2)

    with pytest.raises(AttributeError, match="super\\(\\).__init__"):
        Bad()


def test_conv_pool_batchnorm_layers():
    ms.set_seed(3)
    conv = nn.Conv2d(2, 4, 3, pad_mode="pad", padding=1, has_bias=True)
    x = np.random.default_rng(2).standard_normal((2, 2, 5, 5)).astype(np.float32)
    y = conv(ms.Tensor(x)).asnumpy()
    w, b = conv.weight.asnumpy(), conv.bias.asnumpy()
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((2, 4, 5, 5), np.float32)
    for i in range(5):
        for j in range(5):
            ref[:, :, i, j] = np.einsum("nchw,ochw->no", xp[:, :, i:i + 3, j:j + 3], w) + b
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
    assert nn.Conv2d(2, 4, 3)(ms.Tensor(x)).shape == (2, 4, 5, 5)  # pad_mode "same" by default
    pooled = nn.MaxPool2d(kernel_size=2, stride=2)(ms.Tensor(x[:, :, :4, :4])).asnumpy()
    np.testing.assert_array_equal(pooled, x[:, :, :4, :4].reshape(2, 2, 2, 2, 2, 2).max(axis=(3, 5)))
    bn = nn.BatchNorm2d(2)
    out = bn(ms.Tensor(x)).asnumpy()
    ref = (x - x.mean((0, 2, 3), keepdims=True)) / np.sqrt(x.var((0, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(bn.moving_mean.asnumpy(), 0.1 * x.mean((0, 2, 3)), rtol=1e-4, atol=1e-6)
    # MindSpore lists the moving statistics as Parameters that are not trained.
    assert [n for n, _ in bn.parameters_and_names()] == ["gamma", "beta", "moving_mean", "moving_variance"]
    assert [p.name for p in bn.trainable_params()] == ["gamma", "beta"]
    assert [p.name for p in bn.untrainable_params()] == ["moving_mean", "moving_variance"]


def test_losses_match_numpy():
    rng = np.random.default_rng(4)
    logits = rng.standard_normal((6, 5)).astype(np.float32)
    labels = rng.integers(0, 5, 6).astype(np.int32)
    lsm = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    ce = -lsm[np.arange(6), labels]
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    np.testing.assert_allclose(loss(ms.Tensor(logits), ms.Tensor(labels)).asnumpy(), ce.mean(), rtol=1e-5)
    none = nn.SoftmaxCrossEntropyWithLogits(sparse=True)
    np.testing.assert_allclose(none(ms.Tensor(logits), ms.Tensor(labels)).asnumpy(), ce, rtol=1e-5)
    y = rng.standard_normal((6, 5)).astype(np.float32)
    np.testing.assert_allclose(nn.MSELoss()(ms.Tensor(logits), ms.Tensor(y)).asnumpy(), ((logits - y) ** 2).mean(),
                               rtol=1e-5)
    np.testing.assert_allclose(nn.L1Loss(reduction="sum")(ms.Tensor(logits), ms.Tensor(y)).asnumpy(),
                               np.abs(logits - y).sum(), rtol=1e-5)

    class MyLoss(nn.LossBase):
        def construct(self, x, t):
            return self.get_loss(ops.abs(x - t))

    np.testing.assert_allclose(MyLoss()(ms.Tensor(logits), ms.Tensor(y)).asnumpy(), np.abs(logits - y).mean(),
                               rtol=1e-5)


def test_value_and_grad_matches_analytic():
    w = ms.Parameter(ms.Tensor(np.array([1.0, -2.0, 3.0], np.float32)), name="w")
    x = ms.Tensor(np.array([0.5, 1.5, -1.0], np.float32))

    def f(x):
        return ((x * w) ** 2).sum()

    val, (gx, gw) = ms.value_and_grad(f, grad_position=0, weights=[w])(x)
    xv, wv = x.asnumpy(), w.asnumpy()
    np.testing.assert_allclose(val.asnumpy(), ((xv * wv) ** 2).sum(), rtol=1e-6)
    np.testing.assert_allclose(gx.asnumpy(), 2 * xv * wv * wv, rtol=1e-6)
    np.testing.assert_allclose(gw[0].asnumpy(), 2 * xv * xv * wv, rtol=1e-6)
    g = ops.grad(f)(x)  # grad_position=0 only
    np.testing.assert_allclose(g.asnumpy(), 2 * xv * wv * wv, rtol=1e-6)

    def aux(x):
        return (x * w).sum(), x * 2

    (v, a), g = ms.value_and_grad(aux, None, [w], has_aux=True)(x)
    np.testing.assert_allclose(g[0].asnumpy(), xv)
    np.testing.assert_allclose(a.asnumpy(), 2 * xv)
    assert not w.requires_grad or w.requires_grad  # restored, whatever it was
    go = ops.GradOperation(get_by_list=True)(lambda x: (x * w).sum(), ms.ParameterTuple([w]))(x)
    np.testing.assert_allclose(go[0].asnumpy(), xv)


def test_momentum_update_matches_formula():
    p = ms.Parameter(ms.Tensor(np.array([1.0, 2.0], np.float32)), name="p")
    opt = nn.Momentum([p], learning_rate=0.1, momentum=0.9)
    g = ms.Tensor(np.array([0.5, -1.0], np.float32))
    opt((g,))
    opt((g,))
    accum = 0.5 * np.array([1, -2], np.float32)
    ref = np.array([1.0, 2.0]) - 0.1 * accum
    accum = 0.9 * accum + accum
    ref = ref - 0.1 * accum
    np.testing.assert_allclose(p.asnumpy(), ref, rtol=1e-6)
    assert [n for n, _ in opt.state()] == ["moments.p"]


def test_weight_decay_skips_beta_gamma():
    net = nn.SequentialCell([nn.Dense(3, 3), nn.BatchNorm1d(3)])
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9, weight_decay=0.01)
    assert [p.name for p in opt.parameters] == [p.name for p in net.trainable_params()]


def test_custom_training_loop_pynative():
    ms.set_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 4)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32) + 0.5).astype(np.float32)
    net = nn.Dense(4, 1)
    loss_fn = nn.MSELoss()
    opt = nn.SGD(net.trainable_params(), learning_rate=0.1)

    def forward(data, label):
        return loss_fn(net(data), label)

    grad_fn = ms.value_and_grad(forward, None, opt.parameters)
    losses = []
    for _ in range(50):
        loss, grads = grad_fn(ms.Tensor(x), ms.Tensor(y))
        opt(grads)
        losses.append(loss.asnumpy().item())
    assert losses[-1] < 1e-3 * losses[0]


def test_train_one_step_cell_matches_manual_step():
    ms.set_seed(5)
    net1 = nn.Dense(3, 2)
    ms.set_seed(5)
    net2 = nn.Dense(3, 2)
    x = ms.Tensor(np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32))
    y = ms.Tensor(np.array([0, 1, 1, 0], np.int32))
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    step = nn.TrainOneStepCell(nn.WithLossCell(net1, loss), nn.Momentum(net1.trainable_params(), 0.1, 0.9))
    opt2 = nn.Momentum(net2.trainable_params(), 0.1, 0.9)
    grad_fn = ms.value_and_grad(lambda a, b: loss(net2(a), b), None, opt2.parameters)
    for _ in range(3):
        l1 = step(x, y)
        l2, g = grad_fn(x, y)
        opt2(g)
        np.testing.assert_allclose(l1.asnumpy(), l2.asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(net1.weight.asnumpy(), net2.weight.asnumpy(), rtol=1e-6)


def test_python_cell_inside_cpp_wrapper_keeps_working_after_gc():
    import gc

    class Tiny(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc = nn.Dense(2, 2, weight_init=Normal(0.1))

        def construct(self, x):
            return self.fc(x)

    wl = nn.WithLossCell(Tiny(), nn.MSELoss())  # the only reference to Tiny is the wrapper's
    gc.collect()
    out = wl(ms.Tensor(np.ones((1, 2), np.float32)), ms.Tensor(np.zeros((1, 2), np.float32)))
    assert out.shape == ()


def test_to_float_and_parameter_set_data():
    net = Net()
    net.fc1.to_float(ms.float16)
    out = net(ms.Tensor(np.ones((2, 4), np.float32)))
    assert out.dtype == ms.float32  # fc2 (float32) casts back
    w = net.fc2.weight
    w.set_data(ms.Tensor(np.zeros((3, 8), np.float32)))
    np.testing.assert_array_equal(net.fc2.weight.asnumpy(), 0)
    with pytest.raises(ValueError, match="expected shape"):
        w.set_data(np.zeros((2, 2), np.float32))


def test_overriding_construct_of_a_builtin_layer_is_refused():
    class MyDense(nn.Dense):
        def construct(self, x):
            return x

    with pytest.raises(TypeError, match="subclass nn.Cell and hold the layer as an attribute"):
        MyDense(2, 2)

    class Wider(nn.Dense):  # subclassing without a construct is fine
        def __init__(self):
            super().__init__(2, 4)

    assert Wider()(ms.Tensor(np.ones((1, 2), np.float32))).shape == (1, 4)
