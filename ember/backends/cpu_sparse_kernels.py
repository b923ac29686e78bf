"""Native (numba) kernels for the sparse COO products (``ember/ops/sparse_ops.py``).

The NumPy path gathers an (nnz, k) array of ``values * dense[col]`` and scatters it with ``add.at``:
two passes over nnz x k memory. These loop once over the entries without the temporary, and work
on a slice of the result (columns ``[j0, j1)`` or entries ``[e0, e1)``) so that
``ember.backends.cpu_threads.parallel_for`` can run them on all cores (they release the GIL).
Indices are checked by the caller (numba does not bounds-check).

Example:
    >>> from ember.backends.cpu_kernels import get
    >>> callable(get("coo_spmm")) or get("coo_spmm") is None
    True
"""
from __future__ import annotations

from typing import Any, Callable


def build(numba: Any) -> dict[str, Callable]:
    """The kernels, compiled with ``numba`` (cached on disk)."""
    njit = numba.njit

    @njit(cache=True, nogil=True)
    def coo_spmm(row: Any, col: Any, values: Any, dense: Any, out: Any, j0: int, j1: int) -> None:  # pragma: no cover - compiled
        """``out[row[e], j] += values[e] * dense[col[e], j]`` for every entry, columns j in [j0, j1);
        ``out`` starts zeroed. Entries may come in any order and repeat (they add)."""
        for e in range(row.shape[0]):
            r = row[e]
            c = col[e]
            v = values[e]
            for j in range(j0, j1):
                out[r, j] += v * dense[c, j]

    @njit(cache=True, nogil=True)
    def coo_sddmm(row: Any, col: Any, a: Any, b: Any, out: Any, e0: int, e1: int) -> None:  # pragma: no cover - compiled
        """``out[e] = sum_j a[row[e], j] * b[col[e], j]`` for entries e in [e0, e1); ``out`` starts zeroed
        (the sum starts from it, so it accumulates in ``out``'s dtype, as the NumPy path does)."""
        k = a.shape[1]
        for e in range(e0, e1):
            r = row[e]
            c = col[e]
            total = out[e]
            for j in range(k):
                total += a[r, j] * b[c, j]
            out[e] = total

    return {"coo_spmm": coo_spmm, "coo_sddmm": coo_sddmm}
