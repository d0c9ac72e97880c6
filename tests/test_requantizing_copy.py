"""Copies quantized unlike their input (issue 24): onnxruntime's QOperator quantizer gives each
Slice of a ShuffleNet unit's ``chunk`` the range of its half, so the slice is a data movement
plus a requantize. The NPU runs its copies through a LUT holding onnxruntime's int8 -> int8
requantize (npu_byoc.ops.lut.requantize_table) instead of the identity.

References: onnxruntime's outputs recorded with the fixture (graph optimizations disabled), TVM's
CPU build layer by layer (the ONNX rule: within 1 LSB), the requantize written out here in
numpy from ONNX's DequantizeLinear / QuantizeLinear definitions.
"""

from __future__ import annotations

import numpy as np
import pytest
from tvm import relax
from tvm.script import relax as R

import npu_byoc
from npu_byoc.codegen.lower import lower_module
from npu_byoc.ops.lut import requantize_table
from npu_byoc.ops.npu_ops import Gather
from npu_byoc.ops.records import QTensor
from npu_byoc.partition.pipeline import partition_for_npu, partition_log

from .conftest import check_onnx_fixture


def test_requantize_table_is_onnx_dequantize_then_quantize():
    """float32 (v − zp_in)·s_in, divided by s_out in float32, rounded half to even, + zp_out,
    saturated: ONNX's DequantizeLinear then QuantizeLinear on each of the 256 int8 values."""
    s_in, zp_in, s_out, zp_out = 0.00135364, -128, 0.00130348, -128  # a ShuffleNetV2 Slice's (stage2.1)
    inp = QTensor((1, 8, 8, 8), "int8", s_in, zp_in)
    out = QTensor((1, 8, 8, 4), "int8", s_out, zp_out)
    v = np.arange(-128, 128)
    real = np.float32(s_in) * (v - zp_in).astype(np.float32)
    want = np.clip(np.rint(real / np.float32(s_out)) + zp_out, -128, 127).astype(np.int8)
    np.testing.assert_array_equal(requantize_table("slice", inp, out, "onnx"), want)
    assert requantize_table("slice", inp, QTensor((1, 8, 8, 4), "int8", s_in, zp_in), "onnx") is None


def test_requantizing_slices_run_on_the_npu():
    """The ShuffleNet unit: every operator on the NPU, one partition, with the QLinearMul /
    QLinearAdd of initializers; golden == C model == RTL (cycles exact), within 1 LSB of
    onnxruntime and of TVM's CPU build layer by layer; at least one Slice of each chunk
    requantizes (the half without the tensor's maximum)."""
    mod = check_onnx_fixture("shuffle_unit_qop.onnx", lsb=1)
    part = partition_for_npu(mod)
    report = npu_byoc.coverage_report(part)
    assert all(o.offloaded for o in report.ops) and report.summary["partitions"] == 1
    assert [o.pattern for o in report.ops if o.op == "Slice"] == ["npu.gather"] * 4
    (plan,) = lower_module(part).values()
    gathers = [op for op in plan.ops if isinstance(op, Gather)]
    assert len(gathers) == 4 and sum(g.table is not None for g in gathers) >= 2


def _qdq_move(shape, move, s_in=0.05, zp_in=2, s_out=0.1, zp_out=-3):
    """dequantize(int8 x; s_in, zp_in) -> move -> quantize(s_out, zp_out): an ONNX QDQ data
    movement whose output is quantized unlike its input."""
    from tvm.relax.op import dequantize, quantize

    x = relax.Var("x", relax.TensorType(list(shape), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            d = bb.emit(dequantize(x, relax.const(s_in, "float32"), relax.const(zp_in, "int8"), axis=-1))
            m = bb.emit(move(d))
            q = bb.emit(quantize(m, relax.const(s_out, "float32"), relax.const(zp_out, "int8"), axis=-1, out_dtype="int8"))
            gv = bb.emit_output(q)
        bb.emit_func_output(gv)
    return bb.get()


MOVES = {  # name -> (input shape, the Relax op, the same movement in numpy, its NPU pattern)
    "transpose": ((1, 5, 7, 4), lambda t: R.permute_dims(t, [0, 2, 1, 3]), lambda x: x.transpose(0, 2, 1, 3),
                  "npu.transpose"),
    "channel_take": ((1, 5, 7, 6), lambda t: R.take(t, relax.const(np.array([0, 3, 1, 4, 2, 5], "int64")), axis=3),
                     lambda x: x[..., [0, 3, 1, 4, 2, 5]], "npu.channel_shuffle"),
}


@pytest.mark.parametrize("name", list(MOVES))
def test_requantizing_transpose_and_take(name):
    """A transpose and a take along the channels whose outputs are quantized unlike their inputs
    (scale 0.05 zp 2 -> 0.1 zp −3): one NPU partition; the data moved as numpy moves it and
    requantized by LiteRT's int8 -> int8 QUANTIZE (a Relax module's numerics: TFLite's,
    tests/litert_reference.py); golden == the C model; within 1 LSB of TVM's float CPU build."""
    from . import litert_reference as ref

    shape, move, numpy_move, pattern = MOVES[name]
    mod = _qdq_move(shape, move)
    part = partition_for_npu(mod)
    assert [(d.pattern, d.accepted) for d in partition_log(part)] == [(pattern, True)]
    x = np.random.default_rng(len(name)).integers(-128, 128, shape, dtype=np.int8)
    got = npu_byoc.build(part, "golden").run([x])[0]
    table = ref.requantize_table(0.05, 2, 0.1, -3).astype(np.int8)
    np.testing.assert_array_equal(got, table[numpy_move(x).astype(np.int64) + 128])
    np.testing.assert_array_equal(npu_byoc.build(part, "functional").run([x])[0], got)
    cpu = npu_byoc.build(mod, "cpu").run([x])[0]
    assert np.abs(got.astype(int) - cpu.astype(int)).max() <= 1
