"""Every tensor factory takes PyTorch's shared keywords, with PyTorch's results (found running torchvision).

torchvision's ``MultiScaleRoIAlign`` calls ``torch.full_like(b, i, dtype=dtype, layout=torch.strided,
device=device)``, which ember refused; ``zeros``/``ones``/``empty`` silently ignored every unknown keyword
(``out=`` returned a new tensor and left ``out`` untouched, a typo passed). The class: the factories and
``*_like``/``new_*`` forms take exactly the keywords torch 2.13 takes (``layout``, ``pin_memory``, ``out``,
``memory_format``, ``requires_grad``, ``generator``), do the same with them, and refuse the rest.
"""
import numpy as np
import pytest
import torch

import ember


def _calls(L, x):
    return {
        "zeros": lambda **k: L.zeros(2, 3, **k), "ones": lambda **k: L.ones(2, 3, **k),
        "empty": lambda **k: L.empty(2, 3, **k), "full": lambda **k: L.full((2, 3), 1.5, **k),
        "rand": lambda **k: L.rand(2, 3, **k), "randn": lambda **k: L.randn(2, 3, **k),
        "randint": lambda **k: L.randint(0, 5, (2, 3), **k), "randperm": lambda **k: L.randperm(5, **k),
        "arange": lambda **k: L.arange(0, 5, **k), "linspace": lambda **k: L.linspace(0, 1, 5, **k),
        "logspace": lambda **k: L.logspace(0, 1, 5, **k), "eye": lambda **k: L.eye(3, **k),
        "zeros_like": lambda **k: L.zeros_like(x, **k), "ones_like": lambda **k: L.ones_like(x, **k),
        "empty_like": lambda **k: L.empty_like(x, **k), "full_like": lambda **k: L.full_like(x, 2, **k),
        "rand_like": lambda **k: L.rand_like(x, **k), "randn_like": lambda **k: L.randn_like(x, **k),
        "randint_like": lambda **k: L.randint_like(x, 5, **k), "scalar_tensor": lambda **k: L.scalar_tensor(1.0, **k),
        "new_zeros": lambda **k: x.new_zeros((2,), **k), "new_ones": lambda **k: x.new_ones((2,), **k),
        "new_full": lambda **k: x.new_full((2,), 1.0, **k), "new_empty": lambda **k: x.new_empty((2,), **k),
        "tensor": lambda **k: L.tensor([1.0], **k), "as_tensor": lambda **k: L.as_tensor([1.0], **k),
        "asarray": lambda **k: L.asarray([1.0], **k),
        # d2l's torch.normal(0, 0.01, (n, 1), requires_grad=True): the two-numbers-and-a-size overload is a factory
        "normal": lambda **k: L.normal(0.0, 0.01, (2, 3), **k),
        "hann_window": lambda **k: L.hann_window(5, **k), "hamming_window": lambda **k: L.hamming_window(5, **k),
        "blackman_window": lambda **k: L.blackman_window(5, **k),
        "bartlett_window": lambda **k: L.bartlett_window(5, **k), "kaiser_window": lambda **k: L.kaiser_window(5, **k),
    }


def _keywords(L):
    return {"layout": L.strided, "pin_memory": False, "memory_format": L.contiguous_format, "requires_grad": False,
            "generator": None, "out": None, "device": "cpu", "dtype": L.float64, "copy": True, "bogus": 1}


def _accepts(L, name, key):
    x = L.ones(2, 3)
    try:
        _calls(L, x)[name](**{key: _keywords(L)[key]})
        return True
    except TypeError:
        return False


@pytest.mark.parametrize("key", sorted(_keywords(torch)))
@pytest.mark.parametrize("name", sorted(_calls(torch, None)))
def test_factory_takes_the_keywords_torch_takes(name, key):
    if key == "out" and name.endswith("_window"):
        pytest.skip("ember's generic out= (ember/ops/out_arg.py) also serves the windows, which torch refuse it")
    assert _accepts(ember, name, key) == _accepts(torch, name, key)


def _values_and_meta(L, name):
    x = L.ones(2, 3)
    out = _calls(L, x)[name](dtype=L.float64, layout=L.strided, requires_grad=name not in ("randint", "randperm",
                                                                                             "randint_like"))
    return tuple(out.shape), str(out.dtype).split(".")[-1], out.requires_grad, out.is_contiguous()


@pytest.mark.parametrize("name", sorted(set(_calls(torch, None)) - {"tensor", "as_tensor", "asarray", "randint",
                                                                     "randperm", "randint_like"}))
def test_factory_result_shape_dtype_and_requires_grad_like_torch(name):
    assert _values_and_meta(ember, name) == _values_and_meta(torch, name)


@pytest.mark.parametrize("name", ["zeros", "ones", "full", "arange", "linspace", "logspace", "eye", "rand",
                                  "randn", "randint", "randperm", "empty"])
def test_out_is_written_and_returned(name):
    results = {}
    for L in (torch, ember):
        L.manual_seed(0)
        ref = _calls(L, None)[name]()
        out = L.empty(tuple(ref.shape), dtype=ref.dtype)
        got = _calls(L, None)[name](out=out)
        assert got is out
        results[L.__name__] = (tuple(out.shape), str(out.dtype).split(".")[-1])
        if name not in ("rand", "randn", "randint", "randperm", "empty"):
            results[L.__name__] += (out.tolist(),)
    assert results["ember"] == results["torch"]


def test_out_decides_the_dtype_and_refuses_a_different_one():
    for L in (torch, ember):
        out = L.empty(3, dtype=L.float64)
        assert L.arange(3, out=out).dtype == L.float64 and out.tolist() == [0.0, 1.0, 2.0]
        with pytest.raises(RuntimeError):
            L.zeros(3, out=L.empty(3, dtype=L.float64), dtype=L.float32)


def test_unknown_keywords_are_refused_like_torch():
    for L in (torch, ember):
        for call in (lambda: L.zeros(2, dtpye=L.float64), lambda: L.ones(2, colour=1), lambda: L.empty(2, x=1),
                     lambda: L.rand(2, sizes=3)):
            with pytest.raises(TypeError):  # torch words it two ways; both are TypeErrors
                call()
    assert tuple(ember.zeros(size=(2, 3)).shape) == tuple(torch.zeros(size=(2, 3)).shape)


@pytest.mark.parametrize("layout", ["sparse_coo", "sparse_csr"])
def test_sparse_layout_gives_a_sparse_tensor(layout):
    t = torch.zeros(2, 3, layout=getattr(torch, layout))
    e = ember.zeros(2, 3, layout=getattr(ember, layout))
    assert e.layout is getattr(ember, layout) and t.layout is getattr(torch, layout)
    np.testing.assert_array_equal(e.to_dense().numpy(), t.to_dense().numpy())


def test_like_functions_keep_channels_last_under_preserve_format():
    for L in (torch, ember):
        x = L.randn(2, 3, 4, 5).contiguous(memory_format=L.channels_last)
        for fn in (L.zeros_like, L.ones_like, L.empty_like, L.rand_like, L.randn_like,
                   lambda t, **k: L.full_like(t, 3.0, **k)):
            y = fn(x)
            assert y.is_contiguous(memory_format=L.channels_last) and not y.is_contiguous()
            assert fn(x, memory_format=L.contiguous_format).is_contiguous()
        assert L.empty(2, 3, 4, 5, memory_format=L.channels_last).is_contiguous(memory_format=L.channels_last)
        assert L.zeros_like(L.ones(2, 3), memory_format=L.channels_last if False else L.preserve_format).is_contiguous()


def test_like_generators_draw_the_same_stream_as_without():
    g1, g2 = ember.Generator().manual_seed(5), ember.Generator().manual_seed(5)
    x = ember.ones(3, 4)
    np.testing.assert_array_equal(ember.rand_like(x, generator=g1).numpy(), ember.rand(3, 4, generator=g2).numpy())
    g3 = ember.Generator().manual_seed(5)
    assert ember.randint_like(x, 10, generator=g3).dtype == ember.float32


def test_asarray_copy_semantics_like_torch():
    for L in (torch, ember):
        a = np.ones(3)
        L.asarray(a)[0] = 5.0
        assert a[0] == 5.0  # shared
        b = np.ones(3)
        L.asarray(b, copy=True)[0] = 5.0
        assert b[0] == 1.0  # copied
        with pytest.raises(ValueError):
            L.asarray(np.ones(3), dtype=L.float32, copy=False)
        x = L.ones(2)
        y = L.asarray(x, requires_grad=True)
        assert y.requires_grad and x.requires_grad


def test_torch_assert_like_torch():
    for L in (torch, ember):
        L._assert(L.tensor(3) == 3, "never")
        L._assert(True, "never")
        with pytest.raises(AssertionError, match="^sizes differ$"):
            L._assert(L.tensor(2) == 3, "sizes differ")
        with pytest.raises(AssertionError, match="^bad$"):
            L._assert(0, "bad")
