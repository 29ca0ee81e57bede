"""nn.RNN, nn.LSTM and nn.GRU, and their one-step cells nn.RNNCell, nn.LSTMCell and nn.GRUCell,
with MindSpore's arguments and results, over the C++ layers (spore/nn/rnn.h), which hold the
parameters under MindSpore's (and PyTorch's) names: weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k},
bias_hh_l{k}, with "_reverse" for the backward direction (the cells: weight_ih, weight_hh,
bias_ih, bias_hh); gate blocks i, f, g, o (LSTM) and r, z, n (GRU).

    lstm = nn.LSTM(8, 32, num_layers=2, batch_first=True)
    output, (h_n, c_n) = lstm(x)              # x (N, T, 8); hx=(h0, c0), seq_length optional
    output, h_n = nn.GRU(8, 32)(x, h0)
    h, c = nn.LSTMCell(8, 32)(x_t, (h, c))    # one step: x_t (N, 8)
"""
from .. import _C
from ..common import dtype as mstype
from .cell import Cell


def _check_int(cls, name, v, low):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"For '{cls}', the argument '{name}' must be an int, but got {type(v).__name__}.")
    if v < low:
        raise ValueError(f"For '{cls}', the argument '{name}' must be at least {low}, but got {v}.")


def _check_bool(cls, name, v):
    if not isinstance(v, bool):
        raise TypeError(f"For '{cls}', the argument '{name}' must be a bool, but got {type(v).__name__}.")


class _RNNBase(Cell):
    _make = None
    _is_lstm = False

    def __init__(self, input_size, hidden_size, num_layers=1, has_bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, dtype=mstype.float32, *, _nonlinearity="tanh"):
        cls = type(self).__name__
        _check_int(cls, "input_size", input_size, 1)
        _check_int(cls, "hidden_size", hidden_size, 1)
        _check_int(cls, "num_layers", num_layers, 1)
        for name, v in (("has_bias", has_bias), ("batch_first", batch_first), ("bidirectional", bidirectional)):
            _check_bool(cls, name, v)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
            raise TypeError(f"For '{cls}', the argument 'dropout' must be a float, but got {type(dropout).__name__}.")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"For '{cls}', the argument 'dropout' (a drop probability) must be in [0, 1), "
                             f"but got {dropout}.")
        super().__init__(_cpp=type(self)._make(input_size, hidden_size, num_layers, has_bias, batch_first,
                                               float(dropout), bidirectional, _nonlinearity,
                                               None if dtype is None else _C.dtype_from_any(dtype)))
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.has_bias, self.batch_first, self.dropout = has_bias, batch_first, dropout
        self.bidirectional = bidirectional
        self.num_directions = 2 if bidirectional else 1

    def __call__(self, x, hx=None, seq_length=None):
        cls = type(self).__name__
        h0 = c0 = None
        if hx is not None:
            if self._is_lstm:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise TypeError(f"For 'LSTM', 'hx' must be a tuple (h0, c0) of two Tensors of shape "
                                    f"(num_layers * num_directions, batch_size, hidden_size), but got "
                                    f"{type(hx).__name__}.")
                h0, c0 = hx
            else:
                if isinstance(hx, (tuple, list)):
                    raise TypeError(f"For '{cls}', 'hx' must be one Tensor h0 of shape (num_layers * "
                                    f"num_directions, batch_size, hidden_size), but got a {type(hx).__name__} "
                                    f"(the (h0, c0) pair is LSTM's).")
                h0 = hx
        out = self._cpp.run(x, h0, c0, seq_length)
        if self._is_lstm:
            return out[0], (out[1], out[2])
        return out[0], out[1]

    def extend_repr(self):
        return self._cpp.extend_repr()


class RNN(_RNNBase):
    """Elman RNN, h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (nonlinearity='relu': relu).
    construct(x, hx=None, seq_length=None) -> (output, h_n)."""
    _make = _C.RNN

    def __init__(self, *args, **kwargs):
        nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"For 'RNN', the 'nonlinearity' must be 'tanh' or 'relu', but got {nonlinearity!r}.")
        super().__init__(*args, _nonlinearity=nonlinearity, **kwargs)


class LSTM(_RNNBase):
    """construct(x, hx=None, seq_length=None) -> (output, (h_n, c_n)); hx is (h0, c0)."""
    _make = _C.LSTM
    _is_lstm = True


class GRU(_RNNBase):
    """construct(x, hx=None, seq_length=None) -> (output, h_n)."""
    _make = _C.GRU


class _RNNCellBase(Cell):
    _make = None
    _is_lstm = False

    def __init__(self, input_size, hidden_size, has_bias=True, dtype=mstype.float32, *, _nonlinearity="tanh"):
        cls = type(self).__name__
        _check_int(cls, "input_size", input_size, 1)
        _check_int(cls, "hidden_size", hidden_size, 1)
        _check_bool(cls, "has_bias", has_bias)
        super().__init__(_cpp=type(self)._make(input_size, hidden_size, has_bias, _nonlinearity,
                                               None if dtype is None else _C.dtype_from_any(dtype)))
        self.input_size, self.hidden_size, self.has_bias = input_size, hidden_size, has_bias

    def __call__(self, x, hx=None):
        cls = type(self).__name__
        h = c = None
        if hx is not None:
            if self._is_lstm:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise TypeError(f"For 'LSTMCell', 'hx' must be a tuple (h, c) of two Tensors of shape "
                                    f"(batch_size, hidden_size), but got {type(hx).__name__}.")
                h, c = hx
            else:
                if isinstance(hx, (tuple, list)):
                    raise TypeError(f"For '{cls}', 'hx' must be one Tensor of shape (batch_size, hidden_size), "
                                    f"but got a {type(hx).__name__} (the (h, c) pair is LSTMCell's).")
                h = hx
        out = self._cpp.step(x, h, c)
        return (out[0], out[1]) if self._is_lstm else out[0]

    def extend_repr(self):
        return self._cpp.extend_repr()


class RNNCell(_RNNCellBase):
    """One step of an Elman RNN, h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (nonlinearity='relu':
    relu). RNNCell(input_size, hidden_size, has_bias=True, nonlinearity='tanh', dtype=float32);
    construct(x, hx=None) -> h', x (batch, input_size) or (input_size,), hx zeros when None."""
    _make = _C.RNNCell

    def __init__(self, input_size, hidden_size, has_bias=True, nonlinearity="tanh", dtype=mstype.float32):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"For 'RNNCell', the 'nonlinearity' must be 'tanh' or 'relu', but got "
                             f"{nonlinearity!r}.")
        super().__init__(input_size, hidden_size, has_bias, dtype, _nonlinearity=nonlinearity)


class LSTMCell(_RNNCellBase):
    """One LSTM step. construct(x, hx=None) -> (h', c'); hx is (h, c), zeros when None."""
    _make = _C.LSTMCell
    _is_lstm = True


class GRUCell(_RNNCellBase):
    """One GRU step. construct(x, hx=None) -> h'."""
    _make = _C.GRUCell
