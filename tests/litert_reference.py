"""LiteRT's scale arithmetic, written out again from its C++ source for tests/test_scale_audit.py.

Independent of npu_byoc: every function here is transcribed from the LiteRT file and function
named in its docstring (google-ai-edge/LiteRT, ``tflite/kernels/...``), keeping the C++'s
types: a ``float`` operand is ``np.float32`` and float32 arithmetic stays float32 (x86-64 SSE,
FLT_EVAL_METHOD 0), a ``double`` is a Python float. Run-time kernels are vectorised over
int64 numpy arrays with C's truncating division and shifts.
"""

from __future__ import annotations

import math

import numpy as np

F32 = np.float32
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


# ------------------------------------------------------------------ internal/quantization_util.cc
def quantize_multiplier(d: float) -> tuple[int, int]:
    """``QuantizeMultiplier``: frexp, ``TfLiteRound(q * 2^31)`` (half away from zero), a q of
    2^31 halved, a shift below −31 flushed to (0, 0)."""
    if d == 0.0:
        return 0, 0
    q, shift = math.frexp(d)
    q_fixed = int(math.copysign(math.floor(abs(q) * 2.0**31 + 0.5), q))
    assert q_fixed <= 2**31
    if q_fixed == 2**31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def down_scale_int32_to_int16_multiplier(m: int) -> int:
    """``DownScaleInt32ToInt16Multiplier``."""
    if m >= INT32_MAX - (1 << 15):
        return 2**15 - 1
    return (m + (1 << 15)) >> 16


# ------------------------------------------------------------------ internal/common.h
def _trunc_div(v: np.ndarray, d: int) -> np.ndarray:
    return np.where(v >= 0, v // d, -((-v) // d))


def srdhm(a: np.ndarray, b: int) -> np.ndarray:
    """``SaturatingRoundingDoublingHighMul`` (gemmlowp) on int32 values held in int64."""
    ab = a * np.int64(b)
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    out = _trunc_div(ab + nudge, 1 << 31)
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, out)


def rdbpot(x: np.ndarray, exponent: int) -> np.ndarray:
    """``RoundingDivideByPOT``: half away from zero."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def wrap32(x: np.ndarray) -> np.ndarray:
    return ((np.asarray(x, np.int64) + 2**31) % 2**32) - 2**31


def mbqm(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """``MultiplyByQuantizedMultiplier`` (double rounding, TFLITE_SINGLE_ROUNDING 0)."""
    left, right = max(shift, 0), max(-shift, 0)
    return rdbpot(srdhm(wrap32(np.asarray(x, np.int64) * (1 << left)), multiplier), right)


def round_half_away(x: np.ndarray) -> np.ndarray:
    """``TfLiteRound`` (std::round / roundf) of values exact in double."""
    x = np.asarray(x, np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def cast_int32(x: np.ndarray) -> np.ndarray:
    """``static_cast<int32_t>`` of a float on x86-64 (cvttss2si): truncation; NaN, inf and
    out-of-range values give 0x80000000."""
    out = []
    for v in np.asarray(x, np.float64).ravel():
        t = math.trunc(v) if math.isfinite(v) else None
        out.append(t if t is not None and INT32_MIN <= t <= INT32_MAX else INT32_MIN)
    return np.array(out, np.int64).reshape(np.shape(x))


# ------------------------------------------------------------------ kernel_util.cc
def conv_per_channel(s_in, s_w, s_out) -> list[tuple[int, int]]:
    """``PopulateConvolutionQuantizationParams`` (CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV,
    per-channel FULLY_CONNECTED): ``double(input_scale) * double(filter_scale) / double(output_scale)``."""
    return [quantize_multiplier(float(F32(s_in)) * float(F32(w)) / float(F32(s_out))) for w in np.atleast_1d(s_w)]


def conv_legacy_per_tensor(s_in, s_w, s_out) -> tuple[int, int]:
    """``GetQuantizedConvolutionMultipler``: ``double(input->params.scale * filter->params.scale)``
    (a float32 product) ``/ double(output->params.scale)`` (uint8 conv, per-tensor FC)."""
    return quantize_multiplier(float(F32(F32(s_in) * F32(s_w))) / float(F32(s_out)))


def batch_matmul_prepare(s_lhs, s_rhs, s_out) -> tuple[int, int]:
    """batch_matmul.cc ``Prepare`` (int8): ``GetQuantizedConvolutionMultipler(lhs, rhs, output)``,
    the float32 product ``s_lhs * s_rhs`` then ``/ double(s_out)``."""
    return conv_legacy_per_tensor(s_lhs, s_rhs, s_out)


def activation_range(act: str, s_out, zp: int, qmin=-128, qmax=127) -> tuple[int, int]:
    """``CalculateActivationRangeQuantized``: ``Quantize(f) = zp + int(TfLiteRound(f / scale))``
    with ``float f`` and ``float scale``."""

    def q(f):
        return zp + int(round_half_away(F32(F32(f) / F32(s_out))))

    lo, hi = {"RELU": (q(0.0), qmax), "RELU6": (q(0.0), q(6.0)), "RELU_N1_TO_1": (q(-1.0), q(1.0))}.get(act, (qmin, qmax))
    return max(qmin, lo), min(qmax, hi)


# ------------------------------------------------------------------ mul.cc, add.cc, sub.cc
def mul_prepare(s1, s2, s_out) -> tuple[int, int]:
    """mul.cc ``Prepare``: ``double real_multiplier = input1->params.scale * input2->params.scale /
    output->params.scale;`` - three ``float`` fields, so float32 product and quotient."""
    return quantize_multiplier(float(F32(F32(F32(s1) * F32(s2)) / F32(s_out))))


def mul_elementwise(a, b, zp1, zp2, zp_out, m, s) -> np.ndarray:
    """``reference_integer_ops::MulElementwise`` (int8, no fused activation)."""
    prod = (np.asarray(a, np.int64) - zp1) * (np.asarray(b, np.int64) - zp2)
    return np.clip(mbqm(prod, m, s) + zp_out, -128, 127)


def add_prepare(s1, s2, s_out, left_shift: int = 20) -> tuple[int, ...] | None:
    """add.cc ``Prepare`` (8-bit, general scales): ``twice_max_input_scale = 2 * std::max(float,
    float)`` (a float32 product, widened), ``real_input_multiplier = float / double``,
    ``real_output = double / ((1 << left_shift) * float)`` (a float32 product). Every real
    through ``QuantizeMultiplierSmallerThanOneExp``; None where it fails its (0, 1) check."""
    twice_max = float(F32(2) * F32(max(F32(s1), F32(s2))))
    reals = (float(F32(s1)) / twice_max, float(F32(s2)) / twice_max,
             twice_max / float(F32(F32(1 << left_shift) * F32(s_out))))  # fmt: skip
    if not all(0.0 < r < 1.0 for r in reals):
        return None
    return (left_shift, *quantize_multiplier(reals[0]), *quantize_multiplier(reals[1]), *quantize_multiplier(reals[2]))


def add_func(a, b, zp1, zp2, zp_out, p) -> np.ndarray:
    """``reference_integer_ops::AddFunc`` (int8, no fused activation); SUB is the same with
    input 2's multiplier negated (sub.cc ``PrepareGeneralSubOp``)."""
    left_shift, m1, s1, m2, s2, mo, so = p
    x1 = mbqm((np.asarray(a, np.int64) - zp1) * (1 << left_shift), m1, s1)
    x2 = mbqm((np.asarray(b, np.int64) - zp2) * (1 << left_shift), m2, s2)
    return np.clip(mbqm(wrap32(x1 + x2), mo, so) + zp_out, -128, 127)


# ------------------------------------------------------------------ squared_difference.cc (int8)
def squared_difference_prepare(s1, s2, s_out) -> tuple[int, ...] | None:
    """``Prepare``'s int8 branch: ``left_shift = 7``, ``twice_max_input_scale = 2 * std::max(float,
    float)`` (a float32 product, widened), ``real_input_multiplier = float / double``,
    ``real_output = (twice_max * twice_max) / ((1 << 14) * float)`` (a double square over a
    float32 product). All three through ``QuantizeMultiplierSmallerThanOneExp`` (the output's
    too, unlike ADD's); None where one fails its (0, 1) check."""
    twice_max = float(F32(2) * F32(max(F32(s1), F32(s2))))
    reals = (float(F32(s1)) / twice_max, float(F32(s2)) / twice_max,
             (twice_max * twice_max) / float(F32(F32(1 << 14) * F32(s_out))))  # fmt: skip
    if not all(0.0 < r < 1.0 for r in reals):
        return None
    return (7, *quantize_multiplier(reals[0]), *quantize_multiplier(reals[1]), *quantize_multiplier(reals[2]))


def squared_difference_func(a, b, zp1, zp2, zp_out, p) -> np.ndarray:
    """``SquaredDifference(int8_t, int8_t, params)``: each input shifted by 2^left_shift and
    rescaled (MultiplyByQuantizedMultiplierSmallerThanOneExp), subtracted, the unrounded
    difference squared in int32, rescaled, plus zp_out, clamped to int8."""
    left_shift, m1, s1, m2, s2, mo, so = p
    x1 = mbqm((np.asarray(a, np.int64) - zp1) * (1 << left_shift), m1, s1)
    x2 = mbqm((np.asarray(b, np.int64) - zp2) * (1 << left_shift), m2, s2)
    diff = x1 - x2
    return np.clip(mbqm(wrap32(diff * diff), mo, so) + zp_out, -128, 127)


# ------------------------------------------------------------------ reduce.cc, internal/reference/reduce.h
def mean_prepare(s_in, s_out, n: int) -> tuple[int, int]:
    """``PrepareMeanOrSum`` (double quotient of the float fields), then the 1/n folded in by
    ``reference_ops::QuantizedMeanOrSum`` (integer only)."""
    m, shift = quantize_multiplier(float(F32(s_in)) / float(F32(s_out)))
    k = min(int(n).bit_length() - 1, 32, 31 + shift)  # 63 - CountLeadingZeros(uint64_t(n))
    return (m << k) // n, shift - k


# ------------------------------------------------------------------ activations.cc (softmax)
def softmax_prepare(s_in, beta) -> tuple[int, int, int]:
    """``SoftmaxPrepare<kReference>`` → ``PreprocessSoftmaxScaling(double(beta), double(scale), 5)``
    and ``-1.0 * CalculateInputRadius(5, left_shift)`` (total_signed_bits 31)."""
    real = min(float(F32(beta)) * float(F32(s_in)) * (1 << (31 - 5)), (1 << 31) - 1.0)
    assert real > 1.0  # QuantizeMultiplierGreaterThanOne
    m, left_shift = quantize_multiplier(real)
    radius = math.floor(1.0 * ((1 << 5) - 1) * (1 << (31 - 5)) / (1 << left_shift))
    return m, left_shift, -radius


# ------------------------------------------------------------------ internal/common.h (LUTs)
def lut_populate_int8(fn, s_in, zp_in, s_out, zp_out) -> np.ndarray:
    """``LUTPopulateInt8``: float32 ``inverse_scale = 1 / output_scale``, ``dequantized =
    input_scale * (val - zp)``, ``rescaled = TfLiteRound(transformed * inverse_scale)``,
    ``static_cast<int32_t>(rescaled + output_zero_point)`` (a float32 sum), clamped. Indexed v + 128."""
    vals = np.arange(-128, 128)
    inverse_scale = F32(1) / F32(s_out)
    dequantized = F32(s_in) * (vals - zp_in).astype(F32)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        transformed = fn(dequantized).astype(F32)
        rescaled = round_half_away((transformed * inverse_scale).astype(F32)).astype(F32)
        summed = (rescaled + F32(zp_out)).astype(F32)
    return np.clip(cast_int32(summed), -128, 127)


def relu_prepare(s_in, s_out) -> tuple[int, int]:
    """``ReluPrepare``: ``double real_multiplier = input->params.scale / output->params.scale`` (float32)."""
    return quantize_multiplier(float(F32(F32(s_in) / F32(s_out))))


def leaky_relu_prepare(s_in, alpha, s_out) -> tuple[tuple[int, int], tuple[int, int]]:
    """``LeakyReluPrepare``: (alpha, identity) multipliers of the float32 ``s_in * alpha / s_out``
    and ``s_in / s_out``."""
    return (quantize_multiplier(float(F32(F32(F32(s_in) * F32(alpha)) / F32(s_out)))),
            quantize_multiplier(float(F32(F32(s_in) / F32(s_out)))))  # fmt: skip


def hard_swish_prepare(s_in, s_out) -> tuple[int, int, int, int]:
    """``HardSwishPrepare``, all float32: ``hires_input_scale = (1.0f / 128.0f) * input_scale``,
    ``reluish_scale = 3.0f / 32768.0f``; each multiplier QuantizeMultiplier'd then down-scaled to int16."""
    hires = F32(F32(1.0) / F32(128.0)) * F32(s_in)
    out_m, out_e = quantize_multiplier(float(F32(hires / F32(s_out))))
    relu_m, relu_e = quantize_multiplier(float(F32(hires / F32(F32(3.0) / F32(32768.0)))))
    return (down_scale_int32_to_int16_multiplier(out_m), out_e,
            down_scale_int32_to_int16_multiplier(relu_m), relu_e)  # fmt: skip


def abs_table(s_in, zp_in, s_out, zp_out) -> np.ndarray:
    """elementwise.cc ``AbsEvalQuantized``: no rescale when the float scales are equal, else MBQM
    with ``SetAbsOutputMultiplier``'s float32 ``input_scale / output_scale``."""
    value = np.abs(np.arange(-128, 128) - zp_in)
    if F32(s_in) == F32(s_out):
        return np.clip(value + zp_out, -128, 127)
    m, s = quantize_multiplier(float(F32(F32(s_in) / F32(s_out))))
    return np.clip(mbqm(value, m, s) + zp_out, -128, 127)


def requantize_table(s_in, zp_in, s_out, zp_out) -> np.ndarray:
    """quantize.cc int8 → int8: ``static_cast<double>(input scale) / static_cast<double>(output
    scale)``, ``reference_ops::Requantize`` (MBQM + zp_out, clamped)."""
    m, s = quantize_multiplier(float(F32(s_in)) / float(F32(s_out)))
    return np.clip(mbqm(np.arange(-128, 128) - zp_in, m, s) + zp_out, -128, 127)


def float_kernel_table(fn, s_in, zp_in, s_out, zp_out) -> np.ndarray:
    """An op the converter keeps in float: ``reference_ops::Dequantize`` (``static_cast<float>(double
    scale * (val - zero_point))``), the float kernel, ``reference_ops::AffineQuantize``
    (``static_cast<int32_t>(TfLiteRound(val / static_cast<float>(scale))) + zero_point``, an int32 add)."""
    x = (float(F32(s_in)) * (np.arange(-128, 128) - zp_in)).astype(F32)
    with np.errstate(over="ignore", invalid="ignore"):
        q = round_half_away((fn(x).astype(F32) / F32(s_out)).astype(F32))
    return np.clip(wrap32(cast_int32(q) + zp_out), -128, 127)


# ------------------------------------------------------------------ kernels/elementwise.cc (RSQRT)
def _sat_mul_pot(x: int, exponent: int) -> int:
    """gemmlowp ``SaturatingRoundingMultiplyByPOT`` of one int32 (exponent > 0: a saturating
    left shift; < 0: RoundingDivideByPOT)."""
    if exponent < 0:
        return int(rdbpot(np.int64(x), -exponent))
    limit = (1 << (31 - exponent)) - 1
    return INT32_MAX if x > limit else INT32_MIN if x < -limit else x << exponent


def get_inv_sqrt_quantized_multiplier_exp(value: int) -> tuple[int, int]:
    """internal/common.h ``GetInvSqrtQuantizedMultiplierExp(input, kReverseShift)``."""
    if value <= 1:
        return INT32_MAX, 0
    shift = 11
    while value >= (1 << 29):
        value = value // 4
        shift += 1
    clz = 32 - int(value).bit_length()
    left_shift_bit_pairs = (clz - 1) // 2 - 1
    shift -= left_shift_bit_pairs
    value <<= 2 * left_shift_bit_pairs
    mul = lambda a, b: int(srdhm(np.int64(a), b))  # FixedPoint operator*: SRDHM of the raws
    fixedpoint_input = value >> 1  # F3
    fixedpoint_half_input = _sat_mul_pot(fixedpoint_input, -1)
    fixedpoint_half_three = (1 << 28) + (1 << 27)
    x = 1 << 28  # F3::One()
    for _ in range(5):
        x3 = _sat_mul_pot(mul(mul(x, x), x), 6)  # Rescale<3>(F9)
        x = _sat_mul_pot(int(wrap32(mul(fixedpoint_half_three, x) - mul(fixedpoint_half_input, x3))), 3)
    x = mul(x, 1518500250)
    if shift < 0:
        x = int(wrap32(x << -shift))
        shift = 0
    return x, -shift


def rsqrt_table(s_in, zp_in, s_out, zp_out) -> np.ndarray:
    """``SetRsqrtOutputMultiplier`` (sqrt and product in float32, the reciprocal in double) and
    ``RsqrtEvalQuantized`` for every int8 input. LiteRT gives 127 at zp_in and refuses an input
    below it ("Rsqrt is only defined for positive values"): 127 there too, compared by no test."""
    multiplier, shift = quantize_multiplier(1.0 / float(F32(np.sqrt(F32(s_in)) * F32(s_out))))
    out = []
    for i in range(-128, 128):
        value = i - zp_in
        if value <= 0:
            out.append(127)
            continue
        m, s = get_inv_sqrt_quantized_multiplier_exp(value)
        data = int(mbqm(np.int64(1), m, s + 20))
        out.append(min(max(int(mbqm(np.int64(data), multiplier, shift - 20)) + zp_out, -128), 127))
    return np.asarray(out, np.int64)
