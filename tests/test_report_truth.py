"""Reports that tell the truth (issue 22, route 12): the coverage report names the match that
does an op's work and a true reason for a refusal; compare's LSB column is in LSB."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import npu_byoc
from npu_byoc.cli import main

from .conftest import model_path

tflite = pytest.importorskip("tflite")


def _i32(data: bytearray, pos: int, value: int | None = None) -> int:
    if value is not None:
        data[pos : pos + 4] = np.int32(value).tobytes()
    return int(np.frombuffer(bytes(data[pos : pos + 4]), "<i4")[0])


def _ops(data):
    model = tflite.Model.GetRootAsModel(data, 0)
    sg = model.Subgraphs(0)
    ops = [sg.Operators(i) for i in range(sg.OperatorsLength())]
    return model, sg, ops, [model.OperatorCodes(op.OpcodeIndex()).BuiltinCode() for op in ops]


def fc_keep_num_dims() -> bytes:
    """dense_seq_int8 (a Keras Dense on a (1, 4, 64) sequence) with its FULLY_CONNECTED reading
    the rank-3 tensor and writing the (1, 4, 8) one itself with keep_num_dims = true, as
    ConvNeXt's Dense layers are: TVM ends the op with a reshape to the kept dimensions."""
    data = bytearray(model_path("dense_seq_int8.tflite").read_bytes())
    _, sg, ops, codes = _ops(data)
    k = codes.index(tflite.BuiltinOperator.FULLY_CONNECTED)
    before, fc, after = ops[k - 1], ops[k], ops[k + 1]
    assert codes[k - 1] == codes[k + 1] == tflite.BuiltinOperator.RESHAPE
    _i32(data, fc._tab.Vector(fc._tab.Offset(6)), before.Inputs(0))  # Operator.inputs[0]
    _i32(data, fc._tab.Vector(fc._tab.Offset(8)), after.Outputs(0))  # Operator.outputs[0]
    # Drop the RESHAPE after it: SubGraph.operators holds offsets relative to each slot.
    vec, n = sg._tab.Vector(sg._tab.Offset(10)), len(ops)
    for j in range(k + 1, n - 1):
        target = vec + 4 * (j + 1) + _i32(data, vec + 4 * (j + 1))
        _i32(data, vec + 4 * j, target - (vec + 4 * j))
    _i32(data, vec - 4, n - 1)
    # New FullyConnectedOptions {keep_num_dims: true} appended: flatbuffer offsets point forward.
    field = fc._tab.Pos + fc._tab.Offset(12)  # Operator.builtin_options
    data += bytes(-len(data) % 4)
    vtable = len(data)
    data += struct.pack("<5H", 10, 8, 0, 0, 4)  # field 2 (keep_num_dims) at table offset 4
    data += bytes(-len(data) % 4)
    table = len(data)
    data += struct.pack("<iB3x", table - vtable, 1)
    _i32(data, field, table - field)
    return bytes(data)


def test_fully_connected_with_kept_dims_is_credited_to_its_match(tmp_path):
    path = tmp_path / "fc_keep_dims.tflite"
    path.write_bytes(fc_keep_num_dims())
    mod = npu_byoc.partition_for_npu(npu_byoc.load_model(path))
    composites = [a for a in mod.script().split('"Composite": "')[1:]]
    assert sum(c.startswith("npu.fully_connected") for c in composites) == 1
    fc = [o for o in npu_byoc.coverage_report(mod).ops if o.op == "FULLY_CONNECTED"]
    assert len(fc) == 1 and fc[0].offloaded and fc[0].pattern == "npu.fully_connected", fc
    assert fc[0].macs == 4 * 64 * 8


def squared_difference_model() -> bytes:
    """op_mul_int8 with its MUL operator code turned into SQUARED_DIFFERENCE: int8 operands."""
    data = bytearray(model_path("op_mul_int8.tflite").read_bytes())
    model = tflite.Model.GetRootAsModel(data, 0)
    for i in range(model.OperatorCodesLength()):
        tab = model.OperatorCodes(i)._tab
        if model.OperatorCodes(i).BuiltinCode() == tflite.BuiltinOperator.MUL:
            data[tab.Pos + tab.Offset(4)] = tflite.BuiltinOperator.SQUARED_DIFFERENCE  # deprecated_builtin_code
            _i32(data, tab.Pos + tab.Offset(10), tflite.BuiltinOperator.SQUARED_DIFFERENCE)  # builtin_code
    return bytes(data)


def test_int8_squared_difference_is_not_called_float(tmp_path):
    """The int8 SQUARED_DIFFERENCEs run on the NPU (npu.squared_difference); without that entry
    (excluded by name) TVM computes them in float, and the reason says so without calling the
    tensors float."""
    path = tmp_path / "sqd.tflite"
    path.write_bytes(squared_difference_model())
    report = npu_byoc.coverage_report(npu_byoc.load_model(path))
    rows = [o for o in report.ops if o.op == "SQUARED_DIFFERENCE"]
    assert rows and all(o.offloaded and o.pattern == "npu.squared_difference" for o in rows)
    report = npu_byoc.coverage_report(npu_byoc.load_model(path), exclude=("npu.squared_difference",))
    rows = [o for o in report.ops if o.op == "SQUARED_DIFFERENCE"]
    assert rows and all(not o.offloaded for o in rows)
    for o in rows:
        assert o.reason == ("no NPU unit for SQUARED_DIFFERENCE on int8 tensors (TVM computes it in float as "
                            "subtract, multiply)"), o.reason  # fmt: skip


def test_compare_counts_an_onnx_float_output_in_lsb(tmp_path, capsys):
    """An ONNX QDQ model's output is float (DequantizeLinear): its differences are whole LSB
    of the output's scale, as the header says, not float units."""
    import json

    fixture = np.load(model_path("tiny_cnn_qdq.npz"))
    scale = json.loads(str(fixture["meta"]))["outputs"][0]["scale"]
    x, ref = tmp_path / "x.npy", tmp_path / "ref.npy"
    np.save(x, fixture["input_0"][:1])
    shifted = fixture["output_0"][:1].copy()
    shifted[0, 0] += 5 * np.float32(scale)  # 5 LSB off what every path computes for this element
    np.save(ref, shifted)
    model = str(model_path("tiny_cnn_qdq.onnx"))
    assert main(["compare", model, "--input", str(x), "--reference", str(ref), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)["outputs"][0]
    assert out["scale"] == pytest.approx(scale)
    for key in ("golden_vs_cpu", "golden_vs_reference", "cpu_vs_reference"):
        assert float(out[key]["max_lsb"]).is_integer(), out
    assert out["cpu_vs_reference"]["max_lsb"] >= 5
    assert main(["compare", model, "--input", str(x)]) == 0
    assert f"output 0 (float, in LSB of its scale {scale:.6g}): golden vs TVM CPU max " in capsys.readouterr().out


def test_lsb_difference_of_dequantized_values():
    from npu_byoc.runtime.compare import Diff

    scale = np.float32(0.0039215688)
    a = (np.arange(-128, 128, dtype=np.float32) * scale).astype(np.float32)
    d = Diff.of(a, np.roll(a, 1), float(scale))
    assert d.max_lsb == 255 and d.mean_lsb == pytest.approx((255 * 1 + 1 * 255) / 256)


def test_compare_api_refuses_a_reference_that_does_not_fit():
    from npu_byoc.errors import NpuByocError
    from npu_byoc.runtime.compare import reference_like

    y = np.zeros((1, 10), np.int8)
    assert reference_like([np.ones(10, np.int8)], 0, y).shape == (1, 10)
    with pytest.raises(NpuByocError, match=r"^reference 0: int8 \[1, 3\] does not fit the model output int8 \[1, 10\]$"):
        reference_like([np.zeros((1, 3), np.int8)], 0, y)
    with pytest.raises(NpuByocError, match="got 1 reference array"):
        reference_like([y], 1, y)
