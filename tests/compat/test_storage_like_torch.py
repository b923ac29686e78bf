"""Storages as PyTorch's: ``untyped_storage()`` shared by every view of a tensor (same object, data_ptr and
_cdata), sizes in bytes, typed storages sized in elements with torch's deprecation warning, byte contents,
writes through a storage, ``is_set_to``, the legacy ``FloatStorage`` classes."""
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def test_untyped_storage_shared_by_views_like_torch():
    for lib in (ember, torch):
        x = lib.arange(6.0)
        u = x.untyped_storage()
        v = x[2:].view(2, 2).t().untyped_storage()
        assert (u.nbytes(), u.size(), len(u), u.element_size()) == (24, 24, 24, 1)
        assert v is u and v.data_ptr() == u.data_ptr() == x.data_ptr() and v._cdata == u._cdata
        assert x.expand(3, 6).untyped_storage().nbytes() == 24
        assert lib.tensor([]).untyped_storage().nbytes() == 0
        assert lib.is_storage(u) and not lib.is_storage(x)


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
def test_storage_bytes_match_torch():
    a = np.array([1.0, -2.5, 3.25], dtype=np.float32)
    assert ember.tensor(a).untyped_storage().tolist() == torch.tensor(a).untyped_storage().tolist()
    assert ember.tensor(a)[1:].storage().tolist() == torch.tensor(a)[1:].storage().tolist()


def test_typed_storage_like_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for lib in (ember, torch):
            x = lib.arange(6.0)
            s = x[2:].storage()
            assert (s.size(), len(s), s.nbytes(), s.element_size(), s[2]) == (6, 6, 24, 4, 2.0)
            assert s.data_ptr() == x.data_ptr() and str(s.dtype).endswith("float32")
            assert lib.FloatStorage([1, 2]).tolist() == [1.0, 2.0] and lib.FloatStorage(3).size() == 3
            assert lib.LongStorage(2).element_size() == 8
            assert issubclass(lib.FloatStorage, lib.TypedStorage) if lib is ember else True


def test_typed_storage_warns_once_like_torch():
    import ember.storage as storage

    storage._warned_typed = False
    with pytest.warns(UserWarning, match="TypedStorage is deprecated"):
        ember.ones(2).storage()


def test_writes_through_a_storage_reach_the_tensor():
    x = ember.zeros(2)
    u = x.untyped_storage()
    u[3] = 63  # the high byte of float32 1.875 = 0x3FF00000: little-endian bytes 0, 0, 240, 63
    u[2] = 240
    assert x.tolist() == [1.875, 0.0]
    x.untyped_storage().fill_(0)
    assert x.tolist() == [0.0, 0.0]


def test_is_set_to_like_torch():
    for lib in (ember, torch):
        x = lib.arange(6.0)
        assert x.is_set_to(x) and not x[1:].is_set_to(x) and not x.view(2, 3).is_set_to(x)
