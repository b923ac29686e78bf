"""torchvision's detection models against ember's (tests/vision/detection_ref.py says how): the same keys, strict
loading both ways, equal eval detections, and in training the same loss dict and parameter gradients (float64).
Small images and few proposals by default; the full-size configurations are in the slow set."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from detection_ref import compare_detector, reference_ops_installed, torchvision_detection  # noqa: E402

import ember  # noqa: E402
import ember.vision as ev  # noqa: E402

try:
    tv = torchvision_detection()
except ImportError:  # pragma: no cover - torchvision is in the test extra
    tv = None
pytestmark = pytest.mark.skipif(tv is None, reason="torchvision (test extra) is not installed")


@pytest.fixture(autouse=True)
def _reference_torchvision():
    """torchvision's detectors with the reference nms / roi_align (detection_ref.py), for this test only; eager
    mode (torchvision wraps some Python ops in torch.compile: seconds per shape, same values)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with torch.compiler.set_stance("force_eager"), reference_ops_installed(tv):
        yield
    torch.set_num_threads(before)


# every sampler sees fewer candidates than its batch size, so both libraries take all of them
SMALL_RCNN = dict(min_size=64, max_size=96, rpn_pre_nms_top_n_test=30, rpn_post_nms_top_n_test=12,
                  rpn_pre_nms_top_n_train=30, rpn_post_nms_top_n_train=12, rpn_batch_size_per_image=100000,
                  box_batch_size_per_image=100000, box_detections_per_img=20)
SIZES = [(60, 80), (50, 64)]
TARGETS = [{"boxes": np.array([[5.0, 6.0, 40.0, 50.0], [30.0, 10.0, 75.0, 55.0]]), "labels": np.array([1, 3])},
           {"boxes": np.array([[10.0, 4.0, 50.0, 30.0]]), "labels": np.array([2])}]


def _pair(name: str, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        reference = getattr(tv.models.detection, name)(weights=None, weights_backbone=None, **kwargs)
        model = getattr(ev.models.detection, name)(weights=None, weights_backbone=None, **kwargs)
    return reference, model


BUILDERS = ["ssd300_vgg16", "ssdlite320_mobilenet_v3_large", "fcos_resnet50_fpn", "retinanet_resnet50_fpn", "retinanet_resnet50_fpn_v2", "fasterrcnn_resnet50_fpn", "fasterrcnn_resnet50_fpn_v2", "fasterrcnn_mobilenet_v3_large_fpn",
            "fasterrcnn_mobilenet_v3_large_320_fpn", "maskrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn_v2",
            "keypointrcnn_resnet50_fpn"]


@pytest.mark.parametrize("name", BUILDERS)
def test_builder_has_torchvisions_modules_and_keys(name):
    # The default classes: the published checkpoints' shapes. Built on the meta device in both libraries: keys, module
    # names, frozen parameters and counts are structure, and a full-size random init (and ssd300_vgg16's 300x300 VGG-16
    # forward that sizes its heads, with its kernel compiles) cost 2-40 s per builder; real builds run in the small-model
    # tests below and in test_builders_match_torchvision (slow).
    with ember.device("meta"), torch.device("meta"):
        reference, model = _pair(name)
    theirs = reference.state_dict()
    assert [(k, tuple(v.shape)) for k, v in model.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.items()]
    assert [n for n, _ in model.named_modules()] == [n for n, _ in reference.named_modules()]
    # the same parameters are frozen (trainable_backbone_layers)
    assert [n for n, p in model.named_parameters() if p.requires_grad] == \
        [n for n, p in reference.named_parameters() if p.requires_grad]
    assert repr(model.transform) == repr(reference.transform)
    weights = ev.models.get_model_weights(name).DEFAULT
    if name != "ssdlite320_mobilenet_v3_large":  # trained from a full-tail backbone; without one the tail is reduced
        count = sum(p.numel() for p in model.parameters())
        if "v2" not in name and "ssd" not in name:
            # with weights the backbone's batch norms are FrozenBatchNorm2d (buffers, not counted by the metadata)
            count -= sum(p.numel() for m in model.backbone.body.modules() if type(m).__name__ == "BatchNorm2d"
                         for p in m.parameters())
        assert count == weights.meta["num_params"]


def test_detection_weights_metadata_matches_torchvision():
    ours_names = ev.models.list_models(module=ev.models.detection)
    assert ours_names == tv.models.list_models(module=tv.models.detection)
    image = np.random.default_rng(2).integers(0, 256, (3, 5, 7), dtype=np.uint8)
    for name in ours_names:
        ours, theirs = ev.models.get_model_weights(name), tv.models.get_model_weights(name)
        assert ours.__name__ == theirs.__name__ and list(ours.__members__) == list(theirs.__members__)
        assert ours.DEFAULT.name == theirs.DEFAULT.name
        for member in theirs:
            mine = ours[member.name]
            assert mine.url == member.url
            assert {k: v for k, v in mine.meta.items() if k != "categories"} == \
                {k: (list(v) if isinstance(v, tuple) else v) for k, v in member.meta.items() if k != "categories"}
            assert mine.meta["categories"] == list(member.meta["categories"])
            preset = mine.transforms()
            assert type(preset).__name__ == type(member.transforms()).__name__ == "ObjectDetection"
            import ember
            np.testing.assert_array_equal(preset(ember.from_numpy(image)).numpy(),
                                          member.transforms()(torch.from_numpy(image)).numpy())


def _slow_case(name: str):
    """Builder keywords and targets for the full-size comparison of one builder."""
    if name.startswith(("fasterrcnn", "maskrcnn", "keypointrcnn")):
        kwargs = dict(SMALL_RCNN, num_classes=5)
        if name.startswith("keypoint"):
            return dict(kwargs, num_classes=2, num_keypoints=4), _keypoint_targets()
        return kwargs, (_mask_targets() if name.startswith("mask") else TARGETS)
    if name.startswith(("retinanet", "fcos")):
        return dict(SMALL_ONE_STAGE, num_classes=5), TARGETS
    return dict(SMALL_SSD, num_classes=5), TARGETS


@pytest.mark.slow
@pytest.mark.parametrize("name", BUILDERS)
def test_builders_match_torchvision(name):
    """Every builder's own backbone and heads (ResNet-50, MobileNetV3, VGG-16), few proposals, small images (the SSDs
    resize to their fixed 300 / 320)."""
    kwargs, targets = _slow_case(name)
    compare_detector(*_pair(name, **kwargs), SIZES, targets)


def _small_backbone(lib):
    """A ResNet-18 FPN backbone, all layers trainable, batch norm in training mode (default-size tests)."""
    norm = torch.nn.BatchNorm2d if lib is tv else ev.models.detection.ssd.nn.BatchNorm2d
    return lib.models.detection.backbone_utils.resnet_fpn_backbone(backbone_name="resnet18", weights=None,
                                                                   norm_layer=norm, trainable_layers=5)


def _small_pair(cls_name: str, heads=None, **kwargs):
    """``heads(lib)``: extra keyword arguments built with each library's own classes (narrow heads)."""
    torch.manual_seed(0)
    return [getattr(lib.models.detection, cls_name)(_small_backbone(lib), **kwargs, **(heads(lib) if heads else {}))
            for lib in (tv, ev)]


@pytest.mark.slow  # (5.7 s of CPU) Mask and Keypoint R-CNN below are Faster R-CNNs: every step of this pipeline runs in both
def test_small_faster_rcnn_matches_torchvision():
    compare_detector(*_small_pair("FasterRCNN", num_classes=5, **SMALL_RCNN), SIZES, TARGETS)


def test_reference_roi_align_is_the_kernel():
    """The torch RoIAlign the reference models use (detection_ref.py) against the kernel's loop transcription."""
    from detection_ref import reference_roi_align
    from test_vision_detection_ops_vs_torchvision import reference_roi_align as kernel_loop

    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 9, 11))
    rois = np.concatenate([rng.integers(0, 2, (12, 1)), rng.uniform(-4, 12, (12, 2)), rng.uniform(0, 16, (12, 2))],
                          axis=1)
    rois[:, 3:] += rois[:, 1:3]
    rois[0, 1:] = [0.0, 34.7, 40.0, 36.0]  # thinner than a pixel on the bottom edge (scale 0.25)
    for scale, ratio, aligned in [(1.0, 2, False), (0.5, -1, False), (0.25, 2, False), (1.0, -1, True)]:
        ours = reference_roi_align(torch.from_numpy(x), torch.from_numpy(rois), (3, 4), scale, ratio, aligned)
        np.testing.assert_allclose(ours.numpy(), kernel_loop(x, rois, 3, 4, scale, ratio, aligned), rtol=1e-12,
                                   atol=1e-13)


def _mask_targets():
    targets = []
    for (h, w), t in zip(SIZES, TARGETS):
        masks = np.zeros((len(t["boxes"]), h, w), dtype=np.uint8)
        for i, (x1, y1, x2, y2) in enumerate(t["boxes"].astype(int)):
            masks[i, y1:y2, x1:(x1 + x2) // 2] = 1   # the left half of each box, so masks are not boxes
            masks[i, (y1 + y2) // 2:y2, x1:x2] = 1
        targets.append({**t, "masks": masks})
    return targets


def _keypoint_targets(k: int = 4):
    rng = np.random.default_rng(5)
    targets = []
    for t in TARGETS:
        boxes = t["boxes"]
        lo, hi = boxes[:, None, :2], boxes[:, None, 2:]
        xy = lo + rng.uniform(0, 1, (len(boxes), k, 2)) * (hi - lo)
        vis = (rng.uniform(size=(len(boxes), k, 1)) > 0.2).astype(np.float64)
        xy[0, 0] = hi[0, 0]  # a keypoint on the box's far corner: the last heatmap cell
        points = np.concatenate([xy, vis], axis=2).astype(np.float32)  # torchvision requires float32 keypoints
        targets.append({**t, "labels": np.ones_like(t["labels"]), "keypoints": points})
    return targets


# The mask and keypoint heads at 64 channels: the defaults (4 x 256 and 8 x 512 3x3 convs over every 14x14 RoI, in
# float64, in both libraries, forward and backward) cost 8.6 and 12.9 s of CPU here, the heads' own classes and the
# rest of the pipeline are the same; the default widths run in the slow set (test_builders_match_torchvision) and
# their layouts in test_builder_has_torchvisions_modules_and_keys.
def _narrow_mask_heads(lib):
    det = lib.models.detection
    return dict(box_predictor=det.faster_rcnn.FastRCNNPredictor(1024, 5),
                mask_head=det.mask_rcnn.MaskRCNNHeads(256, (64, 64), 1),
                mask_predictor=det.mask_rcnn.MaskRCNNPredictor(64, 64, 5))


def _narrow_keypoint_heads(lib):
    det = lib.models.detection
    return dict(keypoint_head=det.keypoint_rcnn.KeypointRCNNHeads(256, (64, 64)),
                keypoint_predictor=det.keypoint_rcnn.KeypointRCNNPredictor(64, 4))


def test_small_mask_rcnn_matches_torchvision():
    compare_detector(*_small_pair("MaskRCNN", _narrow_mask_heads, **SMALL_RCNN), SIZES, _mask_targets())


def test_small_keypoint_rcnn_matches_torchvision():
    small = {**SMALL_RCNN, "box_detections_per_img": 6}
    compare_detector(*_small_pair("KeypointRCNN", _narrow_keypoint_heads, num_classes=2, **small), SIZES,
                     _keypoint_targets())


def _retinanet_pair(v2: bool, **kwargs):
    from functools import partial

    pair = []
    torch.manual_seed(0)
    for lib in (tv, ev):
        nn = torch.nn if lib is tv else ev.models.detection.retinanet.nn
        det = lib.models.detection
        norm = (lib.ops.misc.FrozenBatchNorm2d if lib is tv else ev.ops.FrozenBatchNorm2d)
        extra = lib.ops.feature_pyramid_network.LastLevelP6P7(512 if v2 else 256, 256)
        backbone = det.backbone_utils.resnet_fpn_backbone(backbone_name="resnet18", weights=None, norm_layer=norm,
                                                          trainable_layers=5, returned_layers=[2, 3, 4],
                                                          extra_blocks=extra)
        head = None
        if v2:
            head = det.retinanet.RetinaNetHead(256, 9, 5, norm_layer=partial(nn.GroupNorm, 32))
            head.regression_head._loss_type = "giou"
        pair.append(det.RetinaNet(backbone, 5, head=head, **kwargs))
    return pair


SMALL_ONE_STAGE = dict(min_size=64, max_size=96, topk_candidates=40, detections_per_img=25)


@pytest.mark.parametrize("v2", [False, True])
def test_small_retinanet_matches_torchvision(v2):
    compare_detector(*_retinanet_pair(v2, **SMALL_ONE_STAGE), SIZES, TARGETS)


def test_small_fcos_matches_torchvision():
    pair = []
    torch.manual_seed(0)
    for lib in (tv, ev):
        det = lib.models.detection
        norm = lib.ops.misc.FrozenBatchNorm2d if lib is tv else ev.ops.FrozenBatchNorm2d
        backbone = det.backbone_utils.resnet_fpn_backbone(
            backbone_name="resnet18", weights=None, norm_layer=norm, trainable_layers=5, returned_layers=[2, 3, 4],
            extra_blocks=lib.ops.feature_pyramid_network.LastLevelP6P7(256, 256))
        pair.append(det.FCOS(backbone, 5, **SMALL_ONE_STAGE))
    compare_detector(*pair, SIZES, TARGETS)


def _tiny_ssd_backbone(nn, collections=__import__("collections")):
    """Three feature maps (strides 4, 8, 16) from a few convs with batch norm."""
    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                   nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())
            self.b = nn.Sequential(nn.Conv2d(16, 16, 3, stride=2, padding=1), nn.ReLU())
            self.c = nn.Sequential(nn.Conv2d(16, 24, 3, stride=2, padding=1), nn.ReLU())
            self.out_channels = [16, 16, 24]

        def forward(self, x):
            a = self.a(x)
            b = self.b(a)
            return collections.OrderedDict([("0", a), ("1", b), ("2", self.c(b))])
    return Tiny()


SMALL_SSD = dict(topk_candidates=30, detections_per_img=25, score_thresh=0.05)


def test_small_ssd_matches_torchvision():
    pair = []
    torch.manual_seed(0)
    for lib, nn in ((tv, torch.nn), (ev, ev.models.detection.ssd.nn)):
        det = lib.models.detection
        anchors = det.anchor_utils.DefaultBoxGenerator([[2], [2, 3], [2]], steps=[4, 8, 16])
        pair.append(det.ssd.SSD(_tiny_ssd_backbone(nn), anchors, (64, 64), 5, **SMALL_SSD))
    compare_detector(*pair, SIZES, TARGETS)


def test_small_ssdlite_matches_torchvision():
    """SSDLite's MobileNetV3 feature extractor, head and default boxes at 64x64, on a quarter-width backbone."""
    from functools import partial

    pair = []
    torch.manual_seed(0)
    for lib, nn in ((tv, torch.nn), (ev, ev.models.detection.ssd.nn)):
        det = lib.models.detection
        norm = partial(nn.BatchNorm2d, eps=0.001, momentum=0.03)
        net = lib.models.mobilenet_v3_large(width_mult=0.25, norm_layer=norm, reduced_tail=True)
        backbone = det.ssdlite._mobilenet_extractor(net, 6, norm)
        anchors = det.anchor_utils.DefaultBoxGenerator([[2, 3] for _ in range(6)], min_ratio=0.2, max_ratio=0.95)
        channels = det._utils.retrieve_out_channels(backbone, (64, 64))
        head = det.ssdlite.SSDLiteHead(channels, anchors.num_anchors_per_location(), 5, norm)
        pair.append(det.ssd.SSD(backbone, anchors, (64, 64), 5, head=head, **SMALL_SSD))
    compare_detector(*pair, SIZES, TARGETS)


def test_mask_rcnn_runs_on_the_standin_cuda_device():
    """Eval and a training step on the stand-in device (which refuses silent host copies): outputs, losses and
    gradients stay on the device."""
    import ember
    from ember.testing import standin_cuda

    det = ev.models.detection
    with standin_cuda():
        backbone = det.backbone_utils.resnet_fpn_backbone(backbone_name="resnet18", weights=None, trainable_layers=5,
                                                          norm_layer=ember.nn.BatchNorm2d)
        model = det.MaskRCNN(backbone, num_classes=3, min_size=64, max_size=64, rpn_post_nms_top_n_test=8,
                             rpn_post_nms_top_n_train=8).to("cuda").eval()
        out = model([ember.rand(3, 48, 64, device="cuda")])[0]
        assert list(out) == ["boxes", "labels", "scores", "masks"]
        assert all(v.device.type == "cuda" for v in out.values()) and out["masks"].shape[-2:] == (48, 64)
        masks = ember.zeros(1, 48, 64, dtype=ember.uint8, device="cuda")
        masks[0, 5:30, 5:40] = 1
        target = {"boxes": ember.tensor([[5.0, 5.0, 40.0, 30.0]], device="cuda"),
                  "labels": ember.tensor([1], device="cuda"), "masks": masks}
        losses = model.train()([ember.rand(3, 48, 64, device="cuda")], [target])
        assert all(v.device.type == "cuda" for v in losses.values())
        sum(losses.values()).backward()
        assert model.roi_heads.mask_predictor.mask_fcn_logits.weight.grad.device.type == "cuda"
