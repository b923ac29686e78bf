"""ember/surface/runtime_names.py against torch 2.13: deterministic names from one table (values and dtypes),
samplers by their moments, and the runtime objects (streams, events, inference mode, worker generators)."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

R = np.random.default_rng(5)
PTS = R.standard_normal((50, 2))


def _np(x: object) -> np.ndarray:
    return np.asarray(x.detach().numpy() if hasattr(x, "detach") else x)


def _flat(out: object) -> list:
    if isinstance(out, (tuple, list)):
        return [y for o in out for y in _flat(o)]
    return [out]


# name -> fn(lib) returning tensors; run on both libraries and compared value for value, dtype for dtype
TABLE = {
    "histogramdd_int_bins": lambda L: L.histogramdd(L.tensor(PTS), bins=4),
    "histogramdd_list_bins_range": lambda L: L.histogramdd(L.tensor(PTS), bins=[3, 5], range=[-2.0, 2.0, -1.0, 1.0]),
    "histogramdd_weight_density": lambda L: L.histogramdd(L.tensor(PTS), bins=3, weight=L.tensor(np.abs(PTS[:, 0])),
                                                         density=True),
    "histogramdd_edges": lambda L: L.histogramdd(L.tensor(PTS), bins=[L.tensor([-3.0, 0.0, 3.0], dtype=L.float64),
                                                                      L.tensor([-3.0, -1.0, 1.0, 3.0],
                                                                               dtype=L.float64)]),
    "embedding_renorm_": lambda L: L.embedding_renorm_(L.tensor(np.arange(12.0).reshape(4, 3)),
                                                       L.tensor([0, 2, 2]), 5.0, 2.0),
    "embedding_renorm_p1": lambda L: L.embedding_renorm_(L.tensor(np.arange(12.0).reshape(4, 3) - 6),
                                                         L.tensor([1, 3]), 4.0, 1.0),
    "resize_as_": lambda L: L.resize_as_(L.zeros(6), L.zeros(2, 3)).shape,
    "dsmm": lambda L: L.dsmm(L.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse(), L.tensor([[1.0, 2.0], [3.0, 4.0]])),
    "hsmm": lambda L: L.hsmm(L.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse(), L.tensor([[1.0, 2.0], [3.0, 4.0]]))
    .to_dense(),
    "poisson_zero_rate": lambda L: L.poisson(L.zeros(5)),
    "binomial_edges": lambda L: L.binomial(L.tensor([5.0, 7.0, 0.0]), L.tensor([0.0, 1.0, 0.5])),
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_table_against_torch(name: str) -> None:
    got, want = _flat(TABLE[name](ember)), _flat(TABLE[name](torch))
    assert len(got) == len(want), name
    for g, w in zip(got, want):
        if isinstance(w, torch.Tensor):
            assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1], (name, g.dtype, w.dtype)
        np.testing.assert_allclose(_np(g), _np(w), rtol=1e-12, atol=1e-12, err_msg=name)


def test_from_file_like_torch(tmp_path) -> None:
    path = tmp_path / "raw.bin"
    np.arange(10, dtype=np.float32).tofile(path)
    t = torch.from_file(str(path), size=6, dtype=torch.float32)
    e = ember.from_file(str(path), size=6, dtype=ember.float32)
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    shared = ember.from_file(str(path), shared=True, size=3, dtype=ember.float32)
    shared[0] = 42.0
    del shared
    assert np.fromfile(path, dtype=np.float32)[0] == 42.0  # shared=True writes through to the file
    with pytest.raises(RuntimeError, match="from_file"):
        ember.from_file(str(path), size=100, dtype=ember.float64)


@pytest.mark.parametrize("name,draw,mean,var", [
    ("poisson", lambda L: L.poisson(L.full((20000,), 3.5)), 3.5, 3.5),
    ("binomial", lambda L: L.binomial(L.full((20000,), 10.0), L.full((20000,), 0.3)), 3.0, 2.1),
])
def test_samplers_moments_and_dtype(name: str, draw: object, mean: float, var: float) -> None:
    ember.manual_seed(0)
    x, ref = draw(ember), draw(torch)
    assert str(x.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
    values = x.numpy()
    assert abs(values.mean() - mean) < 5 * np.sqrt(var / values.size), (name, values.mean())
    assert abs(values.var() - var) < 0.1 * var, (name, values.var())
    assert np.all(values == np.round(values)) and values.min() >= 0


def test_samplers_follow_the_generator() -> None:
    a = ember.poisson(ember.full((5,), 4.0), generator=ember.Generator().manual_seed(3))
    b = ember.poisson(ember.full((5,), 4.0), generator=ember.Generator().manual_seed(3))
    assert a.tolist() == b.tolist()


def test_inference_mode_flag_like_torch() -> None:
    for lib in (torch, ember):
        assert lib.is_inference_mode_enabled() is False
        with lib.inference_mode():
            assert lib.is_inference_mode_enabled() is True and lib.is_grad_enabled() is False
            with lib.inference_mode(False):
                assert lib.is_inference_mode_enabled() is False
        assert lib.is_inference_mode_enabled() is False


def test_cpu_stream_and_event() -> None:
    s = ember.Stream("cpu")
    assert s.query() and torch.Stream("cpu").query()
    start, end = ember.Event(enable_timing=True), ember.Event(enable_timing=True)
    start.record(s)
    _ = ember.randn(100, 100) @ ember.randn(100, 100)
    end.record(s)
    assert end.query() and start.elapsed_time(end) >= 0
    with pytest.raises(RuntimeError, match="enable_timing"):
        ember.Event().elapsed_time(ember.Event())


def test_thread_safe_generator_in_thread_workers() -> None:
    assert ember.thread_safe_generator() is None and torch.thread_safe_generator() is None

    class Draws(ember.utils.data.Dataset):
        def __len__(self) -> int:
            return 4

        def __getitem__(self, i: int) -> object:
            gen = ember.thread_safe_generator()
            return ember.tensor(float(gen is not None and gen is ember.thread_safe_generator()))

    loader = ember.utils.data.DataLoader(Draws(), batch_size=2, num_workers=2, multiprocessing_context="thread")
    assert all(bool(b.all()) for b in loader)


def test_torchscript_class_aliases() -> None:
    assert ember.ScriptModule is ember.jit.ScriptModule and ember.ScriptFunction is ember.jit.ScriptFunction
