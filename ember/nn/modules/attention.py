"""``MultiheadAttention`` with PyTorch's parameters (``in_proj_weight``, ``in_proj_bias``, ``out_proj``).

Masks follow PyTorch: a boolean ``attn_mask`` / ``key_padding_mask`` marks positions NOT allowed to
attend (True = masked); a float mask is added to the scores. ``attn_mask`` is (L, S) or (N*num_heads, L, S).
One difference: ``is_causal=True`` without an ``attn_mask`` builds the causal mask (PyTorch requires
you to pass it as well).

Example:
    >>> import ember
    >>> mha = ember.nn.MultiheadAttention(16, 4, batch_first=True)
    >>> x = ember.randn(2, 5, 16)
    >>> out, weights = mha(x, x, x, is_causal=True)
    >>> out.shape, weights.shape
    (ember.Size([2, 5, 16]), ember.Size([2, 5, 5]))
"""
from __future__ import annotations

import math
from typing import Any

from ember import creation, dtypes
from ember.nn import functional as F, init
from ember.nn.modules.linear import Linear
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.ops.elementwise import where
from ember.ops.views import cat
from ember.tensor import Tensor


def _additive(mask: Tensor | None, dtype: dtypes.dtype, name: str) -> Tensor | None:
    """Bool masks (True = blocked) become 0 / -inf; float masks are used as they are."""
    if mask is None:
        return None
    if mask.dtype is dtypes.bool_:
        return where(mask, float("-inf"), 0.0).to(dtype)
    if not mask.is_floating_point():
        raise TypeError(f"MultiheadAttention: {name} must be a bool or floating tensor, got {mask.dtype}")
    return mask.to(dtype)


def causal_mask(size: int, columns: int | None = None, device: Any = None, dtype: Any = None) -> Tensor:
    """(size, columns) float mask, -inf above the diagonal (``Transformer.generate_square_subsequent_mask``)."""
    ones = creation.ones(size, size if columns is None else columns, dtype=dtypes.bool_, device=device)
    return where(ones.triu(1), float("-inf"), 0.0).to(dtype or dtypes.get_default_dtype())


class NonDynamicallyQuantizableLinear(Linear):
    """A plain Linear; the name matches PyTorch's so ``repr(mha)`` reads the same."""


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads of size ``embed_dim // num_heads``; returns (output, weights)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be > 0, got {embed_dim} and "
                             f"{num_heads}")
        if embed_dim % num_heads != 0:
            raise AssertionError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
                                 f"({num_heads})")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim = embed_dim // num_heads
        factory = {"device": device, "dtype": dtype}
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(creation.empty(3 * embed_dim, embed_dim, **factory))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(creation.empty(embed_dim, embed_dim, **factory))
            self.k_proj_weight = Parameter(creation.empty(embed_dim, self.kdim, **factory))
            self.v_proj_weight = Parameter(creation.empty(embed_dim, self.vdim, **factory))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(creation.empty(3 * embed_dim, **factory))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **factory)
        if add_bias_kv:  # one learned key/value appended to every sequence (PyTorch's bias_k / bias_v)
            self.bias_k = Parameter(creation.empty(1, 1, embed_dim, **factory))
            self.bias_v = Parameter(creation.empty(1, 1, embed_dim, **factory))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = bool(add_zero_attn)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """PyTorch's: xavier_uniform_ projections, zero in_proj_bias and out_proj.bias."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def _project(self, query: Tensor, key: Tensor, value: Tensor, same: bool = False) -> tuple[Tensor, Tensor, Tensor]:
        e = self.embed_dim
        b = self.in_proj_bias
        biases = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
        if self._qkv_same_embed_dim and same:
            # self-attention: one product with the packed weight (one GEMM each way instead of three, one weight
            # gradient), then q, k, v as column views of its output (reshaped to heads without copies)
            return F.linear(query, self.in_proj_weight, b).chunk(3, -1)
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            weights = (w[:e], w[e:2 * e], w[2 * e:])
        else:
            weights = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        return tuple(F.linear(x, w, bias) for x, w, bias in zip((query, key, value), weights, biases))

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None = None,
                need_weights: bool = True, attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        batched = query.dim() == 3
        same = query is key and key is value  # self-attention: one packed input projection
        if not batched:
            if query.dim() != 2:
                raise ValueError(f"MultiheadAttention: query should be 2-D (unbatched) or 3-D, got shape "
                                 f"{tuple(query.shape)}")
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:  # work batch-major: (N, L, E)
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        n, tgt_len, e = tuple(query.shape)
        src_len = key.shape[1]
        if e != self.embed_dim:
            raise RuntimeError(f"MultiheadAttention: query has embedding size {e}, expected embed_dim="
                               f"{self.embed_dim}")
        if tuple(key.shape)[:2] != tuple(value.shape)[:2]:
            raise RuntimeError(f"MultiheadAttention: key shape {tuple(key.shape)} does not match value shape "
                               f"{tuple(value.shape)}")
        h, d = self.num_heads, self.head_dim
        q, k, v = self._project(query, key, value, same)
        extra = 0  # key positions appended after the real ones; masks get zero (= attend) columns for them
        if self.bias_k is not None and self.bias_v is not None:
            k = cat([k, self.bias_k.expand(n, 1, e)], 1)
            v = cat([v, self.bias_v.expand(n, 1, e)], 1)
            extra += 1
        q = q.reshape(n, tgt_len, h, d).transpose(1, 2)  # (N, H, L, D)
        k = k.reshape(n, src_len + extra, h, d).transpose(1, 2)
        v = v.reshape(n, src_len + extra, h, d).transpose(1, 2)
        if self.add_zero_attn:  # an all-zero key/value per head (PyTorch's add_zero_attn)
            zeros = creation.zeros(n, h, 1, d, dtype=k.dtype, device=k.device)
            k, v = cat([k, zeros], 2), cat([v, zeros], 2)
            extra += 1

        if is_causal and attn_mask is None:
            attn_mask = causal_mask(tgt_len, src_len, query.device, q.dtype)
        mask = _additive(attn_mask, q.dtype, "attn_mask")
        if mask is not None:
            if mask.dim() == 2:
                if tuple(mask.shape) != (tgt_len, src_len):
                    raise RuntimeError(f"MultiheadAttention: the shape of the 2D attn_mask is {tuple(mask.shape)}, "
                                       f"but should be {(tgt_len, src_len)}.")
            elif tuple(mask.shape) == (n * h, tgt_len, src_len):
                mask = mask.reshape(n, h, tgt_len, src_len)
            else:
                raise RuntimeError(f"MultiheadAttention: the shape of the 3D attn_mask is {tuple(mask.shape)}, "
                                   f"but should be {(n * h, tgt_len, src_len)}.")
        padding = _additive(key_padding_mask, q.dtype, "key_padding_mask")
        if padding is not None:
            if tuple(padding.shape) != (n, src_len):
                raise RuntimeError(f"MultiheadAttention: expected key_padding_mask of shape {(n, src_len)}, got "
                                   f"{tuple(padding.shape)}")
            padding = padding.reshape(n, 1, 1, src_len)
            mask = padding if mask is None else mask + padding
        if mask is not None and extra:
            mask = F.pad(mask, (0, extra))

        if not need_weights:  # PyTorch's path: SDPA, whose fully masked queries attend to nothing (0, not NaN)
            attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                      dropout_p=self.dropout if self.training else 0.0)
        else:
            scores = q.matmul(k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
            if mask is not None:
                scores = scores + mask
            weights = F.softmax(scores, -1)
            if self.training and self.dropout > 0:  # torch returns the weights after dropout
                weights = F.dropout(weights, self.dropout, True)
            attended = weights.matmul(v)
        # torch's layout: rows in (L, N) order, so the output is (L, N, E) in memory (a batch_first result is its
        # transpose): a dropout after it (TransformerEncoderLayer's dropout1) draws torch's mask for each element
        out = self.out_proj(attended.permute(2, 0, 1, 3).reshape(tgt_len, n, e))
        if not batched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            weights = weights.squeeze(0)
        return out, weights
