"""GRAPH_MODE from Python: a Python construct traced through the C++ tracer and compiled; the
results equal PYNATIVE_MODE's; jit functions; untraceable code names the user's line."""
import numpy as np
import pytest

import spore as ms
from spore import nn, ops


class MLP(nn.Cell):
    def __init__(self, depth=2):
        super().__init__()
        self.layers = nn.CellList([nn.Dense(4, 4) for _ in range(depth)])
        self.out = nn.Dense(4, 2)
        self.depth = depth

    def construct(self, x):
        for layer in self.layers:  # Python control flow: unrolled at trace time
            x = ops.relu(layer(x))
        if self.depth > 1:  # a Python value: fine
            x = x * 2.0
        return self.out(x), x.sum()


def data():
    rng = np.random.default_rng(3)
    return ms.Tensor(rng.standard_normal((8, 4)).astype(np.float32))


def test_cell_call_compiles_and_matches_pynative():
    ms.set_seed(2)
    net = MLP()
    x = data()
    eager = [t.asnumpy() for t in net(x)]
    ms.set_context(mode=ms.GRAPH_MODE)
    graph = [t.asnumpy() for t in net(x)]
    again = [t.asnumpy() for t in net(x)]  # the cached graph
    for a, b, c in zip(eager, graph, again):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(b, c)
    cache = net._graph
    jf = next(iter(cache._jits.values()))[0]
    assert jf.stats().traces == 1 and jf.stats().cache_hits >= 1
    net(ms.Tensor(np.ones((3, 4), np.float32)))  # a new signature: a second trace
    assert jf.stats().traces == 2


def test_train_one_step_graph_equals_pynative():
    x = data()
    y = ms.Tensor(np.array([0, 1] * 4, np.int32))
    losses = {}
    for mode in (ms.PYNATIVE_MODE, ms.GRAPH_MODE):
        ms.set_context(mode=mode)
        ms.set_seed(4)
        net = MLP()
        loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")

        class WithLoss(nn.Cell):
            def __init__(self, net, fn):
                super().__init__()
                self.net, self.fn = net, fn

            def construct(self, a, b):
                return self.fn(self.net(a)[0], b)

        step = nn.TrainOneStepCell(WithLoss(net, loss_fn), nn.Momentum(net.trainable_params(), 0.1, 0.9))
        losses[mode] = [float(step(x, y).asnumpy()) for _ in range(5)]
    np.testing.assert_allclose(losses[ms.GRAPH_MODE], losses[ms.PYNATIVE_MODE], rtol=1e-5)
    assert losses[ms.GRAPH_MODE][-1] < losses[ms.GRAPH_MODE][0]


def test_value_and_grad_and_jit_train_step_in_graph_mode():
    x = data()
    y = ms.Tensor(np.array([1, 0] * 4, np.int32))
    results = {}
    for mode in (ms.PYNATIVE_MODE, ms.GRAPH_MODE):
        ms.set_context(mode=mode)
        ms.set_seed(9)
        net = MLP(depth=1)
        loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
        opt = nn.Adam(net.trainable_params(), learning_rate=0.01)

        def forward(a, b):
            logits, _ = net(a)
            return loss_fn(logits, b), logits

        grad_fn = ms.value_and_grad(forward, None, opt.parameters, has_aux=True)

        @ms.jit
        def train_step(a, b):
            (loss, _), grads = grad_fn(a, b)
            opt(grads)
            return loss

        step = train_step if mode == ms.GRAPH_MODE else train_step._fn  # PyNative: the plain function
        results[mode] = [float(step(x, y).asnumpy()) for _ in range(4)]
        # value_and_grad alone (compiled by itself in GRAPH_MODE)
        (loss, _), grads = grad_fn(x, y)
        results[mode].append(float(loss.asnumpy()))
        assert [tuple(g.shape) for g in grads] == [tuple(p.shape) for p in opt.parameters]
        assert opt._opt.global_step == 4
    np.testing.assert_allclose(results[ms.GRAPH_MODE], results[ms.PYNATIVE_MODE], rtol=1e-5)


def test_untraceable_code_names_the_line():
    class Branchy(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc = nn.Dense(4, 4)

        def construct(self, x):
            y = self.fc(x)
            if y.sum() > 0:  # data-dependent control flow
                return y
            return -y

    net = Branchy()
    x = data()
    net(x)  # PyNative: fine
    ms.set_context(mode=ms.GRAPH_MODE)
    with pytest.raises(RuntimeError) as e:
        net(x)
    msg = str(e.value)
    assert "Python control flow on a tensor's value" in msg
    assert "test_graph.py" in msg and "if y.sum() > 0:" in msg

    class Reads(nn.Cell):
        def construct(self, x):
            return x * float(x.asnumpy().mean())

    with pytest.raises(RuntimeError, match=r"(?s)asnumpy.*x \* float\(x.asnumpy\(\).mean\(\)\)"):
        Reads()(x)


def test_jit_function_static_args():
    @ms.jit
    def f(x, scale, flag=True):
        y = x * scale
        return (y + 1) if flag else y

    x = data()
    np.testing.assert_allclose(f(x, 3.0).asnumpy(), x.asnumpy() * 3 + 1, rtol=1e-6)
    np.testing.assert_allclose(f(x, 2.0, flag=False).asnumpy(), x.asnumpy() * 2, rtol=1e-6)
    np.testing.assert_allclose(f(x, 3.0).asnumpy(), x.asnumpy() * 3 + 1, rtol=1e-6)


def test_grad_of_a_jit_function_in_pynative():
    # A compiled call records no autograd tape: under a PyNative grad the function runs as written
    # (it used to give zero gradients silently).
    f = ms.jit(lambda a: (a * a + 1).sum())
    x = ms.Tensor(np.arange(4, dtype=np.float32))
    np.testing.assert_allclose(ms.grad(f)(x).asnumpy(), [0, 2, 4, 6])
    np.testing.assert_allclose(f(x).asnumpy(), 18)  # and compiled again outside the grad
    ms.set_context(mode=ms.GRAPH_MODE)
    np.testing.assert_allclose(ms.grad(f)(x).asnumpy(), [0, 2, 4, 6])


def test_cpp_errors_while_tracing_name_the_line():
    class Wrong(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc = nn.Dense(4, 3)

        def construct(self, x):
            y = self.fc(x)
            return ops.matmul(y, y)  # (8, 3) @ (8, 3): a shape error

    ms.set_context(mode=ms.GRAPH_MODE)
    with pytest.raises(ValueError) as e:
        Wrong()(data())
    assert "matmul" in str(e.value) and "return ops.matmul(y, y)" in str(e.value)
    assert "while tracing for GRAPH_MODE" in str(e.value)
    # the same cell inside Model / TrainOneStepCell (traced by C++)
    net = Wrong()
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.SGD(net.trainable_params(), 0.1))
    with pytest.raises(ValueError, match=r"return ops.matmul\(y, y\)"):
        step(data(), ms.Tensor(np.zeros((8, 8), np.float32)))


def test_python_train_cell_with_grad_operation_both_modes():
    """A MindSpore-style TrainOneStepCell written in Python (GradOperation + optimizer in
    construct): GRAPH_MODE compiles the whole step, with the same results as PYNATIVE_MODE."""

    class MyTrainStep(nn.Cell):
        def __init__(self, network, optimizer):
            super().__init__(auto_prefix=False)
            self.network = network
            self.optimizer = optimizer
            self.weights = optimizer.parameters
            self.grad = ops.GradOperation(get_by_list=True)

        def construct(self, x, y):
            loss = self.network(x, y)
            grads = self.grad(self.network, self.weights)(x, y)
            self.optimizer(grads)
            return loss

    x = data()
    y = ms.Tensor(np.array([0, 1] * 4, np.int32))
    losses = {}
    for mode in (ms.PYNATIVE_MODE, ms.GRAPH_MODE):
        ms.set_context(mode=mode)
        ms.set_seed(21)
        net = nn.Dense(4, 2)
        opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
        step = MyTrainStep(nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")),
                           opt)
        losses[mode] = [float(step(x, y).asnumpy()) for _ in range(5)]
        assert opt._opt.global_step == 5
    np.testing.assert_allclose(losses[ms.GRAPH_MODE], losses[ms.PYNATIVE_MODE], rtol=1e-5)
    assert losses[ms.GRAPH_MODE][-1] < losses[ms.GRAPH_MODE][0]


def test_recompute_python_cells_train_the_same_in_graph_mode():
    """Cell.recompute() on Python-defined blocks: GRAPH_MODE losses equal those without it, and the
    compiled step has the recomputed copies (more nodes)."""
    import numpy as np
    import spore as ms
    from spore import nn

    class Block(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Dense(32, 64), nn.Dense(64, 32)
            self.act = nn.Tanh()

        def construct(self, x):
            return x + self.fc2(self.act(self.fc1(x)))

    class Net(nn.Cell):
        def __init__(self, recompute):
            super().__init__()
            self.b1, self.b2, self.head = Block(), Block(), nn.Dense(32, 4)
            if recompute:
                self.b1.recompute()
                self.b2.recompute()

        def construct(self, x):
            return self.head(self.b2(self.b1(x)))

    rng = np.random.default_rng(0)
    x = ms.Tensor(rng.standard_normal((16, 32)).astype(np.float32))
    y = ms.Tensor(rng.integers(0, 4, 16).astype(np.int32))
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        results = []
        for rc in (False, True):
            ms.set_seed(3)
            net = Net(rc)
            loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
            step = nn.TrainOneStepCell(nn.WithLossCell(net, loss), nn.Momentum(net.trainable_params(), 0.1, 0.9))
            losses = [float(step(x, y).asnumpy()) for _ in range(3)]
            results.append((losses, step._cpp.jit_stats().nodes))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    (plain, n_plain), (rc, n_rc) = results
    np.testing.assert_allclose(rc, plain, rtol=1e-6)
    assert n_rc > n_plain
