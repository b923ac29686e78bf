"""``torch.testing``: ``assert_close`` with PyTorch's default tolerances per dtype, and ``make_tensor``.

Example:
    >>> import ember
    >>> ember.testing.assert_close(ember.tensor([1.0]), ember.tensor([1.0 + 1e-7]))
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import numpy as np

from ember.backends import standin
from ember.tensor import Tensor

__all__ = ["assert_close", "make_tensor", "assert_allclose", "standin_cuda"]

# (rtol, atol) by dtype, as torch.testing.assert_close.
_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7)}


def _arr(x: Any) -> np.ndarray:
    if isinstance(x, Tensor):
        return np.asarray(x.detach().cpu().numpy())
    return np.asarray(x)


def assert_close(actual: Any, expected: Any, *, allow_subclasses: bool = True, rtol: float | None = None,
                 atol: float | None = None, equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True, check_stride: bool = False,
                 msg: Any = None) -> None:
    """Raise AssertionError unless ``|actual - expected| <= atol + rtol * |expected|`` elementwise."""
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        if len(actual) != len(expected):
            raise AssertionError(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}")
        for a, e in zip(actual, expected):
            assert_close(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan, check_dtype=check_dtype, msg=msg)
        return
    if isinstance(actual, dict) and isinstance(expected, dict):
        if set(actual) != set(expected):
            raise AssertionError(f"The keys of the mappings do not match: {sorted(actual)} != {sorted(expected)}")
        for k in actual:
            assert_close(actual[k], expected[k], rtol=rtol, atol=atol, equal_nan=equal_nan, msg=msg)
        return
    if (rtol is None) != (atol is None):
        raise ValueError("Both 'rtol' and 'atol' must be either specified or omitted, but got no rtol." if rtol
                         is None else "Both 'rtol' and 'atol' must be either specified or omitted, but got no atol.")
    if isinstance(actual, Tensor) and isinstance(expected, Tensor):
        if check_dtype and actual.dtype != expected.dtype:
            raise AssertionError(f"The values for attribute 'dtype' do not match: {actual.dtype} != {expected.dtype}.")
        if tuple(actual.shape) != tuple(expected.shape):
            raise AssertionError(f"The values for attribute 'shape' do not match: {actual.shape} != "
                                 f"{expected.shape}.")
        if check_device and actual.device != expected.device:
            raise AssertionError(f"The values for attribute 'device' do not match: {actual.device} != "
                                 f"{expected.device}.")
    a, e = _arr(actual), _arr(expected)
    if rtol is None:
        rtol, atol = _TOLERANCES.get(str(a.dtype) if a.dtype.kind in "fc" else "", (0.0, 0.0))
    if a.shape != e.shape:
        raise AssertionError(f"The values for attribute 'shape' do not match: {a.shape} != {e.shape}.")
    wide = np.complex128 if np.iscomplexobj(a) or np.iscomplexobj(e) else np.float64
    af, ef = a.astype(wide), e.astype(wide)
    close = np.isclose(af, ef, rtol=rtol, atol=atol, equal_nan=equal_nan) | (af == ef)
    if not close.all():
        scalars = not isinstance(actual, (Tensor, np.ndarray)) and not isinstance(expected, (Tensor, np.ndarray))
        text = _mismatch_message(a, e, close, rtol, atol, scalars)
        raise AssertionError(msg(text) if callable(msg) else msg if isinstance(msg, str) else text)


def _mismatch_message(a: np.ndarray, e: np.ndarray, close: np.ndarray, rtol: float, atol: float,
                      scalars: bool) -> str:
    """torch.testing's mismatch text: counts, then the greatest absolute and relative differences and where."""
    equality = rtol == 0 and atol == 0
    # PyTorch subtracts in the compared dtype (integers as int64)
    kind = np.result_type(a, e)
    kind = kind if kind.kind in "fc" else np.dtype(np.int64)
    af, ef = a.astype(kind).reshape(-1), e.astype(kind).reshape(-1)
    with np.errstate(all="ignore"):
        abs_diff = np.abs(af - ef)
        abs_diff[close.reshape(-1)] = 0
        # (integer differences are divided in the default float dtype, as torch's true division)
        rel_diff = abs_diff / np.abs(ef) if kind.kind in "fc" else (abs_diff / np.abs(ef)).astype(np.float32)
        rel_diff[close.reshape(-1)] = 0
    lines = []
    for kind_name, diff, tol in (("absolute", abs_diff, atol), ("relative", rel_diff, rtol)):
        flat = int(np.nanargmax(diff)) if not np.isnan(diff).all() else 0
        flat = flat if not np.isnan(diff).any() else int(np.argmax(np.isnan(diff)))  # torch.max returns NaN first
        value = diff.reshape(-1)[flat].item()
        if scalars:
            line = f"{kind_name.title()} difference: {value}"
        else:
            where = tuple(int(i) for i in np.unravel_index(flat, a.shape))
            line = f"Greatest {kind_name} difference: {value} at index {where}"
        lines.append(line if equality else f"{line} (up to {tol} allowed)")
    word = "equal" if equality else "close"
    if scalars:
        return f"Scalars are not {word}!\n\nExpected {e.item()} but got {a.item()}.\n" + "\n".join(lines)
    bad = int((~close).sum())
    return (f"Tensor-likes are not {word}!\n\nMismatched elements: {bad} / {a.size} ({bad / max(a.size, 1):.1%})\n"
            + "\n".join(lines))


def assert_allclose(actual: Any, expected: Any, rtol: float | None = None, atol: float | None = None,
                    equal_nan: bool = True, msg: str = "") -> None:
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_dtype=False, msg=msg or None)


def make_tensor(*shape: Any, dtype: Any, device: Any = None, low: float | None = None, high: float | None = None,
                requires_grad: bool = False, noncontiguous: bool = False, exclude_zero: bool = False,
                memory_format: Any = None) -> Tensor:
    """A random tensor in [low, high) (PyTorch's defaults: [-9, 9) for floats, [-9, 10) for ints)."""
    import ember

    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    dt = ember.dtypes.to_dtype(dtype)
    lo = -9 if low is None else low
    hi = (9 if dt.is_floating_point else 10) if high is None else high
    if dt is ember.bool:
        out = ember.rand(*shape) > 0.5
    elif dt.is_floating_point:
        out = (ember.rand(*shape, dtype=ember.float64) * (hi - lo) + lo).to(dt)
    else:
        out = ember.randint(int(max(lo, -(2 ** 31))), int(hi), tuple(shape), dtype=dt)
    if exclude_zero:
        out = ember.where(out == 0, ember.ones_like(out), out)
    return out.requires_grad_(True) if requires_grad else out


@contextlib.contextmanager
def standin_cuda() -> Iterator[None]:
    """Inside the block, device ``cuda`` is ember's stand-in device: NumPy-backed arrays that refuse
    silent conversion to host arrays, as CuPy's do (docs/devices.md). ``EMBER_CUDA_STANDIN=1`` does the
    same for a whole process.

    Example:
        >>> import ember
        >>> with ember.testing.standin_cuda():
        ...     x = ember.ones(3, device="cuda")
        ...     (x * 2).sum().item(), x.device
        (6.0, device(type='cuda'))
    """
    with standin.enabled():
        yield
