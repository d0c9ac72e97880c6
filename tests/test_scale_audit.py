"""Every op's compile-time scale arithmetic against LiteRT's own order of float32 / double steps.

The reference is tests/litert_reference.py, transcribed from LiteRT's C++ (each function names
its file and function), never from npu_byoc. Each test draws thousands of random float32 scales
(seeded) and compares the integer parameters npu_byoc derives (multiplier, shift, LUT entries,
clamp bounds) with LiteRT's; for MUL and ADD it also runs every int8 operand pair on them.
docs/numerics.md §12 lists the audit, op by op.
"""

from __future__ import annotations

import numpy as np
import pytest

from npu_byoc.arch import numerics as nx
from npu_byoc.ops import lut_tables, softmax_kernel
from npu_byoc.ops.lut import FUNCTIONS
from npu_byoc.ops.records import QLut, QTensor

from . import litert_reference as ref

F32 = np.float32
DRAWS = 3000
GRID = np.arange(-128, 128)
A, B = np.meshgrid(GRID, GRID, indexing="ij")  # every pair of int8 operands


def _scales(rng, n: int, lo: float, hi: float) -> np.ndarray:
    """n float32 scales, log-uniform in [2^lo, 2^hi]."""
    return (2.0 ** rng.uniform(lo, hi, n)).astype(F32)


def _zp(rng) -> int:
    return int(rng.integers(-128, 128))


def _double_mul_params(s1, s2, s_out) -> tuple[int, int]:
    """The formula npu_byoc used before issue 24: double product and quotient."""
    return ref.quantize_multiplier(float(F32(s1)) * float(F32(s2)) / float(F32(s_out)))


# ------------------------------------------------------------------------------ BATCH_MATMUL
def test_batch_matmul_multiplier_sweep_is_litert_prepare():
    """npu.matmul's (multiplier, shift) (frontends.tflite_batch_matmul.multiplier: the import and
    the NPU op share it) is LiteRT's, float32 product first; the double product differs on some."""
    from npu_byoc.frontends.tflite_batch_matmul import multiplier

    rng = np.random.default_rng(2424)
    s1, s2, so = _scales(rng, DRAWS, -10, 0), _scales(rng, DRAWS, -10, 0), _scales(rng, DRAWS, -6, 2)
    differ_from_double = 0
    for a, b, o in zip(s1, s2, so):
        want = ref.batch_matmul_prepare(a, b, o)
        assert multiplier(a, b, o) == want, (a, b, o)
        differ_from_double += _double_mul_params(a, b, o) != want
    assert differ_from_double > 0  # the order matters on these draws


# ------------------------------------------------------------------------------------- MUL
def test_mul_issue_24_example_is_litert_s_multiplier_and_output():
    """Hand-derived (issue 24, EfficientNetB0): s1 = 0.03517231, s2 = 2^-8, s_out = 0.027174268.
    float32: s1·s2 = 1.373918348690495e-4 (exact, s2 a power of two), / s_out = 0.005055953282862902
    = 0.6471620... · 2^-7, so (1389769856, −7); the double quotient 0.005055953495574839 gives
    (1389769914, −7). On (x − zp1)(y − zp2) = 4845 = 85 · 57: SRDHM(4845, 1389769856) = 3135
    (from 3135.49999) and RDBPOT(3135, 7) = 24 (24.49); the double multiplier makes it 3136
    (3135.50012), then 24.5 → 25, 1 LSB off LiteRT."""
    m, s = nx.mul_params(0.03517231, 0.00390625, 0.027174268)
    assert (m, s) == (1389769856, -7)
    out = nx.mul(np.array([85 + 3]), np.array([57 - 2]), 3, -2, 0, m, s)
    assert out.tolist() == [24]


def test_mul_params_sweep_is_litert_prepare():
    rng = np.random.default_rng(24)
    s1, s2, so = _scales(rng, DRAWS, -12, 0), _scales(rng, DRAWS, -12, 0), _scales(rng, DRAWS, -12, 0)
    checked = differ_from_double = 0
    for a, b, o in zip(s1, s2, so):
        want = ref.mul_prepare(a, b, o)
        if not -31 <= want[1] <= nx.MUL_MAX_SHIFT:
            with pytest.raises(ValueError, match="outside"):
                nx.mul_params(a, b, o)
            continue
        assert nx.mul_params(a, b, o) == want, (a, b, o)
        checked += 1
        differ_from_double += _double_mul_params(a, b, o) != want
    assert checked > DRAWS // 2
    assert differ_from_double > 100  # the sweep reaches the scales where the order matters


def test_mul_every_int8_product_is_litert_mul_elementwise():
    rng = np.random.default_rng(2424)
    checked = 0
    while checked < 60:
        a, b, o = _scales(rng, 3, -10, 0)
        m, s = ref.mul_prepare(a, b, o)
        if not -31 <= s <= nx.MUL_MAX_SHIFT or (m, s) == _double_mul_params(a, b, o):
            continue  # keep the draws whose multiplier the double formula gets wrong
        zp1, zp2, zpo = _zp(rng), _zp(rng), _zp(rng)
        got = nx.mul(A, B, zp1, zp2, zpo, *nx.mul_params(a, b, o))
        np.testing.assert_array_equal(got, ref.mul_elementwise(A, B, zp1, zp2, zpo, m, s), err_msg=str((a, b, o)))
        checked += 1


def test_mul_scalar_table_is_litert_mul_elementwise():
    # The issue's tie as a MUL by a constant: (v − zp_in)(c − zp_c) = 85 · 57 → 24, not 25.
    issue = _lut("mul_scalar", 0.03517231, -5, 0.027174268, 0, constant=50, constant_scale=0.00390625,
                 constant_zero_point=-7)  # fmt: skip
    assert FUNCTIONS["mul_scalar"].tables["tflite"](issue)[80 + 128] == 24
    rng = np.random.default_rng(2425)
    for _ in range(300):
        s_in, s_c, s_out = _scales(rng, 3, -10, 0)
        m, s = ref.mul_prepare(s_in, s_c, s_out)
        if not -31 <= s <= nx.MUL_MAX_SHIFT:
            continue
        zp_in, c, zp_c, zp_out = _zp(rng), _zp(rng), _zp(rng), _zp(rng)
        op = _lut("mul_scalar", s_in, zp_in, s_out, zp_out,
                  constant=c, constant_scale=float(s_c), constant_zero_point=zp_c)  # fmt: skip
        want = ref.mul_elementwise(GRID, c, zp_in, zp_c, zp_out, m, s)
        np.testing.assert_array_equal(FUNCTIONS["mul_scalar"].tables["tflite"](op), want, err_msg=str(op))


# ------------------------------------------------------------------------------------- ADD / SUB
def test_add_params_sweep_is_litert_prepare():
    rng = np.random.default_rng(8)
    checked = 0
    for a, b, o in zip(*(_scales(rng, DRAWS, -12, 0) for _ in range(3))):
        want = ref.add_prepare(a, b, o)
        if want is None:
            with pytest.raises(ValueError, match="outside"):
                nx.add_params(a, b, o)
            continue
        assert tuple(nx.add_params(a, b, o)) == want, (a, b, o)
        checked += 1
    assert checked > DRAWS // 2


@pytest.mark.parametrize("sign", [1, -1], ids=["add", "sub"])
def test_add_every_int8_sum_is_litert_add_func(sign):
    rng = np.random.default_rng(9 + sign)
    checked = 0
    while checked < 25:
        a, b, o = _scales(rng, 3, -10, 0)
        p = ref.add_prepare(a, b, o)
        if p is None:
            continue
        p = (*p[:3], sign * p[3], *p[4:])  # sub.cc: input 2's multiplier negated
        zp1, zp2, zpo = _zp(rng), _zp(rng), _zp(rng)
        params = nx.add_params(a, b, o)
        params = params._replace(input2_multiplier=sign * params.input2_multiplier)
        got = nx.add(A, B, zp1, zp2, zpo, params)
        np.testing.assert_array_equal(got, ref.add_func(A, B, zp1, zp2, zpo, p), err_msg=str((a, b, o)))
        checked += 1


@pytest.mark.parametrize("sign", [1, -1], ids=["add_scalar", "sub_scalar"])
def test_add_scalar_table_is_litert_add_func(sign):
    rng = np.random.default_rng(11 + sign)
    name = "add_scalar" if sign == 1 else "sub_scalar"
    for _ in range(300):
        s_in, s_c, s_out = _scales(rng, 3, -10, 0)
        p = ref.add_prepare(s_in, s_c, s_out)
        if p is None:
            continue
        zp_in, c, zp_c, zp_out = _zp(rng), _zp(rng), _zp(rng), _zp(rng)
        op = _lut(name, s_in, zp_in, s_out, zp_out, constant=c, constant_scale=float(s_c), constant_zero_point=zp_c)
        want = ref.add_func(GRID, c, zp_in, zp_c, zp_out, (*p[:3], sign * p[3], *p[4:]))
        np.testing.assert_array_equal(FUNCTIONS[name].tables["tflite"](op), want, err_msg=str(op))


# ------------------------------------------------------------------------------------- weighted ops
def test_conv_depthwise_transpose_conv_per_channel_is_double():
    rng = np.random.default_rng(1)
    for _ in range(DRAWS // 30):
        s_in, s_out = _scales(rng, 2, -10, 0)
        s_w = _scales(rng, 32, -14, -4)
        m, s = nx.conv_requant_params(s_in, s_w, s_out)
        assert list(zip(m.tolist(), s.tolist())) == ref.conv_per_channel(s_in, s_w, s_out)


def test_legacy_per_tensor_conv_and_fc_multiplier_is_a_float32_product():
    rng = np.random.default_rng(2)
    differ = 0
    for s_in, s_w, s_out in zip(*(_scales(rng, DRAWS, -12, 0) for _ in range(3))):
        m, s = nx.fc_requant_params(s_in, [s_w], s_out)
        want = ref.conv_legacy_per_tensor(s_in, s_w, s_out)
        assert (int(m[0]), int(s[0])) == want
        differ += ref.conv_per_channel(s_in, [s_w], s_out)[0] != want
    assert differ > 100  # the float32 product is a different formula at these scales


def test_fully_connected_reference_scale_is_the_double_quotient():
    """``reference_integer_ops::FullyConnected`` (per-tensor and per-channel overloads):
    ``double(input_scale) * double(filter_scale) / double(output_scale)``, held exactly."""
    rng = np.random.default_rng(3)
    s_in, s_out = _scales(rng, 2, -8, 0)
    s_w = _scales(rng, DRAWS, -14, -6)
    mant, expo = nx.fc_scale_params(s_in, s_w, s_out)
    for w, m, e in zip(s_w, mant.tolist(), expo.tolist()):
        assert m * 2.0**e == float(F32(s_in)) * float(w) / float(F32(s_out))


# ------------------------------------------------------------------------------------- MEAN, SOFTMAX
def test_mean_params_are_prepare_mean_or_sum_and_the_folded_count():
    rng = np.random.default_rng(4)
    for s_in, s_out, n in zip(_scales(rng, DRAWS, -10, 0), _scales(rng, DRAWS, -10, 0), rng.integers(1, 5000, DRAWS)):
        assert nx.mean_params(s_in, s_out, int(n)) == ref.mean_prepare(s_in, s_out, int(n))


def test_softmax_input_beta_params_are_preprocess_softmax_scaling():
    rng = np.random.default_rng(5)
    for s_in, beta in zip(_scales(rng, DRAWS, -12, 2), _scales(rng, DRAWS, -2, 2)):
        if float(s_in) * float(beta) < 2.0**-26:
            continue
        assert softmax_kernel.input_beta_params(float(s_in), float(beta)) == ref.softmax_prepare(s_in, beta)


# ------------------------------------------------------------------------------------- fused activations
def test_activation_range_is_calculate_activation_range_quantized():
    rng = np.random.default_rng(6)
    for s, zp in zip(_scales(rng, DRAWS, -9, 0), rng.integers(-128, 128, DRAWS)):
        for act in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
            assert nx.activation_range(act, s, int(zp)) == ref.activation_range(act, s, int(zp))


def test_tflite_import_clamps_a_fused_relu6_at_litert_s_bound():
    """s_out = float32(6 / 253.5) = 0.023668639361858368: the float32 quotient 6 / s_out is 253.5
    exactly and LiteRT rounds it away from zero (254 − 128 = 126); TVM's importer rounds the
    double 253.4999967 to 253 (125): every RELU6 output of 126 would come out 125."""
    from tflite.ActivationFunctionType import ActivationFunctionType
    from tvm import relax

    from npu_byoc.frontends.tflite_ops import DataMovementConverter

    s_out = F32(6.0 / 253.5)
    assert float(F32(F32(6.0) / s_out)) == 253.5 and round(6.0 / float(s_out)) == 253
    converter = DataMovementConverter.__new__(DataMovementConverter)  # the method reads no state
    x = relax.Var("x", relax.TensorType([1, 4], "int8"))
    clip = converter.convert_qnn_fused_activation_function(x, ActivationFunctionType.RELU6, float(s_out), -128, "int8")
    bounds = [int(float(a.value)) for a in clip.args[1:]]
    assert bounds == list(ref.activation_range("RELU6", s_out, -128)) == [-128, 126]


@pytest.mark.parametrize("backend", ["golden", "functional"])
def test_relu6_tie_model_is_litert_exactly(backend):
    """relu6_tie_int8.tflite (tools/make_scale_ties.py): a CONV_2D with fused RELU6 at that
    s_out; LiteRT clamps 327 of its 3072 outputs at 126, which TVM's bound would make 125."""
    import npu_byoc

    from .conftest import model_path, reference

    ref = reference("relu6_tie_int8.tflite")
    assert ref["reference"].endswith("BUILTIN_REF")
    assert sum(int((outs[0] == 126).sum()) for outs in ref["outputs"]) == 327
    model = npu_byoc.build(npu_byoc.load_model(model_path("relu6_tie_int8.tflite")), backend)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        np.testing.assert_array_equal(model.run(inputs)[0], outputs[0])


def test_a_float_clip_bound_is_quantized_as_onnxruntime_and_tvm_quantize_it():
    """ONNX QDQ and Relax: a float Clip / Relu before the output quantize bounds the result at
    QuantizeLinear(f) = round_half_even(float32(f) / float32(s_out)) + zp (onnxruntime's MLAS and
    TVM's legalized relax.quantize both divide in float32). At s_out = float32(6/253.5) the
    float32 quotient is the tie 253.5 (→ 254); the double 253.4999967 would give 253."""
    from npu_byoc.ops._qdq import _quantize_bound

    def q(f, s, zp):
        return int(np.rint(F32(F32(f) / F32(s)))) + zp

    assert _quantize_bound(6.0, QTensor((1,), "int8", float(F32(6.0 / 253.5)), -128)) == 254 - 128
    rng = np.random.default_rng(14)
    for s, zp in zip(_scales(rng, DRAWS, -9, 0), rng.integers(-128, 128, DRAWS)):
        out = QTensor((1,), "int8", float(s), int(zp))
        for f in (0.0, 6.0, -1.0, 1.0, float(rng.uniform(-4, 4))):
            assert _quantize_bound(f, out) == q(f, s, int(zp)), (f, s, zp)


# ------------------------------------------------------------------------------------- LUT functions
def _lut(function: str, s_in, zp_in, s_out, zp_out, **params) -> QLut:
    return QLut(function, QTensor((1, 256), "int8", float(s_in), zp_in), QTensor((1, 256), "int8", float(s_out), zp_out),
                -128, 127, params=tuple(sorted(params.items())))  # fmt: skip


def _table(function: str, op: QLut) -> np.ndarray:
    return np.asarray(FUNCTIONS[function].tables["tflite"](op), np.int64)


def _sigmoid(x):
    e = np.exp(-x.astype(np.float64)).astype(F32)  # expf: correctly rounded
    return F32(1) / (F32(1) + e)


LUT_POPULATE = {  # LUTPopulate<int8_t> transforms: activations.cc, exp.cc, elementwise.cc (log)
    "sigmoid": _sigmoid,
    "tanh": lambda x: np.tanh(x.astype(np.float64)).astype(F32),
    "exp": lambda x: np.exp(x.astype(np.float64)).astype(F32),
    "log": lambda x: np.log(x.astype(np.float64)).astype(F32),
}


@pytest.mark.parametrize("function", sorted(LUT_POPULATE))
def test_lut_populate_tables_are_litert_s(function):
    rng = np.random.default_rng(7)
    for s_in, s_out in zip(_scales(rng, 400, -10, 0), _scales(rng, 400, -12, 0)):
        zp_in, zp_out = _zp(rng), _zp(rng)
        want = ref.lut_populate_int8(LUT_POPULATE[function], s_in, zp_in, s_out, zp_out)
        np.testing.assert_array_equal(_table(function, _lut(function, s_in, zp_in, s_out, zp_out)), want)


def test_lut_populate_adds_the_zero_point_in_float32():
    """Hand-derived: EXP, s_in = 1, zp_in = 0, s_out = 0.6141214370727539 (a float32), zp_out =
    127. Entry v = 21: expf(21) = 1318815744, 1.0f / s_out = 1.6283423900604248, their float32
    product 2147483520 = 2^31 − 128 (float32's spacing there is 128). LUTPopulate adds the zero
    point in float32: 2147483520 + 127 rounds to 2^31, which static_cast<int32_t> turns into
    INT32_MIN on x86: the entry is −128, where an integer sum (2^31 − 1) would clamp to 127."""
    s_out = 0.6141214370727539
    assert float(F32(np.exp(21.0))) == 1318815744.0
    assert float(F32(F32(np.exp(21.0)) * (F32(1) / F32(s_out)))) == 2.0**31 - 128
    table = _table("exp", _lut("exp", 1.0, 0, s_out, 127))
    assert table[21 + 128] == -128 and table[20 + 128] == 127
    np.testing.assert_array_equal(table, ref.lut_populate_int8(LUT_POPULATE["exp"], 1.0, 0, s_out, 127))


def test_relu_leaky_relu_abs_and_requantize_are_litert_s():
    rng = np.random.default_rng(10)
    for s_in, s_out, alpha in zip(_scales(rng, 500, -10, 0), _scales(rng, 500, -10, 0), rng.uniform(0.01, 0.5, 500)):
        zp_in, zp_out = _zp(rng), _zp(rng)
        x = GRID - zp_in
        m, s = ref.relu_prepare(s_in, s_out)
        np.testing.assert_array_equal(_table("relu", _lut("relu", s_in, zp_in, s_out, zp_out)),
                                      np.clip(ref.mbqm(x, m, s) + zp_out, -128, 127))  # fmt: skip
        (ma, sa), (mi, si) = ref.leaky_relu_prepare(s_in, alpha, s_out)
        want = np.clip(np.where(x >= 0, ref.mbqm(x, mi, si), ref.mbqm(x, ma, sa)) + zp_out, -128, 127)
        got = _table("leaky_relu", _lut("leaky_relu", s_in, zp_in, s_out, zp_out, alpha=float(F32(alpha))))
        np.testing.assert_array_equal(got, want)
        for s_abs_out in (s_out, s_in):  # rescaled, and the equal-scale copy
            got = _table("abs", _lut("abs", s_in, zp_in, s_abs_out, zp_out))
            np.testing.assert_array_equal(got, ref.abs_table(s_in, zp_in, s_abs_out, zp_out))
        got = _table("requantize", _lut("requantize", s_in, zp_in, s_out, zp_out))
        np.testing.assert_array_equal(got, ref.requantize_table(s_in, zp_in, s_out, zp_out))


def test_hard_swish_multipliers_are_hard_swish_prepare():
    rng = np.random.default_rng(12)
    for s_in, s_out in zip(_scales(rng, DRAWS, -10, 0), _scales(rng, DRAWS, -10, 0)):
        op = _lut("hard_swish", s_in, 0, s_out, 0)
        assert lut_tables.hard_swish_params(op) == ref.hard_swish_prepare(s_in, s_out)


FLOAT_KERNELS = {  # converter-kept float ops: DEQUANTIZE, the float kernel, QUANTIZE
    "neg": lambda x: -x,
    "square": lambda x: (x * x).astype(F32),
}


@pytest.mark.parametrize("function", sorted(FLOAT_KERNELS))
def test_float_kernel_tables_are_dequantize_kernel_quantize(function):
    """Output scales down to 2^-28 push x² / s_out past int32: AffineQuantize's cast gives
    INT32_MIN there (entry −128 after the int32 add of a zero point ≥ 0, +127 after a negative
    one wraps it), not the saturated 127."""
    rng = np.random.default_rng(13)
    for s_in, s_out in zip(_scales(rng, 400, -8, 0), _scales(rng, 400, -28, 0)):
        zp_in, zp_out = _zp(rng), _zp(rng)
        want = ref.float_kernel_table(FLOAT_KERNELS[function], s_in, zp_in, s_out, zp_out)
        np.testing.assert_array_equal(_table(function, _lut(function, s_in, zp_in, s_out, zp_out)), want)


# Where LiteRT's default (optimized) kernels and its reference kernels disagree, the NPU follows the
# reference ones. Both cases are tensors of bench/keras_apps.py's models, fed identical inputs in
# both LiteRT runs (OpResolverType.BUILTIN_REF and BUILTIN_WITHOUT_DEFAULT_DELEGATES, ai-edge-litert 2.3).


def test_requantize_rounds_a_negative_tie_away_from_zero_as_the_reference_conv():
    """RegNetX002's second CONV_2D, one element: acc −12927 (bias in), (1211973700, −8), exact value
    −28.498. SRDHM gives −7296 (−7295.6 rounded), whose 2^8 division is the tie −28.5: the
    reference kernels' RoundingDivideByPOT rounds it away from zero, −29 (LiteRT BUILTIN_REF's
    output); the optimized conv (ruy on x86) rounds it up, −28."""
    assert int(ref.srdhm(np.int64(-12927), 1211973700)) == -7296
    got = nx.requantize(np.array([-12927]), None, 1211973700, -8, 0)
    assert got.tolist() == [-29] == ref.mbqm(np.array([-12927]), 1211973700, -8).tolist()


def test_mean_rounds_as_the_reference_mean():
    """RegNetY002's squeeze-excite MEAN over 16 x 16, one channel: Σ(x − zp_in) = 370, scales
    6.8192174e-05 -> 3.0230663e-05 (float32), zero points −128: exact value −124.74. LiteRT's
    reference kernels give −125 (BUILTIN_REF's output), its optimized MEAN −124."""
    s_in, s_out = F32(6.819217378506437e-05), F32(3.02306634694105e-05)
    x = np.full((1, 16, 16, 1), -128, np.int64)
    x.reshape(-1)[:3] = (-1, -1, -12)  # 127 + 127 + 116 = 370 above the zero point
    m, s = nx.mean_params(s_in, s_out, 256)
    assert (m, s) == nx.fold_mean_count(*ref.quantize_multiplier(float(s_in) / float(s_out)), 256)
    assert nx.mean(x, (1, 2), False, -128, -128, m, s).tolist() == [[-125]]
    assert round(370 * float(s_in) / float(s_out) / 256 - 128, 2) == -124.74
