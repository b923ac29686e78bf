"""Random sampling inside graphs: random op records, the per-run seed, and the graph-side sampler.

Eager code draws from a stateful generator (``ember.random``): each call advances it. A graph
cannot do that at build time (it would replay one fixed sample forever), so sampling is a node:

* **One seed per run.** A graph that samples has a ``state`` value ``%rng_seed`` (int64 scalar)
  whose tensor is a :class:`SeedTensor`. It is never read from memory: every run of an
  :class:`~ember.graph.executor.Executable` draws a fresh seed from the generator the traced code
  named (ember's default generator unless ``generator=`` was passed), so successive calls differ
  as eager calls do and ``ember.manual_seed(s)`` makes a compiled run reproducible. A run can
  also be given a seed (``Executable.run(..., seed=s)``, ``LoadedGraph(x, seed=s)``,
  ``Session.run(..., seed=s)``).
* **One stream per node.** Each random node has a ``stream`` attribute, unique in its graph; its
  sample comes from a counter-based Philox generator keyed by ``(seed, stream)`` (how PyTorch's
  CUDA generator keys (seed, offset)). So a node's sample depends on nothing but the run's seed
  and the node itself: dead-code elimination, node order, fusion or the forward/backward split do
  not shift any other node's numbers; two dropout calls never share a mask (their streams differ,
  and CSE never merges random nodes); constant folding never folds them (``extra["random"]``).
* **Not bit-for-bit eager.** A compiled function's samples are *not* the numbers the same code
  draws eagerly after the same ``manual_seed``: eager consumes one sequential stream in call
  order, which a graph whose nodes can be reordered, dropped or split cannot reproduce without
  giving up those passes. Like ``torch.compile`` (which also promises only distributional
  equivalence), ember guarantees the distribution, reproducibility under ``manual_seed`` and
  fresh samples per call, not equality with eager.

A sample used by forward and backward (a dropout mask) is one value of the graph, computed once
per run: the backward reads the same mask the forward used, whether backward is traced into the
same graph (a training step) or split off by :mod:`ember.graph.compiled_autograd` (it is saved).

Example:
    >>> import ember
    >>> f = ember.compile(lambda x: ember.nn.functional.dropout(x, 0.5), warmup=0)
    >>> _ = ember.manual_seed(0); a = f(ember.ones(8))
    >>> _ = ember.manual_seed(0); b = f(ember.ones(8))
    >>> bool((a == b).all()), "random_bernoulli" in str(f.graph)
    (True, True)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes, random as ember_random
from ember.backends import backend_for
from ember.device import to_device
from ember.graph.ir import Value
from ember.ops.registry import OPS, OpDef, Spec, register
from ember.tensor import Tensor


# ---- the per-run seed -------------------------------------------------------------------------------
class SeedTensor(Tensor):
    """The tensor behind a graph's ``%rng_seed`` state: executors draw a fresh seed from
    ``generator`` (None: ember's default generator, looked up at run time) at every run."""

    generator: Any

    @classmethod
    def create(cls, generator: Any = None, device: Any = None) -> "SeedTensor":
        t = cls._make(np.zeros((), dtype=np.int64), to_device(device), False)
        t.generator = generator
        return t

    def draw(self) -> np.ndarray:
        """A seed for one run (advances the generator, as one eager sampling call does)."""
        gen = self.generator if self.generator is not None else ember_random.default_generator
        return np.asarray(gen.numpy_rng.integers(0, 2**63 - 1, dtype=np.int64))


def is_seed(value: Value) -> bool:
    return value.kind == "state" and isinstance(value.tensor, SeedTensor)


def seed_value(builder: Any, generator: Any, device: Any) -> Value:
    """The graph's seed state for ``generator`` on ``device`` (made on first use; the device is the
    random nodes' output device, so one seed per device)."""
    seeds = builder.rng_seeds
    key = (id(generator) if generator is not None else None, str(device))
    value = seeds.get(key)
    if value is None:
        name = "rng_seed" if not seeds else f"rng_seed{len(seeds)}"
        value = seeds[key] = builder.graph.add_state(SeedTensor.create(generator, device), name=name)
    return value


# ---- the graph-side sampler (Builder.random_node, asked by ember.random.graph_sample) -----------------
def random_node(builder: Any, kind: str, shape: tuple, dtype: dtypes.dtype, device: Any, generator: Any,
                inputs: tuple, params: dict) -> Any:
    """A symbolic tensor sampled by a ``random_<kind>`` node of ``builder``'s graph.

    ``builder`` is the interpreter the sampling call belongs to (:func:`ember.random.graph_sample`):
    the graph of a symbolic ``like``/``inputs`` tensor (define-then-run: ``dropout(placeholder)``),
    else the trace on top of this thread's interpreter stack (``ember.compile``).
    """
    device = to_device(device)
    seed = seed_value(builder, generator, device)
    attrs = {"shape": tuple(int(s) for s in shape), "dtype": dtype, "stream": builder.rng_streams}
    attrs.update(params)
    builder.rng_streams += 1
    values = tuple(builder.value_of(t) for t in inputs)
    (out,) = builder.graph.add_node(OPS["random_" + kind], (seed,) + values, attrs)
    return builder.make(out)


# ---- the op records ----------------------------------------------------------------------------------
def _rng(xp: Any, seed: Any, stream: int) -> Any:
    """The device's counter-based stream keyed by (seed, stream): numbers are drawn where they are used
    (on the CPU, NumPy's Philox; see :meth:`ember.backends.Backend.make_rng`). A seed in device memory (a
    CUDA-graph replay writes a new one before each launch: ember/graph/cuda_graph_step.py) is handed over
    as it is, on backends that read seeds on the device (``device_seeded_rng``)."""
    backend = backend_for(xp)
    if getattr(backend, "device_seeded_rng", False) and backend.is_array(seed):
        return backend.make_rng(seed, int(stream))
    return backend.make_rng(int(seed), int(stream))


def _float(dtype: dtypes.dtype) -> Any:
    return dtype.np if dtype in (dtypes.float32, dtypes.float64) else np.float32


def _out(xp: Any, values: Any, dtype: dtypes.dtype) -> Any:
    return values.astype(dtype.np, copy=False)


def _uniform(xp: Any, seed: Any, shape: tuple, dtype: Any, stream: int, low: float = 0.0,
             high: float = 1.0) -> Any:
    values = _rng(xp, seed, stream).random(shape, dtype=_float(dtype))
    if low != 0.0 or high != 1.0:
        values = values * (high - low) + low
    return _out(xp, values, dtype)


def _normal(xp: Any, seed: Any, shape: tuple, dtype: Any, stream: int, mean: float = 0.0,
            std: float = 1.0) -> Any:
    values = _rng(xp, seed, stream).standard_normal(shape, dtype=_float(dtype))
    if std != 1.0:
        values *= std
    if mean != 0.0:
        values += mean
    return _out(xp, values, dtype)


def _bernoulli(xp: Any, seed: Any, *probs: Any, shape: tuple, dtype: Any, stream: int, p: float = 0.5,
               scale: float = 1.0) -> Any:
    """1 (times ``scale``: dropout's 1/(1-p)) with probability ``p`` or ``probs`` (a tensor), else 0."""
    draws = _rng(xp, seed, stream).random(shape, dtype=np.float32)
    if probs:
        prob = probs[0]
        keep = draws < prob
    else:
        keep = draws < p
    values = keep.astype(dtype.np)
    if scale != 1.0:
        values *= scale
    return _out(xp, values, dtype)


def _integers(xp: Any, seed: Any, shape: tuple, dtype: Any, stream: int, low: int = 0, high: int = 2) -> Any:
    return _out(xp, _rng(xp, seed, stream).integers(low, high, shape), dtype)


def _permutation(xp: Any, seed: Any, shape: tuple, dtype: Any, stream: int) -> Any:
    return _out(xp, _rng(xp, seed, stream).permutation(shape[0]), dtype)


def _multinomial(xp: Any, seed: Any, probs: Any, shape: tuple, dtype: Any, stream: int,
                 replacement: bool = False) -> Any:
    # Drawn on the host: NumPy's choice with per-row probabilities has no device counterpart here;
    # an explicit transfer both ways (the eager multinomial does the same).
    backend = backend_for(xp)
    rng = backend_for(np).make_rng(int(backend.item(seed) if backend.is_array(seed) else seed), int(stream))
    probs = backend.to_numpy(probs).astype(np.float64)
    rows = probs.reshape(-1, probs.shape[-1])
    num_samples = shape[-1]
    out = np.empty((rows.shape[0], num_samples), dtype=np.int64)
    for i, row in enumerate(rows):
        total = row.sum()
        if total <= 0 or not np.isfinite(total) or (row < 0).any():
            raise RuntimeError("multinomial (compiled): probabilities must be finite, non-negative and not all "
                               f"zero; row {i} is {row.tolist()[:8]}")
        out[i] = rng.choice(row.size, size=num_samples, replace=replacement, p=row / total)
    return backend.asarray(out.reshape(shape), dtype.np)


def _rule(seed: Spec, *inputs: Any, shape: tuple, dtype: Any, stream: int, **params: Any) -> Spec:
    return Spec(tuple(shape), dtype, seed.device)


def _no_onnx(b: Any, n: Any) -> Any:
    raise NotImplementedError(
        f"ember.onnx.export: {n.op.name} is a random sampling node (dropout in training mode, rand, randn, "
        "bernoulli...). Exported ONNX graphs are inference graphs: export the model in eval mode (modules are "
        "put in eval mode by ember.onnx.export, where dropout is the identity), or call dropout with "
        "training=False, and sample random inputs outside the exported function.")


_SAMPLERS = {
    "uniform": (_uniform, "uniform(low, high) floats"),
    "normal": (_normal, "normal(mean, std) floats"),
    "bernoulli": (_bernoulli, "0/scale with keep probability p (or a probs tensor input): dropout masks"),
    "integers": (_integers, "integers in [low, high)"),
    "permutation": (_permutation, "a random permutation of range(shape[0])"),
    "multinomial": (_multinomial, "indices drawn from rows of a probs tensor input"),
}

for _kind, (_impl, _doc) in _SAMPLERS.items():
    if "random_" + _kind not in OPS:  # re-import (importlib.reload in tests): keep the records
        register(OpDef(
            name="random_" + _kind, batch="loop", category="random", impl=_impl, shape_rule=_rule, save="none",
            onnx=_no_onnx, random=True,
            nondiff_inputs=(0, 1), doc=f"random_{_kind}(seed, ...; shape, dtype, stream): {_doc}, keyed by "
                                       "(seed, stream)",
        ))


