"""Swin Transformer v1 and v2 (torchvision's ``models.swin_t/s/b`` and ``swin_v2_t/s/b``: same arguments,
module names, buffers and keys).

Self-attention inside non-overlapping windows of the (H, W) token grid, the windows shifted by half their
size every other block so information crosses their borders (tokens that wrap around under the shift are
masked from each other), with a learned bias per relative position; patch merging halves the grid and
doubles the channels between stages. v2 uses cosine attention with a learned per-head temperature, a small
MLP for the position bias (on log-spaced coordinates) and post-normalization.

Example:
    >>> import ember
    >>> from ember.vision.models import swin_t
    >>> swin_t(num_classes=3).eval()(ember.randn(1, 3, 32, 32)).shape
    ember.Size([1, 3])
"""
from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable

import numpy as np

import ember
from ember import fx, nn
from ember.nn import functional as F
from ember.vision.models._api import (
    handle_legacy_interface, load_weights, make_weights_enum, override_num_classes, register_model,
)
from ember.vision.ops.misc import MLP, Permute
from ember.vision.ops.stochastic_depth import StochasticDepth

__all__ = ["SwinTransformer", "Swin_T_Weights", "Swin_S_Weights", "Swin_B_Weights", "Swin_V2_T_Weights",
           "Swin_V2_S_Weights", "Swin_V2_B_Weights", "swin_t", "swin_s", "swin_b", "swin_v2_t", "swin_v2_s",
           "swin_v2_b"]

Swin_T_Weights = make_weights_enum("Swin_T_Weights", __name__)
Swin_S_Weights = make_weights_enum("Swin_S_Weights", __name__)
Swin_B_Weights = make_weights_enum("Swin_B_Weights", __name__)
Swin_V2_T_Weights = make_weights_enum("Swin_V2_T_Weights", __name__)
Swin_V2_S_Weights = make_weights_enum("Swin_V2_S_Weights", __name__)
Swin_V2_B_Weights = make_weights_enum("Swin_V2_B_Weights", __name__)


def _patch_merging_pad(x: Any) -> Any:
    """(..., H, W, C) -> (..., ceil(H/2), ceil(W/2), 4C): each 2x2 neighbourhood's tokens side by side."""
    height, width = x.shape[-3], x.shape[-2]
    x = F.pad(x, (0, 0, 0, width % 2, 0, height % 2))
    return ember.cat([x[..., 0::2, 0::2, :], x[..., 1::2, 0::2, :], x[..., 0::2, 1::2, :], x[..., 1::2, 1::2, :]], -1)


class PatchMerging(nn.Module):
    """Merge 2x2 tokens: LayerNorm over the 4C features, then a linear map to 2C."""

    def __init__(self, dim: int, norm_layer: Callable[..., nn.Module] = nn.LayerNorm) -> None:
        super().__init__()
        self.dim = dim
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm_layer(4 * dim)

    def forward(self, x: Any) -> Any:
        return self.reduction(self.norm(_patch_merging_pad(x)))


class PatchMergingV2(nn.Module):
    """v2's merge: the linear map first, LayerNorm over its 2C outputs."""

    def __init__(self, dim: int, norm_layer: Callable[..., nn.Module] = nn.LayerNorm) -> None:
        super().__init__()
        self.dim = dim
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm_layer(2 * dim)

    def forward(self, x: Any) -> Any:
        return self.norm(self.reduction(_patch_merging_pad(x)))


def _shift_mask(pad_h: int, pad_w: int, window: list[int], shift: list[int]) -> np.ndarray:
    """(windows, N, N) additive mask: -100 between tokens that came from different regions of the rolled
    grid (they are not neighbours in the image), 0 within a region."""
    regions = np.zeros((pad_h, pad_w), dtype=np.float64)
    label = 0
    for h0, h1 in ((0, -window[0]), (-window[0], -shift[0]), (-shift[0], None)):
        for w0, w1 in ((0, -window[1]), (-window[1], -shift[1]), (-shift[1], None)):
            regions[h0:h1, w0:w1] = label
            label += 1
    regions = regions.reshape(pad_h // window[0], window[0], pad_w // window[1], window[1])
    regions = regions.transpose(0, 2, 1, 3).reshape(-1, window[0] * window[1])
    differs = regions[:, None, :] - regions[:, :, None]
    return np.where(differs != 0, -100.0, 0.0)


def shifted_window_attention(input: Any, qkv_weight: Any, proj_weight: Any, relative_position_bias: Any,
                             window_size: list[int], num_heads: int, shift_size: list[int],
                             attention_dropout: float = 0.0, dropout: float = 0.0, qkv_bias: Any = None,
                             proj_bias: Any = None, logit_scale: Any = None, training: bool = True) -> Any:
    """Multi-head attention within (shifted) windows of an (N, H, W, C) grid; returns the same layout."""
    batch, height, width, channels = input.shape
    pad_r = (window_size[1] - width % window_size[1]) % window_size[1]
    pad_b = (window_size[0] - height % window_size[0]) % window_size[0]
    x = F.pad(input, (0, 0, 0, pad_r, 0, pad_b))
    pad_h, pad_w = x.shape[1], x.shape[2]
    shift = list(shift_size)
    if window_size[0] >= pad_h:  # one window covers the axis: shifting would change nothing but the mask
        shift[0] = 0
    if window_size[1] >= pad_w:
        shift[1] = 0
    if sum(shift) > 0:
        x = ember.roll(x, shifts=(-shift[0], -shift[1]), dims=(1, 2))
    num_windows = (pad_h // window_size[0]) * (pad_w // window_size[1])
    tokens = window_size[0] * window_size[1]
    x = x.view(batch, pad_h // window_size[0], window_size[0], pad_w // window_size[1], window_size[1], channels)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(batch * num_windows, tokens, channels)
    if logit_scale is not None and qkv_bias is not None:
        # v2 has no key bias: the middle third of the packed q/k/v bias is held at zero
        length = qkv_bias.numel() // 3
        keep = ember.ones(qkv_bias.shape, dtype=qkv_bias.dtype, device=qkv_bias.device)
        keep[length:2 * length] = 0
        qkv_bias = qkv_bias * keep
    qkv = F.linear(x, qkv_weight, qkv_bias)
    qkv = qkv.reshape(x.shape[0], tokens, 3, num_heads, channels // num_heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    if logit_scale is not None:
        attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        attn = attn * ember.clamp(logit_scale, max=math.log(100.0)).exp()
    else:
        attn = (q * (channels // num_heads) ** -0.5).matmul(k.transpose(-2, -1))
    attn = attn + relative_position_bias
    if sum(shift) > 0:
        mask = ember.tensor(_shift_mask(pad_h, pad_w, window_size, shift), dtype=attn.dtype, device=attn.device)
        attn = attn.view(x.shape[0] // num_windows, num_windows, num_heads, tokens, tokens)
        attn = (attn + mask.unsqueeze(1).unsqueeze(0)).view(-1, num_heads, tokens, tokens)
    attn = F.dropout(F.softmax(attn, dim=-1), p=attention_dropout, training=training)
    x = attn.matmul(v).transpose(1, 2).reshape(x.shape[0], tokens, channels)
    x = F.dropout(F.linear(x, proj_weight, proj_bias), p=dropout, training=training)
    x = x.view(batch, pad_h // window_size[0], pad_w // window_size[1], window_size[0], window_size[1], channels)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(batch, pad_h, pad_w, channels)
    if sum(shift) > 0:
        x = ember.roll(x, shifts=(shift[0], shift[1]), dims=(1, 2))
    return x[:, :height, :width, :].contiguous()


def _relative_position_index(window_size: list[int]) -> np.ndarray:
    """For each (query, key) pair of a window, the row of the bias table for their relative offset."""
    coords = np.stack(np.meshgrid(np.arange(window_size[0]), np.arange(window_size[1]), indexing="ij")).reshape(2, -1)
    relative = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0).copy()
    relative[:, :, 0] += window_size[0] - 1
    relative[:, :, 1] += window_size[1] - 1
    relative[:, :, 0] *= 2 * window_size[1] - 1
    return relative.sum(-1).reshape(-1).astype(np.int64)


def _get_relative_position_bias(table: Any, index: Any, window_size: list[int]) -> Any:
    tokens = window_size[0] * window_size[1]
    return table[index].view(tokens, tokens, -1).permute(2, 0, 1).contiguous().unsqueeze(0)


# Recorded as single fx nodes (as torchvision does with torch.fx.wrap): their shape arithmetic is Python.
fx.wrap("_patch_merging_pad")
fx.wrap("_get_relative_position_bias")
fx.wrap("shifted_window_attention")


class ShiftedWindowAttention(nn.Module):
    """Window attention with a learned (2Wh-1)(2Ww-1) x heads table of relative position biases."""

    def __init__(self, dim: int, window_size: list[int], shift_size: list[int], num_heads: int,
                 qkv_bias: bool = True, proj_bias: bool = True, attention_dropout: float = 0.0,
                 dropout: float = 0.0) -> None:
        super().__init__()
        if len(window_size) != 2 or len(shift_size) != 2:
            raise ValueError("window_size and shift_size must be of length 2")
        self.window_size = list(window_size)
        self.shift_size = list(shift_size)
        self.num_heads = num_heads
        self.attention_dropout = attention_dropout
        self.dropout = dropout
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim, bias=proj_bias)
        self.define_relative_position_bias_table()
        self.define_relative_position_index()

    def define_relative_position_bias_table(self) -> None:
        rows = (2 * self.window_size[0] - 1) * (2 * self.window_size[1] - 1)
        self.relative_position_bias_table = nn.Parameter(ember.zeros(rows, self.num_heads))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def define_relative_position_index(self) -> None:
        self.register_buffer("relative_position_index", ember.tensor(_relative_position_index(self.window_size)))

    def get_relative_position_bias(self) -> Any:
        return _get_relative_position_bias(self.relative_position_bias_table, self.relative_position_index, self.window_size)

    def forward(self, x: Any) -> Any:
        relative_position_bias = self.get_relative_position_bias()  # first, as torchvision (fx node order)
        return shifted_window_attention(x, self.qkv.weight, self.proj.weight, relative_position_bias,
                                        self.window_size, self.num_heads, shift_size=self.shift_size,
                                        attention_dropout=self.attention_dropout, dropout=self.dropout,
                                        qkv_bias=self.qkv.bias, proj_bias=self.proj.bias, training=self.training)


class ShiftedWindowAttentionV2(ShiftedWindowAttention):
    """v2: cosine attention scaled by a learned per-head temperature (at most 100), position biases from a
    two-layer MLP on log-spaced relative coordinates, squashed to (0, 16)."""

    def __init__(self, dim: int, window_size: list[int], shift_size: list[int], num_heads: int,
                 qkv_bias: bool = True, proj_bias: bool = True, attention_dropout: float = 0.0,
                 dropout: float = 0.0) -> None:
        super().__init__(dim, window_size, shift_size, num_heads, qkv_bias=qkv_bias, proj_bias=proj_bias,
                         attention_dropout=attention_dropout, dropout=dropout)
        self.logit_scale = nn.Parameter(ember.log(10 * ember.ones((num_heads, 1, 1))))
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 512, bias=True), nn.ReLU(inplace=True),
                                     nn.Linear(512, num_heads, bias=False))
        if qkv_bias:
            length = self.qkv.bias.numel() // 3
            with ember.no_grad():
                self.qkv.bias[length:2 * length] = 0.0

    def define_relative_position_bias_table(self) -> None:
        h = np.arange(-(self.window_size[0] - 1), self.window_size[0], dtype=np.float32)
        w = np.arange(-(self.window_size[1] - 1), self.window_size[1], dtype=np.float32)
        table = np.stack(np.meshgrid(h, w, indexing="ij")).transpose(1, 2, 0)[None].copy()
        table[..., 0] /= self.window_size[0] - 1
        table[..., 1] /= self.window_size[1] - 1
        table *= 8  # offsets in [-8, 8], then log-spaced
        table = np.sign(table) * np.log2(np.abs(table) + 1.0) / 3.0
        self.register_buffer("relative_coords_table", ember.tensor(table.astype(np.float32)))

    def get_relative_position_bias(self) -> Any:
        table = self.cpb_mlp(self.relative_coords_table).view(-1, self.num_heads)
        return 16 * ember.sigmoid(_get_relative_position_bias(table, self.relative_position_index, self.window_size))

    def forward(self, x: Any) -> Any:
        relative_position_bias = self.get_relative_position_bias()  # first, as torchvision (fx node order)
        return shifted_window_attention(x, self.qkv.weight, self.proj.weight, relative_position_bias,
                                        self.window_size, self.num_heads, shift_size=self.shift_size,
                                        attention_dropout=self.attention_dropout, dropout=self.dropout,
                                        qkv_bias=self.qkv.bias, proj_bias=self.proj.bias,
                                        logit_scale=self.logit_scale, training=self.training)


class SwinTransformerBlock(nn.Module):
    """Pre-norm block: ``x + drop(attn(norm1(x)))``, then ``x + drop(mlp(norm2(x)))``."""

    def __init__(self, dim: int, num_heads: int, window_size: list[int], shift_size: list[int],
                 mlp_ratio: float = 4.0, dropout: float = 0.0, attention_dropout: float = 0.0,
                 stochastic_depth_prob: float = 0.0, norm_layer: Callable[..., nn.Module] = nn.LayerNorm,
                 attn_layer: Callable[..., nn.Module] = ShiftedWindowAttention) -> None:
        super().__init__()
        self.norm1 = norm_layer(dim)
        self.attn = attn_layer(dim, window_size, shift_size, num_heads, attention_dropout=attention_dropout,
                               dropout=dropout)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.norm2 = norm_layer(dim)
        self.mlp = MLP(dim, [int(dim * mlp_ratio), dim], activation_layer=nn.GELU, inplace=None, dropout=dropout)
        for m in self.mlp.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.normal_(m.bias, std=1e-6)

    def forward(self, x: Any) -> Any:
        x = x + self.stochastic_depth(self.attn(self.norm1(x)))
        return x + self.stochastic_depth(self.mlp(self.norm2(x)))


class SwinTransformerBlockV2(SwinTransformerBlock):
    """v2's post-norm block: ``x + drop(norm1(attn(x)))``, then ``x + drop(norm2(mlp(x)))``."""

    def __init__(self, dim: int, num_heads: int, window_size: list[int], shift_size: list[int],
                 mlp_ratio: float = 4.0, dropout: float = 0.0, attention_dropout: float = 0.0,
                 stochastic_depth_prob: float = 0.0, norm_layer: Callable[..., nn.Module] = nn.LayerNorm,
                 attn_layer: Callable[..., nn.Module] = ShiftedWindowAttentionV2) -> None:
        super().__init__(dim, num_heads, window_size, shift_size, mlp_ratio=mlp_ratio, dropout=dropout,
                         attention_dropout=attention_dropout, stochastic_depth_prob=stochastic_depth_prob,
                         norm_layer=norm_layer, attn_layer=attn_layer)

    def forward(self, x: Any) -> Any:
        x = x + self.stochastic_depth(self.norm1(self.attn(x)))
        return x + self.stochastic_depth(self.norm2(self.mlp(x)))


class SwinTransformer(nn.Module):
    """Patch embedding (conv, to channels-last, norm), stages of blocks with alternating shifts and patch
    merging between them, a final norm, global average pooling and a linear head."""

    def __init__(self, patch_size: list[int], embed_dim: int, depths: list[int], num_heads: list[int],
                 window_size: list[int], mlp_ratio: float = 4.0, dropout: float = 0.0,
                 attention_dropout: float = 0.0, stochastic_depth_prob: float = 0.1, num_classes: int = 1000,
                 norm_layer: Callable[..., nn.Module] | None = None, block: Callable[..., nn.Module] | None = None,
                 downsample_layer: Callable[..., nn.Module] = PatchMerging) -> None:
        super().__init__()
        self.num_classes = num_classes
        block = block or SwinTransformerBlock
        norm_layer = norm_layer or partial(nn.LayerNorm, eps=1e-5)
        layers: list[nn.Module] = [nn.Sequential(
            nn.Conv2d(3, embed_dim, kernel_size=(patch_size[0], patch_size[1]), stride=(patch_size[0], patch_size[1])),
            Permute([0, 2, 3, 1]), norm_layer(embed_dim))]
        total_blocks = sum(depths)
        block_id = 0
        for i_stage, depth in enumerate(depths):
            dim = embed_dim * 2 ** i_stage
            stage = []
            for i_layer in range(depth):
                stage.append(block(dim, num_heads[i_stage], window_size=window_size,
                                   shift_size=[0 if i_layer % 2 == 0 else w // 2 for w in window_size],
                                   mlp_ratio=mlp_ratio, dropout=dropout, attention_dropout=attention_dropout,
                                   stochastic_depth_prob=stochastic_depth_prob * float(block_id) / (total_blocks - 1),
                                   norm_layer=norm_layer))
                block_id += 1
            layers.append(nn.Sequential(*stage))
            if i_stage < len(depths) - 1:
                layers.append(downsample_layer(dim, norm_layer))
        self.features = nn.Sequential(*layers)
        num_features = embed_dim * 2 ** (len(depths) - 1)
        self.norm = norm_layer(num_features)
        self.permute = Permute([0, 3, 1, 2])
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.head = nn.Linear(num_features, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x: Any) -> Any:
        x = self.permute(self.norm(self.features(x)))
        return self.head(self.flatten(self.avgpool(x)))


_VARIANTS = {  # name -> (weights, embed dim, depths, heads, window, stochastic depth, v2)
    "swin_t": (Swin_T_Weights, 96, [2, 2, 6, 2], [3, 6, 12, 24], [7, 7], 0.2, False),
    "swin_s": (Swin_S_Weights, 96, [2, 2, 18, 2], [3, 6, 12, 24], [7, 7], 0.3, False),
    "swin_b": (Swin_B_Weights, 128, [2, 2, 18, 2], [4, 8, 16, 32], [7, 7], 0.5, False),
    "swin_v2_t": (Swin_V2_T_Weights, 96, [2, 2, 6, 2], [3, 6, 12, 24], [8, 8], 0.2, True),
    "swin_v2_s": (Swin_V2_S_Weights, 96, [2, 2, 18, 2], [3, 6, 12, 24], [8, 8], 0.3, True),
    "swin_v2_b": (Swin_V2_B_Weights, 128, [2, 2, 18, 2], [4, 8, 16, 32], [8, 8], 0.5, True),
}


def _builder(name: str) -> Callable[..., SwinTransformer]:
    weights_enum, embed_dim, depths, heads, window, sd_prob, v2 = _VARIANTS[name]

    @register_model(name, weights_enum)
    @handle_legacy_interface(lambda: weights_enum.IMAGENET1K_V1)
    def build(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> SwinTransformer:
        weights = weights_enum.verify(weights)
        override_num_classes(kwargs, weights)
        if v2:
            kwargs.setdefault("block", SwinTransformerBlockV2)
            kwargs.setdefault("downsample_layer", PatchMergingV2)
        model = SwinTransformer(patch_size=[4, 4], embed_dim=embed_dim, depths=list(depths), num_heads=list(heads),
                                window_size=list(window), stochastic_depth_prob=sd_prob, **kwargs)
        return load_weights(model, weights, progress)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = (f"{name}: embedding {embed_dim}, depths {depths}, heads {heads}, window {window[0]}x{window[1]}"
                     f" (``weights``: :class:`{weights_enum.__name__}` or None).")
    return build


swin_t = _builder("swin_t")
swin_s = _builder("swin_s")
swin_b = _builder("swin_b")
swin_v2_t = _builder("swin_v2_t")
swin_v2_s = _builder("swin_v2_s")
swin_v2_b = _builder("swin_v2_b")
