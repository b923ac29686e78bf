"""Normalization: ``BatchNorm1d/2d`` (running statistics), ``LayerNorm``, ``GroupNorm``.

State-dict names follow PyTorch: ``weight``, ``bias``, ``running_mean``, ``running_var``,
``num_batches_tracked``.

Example:
    >>> import ember
    >>> bn = ember.nn.BatchNorm1d(3)
    >>> sorted(bn.state_dict())
    ['bias', 'num_batches_tracked', 'running_mean', 'running_var', 'weight']
"""
from __future__ import annotations

from typing import Any, Sequence

from ember import creation, dtypes
from ember.autograd import grad_mode
from ember.nn import functional as F, init
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor


class _BatchNorm(Module):
    _expected_dims: tuple = ()
    _version = 2  # PyTorch's: version 2 added num_batches_tracked (see _load_from_state_dict)

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(creation.empty(num_features, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(creation.empty(num_features, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", creation.zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", creation.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", creation.tensor(0, dtype=dtypes.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() not in self._expected_dims:
            raise ValueError(f"{type(self).__name__}: expected {' or '.join(f'{d}D' for d in self._expected_dims)} "
                             f"input (got {input.dim()}D input of shape {tuple(input.shape)})")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with grad_mode.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked.item())
        # Batch statistics in training, or when there are no running statistics to use.
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None, self.running_var if track else None,
                            self.weight, self.bias, use_batch_stats, factor, self.eps)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        # Checkpoints from before num_batches_tracked existed (version < 2, or no version: a plain dict) load
        # with the module's own counter (zero when new), as in PyTorch.
        key = prefix + "num_batches_tracked"
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats and key not in state_dict:
            state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                               else creation.tensor(0, dtype=dtypes.int64))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch norm over (N, C) or (N, C, L) input, per channel C."""

    _expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm over (N, C, H, W) input, per channel C."""

    _expected_dims = (4,)


class BatchNorm3d(_BatchNorm):
    _expected_dims = (5,)


class LayerNorm(Module):
    """Normalize over the trailing ``normalized_shape`` dims; affine ``weight`` (ones) and ``bias`` (zeros)."""

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(creation.ones(*self.normalized_shape, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(creation.zeros(*self.normalized_shape, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class GroupNorm(Module):
    """Normalize each group of ``num_channels // num_groups`` channels per sample (input (N, C, *))."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device: Any = None, dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        if affine:
            self.weight = Parameter(creation.ones(num_channels, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(creation.zeros(num_channels, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")
