"""Integer numerics of the NPU, bit-exact with TFLite's reference kernels (LiteRT BUILTIN_REF).

This module is the executable statement of docs/numerics.md, per operation (§3–8); the
fixed-point primitives they are built from (§2: ``quantize_multiplier``, SRDHM, RDBPOT,
``multiply_by_quantized_multiplier``) are in npu_byoc.arch.fixed_point. It has two halves:

1. **Compile-time parameter derivation** (``conv_requant_params``,
   ``fc_requant_params``, ``add_params``, ``mean_params``, ``activation_range``,
   ``sigmoid_lut``, ``tanh_lut``, ``pool_padding``). These run on the host when a model is
   lowered. They may use float/double, exactly as TFLite's ``Prepare`` functions do, and
   turn real-valued scales into integers (multiplier, shift, lookup tables, clamp bounds).
2. **Run-time integer kernels** (everything else). Integer-only: int8/int32 values, int64
   numpy intermediates, no float anywhere. This is what the C functional model and the RTL
   must reproduce bit for bit.

Conventions
-----------
* ``shift`` follows TFLite's sign convention: **positive shift = left shift**, negative =
  right shift. ``real ≈ multiplier · 2^(shift − 31)``.
* int32 arithmetic that can overflow in TFLite's C++ (``acc + bias``, ``x · 2^left_shift``)
  wraps modulo 2^32 here, i.e. what the compiled C++ does on every target TFLite runs on.
  In the NPU's operating range it never overflows.
* Rounding: TFLite rounds *half away from zero* (``RoundingDivideByPOT``, ``std::round``,
  the average-pool division), never half to even; the one exception is
  ``SaturatingRoundingDoublingHighMul``, whose ties go toward +infinity.
* TFLite's default build uses the *double-rounding* ``MultiplyByQuantizedMultiplier``
  (``TFLITE_SINGLE_ROUNDING`` is 0 unless a build sets it); that is the one implemented here.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .fixed_point import (
    INT8_MAX, INT8_MIN, INT32_MIN, _int32_range, _int64, _round_half_away, _wrap_i32,
    multiply_by_quantized_multiplier, quantize_multiplier, quantize_multiplier_array,
)  # fmt: skip

# Re-exported: callers in npu_byoc/ops/ (requant, lut, softmax; being split into per-op
# modules meanwhile) reach the fixed-point primitives as ``numerics.<name>``; their home is
# npu_byoc.arch.fixed_point.
from .fixed_point import rounding_divide_by_pot, saturating_rounding_doubling_high_mul  # noqa: F401

__all__ = [
    # compile time
    "conv_requant_params",
    "fc_requant_params",
    "fc_scale_params",
    "pack_fc_scale",
    "activation_range",
    "AddParams",
    "add_params",
    "mul_scale",
    "mul_params",
    "mean_params",
    "fold_mean_count",
    "c_float_to_int32",
    "sigmoid_lut",
    "tanh_lut",
    "pool_padding",
    # run time
    "requantize",
    "fc_scale",
    "fc_requantize",
    "lut_lookup",
    "avg_pool2d",
    "max_pool2d",
    "mean",
    "add",
    "mul",
    # re-exported from npu_byoc.arch.fixed_point (see the import above)
    "quantize_multiplier",
    "quantize_multiplier_array",
    "saturating_rounding_doubling_high_mul",
    "rounding_divide_by_pot",
    "multiply_by_quantized_multiplier",
]


# ======================================================================================
# Compile time: float/double allowed here and only here.
# ======================================================================================


def conv_requant_params(input_scale, weight_scales, output_scale) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel multiplier/shift of CONV_2D, DEPTHWISE_CONV_2D and per-channel FULLY_CONNECTED.

    TFLite (``PopulateConvolutionQuantizationParams``) computes, per output channel c, in
    double from the float32 scales::

        effective[c] = (double(s_in) · double(s_w[c])) / double(s_out)
        multiplier[c], shift[c] = quantize_multiplier(effective[c])

    A single weight scale is broadcast (per-tensor conv goes through the same code).
    """
    s_in = float(np.float32(input_scale))
    s_out = float(np.float32(output_scale))
    s_w = np.asarray(weight_scales, dtype=np.float32).reshape(-1).astype(np.float64)
    return quantize_multiplier_array(np.array([(s_in * w) / s_out for w in s_w]))


def fc_requant_params(input_scale, weight_scales, output_scale) -> tuple[np.ndarray, np.ndarray]:
    """Multiplier/shift of FULLY_CONNECTED, per-channel or per-tensor.

    Per-channel weights: as ``conv_requant_params``. Per-tensor weights (one scale): TFLite's
    ``GetQuantizedConvolutionMultipler`` forms the product **in float32** first::

        effective = double(float32(s_in · s_w)) / double(s_out)

    which can differ from the double product in the last bit of the multiplier. Returns
    arrays of length 1 in that case.
    """
    s_w = np.asarray(weight_scales, dtype=np.float32).reshape(-1)
    if s_w.size > 1:
        return conv_requant_params(input_scale, s_w, output_scale)
    prod = np.float32(np.float32(input_scale) * s_w[0])  # float32 multiply, as in C++
    effective = float(prod) / float(np.float32(output_scale))
    return quantize_multiplier_array(np.array([effective]))


FC_MANTISSA_BITS = 53  # an IEEE double's significand
FC_EXPONENT_MIN, FC_EXPONENT_MAX = -128, -FC_MANTISSA_BITS  # int8 field; scale < 1


def fc_scale_params(input_scale, weight_scales, output_scale) -> tuple[np.ndarray, np.ndarray]:
    """The FULLY_CONNECTED output scale of LiteRT's reference kernel as exact (mantissa, exponent).

    ``reference_integer_ops::FullyConnected`` / ``FullyConnectedPerChannel`` (the overloads
    the BUILTIN_REF resolver calls, per-tensor and per-channel alike) requantize **in double**,
    not through ``MultiplyByQuantizedMultiplier``::

        effective[c] = (double(s_in) · double(s_w[c])) / double(s_out)
        out = int32(round(double(acc) · effective[c]))          # round: half away from zero

    The double ``effective[c]`` is held exactly as ``mantissa[c] · 2^exponent[c]`` with
    ``2^52 ≤ mantissa < 2^53`` (int64) and ``exponent ∈ [-128, -53]`` (the scale is below 1:
    ``exponent > -53`` raises ValueError). A scale below 2^-75 gives mantissa 0 (its products
    round to 0 for every int32 accumulator). A single weight scale gives arrays of length 1.
    """
    s_in = float(np.float32(input_scale))
    s_out = float(np.float32(output_scale))
    s_w = np.asarray(weight_scales, dtype=np.float32).reshape(-1).astype(np.float64)
    mant, expo = [], []
    for w in s_w:
        eff = (s_in * float(w)) / s_out
        if not (math.isfinite(eff) and eff >= 0):
            raise ValueError(f"fc_scale_params: scale {eff} is not finite and >= 0")
        q, e = math.frexp(eff)  # eff = q · 2^e, 0.5 <= q < 1: q · 2^53 is an exact integer
        m, x = int(q * 2.0**FC_MANTISSA_BITS), e - FC_MANTISSA_BITS
        if m == 0 or x < FC_EXPONENT_MIN:
            m, x = 0, FC_EXPONENT_MAX
        if x > FC_EXPONENT_MAX:
            raise ValueError(f"fc_scale_params: scale {eff:.6g} is not below 1")
        mant.append(m)
        expo.append(x)
    return np.array(mant, dtype=np.int64), np.array(expo, dtype=np.int32)


def pack_fc_scale(mantissa, exponent) -> tuple[np.ndarray, np.ndarray]:
    """The two int32 words an FC requantize record holds for (mantissa, exponent)::

        word1 = mantissa[31:0]
        word2 = mantissa[52:32] | (exponent & 0xFF) << 24      # bits 23..21 zero
    """
    m = np.asarray(mantissa, dtype=np.int64)
    e = np.asarray(exponent, dtype=np.int64)
    lo = (m & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    hi = ((m >> 32) | ((e & 0xFF) << 24)).astype(np.uint32).view(np.int32)
    return lo, hi


def activation_range(activation: str, output_scale, output_zero_point, qmin=INT8_MIN, qmax=INT8_MAX):
    """TFLite ``CalculateActivationRangeQuantized``: the int clamp bounds of a fused activation.

    ``quantize(f) = zp + round_half_away(float32(f) / float32(scale))`` (float32 division)::

        NONE          -> [qmin, qmax]
        RELU          -> [max(qmin, quantize(0)), qmax]
        RELU6         -> [max(qmin, quantize(0)), min(qmax, quantize(6))]
        RELU_N1_TO_1  -> [max(qmin, quantize(-1)), min(qmax, quantize(1))]
    """
    scale = np.float32(output_scale)
    zp = int(output_zero_point)

    def quantize(f):
        return zp + _round_half_away(float(np.float32(f) / scale))

    act = activation.upper()
    if act == "NONE":
        return int(qmin), int(qmax)
    if act == "RELU":
        return max(qmin, quantize(0.0)), int(qmax)
    if act == "RELU6":
        return max(qmin, quantize(0.0)), min(qmax, quantize(6.0))
    if act == "RELU_N1_TO_1":
        return max(qmin, quantize(-1.0)), min(qmax, quantize(1.0))
    raise ValueError(f"activation_range: unknown fused activation {activation!r}")


class AddParams(NamedTuple):
    """Integer parameters of int8 ADD (TFLite ``add.cc`` Prepare, 8-bit case)."""

    left_shift: int
    input1_multiplier: int
    input1_shift: int
    input2_multiplier: int
    input2_shift: int
    output_multiplier: int
    output_shift: int


def add_params(input1_scale, input2_scale, output_scale, left_shift: int = 20) -> AddParams:
    """TFLite int8 ADD parameters (computed in double from float32 scales)::

        twice_max = 2 · max(s1, s2)
        input1_multiplier, input1_shift = quantize_multiplier(s1 / twice_max)        # ≤ 0.5
        input2_multiplier, input2_shift = quantize_multiplier(s2 / twice_max)
        output_multiplier, output_shift = quantize_multiplier(twice_max / (2^20 · s_out))

    ``left_shift`` is 20 for int8. TFLite requires every real multiplier to be in (0, 1)
    (``QuantizeMultiplierSmallerThanOneExp``); so does this function.
    """
    s1 = float(np.float32(input1_scale))
    s2 = float(np.float32(input2_scale))
    so = float(np.float32(output_scale))
    twice_max = 2.0 * max(s1, s2)
    reals = (s1 / twice_max, s2 / twice_max, twice_max / ((1 << left_shift) * so))
    out = []
    for r in reals:
        if not 0.0 < r < 1.0:
            raise ValueError(f"add_params: real multiplier {r} outside (0, 1); TFLite rejects it too")
        out.extend(quantize_multiplier(r))
    return AddParams(left_shift, *out)


# MUL's product (x − zp1)(y − zp2) is at most 255² < 2^16 in magnitude: a left shift up to 15
# keeps MultiplyByQuantizedMultiplier's x · 2^shift inside int32 (TFLite's own kernel would
# overflow beyond it; such a scale, s1·s2/s_out ≥ 2^15, never comes out of a real model).
MUL_MAX_SHIFT = 15


def mul_scale(input1_scale, input2_scale, output_scale) -> float:
    """MUL's real output multiplier as LiteRT's ``mul.cc`` Prepare forms it: the ``float``
    scale fields multiplied and divided **in float32**, and only the quotient widened to
    double (``double real = s1 * s2 / s_out;`` with three ``float`` operands)::

        real = double(float32(float32(s1 · s2) / s_out))

    The double product can differ in the multiplier's last bits, and an int8 product on a
    rounding tie then flips by 1 LSB (docs/numerics.md §8b).
    """
    f32 = np.float32
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # inf / NaN: quantize_multiplier refuses
        return float(f32(f32(input1_scale) * f32(input2_scale)) / f32(output_scale))


def mul_params(input1_scale, input2_scale, output_scale) -> tuple[int, int]:
    """(output_multiplier, output_shift) of int8 MUL (TFLite ``mul.cc`` Prepare)::

        output_multiplier, output_shift = quantize_multiplier(mul_scale(s1, s2, s_out))

    Raises ValueError when the shift is outside [−31, MUL_MAX_SHIFT].
    """
    real = mul_scale(input1_scale, input2_scale, output_scale)
    m, s = quantize_multiplier(real)
    if not -31 <= s <= MUL_MAX_SHIFT:
        raise ValueError(f"mul_params: s1·s2/s_out = {real:.6g} gives shift {s}, outside [-31, {MUL_MAX_SHIFT}]")
    return m, s


def fold_mean_count(multiplier: int, shift: int, num_elements: int) -> tuple[int, int]:
    """Fold the 1/n of a mean into (multiplier, shift), integer-only, as TFLite does.

    From ``reference_ops::QuantizedMeanOrSum`` (the division of the sum by n)::

        s = floor(log2(n))                     # 63 - clz64(n)
        s = min(s, 32, 31 + shift)             # keep shift - s >= -31
        multiplier = (multiplier << s) // n    # int64, truncating (all positive)
        shift      = shift - s
    """
    if num_elements <= 0:
        raise ValueError("fold_mean_count: the mean reduces no element")
    s = int(num_elements).bit_length() - 1
    s = min(s, 32, 31 + int(shift))
    m = (int(multiplier) << s) // int(num_elements)
    return int(m), int(shift) - s


def mean_params(input_scale, output_scale, num_elements: int) -> tuple[int, int]:
    """(multiplier, shift) of int8 MEAN over ``num_elements`` reduced elements.

    TFLite (``reduce.cc`` PrepareMeanOrSum, in double)::

        multiplier, shift = quantize_multiplier(double(s_in) / double(s_out))

    then ``fold_mean_count(multiplier, shift, n)`` (integer-only, at TFLite's Eval).
    """
    real = float(np.float32(input_scale)) / float(np.float32(output_scale))
    m, s = quantize_multiplier(real)
    return fold_mean_count(m, s, num_elements)


def c_float_to_int32(x) -> np.ndarray:
    """C's ``static_cast<int32_t>`` of a float or double as x86-64 compiles it (``cvttss2si``):
    truncation toward zero, and INT32_MIN for NaN, ±inf and anything outside int32 (the
    "integer indefinite" value). Returns int64."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(x) & (x > -(2.0**31) - 1) & (x < 2.0**31)
        return np.where(ok, np.trunc(np.where(ok, x, 0.0)), INT32_MIN).astype(np.int64)


def _lut_int8(fn, input_scale, input_zero_point, output_scale, output_zero_point) -> np.ndarray:
    """TFLite ``LUTPopulateInt8``, in float32 arithmetic like the C++ (see sigmoid_lut).

    The zero point is added to the rounded float **in float32** before the int conversion
    (``static_cast<int32_t>(rescaled + output_zero_point)``): above 2^24 the sum rounds, and
    a sum reaching 2^31 converts to INT32_MIN (an entry of −128, not 127).
    """
    vals = np.arange(INT8_MIN, INT8_MAX + 1, dtype=np.int64)
    s_in = np.float32(input_scale)
    inv_out = np.float32(1.0) / np.float32(output_scale)
    dequant = s_in * (vals - int(input_zero_point)).astype(np.float32)  # float32 product
    transformed = fn(dequant).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = (transformed * inv_out).astype(np.float64)  # float32 product, exact in double
        rounded = np.where(scaled >= 0, np.floor(scaled + 0.5), -np.floor(-scaled + 0.5))  # roundf
        summed = rounded.astype(np.float32) + np.float32(output_zero_point)  # float32 add
    return np.clip(c_float_to_int32(summed), INT8_MIN, INT8_MAX).astype(np.int8)


def _sigmoid_f32(x: np.ndarray) -> np.ndarray:
    # 1.0f / (1.0f + std::exp(-x)): expf taken as the correctly rounded float32 of exp
    # (glibc's expf is correctly rounded), then float32 add and divide.
    with np.errstate(over="ignore"):  # exp overflows to inf for large -x: sigmoid -> 0, as in C
        e = np.exp(-x.astype(np.float64)).astype(np.float32)
    return (np.float32(1.0) / (np.float32(1.0) + e)).astype(np.float32)


def _tanh_f32(x: np.ndarray) -> np.ndarray:
    return np.tanh(x.astype(np.float64)).astype(np.float32)


def sigmoid_lut(input_scale, input_zero_point, output_scale=1.0 / 256, output_zero_point=-128) -> np.ndarray:
    """The 256-entry int8 LOGISTIC table of TFLite's reference kernel (BUILTIN_REF).

    LiteRT ``activations.cc``: for int8 input, ``SigmoidPrepare<kReference>`` calls
    ``LUTPopulate<int8_t>`` and ``SigmoidEval<kReference>`` does a table lookup (the
    fixed-point ``Logistic16bitPrecision`` runs only for ``kFixedPointOptimized``). Per entry
    v in -128..127, all in float32::

        x     = float32(s_in) · float32(v − zp_in)
        y     = 1.0f / (1.0f + expf(−x))
        q     = int(round_half_away(y · (1.0f / float32(s_out)))) + zp_out
        lut[v + 128] = clamp(q, −128, 127)

    TFLite's converter always gives int8 LOGISTIC ``s_out == 1/256, zp_out == -128``; other
    quantizers (onnxruntime's QDQ) choose their own output scale, and the same formula
    builds their table. The table here is indexed by
    ``v + 128`` (TFLite stores it by ``uint8(v)``, i.e. 0..127 then −128..−1; the hardware
    index ``v + 128`` is ``v`` with its sign bit flipped). TFLite-Micro instead runs
    ``reference_integer_ops::Logistic`` (a gemmlowp fixed-point sigmoid on a rescaled
    input), which can differ by 1 LSB; this module follows LiteRT.
    """
    return _lut_int8(_sigmoid_f32, input_scale, input_zero_point, output_scale, output_zero_point)


def tanh_lut(input_scale, input_zero_point, output_scale=1.0 / 128, output_zero_point=0) -> np.ndarray:
    """The 256-entry int8 TANH table of TFLite's reference kernel (``TanhPrepare<kReference>``).

    As ``sigmoid_lut`` with ``y = tanhf(x)``; indexed by ``v + 128``.
    """
    return _lut_int8(_tanh_f32, input_scale, input_zero_point, output_scale, output_zero_point)


def pool_padding(in_size: int, filter_size: int, stride: int, padding: str) -> tuple[int, int, int]:
    """TFLite output size and padding of one spatial dim: (out_size, pad_before, pad_after).

    SAME: ``out = ceil(in / stride)``, VALID: ``out = (in − filter) // stride + 1``;
    ``total = max((out − 1) · stride + filter − in, 0)``, ``pad_before = total // 2`` (the
    extra odd pixel goes after).
    """
    padding = padding.upper()
    if padding == "SAME":
        out = (in_size + stride - 1) // stride
    elif padding == "VALID":
        out = (in_size + stride - filter_size) // stride
    else:
        raise ValueError(f"pool_padding: padding {padding!r} is not SAME or VALID")
    total = max((out - 1) * stride + filter_size - in_size, 0)
    return out, total // 2, total - total // 2


# ======================================================================================
# Run time: integer only.
# ======================================================================================


def _channel_vector(v, ndim: int, axis: int) -> np.ndarray:
    """Reshape a per-channel vector (or scalar) to broadcast along ``axis`` of an ndim array."""
    v = np.asarray(v)
    if v.ndim == 0 or v.size == 1:
        return v.reshape(())
    shape = [1] * ndim
    shape[axis] = v.size
    return v.reshape(shape)


def requantize(acc_i32, bias_i32, multiplier, shift, output_zero_point, act_min=INT8_MIN,
               act_max=INT8_MAX, channel_axis: int = -1) -> np.ndarray:
    """Output stage of CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED (int32 accumulator → int8).

    Per output channel c (the ``channel_axis`` of ``acc_i32``)::

        acc = wrap_int32(acc + bias[c])                       # bias may be None
        out = multiply_by_quantized_multiplier(acc, multiplier[c], shift[c]) + zp_out
        out = clamp(out, act_min, act_max)                    # fused activation + int8 range

    ``multiplier``/``shift``/``bias`` are scalars or 1-D vectors with one entry per channel.
    ``acc_i32`` is ``Σ w · (x − zp_in)`` (weights have zero point 0). Returns int8.
    """
    return _output_stage("requantize", multiply_by_quantized_multiplier, acc_i32, bias_i32, multiplier, shift,
                         output_zero_point, act_min, act_max, channel_axis)


def _output_stage(name, scale_fn, acc_i32, bias_i32, p1, p2, output_zero_point, act_min, act_max,
                  channel_axis) -> np.ndarray:
    """clamp(scale_fn(wrap_int32(acc + bias[c]), p1[c], p2[c]) + zp_out, act_min, act_max)."""
    acc = _int32_range(_int64(acc_i32, f"{name} acc"), f"{name} acc")
    ndim = acc.ndim
    axis = channel_axis % ndim if ndim else 0
    if bias_i32 is not None:
        bias = _int32_range(_int64(bias_i32, f"{name} bias"), f"{name} bias")
        acc = _wrap_i32(acc + _channel_vector(bias, ndim, axis))
    a = _channel_vector(_int64(p1, f"{name} parameters"), ndim, axis)
    b = _channel_vector(_int64(p2, f"{name} parameters"), ndim, axis)
    out = scale_fn(acc, a, b).astype(np.int64) + int(output_zero_point)
    lo, hi = max(int(act_min), INT8_MIN), min(int(act_max), INT8_MAX)
    return np.clip(out, lo, hi).astype(np.int8)


def _fc_scale_one(acc: int, mantissa: int, exponent: int) -> int:
    """round_half_away(fl64(acc · mantissa · 2^exponent)) in integers (see ``fc_scale``)."""
    p = abs(acc) * mantissa  # < 2^84: exact
    if p == 0:
        return 0
    drop = p.bit_length() - FC_MANTISSA_BITS
    if drop > 0:  # the double product: round p to 53 significant bits, ties to even
        q, rem, half = p >> drop, p & ((1 << drop) - 1), 1 << (drop - 1)
        p = q + (rem > half or (rem == half and q & 1))
        exponent += drop
    k = -exponent  # > 0: the scale is below 1, so p · 2^exponent < 2^31 (int32, no overflow)
    r = (p >> k) + ((p >> (k - 1)) & 1)  # round half away from zero
    return -r if acc < 0 else r


def fc_scale(acc, mantissa, exponent) -> np.ndarray:
    """``int32(round(double(acc) · effective))`` of LiteRT's reference FULLY_CONNECTED, integer only.

    ``effective = mantissa · 2^exponent`` (``fc_scale_params``), ``acc`` int32 (broadcasting)::

        p = |acc| · mantissa                                   # exact, < 2^84
        d = bitlength(p) − 53
        if d > 0: p = round_half_even(p / 2^d); exponent += d  # the double product's rounding
        r = round_half_away(p · 2^exponent)                    # C round(); exponent < 0
        return sign(acc) · r

    Returns int32.
    """
    a = _int32_range(_int64(acc, "fc_scale acc"), "fc_scale acc")
    m = _int64(mantissa, "fc_scale mantissa")
    e = _int64(exponent, "fc_scale exponent")
    if e.size and (e.min() < FC_EXPONENT_MIN or e.max() > FC_EXPONENT_MAX):
        raise ValueError(f"fc_scale: exponent must be in [{FC_EXPONENT_MIN}, {FC_EXPONENT_MAX}]")
    if m.size and (m.min() < 0 or m.max() >= 2**FC_MANTISSA_BITS):
        raise ValueError("fc_scale: mantissa must be in [0, 2^53)")
    a, m, e = np.broadcast_arrays(a, m, e)
    out = [_fc_scale_one(int(x), int(y), int(z)) for x, y, z in zip(a.ravel(), m.ravel(), e.ravel())]
    return np.array(out, dtype=np.int64).reshape(a.shape).astype(np.int32)


def fc_requantize(acc_i32, bias_i32, mantissa, exponent, output_zero_point, act_min=INT8_MIN,
                  act_max=INT8_MAX, channel_axis: int = -1) -> np.ndarray:
    """Output stage of FULLY_CONNECTED (int32 accumulator → int8), as LiteRT's reference kernel.

    As ``requantize`` with ``fc_scale(acc, mantissa[c], exponent[c])`` in place of
    ``multiply_by_quantized_multiplier(acc, multiplier[c], shift[c])``::

        acc = wrap_int32(acc + bias[c])
        out = clamp(fc_scale(acc, mantissa[c], exponent[c]) + zp_out, act_min, act_max)
    """
    return _output_stage("fc_requantize", fc_scale, acc_i32, bias_i32, mantissa, exponent, output_zero_point,
                         act_min, act_max, channel_axis)


def lut_lookup(x, lut) -> np.ndarray:
    """Table-driven activation (LOGISTIC, TANH): ``out = lut[x + 128]`` for int8 ``x``."""
    x = _int64(x, "lut_lookup x")
    lut = np.asarray(lut)
    if lut.shape != (256,):
        raise ValueError(f"lut_lookup: table must have 256 entries, got {lut.shape}")
    if x.size and (x.min() < INT8_MIN or x.max() > INT8_MAX):
        raise ValueError("lut_lookup: input outside int8")
    return lut.astype(np.int8)[x + 128]


def _pool_windows(x, filter_hw, stride_hw, padding):
    """Yield (valid mask, window value) slices of an NHWC int8 tensor, one per filter tap.

    padding: "SAME" / "VALID" (TFLite rules) or explicit (top, left, bottom, right).
    Returns (out_h, out_w, iterator of (values int64 [N,OH,OW,C], valid bool [1,OH,OW,1])).
    """
    x = _int64(x, "pool x")
    if x.ndim != 4:
        raise ValueError(f"pool: expected an NHWC tensor, got shape {x.shape}")
    n, h, w, c = x.shape
    fh, fw = (int(v) for v in filter_hw)
    sh, sw = (int(v) for v in stride_hw)
    if isinstance(padding, str):
        oh, top, bottom = pool_padding(h, fh, sh, padding)
        ow, left, right = pool_padding(w, fw, sw, padding)
    else:
        top, left, bottom, right = (int(v) for v in padding)
        oh = (h + top + bottom - fh) // sh + 1
        ow = (w + left + right - fw) // sw + 1
    # Window origin in input coordinates; taps outside the input are excluded (not zeros).
    ys = np.arange(oh) * sh - top
    xs = np.arange(ow) * sw - left

    def taps():
        for dy in range(fh):
            iy = ys + dy
            vy = (iy >= 0) & (iy < h)
            for dx in range(fw):
                ix = xs + dx
                vx = (ix >= 0) & (ix < w)
                valid = vy[:, None] & vx[None, :]
                vals = x[:, np.clip(iy, 0, h - 1)][:, :, np.clip(ix, 0, w - 1)]
                yield vals, valid[None, :, :, None]

    return oh, ow, taps()


def avg_pool2d(x, filter_hw, stride_hw, padding, act_min=INT8_MIN, act_max=INT8_MAX) -> np.ndarray:
    """int8 AVERAGE_POOL_2D as ``reference_integer_ops::AveragePool`` (NHWC).

    Per output pixel and channel, over the window taps that fall **inside** the input
    (padding taps are excluded from both sum and count)::

        acc   = Σ x                     # raw int8 values, zero point NOT subtracted
        n     = number of valid taps
        acc   = (acc + n//2) // n  if acc > 0 else −((−acc + n//2) // n)
                                        # C: (acc ± n/2) / n, i.e. round half away from zero
        out   = clamp(acc, act_min, act_max)

    No rescale: TFLite requires input and output quantization to be equal.
    """
    oh, ow, taps = _pool_windows(x, filter_hw, stride_hw, padding)
    acc = None
    count = None
    for vals, valid in taps:
        term = np.where(valid, vals, 0)
        acc = term if acc is None else acc + term
        count = valid.astype(np.int64) if count is None else count + valid
    if np.any(count == 0):
        raise ValueError("avg_pool2d: a window holds no input element (TFLite fails too)")
    half = count // 2
    pos = (acc + half) // count
    neg = -((-acc + half) // count)
    out = np.where(acc > 0, pos, neg)
    lo, hi = max(int(act_min), INT8_MIN), min(int(act_max), INT8_MAX)
    return np.clip(out, lo, hi).astype(np.int8)


def max_pool2d(x, filter_hw, stride_hw, padding, act_min=INT8_MIN, act_max=INT8_MAX) -> np.ndarray:
    """int8 MAX_POOL_2D as ``reference_integer_ops::MaxPool`` (NHWC).

    ``out = clamp(max over the valid window taps (start −128), act_min, act_max)``.
    """
    _, _, taps = _pool_windows(x, filter_hw, stride_hw, padding)
    out = None
    for vals, valid in taps:
        term = np.where(valid, vals, INT8_MIN)
        out = term if out is None else np.maximum(out, term)
    lo, hi = max(int(act_min), INT8_MIN), min(int(act_max), INT8_MAX)
    return np.clip(out, lo, hi).astype(np.int8)


def mean(x, axes, keep_dims: bool, input_zero_point, output_zero_point, multiplier, shift) -> np.ndarray:
    """int8 MEAN as LiteRT ``reduce.cc`` runs it for BUILTIN_REF (``reference_ops::QuantizedMeanOrSum``).

    ``multiplier``/``shift`` come from ``mean_params`` (the 1/n already folded in)::

        n   = number of reduced elements
        sum = Σ x over axes              # raw int8 in int32
        acc = sum − zp_in · n
        out = clamp(multiply_by_quantized_multiplier(acc, multiplier, shift) + zp_out, −128, 127)
    """
    x = _int64(x, "mean x")
    ax = tuple(sorted({int(a) % x.ndim for a in np.atleast_1d(axes)}))
    n = int(np.prod([x.shape[a] for a in ax])) if ax else 1
    total = x.sum(axis=ax, keepdims=bool(keep_dims))
    acc = _wrap_i32(_wrap_i32(total) - int(input_zero_point) * n)
    out = multiply_by_quantized_multiplier(acc, multiplier, shift).astype(np.int64) + int(output_zero_point)
    return np.clip(out, INT8_MIN, INT8_MAX).astype(np.int8)


def add(a, b, input1_zero_point, input2_zero_point, output_zero_point, params: AddParams,
        act_min=INT8_MIN, act_max=INT8_MAX) -> np.ndarray:
    """int8 ADD as ``reference_integer_ops::AddFunc`` (numpy broadcasting of a and b)::

        a' = (a − zp1) · 2^left_shift;  b' = (b − zp2) · 2^left_shift         # left_shift = 20
        a″ = multiply_by_quantized_multiplier(a', input1_multiplier, input1_shift)
        b″ = multiply_by_quantized_multiplier(b', input2_multiplier, input2_shift)
        out = multiply_by_quantized_multiplier(a″ + b″, output_multiplier, output_shift) + zp_out
        out = clamp(out, act_min, act_max)
    """
    a = _int64(a, "add a")
    b = _int64(b, "add b")
    sa = (a - int(input1_zero_point)) << params.left_shift
    sb = (b - int(input2_zero_point)) << params.left_shift
    ra = multiply_by_quantized_multiplier(_wrap_i32(sa), params.input1_multiplier, params.input1_shift)
    rb = multiply_by_quantized_multiplier(_wrap_i32(sb), params.input2_multiplier, params.input2_shift)
    raw = _wrap_i32(ra.astype(np.int64) + rb.astype(np.int64))
    out = multiply_by_quantized_multiplier(raw, params.output_multiplier, params.output_shift)
    out = out.astype(np.int64) + int(output_zero_point)
    lo, hi = max(int(act_min), INT8_MIN), min(int(act_max), INT8_MAX)
    return np.clip(out, lo, hi).astype(np.int8)


def mul(a, b, input1_zero_point, input2_zero_point, output_zero_point, multiplier, shift,
        act_min=INT8_MIN, act_max=INT8_MAX) -> np.ndarray:
    """int8 MUL as ``reference_integer_ops::MulElementwise`` (numpy broadcasting of a and b)::

        out = multiply_by_quantized_multiplier((a − zp1) · (b − zp2), multiplier, shift) + zp_out
        out = clamp(out, act_min, act_max)
    """
    a = _int64(a, "mul a")
    b = _int64(b, "mul b")
    prod = _wrap_i32((a - int(input1_zero_point)) * (b - int(input2_zero_point)))
    out = multiply_by_quantized_multiplier(prod, multiplier, shift).astype(np.int64) + int(output_zero_point)
    lo, hi = max(int(act_min), INT8_MIN), min(int(act_max), INT8_MAX)
    return np.clip(out, lo, hi).astype(np.int8)
