"""`ember run script.py`: torch resolves to ember, the script runs as __main__, missing names are named."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(tmp_path, source: str, *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "ember.cli", "run", str(script), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def test_runs_as_main_with_argv_and_torch_is_ember(tmp_path) -> None:
    p = run(tmp_path, """
        import sys, torch, torch.nn as nn, torch.nn.functional as F
        from torch.utils.data import DataLoader
        from torch.utils.data.dataloader import DataLoader as DL2
        import torch.backends.cudnn as cudnn
        import ember
        assert torch is ember and F is ember.nn.functional and DataLoader is DL2
        assert nn.Linear(2, 3)(torch.ones(1, 2)).shape == (1, 3)
        print("name", __name__, "argv", sys.argv[1:], "cudnn", cudnn.is_available())
        """, "--lr", "0.1", "pos")
    assert p.returncode == 0, p.stderr
    assert "name __main__ argv ['--lr', '0.1', 'pos'] cudnn False" in p.stdout


def test_exit_status_passes_through(tmp_path) -> None:
    assert run(tmp_path, "import sys; sys.exit(3)").returncode == 3
    assert run(tmp_path, "raise ValueError('boom')").returncode == 1


@pytest.mark.parametrize("source,name,line", [
    ("import torch\nx = 1\nm = torch.nn.FooBarLayer(3)\n", "torch.nn.FooBarLayer", 3),
    ("from torch.nn import Linear, FooBarLayer\n", "torch.nn.FooBarLayer", 1),
    ("import torch.nn.foobar_module\n", "torch.nn.foobar_module", 1),
    ("import torch\nx = torch.ones(2)\nx.foobar_method_()\n", "torch.Tensor.foobar_method_", 3),
])
def test_missing_name_is_named_with_file_and_line(tmp_path, source: str, name: str, line: int) -> None:
    p = run(tmp_path, source)
    assert p.returncode == 1
    last = p.stderr.strip().splitlines()[-1]
    assert f"ember does not provide {name}" in last and f"script.py, line {line}" in last, p.stderr


def test_a_script_error_is_not_reported_as_a_missing_name(tmp_path) -> None:
    p = run(tmp_path, "class A: pass\nA().nothing\n")
    assert p.returncode == 1 and "ember does not provide" not in p.stderr


def test_spawned_processes_also_resolve_torch_to_ember(tmp_path) -> None:
    p = run(tmp_path, """
        import multiprocessing as mp
        import torch

        def child(q):
            import torch
            q.put(torch.__name__)

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            proc = ctx.Process(target=child, args=(q,))
            proc.start(); print("child", q.get(timeout=60)); proc.join()
        """)
    assert p.returncode == 0, p.stderr
    assert "child ember" in p.stdout


def test_missing_script_is_a_clear_error(tmp_path) -> None:
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-m", "ember.cli", "run", str(tmp_path / "nope.py")], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "no such script" in p.stderr


def test_torchvision_maps_to_ember_vision_only_when_it_exists(tmp_path, monkeypatch) -> None:
    import importlib.util

    from ember.run import alias

    finder = alias.TorchToEmberFinder()
    has_vision = importlib.util.find_spec("ember.vision") is not None
    spec = finder.find_spec("torchvision")
    assert (spec is not None) == has_vision
    monkeypatch.setenv("EMBER_RUN_NO_VISION", "1")
    assert finder.find_spec("torchvision") is None
    assert alias.ember_name("torch.utils.data.dataloader") == "ember.data.dataloader"
    assert alias.torch_name("ember.nn.functional") == "torch.nn.functional"


def test_torch_nn_modules_file_paths_find_every_class_ember_has() -> None:
    torch = pytest.importorskip("torch")
    import importlib
    import inspect

    import ember
    from ember.run.alias import module_for

    checked = 0
    for file in ("activation", "linear", "conv", "container", "dropout", "normalization", "batchnorm", "pooling",
                 "rnn", "sparse", "transformer", "loss", "padding", "flatten", "upsampling", "pixelshuffle",
                 "instancenorm", "distance", "fold", "module"):
        torch_module = importlib.import_module(f"torch.nn.modules.{file}")
        ember_module = module_for(f"torch.nn.modules.{file}")
        for name, obj in vars(torch_module).items():
            if inspect.isclass(obj) and obj.__module__ == torch_module.__name__ and not name.startswith("_") \
                    and hasattr(ember.nn, name):
                assert getattr(ember_module, name) is getattr(ember.nn, name), (file, name)
                checked += 1
    assert checked > 100
