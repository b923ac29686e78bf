"""Activation modules: ReLU, GELU, SiLU, Sigmoid, Tanh, Softmax, LogSoftmax, LeakyReLU, ELU, PReLU, ...

Each forwards to the function of the same name in ``ember.nn.functional`` (looked up per call, so fx and
``__torch_function__`` see it); ``inplace=True`` writes the result into the input, as PyTorch's modules do
(``x + block(x)`` with a leading ``ReLU(inplace=True)`` in ``block`` adds ``relu(x)``).

Example:
    >>> import ember
    >>> ember.nn.ReLU()(ember.tensor([-1.0, 2.0]))
    tensor([0., 2.])
"""
from __future__ import annotations

import warnings

from typing import Any

from ember import creation
from ember.nn import functional as F
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor


class _Simple(Module):
    """An activation without arguments other than ``inplace``."""

    _fn: str = ""  # the name in ember.nn.functional, looked up per call (fx and __torch_function__ see it)

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._fn)(input, inplace=self.inplace)  # inplace=True writes into input, as torch

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_Simple):
    _fn = "relu"


class SELU(_Simple):
    _fn = "selu"


class SiLU(_Simple):
    _fn = "silu"


class Mish(_Simple):
    _fn = "mish"


class Hardswish(_Simple):
    _fn = "hardswish"


class Hardsigmoid(_Simple):
    _fn = "hardsigmoid"


class _NoArgs(Module):
    _fn: str = ""

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._fn)(input)


class Sigmoid(_NoArgs):
    _fn = "sigmoid"


class Tanh(_NoArgs):
    _fn = "tanh"


class LogSigmoid(_NoArgs):
    _fn = "logsigmoid"


class Softsign(_NoArgs):
    _fn = "softsign"


class Tanhshrink(_NoArgs):
    _fn = "tanhshrink"


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    def forward(self, input: Tensor) -> Tensor:
        return F.celu(input, self.alpha, self.inplace)


class GELU(Module):
    """GELU; ``approximate='tanh'`` uses the tanh formula."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False, min_value: Any = None,
                 max_value: Any = None) -> None:
        super().__init__()
        # PyTorch's deprecated spellings, still accepted with its warning.
        if min_value is not None:
            warnings.warn("keyword argument `min_value` is deprecated and renamed to `min_val`", FutureWarning,
                          stacklevel=2)
            min_val = min_value
        if max_value is not None:
            warnings.warn("keyword argument `max_value` is deprecated and renamed to `max_val`", FutureWarning,
                          stacklevel=2)
            max_val = max_value
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class ReLU6(Hardtanh):
    """``Hardtanh(0, 6)``, as PyTorch defines it (``isinstance(m, nn.Hardtanh)`` holds; fx records ``hardtanh``)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Threshold(Module):
    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (", inplace=True" if self.inplace else "")


class PReLU(Module):
    """LeakyReLU with a learned slope ``weight`` (one, or one per channel), initialized to ``init``."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(creation.full((num_parameters,), init, device=device, dtype=dtype))

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class _DimActivation(Module):
    _fn: str = ""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._fn)(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_DimActivation):
    _fn = "softmax"


class LogSoftmax(_DimActivation):
    _fn = "log_softmax"


class Softmin(_DimActivation):
    _fn = "softmin"


class GLU(Module):
    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
