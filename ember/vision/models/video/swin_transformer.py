"""Video Swin Transformer (torchvision's ``models.video.swin3d_t/s/b``; Liu et al. 2021, arXiv:2106.13230).

Swin's shifted-window attention over a (T, H, W) token grid: a 2x4x4 patch embedding (a strided Conv3d), 8x7x7
windows shifted by half their size every other block, a learned bias per 3-D relative offset, and the image Swin's
2x2 spatial patch merging between stages (time is not merged). Same arguments, module names, buffers and state_dict
keys as torchvision; the blocks and merging layers are :mod:`ember.vision.models.swin_transformer`'s.

Example:
    >>> import ember
    >>> from ember.vision.models.video import swin3d_t
    >>> swin3d_t(num_classes=5).eval()(ember.randn(1, 3, 4, 32, 32)).shape
    ember.Size([1, 5])
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

import ember
from ember import fx, nn
from ember.nn import functional as F
from ember.tensor import Tensor
from ember.vision.models._api import (handle_legacy_interface, load_weights, make_weights_enum, override_num_classes,
                                      register_model)
from ember.vision.models.swin_transformer import PatchMerging, SwinTransformerBlock

__all__ = ["SwinTransformer3d", "Swin3D_T_Weights", "Swin3D_S_Weights", "Swin3D_B_Weights", "swin3d_t", "swin3d_s",
           "swin3d_b"]

Swin3D_T_Weights = make_weights_enum("Swin3D_T_Weights", __name__)
Swin3D_S_Weights = make_weights_enum("Swin3D_S_Weights", __name__)
Swin3D_B_Weights = make_weights_enum("Swin3D_B_Weights", __name__)


def _get_window_and_shift_size(shift_size: list[int], size_dhw: list[int],
                               window_size: list[int]) -> tuple[list[int], list[int]]:
    """An axis no longer than its window gets a window of its size and no shift (edits the lists, as torchvision)."""
    for i in range(3):
        if size_dhw[i] <= window_size[i]:
            window_size[i] = size_dhw[i]
            shift_size[i] = 0
    return window_size, shift_size


def _get_relative_position_bias(table: Tensor, index: Tensor, window_size: list[int]) -> Tensor:
    """(1, heads, V, V) biases for a window of V = Wd*Wh*Ww tokens. A window shrunk to the input reads the top-left
    V x V block of the full window's index, exactly as torchvision does."""
    volume = window_size[0] * window_size[1] * window_size[2]
    bias = table[index[:volume, :volume].flatten()].view(volume, volume, -1)
    return bias.permute(2, 0, 1).contiguous().unsqueeze(0)


def _compute_pad_size_3d(size_dhw: tuple[int, int, int], patch_size: tuple[int, int, int]) -> tuple[int, int, int]:
    pad = [(patch_size[i] - size_dhw[i] % patch_size[i]) % patch_size[i] for i in range(3)]
    return pad[0], pad[1], pad[2]


def _attention_mask_3d(size_dhw: tuple[int, int, int], window: tuple[int, int, int],
                       shift: tuple[int, int, int]) -> np.ndarray:
    """(windows, V, V) additive mask: -100 between tokens from different regions of the rolled grid, else 0."""
    regions = np.zeros(size_dhw, dtype=np.float64)
    bounds = [((0, -window[i]), (-window[i], -shift[i]), (-shift[i], None)) for i in range(3)]
    count = 0
    for d in bounds[0]:
        for h in bounds[1]:
            for w in bounds[2]:
                regions[d[0]:d[1], h[0]:h[1], w[0]:w[1]] = count
                count += 1
    blocks = regions.reshape(size_dhw[0] // window[0], window[0], size_dhw[1] // window[1], window[1],
                             size_dhw[2] // window[2], window[2])
    blocks = blocks.transpose(0, 2, 4, 1, 3, 5).reshape(-1, window[0] * window[1] * window[2])
    return np.where(blocks[:, None, :] - blocks[:, :, None] != 0, -100.0, 0.0)


def shifted_window_attention_3d(input: Tensor, qkv_weight: Tensor, proj_weight: Tensor,
                                relative_position_bias: Tensor, window_size: list[int], num_heads: int,
                                shift_size: list[int], attention_dropout: float = 0.0, dropout: float = 0.0,
                                qkv_bias: Tensor | None = None, proj_bias: Tensor | None = None,
                                training: bool = True) -> Tensor:
    """Window multi-head self-attention on ``(B, T, H, W, C)``: pad to whole windows, roll by ``-shift``, attend
    within each window (plus the position bias and, when shifted, the region mask), undo both."""
    b, t, h, w, c = input.shape
    pad = _compute_pad_size_3d((t, h, w), (window_size[0], window_size[1], window_size[2]))
    x = F.pad(input, (0, 0, 0, pad[2], 0, pad[1], 0, pad[0]))
    _, tp, hp, wp, _ = x.shape
    shifted = sum(shift_size) > 0
    if shifted:
        x = ember.roll(x, shifts=(-shift_size[0], -shift_size[1], -shift_size[2]), dims=(1, 2, 3))
    grid = (tp // window_size[0], hp // window_size[1], wp // window_size[2])
    num_windows = grid[0] * grid[1] * grid[2]
    tokens = window_size[0] * window_size[1] * window_size[2]
    x = x.view(b, grid[0], window_size[0], grid[1], window_size[1], grid[2], window_size[2], c)
    x = x.permute(0, 1, 3, 5, 2, 4, 6, 7).reshape(b * num_windows, tokens, c)
    qkv = F.linear(x, qkv_weight, qkv_bias)
    qkv = qkv.reshape(x.size(0), x.size(1), 3, num_heads, c // num_heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    q = q * (c // num_heads) ** -0.5
    attn = q.matmul(k.transpose(-2, -1)) + relative_position_bias
    if shifted:
        mask = ember.tensor(_attention_mask_3d((tp, hp, wp), tuple(window_size), tuple(shift_size)),
                            dtype=x.dtype, device=x.device)
        attn = attn.view(x.size(0) // num_windows, num_windows, num_heads, x.size(1), x.size(1))
        attn = (attn + mask.unsqueeze(1).unsqueeze(0)).view(-1, num_heads, x.size(1), x.size(1))
    attn = F.dropout(F.softmax(attn, dim=-1), p=attention_dropout, training=training)
    x = attn.matmul(v).transpose(1, 2).reshape(x.size(0), x.size(1), c)
    x = F.dropout(F.linear(x, proj_weight, proj_bias), p=dropout, training=training)
    x = x.view(b, grid[0], grid[1], grid[2], window_size[0], window_size[1], window_size[2], c)
    x = x.permute(0, 1, 4, 2, 5, 3, 6, 7).reshape(b, tp, hp, wp, c)
    if shifted:
        x = ember.roll(x, shifts=(shift_size[0], shift_size[1], shift_size[2]), dims=(1, 2, 3))
    return x[:, :t, :h, :w, :].contiguous()


# single fx nodes, as torchvision's torch.fx.wrap (their shape arithmetic is Python)
fx.wrap("_get_window_and_shift_size")
fx.wrap("_get_relative_position_bias")
fx.wrap("_compute_pad_size_3d")
fx.wrap("shifted_window_attention_3d")


def _relative_position_index_3d(window_size: list[int]) -> np.ndarray:
    """(V, V) int64: the bias-table row of each (query, key) offset inside a Wd x Wh x Ww window."""
    coords = np.stack(np.meshgrid(*(np.arange(s) for s in window_size), indexing="ij")).reshape(3, -1)
    relative = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0).copy()
    for i in range(3):
        relative[:, :, i] += window_size[i] - 1
    relative[:, :, 0] *= (2 * window_size[1] - 1) * (2 * window_size[2] - 1)
    relative[:, :, 1] *= 2 * window_size[2] - 1
    return relative.sum(-1).astype(np.int64)


class ShiftedWindowAttention3d(nn.Module):
    """See :func:`shifted_window_attention_3d`; the bias table has (2Wd-1)(2Wh-1)(2Ww-1) rows per head."""

    def __init__(self, dim: int, window_size: list[int], shift_size: list[int], num_heads: int,
                 qkv_bias: bool = True, proj_bias: bool = True, attention_dropout: float = 0.0,
                 dropout: float = 0.0) -> None:
        super().__init__()
        if len(window_size) != 3 or len(shift_size) != 3:
            raise ValueError("window_size and shift_size must be of length 2")  # torchvision's words
        self.window_size = window_size
        self.shift_size = shift_size
        self.num_heads = num_heads
        self.attention_dropout = attention_dropout
        self.dropout = dropout
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim, bias=proj_bias)
        self.define_relative_position_bias_table()
        self.define_relative_position_index()

    def define_relative_position_bias_table(self) -> None:
        rows = (2 * self.window_size[0] - 1) * (2 * self.window_size[1] - 1) * (2 * self.window_size[2] - 1)
        self.relative_position_bias_table = nn.Parameter(ember.zeros(rows, self.num_heads))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def define_relative_position_index(self) -> None:
        self.register_buffer("relative_position_index", ember.tensor(_relative_position_index_3d(self.window_size)))

    def get_relative_position_bias(self, window_size: list[int]) -> Tensor:
        return _get_relative_position_bias(self.relative_position_bias_table, self.relative_position_index,
                                           window_size)

    def forward(self, x: Tensor) -> Tensor:
        _, t, h, w, _ = x.shape
        window_size, shift_size = _get_window_and_shift_size(list(self.shift_size), [t, h, w],
                                                             list(self.window_size))
        relative_position_bias = self.get_relative_position_bias(window_size)
        return shifted_window_attention_3d(x, self.qkv.weight, self.proj.weight, relative_position_bias, window_size,
                                           self.num_heads, shift_size=shift_size,
                                           attention_dropout=self.attention_dropout, dropout=self.dropout,
                                           qkv_bias=self.qkv.bias, proj_bias=self.proj.bias, training=self.training)


class PatchEmbed3d(nn.Module):
    """Video to patch tokens: pad (T, H, W) to whole patches, a Conv3d with stride = kernel = ``patch_size``,
    channels last, then the norm (``norm_layer=None``: an Identity)."""

    def __init__(self, patch_size: list[int], in_channels: int = 3, embed_dim: int = 96,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        self.tuple_patch_size = (patch_size[0], patch_size[1], patch_size[2])
        self.proj = nn.Conv3d(in_channels, embed_dim, kernel_size=self.tuple_patch_size, stride=self.tuple_patch_size)
        self.norm = norm_layer(embed_dim) if norm_layer is not None else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        _, _, t, h, w = x.size()  # size(), as torchvision: feature extraction's node names follow the call
        pad = _compute_pad_size_3d((t, h, w), self.tuple_patch_size)
        x = self.proj(F.pad(x, (0, pad[2], 0, pad[1], 0, pad[0])))
        return self.norm(x.permute(0, 2, 3, 4, 1))


class SwinTransformer3d(nn.Module):
    """Patch embedding, stages of Swin blocks with 3-D window attention (patch merging between them), a final
    LayerNorm, global average pooling over (T, H, W) and a linear head. Input ``(N, 3, T, H, W)``."""

    def __init__(self, patch_size: list[int], embed_dim: int, depths: list[int], num_heads: list[int],
                 window_size: list[int], mlp_ratio: float = 4.0, dropout: float = 0.0, attention_dropout: float = 0.0,
                 stochastic_depth_prob: float = 0.1, num_classes: int = 400,
                 norm_layer: Callable[..., nn.Module] | None = None, block: Callable[..., nn.Module] | None = None,
                 downsample_layer: Callable[..., nn.Module] = PatchMerging,
                 patch_embed: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        self.num_classes = num_classes
        block = block or partial(SwinTransformerBlock, attn_layer=ShiftedWindowAttention3d)
        norm_layer = norm_layer or partial(nn.LayerNorm, eps=1e-5)
        self.patch_embed = (patch_embed or PatchEmbed3d)(patch_size=patch_size, embed_dim=embed_dim,
                                                         norm_layer=norm_layer)
        self.pos_drop = nn.Dropout(p=dropout)
        layers: list[nn.Module] = []
        total, block_id = sum(depths), 0
        for i_stage, depth in enumerate(depths):
            dim = embed_dim * 2 ** i_stage
            stage = []
            for i_layer in range(depth):
                stage.append(block(dim, num_heads[i_stage], window_size=window_size,
                                   shift_size=[0 if i_layer % 2 == 0 else s // 2 for s in window_size],
                                   mlp_ratio=mlp_ratio, dropout=dropout, attention_dropout=attention_dropout,
                                   stochastic_depth_prob=stochastic_depth_prob * float(block_id) / (total - 1),
                                   norm_layer=norm_layer, attn_layer=ShiftedWindowAttention3d))
                block_id += 1
            layers.append(nn.Sequential(*stage))
            if i_stage < len(depths) - 1:
                layers.append(downsample_layer(dim, norm_layer))
        self.features = nn.Sequential(*layers)
        self.num_features = embed_dim * 2 ** (len(depths) - 1)
        self.norm = norm_layer(self.num_features)
        self.avgpool = nn.AdaptiveAvgPool3d(1)
        self.head = nn.Linear(self.num_features, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.norm(self.features(self.pos_drop(self.patch_embed(x))))  # (B, T', H', W', C)
        x = self.avgpool(x.permute(0, 4, 1, 2, 3))
        return self.head(ember.flatten(x, 1))


def _swin_transformer3d(patch_size: list[int], embed_dim: int, depths: list[int], num_heads: list[int],
                        window_size: list[int], stochastic_depth_prob: float, weights: Any, progress: bool,
                        **kwargs: Any) -> SwinTransformer3d:
    override_num_classes(kwargs, weights)
    model = SwinTransformer3d(patch_size=patch_size, embed_dim=embed_dim, depths=depths, num_heads=num_heads,
                              window_size=window_size, stochastic_depth_prob=stochastic_depth_prob, **kwargs)
    return load_weights(model, weights, progress)


@register_model("swin3d_t", Swin3D_T_Weights)
@handle_legacy_interface(lambda: Swin3D_T_Weights.KINETICS400_V1)
def swin3d_t(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> SwinTransformer3d:
    """Swin3D-T (28.2M parameters): embed 96, depths 2-2-6-2, heads 3-6-12-24, window 8x7x7."""
    return _swin_transformer3d([2, 4, 4], 96, [2, 2, 6, 2], [3, 6, 12, 24], [8, 7, 7], 0.1,
                               Swin3D_T_Weights.verify(weights), progress, **kwargs)


@register_model("swin3d_s", Swin3D_S_Weights)
@handle_legacy_interface(lambda: Swin3D_S_Weights.KINETICS400_V1)
def swin3d_s(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> SwinTransformer3d:
    """Swin3D-S (49.8M parameters): embed 96, depths 2-2-18-2, heads 3-6-12-24, window 8x7x7."""
    return _swin_transformer3d([2, 4, 4], 96, [2, 2, 18, 2], [3, 6, 12, 24], [8, 7, 7], 0.1,
                               Swin3D_S_Weights.verify(weights), progress, **kwargs)


@register_model("swin3d_b", Swin3D_B_Weights)
@handle_legacy_interface(lambda: Swin3D_B_Weights.KINETICS400_V1)
def swin3d_b(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> SwinTransformer3d:
    """Swin3D-B (88.0M parameters): embed 128, depths 2-2-18-2, heads 4-8-16-32, window 8x7x7."""
    return _swin_transformer3d([2, 4, 4], 128, [2, 2, 18, 2], [4, 8, 16, 32], [8, 7, 7], 0.1,
                               Swin3D_B_Weights.verify(weights), progress, **kwargs)
