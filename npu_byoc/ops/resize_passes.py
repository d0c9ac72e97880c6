"""RESIZE_BILINEAR as LiteRT's int8 kernel computes it, and as depthwise convolutions.

LiteRT's int8 kernel (reference_ops::ResizeBilinearInteger) works on the raw int8 values with
10-bit fractions. Per axis, output position o has a scaled source position
``v = o·scale_10 (+ scale_10/2 − 512 with half-pixel centres)``, where
``scale_10 = round(1024·in / out)``. The two neighbours are ``lo = max(v / 1024, 0)`` (C
division, toward zero) and ``hi = min(ceil(v / 1024), in − 1)``, with weights
``1024 − (v − 1024·lo)`` and ``v − 1024·lo``. The output is
``(Σ x·wy·wx ± 2^19) / 2^20``, rounded half away from zero.

For an integer factor s, the outputs of one residue class mod s share their weights, except
at the edges where ``lo`` or ``hi`` is clamped. Each run of equal weights (a *segment*) is a
stride-1 depthwise convolution of 1 or 2 taps per axis. Its weights are ``wy·wx`` divided by
their common power of two, and the division by 2^20 becomes the requantize:
``weights 2·W', multiplier 2^30, shift −n``, which rounds once and exactly like LiteRT. A 2x
upsampling is 4 segments per axis, 16 small convolutions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_SEGMENTS = 64  # depthwise passes per resize


@dataclass(frozen=True)
class AxisTaps:
    """Per output position of one axis: the two source positions and their 10-bit weights."""

    lo: np.ndarray
    hi: np.ndarray
    w_lo: np.ndarray
    w_hi: np.ndarray


def axis_taps(in_size: int, out_size: int, align_corners: bool, half_pixel: bool) -> AxisTaps:
    """LiteRT's ComputeInterpolationValuesInteger for every output position of one axis."""
    if align_corners and out_size > 1:
        scale_10 = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    else:
        scale_10 = ((1 << 10) * in_size + out_size // 2) // out_size
    o = np.arange(out_size, dtype=np.int64)
    v = o * scale_10 + (scale_10 // 2 - (1 << 9) if half_pixel else 0)
    lo = np.maximum(_c_div(v, 1024), 0)
    hi = np.minimum(_c_div(v + 1023, 1024), in_size - 1)
    w_hi = v - 1024 * lo
    return AxisTaps(lo, hi, 1024 - w_hi, w_hi)


def reference(x: np.ndarray, out_hw, align_corners: bool, half_pixel: bool) -> np.ndarray:
    """LiteRT's int8 RESIZE_BILINEAR of an (H, W, C) map: the golden model's definition."""
    ty = axis_taps(x.shape[0], out_hw[0], align_corners, half_pixel)
    tx = axis_taps(x.shape[1], out_hw[1], align_corners, half_pixel)
    xi = x.astype(np.int64)
    acc = np.zeros((out_hw[0], out_hw[1], x.shape[2]), np.int64)
    for rows, wy in ((ty.lo, ty.w_lo), (ty.hi, ty.w_hi)):
        for cols, wx in ((tx.lo, tx.w_lo), (tx.hi, tx.w_hi)):
            acc += xi[rows][:, cols] * (wy[:, None, None] * wx[None, :, None])
    # a convex combination of int8 values, rounded: int8 again (LiteRT casts without a clamp)
    return _c_div(acc + np.where(acc > 0, 1 << 19, -(1 << 19)), 1 << 20).astype(np.int8)


def _c_div(a: np.ndarray, b: int) -> np.ndarray:
    """Integer division rounding toward zero, as C's ``/``."""
    return np.sign(a) * (np.abs(a) // b)


@dataclass(frozen=True)
class Segment:
    """Output positions out0 + step·j (j < count) of one axis, each the weighted sum of ``len(weights)``
    consecutive source positions starting at in0 + j."""

    out0: int
    step: int
    in0: int
    count: int
    weights: tuple[int, ...]  # 10-bit weights of the consecutive taps


def axis_segments(taps: AxisTaps, in_size: int) -> list[Segment] | None:
    """The runs of one axis with equal weights whose first tap advances by one input per output
    of a residue class mod the integer factor; None when the factor is not an integer."""
    n = len(taps.lo)
    if n % in_size:
        return None
    s = n // in_size
    out = []
    for phase in range(s):
        o = np.arange(phase, n, s)
        j0 = 0
        while j0 < len(o):
            key = _taps_of(taps, o[j0])
            j1 = j0 + 1
            while j1 < len(o) and _taps_of(taps, o[j1]) == key and taps.lo[o[j1]] == taps.lo[o[j0]] + (j1 - j0):
                j1 += 1
            out.append(Segment(int(o[j0]), s, int(taps.lo[o[j0]]), j1 - j0, key))
            j0 = j1
    return out


def _taps_of(taps: AxisTaps, o: int) -> tuple[int, ...]:
    """The weights of consecutive source positions lo, lo + 1 (one weight when hi == lo)."""
    if taps.hi[o] == taps.lo[o]:
        return (int(taps.w_lo[o] + taps.w_hi[o]),)
    assert taps.hi[o] == taps.lo[o] + 1
    return int(taps.w_lo[o]), int(taps.w_hi[o])


@dataclass(frozen=True)
class Pass:
    """One depthwise convolution: rows segment x columns segment."""

    rows: Segment
    cols: Segment
    weights: np.ndarray  # int8 [KH, KW]: 2·W' (even: the requantize's first halving is exact)
    shift: int  # requantize shift (negative: right), with multiplier 2^30


def passes(in_hw, out_hw, align_corners: bool, half_pixel: bool) -> list[Pass]:
    """The depthwise passes of a bilinear resize; ValueError says why the NPU cannot run it so."""
    seg = []
    for axis, (n_in, n_out) in enumerate(zip(in_hw, out_hw)):
        s = axis_segments(axis_taps(n_in, n_out, align_corners, half_pixel), n_in)
        if s is None:
            raise ValueError(f"RESIZE_BILINEAR {in_hw[0]}x{in_hw[1]} -> {out_hw[0]}x{out_hw[1]}: the NPU resizes by "
                             "integer factors (a depthwise pass per output phase)")  # fmt: skip
        seg.append(s)
    if len(seg[0]) * len(seg[1]) > MAX_SEGMENTS:
        raise ValueError(f"RESIZE_BILINEAR needs {len(seg[0]) * len(seg[1])} depthwise passes: the NPU runs up to "
                         f"{MAX_SEGMENTS}")
    out = []
    for r in seg[0]:
        for c in seg[1]:
            w = np.outer(r.weights, c.weights).astype(np.int64)  # units of 2^-20
            nz = w[w != 0]
            if nz.size == 0:
                raise ValueError("RESIZE_BILINEAR with an all-zero window")
            g = int(np.gcd.reduce(np.abs(nz)))
            n = max(21 - (g & -g).bit_length(), 1)  # weights / 2^20 = (w / 2^(20-n)) / 2^n
            wq = 2 * (w // (1 << (20 - n)))
            if np.abs(wq).max() > 127:
                raise ValueError(f"RESIZE_BILINEAR weights {w.tolist()} (2^-20) do not fit int8 depthwise weights "
                                 "with a power-of-two requantize")  # fmt: skip
            out.append(Pass(r, c, wq.astype(np.int8), -n))
    return out


__all__ = ["AxisTaps", "Segment", "Pass", "axis_taps", "axis_segments", "passes", "reference", "MAX_SEGMENTS"]
