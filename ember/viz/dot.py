"""A DOT document and its rendering through Graphviz's ``dot`` program (an optional dependency).

Example:
    >>> doc = Dot("g"); doc.node("a", "x"); doc.node("b", "y"); doc.edge("a", "b", "(3,)")
    >>> '"a" -> "b"' in doc.source
    True
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Any

INSTALL_HINT = ("Graphviz's `dot` program is needed to render SVG/PNG: install it with `apt-get install graphviz`, "
                "`brew install graphviz` or `conda install graphviz`. The DOT text is always available as `.source` "
                "(paste it into https://dreampuf.github.io/GraphvizOnline).")


def quote(text: Any) -> str:
    """A DOT string literal (labels come from user names: escape everything DOT treats specially)."""
    s = str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{s}"'


def _attrs(attrs: dict) -> str:
    items = [f"{k}={quote(v)}" for k, v in attrs.items() if v is not None]
    return f" [{', '.join(items)}]" if items else ""


class Dot:
    """A directed graph under construction: nodes, edges and clusters (subgraphs drawn in a box)."""

    def __init__(self, name: str = "G", graph_attr: dict | None = None, node_attr: dict | None = None) -> None:
        self.name = name
        self.graph_attr = {"rankdir": "TB", "fontname": "Helvetica", "fontsize": "11", **(graph_attr or {})}
        self.node_attr = {"fontname": "Helvetica", "fontsize": "10", "shape": "box", "style": "filled",
                          "fillcolor": "white", **(node_attr or {})}
        self.body: list[str] = []
        self.names: set = set()  # nodes drawn so far (clusters add theirs)
        self.format: str | None = None  # as graphviz.Digraph's: the format render() uses when given no suffix

    def node(self, name: str, label: Any = None, **attrs: Any) -> None:
        if label is not None:
            attrs["label"] = label
        self.names.add(name)
        self.body.append(f"  {quote(name)}{_attrs(attrs)}")

    def edge(self, tail: str, head: str, label: Any = None, **attrs: Any) -> None:
        if label is not None:
            attrs["label"] = label
        self.body.append(f"  {quote(tail)} -> {quote(head)}{_attrs(attrs)}")

    def subgraph(self, other: "Dot", label: str | None = None) -> None:
        """Add ``other`` as a cluster (its node names must be unique in this graph)."""
        attrs = dict(other.graph_attr)
        attrs.pop("rankdir", None)
        if label is not None:
            attrs["label"] = label
        inner = [f"    {k}={quote(v)}" for k, v in attrs.items()]
        inner.append(f"    node{_attrs(other.node_attr)}")
        inner += ["  " + line for line in other.body]
        self.names |= other.names
        self.body.append(f"  subgraph {quote('cluster_' + other.name)} {{\n" + "\n".join(inner) + "\n  }")

    @property
    def source(self) -> str:
        head = [f"digraph {quote(self.name)} {{"]
        head += [f"  {k}={quote(v)}" for k, v in self.graph_attr.items()]
        head.append(f"  node{_attrs(self.node_attr)}")
        head.append(f"  edge{_attrs({'fontname': 'Helvetica', 'fontsize': '9'})}")
        return "\n".join(head + self.body + ["}"]) + "\n"

    def __str__(self) -> str:
        return self.source

    # ---- rendering ---------------------------------------------------------------------------------
    def pipe(self, format: str = "svg") -> bytes:
        """The rendered picture as bytes (``format``: svg, png, pdf...). Needs Graphviz's ``dot``."""
        exe = shutil.which("dot")
        if exe is None:
            raise RuntimeError(f"ember.viz: cannot render {format.upper()}. {INSTALL_HINT}")
        done = subprocess.run([exe, f"-T{format}"], input=self.source.encode(), capture_output=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"ember.viz: dot failed ({done.returncode}): {done.stderr.decode(errors='replace')}")
        return done.stdout

    def render(self, path: str | os.PathLike, format: str | None = None, **ignored: Any) -> str:
        """Write the picture to ``path`` (format from its suffix: .svg, .png, .pdf, or .dot/.gv for the DOT
        text, which needs no Graphviz). Written atomically; returns the path written.

        As graphviz's ``render`` (what torchviz users call), ``render("graph", format="png")`` writes the DOT
        text to ``graph`` and the picture to ``graph.png``; ``view``/``cleanup`` and the like are accepted and
        ignored."""
        path = os.fspath(path)
        fmt = (format or self.format or "").lower()
        suffix = os.path.splitext(path)[1].lstrip(".").lower()
        source_too = bool(fmt) and suffix != fmt and fmt not in ("dot", "gv")
        fmt = fmt or suffix or "svg"
        data = self.source.encode() if fmt in ("dot", "gv") else self.pipe(fmt)  # fails before writing anything
        if source_too:
            _write(path, self.source.encode())
            path = f"{path}.{fmt}"
        _write(path, data)
        return path

    save = render

    def _repr_svg_(self) -> str | None:  # Jupyter shows the picture when Graphviz is there
        try:
            return self.pipe("svg").decode()
        except RuntimeError:
            return None


def _write(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file in the same folder, then a rename)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".viz-")
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; a picture is as readable as any other file
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
