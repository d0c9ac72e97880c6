"""The pattern table on hand-written quantized Relax modules (tests/relax_builders.py).

- Positive: every builder with supported parameters becomes exactly one NPU composite of the
  expected name, logged under the expected convention, and the extracted quantized-op record
  carries the values built into the module (references derived by hand from the builder
  inputs, never from the code under test).
- Negative: one module per rejection reason, breaking exactly one property; the partition log
  must give the reason (its key phrase) and nothing may be offloaded.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tvm
from tvm import relax

import npu_byoc
from npu_byoc import patterns as P
from npu_byoc.arch.config import DEFAULT_CONFIG

try:  # tests/ is a package (tests/__init__.py) or a plain rootdir-inserted directory
    from . import relax_builders as rb
except ImportError:
    import relax_builders as rb

# ---------------------------------------------------------------------------------------------
# Helpers


def partition(mod):
    return npu_byoc.partition_for_npu(mod)


def composites(part) -> list[tuple[str, object]]:
    """(composite name, composite function) of every Codegen="npu" function of ``part``."""
    out = []
    for func in P.npu_functions(part).values():
        assert func.attrs["Codegen"] == "npu"
        out += P.composite_functions(func)
    return out


def single_record(mod, expected_name: str):
    """Partition ``mod``, assert exactly one composite named ``expected_name``, extract it."""
    part = partition(mod)
    comps = composites(part)
    assert [name for name, _ in comps] == [expected_name], part.script()
    return P.extract_composite(comps[0][1])


def assert_rejected(mod, phrase: str, pattern: str | None = None) -> list:
    """Nothing offloaded, no accepted decision, and a rejection whose reason contains ``phrase``."""
    part = partition(mod)
    log = P.partition_log(part)
    assert log is not None
    assert not P.npu_functions(part), part.script()
    assert not [d for d in log if d.accepted], log
    reasons = [d.reason for d in log if not d.accepted and (pattern is None or d.pattern == pattern)]
    assert any(phrase in (r or "") for r in reasons), f"{phrase!r} not in {reasons}"
    return reasons


def cpu_ops(part) -> list[str]:
    """Names of the Relax operators main still calls itself (not through a GlobalVar)."""
    names = []
    for block in part["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op):
                names.append(v.op.name)
    return names


# HWIO -> OHWI and OIHW -> OHWI, written out by hand.
def hwio_to_ohwi(w: np.ndarray) -> np.ndarray:
    kh, kw, ci, co = w.shape
    out = np.empty((co, kh, kw, ci), w.dtype)
    for o in range(co):
        for y in range(kh):
            for x in range(kw):
                for i in range(ci):
                    out[o, y, x, i] = w[y, x, i, o]
    return out


def oihw_to_ohwi(w: np.ndarray) -> np.ndarray:
    co, ci, kh, kw = w.shape
    out = np.empty((co, kh, kw, ci), w.dtype)
    for o in range(co):
        for i in range(ci):
            out[o, :, :, i] = w[o, i, :, :]
    return out


# ---------------------------------------------------------------------------------------------
# Positive: one composite of the expected name, the expected convention in the log

BIAS8 = rb.rng_bias(8)

POSITIVE = [
    ("qdq_conv2d", lambda: rb.qdq_conv2d(), "npu.conv2d", "qdq"),
    ("qdq_conv2d_nchw", lambda: rb.qdq_conv2d(layout="NCHW"), "npu.conv2d", "qdq"),
    ("qdq_conv2d_bias", lambda: rb.qdq_conv2d(bias=BIAS8), "npu.conv2d", "qdq+bias"),
    ("qdq_conv2d_bias_clip", lambda: rb.qdq_conv2d(bias=BIAS8, clip=(-100, 100)), "npu.conv2d", "qdq+bias+clip"),
    ("qdq_conv2d_nchw_bias", lambda: rb.qdq_conv2d(layout="NCHW", bias=BIAS8), "npu.conv2d", "qdq+bias"),
    ("qdq_conv2d_relu", lambda: rb.qdq_conv2d(relu=True), "npu.conv2d", "qdq"),
    ("qdq_conv2d_per_tensor_weights", lambda: rb.qdq_conv2d(weight_scale=0.01), "npu.conv2d", "qdq"),
    ("qdq_depthwise", lambda: rb.qdq_conv2d(groups=4, out_channels=4), "npu.depthwise_conv2d", "qdq"),
    ("qdq_grouped", lambda: rb.qdq_conv2d(groups=2, in_channels=8, out_channels=8), "npu.grouped_conv2d", "qdq"),
    ("int32_conv2d", lambda: rb.int32_conv2d(), "npu.conv2d", "int32-accumulate"),
    ("int32_conv2d_bias_clip", lambda: rb.int32_conv2d(bias=BIAS8, clip=(-128, 100)), "npu.conv2d", "int32-accumulate+bias+clip"),
    ("int32_conv2d_per_tensor", lambda: rb.int32_conv2d(weight_scale=0.01), "npu.conv2d", "int32-accumulate"),
    ("int32_conv2d_nchw", lambda: rb.int32_conv2d(layout="NCHW"), "npu.conv2d", "int32-accumulate"),
    ("int32_depthwise", lambda: rb.int32_conv2d(groups=4, out_channels=4), "npu.depthwise_conv2d", "int32-accumulate"),
    ("qdq_fc", lambda: rb.qdq_fc(), "npu.fully_connected", "qdq"),
    ("qdq_fc_bias", lambda: rb.qdq_fc(bias=BIAS8), "npu.fully_connected", "qdq+bias"),
    ("qdq_fc_transposed", lambda: rb.qdq_fc(transposed_weight=True), "npu.fully_connected", "qdq"),
    ("int32_fc", lambda: rb.int32_fc(), "npu.fully_connected", "int32-accumulate"),
    ("int32_fc_bias", lambda: rb.int32_fc(bias=BIAS8), "npu.fully_connected", "int32-accumulate+bias"),
    ("qdq_sigmoid", lambda: rb.qdq_sigmoid(), "npu.sigmoid", "qdq"),
    ("qdq_avg_pool", lambda: rb.qdq_avg_pool(), "npu.avg_pool2d", "qdq"),
    ("qdq_avg_pool_padded", lambda: rb.qdq_avg_pool(pool_size=3, strides=1, padding=1), "npu.avg_pool2d", "qdq"),
    ("qdq_avg_pool_ceil_mode", lambda: rb.qdq_avg_pool(ceil_mode=True, input_hw=(7, 7)), "npu.avg_pool2d", "qdq"),
    ("cast_avg_pool", lambda: rb.cast_avg_pool(), "npu.avg_pool2d", "cast-wrapped"),
    ("cast_avg_pool_clip", lambda: rb.cast_avg_pool(clip=(-100, 100)), "npu.avg_pool2d", "cast-wrapped+clip"),
    ("int8_max_pool", lambda: rb.int8_max_pool(), "npu.max_pool2d", "integer"),
    ("int8_max_pool_clip", lambda: rb.int8_max_pool(clip=(0, 127)), "npu.max_pool2d", "integer+clip"),
    ("qdq_max_pool", lambda: rb.qdq_max_pool(), "npu.max_pool2d", "qdq"),
    ("qdq_mean", lambda: rb.qdq_mean(), "npu.mean", "qdq"),
    ("qdq_mean_nchw", lambda: rb.qdq_mean(shape=(1, 8, 7, 7), axis=(2, 3)), "npu.mean", "qdq"),
    ("int32_mean", lambda: rb.int32_mean(), "npu.mean", "int32-requantize"),
    ("qdq_add", lambda: rb.qdq_add(), "npu.add", "qdq"),
    ("qdq_add_clip", lambda: rb.qdq_add(clip=(-50, 50)), "npu.add", "qdq+clip"),
    ("qdq_add_channel_broadcast", lambda: rb.qdq_add(b_shape=(1, 1, 1, 4)), "npu.add", "qdq"),
    ("qdq_mul", lambda: rb.qdq_add(op="multiply"), "npu.mul", "qdq"),
    ("qdq_mul_relu", lambda: rb.qdq_add(op="multiply", relu=True), "npu.mul", "qdq"),
    ("qdq_mul_channel_broadcast", lambda: rb.qdq_add(op="multiply", b_shape=(1, 1, 1, 4)), "npu.mul", "qdq"),
    ("qdq_mul_channel_broadcast_first", lambda: rb.qdq_add(op="multiply", shape=(1, 1, 1, 4), b_shape=(1, 8, 8, 4)),
     "npu.mul", "qdq"),
]


@pytest.mark.parametrize("build, name, convention", [p[1:] for p in POSITIVE], ids=[p[0] for p in POSITIVE])
def test_builder_partitions_to_one_composite(build, name, convention):
    part = partition(build())
    assert [n for n, _ in composites(part)] == [name], part.script()
    funcs = P.npu_functions(part)
    assert len(funcs) == 1
    accepted = [d for d in P.partition_log(part) if d.accepted]
    assert [(d.pattern, d.convention) for d in accepted] == [(name, convention)]
    assert all(d.reason is None for d in accepted)
    # main only calls the NPU function: no Relax operator is left on the CPU.
    assert cpu_ops(part) == []


# ---------------------------------------------------------------------------------------------
# Positive: the extracted record carries the built-in values


def test_qdq_conv2d_nhwc_record():
    w = rb.rng_weights((3, 3, 4, 8), seed=7)
    w_scale = np.arange(1, 9) / 128.0
    bias = np.arange(-400, 400, 100, dtype=np.int32)
    op = single_record(
        rb.qdq_conv2d(
            weight=w, weight_scale=w_scale, bias=bias, strides=(2, 1), padding=(1, 0, 2, 1),
            input_scale=0.5, input_zp=3, output_scale=0.25, output_zp=-5, clip=(-100, 90),
        ),
        "npu.conv2d",
    )
    assert op.convention == "qdq"
    assert op.layout == "NHWC"
    assert op.weight.dtype == np.int8
    np.testing.assert_array_equal(op.weight, hwio_to_ohwi(w))
    assert op.weight.shape == (8, 3, 3, 4)
    np.testing.assert_array_equal(op.weight_scale, w_scale)
    np.testing.assert_array_equal(op.weight_zero_point, np.zeros(8))
    np.testing.assert_array_equal(op.bias, bias)
    np.testing.assert_allclose(op.accumulator_scale, 0.5 * w_scale, rtol=1e-12)
    assert (op.input.shape, op.input.dtype, op.input.scale, op.input.zero_point) == ((1, 8, 8, 4), "int8", 0.5, 3)
    oh, ow = (8 + 1 + 2 - 3) // 2 + 1, (8 + 0 + 1 - 3) // 1 + 1
    assert (op.output.shape, op.output.scale, op.output.zero_point) == ((1, oh, ow, 8), 0.25, -5)
    assert op.strides == (2, 1)
    assert op.padding == (1, 0, 2, 1)
    assert op.dilation == (1, 1)
    assert op.groups == 1 and not op.depthwise
    assert (op.act_min, op.act_max) == (-100, 90)


def test_qdq_conv2d_nchw_record():
    w = rb.rng_weights((8, 4, 3, 3), seed=8)  # OIHW
    bias = rb.rng_bias(8, seed=3)
    op = single_record(rb.qdq_conv2d(layout="NCHW", weight=w, bias=bias, padding=1), "npu.conv2d")
    assert op.layout == "NCHW"
    np.testing.assert_array_equal(op.weight, oihw_to_ohwi(w))
    np.testing.assert_array_equal(op.weight_scale, np.arange(1, 9) / 256.0)
    np.testing.assert_array_equal(op.bias, bias)
    assert op.input.shape == (1, 4, 8, 8) and op.output.shape == (1, 8, 8, 8)
    assert op.in_channels == 4 and op.out_channels == 8 and op.kernel == (3, 3)
    assert op.padding == (1, 1, 1, 1)
    assert (op.act_min, op.act_max) == (-128, 127)  # no clip: the int8 range


def test_qdq_conv2d_relu6_clamp_is_folded():
    # Float clip(0, 6) before quantize(scale 0.25, zp -5): 0 -> -5 + 0/0.25, 6 -> -5 + 6/0.25.
    op = single_record(rb.qdq_conv2d(float_clip=(0.0, 6.0), output_scale=0.25, output_zp=-5), "npu.conv2d")
    assert (op.act_min, op.act_max) == (-5 + 0, -5 + 24)


def test_qdq_conv2d_relu6_clamp_saturates_to_int8():
    # 6 / (6/255) - 128 = 127, 0 -> -128: relu6 with the usual TFLite output quantization.
    op = single_record(rb.qdq_conv2d(float_clip=(0.0, 6.0), output_scale=6.0 / 255.0, output_zp=-128), "npu.conv2d")
    assert (op.act_min, op.act_max) == (-128, 127)


def test_qdq_conv2d_relu_clamp_is_the_output_zero_point():
    op = single_record(rb.qdq_conv2d(relu=True, output_zp=-7), "npu.conv2d")
    assert (op.act_min, op.act_max) == (-7, 127)


def test_qdq_conv2d_float_and_int_clip_intersect():
    # float clip(0, 6) -> [-5, 19]; integer clip(-128+10, 15) -> [-118, 15]; together [-5, 15].
    op = single_record(rb.qdq_conv2d(float_clip=(0.0, 6.0), clip=(-128 + 10, 15)), "npu.conv2d")
    assert (op.act_min, op.act_max) == (-5, 15)


def test_qdq_depthwise_record():
    w = rb.rng_weights((3, 3, 1, 4), seed=9)  # HWIO with I = in_channels / groups = 1
    op = single_record(rb.qdq_conv2d(groups=4, in_channels=4, out_channels=4, weight=w, strides=2), "npu.depthwise_conv2d")
    assert op.depthwise and op.groups == 4
    np.testing.assert_array_equal(op.weight, hwio_to_ohwi(w))
    assert op.weight.shape == (4, 3, 3, 1)
    np.testing.assert_array_equal(op.weight_scale, np.arange(1, 5) / 256.0)
    assert op.strides == (2, 2)
    assert op.output.shape == (1, 4, 4, 4)


def test_int32_conv2d_record():
    w = rb.rng_weights((3, 3, 4, 8), seed=10)
    w_scale = np.arange(1, 9) / 64.0
    bias = rb.rng_bias(8, seed=4)
    op = single_record(
        rb.int32_conv2d(weight=w, weight_scale=w_scale, input_scale=0.5, bias=bias, output_scale=0.125, output_zp=2, clip=(-128 + 28, 127)),
        "npu.conv2d",
    )
    assert op.convention == "int32-accumulate"
    np.testing.assert_array_equal(op.weight, hwio_to_ohwi(w))
    np.testing.assert_array_equal(op.bias, bias)
    # One accumulator LSB is worth s_x * s_w[c] (the requantize's dequantize scale).
    np.testing.assert_allclose(op.accumulator_scale, 0.5 * w_scale, rtol=1e-12)
    np.testing.assert_array_equal(op.weight_zero_point, np.zeros(8))
    assert op.input.dtype == "int8" and op.input.zero_point == 0 and op.input.shape == (1, 8, 8, 4)
    assert (op.output.scale, op.output.zero_point) == (0.125, 2)
    assert op.padding == (1, 1, 1, 1) and op.strides == (1, 1)
    assert (op.act_min, op.act_max) == (-100, 127)


def test_int32_conv2d_nchw_record():
    w = rb.rng_weights((8, 4, 3, 3), seed=11)
    bias = rb.rng_bias(8, seed=5)
    op = single_record(rb.int32_conv2d(layout="NCHW", weight=w, bias=bias), "npu.conv2d")
    assert op.layout == "NCHW"
    np.testing.assert_array_equal(op.weight, oihw_to_ohwi(w))
    np.testing.assert_array_equal(op.bias, bias)
    np.testing.assert_allclose(op.accumulator_scale, 0.5 * np.arange(1, 9) / 256.0, rtol=1e-12)


@pytest.mark.parametrize("transposed", [False, True], ids=["W_in_out", "W_out_in_permuted"])
def test_qdq_fc_record(transposed):
    w = rb.rng_weights((16, 8), seed=12)  # [in, out], the matmul operand
    w_scale = np.arange(1, 9) / 512.0
    bias = rb.rng_bias(8, seed=6)
    op = single_record(
        rb.qdq_fc(weight=w, weight_scale=w_scale, bias=bias, transposed_weight=transposed, clip=(-20, 20)),
        "npu.fully_connected",
    )
    expected = np.array([[w[i, o] for i in range(16)] for o in range(8)], np.int8)  # [out, in]
    np.testing.assert_array_equal(op.weight, expected)
    np.testing.assert_array_equal(op.weight_scale, w_scale)
    np.testing.assert_array_equal(op.bias, bias)
    assert (op.in_features, op.out_features) == (16, 8)
    assert (op.input.scale, op.input.zero_point, op.input.shape) == (0.5, 3, (2, 16))
    assert (op.output.scale, op.output.zero_point, op.output.shape) == (0.25, -5, (2, 8))
    assert (op.act_min, op.act_max) == (-20, 20)


def test_int32_fc_record():
    w = rb.rng_weights((16, 8), seed=13)
    bias = rb.rng_bias(8, seed=7)
    op = single_record(rb.int32_fc(weight=w, bias=bias, input_scale=0.25), "npu.fully_connected")
    assert op.convention == "int32-accumulate"
    np.testing.assert_array_equal(op.weight, w.T)
    np.testing.assert_array_equal(op.bias, bias)
    np.testing.assert_allclose(op.accumulator_scale, 0.25 * np.arange(1, 9) / 256.0, rtol=1e-12)


def test_qdq_sigmoid_record():
    op = single_record(rb.qdq_sigmoid(input_scale=0.0625, input_zp=2), "npu.sigmoid")
    assert op.function == "sigmoid"
    assert (op.input.scale, op.input.zero_point, op.input.dtype) == (0.0625, 2, "int8")
    assert (op.output.scale, op.output.zero_point) == (1.0 / 256.0, -128)
    assert (op.act_min, op.act_max) == (-128, 127)


def test_qdq_avg_pool_record():
    op = single_record(rb.qdq_avg_pool(pool_size=3, strides=1, padding=1, input_scale=0.5, input_zp=3), "npu.avg_pool2d")
    assert (op.kind, op.layout, op.convention) == ("avg", "NHWC", "qdq")
    assert op.pool_size == (3, 3) and op.strides == (1, 1) and op.padding == (1, 1, 1, 1)
    assert not op.ceil_mode and not op.count_include_pad
    assert (op.input.scale, op.input.zero_point) == (0.5, 3)
    assert (op.output.scale, op.output.zero_point) == (0.5, 3)


def test_cast_avg_pool_record():
    op = single_record(rb.cast_avg_pool(layout="NCHW", pool_size=(2, 3), strides=(2, 1), clip=(-128 + 1, 100)), "npu.avg_pool2d")
    assert (op.kind, op.layout, op.convention) == ("avg", "NCHW", "cast-wrapped")
    assert op.pool_size == (2, 3) and op.strides == (2, 1)
    assert op.input.dtype == "int8" and op.output.dtype == "int8"
    assert op.output.shape == (1, 4, 4, 6)
    assert (op.act_min, op.act_max) == (-127, 100)


def test_int8_max_pool_record():
    op = single_record(rb.int8_max_pool(pool_size=3, strides=2, padding=1, clip=(0, 127)), "npu.max_pool2d")
    assert (op.kind, op.convention) == ("max", "integer")
    assert op.pool_size == (3, 3) and op.strides == (2, 2) and op.padding == (1, 1, 1, 1)
    assert op.output.shape == (1, 4, 4, 4)
    assert (op.act_min, op.act_max) == (0, 127)


def test_qdq_max_pool_record():
    op = single_record(rb.qdq_max_pool(input_scale=0.5, input_zp=-3), "npu.max_pool2d")
    assert (op.kind, op.convention) == ("max", "qdq")
    assert (op.input.scale, op.input.zero_point) == (op.output.scale, op.output.zero_point) == (0.5, -3)


@pytest.mark.parametrize("builder, convention", [(rb.qdq_mean, "qdq"), (rb.int32_mean, "int32-requantize")])
def test_mean_record(builder, convention):
    op = single_record(builder(shape=(1, 7, 7, 8), axis=(1, 2), keepdims=True, input_scale=0.5, input_zp=3, output_scale=0.25, output_zp=-5), "npu.mean")
    assert op.convention == convention
    assert op.axes == (1, 2) and op.keepdims and op.layout == "NHWC"
    assert (op.input.shape, op.input.scale, op.input.zero_point) == ((1, 7, 7, 8), 0.5, 3)
    assert (op.output.shape, op.output.scale, op.output.zero_point) == ((1, 1, 1, 8), 0.25, -5)


def test_qdq_add_record():
    op = single_record(rb.qdq_add(scale_a=0.5, zp_a=1, scale_b=0.25, zp_b=-2, output_scale=0.75, output_zp=3, relu=True), "npu.add")
    assert (op.input_a.scale, op.input_a.zero_point) == (0.5, 1)
    assert (op.input_b.scale, op.input_b.zero_point) == (0.25, -2)
    assert (op.output.scale, op.output.zero_point) == (0.75, 3)
    assert op.input_a.shape == op.input_b.shape == op.output.shape == (1, 8, 8, 4)
    assert (op.act_min, op.act_max) == (3, 127)  # relu: real 0 is the output zero point


# ---------------------------------------------------------------------------------------------
# Negative: one module per rejection reason


NEGATIVE = [
    # activations
    (
        "activation_per_channel",
        lambda: rb.qdq_conv2d(input_scale=[0.5, 0.25, 0.5, 0.25]),
        "input is quantized per-channel (4 scales): NPU activations are per-tensor",
    ),
    ("activation_int16", lambda: rb.qdq_conv2d(act_dtype="int16", input_zp=0, output_zp=0), "input dtype int16: NPU activations are int8 or uint8"),
    # weights
    (
        "weight_zero_point_nonzero",
        lambda: rb.qdq_conv2d(weight_zp=[0, 0, 0, 5, 0, 0, 0, 0]),
        "weight zero point 5 on channel 3: NPU weights need zero point 0",
    ),
    (
        "weight_uint8_asymmetric",
        lambda: rb.qdq_conv2d(weight_dtype="uint8"),
        "uint8 weight zero point 0 on channel 0: NPU weights are symmetric int8 (uint8 weights need zero point 128)",
    ),
    (
        "weight_quantized_along_input_channels",
        lambda: rb.qdq_conv2d(in_channels=8, out_channels=8, weight_axis=2),
        "weight is quantized along an axis other than the output channel",
    ),
    (
        "conv_weight_not_constant",
        lambda: rb.qdq_conv2d(weights_as_param=True),
        "weight is not a compile-time constant: the NPU needs it at compile time",
    ),
    (
        "fc_weight_not_constant",
        lambda: rb.qdq_fc(weights_as_param=True),
        "weight is not a compile-time constant: the NPU needs it at compile time",
    ),
    (
        "scale_not_constant",
        lambda: rb.qdq_conv2d(input_scale_as_param=True),
        "input scale is not a compile-time constant: the NPU needs it at compile time",
    ),
    (
        "bias_scale_not_sx_sw",
        lambda: rb.qdq_conv2d(bias=BIAS8, bias_scale=0.001),
        "bias scale differs from input_scale * weight_scale: cannot add it to the accumulator",
    ),
    ("int32_requantize_zero_point", lambda: rb.int32_conv2d(requant_zp=1), "requantize input zero point is not 0"),
    # convolution geometry
    (
        "conv_dilation_6",
        lambda: rb.qdq_conv2d(dilation=6, padding=6),
        f"conv2d kernel 3x3 with dilation (6, 6) covers 13x13: NPU runs dilated kernels zero-inserted, up to "
        f"{DEFAULT_CONFIG.max_kernel}x{DEFAULT_CONFIG.max_kernel}",
    ),
    (
        "conv_kernel_13",
        lambda: rb.qdq_conv2d(kernel=13, padding=6, input_hw=(13, 13)),
        f"conv2d kernel 13x13: NPU supports kernels up to {DEFAULT_CONFIG.max_kernel}x{DEFAULT_CONFIG.max_kernel}",
    ),
    (
        "conv_stride_4_nchw",  # NHWC runs as npu.strided_conv2d (tests/test_strided_conv.py)
        lambda: rb.qdq_conv2d(layout="NCHW", strides=4, input_hw=(16, 16)),
        f"conv2d stride (4, 4) in NCHW: the NPU runs strides above {DEFAULT_CONFIG.max_stride} on NHWC maps",
    ),
    (
        "depthwise_multiplier_2",
        lambda: rb.qdq_conv2d(groups=4, in_channels=4, out_channels=8),
        "depthwise conv2d with channel multiplier 2: NPU supports multiplier 1",
    ),
    # pooling
    (
        "avg_pool_ceil_mode_count_include_pad",
        lambda: rb.qdq_avg_pool(ceil_mode=True, count_include_pad=True, input_hw=(7, 7)),
        "avg_pool2d counting padded elements (ceil_mode's extra windows included)",
    ),
    (
        "avg_pool_count_include_pad",
        lambda: rb.qdq_avg_pool(count_include_pad=True, pool_size=3, strides=1, padding=1),
        "avg_pool2d counting padded elements: NPU divides by the valid elements",
    ),
    (
        "cast_avg_pool_count_include_pad",
        lambda: rb.cast_avg_pool(count_include_pad=True, pool_size=3, strides=1, padding=1),
        "avg_pool2d counting padded elements: NPU divides by the valid elements",
    ),
    (
        "max_pool_rescales",
        lambda: rb.qdq_max_pool(input_scale=0.5, input_zp=3, output_scale=0.25, output_zp=3),
        "max_pool2d rescales (input scale 0.5 zp 3, output scale 0.25 zp 3): NPU pooling keeps the quantization",
    ),
    (
        "max_pool_changes_zero_point",
        lambda: rb.qdq_max_pool(input_scale=0.5, input_zp=3, output_zp=0),
        "max_pool2d rescales (input scale 0.5 zp 3, output scale 0.5 zp 0): NPU pooling keeps the quantization",
    ),
    # mean
    (  # kept H and C are two runs: no strided view makes them the unit's channels
        "mean_over_columns",
        lambda: rb.qdq_mean(axis=(2,)),
        "mean over axes [2] of a 4-D tensor: the NPU's MEAN reduces up to two strided axes and keeps one run",
    ),
    (
        "int32_mean_over_columns",
        lambda: rb.int32_mean(axis=(2,)),
        "mean over axes [2] of a 4-D tensor: the NPU's MEAN reduces up to two strided axes and keeps one run",
    ),
    # limits the stream machine / C model / RTL enforce (isa.SHIFT_MIN..SHIFT_MAX, hwconfig)
    (
        "fc_features_above_channel_limit",
        lambda: rb.qdq_fc(batch=1, in_features=4097, out_features=2),
        "fully connected 4097->2: NPU supports up to 4096 features",
    ),
    (
        "fc_requant_shift_91",  # 0.5 * (1/256) / 1e-30 = 1.95e27 = 0.98 * 2^91
        lambda: rb.qdq_fc(output_scale=1e-30),
        "is 1 or more: NPU FC scales lie below 1",
    ),
    (
        "conv_requant_shift_too_large",
        lambda: rb.qdq_conv2d(output_scale=1e-30),
        "NPU shifts lie in [-31, 30]",
    ),
    # mul (any broadcast is offloaded now: tests/test_broadcast.py)
    (
        "mul_rescale_shift_17",  # 0.5 * 0.25 / 1e-6 = 125000 = 0.95 * 2^17
        lambda: rb.qdq_add(op="multiply", output_scale=1e-6),
        "mul rescale out of range: mul_params: s1·s2/s_out = 125000 gives shift 17, outside [-31, 15]",
    ),
]


@pytest.mark.parametrize("build, phrase", [n[1:] for n in NEGATIVE], ids=[n[0] for n in NEGATIVE])
def test_rejected_with_reason(build, phrase):
    assert_rejected(build(), phrase)


BAD_SCALES = [0.0, -0.5, float("nan"), float("inf")]


@pytest.mark.parametrize("value", BAD_SCALES, ids=["zero", "negative", "nan", "inf"])
@pytest.mark.parametrize("role", ["input", "output"])
def test_bad_activation_scale_rejected(role, value):
    mod = rb.qdq_conv2d(**{f"{role}_scale": value})
    assert_rejected(mod, f"{role} scale {value}: scales must be finite and > 0", "npu.conv2d")


@pytest.mark.parametrize("value", BAD_SCALES, ids=["zero", "negative", "nan", "inf"])
def test_bad_weight_scale_rejected(value):
    w_scale = (np.arange(1, 9) / 256.0).astype(np.float32)
    w_scale[2] = value
    mod = rb.qdq_conv2d(weight_scale=w_scale)
    assert_rejected(mod, f"weight scale {value} (channel 2): scales must be finite and > 0", "npu.conv2d")


@pytest.mark.parametrize("value", BAD_SCALES, ids=["zero", "negative", "nan", "inf"])
def test_bad_add_scale_rejected(value):
    assert_rejected(rb.qdq_add(scale_b=value), f"input b scale {value}: scales must be finite and > 0", "npu.add")


def _overflow_channels(kernel: int, max_abs_x: int, max_abs_w: int = 127) -> int:
    """Smallest input-channel count whose worst-case accumulation reaches 2^31."""
    per_channel = kernel * kernel * max_abs_w * max_abs_x
    return math.ceil(2**31 / per_channel)


def _all_127_conv(channels: int):
    # 11x11 kernel (the largest supported), |w| = 127 everywhere, input zp -128 so that
    # max|x - zp| = 127 - (-128) = 255; one output pixel, one output channel.
    w = np.full((11, 11, channels, 1), 127, np.int8)
    return rb.qdq_conv2d(
        kernel=11, padding=0, input_hw=(11, 11), in_channels=channels, out_channels=1,
        weight=w, weight_scale=[0.001], input_zp=-128,
    )


def test_accumulator_overflow_rejected():
    channels = _overflow_channels(11, 255)
    worst = 11 * 11 * channels * 127 * 255
    assert worst >= 2**31 > 11 * 11 * (channels - 1) * 127 * 255
    assert_rejected(_all_127_conv(channels), f"worst-case accumulator {worst} on channel 0 overflows int32", "npu.conv2d")


def test_accumulator_just_below_overflow_accepted():
    channels = _overflow_channels(11, 255) - 1
    single_record(_all_127_conv(channels), "npu.conv2d")


# ---------------------------------------------------------------------------------------------
# The requantize of the int32-accumulate form must scale the output channels


def test_int32_conv2d_requantize_along_spatial_axis_rejected():
    # dequantize(acc, s_x*s_w[8], axis=1) scales rows H (= 8), not the 8 output channels (axis 3).
    assert_rejected(rb.int32_conv2d(requant_axis=1), "axis")


def test_int32_fc_requantize_along_batch_axis_rejected():
    # dequantize(acc[8, 8], s_x*s_w[8], axis=0) scales the batch rows, not the output features.
    assert_rejected(rb.int32_fc(batch=8, requant_axis=0), "axis")


# ---------------------------------------------------------------------------------------------
# Coverage report


def test_coverage_report_gives_the_reason_of_a_rejected_op():
    report = npu_byoc.coverage_report(rb.qdq_conv2d(dilation=6, padding=6))
    convs = [o for o in report.ops if o.op == "relax.nn.conv2d"]
    assert len(convs) == 1
    (conv,) = convs
    assert not conv.offloaded and conv.pattern is None
    assert "npu.conv2d: conv2d kernel 3x3 with dilation (6, 6) covers 13x13" in conv.reason
    assert conv.macs == 8 * 8 * 8 * 3 * 3 * 4  # output pixels x out channels x kernel x in channels
    s = report.summary
    assert (s["ops_total"], s["ops_offloaded"], s["partitions"], s["macs_offloaded"]) == (1, 0, 0, 0)
    assert "with dilation (6, 6)" in report.to_text()


def test_coverage_report_of_an_offloaded_op():
    report = npu_byoc.coverage_report(rb.qdq_conv2d())
    (conv,) = [o for o in report.ops if o.op == "relax.nn.conv2d"]
    assert conv.offloaded and conv.pattern == "npu.conv2d" and conv.reason is None
    assert report.summary["ops_offloaded"] == report.summary["ops_total"] == 1
    assert report.summary["partitions"] == 1


def test_coverage_reason_for_rescaling_max_pool_names_only_the_real_cause():
    # The int8 model's max_pool is rejected because it rescales; the reason must not claim
    # that its input is float32 (that is the dequantize inside the QDQ form).
    report = npu_byoc.coverage_report(rb.qdq_max_pool(output_scale=0.25))
    (pool,) = [o for o in report.ops if o.op == "relax.nn.max_pool2d"]
    assert not pool.offloaded
    assert "max_pool2d rescales" in pool.reason
    assert "float32" not in pool.reason, pool.reason
