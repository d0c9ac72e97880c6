"""Model files TVM's importers mis-handle are refused at import in one line (npu_byoc.frontends.validate).

Each case mutates the bytes of a committed fixture (or edits its ONNX proto) to break one
property, and expects a ModelLoadError naming the file, the tensor / node and the parameter.
"""

from __future__ import annotations

import math
import struct
from collections import defaultdict

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
import tflite

from npu_byoc import ModelLoadError, load_model

from .conftest import model_path

TFLITE = "tiny_cnn_int8.tflite"
ONNX = "tiny_cnn_qdq.onnx"


def _tensors():
    g = tflite.Model.GetRootAsModel(model_path(TFLITE).read_bytes(), 0).Subgraphs(0)
    return [g.Tensors(i) for i in range(g.TensorsLength())]


def _write(tmp_path, data: bytes, name=TFLITE):
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("scale", [0.0, -1.0, math.nan, math.inf])
def test_tflite_bad_scale_refused(tmp_path, scale):
    t = _tensors()[0]  # the model input
    old = struct.pack("<f", float(t.Quantization().ScaleAsNumpy()[0]))
    data = model_path(TFLITE).read_bytes()
    assert old in data
    p = _write(tmp_path, data.replace(old, struct.pack("<f", scale)))
    with pytest.raises(ModelLoadError, match=rf"{TFLITE}: tensor 'serving_default_input:0' has scale .*: scales must be finite and > 0"):  # fmt: skip
        load_model(p)


@pytest.mark.parametrize("dim", [0, -32])
def test_tflite_bad_dimension_refused(tmp_path, dim):
    old = np.array([1, 32, 32, 3], "<i4").tobytes()
    data = model_path(TFLITE).read_bytes()
    assert data.count(old) == 1
    p = _write(tmp_path, data.replace(old, np.array([1, dim, 32, 3], "<i4").tobytes()))
    with pytest.raises(ModelLoadError, match=rf"tensor 'serving_default_input:0' has shape \[1, {dim}, 32, 3\]: dimensions must be > 0"):  # fmt: skip
        load_model(p)


def _duplicate_names(tmp_path):
    """The fixture with one tensor renamed to another's (equal-length) name."""
    by_len = defaultdict(list)
    for t in _tensors():
        by_len[len(t.Name())].append(t.Name())
    a, b = next(names[:2] for names in by_len.values() if len(names) >= 2)
    data = model_path(TFLITE).read_bytes()
    prefix = struct.pack("<I", len(b))
    assert data.count(prefix + b) == 1
    return _write(tmp_path, data.replace(prefix + b, prefix + a)), a.decode()


def test_tflite_duplicate_tensor_names_refused(tmp_path):
    # TVM's importer silently drops an op when two tensors share a name (run returns its input).
    p, name = _duplicate_names(tmp_path)
    with pytest.raises(ModelLoadError, match=rf"two tensors are named '{name}': tensor names must be unique"):
        load_model(p)


def test_onnx_opset_beyond_tvm_refused(tmp_path):
    m = onnx.load(model_path(ONNX))
    m.opset_import[0].version = 99
    p = _write(tmp_path, m.SerializeToString(), ONNX)
    with pytest.raises(ModelLoadError, match=rf"{ONNX}: ONNX opset 99: TVM's ONNX importer knows opsets up to \d+"):
        load_model(p)


def test_onnx_non_utf8_node_name_refused(tmp_path):
    m = onnx.load(model_path(ONNX))
    m.graph.node[0].name = "XXXXNODE"
    data = m.SerializeToString().replace(b"XXXXNODE", b"\xff\xfeXXNODE")
    p = _write(tmp_path, data, ONNX)
    with pytest.raises(ModelLoadError, match=rf"{ONNX}: \w+ node name .* is not valid UTF-8"):
        load_model(p)


@pytest.mark.parametrize("scale", [0.0, -0.5, math.nan])
def test_onnx_bad_scale_refused(tmp_path, scale):
    m = onnx.load(model_path(ONNX))
    q = next(n for n in m.graph.node if n.op_type == "QuantizeLinear")
    init = next(i for i in m.graph.initializer if i.name == q.input[1])
    arr = onnx.numpy_helper.to_array(init).copy()
    arr[...] = scale
    init.CopyFrom(onnx.numpy_helper.from_array(arr, init.name))
    p = _write(tmp_path, m.SerializeToString(), ONNX)
    with pytest.raises(ModelLoadError, match=rf"{ONNX}: QuantizeLinear node .* scale .*: scales must be finite and > 0"):
        load_model(p)


def test_cli_refuses_duplicate_names_in_one_line(tmp_path, capsys):
    from npu_byoc.cli import main

    p, _ = _duplicate_names(tmp_path)
    assert main(["coverage", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and TFLITE in err[0] and "tensor names must be unique" in err[0], err
