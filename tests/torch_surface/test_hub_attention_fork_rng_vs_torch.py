"""Names programs call around the model, against torch 2.13: torch.nn.attention.sdpa_kernel/SDPBackend,
torch.random.fork_rng, torch._inductor.config settings, torch.hub.load/list/help from a hubconf.py folder (and
GitHub zipballs, read here from a local file) and torch.utils.model_zoo.load_url."""
from __future__ import annotations

import os
import zipfile

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
LIBS = (torch, ember)


# ---- torch.nn.attention ------------------------------------------------------------------------------------
def test_sdp_backend_numbers_match_torch():
    from torch.nn.attention import SDPBackend as TorchBackend
    from ember.nn.attention import SDPBackend
    assert {m.name: int(m) for m in SDPBackend} == {n: int(m) for n, m in TorchBackend.__members__.items()}


@pytest.mark.parametrize("chosen", [("MATH",), ("FLASH_ATTENTION", "MATH"), ("EFFICIENT_ATTENTION",)])
def test_sdpa_kernel_sets_and_restores_the_flags_like_torch(chosen):
    seen = []
    for lib in LIBS:
        attention = __import__(f"{lib.__name__}.nn.attention", fromlist=["sdpa_kernel"])
        backends = [getattr(attention.SDPBackend, name) for name in chosen]
        flags = lambda: (lib.backends.cuda.flash_sdp_enabled(), lib.backends.cuda.math_sdp_enabled(),  # noqa: E731
                         lib.backends.cuda.mem_efficient_sdp_enabled())
        before = flags()
        with attention.sdpa_kernel(backends if len(backends) > 1 else backends[0]):
            inside = flags()
        seen.append((before, inside, flags()))
    assert seen[1] == seen[0]


def test_attention_values_are_unchanged_inside_sdpa_kernel():
    from ember.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (ember.randn(2, 3, 5, 4) for _ in range(3))
    plain = ember.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    with sdpa_kernel([SDPBackend.MATH]):
        inside = ember.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    np.testing.assert_array_equal(inside.numpy(), plain.numpy())
    with pytest.raises(AssertionError, match="SDPBackend"):
        with sdpa_kernel(["math"]):
            pass


# ---- torch.random.fork_rng -----------------------------------------------------------------------------------
@pytest.mark.parametrize("enabled", [True, False])
def test_fork_rng_restores_the_stream_like_torch(enabled):
    for lib in LIBS:
        lib.manual_seed(3)
        reference = [lib.rand(2).tolist(), lib.rand(2).tolist()]
        lib.manual_seed(3)
        first = lib.rand(2).tolist()
        with lib.random.fork_rng(enabled=enabled):
            inside = lib.rand(2).tolist()
        after = lib.rand(2).tolist()
        assert first == reference[0]
        assert (after == reference[1]) is enabled  # the block's draw is forgotten only when enabled
        assert (inside == reference[1])


# ---- torch._inductor.config ----------------------------------------------------------------------------------
def test_inductor_settings_programs_write_are_accepted():
    import torch._inductor.config as torch_config
    for name in ("coordinate_descent_tuning", "epilogue_fusion", "max_autotune", "freezing"):
        assert getattr(ember._inductor.config, name) == getattr(torch_config, name)
    assert ember._inductor.config.triton.cudagraphs == torch_config.triton.cudagraphs
    ember._inductor.config.coordinate_descent_tuning = True
    ember._inductor.config.triton.unique_kernel_names = True
    ember._inductor.config.coordinate_descent_tuning = False
    ember._inductor.config.triton.unique_kernel_names = False


# ---- torch.hub on hubconf.py repositories -----------------------------------------------------------------------
HUBCONF = '''dependencies = ["numpy"]
import helper_module


def tiny(width=2, scale=1.0):
    """A tiny linear model."""
    import {lib} as lib_
    model = lib_.nn.Linear(3, width)
    with lib_.no_grad():
        model.weight.fill_(scale)
        model.bias.zero_()
    return model


def _private():
    return None


CONSTANT = 3
'''


def _repo(folder, lib_name: str, dependencies: str = '["numpy"]') -> str:
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "hubconf.py"), "w") as out:
        out.write(HUBCONF.format(lib=lib_name).replace('["numpy"]', dependencies))
    with open(os.path.join(folder, "helper_module.py"), "w") as out:
        out.write("VALUE = 1\n")
    return str(folder)


def test_local_hub_load_list_help_like_torch(tmp_path):
    results = []
    for lib in LIBS:
        repo = _repo(tmp_path / lib.__name__, lib.__name__)
        model = lib.hub.load(repo, "tiny", 4, source="local", scale=0.5)
        results.append(model(lib.ones(1, 3)).detach().numpy().tolist())
        with pytest.raises(RuntimeError, match="Cannot find callable missing in hubconf"):
            lib.hub.load(repo, "missing", source="local")
        with pytest.raises(ValueError, match="Unknown source"):
            lib.hub.load(repo, "tiny", source="gitlab")
    assert results[1] == results[0] == [[1.5, 1.5, 1.5, 1.5]]
    # torch.hub.list/help read GitHub only; ember's also take source="local" (the entrypoints: public callables)
    repo = str(tmp_path / "ember")
    assert "tiny" in ember.hub.list(repo, source="local") and "_private" not in ember.hub.list(repo, source="local")
    assert ember.hub.help(repo, "tiny", source="local") == "A tiny linear model."


def test_missing_dependencies_are_named_like_torch(tmp_path):
    for lib in LIBS:
        repo = _repo(tmp_path / lib.__name__, lib.__name__, '["numpy", "no_such_package_xyz"]')
        with pytest.raises(RuntimeError, match="Missing dependencies: no_such_package_xyz"):
            lib.hub.load(repo, "tiny", source="local")


def _zipball(path, members: dict) -> str:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return str(path)


def test_github_repos_run_only_when_trusted_and_unpack_safely(tmp_path, monkeypatch):
    from ember import hub_repos
    monkeypatch.setattr(ember.hub, "get_dir", lambda: str(tmp_path / "hub"))
    monkeypatch.setattr(hub_repos, "get_dir", lambda: str(tmp_path / "hub"))
    ball = _zipball(tmp_path / "ball.zip", {"owner-demo-abc123/hubconf.py": HUBCONF.format(lib="ember"),
                                            "owner-demo-abc123/helper_module.py": "VALUE = 1\n"})
    monkeypatch.setattr(hub_repos, "GITHUB_ZIP", ball.replace("{", "{{").replace("}", "}}"))
    with pytest.raises(ValueError, match="not trusted.*trust_repo=True"):
        ember.hub.load("owner/demo", "tiny", trust_repo="check")
    model = ember.hub.load("owner/demo", "tiny", trust_repo=True, verbose=False)
    assert model.out_features == 2
    assert os.path.isfile(tmp_path / "hub" / "owner_demo_main" / "hubconf.py")
    assert "owner_demo" in (tmp_path / "hub" / "trusted_list").read_text()
    assert ember.hub.list("owner/demo", verbose=False) == ember.hub.list(str(tmp_path / "hub" / "owner_demo_main"),
                                                                         source="local")  # cached, now trusted
    evil = _zipball(tmp_path / "evil.zip", {"top/hubconf.py": "x = 1\n", "top/../../escape.py": "boom\n"})
    monkeypatch.setattr(hub_repos, "GITHUB_ZIP", evil)
    with pytest.raises(ValueError, match="outside the hub folder"):
        ember.hub.load("owner/other", "x", trust_repo=True, force_reload=True, verbose=False)
    assert not (tmp_path / "escape.py").exists() and not (tmp_path / "hub" / "escape.py").exists()
    with pytest.raises(ValueError, match="owner/name"):
        ember.hub.load("no-slash", "tiny", trust_repo=True)


# ---- torch.utils.model_zoo.load_url -----------------------------------------------------------------------------
def test_model_zoo_load_url_reads_a_checkpoint(tmp_path):
    path = tmp_path / "weights-0000.pth"
    torch.save({"w": torch.arange(3.0)}, path)
    loaded = ember.utils.model_zoo.load_url(str(path), model_dir=str(tmp_path / "cache"))
    assert loaded["w"].tolist() == [0.0, 1.0, 2.0]
