"""PyTorch's words for its deprecated and removed top-level linear algebra (``torch.qr``, ``torch.lu``,
``torch.lu_solve``, ``torch.cholesky``, ``torch.triangular_solve``, ``torch.chain_matmul``; ``torch.solve``,
``torch.lstsq``, ``torch.eig``, ``torch.symeig``, ``torch.matrix_rank``).

The deprecated ones warn once per process (torch's TORCH_WARN_ONCE: the function and the Tensor method share
the one warning), at the first line outside ember, in torch's text; the removed ones raise torch's
RuntimeError naming the ``torch.linalg`` replacement. Programs written before torch 1.9 (flow libraries,
old tutorials) call them, and their logs carry these lines in torch.

Example:
    >>> import ember
    >>> ember.symeig(ember.eye(2))
    Traceback (most recent call last):
    ...
    RuntimeError: This function was deprecated since version 1.9 and is now removed. ...
"""
from __future__ import annotations

from typing import Any, Callable

from ember._warn_once import warn_once

__all__ = ["solve", "lstsq", "eig", "symeig", "matrix_rank"]

DEPRECATED = {
    "qr": "torch.qr is deprecated in favor of torch.linalg.qr and will be removed in a future PyTorch release.\n"
          "The boolean parameter 'some' has been replaced with a string parameter 'mode'.\n"
          "Q, R = torch.qr(A, some)\nshould be replaced with\n"
          "Q, R = torch.linalg.qr(A, 'reduced' if some else 'complete')",
    "lu": "torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex and will be removed "
          "in a future PyTorch release.\nLU, pivots = torch.lu(A, compute_pivots)\nshould be replaced with\n"
          "LU, pivots = torch.linalg.lu_factor(A, compute_pivots)\nand\n"
          "LU, pivots, info = torch.lu(A, compute_pivots, get_infos=True)\nshould be replaced with\n"
          "LU, pivots, info = torch.linalg.lu_factor_ex(A, compute_pivots)",
    # torch's text lacks the space in "lu_solveand" and "solve_triangularand"; kept, logs are compared as text
    "lu_solve": "torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be removed in a future "
                "PyTorch release.\nNote that torch.linalg.lu_solve has its arguments reversed.\n"
                "X = torch.lu_solve(B, LU, pivots)\nshould be replaced with\nX = torch.linalg.lu_solve(LU, pivots, B)",
    "cholesky": "torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a future "
                "PyTorch release.\nL = torch.cholesky(A)\nshould be replaced with\nL = torch.linalg.cholesky(A)\nand\n"
                "U = torch.cholesky(A, upper=True)\nshould be replaced with\nU = torch.linalg.cholesky(A).mH\n"
                "This transform will produce equivalent results for all valid (symmetric positive definite) inputs.",
    "triangular_solve": "torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangularand will be "
                        "removed in a future PyTorch release.\ntorch.linalg.solve_triangular has its arguments "
                        "reversed and does not return a copy of one of the inputs.\n"
                        "X = torch.triangular_solve(B, A).solution\nshould be replaced with\n"
                        "X = torch.linalg.solve_triangular(A, B).",
    "chain_matmul": "torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                    "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than "
                    "multiple parameters.",
}

_REMOVED_HEAD = "This function was deprecated since version 1.9 and is now removed."
REMOVED = {
    "symeig": " The default behavior has changed from using the upper triangular portion of the matrix by default "
              "to using the lower triangular portion.\n\nL, _ = torch.symeig(A, upper=upper) should be replaced "
              "with:\nL = torch.linalg.eigvalsh(A, UPLO='U' if upper else 'L')\n\nand\n\nL, V = torch.symeig(A, "
              "eigenvectors=True) should be replaced with:\nL, V = torch.linalg.eigh(A, UPLO='U' if upper else 'L')",
    "eig": " `torch.linalg.eig` returns complex tensors of dtype `cfloat` or `cdouble` rather than real tensors "
           "mimicking complex tensors.\n\nL, _ = torch.eig(A) should be replaced with:\n"
           "L_complex = torch.linalg.eigvals(A)\n\nand\n\nL, V = torch.eig(A, eigenvectors=True) should be replaced "
           "with:\nL_complex, V_complex = torch.linalg.eig(A)",
    "solve": " `torch.solve` is deprecated in favor of `torch.linalg.solve`. `torch.linalg.solve` has its arguments "
             "reversed and does not return the LU factorization.\n\nTo get the LU factorization see `torch.lu`, which "
             "can be used with `torch.lu_solve` or `torch.lu_unpack`.\nX = torch.solve(B, A).solution should be "
             "replaced with:\nX = torch.linalg.solve(A, B)",
    "lstsq": " `torch.lstsq` is deprecated in favor of `torch.linalg.lstsq`.\n`torch.linalg.lstsq` has reversed "
             "arguments and does not return the QR decomposition in the returned tuple (although it returns other "
             "information about the problem).\n\nTo get the QR decomposition consider using `torch.linalg.qr`.\n\n"
             "The returned solution in `torch.lstsq` stored the residuals of the solution in the last m - n columns "
             "of the returned value whenever m > n. In torch.linalg.lstsq, the residuals are in the field "
             "'residuals' of the returned named tuple.\n\nThe unpacking of the solution, as in\n"
             "X, _ = torch.lstsq(B, A).solution[:A.size(1)]\nshould be replaced with:\n"
             "X = torch.linalg.lstsq(A, B).solution",
    "matrix_rank": "\nPlease use the `torch.linalg.matrix_rank` function instead. The parameter 'symmetric' was "
                   "renamed in `torch.linalg.matrix_rank()` to 'hermitian'.",
}

def warn_deprecated(name: str) -> None:
    """torch's deprecation warning for ``torch.<name>``, once per process (function and method alike)."""
    warn_once(DEPRECATED[name])


def _removed(name: str) -> Callable:
    def removed(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(_REMOVED_HEAD + REMOVED[name])
    removed.__name__ = removed.__qualname__ = name
    removed.__doc__ = "Removed from PyTorch in 1.9: raises its RuntimeError naming the torch.linalg replacement."
    return removed


solve = _removed("solve")
lstsq = _removed("lstsq")
eig = _removed("eig")
symeig = _removed("symeig")
matrix_rank = _removed("matrix_rank")
