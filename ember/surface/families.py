"""Names PyTorch derives by rule, generated from tables so a family is complete or absent, never half there:

* in-place methods ``x.sin_()`` from the out-of-place op (``inplace.inplace_call``: writes into ``x``, bumps
  its version, rebases autograd history, refuses a result dtype ``x`` cannot hold);
* top-level in-place functions ``torch.sin_(x)``;
* Tensor methods ``x.fmax(y)`` for top-level functions ``torch.fmax(x, y)``;
* top-level spellings of ``nn.functional`` ops (``torch.conv2d``, ``torch.dropout``, ``torch.layer_norm``).

Example:
    >>> import ember
    >>> x = ember.tensor([0.0, 1.0])
    >>> x.exp_().tolist(), ember.conv1d is ember.nn.functional.conv1d
    ([1.0, 2.718281828459045], True)
"""
from __future__ import annotations

from typing import Any, Callable

from ember import _numpy_names
from ember.autograd.grad_mode import no_grad
from ember.creation import arange, empty, tensor
from ember.nn import functional
from ember.ops import strided, views
from ember.ops.views import index_select, movedim
from ember.surface.more_functions import index_reduce, put
from ember.tensor import Size, Tensor
from ember.ops import inplace
from ember.autograd import grad_mode
from ember import storage
from ember.utils import dlpack

# In-place methods generated from the out-of-place method of the same name (PyTorch's `op_` family). View
# ops (`t_`, `squeeze_`...) change metadata, not values, and are not in this table.
INPLACE_FROM_METHOD = (
    "abs", "absolute", "acos", "acosh", "addbmm", "addcdiv", "addcmul", "addmm", "addmv", "addr", "arccos",
    "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh", "asin", "asinh", "atan", "atan2", "atanh",
    "baddbmm", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "ceil", "clamp_max", "clamp_min", "clip",
    "copysign", "cos", "cosh", "cumprod", "cumsum", "deg2rad", "divide", "eq", "erf", "erfc", "erfinv", "exp",
    "exp2", "expm1", "fix", "float_power", "floor", "floor_divide", "fmod", "frac", "gcd", "ge", "greater",
    "greater_equal", "gt", "heaviside", "hypot", "index_add", "index_copy", "index_fill", "lcm", "ldexp", "le",
    "lerp", "less", "less_equal", "log", "log10", "log1p", "log2", "logical_and", "logical_not", "logical_or",
    "logical_xor", "logit", "lt", "masked_scatter", "multiply", "nan_to_num", "ne", "neg", "negative", "nextafter",
    "not_equal", "rad2deg", "reciprocal", "relu", "remainder", "renorm", "round", "rsqrt", "scatter_reduce",
    "sigmoid", "sign", "sin", "sinc", "sinh", "sqrt", "square", "subtract", "tan", "tanh", "tril", "triu",
    "true_divide", "trunc", "xlogy", "sgn", "clamp", "bitwise_left_shift", "bitwise_right_shift", "lgamma",
    "digamma", "i0", "igamma", "igammac", "mvlgamma", "sgn", "put", "index_reduce", "conj_physical",
)

# Top-level in-place functions PyTorch has (``torch.relu_(x)``): each calls the method of the same name.
INPLACE_FUNCTIONS = (
    "abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_",
    "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_",
    "deg2rad_", "erf_", "erfc_", "exp_", "exp2_", "expm1_", "fix_", "floor_", "frac_", "gcd_", "lcm_", "ldexp_",
    "log_", "log10_", "log1p_", "log2_", "logit_", "nan_to_num_", "neg_", "negative_", "rad2deg_", "reciprocal_",
    "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_",
    "trunc_", "xlogy_", "fill_", "detach_", "index_put_", "sgn_", "i0_", "lgamma_", "digamma_", "conj_physical_",
)

# Tensor methods that are the top-level function with the tensor as first argument.
METHODS_FROM_FUNCTIONS = (
    "absolute", "aminmax", "argwhere", "bincount", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor",
    "copysign", "corrcoef", "cov", "cross", "diagflat", "diagonal_scatter", "diff", "dist", "dsplit", "fliplr",
    "flipud", "float_power", "fmax", "fmin", "frexp", "gcd", "greater", "greater_equal", "heaviside", "histc",
    "histogram", "hsplit", "index_add", "index_copy", "index_fill", "inner", "is_nonzero", "is_same_size",
    "is_signed", "isin", "isneginf", "isposinf", "isreal", "kron", "lcm", "ldexp", "less", "less_equal",
    "logcumsumexp", "masked_scatter", "median", "mode", "moveaxis", "msort", "nanmean", "nanmedian",
    "nanquantile", "nansum", "negative", "nextafter", "not_equal", "positive", "quantile", "ravel", "renorm",
    "repeat_interleave", "rot90", "scatter_reduce", "select_scatter", "signbit", "sinc", "slice_scatter",
    "split_with_sizes", "swapaxes", "take", "take_along_dim", "tensor_split", "tile", "unique_consecutive",
    "unsafe_chunk", "unsafe_split", "vdot", "vsplit", "erfc", "matrix_power", "subtract", "multiply", "divide",
    "true_divide", "xlogy", "logit", "nan_to_num", "arctan2", "hypot", "get_device", "is_inference", "lerp",
    "bitwise_left_shift", "bitwise_right_shift", "allclose", "equal", "bernoulli", "multinomial", "index_put",
    "put", "index_reduce", "real", "imag", "sgn", "nonzero_static", "is_distributed", "unsafe_split_with_sizes",
    "triangular_solve", "lgamma", "digamma", "mvlgamma", "i0", "igamma",
    "igammac", "hash_tensor", "inverse", "det", "slogdet", "logdet", "cholesky", "cholesky_solve", "cholesky_inverse",
    "matrix_exp", "stft", "istft",
)

# In-place view ops: they change the tensor's shape metadata in place (no values move).
VIEW_INPLACE = {"squeeze_": "squeeze", "unsqueeze_": "unsqueeze", "t_": "t", "transpose_": "transpose",
                "swapaxes_": "swapaxes", "swapdims_": "swapdims", "as_strided_": None}

# torch.<name> -> ember.nn.functional.<name>, where PyTorch exposes the functional op at the top level too.
FROM_FUNCTIONAL = (
    "adaptive_avg_pool1d", "adaptive_max_pool1d", "alpha_dropout", "avg_pool1d", "batch_norm", "bilinear",
    "binary_cross_entropy_with_logits", "celu", "channel_shuffle", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "cosine_embedding_loss", "cosine_similarity", "ctc_loss", "dropout",
    "embedding", "embedding_bag", "feature_alpha_dropout", "group_norm", "hardshrink", "hinge_embedding_loss",
    "instance_norm", "kl_div", "layer_norm", "margin_ranking_loss", "max_pool1d", "max_pool2d", "max_pool3d",
    "pairwise_distance", "pdist", "pixel_shuffle", "pixel_unshuffle", "poisson_nll_loss", "prelu", "rms_norm",
    "rrelu", "selu", "threshold", "triplet_margin_loss", "native_channel_shuffle", "celu_", "selu_", "rrelu_",
    "threshold_", "conv_tbc", "max_pool1d_with_indices",
)


# Device-type and layout predicates: ember tensors are dense, on ember's devices (cpu, cuda) only.
FALSE_PROPERTIES = ("is_xpu", "is_mps", "is_mkldnn", "is_ipu", "is_hpu", "is_mtia", "is_maia",
                    "is_vulkan", "is_xla", "is_quantized", "is_sparse_csr", "is_nested")


# PyTorch's overlap checks between self and the tensor arguments (ember/ops/overlap.py): gathers and scatters refuse
# any shared memory, matrix products and these composites do not check, everything else refuses a partial overlap.
_GATHER_INPLACE = frozenset("index_add index_copy index_reduce scatter_reduce put".split())
_UNCHECKED_INPLACE = frozenset("addbmm addmm addmv addr baddbmm index_fill masked_scatter ldexp".split())


# In-place matrix products write a product of exactly self's shape: PyTorch refuses one that self would broadcast
# against (``x.addmm_(a, b[:, :1])`` of a (3, 3) x), which the out-of-place form accepts.
_PRODUCT_SHAPE = {
    "addmm": lambda m1, m2, *_: (m1.shape[0], m2.shape[-1]) if m1.ndim == 2 and m2.ndim == 2 else None,
    "addmv": lambda mat, vec, *_: (mat.shape[0],) if mat.ndim == 2 else None,
    "addr": lambda v1, v2, *_: (v1.shape[0], v2.shape[0]) if v1.ndim == 1 and v2.ndim == 1 else None,
    "baddbmm": lambda b1, b2, *_: (b1.shape[0], b1.shape[1], b2.shape[2]) if b1.ndim == 3 and b2.ndim == 3 else None,
    "addbmm": lambda b1, b2, *_: (b1.shape[1], b2.shape[2]) if b1.ndim == 3 and b2.ndim == 3 else None,
}


def _check_product_shape(name: str, self: Tensor, args: tuple) -> None:
    if len(args) < 2 or not all(isinstance(a, Tensor) for a in args[:2]):
        return
    shape = _PRODUCT_SHAPE[name](*args)
    if shape is not None and tuple(shape) != tuple(self.shape):
        raise RuntimeError(f"{name}_: Bad in-place call: input tensor size {list(self.shape)} and output tensor size "
                           f"{list(shape)} should match (an in-place product cannot broadcast self); use the "
                           f"out-of-place {name}")


def _inplace_method(name: str) -> Callable:
    reads_kind = "gathers" if name in _GATHER_INPLACE else None if name in _UNCHECKED_INPLACE else "reads"

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        others = tuple(a for a in args if isinstance(a, Tensor))
        if name in _PRODUCT_SHAPE:
            _check_product_shape(name, self, args)
        checks = {} if reads_kind is None else {reads_kind: (*args, *kwargs.values())}
        return inplace.inplace_call(self, name + "_", lambda t: getattr(t, name)(*args, **kwargs), others=others,
                                    **checks)

    method.__name__ = name + "_"
    method.__doc__ = f"In-place ``{name}``: ``x.{name}_(...)`` writes ``x.{name}(...)`` into ``x``."
    return method


def _view_inplace(name: str, view: str) -> Callable:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        if self.requires_grad and grad_mode.STATE.enabled:
            raise RuntimeError(f"{name}: in-place view changes of a tensor that requires grad are not supported by "
                               f"ember; use the out-of-place x = x.{view}(...)")
        viewed = getattr(self, view)(*args, **kwargs)
        self._data = viewed._data
        self._bump()
        return self

    method.__name__ = name
    method.__doc__ = f"``x.{name}(...)``: ``x`` becomes ``x.{view}(...)`` (same storage)."
    return method


def _function_as_method(fn: Callable, name: str) -> Callable:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except TypeError:
            torch_names = _numpy_names.renamed(fn, kwargs) if kwargs else None  # axis=, keepdims= as torch's parser
            if torch_names is None:
                raise
        return fn(self, *args, **torch_names)

    method.__name__ = name
    method.__doc__ = f"``x.{name}(...)`` is ``ember.{name}(x, ...)``."
    return method


def _method_as_function(name: str) -> Callable:
    def function(input: Tensor, *args: Any, **kwargs: Any) -> Any:
        return getattr(input, name)(*args, **kwargs)

    function.__name__ = name
    function.__doc__ = f"``ember.{name}(x, ...)`` is ``x.{name}(...)``."
    return function


def install_methods(namespace: dict[str, Any]) -> None:
    """Bind the generated Tensor methods (only where Tensor lacks the name: explicit code wins).

    ``namespace``: the top-level names being built (``ember`` itself is still importing).
    """
    for name in METHODS_FROM_FUNCTIONS:
        fn = namespace.get(name)
        if fn is not None and not hasattr(Tensor, name):
            setattr(Tensor, name, _function_as_method(fn, name))
    for name in INPLACE_FROM_METHOD:
        if hasattr(Tensor, name) and not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", _inplace_method(name))
    for name, view in VIEW_INPLACE.items():
        if view is not None and not hasattr(Tensor, name):
            setattr(Tensor, name, _view_inplace(name, view))
    _extra_methods()
    Tensor.polygamma = lambda self, n: namespace["polygamma"](n, self)  # torch: x.polygamma(n)
    Tensor.polygamma_ = lambda self, n: inplace.inplace_call(self, "polygamma_", lambda t: namespace["polygamma"](n, t))
    Tensor.__lshift__ = lambda self, other: namespace["bitwise_left_shift"](self, other)
    Tensor.__rshift__ = lambda self, other: namespace["bitwise_right_shift"](self, other)
    Tensor.__rlshift__ = lambda self, other: namespace["bitwise_left_shift"](other, self)
    Tensor.__rrshift__ = lambda self, other: namespace["bitwise_right_shift"](other, self)
    for name in FALSE_PROPERTIES:
        if not hasattr(Tensor, name):
            setattr(Tensor, name, property(lambda self: False, doc=f"``{name}``: always False in ember."))
    if not hasattr(Tensor, "is_cpu"):
        Tensor.is_cpu = property(lambda self: self.device.type == "cpu", doc="True for a tensor on the CPU.")


def _unfold(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """Sliding windows of ``size`` every ``step`` along ``dimension``, as a new last dim: a view (PyTorch's)."""
    return views.unfold(self, dimension, size, step)


def _fill_diagonal_(self: Tensor, fill_value: Any, wrap: bool = False) -> Tensor:
    """Fill the main diagonal (all dims equal, or a tall 2-D matrix, wrapping every ncols+1 rows if asked)."""
    import numpy as np

    if self.ndim < 2 or (self.ndim > 2 and len(set(self.shape)) != 1):
        raise RuntimeError("all dimensions of input must be of equal length")
    mask = np.zeros(tuple(self.shape), dtype=bool)
    if self.ndim == 2:
        rows, cols = self.shape
        limit = rows if wrap else min(rows, cols)
        for r in range(limit):
            c = r % (cols + 1) if wrap else r
            if c < cols:
                mask[r, c] = True
    else:
        mask[tuple([np.arange(self.shape[0])] * self.ndim)] = True
    return self.masked_fill_(tensor(mask, device=self.device), fill_value)


def _apply_(self: Tensor, fn: Any) -> Tensor:
    """Apply a Python function to every element in place (CPU; no autograd, as in PyTorch)."""
    import numpy as np

    if self.requires_grad:
        raise RuntimeError("apply_ is only implemented on CPU tensors that do not require grad")
    values = np.vectorize(fn, otypes=[self.dtype.np])(self.numpy()) if self.numel() else self.numpy()
    with no_grad():
        return self.copy_(tensor(values, dtype=self.dtype))


def _map_(self: Tensor, other: Tensor, fn: Any) -> Tensor:
    import numpy as np

    a, b = np.broadcast_arrays(self.numpy(), other.numpy())
    values = np.vectorize(fn, otypes=[self.dtype.np])(a, b) if self.numel() else a
    with no_grad():
        return self.copy_(tensor(values, dtype=self.dtype))


def _new(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """Legacy ``x.new(...)``: sizes give an uninitialized tensor, data gives a tensor, of x's dtype/device."""
    if len(args) == 1 and not isinstance(args[0], int):
        data = args[0]
        if isinstance(data, Size):  # a plain tuple or list is data, as in PyTorch
            return empty(tuple(data), dtype=self.dtype, device=self.device)
        return tensor(data, dtype=self.dtype, device=self.device)
    return empty(*args, dtype=self.dtype, device=self.device)


def _restride_view(view: Tensor, shape: tuple) -> Any:
    """PyTorch's resize_ of a view: contiguous strides from the view's storage offset, over the memory of the tensor
    it views (``torch.exp(x, out=b[27:36].view(3, 3))`` with a 3-element x writes ``b[27:30]``); None when the
    elements would run past that memory (PyTorch grows the shared storage, which NumPy memory cannot do)."""
    import numpy as _np

    root, data = view._base._data, view._data
    if not (isinstance(root, _np.ndarray) and isinstance(data, _np.ndarray)) or not root.flags.c_contiguous:
        return None
    start = data.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    count = 1
    for n in shape:
        count *= n
    if start < 0 or start + count * data.itemsize > root.nbytes or start % data.itemsize:
        return None
    raw = root.reshape(-1).view(_np.uint8)  # a view: root is C-contiguous
    return raw[start:start + count * data.itemsize].view(data.dtype).reshape(shape)


def _resize_(self: Tensor, *sizes: Any, memory_format: Any = None) -> Tensor:
    """PyTorch's ``resize_``: the same elements in row-major order under a new shape; a tensor that owns its
    memory may grow (the new elements are uninitialized: zeros here) or shrink (``t.resize_(0)``)."""
    shape = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list, Size)) else sizes
    import math as _math

    if any(not isinstance(n, int) or n < 0 for n in shape):
        raise RuntimeError(f"resize_: sizes must be non-negative integers, got {list(shape)}")
    if self.requires_grad and grad_mode.STATE.enabled:
        raise RuntimeError("cannot resize variables that require grad")
    count = _math.prod(shape)
    if self._base is not None and tuple(shape) != tuple(self.shape):
        restrided = _restride_view(self, shape)
        if restrided is None:
            raise RuntimeError(f"resize_: cannot grow a view past the memory of the tensor it views ({self.numel()} "
                               f"elements to {count} from storage offset {strided.storage_offset(self)}); resize the "
                               f"tensor it views, or build a new tensor")
        self._data = restrided
    elif count != self.numel():
        xp = self._device.xp
        flat = xp.zeros(count, dtype=self._data.dtype)
        keep = min(count, self.numel())
        flat[:keep] = self._data.reshape(-1)[:keep]
        self._data = flat.reshape(shape)
    else:
        self._data = self._data.reshape(shape)
    self._bump()
    return self


def _extra_methods() -> None:
    """Tensor methods written directly (not derived from a top-level function)."""
    F = functional
    extras = {
        "unfold": _unfold, "as_strided": strided.as_strided, "storage_offset": strided.storage_offset,
        "untyped_storage": storage.untyped_storage, "storage": storage.typed_storage, "is_set_to": storage.is_set_to,
        "__dlpack__": dlpack.tensor_dlpack, "__dlpack_device__": dlpack.tensor_dlpack_device,
        "fill_diagonal_": _fill_diagonal_, "apply_": _apply_, "map_": _map_, "new": _new,
        "resize_": _resize_, "resize_as_": lambda self, other, memory_format=None: _resize_(self, other.shape),
        "hardshrink": lambda self, lambd=0.5: F.hardshrink(self, lambd),
        "prelu": lambda self, weight: F.prelu(self, weight),
        "is_complex": lambda self: self.dtype.is_complex, "is_pinned": lambda self, device=None: False,
        "pin_memory": lambda self, device=None: self,
        "put_": lambda self, index, source, accumulate=False: inplace.inplace_call(
            self, "put_", lambda t: put(t, index, source, accumulate), gathers=(index, source)),
        "index_reduce_": lambda self, dim, index, source, reduce, include_self=True: inplace.inplace_call(
            self, "index_reduce_", lambda t: index_reduce(t, dim, index, source, reduce,
                                                                include_self=include_self), gathers=(index, source)),
    }
    for name, fn in extras.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
    if not hasattr(Tensor, "output_nr"):
        Tensor.output_nr = property(lambda self: self._output_nr, doc="Which output of its grad_fn this is.")
    if not hasattr(Tensor, "mH"):
        Tensor.mH = property(lambda self: self.transpose(-2, -1), doc="Conjugate transpose of the last two dims.")


def top_level_names() -> dict[str, Any]:
    """The top-level in-place functions and functional spellings, for ``ember/_torch_names.py``."""
    F = functional
    names: dict[str, Any] = {}
    for name in INPLACE_FUNCTIONS:
        if hasattr(Tensor, name):
            names[name] = _method_as_function(name)
    for name in FROM_FUNCTIONAL:
        fn = getattr(F, name, None)
        if fn is not None:
            names[name] = fn
    return names
