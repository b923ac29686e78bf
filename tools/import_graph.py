"""The package's import graph: cycles (strongly connected groups of modules) and imports inside functions.

Issue 15 asks that no import cycle span more than two files and that imports inside functions drop by
two thirds; this measures both. Module-level imports (including those under ``if``/``try`` at module
level) are edges; ``from ember.ops import dispatch`` is an edge to ``ember.ops`` (its ``__init__`` runs)
and to ``ember.ops.dispatch``. Imports inside a function or method body are counted, not followed.

Usage:
    python tools/import_graph.py              # counts and the cycles' sizes
    python tools/import_graph.py --cycles     # also the modules of each cycle
"""
from __future__ import annotations

import argparse
import ast
import os
import sys


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


def _targets(node: ast.AST, module: str, is_package: bool, known: dict) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = module.split(".")
            keep = len(parts) - node.level + (1 if is_package else 0)
            base = ".".join(parts[:keep] + ([base] if base else []))
        names = [base] + [f"{base}.{alias.name}" for alias in node.names]
    else:
        return []
    return [n for n in names if n in known and n != module]


def analyse(root: str) -> tuple[dict[str, set], int]:
    """Module-level import edges, and the number of import statements inside functions."""
    known = modules(root)
    edges: dict[str, set] = {m: set() for m in known}
    inner = 0
    for module, path in known.items():
        tree = ast.parse(open(path, encoding="utf-8").read())
        is_package = path.endswith("__init__.py")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner += sum(isinstance(s, (ast.Import, ast.ImportFrom)) for s in ast.walk(node) if s is not node)
        for top in tree.body:
            for node in (ast.walk(top) if isinstance(top, (ast.If, ast.Try)) else [top]):
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
    args = parser.parse_args()
    edges, inner = analyse(args.root)
    found = cycles(edges)
    print(f"modules: {len(edges)}  imports inside functions: {inner}  cycles: {[len(c) for c in found]}")
    if args.cycles:
        for group in found:
            print(f"- {len(group)}: {', '.join(group)}")


if __name__ == "__main__":
    main()
