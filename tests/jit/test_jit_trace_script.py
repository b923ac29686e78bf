"""ember.jit.trace / script / save / load, checked against eager ember and torch.jit."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import ember
from ember.jit.api import TracerWarning

torch = pytest.importorskip("torch")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class MyCell(ember.nn.Module):
    """The lectures' cell."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = ember.nn.Linear(4, 4)

    def forward(self, x, h):
        new_h = ember.tanh(self.linear(x) + h)
        return new_h, new_h


class TorchCell(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x, h):
        new_h = torch.tanh(self.linear(x) + h)
        return new_h, new_h


def _pair():
    cell, tcell = MyCell(), TorchCell()
    with torch.no_grad():
        tcell.linear.weight.copy_(torch.tensor(cell.linear.weight.detach().numpy()))
        tcell.linear.bias.copy_(torch.tensor(cell.linear.bias.detach().numpy()))
    return cell, tcell


def test_lecture_snippet_prints_a_readable_graph_and_matches_torch_jit() -> None:
    cell, tcell = _pair()
    xa, ha = np.random.default_rng(0).random((2, 3, 4), dtype=np.float32)
    traced_cell = ember.jit.trace(cell, (ember.tensor(xa), ember.tensor(ha)))
    text = str(traced_cell.graph)
    for piece in ("%x: float32[3, 4]", "%h: float32[3, 4]", "state %linear.weight", "linear(", "tanh(", "return"):
        assert piece in text, text
    assert "def forward(self, x, h):" in traced_cell.code and "self.linear.weight" in traced_cell.code
    t_traced = torch.jit.trace(tcell, (torch.tensor(xa), torch.tensor(ha)))
    out, t_out = traced_cell(ember.tensor(xa), ember.tensor(ha)), t_traced(torch.tensor(xa), torch.tensor(ha))
    np.testing.assert_allclose(out[0].detach().numpy(), t_out[0].detach().numpy(), rtol=1e-6, atol=1e-6)
    assert isinstance(traced_cell, ember.nn.Module)
    assert [p is q for p, q in zip(traced_cell.parameters(), cell.parameters())] == [True, True]


def test_traced_module_gradients_match_eager() -> None:
    cell, _ = _pair()
    x, h = ember.rand(3, 4), ember.rand(3, 4)
    traced = ember.jit.trace(cell, (x, h))
    traced(x, h)[0].pow(2).sum().backward()
    g_traced = [p.grad.numpy().copy() for p in cell.parameters()]
    cell.zero_grad()
    cell(x, h)[0].pow(2).sum().backward()
    for a, b in zip(g_traced, [p.grad.numpy() for p in cell.parameters()]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_trace_a_function_and_other_shapes() -> None:
    f = ember.jit.trace(lambda x: (x * 2).exp().sum(dim=0), ember.zeros(2, 3))
    assert "exp(" in str(f.graph)
    np.testing.assert_allclose(f(ember.ones(5, 3)).numpy(), np.full(3, 5 * np.exp(2.0)), rtol=1e-6)


def test_save_and_load_run_without_the_code(tmp_path) -> None:
    cell, _ = _pair()
    x, h = ember.rand(3, 4), ember.rand(3, 4)
    traced = ember.jit.trace(cell, (x, h))
    path = str(tmp_path / "cell")
    ember.jit.save(traced, path)
    np.save(tmp_path / "x.npy", x.numpy())
    np.save(tmp_path / "h.npy", h.numpy())
    code = ("import numpy as np, ember\n"
            f"m = ember.jit.load({path!r})\n"
            f"y = m(ember.tensor(np.load({str(tmp_path / 'x.npy')!r})), ember.tensor(np.load({str(tmp_path / 'h.npy')!r})))\n"
            f"np.save({str(tmp_path / 'y.npy')!r}, y[0].numpy())\n")
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), cell(x, h)[0].detach().numpy(), rtol=1e-6)
    assert not any(name.endswith((".pkl", ".pt")) for name in os.listdir(path))


def test_load_runs_a_torchscript_archive(tmp_path) -> None:
    """torch.jit.save's archives are read and interpreted (tests/jit/test_torchscript_archives_vs_torch.py has more)."""
    t = torch.jit.trace(torch.nn.Linear(2, 2), torch.zeros(1, 2))
    t.save(str(tmp_path / "m.pt"))
    x = torch.randn(3, 2)
    np.testing.assert_allclose(ember.jit.load(str(tmp_path / "m.pt"))(ember.tensor(x.numpy())).detach().numpy(),
                               t(x).detach().numpy(), rtol=1e-6, atol=1e-6)


def test_script_compiles_static_code() -> None:
    model = ember.nn.Sequential(ember.nn.Linear(3, 2), ember.nn.ReLU())
    scripted = ember.jit.script(model)
    x = ember.randn(4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TracerWarning)
        np.testing.assert_allclose(scripted(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
    assert "relu(" in str(scripted.graph)
    scripted.eval()
    assert not model.training  # the original module follows the scripted one's mode


def test_script_with_data_dependent_control_flow_runs_eagerly_warning_once() -> None:
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 1

    scripted = ember.jit.script(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = scripted(ember.ones(2))
        b = scripted(-ember.ones(2))
    messages = [str(w.message) for w in caught if issubclass(w.category, TracerWarning)]
    assert len(messages) == 1 and "bool(tensor)" in messages[0] and "f" in messages[0]
    assert a.tolist() == [2.0, 2.0] and b.tolist() == [-2.0, -2.0]
    with pytest.raises(RuntimeError, match="runs eagerly"):
        scripted.graph  # noqa: B018


def test_script_returns_classes_unchanged_and_decorators_are_noops() -> None:
    class Box:
        pass

    assert ember.jit.script(Box) is Box
    fn = ember.jit.ignore(lambda x: x)
    assert fn(3) == 3 and ember.jit.is_scripting() is False


def test_onnx_export_accepts_torch_keywords_and_verbose(tmp_path, capsys) -> None:
    pytest.importorskip("onnx")
    model = ember.nn.Sequential(ember.nn.Linear(4, 3), ember.nn.ReLU())
    ember.onnx.export(model, ember.randn(2, 4), str(tmp_path / "model.proto"), verbose=True)
    assert "Gemm" in capsys.readouterr().out
    ember.onnx.export(model, (ember.randn(2, 4),), str(tmp_path / "m2.onnx"), dynamo=True, opset_version=None,
                      do_constant_folding=True, export_params=True)
    with pytest.raises(TypeError, match="unexpected keyword"):
        ember.onnx.export(model, ember.randn(2, 4), str(tmp_path / "m3.onnx"), not_an_option=1)
    with pytest.raises(NotImplementedError, match="export_params=False"):
        ember.onnx.export(model, ember.randn(2, 4), str(tmp_path / "m4.onnx"), export_params=False)
