"""The LUT tables: each function's reference arithmetic evaluated on the 256 int8 inputs, per
numerics (LiteRT's integer kernels and float tables, onnxruntime's float32 QDQ). The registry
that names them (forms, operators, checks, the table entries) is npu_byoc.ops.lut."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..arch import numerics as nx
from .records import QLut

VALUES = np.arange(-128, 128, dtype=np.int64)  # the table index is v + 128
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

Table = Callable[[QLut], np.ndarray]


# ---------------------------------------------------------------------------------------------
# Table builders shared by several functions


def _float_in(op: QLut) -> np.ndarray:
    """float32(s_in) · float32(v − zp_in): DequantizeLinear / LUTPopulate's dequantized input."""
    return np.float32(op.input.scale) * (VALUES - op.input.zero_point).astype(np.float32)


def _quantize_half_even(y: np.ndarray, op: QLut) -> np.ndarray:
    """ONNX QuantizeLinear: round_half_even(float32(y / s_out)) + zp_out, saturated to int8."""
    q = np.rint((y.astype(np.float32) / np.float32(op.output.scale)).astype(np.float32)).astype(np.int64)
    return np.clip(q + op.output.zero_point, nx.INT8_MIN, nx.INT8_MAX)


def onnx_float(fn: Callable[[np.ndarray, dict], np.ndarray]) -> Table:
    """The onnxruntime QDQ table of a float32 function ``fn(x, params)``."""
    return lambda op: _quantize_half_even(fn(_float_in(op), dict(op.params)).astype(np.float32), op)


def tflite_lut_populate(fn: Callable[[np.ndarray], np.ndarray]) -> Table:
    """LiteRT's ``LUTPopulate<int8_t>`` of a float32 function (LOGISTIC, TANH, EXP)."""
    return lambda op: nx._lut_int8(
        fn, op.input.scale, op.input.zero_point, op.output.scale, op.output.zero_point
    ).astype(np.int64)


def _requant(x: np.ndarray, real: float, zp_out: int) -> np.ndarray:
    """zp_out + MultiplyByQuantizedMultiplier(x, QuantizeMultiplier(real)), unclamped."""
    m, s = nx.quantize_multiplier(real)
    return nx.multiply_by_quantized_multiplier(x, m, s).astype(np.int64) + zp_out


def _f32_ratio(a: float, b: float) -> float:
    """float a / float b in float32, as the C++ computes a ``float`` quotient."""
    return float(np.float32(a) / np.float32(b))


def _clamp8(q: np.ndarray) -> np.ndarray:
    return np.clip(q, nx.INT8_MIN, nx.INT8_MAX)


# ---------------------------------------------------------------------------------------------
# LiteRT integer kernels evaluated on the 256 inputs


def _tflite_requantize(op: QLut) -> np.ndarray:
    """QUANTIZE int8 -> int8 (``reference_ops::Requantize``): the multiplier of
    double(s_in) / double(s_out)."""
    x = VALUES - op.input.zero_point
    real = float(np.float32(op.input.scale)) / float(np.float32(op.output.scale))
    return _clamp8(_requant(x, real, op.output.zero_point))


def _tflite_relu(op: QLut) -> np.ndarray:
    """RELU / RELU6 / RELU_N1_TO_1 / RELU_0_TO_1 (``ReluX``): as QUANTIZE but the multiplier
    of the float32 quotient s_in / s_out (ReluPrepare); the clamp is the activation's."""
    x = VALUES - op.input.zero_point
    return _clamp8(_requant(x, _f32_ratio(op.input.scale, op.output.scale), op.output.zero_point))


def _tflite_leaky_relu(op: QLut) -> np.ndarray:
    """``QuantizeLeakyRelu``: two multipliers, float32 s_in·alpha/s_out for x < 0 and
    float32 s_in/s_out for x >= 0 (LeakyReluPrepare)."""
    alpha = np.float32(dict(op.params)["alpha"])
    s_in, s_out = np.float32(op.input.scale), np.float32(op.output.scale)
    x = VALUES - op.input.zero_point
    pos = _requant(x, float(s_in / s_out), op.output.zero_point)
    neg = _requant(x, float((s_in * alpha) / s_out), op.output.zero_point)
    return _clamp8(np.where(x >= 0, pos, neg))


def _constant(op: QLut) -> tuple[int, float, int]:
    """The scalar constant operand of ADD / SUB / MUL: (int8 value, scale, zero point)."""
    p = dict(op.params)
    return int(p["constant"]), float(p["constant_scale"]), int(p["constant_zero_point"])


def _tflite_add_scalar(op: QLut, sign: int = 1) -> np.ndarray:
    """ADD (SUB: sign −1) of a scalar constant, ``reference_integer_ops::AddFunc``; SUB is ADD
    with the second input's multiplier negated (PrepareGeneralSubOp)."""
    c, s_c, zp_c = _constant(op)
    p = nx.add_params(op.input.scale, s_c, op.output.scale)
    p = p._replace(input2_multiplier=sign * p.input2_multiplier)
    return nx.add(VALUES, c, op.input.zero_point, zp_c, op.output.zero_point, p).astype(np.int64)


def _tflite_mul_scalar(op: QLut) -> np.ndarray:
    """MUL by a scalar constant (``MulElementwise``): zp_out + MBQM((v − zp_in)·(c − zp_c)),
    multiplier of s_in·s_c/s_out in float32 (``numerics.mul_scale``, as mul.cc Prepare)."""
    c, s_c, zp_c = _constant(op)
    real = nx.mul_scale(op.input.scale, s_c, op.output.scale)
    return _clamp8(_requant((VALUES - op.input.zero_point) * (c - zp_c), real, op.output.zero_point))


def _scalar_float(op: QLut) -> np.float32:
    c, s_c, zp_c = _constant(op)
    return np.float32(s_c) * np.float32(c - zp_c)


def _tflite_abs(op: QLut) -> np.ndarray:
    """ABS (elementwise.cc): |x − zp_in|, rescaled by the float32 s_in/s_out multiplier when
    the scales differ, + zp_out."""
    x = np.abs(VALUES - op.input.zero_point)
    if np.float32(op.input.scale) == np.float32(op.output.scale):
        return _clamp8(x + op.output.zero_point)
    return _clamp8(_requant(x, _f32_ratio(op.input.scale, op.output.scale), op.output.zero_point))


def _i16(x: np.ndarray) -> np.ndarray:
    """Wrap to int16 (a C++ int -> int16_t conversion)."""
    return ((x + 32768) % 65536) - 32768


def _srdhm16(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul on int16: round(a·b / 2^15), ties up."""
    n = a * b + np.where(a * b >= 0, 1 << 14, 1 - (1 << 14))
    r = np.sign(n) * (np.abs(n) >> 15)  # C division: toward zero
    return np.where((a == -32768) & (b == -32768), 32767, r)


def _sdhm16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """TFLite's SaturatingDoublingHighMul (int16): a·b / 2^15 truncated toward zero."""
    p = a * b
    r = np.sign(p) * (np.abs(p) >> 15)
    return np.where((a == -32768) & (b == -32768), 32767, r)


def _rdbpot16(x: np.ndarray, exponent: int) -> np.ndarray:
    mask = (1 << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)


def _sat_lshift16(x: np.ndarray, amount: int) -> np.ndarray:
    return np.clip(x * (1 << amount), -32768, 32767)


def _int16_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier, then DownScaleInt32ToInt16Multiplier (round to the top 16 bits)."""
    m32, exponent = nx.quantize_multiplier(real)
    if m32 >= 2**31 - 1 - (1 << 15):
        return 32767, exponent
    return (m32 + (1 << 15)) >> 16, exponent


def hard_swish_params(op: QLut) -> tuple[int, int, int, int]:
    """HardSwishPrepare, in float32: (output multiplier, exponent, reluish multiplier, exponent)."""
    hires = np.float32(1.0 / 128.0) * np.float32(op.input.scale)
    out_m, out_e = _int16_multiplier(float(hires / np.float32(op.output.scale)))
    relu_m, relu_e = _int16_multiplier(float(hires / np.float32(3.0 / 32768.0)))
    return out_m, out_e, relu_m, relu_e


def _tflite_hard_swish(op: QLut) -> np.ndarray:
    """``reference_ops::HardSwish`` (int8): 16-bit fixed point, x·relu6(x+3)/6 as
    x_hires · reluish, with reluish = (x/3 rescaled to [-1, 1] saturating + 1) / 2."""
    out_m, out_e, relu_m, relu_e = hard_swish_params(op)
    hires = (VALUES - op.input.zero_point) * 128  # |x| <= 255: fits int16
    preshift = _srdhm16(hires, out_m)
    reluish = hires
    if relu_e > 0:
        reluish = _sat_lshift16(reluish, relu_e - 1)
    reluish = _srdhm16(reluish, relu_m)
    if relu_e > 0:
        reluish = _sat_lshift16(reluish, 1)
    if relu_e < 0:
        reluish = _rdbpot16(reluish, -relu_e)
    reluish = (reluish + (1 << 15)) >> 1
    out = _rdbpot16(_sdhm16(reluish, preshift), -out_e)
    return _clamp8(_i16(out + op.output.zero_point))


def hard_swish_exponent(op: QLut, hw) -> str | None:
    """LiteRT's int8 HARD_SWISH needs s_in / (128 · s_out) < 1 (its output exponent ≤ 0)."""
    if op.numerics == "tflite" and hard_swish_params(op)[1] > 0:
        return (
            f"output scale {op.output.scale:.6g} is below input scale / 128 "
            f"({op.input.scale / 128:.6g}): LiteRT's HARD_SWISH refuses it"
        )
    return None


# ---------------------------------------------------------------------------------------------
# float32 functions (ONNX numerics; LiteRT's float tables)


def _f32(fn):
    def f(x, p=None):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # log(0) = -inf, sqrt(-1) = NaN, expf(100) = inf: as in C
            return fn(x.astype(np.float64)).astype(np.float32)

    return f


def _sigmoid(x, p=None):
    return nx._sigmoid_f32(x)


def _hard_swish_onnx(x, p=None):
    # onnxruntime HardSwish: x · max(0, min(1, x/6 + 0.5)) in float32.
    h = np.clip(x * np.float32(1.0 / 6.0) + np.float32(0.5), np.float32(0), np.float32(1))
    return (x * h).astype(np.float32)


def _hard_sigmoid_onnx(x, p):
    # onnxruntime HardSigmoid: max(0, min(1, alpha · x + beta)) in float32.
    y = np.float32(p["alpha"]) * x.astype(np.float32) + np.float32(p["beta"])
    return np.clip(y.astype(np.float32), np.float32(0), np.float32(1))


def _elu_onnx(x, p):
    # onnxruntime Elu: x >= 0 ? x : alpha · (exp(x) − 1), float32.
    e = np.exp(x.astype(np.float64)).astype(np.float32) - np.float32(1)
    return np.where(x >= 0, x, np.float32(p["alpha"]) * e).astype(np.float32)


def tflite_float_wrapped(fn: Callable[[np.ndarray, dict], np.ndarray]) -> Table:
    """An op the converter keeps in float (ELU, NEG): DEQUANTIZE (float(double(s_in)·(v −
    zp_in))), the float32 kernel ``fn(x, params)``, QUANTIZE (round_half_away(x / float(s_out))
    + zp_out, saturated)."""

    def build(op: QLut) -> np.ndarray:
        x = (float(np.float32(op.input.scale)) * (VALUES - op.input.zero_point)).astype(np.float32)
        y = fn(x, dict(op.params)).astype(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = (y / np.float32(op.output.scale)).astype(np.float32).astype(np.float64)
            rounded = np.where(scaled >= 0, np.floor(scaled + 0.5), -np.floor(-scaled + 0.5))
        # AffineQuantize: static_cast<int32_t>(TfLiteRound(...)) + zero_point, an int32 add
        return _clamp8(nx._wrap_i32(nx.c_float_to_int32(rounded) + op.output.zero_point))

    return build


def _tflite_sqrt(op: QLut) -> np.ndarray:
    """LiteRT's int8 SQRT (measured against BUILTIN_REF on tests/fixtures/ops/sqrt.npz): the
    float32 sqrt of the dequantized input, divided by s_out and truncated (no rounding)."""
    x = np.float32(op.input.scale) * (VALUES - op.input.zero_point).astype(np.float32)
    with np.errstate(invalid="ignore"):
        y = np.sqrt(x.astype(np.float64)).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        q = nx.c_float_to_int32((y / np.float32(op.output.scale)).astype(np.float32))  # sqrt(x < 0) = NaN
    return _clamp8(nx._wrap_i32(q + op.output.zero_point))


def _saturating_shift_left(x: int, exponent: int) -> int:
    """gemmlowp ``SaturatingRoundingMultiplyByPOT<exponent > 0>`` of one int32."""
    threshold = (1 << (31 - exponent)) - 1
    return _INT32_MAX if x > threshold else _INT32_MIN if x < -threshold else x << exponent


def _srdhm(a: int, b: int) -> int:
    return int(nx.saturating_rounding_doubling_high_mul(a, b))


def inv_sqrt_multiplier_exp(value: int) -> tuple[int, int]:
    """LiteRT's ``GetInvSqrtQuantizedMultiplierExp(value, kReverseShift)``: 1/sqrt(value) as an
    int32 multiplier and a (left-positive) shift, by five Newton-Raphson steps in gemmlowp fixed
    point with 3 integer bits (F3); a value of 0 or 1 gives (INT32_MAX, 0)."""
    if value <= 1:
        return _INT32_MAX, 0
    shift = 11
    while value >= 1 << 29:
        value //= 4
        shift += 1
    pairs = (32 - value.bit_length() - 1) // 2 - 1  # (clz - 1) / 2 - 1 bit pairs of left shift
    shift -= pairs
    value <<= 2 * pairs
    half_input = int(nx.rounding_divide_by_pot(value >> 1, 1))  # F3 input / 2
    half_three = (1 << 28) + (1 << 27)  # F3 1.5
    x = 1 << 28  # F3 one
    for _ in range(5):
        x3 = _saturating_shift_left(_srdhm(_srdhm(x, x), x), 6)  # Rescale<3> of an F9
        x = _saturating_shift_left(int(nx._wrap_i32(_srdhm(half_three, x) - _srdhm(half_input, x3))), 3)
    x = _srdhm(x, 1518500250)  # F3 · F0 sqrt(2)/2
    if shift < 0:
        x, shift = int(nx._wrap_i32(x << -shift)), 0
    return x, -shift


def _tflite_rsqrt(op: QLut) -> np.ndarray:
    """LiteRT's int8 RSQRT (elementwise.cc ``RsqrtEvalQuantized``), integer only::

        multiplier, shift = QuantizeMultiplier(1 / double(sqrtf(s_in) · s_out))   # float32 product
        v = x − zp_in;  v == 0 → 127
        m_v, s_v = GetInvSqrtQuantizedMultiplierExp(v)
        out = MBQM(MBQM(1, m_v, s_v + 20), multiplier, shift − 20) + zp_out, clamped

    LiteRT refuses an input below zp_in ("Rsqrt is only defined for positive values"); the table
    gives it 127, as TensorFlow's TOSA lowering of the same kernel does."""
    product = np.sqrt(np.float32(op.input.scale)) * np.float32(op.output.scale)
    m, s = nx.quantize_multiplier(1.0 / float(np.float32(product)))
    out = np.full(VALUES.shape, nx.INT8_MAX, np.int64)
    for k, v in enumerate(VALUES - op.input.zero_point):
        if v <= 0:
            continue
        m_v, s_v = inv_sqrt_multiplier_exp(int(v))
        data = nx.multiply_by_quantized_multiplier(1, m_v, s_v + 20)
        out[k] = int(nx.multiply_by_quantized_multiplier(data, m, s - 20)) + op.output.zero_point
    return _clamp8(out)


def _elu_tflite(x, p):
    # LiteRT's float ELU: x < 0 ? alpha · expm1f(x) : x
    return np.where(x < 0, np.float32(p["alpha"]) * np.expm1(x.astype(np.float64)).astype(np.float32), x)


def _leaky_relu_onnx(x, p):
    return np.where(x >= 0, x, x * np.float32(p["alpha"])).astype(np.float32)


def _gelu_tflite(x, p):
    """LiteRT's GeluTransform / GeluTransformApproximate in float32 (erfcf and tanhf taken as
    the correctly rounded float32 of the double function, as for the other float kernels)."""
    x = x.astype(np.float32)
    half_x = np.float32(0.5) * x
    if p["approximate"]:
        sqrt_2_over_pi = np.float32(2 / math.sqrt(math.pi) * math.sqrt(0.5))  # M_2_SQRTPI · M_SQRT1_2
        inner = sqrt_2_over_pi * (x + np.float32(0.044715) * x * x * x)
        return half_x * (np.float32(1) + np.tanh(inner.astype(np.float64)).astype(np.float32))
    arg = (x * np.float32(-math.sqrt(0.5))).astype(np.float64)
    return half_x * np.array([math.erfc(v) for v in arg], np.float32)


def _identity(x, p=None):
    return x
