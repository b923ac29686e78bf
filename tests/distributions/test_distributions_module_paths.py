"""Every torch.distributions submodule path (``torch.distributions.normal``, ``.kl``, ``.utils``, ...) resolves
under ember's import hook to an ember module holding the same public classes and functions."""
from __future__ import annotations

import pytest

from ember.run.alias import module_for

torch = pytest.importorskip("torch")
TD = torch.distributions

SUBMODULES = sorted(n for n in dir(TD) if not n.startswith("_") and isinstance(getattr(TD, n), type(TD)))


def test_every_submodule_is_listed():
    assert len(SUBMODULES) >= 47  # torch 2.13 has 47; a new one shows up here first


@pytest.mark.parametrize("name", SUBMODULES)
def test_submodule_resolves_with_its_names(name):
    theirs = getattr(TD, name)
    ours = module_for(f"torch.distributions.{name}")
    public = getattr(theirs, "__all__", None) or [n for n in dir(theirs) if not n.startswith("_")]
    own = [n for n in public if callable(getattr(theirs, n, None))
           and getattr(getattr(theirs, n), "__module__", "") == theirs.__name__]
    missing = [n for n in own if not hasattr(ours, n)]
    assert not missing, f"ember's {ours.__name__} lacks {missing}"
    for n in own:  # a class where torch has a class (a distribution, transform, constraint...)
        assert isinstance(getattr(ours, n), type) == isinstance(getattr(theirs, n), type), n
