"""``FractionalMaxPool2d`` / ``FractionalMaxPool3d``: fractional max pooling as modules (PyTorch's names).

Example:
    >>> import ember
    >>> pool = ember.nn.FractionalMaxPool2d(3, output_ratio=(0.5, 0.5))
    >>> pool(ember.randn(2, 4, 16, 16)).shape
    ember.Size([2, 4, 8, 8])
"""
from __future__ import annotations

from typing import Any

from ember.nn import _fractional_pool
from ember.nn.modules.module import Module


def _n_tuple(value: Any, dims: int) -> tuple | None:
    if value is None:
        return None
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * dims


class _FractionalMaxPoolNd(Module):
    _dims = 2

    def __init__(self, kernel_size: Any, output_size: Any = None, output_ratio: Any = None,
                 return_indices: bool = False, _random_samples: Any = None) -> None:
        super().__init__()
        name = type(self).__name__
        self.kernel_size = _n_tuple(kernel_size, self._dims)
        self.return_indices = return_indices
        # A buffer, as in PyTorch: fixed samples travel with the module (state_dict, .to(device)).
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = _n_tuple(output_size, self._dims)
        self.output_ratio = _n_tuple(output_ratio, self._dims)
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input: Any) -> Any:
        pool = (_fractional_pool.fractional_max_pool2d if self._dims == 2
                else _fractional_pool.fractional_max_pool3d)
        return pool(input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
                    _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """2-D fractional max pooling over ``(N, C, H, W)`` or ``(C, H, W)`` inputs."""
    _dims = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """3-D fractional max pooling over ``(N, C, T, H, W)`` or ``(C, T, H, W)`` inputs."""
    _dims = 3
