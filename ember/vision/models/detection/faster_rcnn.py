"""Faster R-CNN (torchvision's ``models.detection.faster_rcnn``: same arguments, module names and state_dict keys,
so torchvision's COCO checkpoints load strictly).

Example:
    >>> import ember
    >>> from ember.vision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn
    >>> model = fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=3).eval()
    >>> sorted(model([ember.rand(3, 64, 80)])[0])
    ['boxes', 'labels', 'scores']
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ember import nn
from ember.nn import functional as F
from ember.tensor import Tensor
from ember.vision.models._api import handle_legacy_interface, make_weights_enum, register_model
from ember.vision.models.detection._utils import overwrite_eps
from ember.vision.models.detection.anchor_utils import AnchorGenerator
from ember.vision.models.detection.backbone_utils import (_mobilenet_extractor, _resnet_fpn_extractor,
                                                          _validate_trainable_layers)
from ember.vision.models.detection.generalized_rcnn import GeneralizedRCNN
from ember.vision.models.detection.roi_heads import RoIHeads
from ember.vision.models.detection.rpn import RegionProposalNetwork, RPNHead
from ember.vision.models.detection.transform import GeneralizedRCNNTransform
from ember.vision.models.mobilenetv3 import MobileNet_V3_Large_Weights, mobilenet_v3_large
from ember.vision.models.resnet import ResNet50_Weights, resnet50
from ember.vision.models.segmentation._utils import overwrite_value
from ember.vision.ops import FrozenBatchNorm2d, MultiScaleRoIAlign
from ember.vision.ops.misc import Conv2dNormActivation

__all__ = ["FasterRCNN", "FasterRCNN_ResNet50_FPN_Weights", "FasterRCNN_ResNet50_FPN_V2_Weights",
           "FasterRCNN_MobileNet_V3_Large_FPN_Weights", "FasterRCNN_MobileNet_V3_Large_320_FPN_Weights",
           "fasterrcnn_resnet50_fpn", "fasterrcnn_resnet50_fpn_v2", "fasterrcnn_mobilenet_v3_large_fpn",
           "fasterrcnn_mobilenet_v3_large_320_fpn", "FastRCNNPredictor", "TwoMLPHead", "FastRCNNConvFCHead"]

FasterRCNN_ResNet50_FPN_Weights = make_weights_enum("FasterRCNN_ResNet50_FPN_Weights", __name__)
FasterRCNN_ResNet50_FPN_V2_Weights = make_weights_enum("FasterRCNN_ResNet50_FPN_V2_Weights", __name__)
FasterRCNN_MobileNet_V3_Large_FPN_Weights = make_weights_enum("FasterRCNN_MobileNet_V3_Large_FPN_Weights", __name__)
FasterRCNN_MobileNet_V3_Large_320_FPN_Weights = make_weights_enum("FasterRCNN_MobileNet_V3_Large_320_FPN_Weights",
                                                                  __name__)


def _default_anchorgen() -> AnchorGenerator:
    sizes = ((32,), (64,), (128,), (256,), (512,))
    return AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * len(sizes))


class FasterRCNN(GeneralizedRCNN):
    """Faster R-CNN on any ``backbone`` with an ``out_channels`` attribute; every argument is torchvision's
    (RPN: anchors, NMS, IoU thresholds, sampling; box head: RoI pooling, thresholds, detections per image)."""

    def __init__(self, backbone: nn.Module, num_classes: int | None = None, min_size: int = 800,
                 max_size: int = 1333, image_mean: list[float] | None = None, image_std: list[float] | None = None,
                 rpn_anchor_generator: AnchorGenerator | None = None, rpn_head: nn.Module | None = None,
                 rpn_pre_nms_top_n_train: int = 2000, rpn_pre_nms_top_n_test: int = 1000,
                 rpn_post_nms_top_n_train: int = 2000, rpn_post_nms_top_n_test: int = 1000,
                 rpn_nms_thresh: float = 0.7, rpn_fg_iou_thresh: float = 0.7, rpn_bg_iou_thresh: float = 0.3,
                 rpn_batch_size_per_image: int = 256, rpn_positive_fraction: float = 0.5,
                 rpn_score_thresh: float = 0.0, box_roi_pool: MultiScaleRoIAlign | None = None,
                 box_head: nn.Module | None = None, box_predictor: nn.Module | None = None,
                 box_score_thresh: float = 0.05, box_nms_thresh: float = 0.5, box_detections_per_img: int = 100,
                 box_fg_iou_thresh: float = 0.5, box_bg_iou_thresh: float = 0.5,
                 box_batch_size_per_image: int = 512, box_positive_fraction: float = 0.25,
                 bbox_reg_weights: tuple[float, float, float, float] | None = None, **kwargs: Any) -> None:
        if not hasattr(backbone, "out_channels"):
            raise ValueError("backbone should contain an attribute out_channels specifying the number of output "
                             "channels (assumed to be the same for all the levels)")
        if not isinstance(rpn_anchor_generator, (AnchorGenerator, type(None))):
            raise TypeError(f"rpn_anchor_generator should be of type AnchorGenerator or None instead of "
                            f"{type(rpn_anchor_generator)}")
        if not isinstance(box_roi_pool, (MultiScaleRoIAlign, type(None))):
            raise TypeError(f"box_roi_pool should be of type MultiScaleRoIAlign or None instead of {type(box_roi_pool)}")
        if num_classes is not None and box_predictor is not None:
            raise ValueError("num_classes should be None when box_predictor is specified")
        if num_classes is None and box_predictor is None:
            raise ValueError("num_classes should not be None when box_predictor is not specified")
        channels = backbone.out_channels
        if rpn_anchor_generator is None:
            rpn_anchor_generator = _default_anchorgen()
        if rpn_head is None:
            rpn_head = RPNHead(channels, rpn_anchor_generator.num_anchors_per_location()[0])
        rpn = RegionProposalNetwork(rpn_anchor_generator, rpn_head, rpn_fg_iou_thresh, rpn_bg_iou_thresh,
                                    rpn_batch_size_per_image, rpn_positive_fraction,
                                    dict(training=rpn_pre_nms_top_n_train, testing=rpn_pre_nms_top_n_test),
                                    dict(training=rpn_post_nms_top_n_train, testing=rpn_post_nms_top_n_test),
                                    rpn_nms_thresh, score_thresh=rpn_score_thresh)
        if box_roi_pool is None:
            box_roi_pool = MultiScaleRoIAlign(featmap_names=["0", "1", "2", "3"], output_size=7, sampling_ratio=2)
        if box_head is None:
            resolution = box_roi_pool.output_size[0]
            box_head = TwoMLPHead(channels * resolution ** 2, 1024)
        if box_predictor is None:
            box_predictor = FastRCNNPredictor(1024, num_classes)
        roi_heads = RoIHeads(box_roi_pool, box_head, box_predictor, box_fg_iou_thresh, box_bg_iou_thresh,
                             box_batch_size_per_image, box_positive_fraction, bbox_reg_weights, box_score_thresh,
                             box_nms_thresh, box_detections_per_img)
        transform = GeneralizedRCNNTransform(min_size, max_size, image_mean or [0.485, 0.456, 0.406],
                                             image_std or [0.229, 0.224, 0.225], **kwargs)
        super().__init__(backbone, rpn, roi_heads, transform)


class TwoMLPHead(nn.Module):
    """Flatten, then two fully connected layers with ReLU (``fc6``, ``fc7``)."""

    def __init__(self, in_channels: int, representation_size: int) -> None:
        super().__init__()
        self.fc6 = nn.Linear(in_channels, representation_size)
        self.fc7 = nn.Linear(representation_size, representation_size)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.fc7(F.relu(self.fc6(x.flatten(start_dim=1)))))


class FastRCNNConvFCHead(nn.Sequential):
    """Conv-norm-ReLU layers, flatten, then linear + ReLU layers (the v2 box head)."""

    def __init__(self, input_size: tuple[int, int, int], conv_layers: Sequence[int], fc_layers: Sequence[int],
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        channels, height, width = input_size
        blocks: list[nn.Module] = []
        for out in conv_layers:
            blocks.append(Conv2dNormActivation(channels, out, norm_layer=norm_layer))
            channels = out
        blocks.append(nn.Flatten())
        features = channels * height * width
        for out in fc_layers:
            blocks += [nn.Linear(features, out), nn.ReLU(inplace=True)]
            features = out
        super().__init__(*blocks)
        for layer in self.modules():
            if isinstance(layer, nn.Conv2d):
                nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
                if layer.bias is not None:
                    nn.init.zeros_(layer.bias)


class FastRCNNPredictor(nn.Module):
    """Class scores (``cls_score``) and per-class box deltas (``bbox_pred``) from the box head's features."""

    def __init__(self, in_channels: int, num_classes: int) -> None:
        super().__init__()
        self.cls_score = nn.Linear(in_channels, num_classes)
        self.bbox_pred = nn.Linear(in_channels, num_classes * 4)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        if x.dim() == 4 and list(x.shape[2:]) != [1, 1]:
            raise AssertionError(f"x has the wrong shape, expecting the last two dimensions to be [1,1] instead of "
                                 f"{list(x.shape[2:])}")
        x = x.flatten(start_dim=1)
        return self.cls_score(x), self.bbox_pred(x)


def detection_setup(weights_enum: Any, backbone_enum: Any, weights: Any, weights_backbone: Any,
                    num_classes: int | None, trainable_backbone_layers: int | None, max_layers: int,
                    default_layers: int, default_classes: int = 91) -> tuple[Any, Any, int, bool, int]:
    """torchvision's builder preamble: published weights fix the classes and replace the backbone's weights;
    without any weights every backbone layer trains. Returns (weights, weights_backbone, num_classes,
    is_trained, trainable_layers)."""
    weights = weights_enum.verify(weights)
    weights_backbone = backbone_enum.verify(weights_backbone)
    if weights is not None:
        weights_backbone = None
        num_classes = overwrite_value("num_classes", num_classes, len(weights.meta["categories"]))
    elif num_classes is None:
        num_classes = default_classes
    is_trained = weights is not None or weights_backbone is not None
    layers = _validate_trainable_layers(is_trained, trainable_backbone_layers, max_layers, default_layers)
    return weights, weights_backbone, num_classes, is_trained, layers


@register_model("fasterrcnn_resnet50_fpn", FasterRCNN_ResNet50_FPN_Weights)
@handle_legacy_interface(lambda: FasterRCNN_ResNet50_FPN_Weights.COCO_V1, lambda: ResNet50_Weights.IMAGENET1K_V1)
def fasterrcnn_resnet50_fpn(*, weights: Any = None, progress: bool = True, num_classes: int | None = None,
                            weights_backbone: Any = ResNet50_Weights.IMAGENET1K_V1,
                            trainable_backbone_layers: int | None = None, **kwargs: Any) -> FasterRCNN:
    """Faster R-CNN, ResNet-50 FPN backbone (frozen batch norm when any weights are used), 91 COCO classes."""
    weights, weights_backbone, num_classes, is_trained, layers = detection_setup(
        FasterRCNN_ResNet50_FPN_Weights, ResNet50_Weights, weights, weights_backbone, num_classes,
        trainable_backbone_layers, 5, 3)
    norm_layer = FrozenBatchNorm2d if is_trained else nn.BatchNorm2d
    backbone = resnet50(weights=weights_backbone, progress=progress, norm_layer=norm_layer)
    model = FasterRCNN(_resnet_fpn_extractor(backbone, layers), num_classes=num_classes, **kwargs)
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
        if weights == FasterRCNN_ResNet50_FPN_Weights.COCO_V1:
            overwrite_eps(model, 0.0)
    return model


@register_model("fasterrcnn_resnet50_fpn_v2", FasterRCNN_ResNet50_FPN_V2_Weights)
@handle_legacy_interface(lambda: FasterRCNN_ResNet50_FPN_V2_Weights.COCO_V1, lambda: ResNet50_Weights.IMAGENET1K_V1)
def fasterrcnn_resnet50_fpn_v2(*, weights: Any = None, progress: bool = True, num_classes: int | None = None,
                               weights_backbone: Any = None, trainable_backbone_layers: int | None = None,
                               **kwargs: Any) -> FasterRCNN:
    """Faster R-CNN v2 (batch-normed FPN, two-conv RPN head, four-conv box head)."""
    weights, weights_backbone, num_classes, _, layers = detection_setup(
        FasterRCNN_ResNet50_FPN_V2_Weights, ResNet50_Weights, weights, weights_backbone, num_classes,
        trainable_backbone_layers, 5, 3)
    backbone = _resnet_fpn_extractor(resnet50(weights=weights_backbone, progress=progress), layers,
                                     norm_layer=nn.BatchNorm2d)
    anchors = _default_anchorgen()
    rpn_head = RPNHead(backbone.out_channels, anchors.num_anchors_per_location()[0], conv_depth=2)
    box_head = FastRCNNConvFCHead((backbone.out_channels, 7, 7), [256, 256, 256, 256], [1024],
                                  norm_layer=nn.BatchNorm2d)
    model = FasterRCNN(backbone, num_classes=num_classes, rpn_anchor_generator=anchors, rpn_head=rpn_head,
                       box_head=box_head, **kwargs)
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
    return model


def _fasterrcnn_mobilenet_v3_large_fpn(weights_enum: Any, weights: Any, progress: bool, num_classes: int | None,
                                       weights_backbone: Any, trainable_backbone_layers: int | None,
                                       **kwargs: Any) -> FasterRCNN:
    weights, weights_backbone, num_classes, is_trained, layers = detection_setup(
        weights_enum, MobileNet_V3_Large_Weights, weights, weights_backbone, num_classes,
        trainable_backbone_layers, 6, 3)
    norm_layer = FrozenBatchNorm2d if is_trained else nn.BatchNorm2d
    backbone = mobilenet_v3_large(weights=weights_backbone, progress=progress, norm_layer=norm_layer)
    backbone = _mobilenet_extractor(backbone, True, layers)
    sizes = ((32, 64, 128, 256, 512),) * 3
    anchors = AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * len(sizes))
    model = FasterRCNN(backbone, num_classes, rpn_anchor_generator=anchors, **kwargs)
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
    return model


@register_model("fasterrcnn_mobilenet_v3_large_320_fpn", FasterRCNN_MobileNet_V3_Large_320_FPN_Weights)
@handle_legacy_interface(lambda: FasterRCNN_MobileNet_V3_Large_320_FPN_Weights.COCO_V1,
                         lambda: MobileNet_V3_Large_Weights.IMAGENET1K_V1)
def fasterrcnn_mobilenet_v3_large_320_fpn(*, weights: Any = None, progress: bool = True,
                                          num_classes: int | None = None,
                                          weights_backbone: Any = MobileNet_V3_Large_Weights.IMAGENET1K_V1,
                                          trainable_backbone_layers: int | None = None, **kwargs: Any) -> FasterRCNN:
    """Faster R-CNN on MobileNetV3-Large with an FPN, tuned for 320-pixel images (fewer proposals)."""
    defaults = {"min_size": 320, "max_size": 640, "rpn_pre_nms_top_n_test": 150, "rpn_post_nms_top_n_test": 150,
                "rpn_score_thresh": 0.05}
    return _fasterrcnn_mobilenet_v3_large_fpn(FasterRCNN_MobileNet_V3_Large_320_FPN_Weights, weights, progress,
                                              num_classes, weights_backbone, trainable_backbone_layers,
                                              **{**defaults, **kwargs})


@register_model("fasterrcnn_mobilenet_v3_large_fpn", FasterRCNN_MobileNet_V3_Large_FPN_Weights)
@handle_legacy_interface(lambda: FasterRCNN_MobileNet_V3_Large_FPN_Weights.COCO_V1,
                         lambda: MobileNet_V3_Large_Weights.IMAGENET1K_V1)
def fasterrcnn_mobilenet_v3_large_fpn(*, weights: Any = None, progress: bool = True, num_classes: int | None = None,
                                      weights_backbone: Any = MobileNet_V3_Large_Weights.IMAGENET1K_V1,
                                      trainable_backbone_layers: int | None = None, **kwargs: Any) -> FasterRCNN:
    """Faster R-CNN on MobileNetV3-Large with an FPN (high resolution)."""
    return _fasterrcnn_mobilenet_v3_large_fpn(FasterRCNN_MobileNet_V3_Large_FPN_Weights, weights, progress,
                                              num_classes, weights_backbone, trainable_backbone_layers,
                                              **{"rpn_score_thresh": 0.05, **kwargs})
