"""SSD (torchvision's ``models.detection.ssd``): a fixed-size one-stage detector. Default boxes on several
feature maps (``DefaultBoxGenerator``), a 3x3 conv per map for class logits (softmax) and box deltas; training
matches boxes by IoU (each gt also claims its best box) and mines the hardest negatives (3 per positive).
``ssd300_vgg16`` uses torchvision's VGG-16 feature extractor with the extra SSD layers.

Example:
    >>> import ember
    >>> from ember.vision.models.detection import ssd300_vgg16
    >>> model = ssd300_vgg16(weights=None, weights_backbone=None, num_classes=3).eval()
    >>> len(model.anchor_generator.num_anchors_per_location())
    6
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any

import ember
from ember import nn
from ember.nn import functional as F
from ember.tensor import Tensor
from ember.vision.models._api import handle_legacy_interface, make_weights_enum, register_model
from ember.vision.models.detection import _utils as det_utils
from ember.vision.models.detection.anchor_utils import DefaultBoxGenerator
from ember.vision.models.detection.backbone_utils import _validate_trainable_layers
from ember.vision.models.detection.generalized_rcnn import single_stage_inputs
from ember.vision.models.detection.rpn import permute_and_flatten
from ember.vision.models.detection.transform import GeneralizedRCNNTransform
from ember.vision.models.segmentation._utils import overwrite_value
from ember.vision.models.vgg import VGG, VGG16_Weights, vgg16
from ember.vision.ops import boxes as box_ops

__all__ = ["SSD300_VGG16_Weights", "ssd300_vgg16", "SSD", "SSDHead", "SSDClassificationHead", "SSDRegressionHead",
           "SSDScoringHead", "SSDFeatureExtractorVGG"]

SSD300_VGG16_Weights = make_weights_enum("SSD300_VGG16_Weights", __name__)


def _xavier_init(conv: nn.Module) -> None:
    for layer in conv.modules():
        if isinstance(layer, nn.Conv2d):
            nn.init.xavier_uniform_(layer.weight)
            if layer.bias is not None:
                nn.init.constant_(layer.bias, 0.0)


class SSDScoringHead(nn.Module):
    """One module per feature map (``module_list[i]`` scores map ``i``); outputs ``[N, sum HWA, num_columns]``."""

    def __init__(self, module_list: nn.ModuleList, num_columns: int) -> None:
        super().__init__()
        self.module_list = module_list
        self.num_columns = num_columns

    def _get_result_from_module_list(self, x: Tensor, idx: int) -> Tensor:
        return self.module_list[idx](x)

    def forward(self, x: list[Tensor]) -> Tensor:
        outs = []
        for i, features in enumerate(x):
            result = self._get_result_from_module_list(features, i)
            n, _, h, w = result.shape
            outs.append(permute_and_flatten(result, n, -1, self.num_columns, h, w))
        return ember.cat(outs, dim=1)


class SSDClassificationHead(SSDScoringHead):
    def __init__(self, in_channels: list[int], num_anchors: list[int], num_classes: int) -> None:
        convs = nn.ModuleList([nn.Conv2d(c, num_classes * a, kernel_size=3, padding=1)
                               for c, a in zip(in_channels, num_anchors)])
        _xavier_init(convs)
        super().__init__(convs, num_classes)


class SSDRegressionHead(SSDScoringHead):
    def __init__(self, in_channels: list[int], num_anchors: list[int]) -> None:
        convs = nn.ModuleList([nn.Conv2d(c, 4 * a, kernel_size=3, padding=1) for c, a in zip(in_channels, num_anchors)])
        _xavier_init(convs)
        super().__init__(convs, 4)


class SSDHead(nn.Module):
    def __init__(self, in_channels: list[int], num_anchors: list[int], num_classes: int) -> None:
        super().__init__()
        self.classification_head = SSDClassificationHead(in_channels, num_anchors, num_classes)
        self.regression_head = SSDRegressionHead(in_channels, num_anchors)

    def forward(self, x: list[Tensor]) -> dict[str, Tensor]:
        return {"bbox_regression": self.regression_head(x), "cls_logits": self.classification_head(x)}


class SSD(nn.Module):
    """SSD on a ``backbone`` returning feature maps (an OrderedDict or one tensor), with torchvision's arguments:
    ``anchor_generator`` (a DefaultBoxGenerator), the fixed input ``size`` (h, w), ``score_thresh``,
    ``nms_thresh``, ``detections_per_img``, ``iou_thresh``, ``topk_candidates`` per class, ``positive_fraction``
    (of the mined batch)."""

    def __init__(self, backbone: nn.Module, anchor_generator: DefaultBoxGenerator, size: tuple[int, int],
                 num_classes: int, image_mean: list[float] | None = None, image_std: list[float] | None = None,
                 head: nn.Module | None = None, score_thresh: float = 0.01, nms_thresh: float = 0.45,
                 detections_per_img: int = 200, iou_thresh: float = 0.5, topk_candidates: int = 400,
                 positive_fraction: float = 0.25, **kwargs: Any) -> None:
        super().__init__()
        self.backbone = backbone
        self.anchor_generator = anchor_generator
        self.box_coder = det_utils.BoxCoder(weights=(10.0, 10.0, 5.0, 5.0))
        if head is None:
            channels = (backbone.out_channels if hasattr(backbone, "out_channels")
                        else det_utils.retrieve_out_channels(backbone, size))
            if len(channels) != len(anchor_generator.aspect_ratios):
                raise ValueError(f"The length of the output channels from the backbone ({len(channels)}) do not "
                                 f"match the length of the anchor generator aspect ratios "
                                 f"({len(anchor_generator.aspect_ratios)})")
            head = SSDHead(channels, anchor_generator.num_anchors_per_location(), num_classes)
        self.head = head
        self.proposal_matcher = det_utils.SSDMatcher(iou_thresh)
        self.transform = GeneralizedRCNNTransform(min(size), max(size), image_mean or [0.485, 0.456, 0.406],
                                                  image_std or [0.229, 0.224, 0.225], size_divisible=1,
                                                  fixed_size=size, **kwargs)
        self.score_thresh = score_thresh
        self.nms_thresh = nms_thresh
        self.detections_per_img = detections_per_img
        self.topk_candidates = topk_candidates
        self.neg_to_pos_ratio = (1.0 - positive_fraction) / positive_fraction
        self._has_warned = False

    def eager_outputs(self, losses: dict[str, Tensor], detections: list[dict[str, Tensor]]) -> Any:
        return losses if self.training else detections

    def compute_loss(self, targets: list[dict[str, Tensor]], head_outputs: dict[str, Tensor], anchors: list[Tensor],
                     matched_idxs: list[Tensor]) -> dict[str, Tensor]:
        """Smooth-L1 (beta 1) on the positives' codes; cross-entropy on the positives and on the
        ``neg_to_pos_ratio`` x as many highest-loss negatives; both over the positive count."""
        num_fg = 0
        box_losses, class_targets = [], []
        for target, deltas, logits, anchors_i, matched in zip(targets, head_outputs["bbox_regression"],
                                                               head_outputs["cls_logits"], anchors, matched_idxs):
            fg = ember.where(matched >= 0)[0]
            fg_matched = matched[fg]
            num_fg += fg_matched.numel()
            codes = self.box_coder.encode_single(target["boxes"][fg_matched], anchors_i[fg, :])
            box_losses.append(F.smooth_l1_loss(deltas[fg, :], codes, reduction="sum"))
            cls = ember.zeros((logits.shape[0],), dtype=target["labels"].dtype, device=target["labels"].device)
            cls[fg] = target["labels"][fg_matched]
            class_targets.append(cls)
        box_loss = ember.stack(box_losses)
        cls_targets = ember.stack(class_targets)
        num_classes = head_outputs["cls_logits"].shape[-1]
        cls_loss = F.cross_entropy(head_outputs["cls_logits"].view(-1, num_classes), cls_targets.view(-1),
                                   reduction="none").view(cls_targets.shape)
        positive = cls_targets > 0
        num_negative = self.neg_to_pos_ratio * positive.sum(1, keepdim=True)
        # hard negatives: rank the background anchors by loss (positives pushed last with -inf)
        ranking = cls_loss.detach().clone()
        ranking[positive] = -float("inf")
        order = ranking.sort(1, descending=True)[1]
        negative = order.sort(1)[1] < num_negative
        n = max(1, num_fg)
        return {"bbox_regression": box_loss.sum() / n,
                "classification": (cls_loss[positive].sum() + cls_loss[negative].sum()) / n}

    def postprocess_detections(self, head_outputs: dict[str, Tensor], image_anchors: list[Tensor],
                               image_shapes: list[tuple[int, int]]) -> list[dict[str, Tensor]]:
        """Per class (background dropped): scores > ``score_thresh``, the best ``topk_candidates``; per-class NMS;
        the best ``detections_per_img``."""
        scores_all = F.softmax(head_outputs["cls_logits"], dim=-1)
        num_classes = scores_all.shape[-1]
        detections = []
        for deltas, scores, anchors, shape in zip(head_outputs["bbox_regression"], scores_all, image_anchors,
                                                  image_shapes):
            boxes = box_ops.clip_boxes_to_image(self.box_coder.decode_single(deltas, anchors), shape)
            out_boxes, out_scores, out_labels = [], [], []
            for label in range(1, num_classes):
                score = scores[:, label]
                keep = score > self.score_thresh
                score, box = score[keep], boxes[keep]
                score, idx = score.topk(det_utils._topk_min(score, self.topk_candidates, 0))
                out_boxes.append(box[idx])
                out_scores.append(score)
                out_labels.append(ember.full_like(score, fill_value=label, dtype=ember.int64, device=score.device))
            boxes_c, scores_c, labels_c = ember.cat(out_boxes, dim=0), ember.cat(out_scores, dim=0), ember.cat(
                out_labels, dim=0)
            keep = box_ops.batched_nms(boxes_c, scores_c, labels_c, self.nms_thresh)[: self.detections_per_img]
            detections.append({"boxes": boxes_c[keep], "scores": scores_c[keep], "labels": labels_c[keep]})
        return detections

    def forward(self, images: list[Tensor], targets: list[dict[str, Tensor]] | None = None) -> Any:
        sizes, image_list, targets, features, head_outputs, anchors = single_stage_inputs(self, images, targets)
        losses: dict[str, Tensor] = {}
        detections: list[dict[str, Tensor]] = []
        if self.training:
            matched_idxs = []
            for anchors_i, target in zip(anchors, targets):
                if target["boxes"].numel() == 0:
                    matched_idxs.append(ember.full((anchors_i.shape[0],), -1, dtype=ember.int64,
                                                   device=anchors_i.device))
                else:
                    matched_idxs.append(self.proposal_matcher(box_ops.box_iou(target["boxes"], anchors_i)))
            losses = self.compute_loss(targets, head_outputs, anchors, matched_idxs)
        else:
            detections = self.postprocess_detections(head_outputs, anchors, image_list.image_sizes)
            detections = self.transform.postprocess(detections, image_list.image_sizes, sizes)
        return self.eager_outputs(losses, detections)


class SSDFeatureExtractorVGG(nn.Module):
    """VGG's features to conv4_3 (L2-normalized, scaled by the learned ``scale_weight``), then conv5 with the
    dilated fc6/fc7 and the extra SSD blocks (``highres`` adds one for SSD512)."""

    def __init__(self, backbone: nn.Module, highres: bool) -> None:
        super().__init__()
        _, _, pool3, pool4, _ = (i for i, layer in enumerate(backbone) if isinstance(layer, nn.MaxPool2d))
        backbone[pool3].ceil_mode = True
        self.scale_weight = nn.Parameter(ember.ones(512) * 20)
        self.features = nn.Sequential(*backbone[:pool4])

        def block(cin: int, mid: int, cout: int, kernel: int, **conv: Any) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(cin, mid, kernel_size=1), nn.ReLU(inplace=True),
                                 nn.Conv2d(mid, cout, kernel_size=kernel, **conv), nn.ReLU(inplace=True))

        extra = nn.ModuleList([block(1024, 256, 512, 3, padding=1, stride=2), block(512, 128, 256, 3, padding=1,
                                                                                  stride=2),
                               block(256, 128, 256, 3), block(256, 128, 256, 3)])
        if highres:
            extra.append(block(256, 128, 256, 4))
        _xavier_init(extra)
        fc = nn.Sequential(nn.MaxPool2d(kernel_size=3, stride=1, padding=1, ceil_mode=False),
                           nn.Conv2d(in_channels=512, out_channels=1024, kernel_size=3, padding=6, dilation=6),
                           nn.ReLU(inplace=True), nn.Conv2d(in_channels=1024, out_channels=1024, kernel_size=1),
                           nn.ReLU(inplace=True))
        _xavier_init(fc)
        extra.insert(0, nn.Sequential(*backbone[pool4:-1], fc))  # conv5 (without pool5), then fc6/fc7
        self.extra = extra

    def forward(self, x: Tensor) -> "OrderedDict[str, Tensor]":
        x = self.features(x)
        outputs = [self.scale_weight.view(1, -1, 1, 1) * F.normalize(x)]
        for block in self.extra:
            x = block(x)
            outputs.append(x)
        return OrderedDict((str(i), v) for i, v in enumerate(outputs))


def _vgg_extractor(backbone: VGG, highres: bool, trainable_layers: int) -> SSDFeatureExtractorVGG:
    features = backbone.features
    stages = [0] + [i for i, b in enumerate(features) if isinstance(b, nn.MaxPool2d)][:-1]
    if not 0 <= trainable_layers <= len(stages):
        raise AssertionError(f"trainable_layers should be in the range [0, {len(stages)}]. Instead got "
                             f"{trainable_layers}")
    freeze_before = len(features) if trainable_layers == 0 else stages[len(stages) - trainable_layers]
    for block in features[:freeze_before]:
        for parameter in block.parameters():
            parameter.requires_grad_(False)
    return SSDFeatureExtractorVGG(features, highres)


@register_model("ssd300_vgg16", SSD300_VGG16_Weights)
@handle_legacy_interface(lambda: SSD300_VGG16_Weights.COCO_V1, lambda: VGG16_Weights.IMAGENET1K_FEATURES)
def ssd300_vgg16(*, weights: Any = None, progress: bool = True, num_classes: int | None = None,
                 weights_backbone: Any = VGG16_Weights.IMAGENET1K_FEATURES, trainable_backbone_layers: int | None = None,
                 **kwargs: Any) -> SSD:
    """SSD300 on VGG-16 (300x300 input, six feature maps, 91 COCO classes)."""
    weights = SSD300_VGG16_Weights.verify(weights)
    weights_backbone = VGG16_Weights.verify(weights_backbone)
    if "size" in kwargs:
        warnings.warn("The size of the model is already fixed; ignoring the parameter.")
        kwargs.pop("size")
    if weights is not None:
        weights_backbone = None
        num_classes = overwrite_value("num_classes", num_classes, len(weights.meta["categories"]))
    elif num_classes is None:
        num_classes = 91
    layers = _validate_trainable_layers(weights is not None or weights_backbone is not None,
                                        trainable_backbone_layers, 5, 4)
    backbone = _vgg_extractor(vgg16(weights=weights_backbone, progress=progress), False, layers)
    anchors = DefaultBoxGenerator([[2], [2, 3], [2, 3], [2, 3], [2], [2]],
                                  scales=[0.07, 0.15, 0.33, 0.51, 0.69, 0.87, 1.05], steps=[8, 16, 32, 64, 100, 300])
    # the VGG weights expect 0-255 inputs minus the mean: the std undoes ToTensor's scaling
    defaults = {"image_mean": [0.48235, 0.45882, 0.40784], "image_std": [1.0 / 255.0, 1.0 / 255.0, 1.0 / 255.0]}
    model = SSD(backbone, anchors, (300, 300), num_classes, **{**defaults, **kwargs})
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
    return model
