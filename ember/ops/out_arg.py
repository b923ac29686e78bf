"""PyTorch's ``out=`` keyword, one mechanism for every function: ``torch.add(x, y, out=z)`` writes into ``z``.

:data:`OUT_FUNCTIONS` names, per namespace, the functions whose PyTorch 2.13 Python signature takes ``out=``
(read from torch's argument parser: calling each with ``out=<not a tensor>`` says whether ``out`` is an
argument). :func:`install` wraps ember's function of that name (also one that declares an ``out`` it
ignored: ``linalg.inv(A, out=B)`` once left ``B`` untouched, a silent wrong result) with :func:`with_out`;
other callers (``F.normalize``) wrap theirs with :func:`with_out` directly. PyTorch's rules, checked call by
call against torch in tests/torch_surface/test_out_dtype_rules_vs_torch.py:

* ``out`` is a tensor, or a tuple of tensors for functions with several results (``max(dim)``, ``sort``,
  ``topk``, ...); the call returns ``out`` itself (a tuple of the outs with the result's field names).
* No autograd: with grad mode on, an input or ``out`` that requires grad raises PyTorch's
  ``functions with out=... arguments don't support automatic differentiation`` error.
* dtype: the result is cast into ``out`` when PyTorch's casting rule allows it (``can_cast_result``: an
  integer result into a float ``out`` is fine, a float result into an integer ``out`` raises "result type
  Float can't be cast to the desired output type Long"). Kernels that check the dtype themselves need ``out``'s
  dtype to be the result's (:data:`SAME_DTYPE`: matrix products, rounding and sign, softmax, quantile, most of
  torch.linalg, every output of a multi-output function): "Expected out tensor to have dtype float, but got
  double instead". Predicates (``isin``, ``signbit``, ...) write only bool outs, ``any``/``all`` bool or uint8,
  index functions (``nonzero``, ``searchsorted``) int64. Reductions that take ``dtype=`` compute in ``out``'s
  dtype, ``std``/``var`` in a wider float ``out``'s, and factories (``arange``, ``zeros``, ``linspace``, ...)
  create in ``out``'s dtype and on its device, as PyTorch. Full reductions torch has no out= overload for
  (``sum(x, out=o)`` without a dim) raise TypeError.
* shape: an ``out`` of another shape is resized; PyTorch's deprecation warning is given when it had elements.

Example:
    >>> import ember
    >>> z = ember.empty(3)
    >>> ember.add(ember.tensor([1, 2, 3]), 1, out=z) is z
    True
    >>> z
    tensor([2., 3., 4.])
"""
from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable

from ember import dtypes, return_types
from ember.autograd import grad_mode
from ember.ops import dispatch, overlap

OUT_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "torch": tuple("""
        abs absolute acos acosh add addbmm addcdiv addcmul addmm addmv addr all amax amin aminmax angle any arange
        arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax argmin argsort asin asinh atan atan2 atanh baddbmm
        bartlett_window bernoulli bitwise_and bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift
        bitwise_xor blackman_window bmm bucketize cat ceil chain_matmul cholesky cholesky_inverse cholesky_solve clamp
        clamp_max clamp_min clip column_stack complex concat concatenate conj_physical copysign cos cosh cross cummax
        cummin cumprod cumsum deg2rad diag diff digamma div divide dot dsmm dstack empty eq erf erfc erfinv exp exp2
        expm1 eye fix float_power floor floor_divide fmax fmin fmod frac frexp full gather gcd ge geqrf ger greater
        greater_equal gt hamming_window hann_window hardshrink hash_tensor heaviside histc histogram hsmm hspmm hstack hypot i0
        igamma igammac index_add index_copy index_select inner inverse isin isneginf isposinf kaiser_window kron
        kthvalue lcm ldexp le lerp less less_equal lgamma linspace log log10 log1p log2 log_softmax logaddexp
        logaddexp2 logcumsumexp logical_and logical_not logical_or logical_xor logit logspace logsumexp lt lu_solve
        lu_unpack masked_select matmul matrix_power max maximum mean median min minimum mm mode msort mul multinomial
        multiply mv mvlgamma nan_to_num nanmean nanmedian nanquantile nansum ne neg negative nextafter nonzero norm
        normal not_equal nuclear_norm ones orgqr ormqr outer polar polygamma pow prod qr quantile rad2deg rand randint
        randn randperm range reciprocal remainder renorm round row_stack rsqrt saddmm scatter scatter_add
        scatter_reduce searchsorted sgn sigmoid sign signbit sin sinc sinh slice_scatter slogdet softmax sort spmm
        sqrt square sspaddmm stack std sub subtract sum svd take take_along_dim tan tanh tensordot threshold topk
        triangular_solve tril triu true_divide trunc var vdot vstack where xlogy zeros
    """.split()),
    "special": tuple("""
        airy_ai bessel_j0 bessel_j1 bessel_y0 bessel_y1 chebyshev_polynomial_t chebyshev_polynomial_u
        chebyshev_polynomial_v chebyshev_polynomial_w digamma entr erf erfc erfcx erfinv exp2 expit expm1 gammainc
        gammaincc gammaln hermite_polynomial_h hermite_polynomial_he i0 i0e i1 i1e laguerre_polynomial_l
        legendre_polynomial_p log1p log_ndtr logit logsumexp modified_bessel_i0 modified_bessel_i1 modified_bessel_k0
        modified_bessel_k1 multigammaln ndtr ndtri polygamma psi round scaled_modified_bessel_k0
        scaled_modified_bessel_k1 shifted_chebyshev_polynomial_t shifted_chebyshev_polynomial_u
        shifted_chebyshev_polynomial_v shifted_chebyshev_polynomial_w sinc spherical_bessel_j0 xlog1py xlogy zeta
    """.split()),
    "linalg": tuple("""
        cholesky cholesky_ex cond cross det eig eigh eigvals eigvalsh householder_product inv inv_ex ldl_factor
        ldl_factor_ex ldl_solve lstsq lu lu_factor lu_factor_ex lu_solve matmul matrix_norm matrix_power matrix_rank
        multi_dot norm pinv qr slogdet solve solve_ex solve_triangular svd svdvals tensorinv tensorsolve vecdot
        vector_norm
    """.split()),
    "fft": tuple("""
        fft fft2 fftfreq fftn hfft hfft2 hfftn ifft ifft2 ifftn ihfft ihfft2 ihfftn irfft irfft2 irfftn rfft rfft2
        rfftfreq rfftn
    """.split()),
}

# Created in out's dtype and on its device (PyTorch's factory functions take both from ``out``).
FACTORIES = frozenset("""arange range linspace logspace zeros ones full empty eye rand randn randint randperm
    bartlett_window blackman_window hamming_window hann_window kaiser_window fftfreq rfftfreq""".split())
# Reductions computed in out's dtype (PyTorch passes ``out.dtype`` as the op's dtype).
DTYPE_FROM_OUT = frozenset("sum nansum prod mean nanmean cumsum cumprod".split())
# Reductions without ``dtype=`` that PyTorch still computes in a wider float ``out``'s dtype: the input is cast first.
INPUT_TO_OUT_DTYPE = frozenset("std var".split())
# ``out`` must have exactly the result's dtype: PyTorch's matmul/BLAS kernels, and the ops whose kernels check the
# dtype themselves (rounding, sign, softmax, sorting, quantile, triangles, ...). Read from torch 2.13 call by call.
SAME_DTYPE = frozenset("""mm bmm matmul addmm baddbmm addbmm mv addmv dot vdot addr inner amax amin tensordot
    abs absolute neg negative sign sgn round trunc fix floor ceil frac conj_physical bitwise_not nan_to_num hardshrink
    heaviside lerp softmax log_softmax logcumsumexp msort quantile nanquantile histc norm nuclear_norm inverse cross diag
    tril triu slice_scatter take spmm dsmm float_power argmax argmin nonzero bucketize searchsorted hash_tensor""".split())
# torch.linalg's functions need out's exact dtype too (``exact_dtype``), except these, which cast like add.
LINALG_CAST = frozenset("cond matrix_power matrix_rank pinv".split())
# clamp with number bounds checks out's dtype itself ("Found dtype Double but expected Float"); with tensor bounds
# it casts like add. where always needs the result's dtype.
_CLAMPS = frozenset("clamp clip clamp_min clamp_max".split())
# Predicates write bool outs only; any/all also take uint8 (their uint8 overload); complex-to-real FFTs a real out.
BOOL_OUT = frozenset("isin isneginf isposinf signbit".split())
BOOL_OR_BYTE_OUT = frozenset("any all".split())
REAL_OUT = frozenset("irfft irfft2 irfftn hfft hfft2 hfftn".split())
# Full reductions PyTorch has no out= overload for: ``sum(x, out=o)`` is a TypeError, ``sum(x, 0, out=o)`` is fine.
NEEDS_DIM = frozenset("sum prod median nanmedian".split())

# PyTorch's names for dtypes in its two out= error messages (ScalarType, and the C++ type).
_SCALAR_TYPE = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
                "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
                "complex64": "ComplexFloat", "complex128": "ComplexDouble"}
_CPP_TYPE = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
             "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
             "bool": "bool", "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}

# PyTorch's overlap checks between ``out`` and the inputs (ember/ops/overlap.py), read from torch 2.13 function by
# function: TensorIterator's ops refuse an out that partially overlaps an input (``exp(x, out=x)`` is fine,
# ``exp(x, out=x.t())`` raises); gathers, scatters and concatenations refuse any shared memory (``max``/``min``/
# ``median`` in their dim forms only); matrix products, reductions, softmax, triangles and torch.linalg do not check.
OVERLAP_PARTIAL = frozenset("""
    abs absolute acos acosh add addbmm addcdiv addcmul addmm angle arccos arccosh arcsin arcsinh arctan arctan2
    arctanh asin asinh atan atan2 atanh baddbmm bitwise_and bitwise_left_shift bitwise_not bitwise_or
    bitwise_right_shift bitwise_xor ceil chain_matmul clamp clamp_max clamp_min clip conj_physical copysign cos cosh
    cumprod cumsum deg2rad digamma div divide eq erf erfc erfcx erfinv exp exp2 expit expm1 entr fix float_power floor
    floor_divide fmax fmin fmod frac frexp gammainc gammaincc gammaln gcd ge greater greater_equal gt hardshrink
    heaviside hypot i0 i0e i1 i1e igamma igammac isneginf isposinf lcm ldexp le lerp less less_equal lgamma log log10
    log1p log2 log_ndtr logaddexp logaddexp2 logcumsumexp logical_and logical_not logical_or logical_xor logit lt
    maximum minimum msort mul multiply nan_to_num ndtri ne neg negative nextafter not_equal polygamma pow psi
    rad2deg reciprocal remainder renorm round rsqrt sgn sigmoid sign signbit sin sinc sinh sort sqrt square sub
    subtract tan tanh true_divide trunc where xlog1py xlogy zeta airy_ai bessel_j0 bessel_j1 bessel_y0 bessel_y1
    chebyshev_polynomial_t chebyshev_polynomial_u chebyshev_polynomial_v chebyshev_polynomial_w hermite_polynomial_h
    hermite_polynomial_he laguerre_polynomial_l legendre_polynomial_p modified_bessel_i0 modified_bessel_i1
    modified_bessel_k0 modified_bessel_k1 scaled_modified_bessel_k0 scaled_modified_bessel_k1
    shifted_chebyshev_polynomial_t shifted_chebyshev_polynomial_u shifted_chebyshev_polynomial_v
    shifted_chebyshev_polynomial_w spherical_bessel_j0""".split())
OVERLAP_PARTIAL_AFTER = frozenset("mode topk".split())
OVERLAP_NONE = frozenset("""cat concat concatenate column_stack hstack vstack row_stack dstack stack cross ger outer
    addr index_add index_copy index_select gather take take_along_dim scatter scatter_add scatter_reduce
    masked_select kthvalue kron""".split())
OVERLAP_PARTIAL_WITH_DIM = frozenset("max min median nanmedian".split())  # their (values, indices) forms
# LAPACK wrappers write straight into a column-major out after copying an input into it: copy_'s check fires for an
# out that is the transpose of an input's memory, not for other overlaps (their result is then copied in).
OVERLAP_COLUMN_MAJOR = frozenset("cholesky_inverse geqrf qr lu_factor lu_factor_ex solve solve_ex".split())


# These resize ``out`` first and check after (``cumsum(x, 0, out=w)`` with a w that shrinks off x is fine).
OVERLAP_AFTER_RESIZE = frozenset("""cumsum cumprod logcumsumexp sort msort topk mode gather max min median nanmedian
    cat concat concatenate column_stack hstack vstack row_stack dstack stack take_along_dim cross index_add index_copy
    renorm""".split())


def _check_overlap(name: str, outs: tuple, multi: bool, args: tuple, kwargs: dict) -> None:
    if name in OVERLAP_PARTIAL or name in OVERLAP_PARTIAL_AFTER or (multi and name in OVERLAP_PARTIAL_WITH_DIM):
        check = overlap.check_partial
    elif name in OVERLAP_NONE:
        check = overlap.check_none
    elif name in OVERLAP_COLUMN_MAJOR:
        outs = tuple(o for o in outs if o.ndim >= 2 and o.shape[-2] > 1 and o.stride()[-2] == 1
                     and o.stride()[-1] == o.shape[-2])
        check = overlap.check_partial
    else:
        return
    for o in outs:
        check(name, o, (*args, *kwargs.values()))


def _torch_name(dtype: Any) -> str:
    """PyTorch's ScalarType name of ``dtype`` (``Float``, ``Long``, ...), as its messages print it."""
    name = str(dtype).split(".")[-1]
    return _SCALAR_TYPE.get(name, name)


_RESIZED = ("An output with one or more elements was resized since it had shape {old}, which does not match the "
            "required output shape {new}. This behavior is deprecated, and in a future PyTorch release outputs will "
            "not be resized unless they have zero elements. You can explicitly reuse an out tensor t by resizing it, "
            "inplace, to zero elements with t.resize_(0).")


def _any_requires_grad(values: Any) -> bool:
    for v in values:
        if isinstance(v, dispatch.Tensor):
            if v.requires_grad:
                return True
        elif isinstance(v, (list, tuple)) and _any_requires_grad(v):
            return True
    return False


def _check_out_type(name: str, out: Any, multi: bool) -> tuple:
    outs = tuple(out) if isinstance(out, (tuple, list)) and multi else (out,)
    for o in outs:
        if not isinstance(o, dispatch.Tensor):
            kind = "tuple of Tensors" if multi else "Tensor"
            raise TypeError(f"{name}(): argument 'out' must be {kind}, not {type(out).__name__}")
    return outs


def _write(name: str, out: Any, value: Any, exact: bool, after_resize: Callable[[], None] | None = None) -> None:
    """Cast-check, resize and copy ``value`` into ``out`` (no autograd recording)."""
    if out.device != value.device:
        raise RuntimeError(f"{name}(): Expected out tensor to have device {value.device}, but got {out.device} "
                           f"instead; create out on the inputs' device (e.g. torch.empty(0, device=x.device))")
    if exact and out.dtype is not value.dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {_CPP_TYPE.get(value.dtype.name, value.dtype.name)}, "
                           f"but got {_CPP_TYPE.get(out.dtype.name, out.dtype.name)} instead")
    if not dtypes.can_cast_result(value.dtype, out.dtype):
        raise RuntimeError(f"result type {_SCALAR_TYPE.get(value.dtype.name, value.dtype.name)} can't be cast to the "
                           f"desired output type {_SCALAR_TYPE.get(out.dtype.name, out.dtype.name)}")
    if tuple(out.shape) != tuple(value.shape):
        if out.numel() != 0:
            warnings.warn(_RESIZED.format(old=list(out.shape), new=list(value.shape)), UserWarning, stacklevel=4)
        out.resize_(tuple(value.shape))
    if after_resize is not None:
        after_resize()
    with grad_mode.no_grad():
        out.copy_(value)


def _refuse_before_computing(name: str, args: tuple, kwargs: dict, out: Any) -> None:
    """The calls PyTorch refuses from the arguments alone (no out= overload; no kernel for out's dtype)."""
    if name in NEEDS_DIM and len(args) < 2 and "dim" not in kwargs:
        raise TypeError(f"{name}() received an invalid combination of arguments: out= needs a dim ({name}(x, dim, "
                        f"out=o)); PyTorch has no out= form of the full reduction")
    if name == "argsort" and "stable" not in kwargs:
        raise TypeError("argsort() received an invalid combination of arguments: out= is taken only with the keyword "
                        "stable (argsort(x, stable=False, dim=d, out=o)), as PyTorch")
    first = args[0] if args and isinstance(args[0], dispatch.Tensor) else None
    if first is None or not isinstance(out, dispatch.Tensor):
        return
    if name in ("nansum", "nanmean") and first.dtype.is_floating_point and not out.dtype.is_floating_point:
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'{_torch_name(out.dtype)}\': {name} computes in '
                                  f"out's dtype, which must be floating point (or compute with dtype= and cast)")
    if name == "cumprod" and out.dtype is dtypes.bool_:
        raise NotImplementedError("\"cumprod_out_cpu\" not implemented for 'Bool': cumprod computes in out's dtype")
    if name in ("mean", "nanmean") and first.dtype.is_complex and not out.dtype.is_complex and len(args) < 2 \
            and "dim" not in kwargs:  # torch's full mean checks the input's dtype; with a dim it keeps the real part
        raise RuntimeError(f"{name}.dtype_out(): input types can't be cast to the desired output type "
                           f"{_torch_name(out.dtype)} (a {_torch_name(first.dtype)} input's full mean into a real out)")


def _dtype_rule(name: str, out: Any, value: Any) -> None:
    """The out dtypes PyTorch's predicates and complex-to-real FFTs accept (beside the cast rule)."""
    if name in BOOL_OUT and out.dtype is not dtypes.bool_:
        raise RuntimeError(f"{name}(): out must be a bool tensor, got {_torch_name(out.dtype)}")
    if name in BOOL_OR_BYTE_OUT and _torch_name(out.dtype) not in ("Bool", "Byte"):
        raise RuntimeError(f"{name} only supports bool tensor for result, got: {_torch_name(out.dtype)}")
    if name in REAL_OUT and out.dtype.is_complex:
        raise RuntimeError(f"{name}: expects a floating point output tensor, but got {_torch_name(out.dtype)}")


def with_out(fn: Callable[..., Any], name: str, exact_dtype: bool = False) -> Callable[..., Any]:
    """``fn`` taking PyTorch's ``out=`` keyword (see the module docstring); without ``out`` it is ``fn``.
    ``exact_dtype``: ``out`` must have the result's dtype (torch.linalg's functions but :data:`LINALG_CAST`)."""
    factory, dtype_from_out = name in FACTORIES, name in DTYPE_FROM_OUT
    exact = name in SAME_DTYPE or (exact_dtype and name not in LINALG_CAST)
    real_only = name in ("abs", "absolute")  # torch's abs casts a complex input's real result like add
    try:
        takes_dtype = "dtype" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        takes_dtype = False

    @functools.wraps(fn)
    def call(*args: Any, out: Any = None, **kwargs: Any) -> Any:
        if out is None:
            return fn(*args, **kwargs)
        multi = isinstance(out, (tuple, list))  # PyTorch takes a tuple for several results, never a list for one
        outs = _check_out_type(name, out, multi)
        if grad_mode.STATE.enabled and (_any_requires_grad(args) or _any_requires_grad(kwargs.values())
                                        or _any_requires_grad(outs)):
            raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                               f"differentiation, but one of the arguments requires grad.")
        _refuse_before_computing(name, args, kwargs, outs[0])
        late = name in OVERLAP_AFTER_RESIZE
        if not late:
            _check_overlap(name, outs, multi, args, kwargs)
        if factory:
            if kwargs.get("dtype") is not None and kwargs["dtype"] != outs[0].dtype:
                raise RuntimeError(f"dtype {_torch_name(kwargs['dtype'])} does not match dtype of out parameter "
                                   f"({_torch_name(outs[0].dtype)})")
            kwargs.setdefault("dtype", outs[0].dtype)
            kwargs.setdefault("device", outs[0].device)
        elif dtype_from_out and takes_dtype and kwargs.get("dtype") is None:
            kwargs["dtype"] = outs[0].dtype
        elif name in INPUT_TO_OUT_DTYPE and args and isinstance(args[0], dispatch.Tensor) and \
                args[0].dtype.is_floating_point and outs[0].dtype.is_floating_point and \
                outs[0].dtype.itemsize > args[0].dtype.itemsize:
            args = (args[0].to(outs[0].dtype),) + tuple(args[1:])
        result = fn(*args, **kwargs)
        if multi and isinstance(result, dispatch.Tensor):
            raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
        results = tuple(result) if multi else (result,)
        if len(results) != len(outs):
            raise RuntimeError(f"{name}(): expected {len(results)} out tensors, got {len(outs)}")
        same = exact or name == "where" or (name in _CLAMPS and not any(
            isinstance(v, dispatch.Tensor) for v in tuple(args[1:]) + tuple(kwargs.values())))
        for o, r in zip(outs, results):
            _dtype_rule(name, o, r)
            if name in BOOL_OR_BYTE_OUT and r.dtype is not o.dtype:  # a uint8 input's 0/1 into a bool out, as torch
                r = r.to(o.dtype)
            _write(name, o, r, multi or (same and not (real_only and args and getattr(args[0], "is_complex", bool)())),
                   (lambda o=o: _check_overlap(name, (o,), multi, args, kwargs)) if late else None)
        if not multi:
            return outs[0]
        return return_types.with_outs(result, outs)  # ``max_out(values=..., indices=...)`` holding the outs

    call.__signature__ = _signature_with_out(fn)  # type: ignore[attr-defined]
    call._handles_out = True  # type: ignore[attr-defined]
    return call


def _signature_with_out(fn: Callable[..., Any]) -> Any:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD and p.name != "out"]
    out = inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None)
    rest = [p for p in sig.parameters.values() if p.kind is p.VAR_KEYWORD]
    try:
        return sig.replace(parameters=params + [out] + rest)
    except ValueError:
        return None


def install(namespace: Any, names: tuple[str, ...], exact_dtype: bool = False) -> int:
    """Wrap each function of ``namespace`` (a module or a dict of globals) named in ``names`` that ember has (also
    those declaring an ``out`` parameter they ignored); returns how many were wrapped."""
    get = namespace.get if isinstance(namespace, dict) else (lambda n: getattr(namespace, n, None))
    put = namespace.__setitem__ if isinstance(namespace, dict) else (lambda n, v: setattr(namespace, n, v))
    wrapped = 0
    for name in names:
        fn = get(name)
        if fn is None or not callable(fn) or isinstance(fn, type) or getattr(fn, "_handles_out", False):
            continue
        put(name, with_out(fn, name, exact_dtype))
        wrapped += 1
    return wrapped
