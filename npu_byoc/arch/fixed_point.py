"""Fixed-point primitives of the NPU's integer arithmetic, bit-exact with TFLite / gemmlowp.

docs/numerics.md §2 states them: ``QuantizeMultiplier`` (a real scale as an int32 multiplier
and a shift, at compile time), ``SaturatingRoundingDoublingHighMul`` (SRDHM),
``RoundingDivideByPOT`` (RDBPOT) and ``MultiplyByQuantizedMultiplier`` (MBQM) (integer-only, at
run time), with the int32 range checks and wrap they share. The per-op parameters and kernels
built from them are in npu_byoc.arch.numerics.

Conventions (those of npu_byoc.arch.numerics): **positive shift = left shift**,
``real ≈ multiplier · 2^(shift − 31)``; int32 overflow wraps modulo 2^32; RDBPOT rounds half
away from zero, SRDHM's ties go toward +infinity; MBQM is TFLite's default double-rounding build.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

INT8_MIN, INT8_MAX = -128, 127
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

__all__ = [
    # compile time
    "quantize_multiplier",
    "quantize_multiplier_array",
    # run time
    "saturating_rounding_doubling_high_mul",
    "rounding_divide_by_pot",
    "multiply_by_quantized_multiplier",
]


# ======================================================================================
# Compile time: float/double allowed here and only here.
# ======================================================================================


def _round_half_away(x: float) -> int:
    """std::round / TfLiteRound of a double, exactly (ties away from zero)."""
    f = Fraction(x)
    r = math.floor(abs(f) + Fraction(1, 2))
    return r if f >= 0 else -r


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite ``QuantizeMultiplier``: a real scale as an int32 multiplier and a shift.

    ``real ≈ multiplier · 2^(shift − 31)``; **positive shift = left shift** (TFLite's sign
    convention). Formula, with ``q, e = frexp(real)`` (``real = q · 2^e``, ``0.5 ≤ |q| < 1``)::

        m = round_half_away(q · 2^31)            # in [2^30, 2^31]
        if m == 2^31: m = 2^30; e += 1           # mantissa rounded up to the next power of two
        if e < -31:   m = 0;    e = 0            # too small: flush to zero
        return (m, e)

    ``real == 0`` gives ``(0, 0)``. Scales ≥ 2^31 give shifts > 31, which no kernel accepts
    (TFLite's double-rounding build does not clamp; ``multiply_by_quantized_multiplier``
    rejects them).
    """
    real = float(real)
    if not math.isfinite(real):
        raise ValueError(f"quantize_multiplier: scale {real} is not finite")
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = _round_half_away(q * 2.0**31)  # q * 2^31 is exact: a power-of-two scaling
    assert abs(q_fixed) <= 2**31
    if q_fixed == 2**31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        shift = 0
        q_fixed = 0
    return int(q_fixed), int(shift)


def quantize_multiplier_array(reals) -> tuple[np.ndarray, np.ndarray]:
    """``quantize_multiplier`` element-wise (per-channel scales): int32 multipliers, int32 shifts."""
    flat = np.asarray(reals, dtype=np.float64).reshape(-1)
    pairs = [quantize_multiplier(float(r)) for r in flat]
    shape = np.shape(reals)
    mult = np.array([p[0] for p in pairs], dtype=np.int32).reshape(shape)
    shift = np.array([p[1] for p in pairs], dtype=np.int32).reshape(shape)
    return mult, shift


# ======================================================================================
# Run time: integer only.
# ======================================================================================


def _int64(x, name: str) -> np.ndarray:
    a = np.asarray(x)
    if not (np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_):
        raise TypeError(f"{name}: expected integers, got dtype {a.dtype}")
    return a.astype(np.int64)


def _int32_range(a: np.ndarray, name: str) -> np.ndarray:
    if a.size and (a.min() < INT32_MIN or a.max() > INT32_MAX):
        raise ValueError(f"{name}: value outside int32")
    return a


def _wrap_i32(a: np.ndarray) -> np.ndarray:
    """Two's-complement wrap of int64 values to int32 (still held in int64)."""
    return ((a + 2**31) & 0xFFFFFFFF) - 2**31


def _trunc_div_pow2_31(v: np.ndarray) -> np.ndarray:
    """C integer division by 2^31 (truncation toward zero) of int64 values."""
    return np.where(v >= 0, v >> 31, -((-v) >> 31))


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` on int32 values (broadcasting).

    ``round(a · b / 2^31)`` with ties toward +infinity (−0.5 → 0, +0.5 → 1; not away from
    zero), computed as::

        p     = int64(a) · int64(b)
        nudge = 2^30 if p >= 0 else 1 − 2^30
        r     = trunc((p + nudge) / 2^31)          # C division, toward zero; = floor(p/2^31 + 1/2)
        r     = INT32_MAX if a == b == INT32_MIN   # the only overflow: (−2^31)² / 2^31 = 2^31

    Returns int32.
    """
    a = _int32_range(_int64(a, "srdhm"), "srdhm a")
    b = _int32_range(_int64(b, "srdhm"), "srdhm b")
    p = a * b  # |p| <= 2^62: fits int64
    nudge = np.where(p >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    r = _trunc_div_pow2_31(p + nudge)
    r = np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, r)
    return r.astype(np.int32)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT``: ``x / 2^exponent`` rounded half away from zero.

    For int32 ``x`` and ``0 <= exponent <= 31`` (broadcasting)::

        mask      = 2^exponent − 1
        remainder = x & mask
        threshold = (mask >> 1) + (1 if x < 0 else 0)
        r         = (x >> exponent) + (1 if remainder > threshold else 0)   # arithmetic shift

    Exponents outside [0, 31] raise ValueError (gemmlowp asserts). Returns int32.
    """
    x = _int32_range(_int64(x, "rdbpot"), "rdbpot x")
    e = _int64(exponent, "rdbpot exponent")
    if e.size and (e.min() < 0 or e.max() > 31):
        raise ValueError(f"rounding_divide_by_pot: exponent must be in [0, 31], got {e.min()}..{e.max()}")
    mask = (np.int64(1) << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    r = (x >> e) + (remainder > threshold)
    return r.astype(np.int32)


def multiply_by_quantized_multiplier(x, multiplier, shift) -> np.ndarray:
    """TFLite ``MultiplyByQuantizedMultiplier`` (default double-rounding build), broadcasting.

    ``x · multiplier · 2^(shift − 31)``, rounded in two steps::

        left  = max(shift, 0);  right = max(−shift, 0)
        r = rounding_divide_by_pot(
                saturating_rounding_doubling_high_mul(wrap_int32(x · 2^left), multiplier),
                right)

    ``x`` int32, ``multiplier`` int32 (≥ 0 in practice), ``shift`` in [−31, 30] (positive =
    left shift). ``multiplier`` and ``shift`` broadcast against ``x`` (per-channel arrays).
    Returns int32.
    """
    x = _int32_range(_int64(x, "mbqm x"), "mbqm x")
    m = _int32_range(_int64(multiplier, "mbqm multiplier"), "mbqm multiplier")
    s = _int64(shift, "mbqm shift")
    if s.size and (s.min() < -31 or s.max() > 30):
        raise ValueError(f"multiply_by_quantized_multiplier: shift must be in [-31, 30], got {s.min()}..{s.max()}")
    left = np.maximum(s, 0)
    right = np.maximum(-s, 0)
    shifted = _wrap_i32(x << left)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, m), right)
