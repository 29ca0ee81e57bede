"""The layers beyond CNNs (MultiheadAttention, the transformer layers, Conv1d, Conv2dTranspose,
GroupNorm, Pad) against PyTorch with the same weights: outputs, input gradients and parameter
gradients; GRAPH_MODE equals PYNATIVE_MODE for each; bad arguments are refused. Skips the PyTorch
parts cleanly when torch is absent. Each comparison prints its largest absolute differences
(pytest -s) as `MAXDIFF <case> out=... grad=...`."""
import numpy as np
import pytest

import spore as ms
from spore import nn

RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def spore_names_to_torch(name):
    # MindSpore's norm parameters are gamma / beta; PyTorch's weight / bias.
    return name.replace(".gamma", ".weight").replace(".beta", ".bias").replace("gamma", "weight").replace(
        "beta", "bias")


class Loss(nn.Cell):
    """sum(layer(*inputs, **kw)[0 or itself] * r): a scalar whose gradients cover every output."""

    def __init__(self, layer, kw, first):
        super().__init__()
        self.layer = layer
        self.kw = kw
        self.first = first

    def construct(self, x, r, *rest):
        out = self.layer(x, *rest, **self.kw)
        if self.first:
            out = out[0]
        return (out * r).sum()


def spore_run(layer, inputs, kw=None, first=False, mode=ms.PYNATIVE_MODE):
    """(output, gradient wrt inputs[0], {param name: gradient}) in the given mode."""
    kw = kw or {}
    ms.set_context(mode=mode)
    try:
        ts = [ms.Tensor(a) for a in inputs]
        out = layer(*ts, **kw)
        out = out[0] if first else out
        r = ms.Tensor(np.cos(np.arange(out.size, dtype=np.float32)).reshape(out.shape))
        loss = Loss(layer, kw, first)
        params = layer.trainable_params()
        _, (gx, gw) = ms.value_and_grad(loss, grad_position=0, weights=params)(ts[0], r, *ts[1:])
        if mode == ms.GRAPH_MODE:  # the forward value through a compiled cell as well
            out = _Fwd(layer, kw, first)(*ts)
        return (out.asnumpy(), gx.asnumpy(), {p.name: g.asnumpy() for p, g in zip(params, gw)}, r.asnumpy())
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


class _Fwd(nn.Cell):
    def __init__(self, layer, kw, first):
        super().__init__()
        self.layer = layer
        self.kw = kw
        self.first = first

    def construct(self, *xs):
        out = self.layer(*xs, **self.kw)
        return out[0] if self.first else out


def torch_run(module, inputs, r, kw=None, first=False):
    torch = pytest.importorskip("torch")
    kw = kw or {}
    module.zero_grad(set_to_none=True)
    ts = [torch.tensor(a, requires_grad=(i == 0)) for i, a in enumerate(inputs)]
    out = module(*ts, **kw)
    out = out[0] if first else out
    (out * torch.tensor(r)).sum().backward()
    grads = {n: p.grad.numpy() for n, p in module.named_parameters()}
    return out.detach().numpy(), ts[0].grad.numpy(), grads


def copy_weights(layer, module, transform=lambda n, a: a):
    torch = pytest.importorskip("torch")
    params = dict(module.named_parameters())
    names = []
    for name, p in layer.parameters_and_names():
        tname = spore_names_to_torch(name)
        assert tname in params, f"{name} -> {tname} not in {sorted(params)}"
        a = transform(name, p.asnumpy())
        with torch.no_grad():
            params[tname].copy_(torch.tensor(a))
        names.append(name)
    assert len(names) == len(params), (names, sorted(params))


def compare(case, layer, module, inputs, kw=None, torch_kw=None, first=False, tol=2e-5,
            weight_grad=lambda n, g: g):
    copy_weights(layer, module)
    out, gx, gw, r = spore_run(layer, inputs, kw, first)
    tout, tgx, tgw = torch_run(module, inputs, r, torch_kw if torch_kw is not None else kw, first)
    d_out = float(np.max(np.abs(out - tout)))
    d_gx = float(np.max(np.abs(gx - tgx)))
    d_gw = max(float(np.max(np.abs(weight_grad(n, g) - tgw[spore_names_to_torch(n)]))) for n, g in gw.items())
    print(f"MAXDIFF {case} out={d_out:.2e} grad_x={d_gx:.2e} grad_w={d_gw:.2e}")
    scale = max(1.0, float(np.max(np.abs(tout))))
    assert d_out <= tol * scale and d_gx <= tol * max(1.0, float(np.max(np.abs(tgx))))
    assert d_gw <= tol * max(1.0, max(float(np.max(np.abs(g))) for g in tgw.values()))
    return out


# ---- PyTorch comparisons ------------------------------------------------------------------------
def test_multihead_attention_matches_torch():
    torch = pytest.importorskip("torch")
    E, H, L, S, N = 8, 2, 3, 5, 2
    q, k, v = rand(L, N, E), rand(S, N, E), rand(S, N, E)
    attn_mask = np.triu(np.ones((L, S), bool), 1)
    kpm = np.zeros((N, S), bool)
    kpm[1, 3:] = True
    for cfg in [dict(), dict(add_bias_kv=True, add_zero_attn=True), dict(kdim=3, vdim=5, has_bias=False),
                dict(batch_first=True)]:
        cfg_t = {("bias" if k_ == "has_bias" else k_): v_ for k_, v_ in cfg.items()}
        layer = nn.MultiheadAttention(E, H, **cfg)
        module = torch.nn.MultiheadAttention(E, H, **cfg_t)
        kk = rand(S, N, cfg.get("kdim", E))
        vv = rand(S, N, cfg.get("vdim", E))
        qq = q
        if cfg.get("batch_first"):
            qq, kk, vv = (a.transpose(1, 0, 2).copy() for a in (qq, kk, vv))
        for masks in [dict(), dict(attn_mask=attn_mask, key_padding_mask=kpm)]:
            kw = {n: ms.Tensor(m) for n, m in masks.items()}
            tkw = {n: torch.tensor(m) for n, m in masks.items()}
            name = f"MultiheadAttention{cfg}{'+masks' if masks else ''}"
            compare(name, layer, module, [qq, kk, vv], kw, tkw, first=True)
            # the weights (per head) too
            tkw["average_attn_weights"] = False
            kw["average_attn_weights"] = False
            copy_weights(layer, module)
            _, w = layer(*(ms.Tensor(a) for a in (qq, kk, vv)), **kw)
            _, tw = module(*(torch.tensor(a) for a in (qq, kk, vv)), **tkw)
            print(f"MAXDIFF {name} weights={np.max(np.abs(w.asnumpy() - tw.detach().numpy())):.2e}")
            np.testing.assert_allclose(w.asnumpy(), tw.detach().numpy(), atol=1e-6)
    # a float mask, unbatched input
    layer = nn.MultiheadAttention(E, H)
    module = torch.nn.MultiheadAttention(E, H)
    fm = np.where(attn_mask, -1e9, 0.5).astype(np.float32)
    compare("MultiheadAttention unbatched+float mask", layer, module, [q[:, 0], k[:, 0], v[:, 0]],
            {"attn_mask": ms.Tensor(fm)}, {"attn_mask": torch.tensor(fm)}, first=True)


@pytest.mark.parametrize("norm_first,activation,batch_first", [(False, "relu", False), (True, "gelu", True)])
def test_transformer_encoder_decoder_match_torch(norm_first, activation, batch_first):
    torch = pytest.importorskip("torch")
    d, h, dff, L, S, N = 8, 2, 16, 4, 5, 2
    kw = dict(dim_feedforward=dff, dropout=0.0, activation=activation, batch_first=batch_first,
              norm_first=norm_first)
    shape_t, shape_m = ((N, L, d), (N, S, d)) if batch_first else ((L, N, d), (S, N, d))
    src, mem = rand(*shape_t), rand(*shape_m)
    kpm = np.zeros((N, L), bool)
    kpm[0, -1] = True
    causal = np.triu(np.ones((L, L), bool), 1)
    tag = f"(norm_first={norm_first}, {activation})"

    layer = nn.TransformerEncoderLayer(d, h, **kw)
    module = torch.nn.TransformerEncoderLayer(d, h, **kw)
    compare(f"TransformerEncoderLayer{tag}", layer, module, [src],
            {"src_mask": ms.Tensor(causal), "src_key_padding_mask": ms.Tensor(kpm)},
            {"src_mask": torch.tensor(causal), "src_key_padding_mask": torch.tensor(kpm)})
    enc = nn.TransformerEncoder(layer, 2, nn.LayerNorm((d,), epsilon=1e-5))
    tenc = torch.nn.TransformerEncoder(module, 2, torch.nn.LayerNorm(d), enable_nested_tensor=False)
    compare(f"TransformerEncoder{tag}", enc, tenc, [src], {"mask": ms.Tensor(causal)},
            {"mask": torch.tensor(causal)})

    dlayer = nn.TransformerDecoderLayer(d, h, **kw)
    dmodule = torch.nn.TransformerDecoderLayer(d, h, **kw)
    mkpm = np.zeros((N, S), bool)
    mkpm[1, :2] = True
    dkw = {"tgt_mask": causal, "tgt_key_padding_mask": kpm, "memory_key_padding_mask": mkpm}
    compare(f"TransformerDecoderLayer{tag}", dlayer, dmodule, [src, mem],
            {n: ms.Tensor(m) for n, m in dkw.items()}, {n: torch.tensor(m) for n, m in dkw.items()})
    dec = nn.TransformerDecoder(dlayer, 2, nn.LayerNorm((d,), epsilon=1e-5))
    tdec = torch.nn.TransformerDecoder(dmodule, 2, torch.nn.LayerNorm(d))
    compare(f"TransformerDecoder{tag}", dec, tdec, [src, mem], {"tgt_mask": ms.Tensor(causal)},
            {"tgt_mask": torch.tensor(causal)})


def test_conv1d_matches_torch():
    torch = pytest.importorskip("torch")
    x = rand(2, 4, 11)
    layer = nn.Conv1d(4, 6, 3, stride=2, pad_mode="pad", padding=2, dilation=2, group=2, has_bias=True)
    module = torch.nn.Conv1d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2, bias=True)
    compare("Conv1d(pad, stride 2, dilation 2, group 2)", layer, module, [x])
    layer = nn.Conv1d(4, 5, 5)  # "same", stride 1: PyTorch's padding="same"
    module = torch.nn.Conv1d(4, 5, 5, padding="same", bias=False)
    compare("Conv1d(same)", layer, module, [x])


def test_conv2d_transpose_matches_torch():
    torch = pytest.importorskip("torch")
    x = rand(2, 4, 5, 4)
    layer = nn.Conv2dTranspose(4, 6, (3, 2), stride=(2, 3), pad_mode="pad", padding=(1, 1, 2, 2),
                               output_padding=(1, 2), dilation=(1, 2), group=2, has_bias=True)
    module = torch.nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 3), padding=(1, 2), output_padding=(1, 2),
                                      dilation=(1, 2), groups=2, bias=True)
    compare("Conv2dTranspose(pad, output_padding, dilation, group)", layer, module, [x])

    # "same": PyTorch's full output (padding 0) cropped by MindSpore's (top, left) = (total // 2).
    class Cropped(torch.nn.ConvTranspose2d):
        def forward(self, t):
            return super().forward(t)[:, :, 1:11, 1:9]

    layer = nn.Conv2dTranspose(4, 3, 4, stride=2, has_bias=True)  # total padding 4 - 2 = 2: (1, 1)
    module = Cropped(4, 3, 4, stride=2, bias=True)
    compare("Conv2dTranspose(same)", layer, module, [x])


def test_group_norm_matches_torch():
    torch = pytest.importorskip("torch")
    layer = nn.GroupNorm(3, 6, eps=1e-4)
    module = torch.nn.GroupNorm(3, 6, eps=1e-4)
    with torch.no_grad():  # non-trivial affine parameters (copied over to Spore below)
        module.weight.copy_(torch.tensor(rand(6)))
        module.bias.copy_(torch.tensor(rand(6)))
    layer.gamma.set_data(ms.Tensor(module.weight.detach().numpy()))
    layer.beta.set_data(ms.Tensor(module.bias.detach().numpy()))
    compare("GroupNorm(3, 6)", layer, module, [rand(2, 6, 4, 5) * 3 + 1])


def test_pad_matches_torch_and_numpy():
    torch = pytest.importorskip("torch")
    x = rand(2, 3, 5, 6)
    paddings = ((0, 0), (0, 0), (2, 1), (1, 3))
    tpad = (1, 3, 2, 1)  # PyTorch: from the last dim backwards

    class TorchPad(torch.nn.Module):
        def __init__(self, mode):
            super().__init__()
            self.mode = mode

        def forward(self, t):
            return torch.nn.functional.pad(t, tpad, mode=self.mode)

    xt = torch.tensor(x)
    for mode, tmode in [("CONSTANT", "constant"), ("REFLECT", "reflect")]:
        layer = nn.Pad(paddings, mode)
        out, gx, _, r = spore_run(layer, [x])
        xt = torch.tensor(x, requires_grad=True)
        tout = TorchPad(tmode)(xt)
        (tout * torch.tensor(r)).sum().backward()
        d_out, d_gx = np.max(np.abs(out - tout.detach().numpy())), np.max(np.abs(gx - xt.grad.numpy()))
        print(f"MAXDIFF Pad({mode}) out={d_out:.2e} grad_x={d_gx:.2e}")
        assert d_out == 0 and d_gx <= 1e-5
    out = nn.Pad(paddings, "SYMMETRIC")(ms.Tensor(x)).asnumpy()
    np.testing.assert_array_equal(out, np.pad(x, paddings, mode="symmetric"))
    print("MAXDIFF Pad(SYMMETRIC) vs numpy.pad out=0 (exact)")


# ---- GRAPH_MODE = PYNATIVE_MODE -----------------------------------------------------------------
def _graph_cases():
    mask = np.triu(np.ones((3, 3), bool), 1)
    kpm = np.zeros((2, 3), bool)
    kpm[0, 2] = True
    return [
        ("MultiheadAttention", lambda: nn.MultiheadAttention(4, 2, add_bias_kv=True), [rand(3, 2, 4)] * 3,
         {"key_padding_mask": kpm, "attn_mask": mask}, True),
        ("TransformerEncoder", lambda: nn.TransformerEncoder(
            nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, norm_first=True), 2), [rand(3, 2, 4)],
         {"mask": mask}, False),
        ("TransformerDecoder", lambda: nn.TransformerDecoder(
            nn.TransformerDecoderLayer(4, 2, 8, dropout=0.0, activation="gelu"), 2, nn.LayerNorm((4,))),
         [rand(3, 2, 4), rand(5, 2, 4)], {"tgt_mask": mask}, False),
        ("Conv1d", lambda: nn.Conv1d(3, 4, 3, stride=2, has_bias=True), [rand(2, 3, 9)], {}, False),
        ("Conv2dTranspose", lambda: nn.Conv2dTranspose(3, 4, 3, stride=2, pad_mode="pad", padding=1,
                                                       output_padding=1, has_bias=True),
         [rand(2, 3, 4, 5)], {}, False),
        ("GroupNorm", lambda: nn.GroupNorm(2, 4), [rand(2, 4, 3, 3)], {}, False),
        ("Pad", lambda: nn.Pad(((0, 0), (1, 2), (2, 0)), "REFLECT"), [rand(2, 4, 5)], {}, False),
    ]


@pytest.mark.parametrize("case", _graph_cases(), ids=lambda c: c[0])
def test_graph_mode_equals_pynative(case):
    name, make, inputs, masks, first = case
    ms.set_seed(3)
    layer = make()
    kw = {n: ms.Tensor(m) for n, m in masks.items()}
    eager = spore_run(layer, inputs, kw, first, ms.PYNATIVE_MODE)
    graph = spore_run(layer, inputs, kw, first, ms.GRAPH_MODE)
    for a, b in zip(eager[:2], graph[:2]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    for n in eager[2]:
        np.testing.assert_allclose(graph[2][n], eager[2][n], rtol=1e-5, atol=1e-6, err_msg=n)


# ---- arguments ----------------------------------------------------------------------------------
def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="activation must be 'relu' or 'gelu'"):
        nn.TransformerEncoderLayer(4, 2, activation="tanh")
    with pytest.raises(TypeError, match="encoder_layer must be an nn.TransformerEncoderLayer"):
        nn.TransformerEncoder(nn.Dense(2, 2), 2)
    with pytest.raises(TypeError, match="norm must be an nn.LayerNorm"):
        nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2), 2, norm=nn.Dense(4, 4))
    with pytest.raises(ValueError, match="embed_dim \\(6\\) must be a positive multiple of num_heads"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match="kdim must be positive or None"):
        nn.MultiheadAttention(4, 2, kdim=-1)
    with pytest.raises(ValueError, match="output_padding must be 0 when pad_mode is 'same'"):
        nn.Conv2dTranspose(2, 2, 3, stride=2, output_padding=1)
    with pytest.raises(ValueError, match="num_channels \\(5\\) must be a positive multiple of num_groups"):
        nn.GroupNorm(2, 5)
    with pytest.raises(ValueError, match="mode must be 'CONSTANT', 'REFLECT' or 'SYMMETRIC'"):
        nn.Pad(((1, 1),), "EDGE")
    with pytest.raises(TypeError, match="paddings must be a tuple"):
        nn.Pad(3)
    with pytest.raises(ValueError, match="kernel_size must be one int"):
        nn.Conv1d(2, 2, (3, 3))
    att = nn.MultiheadAttention(4, 2)
    x = ms.Tensor(rand(3, 2, 4))
    out, w = att(x, x, x, need_weights=False)
    assert w is None and out.shape == (3, 2, 4)
