"""Complex tensors in checkpoints: torch.save -> ember.load and ember.save -> torch.load keep complex64/complex128
values exactly (torch's ComplexFloatStorage / ComplexDoubleStorage)."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def test_complex_tensors_round_trip_with_torch(tmp_path) -> None:
    a = np.array([[1 + 2j, 3 - 4j], [np.inf + 0j, complex(0, np.nan)]], np.complex64)
    b = (np.arange(6) * (0.5 - 1j)).astype(np.complex128).reshape(2, 3)[:, ::2]  # a strided view
    torch.save({"a": torch.tensor(a), "b": torch.tensor(b)}, tmp_path / "t.pt")
    got = ember.load(tmp_path / "t.pt")
    assert got["a"].dtype is ember.complex64 and got["b"].dtype is ember.complex128
    np.testing.assert_array_equal(got["a"].numpy(), a)
    np.testing.assert_array_equal(got["b"].numpy(), b)
    ember.save({"a": ember.tensor(a), "b": ember.tensor(b).mT}, tmp_path / "e.pt")
    back = torch.load(tmp_path / "e.pt")
    assert back["a"].dtype == torch.complex64 and back["b"].dtype == torch.complex128
    np.testing.assert_array_equal(back["a"].numpy(), a)
    np.testing.assert_array_equal(back["b"].numpy(), b.T)
