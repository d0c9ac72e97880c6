"""The golden model against the reference runtimes: per op, fed the reference's own inputs,
and end to end with the rest of the model on TVM's CPU build."""

from __future__ import annotations

import json

import numpy as np
import pytest

import npu_byoc
from npu_byoc.codegen.lower import lower_module
from npu_byoc.frontends.load import model_info
from npu_byoc.runtime import golden
from npu_byoc.runtime.build import build
from npu_byoc.runtime.compare import compare

from .conftest import MODELS, onnx_tensor_lookup, op_expected, reference

TFLITE = ["tiny_cnn_int8.tflite", "mobilenet_v2_int8.tflite"]


def _tflite_tensors(name):
    t = np.load(MODELS / name.replace(".tflite", ".tensors.npz"))
    # Layers are named after their output tensor's first ';' component.
    return {k.split(";")[0]: t[k] for k in t.files if k != "__index__"}


def _per_op_diffs(partitioned, name, tensor_of):
    """Run every NPU op on the reference runtime's own input tensors; max |diff| per op."""
    diffs = []
    for plan in lower_module(partitioned(name)).values():
        regions = golden.allocate_regions(plan, [np.zeros(io.shape, np.int8) for io in plan.inputs])
        for k, op in enumerate(plan.ops):
            for ref in op.inputs:
                golden.write_tensor(regions, ref, tensor_of(ref.name, ref.shape))
            out = golden.run_op(op, regions)
            expected = op_expected(plan, k, tensor_of)
            diffs.append((op.kind, op.name, int(np.abs(out.astype(int) - expected.astype(int)).max())))
    return diffs


@pytest.mark.parametrize("name", TFLITE)
def test_every_op_bit_exact_with_litert(imported, partitioned, name):
    tensors = _tflite_tensors(name)
    info = model_info(imported(name))
    source = {v: o.name for o in info.ops for v in o.vars}
    source.update({t.name.replace(":", "_"): t.name for t in info.inputs})

    def tensor_of(ref_name, hwc):
        return tensors[source.get(ref_name, ref_name)].reshape(hwc)

    diffs = _per_op_diffs(partitioned, name, tensor_of)
    assert len(diffs) >= 12
    assert [d for d in diffs if d[2] != 0] == []
    kinds = {d[0] for d in diffs}
    assert {"conv2d", "depthwise_conv2d", "fully_connected", "mean", "add"} <= kinds


def test_onnx_ops_within_one_lsb_of_onnxruntime(imported, partitioned):
    """onnxruntime runs QDQ in float (ties to even): the integer NPU is within 1 LSB."""
    name = "tiny_cnn_qdq.onnx"
    tensor_of = onnx_tensor_lookup(imported(name), name)

    diffs = _per_op_diffs(partitioned, name, tensor_of)
    assert len(diffs) == 18  # Tanh, the dilated conv, the concatenation's three rescaling copies, the interleave
    assert max(d[2] for d in diffs) <= 1, diffs
    exact = {d[0] for d in diffs if d[2] == 0}
    assert {"add", "lut", "fully_connected"} <= exact


_built: dict = {}


def _model(imported, name, backend):
    key = (name, backend)
    if key not in _built:
        _built[key] = build(imported(name), backend)
    return _built[key]


@pytest.mark.slow
@pytest.mark.parametrize("name", TFLITE)
def test_golden_path_equals_litert_end_to_end(imported, name):
    model = _model(imported, name, "golden")
    ref = reference(name)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        np.testing.assert_array_equal(model.run(inputs)[0], outputs[0])


@pytest.mark.slow
def test_golden_path_close_to_onnxruntime(imported):
    name = "tiny_cnn_qdq.onnx"
    model = _model(imported, name, "golden")
    ref = reference(name)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        out = model.run(inputs)[0]
        # float output (after the model's final DequantizeLinear, scale 1/255): the NPU's
        # TFLite rounding vs onnxruntime's float QDQ moves a few softmax LSB at most.
        assert np.abs(out - outputs[0]).max() <= 8 / 255
        assert out.argmax() == outputs[0].argmax()


def test_inputs_are_checked(imported):
    model = _model(imported, "tiny_cnn_int8.tflite", "golden")
    with pytest.raises(npu_byoc.NpuByocError, match=r"input 'serving_default_input:0' must be int8 \[1, 32, 32, 3\]"):
        model.run([np.zeros((1, 32, 32, 3), np.float32)])
    with pytest.raises(npu_byoc.NpuByocError, match="takes 1 input"):
        model.run([])


@pytest.mark.slow
def test_compare_report(imported):
    name = "tiny_cnn_int8.tflite"
    ref = reference(name)
    report = compare(imported(name), ref["inputs"][0], ref["outputs"][0])
    doc = json.loads(report.to_json())
    assert len(doc["layers"]) == 17  # TANH, two QUANTIZEs (LUTs), the dilated conv and the SOFTMAX too
    # TVM's float QDQ path differs from the integer NPU by at most 1 LSB on a layer whose
    # input agrees; the sigmoid's steep table amplifies an upstream 1 LSB.
    assert all(r["golden_vs_cpu"]["max_lsb"] <= 1 for r in doc["layers"] if r["op"] != "lut")
    out = doc["outputs"][0]
    assert out["golden_vs_reference"]["max_lsb"] == 0


def test_compare_report_of_a_two_output_model(imported):
    """A model whose main returns its outputs through a variable bound to a tuple (TFLite with
    two outputs): compare adds the per-layer outputs after both, and reports each output."""
    name = "op_gelu_int8.tflite"
    ref = reference(name)
    report = compare(imported(name), ref["inputs"][0], ref["outputs"][0])
    doc = json.loads(report.to_json())
    assert len(doc["outputs"]) == 2
    assert [o["golden_vs_reference"]["max_lsb"] for o in doc["outputs"]] == [0, 0]
    assert {r["op"] for r in doc["layers"]} >= {"lut", "conv2d"}
