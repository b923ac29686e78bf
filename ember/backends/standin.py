"""The stand-in CUDA device: a test device whose arrays live apart from NumPy's, shaped like CuPy where bugs hide.

No GPU is needed: the arrays are NumPy arrays inside a wrapper (:class:`StandinArray`) that behaves as
``cupy.ndarray`` does towards NumPy and towards ember:

- ``np.asarray(a)`` / ``np.array(a)`` raise ``TypeError`` ("Implicit conversion to a NumPy array is not
  allowed"): a stray host conversion of device data fails the test that reaches it;
- ``a.get()`` copies to the host, ``float(a)``/``int(a)``/``a.item()``/``bool(a)`` are allowed (they sync);
- NumPy functions and ufuncs called on stand-in arrays dispatch to the stand-in namespace
  (``__array_function__``/``__array_ufunc__``, as CuPy), but refuse NumPy arrays mixed in
  ("Unsupported type numpy.ndarray");
- ``a.flags`` has ``c_contiguous``, ``f_contiguous`` and ``owndata`` only (no ``writeable``);
  reductions return 0-d arrays, not NumPy scalars; ``isinstance(a, np.ndarray)`` is False;
- the namespace :data:`xp` has only the names CuPy's module has (no ``errstate``, for example), its
  ufuncs are not ``np.ufunc`` instances, and random numbers come from the device's own generator
  (a different algorithm from the CPU's, so numbers drawn on the host and copied are told apart).

Enable it with ``EMBER_CUDA_STANDIN=1`` (the whole process) or ``ember.testing.standin_cuda()`` (a
block); then ``ember.device("cuda")``, ``.cuda()``, ``ember.cuda.is_available()`` ... work. See
docs/devices.md.

Example:
    >>> from ember.backends import standin
    >>> a = standin.xp.arange(3.0)
    >>> (a * 2).sum().item()
    6.0
    >>> import numpy as np
    >>> np.asarray(a)
    Traceback (most recent call last):
    ...
    TypeError: Implicit conversion to a NumPy array is not allowed (ember's stand-in CUDA device, as CuPy). Please use `.get()` to construct a NumPy array explicitly.
"""
from __future__ import annotations

import contextlib
import types
import weakref
from typing import Any, Callable, Iterator

import numpy as np

from ember.device import _CACHE as _DEVICE_CACHE
from ember.backends import _BACKENDS, _BY_NAMESPACE, Backend, get_backend, register_backend
from ember.backends import capture_state, standin_capture as _capture

# The public names of CuPy's top-level module (cupy/__init__.py at cupy/cupy 6b6d956, less its CUDA-only
# API): the stand-in namespace offers these where NumPy has them, so code using a NumPy-only name
# (``errstate``, ``seterr``, ``lib`` ...) fails here as on CuPy.
CUPY_NAMES = frozenset("""
AxisError ComplexWarning DataSource ModuleDeprecationWarning RankWarning TooHardError
VisibleDeprecationWarning abs absolute add all allclose amax amin angle any append apply_along_axis
apply_over_axes arange arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax argmin argpartition
argsort argwhere around array array2string array_equal array_equiv array_repr array_split array_str
asanyarray asarray asarray_chkfinite ascontiguousarray asfarray asfortranarray asnumpy astype atleast_1d
atleast_2d atleast_3d average bartlett base_repr binary_repr bincount bitwise_and bitwise_count
bitwise_not bitwise_or bitwise_xor blackman bool bool_ broadcast broadcast_arrays broadcast_shapes
broadcast_to byte byte_bounds c_ can_cast cbrt cdouble ceil cfloat choose clip column_stack common_type
complex128 complex64 complex_ complexfloating compress concatenate conj conjugate convolve copy copysign
copyto corrcoef correlate cos cosh count_nonzero cov cross csingle cumprod cumproduct cumsum
cumulative_prod cumulative_sum deg2rad degrees delete diag diag_indices diag_indices_from diagflat
diagonal diff digitize disp divide divmod dot double dsplit dstack dtype e ediff1d einsum empty
empty_like equal euler_gamma exceptions exp exp2 expand_dims expm1 extract eye fabs fft fill_diagonal
find_common_type finfo fix flatiter flatnonzero flip fliplr flipud float16 float32 float64 float_
float_power floating floor floor_divide fmax fmin fmod format_float_positional format_float_scientific
format_parser frexp from_dlpack frombuffer fromfile fromfunction fromiter fromstring full full_like gcd
generic genfromtxt get_array_module get_array_wrap get_printoptions gradient greater greater_equal half
hamming hanning heaviside histogram histogram2d histogramdd hsplit hstack hypot i0 identity iinfo imag
in1d index_exp indices inexact inf inner int16 int32 int64 int8 int_ intc integer interp intersect1d
intp invert isclose iscomplex iscomplexobj isdtype isfinite isfortran isin isinf isnan isneginf isposinf
isreal isrealobj isscalar issctype issubclass_ issubdtype issubsctype iterable ix_ kaiser kron lcm ldexp
left_shift less less_equal lexsort linalg linspace load loadtxt log log10 log1p log2 logaddexp
logaddexp2 logical_and logical_not logical_or logical_xor logspace long longlong make_aligned_dtype
mask_indices matmul matrix_transpose max maximum may_share_memory mean median meshgrid mgrid min
min_scalar_type minimum mintypecode mod modf moveaxis msort multiply nan nan_to_num nanargmax nanargmin
nancumprod nancumsum nanmax nanmean nanmedian nanmin nanprod nanstd nansum nanvar ndarray ndim ndindex
negative newaxis nextafter nonzero not_equal number obj2sctype ogrid ones ones_like outer packbits pad
partition percentile pi piecewise place poly poly1d polyadd polyfit polymul polynomial polysub polyval
positive power printoptions prod product promote_types ptp put put_along_axis putmask quantile r_
rad2deg radians random ravel ravel_multi_index real real_if_close reciprocal remainder repeat require
reshape resize result_type right_shift rint roll rollaxis roots rot90 round round_ row_stack s_
safe_eval save savetxt savez savez_compressed sctype2char searchsorted select set_printoptions
set_string_function setdiff1d setxor1d shape shares_memory short sign signbit signedinteger sin sinc
single singlecomplex sinh size sort sort_complex split sqrt square squeeze stack std subtract sum
swapaxes take take_along_axis tan tanh tensordot tile trace transpose trapezoid tri tril tril_indices
tril_indices_from trim_zeros triu triu_indices triu_indices_from true_divide trunc typename ubyte ufunc
uint uint16 uint32 uint64 uint8 uintc uintp ulong ulonglong union1d unique unique_all unique_counts
unique_inverse unique_values unpackbits unravel_index unsignedinteger unwrap ushort vander var vdot
vectorize vsplit vstack where who zeros zeros_like
""".split())
# cupy.linalg's public names (cupy/linalg/__init__.py at the same commit).
LINALG_NAMES = frozenset("""
LinAlgError annotations cholesky cond cross det eig eigh eigvals eigvalsh inv lstsq matmul matrix_power
matrix_rank matrix_transpose norm pinv qr slogdet solve svd tensorinv tensorsolve
""".split())
# Names that are values or types, not functions: passed through unwrapped.
_PLAIN = frozenset("""
bool bool_ byte cdouble complex128 complex64 complexfloating csingle double dtype e euler_gamma finfo
float16 float32 float64 floating generic half iinfo inexact inf int16 int32 int64 int8 int_ intc
integer intp long longlong nan newaxis number pi short signedinteger single ubyte uint uint16 uint32
uint64 uint8 uintc uintp ulong ulonglong unsignedinteger ushort promote_types issubdtype isdtype
s_ index_exp c_ r_ mgrid ogrid broadcast flatiter exceptions printoptions get_printoptions
set_printoptions AxisError ComplexWarning ModuleDeprecationWarning RankWarning TooHardError
VisibleDeprecationWarning Inf Infinity NAN NINF NZERO NaN PINF PZERO infty float_ complex_ cfloat
singlecomplex round_ typename
""".split())
# Host -> device transfers CuPy makes explicitly: the only functions that take NumPy arrays.
_TRANSFERS = frozenset({"array", "asarray", "asanyarray"})

_IMPLICIT = ("Implicit conversion to a NumPy array is not allowed (ember's stand-in CUDA device, as CuPy). "
             "Please use `.get()` to construct a NumPy array explicitly.")

# Live wrappers by id(numpy array): a view's ``base`` is its owner's wrapper, the same object each time,
# and NumPy handing back an input gives back its wrapper, so identity checks work as with NumPy and CuPy.
_WRAPPERS: "weakref.WeakValueDictionary[int, StandinArray]" = weakref.WeakValueDictionary()


def _host_array_error(where: str) -> TypeError:
    return TypeError(f"{where}: Unsupported type <class 'numpy.ndarray'> (a host array given to the stand-in CUDA "
                     "device, as CuPy refuses it: move it with xp.asarray(...) or Tensor.to(device) first)")


def _unwrap(value: Any, where: str) -> Any:
    """The NumPy array inside a stand-in array; refuses host arrays (recursing into lists/tuples)."""
    if type(value) is StandinArray:
        return value._a
    if isinstance(value, np.ndarray):
        raise _host_array_error(where)
    if type(value) in (list, tuple):
        return type(value)(_unwrap(v, where) for v in value)
    return value


def _unwrap_index(key: Any) -> Any:
    """Indices may be host ints, lists or NumPy index arrays (CuPy copies them to the device)."""
    if type(key) is StandinArray:
        return key._a
    if type(key) is tuple:
        return tuple(_unwrap_index(k) for k in key)
    if type(key) is list:
        return [_unwrap_index(k) for k in key]
    return key


def _wrap(value: Any) -> Any:
    """A NumPy result as stand-in arrays: arrays wrapped (views keep their owner as ``base``), NumPy
    scalars as 0-d arrays (CuPy's reductions return 0-d arrays), tuples/lists element by element."""
    kind = type(value)
    if kind is np.ndarray:
        return _wrap_array(value)
    if isinstance(value, np.generic):
        return _wrap_array(np.asarray(value))
    if kind is tuple or kind is list:
        return kind(_wrap(v) for v in value)
    if isinstance(value, tuple):  # NumPy's named results (SVDResult, QRResult, ...): CuPy returns plain tuples
        return tuple(_wrap(v) for v in value)
    return value


def _wrap_array(array: np.ndarray) -> "StandinArray":
    known = _WRAPPERS.get(id(array))
    if known is not None and known._a is array:
        return known  # NumPy handed back an array it was given (asarray, astype(copy=False)): the same object
    if not array.flags.writeable and array.base is not None:
        _make_writeable(array)
    out = StandinArray.__new__(StandinArray)
    out._a = array
    owner = array.base
    if owner is None or not isinstance(owner, np.ndarray):
        out._base = None
    else:
        out._base = _wrap_array(owner)
    _WRAPPERS[id(array)] = out
    return out


def _make_writeable(array: np.ndarray) -> None:
    """Device arrays have no read-only flag: NumPy's read-only views of writable arrays (``diagonal``)
    become writable, as CuPy's are. Broadcast views stay read-only (NumPy refuses), so a write through
    an expanded array fails here instead of silently aliasing as it would on a GPU."""
    try:
        array.flags.writeable = True
    except ValueError:
        pass


class _Flags:
    """CuPy's ``ndarray.flags``: contiguity and ownership, no ``writeable``."""

    __slots__ = ("c_contiguous", "f_contiguous", "owndata")

    def __init__(self, c_contiguous: bool, f_contiguous: bool, owndata: bool) -> None:
        self.c_contiguous, self.f_contiguous, self.owndata = c_contiguous, f_contiguous, owndata

    def __getitem__(self, name: str) -> bool:
        return {"C_CONTIGUOUS": self.c_contiguous, "F_CONTIGUOUS": self.f_contiguous, "OWNDATA": self.owndata}[name]


class _Memory:
    """``ndarray.data``: a device pointer (``.ptr``), as CuPy's MemoryPointer."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class _Device:
    """``ndarray.device``: CuPy's Device with ``.id``."""

    __slots__ = ("id",)

    def __init__(self, index: int = 0) -> None:
        self.id = index

    def __repr__(self) -> str:
        return f"<CUDA Device {self.id} (ember stand-in)>"

    def synchronize(self) -> None:
        return None


class StandinArray:
    """An array of the stand-in device (``xp.ndarray``). Build one with ``xp.asarray(host_data)``."""

    __slots__ = ("_a", "_base", "__weakref__")
    __array_priority__ = 100.0
    __hash__ = None  # type: ignore[assignment]  (arrays are unhashable, as NumPy's and CuPy's)

    def __init__(self, shape: Any, dtype: Any = float) -> None:  # cupy.ndarray(shape, dtype): uninitialized
        self._a = np.empty(shape, dtype)
        self._base = None
        _WRAPPERS[id(self._a)] = self
        if _capture.ACTIVE is not None:
            _capture.ACTIVE.allocated(self._a)

    # ---- refusing the host ---------------------------------------------------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(_IMPLICIT)

    def get(self, stream: Any = None, order: str = "C", out: Any = None, blocking: bool = True) -> np.ndarray:
        """A host copy (NumPy array)."""
        _sync("a device-to-host copy (get)")
        if out is not None:
            out[...] = self._a
            return out
        return np.array(self._a, order=order, copy=True)

    def set(self, arr: np.ndarray, stream: Any = None) -> None:
        """Copy a host array of the same shape into this array."""
        if not isinstance(arr, np.ndarray) or arr.shape != self._a.shape:
            raise ValueError("set: expected a numpy.ndarray of shape " + str(self._a.shape))
        _sync("a host-to-device copy (set)")
        self._a[...] = arr

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        own = getattr(xp, ufunc.__name__, None)
        if not isinstance(own, StandinUfunc):
            return NotImplemented
        if method != "__call__":
            return getattr(own, method)(*inputs, **kwargs)
        if "out" in kwargs:
            out = kwargs["out"]
            kwargs["out"] = out[0] if type(out) is tuple and len(out) == 1 else out
        return own(*inputs, **kwargs)

    def __array_function__(self, func: Any, types_: Any, args: tuple, kwargs: dict) -> Any:
        name = func.__name__
        module = func.__module__ or ""
        space = linalg if module.endswith("linalg") else xp
        own = getattr(space, name, None) if name in (LINALG_NAMES if space is linalg else CUPY_NAMES) else None
        if own is None:
            return NotImplemented  # NumPy then raises TypeError: no implementation for the stand-in array
        return own(*args, **kwargs)

    def __reduce__(self) -> tuple:  # pickles by value and unpickles onto the device, as CuPy arrays do
        return (_from_host, (self._a.copy(),))

    def __deepcopy__(self, memo: dict) -> "StandinArray":
        return self.copy()

    def __copy__(self) -> "StandinArray":
        return self.copy()

    # ---- attributes ------------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._a.shape

    @shape.setter
    def shape(self, value: Any) -> None:
        self._a.shape = value

    @property
    def dtype(self) -> np.dtype:
        return self._a.dtype

    @property
    def ndim(self) -> int:
        return self._a.ndim

    @property
    def size(self) -> int:
        return self._a.size

    @property
    def itemsize(self) -> int:
        return self._a.itemsize

    @property
    def nbytes(self) -> int:
        return self._a.nbytes

    @property
    def strides(self) -> tuple:
        return self._a.strides

    @property
    def base(self) -> "StandinArray | None":
        return self._base

    @property
    def flags(self) -> _Flags:
        f = self._a.flags
        return _Flags(f.c_contiguous, f.f_contiguous, self._base is None)

    @property
    def data(self) -> _Memory:
        return _Memory(self._a.__array_interface__["data"][0])

    @property
    def device(self) -> _Device:
        return _Device(0)

    @property
    def T(self) -> "StandinArray":
        return _wrap_array(self._a.T)

    @property
    def mT(self) -> "StandinArray":
        return _wrap_array(np.swapaxes(self._a, -1, -2))

    @property
    def real(self) -> "StandinArray":
        return _wrap(self._a.real)

    @property
    def imag(self) -> "StandinArray":
        return _wrap(self._a.imag)

    # ---- host reads CuPy allows (they synchronize) ---------------------------------------------------
    def item(self) -> Any:
        _sync("item()")
        return self._a.item()

    def tolist(self) -> Any:
        _sync("tolist()")
        return self._a.tolist()

    def tobytes(self, order: str = "C") -> bytes:
        _sync("tobytes()")
        return self._a.tobytes(order)

    def __float__(self) -> float:
        _sync("float(array)")
        return float(self._a)

    def __int__(self) -> int:
        _sync("int(array)")
        return int(self._a)

    def __complex__(self) -> complex:
        _sync("complex(array)")
        return complex(self._a)

    def __index__(self) -> int:
        _sync("an array used as a Python index")
        return self._a.__index__()

    def __bool__(self) -> bool:
        _sync("bool(array): a Python branch on device data")
        return bool(self._a)

    def __len__(self) -> int:
        if self._a.ndim == 0:
            raise TypeError("len() of unsized object")
        return len(self._a)

    def __iter__(self) -> Iterator["StandinArray"]:
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self._a.shape[0]))

    def __repr__(self) -> str:
        _sync("printing an array")
        return repr(self._a)

    def __str__(self) -> str:
        _sync("printing an array")
        return str(self._a)

    def __format__(self, spec: str) -> str:
        return format(self._a, spec) if self._a.ndim == 0 else str(self._a)

    # ---- indexing --------------------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> "StandinArray":
        key = _unwrap_index(key)
        if _capture.ACTIVE is not None:
            return _wrap(_captured_getitem(self._a, key))
        out = self._a[key]
        if isinstance(out, np.generic):  # x[1, 2]: CuPy gives a 0-d view, NumPy a scalar copy
            out = self._a[(key if type(key) is tuple else (key,)) + (Ellipsis,)]
        return _wrap(out)

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(value, np.ndarray):  # CuPy refuses assignment from host arrays (cupy gh-2079)
            raise _host_array_error("__setitem__")
        value = value._a if type(value) is StandinArray else value
        if _capture.ACTIVE is not None:
            _capture.ACTIVE.call(_setitem, "__setitem__", (self._a, _unwrap_index(key), value), {}, inplace=self._a)
            return
        self._a[_unwrap_index(key)] = value


def _sync(what: str) -> None:
    """A host synchronization: refused while a CUDA graph is being captured (as CUDA refuses it)."""
    if _capture.ACTIVE is not None:
        raise _capture.ACTIVE.refuse(what)


def _is_scalar(value: Any) -> bool:
    """A Python or NumPy number (a kernel argument on a GPU), not host memory to copy."""
    return type(value) in (int, float, bool, complex) or isinstance(value, np.generic)


def _setitem(array: np.ndarray, key: Any, value: Any) -> None:
    array[key] = value


def _getitem(array: np.ndarray, key: Any) -> np.ndarray:
    out = array[key]
    if isinstance(out, np.generic):  # x[1, 2]: CuPy gives a 0-d view, NumPy a scalar copy
        out = array[(key if type(key) is tuple else (key,)) + (Ellipsis,)]
    return out


def _captured_getitem(array: np.ndarray, key: Any) -> np.ndarray:
    """``x[key]`` during a capture: a boolean mask's result has a data-dependent shape (CuPy counts the
    True values on the host: a sync); a view records nothing; a gather is a kernel."""
    keys = key if type(key) is tuple else (key,)
    if any(isinstance(k, np.ndarray) and k.dtype == bool for k in keys):
        raise _capture.ACTIVE.refuse("indexing with a boolean mask: the result's shape depends on the data")
    return _capture.ACTIVE.call(_getitem, "__getitem__", (array, key), {})


def _from_host(array: np.ndarray) -> StandinArray:
    return _wrap_array(np.array(array, copy=True))


# ---- ndarray methods: NumPy's, on the wrapped array, results wrapped -----------------------------------
def _method(name: str) -> Callable:
    def method(self: StandinArray, *args: Any, **kwargs: Any) -> Any:
        where = f"ndarray.{name}"
        args = tuple(_unwrap(a, where) for a in args)
        if kwargs:
            kwargs = {k: _unwrap(v, where) for k, v in kwargs.items()}
        if _capture.ACTIVE is not None:
            inplace = self._a if name in _capture.INPLACE_METHODS else None
            return _wrap(_capture.ACTIVE.call(getattr(self._a, name), name, args, kwargs, inplace, (self._a,)))
        return _wrap(getattr(self._a, name)(*args, **kwargs))

    method.__name__ = name
    return method


# cupy.ndarray's methods (cupy/_core/core.pyx); ``get``/``set``/``item``/``tolist`` are defined above.
for _name in ("astype copy view fill reshape transpose swapaxes flatten ravel squeeze take put repeat choose sort "
              "argsort partition argpartition searchsorted nonzero compress diagonal max argmax min argmin ptp clip "
              "round trace sum cumsum mean var std prod cumprod all any conj conjugate dot byteswap").split():
    setattr(StandinArray, _name, _method(_name))


def _operator(ufunc: np.ufunc, reflected: bool = False, inplace: bool = False) -> Callable:
    name = ufunc.__name__

    def op(self: StandinArray, other: Any) -> Any:
        if isinstance(other, np.ndarray):
            raise _host_array_error(name)
        if type(other) is StandinArray:
            other = other._a
        elif type(other) not in (int, float, bool, complex) and not isinstance(other, np.generic):
            return NotImplemented
        if _capture.ACTIVE is not None:
            if inplace:
                _capture.ACTIVE.call(ufunc, name, (self._a, other), {"out": self._a})
                return self
            args = (other, self._a) if reflected else (self._a, other)
            return _wrap(_capture.ACTIVE.call(ufunc, name, args, {}))
        if inplace:
            ufunc(self._a, other, out=self._a)
            return self
        return _wrap(ufunc(other, self._a) if reflected else ufunc(self._a, other))

    return op


for _dunder, _ufunc in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("truediv", np.true_divide),
                        ("floordiv", np.floor_divide), ("mod", np.remainder), ("pow", np.power),
                        ("matmul", np.matmul), ("and", np.bitwise_and), ("or", np.bitwise_or),
                        ("xor", np.bitwise_xor), ("lshift", np.left_shift), ("rshift", np.right_shift)):
    setattr(StandinArray, f"__{_dunder}__", _operator(_ufunc))
    setattr(StandinArray, f"__r{_dunder}__", _operator(_ufunc, reflected=True))
    setattr(StandinArray, f"__i{_dunder}__", _operator(_ufunc, inplace=True))
for _dunder, _ufunc in (("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal),
                        ("eq", np.equal), ("ne", np.not_equal)):
    setattr(StandinArray, f"__{_dunder}__", _operator(_ufunc))
for _dunder, _ufunc in (("neg", np.negative), ("pos", np.positive), ("abs", np.absolute), ("invert", np.invert)):
    setattr(StandinArray, f"__{_dunder}__", (lambda u: lambda self: _wrap(
        u(self._a) if _capture.ACTIVE is None else _capture.ACTIVE.call(u, u.__name__, (self._a,), {})))(_ufunc))
StandinArray.__divmod__ = lambda self, other: (self // other, self % other)  # type: ignore[attr-defined]


# ---- the namespace ---------------------------------------------------------------------------------------
class StandinUfunc:
    """A ufunc of the stand-in namespace (``xp.add``): not an ``np.ufunc``, like ``cupy.ufunc``."""

    __slots__ = ("_f", "__name__", "nin", "nout", "nargs", "identity", "types", "ntypes")

    def __init__(self, f: np.ufunc) -> None:
        self._f = f
        self.__name__ = f.__name__
        self.nin, self.nout, self.nargs = f.nin, f.nout, f.nargs
        self.identity, self.types, self.ntypes = f.identity, f.types, f.ntypes

    def __repr__(self) -> str:
        return f"<ufunc '{self.__name__}' (ember stand-in)>"

    def _run(self, fn: Callable, where: str, args: tuple, kwargs: dict) -> Any:
        args = tuple(_unwrap(a, where) for a in args)
        if kwargs:
            kwargs = {k: _unwrap(v, where) for k, v in kwargs.items()}
        if _capture.ACTIVE is not None:
            return _wrap(_capture.ACTIVE.call(fn, where, args, kwargs))
        return _wrap(fn(*args, **kwargs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._f, self.__name__, args, kwargs)

    def reduce(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._f.reduce, self.__name__ + ".reduce", args, kwargs)

    def accumulate(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._f.accumulate, self.__name__ + ".accumulate", args, kwargs)

    def reduceat(self, a: Any, indices: Any, *args: Any, **kwargs: Any) -> Any:
        where = self.__name__ + ".reduceat"
        args = tuple(_unwrap(x, where) for x in args)  # the indices were unwrapped twice: a device array was refused
        kwargs = {k: _unwrap(v, where) for k, v in kwargs.items()}
        if _capture.ACTIVE is not None:
            return _wrap(_capture.ACTIVE.call(self._f.reduceat, where, (_unwrap(a, where), _unwrap_index(indices))
                                              + args, kwargs))
        return _wrap(self._f.reduceat(_unwrap(a, where), _unwrap_index(indices), *args, **kwargs))

    def outer(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._f.outer, self.__name__ + ".outer", args, kwargs)

    def at(self, a: StandinArray, indices: Any, b: Any = None) -> None:
        if type(a) is not StandinArray:
            raise TypeError(f"{self.__name__}.at: the target must be a stand-in device array, got {type(a).__name__}")
        args = (a._a, _unwrap_index(indices)) + (() if b is None else (_unwrap(b, self.__name__ + ".at"),))
        if _capture.ACTIVE is not None:
            _capture.ACTIVE.call(self._f.at, self.__name__ + ".at", args, {}, inplace=a._a)
            return
        self._f.at(*args)


def _function(fn: Callable, name: str) -> Callable:
    def call(*args: Any, **kwargs: Any) -> Any:
        args = tuple(_unwrap(a, name) for a in args)
        if kwargs:
            kwargs = {k: _unwrap(v, name) for k, v in kwargs.items()}
        if _capture.ACTIVE is not None:
            return _wrap(_capture.ACTIVE.call(fn, name, args, kwargs))
        return _wrap(fn(*args, **kwargs))

    call.__name__ = name
    call.__doc__ = f"{name} on the stand-in device (NumPy's, refusing host arrays)."
    return call


def _transfer_function(fn: Callable, name: str) -> Callable:
    def call(obj: Any, *args: Any, **kwargs: Any) -> StandinArray:
        if type(obj) is StandinArray:
            obj = obj._a
            if name == "asarray" or name == "asanyarray":  # no copy unless the dtype changes
                if _capture.ACTIVE is not None:
                    return _wrap(_capture.ACTIVE.call(np.asarray, name, (obj,) + args, kwargs))
                return _wrap(np.asarray(obj, *args, **kwargs))
            if _capture.ACTIVE is not None:
                return _wrap(_capture.ACTIVE.call(np.array, name, (obj,) + args, kwargs))
        elif type(obj) in (list, tuple) and any(type(v) is StandinArray for v in obj):
            obj = _unwrap(obj, name)
            if _capture.ACTIVE is not None:  # a stack of device arrays: a device kernel
                return _wrap(_capture.ACTIVE.call(np.array, name, (obj,) + args, kwargs))
        elif _capture.ACTIVE is not None:
            if not _is_scalar(obj):
                _sync(f"xp.{name} of host data: a host-to-device copy")
            # A number: a fill kernel with the value as its argument (assumed of CuPy; checked on a GPU by
            # tests/backends/test_cuda_on_gpu.py::test_capture_of_a_scalar_array).
            return _wrap(_capture.ACTIVE.call(np.array, name, (obj,) + args, kwargs))
        out = np.array(obj, *args, **kwargs)  # host data: always a copy onto the device
        return _wrap(out)

    call.__name__ = name
    return call


class _Namespace(types.ModuleType):
    """``xp`` of the stand-in device: CuPy's names (:data:`CUPY_NAMES`), each a NumPy function that
    takes and returns stand-in arrays; any other name raises AttributeError, as on CuPy."""

    def __init__(self, name: str, names: frozenset, numpy_module: Any) -> None:
        super().__init__(name)
        self._names = names
        self._numpy = numpy_module

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name not in self._names:
            raise AttributeError(f"module '{self.__name__}' has no attribute '{name}' (CuPy has none either)")
        target = getattr(self._numpy, name)
        if isinstance(target, types.ModuleType):  # xp.fft, xp.random: made on first use (NumPy loads them lazily)
            value = _Namespace(f"{self.__name__}.{name}", frozenset(n for n in dir(target) if not n.startswith("_")),
                               target)
        elif name in _PLAIN:
            value = target
        elif isinstance(target, np.ufunc):
            value = StandinUfunc(target)
        elif name in _TRANSFERS:
            value = _transfer_function(target, name)
        else:
            value = _function(target, name)
        setattr(self, name, value)  # cached: the next lookup is a plain attribute
        return value


xp = _Namespace("ember.backends.standin.xp", CUPY_NAMES | {"ndarray", "ufunc", "asnumpy", "get_array_module"}, np)
xp.ndarray = StandinArray  # type: ignore[attr-defined]
xp.ufunc = StandinUfunc  # type: ignore[attr-defined]
xp.asnumpy = lambda a, stream=None, order="C", out=None, blocking=True: (  # type: ignore[attr-defined]
    a.get(order=order, out=out) if type(a) is StandinArray else np.asarray(a, order=order))
xp.get_array_module = lambda *args: xp if any(type(a) is StandinArray for a in args) else np  # type: ignore
linalg = _Namespace("ember.backends.standin.xp.linalg", LINALG_NAMES, np.linalg)
xp.linalg = linalg  # type: ignore[attr-defined]
xp.newaxis = None  # type: ignore[attr-defined]


# ---- random numbers drawn on the device -------------------------------------------------------------------
class StandinGenerator:
    """The device's generator: NumPy's SFC64 (the CPU uses PCG64; graph streams Philox), so the stand-in
    draws other numbers than the CPU for a seed, as a GPU does, and its results are device arrays."""

    def __getattribute__(self, name: str) -> Any:
        if (_capture.ACTIVE is not None and not name.startswith("_") and name not in _CAPTURE_API
                and object.__getattribute__(self, "_captured") is None):
            raise _capture.ACTIVE.refuse(f"random numbers from the device generator ({name}): its offset is host "
                                         "state a replay would not advance (register the generator with the graph)")
        if name in _DRAWS and object.__getattribute__(self, "_captured") is not None:
            return lambda *args, **kwargs: object.__getattribute__(self, "_captured_draw")(name, args, kwargs)
        return object.__getattribute__(self, name)

    def __init__(self, seed: int, stream: int | None = None) -> None:
        entropy = [int(seed)] if stream is None else [int(seed), int(stream)]
        self._rng = np.random.Generator(np.random.SFC64(np.random.SeedSequence(entropy)))
        self._seed, self._stream, self._captured, self._graph_offset = int(seed), stream, None, 0

    # ---- registered with a CUDA graph: draws read [seed, offset] from device memory (as the CUDA backend's) ----
    def capture_begin(self, state: "StandinArray") -> None:
        if self._stream is not None:
            raise RuntimeError("only a default generator can be registered with a CUDA graph")
        self._captured = [state, 0]

    def capture_end(self) -> int:
        count = 0 if self._captured is None else self._captured[1]
        self._captured = None
        return count

    def replay_state(self, increment: int) -> np.ndarray:
        """[seed, offset] for the next replay; the offset (the stand-in's count of graph draws) advances."""
        state = np.array([self._seed % 2**63, self._graph_offset], dtype=np.int64)
        self._graph_offset += int(increment)
        return state

    def _captured_draw(self, method: str, args: tuple, kwargs: dict) -> "StandinArray":
        state, k = self._captured
        self._captured[1] += 1

        def kernel(st: np.ndarray) -> np.ndarray:  # reads the state's memory each time it runs
            rng = np.random.Generator(np.random.SFC64(np.random.SeedSequence([int(st[0]), 2**40 + int(st[1]) + k])))
            return np.asarray(_standin_draw(rng, method, args, kwargs))

        return _wrap(_capture.ACTIVE.call(kernel, f"philox_{method}", (state._a,), {}))

    def random(self, shape: Any = None, dtype: Any = np.float64) -> StandinArray:
        return _wrap_array(np.asarray(self._rng.random(shape, dtype=dtype)))

    def standard_normal(self, shape: Any = None, dtype: Any = np.float64) -> StandinArray:
        return _wrap_array(np.asarray(self._rng.standard_normal(shape, dtype=dtype)))

    def integers(self, low: int, high: int | None = None, shape: Any = None) -> StandinArray:
        return _wrap_array(np.asarray(self._rng.integers(low, high, shape, dtype=np.int64)))

    def exponential(self, scale: float = 1.0, shape: Any = None) -> StandinArray:
        return _wrap_array(np.asarray(self._rng.exponential(scale, shape)))

    def permutation(self, n: int) -> StandinArray:
        return _wrap_array(self._rng.permutation(int(n)).astype(np.int64))


_DRAWS = frozenset({"random", "standard_normal", "integers", "exponential", "permutation"})
_CAPTURE_API = frozenset({"capture_begin", "capture_end", "replay_state"})


def _standin_draw(rng: np.random.Generator, method: str, args: tuple, kwargs: dict) -> Any:
    """One draw as StandinGenerator's methods make it (their argument conventions)."""
    if method == "integers":
        named = dict(zip(("low", "high", "shape"), args), **kwargs)
        return rng.integers(named["low"], named.get("high"), named.get("shape"), dtype=np.int64)
    if method == "permutation":
        return rng.permutation(int(dict(zip(("n",), args), **kwargs)["n"])).astype(np.int64)
    return getattr(rng, method)(*args, **kwargs)


class SeededStream:
    """A stream whose seed lives in device memory (a 0-d int64 :class:`StandinArray`), as the CUDA backend's
    Philox kernels read it: each draw is a kernel reading the seed when it runs, so a captured graph draws
    new numbers after the host writes a new seed (the CUDA-graph replay of a compiled step with dropout).
    Draw ``k`` of the object equals draw ``k`` of ``StandinGenerator(int(seed), stream)``."""

    def __init__(self, seed: "StandinArray", stream: int | None) -> None:
        if seed.dtype != np.int64 or seed.ndim != 0:
            raise TypeError(f"a device seed is a 0-d int64 array, got {seed.dtype} {seed.shape}")
        self._seed, self._stream, self._calls = seed, stream, 0

    def _draw(self, method: str, *args: Any) -> "StandinArray":
        calls, stream = self._calls, self._stream
        self._calls += 1

        def kernel(seed: np.ndarray) -> np.ndarray:  # reads the seed's memory each time it runs
            rng = StandinGenerator(int(seed), stream)._rng
            for _ in range(calls):  # the earlier draws of this object, as one generator advancing
                getattr(rng, method)(*args)
            return np.asarray(getattr(rng, method)(*args))

        if _capture.ACTIVE is not None:
            return _wrap(_capture.ACTIVE.call(kernel, f"philox_{method}", (self._seed._a,), {}))
        return _wrap_array(kernel(self._seed._a))

    def random(self, shape: Any = None, dtype: Any = np.float64) -> "StandinArray":
        return self._draw("random", shape, dtype)

    def standard_normal(self, shape: Any = None, dtype: Any = np.float64) -> "StandinArray":
        return self._draw("standard_normal", shape, dtype)

    def integers(self, low: int, high: int | None = None, shape: Any = None) -> "StandinArray":
        return self._draw("integers", low, high, shape, np.int64)

    def exponential(self, scale: float = 1.0, shape: Any = None) -> "StandinArray":
        return self._draw("exponential", scale, shape)

    def permutation(self, n: int) -> "StandinArray":
        return self._draw("permutation", int(n))


# ---- the backend -----------------------------------------------------------------------------------------------
class StandinBackend(Backend):
    """Serves device type ``cuda`` with :class:`StandinArray` arrays (see the module docstring)."""

    name = "standin"
    xp = xp

    def device_count(self) -> int:
        return 1

    def asarray(self, data: Any, np_dtype: Any = None, index: int | None = 0) -> StandinArray:
        if type(data) is StandinArray:
            return data if np_dtype is None or data.dtype == np_dtype else data.astype(np_dtype)
        if _capture.ACTIVE is not None:
            if not _is_scalar(data):
                _sync("a host-to-device copy (a CPU tensor the step reads, such as an optimizer's step count: "
                      "PyTorch's Adam needs capturable=True for the same reason)")
            return _wrap(_capture.ACTIVE.call(np.array, "asarray", (data,), {"dtype": np_dtype}))
        return _wrap_array(np.array(data, dtype=np_dtype, copy=True))  # host -> device: always a copy

    def to_numpy(self, array: StandinArray) -> np.ndarray:
        return array.get()

    def is_array(self, value: Any) -> bool:
        return type(value) is StandinArray

    def may_share_memory(self, a: Any, b: Any) -> bool:
        return type(a) is StandinArray and type(b) is StandinArray and bool(np.may_share_memory(a._a, b._a))

    def item(self, array: StandinArray) -> Any:
        return array.item()

    def data_ptr(self, array: StandinArray) -> int:
        return array.data.ptr

    def special_function(self, name: str) -> Callable:
        host = get_backend("cpu").special_function(name)

        def special(*args: Any, out: Any = None) -> Any:  # cupyx.scipy.special's functions, on the device
            arrays = tuple(_unwrap(a, name) for a in args)
            result = host(*arrays) if _capture.ACTIVE is None else _capture.ACTIVE.call(host, name, arrays, {})
            if out is not None:
                out[...] = _wrap(result)
                return out
            return _wrap(result)

        return special

    # ---- CUDA-graph capture (ember/backends/standin_capture.py models what CUDA does) ---------------------
    def capture_begin(self) -> None:
        """Start capturing (``cudaStreamBeginCapture`` on a side stream)."""
        if _capture.ACTIVE is not None:
            raise RuntimeError("capture_begin: a capture is already in progress on this device")
        _capture.ACTIVE = _capture.Capture()
        capture_state.ACTIVE = True

    def capture_end(self) -> "_capture.Capture":
        """End the capture and return the graph (``.replay()``); raises when an operation invalidated it."""
        capture, _capture.ACTIVE = _capture.ACTIVE, None
        capture_state.ACTIVE = False
        if capture is None:
            raise RuntimeError("capture_end: no capture in progress")
        capture.end()
        if capture.error is not None:
            raise _capture.CaptureError(f"cudaErrorStreamCaptureInvalidated: the capture was invalidated by an "
                                        f"earlier refused operation: {capture.error}")
        return capture

    def capture_abort(self) -> None:
        """End a failed capture, leaving memory as before it (nothing captured ran)."""
        capture, _capture.ACTIVE = _capture.ACTIVE, None
        capture_state.ACTIVE = False
        if capture is not None:
            capture.end()

    def is_capturing(self) -> bool:
        return _capture.ACTIVE is not None

    device_seeded_rng = True  # as the CUDA backend: a 0-d int64 device array as a stream's seed

    def make_rng(self, seed: Any, stream: int | None = None) -> Any:
        if type(seed) is StandinArray:
            return SeededStream(seed, stream)
        return StandinGenerator(seed, stream)

    def rng_state(self, rng: StandinGenerator) -> dict:
        return rng._rng.bit_generator.state

    def set_rng_state(self, rng: StandinGenerator, state: dict) -> None:
        rng._rng.bit_generator.state = state


BACKEND = StandinBackend()
_BY_NAMESPACE[id(xp)] = BACKEND  # its arrays find their backend even while another one serves "cuda"


def enable() -> Any:
    """Serve device type ``cuda`` with the stand-in (process-wide); returns what served it before."""
    previous = _BACKENDS.get("cuda")
    register_backend("cuda", BACKEND)
    _forget_cuda_devices()
    return previous


def disable(previous: Any = None) -> None:
    """Undo :func:`enable`: ``cuda`` goes back to ``previous`` (None: loaded again on next use)."""
    if previous is None:
        _BACKENDS.pop("cuda", None)
    else:
        register_backend("cuda", previous)
    _forget_cuda_devices()


@contextlib.contextmanager
def enabled() -> Iterator[StandinBackend]:
    """``with enabled():`` device ``cuda`` is the stand-in inside the block."""
    previous = enable()
    try:
        yield BACKEND
    finally:
        if previous is not BACKEND:
            disable(previous)


def _forget_cuda_devices() -> None:
    """Cached ``device('cuda')`` objects hold their backend: drop them so new ones see the change."""
    cache = _DEVICE_CACHE
    for key in [k for k, v in cache.items() if v.type == "cuda"]:
        del cache[key]

