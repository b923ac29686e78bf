"""torchvision's top-level functions: ``_is_tracing`` (DETR's ``nested_tensor_from_tensor_list`` asks it), the
image/video backend switches and ``disable_beta_transforms_warning``; compared with torchvision 0.28."""
import pytest

import ember
import ember.vision as vision

from torchvision_ref import import_torchvision

pytest.importorskip("torch")
try:
    torchvision = import_torchvision()
except ImportError:
    pytest.skip("torchvision is not installed", allow_module_level=True)


def test_same_names_as_torchvision():
    for name in ("_is_tracing", "set_image_backend", "get_image_backend", "set_video_backend", "get_video_backend",
                 "disable_beta_transforms_warning"):
        assert callable(getattr(torchvision, name)) and callable(getattr(vision, name)), name


def test_backend_switches_like_torchvision():
    assert vision.get_image_backend() == torchvision.get_image_backend() == "PIL"
    assert vision.get_video_backend() == torchvision.get_video_backend() == "pyav"
    for lib in (vision, torchvision):
        with pytest.raises(ValueError, match="Options are 'PIL' and 'accimage'"):
            lib.set_image_backend("opencv")
        lib.set_image_backend("accimage")
        assert lib.get_image_backend() == "accimage"
        lib.set_image_backend("PIL")
        lib.set_video_backend("video_reader")  # ignored by torchvision 0.28
        assert lib.get_video_backend() == "pyav"
        assert lib.disable_beta_transforms_warning() is None


def test_is_tracing_is_true_only_inside_a_trace():
    assert vision._is_tracing() is False
    seen = []

    def f(x):
        seen.append(vision._is_tracing())
        return x * 2

    ember.jit.trace(f, (ember.ones(3),))
    assert True in seen
    assert vision._is_tracing() is False
