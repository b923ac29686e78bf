"""The stand-in device's arrays behave like CuPy's where bugs hide (facts from cupy/_core/core.pyx,
_routines_indexing.pyx and flags.pyx at cupy/cupy 6b6d956), and the backend interface answers for them."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import ember
from ember.backends import backend_for, get_backend, special_function
from ember.backends.standin import BACKEND, StandinArray, xp


def test_no_silent_conversion_to_numpy():
    a = xp.arange(4.0)
    for convert in (np.asarray, np.array, lambda v: np.ascontiguousarray(v), lambda v: np.float64(v) + np.zeros(4)):
        with pytest.raises(TypeError):
            convert(a)
    assert isinstance(a.get(), np.ndarray) and not isinstance(a, np.ndarray)
    np.testing.assert_array_equal(a.get(), [0.0, 1.0, 2.0, 3.0])
    # scalar reads are allowed (CuPy synchronizes): float/int/bool/item/tolist
    assert float(a[1]) == 1.0 and int(a[2]) == 2 and bool(a[3]) and a[3].item() == 3.0 and a.tolist()[3] == 3.0


def test_numpy_functions_dispatch_to_the_device_but_refuse_host_arrays():
    a = xp.arange(4.0)
    out = np.exp(a)  # __array_ufunc__: runs on the device
    assert type(out) is StandinArray
    np.testing.assert_allclose(out.get(), np.exp(np.arange(4.0)))
    assert type(np.concatenate([a, a])) is StandinArray  # __array_function__
    for mixed in (lambda: a + np.ones(4), lambda: np.ones(4) + a, lambda: xp.concatenate([a, np.ones(4)]),
                  lambda: xp.where(a > 1, a, np.zeros(4))):
        with pytest.raises(TypeError, match="Unsupported type <class 'numpy.ndarray'>"):
            mixed()
    with pytest.raises(TypeError, match="Unsupported type"):
        a[:2] = np.ones(2)  # CuPy refuses assignment from host arrays
    a[np.array([0, 1])] = 7.0  # host index arrays are fine (CuPy copies them)
    assert a.tolist() == [7.0, 7.0, 2.0, 3.0]


def test_cupy_shaped_results_and_flags():
    a = xp.ones((2, 3), dtype=np.float32)
    total = a.sum()
    assert type(total) is StandinArray and total.shape == ()  # reductions give 0-d arrays, not scalars
    assert type(a[0, 1]) is StandinArray and a[0, 1].shape == ()  # a 0-d view (CuPy), not a NumPy scalar
    a[0, 1][...] = 5.0
    assert a[0, 1].item() == 5.0
    flags = a.flags
    assert flags.c_contiguous and not flags.f_contiguous and flags.owndata
    assert not hasattr(flags, "writeable")  # CuPy's flags have no writeable
    with pytest.raises(AttributeError):
        xp.errstate  # noqa: B018  (NumPy-only names fail, as on CuPy)
    assert not isinstance(xp.add, np.ufunc)
    view = a[1:]
    assert view.base is a and a.base is None and not view.flags.owndata
    assert view.T.base is a  # a view of a view: base is the owner, the same object each time
    assert np.diagonal(xp.zeros((3, 3))).flags.c_contiguous is False


def test_pickle_and_copy_keep_the_array_on_the_device():
    a = xp.arange(3.0)
    for b in (pickle.loads(pickle.dumps(a)), copy.deepcopy(a), copy.copy(a)):
        assert type(b) is StandinArray and b.tolist() == [0.0, 1.0, 2.0] and not xp.may_share_memory(a, b)


def test_backend_methods_answer_for_device_arrays():
    backend = BACKEND
    a = xp.arange(6.0)
    assert backend.is_array(a) and not backend.is_array(np.arange(3)) and backend_for(xp) is backend
    assert backend.may_share_memory(a, a[2:]) and not backend.may_share_memory(a, xp.arange(6.0))
    assert backend.item(a[4]) == 4.0 and isinstance(backend.data_ptr(a), int)
    assert backend.is_writeable(a) and not backend.is_writeable(xp.broadcast_to(a[:1], (4,)))
    host = backend.to_numpy(a)
    assert type(host) is np.ndarray
    host[0] = 99.0
    assert a[0].item() == 0.0  # to_numpy copies
    moved = backend.asarray(np.ones(2, np.float32))
    assert type(moved) is StandinArray and moved.dtype == np.float32
    erf = special_function(xp, "erf")
    np.testing.assert_allclose(erf(xp.asarray([0.0, 1.0])).get(), [0.0, 0.8427007929497149], rtol=1e-12)
    cpu = get_backend("cpu")
    assert cpu.is_writeable(np.ones(2)) and not cpu.is_writeable(np.broadcast_to(np.ones(1), (3,)))


def test_device_generator_draws_device_arrays_that_differ_from_the_cpu_stream():
    rng = BACKEND.make_rng(0)
    draws = rng.standard_normal((1000,), np.float32)
    assert type(draws) is StandinArray and draws.dtype == np.float32
    host = get_backend("cpu").make_rng(0).standard_normal((1000,), np.float32)
    assert not np.array_equal(draws.get(), host)  # another algorithm than the CPU's, as a GPU's
    state = BACKEND.rng_state(rng)
    first = rng.random((3,), np.float64).get()
    BACKEND.set_rng_state(rng, state)
    np.testing.assert_array_equal(rng.random((3,), np.float64).get(), first)
    keyed = [BACKEND.make_rng(7, stream=k).integers(0, 1 << 30, (4,)).get() for k in (0, 1, 0)]
    assert np.array_equal(keyed[0], keyed[2]) and not np.array_equal(keyed[0], keyed[1])
    assert sorted(BACKEND.make_rng(1).permutation(5).get().tolist()) == [0, 1, 2, 3, 4]


def test_standin_serves_cuda_only_inside_the_block():
    with ember.testing.standin_cuda():
        assert ember.cuda.is_available() and ember.cuda.device_count() == 1
        assert ember.ones(2, device="cuda").is_cuda
    with pytest.raises(RuntimeError, match="no CUDA device is available"):
        ember.ones(2, device="cuda")
    assert not ember.cuda.is_available()
