"""nn.RNN / nn.LSTM / nn.GRU, their cells nn.RNNCell / nn.LSTMCell / nn.GRUCell, and nn.Adagrad / nn.Lamb
from Python with MindSpore's signatures:
results and gradients equal to PyTorch's for the same weights (skipped when torch is absent; the
C++ suite checks every configuration against it, tests/nn/rnn_test.cpp), the (output, (h_n, c_n))
structure, hx and seq_length, parameter names, GRAPH_MODE equal to PYNATIVE_MODE, and the
arguments that are refused with a clear message."""
import numpy as np
import pytest

import spore as ms
from spore import nn


def _torch():
    return pytest.importorskip("torch")


def _copy_from_torch(ms_layer, torch_layer):
    params = dict(ms_layer.parameters_and_names())
    for name, p in torch_layer.named_parameters():
        params[name].set_data(ms.Tensor(p.detach().numpy().astype(np.float32)))


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_outputs_and_gradients_match_pytorch(kind):
    torch = _torch()
    torch.manual_seed(0)
    tl = getattr(torch.nn, kind)(3, 5, num_layers=2, batch_first=True, bidirectional=True)
    ml = getattr(nn, kind)(3, 5, num_layers=2, batch_first=True, bidirectional=True)
    _copy_from_torch(ml, tl)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 3)).astype(np.float32)
    h0 = (0.5 * rng.standard_normal((4, 2, 5))).astype(np.float32)
    c0 = (0.5 * rng.standard_normal((4, 2, 5))).astype(np.float32)

    tx = torch.tensor(x, requires_grad=True)
    hx_t = (torch.tensor(h0), torch.tensor(c0)) if kind == "LSTM" else torch.tensor(h0)
    out_t, st_t = tl(tx, hx_t)
    h_t = st_t[0] if kind == "LSTM" else st_t
    (out_t.sum() + (h_t * 2).sum()).backward()

    hx = (ms.Tensor(h0), ms.Tensor(c0)) if kind == "LSTM" else ms.Tensor(h0)
    out, st = ml(ms.Tensor(x), hx)
    h_n = st[0] if kind == "LSTM" else st
    if kind == "LSTM":
        assert isinstance(st, tuple) and len(st) == 2
        np.testing.assert_allclose(st[1].asnumpy(), st_t[1].detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(out.asnumpy(), out_t.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(h_n.asnumpy(), h_t.detach().numpy(), atol=1e-5)

    params = ml.trainable_params()

    def f(a):
        o, s = ml(a, hx)
        h = s[0] if kind == "LSTM" else s
        return o.sum() + (h * 2).sum()

    _, (gx, gw) = ms.value_and_grad(f, grad_position=0, weights=params)(ms.Tensor(x))
    np.testing.assert_allclose(gx.asnumpy(), tx.grad.numpy(), atol=1e-5)
    torch_grads = dict((n, p.grad.numpy()) for n, p in tl.named_parameters())
    for p, g in zip(params, gw):
        np.testing.assert_allclose(g.asnumpy(), torch_grads[p.name], atol=1e-5, err_msg=p.name)


def test_signatures_structure_and_names():
    lstm = nn.LSTM(4, 6, 2, True, False, 0.0, True)  # MindSpore's positional order
    names = [n for n, _ in lstm.parameters_and_names()]
    assert names[:4] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    assert "weight_hh_l1_reverse" in names and len(names) == 16
    x = ms.Tensor(np.ones((5, 3, 4), np.float32))
    out, (h, c) = lstm(x)
    assert out.shape == (5, 3, 12) and h.shape == (4, 3, 6) and c.shape == (4, 3, 6)
    out, h = nn.GRU(4, 6, has_bias=False)(x)
    assert out.shape == (5, 3, 6) and h.shape == (1, 3, 6)
    assert len(nn.GRU(4, 6, has_bias=False).trainable_params()) == 2
    out, h = nn.RNN(4, 6, nonlinearity="relu", batch_first=True)(ms.Tensor(np.ones((3, 5, 4), np.float32)))
    assert out.shape == (3, 5, 6) and float(out.asnumpy().min()) >= 0
    # seq_length: the padding outputs are zero, the state stops at each sample's last step.
    rnn = nn.GRU(4, 6)
    xs = np.random.default_rng(0).standard_normal((5, 2, 4)).astype(np.float32)
    out, h = rnn(ms.Tensor(xs), seq_length=ms.Tensor(np.array([2, 5], np.int32)))
    assert np.all(out.asnumpy()[2:, 0] == 0)
    short_out, short_h = rnn(ms.Tensor(xs[:2, :1].copy()))
    np.testing.assert_allclose(h.asnumpy()[:, 0], short_h.asnumpy()[:, 0], atol=1e-6)
    # dtype: float64 layers take float64 input
    out64, _ = nn.LSTM(4, 3, dtype=ms.float64)(ms.Tensor(xs.astype(np.float64)))
    assert out64.dtype == ms.float64


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="'nonlinearity' must be 'tanh' or 'relu'"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(TypeError, match="unexpected keyword argument 'nonlinearity'"):
        nn.LSTM(3, 4, nonlinearity="relu")
    with pytest.raises(ValueError, match="'dropout' .* must be in \\[0, 1\\)"):
        nn.GRU(3, 4, dropout=1.5)
    with pytest.raises(TypeError, match="'num_layers' must be an int"):
        nn.LSTM(3, 4, num_layers=2.0)
    with pytest.raises(TypeError, match="'batch_first' must be a bool"):
        nn.LSTM(3, 4, batch_first=1)
    x = ms.Tensor(np.ones((5, 2, 3), np.float32))
    with pytest.raises(TypeError, match="'hx' must be a tuple \\(h0, c0\\)"):
        nn.LSTM(3, 4)(x, ms.Tensor(np.zeros((1, 2, 4), np.float32)))
    with pytest.raises(TypeError, match="the \\(h0, c0\\) pair is LSTM's"):
        nn.GRU(3, 4)(x, (ms.Tensor(np.zeros((1, 2, 4), np.float32)),) * 2)
    with pytest.raises(ValueError, match="expected input \\(T, N, input_size\\) with input_size 4"):
        nn.GRU(4, 4)(x)
    with pytest.raises(ValueError, match="seq_length values must be whole numbers in \\[0, 5\\]"):
        nn.GRU(3, 4)(x, seq_length=ms.Tensor(np.array([6, 1], np.int32)))
    p = ms.Parameter(ms.Tensor(np.ones(2, np.float32)), name="p")
    with pytest.raises(TypeError, match="'update_slots' must be a bool"):
        nn.Adagrad([p], update_slots=1)
    with pytest.raises(ValueError, match="accum .* must be >= 0"):
        nn.Adagrad([p], accum=-0.1)
    with pytest.raises(ValueError, match="beta1 must be in \\(0, 1\\)"):
        nn.Lamb([p], 0.1, beta1=1.0)


def test_adagrad_and_lamb_formulas():
    g = np.array([0.5, -1.0, 0.25], np.float64)
    p = ms.Parameter(ms.Tensor(np.array([1.0, -2.0, 0.5])), name="w")
    opt = nn.Adagrad([p], accum=0.1, learning_rate=0.1, weight_decay=0.01)
    w, acc = np.array([1.0, -2.0, 0.5]), np.full(3, 0.1)
    for _ in range(3):
        opt((ms.Tensor(g),))
        gi = g + 0.01 * w
        acc += gi * gi
        w = w - 0.1 * gi / np.sqrt(acc)
    np.testing.assert_allclose(p.asnumpy(), w, rtol=1e-13)
    assert [n for n, _ in opt.state()] == ["accum.w"]

    # Lamb without groups: "gamma" is not decayed but its trust ratio uses weight_decay (MindSpore).
    w0, g0 = np.array([1.0, -2.0, 0.5]), np.array([0.3, 0.2])
    pw = ms.Parameter(ms.Tensor(w0.copy()), name="fc.weight")
    pg = ms.Parameter(ms.Tensor(g0.copy()), name="ln.gamma")
    lamb = nn.Lamb([pw, pg], learning_rate=0.01, weight_decay=0.1)

    def ref(p, grad, m, v, t, wd, trust_wd, lr=0.01, b1=0.9, b2=0.999, eps=1e-6):
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad * grad
        mh, vh = m / (1 - b1 ** t), v / (1 - b2 ** t)
        r = np.linalg.norm(mh / np.sqrt(vh + eps) + trust_wd * p)
        wn, gn = np.linalg.norm(p), np.linalg.norm(grad)
        trust = np.clip(wn / r if wn > 0 and gn > 0 else 1.0, 0, 10)
        return p - trust * lr * (mh / (np.sqrt(vh) + eps) + wd * p), m, v

    rw, rg = w0.copy(), g0.copy()
    mw = vw = np.zeros(3)
    mg = vg = np.zeros(2)
    rng = np.random.default_rng(3)
    for t in range(1, 4):
        gw, gg = rng.standard_normal(3), rng.standard_normal(2)
        lamb((ms.Tensor(gw), ms.Tensor(gg)))
        rw, mw, vw = ref(rw, gw, mw, vw, t, 0.1, 0.1)
        rg, mg, vg = ref(rg, gg, mg, vg, t, 0.0, 0.1)
    np.testing.assert_allclose(pw.asnumpy(), rw, rtol=1e-12)
    np.testing.assert_allclose(pg.asnumpy(), rg, rtol=1e-12)
    assert [n for n, _ in lamb.state()] == ["lamb_m.fc.weight", "lamb_m.ln.gamma", "lamb_v.fc.weight",
                                            "lamb_v.ln.gamma"]


class Forecaster(nn.Cell):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(2, 8, batch_first=True)
        self.head = nn.Dense(8, 1)

    def construct(self, x):
        out, (h, c) = self.lstm(x)
        return self.head(h[-1])


@pytest.mark.parametrize("make_opt", [lambda ps: nn.Adagrad(ps, learning_rate=0.05),
                                      lambda ps: nn.Lamb(ps, learning_rate=0.01, weight_decay=0.01)],
                         ids=["Adagrad", "Lamb"])
def test_graph_mode_train_step_equals_pynative(make_opt):
    rng = np.random.default_rng(2)
    x = ms.Tensor(rng.standard_normal((4, 6, 2)).astype(np.float32))
    y = ms.Tensor(rng.standard_normal((4, 1)).astype(np.float32))
    losses = {}
    for mode in (ms.PYNATIVE_MODE, ms.GRAPH_MODE):
        ms.set_context(mode=mode)
        ms.set_seed(4)
        net = Forecaster()
        step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), make_opt(net.trainable_params()))
        losses[mode] = [float(step(x, y).asnumpy()) for _ in range(6)]
    np.testing.assert_allclose(losses[ms.GRAPH_MODE], losses[ms.PYNATIVE_MODE], rtol=1e-5)
    assert losses[ms.GRAPH_MODE][-1] < losses[ms.GRAPH_MODE][0]


def test_mixed_precision_o2_trains():
    # Under amp the ops cast their operands (float16 compute), so the layer's dtype check stands aside.
    ms.set_seed(0)
    net = Forecaster()
    ms.amp.auto_mixed_precision(net, "O2")
    rng = np.random.default_rng(0)
    x = ms.Tensor(rng.random((4, 10, 2)).astype(np.float32))
    y = ms.Tensor(rng.random((4, 1)).astype(np.float32))
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.Adam(net.trainable_params(), 0.01))
    losses = [float(step(x, y).asnumpy()) for _ in range(15)]
    assert net(x).dtype == ms.float16
    assert np.isfinite(losses).all() and losses[-1] < 0.5 * losses[0]


# ---- the cells ------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind,kw", [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}),
                                     ("RNNCell", {"has_bias": False}), ("LSTMCell", {}),
                                     ("LSTMCell", {"has_bias": False}), ("GRUCell", {})],
                         ids=["rnn", "rnn-relu", "rnn-nobias", "lstm", "lstm-nobias", "gru"])
def test_cells_match_pytorch(kind, kw):
    torch = _torch()
    torch.manual_seed(3)
    tkw = {("bias" if k == "has_bias" else k): v for k, v in kw.items()}
    tc = getattr(torch.nn, kind)(3, 5, **tkw)
    mc = getattr(nn, kind)(3, 5, **kw)
    _copy_from_torch(mc, tc)
    rng = np.random.default_rng(4)
    lstm = kind == "LSTMCell"
    x = rng.standard_normal((4, 3)).astype(np.float32)
    h = (0.5 * rng.standard_normal((4, 5))).astype(np.float32)
    c = (0.5 * rng.standard_normal((4, 5))).astype(np.float32)
    r = rng.standard_normal((4, 5)).astype(np.float32)

    tx, th = torch.tensor(x, requires_grad=True), torch.tensor(h, requires_grad=True)
    tcs = torch.tensor(c, requires_grad=True)
    out_t = tc(tx, (th, tcs) if lstm else th)
    h1_t = out_t[0] if lstm else out_t
    loss_t = (h1_t * torch.tensor(r)).sum() + ((out_t[1] ** 2).sum() if lstm else 0)
    loss_t.backward()

    params = mc.trainable_params()
    assert [p.name for p in params] == [n for n, _ in tc.named_parameters()]

    def f(a, b, s):
        out = mc(a, (b, s) if lstm else b)
        h1 = out[0] if lstm else out
        loss = (h1 * ms.Tensor(r)).sum()
        return loss + (out[1] ** 2).sum() if lstm else loss

    out = mc(ms.Tensor(x), (ms.Tensor(h), ms.Tensor(c)) if lstm else ms.Tensor(h))
    np.testing.assert_allclose((out[0] if lstm else out).asnumpy(), h1_t.detach().numpy(), atol=1e-6)
    if lstm:
        np.testing.assert_allclose(out[1].asnumpy(), out_t[1].detach().numpy(), atol=1e-6)
    _, (gi, gw) = ms.value_and_grad(f, grad_position=(0, 1, 2) if lstm else (0, 1), weights=params)(
        ms.Tensor(x), ms.Tensor(h), ms.Tensor(c))
    np.testing.assert_allclose(gi[0].asnumpy(), tx.grad.numpy(), atol=1e-5)
    np.testing.assert_allclose(gi[1].asnumpy(), th.grad.numpy(), atol=1e-5)
    if lstm:
        np.testing.assert_allclose(gi[2].asnumpy(), tcs.grad.numpy(), atol=1e-5)
    torch_grads = dict((n, p.grad.numpy()) for n, p in tc.named_parameters())
    for p, g in zip(params, gw):
        np.testing.assert_allclose(g.asnumpy(), torch_grads[p.name], atol=1e-5, err_msg=p.name)


def test_cell_signatures_and_errors():
    cell = nn.RNNCell(4, 6, True, "relu")  # MindSpore's positional order
    assert [n for n, _ in cell.parameters_and_names()] == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    x = ms.Tensor(np.ones((3, 4), np.float32))
    assert cell(x).shape == (3, 6) and float(cell(x).asnumpy().min()) >= 0
    h, c = nn.LSTMCell(4, 6)(x)  # hx None: zero states
    assert h.shape == (3, 6) and c.shape == (3, 6)
    assert nn.GRUCell(4, 6)(ms.Tensor(np.ones(4, np.float32))).shape == (6,)  # unbatched
    assert len(nn.GRUCell(4, 6, has_bias=False).trainable_params()) == 2
    assert nn.LSTMCell(4, 6, dtype=ms.float64)(ms.Tensor(np.ones((1, 4))))[0].dtype == ms.float64
    with pytest.raises(ValueError, match="'nonlinearity' must be 'tanh' or 'relu'"):
        nn.RNNCell(3, 4, nonlinearity="gelu")
    with pytest.raises(TypeError, match="'has_bias' must be a bool"):
        nn.GRUCell(3, 4, has_bias=1)
    with pytest.raises(TypeError, match="'hidden_size' must be an int"):
        nn.LSTMCell(3, 4.0)
    with pytest.raises(TypeError, match="'hx' must be a tuple \\(h, c\\)"):
        nn.LSTMCell(4, 6)(x, ms.Tensor(np.zeros((3, 6), np.float32)))
    with pytest.raises(TypeError, match="the \\(h, c\\) pair is LSTMCell's"):
        nn.GRUCell(4, 6)(x, (ms.Tensor(np.zeros((3, 6), np.float32)),) * 2)
    with pytest.raises(ValueError, match="expected input \\(batch, input_size\\) or \\(input_size,\\) with "
                                         "input_size 4, got shape \\(5, 3, 4\\); a cell takes one time step"):
        nn.GRUCell(4, 6)(ms.Tensor(np.ones((5, 3, 4), np.float32)))
    with pytest.raises(ValueError, match="expected h of shape \\(batch, hidden_size\\) = \\(3, 6\\)"):
        nn.RNNCell(4, 6)(x, ms.Tensor(np.zeros((2, 6), np.float32)))


class Decoder(nn.Cell):
    """A hand-written loop over the cells, as a seq2seq decoder: the last state -> Dense."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTMCell(2, 8)
        self.gru = nn.GRUCell(8, 8)
        self.rnn = nn.RNNCell(8, 4, nonlinearity="relu")
        self.head = nn.Dense(4, 1)

    def construct(self, x):
        hc, g, r = None, None, None
        for t in range(x.shape[1]):
            hc = self.lstm(x[:, t], hc)
            g = self.gru(hc[0], g)
            r = self.rnn(g, r)
        return self.head(r)


def test_cells_graph_mode_train_step_equals_pynative():
    rng = np.random.default_rng(5)
    x = ms.Tensor(rng.standard_normal((4, 5, 2)).astype(np.float32))
    y = ms.Tensor(rng.standard_normal((4, 1)).astype(np.float32))
    losses = {}
    for mode in (ms.PYNATIVE_MODE, ms.GRAPH_MODE):
        ms.set_context(mode=mode)
        ms.set_seed(6)
        net = Decoder()
        step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.Adam(net.trainable_params(), 0.01))
        losses[mode] = [float(step(x, y).asnumpy()) for _ in range(6)]
    np.testing.assert_allclose(losses[ms.GRAPH_MODE], losses[ms.PYNATIVE_MODE], rtol=1e-5)
    assert losses[ms.GRAPH_MODE][-1] < losses[ms.GRAPH_MODE][0]
