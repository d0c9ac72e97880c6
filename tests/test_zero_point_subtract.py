"""The zero-point-subtract integer form (QNN canonicalization, TVM's ONNX MatMulInteger /
ConvInteger import): op(astype(x, int32) - z_x, astype(W, int32) [- z_w], out_dtype=int32)
[+ bias] -> dequantize(s_x * s_w[c]) -> quantize, on the NPU at 0 LSB against TVM's CPU build
of the same module; a non-zero weight zero point stays on the CPU with the reason."""

from __future__ import annotations

import numpy as np
import pytest

import npu_byoc
from npu_byoc import patterns as P
from npu_byoc.util.relax_utils import shape_of

from . import relax_builders as rb
from .test_patterns_relax import BIAS8, assert_rejected, cpu_ops, single_record

ZP = "int32-accumulate, zero-point subtract"

# Output scales s_x * s_w[c] / s_out in [0.5, 1) with odd denominators: the exact requantized
# values k/q never lie within 1/(2q) of a tie, so TFLite's rounding (the NPU's, ties away) and
# TVM's float32 dequantize -> quantize (ties to even) agree exactly; with the weights in
# [-3, 3] and inputs within 6 of the zero point the accumulators stay far below float32's 2^24.
TIE_FREE = np.array([2 / 3, 4 / 5, 6 / 7, 5 / 9, 7 / 11, 8 / 13, 10 / 17, 14 / 19])
S_X, S_OUT = 0.5, 0.25


def _scales(n: int) -> np.ndarray:
    return np.resize(TIE_FREE, n) * S_OUT / S_X


def conv(layout="NHWC", groups=1, in_channels=4, out_channels=8, **kw):
    shape = rb.conv_weight_shape(layout, (3, 3), in_channels, out_channels, groups)
    w = np.random.default_rng(2).integers(-3, 4, shape).astype(np.int8)
    return rb.int32_conv2d(layout=layout, groups=groups, in_channels=in_channels, out_channels=out_channels,
                           weight=w, weight_scale=_scales(out_channels), input_scale=S_X, output_scale=S_OUT,
                           **kw)


def matmul(in_features=16, out_features=8, **kw):
    w = np.random.default_rng(3).integers(-3, 4, (in_features, out_features)).astype(np.int8)
    return rb.int32_fc(in_features=in_features, out_features=out_features, weight=w,
                       weight_scale=_scales(out_features), input_scale=S_X, output_scale=S_OUT, **kw)


CASES = [
    ("conv2d_nhwc", lambda: conv(input_zp=-7), "npu.conv2d", ZP, -7),
    ("conv2d_nchw_bias_clip", lambda: conv(layout="NCHW", input_zp=11, bias=BIAS8, clip=(-128, 100)),
     "npu.conv2d", ZP + "+bias+clip", 11),
    ("conv2d_stride2_weight_zp0", lambda: conv(input_zp=3, weight_zp=0, strides=2, padding=1), "npu.conv2d", ZP, 3),
    ("conv2d_input_zp0", lambda: conv(input_zp=0, bias=BIAS8), "npu.conv2d", ZP + "+bias", 0),
    ("depthwise", lambda: conv(groups=4, out_channels=4, input_zp=-120), "npu.depthwise_conv2d", ZP, -120),
    ("matmul", lambda: matmul(batch=3, input_zp=5), "npu.fully_connected", ZP, 5),
    ("matmul_bias_weight_zp0", lambda: matmul(input_zp=-20, weight_zp=0, bias=BIAS8), "npu.fully_connected",
     ZP + "+bias", -20),
]


def _inputs(mod, zp: int, n: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    shape = shape_of(mod["main"].params[0])
    return [np.clip(zp + rng.integers(-6, 7, shape), -128, 127).astype(np.int8) for _ in range(n)]


@pytest.mark.parametrize("build, name, convention, zp", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_offloaded_whole_and_exact_against_tvm_cpu(build, name, convention, zp):
    mod = build()
    part = npu_byoc.partition_for_npu(mod)
    accepted = [(d.pattern, d.convention) for d in P.partition_log(part) if d.accepted]
    assert accepted == [(name, convention)]
    assert cpu_ops(part) == []  # astype and subtract went into the partition
    cpu = npu_byoc.build(mod, "cpu")
    npu = npu_byoc.build(part, "golden")
    for x in _inputs(mod, zp):
        want = cpu.run([x])[0]
        got = npu.run([x])[0]
        assert got.shape == want.shape
        assert 0.05 < np.mean((want > -128) & (want < 127))  # not a saturated comparison
        np.testing.assert_array_equal(got, want)


def test_record_carries_the_input_zero_point_and_int8_weights():
    w = rb.rng_weights((16, 8))
    op = single_record(rb.int32_fc(weight=w, input_zp=9, weight_zp=0), "npu.fully_connected")
    assert op.input.zero_point == 9 and op.convention == ZP
    np.testing.assert_array_equal(op.weight, w.T)
    assert op.weight.dtype == np.int8


def test_functional_backend_runs_the_form():
    mod = conv(input_zp=-7, bias=BIAS8)
    (x,) = _inputs(mod, -7, 1)
    want = npu_byoc.build(mod, "cpu").run([x])[0]
    np.testing.assert_array_equal(npu_byoc.build(npu_byoc.partition_for_npu(mod), "functional").run([x])[0], want)


@pytest.mark.parametrize("build", [lambda: rb.int32_conv2d(input_zp=1, weight_zp=3),
                                   lambda: rb.int32_fc(input_zp=1, weight_zp=-2)], ids=["conv2d", "matmul"])
def test_weight_zero_point_must_be_zero(build):
    assert_rejected(build(), "weight zero point must be 0")


def test_coverage_names_the_convention():
    report = npu_byoc.coverage_report(matmul(input_zp=4, bias=BIAS8))
    (op,) = report.ops
    assert op.offloaded and op.convention == ZP + "+bias, int8 activations"
    assert "npu.fully_connected (int32-accumulate, zero-point subtract+bias, int8 activations)" in report.to_text()
