"""The CuPy backend's CUDA-graph capture (ember/backends/cuda_capture.py) and its cuDNN kernel lookup, against fake
CuPy/cuDNN modules that record the calls: the capture runs on a fresh non-blocking side stream that first waits for
the current stream, becomes current, begins capturing, and on end/abort leaves the stream and ends the capture;
``capture_state.ACTIVE`` follows it; replays launch on the current stream; ``native_kernel`` offers cuDNN only while
``ember.backends.cudnn.enabled`` and the frontend loads. (On a GPU: tests/cuda/test_cuda_features_on_gpu.py.)"""
from __future__ import annotations

import importlib
import types

import pytest

import ember
from ember.backends import capture_state, cuda_capture, cuda_cudnn

cuda_backend = importlib.import_module("ember.backends.cuda")  # (ember.backends.cuda the attribute: torch.backends.cuda)

import fake_cudnn  # noqa: E402  (tests/cuda is on the path)


class FakeStream:
    made: list = []

    def __init__(self, non_blocking: bool = False, ptr: int = 0) -> None:
        self.non_blocking, self.ptr, self.calls = non_blocking, ptr or 100 + len(FakeStream.made), []
        FakeStream.made.append(self)

    def record(self) -> str:
        self.calls.append("record")
        return f"event-of-{self.ptr}"

    def wait_event(self, event: str) -> None:
        self.calls.append(("wait_event", event))

    def __enter__(self) -> "FakeStream":
        self.calls.append("enter")
        return self

    def __exit__(self, *exc) -> None:
        self.calls.append("exit")

    def begin_capture(self) -> None:
        self.calls.append("begin_capture")

    def end_capture(self) -> "FakeGraph":
        self.calls.append("end_capture")
        return FakeGraph()


class FakeGraph:
    launches: list = []

    def launch(self, stream: FakeStream = None) -> None:
        FakeGraph.launches.append(stream)


@pytest.fixture()
def cupy():
    FakeStream.made, FakeGraph.launches = [], []
    current = FakeStream(ptr=7)
    cuda = types.SimpleNamespace(Stream=FakeStream, get_current_stream=lambda: current,
                                 runtime=types.SimpleNamespace(getDevice=lambda: 0))
    return types.SimpleNamespace(cuda=cuda, current=current, empty=None, uint8=None)


def test_capture_runs_on_a_side_stream_that_waits_for_the_current_one(cupy):
    capturer = cuda_capture.Capturer(cupy)
    capturer.begin()
    side = FakeStream.made[-1]
    assert side is not cupy.current and side.non_blocking
    assert cupy.current.calls == ["record"] and side.calls == [("wait_event", "event-of-7"), "enter", "begin_capture"]
    assert capturer.is_capturing() and capture_state.ACTIVE
    with pytest.raises(RuntimeError, match="already in progress"):
        capturer.begin()
    graph = capturer.end()
    assert side.calls[-2:] == ["exit", "end_capture"] and not capture_state.ACTIVE and not capturer.is_capturing()
    graph.replay()
    assert FakeGraph.launches == [cupy.current]  # replays go to the current stream
    assert graph.stream is side  # the stream (and its pool arena) lives as long as the graph


def test_abort_ends_the_capture_and_swallows_the_invalidated_error(cupy):
    capturer = cuda_capture.Capturer(cupy)
    capturer.begin()
    side = FakeStream.made[-1]

    def invalidated() -> None:
        raise RuntimeError("cudaErrorStreamCaptureInvalidated")

    side.end_capture = invalidated
    capturer.abort()
    assert "exit" in side.calls and not capture_state.ACTIVE and not capturer.is_capturing()
    capturer.abort()  # nothing to abort: no error
    with pytest.raises(RuntimeError, match="no capture in progress"):
        capturer.end()


def test_native_kernel_offers_cudnn_only_when_enabled_and_loaded(monkeypatch, cupy):
    backend = cuda_backend.CuPyBackend()
    monkeypatch.setattr(cuda_backend, "cupy", cupy)
    cuda_cudnn.reset()
    monkeypatch.setattr(cuda_cudnn, "frontend", lambda: fake_cudnn)
    assert backend.native_kernel("relu") is None  # CPU kernel names: none on the GPU
    conv = backend.native_kernel("cudnn_conv2d")
    assert conv is not None and conv.__self__.fe is fake_cudnn
    assert backend.native_kernel("cudnn_conv2d_weight_grad").__self__ is conv.__self__  # one cache for all ops
    monkeypatch.setattr(ember.backends.cudnn, "enabled", False)
    assert backend.native_kernel("cudnn_conv2d") is None
    monkeypatch.setattr(ember.backends.cudnn, "enabled", True)
    without = cuda_backend.CuPyBackend()
    monkeypatch.setattr(cuda_cudnn, "frontend", lambda: None)
    assert without.native_kernel("cudnn_conv2d") is None
