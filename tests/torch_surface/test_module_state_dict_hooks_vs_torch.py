"""nn.Module's state-dict hooks, as PyTorch's: the four public registrations and the two private ones that
libraries call (key renames on load, filtered state dicts). ember's Module had none of them (found by comparing
``dir(model)`` in Atcold's NYU-DLSP20 convnet notebook)."""
from collections import OrderedDict

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _net(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Sequential(lib.nn.Linear(4, 2), lib.nn.BatchNorm1d(2)))


def _calls_while_saving(lib):
    net, calls = _net(lib), []
    for name, m in net.named_modules():
        m.register_state_dict_pre_hook(lambda mod, prefix, keep_vars, n=name: calls.append(("pre", n, prefix,
                                                                                            keep_vars)))
        m.register_state_dict_post_hook(
            lambda mod, sd, prefix, meta, n=name: calls.append(("post", n, prefix, len(sd), meta["version"])))
    net.state_dict(keep_vars=True)
    return calls


def test_save_hooks_run_in_torchs_order_with_torchs_arguments():
    assert _calls_while_saving(ember) == _calls_while_saving(torch)


def _edited_keys(lib):
    net = _net(lib)
    net[0].register_state_dict_post_hook(lambda m, sd, prefix, meta: sd.__setitem__(prefix + "note", lib.ones(1)))
    net[1]._register_state_dict_hook(
        lambda m, sd, prefix, meta: OrderedDict((k, v) for k, v in sd.items() if "running" not in k))
    handle = net.register_state_dict_pre_hook(lambda *a: (_ for _ in ()).throw(AssertionError("removed")))
    handle.remove()
    return list(net.state_dict())


def test_post_hooks_edit_or_replace_the_dict():
    assert _edited_keys(ember) == _edited_keys(torch)


def test_public_post_hook_must_return_none():
    for lib in (ember, torch):
        net = _net(lib)
        net.register_state_dict_post_hook(lambda m, sd, prefix, meta: {})
        with pytest.raises(RuntimeError):
            net.state_dict()


def _load_with_renames(lib, values):
    net = _net(lib)

    def rename(state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        for old, new in (("w", "weight"), ("b", "bias")):
            if prefix + old in state_dict:
                state_dict[prefix + new] = state_dict.pop(prefix + old)

    net[0]._register_load_state_dict_pre_hook(rename)
    seen = []
    net[1][1].register_load_state_dict_pre_hook(lambda m, sd, prefix, *rest: seen.append((type(m).__name__, prefix)))

    def forgive(module, incompatible):
        seen.append(tuple(incompatible.missing_keys))
        incompatible.missing_keys[:] = [k for k in incompatible.missing_keys if "running" not in k]

    net.register_load_state_dict_post_hook(forgive)
    state = {k: lib.tensor(v) for k, v in values.items()}
    result = net.load_state_dict(state, strict=True)
    return seen, list(result.missing_keys), net[0].weight.detach().numpy(), net[1][0].bias.detach().numpy()


def test_load_hooks_rename_keys_and_forgive_missing_ones():
    rng = np.random.default_rng(0)
    values = {"0.w": rng.random((4, 3), dtype=np.float32), "0.b": rng.random(4, dtype=np.float32),
              "1.0.weight": rng.random((2, 4), dtype=np.float32), "1.0.bias": rng.random(2, dtype=np.float32),
              "1.1.weight": np.ones(2, np.float32), "1.1.bias": np.zeros(2, np.float32)}
    ours, theirs = _load_with_renames(ember, values), _load_with_renames(torch, values)
    assert ours[:2] == theirs[:2]
    np.testing.assert_array_equal(ours[2], values["0.w"])
    np.testing.assert_array_equal(ours[3], theirs[3])


def _after_set_submodule(lib, target, strict):
    net = _net(lib)
    try:
        net.set_submodule(target, lib.nn.Identity(), strict=strict)
    except Exception as error:  # noqa: BLE001 (the class is compared)
        return type(error).__name__
    return [name for name, _ in net.named_modules()]


@pytest.mark.parametrize("target, strict", [("1.0", False), ("1.0", True), ("1.extra", False), ("1.extra", True),
                                            ("2.x", False), ("", False), ("0.weight", False)])
def test_set_submodule_like_torch(target, strict):
    assert _after_set_submodule(ember, target, strict) == _after_set_submodule(torch, target, strict)


def test_class_attributes_torch_code_reads():
    for name in ("T_destination", "call_super_init", "dump_patches"):
        assert hasattr(ember.nn.Linear(1, 1), name) and hasattr(torch.nn.Linear(1, 1), name)
    assert ember.nn.Module.call_super_init is torch.nn.Module.call_super_init is False
