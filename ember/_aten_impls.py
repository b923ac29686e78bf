"""ember's implementations of torch's internal ATen operators that ``__torch_dispatch__`` shows (``nll_loss_forward``,
``_log_softmax_backward_data``, ``threshold_backward``, ...), written in ember's public ops.

They are what ``func(*args)`` runs inside a mode once no level is left (:mod:`ember._dispatch_levels`), and what
``torch.ops.aten.<name>`` calls in user code. Arguments follow torch 2.13's schemas.

Example:
    >>> import ember
    >>> g = ember.ones(2, 3); out = ember.log_softmax(ember.zeros(2, 3), 1)
    >>> IMPLS["_log_softmax_backward_data"](g, out, 1, ember.float32).abs().max().item() < 1e-6
    True
"""
from __future__ import annotations

import sys
from typing import Any

from ember.nn import functional as F
from ember.ops import conv, dispatch, views
from ember.ops.registry import OPS

_REDUCTIONS = ("none", "mean", "sum")


def _ember() -> Any:
    return sys.modules["ember"]


def nll_loss_forward(x: Any, target: Any, weight: Any, reduction: int, ignore_index: int) -> tuple:
    """``(loss, total_weight)``: total_weight is the summed weight of the non-ignored targets (0-d)."""
    loss = F.nll_loss(x, target, weight, ignore_index=ignore_index, reduction=_REDUCTIONS[reduction])
    valid = (target != ignore_index).to(x.dtype)
    if weight is not None:
        valid = valid * weight.to(x.dtype)[target.clamp(min=0)]
    return loss, valid.sum()


def nll_loss_backward(grad: Any, x: Any, target: Any, weight: Any, reduction: int, ignore_index: int,
                      total_weight: Any) -> Any:
    """Gradient of ``nll_loss_forward`` with respect to ``x`` (its log-probabilities)."""
    ember = _ember()
    valid = target != ignore_index
    safe = ember.where(valid, target, 0)
    w = valid.to(x.dtype)
    if weight is not None:
        w = w * weight.to(x.dtype)[safe]
    if reduction == 1:  # mean
        w = w / total_weight
    g = grad if reduction != 0 else grad
    scale = -(w * g)
    out = ember.zeros_like(x)
    dim = 1 if x.ndim > 1 else 0
    return out.scatter(dim, safe.unsqueeze(dim), scale.unsqueeze(dim)) if x.ndim > 1 else out.scatter(
        0, safe.reshape(1), scale.reshape(1))


def _log_softmax_backward_data(grad: Any, output: Any, dim: int, input_dtype: Any) -> Any:
    return grad - output.exp() * grad.sum(dim, keepdim=True)


def _softmax_backward_data(grad: Any, output: Any, dim: int, input_dtype: Any) -> Any:
    return output * (grad - (grad * output).sum(dim, keepdim=True))


def sigmoid_backward(grad: Any, output: Any) -> Any:
    return grad * output * (1 - output)


def tanh_backward(grad: Any, output: Any) -> Any:
    return grad * (1 - output * output)


def gelu_backward(grad: Any, x: Any, approximate: str = "none") -> Any:
    ember = _ember()
    with ember.enable_grad():
        leaf = x.detach().requires_grad_()
        (g,) = ember.autograd.grad(F.gelu(leaf, approximate=approximate), leaf, grad)
    return g


def native_layer_norm(x: Any, normalized_shape: Any, weight: Any, bias: Any, eps: float) -> tuple:
    """``(out, mean, rstd)``, mean and rstd of shape ``x.shape[:-k] + (1,) * k`` (ember's layer_norm record)."""
    args = (x,) + tuple(t for t in (weight, bias) if t is not None)
    return dispatch.apply(OPS["layer_norm"], args, {"count": len(normalized_shape), "eps": float(eps),
                                                     "has_weight": weight is not None})


def native_layer_norm_backward(grad_out: Any, x: Any, normalized_shape: Any, mean: Any, rstd: Any, weight: Any,
                               bias: Any, output_mask: Any) -> tuple:
    """``(grad_input, grad_weight, grad_bias)`` (ember's layer_norm_backward record; None where the mask says)."""
    args = (grad_out, x, mean, rstd) + ((weight,) if weight is not None else ())
    grads = dispatch.apply(OPS["layer_norm_backward"], args, {"count": len(normalized_shape)})
    return tuple(g if keep else None for g, keep in zip(grads, output_mask))


def convolution_backward(grad: Any, input: Any, weight: Any, bias_sizes: Any, stride: Any, padding: Any,
                         dilation: Any, transposed: bool, output_padding: Any, groups: int, output_mask: Any) -> tuple:
    """``(grad_input, grad_weight, grad_bias)``, each only where ``output_mask`` asks (2-D, not transposed)."""
    if transposed or weight.ndim != 4:
        raise NotImplementedError("convolution_backward: ember computes it for 2-D, non-transposed convolutions; "
                                  "differentiate F.conv2d/conv_transpose2d with autograd instead")
    ph, pw = padding
    geometry = {"stride": tuple(stride), "padding": (ph, ph, pw, pw), "dilation": tuple(dilation), "groups": groups}
    gi = conv.conv2d_input_grad(grad, weight, tuple(input.shape), **geometry) if output_mask[0] else None
    gw = conv.conv2d_weight_grad(input, grad, tuple(weight.shape), **geometry) if output_mask[1] else None
    gb = grad.sum((0, 2, 3)) if output_mask[2] else None
    return gi, gw, gb


def attention_scores(q: Any, k: Any, is_causal: bool, scale: float) -> Any:
    scores = (q @ k.transpose(-2, -1)) * scale
    if is_causal:  # torch's top-left alignment: query i sees keys j <= i
        rows, cols = q.shape[-2], k.shape[-2]
        hide = _ember().ones(rows, cols, dtype=_ember().bool).triu(1)
        scores = scores.masked_fill(hide, float("-inf"))
    return scores


def _scale(q: Any, scale: Any) -> float:
    return float(scale) if scale is not None else 1.0 / float(q.shape[-1]) ** 0.5


def flash_attention_for_cpu(query: Any, key: Any, value: Any, dropout_p: float = 0.0, is_causal: bool = False, *,
                            attn_mask: Any = None, scale: Any = None) -> tuple:
    """``(output, logsumexp)`` of torch's CPU flash attention (no mask, no dropout, as torch's kernel takes them)."""
    if attn_mask is not None or dropout_p:
        raise NotImplementedError("_scaled_dot_product_flash_attention_for_cpu: ember computes it without "
                                  "attn_mask and dropout; call F.scaled_dot_product_attention")
    s = _scale(query, scale)
    out, _weights = dispatch.apply(OPS["scaled_dot_product_attention"], (query, key, value),
                                   {"is_causal": bool(is_causal), "scale": s})
    return out, attention_scores(query, key, is_causal, s).logsumexp(-1)


def flash_attention_for_cpu_backward(grad_out: Any, query: Any, key: Any, value: Any, out: Any, logsumexp: Any,
                                     dropout_p: float, is_causal: bool, *, attn_mask: Any = None,
                                     scale: Any = None) -> tuple:
    """``(grad_query, grad_key, grad_value)``: ember's attention backward on the weights the logsumexp rebuilds."""
    s = _scale(query, scale)
    weights = (attention_scores(query, key, is_causal, s) - logsumexp.unsqueeze(-1)).exp()
    return dispatch.apply(OPS["scaled_dot_product_attention_backward"], (grad_out, query, key, value, out, weights),
                          {"is_causal": bool(is_causal), "scale": s})


def select_int(x: Any, dim: int, index: int) -> Any:
    return views.select(x, dim, index)


def slice_tensor(x: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> Any:
    d = x._dim(dim, "slice")
    return x[(slice(None),) * d + (slice(start, end, step),)]


def index_tensor(x: Any, indices: Any) -> Any:
    return x[tuple(slice(None) if i is None else i for i in indices)]


def ember_record(name: str) -> Any:
    """``torch.ops.ember.<record>``: an ember op record with no ATen twin, called with its own arguments."""
    if name not in OPS:
        raise AttributeError(f"'_OpNamespace' 'ember' object has no attribute '{name}': no ember op record {name!r}")
    op = OPS[name]
    return lambda *args, **attrs: dispatch.apply(op, args, dict(attrs))


IMPLS = {
    "nll_loss_forward": nll_loss_forward, "nll_loss_backward": nll_loss_backward,
    "_log_softmax_backward_data": _log_softmax_backward_data, "_softmax_backward_data": _softmax_backward_data,
    "sigmoid_backward": sigmoid_backward, "tanh_backward": tanh_backward, "gelu_backward": gelu_backward,
    "native_layer_norm": native_layer_norm, "native_layer_norm_backward": native_layer_norm_backward,
    "convolution_backward": convolution_backward,
    "_scaled_dot_product_flash_attention_for_cpu": flash_attention_for_cpu,
    "_scaled_dot_product_flash_attention_for_cpu_backward": flash_attention_for_cpu_backward, "select": select_int, "slice": slice_tensor, "index": index_tensor,
    "detach": lambda x: x.detach(), "t": views.t, "_local_scalar_dense": lambda x: x.item(),
    "ones_like": lambda x, **kw: _ember().ones_like(x, dtype=kw.get("dtype")),
    "zeros_like": lambda x, **kw: _ember().zeros_like(x, dtype=kw.get("dtype")),
    "clone": lambda x, memory_format=None: x.clone(),
    "copy_": lambda x, src, non_blocking=False: x.copy_(src),
    "transpose": lambda x, dim0, dim1: x.transpose(dim0, dim1),
    "permute": lambda x, dims: x.permute(*dims),
    "mean": lambda x, dim=None, keepdim=False, dtype=None: x.mean() if dim is None else x.mean(dim, keepdim=keepdim),
    "sum": lambda x, dim=None, keepdim=False, dtype=None: x.sum(dtype=dtype) if dim is None else x.sum(
        dim, keepdim=keepdim, dtype=dtype),
    "amax": lambda x, dim=(), keepdim=False: x.amax(tuple(dim) if dim else None, keepdim=keepdim),
}
