"""Multiscale Vision Transformers (torchvision's ``models.video.mvit_v1_b`` / ``mvit_v2_s``; Fan et al. 2021,
arXiv:2104.11227, and MViTv2, Li et al. 2021, arXiv:2112.01526).

A strided Conv3d patchifies the clip into tokens plus a class token; each block attends with queries, keys and values
pooled by depthwise Conv3d + LayerNorm (so the token grid shrinks stage by stage while channels grow), the skip path
max-pooled to match. v2 adds decomposed relative position biases (t, h, w), a pooled-query residual inside the
attention, and the channel projection after the attention. Same arguments, module names and state_dict keys as
torchvision.

Example:
    >>> import ember
    >>> from ember.vision.models.video.mvit import MSBlockConfig, MViT
    >>> cfg = [MSBlockConfig(1, 8, 16, [3, 3, 3], [3, 3, 3], [1, 2, 2], [1, 2, 2]),
    ...        MSBlockConfig(2, 16, 16, [3, 3, 3], [3, 3, 3], [1, 1, 1], [1, 1, 1])]
    >>> model = MViT((16, 16), 4, cfg, residual_pool=True, residual_with_cls_embed=False, rel_pos_embed=True,
    ...              proj_after_attn=True, num_classes=5).eval()
    >>> model(ember.randn(1, 3, 4, 16, 16)).shape
    ember.Size([1, 5])
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Sequence

import numpy as np

import ember
from ember import fx, nn
from ember.nn import functional as F
from ember.tensor import Tensor
from ember.vision.models._api import (handle_legacy_interface, load_weights, make_weights_enum, override_num_classes,
                                      register_model)
from ember.vision.ops.misc import MLP
from ember.vision.ops.stochastic_depth import StochasticDepth

__all__ = ["MViT", "MViT_V1_B_Weights", "mvit_v1_b", "MViT_V2_S_Weights", "mvit_v2_s"]

MViT_V1_B_Weights = make_weights_enum("MViT_V1_B_Weights", __name__)
MViT_V2_S_Weights = make_weights_enum("MViT_V2_S_Weights", __name__)


@dataclass
class MSBlockConfig:
    """One block: heads, channels in/out, query and key/value pooling kernels and strides (``[]`` = no pooling)."""

    num_heads: int
    input_channels: int
    output_channels: int
    kernel_q: list[int]
    kernel_kv: list[int]
    stride_q: list[int]
    stride_kv: list[int]


def _prod(s: Sequence[int]) -> int:
    return math.prod(s)


def _unsqueeze(x: Tensor, target_dim: int, expand_dim: int) -> tuple[Tensor, int]:
    tensor_dim = x.dim()
    if tensor_dim == target_dim - 1:
        x = x.unsqueeze(expand_dim)
    elif tensor_dim != target_dim:
        raise ValueError(f"Unsupported input dimension {x.shape}")
    return x, tensor_dim


def _squeeze(x: Tensor, target_dim: int, expand_dim: int, tensor_dim: int) -> Tensor:
    return x.squeeze(expand_dim) if tensor_dim == target_dim - 1 else x


class Pool(nn.Module):
    """Pools the token grid of ``(B, heads, 1 + T*H*W, C)`` (or ``(B, 1 + T*H*W, C)``) with ``pool``, the class
    token passed through; then the norm/activation (before the pool with ``norm_before_pool``)."""

    def __init__(self, pool: nn.Module, norm: nn.Module | None, activation: nn.Module | None = None,
                 norm_before_pool: bool = False) -> None:
        super().__init__()
        self.pool = pool
        layers = [m for m in (norm, activation) if m is not None]
        self.norm_act = nn.Sequential(*layers) if layers else None
        self.norm_before_pool = norm_before_pool

    def forward(self, x: Tensor, thw: tuple[int, int, int]) -> tuple[Tensor, tuple[int, int, int]]:
        x, tensor_dim = _unsqueeze(x, 4, 1)
        class_token, x = ember.tensor_split(x, indices=(1,), dim=2)
        x = x.transpose(2, 3)
        b, n, c = x.shape[:3]
        x = x.reshape((b * n, c) + tuple(thw)).contiguous()
        if self.norm_before_pool and self.norm_act is not None:
            x = self.norm_act(x)
        x = self.pool(x)
        t, h, w = x.shape[2:]
        x = ember.cat((class_token, x.reshape(b, n, c, -1).transpose(2, 3)), dim=2)
        if not self.norm_before_pool and self.norm_act is not None:
            x = self.norm_act(x)
        return _squeeze(x, 4, 1, tensor_dim), (t, h, w)


def _interpolate(embedding: Tensor, d: int) -> Tensor:
    """A ``(L, C)`` relative-position table resampled to ``d`` rows (linear), when the input size differs from the
    size the model was built for."""
    if embedding.shape[0] == d:
        return embedding
    return F.interpolate(embedding.permute(1, 0).unsqueeze(0), size=d, mode="linear").squeeze(0).permute(1, 0)


def _distances(q: int, k: int) -> np.ndarray:
    """(q, k) row indices into a table of 2 max(q, k) - 1 offsets, computed in float32 and truncated as torchvision
    does (``arange * ratio``, both sides scaled to the finer grid)."""
    q_ratio, k_ratio = np.float32(max(k / q, 1.0)), np.float32(max(q / k, 1.0))
    rows = np.arange(q, dtype=np.float32)[:, None] * q_ratio
    cols = (np.arange(k, dtype=np.float32)[None, :] + np.float32(1.0 - k)) * k_ratio
    return (rows - cols).astype(np.int64)


def _add_rel_pos(attn: Tensor, q: Tensor, q_thw: tuple[int, int, int], k_thw: tuple[int, int, int],
                 rel_pos_h: Tensor, rel_pos_w: Tensor, rel_pos_t: Tensor) -> Tensor:
    """MViTv2's decomposed relative position bias: ``q . R_t + q . R_h + q . R_w`` added to the token-token logits
    (not the class token's row or column)."""
    q_t, q_h, q_w = q_thw
    k_t, k_h, k_w = k_thw
    rh = _interpolate(rel_pos_h, 2 * max(q_h, k_h) - 1)[ember.tensor(_distances(q_h, k_h))]
    rw = _interpolate(rel_pos_w, 2 * max(q_w, k_w) - 1)[ember.tensor(_distances(q_w, k_w))]
    rt = _interpolate(rel_pos_t, 2 * max(q_t, k_t) - 1)[ember.tensor(_distances(q_t, k_t))]
    b, n_head, _, dim = q.shape
    r_q = q[:, :, 1:].reshape(b, n_head, q_t, q_h, q_w, dim)
    rel_h = ember.einsum("bythwc,hkc->bythwk", r_q, rh)
    rel_w = ember.einsum("bythwc,wkc->bythwk", r_q, rw)
    # time as a batched product, as torchvision: (q_t, B*heads*q_h*q_w, dim) @ (q_t, dim, k_t)
    r_q = r_q.permute(2, 0, 1, 3, 4, 5).reshape(q_t, b * n_head * q_h * q_w, dim)
    rel_t = ember.matmul(r_q, rt.transpose(1, 2)).transpose(0, 1)
    rel_t = rel_t.view(b, n_head, q_h, q_w, q_t, k_t).permute(0, 1, 4, 2, 3, 5)
    rel_pos = (rel_h[:, :, :, :, :, None, :, None] + rel_w[:, :, :, :, :, None, None, :]
               + rel_t[:, :, :, :, :, :, None, None]).reshape(b, n_head, q_t * q_h * q_w, k_t * k_h * k_w)
    # torchvision adds in place into attn[:, :, 1:, 1:]; adding a zero-padded copy gives the same values
    return attn + F.pad(rel_pos, (1, 0, 1, 0))


def _add_shortcut(x: Tensor, shortcut: Tensor, residual_with_cls_embed: bool) -> Tensor:
    if residual_with_cls_embed:
        return x + shortcut
    return x + F.pad(shortcut[:, :, 1:, :], (0, 0, 1, 0))  # the class token's row gets no shortcut


fx.wrap("_unsqueeze")
fx.wrap("_squeeze")
fx.wrap("_add_rel_pos")
fx.wrap("_add_shortcut")


def _pool_conv(head_dim: int, kernel: list[int], stride: list[int], norm_layer: Callable[..., nn.Module]) -> Pool:
    return Pool(nn.Conv3d(head_dim, head_dim, kernel, stride=stride, padding=[int(k // 2) for k in kernel],
                          groups=head_dim, bias=False), norm_layer(head_dim))


class MultiscaleAttention(nn.Module):
    """Multi-head attention with pooled queries (``pool_q``), keys and values (``pool_k``/``pool_v``)."""

    def __init__(self, input_size: list[int], embed_dim: int, output_dim: int, num_heads: int, kernel_q: list[int],
                 kernel_kv: list[int], stride_q: list[int], stride_kv: list[int], residual_pool: bool,
                 residual_with_cls_embed: bool, rel_pos_embed: bool, dropout: float = 0.0,
                 norm_layer: Callable[..., nn.Module] = nn.LayerNorm) -> None:
        super().__init__()
        self.embed_dim = embed_dim
        self.output_dim = output_dim
        self.num_heads = num_heads
        self.head_dim = output_dim // num_heads
        self.scaler = 1.0 / math.sqrt(self.head_dim)
        self.residual_pool = residual_pool
        self.residual_with_cls_embed = residual_with_cls_embed
        self.qkv = nn.Linear(embed_dim, 3 * output_dim)
        layers: list[nn.Module] = [nn.Linear(output_dim, output_dim)]
        if dropout > 0.0:
            layers.append(nn.Dropout(dropout, inplace=True))
        self.project = nn.Sequential(*layers)
        self.pool_q: nn.Module | None = None
        if _prod(kernel_q) > 1 or _prod(stride_q) > 1:
            self.pool_q = _pool_conv(self.head_dim, kernel_q, stride_q, norm_layer)
        self.pool_k: nn.Module | None = None
        self.pool_v: nn.Module | None = None
        if _prod(kernel_kv) > 1 or _prod(stride_kv) > 1:
            self.pool_k = _pool_conv(self.head_dim, kernel_kv, stride_kv, norm_layer)
            self.pool_v = _pool_conv(self.head_dim, kernel_kv, stride_kv, norm_layer)
        self.rel_pos_h: nn.Parameter | None = None
        self.rel_pos_w: nn.Parameter | None = None
        self.rel_pos_t: nn.Parameter | None = None
        if rel_pos_embed:
            size = max(input_size[1:])
            q_size = size // stride_q[1] if len(stride_q) > 0 else size
            kv_size = size // stride_kv[1] if len(stride_kv) > 0 else size
            spatial_dim = 2 * max(q_size, kv_size) - 1
            self.rel_pos_h = nn.Parameter(ember.zeros(spatial_dim, self.head_dim))
            self.rel_pos_w = nn.Parameter(ember.zeros(spatial_dim, self.head_dim))
            self.rel_pos_t = nn.Parameter(ember.zeros(2 * input_size[0] - 1, self.head_dim))
            for table in (self.rel_pos_h, self.rel_pos_w, self.rel_pos_t):
                nn.init.trunc_normal_(table, std=0.02)

    def forward(self, x: Tensor, thw: tuple[int, int, int]) -> tuple[Tensor, tuple[int, int, int]]:
        b, n, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).transpose(1, 3).unbind(dim=2)
        k_thw = thw
        if self.pool_k is not None:
            k, k_thw = self.pool_k(k, thw)
        if self.pool_v is not None:
            v = self.pool_v(v, thw)[0]
        if self.pool_q is not None:
            q, thw = self.pool_q(q, thw)
        attn = ember.matmul(self.scaler * q, k.transpose(2, 3))
        if self.rel_pos_h is not None and self.rel_pos_w is not None and self.rel_pos_t is not None:
            attn = _add_rel_pos(attn, q, thw, k_thw, self.rel_pos_h, self.rel_pos_w, self.rel_pos_t)
        x = ember.matmul(attn.softmax(dim=-1), v)
        if self.residual_pool:
            x = _add_shortcut(x, q, self.residual_with_cls_embed)
        return self.project(x.transpose(1, 2).reshape(b, -1, self.output_dim)), thw


class MultiscaleBlock(nn.Module):
    """Pre-norm attention (skip path max-pooled when queries are) and MLP, with a linear channel projection on the
    skip path when the width changes (after the attention in v2, after the MLP's norm in v1)."""

    def __init__(self, input_size: list[int], cnf: MSBlockConfig, residual_pool: bool, residual_with_cls_embed: bool,
                 rel_pos_embed: bool, proj_after_attn: bool, dropout: float = 0.0, stochastic_depth_prob: float = 0.0,
                 norm_layer: Callable[..., nn.Module] = nn.LayerNorm) -> None:
        super().__init__()
        self.proj_after_attn = proj_after_attn
        self.pool_skip: nn.Module | None = None
        if _prod(cnf.stride_q) > 1:
            kernel_skip = [s + 1 if s > 1 else s for s in cnf.stride_q]
            self.pool_skip = Pool(nn.MaxPool3d(kernel_skip, stride=cnf.stride_q,
                                               padding=[int(k // 2) for k in kernel_skip]), None)
        attn_dim = cnf.output_channels if proj_after_attn else cnf.input_channels
        self.norm1 = norm_layer(cnf.input_channels)
        self.norm2 = norm_layer(attn_dim)
        self.needs_transposal = isinstance(self.norm1, nn.BatchNorm1d)
        self.attn = MultiscaleAttention(input_size, cnf.input_channels, attn_dim, cnf.num_heads, kernel_q=cnf.kernel_q,
                                        kernel_kv=cnf.kernel_kv, stride_q=cnf.stride_q, stride_kv=cnf.stride_kv,
                                        rel_pos_embed=rel_pos_embed, residual_pool=residual_pool,
                                        residual_with_cls_embed=residual_with_cls_embed, dropout=dropout,
                                        norm_layer=norm_layer)
        self.mlp = MLP(attn_dim, [4 * attn_dim, cnf.output_channels], activation_layer=nn.GELU, dropout=dropout,
                       inplace=None)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.project: nn.Module | None = None
        if cnf.input_channels != cnf.output_channels:
            self.project = nn.Linear(cnf.input_channels, cnf.output_channels)

    def _norm(self, norm: nn.Module, x: Tensor) -> Tensor:
        return norm(x.transpose(1, 2)).transpose(1, 2) if self.needs_transposal else norm(x)

    def forward(self, x: Tensor, thw: tuple[int, int, int]) -> tuple[Tensor, tuple[int, int, int]]:
        x_norm1 = self._norm(self.norm1, x)
        x_attn, thw_new = self.attn(x_norm1, thw)
        x = x if self.project is None or not self.proj_after_attn else self.project(x_norm1)
        x_skip = x if self.pool_skip is None else self.pool_skip(x, thw)[0]
        x = x_skip + self.stochastic_depth(x_attn)
        x_norm2 = self._norm(self.norm2, x)
        x_proj = x if self.project is None or self.proj_after_attn else self.project(x_norm2)
        return x_proj + self.stochastic_depth(self.mlp(x_norm2)), thw_new


class PositionalEncoding(nn.Module):
    """Prepends the class token; without relative positions (v1) adds separable space + time embeddings."""

    def __init__(self, embed_size: int, spatial_size: tuple[int, int], temporal_size: int,
                 rel_pos_embed: bool) -> None:
        super().__init__()
        self.spatial_size = spatial_size
        self.temporal_size = temporal_size
        self.class_token = nn.Parameter(ember.zeros(embed_size))
        self.spatial_pos: nn.Parameter | None = None
        self.temporal_pos: nn.Parameter | None = None
        self.class_pos: nn.Parameter | None = None
        if not rel_pos_embed:
            self.spatial_pos = nn.Parameter(ember.zeros(self.spatial_size[0] * self.spatial_size[1], embed_size))
            self.temporal_pos = nn.Parameter(ember.zeros(self.temporal_size, embed_size))
            self.class_pos = nn.Parameter(ember.zeros(embed_size))

    def forward(self, x: Tensor) -> Tensor:
        x = ember.cat((self.class_token.expand(x.size(0), -1).unsqueeze(1), x), dim=1)
        if self.spatial_pos is not None and self.temporal_pos is not None and self.class_pos is not None:
            hw_size, embed_size = self.spatial_pos.shape
            pos = ember.repeat_interleave(self.temporal_pos, hw_size, dim=0)
            # in place, as torchvision (fresh results of repeat_interleave / cat; fx node names follow the calls)
            pos.add_(self.spatial_pos.unsqueeze(0).expand(self.temporal_size, -1, -1).reshape(-1, embed_size))
            x.add_(ember.cat((self.class_pos.unsqueeze(0), pos), dim=0).unsqueeze(0))
        return x


class MViT(nn.Module):
    """Patchify (Conv3d), class token and positions, the multiscale blocks, LayerNorm, the class token's head.
    Input ``(N, 3, T, H, W)`` (or ``(N, 3, H, W)``: one frame) of the size it was built for."""

    def __init__(self, spatial_size: tuple[int, int], temporal_size: int, block_setting: Sequence[MSBlockConfig],
                 residual_pool: bool, residual_with_cls_embed: bool, rel_pos_embed: bool, proj_after_attn: bool,
                 dropout: float = 0.5, attention_dropout: float = 0.0, stochastic_depth_prob: float = 0.0,
                 num_classes: int = 400, block: Callable[..., nn.Module] | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None,
                 patch_embed_kernel: tuple[int, int, int] = (3, 7, 7),
                 patch_embed_stride: tuple[int, int, int] = (2, 4, 4),
                 patch_embed_padding: tuple[int, int, int] = (1, 3, 3)) -> None:
        super().__init__()
        total = len(block_setting)  # one block divides 0 by 0 below, as torchvision does
        if total == 0:
            raise ValueError("The configuration parameter can't be empty.")
        block = block or MultiscaleBlock
        norm_layer = norm_layer or partial(nn.LayerNorm, eps=1e-6)
        self.conv_proj = nn.Conv3d(in_channels=3, out_channels=block_setting[0].input_channels,
                                   kernel_size=patch_embed_kernel, stride=patch_embed_stride,
                                   padding=patch_embed_padding)
        spatial_size = tuple(spatial_size)
        input_size = [size // stride for size, stride in zip((temporal_size,) + spatial_size, self.conv_proj.stride)]
        self.pos_encoding = PositionalEncoding(embed_size=block_setting[0].input_channels,
                                               spatial_size=(input_size[1], input_size[2]),
                                               temporal_size=input_size[0], rel_pos_embed=rel_pos_embed)
        self.blocks = nn.ModuleList()
        for block_id, cnf in enumerate(block_setting):
            self.blocks.append(block(input_size=input_size, cnf=cnf, residual_pool=residual_pool,
                                     residual_with_cls_embed=residual_with_cls_embed, rel_pos_embed=rel_pos_embed,
                                     proj_after_attn=proj_after_attn, dropout=attention_dropout,
                                     stochastic_depth_prob=stochastic_depth_prob * block_id / (total - 1.0),
                                     norm_layer=norm_layer))
            if len(cnf.stride_q) > 0:
                input_size = [size // stride for size, stride in zip(input_size, cnf.stride_q)]
        self.norm = norm_layer(block_setting[-1].output_channels)
        self.head = nn.Sequential(nn.Dropout(dropout, inplace=True),
                                  nn.Linear(block_setting[-1].output_channels, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0.0)
            elif isinstance(m, nn.LayerNorm):
                if m.weight is not None:
                    nn.init.constant_(m.weight, 1.0)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0.0)
            elif isinstance(m, PositionalEncoding):
                for weights in m.parameters():
                    nn.init.trunc_normal_(weights, std=0.02)

    def forward(self, x: Tensor) -> Tensor:
        x = _unsqueeze(x, 5, 2)[0]  # an image batch (B, C, H, W) is a one-frame clip
        x = self.pos_encoding(self.conv_proj(x).flatten(2).transpose(1, 2))
        thw = (self.pos_encoding.temporal_size,) + tuple(self.pos_encoding.spatial_size)
        for block in self.blocks:
            x, thw = block(x, thw)
        return self.head(self.norm(x)[:, 0])


def _mvit(block_setting: list[MSBlockConfig], stochastic_depth_prob: float, weights: Any, progress: bool,
          **kwargs: Any) -> MViT:
    if weights is not None:
        override_num_classes(kwargs, weights)
        for key, value in (("spatial_size", tuple(weights.meta["min_size"])),
                           ("temporal_size", weights.meta["min_temporal_size"])):
            if kwargs.get(key, value) != value:  # torchvision's _ovewrite_named_param
                raise ValueError(f"The parameter '{key}' expected value {value} but got {kwargs[key]} instead.")
            kwargs[key] = value
    model = MViT(spatial_size=tuple(kwargs.pop("spatial_size", (224, 224))),
                 temporal_size=kwargs.pop("temporal_size", 16), block_setting=block_setting,
                 residual_pool=kwargs.pop("residual_pool", False),
                 residual_with_cls_embed=kwargs.pop("residual_with_cls_embed", True),
                 rel_pos_embed=kwargs.pop("rel_pos_embed", False), proj_after_attn=kwargs.pop("proj_after_attn", False),
                 stochastic_depth_prob=stochastic_depth_prob, **kwargs)
    return load_weights(model, weights, progress)


def _settings(num_heads: list[int], channels: list[int], out_channels: list[int], kernel_q: list[list[int]],
              stride_q: list[list[int]]) -> list[MSBlockConfig]:
    # both published variants pool keys/values with 3x3x3 kernels and these strides
    stride_kv = [[1, 8, 8]] + [[1, 4, 4]] * 2 + [[1, 2, 2]] * 11 + [[1, 1, 1]] * 2
    return [MSBlockConfig(num_heads=h, input_channels=c, output_channels=o, kernel_q=kq, kernel_kv=[3, 3, 3],
                          stride_q=sq, stride_kv=skv)
            for h, c, o, kq, sq, skv in zip(num_heads, channels, out_channels, kernel_q, stride_q, stride_kv)]


_HEADS = [1, 2, 2, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 8, 8]


@register_model("mvit_v1_b", MViT_V1_B_Weights)
@handle_legacy_interface(lambda: MViT_V1_B_Weights.KINETICS400_V1)
def mvit_v1_b(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> MViT:
    """MViT-B (v1, 36.6M parameters): absolute space-time positions, queries pooled at blocks 1, 3 and 14."""
    weights = MViT_V1_B_Weights.verify(weights)
    down = {1, 3, 14}
    setting = _settings(_HEADS, [96, 192, 192] + [384] * 11 + [768, 768], [192, 192] + [384] * 11 + [768] * 3,
                        [[3, 3, 3] if i in down else [] for i in range(16)],
                        [[1, 2, 2] if i in down else [] for i in range(16)])
    return _mvit(setting, kwargs.pop("stochastic_depth_prob", 0.2), weights, progress, spatial_size=kwargs.pop(
        "spatial_size", (224, 224)), temporal_size=kwargs.pop("temporal_size", 16), residual_pool=False,
        residual_with_cls_embed=False, **kwargs)


@register_model("mvit_v2_s", MViT_V2_S_Weights)
@handle_legacy_interface(lambda: MViT_V2_S_Weights.KINETICS400_V1)
def mvit_v2_s(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> MViT:
    """MViTv2-S (34.5M parameters): relative positions, pooled-query residuals, projection after the attention."""
    weights = MViT_V2_S_Weights.verify(weights)
    down = {1, 3, 14}
    setting = _settings(_HEADS, [96, 96, 192, 192] + [384] * 11 + [768], [96, 192, 192] + [384] * 11 + [768] * 2,
                        [[3, 3, 3]] * 16, [[1, 2, 2] if i in down else [1, 1, 1] for i in range(16)])
    return _mvit(setting, kwargs.pop("stochastic_depth_prob", 0.2), weights, progress, spatial_size=kwargs.pop(
        "spatial_size", (224, 224)), temporal_size=kwargs.pop("temporal_size", 16), residual_pool=True,
        residual_with_cls_embed=False, rel_pos_embed=True, proj_after_attn=True, **kwargs)
