"""Run torchvision's detection models as a reference next to ember's, on the same weights.

torchvision's ``nms`` needs its C++ library, which does not load next to torch 2.13's CPU wheel
(torchvision_ref.py); ``reference_ops_installed`` replaces ``torchvision.ops.boxes.nms`` by the greedy loop of
torchvision's CPU kernel (written here in NumPy, float64), so ``batched_nms`` and every detector run.
``roi_align`` has a pure-Python path in torchvision, but it is not its kernel: it keeps samples beyond the map's
far edge (the kernel zeroes samples more than one pixel outside; a proposal thinner than a feature pixel on the
image's bottom edge reaches there) and differs from it by ~1e-6 in float64 elsewhere. ``reference_roi_align``
below is the kernel (roi_align_kernel.cpp) in torch: per RoI, the bilinear weights of every sample as two
matrices built from the box (boxes get no gradient, as with the kernel), applied to the input by torch
(differentiable in the input). test_vision_detection_models_vs_torchvision.py checks it against the loop-by-loop
transcription of the kernel in test_vision_detection_ops_vs_torchvision.py.

``compare_detector`` checks one pair of models: identical state_dict keys and shapes, strict loading both ways,
eval detections equal (float64), the training-mode loss dict equal and every parameter's gradient of the summed
losses equal (float64). The samplers draw randomly only when there are more candidates than the batch size, so
the tests give them batch sizes larger than the number of anchors and proposals: then both pick everything.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

import numpy as np

import ember

from torchvision_ref import import_torchvision


def reference_nms(boxes: Any, scores: Any, iou_threshold: float) -> Any:
    """torchvision's CPU NMS kernel, loop by loop (stable descending sort, suppress IoU > threshold)."""
    import torch

    b = boxes.detach().cpu().double().numpy()
    s = scores.detach().cpu().double().numpy()
    order = sorted(range(len(s)), key=lambda i: -s[i])
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    suppressed = np.zeros(len(s), dtype=bool)
    keep = []
    for a, i in enumerate(order):
        if suppressed[i]:
            continue
        keep.append(i)
        for j in order[a + 1:]:
            if suppressed[j]:
                continue
            w = max(0.0, min(b[i, 2], b[j, 2]) - max(b[i, 0], b[j, 0]))
            h = max(0.0, min(b[i, 3], b[j, 3]) - max(b[i, 1], b[j, 1]))
            inter = w * h
            if inter / (area[i] + area[j] - inter) > iou_threshold:
                suppressed[j] = True
    return torch.tensor(keep, dtype=torch.int64)


def _axis_weights(start: float, size: float, pooled: int, grid: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """[pooled, length] summed bilinear weights of the ``grid`` samples of each bin along one axis, and for each
    bin which samples fall inside [-1, length] (the kernel's bounds); all in float64 as the kernel's arithmetic."""
    weights = np.zeros((pooled, length))
    bin_size = size / pooled
    for p in range(pooled):
        for g in range(grid):
            c = start + p * bin_size + (g + 0.5) * bin_size / grid
            if c < -1.0 or c > length:
                continue
            c = max(c, 0.0)
            low = int(c)
            if low >= length - 1:
                low = high = length - 1
                c = float(low)
            else:
                high = low + 1
            frac = c - low
            weights[p, low] += 1.0 - frac
            weights[p, high] += frac
    return weights


def reference_roi_align(input: Any, boxes: Any, output_size: Any, spatial_scale: float = 1.0,
                        sampling_ratio: int = -1, aligned: bool = False) -> Any:
    """torchvision's RoIAlign kernel; ``boxes`` a [K, 5] tensor or a list of [k_i, 4] tensors."""
    import torch

    if not isinstance(boxes, torch.Tensor):
        boxes = torch.cat([torch.cat([torch.full_like(b[:, :1], i), b], dim=1) for i, b in enumerate(boxes)], dim=0)
    ph, pw = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    _, c, h, w = input.shape
    rois = boxes.detach().cpu().double().numpy()
    off = 0.5 if aligned else 0.0
    outs = []
    for r in rois:
        sw, sh = r[1] * spatial_scale - off, r[2] * spatial_scale - off
        rw, rh = r[3] * spatial_scale - off - sw, r[4] * spatial_scale - off - sh
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        gh = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rh / ph))
        gw = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rw / pw))
        count = max(gh * gw, 1)
        wy = torch.from_numpy(_axis_weights(sh, rh, ph, gh, h)).to(input.dtype)
        wx = torch.from_numpy(_axis_weights(sw, rw, pw, gw, w)).to(input.dtype)
        outs.append(torch.einsum("ph,chw,qw->cpq", wy, input[int(r[0])], wx) / count)
    if not outs:
        return input.new_zeros((0, c, ph, pw))
    return torch.stack(outs)


class _FunctionalWithPromotedTargets:
    """``torch.nn.functional`` whose ``binary_cross_entropy_with_logits`` first casts the target to the input's
    dtype. torch computes that loss partly in place in the *target's* dtype, so the RPN (float32 labels) gives a
    float32 objectness loss, and float32 gradients, from a float64 model; ember promotes as for any binary op.
    The float64 comparison is about the mathematics, so the reference gets float64 targets."""

    def __getattr__(self, name: str) -> Any:
        import torch.nn.functional

        return getattr(torch.nn.functional, name)

    @staticmethod
    def binary_cross_entropy_with_logits(input: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
        import torch.nn.functional

        return torch.nn.functional.binary_cross_entropy_with_logits(input, target.to(input.dtype), *args, **kwargs)


def reference_ops_installed(tv: Any) -> Any:
    """A context manager: torchvision's detection code uses the reference ``nms`` / ``roi_align`` (and float64
    BCE targets) inside it; everything is restored on exit, so other tests see torchvision unchanged."""
    import contextlib

    patches = [(tv.ops.boxes, "nms", reference_nms), (tv.ops, "nms", reference_nms),
               (tv.ops.poolers, "roi_align", reference_roi_align),
               (tv.models.detection.roi_heads, "roi_align", reference_roi_align),
               (tv.models.detection.rpn, "F", _FunctionalWithPromotedTargets())]

    @contextlib.contextmanager
    def installed() -> Any:
        saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
        try:
            for owner, name, value in patches:
                setattr(owner, name, value)
            yield tv
        finally:
            for owner, name, value in saved:
                setattr(owner, name, value)

    return installed()


def torchvision_detection() -> Any:
    return import_torchvision()


def randomize_detector_(model: Any, seed: int = 0) -> Any:
    """Non-trivial weights everywhere (the detectors' heads start at N(0, 0.01)): scores then spread out and
    eval differs from train; batch-norm statistics random, as in torchvision_ref.randomize_."""
    import torch
    from torch import nn

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                fan_in = m.weight[0].numel()
                m.weight.copy_((torch.rand(m.weight.shape, generator=gen) * 2 - 1) * 1.7 / fan_in ** 0.5)
                if m.bias is not None:
                    m.bias.copy_((torch.rand(m.bias.shape, generator=gen) * 2 - 1) * 0.1)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)) or type(m).__name__ == "FrozenBatchNorm2d":
                m.weight.copy_(torch.rand(m.weight.shape, generator=gen) + 0.5)
                m.bias.copy_((torch.rand(m.bias.shape, generator=gen) * 2 - 1) * 0.2)
                if hasattr(m, "running_mean") and m.running_mean is not None:
                    m.running_mean.copy_((torch.rand(m.running_mean.shape, generator=gen) * 2 - 1) * 0.2)
                    m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen) * 1.5 + 0.5)
    return model


def _ember_state(state: dict, dtype: Any = None) -> "OrderedDict[str, Any]":
    out = OrderedDict()
    for k, v in state.items():
        a = v.detach().cpu().numpy().copy()
        if dtype is not None and a.dtype.kind == "f":
            a = a.astype(dtype)
        out[k] = ember.from_numpy(a)
    out._metadata = getattr(state, "_metadata", None)
    return out


def _torch_state(state: dict) -> "OrderedDict[str, Any]":
    import torch

    return OrderedDict((k, torch.from_numpy(np.array(v.detach().numpy()))) for k, v in state.items())


def close(ours: Any, theirs: Any, what: str, tol: float) -> None:
    ours = np.asarray(ours, dtype=np.float64)
    theirs = np.asarray(theirs, dtype=np.float64)
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} != {theirs.shape}"
    if theirs.size == 0:
        return
    scale = max(1.0, float(np.abs(theirs).max()))
    err = float(np.abs(ours - theirs).max())
    assert err <= tol * scale, f"{what}: max abs difference {err:.3g} (scale {scale:.3g})"


def _images(rng: np.random.Generator, sizes: list[tuple[int, int]], dtype: Any) -> list[np.ndarray]:
    return [rng.uniform(0, 1, (3, h, w)).astype(dtype) for h, w in sizes]


def _to(kind: str, targets: list[dict[str, np.ndarray]]) -> list[dict[str, Any]]:
    import torch

    make = torch.from_numpy if kind == "torch" else ember.from_numpy
    return [{k: make(np.array(v)) for k, v in t.items()} for t in targets]


def compare_detector(reference: Any, model: Any, image_sizes: list[tuple[int, int]],
                     targets: list[dict[str, np.ndarray]], min_detections: int = 1,
                     prepare: Callable[[Any, Any], None] | None = None) -> None:
    """See the module docstring. ``targets`` are NumPy dicts in the original image coordinates."""
    import torch

    randomize_detector_(reference)
    theirs = reference.state_dict()
    assert [(k, tuple(v.shape)) for k, v in model.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.items()]
    model.load_state_dict(_ember_state(theirs), strict=True)
    # and back: ember's state loads strictly into torchvision's model and gives the same tensors
    check = _torch_state(model.state_dict())
    reference.load_state_dict(check, strict=True)
    for k, v in reference.state_dict().items():
        assert torch.equal(v, theirs[k]), k
    if prepare is not None:
        prepare(reference, model)

    rng = np.random.default_rng(0)
    reference.double(), model.double()
    images = _images(rng, image_sizes, np.float64)

    # eval: the detections, in float64
    reference.eval(), model.eval()
    with torch.no_grad():
        expected = reference([torch.from_numpy(x) for x in images])
    got = model([ember.from_numpy(x) for x in images])
    assert len(got) == len(expected)
    assert sum(len(e["boxes"]) for e in expected) >= min_detections, "no detections: the comparison is vacuous"
    for i, (g, e) in enumerate(zip(got, expected)):
        assert list(g) == list(e), f"image {i}: keys {list(g)} != {list(e)}"
        for key in e:
            assert g[key].dtype.itemsize == e[key].dtype.itemsize, f"image {i} {key}: dtype"
            if e[key].dtype in (torch.int64, torch.uint8, torch.bool):
                assert g[key].tolist() == e[key].tolist(), f"image {i} {key}"
            else:
                close(g[key].detach().numpy(), e[key].numpy(), f"image {i} {key}", 1e-9)

    # training: the loss dict and the gradients, in float64
    reference.train(), model.train()
    expected_losses = reference([torch.from_numpy(x) for x in images], _to("torch", targets))
    got_losses = model([ember.from_numpy(x) for x in images], _to("ember", targets))
    assert list(got_losses) == list(expected_losses)
    for key in expected_losses:
        assert float(expected_losses[key].detach()) != 0.0 or key in ("loss_rpn_box_reg",), f"{key} is zero"
        close(got_losses[key].detach().numpy(), expected_losses[key].detach().numpy(), f"loss {key}", 1e-9)
    sum(expected_losses.values()).backward()
    sum(got_losses.values()).backward()
    ours = dict(model.named_parameters())
    compared = 0
    for name, p in reference.named_parameters():
        if p.grad is None:
            assert ours[name].grad is None or not np.any(ours[name].grad.numpy()), f"grad of {name}"
            continue
        assert ours[name].grad is not None, f"ember has no gradient for {name}"
        close(ours[name].grad.numpy(), p.grad.numpy(), f"grad of {name}", 1e-7)
        compared += 1
    assert compared > 0
