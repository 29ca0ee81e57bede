#!/usr/bin/env python3
"""PyTorch's RNN / LSTM / GRU, their cells (RNNCell, LSTMCell, GRUCell) and Adagrad on seeded inputs, in float64 (run by
tests/nn/rnn_test.cpp and tests/optim/optimizer_test.cpp when torch is importable; the output for
the default seed is also committed as tests/nn/fixtures/rnn_torch.json, which they use otherwise).

  rnn_crosscheck.py OUT.json

Each layer case holds the configuration, every parameter (PyTorch's names, which are MindSpore's),
the input, the initial states, the per-sample lengths (through pack_padded_sequence), cotangents
for the outputs, and PyTorch's outputs and gradients of
    loss = sum(output * r_out) + sum(h_n * r_h) [+ sum(c_n * r_c)]
with respect to the input, the initial states and every parameter. Each cell case likewise holds
one step's h' (and c') and the gradients of sum(h' * r_h) [+ sum(c' * r_c)]. Each Adagrad case holds the
parameter, the gradients of every step and PyTorch's parameter after each step.
"""
import json
import sys

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


def flat(t):
    return {"shape": list(t.shape), "values": [float(v) for v in t.detach().reshape(-1).tolist()]}


def layer_case(gen, mode, input_size, hidden, layers, bidir, batch_first, bias, with_h0, lengths, T=5, N=3):
    torch.manual_seed(int(torch.randint(0, 1 << 30, (1,), generator=gen)))
    kw = dict(num_layers=layers, bias=bias, batch_first=batch_first, bidirectional=bidir)
    if mode in ("RNN_TANH", "RNN_RELU"):
        net = torch.nn.RNN(input_size, hidden, nonlinearity="tanh" if mode == "RNN_TANH" else "relu", **kw)
    elif mode == "LSTM":
        net = torch.nn.LSTM(input_size, hidden, **kw)
    else:
        net = torch.nn.GRU(input_size, hidden, **kw)
    net = net.double()
    D = 2 if bidir else 1
    shape = (N, T, input_size) if batch_first else (T, N, input_size)
    x = torch.randn(*shape, generator=gen, dtype=torch.float64).requires_grad_(True)
    h0 = c0 = None
    if with_h0:
        h0 = (0.5 * torch.randn(layers * D, N, hidden, generator=gen, dtype=torch.float64)).requires_grad_(True)
        if mode == "LSTM":
            c0 = (0.5 * torch.randn(layers * D, N, hidden, generator=gen, dtype=torch.float64)).requires_grad_(True)
    hx = None if h0 is None else ((h0, c0) if mode == "LSTM" else h0)
    if lengths is not None:
        packed = pack_padded_sequence(x, torch.tensor(lengths), batch_first=batch_first, enforce_sorted=False)
        out_p, st = net(packed, hx)
        out, _ = pad_packed_sequence(out_p, batch_first=batch_first, total_length=T)
    else:
        out, st = net(x, hx)
    h_n, c_n = (st if mode == "LSTM" else (st, None))
    r_out = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    r_h = torch.randn(h_n.shape, generator=gen, dtype=torch.float64)
    loss = (out * r_out).sum() + (h_n * r_h).sum()
    r_c = None
    if c_n is not None:
        r_c = torch.randn(c_n.shape, generator=gen, dtype=torch.float64)
        loss = loss + (c_n * r_c).sum()
    names = [n for n, _ in net.named_parameters()]
    wrt = [x] + ([h0] if h0 is not None else []) + ([c0] if c0 is not None else []) + list(net.parameters())
    grads = torch.autograd.grad(loss, wrt)
    gnames = ["x"] + (["h0"] if h0 is not None else []) + (["c0"] if c0 is not None else []) + names
    case = {
        "mode": mode, "input_size": input_size, "hidden_size": hidden, "num_layers": layers,
        "bidirectional": bidir, "batch_first": batch_first, "has_bias": bias,
        "params": {n: flat(p) for n, p in net.named_parameters()},
        "x": flat(x), "seq_length": lengths,
        "r_out": flat(r_out), "r_h": flat(r_h),
        "output": flat(out), "h_n": flat(h_n),
        "grads": {n: flat(g) for n, g in zip(gnames, grads)},
    }
    if h0 is not None:
        case["h0"] = flat(h0)
    if c0 is not None:
        case["c0"] = flat(c0)
    if c_n is not None:
        case["c_n"] = flat(c_n)
        case["r_c"] = flat(r_c)
    return case


def cell_case(gen, mode, input_size, hidden, bias, with_h, batch):
    """One step of a cell; batch None: the unbatched form, x (input_size,)."""
    torch.manual_seed(int(torch.randint(0, 1 << 30, (1,), generator=gen)))
    if mode in ("RNN_TANH", "RNN_RELU"):
        net = torch.nn.RNNCell(input_size, hidden, bias=bias, nonlinearity="tanh" if mode == "RNN_TANH" else "relu")
    elif mode == "LSTM":
        net = torch.nn.LSTMCell(input_size, hidden, bias=bias)
    else:
        net = torch.nn.GRUCell(input_size, hidden, bias=bias)
    net = net.double()
    lead = () if batch is None else (batch,)
    x = torch.randn(*lead, input_size, generator=gen, dtype=torch.float64).requires_grad_(True)
    h = c = None
    if with_h:
        h = (0.5 * torch.randn(*lead, hidden, generator=gen, dtype=torch.float64)).requires_grad_(True)
        if mode == "LSTM":
            c = (0.5 * torch.randn(*lead, hidden, generator=gen, dtype=torch.float64)).requires_grad_(True)
    hx = None if h is None else ((h, c) if mode == "LSTM" else h)
    out = net(x, hx)
    h1, c1 = out if mode == "LSTM" else (out, None)
    r_h = torch.randn(h1.shape, generator=gen, dtype=torch.float64)
    loss = (h1 * r_h).sum()
    r_c = None
    if c1 is not None:
        r_c = torch.randn(c1.shape, generator=gen, dtype=torch.float64)
        loss = loss + (c1 * r_c).sum()
    names = [n for n, _ in net.named_parameters()]
    wrt = [x] + ([h] if h is not None else []) + ([c] if c is not None else []) + list(net.parameters())
    grads = torch.autograd.grad(loss, wrt)
    gnames = ["x"] + (["h"] if h is not None else []) + (["c"] if c is not None else []) + names
    case = {
        "mode": mode, "input_size": input_size, "hidden_size": hidden, "has_bias": bias,
        "params": {n: flat(p) for n, p in net.named_parameters()},
        "x": flat(x), "r_h": flat(r_h), "h_next": flat(h1),
        "grads": {n: flat(g) for n, g in zip(gnames, grads)},
    }
    if h is not None:
        case["h"] = flat(h)
    if c is not None:
        case["c"] = flat(c)
    if c1 is not None:
        case["c_next"] = flat(c1)
        case["r_c"] = flat(r_c)
    return case


def adagrad_case(gen, lr, accum, weight_decay, steps=6):
    p = torch.randn(3, 4, generator=gen, dtype=torch.float64)
    grads = [torch.randn(3, 4, generator=gen, dtype=torch.float64) for _ in range(steps)]
    param = torch.nn.Parameter(p.clone())
    # MindSpore's Adagrad has no epsilon: eps=0 makes PyTorch's update the same formula.
    opt = torch.optim.Adagrad([param], lr=lr, initial_accumulator_value=accum, eps=0.0,
                              weight_decay=weight_decay)
    after = []
    for g in grads:
        param.grad = g.clone()
        opt.step()
        after.append(flat(param))
    return {"lr": lr, "accum": accum, "weight_decay": weight_decay, "param": flat(p),
            "grads": [flat(g) for g in grads], "after": after}


def main():
    gen = torch.Generator().manual_seed(31)
    cases = [
        layer_case(gen, "RNN_TANH", 4, 5, 1, False, False, True, False, None),
        layer_case(gen, "RNN_RELU", 4, 5, 2, True, False, True, True, None),
        layer_case(gen, "RNN_TANH", 3, 4, 1, True, True, True, True, [5, 2, 4]),
        layer_case(gen, "LSTM", 4, 5, 1, False, False, True, True, None),
        layer_case(gen, "LSTM", 3, 4, 2, True, True, True, False, None),
        layer_case(gen, "LSTM", 3, 4, 2, True, False, False, True, [3, 5, 1]),
        layer_case(gen, "GRU", 4, 5, 1, False, False, True, False, None),
        layer_case(gen, "GRU", 3, 4, 2, True, False, False, True, None),
        layer_case(gen, "GRU", 3, 4, 1, True, True, True, True, [2, 5, 4]),
    ]
    adagrad = [adagrad_case(gen, 0.05, 0.1, 0.0), adagrad_case(gen, 0.1, 0.3, 0.01)]
    # The cells draw from their own generator, so the cases above keep their values.
    cgen = torch.Generator().manual_seed(32)
    cells = [
        cell_case(cgen, "RNN_TANH", 4, 5, True, True, 3),
        cell_case(cgen, "RNN_RELU", 3, 4, False, True, 2),
        cell_case(cgen, "RNN_TANH", 3, 4, True, False, None),
        cell_case(cgen, "LSTM", 4, 5, True, True, 3),
        cell_case(cgen, "LSTM", 3, 4, False, False, 2),
        cell_case(cgen, "LSTM", 3, 4, True, True, None),
        cell_case(cgen, "GRU", 4, 5, True, True, 3),
        cell_case(cgen, "GRU", 3, 4, False, True, 2),
        cell_case(cgen, "GRU", 3, 4, True, False, None),
    ]
    doc = {"producer": "torch %s" % torch.__version__, "layers": cases, "adagrad": adagrad, "cells": cells}
    with open(sys.argv[1], "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
