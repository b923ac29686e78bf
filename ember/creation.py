"""Creation ops: tensor, as_tensor, from_numpy, zeros/ones/full/empty, arange, linspace, eye,
rand/randn/randint/randperm, and the ``*_like`` forms.

Example:
    >>> import ember
    >>> ember.arange(3)
    tensor([0, 1, 2])
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ember import dtypes, factory_options as _opts, float8, random as ember_random
from ember.autograd import grad_mode
from ember.backends import cpu_parallel_ufunc
from ember.device import to_device
from ember.ops import complex_ops, float8_ops, unsigned_ops, value_check
from ember.ops.linspace_values import linspace_values, scalar_ends
from ember.tensor import Tensor


def _wrap_array(array: Any, device: Any, requires_grad: bool = False) -> Tensor:
    t = Tensor._make(array, device, False)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _to_device_array(array: np.ndarray, device: Any) -> Any:
    if device.type == "cpu":
        return array
    return device.backend.asarray(array, index=device.index or 0)


def _shape_args(size: Sequence[Any], keywords: dict | None = None, op: str = "") -> tuple:
    """A shape from ``f(2, 3)``, ``f((2, 3))``, ``f(ember.Size)`` or PyTorch's keyword ``f(size=(2, 3))``."""
    if keywords and "size" in keywords:
        if size:
            raise TypeError("got the size both positionally and as size=; pass it once")
        size = (keywords["size"],)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    elif len(size) == 1 and isinstance(size[0], Tensor) and size[0].ndim == 1:
        size = tuple(size[0].tolist())
    shape = tuple(_size_entry(s, i, op) for i, s in enumerate(size))
    if any(s < 0 for s in shape):
        raise RuntimeError(f"{op + ': ' if op else ''}Trying to create tensor with negative dimension: {list(shape)}; "
                           "every size must be >= 0")
    return shape


def _size_entry(value: Any, position: int, op: str = "") -> int:
    """One entry of a size: an integer (Python, NumPy or a 0-d integer tensor), never a float or bool that
    int() would silently round (PyTorch raises TypeError for ``zeros(2.5)``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer, Tensor)):
        raise TypeError(f"{op}(): argument 'size' must be a tuple of ints, but found element of type {type(value).__name__} "
                        f"({value!r}) at pos {position}; pass integers, e.g. int(n)")
    if isinstance(value, Tensor) and (value.ndim != 0 or value.dtype.is_floating_point):
        raise TypeError(f"{op}(): argument 'size' must be a tuple of ints, but found a tensor of shape {tuple(value.shape)} and "
                        f"dtype {value.dtype} at pos {position}")
    return int(value)


_PYTHON_SCALARS = (bool, int, float, complex)


def _python_scalar_dtype(kind: type) -> dtypes.dtype:
    if kind is bool:
        return dtypes.bool_
    if kind is int:
        return dtypes.int64
    return dtypes.get_default_dtype() if kind is float else dtypes.get_default_complex_dtype()


def _sequence_dtype(seq: Sequence[Any], kinds: "set[type] | None" = None) -> "dtypes.dtype | None":
    """PyTorch's inference over a nested sequence: each Python number counts as its default dtype, each NumPy
    scalar/array or tensor as its own dtype, and the result is their promotion (``[np.float64(1), 2.0]`` is
    float64, ``[np.int8(1), 1.5]`` float32). None for an empty sequence. Walks by type sets, so a long list of
    Python floats costs one ``set(map(type, ...))``."""
    found: "dtypes.dtype | None" = None
    for kind in set(map(type, seq)) if kinds is None else kinds:
        if kind in _PYTHON_SCALARS:
            here = _python_scalar_dtype(kind)
        elif issubclass(kind, (np.ndarray, np.generic, Tensor)):
            here = None
            for item in seq:
                if type(item) is kind:
                    item_dtype = item.dtype if isinstance(item, Tensor) else dtypes.from_numpy_dtype(item.dtype)
                    here = item_dtype if here is None else dtypes.promote_types(here, item_dtype)
        elif issubclass(kind, (list, tuple)):
            here = None
            for item in seq:
                if type(item) is kind:
                    inner = _sequence_dtype(item)
                    if inner is not None:
                        here = inner if here is None else dtypes.promote_types(here, inner)
        else:
            continue  # anything else (a subclass of float, a custom number) is judged by NumPy below
        if here is not None:
            found = here if found is None else dtypes.promote_types(found, here)
    return found


def _infer_dtype(data: Any) -> dtypes.dtype:
    """Python bools -> bool, ints -> int64, floats -> the default float dtype, complex numbers -> the default
    complex dtype; arrays, NumPy scalars and tensors keep theirs, and a sequence promotes over its items."""
    if isinstance(data, np.ndarray):
        return dtypes.from_numpy_dtype(data.dtype)
    if isinstance(data, np.generic):
        return dtypes.from_numpy_dtype(data.dtype)
    if isinstance(data, (list, tuple)):
        kinds = set(map(type, data))
        if all(k in _PYTHON_SCALARS or issubclass(k, (list, tuple, np.ndarray, np.generic, Tensor)) for k in kinds):
            inferred = _sequence_dtype(data, kinds)
            if inferred is not None:
                return inferred
    flat = np.asarray(data)
    if flat.dtype.kind == "b":
        return dtypes.bool_
    if flat.dtype.kind in "iu":
        return dtypes.int64
    if flat.dtype.kind == "f":
        return dtypes.get_default_dtype()
    if flat.dtype.kind == "c":  # Python complex numbers: complex64 under float32, complex128 under float64
        return dtypes.get_default_complex_dtype()
    raise TypeError(f"tensor(): can't infer a dtype from {type(data).__name__} with NumPy kind {flat.dtype.kind!r}")


def _unwrap_nested(data: Any) -> Any:
    """Tensors inside nested sequences become the numbers they hold, as PyTorch reads them (``item()``):
    ``tensor([[t1], [t1]])`` of one-element tensors is (2, 1) whatever their shape, and a tensor of several elements
    inside a list raises PyTorch's error (NumPy arrays inside lists stay sequences, as in PyTorch)."""
    if isinstance(data, Tensor):
        if data.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return data.detach().cpu().numpy().reshape(())
    if isinstance(data, (list, tuple)):
        return [_unwrap_nested(d) for d in data]
    return data


def _flat_numbers(data: Any) -> Any:
    if isinstance(data, (list, tuple)):
        for item in data:
            yield from _flat_numbers(item)
    else:
        yield data


def _python_numbers(data: Any, dt: Any) -> Any:
    """Python numbers (nested lists, a scalar) as an array of the integer or float dtype ``dt``, converted as
    PyTorch's ``torch.tensor`` converts them: integers wrap into an integer dtype when PyTorch's overflow check lets
    them (``tensor([-1], dtype=uint8)`` is 255, an unsigned dtype takes -max..max), floats must lie in its range
    (``tensor([255.9], dtype=uint8)``, NaN and inf raise, as ``-0.9`` does for uint8); past-int64 integers reach a
    float dtype through float64 (``tensor([2**63], dtype=bfloat16)``). NumPy alone raised on -1 and truncated 255.9."""
    try:
        source = np.array(data, copy=True)
    except (ValueError, OverflowError):
        return np.array(data, dtype=dt.np, copy=True)  # the same error NumPy gives with the dtype
    kind = source.dtype.kind
    if kind == "c" and dt.category < 3:
        raise TypeError(f"tensor(): must be real number, not complex (converting to {dt}; take .real first)")
    if dt.category == 1 and kind in "fO" and any(type(v) is int and not -(1 << 63) <= v < (1 << 63)
                                                 for v in _flat_numbers(data)):
        raise OverflowError("tensor(): Overflow when unpacking long long (an integer past the int64 range)")
    if dt.category == 2:
        if kind == "O" or (kind in "iu" and dt.np not in (np.float64, np.float32, np.float16)):
            try:
                source = np.array(data, dtype=np.float64, copy=True)  # ml_dtypes' bfloat16 refuses ints past int64
            except (TypeError, ValueError, OverflowError):
                return np.array(data, dtype=dt.np, copy=True)
        return source.astype(dt.np) if source.dtype != dt.np else source
    if kind not in "iuf" or source.size == 0:
        return np.array(data, dtype=dt.np, copy=True)
    info = np.iinfo(dt.np)
    high = int(info.max)
    low = -high if info.min == 0 and kind in "iu" else int(info.min)
    if kind == "u" and source.dtype.itemsize == 8 and int(source.max()) > (1 << 63) - 1:
        raise OverflowError("tensor(): Overflow when unpacking long long (an integer past the int64 range)")
    with np.errstate(invalid="ignore"):
        fits = (source >= low) & (source <= high)
    if not bool(fits.all()):
        bad = source[~fits].reshape(-1)[0]
        raise RuntimeError(f"tensor(): value {bad.item()!r} cannot be converted to type {dt} without overflow")
    with np.errstate(invalid="ignore", over="ignore"):
        return source.astype(dt.np)


def tensor(data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
           pin_memory: bool = False) -> Tensor:
    """Copy ``data`` (nested lists, scalars, arrays, tensors) into a new tensor."""
    if isinstance(data, Tensor):
        target_device = to_device(device) if device is not None else data.device
        out = data.detach().to(target_device).to(dtypes.to_dtype(dtype) if dtype is not None else data.dtype)
        out = _wrap_array(out._data.copy(), out._device)
    else:
        if hasattr(data, "__cuda_array_interface__") and device is None:
            device = "cuda"
        target_device = to_device(device)
        if type(data).__module__.startswith("cupy"):
            data = data.get()
        dt = dtypes.to_dtype(dtype) if dtype is not None else _infer_dtype(data)
        data = _unwrap_nested(data)
        if isinstance(data, (list, tuple)) and any(isinstance(d, np.ndarray) for d in data):
            data = np.stack([np.asarray(d) for d in data]) if data else data
        if dt in dtypes.FLOAT8_DTYPES:  # through float32 with torch's rounding (ember/float8.py)
            source = np.array(data, copy=True)
            array = source.copy() if source.dtype == dt.np else float8_ops.to_float8(source, dt)
        elif isinstance(data, (list, tuple)) and dt.category in (1, 2) and dt not in dtypes.WIDE_UNSIGNED:
            array = _python_numbers(data, dt)
        elif type(data) is int and dt.category in (1, 2) and dt not in dtypes.WIDE_UNSIGNED:  # a bare number (ember's own code casts NaN this way)
            array = np.array(dtypes.wrap_int(data, dt.np) if dt.category == 1 and -int(np.iinfo(dt.np).max) <= data
                             <= int(np.iinfo(dt.np).max) else float(data) if dt.category == 2 else data,
                             dtype=dt.np, copy=True)
        else:
            array = np.array(data, dtype=dt.np, copy=True)
        out = _wrap_array(_to_device_array(array, target_device), target_device)
    if requires_grad:
        out.requires_grad_(True)
    return out


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """Like ``tensor`` but shares memory with a NumPy array or tensor when it can."""
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype) if (device or dtype) else data
    if isinstance(data, np.ndarray) and (device is None or to_device(device).type == "cpu"):
        dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.from_numpy_dtype(data.dtype)
        if dt in dtypes.FLOAT8_DTYPES and data.dtype != dt.np:
            return _wrap_array(float8_ops.to_float8(data, dt), to_device("cpu"))
        return _wrap_array(data if data.dtype == dt.np else data.astype(dt.np), to_device("cpu"))
    return tensor(data, dtype=dtype, device=device)


def asarray(obj: Any, *, dtype: Any = None, device: Any = None, copy: bool | None = None,
            requires_grad: bool = False) -> Tensor:
    """PyTorch's ``asarray``: shares memory with a tensor or NumPy array when it can (``copy=None``), always
    copies with ``copy=True``, and refuses a needed copy with ``copy=False`` (a dtype or device change)."""
    if copy:
        result = tensor(obj, dtype=dtype, device=device)
    else:
        result = as_tensor(obj, dtype=dtype, device=device)
        shares = isinstance(obj, (Tensor, np.ndarray)) and np.shares_memory(
            result._data, obj._data if isinstance(obj, Tensor) else obj) if result.device.type == "cpu" else (
            result is obj)
        if copy is False and not shares:
            raise ValueError(f"asarray(): can't satisfy copy=False: the {type(obj).__name__} would need a copy "
                             f"(to dtype {result.dtype} / device {result.device}); pass copy=None to allow it")
    if requires_grad:
        result.requires_grad_(True)  # on the very tensor when shared, as PyTorch
    return result


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with ``array`` (changes to one show in the other)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray (got {type(array).__name__})")
    dtypes.from_numpy_dtype(array.dtype)
    return _wrap_array(array, to_device("cpu"))


def _filled(shape: tuple, value: Any, dtype: Any, device: Any, requires_grad: bool) -> Tensor:
    dev = to_device(device)
    dt = dtypes.to_dtype(dtype) if dtype is not None else (
        dtypes.result_type(value) if not isinstance(value, float) else dtypes.get_default_dtype())
    xp = dev.xp
    if value == 0 and not (isinstance(value, float) and math.copysign(1.0, value) < 0):  # full(s, -0.0) keeps -0
        # (a large NumPy fill on ember's threads: the heap's memset, one core otherwise)
        array = cpu_parallel_ufunc.zeros(shape, dt.np) if xp is np else xp.zeros(shape, dtype=dt.np)
    elif value == 1:
        array = xp.ones(shape, dtype=dt.np)
    elif dt in dtypes.FLOAT8_DTYPES:  # torch's rounding and saturation (ember/float8.py), not NumPy's cast
        float8_ops.check_fill_value(value, dt, "full")
        array = xp.asarray(float8_ops.holding(float8.encode(np.full(shape, value, dtype=np.float32), dt.name), dt.np))
    else:
        array = xp.full(shape, value_check.checked_fill_value(value, dt, "full", math.prod(shape)), dtype=dt.np)
    return _wrap_array(array, dev, requires_grad)


# Every factory takes PyTorch's shared keywords (layout, pin_memory, out, memory_format, requires_grad) and
# finishes through ember.factory_options, so they behave alike.
def zeros(*size: Any, out: Any = None, dtype: Any = None, layout: Any = None, device: Any = None,
          requires_grad: bool = False, pin_memory: bool = False, **keywords: Any) -> Tensor:
    _opts.check_unexpected("zeros", keywords)
    dtype = _opts.out_dtype(dtype, out) or dtypes.get_default_dtype()
    result = _filled(_shape_args(size, keywords, "zeros"), 0, dtype, device, False)
    return _opts.finish("zeros", result, layout=layout, requires_grad=requires_grad, out=out)


def ones(*size: Any, out: Any = None, dtype: Any = None, layout: Any = None, device: Any = None,
         requires_grad: bool = False, pin_memory: bool = False, **keywords: Any) -> Tensor:
    _opts.check_unexpected("ones", keywords)
    dtype = _opts.out_dtype(dtype, out) or dtypes.get_default_dtype()
    result = _filled(_shape_args(size, keywords, "ones"), 1, dtype, device, False)
    return _opts.finish("ones", result, layout=layout, requires_grad=requires_grad, out=out)


def full(size: Sequence[int], fill_value: Any, *, out: Any = None, dtype: Any = None, layout: Any = None,
         device: Any = None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    value_check.require_number(fill_value, "full", "fill_value")
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    dtype = _opts.out_dtype(dtype, out)
    if dtype is None:
        dtype = dtypes.result_type(fill_value)
    result = _filled(_shape_args((size,), op="full"), fill_value, dtype, device, False)
    return _opts.finish("full", result, layout=layout, requires_grad=requires_grad, out=out)


def empty(*size: Any, out: Any = None, dtype: Any = None, layout: Any = None, device: Any = None,
          requires_grad: bool = False, pin_memory: bool = False, memory_format: Any = None,
          **keywords: Any) -> Tensor:
    _opts.check_unexpected("empty", keywords)
    dev = to_device(device)
    dtype = _opts.out_dtype(dtype, out)
    dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    if getattr(memory_format, "name", None) == "preserve_format":  # nothing to preserve (torch's error)
        raise RuntimeError("empty: unsupported memory format Preserve (torch.preserve_format needs an input, as in "
                           "empty_like; use torch.contiguous_format or torch.channels_last)")
    result = _wrap_array(dev.xp.empty(_shape_args(size, keywords, "empty"), dtype=dt.np), dev)
    return _opts.finish("empty", result, layout=layout, memory_format=memory_format, requires_grad=requires_grad,
                        out=out)


def _like(input: Tensor, dtype: Any, device: Any) -> tuple:
    return tuple(input.shape), dtype if dtype is not None else input.dtype, device if device is not None else input.device


def zeros_like(input: Tensor, *, dtype: Any = None, layout: Any = None, device: Any = None,
               requires_grad: bool = False, pin_memory: bool = False, memory_format: Any = None) -> Tensor:
    shape, dt, dev = _like(input, dtype, device)
    return _opts.finish("zeros_like", _filled(shape, 0, dt, dev, False), layout=layout, like=input,
                        memory_format=memory_format, requires_grad=requires_grad)


def ones_like(input: Tensor, *, dtype: Any = None, layout: Any = None, device: Any = None,
              requires_grad: bool = False, pin_memory: bool = False, memory_format: Any = None) -> Tensor:
    shape, dt, dev = _like(input, dtype, device)
    return _opts.finish("ones_like", _filled(shape, 1, dt, dev, False), layout=layout, like=input,
                        memory_format=memory_format, requires_grad=requires_grad)


def full_like(input: Tensor, fill_value: Any, *, dtype: Any = None, layout: Any = None, device: Any = None,
              requires_grad: bool = False, pin_memory: bool = False, memory_format: Any = None) -> Tensor:
    shape, dt, dev = _like(input, dtype, device)
    return _opts.finish("full_like", _filled(shape, fill_value, dt, dev, False), layout=layout, like=input,
                        memory_format=memory_format, requires_grad=requires_grad)


def empty_like(input: Tensor, *, dtype: Any = None, layout: Any = None, device: Any = None,
               requires_grad: bool = False, pin_memory: bool = False, memory_format: Any = None) -> Tensor:
    shape, dt, dev = _like(input, dtype, device)
    return _opts.finish("empty_like", empty(shape, dtype=dt, device=dev), layout=layout, like=input,
                        memory_format=memory_format, requires_grad=requires_grad)


def arange(start: Any, end: Any = None, step: Any = 1, *, out: Any = None, dtype: Any = None, layout: Any = None,
           device: Any = None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    dtype = _opts.out_dtype(dtype, out)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")
    values = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if (values[2] > 0 and values[1] < values[0]) or (values[2] < 0 and values[1] > values[0]):
        raise RuntimeError(f"arange: upper bound and lower bound inconsistent with step sign (start={values[0]}, "
                           f"end={values[1]}, step={values[2]}); use a step of the other sign")
    if not all(math.isfinite(v) for v in values):
        raise RuntimeError(f"arange: unsupported range: {values[0]} -> {values[1]} (step {values[2]}); the bounds "
                           "and the step must be finite")
    if abs((values[1] - values[0]) / values[2]) > 2 ** 62:
        raise RuntimeError(f"arange: invalid size, possible overflow: {values[0]} -> {values[1]} with step "
                           f"{values[2]} would have {abs((values[1] - values[0]) / values[2]):.3g} elements")
    if dtype is None:
        dtype = dtypes.get_default_dtype() if any(isinstance(v, float) for v in values) else dtypes.int64
    dt = dtypes.to_dtype(dtype)
    if dt in dtypes.WIDE_UNSIGNED:
        unsigned_ops.refuse("arange", np.zeros(0, dt.np))
    if dt.category <= 1 and any(isinstance(v, float) for v in values):
        # torch's integer arange: int64 truncates the bounds and the step first (arange(0, 5, 1.5, dtype=int64) is
        # [0, 1, 2, 3, 4]; a step that truncates to 0 raises); the other integer dtypes take the length from the
        # float bounds and the values from the truncated start and step (int32 with step 0.3: zeros)
        first, stride = int(values[0]), int(values[2])
        if dt is dtypes.int64:
            if stride == 0:
                raise RuntimeError(f"arange: step must be nonzero (the step {values[2]} truncates to 0 for int64)")
            count = max(-((first - int(values[1])) // stride), 0)
        else:
            count = max(int(math.ceil((values[1] - values[0]) / values[2])), 0)
        array = (first + stride * np.arange(count, dtype=np.int64)).astype(dt.np)
    else:
        array = np.arange(*values, dtype=np.float64 if dt.is_floating_point else np.int64).astype(dt.np)
    dev = to_device(device)
    return _opts.finish("arange", _wrap_array(_to_device_array(array, dev), dev), layout=layout,
                        requires_grad=requires_grad, out=out)


def _steps(op: str, steps: Any) -> int:
    """An integer count of points (PyTorch refuses floats: linspace(0, 1, 2.5) is a TypeError)."""
    if isinstance(steps, Tensor) and steps.ndim == 0 and not steps.dtype.is_floating_point:
        return int(steps)
    if isinstance(steps, (bool, np.bool_)) or not isinstance(steps, (int, np.integer)):
        raise TypeError(f"{op}(): argument 'steps' must be int, not {type(steps).__name__} ({steps!r})")
    return int(steps)


def linspace(start: float, end: float, steps: int, *, out: Any = None, dtype: Any = None, layout: Any = None,
             device: Any = None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    dtype = _opts.out_dtype(dtype, out)
    steps = _steps("linspace", steps)
    if int(steps) < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got {steps}")
    dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    dev = to_device(device)
    array = linspace_values(*scalar_ends("linspace", start, end), int(steps), dt)
    return _opts.finish("linspace", _wrap_array(_to_device_array(array, dev), dev), layout=layout,
                        requires_grad=requires_grad, out=out)


def logspace(start: float, end: float, steps: int, base: float = 10.0, *, out: Any = None, dtype: Any = None,
             layout: Any = None, device: Any = None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    dtype = _opts.out_dtype(dtype, out)
    steps = _steps("logspace", steps)
    if steps < 0:
        raise RuntimeError(f"logspace: number of steps must be non-negative, got {steps}")
    dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    dev = to_device(device)
    start, end = scalar_ends("logspace", start, end)
    result = _wrap_array(_to_device_array(np.logspace(start, end, int(steps), base=base).astype(dt.np), dev), dev)
    return _opts.finish("logspace", result, layout=layout, requires_grad=requires_grad, out=out)


def eye(n: int, m: int | None = None, *, out: Any = None, dtype: Any = None, layout: Any = None, device: Any = None,
        requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    dtype = _opts.out_dtype(dtype, out)
    if n < 0 or (m is not None and m < 0):
        raise RuntimeError(f"eye: n and m must be greater or equal to 0, got n={n}, m={m}")
    dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    dev = to_device(device)
    return _opts.finish("eye", _wrap_array(dev.xp.eye(n, m, dtype=dt.np), dev), layout=layout,
                        requires_grad=requires_grad, out=out)


def _random(sampler: str, size: Sequence[Any], dtype: Any, device: Any, generator: Any, requires_grad: bool,
            **kwargs: Any) -> Tensor:
    dev = to_device(device)
    dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    if dt.is_complex and sampler in ("normal", "uniform") and not kwargs:
        return _random_complex(sampler, _shape_args(size), dt, dev, generator, requires_grad)
    if not dt.is_floating_point:
        raise RuntimeError(f"{sampler}: expected a floating dtype, got {dt}; use randint for integers")
    traced = ember_random.graph_sample(sampler, _shape_args(size), dt, dev, generator, **kwargs)
    if traced is not None:  # inside ember.compile: a random graph node (see ember/graph/rng.py)
        return traced.requires_grad_(True) if requires_grad else traced
    array = getattr(ember_random, "sample_" + sampler)(_shape_args(size), dt, dev, generator, **kwargs)
    return _wrap_array(array, dev, requires_grad)


def _random_complex(sampler: str, shape: tuple, dt: Any, dev: Any, generator: Any, requires_grad: bool) -> Tensor:
    """Complex randn/rand as PyTorch: real and imaginary parts drawn independently (normal ones with variance
    1/2 each, so E|z|^2 = 1; uniform ones on [0, 1) each), pairs of the real dtype viewed as complex."""
    if sampler == "normal":  # as PyTorch: the real view is filled with std 1/sqrt(2)
        parts = _random(sampler, (tuple(shape) + (2,),), dt.to_real(), dev, generator, False, mean=0.0,
                        std=1.0 / math.sqrt(2.0))
    else:
        parts = _random(sampler, (tuple(shape) + (2,),), dt.to_real(), dev, generator, False)
    with grad_mode.no_grad():
        out = complex_ops.view_as_complex(parts).clone()
    return out.requires_grad_(True) if requires_grad else out


def rand(*size: Any, generator: Any = None, out: Any = None, dtype: Any = None, layout: Any = None,
         device: Any = None, requires_grad: bool = False, pin_memory: bool = False, **keywords: Any) -> Tensor:
    _opts.check_unexpected("rand", keywords)
    result = _random("uniform", (_shape_args(size, keywords, "rand"),), _opts.out_dtype(dtype, out), device,
                     generator, False)
    return _opts.finish("rand", result, layout=layout, requires_grad=requires_grad, out=out)


def randn(*size: Any, generator: Any = None, out: Any = None, dtype: Any = None, layout: Any = None,
          device: Any = None, requires_grad: bool = False, pin_memory: bool = False, **keywords: Any) -> Tensor:
    _opts.check_unexpected("randn", keywords)
    result = _random("normal", (_shape_args(size, keywords, "randn"),), _opts.out_dtype(dtype, out), device,
                     generator, False)
    return _opts.finish("randn", result, layout=layout, requires_grad=requires_grad, out=out)


def _filled_like_in_place(input: Tensor, dtype: Any, device: Any, layout: Any, memory_format: Any,
                          requires_grad: bool, fill: Any) -> Tensor | None:
    """torch's ``empty_like(input, ...)`` filled in place by ``fill`` when that result is not row-major (a permuted
    input keeps its layout, and the in-place samplers draw in memory order: ember/random_order.py), else None
    (the caller's plain row-major draw gives the same numbers)."""
    if _opts.check_layout("rand_like", layout) is not None or ember_random.is_tracing() or input.ndim < 2:
        return None
    result = empty_like(input, dtype=dtype, device=device, memory_format=memory_format)
    if result.is_contiguous():
        return None
    fill(result)
    return result.requires_grad_(True) if requires_grad else result


def rand_like(input: Tensor, *, generator: Any = None, dtype: Any = None, layout: Any = None, device: Any = None,
              requires_grad: bool = False, pin_memory: bool = False, memory_format: Any = None) -> Tensor:
    shape, dt, dev = _like(input, dtype, device)
    permuted = _filled_like_in_place(input, dt, dev, layout, memory_format, requires_grad,
                                     lambda t: t.uniform_(generator=generator))
    if permuted is not None:
        return permuted
    return _opts.finish("rand_like", rand(shape, generator=generator, dtype=dt, device=dev), layout=layout,
                        like=input, memory_format=memory_format, requires_grad=requires_grad)


def randn_like(input: Tensor, *, generator: Any = None, dtype: Any = None, layout: Any = None, device: Any = None,
               requires_grad: bool = False, pin_memory: bool = False, memory_format: Any = None) -> Tensor:
    shape, dt, dev = _like(input, dtype, device)
    permuted = _filled_like_in_place(input, dt, dev, layout, memory_format, requires_grad,
                                     lambda t: t.normal_(generator=generator))
    if permuted is not None:
        return permuted
    return _opts.finish("randn_like", randn(shape, generator=generator, dtype=dt, device=dev), layout=layout,
                        like=input, memory_format=memory_format, requires_grad=requires_grad)


def randint(low: Any = None, high: Any = None, size: Any = None, *, generator: Any = None, out: Any = None,
            dtype: Any = None, layout: Any = None, device: Any = None, requires_grad: bool = False,
            pin_memory: bool = False) -> Tensor:
    """``randint(high, size)`` or ``randint(low, high, size)``: integers in [low, high).

    As in PyTorch, ``randint(10, size=(3,))`` reads 10 as ``high`` (``low`` defaults to 0), and so does
    ``randint(high=10, size=(3,))``.
    """
    if low is None:
        low = 0
    elif size is None:
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint: missing the size (randint(high, size) or randint(low, high, size))")
    dtype = _opts.out_dtype(dtype, out)
    dev = to_device(device)
    dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.int64
    if high <= low:
        raise RuntimeError(f"randint: expected low < high, got low={low}, high={high}")
    traced = ember_random.graph_sample("integers", _shape_args((size,)), dt, dev, generator, low=int(low),
                                       high=int(high))
    if traced is None:
        traced = _wrap_array(ember_random.sample_integers(_shape_args((size,)), dt, dev, generator, low, high), dev)
    return _opts.finish("randint", traced, layout=layout, requires_grad=requires_grad, out=out)


def randint_like(input: Tensor, low: Any = None, high: Any = None, *, generator: Any = None, dtype: Any = None,
                 layout: Any = None, device: Any = None, requires_grad: bool = False, pin_memory: bool = False,
                 memory_format: Any = None) -> Tensor:
    """``randint_like(x, high)``, ``randint_like(x, low, high)`` or ``randint_like(x, high=h)`` (Adahessian's)."""
    if low is None:
        low = 0
    elif high is None:
        low, high = 0, low
    if high is None:
        raise TypeError("randint_like() missing required argument 'high'")
    if high <= low:
        raise RuntimeError(f"randint_like: expected low < high, got low={low}, high={high}")
    permuted = _filled_like_in_place(input, dtype or input.dtype, device if device is not None else input.device,
                                     layout, memory_format, requires_grad,
                                     lambda t: t.random_(low, high, generator=generator))
    if permuted is not None:
        return permuted
    result = randint(low, high, tuple(input.shape), generator=generator, dtype=dtype or input.dtype,
                     device=device if device is not None else input.device)
    return _opts.finish("randint_like", result, layout=layout, like=input, memory_format=memory_format,
                        requires_grad=requires_grad)


def randperm(n: int, *, generator: Any = None, out: Any = None, dtype: Any = None, layout: Any = None,
             device: Any = None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    return _opts.finish("randperm", _randperm(n, generator, _opts.out_dtype(dtype, out), device), layout=layout,
                        requires_grad=requires_grad, out=out)


def _randperm(n: int, generator: Any, dtype: Any, device: Any) -> Tensor:
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"randperm(): argument 'n' must be int, not {type(n).__name__} ({n!r})")
    if n < 0:
        raise RuntimeError(f"randperm: n must be non-negative, got {n}")
    dev = to_device(device)
    traced = ember_random.graph_sample("permutation", (int(n),), dtypes.int64, dev, generator)
    if traced is not None:
        return traced if dtype is None else traced.to(dtype)
    out = _wrap_array(ember_random.sample_permutation(n, dev, generator), dev)
    return out if dtype is None else out.to(dtype)


def normal(mean: Any, std: Any = 1.0, size: Any = None, *, generator: Any = None, dtype: Any = None,
           device: Any = None, layout: Any = None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """PyTorch's ``normal``: tensor ``mean`` and/or ``std`` (broadcast together; ``std`` defaults to 1), or two
    numbers and a ``size``. As in PyTorch the draw is not reparameterized: ``mean`` and ``std`` get zero
    gradients (use ``mean + std * randn_like(std)`` for a differentiable sample). Two numbers and a ``size``
    make a factory: ``layout``, ``requires_grad`` and ``pin_memory`` as ``randn``'s (d2l's
    ``torch.normal(0, 0.01, (n, 1), requires_grad=True)``).

    Example:
        >>> normal(zeros(2, 3)).shape
        ember.Size([2, 3])
    """
    if isinstance(std, Tensor):
        if not ember_random.is_tracing() and std.numel() and not bool((std.detach() >= 0).all()):
            raise RuntimeError("normal: expects all elements of std >= 0.0 (found negative or NaN values)")
    else:
        ember_random.check_args("normal", std=std)
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        ref = mean if isinstance(mean, Tensor) else std
        shape = ref.shape
        if isinstance(mean, Tensor) and isinstance(std, Tensor):
            try:
                shape = np.broadcast_shapes(tuple(mean.shape), tuple(std.shape))
            except ValueError:
                raise RuntimeError(f"normal: mean of shape {tuple(mean.shape)} and std of shape {tuple(std.shape)} "
                                   "do not broadcast; give them equal (or broadcastable) shapes") from None
        detached = [v.detach() if isinstance(v, Tensor) else v for v in (mean, std)]
        out = randn(tuple(shape), generator=generator, dtype=ref.dtype, device=ref.device) * detached[1] + detached[0]
        for v in (mean, std):  # the zero gradient PyTorch gives: sign() has a zero derivative everywhere
            if isinstance(v, Tensor) and v.requires_grad:
                out = out + v.sign() * 0
        return out
    result = _random("normal", (size,), dtype, device, generator, False, mean=mean, std=std)
    return _opts.finish("normal", result, layout=layout, requires_grad=requires_grad)


def bernoulli(input: Tensor, p: Any = None, *, generator: Any = None) -> Tensor:
    if p is None and not input.dtype.is_floating_point:
        raise RuntimeError(f"bernoulli: the probabilities must be a floating-point tensor, got {input.dtype}; "
                           "convert them with .float()")
    if p is not None:
        ember_random.check_args("bernoulli", p=p)
    elif not ember_random.is_tracing() and input.numel():
        values = input.detach()
        if not bool(((values >= 0) & (values <= 1)).all()):
            raise RuntimeError("bernoulli: expects all probabilities in input to be in [0, 1] (found values outside "
                               "it or NaN); for logits use torch.sigmoid(logits) first")
    if p is None:
        traced = ember_random.graph_sample("bernoulli", tuple(input.shape), input.dtype, input.device, generator,
                                           inputs=(input,))
    else:
        traced = ember_random.graph_sample("bernoulli", tuple(input.shape), input.dtype, input.device, generator,
                                           like=input, p=float(p))
    if traced is not None:
        return traced
    # PyTorch draws on the CPU stream: a double per element for a number p or float64 probabilities, a float
    # for float32 ones
    probs = input.detach().cpu().numpy() if p is None else float(p)
    draws = ember_random.sample_bernoulli(tuple(input.shape), input.dtype, to_device("cpu"), generator, probs)
    return _wrap_array(_to_device_array(np.asarray(draws).astype(input.dtype.np), input.device), input.device)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator: Any = None) -> Tensor:
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"multinomial: only supports floating-point dtypes for input, got {input.dtype}; "
                           "convert the weights with .float()")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"multinomial: prob_dist must be 1 or 2 dim, got shape {tuple(input.shape)}")
    if num_samples <= 0:
        raise RuntimeError(f"multinomial: cannot sample {num_samples} (<= 0) samples")
    if not replacement and num_samples > input.shape[-1]:
        raise RuntimeError(f"multinomial: cannot draw {num_samples} samples without replacement from "
                           f"{input.shape[-1]} categories; pass replacement=True or draw fewer")
    traced = ember_random.graph_sample("multinomial", tuple(input.shape[:-1]) + (int(num_samples),), dtypes.int64,
                                       input.device, generator, inputs=(input,),
                                       replacement=bool(replacement))
    if traced is not None:
        return traced
    host = np.asarray(input.detach().cpu().numpy())
    probs = host.astype(np.float64 if host.dtype == np.float64 else np.float32)  # the dtype torch sums in
    rows = probs.reshape(-1, probs.shape[-1])
    if (rows < 0).any() or not np.isfinite(rows).all():
        raise RuntimeError("multinomial: probability tensor contains either inf, nan or element < 0")
    totals = rows.sum(axis=1)
    if (totals <= 0).any() or not np.isfinite(totals).all():
        raise RuntimeError("multinomial: probabilities must be finite, non-negative and not all zero")
    if not replacement and ((rows > 0).sum(axis=1) < num_samples).any():
        raise RuntimeError(f"multinomial: invalid distribution (with replacement=False, fewer than {num_samples} "
                           "categories have a non-zero probability); draw fewer samples or pass replacement=True")
    out = ember_random.sample_multinomial(rows, num_samples, replacement, input.device, generator)
    out = out.reshape(probs.shape[:-1] + (num_samples,))
    return _wrap_array(_to_device_array(out, input.device), input.device)
