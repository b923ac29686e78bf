"""Vision Transformer ViT-B/16 (torchvision's ``models.vit_b_16``: same arguments, module names and keys).

Example:
    >>> import ember
    >>> from ember.vision.models import VisionTransformer
    >>> vit = VisionTransformer(image_size=32, patch_size=16, num_layers=1, num_heads=2, hidden_dim=8, mlp_dim=16,
    ...                         num_classes=3).eval()
    >>> vit(ember.randn(2, 3, 32, 32)).shape
    ember.Size([2, 3])
"""
from __future__ import annotations

import functools
import math
from collections import OrderedDict
from typing import Any, Callable

import ember
from ember import nn
from ember.vision.models._api import (
    handle_legacy_interface, load_weights, make_weights_enum, override_num_classes, register_model,
)
from ember.vision.ops.misc import MLP

__all__ = ["VisionTransformer", "ViT_B_16_Weights", "ViT_B_32_Weights", "ViT_L_16_Weights", "ViT_L_32_Weights",
           "ViT_H_14_Weights", "vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14"]

ViT_B_16_Weights = make_weights_enum("ViT_B_16_Weights", __name__)
ViT_B_32_Weights = make_weights_enum("ViT_B_32_Weights", __name__)
ViT_L_16_Weights = make_weights_enum("ViT_L_16_Weights", __name__)
ViT_L_32_Weights = make_weights_enum("ViT_L_32_Weights", __name__)
ViT_H_14_Weights = make_weights_enum("ViT_H_14_Weights", __name__)
_LayerNorm = functools.partial(nn.LayerNorm, eps=1e-6)


class MLPBlock(MLP):
    """Linear -> GELU -> Dropout -> Linear -> Dropout (children 0..4)."""

    def __init__(self, in_dim: int, mlp_dim: int, dropout: float) -> None:
        super().__init__(in_dim, [mlp_dim, in_dim], activation_layer=nn.GELU, inplace=None, dropout=dropout)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.normal_(m.bias, std=1e-6)


class EncoderBlock(nn.Module):
    """Pre-norm block: ``x + attention(ln_1(x))``, then ``x + mlp(ln_2(x))``."""

    def __init__(self, num_heads: int, hidden_dim: int, mlp_dim: int, dropout: float, attention_dropout: float,
                 norm_layer: Callable[..., nn.Module] = _LayerNorm) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.ln_1 = norm_layer(hidden_dim)
        self.self_attention = nn.MultiheadAttention(hidden_dim, num_heads, dropout=attention_dropout,
                                                    batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.ln_2 = norm_layer(hidden_dim)
        self.mlp = MLPBlock(hidden_dim, mlp_dim, dropout)

    def forward(self, input: Any) -> Any:
        # ember._assert, as torchvision's torch._assert: fx records it (feature extraction traces this forward)
        ember._assert(input.dim() == 3, f"Expected (batch_size, seq_length, hidden_dim) got {input.shape}")
        x = self.ln_1(input)
        x, _ = self.self_attention(x, x, x, need_weights=False)
        x = self.dropout(x) + input
        return x + self.mlp(self.ln_2(x))


class Encoder(nn.Module):
    """Learned position embedding, dropout, ``layers.encoder_layer_i``, final ``ln``."""

    def __init__(self, seq_length: int, num_layers: int, num_heads: int, hidden_dim: int, mlp_dim: int,
                 dropout: float, attention_dropout: float, norm_layer: Callable[..., nn.Module] = _LayerNorm) -> None:
        super().__init__()
        self.pos_embedding = nn.Parameter(ember.empty(1, seq_length, hidden_dim).normal_(std=0.02))
        self.dropout = nn.Dropout(dropout)
        layers: OrderedDict[str, nn.Module] = OrderedDict()
        for i in range(num_layers):
            layers[f"encoder_layer_{i}"] = EncoderBlock(num_heads, hidden_dim, mlp_dim, dropout, attention_dropout,
                                                        norm_layer)
        self.layers = nn.Sequential(layers)
        self.ln = norm_layer(hidden_dim)

    def forward(self, input: Any) -> Any:
        ember._assert(input.dim() == 3, f"Expected (batch_size, seq_length, hidden_dim) got {input.shape}")
        return self.ln(self.layers(self.dropout(input + self.pos_embedding)))


class VisionTransformer(nn.Module):
    """Patchify with a strided conv (``conv_proj``), prepend ``class_token``, encode, classify the token."""

    def __init__(self, image_size: int, patch_size: int, num_layers: int, num_heads: int, hidden_dim: int,
                 mlp_dim: int, dropout: float = 0.0, attention_dropout: float = 0.0, num_classes: int = 1000,
                 representation_size: int | None = None, norm_layer: Callable[..., nn.Module] = _LayerNorm,
                 conv_stem_configs: Any = None) -> None:
        super().__init__()
        if image_size % patch_size:
            raise ValueError(f"VisionTransformer: image_size {image_size} is not divisible by patch_size {patch_size}")
        if conv_stem_configs is not None:
            raise NotImplementedError("VisionTransformer: conv_stem_configs is not supported by ember.vision yet")
        self.image_size = image_size
        self.patch_size = patch_size
        self.hidden_dim = hidden_dim
        self.mlp_dim = mlp_dim
        self.attention_dropout = attention_dropout
        self.dropout = dropout
        self.num_classes = num_classes
        self.representation_size = representation_size
        self.norm_layer = norm_layer
        self.conv_proj = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        seq_length = (image_size // patch_size) ** 2 + 1  # + the class token
        self.class_token = nn.Parameter(ember.zeros(1, 1, hidden_dim))
        self.encoder = Encoder(seq_length, num_layers, num_heads, hidden_dim, mlp_dim, dropout, attention_dropout,
                               norm_layer)
        self.seq_length = seq_length
        heads: OrderedDict[str, nn.Module] = OrderedDict()
        if representation_size is None:
            heads["head"] = nn.Linear(hidden_dim, num_classes)
        else:
            heads["pre_logits"] = nn.Linear(hidden_dim, representation_size)
            heads["act"] = nn.Tanh()
            heads["head"] = nn.Linear(representation_size, num_classes)
        self.heads = nn.Sequential(heads)

        fan_in = 3 * patch_size * patch_size
        nn.init.trunc_normal_(self.conv_proj.weight, std=math.sqrt(1 / fan_in))
        nn.init.zeros_(self.conv_proj.bias)
        if representation_size is not None:
            nn.init.trunc_normal_(self.heads.pre_logits.weight, std=math.sqrt(1 / hidden_dim))
            nn.init.zeros_(self.heads.pre_logits.bias)
        nn.init.zeros_(self.heads.head.weight)
        nn.init.zeros_(self.heads.head.bias)

    def _process_input(self, x: Any) -> Any:
        n, _, h, w = x.shape
        ember._assert(h == self.image_size, f"Wrong image height! Expected {self.image_size} but got {h}!")
        ember._assert(w == self.image_size, f"Wrong image width! Expected {self.image_size} but got {w}!")
        n_h, n_w = h // self.patch_size, w // self.patch_size
        x = self.conv_proj(x)
        return x.reshape(n, self.hidden_dim, n_h * n_w).permute(0, 2, 1)

    def forward(self, x: Any) -> Any:
        x = self._process_input(x)
        n = x.shape[0]
        token = self.class_token.expand(n, -1, -1)
        x = self.encoder(ember.cat([token, x], dim=1))
        return self.heads(x[:, 0])


def _vit_builder(name: str, weights_enum: Any, patch_size: int, num_layers: int, num_heads: int, hidden_dim: int,
                 mlp_dim: int, has_v1: bool = True) -> Any:
    @register_model(name, weights_enum)
    @handle_legacy_interface(lambda: weights_enum.IMAGENET1K_V1 if has_v1 else None)
    def build(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> VisionTransformer:
        weights = weights_enum.verify(weights)
        override_num_classes(kwargs, weights)
        if weights is not None:
            size = weights.meta["min_size"][0]
            if kwargs.get("image_size", size) != size:
                raise ValueError(f"{name}: the weights {weights!r} need image_size={size}, got {kwargs['image_size']}")
            kwargs["image_size"] = size
        image_size = kwargs.pop("image_size", 224)
        model = VisionTransformer(image_size=image_size, patch_size=patch_size, num_layers=num_layers,
                                  num_heads=num_heads, hidden_dim=hidden_dim, mlp_dim=mlp_dim, **kwargs)
        return load_weights(model, weights, progress)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = (f"{name}: {num_layers} layers, {num_heads} heads, width {hidden_dim}, MLP {mlp_dim}, patches "
                     f"{patch_size}x{patch_size} (``weights``: :class:`{weights_enum.__name__}` or None; "
                     "``image_size`` defaults to 224, other keywords go to :class:`VisionTransformer`).")
    return build


vit_b_16 = _vit_builder("vit_b_16", ViT_B_16_Weights, 16, 12, 12, 768, 3072)
vit_b_32 = _vit_builder("vit_b_32", ViT_B_32_Weights, 32, 12, 12, 768, 3072)
vit_l_16 = _vit_builder("vit_l_16", ViT_L_16_Weights, 16, 24, 16, 1024, 4096)
vit_l_32 = _vit_builder("vit_l_32", ViT_L_32_Weights, 32, 24, 16, 1024, 4096)
vit_h_14 = _vit_builder("vit_h_14", ViT_H_14_Weights, 14, 32, 16, 1280, 5120, has_v1=False)
