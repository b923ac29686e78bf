"""ember.hub.load_state_dict_from_url on the file layouts torch.hub meets (formats21): plain torch.save files (zip and
legacy), torch.hub's "legacy zip" (one checkpoint zipped, unzipped by torch.hub), hostile member names, bad hashes."""
from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import numpy as np
import pytest

import ember
from ember import hub

torch = pytest.importorskip("torch")


def _state() -> dict:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)).state_dict()


def _equal(state: dict, loaded: dict) -> None:
    assert list(state) == list(loaded)
    for key, value in state.items():
        np.testing.assert_array_equal(value.numpy(), loaded[key].numpy(), err_msg=key)


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
@pytest.mark.parametrize("zipped", [False, True], ids=["plain", "zipped"])
def test_checkpoint_layouts_load_as_torch_hub_loads_them(legacy, zipped, tmp_path: Path) -> None:
    state = _state()
    source = tmp_path / "src" / "net.pth"
    source.parent.mkdir()
    torch.save(state, source, _use_new_zipfile_serialization=not legacy)
    if zipped:
        packed = tmp_path / "src" / "net.zip"
        with zipfile.ZipFile(packed, "w") as archive:
            archive.write(source, "net.pth")
        source = packed
    cache = tmp_path / "cache"
    loaded = hub.load_state_dict_from_url(source.as_uri(), model_dir=str(cache), progress=False)
    _equal(state, loaded)
    assert sorted(p.name for p in cache.iterdir()) == [source.name]  # nothing unzipped next to it
    if not zipped or legacy:  # torch.hub reads the same files to the same values (its zip of a zip-format file fails)
        expected = torch.hub.load_state_dict_from_url(source.as_uri(), model_dir=str(tmp_path / "tcache"),
                                                      progress=False, weights_only=True)
        _equal(expected, loaded)


def test_zipped_member_with_a_path_outside_is_read_in_memory_only(tmp_path: Path) -> None:
    state = _state()
    raw = tmp_path / "raw.pth"
    torch.save(state, raw, _use_new_zipfile_serialization=False)
    packed = tmp_path / "evil.zip"
    with zipfile.ZipFile(packed, "w") as archive:
        archive.writestr("../../escaped.pth", raw.read_bytes())
    cache = tmp_path / "deep" / "cache"
    _equal(state, hub.load_state_dict_from_url(packed.as_uri(), model_dir=str(cache), progress=False))
    assert not (tmp_path / "escaped.pth").exists() and not (tmp_path / "deep" / "escaped.pth").exists()


def test_a_hash_mismatch_leaves_no_file(tmp_path: Path) -> None:
    raw = tmp_path / "net.pth"
    torch.save(_state(), raw)
    good = hashlib.sha256(raw.read_bytes()).hexdigest()[:8]
    wrong = ("0" if good[0] != "0" else "1") + good[1:]
    named = tmp_path / f"net-{wrong}.pth"
    raw.rename(named)
    cache = tmp_path / "cache"
    with pytest.raises(RuntimeError, match="invalid hash value"):
        hub.load_state_dict_from_url(named.as_uri(), model_dir=str(cache), check_hash=True, progress=False)
    assert list(cache.iterdir()) == []


def test_hub_refuses_code_in_a_downloaded_checkpoint(tmp_path: Path) -> None:
    import os

    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))

    path = tmp_path / "evil.pth"
    torch.save({"w": torch.ones(1), "x": Evil()}, path)
    with pytest.raises(ember.serialization.UnsafeGlobalError, match="Unsupported global: GLOBAL .*system"):
        hub.load_state_dict_from_url(path.as_uri(), model_dir=str(tmp_path / "c"), progress=False)
