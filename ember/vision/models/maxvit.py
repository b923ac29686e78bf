"""MaxViT (torchvision's ``models.maxvit_t``: same arguments, module names, buffers and keys).

Each layer is an MBConv block followed by two attentions over the same tokens grouped two ways: within
local P x P windows ("window") and across a sparse P x P grid that spans the image ("grid"), each with a
learned relative-position bias, a pre-norm MLP and stochastic depth. The network is built for one input size
(``input_size``, 224 by default), which every stage's grid must divide by the partition size.

Example:
    >>> import ember
    >>> from ember.vision.models import MaxVit
    >>> model = MaxVit(input_size=(32, 32), stem_channels=8, partition_size=2, block_channels=[8, 16],
    ...                block_layers=[1, 1], head_dim=4, stochastic_depth_prob=0.0, num_classes=3)
    >>> model.eval()(ember.randn(1, 3, 32, 32)).shape
    ember.Size([1, 3])
"""
from __future__ import annotations

import math
from collections import OrderedDict
from functools import partial
from typing import Any, Callable

import numpy as np

import ember
from ember import nn
from ember.nn import functional as F
from ember.vision.models._api import (
    handle_legacy_interface, load_weights, make_weights_enum, override_num_classes, register_model,
)
from ember.vision.ops.misc import Conv2dNormActivation, SqueezeExcitation
from ember.vision.ops.stochastic_depth import StochasticDepth

__all__ = ["MaxVit", "MaxVit_T_Weights", "maxvit_t"]

MaxVit_T_Weights = make_weights_enum("MaxVit_T_Weights", __name__)


def _conv_output_shape(size: tuple[int, int], kernel_size: int, stride: int, padding: int) -> tuple[int, int]:
    return ((size[0] - kernel_size + 2 * padding) // stride + 1, (size[1] - kernel_size + 2 * padding) // stride + 1)


def _block_input_shapes(input_size: tuple[int, int], n_blocks: int) -> list[tuple[int, int]]:
    """The grid each block works on: the stem halves the input, each block halves it again."""
    shapes, shape = [], _conv_output_shape(input_size, 3, 2, 1)
    for _ in range(n_blocks):
        shape = _conv_output_shape(shape, 3, 2, 1)
        shapes.append(shape)
    return shapes


def _relative_position_index(height: int, width: int) -> np.ndarray:
    coords = np.stack(np.meshgrid(np.arange(height), np.arange(width), indexing="ij")).reshape(2, -1)
    relative = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0).copy()
    relative[:, :, 0] += height - 1
    relative[:, :, 1] += width - 1
    relative[:, :, 0] *= 2 * width - 1
    return relative.sum(-1).astype(np.int64)


class MBConv(nn.Module):
    """Pre-norm inverted bottleneck (1x1 expand, 3x3 depthwise, squeeze-excite, 1x1 project) with a projected
    shortcut (average-pooled when strided)."""

    def __init__(self, in_channels: int, out_channels: int, expansion_ratio: float, squeeze_ratio: float,
                 stride: int, activation_layer: Callable[..., nn.Module], norm_layer: Callable[..., nn.Module],
                 p_stochastic_dropout: float = 0.0) -> None:
        super().__init__()
        if stride != 1 or in_channels != out_channels:
            proj: list[nn.Module] = [nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=1, bias=True)]
            if stride == 2:
                proj.insert(0, nn.AvgPool2d(kernel_size=3, stride=stride, padding=1))
            self.proj = nn.Sequential(*proj)
        else:
            self.proj = nn.Identity()
        mid_channels = int(out_channels * expansion_ratio)
        self.stochastic_depth = (StochasticDepth(p_stochastic_dropout, mode="row") if p_stochastic_dropout
                                 else nn.Identity())
        layers: OrderedDict[str, nn.Module] = OrderedDict()
        layers["pre_norm"] = norm_layer(in_channels)
        layers["conv_a"] = Conv2dNormActivation(in_channels, mid_channels, kernel_size=1, stride=1, padding=0,
                                                activation_layer=activation_layer, norm_layer=norm_layer, inplace=None)
        layers["conv_b"] = Conv2dNormActivation(mid_channels, mid_channels, kernel_size=3, stride=stride, padding=1,
                                                activation_layer=activation_layer, norm_layer=norm_layer,
                                                groups=mid_channels, inplace=None)
        layers["squeeze_excitation"] = SqueezeExcitation(mid_channels, int(out_channels * squeeze_ratio),
                                                         activation=nn.SiLU)
        layers["conv_c"] = nn.Conv2d(in_channels=mid_channels, out_channels=out_channels, kernel_size=1, bias=True)
        self.layers = nn.Sequential(layers)

    def forward(self, x: Any) -> Any:
        return self.proj(x) + self.stochastic_depth(self.layers(x))


class RelativePositionalMultiHeadAttention(nn.Module):
    """Attention over the P*P tokens of each partition (B, G, P*P, D), with a learned relative-position bias.
    (As torchvision, the keys, not the queries, are scaled, by ``feat_dim ** -0.5``.)"""

    def __init__(self, feat_dim: int, head_dim: int, max_seq_len: int) -> None:
        super().__init__()
        if feat_dim % head_dim != 0:
            raise ValueError(f"feat_dim: {feat_dim} must be divisible by head_dim: {head_dim}")
        self.n_heads = feat_dim // head_dim
        self.head_dim = head_dim
        self.size = int(math.sqrt(max_seq_len))
        self.max_seq_len = max_seq_len
        self.to_qkv = nn.Linear(feat_dim, self.n_heads * self.head_dim * 3)
        self.scale_factor = feat_dim ** -0.5
        self.merge = nn.Linear(self.head_dim * self.n_heads, feat_dim)
        self.relative_position_bias_table = nn.Parameter(
            ember.empty(((2 * self.size - 1) * (2 * self.size - 1), self.n_heads), dtype=ember.float32))
        self.register_buffer("relative_position_index", ember.tensor(_relative_position_index(self.size, self.size)))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def get_relative_positional_bias(self) -> Any:
        bias = self.relative_position_bias_table[self.relative_position_index.view(-1)]
        return bias.view(self.max_seq_len, self.max_seq_len, -1).permute(2, 0, 1).contiguous().unsqueeze(0)

    def forward(self, x: Any) -> Any:
        batch, groups, tokens, dim = x.shape
        q, k, v = ember.chunk(self.to_qkv(x), 3, dim=-1)
        q, k, v = (t.reshape(batch, groups, tokens, self.n_heads, self.head_dim).permute(0, 1, 3, 2, 4)
                   for t in (q, k, v))
        weights = F.softmax(q.matmul((k * self.scale_factor).transpose(-2, -1))
                            + self.get_relative_positional_bias(), dim=-1)
        out = weights.matmul(v).permute(0, 1, 3, 2, 4).reshape(batch, groups, tokens, dim)
        return self.merge(out)


class SwapAxes(nn.Module):
    """``x.swapaxes(a, b)`` as a layer."""

    def __init__(self, a: int, b: int) -> None:
        super().__init__()
        self.a = a
        self.b = b

    def forward(self, x: Any) -> Any:
        return ember.swapaxes(x, self.a, self.b)


class WindowPartition(nn.Module):
    """(B, C, H, W) -> (B, H/P * W/P, P*P, C): non-overlapping P x P windows."""

    def forward(self, x: Any, p: int) -> Any:
        batch, channels, height, width = x.shape
        x = x.reshape(batch, channels, height // p, p, width // p, p).permute(0, 2, 4, 3, 5, 1)
        return x.reshape(batch, (height // p) * (width // p), p * p, channels)


class WindowDepartition(nn.Module):
    """The inverse of :class:`WindowPartition`, given the number of windows down and across."""

    def forward(self, x: Any, p: int, h_partitions: int, w_partitions: int) -> Any:
        batch, _, _, channels = x.shape
        x = x.reshape(batch, h_partitions, w_partitions, p, p, channels).permute(0, 5, 1, 3, 2, 4)
        return x.reshape(batch, channels, h_partitions * p, w_partitions * p)


class PartitionAttentionLayer(nn.Module):
    """Partition (windows, or a grid by swapping the partition axes), pre-norm attention and MLP with
    stochastic depth, departition."""

    def __init__(self, in_channels: int, head_dim: int, partition_size: int, partition_type: str,
                 grid_size: tuple[int, int], mlp_ratio: int, activation_layer: Callable[..., nn.Module],
                 norm_layer: Callable[..., nn.Module], attention_dropout: float, mlp_dropout: float,
                 p_stochastic_dropout: float) -> None:
        super().__init__()
        if partition_type not in ("grid", "window"):
            raise ValueError("partition_type must be either 'grid' or 'window'")
        self.n_heads = in_channels // head_dim
        self.head_dim = head_dim
        self.n_partitions = grid_size[0] // partition_size
        self.partition_type = partition_type
        self.grid_size = grid_size
        if partition_type == "window":
            self.p, self.g = partition_size, self.n_partitions
        else:
            self.p, self.g = self.n_partitions, partition_size
        self.partition_op = WindowPartition()
        self.departition_op = WindowDepartition()
        self.partition_swap = SwapAxes(-2, -3) if partition_type == "grid" else nn.Identity()
        self.departition_swap = SwapAxes(-2, -3) if partition_type == "grid" else nn.Identity()
        self.attn_layer = nn.Sequential(norm_layer(in_channels),
                                        RelativePositionalMultiHeadAttention(in_channels, head_dim, partition_size ** 2),
                                        nn.Dropout(attention_dropout))
        self.mlp_layer = nn.Sequential(nn.LayerNorm(in_channels), nn.Linear(in_channels, in_channels * mlp_ratio),
                                       activation_layer(), nn.Linear(in_channels * mlp_ratio, in_channels),
                                       nn.Dropout(mlp_dropout))
        self.stochastic_dropout = StochasticDepth(p_stochastic_dropout, mode="row")

    def forward(self, x: Any) -> Any:
        if self.grid_size[0] % self.p or self.grid_size[1] % self.p:
            raise RuntimeError(f"Grid size must be divisible by partition size. Got grid size of {self.grid_size} "
                               f"and partition size of {self.p}")
        gh, gw = self.grid_size[0] // self.p, self.grid_size[1] // self.p
        x = self.partition_swap(self.partition_op(x, self.p))
        x = x + self.stochastic_dropout(self.attn_layer(x))
        x = x + self.stochastic_dropout(self.mlp_layer(x))
        return self.departition_op(self.departition_swap(x), self.p, gh, gw)


class MaxVitLayer(nn.Module):
    """MBConv, then window attention, then grid attention."""

    def __init__(self, in_channels: int, out_channels: int, squeeze_ratio: float, expansion_ratio: float,
                 stride: int, norm_layer: Callable[..., nn.Module], activation_layer: Callable[..., nn.Module],
                 head_dim: int, mlp_ratio: int, mlp_dropout: float, attention_dropout: float,
                 p_stochastic_dropout: float, partition_size: int, grid_size: tuple[int, int]) -> None:
        super().__init__()
        layers: OrderedDict[str, nn.Module] = OrderedDict()
        layers["MBconv"] = MBConv(in_channels=in_channels, out_channels=out_channels, expansion_ratio=expansion_ratio,
                                  squeeze_ratio=squeeze_ratio, stride=stride, activation_layer=activation_layer,
                                  norm_layer=norm_layer, p_stochastic_dropout=p_stochastic_dropout)
        for kind in ("window", "grid"):
            layers[f"{kind}_attention"] = PartitionAttentionLayer(
                in_channels=out_channels, head_dim=head_dim, partition_size=partition_size, partition_type=kind,
                grid_size=grid_size, mlp_ratio=mlp_ratio, activation_layer=activation_layer,
                norm_layer=nn.LayerNorm, attention_dropout=attention_dropout, mlp_dropout=mlp_dropout,
                p_stochastic_dropout=p_stochastic_dropout)
        self.layers = nn.Sequential(layers)

    def forward(self, x: Any) -> Any:
        return self.layers(x)


class MaxVitBlock(nn.Module):
    """``n_layers`` MaxViT layers; the first halves the grid."""

    def __init__(self, in_channels: int, out_channels: int, squeeze_ratio: float, expansion_ratio: float,
                 norm_layer: Callable[..., nn.Module], activation_layer: Callable[..., nn.Module], head_dim: int,
                 mlp_ratio: int, mlp_dropout: float, attention_dropout: float, partition_size: int,
                 input_grid_size: tuple[int, int], n_layers: int, p_stochastic: list[float]) -> None:
        super().__init__()
        if len(p_stochastic) != n_layers:
            raise ValueError(f"p_stochastic must have length n_layers={n_layers}, got p_stochastic={p_stochastic}.")
        self.layers = nn.ModuleList()
        self.grid_size = _conv_output_shape(input_grid_size, kernel_size=3, stride=2, padding=1)
        for idx, p in enumerate(p_stochastic):
            self.layers.append(MaxVitLayer(
                in_channels=in_channels if idx == 0 else out_channels, out_channels=out_channels,
                squeeze_ratio=squeeze_ratio, expansion_ratio=expansion_ratio, stride=2 if idx == 0 else 1,
                norm_layer=norm_layer, activation_layer=activation_layer, head_dim=head_dim, mlp_ratio=mlp_ratio,
                mlp_dropout=mlp_dropout, attention_dropout=attention_dropout, partition_size=partition_size,
                grid_size=self.grid_size, p_stochastic_dropout=p))

    def forward(self, x: Any) -> Any:
        for layer in self.layers:
            x = layer(x)
        return x


class MaxVit(nn.Module):
    """A two-conv stem, MaxViT blocks (stochastic depth rising linearly to ``stochastic_depth_prob``), and a
    pool-LayerNorm-Linear-Tanh-Linear head."""

    def __init__(self, input_size: tuple[int, int], stem_channels: int, partition_size: int,
                 block_channels: list[int], block_layers: list[int], head_dim: int, stochastic_depth_prob: float,
                 norm_layer: Callable[..., nn.Module] | None = None,
                 activation_layer: Callable[..., nn.Module] = nn.GELU, squeeze_ratio: float = 0.25,
                 expansion_ratio: float = 4, mlp_ratio: int = 4, mlp_dropout: float = 0.0,
                 attention_dropout: float = 0.0, num_classes: int = 1000) -> None:
        super().__init__()
        norm_layer = norm_layer or partial(nn.BatchNorm2d, eps=1e-3, momentum=0.01)
        block_sizes = _block_input_shapes(tuple(input_size), len(block_channels))
        for idx, size in enumerate(block_sizes):
            if size[0] % partition_size != 0 or size[1] % partition_size != 0:
                raise ValueError(f"Input size {size} of block {idx} is not divisible by partition size "
                                 f"{partition_size}. Consider changing the partition size or the input size.\n"
                                 f"Current configuration yields the following block input sizes: {block_sizes}.")
        self.stem = nn.Sequential(
            Conv2dNormActivation(3, stem_channels, 3, stride=2, norm_layer=norm_layer,
                                 activation_layer=activation_layer, bias=False, inplace=None),
            Conv2dNormActivation(stem_channels, stem_channels, 3, stride=1, norm_layer=None, activation_layer=None,
                                 bias=True))
        grid = _conv_output_shape(tuple(input_size), kernel_size=3, stride=2, padding=1)
        self.partition_size = partition_size
        self.blocks = nn.ModuleList()
        p_stochastic = np.linspace(0, stochastic_depth_prob, sum(block_layers)).tolist()
        start = 0
        for in_channel, out_channel, num_layers in zip([stem_channels] + list(block_channels[:-1]), block_channels,
                                                       block_layers):
            block = MaxVitBlock(in_channels=in_channel, out_channels=out_channel, squeeze_ratio=squeeze_ratio,
                                expansion_ratio=expansion_ratio, norm_layer=norm_layer,
                                activation_layer=activation_layer, head_dim=head_dim, mlp_ratio=mlp_ratio,
                                mlp_dropout=mlp_dropout, attention_dropout=attention_dropout,
                                partition_size=partition_size, input_grid_size=grid, n_layers=num_layers,
                                p_stochastic=p_stochastic[start:start + num_layers])
            self.blocks.append(block)
            grid = block.grid_size
            start += num_layers
        self.classifier = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(block_channels[-1]),
                                        nn.Linear(block_channels[-1], block_channels[-1]), nn.Tanh(),
                                        nn.Linear(block_channels[-1], num_classes, bias=False))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x: Any) -> Any:
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.classifier(x)


@register_model("maxvit_t", MaxVit_T_Weights)
@handle_legacy_interface(lambda: MaxVit_T_Weights.IMAGENET1K_V1)
def maxvit_t(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> MaxVit:
    """MaxViT-T (stem 64, blocks 64-128-256-512 of 2-2-5-2 layers, partitions of 7, heads of 32 channels;
    ``input_size`` defaults to (224, 224))."""
    weights = MaxVit_T_Weights.verify(weights)
    override_num_classes(kwargs, weights)
    if weights is not None:
        size = tuple(weights.meta["min_size"])
        if tuple(kwargs.get("input_size", size)) != size:
            raise ValueError(f"maxvit_t: the weights {weights!r} need input_size={size}, got {kwargs['input_size']}")
        kwargs["input_size"] = size
    input_size = kwargs.pop("input_size", (224, 224))
    model = MaxVit(stem_channels=64, block_channels=[64, 128, 256, 512], block_layers=[2, 2, 5, 2], head_dim=32,
                   stochastic_depth_prob=0.2, partition_size=7, input_size=input_size, **kwargs)
    return load_weights(model, weights, progress)
