"""Integer numerics of int8 LAYERNORM (docs/numerics.md §8e): ONNX LayerNormalization over the
channels of every pixel (token), within 1 LSB of the float operator followed by QuantizeLinear.

Per token of C int8 values x, with d = x − zp_in (exact integers)::

    S1 = Σ d,  S2 = Σ d²,  V = C·S2 − S1²            # C²·variance / s_in², exact, 0 ≤ V < 2^38
    N  = C·d − S1                                     # C·(x − mean) / s_in, exact
    (x − mean) / sqrt(var + eps) = N / sqrt(V + E),   E = eps·C² / s_in²   (compile time)

so only 1/sqrt(V + E) is not exact. The NPU computes it once per token in fixed point:

    A    = V·2^F + E_fx                               # E_fx = round(E·2^F) < 2^31, F even ≤ 22
    s    = (62 − bitlen(A)) // 2;  A' = A·4^s         # A' in [2^60, 2^62)
    inv  = isqrt(2^124 // A')                         # = floor(2^62 / sqrt(A')), in (2^31, 2^32]
    x̂    = RDBPOT(N·inv, 38 − F/2 − s)                # the normalized value in Q24 (0 where V = 0)

then per channel c, with G = gamma_c / s_out and B = beta_c / s_out converted at compile time::

    acc  = x̂·g_c + b_c,  g_c = round(G·2^16),  b_c = round(B·2^40)     # Q40, int64
    y    = clamp(RDBPOT(acc, 40) + zp_out, act_min, act_max)

RDBPOT is rounding half away from zero (an exact integer division by a power of two). Every
step is an integer operation on at most 128 bits (the division), 64 elsewhere; the error
bound (docs/numerics.md §8e) is below 0.07 LSB before the final rounding for every parameter
the compile-time checks accept. The records the NPU reads hold (g_c, b_c) per channel: three
little-endian int32 (g, b's low word, b's high word), REQUANT_RECORD_BYTES each.
"""

from __future__ import annotations

import math

import numpy as np

from .isa import LAYERNORM_MAX_CHANNELS as MAX_CHANNELS
from .isa import LAYERNORM_MAX_FRAC_BITS as MAX_FRAC_BITS

XHAT_BITS = 24  # fraction bits of the normalized value x̂
GAMMA_BITS = 16  # fraction bits of g beyond x̂'s: acc is in Q(XHAT_BITS + GAMMA_BITS)
ACC_BITS = XHAT_BITS + GAMMA_BITS  # 40
RSQRT_BITS = 62  # inv = floor(2^62 / sqrt(A'))
# MAX_FRAC_BITS (22): F, the epsilon term's fraction bits, even (sqrt(2^F) is a shift);
# MAX_CHANNELS (4096): V < C²·2^14 ≤ 2^38, so A = V·2^22 + E_fx < 2^61.
MAX_GAIN = 1 << 14  # |gamma / s_out| below this: |x̂·g| < 2^60
MAX_OFFSET = 1 << 20  # |beta / s_out| below this: |b| < 2^60
EPSILON_TERM_LIMIT = (1 << 31) - 1  # E_fx fits the int32 register
RECORD_WORDS = 3  # g, b low, b high


# ---------------------------------------------------------------------------------------------
# Compile time


def epsilon_term(epsilon: float, channels: int, input_scale: float) -> tuple[int, int]:
    """(E_fx, F): E = eps·C²/s_in² in double (eps and s_in are the model's float32 values,
    widened) as round(E·2^F) with the largest even F ≤ 22 that keeps it below 2^31. A
    ValueError says when E itself reaches 2^31."""
    e = float(np.float32(epsilon)) * channels * channels / (float(np.float32(input_scale)) ** 2)
    if not math.isfinite(e) or e < 0:
        raise ValueError(f"epsilon {epsilon:g}: eps·C²/s_in² = {e:g} is not a finite non-negative number")
    for frac_bits in range(MAX_FRAC_BITS, -1, -2):
        e_fx = math.floor(e * 2.0**frac_bits + 0.5)
        if e_fx <= EPSILON_TERM_LIMIT:
            return e_fx, frac_bits
    raise ValueError(f"epsilon {epsilon:g} over {channels} channels at input scale {input_scale:g}: "
                     f"eps·C²/s_in² = {e:.4g} reaches 2^31")  # fmt: skip


def channel_params(gamma, beta, output_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(g, b) int64 per channel: round(gamma/s_out · 2^16), round(beta/s_out · 2^40), from the
    float32 gamma and beta (the model's initializers, dequantized in float32 as the model's
    runtime does) widened to double and divided by the float32 output scale in double.
    A ValueError names a channel whose gain or offset is out of range."""
    s = float(np.float32(output_scale))
    gain = np.asarray(gamma, np.float32).astype(np.float64) / s
    offset = np.asarray(beta, np.float32).astype(np.float64) / s
    for what, v, limit in (("gamma / output scale", gain, MAX_GAIN), ("beta / output scale", offset, MAX_OFFSET)):
        bad = np.flatnonzero(~(np.abs(v) < limit))
        if bad.size:
            c = int(bad[0])
            raise ValueError(f"{what} of channel {c} is {v[c]:.4g}: the NPU's LAYERNORM takes |{what}| < 2^{limit.bit_length() - 1}")
    g = np.floor(gain * 2.0**GAMMA_BITS + 0.5).astype(np.int64)
    b = np.floor(offset * 2.0**ACC_BITS + 0.5).astype(np.int64)
    return g, b


def records(g: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The (C, 3) int32 records the NPU reads: g, b's low and high words."""
    b = np.asarray(b, np.int64)
    lo = (b & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    hi = (b >> 32).astype(np.int32)
    return np.stack([np.asarray(g, np.int64).astype(np.int32), lo, hi], axis=1)


def from_records(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(g, b) int64 from (C, 3) int32 records (:func:`records`)."""
    t = np.asarray(table, np.int64).reshape(-1, RECORD_WORDS)
    return t[:, 0], (t[:, 1] & 0xFFFFFFFF) | (t[:, 2] << 32)


# ---------------------------------------------------------------------------------------------
# Run time (integer only): what the NPU computes


def rsqrt(a: int) -> tuple[int, int]:
    """(inv, s) of A ≥ 1: A' = A·4^s in [2^60, 2^62), inv = floor(2^62 / sqrt(A'))."""
    s = (RSQRT_BITS - a.bit_length()) // 2
    return math.isqrt((1 << (2 * RSQRT_BITS)) // (a << (2 * s))), s


def rdbpot(x: np.ndarray, exponent) -> np.ndarray:
    """x / 2^exponent rounded half away from zero, int64 (exponent ≥ 0, per element or scalar)."""
    x = np.asarray(x, np.int64)
    exponent = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)


def run(x, input_zero_point: int, output_zero_point: int, epsilon_fx: int, frac_bits: int, g, b,
        act_min: int = -128, act_max: int = 127) -> np.ndarray:  # fmt: skip
    """LAYERNORM over the last axis of int8 ``x`` (the module docstring's steps)."""
    x = np.asarray(x)
    shape = x.shape
    c = shape[-1]
    if c > MAX_CHANNELS:
        raise ValueError(f"layer norm over {c} channels: at most {MAX_CHANNELS}")
    d = x.reshape(-1, c).astype(np.int64) - int(input_zero_point)
    s1 = d.sum(axis=1)
    v = c * (d * d).sum(axis=1) - s1 * s1
    exponent = np.zeros(len(d), np.int64)
    inv = np.zeros(len(d), np.int64)
    for t in np.flatnonzero(v):  # V = 0: every N is 0, x̂ = 0
        inv[t], s = rsqrt((int(v[t]) << frac_bits) + int(epsilon_fx))
        exponent[t] = RSQRT_BITS - XHAT_BITS - frac_bits // 2 - s  # 38 − F/2 − s
    n = c * d - s1[:, None]
    xhat = rdbpot(n * inv[:, None], exponent[:, None])
    acc = xhat * np.asarray(g, np.int64)[None, :] + np.asarray(b, np.int64)[None, :]
    y = rdbpot(acc, ACC_BITS) + int(output_zero_point)
    return np.clip(y, act_min, act_max).astype(np.int8).reshape(shape)


__all__ = ["epsilon_term", "channel_params", "records", "from_records", "rsqrt", "rdbpot", "run", "MAX_CHANNELS"]
