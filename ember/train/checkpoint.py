"""Training checkpoints: everything needed to continue a run bit for bit, in one safetensors file.

A checkpoint holds the module's ``state_dict``, the optimizer's and schedulers' ``state_dict``s,
the random states (ember's default generator, extra ember generators, Python's ``random`` and
NumPy's global RNG), the number of completed epochs, the history and callback states. It is written
with ``ember.save``: tensors as safetensors, the rest as JSON, atomically (temp file, fsync, rename),
never pickled.

Example:
    >>> import ember, tempfile, os
    >>> from ember.train import save_checkpoint, load_checkpoint
    >>> w = ember.zeros(3)
    >>> path = os.path.join(tempfile.mkdtemp(), "run.ckpt")
    >>> _ = save_checkpoint(path, extra={"w": w}, epochs_completed=2)
    >>> load_checkpoint(path)["epochs_completed"]
    2
"""
from __future__ import annotations

import os
import random as py_random
from pathlib import Path
from typing import Any

import numpy as np
from ember import random as ember_random
from ember.serialization import CheckpointError, load, save

FORMAT = "ember.checkpoint/1"


def capture_rng_state(generators: dict[str, Any] | None = None) -> dict[str, Any]:
    """The state of every random source training may draw from (JSON/tensor data only)."""
    version, internal, gauss_next = py_random.getstate()
    np_kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "ember": ember_random.default_generator.get_state(),
        "python": {"version": version, "internal": list(internal), "gauss_next": gauss_next},
        "numpy": {"kind": np_kind, "keys": np.asarray(keys).copy(), "pos": int(pos), "has_gauss": int(has_gauss),
                  "cached_gaussian": float(cached)},
        "generators": {name: g.get_state() for name, g in (generators or {}).items()},
    }
    return state


def restore_rng_state(state: dict[str, Any], generators: dict[str, Any] | None = None) -> None:
    """Put back what :func:`capture_rng_state` captured."""
    ember_random.default_generator.set_state(state["ember"])
    py = state["python"]
    py_random.setstate((py["version"], tuple(py["internal"]), py["gauss_next"]))
    npy = state["numpy"]
    np.random.set_state((npy["kind"], np.asarray(npy["keys"], dtype=np.uint32), npy["pos"], npy["has_gauss"],
                         npy["cached_gaussian"]))
    saved = state.get("generators", {})
    for name, generator in (generators or {}).items():
        if name in saved:
            generator.set_state(saved[name])


def _as_list(value: Any) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def save_checkpoint(path: str | os.PathLike, module: Any = None, optimizer: Any = None, scheduler: Any = None, *,
                    epochs_completed: int | None = None, history: dict | None = None,
                    callbacks: dict | None = None, generators: dict[str, Any] | None = None,
                    extra: Any = None) -> Path:
    """Write a training checkpoint to ``path`` atomically and return the path.

    ``scheduler`` may be one scheduler or a list. ``generators`` names extra ember ``Generator``s
    (e.g. a DataLoader's) whose state must come back on resume.
    """
    checkpoint = {
        "format": FORMAT,
        "epochs_completed": epochs_completed,
        "model": module.state_dict() if module is not None else None,
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "schedulers": [s.state_dict() for s in _as_list(scheduler)],
        "rng": capture_rng_state(generators),
        "history": history or {},
        "callbacks": callbacks or {},
        "extra": extra,
    }
    save(checkpoint, path, format="safetensors")  # plain data: no pickle needed, any safetensors tool reads it
    return Path(path)


def load_checkpoint(path: str | os.PathLike, module: Any = None, optimizer: Any = None, scheduler: Any = None, *,
                    restore_rng: bool = True, generators: dict[str, Any] | None = None, strict: bool = True,
                    map_location: Any = None) -> dict[str, Any]:
    """Load a checkpoint into the given objects and return the whole checkpoint dict.

    With ``restore_rng`` the random states are put back too, so the next shuffles, dropout masks
    and augmentations are those the saved run would have drawn next.
    """
    checkpoint = load(path, map_location=map_location)
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        raise ValueError(f"load_checkpoint: {path} is not an ember training checkpoint (expected format {FORMAT!r}); "
                         "for a bare state dict use module.load_state_dict(ember.load(path))")
    _check_fields(checkpoint, path)
    if module is not None:
        if checkpoint["model"] is None:
            raise ValueError(f"load_checkpoint: {path} holds no model state")
        module.load_state_dict(checkpoint["model"], strict=strict)
    if optimizer is not None:
        if checkpoint["optimizer"] is None:
            raise ValueError(f"load_checkpoint: {path} holds no optimizer state")
        optimizer.load_state_dict(checkpoint["optimizer"])
    schedulers = _as_list(scheduler)
    if schedulers:
        saved = checkpoint["schedulers"]
        if len(saved) != len(schedulers):
            raise ValueError(f"load_checkpoint: {path} holds {len(saved)} scheduler states but {len(schedulers)} "
                             "schedulers were given")
        for s, state in zip(schedulers, saved):
            s.load_state_dict(state)
    if restore_rng:
        try:
            restore_rng_state(checkpoint["rng"], generators)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
            from ember.serialization import CheckpointError

            raise CheckpointError(path, "rng state", f"is malformed ({type(error).__name__}: {error!s:.200}); pass "
                                  "restore_rng=False to resume without it") from None
    return checkpoint


def _check_fields(checkpoint: dict, path: Any) -> None:
    """The checkpoint's top-level fields have the types save_checkpoint writes (the file may be edited)."""
    expected = {"model": (dict, type(None)), "optimizer": (dict, type(None)), "schedulers": (list,),
                "rng": (dict,), "history": (dict,), "callbacks": (dict,), "epochs_completed": (int, type(None))}
    for key, types in expected.items():
        if key not in checkpoint:
            raise CheckpointError(path, f"field {key!r}", "is missing; the file is not a complete training checkpoint")
        value = checkpoint[key]
        if not isinstance(value, types) or isinstance(value, bool):
            raise CheckpointError(path, f"field {key!r}", f"is a {type(value).__name__}, expected "
                                  f"{' or '.join(t.__name__ for t in types)}")
