"""torch.export.export built on ember.fx: the ExportedProgram surface programs use, against torch 2.13."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from fx_export_models import export_test_model

torch = pytest.importorskip("torch")


def _model(lib):
    return export_test_model(lib)


def _program(lib):
    torch.manual_seed(0)
    model = _model(lib)
    return model, lib.export.export(model, (lib.randn(2, 1, 6, 6),))


def test_exported_module_computes_the_model_and_takes_other_batch_sizes():
    t_model, t_program = _program(torch)
    e_model, e_program = _program(ember)
    e_model.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t_model.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((2, 1, 6, 6)).astype(np.float32)
    expected = t_program.module()(torch.tensor(x)).detach().numpy()
    got = e_program.module()(ember.tensor(x)).detach().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    other = ember.randn(5, 1, 6, 6)  # no shape is specialized
    np.testing.assert_array_equal(e_program.module()(other).detach().numpy(), e_model(other).detach().numpy())


def test_program_surface_as_torch():
    for lib in (ember, torch):
        model, program = _program(lib)
        assert tuple(program.run_decompositions().module()(lib.ones(2, 1, 6, 6)).shape) == (2, 3)  # torch specializes batch 2
        assert [s for s in program.graph_signature.parameters] == [n for n, _ in model.named_parameters()]
        assert set(program.state_dict) >= {n for n, _ in model.named_parameters()}
        assert any(n.op == "placeholder" for n in program.graph.nodes)
        with pytest.raises(RuntimeError, match="Unable to call ExportedProgram directly"):
            program(lib.ones(1, 1, 6, 6))


def test_export_refuses_what_torch_refuses():
    with pytest.raises(ValueError, match="args must be a tuple"):
        ember.export.export(_model(ember), ember.ones(1, 1, 6, 6))
    with pytest.raises(TypeError, match="takes no argument"):
        ember.export.export(_model(ember), (ember.ones(1, 1, 6, 6),), {"bogus": 1})
