"""ember.fft and stft/istft against torch 2.13: values, result dtypes and shapes, gradients (PyTorch's
conventions for the one-sided transforms), n/s/dim/norm, frequencies and shifts, errors, special values.
Every expected value is torch's on the same inputs."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
N_D = ["fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn"]
REAL_ONLY = {"rfft", "rfft2", "rfftn", "ihfft", "ihfft2", "ihfftn"}


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().resolve_conj().numpy()


def _cases() -> list:
    cases = []
    for name in ONE_D:
        for n, norm in itertools.product([None, 5, 8, 3], [None, "ortho", "forward"]):
            cases.append((name, dict(n=n, dim=1, norm=norm)))
    for name in N_D:
        for s, norm in itertools.product([None, (4, 6), (3, 5)], [None, "ortho", "forward"]):
            cases.append((name, dict(s=s, norm=norm)))
    cases += [("fftn", dict(s=(4, 2, 3), dim=(2, 0, 1))), ("rfftn", dict(dim=(0, 2))), ("irfftn", dict(s=(5,), dim=(0,))),
              ("hfftn", dict(s=(2, -1))), ("ifft", dict(dim=0)), ("fft2", dict(dim=(0, 2), s=(2, 9)))]
    return [pytest.param(name, kw, cplx, id=f"{name}-{'-'.join(f'{k}={v}' for k, v in kw.items())}-{'c' if cplx else 'r'}")
            for name, kw in cases for cplx in (False, True) if not (cplx and name in REAL_ONLY)]


@pytest.mark.parametrize("name,kw,cplx", _cases())
def test_transform_values_and_gradients_match_torch(name: str, kw: dict, cplx: bool) -> None:
    rng = np.random.default_rng(0)
    shape = (3, 6, 7)
    a = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if cplx else 0)
    tx, ex = torch.tensor(a, requires_grad=True), ember.tensor(a, requires_grad=True)
    ty, ey = getattr(torch.fft, name)(tx, **kw), getattr(ember.fft, name)(ex, **kw)
    assert ey.dtype.name == str(ty.dtype).replace("torch.", "") and tuple(ey.shape) == tuple(ty.shape)
    np.testing.assert_allclose(ey.detach().numpy(), _np(ty), rtol=1e-12, atol=1e-12)
    w = rng.standard_normal(tuple(ty.shape)) + (1j * rng.standard_normal(tuple(ty.shape)) if ty.is_complex() else 0)
    ((ty * torch.tensor(w)).real if ty.is_complex() else ty * torch.tensor(w)).sum().backward()
    ((ey * ember.tensor(w)).real if ey.dtype.is_complex else ey * ember.tensor(w)).sum().backward()
    assert ex.grad.dtype is ex.dtype
    np.testing.assert_allclose(ex.grad.numpy(), _np(tx.grad), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "ifft2", "hfft"])
def test_second_order_gradients_match_torch(name: str) -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 6)) + (1j * rng.standard_normal((4, 6)) if name not in REAL_ONLY else 0)
    results = []
    for L in (torch, ember):
        x = L.tensor(a, requires_grad=True)
        y = getattr(L.fft, name)(x, norm="ortho")
        loss = (y.abs() ** 3).sum()
        (g,) = L.autograd.grad(loss, [x], create_graph=True)
        (gg,) = L.autograd.grad((g * g.conj()).real.sum() if g.is_complex() else (g * g).sum(), [x])
        results.append((g, gg))
    for want, got in zip(*results):
        np.testing.assert_allclose(got.detach().numpy(), _np(want), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype,want", [("float32", "complex64"), ("float64", "complex128"), ("int64", "complex64"),
                                        ("bool", "complex64"), ("complex64", "complex64")])
def test_result_dtypes_match_torch(dtype: str, want: str) -> None:
    x = ember.ones(8, dtype=getattr(ember, dtype))
    assert ember.fft.fft(x).dtype.name == want == str(torch.fft.fft(torch.ones(8, dtype=getattr(torch, dtype))).dtype)[6:]
    if dtype != "complex64":
        assert ember.fft.rfft(x).dtype.name == want
        assert ember.fft.irfft(ember.fft.rfft(x)).dtype.name == ember.dtypes.to_dtype(want).to_real().name


def test_float32_precision() -> None:
    a = np.random.default_rng(2).standard_normal((4, 64)).astype(np.float32)
    got = ember.fft.rfft(ember.tensor(a)).numpy()
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, torch.fft.rfft(torch.tensor(a)).numpy(), rtol=1e-5, atol=1e-4)


def test_special_values_match_torch() -> None:
    a = np.array([0.0, np.inf, 1.0, np.nan, -np.inf, 2.0, 0.0, 0.0])
    z = a + 1j * a[::-1]
    for name, x in (("fft", z), ("rfft", a), ("ifft", z), ("irfft", z[:5])):
        got = getattr(ember.fft, name)(ember.tensor(x)).numpy()
        with np.errstate(all="ignore"):
            want = _np(getattr(torch.fft, name)(torch.tensor(x)))
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
        finite = np.isfinite(want)
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-12, err_msg=name)
    np.testing.assert_array_equal(ember.fft.fft(ember.zeros(4)).numpy(), np.zeros(4, np.complex64))


def test_frequencies_and_shifts_match_torch() -> None:
    for n, d in ((5, 1.0), (8, 0.1), (1, 2.0)):
        np.testing.assert_allclose(ember.fft.fftfreq(n, d).numpy(), torch.fft.fftfreq(n, d).numpy(), rtol=1e-7)
        np.testing.assert_allclose(ember.fft.rfftfreq(n, d).numpy(), torch.fft.rfftfreq(n, d).numpy(), rtol=1e-7)
    assert ember.fft.fftfreq(4, dtype=ember.float64).dtype is ember.float64
    x = np.arange(30.0).reshape(5, 6)
    for dim in (None, 0, (1,), (0, 1)):
        for fn in ("fftshift", "ifftshift"):
            np.testing.assert_array_equal(getattr(ember.fft, fn)(ember.tensor(x), dim=dim).numpy(),
                                          getattr(torch.fft, fn)(torch.tensor(x), dim=dim).numpy())
    y = ember.tensor(x, requires_grad=True)
    (ember.fft.fftshift(y) * ember.tensor(x)).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), np.fft.ifftshift(x))


@pytest.mark.parametrize("call,error", [
    (lambda L: L.fft.fft(L.ones(4), norm="bogus"), RuntimeError),
    (lambda L: L.fft.rfft(L.ones(4, dtype=L.complex64)), RuntimeError),
    (lambda L: L.fft.fft(L.ones(4), n=0), RuntimeError),
    (lambda L: L.fft.fft(L.ones(4), dim=2), IndexError),
    (lambda L: L.fft.fftn(L.ones(4, 4), s=(2, 2, 2)), RuntimeError),
    (lambda L: L.fft.fftn(L.ones(4, 4), s=(2,), dim=(0, 1)), RuntimeError),
    (lambda L: L.fft.irfft(L.ones(1)), RuntimeError),
    (lambda L: L.fft.fft(L.ones(4, dtype=L.float16)), RuntimeError),
])
def test_errors_as_torch(call, error) -> None:
    with pytest.raises(error):
        call(torch)
    with pytest.raises(error):
        call(ember)


# ---- stft / istft ---------------------------------------------------------------------------------------------
def _stft_cases(every: bool) -> list:
    grid = itertools.product([(64,), (2, 50)], [(16, 4, None), (16, None, 12), (15, 5, 15), (8, 8, 8)],
                             [(True, "reflect"), (True, "constant"), (False, "reflect"), (True, "replicate"),
                              (True, "circular")], [False, True], [False, True], ["hann", None])
    cases = list(grid)
    return cases if every else cases[::7]


def _check_stft(shape, sizes, centering, normalized, cplx, window) -> None:
    n_fft, hop, win = sizes
    center, pad_mode = centering
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if cplx else 0)
    results = []
    for L in (torch, ember):
        x = L.tensor(a, requires_grad=True)
        w = None if window is None else L.hann_window(win or n_fft, dtype=L.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = L.stft(x, n_fft, hop_length=hop, win_length=win, window=w, center=center, pad_mode=pad_mode,
                       normalized=normalized, return_complex=True)
            g = np.random.default_rng(5).standard_normal(tuple(s.shape) + (2,))
            (s * L.tensor(g[..., 0] + 1j * g[..., 1])).real.sum().backward()
            try:
                y = L.istft(s.detach(), n_fft, hop_length=hop, win_length=win, window=w, center=center,
                            normalized=normalized, length=shape[-1] if center else None, onesided=not cplx,
                            return_complex=cplx)
                y = _np(y) if L is torch else y.numpy()
            except RuntimeError as error:  # NOLA failures (a window whose squares sum to 0 somewhere)
                y = "NOLA" if "overlap" in str(error) or "NOLA" in str(error) else str(error)
        results.append((_np(s) if L is torch else s.detach().numpy(), _np(x.grad) if L is torch else x.grad.numpy(), y))
    (ts, tg, ty), (es, eg, ey) = results
    assert es.shape == ts.shape
    np.testing.assert_allclose(es, ts, atol=1e-10)
    np.testing.assert_allclose(eg, tg, atol=1e-10)
    if isinstance(ty, str) or isinstance(ey, str):
        assert ty == ey
    else:
        np.testing.assert_allclose(ey, ty, atol=1e-9)


@pytest.mark.parametrize("shape,sizes,centering,normalized,cplx,window", _stft_cases(False))
def test_stft_istft_match_torch(shape, sizes, centering, normalized, cplx, window) -> None:
    _check_stft(shape, sizes, centering, normalized, cplx, window)


@pytest.mark.slow
@pytest.mark.parametrize("shape,sizes,centering,normalized,cplx,window", _stft_cases(True))
def test_stft_istft_match_torch_every_case(shape, sizes, centering, normalized, cplx, window) -> None:
    _check_stft(shape, sizes, centering, normalized, cplx, window)


def test_stft_round_trip_and_errors() -> None:
    x = ember.sin(ember.arange(200.0) * 0.3)
    w = ember.hann_window(32)
    spec = ember.stft(x, 32, hop_length=8, window=w, return_complex=True)
    assert spec.shape == (17, 26) and spec.dtype is ember.complex64
    np.testing.assert_allclose(ember.istft(spec, 32, hop_length=8, window=w, length=200).numpy(), x.numpy(), atol=1e-5)
    with pytest.raises(RuntimeError, match="return_complex"):
        ember.stft(x, 32, window=w)
    with pytest.raises(RuntimeError, match="window"):
        ember.stft(x, 32, window=ember.ones(7), return_complex=True)
    with pytest.raises(RuntimeError, match="complex-valued input"):
        ember.istft(x, 32)
    with pytest.warns(UserWarning, match="window was not provided"):
        ember.stft(x, 32, return_complex=True)
    with pytest.warns(UserWarning, match="return_complex=False"):
        r = ember.stft(x, 32, window=w, return_complex=False)
    assert r.shape == (17, 26, 2)
    assert ember.Tensor.stft is not None and x.stft(32, window=w, return_complex=True).shape == (17, 26)


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                  "kaiser_window"])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows_match_torch(name: str, periodic: bool) -> None:
    for n in (0, 1, 2, 7, 16):
        got = getattr(ember, name)(n, periodic=periodic, dtype=ember.float64).numpy()
        want = getattr(torch, name)(n, periodic=periodic, dtype=torch.float64).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15, err_msg=f"{name}({n})")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_stft_on_the_device(device: str) -> None:
    context = ember.testing.standin_cuda() if device == "cuda" and not ember.cuda.is_available() else _nothing()
    a = np.random.default_rng(4).standard_normal((2, 80))
    with context:
        x = ember.tensor(a, device=device, requires_grad=True)
        w = ember.hann_window(16, dtype=ember.float64, device=device)
        s = ember.stft(x, 16, hop_length=4, window=w, return_complex=True)
        y = ember.istft(s, 16, hop_length=4, window=w, length=80)
        (s.abs().sum() + (y * y).sum()).backward()
        got = (y.detach().cpu().numpy(), x.grad.cpu().numpy())
    tx = torch.tensor(a, requires_grad=True)
    tw = torch.hann_window(16, dtype=torch.float64)
    ts = torch.stft(tx, 16, hop_length=4, window=tw, return_complex=True)
    ty = torch.istft(ts, 16, hop_length=4, window=tw, length=80)
    (ts.abs().sum() + (ty * ty).sum()).backward()
    np.testing.assert_allclose(got[0], ty.detach().numpy(), atol=1e-10)
    np.testing.assert_allclose(got[1], tx.grad.numpy(), atol=1e-10)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args) -> bool:
        return False
