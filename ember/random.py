"""Random numbers: ``Generator``, ``manual_seed``, and the samplers behind rand/randn/dropout.

CPU samples are PyTorch's: the generator is PyTorch's MT19937 stream and every sampler turns its words into
numbers as PyTorch's CPU kernels do (:mod:`ember.mt_random`), so ``ember.manual_seed(s)`` followed by the same
calls gives the same tensors as ``torch.manual_seed(s)`` (rand/randn/randint/randperm, the in-place samplers,
``nn.init``, dropout masks, DataLoader shuffles). States are PyTorch's 5056-byte layout. Samples for a CUDA tensor are drawn on its device by that
device's default generator (``cuda_generator``; on a GPU, Philox kernels in CuPy), seeded by
``manual_seed`` as PyTorch seeds its CUDA generators: the same seed gives the same numbers on each
run, but CPU and GPU draw different numbers (as in PyTorch). CUDA states serialize to JSON (never pickle).

Example:
    >>> import ember
    >>> _ = ember.manual_seed(0)
    >>> a = ember.rand(2); _ = ember.manual_seed(0); bool((a == ember.rand(2)).all())
    True
"""
from __future__ import annotations

import contextlib
import json
import sys
from typing import Any, Iterator

import numpy as np

from ember import dtypes, interpreters
from ember.backends import get_backend
from ember.device import device as _make_device, to_device
from ember.mt_random import MTStream, samplers as mt
from ember.mt_random.stream import STATE_BYTES


def _json_list(value: Any) -> Any:
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    raise TypeError(f"Generator.get_state: a {type(value).__name__} in the bit generator state is not JSON data")


class Generator:
    """A random-number generator: PyTorch's MT19937 stream on the CPU, the device's own elsewhere.

    Example:
        >>> g = Generator().manual_seed(42)
        >>> g.initial_seed()
        42
    """

    def __init__(self, device: Any = "cpu") -> None:
        self.device = to_device(device)
        self._seed = 67280421310721  # PyTorch's default seed: unseeded programs draw what torch draws
        self._stream: MTStream | None = None
        self._rng = self._make(self._seed)

    def _make(self, seed: int) -> Any:
        """The bit generator: on the CPU a NumPy Generator over PyTorch's MT19937 stream (samplers without a
        PyTorch counterpart draw from the same stream), elsewhere the device backend's generator."""
        if self.device.type == "cpu":
            if self._stream is None:
                self._stream = MTStream(seed)
            else:
                self._stream.seed(seed)
            return np.random.Generator(self._stream.bit_generator)
        return self.device.backend.make_rng(seed)

    def manual_seed(self, seed: int) -> "Generator":
        seed = int(seed)
        if not -2 ** 63 <= seed < 2 ** 64:
            raise RuntimeError(f"manual_seed: the seed must be in [-2**63, 2**64), got {seed}")
        self._seed = seed % 2 ** 64  # a negative seed wraps as PyTorch's (an unsigned 64-bit value)
        self._rng = self._make(self._seed)
        return self

    def seed(self) -> int:
        self.manual_seed(int(np.random.SeedSequence().entropy % (2**63)))
        return self._seed

    def initial_seed(self) -> int:
        return self._seed

    @property
    def stream(self) -> MTStream | None:
        """The CPU generator's MT19937 stream (None for a device generator)."""
        return self._stream

    def get_state(self) -> Any:
        """The state as a uint8 tensor, as torch returns a ByteTensor: PyTorch's own 5056-byte layout on the CPU
        (``torch.set_rng_state`` accepts it), JSON bytes of the device generator's state elsewhere."""
        from ember.creation import tensor

        if self._stream is not None:
            payload = self._stream.state_bytes()
        else:
            state = self.device.backend.rng_state(self._rng)
            # NumPy arrays in a bit generator state (Philox's counter and key) travel as lists.
            payload = json.dumps({"seed": self._seed, "bit_generator": state}, default=_json_list).encode()
        return tensor(np.frombuffer(payload, dtype=np.uint8).copy())

    def set_state(self, state: Any) -> "Generator":
        raw = bytes(np.asarray(state.numpy() if hasattr(state, "numpy") else state, dtype=np.uint8))
        if self._stream is not None:
            if len(raw) != STATE_BYTES and raw[:1] == b"{":
                raise ValueError("Generator.set_state: this is a JSON state from an ember release before 0.2 (a PCG64 "
                                 "generator); the CPU generator is now PyTorch's MT19937 and cannot continue it. "
                                 "Re-seed with manual_seed, or load the checkpoint with restore_rng=False")
            self._stream.load_state_bytes(raw)  # checks the size and the fields
            self._seed = self._stream.initial_seed
            return self
        try:
            payload = json.loads(raw.decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"Generator.set_state: not a state from Generator.get_state ({error})") from None
        # The state may come from a file: check its shape before handing it to the backend.
        if not (isinstance(payload, dict) and isinstance(payload.get("seed"), int)
                and isinstance(payload.get("bit_generator"), dict)):
            raise ValueError("Generator.set_state: not a state from Generator.get_state (expected an object with an "
                             "integer 'seed' and a 'bit_generator' object)")
        try:
            self.device.backend.set_rng_state(self._rng, payload["bit_generator"])
        except (TypeError, ValueError, KeyError) as error:
            raise ValueError(f"Generator.set_state: the bit generator state is invalid ({error})") from None
        self._seed = payload["seed"]
        return self

    @property
    def numpy_rng(self) -> np.random.Generator:
        return self._rng


default_generator = Generator()


# Default generators of CUDA devices, by index, made on first use (so a CPU-only run never loads a GPU
# backend). ``ember.manual_seed`` seeds those that exist and records the seed for the others.
_CUDA_GENERATORS: dict[int, Generator] = {}
_CUDA_SEED: list[int | None] = [None]


def cuda_generator(index: int | None = None) -> Generator:
    """The default generator of CUDA device ``index`` (None: the current device); its numbers are drawn
    on that device. Raises the no-CUDA error without a GPU."""
    backend = get_backend("cuda")
    index = backend.current_device() if index is None else int(index)
    gen = _CUDA_GENERATORS.get(index)
    if gen is None:
        gen = _CUDA_GENERATORS[index] = Generator(_make_device("cuda", index))
        gen.manual_seed(_CUDA_SEED[0] if _CUDA_SEED[0] is not None else default_generator.initial_seed() + index)
    return gen


def manual_seed(seed: int) -> Generator:
    """Seed ember's default generator and every CUDA device's (as ``torch.manual_seed``)."""
    _CUDA_SEED[0] = int(seed)
    for gen in _CUDA_GENERATORS.values():
        gen.manual_seed(seed)
    return default_generator.manual_seed(seed)


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> Any:
    return default_generator.get_state()


def set_rng_state(new_state: Any) -> None:
    default_generator.set_state(new_state)


def graph_sample(kind: str, shape: tuple, dtype: dtypes.dtype, device: Any, generator: Generator | None = None,
                 like: Any = None, inputs: tuple = (), **params: Any) -> Any:
    """A symbolic tensor made by a ``random_<kind>`` graph node when a graph is being built around
    this call (a trace in this thread, or ``like``/``inputs`` is a graph tensor); None otherwise:
    sample eagerly. The interpreter the call belongs to decides (:mod:`ember.interpreters`); see
    :mod:`ember.graph.rng` for how graphs seed their samples."""
    if not interpreters.GRAPHS.count:
        return None
    interpreter = interpreters.find((like,) + tuple(inputs))
    if interpreter is interpreters.EAGER:
        interpreter = interpreters.current()
    return interpreter.random_node(kind, tuple(shape), dtype, device, generator, tuple(inputs), params)


def is_tracing() -> bool:
    """True while this thread's ops are traced into a graph (tensor values are not known: value checks
    wait for run time)."""
    return interpreters.tracing()


def _rng(generator: Generator | None) -> np.random.Generator:
    if interpreters.GRAPHS.count:  # a trace cannot replay numbers drawn now: its interpreter refuses
        interpreters.current().check_direct_sampling()
    return (generator or default_generator).numpy_rng


def _rng_for(generator: Generator | None, device: Any) -> Any:
    """The generator drawing for ``device``: numbers for a CUDA tensor are drawn on its device (its
    default generator, or a ``generator=`` of that device), never on the host and copied."""
    host = _rng(generator)  # also the tracing guard: a trace refuses numbers drawn now
    if device.type == "cpu" or (generator is not None and generator.device.type == "cpu"):
        return host
    if generator is not None:
        return generator._rng
    return cuda_generator(device.index)._rng if device.type == "cuda" else host


def _meta_shell(shape: tuple, dtype: dtypes.dtype, device: Any) -> Any:
    """A meta array (one element seen through zero strides): the draw of a meta tensor of any size."""
    return device.backend.asarray(np.broadcast_to(np.zeros((), dtype=dtype.np), tuple(shape)))


def _to(array: Any, dtype: dtypes.dtype, device: Any) -> Any:
    array = array.astype(dtype.np, copy=False)
    if device.type == "cpu" or not isinstance(array, np.ndarray):
        return array  # drawn on the device already
    return device.backend.asarray(array, index=device.index or 0)


def _stream_for(generator: Generator | None, device: Any) -> MTStream | None:
    """The MT19937 stream that draws for ``device`` when it is the CPU (PyTorch's samplers apply), else None.
    Also the tracing guard (a trace refuses numbers drawn now)."""
    _rng(generator)
    if device.type != "cpu" and not (generator is not None and generator.device.type == "cpu"):
        return None
    return (generator or default_generator).stream


def _name(dtype: dtypes.dtype) -> str:
    """The float dtype PyTorch's kernel would sample in (integer targets sample as float32)."""
    return dtype.name if dtype.name in ("float64", "float32", "float16", "bfloat16") else "float32"


def _float_dtype(dtype: dtypes.dtype) -> Any:
    return dtype.np if dtype in (dtypes.float32, dtypes.float64) else np.float32


def check_args(op: str, **params: Any) -> None:
    """Refuse distribution parameters PyTorch refuses, naming the op, the value and the fix."""
    import math

    def number(value: Any) -> float:
        return float(value.item()) if hasattr(value, "item") and getattr(value, "ndim", 0) == 0 else float(value)

    if "low" in params or "high" in params:
        low, high = number(params.get("low", 0.0)), number(params.get("high", 1.0))
        if not low <= high:
            raise RuntimeError(f"{op}: expects a [from, to) range, but found from={low:g} > to={high:g}; swap the bounds")
        if high - low > 1.7976931348623157e308:
            raise RuntimeError(f"{op}: to - from must be finite, got from={low:g}, to={high:g}")
    if "std" in params:
        std = number(params["std"])
        if not std >= 0.0:
            raise RuntimeError(f"{op}: expects std >= 0.0, but found std {std:g}; use abs(std) or a positive value")
    if "p" in params and params["p"] is not None and not hasattr(params["p"], "shape"):
        p = number(params["p"])
        if not 0.0 <= p <= 1.0:
            raise RuntimeError(f"{op}: expects p to be in [0, 1], but got p={p:g}")
    if "lambd" in params:
        lambd = number(params["lambd"])
        if not lambd > 0.0 or math.isinf(lambd):
            raise RuntimeError(f"{op}: expects lambda > 0.0, but found lambda={lambd:g}")


def sample_uniform(shape: tuple, dtype: dtypes.dtype, device: Any, generator: Generator | None = None,
                   low: float = 0.0, high: float = 1.0) -> Any:
    if device.type == "meta":  # no data: nothing is drawn, as PyTorch (a model built on meta costs nothing)
        return _meta_shell(shape, dtype, device)
    stream = _stream_for(generator, device)
    if stream is not None:
        return _to(mt.uniform(stream, tuple(shape), _name(dtype), float(low), float(high)), dtype, device)
    rng = _rng_for(generator, device)
    values = rng.random(shape, dtype=_float_dtype(dtype))
    if low != 0.0 or high != 1.0:
        values = values * (high - low) + low
    return _to(values, dtype, device)


def sample_normal(shape: tuple, dtype: dtypes.dtype, device: Any, generator: Generator | None = None,
                  mean: float = 0.0, std: float = 1.0, contiguous: bool = True) -> Any:
    """Normal draws; ``contiguous=False`` (``normal_`` of a non-contiguous tensor) takes torch's one-at-a-time
    draws instead of its 16-value blocks."""
    if device.type == "meta":  # no data: nothing is drawn, as PyTorch (a model built on meta costs nothing)
        return _meta_shell(shape, dtype, device)
    stream = _stream_for(generator, device)
    if stream is not None:
        return _to(mt.normal(stream, tuple(shape), _name(dtype), float(mean), float(std), contiguous), dtype,
                   device)
    rng = _rng_for(generator, device)
    values = rng.standard_normal(shape, dtype=_float_dtype(dtype))
    if std != 1.0:
        values *= std
    if mean != 0.0:
        values += mean
    return _to(values, dtype, device)


def sample_bernoulli(shape: tuple, dtype: dtypes.dtype, device: Any, generator: Generator | None = None,
                     p: Any = 0.5) -> Any:
    """Bernoulli draws: a number ``p`` (dropout's masks, ``bernoulli_(p)``) or an array of probabilities."""
    if device.type == "meta":  # no data: nothing is drawn, as PyTorch (a model built on meta costs nothing)
        return _meta_shell(shape, dtype, device)
    stream = _stream_for(generator, device)
    if stream is not None:
        if hasattr(p, "shape") and getattr(p, "ndim", 0):
            probs = np.asarray(p.detach().cpu().numpy() if hasattr(p, "detach") else p)
            draws = mt.bernoulli_tensor(stream, np.broadcast_to(probs, tuple(shape)).copy())
        else:
            draws = mt.bernoulli_scalar(stream, tuple(shape), float(p.item() if hasattr(p, "item") else p))
        return _to(draws, dtype, device)
    return _to(_rng_for(generator, device).random(shape, dtype=np.float32) < p, dtype, device)


def sample_exponential(shape: tuple, dtype: dtypes.dtype, device: Any, generator: Generator | None = None,
                       lambd: float = 1.0) -> Any:
    if device.type == "meta":  # no data: nothing is drawn, as PyTorch (a model built on meta costs nothing)
        return _meta_shell(shape, dtype, device)
    stream = _stream_for(generator, device)
    if stream is not None:
        return _to(mt.exponential(stream, tuple(shape), float(lambd)), dtype, device)
    return _to(_rng_for(generator, device).exponential(1.0 / lambd, shape), dtype, device)


def _check_float_fill(op: str, dtype: dtypes.dtype, what: str) -> None:
    if not dtype.is_floating_point:
        raise RuntimeError(f"{op}: the {what} distribution is continuous; the tensor's dtype must be a floating "
                           f"point type, got {dtype} (fill a float tensor and convert with .to({dtype}))")


def _check_positive(op: str, name: str, value: float) -> None:
    if not float(value) > 0.0:
        raise RuntimeError(f"{op} expects {name} > 0.0, but found {name}={float(value):g}")


def sample_cauchy(shape: tuple, dtype: dtypes.dtype, device: Any, generator: Generator | None = None,
                  median: float = 0.0, sigma: float = 1.0) -> Any:
    """Cauchy draws by inversion, ``median + sigma * tan(pi * (u - 1/2))``: only uniform numbers are drawn,
    so it works with every device generator (CuPy's has no Cauchy sampler)."""
    _check_float_fill("cauchy_", dtype, "Cauchy")
    _check_positive("cauchy_", "sigma", sigma)
    if device.type == "meta":  # no data: nothing is drawn, as PyTorch (a model built on meta costs nothing)
        return _meta_shell(shape, dtype, device)
    stream = _stream_for(generator, device)
    if stream is not None:
        return _to(mt.cauchy(stream, tuple(shape), float(median), float(sigma)), dtype, device)
    u = _rng_for(generator, device).random(shape, dtype=np.float64)
    xp = device.xp
    return _to(median + sigma * xp.tan(np.pi * (u - 0.5)), dtype, device)


def sample_log_normal(shape: tuple, dtype: dtypes.dtype, device: Any, generator: Generator | None = None,
                      mean: float = 1.0, std: float = 2.0) -> Any:
    """``exp(N(mean, std))`` (PyTorch's defaults: mean 1, std 2)."""
    _check_float_fill("log_normal_", dtype, "log-normal")
    _check_positive("log_normal_", "std", std)
    if device.type == "meta":  # no data: nothing is drawn, as PyTorch (a model built on meta costs nothing)
        return _meta_shell(shape, dtype, device)
    stream = _stream_for(generator, device)
    if stream is not None:
        return _to(mt.log_normal(stream, tuple(shape), float(mean), float(std)), dtype, device)
    z = _rng_for(generator, device).standard_normal(shape, dtype=np.float64)
    return _to(device.xp.exp(mean + std * z), dtype, device)


def sample_geometric(shape: tuple, dtype: dtypes.dtype, device: Any, generator: Generator | None = None,
                     p: float = 0.5) -> Any:
    """The number of Bernoulli(p) trials up to and including the first success (support 1, 2, ...), by
    inversion: ``ceil(log(1 - u) / log(1 - p))``; refuses p outside (0, 1) as PyTorch does."""
    if dtype == dtypes.bool_ or dtype.is_complex:
        raise RuntimeError(f"geometric_: not implemented for {dtype}; fill an integer or float tensor")
    if not 0.0 < float(p) < 1.0:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={float(p):g}")
    if device.type == "meta":  # no data: nothing is drawn, as PyTorch (a model built on meta costs nothing)
        return _meta_shell(shape, dtype, device)
    stream = _stream_for(generator, device)
    if stream is not None:
        return _to(mt.geometric(stream, tuple(shape), float(p)), dtype, device)
    u = _rng_for(generator, device).random(shape, dtype=np.float64)
    xp = device.xp
    trials = xp.ceil(xp.log1p(-u) / np.log1p(-float(p)))
    return _to(xp.maximum(trials, 1.0), dtype, device)  # u == 0 gives 0 trials: one is the least


def sample_random(shape: tuple, dtype: dtypes.dtype, device: Any, generator: Generator | None = None,
                  low: int = 0, high: int | None = None) -> Any:
    if device.type == "meta":  # no data: nothing is drawn, as PyTorch (a model built on meta costs nothing)
        return _meta_shell(shape, dtype, device)
    stream = _stream_for(generator, device)
    if stream is not None:
        if high is None and not low:  # random_(): [0, 2**mantissa] for floats, [0, max] for integers
            return _to(mt.random_bits(stream, tuple(shape), dtype.name), dtype, device)
        if high is None:
            low, high = 0, low
        return _to(mt.random_from_to(stream, tuple(shape), int(low), int(high), _wide(dtype)), dtype, device)
    if high is None:
        low, high = 0, low if low else 2**24
    return _to(_rng_for(generator, device).integers(low, high, shape), dtype, device)


def _wide(dtype: dtypes.dtype) -> bool:
    """Whether PyTorch draws 64-bit words for ranges of 2**32 or more into this dtype."""
    return dtype.name in ("int64", "float64", "float32", "bfloat16")


def sample_integers(shape: tuple, dtype: dtypes.dtype, device: Any, generator: Generator | None, low: int,
                    high: int) -> Any:
    if high <= low:
        raise RuntimeError(f"randint: expected low < high, got low={low}, high={high}")
    if device.type == "meta":  # no data: nothing is drawn, as PyTorch (a model built on meta costs nothing)
        return _meta_shell(shape, dtype, device)
    stream = _stream_for(generator, device)
    if stream is not None:
        return _to(mt.random_from_to(stream, tuple(shape), int(low), int(high), _wide(dtype)), dtype, device)
    return _to(_rng_for(generator, device).integers(low, high, shape), dtype, device)


def sample_permutation(n: int, device: Any, generator: Generator | None = None) -> Any:
    if device.type == "meta":  # no data: nothing is drawn, as PyTorch (a model built on meta costs nothing)
        return _meta_shell((int(n),), dtypes.int64, device)
    stream = _stream_for(generator, device)
    if stream is not None:
        return mt.permutation(stream, int(n))
    return _to(_rng_for(generator, device).permutation(n), dtypes.int64, device)


def sample_multinomial(probs: np.ndarray, num_samples: int, replacement: bool, device: Any,
                       generator: Generator | None = None) -> np.ndarray:
    """Indices drawn from the rows of ``probs`` (2-D, checked by the caller) as ``torch.multinomial``."""
    stream = _stream_for(generator, device)
    if stream is not None:
        return mt.multinomial(stream, probs, int(num_samples), bool(replacement))
    rng = _rng(generator)  # a device tensor's weights are read on the host
    rows = [rng.choice(row.size, size=num_samples, replace=replacement, p=row / row.sum()) for row in probs]
    return np.asarray(rows, dtype=np.int64).reshape(probs.shape[0], num_samples)


def draw_seed(generator: Generator | None = None) -> int:
    """A 63-bit seed drawn as ``torch.empty((), dtype=torch.int64).random_(generator=...)``: how PyTorch's
    samplers and DataLoader seed their own generators (two words of the CPU stream)."""
    stream = _stream_for(generator, to_device("cpu"))
    if stream is not None:
        return mt.int64_seed(stream)
    return int(_rng(generator).integers(0, 2 ** 63 - 1))


@contextlib.contextmanager
def fork_rng(devices: Any = None, enabled: bool = True, _caller: str = "fork_rng", _devices_kw: str = "devices",
             device_type: str | None = None) -> Iterator[None]:
    """Run the block with the random state saved and put back after (CPU and, where it exists, CUDA), as
    ``torch.random.fork_rng``: draws inside do not change what is drawn after.

    Example:
        >>> import ember
        >>> _ = ember.manual_seed(0)
        >>> with ember.random.fork_rng():
        ...     _ = ember.rand(3)
        >>> a = ember.rand(1)
        >>> _ = ember.manual_seed(0)
        >>> bool((ember.rand(1) == a).all())
        True
    """
    if not enabled:
        yield
        return
    cuda = sys.modules.get("ember.cuda")  # loaded with ember (it imports this module, so no import here)
    cpu_state = get_rng_state()
    cuda_states = cuda.get_rng_state_all() if cuda is not None and cuda.is_available() else None
    try:
        yield
    finally:
        set_rng_state(cpu_state)
        if cuda_states is not None:
            cuda.set_rng_state_all(cuda_states)
