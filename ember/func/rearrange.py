"""``ember.func.rearrange``: einops-style reshapes and transposes (``torch.func.rearrange``).

A pattern names the input's axes on the left and the output's on the right; parentheses compose axes
(``(h w)`` is one axis of size ``h * w``, ``()`` or ``1`` an axis of size 1), ``...`` stands for the axes the
pattern does not name. The result is one reshape (split the composed input axes), one permute and one reshape
(compose the output's), all views where the strides allow, so gradients and vmap work as for those ops.

Example:
    >>> import ember
    >>> from ember.func import rearrange
    >>> x = ember.zeros(2, 3, 4)
    >>> rearrange(x, "b c d -> b (c d)").shape, rearrange(x, "b (c1 c2) d -> b c1 c2 d", c1=3).shape
    (ember.Size([2, 12]), ember.Size([2, 3, 1, 4]))
    >>> rearrange(x, "... d -> d ...").shape
    ember.Size([4, 2, 3])
"""
from __future__ import annotations

import keyword
from typing import Any, Sequence

from ember.ops.views import stack
from ember.tensor import Tensor

__all__ = ["rearrange", "DimensionBindError"]

_ELLIPSIS = "..."


class DimensionBindError(Exception):
    """An axis size that the pattern and the tensor's shape cannot both satisfy (functorch's name)."""


def _parse_side(side: str, pattern: str, right: bool) -> list:
    """``"b (c d) ..."`` -> ``[["b"], ["c", "d"], ["..."]]``; ``()`` and ``1`` are empty groups (unit axes)."""
    groups: list = []
    current: list | None = None
    text = side.replace("(", " ( ").replace(")", " ) ")
    for token in text.split():
        if token == "(":
            if current is not None:
                raise ValueError(f"Nested parenthesis are not allowed in rearrange pattern {pattern!r}")
            current = []
        elif token == ")":
            if current is None:
                raise ValueError(f"Brackets are not balanced in rearrange pattern {pattern!r}")
            groups.append(current)
            current = None
        elif token == _ELLIPSIS:
            if current is not None and not right:
                raise ValueError(f"Ellipsis inside parenthesis in the left side is not allowed: {pattern!r}")
            # top level: the unnamed axes themselves (the string); in a group: composed into one axis
            (current if current is not None else groups).append(_ELLIPSIS)
        elif token == "1":
            if current is None:
                groups.append([])
        elif token.isidentifier() and not keyword.iskeyword(token) and not token.startswith("_"):
            (current if current is not None else groups).append(token if current is not None else [token])
        else:
            raise ValueError(f"Invalid axis name {token!r} in rearrange pattern {pattern!r}: names are identifiers, "
                             "groups go in parentheses, '1' or '()' is an axis of size 1, '...' the unnamed axes")
    if current is not None:
        raise ValueError(f"Brackets are not balanced in rearrange pattern {pattern!r}")
    names = [n for g in groups for n in ([g] if g == _ELLIPSIS else g)]
    for name in set(names):
        if names.count(name) > 1:
            raise ValueError(f"Indexing expression contains duplicate dimension '{name}'" if name != _ELLIPSIS else
                             f"Ellipsis may appear only once on each side of a rearrange pattern: {pattern!r}")
    return groups


def rearrange(tensor: Tensor | Sequence[Tensor], pattern: str, **axes_lengths: int) -> Tensor:
    """Reshape and transpose ``tensor`` as ``pattern`` says (a list or tuple of tensors is stacked first).

    Example:
        >>> import ember
        >>> rearrange([ember.ones(2, 3)] * 4, "n h w -> h (n w)").shape
        ember.Size([2, 12])
    """
    if isinstance(tensor, (list, tuple)):
        tensor = stack(list(tensor))
    left_text, arrow, right_text = pattern.partition("->")
    if not arrow or "->" in right_text:
        raise ValueError(f"rearrange pattern must contain exactly one '->', got {pattern!r}")
    left = _parse_side(left_text, pattern, right=False)
    right = _parse_side(right_text, pattern, right=True)
    left_names = {n for g in left for n in ([g] if g == _ELLIPSIS else g)}
    right_names = {n for g in right for n in ([g] if g == _ELLIPSIS else g)}
    if _ELLIPSIS in right_names and _ELLIPSIS not in left_names:
        raise ValueError(f"Ellipsis found in right side, but not left side of a pattern {pattern}")
    if left_names != right_names:
        raise ValueError(f"Identifiers only on one side of rearrange expression (should be on both): "
                         f"{(left_names ^ right_names) - {_ELLIPSIS}}")
    unknown = set(axes_lengths) - left_names
    if unknown:
        raise ValueError(f"rearrange: axes_lengths name axes the pattern does not have: {sorted(unknown)}")
    shape = tuple(tensor.shape)
    has_ellipsis = _ELLIPSIS in left_names
    if (len(left) - 1 > len(shape)) if has_ellipsis else (len(left) != len(shape)):
        raise ValueError(f"Number of dimensions in pattern ({len(left) - has_ellipsis}) must be equal to the number "
                         f"of dimensions in the tensor ({len(shape)})" + (" or fewer, with '...'" if has_ellipsis else ""))
    # sizes of every elementary axis (ellipsis axes get names of their own)
    sizes: dict = {}
    elementary: list = []
    dim = 0
    hidden = len(shape) - (len(left) - 1) if has_ellipsis else 0
    ellipsis_names = [f"...{k}" for k in range(hidden)]
    for group in left:
        if group == _ELLIPSIS:
            for name in ellipsis_names:
                sizes[name] = shape[dim]
                elementary.append(name)
                dim += 1
            continue
        size = shape[dim]
        dim += 1
        missing = [n for n in group if n not in axes_lengths]
        known = 1
        for n in group:
            if n in axes_lengths:
                known *= int(axes_lengths[n])
        if len(missing) > 1:
            raise DimensionBindError(f"cannot infer the sizes of two dimensions at once {missing[0]} and {missing[1]}")
        if missing:
            if known == 0 or size % known:
                raise DimensionBindError(f"inferred dimension does not evenly fit into larger dimension: {size} vs "
                                         f"{tuple(int(axes_lengths[n]) if n in axes_lengths else '?' for n in group)}")
            axes_lengths = {**axes_lengths, missing[0]: size // known}
        elif known != size:
            raise DimensionBindError(f"Dimension sizes do not match ({size} != {known}) when matching {group} in "
                                     f"{pattern!r}")
        for n in group:
            sizes[n] = int(axes_lengths[n])
            elementary.append(n)
    # right side: the order of the elementary axes, then their composition
    order: list = []
    out_shape: list = []
    for group in right:
        if group == _ELLIPSIS:  # the unnamed axes, each its own output axis
            for name in ellipsis_names:
                order.append(elementary.index(name))
                out_shape.append(sizes[name])
            continue
        product = 1
        for n in group:
            for name in (ellipsis_names if n == _ELLIPSIS else [n]):
                order.append(elementary.index(name))
                product *= sizes[name]
        out_shape.append(product)
    split = tensor.reshape(tuple(sizes[n] for n in elementary))
    moved = split.permute(tuple(order)) if order != sorted(order) else split
    return moved.reshape(tuple(out_shape))
