"""uint8 activations on the int8 NPU (npu_byoc.ops.uint8, docs/numerics.md "uint8 activations").

A uint8 tensor q with zero point z is the int8 tensor q − 128 (the byte q ^ 0x80) with zero
point z − 128: the records carry the int8 equivalent, the NPU runs int8 only, and the generated
C++ entry / the Python partition runners flip the bytes of uint8 partition inputs and outputs.

References: onnxruntime (ORT_DISABLE_ALL) for the U8S8 QDQ fixture made by its quantizer,
LiteRT's reference kernels for the uint8 TFLite fixture made by the legacy converter (both by
tools/make_models.py), and, for the property test, a uint8 conv written here in numpy from the
TFLite formulas (tests/test_golden_properties.py's scalar requantize).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npu_byoc
from npu_byoc.codegen.lower import lower_module
from npu_byoc.frontends.load import model_info
from npu_byoc.partition.pipeline import partition_log
from npu_byoc.runtime import golden
from npu_byoc.ops.uint8 import to_model, to_npu

from . import relax_builders as rb
from .conftest import MODELS, onnx_tensor_lookup, op_expected, reference
from .test_golden_properties import conv_multipliers, f32, ref_mbqm, ref_quantize_multiplier

U8S8 = "tiny_cnn_qdq_u8s8.onnx"
INT8_QDQ = "tiny_cnn_qdq.onnx"
TFLITE_U8 = "tiny_cnn_uint8.tflite"
_built: dict = {}


def _model(imported, name, backend):
    if (name, backend) not in _built:
        _built[(name, backend)] = npu_byoc.build(imported(name), backend)
    return _built[(name, backend)]


def _per_op_diffs(partitioned, name, tensor_of):
    """Every NPU op fed the reference runtime's own (uint8) input tensors: max |diff| per op,
    in the model's dtype (the NPU's int8 bytes flipped back)."""
    diffs = []
    for plan in lower_module(partitioned(name)).values():
        regions = golden.allocate_regions(plan, [np.zeros(io.shape, io.dtype) for io in plan.inputs])
        for k, op in enumerate(plan.ops):
            for ref in op.inputs:
                golden.write_tensor(regions, ref, to_npu(tensor_of(ref.name, ref.shape)))
            expected = op_expected(plan, k, tensor_of)
            got = to_model(golden.run_op(op, regions), expected.dtype)
            assert expected.dtype == np.uint8
            diffs.append((op.kind, op.name, int(np.abs(got.astype(int) - expected.astype(int)).max())))
    return diffs


# ---------------------------------------------------------------------------------------------
# ONNX QDQ, U8S8 (onnxruntime's quantizer, activation_type=QUInt8, weight_type=QInt8)


def test_u8s8_offloads_every_mac(partitioned):
    report = npu_byoc.coverage_report(partitioned(U8S8))
    s = report.summary
    assert s["macs_total"] > 400_000 and s["macs_offloaded"] == s["macs_total"]
    offloaded = {o.name for o in report.ops if o.offloaded}
    # every op the int8 QDQ fixture (same network, int8 activations) offloads, and the conv
    # that is dilated there
    int8 = {o.name for o in npu_byoc.coverage_report(partitioned(INT8_QDQ)).ops if o.offloaded}
    assert offloaded == int8 | {"conv_dilated"}
    assert not any("uint8" in (o.reason or "") for o in report.ops)


def test_u8s8_partitions_keep_uint8_boundaries(partitioned):
    plans = lower_module(partitioned(U8S8))
    ios = [io for p in plans.values() for io in (*p.inputs, *p.outputs)]
    assert ios and {io.dtype for io in ios} == {"uint8"}
    # inside, the records hold int8 equivalents: zero point - 128
    meta = json.loads(str(np.load(MODELS / "tiny_cnn_qdq_u8s8.npz")["meta"]))
    assert meta["quantize_static"]["activation_type"] == "QUInt8"


def test_u8s8_every_op_within_one_lsb_of_onnxruntime(imported, partitioned):
    """Each NPU op fed onnxruntime's own uint8 tensors: within 1 LSB (ORT runs QDQ in float,
    ties to even; the NPU's integer TFLite rounding), most exactly."""
    tensor_of = onnx_tensor_lookup(imported(U8S8), U8S8)
    diffs = _per_op_diffs(partitioned, U8S8, tensor_of)
    # Tanh and the concatenation's three rescaling copies included (LUTs), and the image's interleave
    assert len(diffs) == 18 and diffs[0][0] == "interleave"
    assert max(d[2] for d in diffs) <= 1, diffs
    assert [d[2] for d in diffs if "[input " in d[1]] == [0, 0, 0]  # the copies rescale as onnxruntime does
    assert {"add", "lut", "fully_connected", "pool"} & {d[0] for d in diffs if d[2] == 0}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["cpu", "golden", "functional"])
def test_u8s8_runs_close_to_onnxruntime(imported, backend):
    """The model's float output (softmax on the CPU, after the NPU's logits): TVM's CPU build
    equals onnxruntime; the NPU path's logits are within 1 LSB, which the softmax spreads."""
    model = _model(imported, U8S8, backend)
    ref = reference(U8S8)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        out = model.run(inputs)[0]
        assert out.dtype == np.float32
        assert np.abs(out - outputs[0]).max() <= (0 if backend == "cpu" else 16 / 255)
        assert out.argmax() == outputs[0].argmax()


@pytest.mark.slow
def test_u8s8_npu_logits_within_one_lsb_end_to_end(imported):
    """The whole model on the NPU path (sample 0): the last NPU layer's output, the uint8
    logits the CPU's softmax reads, is within 1 LSB of onnxruntime's."""
    model = _model(imported, U8S8, "golden")
    seen = {}
    model.layer_hooks.append(lambda partition, op, out: seen.__setitem__(op.name, out.copy()))
    try:
        model.run(reference(U8S8)["inputs"][0])
    finally:
        model.layer_hooks.clear()
    want = onnx_tensor_lookup(imported(U8S8), U8S8)("fc", (1, 1, 10))
    got = to_model(seen["fc"], "uint8").reshape(want.shape)
    assert len(np.unique(want)) > 5 and np.abs(got.astype(int) - want.astype(int)).max() <= 1


@pytest.mark.slow
def test_u8s8_functional_equals_golden(imported):
    functional, gold = _model(imported, U8S8, "functional"), _model(imported, U8S8, "golden")
    assert functional.plans
    for inputs in reference(U8S8)["inputs"]:
        for a, b in zip(functional.run(inputs), gold.run(inputs)):
            np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_u8s8_rtl_equals_golden(partitioned):
    """The generated C++ (with its uint8 flips) linked with the Verilator model of the RTL."""
    from npu_byoc.arch.config import DEFAULT_CONFIG
    from npu_byoc.runtime import build as B

    rtl = B.BACKENDS["verilator"](partitioned(U8S8), DEFAULT_CONFIG, "llvm")
    gold = B.build(partitioned(U8S8), "golden")
    x = reference(U8S8)["inputs"][0]
    for a, b in zip(rtl.run(x), gold.run(x)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_u8s8_cosim_every_layer_bit_exact():
    """Every NPU layer on the RTL, fed the NPU path's tensors: equal to the golden model; and
    within 1 LSB of TVM's CPU build of the layer fed the same (uint8) inputs."""
    from npu_byoc.runtime.cosim import cosim

    ref = reference(U8S8)
    report = cosim(MODELS / U8S8, ref["inputs"][0], ref["outputs"][0])
    # Tanh and the concatenation's three rescaling copies included (LUTs), and the image's interleave
    assert len(report.layers) == 18 and report.layers[0].op == "interleave"
    assert report.summary["max_diff_golden"] == 0
    # the sigmoid's steep table turns an upstream 1 LSB into more: as for int8 models
    assert all(r.max_diff_tvm <= 1 for r in report.layers if r.op != "lut"), report.to_text()


# ---------------------------------------------------------------------------------------------
# TFLite uint8 (the legacy converter, inference_type uint8, weights with zero point 128)


def _tflite_tensor_of(imported, name):
    t = np.load(MODELS / name.replace(".tflite", ".tensors.npz"))
    tensors = {k.split(";")[0]: t[k] for k in t.files if k != "__index__"}
    info = model_info(imported(name))
    source = {v: o.name for o in info.ops for v in o.vars}
    source.update({x.name.replace(":", "_"): x.name for x in info.inputs})
    return lambda ref_name, hwc: tensors[source.get(ref_name, ref_name)].reshape(hwc)


def test_uint8_tflite_offloads_what_int8_would(partitioned):
    report = npu_byoc.coverage_report(partitioned(TFLITE_U8))
    on_cpu = [(o.op, o.reason) for o in report.ops if not o.offloaded]
    assert on_cpu == []
    assert report.summary["macs_offloaded"] == report.summary["macs_total"] > 90_000
    assert report.summary["partitions"] == 1  # uint8 in, uint8 out, int8 on the NPU between


def test_uint8_tflite_every_op_bit_exact_with_litert(imported, partitioned):
    diffs = _per_op_diffs(partitioned, TFLITE_U8, _tflite_tensor_of(imported, TFLITE_U8))
    kinds = {d[0] for d in diffs}
    assert kinds == {"conv2d", "depthwise_conv2d", "add", "pool", "mean", "lut", "fully_connected"}
    assert [d for d in diffs if d[2] != 0] == []


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["golden", "functional"])
def test_uint8_tflite_end_to_end_is_litert(imported, backend):
    model = _model(imported, TFLITE_U8, backend)
    ref = reference(TFLITE_U8)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        out = model.run(inputs)[0]
        assert out.dtype == np.uint8
        np.testing.assert_array_equal(out, outputs[0])


@pytest.mark.slow
def test_uint8_tflite_rtl_is_litert(partitioned):
    from npu_byoc.arch.config import DEFAULT_CONFIG
    from npu_byoc.runtime import build as B

    rtl = B.BACKENDS["verilator"](partitioned(TFLITE_U8), DEFAULT_CONFIG, "llvm")
    ref = reference(TFLITE_U8)
    np.testing.assert_array_equal(rtl.run(ref["inputs"][0])[0], ref["outputs"][0][0])


def test_uint8_input_is_checked(imported):
    model = _model(imported, TFLITE_U8, "golden")
    with pytest.raises(npu_byoc.NpuByocError, match=r"must be uint8 \[1, 16, 16, 3\]"):
        model.run([np.zeros((1, 16, 16, 3), np.int8)])


# ---------------------------------------------------------------------------------------------
# Reasons, records and coverage labels


def test_records_carry_int8_equivalents():
    op = _single_record(rb.qdq_conv2d(act_dtype="uint8", input_zp=130, output_zp=7, relu=True))
    assert (op.input.dtype, op.input.zero_point, op.input.source_dtype) == ("int8", 2, "uint8")
    assert (op.output.dtype, op.output.zero_point) == ("int8", 7 - 128)
    assert (op.act_min, op.act_max) == (7 - 128, 127)  # relu: quantize(0) = zp; uint8 max 255


def test_uint8_weights_with_zero_point_128_run_as_int8():
    w = rb.rng_weights(rb.conv_weight_shape("NHWC", (3, 3), 4, 8), dtype="uint8", low=0, high=255)
    mod = npu_byoc.partition_for_npu(rb.qdq_conv2d(act_dtype="uint8", input_zp=128, output_zp=128,
                                                   weight=w, weight_dtype="uint8", weight_zp=[128] * 8))
    (d,) = partition_log(mod)
    assert d.accepted and d.activations == "uint8 activations (U8U8)", d
    op = _single_record(rb.qdq_conv2d(act_dtype="uint8", input_zp=128, output_zp=128, weight=w,
                                      weight_dtype="uint8", weight_zp=[128] * 8))
    assert op.weight.dtype == np.int8 and op.weight_source_dtype == "uint8"
    np.testing.assert_array_equal(op.weight.astype(int), w.transpose(3, 0, 1, 2).astype(int) - 128)
    assert not np.any(op.weight_zero_point)


def _single_record(mod):
    from npu_byoc.ops.composites import composite_functions, extract_composite, npu_functions

    (func,) = npu_functions(npu_byoc.partition_for_npu(mod)).values()
    ((_, comp),) = composite_functions(func)
    return extract_composite(comp)


def legacy_multiplier(s_in: float, s_w: float, s_out: float) -> tuple[int, int]:
    """GetQuantizedConvolutionMultipler: the input x filter product is formed in float32, then
    divided in double."""
    return ref_quantize_multiplier(f32(np.float32(s_in) * np.float32(s_w)) / f32(s_out))


def test_uint8_conv_with_one_weight_scale_takes_tflites_legacy_multiplier():
    """TFLite's uint8 conv kernels read GetQuantizedConvolutionMultipler's per-tensor multiplier
    (s_in * s_w rounded to float32 first); int8 conv the per-channel one (in double)."""
    from npu_byoc.ops.requant import weighted_requant

    rng = np.random.default_rng(0)
    while True:  # scales for which the two formulas give different multipliers
        s_in, s_w, s_out = (f32(2.0 ** rng.uniform(-10, -3)) for _ in range(3))
        legacy, double = legacy_multiplier(s_in, s_w, s_out), ref_quantize_multiplier(s_in * s_w / s_out)
        if legacy != double:
            break
    for act, zp, want in (("uint8", 130, legacy), ("int8", 3, double)):
        op = _single_record(rb.qdq_conv2d(act_dtype=act, input_zp=zp, output_zp=zp, input_scale=s_in,
                                          weight_scale=np.float32(s_w), output_scale=s_out))
        m, shift = weighted_requant(op)
        assert op.weight_per_tensor and {(int(a), int(b)) for a, b in zip(m, shift)} == {want}, act


def test_even_window_uint8_avg_pool_stays_on_cpu():
    mod = npu_byoc.partition_for_npu(rb.cast_avg_pool(dtype="uint8"))
    (d,) = partition_log(mod)
    assert not d.accepted
    assert d.reason.startswith("avg_pool2d of uint8 over windows of 2 valid elements along an axis: TFLite rounds")
    odd = npu_byoc.partition_for_npu(rb.cast_avg_pool(dtype="uint8", pool_size=3, strides=1))
    assert [x.accepted for x in partition_log(odd)] == [True]


def test_coverage_names_the_convention(partitioned):
    report = npu_byoc.coverage_report(partitioned(U8S8))
    conv = next(o for o in report.ops if o.name == "conv_s2")
    assert conv.convention == "qdq+bias, uint8 activations (U8S8)"
    assert "npu.conv2d (qdq+bias, uint8 activations (U8S8))" in report.to_text()
    assert "uint8 activations (U8S8)" in report.to_markdown() and "uint8 activations (U8S8)" in report.to_html()
    doc = json.loads(report.to_json())
    assert next(o for o in doc["ops"] if o["name"] == "conv_s2")["convention"] == conv.convention
    tfl = npu_byoc.coverage_report(partitioned(TFLITE_U8))
    assert {o.convention for o in tfl.ops if o.op == "MAX_POOL_2D"} == {"integer, uint8 activations"}
    assert {o.convention for o in tfl.ops if o.op == "FULLY_CONNECTED"} == {"qdq+bias, uint8 activations (U8U8)"}
    int8 = npu_byoc.coverage_report(partitioned(INT8_QDQ))
    assert next(o for o in int8.ops if o.name == "conv_s2").convention == "qdq+bias, int8 activations"


# ---------------------------------------------------------------------------------------------
# Property: the flipped int8 op equals the uint8 op computed in numpy


def ref_uint8_conv(x, w_hwio, bias, zp_in, pad, mult, shift, zp_out, lo, hi, out_dtype):
    """TFLite's conv on uint8 x (weights int8): Σ (x − zp_in)·w over the taps inside the
    image + bias, MultiplyByQuantizedMultiplier, + zp_out, clamped, in ``out_dtype``."""
    h, wd, _ = x.shape
    kh, kw, _, c_out = w_hwio.shape
    xi = x.astype(np.int64) - zp_in
    acc = np.zeros((h, wd, c_out), np.int64)
    for oy in range(h):
        for ox in range(wd):
            for ky in range(kh):
                for kx in range(kw):
                    iy, ix = oy - pad + ky, ox - pad + kx
                    if 0 <= iy < h and 0 <= ix < wd:
                        acc[oy, ox] += xi[iy, ix] @ w_hwio[ky, kx].astype(np.int64)
    acc += bias
    out = np.empty_like(acc)
    for idx in np.ndindex(acc.shape):
        out[idx] = min(max(ref_mbqm(int(acc[idx]), mult[idx[-1]], shift[idx[-1]]) + zp_out, lo), hi)
    return out.astype(out_dtype)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_flipped_conv_equals_uint8_reference(data):
    in_dtype = data.draw(st.sampled_from(["uint8", "int8"]), "input dtype")
    out_dtype = data.draw(st.sampled_from(["uint8", "int8"]), "output dtype")
    rng_of = {"uint8": (0, 255), "int8": (-128, 127)}
    zp_in = data.draw(st.integers(*rng_of[in_dtype]), "zp_in")
    zp_out = data.draw(st.integers(*rng_of[out_dtype]), "zp_out")
    relu = data.draw(st.booleans(), "relu")
    seed = data.draw(st.integers(0, 2**31 - 1), "seed")
    rng = np.random.default_rng(seed)
    s_x, s_out = (float(np.float32(2.0 ** rng.uniform(-8, -2))) for _ in range(2))
    w_scale = (2.0 ** rng.uniform(-9, -5, 6)).astype(np.float32)
    w = rng.integers(-127, 128, (3, 3, 4, 6)).astype(np.int8)
    bias = rng.integers(-2000, 2000, 6).astype(np.int32)
    mod = rb.qdq_conv2d(input_hw=(5, 5), in_channels=4, out_channels=6, weight=w, weight_scale=w_scale,
                        act_dtype=in_dtype, output_dtype=out_dtype, input_scale=s_x, input_zp=zp_in,
                        output_scale=s_out, output_zp=zp_out, bias=bias, relu=relu)
    part = npu_byoc.partition_for_npu(mod)
    (d,) = partition_log(part)
    assert d.accepted, d.reason
    (plan,) = lower_module(part).values()
    x = rng.integers(*rng_of[in_dtype], (1, 5, 5, 4), endpoint=True).astype(in_dtype)
    (got,) = golden.run_plan(plan, [x])
    assert got.dtype == np.dtype(out_dtype)
    mult, shift = conv_multipliers(s_x, w_scale, s_out)
    lo, hi = rng_of[out_dtype]
    if relu:
        lo = max(lo, zp_out)
    want = ref_uint8_conv(x[0], w, bias, zp_in, 1, mult, shift, zp_out, lo, hi, out_dtype)
    np.testing.assert_array_equal(got[0], want)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 255), st.integers(0, 255))
def test_flip_keeps_the_real_value(q, z):
    """q_u − z_u == (q_u ^ 0x80 as int8) − (z_u − 128), and the flip back is the identity."""
    x = np.array([q], np.uint8)
    assert int(to_npu(x)[0]) - (z - 128) == q - z
    assert to_model(to_npu(x), "uint8")[0] == q


def _mixed_chain(w1, w2, b1, b2, q):
    """x (uint8) -> conv -> int8 -> conv -> uint8: a uint8 partition input, an int8 tensor
    inside, a uint8 output (QDQ form, per-channel weights)."""
    from tvm import relax

    R = relax.op
    x = relax.Var("x", relax.TensorType([1, 5, 5, 4], "uint8"))

    def conv(bb, t, w, b, s_in, zp_in, dt_in, s_out, zp_out, dt_out):
        td = bb.emit(R.dequantize(t, rb._scale_const(s_in), rb._zp_const(zp_in, dt_in), axis=-1))
        wd = bb.emit(R.dequantize(relax.const(w), rb._scale_const(q["s_w"]), rb._zp_const(0), axis=3))
        y = bb.emit(R.nn.conv2d(td, wd, padding=(1, 1, 1, 1), data_layout="NHWC", kernel_layout="HWIO",
                                out_dtype="float32"))
        bd = bb.emit(R.dequantize(relax.const(b), rb._scale_const(np.float64(s_in) * q["s_w"]),
                                  rb._zp_const(0, "int32"), axis=0))
        y = bb.emit(R.add(y, bd))
        return bb.emit(R.quantize(y, rb._scale_const(s_out), rb._zp_const(zp_out, dt_out), axis=-1, out_dtype=dt_out))

    def body(bb):
        h = conv(bb, x, w1, b1, q["s_x"], q["z_x"], "uint8", q["s_h"], q["z_h"], "int8")
        return conv(bb, h, w2, b2, q["s_h"], q["z_h"], "int8", q["s_y"], q["z_y"], "uint8")

    return rb._build([x], body)


@pytest.mark.slow
def test_mixed_uint8_int8_chain_is_exact_on_every_backend():
    """uint8 -> int8 -> uint8 through two convs in one partition: golden and the generated C
    (functional, RTL) equal two uint8/int8 convs computed in numpy."""
    from npu_byoc.arch.config import DEFAULT_CONFIG
    from npu_byoc.runtime import build as B

    rng = np.random.default_rng(7)
    w1, w2 = (rng.integers(-127, 128, (3, 3, 4, 4)).astype(np.int8) for _ in range(2))
    b1, b2 = (rng.integers(-500, 500, 4).astype(np.int32) for _ in range(2))
    q = dict(s_x=f32(0.013), z_x=140, s_h=f32(0.21), z_h=-20, s_y=f32(0.37), z_y=100,
             s_w=(rng.uniform(0.5, 1.5, 4) / 128).astype(np.float32))
    part = npu_byoc.partition_for_npu(_mixed_chain(w1, w2, b1, b2, q))
    (plan,) = lower_module(part).values()
    assert len(plan.ops) == 2 and [io.dtype for io in (*plan.inputs, *plan.outputs)] == ["uint8", "uint8"]
    x = rng.integers(0, 256, (1, 5, 5, 4)).astype(np.uint8)
    m1, s1 = conv_multipliers(q["s_x"], q["s_w"], q["s_h"])
    h = ref_uint8_conv(x[0], w1, b1, q["z_x"], 1, m1, s1, q["z_h"], -128, 127, np.int8)
    m2, s2 = conv_multipliers(q["s_h"], q["s_w"], q["s_y"])
    want = ref_uint8_conv(h, w2, b2, q["z_h"], 1, m2, s2, q["z_y"], 0, 255, np.uint8)
    assert len(np.unique(h)) > 30 and len(np.unique(want)) > 30  # not saturated
    for model in (B.build(part, "golden"), B.build(part, "functional"),
                  B.BACKENDS["verilator"](part, DEFAULT_CONFIG, "llvm")):
        (got,) = model.run([x])
        np.testing.assert_array_equal(got[0], want, err_msg=model.backend)
