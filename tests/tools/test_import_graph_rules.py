"""tools/import_graph.py: which imports are edges, which count as imports inside functions, and of which kind."""
from __future__ import annotations

import importlib.util
import os
import textwrap

_TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "import_graph.py")
spec = importlib.util.spec_from_file_location("import_graph", _TOOL)
import_graph = importlib.util.module_from_spec(spec)
spec.loader.exec_module(import_graph)


def _package(tmp_path, files: dict[str, str]) -> str:
    for name, text in files.items():
        path = tmp_path / "ember" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return str(tmp_path)


def test_edges_follow_what_runs_at_import(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "from ember import a\n",
        "a.py": "from typing import TYPE_CHECKING\nfrom ember.sub import b\nif TYPE_CHECKING:\n    from ember import c\n",
        "c.py": "import ember.a\n",
        "sub/__init__.py": "NAME = 1\n",
        "sub/b.py": "from ember.sub import NAME\ntry:\n    from ember import c\nexcept ImportError:\n    pass\n",
    })
    edges, _ = import_graph.analyse(root)
    assert edges["ember"] == {"ember.a"}
    assert edges["ember.a"] == {"ember.sub.b"}  # a submodule: not its package; TYPE_CHECKING: never runs
    assert edges["ember.sub.b"] == {"ember.sub", "ember.c"}  # a name from the package's __init__; under try
    assert import_graph.cycles(edges) == [["ember.a", "ember.c", "ember.sub.b"]]


def test_imports_inside_functions_are_counted_once_by_kind(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "m.py": """
            import numpy
            def outer():
                from ember import a
                import scipy.special
                def inner():
                    import json
                    from . import b
                class Local:
                    def method(self):
                        import onnx
        """,
    })
    _, inner = import_graph.analyse(root)
    counts = {kind: sum(per_file.values()) for kind, per_file in inner.items()}
    assert counts == {"ember": 2, "optional": 2, "stdlib": 1}
