"""The models the package ships (npu_byoc/data): ``npu-byoc demo`` and the sweep's defaults."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ..errors import NpuByocError

BUNDLED = {
    "tiny_cnn": "tiny_cnn_int8.tflite",
    "mobilenet_v2": "mobilenet_v2_int8.tflite",
}


def bundled_model(name: str) -> Path:
    if name not in BUNDLED:
        raise NpuByocError(f"no bundled model '{name}' (bundled: {', '.join(BUNDLED)})")
    return Path(str(resources.files("npu_byoc") / "data" / BUNDLED[name]))


__all__ = ["BUNDLED", "bundled_model"]
