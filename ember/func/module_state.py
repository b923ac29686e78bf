"""Modules as functions of their state: ``functional_call`` and ``stack_module_state`` (torch.func).

``functional_call`` runs a module with some parameters and buffers replaced by given tensors (batched
ones inside vmap, tensors being differentiated inside grad): the replacements are swapped into the
module's own tables for the call and the originals put back afterwards, even when the call raises, so the
module is unchanged (same Parameter objects, same values). Tied weights (one tensor under two names)
follow a value given under either name unless ``tie_weights=False``.

Example:
    >>> import ember
    >>> from ember.func import functional_call
    >>> layer = ember.nn.Linear(2, 1)
    >>> state = {"weight": ember.ones(1, 2), "bias": ember.zeros(1)}
    >>> functional_call(layer, state, (ember.tensor([[1.0, 2.0]]),)).tolist()
    [[3.0]]
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

from ember.nn.modules.more import _InstanceNorm
from ember.nn.modules.normalization import _BatchNorm
from ember.ops.views import stack

__all__ = ["functional_call", "stack_module_state", "replace_all_batch_norm_modules_"]


def _merge(dicts: Any) -> dict:
    if isinstance(dicts, dict):
        return dicts
    if isinstance(dicts, (list, tuple)):
        if not all(isinstance(d, dict) for d in dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be dictionaries")
        seen: dict = {}
        for d in dicts:
            for k in d:
                seen[k] = seen.get(k, 0) + 1
        repeated = [k for k, n in seen.items() if n > 1]
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is ambiguous")
        return {k: v for d in dicts for k, v in d.items()}
    raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
                     f"{type(dicts)}")


def _tied_names(module: Any) -> dict:
    """name -> set of all names of the same tensor, for tensors registered under more than one name.

    One walk over the module tree, every name of every parameter and buffer (what ``named_parameters`` and
    ``named_buffers`` with ``remove_duplicate=False`` yield; it runs on every call of functional_call)."""
    by_id: dict = {}
    stack = [("", module)]
    while stack:
        prefix, m = stack.pop()
        for table in (m._parameters, m._buffers):
            for name, t in table.items():
                if t is not None:
                    by_id.setdefault(id(t), set()).add(prefix + name)
        for name, child in m._modules.items():
            if child is not None:
                stack.append((prefix + name + ".", child))
    return {name: names for names in by_id.values() if len(names) > 1 for name in names}


def _untie(module: Any, given: dict) -> dict:
    tied = _tied_names(module)
    if not tied:
        return given
    out = dict(given)
    for name in given:
        if name not in tied:
            continue
        names = tied[name]
        values = {id(given[n]) for n in names if n in given}
        if len(values) > 1:
            raise ValueError(f"functional_call got multiple values for keys {sorted(names)}, which are tied. "
                             "Consider using tie_weights=False")
        for other in names:
            out[other] = given[name]
    return out


def _owner(module: Any, name: str) -> tuple:
    path, _, attr = name.rpartition(".")
    owner = module
    for part in path.split(".") if path else ():
        owner = getattr(owner, part)
    return owner, attr


def _swap(module: Any, name: str, value: Any) -> tuple:
    """Put ``value`` under ``name``; return how to put the original back."""
    owner, attr = _owner(module, name)
    d = owner.__dict__
    for store in ("_parameters", "_buffers"):
        table = d.get(store)
        if table is not None and attr in table:
            old = table[attr]
            table[attr] = value
            return owner, store, attr, old
    missing = object()
    old = d.get(attr, missing)
    d[attr] = value
    return owner, None, attr, old if old is not missing else None


def _restore(record: tuple) -> None:
    owner, store, attr, old = record
    if store is not None:
        owner.__dict__[store][attr] = old
    elif old is None:
        owner.__dict__.pop(attr, None)
    else:
        owner.__dict__[attr] = old


def _check_strict(module: Any, state: dict) -> None:
    known = {n for n, _ in module.named_parameters(remove_duplicate=False)} | {
        n for n, _ in module.named_buffers(remove_duplicate=False)}
    unexpected = [k for k in state if k not in known]
    missing = [k for k in sorted(known) if k not in state]
    errors = []
    if unexpected:
        errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
    if missing:
        errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
    if errors:
        raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t" + "\n\t".join(errors))


@contextlib.contextmanager
def _reparametrize_module(module: Any, parameters_and_buffers: dict, tie_weights: bool = False,
                          strict: bool = False, stack_weights: bool = False) -> Iterator[None]:
    """Inside the block, ``module``'s parameters and buffers named in the dict are the given tensors; the
    originals come back on exit (also on error), and whatever the module then held under a given name (a
    buffer it reassigned) is written back into the dict, as ``torch.nn.utils.stateless._reparametrize_module``.

    Example:
        >>> net = ember.nn.Linear(1, 1)
        >>> with _reparametrize_module(net, {"bias": ember.ones(1)}):
        ...     net.bias.tolist()
        [1.0]
    """
    state = _untie(module, parameters_and_buffers) if tie_weights else dict(parameters_and_buffers)
    if strict:
        _check_strict(module, state)
    records: list = []
    try:
        for name, value in state.items():
            records.append((name, _swap(module, name, value)))
        yield
    finally:
        # stack_weights only changes torch's restore order; restoring in reverse is right for both
        for name, record in reversed(records):
            owner, store, attr, _ = record
            now = owner.__dict__[store][attr] if store is not None else owner.__dict__.get(attr)
            _restore(record)
            if name in parameters_and_buffers:
                parameters_and_buffers[name] = now


def functional_call(module: Any, parameter_and_buffer_dicts: Any, args: Any = None, kwargs: dict | None = None, *,
                    tie_weights: bool = True, strict: bool = False) -> Any:
    """``module(*args, **kwargs)`` with the parameters and buffers named in the dict(s) replaced.

    Example:
        >>> net = ember.nn.Linear(3, 2)
        >>> params = {k: v.detach() * 0 for k, v in net.named_parameters()}
        >>> functional_call(net, params, ember.ones(1, 3)).tolist()
        [[0.0, 0.0]]
    """
    given = _merge(parameter_and_buffer_dicts)
    state = _untie(module, given) if tie_weights else dict(given)
    if strict:
        _check_strict(module, state)
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    records = []
    try:
        for name, value in state.items():
            records.append(_swap(module, name, value))
        return module(*args, **(kwargs or {}))
    finally:
        for record in reversed(records):
            _restore(record)


def stack_module_state(models: Sequence[Any]) -> tuple[dict, dict]:
    """The parameters and buffers of same-class models stacked along a new dim 0, by name (for ensembles
    with ``vmap(functional_call)``); the stacked parameters are new leaves that require grad.

    Example:
        >>> params, buffers = stack_module_state([ember.nn.Linear(3, 2) for _ in range(4)])
        >>> params["weight"].shape
        ember.Size([4, 2, 3])
    """
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    if not all(type(m) is type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(tensors: list, name: str) -> Any:
        flags = {t.requires_grad for t in tensors}
        if len(flags) > 1:
            raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
        out = stack([t.detach() for t in tensors])
        return out.requires_grad_() if flags == {True} else out

    all_params = [dict(m.named_parameters()) for m in models]
    all_buffers = [dict(m.named_buffers()) for m in models]
    params = {k: stacked([p[k] for p in all_params], k) for k in all_params[0]}
    buffers = {k: stacked([b[k] for b in all_buffers], k) for k in all_buffers[0]}
    return params, buffers


def replace_all_batch_norm_modules_(root: Any) -> Any:
    """In place, every BatchNorm module of ``root`` (``root`` included) stops tracking running statistics: its
    ``running_mean``, ``running_var`` and ``num_batches_tracked`` become None and ``track_running_stats`` False,
    so it normalizes with the statistics of its input (what vmap over a model with BatchNorm needs). Returns
    ``root``, as ``torch.func.replace_all_batch_norm_modules_``.

    Example:
        >>> net = replace_all_batch_norm_modules_(ember.nn.Sequential(ember.nn.BatchNorm1d(3)))
        >>> net[0].running_mean is None, net[0].track_running_stats
        (True, False)
    """
    for module in root.modules():  # modules() starts with root itself
        if isinstance(module, _BatchNorm) and not isinstance(module, _InstanceNorm) and module.track_running_stats:
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root
