"""``torch.cuda.graphs`` names: CUDA graph capture, which ember does not do.

ember's CUDA device runs on CuPy kernel by kernel; it never captures a graph, so nothing here can run. The names
exist because libraries use them in annotations and ``isinstance`` checks at import time (Hugging Face
``transformers`` annotates ``-> torch.cuda.CUDAGraph``), as PyTorch's CPU build keeps them: making one raises
``RuntimeError`` there and here, and ``is_current_stream_capturing()`` answers False (no capture ever runs).

Example:
    >>> import ember
    >>> ember.cuda.is_current_stream_capturing()
    False
    >>> ember.cuda.CUDAGraph()
    Traceback (most recent call last):
    ...
    RuntimeError: torch.cuda.CUDAGraph: ember does not capture CUDA graphs (its CUDA device runs each kernel as it is called); run the captured code eagerly instead
"""
from __future__ import annotations

from typing import Any

__all__ = ["CUDAGraph", "MemPool", "graph", "graph_pool_handle", "is_current_stream_capturing",
           "make_graphed_callables"]


def _refuse(name: str) -> RuntimeError:
    return RuntimeError(f"torch.cuda.{name}: ember does not capture CUDA graphs (its CUDA device runs each kernel as "
                        f"it is called); run the captured code eagerly instead")


class CUDAGraph:
    """A captured CUDA graph (refused when made: ember has none)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise _refuse("CUDAGraph")


class MemPool:
    """A CUDA memory pool for graph capture (refused when made)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise _refuse("MemPool")


class graph:
    """``with torch.cuda.graph(g):`` capture context (refused when made)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise _refuse("graph")


def graph_pool_handle() -> Any:
    raise _refuse("graph_pool_handle")


def make_graphed_callables(*args: Any, **kwargs: Any) -> Any:
    raise _refuse("make_graphed_callables")


def is_current_stream_capturing() -> bool:
    """False: no stream is ever capturing under ember."""
    return False
