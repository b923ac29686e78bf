"""More of ``torch.nn``'s modules, each a thin wrapper over a functional op (PyTorch's constructor
arguments, defaults, ``extra_repr``): padding layers, instance norm, transposed 1-D/3-D convolutions,
shuffles, fold/unfold, unpooling, LP/adaptive pooling, more activations, dropouts and losses,
``EmbeddingBag``, ``CTCLoss``, ``RMSNorm``, and the ``Lazy*`` modules that infer their input size.

Example:
    >>> import ember
    >>> ember.nn.ReflectionPad2d(1)(ember.zeros(1, 1, 2, 2)).shape
    ember.Size([1, 1, 4, 4])
    >>> lazy = ember.nn.LazyLinear(3); lazy(ember.zeros(2, 5)).shape, type(lazy).__name__
    (ember.Size([2, 3]), 'Linear')
"""
from __future__ import annotations

import math
from typing import Any

from ember.autograd.grad_mode import no_grad
from ember.nn.modules.linear import Linear
from ember import creation
from ember.nn import functional as F, init
from ember.nn._cross_map_lrn import cross_map_lrn2d  # torch's legacy windows and backward
from ember.nn.modules import conv as _conv, normalization as _normalization
from ember.nn.modules.conv import ConvTranspose1d, ConvTranspose3d  # noqa: F401 (re-exported)
from ember.nn.modules.loss import _Loss, _WeightedLoss
from ember.nn.modules.module import Module
from ember.nn.modules.normalization import _BatchNorm
from ember.nn.parameter import Parameter, UninitializedBuffer, UninitializedParameter  # noqa: F401
from ember.tensor import Tensor
from ember.dtypes import int64


def _tuple(value: Any, n: int) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


# ---- padding ------------------------------------------------------------------------------------------------
class _PadNd(Module):
    _dims = 1
    _mode = "constant"

    def __init__(self, padding: Any, value: float = 0.0) -> None:
        super().__init__()
        self.padding = _tuple(padding, 2 * self._dims)
        if len(self.padding) != 2 * self._dims:
            raise ValueError(f"{type(self).__name__}: padding must be an int or a {2 * self._dims}-tuple, got "
                             f"{padding!r}")
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        if self._mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:  # as torch's: ConstantPad names both, ZeroPad and the others print the tuple
        if self._mode == "constant" and not type(self).__name__.startswith("Zero"):
            return f"padding={self.padding}, value={self.value}"
        return f"{self.padding}"


def _pad_class(name: str, dims: int, mode: str, zero: bool = False) -> type:
    # torch's signatures: ConstantPad takes (padding, value), value with no default; the others (padding)
    if mode == "constant" and not zero:
        def __init__(self: Any, padding: Any, value: float) -> None:
            _PadNd.__init__(self, padding, value)
    else:
        def __init__(self: Any, padding: Any) -> None:  # noqa: F811
            _PadNd.__init__(self, padding, 0.0)
    __init__.__qualname__ = f"{name}.__init__"
    doc = f"``torch.nn.{name}``: {mode} padding of the last {dims} dim(s) (``F.pad(x, padding, '{mode}')``)."
    return type(name, (_PadNd,), {"_dims": dims, "_mode": mode, "__init__": __init__, "__doc__": doc,
                                  "__module__": __name__})


ConstantPad1d = _pad_class("ConstantPad1d", 1, "constant")
ConstantPad2d = _pad_class("ConstantPad2d", 2, "constant")
ConstantPad3d = _pad_class("ConstantPad3d", 3, "constant")
ZeroPad1d = _pad_class("ZeroPad1d", 1, "constant", zero=True)
ZeroPad2d = _pad_class("ZeroPad2d", 2, "constant", zero=True)
ZeroPad3d = _pad_class("ZeroPad3d", 3, "constant", zero=True)
ReflectionPad1d = _pad_class("ReflectionPad1d", 1, "reflect")
ReflectionPad2d = _pad_class("ReflectionPad2d", 2, "reflect")
ReflectionPad3d = _pad_class("ReflectionPad3d", 3, "reflect")
ReplicationPad1d = _pad_class("ReplicationPad1d", 1, "replicate")
ReplicationPad2d = _pad_class("ReplicationPad2d", 2, "replicate")
ReplicationPad3d = _pad_class("ReplicationPad3d", 3, "replicate")
CircularPad1d = _pad_class("CircularPad1d", 1, "circular")
CircularPad2d = _pad_class("CircularPad2d", 2, "circular")
CircularPad3d = _pad_class("CircularPad3d", 3, "circular")


# ---- normalization -------------------------------------------------------------------------------------------
class _InstanceNorm(_BatchNorm):
    """Per-sample, per-channel normalization (``F.instance_norm``); no affine and no running stats by default."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        batched = input.ndim == self._expected_dims[-1]
        x = input if batched else input.unsqueeze(0)
        use_input_stats = self.training or not self.track_running_stats
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_input_stats,
                              self.momentum if self.momentum is not None else 0.0, self.eps)  # torch: None -> 0.0
        return out if batched else out.squeeze(0)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        # PyTorch's rule: a checkpoint without version metadata that holds running statistics for a module
        # that does not track them (saved before 0.4) is an error naming the keys, and the keys are dropped.
        if local_metadata.get("version", None) is None and not self.track_running_stats:
            keys = [prefix + n for n in ("running_mean", "running_var") if prefix + n in state_dict]
            if keys:
                klass = type(self).__name__
                error_msgs.append(
                    "Unexpected running stats buffer(s) {names} for {klass} with track_running_stats=False. If "
                    "state_dict is a checkpoint saved before 0.4.0, this may be expected because {klass} does not "
                    "track running stats by default since 0.4.0. Please remove these keys from state_dict. If the "
                    "running stats are actually needed, instead set track_running_stats=True in {klass} to enable "
                    "them. See the documentation of {klass} for details.".format(
                        names=" and ".join(f'"{k}"' for k in keys), klass=klass))
                for key in keys:
                    state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class InstanceNorm1d(_InstanceNorm):
    _expected_dims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    _expected_dims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    _expected_dims = (4, 5)


class RMSNorm(Module):
    """``x / sqrt(mean(x^2 over normalized_shape) + eps) * weight``."""

    def __init__(self, normalized_shape: Any, eps: float | None = None, elementwise_affine: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape = tuple(_tuple(normalized_shape, 1))
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(creation.ones(*self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input: Tensor) -> Tensor:
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class CrossMapLRN2d(LocalResponseNorm):
    """Local response norm over channels of 4-D input (the legacy name)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1) -> None:
        super().__init__(size, alpha, beta, k)  # (k's default is the int 1 in torch: it prints "k=1")

    def forward(self, input: Tensor) -> Tensor:
        return cross_map_lrn2d(input, self.size, self.alpha, self.beta, self.k)


class SyncBatchNorm(_BatchNorm):
    """Batch norm whose statistics span all processes. In one process (no process group) it is BatchNorm;
    under ``ember.distributed`` wrap the model in DDP, whose gradient averaging ember applies (the statistics
    themselves stay per process: a documented difference)."""

    _expected_dims = (2, 3, 4, 5)

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, process_group: Any = None, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.process_group = process_group

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group: Any = None) -> Module:
        return module


# ---- convolutions --------------------------------------------------------------------------------------------
# ConvTranspose1d/3d share ConvTranspose2d's one implementation (ember/nn/modules/conv.py).


# ---- rearrangements, fold/unfold, unpooling, pooling --------------------------------------------------------------
class PixelShuffle(Module):
    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


class Fold(Module):
    def __init__(self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Unfold(Module):
    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> None:
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, stride={self.stride}"


class _MaxUnpoolNd(Module):
    _fn = "max_unpool2d"

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        n = int(self._fn[-2])  # torch keeps n-tuples (_single/_pair/_triple), which its printout shows
        self.kernel_size = _tuple(kernel_size, n)
        self.stride = _tuple(stride if stride is not None else kernel_size, n)
        self.padding = _tuple(padding, n)

    def forward(self, input: Tensor, indices: Tensor, output_size: Any = None) -> Tensor:
        return getattr(F, self._fn)(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    _fn = "max_unpool1d"


class MaxUnpool2d(_MaxUnpoolNd):
    _fn = "max_unpool2d"


class MaxUnpool3d(_MaxUnpoolNd):
    _fn = "max_unpool3d"


class _LPPoolNd(Module):
    _fn = "lp_pool2d"

    def __init__(self, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._fn)(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    _fn = "lp_pool1d"


class LPPool2d(_LPPoolNd):
    _fn = "lp_pool2d"


class LPPool3d(_LPPoolNd):
    _fn = "lp_pool3d"


class _AdaptivePool(Module):
    _fn = "adaptive_avg_pool3d"
    _indices = False

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input: Tensor) -> Any:
        if self._indices:
            return getattr(F, self._fn)(input, self.output_size, self.return_indices)
        return getattr(F, self._fn)(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool3d(_AdaptivePool):
    _fn = "adaptive_avg_pool3d"

    def __init__(self, output_size: Any) -> None:
        super().__init__(output_size)


class AdaptiveMaxPool1d(_AdaptivePool):
    _fn, _indices = "adaptive_max_pool1d", True


class AdaptiveMaxPool3d(_AdaptivePool):
    _fn, _indices = "adaptive_max_pool3d", True


# ---- activations and dropouts -----------------------------------------------------------------------------------
class Hardshrink(Module):
    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return F.hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    def forward(self, input: Tensor) -> Tensor:
        return F.softshrink(input, self.lambd)


class RReLU(Module):
    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False) -> None:
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


class Softmax2d(Module):
    """Softmax over the channels of (N, C, H, W) or (C, H, W)."""

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
        return F.softmax(input, dim=-3)


class Dropout3d(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout3d(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class FeatureAlphaDropout(Dropout3d):
    def forward(self, input: Tensor) -> Tensor:
        return F.feature_alpha_dropout(input, self.p, self.training, self.inplace)


# ---- distances and losses -----------------------------------------------------------------------------------------
class CosineSimilarity(Module):
    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class GaussianNLLLoss(_Loss):
    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__(None, None, reduction)
        self.full, self.eps = full, eps

    def forward(self, input: Tensor, target: Tensor, var: Any) -> Tensor:
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    def __init__(self, *, distance_function: Any = None, margin: float = 1.0, swap: bool = False,
                 reduction: str = "mean") -> None:
        super().__init__(None, None, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} "
                             "instead")
        # torch keeps a PairwiseDistance() module when none is given (a child in its printout)
        self.distance_function = distance_function if distance_function is not None else PairwiseDistance()
        self.margin, self.swap = margin, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_with_distance_loss(anchor, positive, negative,
                                                   distance_function=self.distance_function, margin=self.margin,
                                                   swap=self.swap, reduction=self.reduction)


class CTCLoss(_Loss):
    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> None:
        super().__init__(None, None, reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any) -> Tensor:
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                          self.zero_infinity)


def _nll_loss2d() -> type:
    from ember.nn.modules.loss import NLLLoss

    return type("NLLLoss2d", (NLLLoss,), {"__doc__": "Deprecated spelling of ``NLLLoss`` for (N, C, H, W) input.",
                                          "__module__": __name__})


NLLLoss2d = _nll_loss2d()


class EmbeddingBag(Module):
    """Sums, means or maxes of embedding bags without materializing the per-token embeddings' sequence."""

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                 _weight: Tensor | None = None, include_last_offset: bool = False, padding_idx: int | None = None,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, scale_grad_by_freq
        self.mode, self.sparse, self.include_last_offset = mode, sparse, include_last_offset
        if padding_idx is not None and padding_idx < 0:
            padding_idx += num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(creation.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
            self.reset_parameters()
        else:
            self.weight = Parameter(_weight)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input: Tensor, offsets: Tensor | None = None,
                per_sample_weights: Tensor | None = None) -> Tensor:
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                               self.mode, self.sparse, per_sample_weights, self.include_last_offset,
                               self.padding_idx)

    def extra_repr(self) -> str:  # torch's fields, each shown only when not its default
        s = f"{self.num_embeddings!r}, {self.embedding_dim!r}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx!r}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True, **kwargs: Any) -> "EmbeddingBag":
        bag = cls(embeddings.shape[0], embeddings.shape[1], _weight=embeddings, **kwargs)
        bag.weight.requires_grad_(not freeze)
        return bag


# ---- lazy modules ----------------------------------------------------------------------------------------------
class LazyModuleMixin:
    """Infers the input size on the first call, builds ``cls_to_become`` and becomes it (PyTorch's mechanism).

    Parameters keep their identity: an optimizer made before the first call updates the materialized ones.
    """

    cls_to_become: type | None = None

    def has_uninitialized_params(self) -> bool:
        return any(isinstance(p, UninitializedParameter) for p in self._parameters.values())

    def initialize_parameters(self, *args: Any, **kwargs: Any) -> None:
        placeholders = [t for t in list(self._parameters.values()) + list(self._buffers.values())
                        if isinstance(t, (UninitializedParameter, UninitializedBuffer))]
        if placeholders:  # built in the placeholders' dtype, as torch materializes them (after .double(): float64)
            for spec in (self.__dict__.get("_factory"), self.__dict__.get("_spec")):
                if spec is not None and "dtype" in spec:
                    spec["dtype"] = placeholders[0].dtype
        real = self._build(args[0])
        for name, p in list(self._parameters.items()):
            new = real._parameters.get(name)
            if new is None or p is None:
                continue
            if isinstance(p, UninitializedParameter):
                p.materialize(tuple(new.shape), dtype=new.dtype)
                with no_grad():
                    p.copy_(new)
            elif tuple(p.shape) == (0,) != tuple(new.shape):  # saved before its first call: written empty
                with no_grad():
                    p.data = new.detach().to(p.dtype)
            elif tuple(p.shape) != tuple(new.shape):  # loaded from a checkpoint that does not fit this input
                raise RuntimeError(f"{type(self).__name__}: the parameter '{name}' loaded with shape {tuple(p.shape)} "
                                   f"does not fit the first input, which needs {tuple(new.shape)}")
            real._parameters[name] = p  # the loaded (or materialized) parameter keeps its identity
        for name, b in list(self._buffers.items()):
            new = real._buffers.get(name)
            if new is None or b is None:
                continue
            if isinstance(b, UninitializedBuffer):
                b.materialize(tuple(new.shape), dtype=b.dtype)
                b._data[...] = new._data
            elif tuple(b.shape) == (0,) != tuple(new.shape):  # saved before its first call: written empty
                b = new
            elif tuple(b.shape) != tuple(new.shape):
                raise RuntimeError(f"{type(self).__name__}: the buffer '{name}' loaded with shape {tuple(b.shape)} "
                                   f"does not fit the first input, which needs {tuple(new.shape)}")
            real._buffers[name] = b  # loaded running statistics (and num_batches_tracked) are kept
        training = self.training
        self.__dict__.update(real.__dict__)
        self.__class__ = type(real)
        self.train(training)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # still lazy (a loaded checkpoint may have filled every parameter): become the real module now
        self.initialize_parameters(*args, **kwargs)
        return Module.__call__(self, *args, **kwargs)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: Any) -> None:
        """PyTorch's lazy load hook: an uninitialized parameter found in ``state_dict`` takes its shape (d2l loads
        ``MLP`` weights into a fresh ``LazyLinear`` model before any forward)."""
        for name, p in list(self._parameters.items()) + list(self._buffers.items()):
            value = state_dict.get(prefix + name)
            # (a lazy model's own state_dict holds its placeholders as empty tensors: they stay placeholders)
            if isinstance(p, (UninitializedParameter, UninitializedBuffer)) and value is not None \
                    and hasattr(value, "shape") and tuple(value.shape) != (0,):
                p.materialize(tuple(value.shape), dtype=getattr(value, "dtype", None))
        Module._load_from_state_dict(self, state_dict, prefix, *args)


class LazyLinear(LazyModuleMixin, Module):
    def __init__(self, out_features: int, bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.out_features, self._bias, self._factory = out_features, bias, {"device": device, "dtype": dtype}
        self.in_features = 0
        self.weight = UninitializedParameter()
        if bias:
            self.bias = UninitializedParameter()
        else:
            self.register_parameter("bias", None)

    def _build(self, input: Tensor) -> Module:
        return Linear(input.shape[-1], self.out_features, self._bias, **self._factory)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self._bias}"


def _lazy_conv(name: str, target: str, transposed: bool) -> type:
    # torch 2.13's signatures, parameter for parameter (the target class is built from them on the first input)
    if transposed:
        def __init__(self: Any, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                     padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
            _lazy_conv_init(self, out_channels, bias, dict(
                kernel_size=kernel_size, stride=stride, padding=padding, output_padding=output_padding,
                groups=groups, bias=bias, dilation=dilation, padding_mode=padding_mode, device=device, dtype=dtype))
    else:
        def __init__(self: Any, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,  # noqa: F811
                     dilation: Any = 1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                     device: Any = None, dtype: Any = None) -> None:
            _lazy_conv_init(self, out_channels, bias, dict(
                kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation, groups=groups,
                bias=bias, padding_mode=padding_mode, device=device, dtype=dtype))

    def extra_repr(self: Any) -> str:  # torch prints the target class's fields with in_channels 0
        return _lazy_extra_repr(target, 0, self.out_channels, **self._spec)

    def _build(self: Any, input: Tensor) -> Module:
        dims = int(target[-2])
        in_channels = input.shape[1] if input.ndim == dims + 2 else input.shape[0]
        from ember import nn  # the target class by name; ember.nn imports this module

        return getattr(nn, target)(in_channels, self.out_channels, **self._spec)

    return type(name, (LazyModuleMixin, Module), {"__init__": __init__, "_build": _build, "__module__": __name__,
                                                  "extra_repr": extra_repr,
                                                  "__doc__": f"``{target}`` whose in_channels come from the first "
                                                             "input."})


def _lazy_extra_repr(target: str, *args: Any, **kwargs: Any) -> str:
    """The printout fields of ``target(*args, **kwargs)`` (torch's lazy modules are their target class with 0
    input features until the first call)."""
    import warnings

    cls = globals().get(target) or getattr(_conv, target, None) or getattr(_normalization, target)
    try:
        with warnings.catch_warnings():  # (0-sized weights: initializers may warn about zero fans)
            warnings.simplefilter("ignore")
            return cls(*args, **kwargs).extra_repr()
    except Exception:  # (a target that refuses 0 features: print no fields rather than fail)
        return ""


def _lazy_conv_init(self: Any, out_channels: int, bias: bool, spec: dict) -> None:
    Module.__init__(self)
    self._spec = spec
    self.out_channels = out_channels
    self.weight = UninitializedParameter()
    if bias:
        self.bias = UninitializedParameter()
    else:
        self.register_parameter("bias", None)


LazyConv1d = _lazy_conv("LazyConv1d", "Conv1d", False)
LazyConv2d = _lazy_conv("LazyConv2d", "Conv2d", False)
LazyConv3d = _lazy_conv("LazyConv3d", "Conv3d", False)
LazyConvTranspose1d = _lazy_conv("LazyConvTranspose1d", "ConvTranspose1d", True)
LazyConvTranspose2d = _lazy_conv("LazyConvTranspose2d", "ConvTranspose2d", True)
LazyConvTranspose3d = _lazy_conv("LazyConvTranspose3d", "ConvTranspose3d", True)


def _lazy_norm(name: str, target: str) -> type:
    def __init__(self: Any, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        Module.__init__(self)
        self._spec = dict(eps=eps, momentum=momentum, affine=affine, track_running_stats=track_running_stats,
                          device=device, dtype=dtype, bias=bias)
        self.num_features = 0
        if affine:
            self.weight = UninitializedParameter()
            if bias:
                self.bias = UninitializedParameter()
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:  # torch's placeholders, so a trained norm's checkpoint loads strictly
            self.register_buffer("running_mean", UninitializedBuffer(dtype=dtype))
            self.register_buffer("running_var", UninitializedBuffer(dtype=dtype))
            self.register_buffer("num_batches_tracked", creation.tensor(0, dtype=int64))
        else:
            for key in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(key, None)

    def has_uninitialized_params(self: Any) -> bool:
        return "_spec" in self.__dict__ and type(self).__name__.startswith("Lazy")

    def extra_repr(self: Any) -> str:  # torch prints the target class's fields with num_features 0
        return _lazy_extra_repr(target, 0, **self._spec) if "_spec" in self.__dict__ else ""

    def _build(self: Any, input: Tensor) -> Module:
        from ember import nn  # the target class by name; ember.nn imports this module

        cls = getattr(nn, target)
        channels = input.shape[1] if input.ndim in (cls._expected_dims[-1],) or input.ndim > 2 else input.shape[-1]
        if target.startswith("Instance") and input.ndim == cls._expected_dims[0]:
            channels = input.shape[0]
        return cls(channels, **self._spec)

    return type(name, (LazyModuleMixin, Module), {"__init__": __init__, "_build": _build, "__module__": __name__,
                                                  "_version": 2,  # the norms' (_NormBase) state version
                                                  "has_uninitialized_params": has_uninitialized_params,
                                                  "extra_repr": extra_repr,
                                                  "__doc__": f"``{target}`` whose num_features come from the "
                                                             "first input."})


LazyBatchNorm1d = _lazy_norm("LazyBatchNorm1d", "BatchNorm1d")
LazyBatchNorm2d = _lazy_norm("LazyBatchNorm2d", "BatchNorm2d")
LazyBatchNorm3d = _lazy_norm("LazyBatchNorm3d", "BatchNorm3d")
LazyInstanceNorm1d = _lazy_norm("LazyInstanceNorm1d", "InstanceNorm1d")
LazyInstanceNorm2d = _lazy_norm("LazyInstanceNorm2d", "InstanceNorm2d")
LazyInstanceNorm3d = _lazy_norm("LazyInstanceNorm3d", "InstanceNorm3d")


class Container(Module):
    """Deprecated base class of PyTorch's old containers: submodules given as keyword arguments."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        for key, value in kwargs.items():
            self.add_module(key, value)


def factory_kwargs(kwargs: dict | None) -> dict:
    """``torch.nn.factory_kwargs``: the device/dtype keyword arguments of a module constructor."""
    if kwargs is None:
        return {}
    unexpected = set(kwargs) - {"device", "dtype", "memory_format", "factory_kwargs"}
    if unexpected:
        raise TypeError(f"unexpected kwargs {sorted(unexpected)}")
    out = {k: kwargs[k] for k in ("device", "dtype", "memory_format") if kwargs.get(k) is not None}
    out.update(kwargs.get("factory_kwargs") or {})
    return out


__all__ = [
    "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ReflectionPad1d",
    "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
    "CircularPad1d", "CircularPad2d", "CircularPad3d", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
    "RMSNorm", "LocalResponseNorm", "CrossMapLRN2d", "SyncBatchNorm", "ConvTranspose1d", "ConvTranspose3d",
    "PixelShuffle", "PixelUnshuffle", "ChannelShuffle", "Fold", "Unfold", "MaxUnpool1d", "MaxUnpool2d",
    "MaxUnpool3d", "LPPool1d", "LPPool2d", "LPPool3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
    "AdaptiveMaxPool3d", "Hardshrink", "Softshrink", "RReLU", "Softmax2d", "Dropout3d", "FeatureAlphaDropout",
    "CosineSimilarity", "PairwiseDistance", "GaussianNLLLoss", "MultiLabelSoftMarginLoss",
    "TripletMarginWithDistanceLoss", "CTCLoss", "NLLLoss2d", "EmbeddingBag", "UninitializedParameter",
    "UninitializedBuffer", "LazyModuleMixin", "LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d",
    "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d",
    "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d", "Container",
    "factory_kwargs",
]
