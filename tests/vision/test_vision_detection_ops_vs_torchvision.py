"""ember.vision.ops' detection functions against torchvision.ops (values and input gradients).

torchvision's C++ kernels do not load next to torch 2.13's CPU wheel here (tests/vision/torchvision_ref.py), so
``nms``, ``batched_nms`` and ``roi_pool`` are checked against loop-by-loop float64 NumPy transcriptions of
torchvision's CPU kernels written below; everything else against torchvision's own Python code run by torch
(``roi_align`` takes its pure-Python path without the kernels).
"""
from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest

import ember
from ember.vision import ops

torch = pytest.importorskip("torch")
from torchvision_ref import import_torchvision  # noqa: E402

try:
    tv_ops = import_torchvision().ops
except ImportError:  # pragma: no cover - torchvision is in the test extra
    tv_ops = None
needs_tv = pytest.mark.skipif(tv_ops is None, reason="torchvision is not installed")


@pytest.fixture(autouse=True)
def torch_eager():
    """torchvision's Python roi_align is wrapped in torch.compile (seconds per shape); eager gives the same values."""
    with torch.compiler.set_stance("force_eager"):
        yield


def random_boxes(rng, n, size=20.0, min_side=0.5):
    xy = rng.uniform(0, size, (n, 2))
    wh = rng.uniform(min_side, size / 2, (n, 2))
    return np.concatenate([xy, xy + wh], axis=1)


def special_boxes():
    """Identical, touching, nested, disjoint and zero-area boxes."""
    return np.array([[0, 0, 2, 2], [0, 0, 2, 2], [2, 0, 4, 2], [0.5, 0.5, 1.5, 1.5], [10, 10, 11, 11],
                     [3, 3, 3, 5], [1, 1, 3, 3]], dtype=np.float64)


def both(a, requires_grad=False):
    return (ember.tensor(a, requires_grad=requires_grad), torch.tensor(a, requires_grad=requires_grad))


PAIR_FUNCS = ["box_iou", "generalized_box_iou", "distance_box_iou", "complete_box_iou"]


@needs_tv
@pytest.mark.parametrize("name", PAIR_FUNCS)
@pytest.mark.parametrize("case", ["random", "special"])
def test_pairwise_box_iou_family_values_and_gradients(name, case):
    rng = np.random.default_rng(1)
    b1 = random_boxes(rng, 6) if case == "random" else special_boxes()[:5]
    b2 = random_boxes(rng, 4) if case == "random" else special_boxes()[1:]
    e1, t1 = both(b1, True)
    e2, t2 = both(b2, True)
    ours, theirs = getattr(ops, name)(e1, e2), getattr(tv_ops, name)(t1, t2)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = rng.standard_normal(theirs.shape)
    (ours * ember.tensor(w)).sum().backward()
    (theirs * torch.tensor(w)).sum().backward()
    for a, b in ((e1, t1), (e2, t2)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)


@needs_tv
@pytest.mark.parametrize("name", ["generalized_box_iou_loss", "distance_box_iou_loss", "complete_box_iou_loss"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_box_iou_losses_like_torchvision(name, reduction):
    rng = np.random.default_rng(2)
    b1, b2 = random_boxes(rng, 7), random_boxes(rng, 7)
    b2[0] = b1[0]          # a perfect match
    b2[1] = b1[1] + 40.0   # no overlap
    e1, t1 = both(b1, True)
    e2, t2 = both(b2, True)
    ours = getattr(ops, name)(e1, e2, reduction=reduction)
    theirs = getattr(tv_ops, name)(t1, t2, reduction=reduction)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-12)
    ours.sum().backward()
    theirs.sum().backward()
    np.testing.assert_allclose(e1.grad.numpy(), t1.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(e2.grad.numpy(), t2.grad.numpy(), rtol=1e-10, atol=1e-12)


@needs_tv
@pytest.mark.parametrize("alpha,gamma", [(0.25, 2.0), (-1.0, 0.0), (0.5, 1.5)])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_sigmoid_focal_loss_like_torchvision(alpha, gamma, reduction):
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(10) * 3, [0.0, 30.0, -30.0]])
    y = (rng.uniform(size=x.shape) > 0.5).astype(np.float64)
    ex, tx = both(x, True)
    ours = ops.sigmoid_focal_loss(ex, ember.tensor(y), alpha, gamma, reduction)
    theirs = tv_ops.sigmoid_focal_loss(tx, torch.tensor(y), alpha, gamma, reduction)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-15)
    ours.sum().backward()
    theirs.sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-15)
    with pytest.raises(ValueError, match="reduction"):
        ops.sigmoid_focal_loss(ex, ember.tensor(y), reduction="avg")


@needs_tv
@pytest.mark.parametrize("in_fmt", ["xyxy", "xywh", "cxcywh"])
@pytest.mark.parametrize("out_fmt", ["xyxy", "xywh", "cxcywh"])
def test_box_convert_like_torchvision(in_fmt, out_fmt):
    b = random_boxes(np.random.default_rng(4), 5)
    np.testing.assert_allclose(ops.box_convert(ember.tensor(b), in_fmt, out_fmt).numpy(),
                               tv_ops.box_convert(torch.tensor(b), in_fmt, out_fmt).numpy(), rtol=1e-14)


@needs_tv
def test_clip_remove_small_area_and_masks_to_boxes_like_torchvision():
    rng = np.random.default_rng(5)
    b = random_boxes(rng, 8, size=30.0) - 5.0
    np.testing.assert_array_equal(ops.clip_boxes_to_image(ember.tensor(b), (17, 23)).numpy(),
                                  tv_ops.clip_boxes_to_image(torch.tensor(b), (17, 23)).numpy())
    assert ops.remove_small_boxes(ember.tensor(b), 6.0).tolist() == tv_ops.remove_small_boxes(torch.tensor(b), 6.0).tolist()
    np.testing.assert_allclose(ops.box_area(ember.tensor(b)).numpy(), tv_ops.box_area(torch.tensor(b)).numpy())
    ib = np.array([[0, 0, 3, 4], [1, 2, 5, 5]], dtype=np.int64)
    assert ops.box_area(ember.tensor(ib)).tolist() == tv_ops.box_area(torch.tensor(ib)).tolist()
    masks = np.zeros((3, 9, 11), dtype=np.uint8)
    masks[0, 2:5, 3:8] = 1
    masks[1, 7, 0] = 1
    masks[2, 0:9, 10] = 1
    np.testing.assert_array_equal(ops.masks_to_boxes(ember.tensor(masks)).numpy(),
                                  tv_ops.masks_to_boxes(torch.tensor(masks)).numpy())


# ---- NMS: a float64 transcription of torchvision's CPU kernel (nms_kernel.cpp) ----

def reference_nms(boxes, scores, thr):
    order = sorted(range(len(scores)), key=lambda i: -scores[i])  # Python's sort is stable, as torch's CPU sort
    area = [(b[2] - b[0]) * (b[3] - b[1]) for b in boxes]
    suppressed = [False] * len(scores)
    keep = []
    for a, i in enumerate(order):
        if suppressed[i]:
            continue
        keep.append(i)
        for j in order[a + 1:]:
            if suppressed[j]:
                continue
            w = max(0.0, min(boxes[i][2], boxes[j][2]) - max(boxes[i][0], boxes[j][0]))
            h = max(0.0, min(boxes[i][3], boxes[j][3]) - max(boxes[i][1], boxes[j][1]))
            inter = w * h
            if inter / (area[i] + area[j] - inter) > thr:
                suppressed[j] = True
    return keep


@pytest.mark.parametrize("thr", [0.0, 0.3, 0.5, 0.7, 1.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nms_matches_the_kernel_loop(thr, seed):
    rng = np.random.default_rng(seed)
    boxes = random_boxes(rng, 60, size=30.0)
    scores = rng.uniform(size=60)
    scores[5] = scores[9] = scores[11]  # ties keep index order
    keep = ops.nms(ember.tensor(boxes), ember.tensor(scores), thr)
    assert keep.dtype == ember.int64
    assert keep.tolist() == reference_nms(boxes.tolist(), scores.tolist(), thr)
    keep32 = ops.nms(ember.tensor(boxes, dtype=ember.float32), ember.tensor(scores, dtype=ember.float32), thr)
    assert keep32.tolist() == reference_nms(boxes.astype(np.float32).astype(np.float64).tolist(),
                                            scores.astype(np.float32).astype(np.float64).tolist(), thr)


def test_nms_special_cases():
    boxes = special_boxes()
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.95])
    assert ops.nms(ember.tensor(boxes), ember.tensor(scores), 0.5).tolist() == reference_nms(
        boxes.tolist(), scores.tolist(), 0.5)
    empty = ops.nms(ember.zeros((0, 4)), ember.zeros(0), 0.5)
    assert empty.shape == (0,) and empty.dtype == ember.int64
    with pytest.raises(ValueError, match="nms: boxes must have shape"):
        ops.nms(ember.zeros(3, 5), ember.zeros(3), 0.5)
    with pytest.raises(ValueError, match="nms: scores must have shape"):
        ops.nms(ember.zeros(3, 4), ember.zeros(2), 0.5)


@pytest.mark.parametrize("seed", [0, 1])
def test_batched_nms_is_nms_per_category_sorted_by_score(seed):
    rng = np.random.default_rng(seed)
    boxes = random_boxes(rng, 50, size=15.0)
    scores = rng.uniform(size=50)
    idxs = rng.integers(0, 4, size=50)
    kept = []
    for c in range(4):
        members = [i for i in range(50) if idxs[i] == c]
        kept += [members[k] for k in reference_nms(boxes[members].tolist(), scores[members].tolist(), 0.4)]
    kept = sorted(sorted(kept), key=lambda i: -scores[i])
    ours = ops.batched_nms(ember.tensor(boxes), ember.tensor(scores), ember.tensor(idxs), 0.4)
    assert ours.tolist() == kept
    # one category: the same as nms
    same = ops.batched_nms(ember.tensor(boxes), ember.tensor(scores), ember.zeros(50, dtype=ember.int64), 0.4)
    assert same.tolist() == ops.nms(ember.tensor(boxes), ember.tensor(scores), 0.4).tolist()
    assert ops.batched_nms(ember.zeros((0, 4)), ember.zeros(0), ember.zeros(0, dtype=ember.int64), 0.5).shape == (0,)


# ---- RoIAlign: torchvision's Python path; RoIPool: a transcription of roi_pool_kernel.cpp ----

def roi_inputs(rng, n=2, c=3, h=9, w=11, k=7, scale=1.0):
    x = rng.standard_normal((n, c, h, w))
    boxes = random_boxes(rng, k, size=min(h, w) / scale) - 1.0 / scale   # some start outside the map
    boxes[0] = [-3.0, -2.0, (w + 3) / scale, (h + 2) / scale]                 # larger than the map
    boxes[1] = [2.0, 2.0, 2.0, 2.0]                                           # a point
    ids = rng.integers(0, n, size=(k, 1)).astype(np.float64)
    return x, np.concatenate([ids, boxes], axis=1)


def reference_roi_align(x, rois, ph, pw, scale, sampling_ratio, aligned):
    """roi_align_kernel.cpp, loop by loop, in float64."""
    n, c, h, w = x.shape
    out = np.zeros((len(rois), c, ph, pw))
    off = 0.5 if aligned else 0.0

    def sample(b, ch, y, xx):
        if y < -1.0 or y > h or xx < -1.0 or xx > w:
            return 0.0
        y, xx = max(y, 0.0), max(xx, 0.0)
        yl, xl = int(y), int(xx)
        if yl >= h - 1:
            yh = yl = h - 1
            y = float(yl)
        else:
            yh = yl + 1
        if xl >= w - 1:
            xh = xl = w - 1
            xx = float(xl)
        else:
            xh = xl + 1
        ly, lx = y - yl, xx - xl
        hy, hx = 1 - ly, 1 - lx
        return (hy * hx * x[b, ch, yl, xl] + hy * lx * x[b, ch, yl, xh] + ly * hx * x[b, ch, yh, xl]
                + ly * lx * x[b, ch, yh, xh])
    for k, r in enumerate(rois):
        b = int(r[0])
        sw, sh = r[1] * scale - off, r[2] * scale - off
        rw, rh = r[3] * scale - off - sw, r[4] * scale - off - sh
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / ph, rw / pw
        gh = sampling_ratio if sampling_ratio > 0 else int(math.ceil(rh / ph))
        gw = sampling_ratio if sampling_ratio > 0 else int(math.ceil(rw / pw))
        count = max(gh * gw, 1)
        for ch in range(c):
            for i in range(ph):
                for j in range(pw):
                    total = 0.0
                    for iy in range(gh):
                        y = sh + i * bh + (iy + 0.5) * bh / gh
                        for ix in range(gw):
                            total += sample(b, ch, y, sw + j * bw + (ix + 0.5) * bw / gw)
                    out[k, ch, i, j] = total / count
    return out


@pytest.mark.parametrize("sampling_ratio", [-1, 2])
@pytest.mark.parametrize("aligned", [False, True])
def test_roi_align_matches_the_kernel_loop_outside_the_map(sampling_ratio, aligned):
    # torchvision's C++ kernel zeroes samples more than one pixel outside the map; its Python fallback does not
    rng = np.random.default_rng(6)
    x, rois = roi_inputs(rng, scale=0.5)
    rois[2, 1:] = [-9.0, -7.0, 30.0, 31.0]
    rois[3, 1:] = [-8.0, 4.0, -3.0, 9.0]   # wholly left of the map
    ours = ops.roi_align(ember.tensor(x), ember.tensor(rois), (3, 2), 0.5, sampling_ratio, aligned)
    np.testing.assert_allclose(ours.numpy(), reference_roi_align(x, rois, 3, 2, 0.5, sampling_ratio, aligned),
                               rtol=1e-12, atol=1e-13)


@needs_tv
@pytest.mark.parametrize("output_size", [(2, 2), (3, 5), 1])
@pytest.mark.parametrize("sampling_ratio", [-1, 1, 2])
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_roi_align_like_torchvision(output_size, sampling_ratio, aligned, scale):
    rng = np.random.default_rng(7)
    x, rois = roi_inputs(rng, scale=scale)
    h, w = x.shape[-2:]
    # inside the map: torchvision's Python path agrees with its kernel there (it takes at most H x W samples per
    # bin and keeps samples outside the map), the kernel loop above checks the rest
    rois[:, [1, 3]] = rois[:, [1, 3]].clip(0, w / scale)
    rois[:, [2, 4]] = rois[:, [2, 4]].clip(0, h / scale)
    if aligned:  # an empty aligned box has no samples: the kernel gives 0, the Python path NaN gradients
        rois = rois[(rois[:, 3] > rois[:, 1]) & (rois[:, 4] > rois[:, 2])]
    ex, tx = both(x, True)
    ours = ops.roi_align(ex, ember.tensor(rois), output_size, scale, sampling_ratio, aligned)
    theirs = tv_ops.roi_align(tx, torch.tensor(rois), output_size, scale, sampling_ratio, aligned)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(theirs.shape)
    (ours * ember.tensor(g)).sum().backward()
    (theirs * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


@needs_tv
def test_roi_align_box_lists_module_and_float32():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 4, 10, 10)).astype(np.float32)
    lists = [random_boxes(rng, k, 10.0).clip(0, 10).astype(np.float32) for k in (3, 2)]
    ours = ops.RoIAlign((3, 3), 1.0, 2)(ember.tensor(x), [ember.tensor(b) for b in lists])
    theirs = tv_ops.RoIAlign((3, 3), 1.0, 2)(torch.tensor(x), [torch.tensor(b) for b in lists])
    assert ours.dtype == ember.float32
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)
    assert repr(ops.RoIAlign((3, 3), 1.0, 2)) == repr(tv_ops.RoIAlign((3, 3), 1.0, 2))
    assert ops.roi_align(ember.tensor(x), ember.zeros((0, 5)), 2).shape == (0, 4, 2, 2)
    with pytest.raises(AssertionError, match="Tensor\\[K, 5\\]"):
        ops.roi_align(ember.tensor(x), ember.zeros((3, 4)), 2)


def reference_roi_pool(x, rois, ph, pw, scale):
    n, c, h, w = x.shape
    out = np.zeros((len(rois), c, ph, pw))
    arg = np.full((len(rois), c, ph, pw), -1)

    def rnd(v):  # std::round: half away from zero
        return int(math.floor(v + 0.5)) if v >= 0 else -int(math.floor(-v + 0.5))
    for k, r in enumerate(rois):
        b = int(r[0])
        sw, sh, ew, eh = rnd(r[1] * scale), rnd(r[2] * scale), rnd(r[3] * scale), rnd(r[4] * scale)
        rh, rw = max(eh - sh + 1, 1), max(ew - sw + 1, 1)
        bh, bw = rh / ph, rw / pw
        for i in range(ph):
            for j in range(pw):
                hs = min(max(int(math.floor(i * bh)) + sh, 0), h)
                he = min(max(int(math.ceil((i + 1) * bh)) + sh, 0), h)
                ws = min(max(int(math.floor(j * bw)) + sw, 0), w)
                we = min(max(int(math.ceil((j + 1) * bw)) + sw, 0), w)
                empty = he <= hs or we <= ws
                for ch in range(c):
                    best, where = (0.0 if empty else -np.finfo(np.float64).max), -1
                    for yy in range(hs, he):
                        for xx in range(ws, we):
                            if x[b, ch, yy, xx] > best:
                                best, where = x[b, ch, yy, xx], (b, ch, yy, xx)
                    out[k, ch, i, j] = best
                    arg[k, ch, i, j] = -1 if where == -1 else np.ravel_multi_index(where, x.shape)
    return out, arg


@pytest.mark.parametrize("output_size", [(2, 2), (3, 4)])
@pytest.mark.parametrize("scale", [1.0, 0.5, 0.25])
def test_roi_pool_matches_the_kernel_loop(output_size, scale):
    rng = np.random.default_rng(9)
    x, rois = roi_inputs(rng, scale=scale)
    x[0, 0, 3, 3:6] = 7.0  # a tie: the first in row-major order takes the gradient
    ex = ember.tensor(x, requires_grad=True)
    ours = ops.roi_pool(ex, ember.tensor(rois), output_size, scale)
    ref, arg = reference_roi_pool(x, rois, *output_size, scale)
    np.testing.assert_array_equal(ours.detach().numpy(), ref)
    g = rng.standard_normal(ref.shape)
    (ours * ember.tensor(g)).sum().backward()
    expected = np.zeros(x.size)
    np.add.at(expected, arg[arg >= 0], g[arg >= 0])
    np.testing.assert_allclose(ex.grad.numpy().reshape(-1), expected, rtol=1e-12, atol=1e-12)
    module = ops.RoIPool(output_size, scale)
    np.testing.assert_array_equal(module(ember.tensor(x), ember.tensor(rois)).numpy(), ref)


# ---- FeaturePyramidNetwork, MultiScaleRoIAlign, FrozenBatchNorm2d ----

def load_torch_state(ember_module, torch_module):
    ember_module.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in torch_module.state_dict().items()},
                                 strict=True)


@needs_tv
@pytest.mark.parametrize("extra", [None, "maxpool", "p6p7"])
def test_feature_pyramid_network_like_torchvision(extra):
    rng = np.random.default_rng(10)
    chans = [4, 6, 8]
    blocks = {None: (None, None), "maxpool": (ops.feature_pyramid_network.LastLevelMaxPool(),
                                              tv_ops.feature_pyramid_network.LastLevelMaxPool()),
              "p6p7": (ops.feature_pyramid_network.LastLevelP6P7(8, 5),
                       tv_ops.feature_pyramid_network.LastLevelP6P7(8, 5))}[extra]
    theirs_m = tv_ops.FeaturePyramidNetwork(chans, 5, extra_blocks=blocks[1]).double()
    ours_m = ops.FeaturePyramidNetwork(chans, 5, extra_blocks=blocks[0]).double()
    assert list(ours_m.state_dict()) == list(theirs_m.state_dict())
    load_torch_state(ours_m, theirs_m)
    feats = OrderedDict((name, rng.standard_normal((2, c, s, s + 1))) for name, c, s in
                        zip(["c2", "c3", "c5"], chans, [16, 7, 4]))
    ours_in = OrderedDict((k, ember.tensor(v, requires_grad=True)) for k, v in feats.items())
    theirs_in = OrderedDict((k, torch.tensor(v, requires_grad=True)) for k, v in feats.items())
    ours, theirs = ours_m(ours_in), theirs_m(theirs_in)
    assert list(ours) == list(theirs)
    for k in theirs:
        np.testing.assert_allclose(ours[k].detach().numpy(), theirs[k].detach().numpy(), rtol=1e-11, atol=1e-12)
    sum(v.sum() * (i + 1) for i, v in enumerate(ours.values())).backward()
    sum(v.sum() * (i + 1) for i, v in enumerate(theirs.values())).backward()
    for k in feats:
        np.testing.assert_allclose(ours_in[k].grad.numpy(), theirs_in[k].grad.numpy(), rtol=1e-10, atol=1e-11)
    for (name, p), (_, q) in zip(ours_m.named_parameters(), theirs_m.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-11, err_msg=name)


@needs_tv
@pytest.mark.parametrize("names", [["f0", "f1", "f2"], ["f1"]])
def test_multiscale_roi_align_like_torchvision(names):
    rng = np.random.default_rng(11)
    feats = OrderedDict(f0=rng.standard_normal((2, 3, 32, 32)), f1=rng.standard_normal((2, 3, 16, 16)),
                        f2=rng.standard_normal((2, 3, 8, 8)), other=rng.standard_normal((2, 3, 4, 4)))
    boxes = [random_boxes(rng, k, 96.0, min_side=2.0) for k in (5, 4)]  # inside the images (see roi_align)
    boxes[0][0] = [0.0, 0.0, 120.0, 127.0]  # a large box goes to the coarsest level
    shapes = [(128, 128), (120, 100)]
    ours_m, theirs_m = ops.MultiScaleRoIAlign(names, (3, 2), 2), tv_ops.MultiScaleRoIAlign(names, (3, 2), 2)
    ours_in = OrderedDict((k, ember.tensor(v, requires_grad=True)) for k, v in feats.items())
    theirs_in = OrderedDict((k, torch.tensor(v, requires_grad=True)) for k, v in feats.items())
    ours = ours_m(ours_in, [ember.tensor(b) for b in boxes], shapes)
    theirs = theirs_m(theirs_in, [torch.tensor(b) for b in boxes], shapes)
    assert ours_m.scales == theirs_m.scales
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(theirs.shape)
    (ours * ember.tensor(g)).sum().backward()
    (theirs * torch.tensor(g)).sum().backward()
    for k in names:
        np.testing.assert_allclose(ours_in[k].grad.numpy(), theirs_in[k].grad.numpy(), rtol=1e-10, atol=1e-12)
    assert repr(ours_m) == repr(theirs_m)


@needs_tv
def test_frozen_batch_norm_like_torchvision():
    rng = np.random.default_rng(12)
    theirs_m = tv_ops.misc.FrozenBatchNorm2d(4).double()
    for name in ("weight", "bias", "running_mean"):
        getattr(theirs_m, name).copy_(torch.tensor(rng.standard_normal(4)))
    theirs_m.running_var.copy_(torch.tensor(rng.uniform(0.5, 2.0, 4)))
    ours_m = ops.FrozenBatchNorm2d(4).double()
    state = {k: ember.tensor(v.numpy()) for k, v in theirs_m.state_dict().items()}
    state["num_batches_tracked"] = ember.tensor(3)  # a BatchNorm2d checkpoint loads too
    ours_m.load_state_dict(state)
    assert list(ours_m.parameters()) == []
    x = rng.standard_normal((2, 4, 3, 3))
    np.testing.assert_allclose(ours_m(ember.tensor(x)).numpy(), theirs_m(torch.tensor(x)).numpy(), rtol=1e-13)
    assert repr(ours_m) == repr(theirs_m)


def test_detection_ops_run_on_the_standin_cuda_device():
    from ember.testing import standin_cuda

    rng = np.random.default_rng(13)
    x, rois = roi_inputs(rng)
    boxes, scores = random_boxes(rng, 20), rng.uniform(size=20)
    with standin_cuda():
        dev = "cuda"
        keep = ops.nms(ember.tensor(boxes, device=dev), ember.tensor(scores, device=dev), 0.5)
        assert keep.device.type == "cuda"
        assert keep.cpu().tolist() == reference_nms(boxes.tolist(), scores.tolist(), 0.5)
        xa = ember.tensor(x, device=dev, requires_grad=True)
        out = ops.roi_align(xa, ember.tensor(rois, device=dev), 2, 1.0, 2)
        cpu = ops.roi_align(ember.tensor(x), ember.tensor(rois), 2, 1.0, 2)
        np.testing.assert_allclose(out.cpu().detach().numpy(), cpu.numpy(), rtol=1e-12)
        out.sum().backward()
        assert xa.grad.device.type == "cuda"
        pooled = ops.roi_pool(ember.tensor(x, device=dev), ember.tensor(rois, device=dev), 2)
        np.testing.assert_array_equal(pooled.cpu().numpy(), reference_roi_pool(x, rois, 2, 2, 1.0)[0])
        iou = ops.box_iou(ember.tensor(boxes, device=dev), ember.tensor(boxes, device=dev))
        assert iou.device.type == "cuda"


@needs_tv
def test_intermediate_layer_getter_like_torchvision():
    import ember.vision as ev
    from ember.vision.models._utils import IntermediateLayerGetter

    tv_models = import_torchvision().models
    torch.manual_seed(0)
    theirs_backbone = tv_models.resnet18(norm_layer=tv_ops.misc.FrozenBatchNorm2d).double()
    ours_backbone = ev.models.resnet18(norm_layer=ops.FrozenBatchNorm2d).double()
    layers = {"layer1": "0", "layer3": "1"}
    theirs = tv_models._utils.IntermediateLayerGetter(theirs_backbone, return_layers=layers)
    ours = IntermediateLayerGetter(ours_backbone, return_layers=layers)
    assert list(ours.state_dict()) == list(theirs.state_dict())  # children after layer3 are dropped
    load_torch_state(ours, theirs)
    x = np.random.default_rng(14).standard_normal((1, 3, 32, 32))
    out_t, out_e = theirs(torch.tensor(x)), ours(ember.tensor(x))
    assert list(out_e) == list(out_t)
    for k in out_t:
        np.testing.assert_allclose(out_e[k].detach().numpy(), out_t[k].detach().numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="return_layers are not present in model"):
        IntermediateLayerGetter(ours_backbone, return_layers={"nope": "0"})
