"""Module API and torch.nn.utils behaviours, probe by probe, equal to torch 2.13's (``module_api_probes.py``,
``nn_utils_probes.py``): hooks (kwargs, always_call, global module hooks, full backward), state_dict and load
hooks, load_state_dict results and messages (assign=True), get/set_submodule messages, dtype moves,
to_empty, old pickles, extra_state, Module.compile; clip_grad_* (inf/-inf norms, NaN), weight/spectral norm old
and parametrized, parametrize, prune, packing, fusion, functional_call with tied weights, skip_init, init draws."""
from __future__ import annotations

import warnings

import pytest

import ember
import module_api_probes
import nn_utils_probes

torch = pytest.importorskip("torch")

PROBES = {**{f"module.{k}": v for k, v in module_api_probes.PROBES.items()},
          **{f"utils.{k}": v for k, v in nn_utils_probes.PROBES.items()}}


@pytest.mark.parametrize("name", sorted(PROBES))
def test_probe_equals_torch(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = PROBES[name](torch)
        got = PROBES[name](ember)
    assert got == expected


def test_module_compile_runs_the_forward_through_ember_compile() -> None:
    ember.manual_seed(0)
    m = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.ReLU(), ember.nn.Linear(4, 1))
    x = ember.randn(5, 3)
    expected = m(x)
    expected.sum().backward()
    grad = m[0].weight.grad.clone()
    m.zero_grad()
    assert m.compile() is None
    got = m(x)
    got.sum().backward()
    assert (got - expected).abs().max().item() < 1e-6
    assert (m[0].weight.grad - grad).abs().max().item() < 1e-6
    assert list(m.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
