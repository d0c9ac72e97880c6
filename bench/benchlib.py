"""What the benchmarks share: the fixture models and how to load them, and the quick mode's
banner (a quick run checks that a benchmark still works; its figures are not the ones to quote)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "models"
QUICK_MODEL = "tiny_cnn_int8.tflite"  # the smallest model with conv, depthwise, pool, concat, FC
QUICK_BANNER = "quick mode: a smoke run on a small model; quote the full mode's figures, not these"

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def fixture_models() -> list[str]:
    return [p.name for p in sorted(FIXTURES.glob("*")) if p.suffix in (".tflite", ".onnx")]


def load_fixture(name: str):
    """``npu_byoc.load_model`` of a fixture. A model with an open dimension beyond the batch
    (op_squeeze_int8: [-1, 1, -1, 4]) gets the input shapes its reference recorded (the .npz
    ``meta``), as the tests give them."""
    import npu_byoc
    from npu_byoc.errors import ModelLoadError

    path = FIXTURES / name
    try:
        return npu_byoc.load_model(path)
    except ModelLoadError as err:
        if "open dimension" not in str(err):
            raise
        return npu_byoc.load_model(path, input_shapes=recorded_shapes(name))


def recorded_shapes(name: str) -> dict[str, list[int]]:
    data = np.load(FIXTURES / (Path(name).stem + ".npz"))
    meta = json.loads(str(data["meta"]))
    return {t["name"]: t["shape"] for t in meta["inputs"]}


def sample(name: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The first recorded (inputs, reference outputs) of a fixture, one image each."""
    data = np.load(FIXTURES / (Path(name).stem + ".npz"))
    ins, outs = (sorted((k for k in data.files if k.startswith(p)), key=lambda k: int(k[len(p):]))
                 for p in ("input_", "output_"))  # input_2 before input_10
    return [data[k][0:1] for k in ins], [data[k][0:1] for k in outs]
