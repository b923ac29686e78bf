"""``torch.__version__`` / ``torchvision.__version__`` as programs read them: parsed and compared as versions.

denoising-diffusion-pytorch asserts ``version.parse(torch.__version__) >= version.parse('2.0.0')`` before
using flash attention; ember reported ``0.1.0`` (and ``ember.vision`` a string no parser accepts).
"""
from __future__ import annotations

import pytest

import ember
import ember.vision
from ember.torch_version import TorchVersion

torch = pytest.importorskip("torch")
TorchsVersion = pytest.importorskip("torch.torch_version").TorchVersion

OTHERS = ["2.0", "2.13", "2.13.0", "2.13.1", "2.14.0a0", "2.13.0rc1", "2.13.0.dev20260101", "1.10.0a", "2.13.0.post1",
          (2, 13), (2, 13, 0), (2, 14), (1, 10), [2, 12, 9]]


@pytest.mark.parametrize("other", OTHERS, ids=str)
@pytest.mark.parametrize("mine", ["2.13.0+cpu", "2.13.0", "2.1.0a0+git123", "1.10.0a"])
def test_comparisons_as_torchs_torch_version(mine: str, other) -> None:
    a, b = TorchVersion(mine), TorchsVersion(mine)
    assert [a < other, a <= other, a == other, a >= other, a > other] == \
        [b < other, b <= other, b == other, b >= other, b > other]


def test_reported_versions_parse_and_pass_programs_gates() -> None:
    packaging_version = pytest.importorskip("packaging.version")
    for v in (ember.__version__, ember.vision.__version__):
        assert isinstance(v, str) and isinstance(v, TorchVersion)
        packaging_version.parse(v)  # no InvalidVersion
    assert packaging_version.parse(ember.__version__) >= packaging_version.parse("2.0.0")
    assert ember.__version__ >= "1.10" and ember.__version__ >= (2, 1)
    assert int(ember.__version__.split(".")[0]) == 2
    assert ember.__version__.split("+")[0] == torch.__version__.split("+")[0]  # the API level tested against
    assert ember.version.__version__ is ember.__version__
    assert ember.__version__.endswith("+ember." + ember.version.ember_version)
    assert ember.vision.__version__ >= "0.13"


def test_invalid_versions_are_refused() -> None:
    with pytest.raises(ValueError):
        TorchVersion("2.13.0") < "not a version"  # noqa: B015
    assert TorchVersion("2.13.0") != "not a version"
