"""``torch.nn.utils.parametrizations.orthogonal``: keep a weight orthogonal (or unitary) while training.

The stored parameter is unconstrained; the weight is a map of it onto the orthogonal matrices:

* ``"matrix_exp"`` / ``"cayley"``: the parameter's lower triangle ``L`` gives the skew matrix ``A = L - L^H``
  (padded to square for a tall weight) and the weight is ``exp(A)`` or ``(I - A/2)^-1 (I + A/2)``, first k columns;
* ``"householder"``: the parameter's strictly lower part holds Householder vectors (``tau = 2 / (1 + |v|^2)``)
  and the weight is their product, signed by the parameter's diagonal (+-1, not trained).

With ``use_trivialization=True`` (the default) a buffer ``base`` (an orthogonal matrix) multiplies the result, so
assigning a weight stores it in ``base`` and resets the parameter to ``-I``; the optimizer then moves in a
neighbourhood of the current weight. A wide weight is handled transposed. Registration and state-dict keys
(``parametrizations.weight.original``, ``parametrizations.weight.0.base``) are PyTorch's.

Example:
    >>> import ember
    >>> layer = ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(4, 4))
    >>> w = layer.weight
    >>> bool(ember.allclose(w @ w.T, ember.eye(4), atol=1e-5))
    True
"""
from __future__ import annotations

from ember.autograd.grad_mode import no_grad
from ember.creation import eye, randn, zeros_like
from ember.linalg import matrix_exp, solve
from ember.nn.modules.module import Module
from ember.nn.utils import parametrize
from ember.surface.constants import finfo
from ember.surface.linalg_aliases import geqrf
from ember.surface.linalg_composites import householder_product
from ember.ops.views import cat
from ember.tensor import Tensor

_MAPS = ("matrix_exp", "cayley", "householder")


def _is_orthogonal(q: Tensor) -> bool:
    n, k = q.size(-2), q.size(-1)
    identity = eye(k, dtype=q.dtype, device=q.device)
    return bool((q.mH @ q).allclose(identity, atol=10.0 * n * finfo(q.dtype).eps))


def _make_orthogonal(a: Tensor) -> Tensor:
    """The Q of ``a = QR`` with ``diag(R)`` real and non-negative (``a`` tall)."""
    reflectors, tau = geqrf(a)
    q = householder_product(reflectors, tau)
    return q * reflectors.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


class _Orthogonal(Module):
    def __init__(self, weight: Tensor, orthogonal_map: str, *, use_trivialization: bool = True) -> None:
        super().__init__()
        if weight.is_complex() and orthogonal_map == "householder":
            raise ValueError("orthogonal: the householder parametrization does not support complex tensors; use "
                             "orthogonal_map='matrix_exp' or 'cayley'")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, x: Tensor) -> Tensor:
        n, k = x.size(-2), x.size(-1)
        transposed = n < k
        if transposed:
            x = x.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            x = x.tril()
            if n != k:  # pad the tall matrix to square
                x = cat([x, x.new_zeros(n, n - k).expand(*x.shape[:-2], -1, -1)], -1)
            skew = x - x.mH
            if self.orthogonal_map == "matrix_exp":
                q = matrix_exp(skew)
            else:
                identity = eye(n, dtype=skew.dtype, device=skew.device)
                q = solve(identity - 0.5 * skew, identity + 0.5 * skew)
            if n != k:
                q = q[..., :k]
        else:
            vectors = x.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (vectors * vectors).sum(dim=-2))
            q = householder_product(vectors, tau)
            # The diagonal of x is +-1: it signs the columns and is not trained (an integer cast cuts its gradient).
            q = q * x.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if getattr(self, "base", None) is not None:
            q = self.base @ q
        return q.mT if transposed else q

    def right_inverse(self, q: Tensor) -> Tensor:
        with no_grad():
            return self._right_inverse(q)

    def _right_inverse(self, q: Tensor) -> Tensor:
        if tuple(q.shape) != tuple(self.shape):
            raise ValueError(f"orthogonal: expected a matrix or batch of matrices of shape {tuple(self.shape)}, got "
                             f"a tensor of shape {tuple(q.shape)}")
        original = q
        n, k = q.size(-2), q.size(-1)
        transposed = n < k
        if transposed:
            q = q.mT
            n, k = k, n
        if not hasattr(self, "base"):
            if self.orthogonal_map in ("matrix_exp", "cayley"):
                raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                          "parametrizations when use_trivialization=False.")
            reflectors, tau = geqrf(q)
            # X = QR with diag(R) > 0: the diagonal becomes the signs; a reflection LAPACK skipped (tau == 0) flips.
            diagonal = reflectors.diagonal(dim1=-2, dim2=-1)
            signs = diagonal.sign()
            diagonal.copy_(signs.where(tau != 0.0, -signs))
            return reflectors.mT if transposed else reflectors
        if n == k:
            q = q.clone() if _is_orthogonal(q) else _make_orthogonal(q)
        else:  # complete q to a full orthogonal n x n matrix
            filler = randn(*(tuple(q.shape[:-2]) + (n, n - k)), dtype=q.dtype, device=q.device)
            q = _make_orthogonal(cat([q, filler], -1))
        self.base = q
        # -I: householder(zeros) is the identity with this diagonal, and the exponential maps read only below it.
        neg_identity = zeros_like(original)
        neg_identity.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
        return neg_identity


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Register an orthogonal parametrization of ``module.<name>`` (a matrix or a batch of matrices).

    ``orthogonal_map`` defaults to ``"matrix_exp"`` for square or complex weights and ``"householder"``
    otherwise.
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.size(-2) == weight.size(-1) or weight.is_complex() else "householder"
    if orthogonal_map not in _MAPS:
        raise ValueError(f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: {orthogonal_map}')
    parametrize.register_parametrization(
        module, name, _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization), unsafe=True)
    return module

