"""Run a script as ``__main__`` with ``torch`` resolved to ember, naming any PyTorch name ember lacks.

Example:
    >>> from ember.run import run_script
    >>> run_script("train.py", ["--epochs", "1"])      # doctest: +SKIP
"""
from __future__ import annotations

import os
import re
import runpy
import sys
import traceback
import types

from ember.run import alias

_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../ember
_ALIAS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "alias_path")


def _ember_owned(obj: object) -> bool:
    module = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(
        obj if isinstance(obj, type) else type(obj), "__module__", "") or ""
    return module == "ember" or module.startswith("ember.")


def _qualified(obj: object) -> str:
    """PyTorch's spelling of an ember module, class or an instance's class."""
    if isinstance(obj, types.ModuleType):
        return alias.torch_name(obj.__name__)
    cls = obj if isinstance(obj, type) else type(obj)
    if cls.__name__ == "Tensor" or cls.__name__ == "Parameter":
        return "torch.Tensor"
    return f"{alias.torch_name(cls.__module__)}.{cls.__qualname__}"


def missing_name(exc: BaseException) -> str | None:
    """The PyTorch name ember could not provide, when ``exc`` is such a failure; otherwise None."""
    if isinstance(exc, alias.MissingTorchModule):
        return exc.name
    if isinstance(exc, ImportError) and exc.name and _ember_owned(sys.modules.get(exc.name, types)):
        found = re.search(r"cannot import name '(\w+)'", str(exc))
        if found:
            return f"{alias.torch_name(exc.name)}.{found.group(1)}"
    if isinstance(exc, AttributeError) and getattr(exc, "name", None):
        obj = getattr(exc, "obj", None)
        if obj is not None and _ember_owned(obj):
            return f"{_qualified(obj)}.{exc.name}"
    return None


def _script_frame(tb: types.TracebackType | None) -> traceback.FrameSummary | None:
    """The innermost frame outside ember and the import machinery: where the script asked for the name."""
    found = None
    for frame in traceback.extract_tb(tb):
        name = frame.filename
        if name.startswith(_EMBER_DIR + os.sep) or name.startswith("<frozen") or "importlib" in name:
            continue
        if name.endswith(os.sep + "runpy.py"):
            continue
        found = frame
    return found


def explain(exc: BaseException) -> str | None:
    """One line naming the missing PyTorch name and where the script used it (None if not that kind)."""
    name = missing_name(exc)
    if name is None:
        return None
    frame = _script_frame(exc.__traceback__)
    where = f" ({frame.filename}, line {frame.lineno}: {frame.line.strip()})" if frame and frame.line else ""
    return f"ember run: ember does not provide {name}{where}"


def _child_environment() -> None:
    """Processes the script starts (spawned workers, ``python`` subprocesses) resolve torch to ember too."""
    parts = [_ALIAS_PATH, os.path.dirname(_EMBER_DIR)]
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(parts + ([old] if old else []))
    # multiprocessing's spawn copies this process's sys.path into the child: put the stand-in there too,
    # ahead of site-packages (in this process the meta-path finder answers first anyway)
    for k, part in enumerate(parts):
        if part not in sys.path:
            sys.path.insert(1 + k, part)


def run_script(path: str, args: list[str]) -> int:
    """Run ``path`` as ``__main__`` with ``sys.argv = [path, *args]``; return its exit status."""
    if not os.path.isfile(path):
        print(f"ember run: no such script: {path}", file=sys.stderr)
        return 2
    alias.install()
    _child_environment()
    sys.argv = [path, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(path))  # as `python path` does
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    except BaseException as e:  # noqa: BLE001 - report, then exit non-zero like python would
        traceback.print_exc()
        line = explain(e)
        if line:
            print(line, file=sys.stderr)
        return 130 if isinstance(e, KeyboardInterrupt) else 1
    return 0
