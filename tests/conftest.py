"""Shared fixtures: the committed model fixtures, imported and partitioned once per session."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import npu_byoc

MODELS = Path(__file__).parent / "fixtures" / "models"
TFLITE_MODELS = ["tiny_cnn_int8.tflite", "mobilenet_v2_int8.tflite"]
ONNX_MODELS = ["tiny_cnn_qdq.onnx"]
ALL_MODELS = TFLITE_MODELS + ONNX_MODELS


def model_path(name: str) -> Path:
    return MODELS / name


def reference(name: str) -> dict:
    """The reference runtime's inputs and outputs recorded by tools/make_models.py, one
    model-shaped array per sample: {"inputs": [[x0], [x1], ...], "outputs": [[y0], ...]}."""
    data = np.load(MODELS / (Path(name).stem + ".npz"))
    n = data["input_0"].shape[0]
    ins = sorted(k for k in data.files if k.startswith("input_"))
    outs = sorted(k for k in data.files if k.startswith("output_"))
    return {
        "inputs": [[data[k][i : i + 1] for k in ins] for i in range(n)],
        "outputs": [[data[k][i : i + 1] for k in outs] for i in range(n)],
        "reference": str(data["reference"]),
    }


_imported: dict = {}
_partitioned: dict = {}


@pytest.fixture(scope="session")
def imported():
    def get(name: str):
        if name not in _imported:
            _imported[name] = npu_byoc.load_model(model_path(name))
        return _imported[name]

    return get


_plans: dict = {}


@pytest.fixture(scope="session")
def plans(partitioned):
    """The lowered PartitionPlans of a fixture model, by partition name."""
    from npu_byoc.codegen.lower import lower_module

    def get(name: str):
        if name not in _plans:
            _plans[name] = lower_module(partitioned(name))
        return _plans[name]

    return get


@pytest.fixture(scope="session")
def partitioned(imported):
    def get(name: str):
        if name not in _partitioned:
            _partitioned[name] = npu_byoc.partition_for_npu(imported(name))
        return _partitioned[name]

    return get


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite the golden-text files (generated C) instead of comparing with them",
    )


@pytest.fixture
def update_golden(request) -> bool:
    return bool(request.config.getoption("--update-golden"))
