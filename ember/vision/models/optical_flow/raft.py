"""RAFT optical flow (torchvision's ``models.optical_flow.raft``; Teed & Deng 2020, arXiv:2003.12039).

A feature encoder runs on both images (stride 8), a context encoder on the first; the all-pairs correlation of the
two feature maps is pooled into a 4-level pyramid; a convolutional GRU then refines the flow ``num_flow_updates``
times, each step reading the pyramid around the current match. Same arguments, module names and state_dict keys as
torchvision, so its ``raft_large``/``raft_small`` checkpoints load strictly.

Example:
    >>> import ember
    >>> from ember.vision.models.optical_flow import raft_small
    >>> model = raft_small().eval()
    >>> image = ember.rand(1, 3, 128, 128)
    >>> [f.shape for f in model(image, image, num_flow_updates=2)]
    [ember.Size([1, 2, 128, 128]), ember.Size([1, 2, 128, 128])]
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import ember
import ember.nn.functional as F
from ember import nn
from ember.tensor import Tensor
from ember.vision.models._api import handle_legacy_interface, load_weights, make_weights_enum, register_model
from ember.vision.models.optical_flow._utils import grid_sample, make_coords_grid, upsample_flow
from ember.vision.ops.misc import Conv2dNormActivation

__all__ = ["RAFT", "raft_large", "raft_small", "Raft_Large_Weights", "Raft_Small_Weights"]

Raft_Large_Weights = make_weights_enum("Raft_Large_Weights", __name__)
Raft_Small_Weights = make_weights_enum("Raft_Small_Weights", __name__)


def _conv(cin: int, cout: int, norm_layer: Any, kernel_size: int, stride: int = 1, act: bool = True) -> nn.Module:
    # every encoder conv keeps its bias even before a norm: the reference training froze the batch norms after the
    # first dataset, and the published checkpoints hold those biases
    return Conv2dNormActivation(cin, cout, norm_layer=norm_layer, kernel_size=kernel_size, stride=stride, bias=True,
                                activation_layer=nn.ReLU if act else None)


class ResidualBlock(nn.Module):
    """Two 3x3 conv-norm-ReLUs plus the input (projected by a 1x1 conv-norm when strided), then a ReLU."""

    def __init__(self, in_channels: int, out_channels: int, *, norm_layer: Any, stride: int = 1,
                 always_project: bool = False) -> None:
        super().__init__()
        self.convnormrelu1 = _conv(in_channels, out_channels, norm_layer, 3, stride)
        self.convnormrelu2 = _conv(out_channels, out_channels, norm_layer, 3)
        self.downsample: nn.Module = (nn.Identity() if stride == 1 and not always_project
                                      else _conv(in_channels, out_channels, norm_layer, 1, stride, act=False))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        y = self.convnormrelu2(self.convnormrelu1(x))
        return self.relu(self.downsample(x) + y)


class BottleneckBlock(nn.Module):
    """1x1 (to a quarter width), 3x3 (strided), 1x1 conv-norm-ReLUs plus the input, then a ReLU."""

    def __init__(self, in_channels: int, out_channels: int, *, norm_layer: Any, stride: int = 1) -> None:
        super().__init__()
        self.convnormrelu1 = _conv(in_channels, out_channels // 4, norm_layer, 1)
        self.convnormrelu2 = _conv(out_channels // 4, out_channels // 4, norm_layer, 3, stride)
        self.convnormrelu3 = _conv(out_channels // 4, out_channels, norm_layer, 1)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module = (nn.Identity() if stride == 1
                                      else _conv(in_channels, out_channels, norm_layer, 1, stride, act=False))

    def forward(self, x: Tensor) -> Tensor:
        y = self.convnormrelu3(self.convnormrelu2(self.convnormrelu1(x)))
        return self.relu(self.downsample(x) + y)


class FeatureEncoder(nn.Module):
    """A 7x7 stem and three stages of two blocks, then a 1x1 conv: the feature and the context encoder (stride 8)."""

    def __init__(self, *, block: type = ResidualBlock, layers: Sequence[int] = (64, 64, 96, 128, 256),
                 strides: Sequence[int] = (2, 1, 2, 2), norm_layer: Any = nn.BatchNorm2d) -> None:
        super().__init__()
        if len(layers) != 5:
            raise ValueError(f"The expected number of layers is 5, instead got {len(layers)}")
        self.convnormrelu = _conv(3, layers[0], norm_layer, 7, strides[0])
        self.layer1 = self._make_2_blocks(block, layers[0], layers[1], norm_layer, strides[1])
        self.layer2 = self._make_2_blocks(block, layers[1], layers[2], norm_layer, strides[2])
        self.layer3 = self._make_2_blocks(block, layers[2], layers[3], norm_layer, strides[3])
        self.conv = nn.Conv2d(layers[3], layers[4], kernel_size=1)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.InstanceNorm2d)):
                if m.weight is not None:
                    nn.init.constant_(m.weight, 1)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)
        self.output_dim = layers[-1]
        self.downsample_factor = 2 ** sum(1 for s in strides if s == 2)

    @staticmethod
    def _make_2_blocks(block: type, cin: int, cout: int, norm_layer: Any, first_stride: int) -> nn.Sequential:
        return nn.Sequential(block(cin, cout, norm_layer=norm_layer, stride=first_stride),
                             block(cout, cout, norm_layer=norm_layer, stride=1))

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(self.layer3(self.layer2(self.layer1(self.convnormrelu(x)))))


class MotionEncoder(nn.Module):
    """Encodes the current flow and the correlation features; the flow itself is appended as the last 2 channels."""

    def __init__(self, *, in_channels_corr: int, corr_layers: Sequence[int] = (256, 192),
                 flow_layers: Sequence[int] = (128, 64), out_channels: int = 128) -> None:
        super().__init__()
        if len(flow_layers) != 2:
            raise ValueError(f"The expected number of flow_layers is 2, instead got {len(flow_layers)}")
        if len(corr_layers) not in (1, 2):
            raise ValueError(f"The number of corr_layers should be 1 or 2, instead got {len(corr_layers)}")
        self.convcorr1 = Conv2dNormActivation(in_channels_corr, corr_layers[0], norm_layer=None, kernel_size=1)
        self.convcorr2: nn.Module = (Conv2dNormActivation(corr_layers[0], corr_layers[1], norm_layer=None, kernel_size=3)
                                     if len(corr_layers) == 2 else nn.Identity())
        self.convflow1 = Conv2dNormActivation(2, flow_layers[0], norm_layer=None, kernel_size=7)
        self.convflow2 = Conv2dNormActivation(flow_layers[0], flow_layers[1], norm_layer=None, kernel_size=3)
        self.conv = Conv2dNormActivation(corr_layers[-1] + flow_layers[-1], out_channels - 2, norm_layer=None,
                                         kernel_size=3)
        self.out_channels = out_channels

    def forward(self, flow: Tensor, corr_features: Tensor) -> Tensor:
        corr = self.convcorr2(self.convcorr1(corr_features))
        motion = self.convflow2(self.convflow1(flow))
        return ember.cat([self.conv(ember.cat([corr, motion], dim=1)), flow], dim=1)


class ConvGRU(nn.Module):
    """A GRU cell whose gates are convolutions over ``cat(h, x)``."""

    def __init__(self, *, input_size: int, hidden_size: int, kernel_size: Any, padding: Any) -> None:
        super().__init__()
        self.convz = nn.Conv2d(hidden_size + input_size, hidden_size, kernel_size=kernel_size, padding=padding)
        self.convr = nn.Conv2d(hidden_size + input_size, hidden_size, kernel_size=kernel_size, padding=padding)
        self.convq = nn.Conv2d(hidden_size + input_size, hidden_size, kernel_size=kernel_size, padding=padding)

    def forward(self, h: Tensor, x: Tensor) -> Tensor:
        hx = ember.cat([h, x], dim=1)
        z = ember.sigmoid(self.convz(hx))
        r = ember.sigmoid(self.convr(hx))
        q = ember.tanh(self.convq(ember.cat([r * h, x], dim=1)))
        return (1 - z) * h + z * q


def _pass_through_h(h: Tensor, _: Tensor) -> Tensor:
    return h


class RecurrentBlock(nn.Module):
    """One or two ConvGRUs in sequence (RAFT-large: a 1x5 then a 5x1 "separable" pair)."""

    def __init__(self, *, input_size: int, hidden_size: int, kernel_size: Sequence[Any] = ((1, 5), (5, 1)),
                 padding: Sequence[Any] = ((0, 2), (2, 0))) -> None:
        super().__init__()
        if len(kernel_size) != len(padding):
            raise ValueError(f"kernel_size should have the same length as padding, instead got len(kernel_size) = "
                             f"{len(kernel_size)} and len(padding) = {len(padding)}")
        if len(kernel_size) not in (1, 2):
            raise ValueError(f"kernel_size should either 1 or 2, instead got {len(kernel_size)}")
        self.convgru1 = ConvGRU(input_size=input_size, hidden_size=hidden_size, kernel_size=kernel_size[0],
                                padding=padding[0])
        self.convgru2: Callable[[Tensor, Tensor], Tensor] = (
            ConvGRU(input_size=input_size, hidden_size=hidden_size, kernel_size=kernel_size[1], padding=padding[1])
            if len(kernel_size) == 2 else _pass_through_h)
        self.hidden_size = hidden_size

    def forward(self, h: Tensor, x: Tensor) -> Tensor:
        return self.convgru2(self.convgru1(h, x), x)


class FlowHead(nn.Module):
    """Two 3x3 convs from the hidden state to the 2-channel flow update."""

    def __init__(self, *, in_channels: int, hidden_size: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, hidden_size, 3, padding=1)
        self.conv2 = nn.Conv2d(hidden_size, 2, 3, padding=1)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv2(self.relu(self.conv1(x)))


class UpdateBlock(nn.Module):
    """Motion encoder -> recurrent block -> flow head; exposes ``hidden_state_size``."""

    def __init__(self, *, motion_encoder: nn.Module, recurrent_block: nn.Module, flow_head: nn.Module) -> None:
        super().__init__()
        self.motion_encoder = motion_encoder
        self.recurrent_block = recurrent_block
        self.flow_head = flow_head
        self.hidden_state_size = recurrent_block.hidden_size

    def forward(self, hidden_state: Tensor, context: Tensor, corr_features: Tensor,
                flow: Tensor) -> tuple[Tensor, Tensor]:
        x = ember.cat([context, self.motion_encoder(flow, corr_features)], dim=1)
        hidden_state = self.recurrent_block(hidden_state, x)
        return hidden_state, self.flow_head(hidden_state)


class MaskPredictor(nn.Module):
    """The convex-upsampling weights (8 * 8 * 9 channels) from the hidden state, scaled by ``multiplier``."""

    def __init__(self, *, in_channels: int, hidden_size: int, multiplier: float = 0.25) -> None:
        super().__init__()
        self.convrelu = Conv2dNormActivation(in_channels, hidden_size, norm_layer=None, kernel_size=3)
        self.conv = nn.Conv2d(hidden_size, 8 * 8 * 9, 1, padding=0)
        self.multiplier = multiplier  # the original's 0.25 "down-weights the gradients" of this branch

    def forward(self, x: Tensor) -> Tensor:
        return self.multiplier * self.conv(self.convrelu(x))


class CorrBlock(nn.Module):
    """The correlation pyramid and its look-up: ``num_levels`` average-pooled levels of the all-pairs volume, read in
    a ``(2 * radius + 1)``-square around each match (``out_channels = num_levels * (2 * radius + 1) ** 2``)."""

    def __init__(self, *, num_levels: int = 4, radius: int = 4) -> None:
        super().__init__()
        self.num_levels = num_levels
        self.radius = radius
        self.corr_pyramid: list[Tensor] = []
        self.out_channels = num_levels * (2 * radius + 1) ** 2

    def build_pyramid(self, fmap1: Tensor, fmap2: Tensor) -> None:
        if fmap1.shape != fmap2.shape:
            raise ValueError(f"Input feature maps should have the same shape, instead got {fmap1.shape} "
                             f"(fmap1.shape) != {fmap2.shape} (fmap2.shape)")
        # the coarsest level must keep at least 2 pixels a side, or the bilinear look-up reads only padding
        min_fmap_size = 2 * (2 ** (self.num_levels - 1))
        if any(size < min_fmap_size for size in fmap1.shape[-2:]):
            raise ValueError(
                "Feature maps are too small to be down-sampled by the correlation pyramid. "
                f"H and W of feature maps should be at least {min_fmap_size}; got: {fmap1.shape[-2:]}. "
                "Remember that input images to the model are downsampled by 8, so that means their "
                f"dimensions should be at least 8 * {min_fmap_size} = {8 * min_fmap_size}.")
        batch_size, num_channels, h, w = fmap1.shape
        volume = ember.matmul(fmap1.view(batch_size, num_channels, h * w).transpose(1, 2),
                              fmap2.view(batch_size, num_channels, h * w))
        # torchvision divides by a float32 0-d sqrt(C); the same rounding here keeps the volumes bit-identical
        volume = volume.view(batch_size * h * w, 1, h, w) / ember.sqrt(ember.tensor(float(num_channels)))
        self.corr_pyramid = [volume]
        for _ in range(self.num_levels - 1):
            volume = F.avg_pool2d(volume, kernel_size=2, stride=2)
            self.corr_pyramid.append(volume)

    def index_pyramid(self, centroids_coords: Tensor) -> Tensor:
        side = 2 * self.radius + 1
        steps = ember.linspace(-self.radius, self.radius, side)
        # torchvision moves the offsets to the coordinates' device only (float32-only model); ember also takes their
        # dtype, so a ``model.double()`` RAFT runs in float64 (float32 results unchanged)
        delta = ember.stack(ember.meshgrid(steps, steps, indexing="ij"), dim=-1).to(centroids_coords)
        delta = delta.view(1, side, side, 2)
        batch_size, _, h, w = centroids_coords.shape
        centroids = centroids_coords.permute(0, 2, 3, 1).reshape(batch_size * h * w, 1, 1, 2)
        levels = []
        for volume in self.corr_pyramid:
            sampled = grid_sample(volume, centroids + delta, align_corners=True, mode="bilinear")
            levels.append(sampled.view(batch_size, h, w, -1))
            centroids = centroids / 2
        return ember.cat(levels, dim=-1).permute(0, 3, 1, 2).contiguous()


class RAFT(nn.Module):
    """RAFT from its parts (see the module docstring); ``forward(image1, image2, num_flow_updates=12)`` returns the
    upsampled flow after every update. Images must have sides divisible by 8."""

    def __init__(self, *, feature_encoder: nn.Module, context_encoder: nn.Module, corr_block: nn.Module,
                 update_block: nn.Module, mask_predictor: nn.Module | None = None) -> None:
        super().__init__()
        self.feature_encoder = feature_encoder
        self.context_encoder = context_encoder
        self.corr_block = corr_block
        self.update_block = update_block
        self.mask_predictor = mask_predictor
        if not hasattr(self.update_block, "hidden_state_size"):
            raise ValueError("The update_block parameter should expose a 'hidden_state_size' attribute.")

    def forward(self, image1: Tensor, image2: Tensor, num_flow_updates: int = 12) -> list[Tensor]:
        batch_size, _, h, w = image1.shape
        if (h, w) != tuple(image2.shape[-2:]):
            raise ValueError(f"input images should have the same shape, instead got ({h}, {w}) != {image2.shape[-2:]}")
        if h % 8 or w % 8:
            raise ValueError(f"input image H and W should be divisible by 8, instead got {h} (h) and {w} (w)")
        fmap1, fmap2 = ember.chunk(self.feature_encoder(ember.cat([image1, image2], dim=0)), chunks=2, dim=0)
        if tuple(fmap1.shape[-2:]) != (h // 8, w // 8):
            raise ValueError("The feature encoder should downsample H and W by 8")
        self.corr_block.build_pyramid(fmap1, fmap2)
        context_out = self.context_encoder(image1)
        if tuple(context_out.shape[-2:]) != (h // 8, w // 8):
            raise ValueError("The context encoder should downsample H and W by 8")
        hidden_size = self.update_block.hidden_state_size
        context_size = context_out.shape[1] - hidden_size
        if context_size <= 0:
            raise ValueError(f"The context encoder outputs {context_out.shape[1]} channels, but it should have at "
                             f"strictly more than hidden_state={hidden_size} channels")
        hidden_state, context = ember.split(context_out, [hidden_size, context_size], dim=1)
        hidden_state, context = ember.tanh(hidden_state), F.relu(context)
        coords0 = make_coords_grid(batch_size, h // 8, w // 8).to(fmap1)  # fmap1's device and dtype (see above)
        coords1 = make_coords_grid(batch_size, h // 8, w // 8).to(fmap1)
        predictions = []
        for _ in range(num_flow_updates):
            coords1 = coords1.detach()  # the paper stops gradients through the look-up position
            corr_features = self.corr_block.index_pyramid(centroids_coords=coords1)
            hidden_state, delta_flow = self.update_block(hidden_state, context, corr_features, coords1 - coords0)
            coords1 = coords1 + delta_flow
            up_mask = None if self.mask_predictor is None else self.mask_predictor(hidden_state)
            predictions.append(upsample_flow(flow=coords1 - coords0, up_mask=up_mask))
        return predictions


def _raft(*, weights: Any, progress: bool, feature_encoder_layers: Sequence[int], feature_encoder_block: type,
          feature_encoder_norm_layer: Any, context_encoder_layers: Sequence[int], context_encoder_block: type,
          context_encoder_norm_layer: Any, corr_block_num_levels: int, corr_block_radius: int,
          motion_encoder_corr_layers: Sequence[int], motion_encoder_flow_layers: Sequence[int],
          motion_encoder_out_channels: int, recurrent_block_hidden_state_size: int,
          recurrent_block_kernel_size: Sequence[Any], recurrent_block_padding: Sequence[Any],
          flow_head_hidden_size: int, use_mask_predictor: bool, **kwargs: Any) -> RAFT:
    feature_encoder = kwargs.pop("feature_encoder", None) or FeatureEncoder(
        block=feature_encoder_block, layers=feature_encoder_layers, norm_layer=feature_encoder_norm_layer)
    context_encoder = kwargs.pop("context_encoder", None) or FeatureEncoder(
        block=context_encoder_block, layers=context_encoder_layers, norm_layer=context_encoder_norm_layer)
    corr_block = kwargs.pop("corr_block", None) or CorrBlock(num_levels=corr_block_num_levels, radius=corr_block_radius)
    update_block = kwargs.pop("update_block", None)
    if update_block is None:
        motion_encoder = MotionEncoder(in_channels_corr=corr_block.out_channels, corr_layers=motion_encoder_corr_layers,
                                       flow_layers=motion_encoder_flow_layers, out_channels=motion_encoder_out_channels)
        context_size = context_encoder_layers[-1] - recurrent_block_hidden_state_size
        recurrent_block = RecurrentBlock(input_size=motion_encoder.out_channels + context_size,
                                         hidden_size=recurrent_block_hidden_state_size,
                                         kernel_size=recurrent_block_kernel_size, padding=recurrent_block_padding)
        flow_head = FlowHead(in_channels=recurrent_block_hidden_state_size, hidden_size=flow_head_hidden_size)
        update_block = UpdateBlock(motion_encoder=motion_encoder, recurrent_block=recurrent_block, flow_head=flow_head)
    mask_predictor = kwargs.pop("mask_predictor", None)
    if mask_predictor is None and use_mask_predictor:
        mask_predictor = MaskPredictor(in_channels=recurrent_block_hidden_state_size, hidden_size=256, multiplier=0.25)
    model = RAFT(feature_encoder=feature_encoder, context_encoder=context_encoder, corr_block=corr_block,
                 update_block=update_block, mask_predictor=mask_predictor, **kwargs)
    return load_weights(model, weights, progress)


@register_model("raft_large", Raft_Large_Weights)
@handle_legacy_interface(lambda: Raft_Large_Weights.C_T_SKHT_V2)
def raft_large(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> RAFT:
    """RAFT (5.3M parameters): residual encoders (instance norm for features, batch norm for context), radius-4
    look-up, a separable 1x5/5x1 ConvGRU pair and learned convex upsampling."""
    return _raft(weights=Raft_Large_Weights.verify(weights), progress=progress,
                 feature_encoder_layers=(64, 64, 96, 128, 256), feature_encoder_block=ResidualBlock,
                 feature_encoder_norm_layer=nn.InstanceNorm2d, context_encoder_layers=(64, 64, 96, 128, 256),
                 context_encoder_block=ResidualBlock, context_encoder_norm_layer=nn.BatchNorm2d,
                 corr_block_num_levels=4, corr_block_radius=4, motion_encoder_corr_layers=(256, 192),
                 motion_encoder_flow_layers=(128, 64), motion_encoder_out_channels=128,
                 recurrent_block_hidden_state_size=128, recurrent_block_kernel_size=((1, 5), (5, 1)),
                 recurrent_block_padding=((0, 2), (2, 0)), flow_head_hidden_size=256, use_mask_predictor=True,
                 **kwargs)


@register_model("raft_small", Raft_Small_Weights)
@handle_legacy_interface(lambda: Raft_Small_Weights.C_T_V2)
def raft_small(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> RAFT:
    """RAFT-small (1.0M parameters): bottleneck encoders (no norm in the context one), radius-3 look-up, one 3x3
    ConvGRU and bilinear upsampling."""
    return _raft(weights=Raft_Small_Weights.verify(weights), progress=progress,
                 feature_encoder_layers=(32, 32, 64, 96, 128), feature_encoder_block=BottleneckBlock,
                 feature_encoder_norm_layer=nn.InstanceNorm2d, context_encoder_layers=(32, 32, 64, 96, 160),
                 context_encoder_block=BottleneckBlock, context_encoder_norm_layer=None, corr_block_num_levels=4,
                 corr_block_radius=3, motion_encoder_corr_layers=(96,), motion_encoder_flow_layers=(64, 32),
                 motion_encoder_out_channels=82, recurrent_block_hidden_state_size=96,
                 recurrent_block_kernel_size=(3,), recurrent_block_padding=(1,), flow_head_hidden_size=128,
                 use_mask_predictor=False, **kwargs)
