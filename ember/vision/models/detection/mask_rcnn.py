"""Mask R-CNN (torchvision's ``models.detection.mask_rcnn``): Faster R-CNN plus a mask branch (RoIAlign 14x14,
four 3x3 convs, a 2x deconvolution and per-class mask logits). Eval detections gain ``masks`` [N, 1, H, W]
(probabilities pasted into the original image); training adds ``loss_mask``.

Example:
    >>> import ember
    >>> from ember.vision.models.detection import maskrcnn_resnet50_fpn
    >>> model = maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=3, min_size=64,
    ...                               max_size=64, rpn_post_nms_top_n_test=10).eval()
    >>> out = model([ember.rand(3, 48, 64)])[0]
    >>> out["masks"].shape[1:]
    ember.Size([1, 48, 64])
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Sequence

from ember import nn
from ember.vision.models._api import handle_legacy_interface, make_weights_enum, register_model
from ember.vision.models.detection._utils import overwrite_eps
from ember.vision.models.detection.backbone_utils import _resnet_fpn_extractor
from ember.vision.models.detection.faster_rcnn import (FasterRCNN, FastRCNNConvFCHead, RPNHead, _default_anchorgen,
                                                       detection_setup)
from ember.vision.models.resnet import ResNet50_Weights, resnet50
from ember.vision.ops import FrozenBatchNorm2d, MultiScaleRoIAlign
from ember.vision.ops.misc import Conv2dNormActivation

__all__ = ["MaskRCNN", "MaskRCNN_ResNet50_FPN_Weights", "MaskRCNN_ResNet50_FPN_V2_Weights", "maskrcnn_resnet50_fpn",
           "maskrcnn_resnet50_fpn_v2", "MaskRCNNHeads", "MaskRCNNPredictor"]

MaskRCNN_ResNet50_FPN_Weights = make_weights_enum("MaskRCNN_ResNet50_FPN_Weights", __name__)
MaskRCNN_ResNet50_FPN_V2_Weights = make_weights_enum("MaskRCNN_ResNet50_FPN_V2_Weights", __name__)


class MaskRCNN(FasterRCNN):
    """Faster R-CNN's arguments (positional ones in the same order) plus ``mask_roi_pool``, ``mask_head`` and
    ``mask_predictor``."""

    def __init__(self, backbone: nn.Module, num_classes: int | None = None, *args: Any,
                 mask_roi_pool: MultiScaleRoIAlign | None = None, mask_head: nn.Module | None = None,
                 mask_predictor: nn.Module | None = None, **kwargs: Any) -> None:
        if not isinstance(mask_roi_pool, (MultiScaleRoIAlign, type(None))):
            raise TypeError(f"mask_roi_pool should be of type MultiScaleRoIAlign or None instead of "
                            f"{type(mask_roi_pool)}")
        if num_classes is not None and mask_predictor is not None:
            raise ValueError("num_classes should be None when mask_predictor is specified")
        channels = backbone.out_channels
        if mask_roi_pool is None:
            mask_roi_pool = MultiScaleRoIAlign(featmap_names=["0", "1", "2", "3"], output_size=14, sampling_ratio=2)
        if mask_head is None:
            mask_head = MaskRCNNHeads(channels, (256, 256, 256, 256), 1)
        if mask_predictor is None:
            mask_predictor = MaskRCNNPredictor(256, 256, num_classes)
        super().__init__(backbone, num_classes, *args, **kwargs)
        self.roi_heads.mask_roi_pool = mask_roi_pool
        self.roi_heads.mask_head = mask_head
        self.roi_heads.mask_predictor = mask_predictor


class MaskRCNNHeads(nn.Sequential):
    """3x3 conv(-norm)-ReLU layers of widths ``layers`` (modules ``0.0``, ``1.0``, ...)."""

    _version = 2

    def __init__(self, in_channels: int, layers: Sequence[int], dilation: int,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        blocks = []
        for width in layers:
            blocks.append(Conv2dNormActivation(in_channels, width, kernel_size=3, stride=1, padding=dilation,
                                               dilation=dilation, norm_layer=norm_layer))
            in_channels = width
        super().__init__(*blocks)
        for layer in self.modules():
            if isinstance(layer, nn.Conv2d):
                nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
                if layer.bias is not None:
                    nn.init.zeros_(layer.bias)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        # version-1 checkpoints name the convs `mask_fcn1` ... `mask_fcn4`
        if (local_metadata.get("version") or 0) < 2:
            for i in range(len(self)):
                for kind in ("weight", "bias"):
                    old = f"{prefix}mask_fcn{i + 1}.{kind}"
                    if old in state_dict:
                        state_dict[f"{prefix}{i}.0.{kind}"] = state_dict.pop(old)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class MaskRCNNPredictor(nn.Sequential):
    """A 2x2 stride-2 deconvolution, ReLU, and a 1x1 conv to one mask logit map per class."""

    def __init__(self, in_channels: int, dim_reduced: int, num_classes: int) -> None:
        super().__init__(OrderedDict([("conv5_mask", nn.ConvTranspose2d(in_channels, dim_reduced, 2, 2, 0)),
                                      ("relu", nn.ReLU(inplace=True)),
                                      ("mask_fcn_logits", nn.Conv2d(dim_reduced, num_classes, 1, 1, 0))]))
        for name, param in self.named_parameters():
            if "weight" in name:
                nn.init.kaiming_normal_(param, mode="fan_out", nonlinearity="relu")


@register_model("maskrcnn_resnet50_fpn", MaskRCNN_ResNet50_FPN_Weights)
@handle_legacy_interface(lambda: MaskRCNN_ResNet50_FPN_Weights.COCO_V1, lambda: ResNet50_Weights.IMAGENET1K_V1)
def maskrcnn_resnet50_fpn(*, weights: Any = None, progress: bool = True, num_classes: int | None = None,
                          weights_backbone: Any = ResNet50_Weights.IMAGENET1K_V1,
                          trainable_backbone_layers: int | None = None, **kwargs: Any) -> MaskRCNN:
    """Mask R-CNN, ResNet-50 FPN backbone, 91 COCO classes."""
    weights, weights_backbone, num_classes, is_trained, layers = detection_setup(
        MaskRCNN_ResNet50_FPN_Weights, ResNet50_Weights, weights, weights_backbone, num_classes,
        trainable_backbone_layers, 5, 3)
    norm_layer = FrozenBatchNorm2d if is_trained else nn.BatchNorm2d
    backbone = resnet50(weights=weights_backbone, progress=progress, norm_layer=norm_layer)
    model = MaskRCNN(_resnet_fpn_extractor(backbone, layers), num_classes=num_classes, **kwargs)
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
        if weights == MaskRCNN_ResNet50_FPN_Weights.COCO_V1:
            overwrite_eps(model, 0.0)
    return model


@register_model("maskrcnn_resnet50_fpn_v2", MaskRCNN_ResNet50_FPN_V2_Weights)
@handle_legacy_interface(lambda: MaskRCNN_ResNet50_FPN_V2_Weights.COCO_V1, lambda: ResNet50_Weights.IMAGENET1K_V1)
def maskrcnn_resnet50_fpn_v2(*, weights: Any = None, progress: bool = True, num_classes: int | None = None,
                             weights_backbone: Any = None, trainable_backbone_layers: int | None = None,
                             **kwargs: Any) -> MaskRCNN:
    """Mask R-CNN v2 (batch-normed FPN, box and mask heads; two-conv RPN head)."""
    weights, weights_backbone, num_classes, _, layers = detection_setup(
        MaskRCNN_ResNet50_FPN_V2_Weights, ResNet50_Weights, weights, weights_backbone, num_classes,
        trainable_backbone_layers, 5, 3)
    backbone = _resnet_fpn_extractor(resnet50(weights=weights_backbone, progress=progress), layers,
                                     norm_layer=nn.BatchNorm2d)
    anchors = _default_anchorgen()
    rpn_head = RPNHead(backbone.out_channels, anchors.num_anchors_per_location()[0], conv_depth=2)
    box_head = FastRCNNConvFCHead((backbone.out_channels, 7, 7), [256, 256, 256, 256], [1024],
                                  norm_layer=nn.BatchNorm2d)
    mask_head = MaskRCNNHeads(backbone.out_channels, [256, 256, 256, 256], 1, norm_layer=nn.BatchNorm2d)
    model = MaskRCNN(backbone, num_classes=num_classes, rpn_anchor_generator=anchors, rpn_head=rpn_head,
                     box_head=box_head, mask_head=mask_head, **kwargs)
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
    return model
