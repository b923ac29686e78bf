"""The OpInfo sweep's known differences: each with the ops it covers, a narrow predicate on the reported problem,
and why it stays (a decision, torch's own behaviour, or a gap listed in docs/testing.md "left").

Example:
    >>> allowed(op, "complex64", "conj [function, ...]: aliasing: ...")   # the reason, or None
"""
from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class Allow:
    ops: tuple            # op names (OpInfo ``name``) or prefixes ending in "."
    text: str             # a substring of the problem
    reason: str
    dtypes: tuple = ()    # empty: any dtype

    def matches(self, name: str, dtype: str, problem: str) -> bool:
        if self.dtypes and dtype not in self.dtypes:
            return False
        if not any(name == o or (o.endswith(".") and name.startswith(o)) for o in self.ops):
            return False
        return self.text in problem


INTS = ("bool", "uint8", "int8", "int16", "int32", "int64")
HALF = ("float16", "bfloat16")

ALLOW = [
    # ---- decisions and gaps ember documents -------------------------------------------------------------------
    Allow(("conj", "H", "mH", "adjoint", "conj_physical", "resolve_conj"), "aliasing",
          "lazy conjugation (torch's conj is a view with a conj bit; ember's conj copies): README 'Not here yet'"),
    Allow(("view_as_real", "view_as_complex"), "aliasing",
          "view_as_real/view_as_complex copy (a strided complex view of float memory needs a dtype-reinterpreting "
          "view record with its own vjp; left)"),
    Allow(("view_as_complex", "complex", "chalf", "polar"), "aliasing", "complex32 (ember has none)", HALF),
    Allow(("view_as_complex", "complex", "polar"), "ember raises", "complex32: ember has no half complex dtype",
          HALF),
    Allow(("topk", "kthvalue", "mode", "sort", "argsort", "msort", "median", "nanmedian", "max.reduction_with_dim",
           "min.reduction_with_dim", "nn.functional.max_pool1d", "nn.functional.max_pool2d", "nn.functional.max_pool3d",
           "nn.functional.adaptive_max_pool1d", "nn.functional.adaptive_max_pool2d",
           "nn.functional.adaptive_max_pool3d", "cummax", "cummin", "argmax", "argmin"),
          "(int64): values differ",
          "which index wins a tie (equal integers or bools): torch's kernel order, not specified (trust_allow.py)",
          INTS + HALF),
    Allow(("floor_divide", "div.floor_rounding", "div.trunc_rounding", "frexp", "nextafter", "norm", "linalg.norm",
           "linalg.vector_norm", "linalg.matrix_power", "cdist", "nn.functional.pdist", "combinations", "fill",
           "linalg.householder_product", "mode", "norm.", "linalg.norm."),
          "gradients: ember False, torch True",
          "ops whose gradient is zero (or empty) everywhere: torch's result requires grad and backward gives zeros; "
          "ember's result is detached, so backward through it alone raises (left: a non-silent difference)"),
    Allow(("linspace", "linspace.tensor_overload"), "values differ",
          "integer linspace: torch's vectorized kernel accumulates by its vector width (AVX-512 vs AVX2 give "
          "different values at exact integers); ember truncates the ends first and counts from both ends as its "
          "scalar loop (tests/trust/test_trust_regressions_opinfo_vs_torch.py)", INTS),
    Allow(("nn.functional.soft_margin_loss", "nn.functional.binary_cross_entropy_with_logits", "sinc",
           "nn.functional.softplus", "nn.functional.mish", "logaddexp", "logaddexp2"), "infinities differ",
          "torch computes half precision in half (exp overflows to inf), ember in float32 rounded once", HALF),
    Allow(("polygamma.", "special.polygamma.", "mvlgamma."), "infinities differ",
          "polygamma at its poles (non-positive integers): inf is the value; torch's float32 series gives 1e13..1e15"),
    Allow(("trapz", "trapezoid", "cumulative_trapezoid"), "values differ",
          "torch's own uint8 wrap in trapezoid (trust_allow.py)", ("uint8",)),
    Allow(("nn.functional.pad.circular",), "values differ",
          "torch's circular pad with negative pads returns uninitialized memory (trust_allow.py)"),
    Allow(("sgn", "abs", "nn.functional.relu"), "ZeroTensor", "torch's internal ZeroTensor gradients"),
    Allow(("to_sparse", "sparse."), "harness", "sparse layouts are not bridged"),
    Allow(("hash_tensor",), "harness", "uint64 (ember has no unsigned 64-bit dtype)"),
    Allow(("nn.functional.scaled_dot_product_attention", "nn.functional.multi_head_attention_forward"),
          "values differ", "dropout_p > 0 draws from each library's own generator"),
    Allow(("svd_lowrank", "pca_lowrank", "linalg.eigh", "linalg.lstsq", "linalg.svd", "svd", "linalg.eig",
           "linalg.qr", "qr"), "gradient",
          "gradients of results that are unique only up to signs/phases (trust_opinfo.AMBIGUOUS_VALUES)"),
    # ---- torch's own quirks ----------------------------------------------------------------------------------
    Allow(("abs",), "In-place abs is not supported for complex",
          "torch refuses complex abs_ (its result would be real); ember writes |x| into the complex tensor "
          "(left: refuses nothing wrong)"),
    Allow(("float_power",), "the base given to float_power_ has dtype",
          "torch refuses float_power_ of non-float64 bases; ember computes in float64 and casts back (left)"),
]


def allowed(op: Any, dtype: str, problem: str) -> str | None:
    """The reason ``problem`` is a known difference, or None."""
    for entry in ALLOW:
        if entry.matches(op.name, dtype, problem):
            return entry.reason
    return None
