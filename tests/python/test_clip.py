"""Gradient clipping: ops.clip_by_norm / ops.clip_by_global_norm (MindSpore's functions, checked
against PyTorch's clip_grad_norm_ and the formula) and Optimizer.set_clip_grad_norm (the clip inside
the update, PyNative and GRAPH_MODE)."""
import numpy as np
import pytest

import spore as ms
from spore import nn, ops

rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4)).astype(np.float32)
B = (rng.standard_normal(5) * 10).astype(np.float32)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
def test_clip_by_norm_equals_the_formula(norm_type):
    flat = np.concatenate([A.ravel(), B.ravel()]).astype(np.float64)
    total = np.abs(flat).max() if norm_type == float("inf") else (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    coef = min(1.0, 3.0 / (total + 1e-6))
    a, b = ops.clip_by_norm((ms.Tensor(A), ms.Tensor(B)), 3.0, norm_type=norm_type)
    np.testing.assert_allclose(a.asnumpy(), A * coef, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.asnumpy(), B * coef, rtol=1e-5, atol=1e-6)
    one = ops.clip_by_norm(ms.Tensor(A), 1e6)  # under the norm: unchanged, and a Tensor back
    assert isinstance(one, ms.Tensor)
    np.testing.assert_allclose(one.asnumpy(), A, rtol=1e-6)


def test_clip_by_norm_equals_pytorch():
    torch = pytest.importorskip("torch")
    for nt in (2.0, float("inf")):
        ta, tb = torch.tensor(A), torch.tensor(B)
        ta.grad, tb.grad = ta.clone(), tb.clone()
        torch.nn.utils.clip_grad_norm_([ta, tb], 3.0, norm_type=nt)
        a, b = ops.clip_by_norm([ms.Tensor(A), ms.Tensor(B)], 3.0, norm_type=nt)
        np.testing.assert_allclose(a.asnumpy(), ta.grad.numpy(), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(b.asnumpy(), tb.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_clip_by_global_norm_equals_mindspores_formula():
    g = np.sqrt((A.astype(np.float64) ** 2).sum() + (B.astype(np.float64) ** 2).sum())
    a, b = ops.clip_by_global_norm((ms.Tensor(A), ms.Tensor(B)), 2.0)
    np.testing.assert_allclose(b.asnumpy(), B * 2.0 / max(g, 2.0), rtol=1e-5)
    a, b = ops.clip_by_global_norm([ms.Tensor(A), ms.Tensor(B)], 2.0, use_norm=ms.Tensor(np.float32(4.0)))
    np.testing.assert_allclose(a.asnumpy(), A * 0.5, rtol=1e-6)
    big = ops.clip_by_global_norm([ms.Tensor(A)], 1e6)  # within the norm: unchanged
    np.testing.assert_allclose(big[0].asnumpy(), A, rtol=1e-6)


def test_bad_clip_arguments_say_what_to_pass():
    with pytest.raises(TypeError, match="ops.clip_by_norm"):
        ops.clip_by_norm([A, B], 1.0)  # numpy arrays, not Tensors
    with pytest.raises(ValueError, match="max_norm must be > 0"):
        ops.clip_by_norm(ms.Tensor(A), 0.0)
    with pytest.raises(TypeError, match="use ops.clip_by_norm"):
        ops.clip_by_global_norm(ms.Tensor(A), 1.0)
    with pytest.raises(RuntimeError, match="error_if_nonfinite"):
        ops.clip_by_norm(ms.Tensor(np.array([np.inf, 1.0], np.float32)), 1.0, error_if_nonfinite=True)
    opt = nn.SGD(nn.Dense(2, 1).trainable_params(), 0.1)
    with pytest.raises(ValueError, match="max_norm must be a finite number"):
        opt.set_clip_grad_norm(-1)


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_optimizer_clips_inside_the_update(mode):
    ms.set_context(mode=mode)
    try:
        x = rng.standard_normal((8, 3)).astype(np.float32)
        y = (rng.standard_normal((8, 1)) * 100).astype(np.float32)  # a large loss: the norm is > 1
        net = nn.Dense(3, 1, has_bias=False)
        w0 = net.weight.asnumpy().astype(np.float64)
        opt = nn.SGD(net.trainable_params(), 0.1)
        opt.set_clip_grad_norm(1.0)
        assert opt.clip_grad_norm == 1.0
        step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
        step(ms.Tensor(x), ms.Tensor(y))
        g = 2.0 / len(x) * ((x @ w0.T - y).T @ x)  # d mean((xW^T - y)^2) / dW
        norm = np.sqrt((g ** 2).sum())
        assert norm > 1.0
        np.testing.assert_allclose(net.weight.asnumpy(), w0 - 0.1 * g / norm, rtol=1e-4, atol=1e-6)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
