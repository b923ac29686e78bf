"""torchvision.io on ember (PNG/JPEG round trips, modes, Pillow as the independent decoder, errors, atomic
writes), the drawing utilities against torchvision's own code on real torch (pixel for pixel), and FakeData."""
import os

import numpy as np
import pytest

import ember

PIL = pytest.importorskip("PIL.Image")
io = pytest.importorskip("ember.vision.io")


@pytest.fixture()
def rgb() -> np.ndarray:
    return (np.random.default_rng(0).random((5, 7, 3)) * 255).astype(np.uint8)


def test_png_and_jpeg_read_equal_pillow(tmp_path, rgb) -> None:
    PIL.fromarray(rgb).save(tmp_path / "a.png")
    PIL.fromarray(rgb).save(tmp_path / "a.jpg", quality=90)
    PIL.fromarray(np.dstack([rgb, rgb[:, :, 0]]), "RGBA").save(tmp_path / "b.png")
    png = io.read_image(str(tmp_path / "a.png"))
    assert png.dtype == ember.uint8 and tuple(png.shape) == (3, 5, 7)
    np.testing.assert_array_equal(png.numpy().transpose(1, 2, 0), rgb)
    jpg = io.read_image(str(tmp_path / "a.jpg"))
    np.testing.assert_array_equal(jpg.numpy().transpose(1, 2, 0), np.asarray(PIL.open(tmp_path / "a.jpg")))
    gray = io.read_image(str(tmp_path / "a.png"), io.ImageReadMode.GRAY)
    np.testing.assert_array_equal(gray.numpy()[0], np.asarray(PIL.fromarray(rgb).convert("L")))
    assert tuple(io.read_image(str(tmp_path / "b.png")).shape) == (4, 5, 7)
    assert tuple(io.read_image(str(tmp_path / "b.png"), mode=io.ImageReadMode.RGB).shape) == (3, 5, 7)
    assert tuple(io.decode_image(str(tmp_path / "a.png")).shape) == (3, 5, 7)


def test_encode_write_roundtrip_and_errors(tmp_path, rgb) -> None:
    image = ember.tensor(rgb.transpose(2, 0, 1).copy())
    io.write_png(image, str(tmp_path / "c.png"))
    np.testing.assert_array_equal(io.read_image(str(tmp_path / "c.png")).numpy(), image.numpy())
    encoded = io.encode_jpeg(image, quality=95)
    assert encoded.dtype == ember.uint8 and encoded.ndim == 1
    import io as stdlib_io

    reference = np.asarray(PIL.open(stdlib_io.BytesIO(encoded.numpy().tobytes()))).transpose(2, 0, 1)
    np.testing.assert_array_equal(io.decode_jpeg(encoded).numpy(), reference)  # lossy: compared with Pillow's decode
    smooth = ember.tensor(np.broadcast_to(np.arange(0, 240, 10, dtype=np.uint8), (3, 16, 24)).copy())
    assert np.abs(io.decode_jpeg(io.encode_jpeg(smooth, quality=95)).numpy().astype(int) - smooth.numpy()).max() < 8
    data = io.read_file(str(tmp_path / "c.png"))
    io.write_file(str(tmp_path / "copy.png"), data)
    assert (tmp_path / "copy.png").read_bytes() == (tmp_path / "c.png").read_bytes()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    with pytest.raises(RuntimeError, match="is a JPEG image, not PNG"):
        io.decode_png(encoded)
    with pytest.raises(RuntimeError, match="expected a 1-D uint8 tensor of encoded bytes"):
        io.decode_image(ember.ones(3))
    with pytest.raises(RuntimeError, match="could not decode"):
        io.decode_image(ember.tensor([1, 2, 3], dtype=ember.uint8))
    with pytest.raises(NotImplementedError, match="reads no video"):
        io.read_video("clip.mp4")


def _torchvision():
    pytest.importorskip("torch")
    try:
        from torchvision_ref import import_torchvision
        return import_torchvision()
    except ImportError:
        pytest.skip("torchvision is not installed")


@pytest.mark.parametrize("kwargs", [
    {}, {"colors": "red", "width": 3}, {"labels": ["a", "bb", "cat"], "fill": True},
    {"labels": ["x", "y", "z"], "fill_labels": True, "colors": ["blue", (0, 255, 0), "#ff00ff"]},
])
def test_draw_bounding_boxes_pixels_equal_torchvision(kwargs) -> None:
    tv = _torchvision()
    import torch

    rng = np.random.default_rng(1)
    img = (rng.random((3, 40, 50)) * 255).astype(np.uint8)
    boxes = np.array([[2, 3, 20, 25], [10.7, 5.2, 45.9, 38.1], [0, 0, 49, 39]], dtype=np.float32)
    theirs = tv.utils.draw_bounding_boxes(torch.tensor(img), torch.tensor(boxes), **kwargs).numpy()
    ours = ember.vision.utils.draw_bounding_boxes(ember.tensor(img), ember.tensor(boxes), **kwargs).numpy()
    np.testing.assert_array_equal(ours, theirs)
    fimg = rng.random((3, 40, 50)).astype(np.float32)
    np.testing.assert_allclose(
        ember.vision.utils.draw_bounding_boxes(ember.tensor(fimg), ember.tensor(boxes), **kwargs).numpy(),
        tv.utils.draw_bounding_boxes(torch.tensor(fimg), torch.tensor(boxes), **kwargs).numpy(), atol=1e-6)


def test_masks_keypoints_and_flow_equal_torchvision() -> None:
    tv = _torchvision()
    import torch

    rng = np.random.default_rng(2)
    img = (rng.random((3, 30, 20)) * 255).astype(np.uint8)
    masks = rng.random((3, 30, 20)) > 0.6
    for image in (img, img.astype(np.float32) / 255):
        for kwargs in ({}, {"alpha": 0.3, "colors": ["red", "green", (1, 2, 3)]}):
            np.testing.assert_allclose(
                ember.vision.utils.draw_segmentation_masks(ember.tensor(image), ember.tensor(masks), **kwargs).numpy(),
                tv.utils.draw_segmentation_masks(torch.tensor(image), torch.tensor(masks), **kwargs).numpy(),
                atol=1e-6)
    keypoints, visible = rng.random((2, 5, 2)) * 20, rng.random((2, 5)) > 0.3
    kwargs = {"connectivity": [(0, 1), (1, 2), (3, 4)], "colors": "red", "radius": 3, "width": 2}
    np.testing.assert_array_equal(
        ember.vision.utils.draw_keypoints(ember.tensor(img), ember.tensor(keypoints), visibility=ember.tensor(visible),
                                          **kwargs).numpy(),
        tv.utils.draw_keypoints(torch.tensor(img), torch.tensor(keypoints), visibility=torch.tensor(visible),
                                **kwargs).numpy())
    flow = rng.standard_normal((2, 2, 6, 7)).astype(np.float32)
    np.testing.assert_array_equal(ember.vision.utils.flow_to_image(ember.tensor(flow)).numpy(),
                                  tv.utils.flow_to_image(torch.tensor(flow)).numpy())


def test_fake_data_is_reproducible_per_index_and_leaves_global_rng_alone() -> None:
    import ember.vision.transforms as T
    from ember.vision.datasets import FakeData

    ember.manual_seed(5)
    before = ember.randn(3)
    ember.manual_seed(5)
    ds = FakeData(size=4, image_size=(3, 8, 8), num_classes=3, transform=T.ToTensor())
    first, again = ds[1], ds[1]
    assert ember.equal(first[0], again[0]) and first[1] == again[1] and 0 <= first[1] < 3
    assert tuple(first[0].shape) == (3, 8, 8) and len(ds) == 4
    assert ember.equal(ember.randn(3), before)
    with pytest.raises(IndexError, match="index out of range"):
        ds[4]
