"""Recurrent layers: ``RNN`` (tanh/relu), ``LSTM``, ``GRU`` and the single-step ``RNNCell``/``LSTMCell``/``GRUCell``.

Parameter names, shapes and gate orders are PyTorch's (``weight_ih_l0``, ``weight_hh_l0_reverse``, ...;
LSTM gates i, f, g, o; GRU gates r, z, n), so a torch ``state_dict`` loads unchanged.

Sequences of different lengths, two ways:

* PyTorch's way: pass a :class:`~ember.nn.utils.rnn.PackedSequence` (``pack_padded_sequence``);
  the output is packed too.
* ember's shortcut: pass the padded batch and ``lengths=`` (one int per sequence). Outputs past a
  sequence's end are zero, ``h_n`` (and ``c_n``) hold each sequence's state at its own last step, and
  the reverse direction of a bidirectional layer starts at each sequence's last real element.

Example:
    >>> import ember
    >>> lstm = ember.nn.LSTM(4, 8, num_layers=2, batch_first=True)
    >>> out, (h, c) = lstm(ember.randn(3, 5, 4), lengths=[5, 2, 3])
    >>> out.shape, h.shape
    (ember.Size([3, 5, 8]), ember.Size([2, 3, 8]))
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import creation
from ember.amp.state import STATE as _AUTOCAST
from ember.nn import functional as F, init
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.nn.utils.rnn import PackedSequence, _pack_like, pad_packed_sequence
from ember.ops import dispatch
from ember.ops.gru_rnn_layer import gru_layer, rnn_layer
from ember.ops.lstm_layer import lstm_layer
from ember.ops.elementwise import relu, sigmoid, tanh, where
from ember.ops.views import cat, chunk, stack
from ember.tensor import Tensor

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    out = x.matmul(weight.t())
    return out + bias if bias is not None else out


def _cell_step(mode: str, gates_x: Tensor, h: Tensor, c: Tensor | None, w_hh: Tensor,
               b_hh: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """One time step given the precomputed input projection ``gates_x = x @ W_ih.T + b_ih``."""
    gates_h = _linear(h, w_hh, b_hh)
    if mode == "LSTM":
        i, f, g, o = chunk(gates_x + gates_h, 4, -1)
        c_new = sigmoid(f) * c + sigmoid(i) * tanh(g)
        return sigmoid(o) * tanh(c_new), c_new
    if mode == "GRU":
        x_r, x_z, x_n = chunk(gates_x, 3, -1)
        h_r, h_z, h_n = chunk(gates_h, 3, -1)
        r = sigmoid(x_r + h_r)
        z = sigmoid(x_z + h_z)
        n = tanh(x_n + r * h_n)
        return n + z * (h - n), None  # == (1 - z) * n + z * h
    pre = gates_x + gates_h
    return (tanh(pre) if mode == "RNN_TANH" else relu(pre)), None


def _reverse_index(lengths: np.ndarray, steps: int) -> np.ndarray:
    """index[t, b]: where step t of sequence b comes from when each sequence is reversed within its length."""
    t = np.arange(steps)[:, None]
    n = lengths[None, :]
    return np.where(t < n, n - 1 - t, t).astype(np.int64)


class RNNBase(Module):
    """Shared machinery; use :class:`RNN`, :class:`LSTM` or :class:`GRU`."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        name = {"RNN_TANH": "RNN", "RNN_RELU": "RNN"}.get(mode, mode)
        if not (isinstance(dropout, (int, float)) and 0 <= dropout <= 1) or isinstance(dropout, bool):
            raise ValueError(f"{name}: dropout should be a number in range [0, 1], got {dropout}")
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError(f"{name}: hidden_size and num_layers must be positive, got {hidden_size}, {num_layers}")
        if dropout > 0 and num_layers == 1:  # torch's warning: the dropout of a one-layer RNN is never applied
            import warnings

            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout expects "
                          f"num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                          UserWarning, stacklevel=2)  # names a line inside the library (printed once, as torch)
        if not isinstance(proj_size, int) or isinstance(proj_size, bool) or proj_size < 0:
            raise ValueError(f"{name}: proj_size should be a positive integer or zero to disable projections, "
                             f"got {proj_size!r}")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if proj_size >= hidden_size:
            raise ValueError(f"{name}: proj_size has to be smaller than hidden_size (got proj_size={proj_size}, "
                             f"hidden_size={hidden_size})")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        gate_size = _GATES[mode] * hidden_size
        directions = 2 if bidirectional else 1
        # With projections (LSTM only) h has proj_size features: h_t = W_hr (o_t * tanh(c_t)).
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names: list = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for prefix, shape in shapes:
                    setattr(self, prefix + suffix, Parameter(creation.empty(*shape, device=device, dtype=dtype)))
                    self._flat_weights_names.append(prefix + suffix)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default: every weight and bias ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def flatten_parameters(self) -> None:
        """No-op (cuDNN weight packing has no ember counterpart); kept so PyTorch code runs."""

    @property
    def all_weights(self) -> list:
        names = self._flat_weights_names
        per = (4 if self.bias else 2) + (1 if self.proj_size > 0 else 0)
        return [[getattr(self, n) for n in names[i:i + per]] for i in range(0, len(names), per)]

    def _weights(self, layer: int, direction: int) -> tuple:
        suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
        get = self._parameters.get
        return (get("weight_ih" + suffix), get("weight_hh" + suffix), get("bias_ih" + suffix),
                get("bias_hh" + suffix), get("weight_hr" + suffix))

    def _run_direction(self, x: Tensor, h: Tensor, c: Tensor | None, weights: tuple, masks: list | None,
                       reverse_index: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None]:
        """Run one direction of one layer over time-major ``x`` (T, B, H_in)."""
        w_ih, w_hh, b_ih, b_hh, w_hr = weights
        steps = x.shape[0]
        if reverse_index is not None:  # reverse each sequence within its own length
            x = x.gather(0, reverse_index.unsqueeze(-1).expand(*tuple(x.shape)))
        gates_x = _linear(x, w_ih, b_ih)  # one matmul for all time steps
        if (w_hr is None and masks is None and steps and not _AUTOCAST.active and not dispatch.is_symbolic(gates_x)
                and gates_x.dtype == h.dtype == w_hh.dtype and (c is None or c.dtype == h.dtype)):
            # the whole time loop as one op (ember/ops/lstm_layer.py, gru_rnn_layer.py): the composite's numbers
            # without a dispatch per step
            if self.mode == "LSTM":
                out, h, c = lstm_layer(gates_x, h, c, w_hh, b_hh)
            elif self.mode == "GRU":
                out, h = gru_layer(gates_x, h, w_hh, b_hh)
            else:
                out, h = rnn_layer(gates_x, h, w_hh, b_hh, "tanh" if self.mode == "RNN_TANH" else "relu")
            if reverse_index is not None:
                out = out.gather(0, reverse_index.unsqueeze(-1).expand(*tuple(out.shape)))
            return out, h, c
        outputs = []
        for t in range(steps):
            h_new, c_new = _cell_step(self.mode, gates_x[t], h, c, w_hh, b_hh)
            if w_hr is not None:
                h_new = h_new.matmul(w_hr.t())
            if masks is not None:  # finished sequences keep their state and emit zeros
                h = where(masks[t], h_new, h)
                if c is not None:
                    c = where(masks[t], c_new, c)
                outputs.append(where(masks[t], h_new, 0.0))
            else:
                h, c = h_new, c_new
                outputs.append(h)
        out = stack(outputs, 0)
        if reverse_index is not None:
            out = out.gather(0, reverse_index.unsqueeze(-1).expand(*tuple(out.shape)))
        return out, h, c

    def _check_hidden(self, hx: Tensor, expected: tuple, what: str) -> None:
        if tuple(hx.shape) != expected:
            raise RuntimeError(f"{type(self).__name__}: expected {what} size {expected}, got {tuple(hx.shape)}")

    def forward(self, input: Any, hx: Any = None, lengths: Any = None) -> Any:
        """``input`` (T, B, H_in) / (B, T, H_in) with batch_first / (T, H_in) unbatched, or a PackedSequence."""
        name = type(self).__name__
        packed = isinstance(input, PackedSequence)
        template = input if packed else None
        if packed:
            if lengths is not None:
                raise ValueError(f"{name}: pass either a PackedSequence or lengths=, not both")
            input, lengths = pad_packed_sequence(input)  # time-major, original batch order
            batched = True
        else:
            if input.dim() not in (2, 3):
                raise ValueError(f"{name}: expected input to be 2D (unbatched) or 3D, got {input.dim()}D input "
                                 f"of shape {tuple(input.shape)}")
            batched = input.dim() == 3
            if not batched:
                input = input.unsqueeze(1)
            elif self.batch_first:
                input = input.transpose(0, 1)
        steps, batch, features = tuple(input.shape)
        if features != self.input_size:
            raise RuntimeError(f"{name}: input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {features}")
        directions = 2 if self.bidirectional else 1
        state_shape = (self.num_layers * directions, batch, self.hidden_size)
        h_shape = (self.num_layers * directions, batch, self.proj_size or self.hidden_size)
        is_lstm = self.mode == "LSTM"
        h0, c0 = self._initial_state(hx, batched, state_shape, input, is_lstm, h_shape)

        masks = reverse_index = None
        if lengths is not None:
            lens = np.asarray(lengths.tolist() if isinstance(lengths, Tensor) else lengths, dtype=np.int64)
            if lens.shape != (batch,) or lens.min() < 1 or lens.max() > steps:
                raise ValueError(f"{name}: lengths must hold one value in [1, {steps}] per sequence (batch "
                                 f"{batch}), got {lens.tolist()}")
            valid = np.arange(steps)[:, None] < lens[None, :]
            masks = [creation.tensor(valid[t][:, None], device=input.device) for t in range(steps)]
            if self.bidirectional:
                reverse_index = creation.tensor(_reverse_index(lens, steps), device=input.device)
        elif self.bidirectional:
            reverse_index = creation.tensor(_reverse_index(np.full(batch, steps), steps), device=input.device)

        layer_input = input
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                k = layer * directions + direction
                out, h, c = self._run_direction(layer_input, h0[k], c0[k] if is_lstm else None,
                                                self._weights(layer, direction), masks,
                                                reverse_index if direction == 1 else None)
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            layer_input = outs[0] if directions == 1 else cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                if packed:  # torch draws the mask on the packed data (its layout decides which elements drop)
                    dropped = _pack_like(layer_input, template)
                    dropped = PackedSequence(F.dropout(dropped.data, self.dropout, True), *tuple(dropped)[1:])
                    layer_input = pad_packed_sequence(dropped, total_length=steps)[0]
                else:
                    layer_input = F.dropout(layer_input, self.dropout, True)
        output = layer_input
        h_out = stack(h_n, 0)
        c_out = stack(c_n, 0) if is_lstm else None
        if packed:
            output = _pack_like(output, template)
        elif not batched:
            output, h_out = output.squeeze(1), h_out.squeeze(1)
            c_out = c_out.squeeze(1) if is_lstm else None
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, ((h_out, c_out) if is_lstm else h_out)

    def _initial_state(self, hx: Any, batched: bool, state_shape: tuple, input: Tensor,
                       is_lstm: bool, h_shape: tuple | None = None) -> tuple[Any, Any]:
        """(h_0, c_0); ``h_shape`` differs from ``state_shape`` (the cell's) only with proj_size."""
        h_shape = state_shape if h_shape is None else h_shape

        def zeros(shape: tuple) -> Tensor:
            return creation.zeros(*shape, dtype=input.dtype, device=input.device)

        if hx is None:
            return zeros(h_shape), (zeros(state_shape) if is_lstm else None)
        if is_lstm:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError("LSTM: hx must be a tuple (h_0, c_0)")
            h0, c0 = hx
        else:
            h0, c0 = hx, None
        expected_dim = 3 if batched else 2
        for t, what in ((h0, "hidden"), (c0, "cell")):
            if t is not None and t.dim() != expected_dim:
                raise RuntimeError(f"{type(self).__name__}: for {'batched' if batched else 'unbatched'} input, "
                                   f"{what} state should be {expected_dim}-D, got {t.dim()}-D")
        if not batched:
            h0 = h0.unsqueeze(1)
            c0 = c0.unsqueeze(1) if c0 is not None else None
        self._check_hidden(h0, h_shape, "hidden")
        if c0 is not None:
            self._check_hidden(c0, state_shape, "cell")
        return h0, c0

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:  # torch's order: proj_size right after the sizes
            text += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if not self.bias:
            text += ", bias=False"
        if self.batch_first:
            text += ", batch_first=True"
        if self.dropout:
            text += f", dropout={self.dropout}"
        if self.bidirectional:
            text += ", bidirectional=True"
        return text


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size,
                         num_layers, bias, batch_first, dropout, bidirectional, device=device, dtype=dtype)


class LSTM(RNNBase):
    """Long short-term memory; returns ``output, (h_n, c_n)``. Gate order i, f, g, o as PyTorch."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device=device, dtype=dtype)


class GRU(RNNBase):
    """Gated recurrent unit; gate order r, z, n as PyTorch."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)


class RNNCellBase(Module):
    """The parameters of a recurrent cell (PyTorch's signature: ``num_chunks`` gate blocks of ``hidden_size``
    rows); ember's own cells set ``mode`` to pick the step they run."""

    mode = "custom"

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        gate_size = num_chunks * hidden_size
        self.weight_ih = Parameter(creation.empty(gate_size, input_size, device=device, dtype=dtype))
        self.weight_hh = Parameter(creation.empty(gate_size, hidden_size, device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(creation.empty(gate_size, device=device, dtype=dtype))
            self.bias_hh = Parameter(creation.empty(gate_size, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def _step(self, input: Tensor, h: Tensor | None, c: Tensor | None) -> tuple:
        for what, value in (("input", input), ("hidden", h), ("cell state", c)):
            if value is not None and value.dim() not in (1, 2):
                raise ValueError(f"{type(self).__name__}: Expected {what} to be 1D or 2D, got {value.dim()}D instead")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)

        def zeros() -> Tensor:
            return creation.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)

        h = zeros() if h is None else (h if batched else h.unsqueeze(0))
        if self.mode == "LSTM":
            c = zeros() if c is None else (c if batched else c.unsqueeze(0))
        self._check_shapes(x, h, c)
        w_hh = self.weight_hh
        if (not _AUTOCAST.active and not dispatch.is_symbolic(x) and x.dtype == h.dtype == w_hh.dtype
                == self.weight_ih.dtype and (c is None or c.dtype == h.dtype)
                and (self.bias_ih is None or self.bias_ih.dtype == x.dtype)):
            # one time step of the fused layer ops (as nn.LSTM/GRU/RNN run their loops): ~4 recorded ops a step
            # instead of ~20 (a hand-written cell loop is all dispatch and autograd nodes at small sizes); the
            # numbers are the composite's (ember/ops/lstm_layer.py), linear's GEMM and bias add are matmul's and add's
            gates_x = F.linear(x, self.weight_ih, self.bias_ih).unsqueeze(0)
            if self.mode == "LSTM":
                _, h, c = lstm_layer(gates_x, h, c, w_hh, self.bias_hh)
            elif self.mode == "GRU":
                _, h = gru_layer(gates_x, h, w_hh, self.bias_hh)
            else:
                _, h = rnn_layer(gates_x, h, w_hh, self.bias_hh, "tanh" if self.mode == "RNN_TANH" else "relu")
        else:
            h, c = _cell_step(self.mode, _linear(x, self.weight_ih, self.bias_ih), h, c, w_hh, self.bias_hh)
        if not batched:
            h = h.squeeze(0)
            c = c.squeeze(0) if c is not None else None
        return h, c

    def _check_shapes(self, x: Tensor, h: Tensor, c: Tensor | None) -> None:
        """PyTorch's checks of a cell's input and states (its messages), before any op sees a wrong shape."""
        name = type(self).__name__
        if x.dim() != 2 or x.shape[1] != self.input_size:
            raise RuntimeError(f"{name}: input has inconsistent input_size: got {tuple(x.shape)}, expected "
                               f"(batch, {self.input_size}) or ({self.input_size},)")
        for k, state in enumerate((h, c)):
            if state is None:
                continue
            if state.dim() != 2 or state.shape[0] != x.shape[0]:
                raise RuntimeError(f"{name}: Input batch size {x.shape[0]} doesn't match hidden{k} batch size "
                                   f"{state.shape[0] if state.dim() == 2 else tuple(state.shape)}: pass states of "
                                   f"shape ({x.shape[0]}, {self.hidden_size}) (unbatched input: ({self.hidden_size},))")
            if state.shape[1] != self.hidden_size:
                raise RuntimeError(f"{name}: hidden{k} has inconsistent hidden_size: got {state.shape[1]}, expected "
                                   f"{self.hidden_size}")

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            text += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":  # RNNCell's relu (torch prints it unquoted)
            text += f", nonlinearity={self.nonlinearity}"
        return text


class RNNCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device: Any = None, dtype: Any = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: unknown nonlinearity '{nonlinearity}'")
        self.nonlinearity = nonlinearity
        self.mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._step(input, hx, None)[0]


class LSTMCell(RNNCellBase):
    mode = "LSTM"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor, hx: tuple | None = None) -> tuple[Tensor, Tensor]:
        h, c = (None, None) if hx is None else hx
        return self._step(input, h, c)


class GRUCell(RNNCellBase):
    mode = "GRU"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._step(input, hx, None)[0]
