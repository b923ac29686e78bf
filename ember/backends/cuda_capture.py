"""CUDA-graph capture on CuPy: the CUDA backend's ``capture_begin``/``capture_end``/``capture_abort``.

A capture runs on a side stream of its own (CUDA cannot capture the legacy default stream): it first
waits for the work already queued on the current stream, becomes the current stream (so every CuPy
kernel, cuBLAS call and fused kernel ember launches is recorded, not run), and ends with
``Stream.end_capture()``, which returns a ``cupy.cuda.Graph``. CuPy captures in relaxed mode, so its
memory pool may still grow during a capture.

Memory: CuPy's pool keeps one arena per stream, so everything allocated during the capture comes from
the side stream's arena. The side stream lives as long as the graph and runs nothing else, so memory
the capture freed (temporaries) is reused only by later allocations *of the same capture*, in stream
order, and never by work outside the graph; arrays the graph reads or writes after the capture (its
outputs, the static inputs, the states) are held by the caller. This is PyTorch's private graph pool,
made from CuPy's per-stream arenas.

A replay is ``Graph.launch()`` on the current stream.

Example (with a GPU):
    >>> from ember.backends.cuda import BACKEND               # doctest: +SKIP
    >>> BACKEND.capture_begin(); y = x * 2; g = BACKEND.capture_end(); g.replay()  # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any

from ember.backends import capture_state


class CudaGraph:
    """A captured ``cupy.cuda.Graph`` with the stream whose pool arena holds its memory."""

    def __init__(self, graph: Any, stream: Any, cupy: Any) -> None:
        self.graph, self.stream, self._cupy = graph, stream, cupy

    def replay(self) -> None:
        self.graph.launch(stream=self._cupy.cuda.get_current_stream())


class Capturer:
    """One capture at a time per backend (what ``ember.cuda.graph`` and compiled steps need)."""

    def __init__(self, cupy: Any) -> None:
        self.cupy = cupy
        self.stream: Any = None

    def begin(self) -> None:
        cupy = self.cupy
        if self.stream is not None:
            raise RuntimeError("capture_begin: a capture is already in progress on this device")
        current = cupy.cuda.get_current_stream()
        side = cupy.cuda.Stream(non_blocking=True)
        side.wait_event(current.record())  # the capture's kernels follow the work already queued
        side.__enter__()
        try:
            side.begin_capture()
        except Exception:
            side.__exit__(None, None, None)
            raise
        self.stream = side
        capture_state.ACTIVE = True

    def end(self) -> CudaGraph:
        side = self._leave("capture_end")
        return CudaGraph(side.end_capture(), side, self.cupy)

    def abort(self) -> None:
        """End a capture an error interrupted (CUDA invalidated it, or Python raised): nothing ran."""
        if self.stream is None:
            return
        side = self._leave("capture_abort")
        try:
            side.end_capture()
        except Exception:  # noqa: BLE001 - an invalidated capture raises here; the graph is dropped anyway
            pass

    def _leave(self, what: str) -> Any:
        side = self.stream
        if side is None:
            raise RuntimeError(f"{what}: no capture in progress")
        self.stream = None
        capture_state.ACTIVE = False
        side.__exit__(None, None, None)
        return side

    def is_capturing(self) -> bool:
        return self.stream is not None
