"""Gathers of rows and columns as strided copies: the NPU form of TFLite's data movement.

TFLite's RESIZE_NEAREST_NEIGHBOR, STRIDED_SLICE, SPLIT, TILE and constant GATHER move int8
values without arithmetic; npu_byoc imports them as one ``take`` with a constant index map
(npu_byoc.frontends.tflite_ops). When that map copies whole pixels, ``out[h, w, c] = in[rows[h],
cols[w], c0 + c]``, it is separable: ``rows`` and ``cols`` say everything. Each is cut into
arithmetic runs, ``out[o0 + s·j] = in[i0 + t·j]``: the output positions of one residue mod a
period s, read with a step t ≥ 0 (0 repeats a row, as a nearest-neighbour upsampling does).
A pair of runs, one per axis, is one copy between two strided boxes, which the NPU's DMA
addresses directly; a 2x nearest upsampling is four copies, a strided slice one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..arch.limits import ShapeError, hwc

MAX_PERIOD = 8  # the largest period searched per axis (4 runs per axis = a 4x upsampling)
MAX_COPIES = 16  # copies per gather: each is a pass over its part of the output


@dataclass(frozen=True)
class AxisRun:
    """Output positions out0 + out_step·j copy input positions in0 + in_step·j, j < count."""

    out0: int
    out_step: int
    in0: int
    in_step: int
    count: int


def axis_runs(index) -> list[AxisRun] | None:
    """The fewest runs that cover output positions 0..n-1 of a per-axis index map: the smallest
    period s ≤ MAX_PERIOD whose residue classes are each an arithmetic progression with a step
    of at least 0; None when there is none."""
    index = np.asarray(index, np.int64)
    n = len(index)
    for period in range(1, min(n, MAX_PERIOD) + 1):
        runs = []
        for phase in range(period):
            v = index[phase::period]
            step = int(v[1] - v[0]) if len(v) > 1 else 1
            if step < 0 or np.any(np.diff(v) != step):
                break
            runs.append(AxisRun(phase, period, int(v[0]), step, len(v)))
        else:
            return runs
    return None


@dataclass(frozen=True)
class PixelGather:
    rows: tuple[int, ...]
    cols: tuple[int, ...]
    c0: int


def pixel_gather(index: np.ndarray, in_shape) -> PixelGather | str:
    """``index`` (the flat input element each output element copies, NHWC, batch 1) as a
    separable pixel gather, or the reason it is not one."""
    if len(in_shape) != 4 or index.ndim != 4 or in_shape[0] != 1 or index.shape[0] != 1:
        return f"gather from {list(in_shape)} to {list(index.shape)}: the NPU copies between 4-D tensors of batch 1"
    _, h, w, c = (int(d) for d in in_shape)
    if index.size == 0 or index.min() < 0 or index.max() >= h * w * c:
        return "gather indices outside the input"
    ch, rest = index % c, index // c
    cols, rows = rest % w, rest // w
    c0 = int(ch.flat[0])
    rows_1d, cols_1d = rows[0, :, 0, 0], cols[0, 0, :, 0]
    if not (np.array_equal(ch, np.broadcast_to(c0 + np.arange(index.shape[3]), index.shape))
            and np.array_equal(rows, np.broadcast_to(rows_1d[None, :, None, None], index.shape))
            and np.array_equal(cols, np.broadcast_to(cols_1d[None, None, :, None], index.shape))):  # fmt: skip
        return "gather is not a copy of whole pixels (rows and columns of the input, a run of its channels)"
    return PixelGather(tuple(int(v) for v in rows_1d), tuple(int(v) for v in cols_1d), c0)


def copies_reason(g: PixelGather) -> str | None:
    """Why the NPU cannot run the gather as at most MAX_COPIES strided copies (None: it can)."""
    runs = [axis_runs(g.rows), axis_runs(g.cols)]
    for axis, r in zip(("rows", "columns"), runs):
        if r is None:
            return (f"gather of {axis} is not periodic with period up to {MAX_PERIOD} "
                    "(a non-integer resize factor): the NPU copies strided boxes")  # fmt: skip
    n = len(runs[0]) * len(runs[1])
    if n > MAX_COPIES:
        return f"gather needs {n} strided copies: the NPU runs up to {MAX_COPIES}"
    return None


def _stored_flat(index: np.ndarray, in_shape, layout: str) -> np.ndarray:
    """Model-order flat input elements renumbered in the order the NPU stores the input: HWC
    (an NCHW map's channels last; an NCHW sequence [N, C, L] as L pixels of C channels)."""
    if layout != "NCHW" or len(in_shape) not in (3, 4):
        return index
    n, c, *hw = (int(d) for d in in_shape)
    h, w = hw if len(hw) == 2 else (1, hw[0])
    nn, rest = np.divmod(index, c * h * w)
    ch, rest = np.divmod(rest, h * w)
    row, col = np.divmod(rest, w)
    return ((nn * h + row) * w + col) * c + ch


def _stored_positions(index: np.ndarray, layout: str) -> np.ndarray:
    """The output's index map with its positions in the order the NPU stores them."""
    if layout == "NCHW" and index.ndim in (3, 4):
        return index.transpose(0, *range(2, index.ndim), 1)
    return index


def nhwc_index(index: np.ndarray, in_shape, layout: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """A gather laid out ``layout`` as the NHWC one: (its index map, the input's shape), with
    NCHW flat input elements renumbered NHWC and the output positions in (N, H, W, C) order.
    A tensor of another rank (a sequence [N, L, C], rows [R, F], a vector) is the H x W x C
    map the NPU stores it as (npu_byoc.arch.limits.hwc): a transformer's class token
    ``x[:, 0, :]`` of [1, T, C] is one pixel of the T-pixel row."""
    in_shape = tuple(int(d) for d in in_shape)
    if len(in_shape) == 4 and index.ndim == 4:
        if layout == "NHWC":
            return index, in_shape
        n, c, h, w = in_shape
        return _stored_flat(index, in_shape, layout).transpose(0, 2, 3, 1), (n, h, w, c)
    try:
        in_hwc, out_hwc = hwc(in_shape, layout), hwc(index.shape, layout)
    except ShapeError as err:
        raise ValueError(f"gather from {list(in_shape)} to {list(index.shape)}: {err}") from None
    stored = _stored_positions(_stored_flat(index, in_shape, layout), layout)
    return stored.reshape(1, *out_hwc), (1, *in_hwc)


def nearest_index(in_len: int, out_len: int, mode: str, rounding: str) -> np.ndarray:
    """The input position each output position of a nearest-neighbour resize reads along one
    axis, as TVM's ``image.resize2d`` computes it (its float32 coordinate transform and rounding
    rule, ONNX Resize's definitions); ValueError for a mode it does not define here."""
    o = np.arange(out_len, dtype=np.float32)
    scale = np.float32(in_len) / np.float32(out_len)
    if mode == "half_pixel" or (mode == "pytorch_half_pixel" and out_len > 1):
        x = (o + np.float32(0.5)) * scale - np.float32(0.5)
    elif mode == "pytorch_half_pixel":
        x = np.zeros_like(o)
    elif mode == "align_corners":
        x = np.float32(in_len - 1) / np.float32(max(out_len - 1, 1)) * o
    elif mode == "asymmetric":
        x = scale * o
    elif mode == "tf_half_pixel_for_nn":
        x = (o + np.float32(0.5)) * scale
    else:
        raise ValueError(f"nearest resize with {mode} coordinates: not a copy of input pixels")
    rounding = rounding or ("round" if mode == "align_corners" else "floor")
    eps = np.float32(1e-5)
    pick = {"round": np.rint,  # TVM's round is LLVM's nearbyint: ties to even
            "round_prefer_floor": lambda v: np.ceil(v - np.float32(0.5)),
            "round_prefer_ceil": lambda v: np.floor(v + np.float32(0.5)),
            "floor": lambda v: np.floor(v + eps), "ceil": lambda v: np.ceil(v - eps)}  # fmt: skip
    if rounding not in pick:
        raise ValueError(f"nearest resize with {rounding} rounding: unknown rule")
    return np.clip(pick[rounding](x.astype(np.float32)).astype(np.int64), 0, in_len - 1)


def resize_index(in_shape, out_shape, layout: str, mode: str, rounding: str) -> np.ndarray:
    """The flat input element each output element of a nearest resize copies (model layout)."""
    n, c, h, w = in_shape if layout == "NCHW" else (in_shape[0], in_shape[3], in_shape[1], in_shape[2])
    oh, ow = (out_shape[2], out_shape[3]) if layout == "NCHW" else (out_shape[1], out_shape[2])
    rows, cols = nearest_index(h, oh, mode, rounding), nearest_index(w, ow, mode, rounding)
    nn, ch = np.arange(n)[:, None, None, None], np.arange(c)[:, None, None]
    if layout == "NCHW":
        return ((nn * c + ch) * h + rows[:, None]) * w + cols[None, :]
    return ((nn * h + rows[None, :, None, None]) * w + cols[None, None, :, None]) * c + np.arange(c)


def slice_index(in_shape, axes, begin, end, strides) -> np.ndarray:
    """The flat input element each output element of a strided slice copies."""
    cut = [slice(None)] * len(in_shape)
    for a, b, e, s in zip(axes, begin, end, strides):
        cut[a] = slice(b, e, s)
    return np.arange(int(np.prod(in_shape)), dtype=np.int64).reshape(in_shape)[tuple(cut)]


def decompose(index: np.ndarray, in_shape, layout: str = "NHWC") -> PixelGather:
    """The pixel gather of ``index`` (laid out ``layout``) when the NPU can copy it; ValueError
    says why not."""
    index, in_shape = nhwc_index(index, in_shape, layout)
    g = pixel_gather(index, in_shape)
    reason = g if isinstance(g, str) else copies_reason(g)
    if reason:
        raise ValueError(reason)
    return g


__all__ = ["AxisRun", "PixelGather", "axis_runs", "decompose", "pixel_gather", "copies_reason", "nhwc_index",
           "nearest_index", "resize_index", "slice_index", "MAX_COPIES", "MAX_PERIOD"]
