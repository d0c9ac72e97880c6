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

import npu_byoc
from npu_byoc.codegen.lower import lower_module
from npu_byoc.ops.lut import requantize_table
from npu_byoc.ops.npu_ops import Gather
from npu_byoc.ops.records import QTensor
from npu_byoc.partition.pipeline import partition_for_npu

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
