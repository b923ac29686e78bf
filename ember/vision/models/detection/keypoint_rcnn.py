"""Keypoint R-CNN (torchvision's ``models.detection.keypoint_rcnn``): Faster R-CNN plus a keypoint branch
(RoIAlign 14x14, eight 3x3 convs, a deconvolution and 2x bilinear upsampling to 56x56 heatmaps, one per
keypoint). Eval detections gain ``keypoints`` [N, K, 3] and ``keypoints_scores`` [N, K]; training adds
``loss_keypoint``.

Example:
    >>> import ember
    >>> from ember.vision.models.detection import keypointrcnn_resnet50_fpn
    >>> model = keypointrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_keypoints=5, min_size=64,
    ...                                   max_size=64, rpn_post_nms_top_n_test=5).eval()
    >>> model([ember.rand(3, 48, 64)])[0]["keypoints"].shape[1:]
    ember.Size([5, 3])
"""
from __future__ import annotations

import warnings
from typing import Any, Sequence

from ember import nn
from ember.nn import functional as F
from ember.tensor import Tensor
from ember.vision.models._api import handle_legacy_interface, make_weights_enum, register_model
from ember.vision.models.detection._utils import overwrite_eps
from ember.vision.models.detection.backbone_utils import _resnet_fpn_extractor
from ember.vision.models.detection.faster_rcnn import FasterRCNN, detection_setup
from ember.vision.models.resnet import ResNet50_Weights, resnet50
from ember.vision.models.segmentation._utils import overwrite_value
from ember.vision.ops import FrozenBatchNorm2d, MultiScaleRoIAlign

__all__ = ["KeypointRCNN", "KeypointRCNN_ResNet50_FPN_Weights", "keypointrcnn_resnet50_fpn", "KeypointRCNNHeads",
           "KeypointRCNNPredictor"]

KeypointRCNN_ResNet50_FPN_Weights = make_weights_enum("KeypointRCNN_ResNet50_FPN_Weights", __name__)


class KeypointRCNN(FasterRCNN):
    """Faster R-CNN's arguments (positional ones in the same order; ``min_size`` defaults to torchvision's
    multi-scale (640, ..., 800)) plus ``keypoint_roi_pool``, ``keypoint_head``, ``keypoint_predictor`` and
    ``num_keypoints`` (17)."""

    def __init__(self, backbone: nn.Module, num_classes: int | None = None, *args: Any,
                 keypoint_roi_pool: MultiScaleRoIAlign | None = None, keypoint_head: nn.Module | None = None,
                 keypoint_predictor: nn.Module | None = None, num_keypoints: int | None = None,
                 **kwargs: Any) -> None:
        if not isinstance(keypoint_roi_pool, (MultiScaleRoIAlign, type(None))):
            raise TypeError(f"keypoint_roi_pool should be of type MultiScaleRoIAlign or None instead of "
                            f"{type(keypoint_roi_pool)}")
        if not args and kwargs.get("min_size") is None:
            kwargs["min_size"] = (640, 672, 704, 736, 768, 800)
        elif args and args[0] is None:
            args = ((640, 672, 704, 736, 768, 800),) + args[1:]
        if num_keypoints is not None and keypoint_predictor is not None:
            raise ValueError("num_keypoints should be None when keypoint_predictor is specified")
        num_keypoints = 17 if num_keypoints is None else num_keypoints
        channels = backbone.out_channels
        if keypoint_roi_pool is None:
            keypoint_roi_pool = MultiScaleRoIAlign(featmap_names=["0", "1", "2", "3"], output_size=14,
                                                   sampling_ratio=2)
        if keypoint_head is None:
            keypoint_head = KeypointRCNNHeads(channels, tuple(512 for _ in range(8)))
        if keypoint_predictor is None:
            keypoint_predictor = KeypointRCNNPredictor(512, num_keypoints)
        super().__init__(backbone, num_classes, *args, **kwargs)
        self.roi_heads.keypoint_roi_pool = keypoint_roi_pool
        self.roi_heads.keypoint_head = keypoint_head
        self.roi_heads.keypoint_predictor = keypoint_predictor


class KeypointRCNNHeads(nn.Sequential):
    """3x3 conv + ReLU layers of widths ``layers``."""

    def __init__(self, in_channels: int, layers: Sequence[int]) -> None:
        blocks: list[nn.Module] = []
        for width in layers:
            blocks += [nn.Conv2d(in_channels, width, 3, stride=1, padding=1), nn.ReLU(inplace=True)]
            in_channels = width
        super().__init__(*blocks)
        for m in self.children():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.constant_(m.bias, 0)


class KeypointRCNNPredictor(nn.Module):
    """A 4x4 stride-2 deconvolution to one heatmap per keypoint, then 2x bilinear upsampling."""

    def __init__(self, in_channels: int, num_keypoints: int) -> None:
        super().__init__()
        self.kps_score_lowres = nn.ConvTranspose2d(in_channels, num_keypoints, 4, stride=2, padding=1)
        nn.init.kaiming_normal_(self.kps_score_lowres.weight, mode="fan_out", nonlinearity="relu")
        nn.init.constant_(self.kps_score_lowres.bias, 0)
        self.up_scale = 2
        self.out_channels = num_keypoints

    def forward(self, x: Tensor) -> Tensor:
        return F.interpolate(self.kps_score_lowres(x), scale_factor=float(self.up_scale), mode="bilinear",
                             align_corners=False, recompute_scale_factor=False)


def _legacy_keypoint_weights(builder: Any) -> Any:
    """``pretrained="legacy"`` selects the COCO_LEGACY checkpoint (torchvision's special case)."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("pretrained") == "legacy":
            kwargs.pop("pretrained")
            warnings.warn("The parameter 'pretrained' is deprecated since 0.13 and may be removed in the future, "
                          "please use 'weights' instead.", UserWarning, stacklevel=2)
            kwargs["weights"] = KeypointRCNN_ResNet50_FPN_Weights.COCO_LEGACY
        return builder(*args, **kwargs)

    wrapper.__name__, wrapper.__doc__, wrapper.__wrapped__ = builder.__name__, builder.__doc__, builder
    return wrapper


@register_model("keypointrcnn_resnet50_fpn", KeypointRCNN_ResNet50_FPN_Weights)
@_legacy_keypoint_weights
@handle_legacy_interface(lambda: KeypointRCNN_ResNet50_FPN_Weights.COCO_V1, lambda: ResNet50_Weights.IMAGENET1K_V1)
def keypointrcnn_resnet50_fpn(*, weights: Any = None, progress: bool = True, num_classes: int | None = None,
                              num_keypoints: int | None = None, weights_backbone: Any = ResNet50_Weights.IMAGENET1K_V1,
                              trainable_backbone_layers: int | None = None, **kwargs: Any) -> KeypointRCNN:
    """Keypoint R-CNN, ResNet-50 FPN backbone; 2 classes (no person / person) and the 17 COCO keypoints."""
    weights, weights_backbone, num_classes, is_trained, layers = detection_setup(
        KeypointRCNN_ResNet50_FPN_Weights, ResNet50_Weights, weights, weights_backbone, num_classes,
        trainable_backbone_layers, 5, 3, default_classes=2)
    if weights is not None:
        num_keypoints = overwrite_value("num_keypoints", num_keypoints, len(weights.meta["keypoint_names"]))
    elif num_keypoints is None:
        num_keypoints = 17
    norm_layer = FrozenBatchNorm2d if is_trained else nn.BatchNorm2d
    backbone = resnet50(weights=weights_backbone, progress=progress, norm_layer=norm_layer)
    model = KeypointRCNN(_resnet_fpn_extractor(backbone, layers), num_classes, num_keypoints=num_keypoints, **kwargs)
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
        if weights == KeypointRCNN_ResNet50_FPN_Weights.COCO_V1:
            overwrite_eps(model, 0.0)
    return model
