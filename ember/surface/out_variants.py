"""The ``out=`` keyword of PyTorch's functions: ``torch.add(x, y, out=z)`` writes the result into ``z``.

:data:`OUT_FUNCTIONS` names, per namespace, the functions whose PyTorch 2.13 Python signature takes ``out=``
(read from torch's argument parser: calling each with ``out=<not a tensor>`` says whether ``out`` is an
argument). :func:`install` wraps ember's function of that name, when ember has it and it does not take
``out`` itself, with :func:`with_out`, which follows PyTorch's rules for an ``out`` tensor:

* ``out`` is a tensor, or a tuple of tensors for functions with several results (``max(dim)``, ``sort``,
  ``topk``, ...); the call returns ``out`` itself (a tuple of the outs with the result's field names).
* No autograd: with grad mode on, an input or ``out`` that requires grad raises PyTorch's
  ``functions with out=... arguments don't support automatic differentiation`` error.
* dtype: the result is cast into ``out`` when PyTorch's casting rule allows it (``can_cast_result``: an
  integer result into a float ``out`` is fine, a float result into an integer ``out`` raises "result type
  Float can't be cast to the desired output type Long"); matrix products, linalg functions and every output
  of a multi-output function need ``out``'s dtype to be the result's ("Expected out tensor to have dtype
  float, but got double instead"). Reductions that take ``dtype=`` compute in ``out``'s dtype, and factories
  (``arange``, ``zeros``, ``linspace``, ...) create in ``out``'s dtype and on its device, as PyTorch.
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

from ember import dtypes
from ember.autograd import grad_mode
from ember.ops import dispatch
from ember.ops.out_arg import _torch_name  # PyTorch's scalar-type names in its messages

OUT_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "torch": tuple("""
        abs absolute acos acosh add addbmm addcdiv addcmul addmm addmv addr all amax amin aminmax angle any arange
        arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax argmin argsort asin asinh atan atan2 atanh baddbmm
        bartlett_window bernoulli bitwise_and bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift
        bitwise_xor blackman_window bmm bucketize cat ceil chain_matmul cholesky cholesky_inverse cholesky_solve clamp
        clamp_max clamp_min clip column_stack complex concat concatenate conj_physical copysign cos cosh cross cummax
        cummin cumprod cumsum deg2rad diag diff digamma div divide dot dsmm dstack empty eq erf erfc erfinv exp exp2
        expm1 eye fix float_power floor floor_divide fmax fmin fmod frac frexp full gather gcd ge geqrf ger greater
        greater_equal gt hamming_window hann_window hardshrink heaviside histc histogram hsmm hspmm hstack hypot i0
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
# ``out`` must have exactly the result's dtype (PyTorch's matmul/BLAS and linalg kernels check it).
SAME_DTYPE = frozenset("""mm bmm matmul addmm baddbmm addbmm mv addmv dot vdot outer ger addr inner chain_matmul amax amin
    tensordot kron""".split())

# PyTorch's names for dtypes in its two out= error messages (ScalarType, and the C++ type).
_SCALAR_TYPE = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
                "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
                "complex64": "ComplexFloat", "complex128": "ComplexDouble"}
_CPP_TYPE = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
             "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
             "bool": "bool", "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}

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


def _write(name: str, out: Any, value: Any, exact: bool) -> None:
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
    with grad_mode.no_grad():
        out.copy_(value)


def with_out(fn: Callable[..., Any], name: str, exact_dtype: bool = False) -> Callable[..., Any]:
    """``fn`` taking PyTorch's ``out=`` keyword (see the module docstring); without ``out`` it is ``fn``.
    ``exact_dtype``: ``out`` must have the result's dtype (torch.linalg's functions)."""
    factory, dtype_from_out, exact = name in FACTORIES, name in DTYPE_FROM_OUT, name in SAME_DTYPE or exact_dtype
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
        for o, r in zip(outs, results):
            _write(name, o, r, exact or multi)
        if not multi:
            return outs[0]
        try:
            return type(result)(*outs)  # the result's named pair (values, indices) with the outs in it
        except TypeError:
            return outs

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
