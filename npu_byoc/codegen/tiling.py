"""Tiling: how an NPU op is cut into tiles that fit the SRAM, and the SRAM a tile needs.

Every operation computes on SRAM only, so each op is cut into tiles of ``rows`` output rows x
``channels`` output channels small enough that everything one kick touches fits the SRAM:

    weights block + requantize block (+ LUT) + IFM tile (with halo rows) (+ IFM2 tile) + OFM tile

Policy: full channels if at all possible (weights then go to SRAM once per op), and as many
output rows as fit; otherwise the largest channel block that fits one row. Tiles are
balanced (equal sizes but the last).

For FullyConnected the "rows" are the FC's rows (the W axis of its (1, rows, K) view); Mean
is never tiled along H/W (its multiplier already holds 1/(H*W)), only along channels.

``KINDS`` says, per op type, what is tiled and the SRAM buffers of a tile (the op's module
names its kind: NpuOpSpec.tiling, one of ``KINDS_BY_NAME``); the search
(``fit_tiling``, ``choose_tiling``), the reason when nothing fits (``untileable_reason``) and
the shape checks (``check_geometry``) are here. The steps of a tile are
npu_byoc.codegen.tile_steps; the partition's schedule is npu_byoc.codegen.schedule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..errors import LoweringError
from ..arch.config import HwConfig
from ..arch.isa import REQUANT_RECORD_BYTES, SOFTMAX_TABLE_BYTES
from ..ops.npu_ops import Conv2D, DepthwiseConv2D, Lut, NpuOp, Pool, Softmax, Tiling, Phased, _Binary
from ..ops.registry import NPU_OPS

ALIGN = 16  # SRAM buffers and constants start on 16-byte boundaries (REQUANT_ADDR needs 4)
LUT_BYTES = 256


def align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


# ---------------------------------------------------------------------------------------------
# One kind per op type: what is tiled, and the SRAM buffers of a tile


@dataclass
class _Kind:
    """How one op type tiles. ``rows`` / ``channels`` are the totals being tiled;
    ``buffers(r, cb)`` the SRAM buffers (name -> bytes) of a tile of r rows x cb channels."""

    rows: Callable[[NpuOp], int]
    channels: Callable[[NpuOp], int]
    buffers: Callable[[NpuOp, int, int], dict[str, int]]
    describe: Callable[[NpuOp], str]
    split_channels: bool = True  # False: a tile always holds every channel (a softmax row)


def _rows_needed(n_out: int, stride: int, kernel: int, size: int) -> int:
    """Upper bound of input rows a tile of n_out output rows reads."""
    return min(size, (n_out - 1) * stride + kernel)


# Spatial ops with a window: Conv2D, DepthwiseConv2D, Pool.


def kernel_of(op) -> tuple[int, int]:
    return tuple(int(k) for k in op.kernel)


def _spatial_buffers(op, r: int, cb: int) -> dict[str, int]:
    H, W, C = op.ifm.shape
    _, OW, _ = op.ofm.shape
    kh, kw = kernel_of(op)
    ifm_c = C if isinstance(op, Conv2D) else cb
    bufs = {"ifm": _rows_needed(r, op.stride[0], kh, H) * W * ifm_c, "ofm": r * OW * cb}
    if isinstance(op, Conv2D):
        bufs = {"weights": cb * kh * kw * C, "requant": cb * REQUANT_RECORD_BYTES, **bufs}
    elif isinstance(op, DepthwiseConv2D):
        bufs = {"weights": cb * kh * kw, "requant": cb * REQUANT_RECORD_BYTES, **bufs}
    return bufs


def _describe_spatial(op) -> str:
    kh, kw = kernel_of(op)
    return f"{op.kind} {'x'.join(map(str, op.ifm.shape))} -> {'x'.join(map(str, op.ofm.shape))}, kernel {kh}x{kw}"


# FullyConnected: rows are the W axis of (1, rows, K).


def _fc_buffers(op, r: int, cb: int) -> dict[str, int]:
    K = op.ifm.shape[2]
    return {"weights": cb * K, "requant": cb * REQUANT_RECORD_BYTES, "ifm": r * K, "ofm": r * cb}


# A matmul head (npu_byoc.ops.matmul): its rows of K read 1 + fold times, weights DMA'd from
# the second operand.


def _matmul_buffers(op, r: int, cb: int) -> dict[str, int]:
    _, taps, k = op.ifm.shape
    return {"weights": cb * taps * k, "requant": cb * REQUANT_RECORD_BYTES, "ifm": r * taps * k, "ofm": r * cb}


# Mean: channels only.


def _mean_buffers(op, r: int, cb: int) -> dict[str, int]:
    H, W, _ = op.ifm.shape
    return {"ifm": H * W * cb, "ofm": cb}


# Elementwise: Add, Mul, SquaredDifference, Lut (no halo). A broadcast ifm2 is the tile's channel slice.


def _elementwise_buffers(op, r: int, cb: int) -> dict[str, int]:
    W = op.ofm.shape[1]
    bufs = {"lut": LUT_BYTES} if isinstance(op, Lut) else {}
    bufs |= {"ifm": r * W * cb}
    if isinstance(op, _Binary):  # two operands (ADD, MUL, SQUARED_DIFFERENCE)
        bufs["ifm2"] = cb if op.broadcast else r * W * cb
    return bufs | {"ofm": r * W * cb}


# Replicated (ops.broadcast.ChannelReplicated): the binary op's buffers, the vector's rows (its
# "ifm2", one channel) and the copy the CONV kick replicates them into, with its ones and records.


def _replicated_buffers(op, r: int, cb: int) -> dict[str, int]:
    W = op.ofm.shape[1]
    return {"weights": cb, "requant": cb * REQUANT_RECORD_BYTES, "ifm": r * W * cb, "ifm2": r * W,
            "replicated": r * W * cb, "ofm": r * W * cb}  # fmt: skip


# Softmax: rows of pixels; a pixel's channels are one row of the softmax, never split.


def _softmax_buffers(op: Softmax, r: int, cb: int) -> dict[str, int]:
    W = op.ofm.shape[1]
    return {"table": SOFTMAX_TABLE_BYTES, "ifm": r * W * cb, "ofm": r * W * cb}


# Layer norm: rows of pixels, a pixel's channels never split; the per-channel records once.


def _layernorm_buffers(op, r: int, cb: int) -> dict[str, int]:
    W = op.ofm.shape[1]
    return {"requant": cb * REQUANT_RECORD_BYTES, "ifm": r * W * cb, "ofm": r * W * cb}


def _describe_elementwise(op) -> str:
    return f"{op.kind} {'x'.join(map(str, op.ofm.shape))}"


# Phased ops (TransposeConv2D, Gather, ResizeBilinear): their phases one after the other in the
# same buffers, each as large as the largest phase's; a tiling of r rows gives a phase min(r, its rows).


def _phase_rows(op: Phased) -> int:
    return max(KINDS[type(p)].rows(p) for p in op.phases)


def _phased_buffers(op: Phased, r: int, cb: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in op.phases:
        kind = KINDS[type(p)]
        for name, nbytes in kind.buffers(p, min(r, kind.rows(p)), cb).items():
            out[name] = max(out.get(name, 0), nbytes)
    return out


# Interleave / Deinterleave (npu_byoc.ops.interleave): rows of the image; a tile's planes (C runs
# of r·W bytes) and its pixels (r·W of C channels), every channel (one kick over all planes, or
# one output buffer the planes leave from in one DMA), the identity weights and records.


def _layout_move_buffers(op, r: int, cb: int) -> dict[str, int]:
    _, W, C = op.ifm.shape
    return {"weights": cb * C, "requant": cb * REQUANT_RECORD_BYTES, "ifm": r * W * C, "ofm": r * W * cb}


def _layout_move_kind() -> _Kind:
    return _Kind(lambda op: op.ofm.shape[0], lambda op: op.ofm.shape[2], _layout_move_buffers, _describe_elementwise,
                 split_channels=False)  # fmt: skip


SPATIAL_KIND = _Kind(lambda op: op.ofm.shape[0], lambda op: op.ofm.shape[2], _spatial_buffers, _describe_spatial)
# By the name an op's spec gives (NpuOpSpec.tiling, npu_op_spec.TILING_KINDS).
KINDS_BY_NAME: dict[str, _Kind] = {
    "spatial": SPATIAL_KIND,
    "fully_connected": _Kind(lambda op: op.ofm.shape[1], lambda op: op.ofm.shape[2], _fc_buffers, _describe_elementwise),
    "mean": _Kind(lambda op: 1, lambda op: op.ofm.shape[2], _mean_buffers, _describe_elementwise),
    "elementwise": _Kind(lambda op: op.ofm.shape[0], lambda op: op.ofm.shape[2], _elementwise_buffers,
                         _describe_elementwise),  # fmt: skip
    "softmax": _Kind(lambda op: op.ofm.shape[0], lambda op: op.ofm.shape[2], _softmax_buffers, _describe_elementwise,
                     split_channels=False),  # fmt: skip
    "layernorm": _Kind(lambda op: op.ofm.shape[0], lambda op: op.ofm.shape[2], _layernorm_buffers,
                       _describe_elementwise, split_channels=False),  # fmt: skip
    "matmul": _Kind(lambda op: op.ofm.shape[0], lambda op: op.ofm.shape[2], _matmul_buffers, _describe_elementwise),
    "phased": _Kind(_phase_rows, lambda op: op.ofm.shape[2], _phased_buffers, _describe_elementwise),
    "replicated": _Kind(lambda op: op.ofm.shape[0], lambda op: op.ofm.shape[2], _replicated_buffers,
                        _describe_elementwise),  # fmt: skip
    "interleave": _layout_move_kind(),
    "deinterleave": _layout_move_kind(),
}


def _kind_of(spec) -> _Kind:
    kind = KINDS_BY_NAME[spec.tiling]
    return kind if spec.describe is None else replace(kind, describe=spec.describe)


# Per op type, from the registry: each op's module names its kind (and its wording in reasons).
KINDS: dict[type, _Kind] = {npu_op: _kind_of(spec) for npu_op, spec in NPU_OPS.items()}


# ---------------------------------------------------------------------------------------------
# The SRAM of a tile, the checks, the tiling choice


def sram_layout(bufs: dict[str, int], base: int = 0) -> tuple[dict[str, int], int]:
    addrs, top = {}, base
    for name, nbytes in bufs.items():
        addrs[name] = top
        top += align(nbytes)
    return addrs, top - base


def work_buffers(op: NpuOp, rows: int, channels: int, resident=()) -> dict[str, int]:
    """The op's own SRAM buffers for a tile: every buffer but the resident operands'."""
    return {k: v for k, v in KINDS[type(op)].buffers(op, rows, channels).items() if k not in resident}


def tile_sram_bytes(op: NpuOp, rows: int, channels: int, resident=()) -> int:
    """SRAM a tile of ``rows`` output rows x ``channels`` output channels of ``op`` needs,
    less the buffers named in ``resident`` ("ifm", "ifm2", "ofm": tensors kept in SRAM)."""
    return sram_layout(work_buffers(op, rows, channels, resident))[1]


def check_geometry(op: NpuOp, layer: str) -> None:
    """Shapes the kicks can run with: the output size formula, and no window entirely in
    padding."""
    if isinstance(op, Phased):
        for p in op.phases:
            check_geometry(p, layer)
        return
    if not isinstance(op, Conv2D | DepthwiseConv2D | Pool):
        return
    (H, W, _), (OH, OW, _) = op.ifm.shape, op.ofm.shape
    kh, kw = kernel_of(op)
    top, left, bottom, right = op.padding
    sh, sw = op.stride
    expect = ((H + top + bottom - kh) // sh + 1, (W + left + right - kw) // sw + 1)
    if (OH, OW) != expect:
        reason = (f"output {OH}x{OW} disagrees with {expect[0]}x{expect[1]} from input {H}x{W}, "
                  f"kernel {kh}x{kw}, stride {sh}x{sw}, padding {tuple(op.padding)}")  # fmt: skip
        raise LoweringError(f"layer '{layer}': {reason}", reason=reason)
    if max(top, bottom) >= kh or max(left, right) >= kw:
        # a window entirely in padding has no input element to tile (TFLite SAME never does this)
        reason = f"padding {tuple(op.padding)} not smaller than the kernel {kh}x{kw}"
        raise LoweringError(f"layer '{layer}': {reason}", reason=reason)


def _fits(op: NpuOp, r: int, cb: int, budget: int, resident=()) -> bool:
    return tile_sram_bytes(op, r, cb, resident) <= budget


def fit_tiling(op: NpuOp, hw: HwConfig, budget: int | None = None, resident=()) -> Tiling | None:
    """Full channels and as many rows as fit; else the largest channel block of one row (a kind
    that keeps its channels whole: none). None when not even the smallest tile fits (the
    partition check asks this too).
    ``budget``: the SRAM bytes free for the op's own buffers (default all of it);
    ``resident``: its operands kept in SRAM by the partition (see tile_sram_bytes)."""
    kind = KINDS[type(op)]
    rows, channels = kind.rows(op), kind.channels(op)
    budget = hw.sram_bytes if budget is None else budget

    def fits(r: int, cb: int) -> bool:
        return _fits(op, r, cb, budget, resident)

    blocks = 1
    while blocks <= channels:
        cb = -(-channels // blocks)
        if fits(1, cb):
            lo, hi = 1, rows  # the largest r that fits
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if fits(mid, cb) else (lo, mid - 1)
            tiles = -(-rows // lo)
            return Tiling(-(-rows // tiles), cb)
        if not kind.split_channels:
            break
        blocks = -(-channels // (cb - 1)) if cb > 1 else channels + 1  # next smaller block size
    return None


_UNTILEABLE = "a 1-row x {channels}-channel tile needs {need} bytes of SRAM, the NPU has {sram}"


def untileable_reason(op: NpuOp, hw: HwConfig, budget: int | None = None, resident=()) -> str | None:
    """Why no tile of ``op`` fits the SRAM (None when one does)."""
    if fit_tiling(op, hw, budget, resident) is not None:
        return None
    kind = KINDS[type(op)]
    channels = 1 if kind.split_channels else kind.channels(op)  # the smallest tile there is
    need = tile_sram_bytes(op, 1, channels, resident)
    sram = hw.sram_bytes if budget is None else budget
    return f"{kind.describe(op)}: {_UNTILEABLE.format(channels=channels, need=need, sram=sram)}"


def is_untileable_reason(reason: str | None) -> bool:
    """Whether a partition-log reason is :func:`untileable_reason`'s (the SRAM is too small)."""
    parts = [p.split("}")[-1] for p in _UNTILEABLE.split("{")]  # the fixed text between the fields
    return bool(reason) and all(p in reason for p in parts if p)


def choose_tiling(op: NpuOp, hw: HwConfig, layer: str = "", budget: int | None = None, resident=()) -> Tiling:
    """:func:`fit_tiling`, or a preset ``op.tiling`` as given (after checking it fits)."""
    kind = KINDS[type(op)]
    rows, channels = kind.rows(op), kind.channels(op)
    budget = hw.sram_bytes if budget is None else budget
    if op.tiling is not None:
        t = op.tiling
        whole = kind.split_channels or t.channels == channels
        if not (1 <= t.rows <= rows and 1 <= t.channels <= channels and whole
                and _fits(op, t.rows, t.channels, budget, resident)):
            raise LoweringError(f"layer '{layer or op.name}': tiling {t} does not fit {rows} rows x "
                                f"{channels} channels in {budget} bytes of SRAM")  # fmt: skip
        return t
    tiling = fit_tiling(op, hw, budget, resident)
    if tiling is None:
        reason = untileable_reason(op, hw, budget, resident)
        raise LoweringError(f"layer '{layer or op.name}': {reason}", reason=reason)
    return tiling


__all__ = ["KINDS", "KINDS_BY_NAME", "ALIGN", "LUT_BYTES", "SPATIAL_KIND", "tile_sram_bytes", "check_geometry", "fit_tiling",
           "untileable_reason", "is_untileable_reason", "choose_tiling", "sram_layout", "work_buffers", "align",
           "kernel_of"]
