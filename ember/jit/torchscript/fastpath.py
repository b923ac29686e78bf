"""PyTorch's fused inference kernels for ``nn.MultiheadAttention`` / ``nn.TransformerEncoderLayer``, in ember ops.

Scripted transformer layers call ``torch._native_multi_head_attention`` and ``torch._transformer_encoder_layer_fwd``
when they run in eval mode without autograd (PyTorch's "fast path"); their results equal the modules' ordinary
computation, which is what these compose (batch-first inputs, as the fast path requires).

Example:
    >>> import ember
    >>> x, w, b = ember.randn(2, 3, 4), ember.randn(12, 4), ember.zeros(12)
    >>> out, _ = native_multi_head_attention(x, x, x, 4, 2, w, b, ember.eye(4), ember.zeros(4), need_weights=False)
    >>> out.shape
    ember.Size([2, 3, 4])
"""
from __future__ import annotations

import math
from typing import Any

from ember import dtypes
from ember.custom_ops.namespaces import _ember
from ember.nn import functional as F
from ember.tensor import Tensor


def _mask_scores(scores: Tensor, mask: Any, mask_type: Any) -> Tensor:
    """Apply ``mask`` to (B, H, Lq, Lk) scores: type 1 is a (B, Lk) key-padding mask, otherwise it broadcasts
    against (Lq, Lk) or (B, H, Lq, Lk); booleans mark what to hide, floats are added."""
    if mask is None:
        return scores
    if mask_type == 1 and mask.dim() == 2:
        mask = mask[:, None, None, :]
    if mask.dtype == dtypes.to_dtype("bool"):
        return scores.masked_fill(mask, float("-inf"))
    return scores + mask


def native_multi_head_attention(query: Tensor, key: Tensor, value: Tensor, embed_dim: int, num_head: int,
                                qkv_weight: Tensor, qkv_bias: Tensor, proj_weight: Tensor, proj_bias: Tensor,
                                mask: Any = None, need_weights: bool = True, average_attn_weights: bool = True,
                                mask_type: Any = None) -> tuple:
    """``aten::_native_multi_head_attention`` on batch-first (B, L, E) inputs; returns (output, weights)."""
    w_q, w_k, w_v = qkv_weight.chunk(3, 0)
    b_q, b_k, b_v = qkv_bias.chunk(3, 0)
    head = embed_dim // num_head

    def heads(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
        batch, length = x.shape[0], x.shape[1]
        return F.linear(x, w, b).reshape(batch, length, num_head, head).transpose(1, 2)

    q, k, v = heads(query, w_q, b_q), heads(key, w_k, b_k), heads(value, w_v, b_v)
    scores = _mask_scores(_ember().matmul(q, k.transpose(-2, -1)) / math.sqrt(head), mask, mask_type)
    weights = F.softmax(scores, dim=-1)
    out = _ember().matmul(weights, v).transpose(1, 2).reshape(query.shape[0], query.shape[1], embed_dim)
    out = F.linear(out, proj_weight, proj_bias)
    if not need_weights:
        return out, _ember().empty(0, dtype=out.dtype)
    return out, weights.mean(dim=1) if average_attn_weights else weights


def transformer_encoder_layer_fwd(src: Tensor, embed_dim: int, num_heads: int, qkv_weight: Tensor, qkv_bias: Tensor,
                                  proj_weight: Tensor, proj_bias: Tensor, use_gelu: bool, norm_first: bool,
                                  eps: float, norm_weight_1: Tensor, norm_bias_1: Tensor, norm_weight_2: Tensor,
                                  norm_bias_2: Tensor, ffn_weight_1: Tensor, ffn_bias_1: Tensor,
                                  ffn_weight_2: Tensor, ffn_bias_2: Tensor, mask: Any = None,
                                  mask_type: Any = None) -> Tensor:
    """``aten::_transformer_encoder_layer_fwd``: one encoder layer (attention, feed-forward, two layer norms)."""
    shape = (embed_dim,)

    def attend(x: Tensor) -> Tensor:
        return native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                                           proj_bias, mask, False, True, mask_type)[0]

    def feed_forward(x: Tensor) -> Tensor:
        hidden = F.linear(x, ffn_weight_1, ffn_bias_1)
        return F.linear(F.gelu(hidden) if use_gelu else F.relu(hidden), ffn_weight_2, ffn_bias_2)

    x = src
    if norm_first:
        x = x + attend(F.layer_norm(x, shape, norm_weight_1, norm_bias_1, eps))
        return x + feed_forward(F.layer_norm(x, shape, norm_weight_2, norm_bias_2, eps))
    x = F.layer_norm(x + attend(x), shape, norm_weight_1, norm_bias_1, eps)
    return F.layer_norm(x + feed_forward(x), shape, norm_weight_2, norm_bias_2, eps)
