"""TRANSPOSE_CONV as stride-1 convolutions: the phase decomposition.

A transposed convolution with stride s scatters every input pixel times the kernel into the
output: ``out[i·s + k − p] += x[i] · w[k]`` (per axis; p is the padding before). Output
position ``o = φ + s·j`` receives only the taps ``k ≡ φ + p (mod s)``, so the outputs of one
*phase* φ are a plain stride-1 correlation of the input with the sub-kernel of those taps,
reversed. Each of the s_h·s_w phases is one CONV on the NPU — no zeros inserted between the
input pixels, so no MAC is wasted on them — and its output is written to every s-th row and
column of the result by the DMA's strides. The taps a phase misses at the input's edges are
the conv's zero-point padding (TFLite's reference adds nothing for them either); where a
phase reads only the middle of the input, the input is cropped instead.

This module holds the geometry (one function per axis, then their product) and, separately,
the direct scatter form used as the golden model's independent specification.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AxisPhase:
    """One phase of one axis: outputs ``phase + stride·j`` for j < ``count``."""

    phase: int
    count: int  # output positions of this phase
    taps: tuple[int, ...]  # kernel indices in correlation order (the sub-kernel, reversed)
    in_start: int  # first input index read
    in_count: int  # input positions read
    pad_before: int  # zero-point padding before / after the cropped input
    pad_after: int


def axis_phases(kernel: int, stride: int, pad: int, in_size: int, out_size: int) -> list[AxisPhase]:
    """The phases of one axis of a transposed convolution with output size ``out_size``
    (output padding included). Raises ValueError naming what cannot run as a convolution."""
    if stride < 1 or kernel < 1:
        raise ValueError(f"stride {stride} and kernel {kernel} must be positive")
    if stride > kernel:
        raise ValueError(f"stride {stride} larger than the kernel {kernel}: some outputs take no input tap")
    out = []
    for phase in range(min(stride, out_size)):
        k0 = (phase + pad) % stride
        q = (phase + pad - k0) // stride
        m = -(-(kernel - k0) // stride)  # taps k0, k0 + s, ... below the kernel size
        count = -(-(out_size - phase) // stride)
        first = q - (m - 1)  # input index under the first tap of output j = 0
        last = count - 1 + q  # input index under the last tap of the last output
        start, end = max(first, 0), min(last, in_size - 1)
        pad_before, pad_after = start - first, last - end
        if end < start or max(pad_before, pad_after) >= m:
            raise ValueError(f"output positions {phase} mod {stride} reach beyond the input "
                             f"(input {in_size}, output {out_size}, padding {pad}): a window holds no input")
        taps = tuple(k0 + (m - 1 - u) * stride for u in range(m))
        out.append(AxisPhase(phase, count, taps, start, end - start + 1, pad_before, pad_after))
    return out


@dataclass(frozen=True)
class Phase:
    """One phase (φ_h, φ_w): a stride-1 CONV of the cropped input with ``weights``."""

    h: AxisPhase
    w: AxisPhase
    weights: np.ndarray  # OHWI, the sub-kernel in correlation order

    @property
    def padding(self) -> tuple[int, int, int, int]:  # top, left, bottom, right
        return self.h.pad_before, self.w.pad_before, self.h.pad_after, self.w.pad_after


def phases(weights: np.ndarray, stride, pad_before, in_hw, out_hw) -> list[Phase]:
    """Every phase of a transposed convolution with OHWI ``weights`` (out[o] += x[i]·w[o-side
    index k] with o = i·s + k − pad), row-major over (φ_h, φ_w)."""
    hs = axis_phases(weights.shape[1], stride[0], pad_before[0], in_hw[0], out_hw[0])
    ws = axis_phases(weights.shape[2], stride[1], pad_before[1], in_hw[1], out_hw[1])
    return [Phase(h, w, np.ascontiguousarray(weights[:, list(h.taps)][:, :, list(w.taps)])) for h in hs for w in ws]


def scatter_accumulate(x: np.ndarray, weights: np.ndarray, zero_point: int, stride, pad_before,
                       out_hw) -> np.ndarray:  # fmt: skip
    """The int64 accumulators (H, W, C_out) of a transposed convolution, computed the way
    TFLite's reference kernel does: every input pixel, less the zero point, times the kernel,
    added at i·s + k − pad (contributions outside the output dropped)."""
    (h, w, _), (o, kh, kw, _) = x.shape, weights.shape
    (sh, sw), (ph, pw) = stride, pad_before
    oh, ow = out_hw
    xs = x.astype(np.int64) - zero_point
    full = np.zeros(((h - 1) * sh + kh, (w - 1) * sw + kw, o), np.int64)
    wk = weights.astype(np.int64)
    for ky in range(kh):
        for kx in range(kw):
            contrib = np.einsum("hwi,oi->hwo", xs, wk[:, ky, kx, :])
            full[ky : ky + (h - 1) * sh + 1 : sh, kx : kx + (w - 1) * sw + 1 : sw] += contrib
    out = np.zeros((oh, ow, o), np.int64)  # output padding beyond the scattered extent stays 0
    rows, cols = full[ph : ph + oh, pw : pw + ow].shape[:2]
    out[:rows, :cols] = full[ph : ph + oh, pw : pw + ow]
    return out


__all__ = ["AxisPhase", "Phase", "axis_phases", "phases", "scatter_accumulate"]
