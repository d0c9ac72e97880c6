"""int8 SOFTMAX as TFLite's reference kernel computes it (``reference_ops::Softmax``, int8 in
and out), split the way the NPU runs it.

TFLite's reference kernel (gemmlowp fixed point, ``kScaledDiffIntegerBits = 5``,
``kAccumulationIntegerBits = 12``), per row of the last axis::

    d       = x − max(row)                                  # int8 difference, −255..0
    e(d)    = exp_on_negative_values(MBQM>1(d, input_beta_multiplier, input_beta_left_shift))
              if d >= diff_min else 0                       # Q0.31
    sum     = Σ rounding_divide_by_pot(e(d), 12)            # Q12.19, int32
    recip, n = GetReciprocal(sum)                           # Q0.31 of 2^n / sum, n = 12 − clz(sum)
    out     = clamp(rounding_divide_by_pot(srdhm(recip, e(d)), n + 23) − 128, −128, 127)

``e`` depends on ``d`` only: 256 values. The compiler evaluates them once (:func:`exp_table`,
compile time, the only place the scale enters) and the NPU holds them as a table of 256 int32
(entry ``k`` is ``e(−k)``; 0 where ``−k < diff_min``: a zero entry adds nothing to the sum and
gives −128, exactly the reference's excluded element). The run-time part (:func:`run`) is
integer only: max, table sum, reciprocal, per-element scale. The output quantization is fixed
by TFLite (scale 1/256, zero point −128).

This module is the spec (golden) for the NPU's SOFTMAX; ``gemmlowp``'s fixed-point primitives
are written out here on int64 numpy arrays holding int32 values. It imports no TVM (the golden
model and the stream machine run it); the SOFTMAX table entry (conventions, extraction,
checks, lowering) is npu_byoc.ops.softmax.
"""

from __future__ import annotations

import math

import numpy as np

from ..arch import numerics as nx
from ..arch.isa import SOFTMAX_MAX_CHANNELS, SOFTMAX_TABLE_BYTES

SCALED_DIFF_INTEGER_BITS = 5
ACCUMULATION_INTEGER_BITS = 12
TABLE_ENTRIES = 256  # entry k: exp of the difference −k
TABLE_BYTES = SOFTMAX_TABLE_BYTES  # int32 little-endian
OUTPUT_SCALE = 1.0 / 256
OUTPUT_ZERO_POINT = -128
MAX_CHANNELS = SOFTMAX_MAX_CHANNELS  # the row sum stays in int32

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


# ---------------------------------------------------------------------------------------------
# gemmlowp fixed point on int64 arrays of int32 values


def _srdhm(a, b) -> np.ndarray:
    return nx.saturating_rounding_doubling_high_mul(a, b).astype(np.int64)


def _rdbp(x, exponent: int) -> np.ndarray:
    return nx.rounding_divide_by_pot(x, exponent).astype(np.int64)


def _sat_left(x: np.ndarray, exponent: int) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT with a positive exponent: x · 2^e, saturated to int32."""
    threshold = (1 << (31 - exponent)) - 1
    return np.where(x > threshold, _I32_MAX, np.where(x < -threshold, _I32_MIN, x << exponent))


def _exp_on_interval(a: np.ndarray) -> np.ndarray:
    """exp(a) for a Q0.31 in [−1/4, 0): Taylor series around −1/8."""
    constant_term = 1895147668  # exp(−1/8) in Q0.31
    one_third = 715827883
    x = a + (1 << 28)  # a + 1/8
    x2 = _srdhm(x, x)
    x3 = _srdhm(x2, x)
    x4 = _srdhm(x2, x2)
    x4_over_4 = _rdbp(x4, 2)
    poly = _rdbp(_srdhm(x4_over_4 + x3, one_third) + x2, 1)
    return constant_term + _srdhm(constant_term, x + poly)


# exp(−2^k) in Q0.31, for the bits k = −2..4 of a Q5.26 magnitude
_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a) -> np.ndarray:
    """gemmlowp ``exp_on_negative_values`` of a Q5.26 value ≤ 0: exp(a) in Q0.31."""
    a = np.asarray(a, dtype=np.int64)
    frac_bits = 31 - SCALED_DIFF_INTEGER_BITS
    quarter = 1 << (frac_bits - 2)
    a_mod_quarter_minus_quarter = (a & (quarter - 1)) - quarter
    result = _exp_on_interval(_sat_left(a_mod_quarter_minus_quarter, SCALED_DIFF_INTEGER_BITS))
    remainder = a_mod_quarter_minus_quarter - a
    for exponent, multiplier in _BARREL:
        bit = (remainder & (1 << (frac_bits + exponent))) != 0
        result = np.where(bit, _srdhm(result, multiplier), result)
    return np.where(a == 0, _I32_MAX, result)


def one_over_one_plus_x(a) -> np.ndarray:
    """gemmlowp ``one_over_one_plus_x_for_x_in_0_1``: 1/(1 + a) for a Q0.31 a in [0, 1), in
    Q0.31 — Newton–Raphson on the half denominator, 3 iterations, in Q2.29."""
    a = np.asarray(a, dtype=np.int64)
    s = a + _I32_MAX  # RoundingHalfSum(a, One): (s ± 1) / 2, truncated
    half_denominator = np.where(s >= 0, (s + 1) // 2, -((-s + 1) // 2))
    x = 1515870810 + _srdhm(half_denominator, -1010580540)  # 48/17 − 32/17 · d, Q2.29
    for _ in range(3):
        one_minus_dx = (1 << 29) - _srdhm(half_denominator, x)
        x = x + _sat_left(_srdhm(x, one_minus_dx), 2)
    return _sat_left(x, 1)


def reciprocal(total) -> tuple[np.ndarray, np.ndarray]:
    """TFLite ``GetReciprocal`` of a Q12.19 sum > 0: (Q0.31 scale, num_bits_over_unit)."""
    total = np.asarray(total, dtype=np.int64)
    clz = 32 - np.vectorize(lambda v: int(v).bit_length(), otypes=[np.int64])(total & 0xFFFFFFFF)
    bits_over_unit = ACCUMULATION_INTEGER_BITS - clz
    shifted_minus_one = nx._wrap_i32(((total << clz) & 0xFFFFFFFF) - (1 << 31))
    return one_over_one_plus_x(shifted_minus_one), bits_over_unit


# ---------------------------------------------------------------------------------------------
# Compile time


def input_beta_params(input_scale: float, beta: float = 1.0) -> tuple[int, int, int]:
    """TFLite's ``PreprocessSoftmaxScaling`` and ``CalculateInputRadius``:
    (input_beta_multiplier, input_beta_left_shift, diff_min). In double from the float32 fields
    (``SoftmaxPrepare`` widens ``params->beta`` and ``input->params.scale`` before multiplying)."""
    beta_scale = float(np.float32(beta)) * float(np.float32(input_scale))
    real = min(beta_scale * (1 << (31 - SCALED_DIFF_INTEGER_BITS)), 2.0**31 - 1.0)
    multiplier, left_shift = nx.quantize_multiplier(real)
    if left_shift < 0:
        raise ValueError(f"input scale × beta = {float(input_scale) * float(beta):g} is below 2^-26: "
                         "the softmax input multiplier would need a right shift")
    radius = math.floor(((1 << SCALED_DIFF_INTEGER_BITS) - 1) * 2.0 ** (31 - SCALED_DIFF_INTEGER_BITS) / 2.0**left_shift)
    return multiplier, left_shift, -radius


def exp_table(input_scale: float, beta: float = 1.0) -> np.ndarray:
    """The 256 int32 entries the NPU reads: entry k = exp of the difference −k (Q0.31), 0 below diff_min."""
    multiplier, left_shift, diff_min = input_beta_params(input_scale, beta)
    d = -np.arange(TABLE_ENTRIES, dtype=np.int64)
    ok = d >= diff_min
    scaled = _srdhm(nx._wrap_i32(np.where(ok, d, 0) << left_shift), multiplier)  # MBQM greater than one
    return np.where(ok, exp_on_negative_values(scaled), 0).astype(np.int32)


# ---------------------------------------------------------------------------------------------
# Run time (integer only): what the NPU computes


def output_divide(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """RoundingDivideByPOT with the exponent n + 23 (23..34): half away from zero, in int64 — gemmlowp
    asserts exponent ≤ 31; the NPU divides exactly above it too (see docs/numerics.md)."""
    mask = (np.int64(1) << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)


def table_as_read(table) -> np.ndarray:
    """The entries as the NPU reads them: entry 0 is exp(0) = 0x7FFFFFFF and bit 31 is ignored,
    so a row's sum is in [2^19, 2^31) and every step stays in gemmlowp's domain whatever the
    table holds (:func:`exp_table` makes exactly such entries)."""
    t = np.asarray(table, dtype=np.int64) & _I32_MAX
    t[0] = _I32_MAX
    return t


def run(x, table) -> np.ndarray:
    """int8 softmax over the last axis of ``x`` with the NPU's table (:func:`exp_table`)."""
    x = np.asarray(x, dtype=np.int64)
    t = table_as_read(table)
    if x.shape[-1] > MAX_CHANNELS:
        raise ValueError(f"softmax over {x.shape[-1]} elements: at most {MAX_CHANNELS}")
    e = t[x.max(axis=-1, keepdims=True) - x]
    total = nx._wrap_i32(_rdbp(e, ACCUMULATION_INTEGER_BITS).sum(axis=-1, keepdims=True))
    scale, bits_over_unit = reciprocal(total)
    y = output_divide(_srdhm(scale, e), bits_over_unit + 31 - 8) + OUTPUT_ZERO_POINT
    return np.clip(y, -128, 127).astype(np.int8)
