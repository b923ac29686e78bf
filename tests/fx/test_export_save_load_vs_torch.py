"""export.save / export.load: a saved program runs without its code and equals the model (and torch's own
save/load round trip); extra_files as torch fills them; files that are not ember's programs are refused."""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

import ember
from fx_export_models import export_test_model

torch = pytest.importorskip("torch")


def _model(lib):
    return export_test_model(lib)


def _round_trip(lib, model, x, extra_saved, extra_asked):
    buffer = io.BytesIO()
    lib.export.save(lib.export.export(model, (x,)), buffer, extra_files=extra_saved)
    return lib.export.load(io.BytesIO(buffer.getvalue()), extra_files=extra_asked)


def test_saved_program_equals_model_and_torchs_round_trip(tmp_path):
    torch.manual_seed(0)
    t_model, e_model = _model(torch), _model(ember)
    e_model.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t_model.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((2, 1, 6, 6)).astype(np.float32)
    t_extra, e_extra = {"note": "", "absent": ""}, {"note": "", "absent": ""}
    t_loaded = _round_trip(torch, t_model, torch.tensor(x), {"note": "hello"}, t_extra)
    e_loaded = _round_trip(ember, e_model, ember.tensor(x), {"note": "hello"}, e_extra)
    assert e_extra == t_extra == {"note": "hello", "absent": ""}
    expected = t_loaded.module()(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(e_loaded.module()(ember.tensor(x)).detach().numpy(), expected, rtol=1e-5, atol=1e-6)
    assert e_loaded.graph_signature.user_inputs == ember.export.export(e_model, (ember.tensor(x),)).graph_signature.user_inputs
    with pytest.raises(RuntimeError, match="exported_program.module"):
        e_loaded(ember.tensor(x))
    path = tmp_path / "net.pt2"  # a path, and saving the loaded program again
    ember.export.save(e_loaded, path)
    again = ember.export.load(path).module()(ember.tensor(x)).detach().numpy()
    np.testing.assert_allclose(again, expected, rtol=1e-5, atol=1e-6)


def test_loaded_program_refuses_other_shapes_as_a_specialized_torch_program_does():
    model = ember.nn.Linear(3, 2)
    loaded = _round_trip(ember, model, ember.randn(4, 3), None, None)
    with pytest.raises(ValueError, match=r"expects shape \(4, 3\), got \(5, 3\)"):
        loaded.module()(ember.randn(5, 3))


def test_load_refuses_what_ember_did_not_write(tmp_path):
    with pytest.raises(ValueError, match="not a zip archive"):
        ember.export.load(io.BytesIO(b"not a zip"))
    unknown = io.BytesIO()
    with zipfile.ZipFile(unknown, "w") as archive:
        archive.writestr("readme.txt", "neither ember's nor torch's")
    with pytest.raises(ValueError, match="lacks ember's program files"):
        ember.export.load(io.BytesIO(unknown.getvalue()))
    forged = io.BytesIO()
    with zipfile.ZipFile(forged, "w") as archive:
        for name in ("graph.json", "weights.safetensors", "jit.json"):
            archive.writestr(name, "{}")
        archive.writestr("export.json", json.dumps({"format": "something/9"}))
    with pytest.raises(ValueError, match="unknown format 'something/9'"):
        ember.export.load(io.BytesIO(forged.getvalue()))
    with pytest.raises(ValueError, match="must be a plain file name"):
        ember.export.save(ember.export.export(ember.nn.Linear(3, 2), (ember.randn(4, 3),)), tmp_path / "p.pt2",
                          extra_files={"../escape": "x"})
    assert not (tmp_path / "p.pt2").exists()
