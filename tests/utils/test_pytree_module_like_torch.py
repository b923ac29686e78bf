"""``torch.utils._pytree`` as PyTorch's: node types, leaves, spec printouts, registration, multi-tree maps.

ema_pytorch (imported by denoising-diffusion-pytorch) does ``from torch.utils import _pytree`` at import time;
ember had no such module.
"""
from __future__ import annotations

import collections
import dataclasses
import os

import pytest

import ember
from ember.utils import _pytree as ep

torch = pytest.importorskip("torch")
import torch.utils._pytree as tp  # noqa: E402

Pair = collections.namedtuple("Pair", "x y")

TREES = [
    None, 3, [1, None, 2], (1,), [], {}, ((),), {"b": 1, "a": (2, [3])},
    collections.OrderedDict(a=1, b=[2]), collections.defaultdict(list, {"k": [1, 2]}),
    collections.deque([1, (2, 3)], maxlen=4), Pair(1, [2, {"z": 3}]), os.stat_result(range(10)),
]


@pytest.mark.parametrize("tree", TREES, ids=lambda t: type(t).__name__)
def test_flatten_unflatten_and_spec_printout_as_torch(tree) -> None:
    t_leaves, t_spec = tp.tree_flatten(tree)
    e_leaves, e_spec = ep.tree_flatten(tree)
    assert e_leaves == t_leaves
    assert repr(e_spec) == repr(t_spec)
    assert (e_spec.num_leaves, e_spec.num_nodes, e_spec.num_children) == \
        (t_spec.num_leaves, t_spec.num_nodes, t_spec.num_children)
    assert ep.treespec_pprint(e_spec) == tp.treespec_pprint(t_spec)
    rebuilt = ep.tree_unflatten(e_leaves, e_spec)
    assert type(rebuilt) is type(tree) and rebuilt == tree


def test_unregistered_dict_subclass_is_a_leaf_and_tensors_are_leaves() -> None:
    class Sub(dict):
        pass

    assert ep.tree_flatten(Sub(a=1))[0] == tp.tree_flatten(Sub(a=1))[0] == [Sub(a=1)]
    x = ember.ones(2)
    leaves, spec = ep.tree_flatten({"w": [x, x]})
    assert leaves[0] is x and spec.num_leaves == 2


def test_maps_and_predicates_as_torch() -> None:
    tree = [1, {"a": 2.5, "b": (3, "s")}]
    assert ep.tree_map(lambda v: v * 2, tree) == tp.tree_map(lambda v: v * 2, tree)
    assert ep.tree_map(lambda a, b: a + b, [1, {"a": 2}], [3, {"a": 4}]) == \
        tp.tree_map(lambda a, b: a + b, [1, {"a": 2}], [3, {"a": 4}])
    assert ep.tree_map_only(int, lambda v: -v, tree) == tp.tree_map_only(int, lambda v: -v, tree)
    assert ep.tree_map_only((int, float), lambda v: 0, tree) == tp.tree_map_only((int, float), lambda v: 0, tree)
    for fn in ("tree_all", "tree_any"):
        assert getattr(ep, fn)(lambda v: v != 3, [1, 2, 3]) == getattr(tp, fn)(lambda v: v != 3, [1, 2, 3])
    assert ep.tree_all_only(int, lambda v: v > 0, [1, "x"]) == tp.tree_all_only(int, lambda v: v > 0, [1, "x"])
    is_pair = lambda v: isinstance(v, list) and len(v) == 2  # noqa: E731
    assert ep.tree_leaves([1, [2, 3]], is_leaf=is_pair) == tp.tree_leaves([1, [2, 3]], is_leaf=is_pair)
    with pytest.raises(ValueError):
        ep.tree_map(lambda a, b: a, [1, 2], [1, 2, 3])


def test_tree_map_in_place_zeroes_tensors_and_returns_the_tree() -> None:
    tree = {"a": [ember.ones(2)], "b": ember.ones(3)}
    assert ep.tree_map_only_(ember.Tensor, lambda t: t.zero_(), tree) is tree
    assert float(tree["a"][0].sum()) == 0.0 and float(tree["b"].sum()) == 0.0


def test_register_pytree_node_and_dataclass() -> None:
    class Box:
        def __init__(self, items, tag):
            self.items, self.tag = items, tag

    for lib in (ep, tp):
        lib.register_pytree_node(Box, lambda b: (b.items, b.tag), lambda items, tag: Box(list(items), tag))
    try:
        leaves, spec = ep.tree_flatten([Box([1, 2], "t"), 3])
        t_leaves, t_spec = tp.tree_flatten([Box([1, 2], "t"), 3])
        assert leaves == t_leaves == [1, 2, 3]
        assert repr(spec) == repr(t_spec)
        back = ep.tree_unflatten([10, 20, 30], spec)
        assert back[0].items == [10, 20] and back[0].tag == "t" and back[1] == 30
        with pytest.raises(ValueError):
            ep.register_pytree_node(Box, lambda b: ([], None), lambda c, x: Box([], None))
    finally:
        ep.SUPPORTED_NODES.pop(Box, None)
        tp._deregister_pytree_node(Box)

    @dataclasses.dataclass
    class Point:
        x: int
        y: list

    ep.register_dataclass(Point)
    try:
        leaves, spec = ep.tree_flatten(Point(1, [2, 3]))
        assert leaves == [1, 2, 3] and ep.tree_unflatten([4, 5, 6], spec) == Point(4, [5, 6])
    finally:
        ep.SUPPORTED_NODES.pop(Point, None)


def test_unflatten_checks_the_number_of_leaves_and_reachable_as_torch_path() -> None:
    _, spec = ep.tree_flatten([1, 2])
    with pytest.raises(ValueError):
        ep.tree_unflatten([1], spec)
    assert ember.utils._pytree is ep
    assert spec.unflatten([5, 6]) == [5, 6]
