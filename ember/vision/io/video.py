"""``torchvision.io``'s video functions: refused by name (ember decodes no video; decode frames with a video
library such as PyAV and wrap them with ``ember.from_numpy``)."""
from __future__ import annotations

from typing import Any


def _refuse(name: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"torchvision.io.{name}: ember reads no video files; decode the frames with a "
                                  "video library (PyAV, imageio) and wrap them with ember.from_numpy")

    refuse.__name__ = name
    return refuse


read_video = _refuse("read_video")
read_video_timestamps = _refuse("read_video_timestamps")
write_video = _refuse("write_video")
