"""Static graphs: one IR (:mod:`ember.graph.ir`), built by tracing (:func:`ember.compile`) or by
define-then-run (:func:`placeholder`, :class:`Variable`, :func:`assign`, :func:`gradients`,
:class:`Session`; :func:`device` places nodes on the ranks of an ``ember.distributed`` job, see
:mod:`ember.graph.partition`), optimized by :mod:`ember.graph.passes`, run by
:mod:`ember.graph.executor`, saved and loaded by :mod:`ember.graph.serialize`.

Example:
    >>> import ember
    >>> f = ember.compile(lambda x: (x * 2).exp().sum())
    >>> [round(f(ember.zeros(3)).item(), 1) for _ in range(2)]
    [3.0, 3.0]
"""
from ember.graph import ops  # noqa: F401  (registers assign, group, matmul_t)
from ember.graph import rng  # noqa: F401  (registers the random_* ops)
from ember.graph.ir import Graph, Node, TracingError, Value  # noqa: F401
from ember.graph.builder import SymbolicTensor, Tracer  # noqa: F401
from ember.graph.executor import Executable  # noqa: F401
from ember.graph.api import (  # noqa: F401
    Runner, Session, Variable, assign, assign_add, assign_sub, get_default_graph, gradients, group, placeholder,
    reset_default_graph, run,
)
from ember.graph.placement import device  # noqa: F401
from ember.graph.partition import Partition  # noqa: F401  (registers send, recv)
from ember.graph.compile import CompiledFunction, compile  # noqa: F401
from ember.graph.serialize import load, save  # noqa: F401
