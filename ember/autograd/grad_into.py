"""A matmul's weight gradient added into an existing ``.grad`` by the GEMM itself (``beta = 1``), in two halves.

Why (issue 11, W1; docs/cpu-performance.md "w1hot21"): a loop that keeps its gradients (``w.grad.zero_()``,
``zero_grad(set_to_none=False)``, gradient accumulation) made each backward compute ``x.T @ g`` into a new buffer
and then add it into ``.grad``: a 400 KB buffer and a read-read-write pass per weight in W1's step. When the
product runs in two halves on the hot worker (``cpu_hot_worker.split_gemm_into``), each half can add its rows
into ``.grad`` directly: ``C = A @ B + C``.

Same bits: BLAS adds ``C`` to the whole sum over K once, after its K loop, when K fits one of its K blocks; a
product whose K is split into blocks adds ``C`` after the first block and rounds differently. So only products
with K <= ``MAX_K`` are added this way, and ``exact`` checks once per BLAS and dtype that ``beta = 1`` gives the
bits of the product plus ``C`` there (measured: MKL and OpenBLAS on the Xeon both exact up to K = 384, neither
at 512).

When (the engine asks ``begin`` for a matmul node with its array rules): input 1 is a leaf whose only pending
edge is this one and which holds no buffered gradient yet (so ``.grad + this`` is the whole accumulation, in
PyTorch's order), with no hooks, ``.grad`` an owned, writeable, C-contiguous CPU array of the gradient's shape
and dtype that no operand shares, no capture (``autograd.grad``/``inputs=``) and no graph being built. The rule
(``ember/ops/linalg.py``) then asks ``add_product``; anything it declines is computed and accumulated as before.

Example:
    >>> import ember
    >>> w = ember.ones(3, 2, requires_grad=True)
    >>> (ember.ones(4, 3) @ w).sum().backward(); (ember.ones(4, 3) @ w).sum().backward()
    >>> w.grad.tolist()  # (small: the product is not split, the rule computes it and the engine adds it)
    [[8.0, 8.0], [8.0, 8.0], [8.0, 8.0]]
"""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ember.backends import cpu_blas, cpu_blas_gemm, cpu_gemm_plan, cpu_hot_worker, cpu_mkl

# Products with a longer sum are left to the rule and the engine's add (see the module docstring).
MAX_K = 128
OPS: set = set()  # the ops whose array rule asks add_product (linalg registers matmul)


class _Local(threading.local):
    target: Any = None  # (leaf, .grad's array) while the engine runs that node's array rules
    added: bool = False  # the rule added its product into the target


LOCAL = _Local()
_EXACT: dict = {}


def _root(a: Any) -> Any:
    while a.base is not None:
        a = a.base
    return a


def begin(node: Any, dependencies: dict, buffers: dict, tensor_class: type) -> bool:
    """Whether input 1's gradient of ``node`` may go straight into its leaf's ``.grad``; if so the target is set
    for the rule (``end`` clears it)."""
    edges = node.next_edges
    edge = edges[1] if len(edges) == 2 else None
    if edge is None:
        return False
    leaf = edge[0]
    key = id(leaf)
    if not isinstance(leaf, tensor_class) or dependencies.get(key) != 1 or key in buffers or leaf._hooks \
            or leaf.__dict__.get("_post_accumulate_hooks"):
        return False
    grad = leaf.grad
    if grad is None or not isinstance(grad, tensor_class) or grad._requires_grad:
        return False
    out = grad._data
    if out.__class__ is not np.ndarray or out.base is not None or out.ndim != 2 or not out.flags.c_contiguous \
            or not out.flags.writeable or out.shape != leaf._data.shape or out.dtype.char not in "fd" \
            or not out.dtype.isnative:
        return False
    LOCAL.target, LOCAL.added = (leaf, out), False
    return True


def end(input_grads: Any) -> Any:
    """After the rules ran: the target cleared; if the product was added, ``.grad``'s version bumped (as the
    engine's own add bumps it) and ``input_grads`` as it is (its entry for input 1 is None: nothing to add)."""
    target, added = LOCAL.target, LOCAL.added
    LOCAL.target, LOCAL.added = None, False
    if added and target is not None:
        target[0].grad._bump()
    return input_grads


def add_product(a: Any, b: Any) -> bool:
    """The rule's question: ``target += a @ b`` as a split GEMM with ``beta = 1``, done (True) or declined (False:
    compute the product as before)."""
    target = LOCAL.target
    if target is None:
        return False
    out = target[1]
    dtype = out.dtype
    if a.__class__ is not np.ndarray or b.__class__ is not np.ndarray or a.ndim != 2 or b.ndim != 2 \
            or a.dtype is not dtype or b.dtype is not dtype or a.shape[1] > MAX_K \
            or a.shape[0] != out.shape[0] or b.shape[1] != out.shape[1]:
        return False
    plan = cpu_gemm_plan.plan_into(a, b, out)  # (worth_it and split_gemm_into's checks, once per signature)
    if plan is None:  # a decider was replaced (a test's spy): ask it
        m, k = a.shape
        if not cpu_hot_worker.worth_it(m, k, b.shape[1]) or _root(a) is out or _root(b) is out or not exact(dtype) \
                or not cpu_hot_worker.split_gemm_into(a, b, out, beta=1):
            return False
    elif not plan or _root(a) is out or _root(b) is out or not exact(dtype) \
            or not cpu_gemm_plan.run_into(plan, a, b, out, 1):
        return False
    LOCAL.added = True
    return True


def exact(dtype: Any) -> bool:
    """Whether ember's BLAS adds ``C`` once after the whole sum at K = ``MAX_K`` (``beta = 1`` gives the bits of
    the product plus ``C``), checked once per BLAS function and dtype on random operands."""
    kind = "s" if dtype.char == "f" else "d"
    provider = cpu_mkl._STATE["provider"]  # (which BLAS: the answer per provider, without asking for its function)
    known = _EXACT.get((provider, kind)) if provider is not None else None
    if known is not None:
        return known
    gemm = cpu_blas_gemm._cblas(kind)
    if gemm is None:
        return False
    key = (id(gemm), kind)
    known = _EXACT.get(key)
    if known is None:
        rng = np.random.default_rng(0)
        a = rng.standard_normal((40, MAX_K)).astype(dtype)
        b = rng.standard_normal((MAX_K, 24)).astype(dtype)
        c = rng.standard_normal((40, 24)).astype(dtype)
        product, added = np.empty_like(c), c.copy()
        with cpu_blas.single_threaded_blas():
            for target, beta in ((product, 0.0), (added, 1.0)):
                gemm(101, 111, 111, 40, 24, MAX_K, 1.0, a.ctypes.data, MAX_K, b.ctypes.data, 24, beta,
                     target.ctypes.data, 24)
        known = _EXACT[key] = added.tobytes() == (c + product).tobytes()
    if cpu_mkl._STATE["provider"] is not None:
        _EXACT[(cpu_mkl._STATE["provider"], kind)] = known
    return known
