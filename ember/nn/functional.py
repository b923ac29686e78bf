"""``ember.nn.functional``: PyTorch's ``torch.nn.functional`` on ember ops.

The implementations live with their op families (``ember.ops.nn_ops``, ``conv``, ``pooling``,
``losses``); this module is the public surface, plus ``linear`` and attention.

Example:
    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.linear(ember.ones(2, 3), ember.ones(4, 3), ember.zeros(4)).shape
    ember.Size([2, 4])
"""
from __future__ import annotations

import warnings

import math
from typing import Any

from ember.ops import attention as _attention, dispatch as _dispatch
from ember.ops.conv import conv1d, conv2d, conv_transpose2d  # noqa: F401
from ember.ops.losses import (  # noqa: F401
    binary_cross_entropy, binary_cross_entropy_with_logits, cosine_embedding_loss, cross_entropy,
    hinge_embedding_loss, huber_loss, kl_div, l1_loss, margin_ranking_loss, mse_loss, multi_margin_loss,
    nll_loss, poisson_nll_loss, smooth_l1_loss, soft_margin_loss, triplet_margin_loss,
)
from ember.ops.nn_ops import (  # noqa: F401
    alpha_dropout, batch_norm, celu, cosine_similarity, dropout, dropout1d, dropout2d, elu, embedding, gelu, glu,
    group_norm, hardsigmoid, hardswish, hardtanh, instance_norm, layer_norm, leaky_relu, log_softmax, logsigmoid,
    mish, normalize, one_hot, pad, pairwise_distance, prelu, relu, relu6, rms_norm, selu, sigmoid, silu, softmax,
    softmin, softplus, softsign, tanh, tanhshrink, threshold,
)
from ember.nn._conv3d import avg_pool3d, conv3d, max_pool3d  # noqa: F401
from ember.nn._interpolate import interpolate  # noqa: F401
from ember.nn._grid_sample import grid_sample  # noqa: F401
from ember.nn._losses_extra import multilabel_margin_loss  # noqa: F401
from ember.ops.nn_ops import LINEAR as _LINEAR
from ember.amp.policy import autocast_policy
from ember.backends import cuda_flags as _cuda_flags
from ember import cuda_attention as _cuda_attention
from ember.ops.pooling import (  # noqa: F401
    adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool2d, avg_pool1d, avg_pool2d, max_pool1d, max_pool2d,
    max_unpool2d,
)
from ember.nn._layout_follow import follow_input_layout as _follow_layout

# PyTorch's CPU kernels keep a channels-last input's (or conv weight's) layout in these results (ember/nn/_layout_follow.py)
conv2d = _follow_layout(conv2d, weight_arg=1)
conv_transpose2d = _follow_layout(conv_transpose2d, weight_arg=1)
batch_norm = _follow_layout(batch_norm, strides_rule=False)
group_norm = _follow_layout(group_norm)
max_pool2d = _follow_layout(max_pool2d)
avg_pool2d = _follow_layout(avg_pool2d)


@autocast_policy("lower")
def linear(input: Any, weight: Any, bias: Any = None) -> Any:
    """``input @ weight.T + bias``; leading dims are flattened so the product is one GEMM."""
    try:  # the common case (an nn.Linear layer's call), its checks on the arrays at once (no Tensor properties)
        x, w = input._data, weight._data
        b = None if bias is None else bias._data
    except AttributeError:  # not tensors: the checks below name what is wrong
        x = None
    if x is not None and w.ndim == 2 and x.ndim >= 2 and x.shape[-1] == w.shape[1] and x.dtype == w.dtype and (
            b is None or (b.ndim == 1 and b.dtype == w.dtype)):
        return _dispatch.apply(_LINEAR, (input, weight) if bias is None else (input, weight, bias))
    if weight.ndim not in (1, 2):
        raise RuntimeError(f"linear: weight must be 1-D or 2-D (out_features, in_features), got {tuple(weight.shape)}")
    in_features = weight.shape[-1]
    if input.ndim == 0 or input.shape[-1] != in_features:
        raise RuntimeError(
            f"linear: mat1 and mat2 shapes cannot be multiplied (input {tuple(input.shape)} and weight.T "
            f"{tuple(weight.shape[::-1])}): the last dim of input must equal in_features={in_features}")
    if input.dtype is not weight.dtype or (bias is not None and bias.dtype is not weight.dtype):
        raise RuntimeError(f"linear: input ({input.dtype}), weight ({weight.dtype})"
                           f"{'' if bias is None else f' and bias ({bias.dtype})'} must have the same dtype; "
                           "convert with .to(dtype)")
    if weight.ndim == 1 or input.ndim == 1 or (bias is not None and bias.ndim != 1):
        out = input.matmul(weight.mT if weight.ndim == 2 else weight)
        return out + bias if bias is not None else out
    args = (input, weight) if bias is None else (input, weight, bias)
    return _dispatch.apply(_LINEAR, args)


@autocast_policy("native")
def bilinear(input1: Any, input2: Any, weight: Any, bias: Any = None) -> Any:
    """``x1^T W_k x2 + b_k`` for each output k; weight is (out, in1, in2)."""
    lead = tuple(input1.shape[:-1])
    x1 = input1.reshape(-1, input1.shape[-1])
    x2 = input2.reshape(-1, input2.shape[-1])
    out = einsum("bi,oij,bj->bo", x1, weight, x2).reshape(lead + (weight.shape[0],))
    return out + bias if bias is not None else out


@autocast_policy("lower")
def scaled_dot_product_attention(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False) -> Any:
    """softmax(Q K^T * scale + mask) V over the last two dims (PyTorch semantics).

    A boolean ``attn_mask`` marks positions that may be attended (True = keep); a float mask is
    added to the scores. ``is_causal`` masks the strict upper triangle.
    """

    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: incompatible shapes query {tuple(query.shape)}, key "
                           f"{tuple(key.shape)}, value {tuple(value.shape)} (need query[-1] == key[-1] and "
                           "key[-2] == value[-2])")
    if is_causal and attn_mask is not None:
        raise RuntimeError("scaled_dot_product_attention: pass either attn_mask or is_causal=True, not both")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        repeats = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(repeats, -3) if hasattr(key, "repeat_interleave") else _repeat_heads(key, repeats)
        value = value.repeat_interleave(repeats, -3) if hasattr(value, "repeat_interleave") else _repeat_heads(
            value, repeats)
    if query.device.type == "cuda" and attn_mask is None and dropout_p == 0.0:  # cuDNN's fused attention (gpu22)
        fused = _cuda_attention.cudnn_sdpa(query, key, value, is_causal, scale)
        if fused is not None:
            return fused
    flash = _cpu_backend(query, key, value, dropout_p) == "flash"
    low = query.dtype if query.dtype.is_floating_point and query.dtype.itemsize == 2 else None
    if low is not None and key.dtype is low and value.dtype is low:
        # PyTorch's CPU kernels compute half-precision attention in float32 and round the output once (the math
        # path upcasts; the flash kernel accumulates in float32): ember's composite rounded every step
        wide = [t.to(dtypes.float32) for t in (query, key, value)]
        mask = attn_mask.to(dtypes.float32) if attn_mask is not None and attn_mask.dtype is low else attn_mask
        out = _sdpa_math(*wide, mask, dropout_p, is_causal, scale).to(low)
    else:
        out = _sdpa_math(query, key, value, attn_mask, dropout_p, is_causal, scale)
    # the attention record lays its output out like the query (the flash kernel's layout); the math path's is dense
    return _like_query_layout(out, query) if flash else out.contiguous()


def _cpu_backend(query: Any, key: Any, value: Any, dropout_p: float) -> str | None:
    """The backend PyTorch's CPU dispatcher picks (``sdpa_kernel`` / ``torch.backends.cuda.enable_*_sdp``
    choose among them): its flash kernel for 4-D inputs with equal head dims and no dropout, else the math
    path; neither allowed raises as PyTorch. ember computes both the same way; the flash kernel's output is
    laid out like the query (programs rely on it: ``sdpa(q, k, v).transpose(1, 2).view(B, L, H * D)`` after a
    ``view(B, L, H, D).transpose(1, 2)`` of q), the math path's is contiguous. Other devices: None."""
    if query.device.type != "cpu":
        return None
    flash_ok = (query.ndim == 4 and key.ndim == 4 and value.ndim == 4 and dropout_p == 0.0
                and query.shape[-1] == key.shape[-1] == value.shape[-1] and min(query.shape[-2], key.shape[-2]) > 0
                and query.stride(-1) == 1 and key.stride(-1) == 1 and value.stride(-1) == 1)
    if flash_ok and _cuda_flags.flash_sdp_enabled():
        return "flash"
    if _cuda_flags.math_sdp_enabled():
        return "math"
    raise RuntimeError("scaled_dot_product_attention: No available kernel. Aborting execution. (On the CPU only the "
                       "math backend and, for 4-D inputs with equal head dims and dropout_p=0, the flash backend "
                       "exist; allow one with torch.nn.attention.sdpa_kernel.)")


def _like_query_layout(out: Any, query: Any) -> Any:
    """``out`` (query's shape) laid out densely in query's dimension order, as PyTorch's CPU flash kernel
    allocates its output (``empty_like(query)``: a dense query's strides, else the same order of dimensions)."""
    if query.is_contiguous() or tuple(out.shape) != tuple(query.shape):
        return out
    strides = query.stride()
    order = sorted(range(query.ndim), key=lambda d: -strides[d])  # outermost first (stable for ties)
    if order == list(range(query.ndim)):
        return out
    inverse = [order.index(d) for d in range(query.ndim)]
    return out.permute(order).contiguous().permute(inverse)


def _sdpa_math(query: Any, key: Any, value: Any, attn_mask: Any, dropout_p: float, is_causal: bool,
               scale: float | None) -> Any:
    length, source = query.shape[-2], key.shape[-2]
    factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if _attention.fits(query, key, value, attn_mask, dropout_p):
        return _attention.attention(query, key, value, is_causal, factor)  # one op, fused backward
    scores = matmul(query * factor, key.mT)
    if is_causal:
        keep = ones(length, source, dtype=_bool(), device=query.device).tril()
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))
    elif attn_mask is not None:
        if attn_mask.ndim < 2:
            raise RuntimeError(f"scaled_dot_product_attention: attn_mask must have at least 2 dims (L, S), got shape "
                               f"{tuple(attn_mask.shape)}; reshape it to (1, S) to mask keys for every query")
        if attn_mask.dtype is _bool():
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            scores = scores + attn_mask.to(scores.dtype)
    # PyTorch's _safe_softmax: a query whose every score is -inf (fully masked) attends to nothing (weights 0,
    # output 0, gradient 0) instead of NaN; its scores are zeroed first so no NaN reaches the backward either
    hidden = (scores == float("-inf")).all(-1, keepdim=True)
    weights = softmax(scores.masked_fill(hidden, 0.0), dim=-1).masked_fill(hidden, 0.0)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return matmul(weights, value)


def _bool() -> Any:
    return dtypes.bool_


def _repeat_heads(t: Any, repeats: int) -> Any:
    shape = tuple(t.shape)
    expanded = t.unsqueeze(-3).expand(shape[:-3] + (shape[-3], repeats) + shape[-2:])
    return expanded.reshape(shape[:-3] + (shape[-3] * repeats,) + shape[-2:])


def unfold(input: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> Any:
    """im2col: (N, C, H, W) -> (N, C*kh*kw, L), and unbatched (C, H, W) -> (C*kh*kw, L), as a convolution with an
    identity kernel."""

    if input.ndim not in (3, 4):
        raise RuntimeError(f"unfold: Expected 3D or 4D (batch mode) tensor for input, got shape {tuple(input.shape)}")
    if input.ndim == 3:
        return unfold(input.unsqueeze(0), kernel_size, dilation, padding, stride).squeeze(0)
    (kh, kw), (dh, dw) = pair(kernel_size, 2, "kernel_size", "unfold"), pair(dilation, 2, "dilation", "unfold")
    (ph, pw), (sh, sw) = pair(padding, 2, "padding", "unfold"), pair(stride, 2, "stride", "unfold")
    n, c, h, w = input.shape
    oh, ow = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise RuntimeError(f"unfold: the kernel {(kh, kw)} (dilation {(dh, dw)}) does not fit the padded input "
                           f"{(h + 2 * ph, w + 2 * pw)}: calculated output size ({oh}, {ow}) is too small")
    # Each tap is a strided slice of the padded input: a copy, as PyTorch's im2col (a convolution with an identity
    # kernel multiplied every value by 0 in the other taps: an inf made NaN, -0 became +0)
    x = pad(input, (pw, pw, ph, ph)) if ph or pw else input
    taps = [x[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
            for i in range(kh) for j in range(kw)]
    return stack(taps, 2).reshape(n, c * kh * kw, oh * ow)


def multi_head_attention_forward(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("multi_head_attention_forward: use ember.nn.MultiheadAttention")


def upsample(input: Any, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
             align_corners: Any = None) -> Any:
    """Deprecated alias of :func:`interpolate` (kept because PyTorch still has it)."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Any, size: Any = None, scale_factor: Any = None) -> Any:
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Any, size: Any = None, scale_factor: Any = None) -> Any:
    """Bilinear upsampling with ``align_corners=True`` (the deprecated function's fixed choice)."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)

from ember.nn._functional_more import *  # noqa: E402,F401,F403  (more of torch.nn.functional, in ember ops)
from ember.nn._linear_cross_entropy import linear_cross_entropy  # noqa: E402,F401
from ember.nn._fractional_pool import (  # noqa: E402,F401
    fractional_max_pool2d, fractional_max_pool2d_with_indices, fractional_max_pool3d,
    fractional_max_pool3d_with_indices,
)
from ember.ops import out_arg as _out_arg  # noqa: E402
normalize = _out_arg.with_out(normalize, "normalize")  # its out= was accepted and ignored
from ember import dtypes
from ember.creation import eye, ones
from ember.ops.conv import pair
from ember.ops.views import stack
from ember.ops.linalg import einsum, matmul
