"""The package's import graph: cycles (strongly connected groups of modules) and imports inside functions.

Issue 15 asks that no import cycle span more than two files and that imports inside functions drop by
two thirds; this measures both.

Edges are the imports that run when a module is imported: those at module level, including those
under ``if``/``try`` at module level, but not those under ``if TYPE_CHECKING:`` (they never run).
``from ember.ops import dispatch`` is an edge to ``ember.ops.dispatch`` only, exactly like
``import ember.ops.dispatch``: both run ``ember/ops/__init__.py`` first, but that parent-package
step happens for every submodule import and is not counted (otherwise every package whose
``__init__`` imports its children would be a cycle). ``from ember.ops import OPS`` (a name, not a
submodule) is an edge to ``ember.ops``. Imports inside a function or method body are counted, not
followed, in three kinds:

* ``ember``: the package importing itself late (to dodge a cycle or to defer work): issue 15's target;
* ``optional``: third-party packages the core does not need (scipy, numba, onnx, PIL, mpi4py, ...):
  importing them where they are used is the right place, so a NumPy-only install works;
* ``stdlib``: the standard library and NumPy (deferred for start-up time or by habit).

Usage:
    python tools/import_graph.py              # counts and the cycles' sizes
    python tools/import_graph.py --cycles     # also the modules of each cycle
    python tools/import_graph.py --inner      # also the files with the most ember imports inside functions
"""
from __future__ import annotations

import argparse
import ast
import collections
import os
import sys

# Required at run time by the core (pyproject's `dependencies`): counted with the standard library.
_CORE_DEPENDENCIES = {"numpy", "ml_dtypes"}


def modules(root: str) -> dict[str, str]:
    """Dotted module name -> file path, for every .py file under ``root/ember``."""
    found = {}
    for folder, _, files in os.walk(os.path.join(root, "ember")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                found[dotted.removesuffix(".__init__")] = path
    return found


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    base = node.module or ""
    if node.level:
        parts = module.split(".")
        keep = len(parts) - node.level + (1 if is_package else 0)
        base = ".".join(parts[:keep] + ([base] if base else []))
    return base


def _targets(node: ast.AST, module: str, is_package: bool, known: dict) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = _absolute(node, module, is_package)
        submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known]
        names = submodules + ([base] if len(submodules) < len(node.names) else [])
    else:
        return []
    return [n for n in names if n in known and n != module]


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level(body: list) -> list[ast.AST]:
    """Statements that run at import: the body, and the bodies of module-level if/try (not TYPE_CHECKING)."""
    out = []
    for node in body:
        if isinstance(node, ast.If):
            if not _is_type_checking(node):
                out += _module_level(node.body) + _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            out += _module_level(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                out += _module_level(handler.body)
        else:
            out.append(node)
    return out


def _kind(node: ast.AST) -> str:
    if isinstance(node, ast.ImportFrom) and node.level:
        return "ember"
    name = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
    top = (name or "").split(".")[0]
    if top == "ember":
        return "ember"
    if top in sys.stdlib_module_names or top in _CORE_DEPENDENCIES:
        return "stdlib"
    return "optional"


def _inner_imports(tree: ast.AST) -> list[ast.AST]:
    """Import statements inside function bodies (each counted once, however deeply nested)."""
    found = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)) and in_function:
                found.append(child)
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(tree, False)
    return found


def analyse(root: str) -> tuple[dict[str, set], dict[str, collections.Counter]]:
    """Module-level import edges, and per kind (ember/optional/stdlib) the imports inside functions per file."""
    known = modules(root)
    edges: dict[str, set] = {m: set() for m in known}
    inner: dict[str, collections.Counter] = {k: collections.Counter() for k in ("ember", "optional", "stdlib")}
    for module, path in known.items():
        tree = ast.parse(open(path, encoding="utf-8").read())
        is_package = path.endswith("__init__.py")
        for node in _inner_imports(tree):
            inner[_kind(node)][path] += 1
        for node in _module_level(tree.body):
            edges[module].update(_targets(node, module, is_package, known))
    return edges, inner


def cycles(edges: dict[str, set]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set = set()
    groups: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in edges:
        if v not in index:
            visit(v)
    return sorted(groups, key=len, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--cycles", action="store_true", help="list the modules of each cycle")
    parser.add_argument("--inner", action="store_true", help="list the files with the most ember imports inside functions")
    args = parser.parse_args()
    edges, inner = analyse(args.root)
    found = cycles(edges)
    counts = {kind: sum(per_file.values()) for kind, per_file in inner.items()}
    print(f"modules: {len(edges)}  imports inside functions: {sum(counts.values())} "
          f"(ember: {counts['ember']}, optional packages: {counts['optional']}, stdlib/numpy: {counts['stdlib']})  "
          f"cycles: {[len(c) for c in found]}")
    if args.cycles:
        for group in found:
            print(f"- {len(group)}: {', '.join(group)}")
    if args.inner:
        for path, n in inner["ember"].most_common(30):
            print(f"  {n:3d}  {os.path.relpath(path, args.root)}")


if __name__ == "__main__":
    main()
