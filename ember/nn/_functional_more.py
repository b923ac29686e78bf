"""More of ``torch.nn.functional``, written as compositions of ember ops (autograd, tracing and export
follow): shuffles, shrinks, in-place activations, LP pooling, adaptive 1-D/3-D pooling, unpooling, fold,
transposed 1-D/3-D convolutions, local response norm, more losses, embedding_bag, CTC loss, affine_grid,
gumbel_softmax.

Example:
    >>> import ember
    >>> F = ember.nn.functional
    >>> F.pixel_shuffle(ember.arange(8.).reshape(1, 4, 1, 2), 2).shape
    ember.Size([1, 1, 2, 4])
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import numpy as np

from ember import creation, random as ember_random
from ember.creation import arange, full_like, linspace, ones_like, rand, rand_like, tensor, zeros, zeros_like
from ember.device import to_device
from ember.dtypes import float64, int64
from ember.ops import dispatch, grad_join, overlap, pooling, reductions, views
from ember.ops.elementwise import clamp, isfinite, isinf, log, minimum, relu, sign, where
from ember.ops.extra_math import meshgrid
from ember.ops.reductions import logsumexp, norm
from ember.ops.views import cat, flip, index_select, narrow, scatter, scatter_add, stack
from ember.ops.piecewise_linear import piecewise_linear
from ember.ops.nn_ops import dropout3d  # noqa: F401  (listed in __all__; lives with dropout1d/2d)
from ember.tensor import Tensor

__all__ = [
    "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle", "hardshrink", "softshrink",
    "rrelu", "rrelu_", "relu_", "elu_", "leaky_relu_", "hardtanh_", "celu_", "selu_", "threshold_", "dropout3d",
    "feature_alpha_dropout", "lp_pool1d", "lp_pool2d", "lp_pool3d", "adaptive_max_pool1d", "adaptive_avg_pool3d",
    "adaptive_max_pool3d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices", "max_pool1d_with_indices", "max_pool2d_with_indices",
    "max_pool3d_with_indices", "max_unpool1d", "max_unpool3d", "fold", "conv_transpose1d", "conv_transpose3d",
    "conv_tbc", "local_response_norm", "gaussian_nll_loss", "multilabel_soft_margin_loss",
    "triplet_margin_with_distance_loss", "embedding_bag", "ctc_loss", "pdist", "affine_grid", "gumbel_softmax",
]


def _F() -> Any:
    from ember.nn import functional  # the whole namespace: ember.nn.functional star-imports this module

    return functional


def _tuple(value: Any, n: int) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


# ---- rearrangements --------------------------------------------------------------------------------------
def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C*r^2, H, W) -> (*, C, H*r, W*r)."""
    r = int(upscale_factor)
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    x = input.reshape(*batch, c // (r * r), r, r, h, w)
    n = len(batch)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return _input_format(_fresh(x.reshape(*batch, c // (r * r), h * r, w * r), input), input)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H*r, W*r) -> (*, C*r^2, H, W)."""
    r = int(downscale_factor)
    *batch, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, got "
                           f"({h}, {w}) and {r}")
    x = input.reshape(*batch, c, h // r, r, w // r, r)
    n = len(batch)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return _input_format(_fresh(x.reshape(*batch, c * r * r, h // r, w // r), input), input)


def _fresh(out: Tensor, input: Tensor) -> Tensor:
    """``out`` in memory of its own: torch's pixel_(un)shuffle always copies, while the reshapes above are views
    when the permutation moves only size-1 dims (a factor of 1, 1x1 planes); a write into the result must not
    reach ``input``."""
    return out.clone() if overlap.status(out, input) != "no" else out


def _input_format(out: Tensor, input: Tensor) -> Tensor:
    """``out`` laid out in ``input``'s suggested memory format (channels-last stays channels-last), as torch's CPU
    pixel_shuffle/pixel_unshuffle/channel_shuffle kernels write it; row-major otherwise."""
    layout = views.suggest_memory_format(input) if input.ndim == 4 and out.ndim == 4 else None
    return views.contiguous(out, layout) if layout else out


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    n, c = input.shape[0], input.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    rest = tuple(input.shape[2:])
    return _input_format(input.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(n, c, *rest), input)


native_channel_shuffle = channel_shuffle


# ---- activations ---------------------------------------------------------------------------------------
def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, else 0; NaN passes through (torch's test is ``-lambd <= x <= lambd``)."""
    if input.dtype.is_floating_point:  # one record: its gradient requires grad under create_graph, as torch's
        return piecewise_linear(input, "hardshrink", lambd)
    return where((input >= -lambd) & (input <= lambd), zeros_like(input), input)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above lambd, x + lambd below -lambd, else 0 (``x * 0``: NaN stays NaN, as torch)."""
    if lambd < 0:
        raise RuntimeError(f"softshrink: lambda must be greater or equal to 0, but found to be {lambd}.")
    if input.dtype.is_floating_point:
        return piecewise_linear(input, "softshrink", lambd)
    return where(input > lambd, input - lambd, where(input < -lambd, input + lambd, input * 0))


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False, *, generator: Any = None) -> Tensor:
    """Randomized leaky ReLU: a slope drawn from U(lower, upper) per element in training, their mean in eval."""
    if training and not dispatch.is_symbolic(input):
        # PyTorch draws one double uniform per non-positive element, in order (positives keep slope 1)
        host = input.detach().cpu().numpy()
        negative = ~(host > 0) & ~np.isnan(host)
        noise = np.ones(host.shape, dtype=host.dtype)
        noise[negative] = ember_random.sample_uniform((int(negative.sum()),), float64, to_device("cpu"), generator,
                                                      float(lower), float(upper)).astype(host.dtype)
        slope = tensor(noise, device=input.device)
    elif training:
        slope = rand(input.shape, dtype=input.dtype, device=input.device, generator=generator) * (upper - lower) + lower
    else:
        slope = (lower + upper) / 2
    if not training and input.dtype.is_floating_point:  # eval: torch's leaky_relu (its backward node)
        return _F().leaky_relu(input, slope, inplace=inplace)
    out = where(input > 0, input, input * slope)  # slope at 0 too (torch's leaky_relu gradient)
    return input.copy_(out) if inplace else out


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
           generator: Any = None) -> Tensor:
    return rrelu(input, lower, upper, training, inplace=True, generator=generator)


def _inplace(name: str) -> Any:
    def function(input: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return input.copy_(getattr(_F(), name)(input, *args, **kwargs))

    function.__name__ = name + "_"
    function.__doc__ = f"In-place ``{name}``: writes ``F.{name}(input, ...)`` into ``input``."
    return function


relu_ = _inplace("relu")
elu_ = _inplace("elu")


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """In-place ``leaky_relu`` (through ``inplace=True``: the record keeps ``input``, which a plain copy_ changes)."""
    return _F().leaky_relu(input, negative_slope, inplace=True)




def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place ``hardtanh`` (through ``inplace=True``: a plain copy_ changed the input its record keeps, and
    backward raised "modified by an inplace operation" where torch's hardtanh_ differentiates)."""
    return _F().hardtanh(input, min_val, max_val, inplace=True)


celu_ = _inplace("celu")
selu_ = _inplace("selu")


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place ``threshold`` (through ``inplace=True``: the record keeps ``input``, which a plain copy_ changes)."""
    return _F().threshold(input, threshold, value, inplace=True)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Alpha dropout of whole channels (SELU networks): masked channels take SELU's negative saturation."""
    if not training or p == 0:
        return input
    alpha_p = -1.7580993408473766
    keep_shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    # torch's draws: one bernoulli_(1 - p) noise per (sample, channel), as alpha_dropout's per element
    keep = creation._wrap_array(ember_random.sample_bernoulli(keep_shape, input.dtype, input.device, None, 1.0 - p),
                                input._device)
    a = ((1 - p) * (1 + p * alpha_p ** 2)) ** -0.5
    b = -a * alpha_p * p
    out = (input * keep + alpha_p * (1 - keep)) * a + b
    return input.copy_(out) if inplace else out


# ---- pooling ---------------------------------------------------------------------------------------------------
def _lp_pool(input: Tensor, norm_type: float, kernel: tuple, stride: Any, ceil_mode: bool, pool: Any) -> Tensor:
    stride = kernel if stride is None else stride
    out = pool(input.pow(norm_type), kernel, stride, 0, ceil_mode)
    return (sign(out) * relu(out.abs())).mul(math.prod(kernel)).pow(1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False) -> Tensor:
    return _lp_pool(input, norm_type, _tuple(kernel_size, 1), stride, ceil_mode, _F().avg_pool1d)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False) -> Tensor:
    return _lp_pool(input, norm_type, _tuple(kernel_size, 2), stride, ceil_mode, _F().avg_pool2d)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False) -> Tensor:
    return _lp_pool(input, norm_type, _tuple(kernel_size, 3), stride, ceil_mode, _F().avg_pool3d)


def _adaptive(input: Tensor, output_size: Any, dims: int, reduce: str) -> Any:
    """Adaptive average pooling over the last ``dims`` dims: cell i covers [floor(i*L/out), ceil((i+1)*L/out))."""
    sizes = tuple(input.shape[-dims:])
    out_sizes = tuple(s if o is None else int(o) for s, o in zip(sizes, _tuple(output_size, dims)))
    x = input
    for axis in range(dims):
        d = input.ndim - dims + axis
        length, out = sizes[axis], out_sizes[axis]
        cells = []
        for i in range(out):
            start, end = (i * length) // out, -((-(i + 1) * length) // out)
            cells.append(narrow(x, d, start, end - start).mean(dim=d, keepdim=True))
        x = cat(cells, dim=d)
    # torch's adaptive_avg_pool backward takes self (its 1x1 output is a mean, whose backward does not)
    if all(o == 1 for o in out_sizes):
        return x
    return grad_join.curvature_link(x, input, f"AdaptiveAvgPool{dims}DBackward0")


def _max_indices_flat(input: Tensor, output_size: Any, dims: int) -> tuple:
    """Values and flat indices (into the pooled dims) of adaptive max pooling, computed per output cell."""
    sizes = tuple(input.shape[-dims:])
    out_sizes = tuple(s if o is None else int(o) for s, o in zip(sizes, _tuple(output_size, dims)))
    lead = tuple(input.shape[:-dims])
    flat = input.reshape(*lead, -1)
    import itertools

    position = arange(math.prod(sizes), device=input.device).reshape(sizes)
    values, indices = [], []
    for cell in itertools.product(*[range(o) for o in out_sizes]):
        bounds = [((i * L) // o, -((-(i + 1) * L) // o)) for i, L, o in zip(cell, sizes, out_sizes)]
        pos = position[tuple(slice(a, b) for a, b in bounds)].reshape(-1)
        window = index_select(flat, flat.ndim - 1, pos)
        v, k = reductions.max(window, dim=-1)
        values.append(v)
        indices.append(pos[k])
    shape = lead + out_sizes
    # torch's adaptive_max_pool backward takes self: under create_graph the gradient requires grad (zero curvature)
    values = grad_join.curvature_link(stack(values, dim=-1).reshape(shape), input,
                                      f"AdaptiveMaxPool{dims}DBackward0" if dims > 1 else None)
    return values, stack(indices, dim=-1).reshape(shape)


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    values, indices = _max_indices_flat(input, output_size, 1)
    return (values, indices) if return_indices else values


def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    values, indices = _max_indices_flat(input, output_size, 3)
    return (values, indices) if return_indices else values


# The *_with_indices forms return (values, indices) whatever return_indices says (its default is False, as
# torch's signature).
def adaptive_max_pool1d_with_indices(input: Tensor, output_size: Any, return_indices: bool = False) -> tuple:
    return _max_indices_flat(input, output_size, 1)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size: Any, return_indices: bool = False) -> tuple:
    return _F().adaptive_max_pool2d(input, output_size, return_indices=True)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size: Any, return_indices: bool = False) -> tuple:
    return _max_indices_flat(input, output_size, 3)


def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    return _adaptive(input, output_size, 3, "avg")


def max_pool1d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> tuple:
    return _F().max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def max_pool2d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> tuple:
    return _F().max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def max_pool3d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> tuple:
    return _F().max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def _unpool(input: Tensor, indices: Tensor, kernel: tuple, stride: Any, padding: Any, output_size: Any,
            dims: int) -> Tensor:
    """1-D and 3-D unpooling as the 2-D record on one row of flat positions: its gradient is a gather for every
    input (PyTorch's), also where two windows picked the same position (a scatter's would reach one of them)."""
    stride = kernel if stride is None else _tuple(stride, dims)
    padding = _tuple(padding, dims)
    spatial = tuple(input.shape[-dims:])
    out_spatial = pooling.unpool_output_size(f"max_unpool{dims}d", spatial, kernel, stride, padding, output_size)
    lead = tuple(input.shape[:-dims])
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"max_unpool{dims}d: indices of shape {tuple(indices.shape)} must match input "
                           f"{tuple(input.shape)}")
    rows = input.reshape(*lead, 1, -1)
    if rows.ndim == 3:  # unbatched
        rows = rows.unsqueeze(0)
    total = math.prod(out_spatial)
    out = dispatch.apply(pooling.MAX_POOL2D_BACKWARD, (rows, indices.reshape(rows.shape)),
                         {"input_shape": tuple(rows.shape[:2]) + (1, total), "overlapping": False})
    return out.reshape(*lead, *out_spatial)


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> Tensor:
    return _unpool(input, indices, _tuple(kernel_size, 1), stride, padding, output_size, 1)


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> Tensor:
    return _unpool(input, indices, _tuple(kernel_size, 3), stride, padding, output_size, 3)


def fold(input: Tensor, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
         stride: Any = 1) -> Tensor:
    """col2im: sums the (N, C*kh*kw, L) columns back into (N, C, H, W); the adjoint of ``unfold``."""
    (oh, ow), (kh, kw) = _tuple(output_size, 2), _tuple(kernel_size, 2)
    (dh, dw), (ph, pw), (sh, sw) = _tuple(dilation, 2), _tuple(padding, 2), _tuple(stride, 2)
    batched = input.ndim == 3
    x = input if batched else input.unsqueeze(0)
    n, ckk, length = x.shape
    if ckk % (kh * kw):
        raise RuntimeError(f"fold: expected size of input's dimension 1 to be divisible by the product of "
                           f"kernel_size, but got input.size(1)={ckk} and kernel_size=({kh}, {kw})")
    c = ckk // (kh * kw)
    bh = (oh + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    bw = (ow + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if bh * bw != length:
        raise RuntimeError(f"fold: expected input's dimension 2 to match the calculated number of sliding blocks "
                           f"{bh} * {bw} = {bh * bw}, but got input.size(2)={length}")
    hp, wp = oh + 2 * ph, ow + 2 * pw
    rows = (arange(kh).reshape(kh, 1, 1, 1) * dh + arange(bh).reshape(1, 1, bh, 1) * sh)
    cols = (arange(kw).reshape(1, kw, 1, 1) * dw + arange(bw).reshape(1, 1, 1, bw) * sw)
    target = (rows * wp + cols).reshape(1, 1, -1).expand(n, c, kh * kw * length)
    values = x.reshape(n, c, kh * kw * length)
    canvas = zeros(n, c, hp * wp, dtype=x.dtype, device=x.device)
    out = scatter_add(canvas, 2, target, values).reshape(n, c, hp, wp)
    out = out[:, :, ph:ph + oh, pw:pw + ow]
    return out if batched else out.squeeze(0)


# ---- transposed convolutions ------------------------------------------------------------------------------
def _conv_transpose(input: Tensor, weight: Tensor, bias: Any, stride: Any, padding: Any, output_padding: Any,
                    groups: int, dilation: Any, dims: int) -> Tensor:
    """conv_transpose = the input gradient of conv: dilate the input by the stride, pad by d*(k-1)-p, and
    convolve with the flipped kernel (in/out channels swapped per group)."""
    stride, padding = _tuple(stride, dims), _tuple(padding, dims)
    output_padding, dilation = _tuple(output_padding, dims), _tuple(dilation, dims)
    batched = input.ndim == dims + 2
    x = input if batched else input.unsqueeze(0)
    n, cin = x.shape[:2]
    kernel = tuple(weight.shape[2:])
    cout_g = weight.shape[1]
    spatial = tuple(x.shape[2:])
    if any(op >= max(s, d) for op, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError("conv_transpose: output padding must be smaller than either stride or dilation")
    sizes = [(L - 1) * s - 2 * p + d * (k - 1) + op + 1 for L, s, p, d, k, op in
             zip(spatial, stride, padding, dilation, kernel, output_padding)]
    if any(size < 1 for size in sizes):
        raise RuntimeError(f"conv_transpose{dims}d: Given input size per channel: {spatial}. Calculated output size "
                           f"per channel: {tuple(sizes)}. Output size is too small")
    # 1. dilate by the stride
    if any(s > 1 for s in stride):
        dilated_shape = tuple((L - 1) * s + 1 for L, s in zip(spatial, stride))
        canvas = zeros(n, cin, *dilated_shape, dtype=x.dtype, device=x.device)
        key = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)
        canvas[key] = x
        x = canvas
    # 2. pad (negative widths crop) plus output_padding at the end
    pads: list[int] = []
    for k, d, p, op in reversed(list(zip(kernel, dilation, padding, output_padding))):
        edge = d * (k - 1) - p
        pads += [edge, edge + op]
    x = _F().pad(x, pads)
    # 3. weight (Cin, Cout/g, *k) -> (Cout, Cin/g, *k), flipped
    w = weight.reshape(groups, cin // groups, cout_g, *kernel).transpose(1, 2).reshape(groups * cout_g,
                                                                                        cin // groups, *kernel)
    w = flip(w, tuple(range(2, 2 + dims)))
    conv = {1: _F().conv1d, 2: _F().conv2d, 3: _F().conv3d}[dims]
    out = conv(x, w, bias, 1, 0, dilation, groups)
    return out if batched else out.squeeze(0)


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Any = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 1)


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Any = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 3)


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """Time-batch-channel 1-D convolution: input (T, B, C), weight (k, C, O)."""
    x = input.permute(1, 2, 0)
    w = weight.permute(2, 1, 0)
    return _F().conv1d(x, w, bias, padding=pad).permute(2, 0, 1)


# ---- normalization and losses ----------------------------------------------------------------------------------
def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """Normalize over ``size`` neighbouring channels: x / (k + alpha/n * sum x^2)^beta."""
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if input.numel() == 0:
        return input
    sq = (input * input).unsqueeze(1)
    n, c = input.shape[0], input.shape[1]
    if input.ndim == 3:
        div = _F().pad(sq, (0, 0, size // 2, (size - 1) // 2))
        div = _F().avg_pool2d(div, (size, 1), stride=1).squeeze(1)
    else:
        rest = tuple(input.shape[2:])
        div = sq.reshape(n, 1, c, rest[0], -1)
        div = _F().pad(div, (0, 0, 0, 0, size // 2, (size - 1) // 2))
        div = _F().avg_pool3d(div, (size, 1, 1), stride=1).squeeze(1).reshape(n, c, *rest)
    div = (div * alpha + k) ** beta
    return input / div


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":  # (not the old 'elementwise_mean': torch's Python-level losses refuse it too)
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Any, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean") -> Tensor:
    if not isinstance(var, Tensor):
        var = full_like(input, float(var))
    if var.shape != input.shape:
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1):
            raise ValueError("var is of incorrect size")
    if bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    # As torch: clamp for stability without changing the gradient (torch clamps in place under no_grad).
    var = var + (clamp(var, min=eps) - var).detach()
    loss = 0.5 * (log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Tensor:
    loss = -(target * _F().logsigmoid(input) + (1 - target) * _F().logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(dim=-1) / input.shape[-1]
    return _reduce(loss, reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function: Any = None, margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean") -> Tensor:
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} instead")
    dist = distance_function if distance_function is not None else _F().pairwise_distance
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        d_neg = minimum(d_neg, dist(positive, negative))
    return _reduce(clamp(margin + d_pos - d_neg, min=0), reduction)  # PyTorch's order (1 + 1e30 - 1e30 is 0)


def pdist(input: Tensor, p: float = 2) -> Tensor:
    """Distances between all row pairs i < j of an (N, M) matrix, in row-major order."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    n = input.shape[0]
    import numpy as np

    rows, cols = np.triu_indices(n, 1)
    a = index_select(input, 0, tensor(rows.astype(np.int64)))
    b = index_select(input, 0, tensor(cols.astype(np.int64)))
    return norm(a - b, p=p, dim=1)


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None, max_norm: Any = None,
                  norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """Sum/mean/max of the embeddings of each bag (2-D ``input``: one bag per row; 1-D: bags from ``offsets``)."""
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                                  "on GitHub.")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             "fixed length sequences.")
        bags = [(r * input.shape[1], (r + 1) * input.shape[1]) for r in range(input.shape[0])]
        flat = input.reshape(-1)
        psw = per_sample_weights.reshape(-1) if per_sample_weights is not None else None
    else:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        starts = [int(o) for o in offsets.tolist()]
        ends = starts[1:] + [input.shape[0]]
        if include_last_offset:
            starts, ends = starts[:-1], ends[:-1]
        bags = list(zip(starts, ends))
        flat = input
        psw = per_sample_weights
    emb = _F().embedding(flat, weight, padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type)
    keep = None if padding_idx is None else (flat != padding_idx).to(weight.dtype).unsqueeze(-1)
    if psw is not None:
        emb = emb * psw.unsqueeze(-1)
    if keep is not None:
        emb = emb * keep
    rows = []
    for a, b in bags:
        part = emb[a:b]
        if b <= a:
            rows.append(zeros(weight.shape[1], dtype=weight.dtype))
        elif mode == "sum":
            rows.append(part.sum(dim=0))
        elif mode == "mean":
            count = keep[a:b].sum() if keep is not None else b - a
            rows.append(part.sum(dim=0) / (clamp(count, min=1) if isinstance(count, Tensor) else count))
        elif keep is None:
            rows.append(part.max(dim=0).values)
        else:  # a bag holding only padding_idx is a zero row (PyTorch's), not -inf
            best = where(keep[a:b] > 0, part, full_like(part, -math.inf)).max(dim=0).values
            rows.append(where(keep[a:b].sum() > 0, best, zeros_like(best)))
    return stack(rows) if rows else zeros(0, weight.shape[1], dtype=weight.dtype)


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """Connectionist temporal classification loss: the forward (alpha) recursion in log space, per sample.

    The gradient follows PyTorch's convention (it presumes ``log_probs`` is a log_softmax output).

    ``log_probs`` (T, N, C) (or (T, C)), ``targets`` (N, S) padded or 1-D concatenated.
    """
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    n = lp.shape[1]
    in_lens = [int(v) for v in (input_lengths.tolist() if isinstance(input_lengths, Tensor) else
                                ([input_lengths] if isinstance(input_lengths, int) else input_lengths))]
    tg_lens = [int(v) for v in (target_lengths.tolist() if isinstance(target_lengths, Tensor) else
                                ([target_lengths] if isinstance(target_lengths, int) else target_lengths))]
    tg = targets.unsqueeze(0) if unbatched and targets.ndim == 1 else targets
    losses = []
    offset = 0
    # A very negative finite "log 0": logsumexp over all-impossible states then has a finite (zero-weight)
    # gradient instead of NaN; an impossible alignment is turned back into inf below.
    neg_inf = -1e30
    for b in range(n):
        length = tg_lens[b]
        if tg.ndim == 2:
            label = [int(v) for v in tg[b, :length].tolist()]
        else:
            label = [int(v) for v in tg[offset:offset + length].tolist()]
            offset += length
        ext = [blank]
        for c in label:
            ext += [c, blank]
        s = len(ext)
        ext_t = tensor(ext, dtype=int64)
        can_skip = tensor([k >= 2 and ext[k] != blank and ext[k] != ext[k - 2] for k in range(s)])
        lp_b = lp[:, b, :]
        emit = index_select(lp_b, 1, ext_t)  # (T, S)
        first = creation.full((s,), neg_inf, dtype=lp.dtype)
        init_mask = tensor([k < 2 for k in range(s)])
        alpha = where(init_mask, emit[0], first)
        for t in range(1, in_lens[b]):
            stay = alpha
            step = cat([creation.full((1,), neg_inf, dtype=lp.dtype), alpha[:-1]])
            skip = cat([creation.full((min(2, s),), neg_inf, dtype=lp.dtype), alpha[:-2]])  # s = 1: empty target
            skip = where(can_skip, skip, full_like(skip, neg_inf))
            alpha = logsumexp(stack([stay, step, skip]), dim=0) + emit[t]
        tail = alpha[-2:] if s > 1 else alpha[-1:]
        nll = -logsumexp(tail, dim=0)
        nll = where(nll > 1e29, full_like(nll, math.inf), nll)
        # PyTorch's CTC backward assumes log_probs come from log_softmax and folds that Jacobian in: its
        # gradient is the true one plus exp(log_probs) over the valid steps. A zero-valued term adds it.
        valid = lp_b[:in_lens[b]]
        nll = nll + (valid.detach().exp() * (valid - valid.detach())).sum()
        if zero_infinity:
            nll = where(isinf(nll), zeros_like(nll), nll)
        elif bool(isinf(nll.detach())):
            # an impossible alignment: PyTorch's gradient is NaN over the sample's valid steps. sqrt(z) * 0 at
            # z = 0 is 0 with slope 0 * inf = NaN, and z = sum(lp - lp.detach()) carries it to each of those entries.
            zero = where(isfinite(valid), valid - valid.detach(), zeros_like(valid)).sum()
            nll = nll + zero.sqrt() * 0.0
        losses.append(nll)
    loss = stack(losses)
    if reduction == "mean":
        lens = tensor([max(v, 1) for v in tg_lens], dtype=loss.dtype)
        return (loss / lens).mean()
    if reduction == "sum":
        return loss.sum()
    return loss[0] if unbatched else loss


def affine_grid(theta: Tensor, size: Sequence[int], align_corners: bool | None = None) -> Tensor:
    """Sampling grids (N, H, W, 2) (or (N, D, H, W, 3)) for affine matrices ``theta`` (N, 2, 3) / (N, 3, 4)."""
    if align_corners is None:  # PyTorch's warning, word for word (grid_sample gives the same one)
        warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                      "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                      "grid_sample for details.", UserWarning, stacklevel=2)
    return affine_grid_generator(theta, size, bool(align_corners))


def affine_grid_generator(theta: Tensor, size: Sequence[int], align_corners: bool) -> Tensor:
    """``torch.affine_grid_generator``: ``affine_grid`` without the default's warning."""
    align = bool(align_corners)

    def base(steps: int) -> Tensor:
        if steps <= 1:
            return zeros(max(steps, 1), dtype=theta.dtype)
        line = linspace(-1, 1, steps, dtype=theta.dtype)
        return line if align else line * (steps - 1) / steps

    if len(size) == 4:
        n, _, h, w = size
        ys, xs = meshgrid(base(h), base(w), indexing="ij")
        grid = stack([xs, ys, ones_like(xs)], dim=-1).reshape(1, h * w, 3)
        return (grid @ theta.transpose(1, 2)).reshape(n, h, w, 2)
    if len(size) == 5:
        n, _, d, h, w = size
        zs, ys, xs = meshgrid(base(d), base(h), base(w), indexing="ij")
        grid = stack([xs, ys, zs, ones_like(xs)], dim=-1).reshape(1, d * h * w, 4)
        return (grid @ theta.transpose(1, 2)).reshape(n, d, h, w, 3)
    raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                              f"respectively. Got size {list(size)}.")


def gumbel_softmax(logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    if dispatch.is_symbolic(logits):  # inside a graph: a random node, drawn anew at each run
        gumbels = -log(-log(rand_like(logits)))  # Gumbel(0, 1) = -log(Exp(1))
    else:  # PyTorch's draw: -log of Exp(1) samples, so a seed gives torch's values
        gumbels = -log(creation.empty_like(logits).exponential_())
    y_soft = _F().softmax((logits + gumbels) / tau, dim=dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim=dim, keepdim=True)
    y_hard = zeros_like(logits).scatter(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft
