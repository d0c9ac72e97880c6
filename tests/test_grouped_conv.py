"""Grouped convolution on the NPU (npu.grouped_conv2d, npu_byoc.ops.grouped_conv): one CONV
per group on its channel slices of the input and the output, no opcode of its own.

* the phases (one Conv2D per group, through its channel slices) equal the grouped definition,
  in both layouts, and fill every output channel;
* Relax modules, QDQ and int32-accumulate forms, groups 2, 4 and C/2, NHWC and NCHW, with
  stride, dilation, unequal channels per group and a clip: one partition, within 1 LSB of TVM's
  CPU build (whose requantize is a float dequantize -> quantize) on golden and the C model;
* grouped_conv_int8.tflite (RegNet-X blocks, groups 4): one NPU partition, 0 LSB off LiteRT at
  the output (tests/test_transformer_fixtures.py checks every layer), and the RTL co-simulation
  bit-exact with golden, cycle-exact with the analytic model;
* grouped_conv_qdq.onnx (groups 2, 4 and 16): tests/test_transformer_fixtures.py
  (check_onnx_fixture: onnxruntime, the RTL, TVM's CPU build layer by layer).
"""

from __future__ import annotations

import numpy as np
import pytest

import npu_byoc
from npu_byoc.arch.isa import Region
from npu_byoc.ops.grouped_conv import GroupedConv2D, golden_grouped_conv2d
from npu_byoc.ops.npu_ops import TensorRef
from npu_byoc.partition.pipeline import partition_log

from . import litert_reference
from . import relax_builders as rb
from .conftest import model_path, reference, run_phases

_built: dict = {}


def _build(key, make, backend: str):
    if (key, backend) not in _built:
        _built[key, backend] = npu_byoc.build(make(), backend)
    return _built[key, backend]


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("groups,c_in,c_out,stride", [(2, 6, 4, (1, 1)), (4, 8, 12, (2, 1)), (5, 10, 10, (1, 2))])
def test_phases_equal_the_grouped_definition(layout, groups, c_in, c_out, stride):
    """Group by group through channel slices (NHWC: a pitch; NCHW: runs of planes) gives the
    grouped convolution computed directly: every output byte written, each from its group."""
    rng = np.random.default_rng(groups)
    h, w, kh, kw = 6, 7, 3, 3
    oh, ow = (h + 2 - kh) // stride[0] + 1, (w + 2 - kw) // stride[1] + 1
    ifm = TensorRef("x", int(Region.IO), 0, (h, w, c_in), layout)
    ofm = TensorRef("y", int(Region.IO) + 1, 0, (oh, ow, c_out), layout)
    op = GroupedConv2D(
        name="g", ifm=ifm, ofm=ofm, weights=rng.integers(-127, 128, (c_out, kh, kw, c_in // groups)).astype(np.int8),
        bias=rng.integers(-500, 500, c_out).astype(np.int32), multiplier=np.full(c_out, 1 << 30, np.int32),
        shift=np.full(c_out, -7, np.int32), ifm_zero_point=3, ofm_zero_point=-2, stride=stride,
        padding=(1, 1, 1, 1), act_min=-128, act_max=127, groups=groups,
    )  # fmt: skip
    x = rng.integers(-128, 128, (h, w, c_in)).astype(np.int8)
    expect = golden_grouped_conv2d(op, x)
    # the definition, hand-written: each output channel sums its group's input channels only
    g_in, g_out = c_in // groups, c_out // groups
    xp = np.pad(x.astype(np.int64) - 3, ((1, 1), (1, 1), (0, 0)))
    acc = np.zeros((oh, ow, c_out), np.int64)
    for c in range(c_out):
        g = c // g_out
        for i in range(oh):
            for j in range(ow):
                win = xp[i * stride[0] : i * stride[0] + kh, j * stride[1] : j * stride[1] + kw, g * g_in : (g + 1) * g_in]
                acc[i, j, c] = (win * op.weights[c].astype(np.int64)).sum() + op.bias[c]
    # LiteRT's MultiplyByQuantizedMultiplier (multiplier 2^30, shift -7), the output zero point -2
    direct = np.clip(litert_reference.mbqm(acc, 1 << 30, -7) - 2, -128, 127)
    np.testing.assert_array_equal(direct, expect)
    layout_x = x if layout == "NHWC" else x.transpose(2, 0, 1)
    got = run_phases(op, np.ascontiguousarray(layout_x))
    np.testing.assert_array_equal(got, expect)
    assert len(op.phases) == groups and op.macs == sum(p.macs for p in op.phases)


CASES = {  # id -> builder keywords (groups 2, 4 and C/2; both layouts; the int32-accumulate form)
    "g2-nhwc": dict(groups=2, in_channels=8, out_channels=8),
    "g4-nchw-stride2": dict(layout="NCHW", groups=4, in_channels=8, out_channels=16, strides=2, input_hw=(9, 8)),
    "gC/2-nhwc-bias-clip": dict(groups=8, in_channels=16, out_channels=16, bias=rb.rng_bias(16), clip=(-100, 100)),
    "gC/2-nchw-dilated": dict(layout="NCHW", groups=6, in_channels=12, out_channels=6, dilation=2, padding=2,
                              input_hw=(10, 9)),
    "g4-nhwc-int32": dict(int32=True, groups=4, in_channels=8, out_channels=8, bias=rb.rng_bias(8)),
    "g2-nchw-int32": dict(int32=True, layout="NCHW", groups=2, in_channels=6, out_channels=4),
}


def _module(case: str):
    kw = dict(CASES[case], output_scale=12.0)  # the outputs spread over the int8 range, few saturated
    return rb.int32_conv2d(**kw) if kw.pop("int32", False) else rb.qdq_conv2d(**kw)


def _input(case: str) -> np.ndarray:
    kw = CASES[case]
    (h, w), c = kw.get("input_hw", (8, 8)), kw["in_channels"]
    shape = (1, h, w, c) if kw.get("layout", "NHWC") == "NHWC" else (1, c, h, w)
    return np.random.default_rng(7).integers(-128, 128, shape).astype(np.int8)


@pytest.mark.parametrize("backend", ["golden", "functional"])
@pytest.mark.parametrize("case", list(CASES))
def test_relax_grouped_conv_against_tvm_cpu(case, backend):
    log = partition_log(npu_byoc.partition_for_npu(_module(case)))
    assert [(d.pattern, d.accepted) for d in log if d.accepted] == [("npu.grouped_conv2d", True)], [
        (d.pattern, d.reason) for d in log]  # fmt: skip
    model = _build(case, lambda: _module(case), backend)
    assert len(model.plans) == 1
    x = _input(case)
    got = model.run([x])[0]
    cpu = _build(case, lambda: _module(case), "cpu").run([x])[0]
    assert got.shape == cpu.shape
    assert np.abs(got.astype(int) - cpu.astype(int)).max() <= 1
    assert len(np.unique(got)) > 32 and np.mean(np.abs(got.astype(int)) >= 127) < 0.2  # not saturated


def test_tflite_regnet_blocks_one_partition_and_cosim_exact():
    """RegNet-X blocks (Conv2D groups=4): every operator on the NPU in one partition, the RTL
    bit-exact with golden and its cycles the analytic model's, and 0 LSB off LiteRT's output."""
    from npu_byoc.runtime.cosim import cosim

    name = "grouped_conv_int8.tflite"
    report = npu_byoc.coverage_report(npu_byoc.load_model(model_path(name)))
    assert all(o.offloaded for o in report.ops), [(o.op, o.reason) for o in report.ops if not o.offloaded]
    assert [o.pattern for o in report.ops if o.pattern == "npu.grouped_conv2d"] == ["npu.grouped_conv2d"] * 2
    ref = reference(name)
    rep = cosim(model_path(name), ref["inputs"][0], ref["outputs"][0])
    assert rep.summary["max_diff_golden"] == 0 and rep.summary["cycle_model_exact"]
    assert [layer.op for layer in rep.layers].count("grouped_conv") == 2
    assert [o["max_diff"] for o in rep.summary["outputs"]] == [0]  # LiteRT's output exactly, on the RTL
    assert rep.summary["per_class"]["grouped_conv"]["utilization"] > 0.5  # the MAC array is busy while it computes


def test_onnx_grouped_convs_all_on_the_npu():
    """ONNX Conv group=2, 4 (4 -> 8 channels per group, stride 2) and 16 (C/2) in QDQ: each one
    npu.grouped_conv2d, the model one partition (its numerics: test_transformer_fixtures)."""
    report = npu_byoc.coverage_report(npu_byoc.load_model(model_path("grouped_conv_qdq.onnx")))
    assert all(o.offloaded for o in report.ops) and report.summary["partitions"] == 1
    assert {o.name: o.pattern for o in report.ops if o.pattern == "npu.grouped_conv2d"}.keys() == {"g2", "g4_s2", "g16"}
