"""Scheduling: a PartitionPlan of typed NPU ops -> tiles, DMA transfers and kicks (steps).

Every operation computes on SRAM only, so each op is cut into tiles of ``rows`` output rows x
``channels`` output channels small enough that everything one kick touches fits the SRAM:

    weights block + requantize block (+ LUT) + IFM tile (with halo rows) (+ IFM2 tile) + OFM tile

Policy: full channels if at all possible (weights then go to SRAM once per op), and as many
output rows as fit; otherwise the largest channel block that fits one row. Tiles are
balanced (equal sizes but the last). Loops run channel blocks outside, row tiles inside, so
a weights/requantize block is loaded once per channel block. Per tile: DMA_IN the input rows
(halo included; PAD_TOP/PAD_BOTTOM only where the tile touches the tensor's true border),
kick, DMA_OUT the output tile into its TensorRef (strided when the tile is a channel
sub-block or the tensor is NCHW).

For FullyConnected the "rows" are the FC's rows (the W axis of its (1, rows, K) view); Mean
is never tiled along H/W (its multiplier already holds 1/(H*W)), only along channels.

Residency (``schedule_partition``): an intermediate tensor stays whole in SRAM from the op that
writes it to the last op that reads it (npu_byoc.codegen.residency places it), and those ops'
tiles address it in place instead of DMA_IN / DMA_OUT; the SRAM it leaves free at each op is
that op's budget for its own buffers. A tensor that does not fit, or that a channel-blocked
tile would read or write as a strided box, goes through SCRATCH as without residency.

Constants (weights OHWI / CxKHxKW / OxI, requantize tables of (bias, multiplier, shift) int32
LE records, LUTs) are packed into one blob, the CONST region, at 16-byte aligned offsets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import LoweringError
from ..arch.config import DEFAULT_CONFIG, HwConfig
from ..arch.isa import REQUANT_RECORD_BYTES, SOFTMAX_TABLE_BYTES, Opcode, Reg, Region
from ..util import escape
from ..arch import numerics as nx
from ..arch.encoder import Dma, Kick, Step, disassemble, encode_with_starts
from .lower import PartitionPlan
from .residency import Buffer, largest_gap, place
from .overlap import overlap
from ..ops.npu_ops import (
    Add, Conv2D, DepthwiseConv2D, FullyConnected, Lut, Mean, Mul, NpuOp, Pool, Softmax, TensorRef, Tiling,
    Gather, Phased, ResizeBilinear, TransposeConv2D,
)  # fmt: skip

SECOND_WEIGHTS, SECOND_REQUANT = "weights (2nd)", "requant (2nd)"  # double-buffered channel blocks
SECOND_IFM = "ifm (2nd)"  # double-buffered row tiles of a staged input
ROW_SPLIT_TILES = 4  # overlapped schedules: row tiles of a one-tile op whose staged input loads long
ROW_SPLIT_MIN_CYCLES = 512  # ... longer than this
# overlapped schedules: weights + requantize records per channel block of a load-bound CONV / FC,
# as a fraction of the SRAM (48 KiB of 256: two such buffers leave room for the next ops')
SPLIT_SRAM_SIXTEENTHS = 3
CLEAR_OPS = 16  # overlapped schedules: an op's buffers go clear of up to this many previous ops' (prefetch distance)
ALIGN = 16  # SRAM buffers and constants start on 16-byte boundaries (REQUANT_ADDR needs 4)
LUT_BYTES = 256


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass
class Schedule:
    """What the driver needs to run one partition: the constant blob and the steps."""

    name: str
    constants: bytes  # the CONST region
    steps: list[Step]
    step_op: list[int]  # per step: the index of the op (and layer) it belongs to
    layers: list[str]  # per op: its layer name
    tilings: list[Tiling]  # per op: the tiling used
    region_bytes: dict[int, int] = field(default_factory=dict)  # size of every region
    resident: dict[str, int] = field(default_factory=dict)  # layer -> SRAM address of its output kept on chip

    def words(self) -> np.ndarray:
        return encode_with_starts(self.steps)[0]

    def layer_notes(self, starts: list[int]) -> dict[int, str]:
        """Word index -> a note naming the layer whose commands start there (``starts``: the
        first word of each step, from encode_with_starts)."""
        notes, last = {}, None
        for start, k in zip(starts, self.step_op):
            if k != last:
                t = self.tilings[k]
                notes[start] = f"layer {k}: {escape.text(self.layers[k])} ({t.rows} rows x {t.channels} channels per tile)"
                last = k
        return notes

    def disassembly(self) -> str:
        """The stream's disassembly with a comment line where each layer starts."""
        words, starts = encode_with_starts(self.steps)
        return disassemble(words, self.layer_notes(starts))


# ---------------------------------------------------------------------------------------------
# Geometry helpers


def _window_span(o0: int, n_out: int, stride: int, kernel: int, pad_before: int, size: int):
    """Input rows [lo, lo + n) that output rows [o0, o0 + n_out) read, and the virtual pad
    rows before/after them (non-zero only at the tensor's true border)."""
    first = o0 * stride - pad_before
    last = (o0 + n_out - 1) * stride - pad_before + kernel - 1
    lo, hi = max(first, 0), min(last, size - 1)
    return lo, hi - lo + 1, lo - first, last - hi


def _rows_needed(n_out: int, stride: int, kernel: int, size: int) -> int:
    """Upper bound of input rows a tile of n_out output rows reads."""
    return min(size, (n_out - 1) * stride + kernel)


def _box(direction: Opcode, ref: TensorRef, sram_addr: int, h0: int, nh: int, w0: int, nw: int,
         c0: int, nc: int) -> Dma:  # fmt: skip
    """DMA of the box [h0:h0+nh, w0:w0+nw, c0:c0+nc] of ``ref`` to/from a dense HWC SRAM tile
    (i2 = h, i1 = w, i0 = c); one contiguous run when the box is contiguous in the region."""
    s_h, s_w, s_c = ref.strides
    ext = ref.offset + h0 * s_h + w0 * s_w + c0 * s_c
    dense = (1, nc, nc * nw)
    if all(n == 1 or s == d for n, s, d in zip((nc, nw, nh), (s_c, s_w, s_h), dense)):
        return Dma(direction, ref.region, ext, sram_addr, nc * nw * nh)
    return Dma(direction, ref.region, ext, sram_addr, nc, nw, nh, s_c, s_w, s_h)


class NotResident(Exception):
    """A tile reads or writes a box of a resident tensor that is not one contiguous run of it
    (a channel block): that tensor must be staged through external memory instead."""

    def __init__(self, ref: TensorRef):
        super().__init__(ref.name)
        self.ref = ref


def _run_offset(ref: TensorRef, h0: int, nh: int, w0: int, nw: int, c0: int, nc: int) -> int:
    """Byte offset, within ``ref``, of a box that is one contiguous run (else NotResident)."""
    dma = _box(Opcode.DMA_IN, ref, 0, h0, nh, w0, nw, c0, nc)
    if dma.n0 != nh * nw * nc:
        raise NotResident(ref)
    return dma.ext_addr - ref.offset


class _TileIo:
    """Where a tile's feature maps are in SRAM. A *staged* operand is copied per tile by DMA
    into the op's own buffer (``sram``: buffer name -> address); a *resident* one is a whole
    tensor kept in SRAM (``resident``: buffer name -> the tensor's base address), read or
    written in place with no DMA."""

    def __init__(self, sram: dict[str, int], resident: dict[str, int] | None = None):
        self.sram, self.resident = sram, resident or {}

    def second_ifm(self) -> "_TileIo":
        """The same buffers with the second input buffer in place of the first (double-buffered
        row tiles: the next tile's input loads while this one computes)."""
        return _TileIo(self.sram | {"ifm": self.sram[SECOND_IFM]}, self.resident)

    def second_weights(self) -> "_TileIo":
        """The same buffers with the second weight and requantize buffers in place of the first
        (double-buffered channel blocks: the next block loads while this one computes)."""
        swap = {"weights": self.sram[SECOND_WEIGHTS], "requant": self.sram[SECOND_REQUANT]}
        return _TileIo(self.sram | swap, self.resident)

    def load(self, steps: list[Step], name: str, ref: TensorRef, *box: int) -> int:
        """The SRAM address of input box ``box`` = (h0, nh, w0, nw, c0, nc) of ``ref``; a
        staged box's DMA_IN is appended to ``steps``."""
        if name in self.resident:
            return self.resident[name] + _run_offset(ref, *box)
        steps.append(_box(Opcode.DMA_IN, ref, self.sram[name], *box))
        return self.sram[name]

    def store(self, name: str, ref: TensorRef, *box: int) -> tuple[int, list[Step]]:
        """The SRAM address the kick writes output box ``box`` to, and the steps after it."""
        if name in self.resident:
            return self.resident[name] + _run_offset(ref, *box), []
        return self.sram[name], [_box(Opcode.DMA_OUT, ref, self.sram[name], *box)]


def _load(region_offset: int, sram_addr: int, nbytes: int) -> Dma:
    return Dma(Opcode.DMA_IN, int(Region.CONST), region_offset, sram_addr, nbytes)


def _requant_table(op) -> bytes:
    if isinstance(op, FullyConnected):  # (bias, mantissa low word, mantissa high bits | exponent)
        table = np.stack([op.bias, *nx.pack_fc_scale(op.mantissa, op.exponent)], axis=1).astype("<i4")
        return table.tobytes()
    table = np.stack([op.bias, op.multiplier, op.shift], axis=1).astype("<i4")
    return table.tobytes()


class _Constants:
    def __init__(self, head: bytes = b"") -> None:
        self.blob = bytearray(head)  # the plan's constant operands come first (PartitionPlan.constants)

    def add(self, data: bytes) -> int:
        offset = _align(len(self.blob))
        self.blob += bytes(offset - len(self.blob)) + data
        return offset


# ---------------------------------------------------------------------------------------------
# One scheduler per op type: the SRAM a tile needs, the constants, the steps of one tile.


@dataclass
class _Kind:
    """How one op type tiles. ``rows`` / ``channels`` are the totals being tiled;
    ``buffers(r, cb)`` the SRAM buffers (name -> bytes) of a tile of r rows x cb channels."""

    rows: Callable[[NpuOp], int]
    channels: Callable[[NpuOp], int]
    buffers: Callable[[NpuOp, int, int], dict[str, int]]
    tile: Callable[[NpuOp, "_TileIo", int, int, int, int], list[Step]]  # (op, io, r0, nr, c0, nc)
    describe: Callable[[NpuOp], str]
    split_channels: bool = True  # False: a tile always holds every channel (a softmax row)


def _ofm_regs(addr: int, h: int, w: int, c: int) -> dict[Reg, int]:
    return {Reg.OFM_ADDR: addr, Reg.OFM_H: h, Reg.OFM_W: w, Reg.OFM_C: c}


def _window_regs(kernel, stride, pads) -> dict[Reg, int]:
    return {
        Reg.KERNEL_H: kernel[0], Reg.KERNEL_W: kernel[1], Reg.STRIDE_H: stride[0], Reg.STRIDE_W: stride[1],
        Reg.PAD_TOP: pads[0], Reg.PAD_LEFT: pads[1], Reg.PAD_BOTTOM: pads[2], Reg.PAD_RIGHT: pads[3],
    }  # fmt: skip


def _clamp_regs(op) -> dict[Reg, int]:
    return {Reg.ACT_MIN: op.act_min, Reg.ACT_MAX: op.act_max}


# Spatial ops with a window: Conv2D, DepthwiseConv2D, Pool.


def _kernel(op) -> tuple[int, int]:
    return tuple(int(k) for k in op.kernel)


def _spatial_buffers(op, r: int, cb: int) -> dict[str, int]:
    H, W, C = op.ifm.shape
    _, OW, _ = op.ofm.shape
    kh, kw = _kernel(op)
    ifm_c = C if isinstance(op, Conv2D) else cb
    bufs = {"ifm": _rows_needed(r, op.stride[0], kh, H) * W * ifm_c, "ofm": r * OW * cb}
    if isinstance(op, Conv2D):
        bufs = {"weights": cb * kh * kw * C, "requant": cb * REQUANT_RECORD_BYTES, **bufs}
    elif isinstance(op, DepthwiseConv2D):
        bufs = {"weights": cb * kh * kw, "requant": cb * REQUANT_RECORD_BYTES, **bufs}
    return bufs


_SPATIAL_OPCODE = {Conv2D: Opcode.CONV, DepthwiseConv2D: Opcode.DWCONV}


def _spatial_tile(op, io: "_TileIo", r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    H, W, C = op.ifm.shape
    _, OW, _ = op.ofm.shape
    kh, kw = _kernel(op)
    top, left, _, right = (int(p) for p in op.padding)  # the tile's bottom pad follows from its rows
    h0, nh, pad_top, pad_bottom = _window_span(r0, nr, op.stride[0], kh, top, H)
    per_channel_ifm = not isinstance(op, Conv2D)  # depthwise and pools: channel c reads channel c
    ic0, inc = (c0, nc) if per_channel_ifm else (0, C)
    steps: list[Step] = []
    ifm = io.load(steps, "ifm", op.ifm, h0, nh, 0, W, ic0, inc)
    ofm, store = io.store("ofm", op.ofm, r0, nr, 0, OW, c0, nc)
    regs = {Reg.IFM_ADDR: ifm, Reg.IFM_H: nh, Reg.IFM_W: W, Reg.IFM_C: inc}
    regs |= _ofm_regs(ofm, nr, OW, nc) | _clamp_regs(op)
    regs |= _window_regs((kh, kw), op.stride, (pad_top, left, pad_bottom, right))
    if isinstance(op, Pool):
        opcode = Opcode.AVGPOOL if op.pool == "avg" else Opcode.MAXPOOL
    else:
        opcode = _SPATIAL_OPCODE[type(op)]
        regs |= {Reg.IFM_ZERO_POINT: op.ifm_zero_point, Reg.OFM_ZERO_POINT: op.ofm_zero_point,
                 Reg.WEIGHT_ADDR: io.sram["weights"], Reg.REQUANT_ADDR: io.sram["requant"]}  # fmt: skip
    return [*steps, Kick.make(opcode, regs), *store]


def _describe_spatial(op) -> str:
    kh, kw = _kernel(op)
    return f"{op.kind} {'x'.join(map(str, op.ifm.shape))} -> {'x'.join(map(str, op.ofm.shape))}, kernel {kh}x{kw}"


# FullyConnected: rows are the W axis of (1, rows, K).


def _fc_buffers(op, r: int, cb: int) -> dict[str, int]:
    K = op.ifm.shape[2]
    return {"weights": cb * K, "requant": cb * REQUANT_RECORD_BYTES, "ifm": r * K, "ofm": r * cb}


def _fc_tile(op, io: "_TileIo", r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    K = op.ifm.shape[2]
    steps: list[Step] = []
    ifm = io.load(steps, "ifm", op.ifm, 0, 1, r0, nr, 0, K)
    ofm, store = io.store("ofm", op.ofm, 0, 1, r0, nr, c0, nc)
    regs = {Reg.IFM_ADDR: ifm, Reg.IFM_H: 1, Reg.IFM_W: nr, Reg.IFM_C: K,
            Reg.IFM_ZERO_POINT: op.ifm_zero_point, Reg.OFM_ZERO_POINT: op.ofm_zero_point,
            Reg.WEIGHT_ADDR: io.sram["weights"], Reg.REQUANT_ADDR: io.sram["requant"]}  # fmt: skip
    regs |= _ofm_regs(ofm, 1, nr, nc) | _clamp_regs(op)
    return [*steps, Kick.make(Opcode.FC, regs), *store]


def _describe_fc(op) -> str:
    _, rows, K = op.ifm.shape
    return f"fully_connected {rows} rows x {K} -> {op.ofm.shape[2]} features"


# Mean: channels only.


def _mean_buffers(op, r: int, cb: int) -> dict[str, int]:
    H, W, _ = op.ifm.shape
    return {"ifm": H * W * cb, "ofm": cb}


def _mean_tile(op, io: "_TileIo", r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    H, W, _ = op.ifm.shape
    steps: list[Step] = []
    ifm = io.load(steps, "ifm", op.ifm, 0, H, 0, W, c0, nc)
    ofm, store = io.store("ofm", op.ofm, 0, 1, 0, 1, c0, nc)
    regs = {Reg.IFM_ADDR: ifm, Reg.IFM_H: H, Reg.IFM_W: W, Reg.IFM_C: nc,
            Reg.IFM_ZERO_POINT: op.ifm_zero_point, Reg.OFM_ADDR: ofm,
            Reg.OFM_ZERO_POINT: op.ofm_zero_point, Reg.OFM_MULTIPLIER: op.multiplier,
            Reg.OFM_SHIFT: op.shift} | _clamp_regs(op)  # fmt: skip
    return [*steps, Kick.make(Opcode.MEAN, regs), *store]


# Elementwise: Add, Mul, Lut (no halo). A broadcast ifm2 is the tile's channel slice.


def _elementwise_buffers(op, r: int, cb: int) -> dict[str, int]:
    W = op.ofm.shape[1]
    bufs = {"lut": LUT_BYTES} if isinstance(op, Lut) else {}
    bufs |= {"ifm": r * W * cb}
    if isinstance(op, Add | Mul):
        bufs["ifm2"] = cb if op.broadcast else r * W * cb
    return bufs | {"ofm": r * W * cb}


def _ifm2_regs(op: Add | Mul, io: "_TileIo", steps: list[Step], r0: int, nr: int, c0: int, nc: int) -> dict[Reg, int]:
    """The second operand's registers (ADD, MUL): its tile, or its channel slice when broadcast."""
    box = (0, 1, 0, 1, c0, nc) if op.broadcast else (r0, nr, 0, op.ofm.shape[1], c0, nc)
    return {Reg.IFM2_ADDR: io.load(steps, "ifm2", op.ifm2, *box), Reg.IFM2_ZERO_POINT: op.ifm2_zero_point,
            Reg.IFM2_BROADCAST: int(op.broadcast), Reg.IFM_ZERO_POINT: op.ifm_zero_point,
            Reg.OFM_ZERO_POINT: op.ofm_zero_point} | _clamp_regs(op)  # fmt: skip


def _elementwise_tile(op, io: "_TileIo", r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    W = op.ofm.shape[1]
    steps: list[Step] = []
    ifm = io.load(steps, "ifm", op.ifm, r0, nr, 0, W, c0, nc)
    ofm, store = io.store("ofm", op.ofm, r0, nr, 0, W, c0, nc)
    regs = {Reg.IFM_ADDR: ifm} | _ofm_regs(ofm, nr, W, nc)
    if isinstance(op, Add):
        regs |= _ifm2_regs(op, io, steps, r0, nr, c0, nc) | {
            Reg.LEFT_SHIFT: op.left_shift, Reg.IFM_MULTIPLIER: op.ifm_multiplier, Reg.IFM_SHIFT: op.ifm_shift,
            Reg.IFM2_MULTIPLIER: op.ifm2_multiplier, Reg.IFM2_SHIFT: op.ifm2_shift,
            Reg.OFM_MULTIPLIER: op.ofm_multiplier, Reg.OFM_SHIFT: op.ofm_shift,
        }  # fmt: skip
        steps.append(Kick.make(Opcode.ADD, regs))
    elif isinstance(op, Mul):
        regs |= _ifm2_regs(op, io, steps, r0, nr, c0, nc)
        steps.append(Kick.make(Opcode.MUL, regs | {Reg.OFM_MULTIPLIER: op.multiplier, Reg.OFM_SHIFT: op.shift}))
    else:
        steps.append(Kick.make(Opcode.LUT, regs | {Reg.LUT_ADDR: io.sram["lut"]}))
    return steps + store


# Softmax: rows of pixels; a pixel's channels are one row of the softmax, never split.


def _softmax_buffers(op: Softmax, r: int, cb: int) -> dict[str, int]:
    W = op.ofm.shape[1]
    return {"table": SOFTMAX_TABLE_BYTES, "ifm": r * W * cb, "ofm": r * W * cb}


def _softmax_tile(op: Softmax, io: "_TileIo", r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    W = op.ofm.shape[1]
    steps: list[Step] = []
    ifm = io.load(steps, "ifm", op.ifm, r0, nr, 0, W, c0, nc)
    ofm, store = io.store("ofm", op.ofm, r0, nr, 0, W, c0, nc)
    regs = {Reg.IFM_ADDR: ifm, Reg.LUT_ADDR: io.sram["table"]} | _ofm_regs(ofm, nr, W, nc)
    return [*steps, Kick.make(Opcode.SOFTMAX, regs), *store]


def _describe_elementwise(op) -> str:
    return f"{op.kind} {'x'.join(map(str, op.ofm.shape))}"


# Phased ops (TransposeConv2D, Gather): their phases one after the other in the same buffers, each
# as large as the largest phase's; a tiling of r rows gives a phase min(r, its rows).


def _phase_rows(op: Phased) -> int:
    return max(KINDS[type(p)].rows(p) for p in op.phases)


def _phased_buffers(op: Phased, r: int, cb: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in op.phases:
        kind = KINDS[type(p)]
        for name, nbytes in kind.buffers(p, min(r, kind.rows(p)), cb).items():
            out[name] = max(out.get(name, 0), nbytes)
    return out


def _phased_tile(op, io, r0, nr, c0, nc) -> list[Step]:
    raise AssertionError("a phased op is scheduled phase by phase (_op_steps)")


def _phased(describe: Callable[[NpuOp], str]) -> _Kind:
    return _Kind(_phase_rows, lambda op: op.ofm.shape[2], _phased_buffers, _phased_tile, describe)


def _describe_transpose(op: TransposeConv2D) -> str:
    kh, kw = op.kernel
    return (f"{op.kind} {'x'.join(map(str, op.ifm.shape))} -> {'x'.join(map(str, op.ofm.shape))}, kernel {kh}x{kw}, "
            f"stride {op.stride[0]}x{op.stride[1]} ({len(op.phases)} phases)")  # fmt: skip


def _describe_resize(op: ResizeBilinear) -> str:
    shapes = f"{'x'.join(map(str, op.ifm.shape))} -> {'x'.join(map(str, op.ofm.shape))}"
    return f"bilinear resize {shapes} ({len(op.phases)} depthwise passes)"


def _describe_gather(op: Gather) -> str:
    return f"gather {'x'.join(map(str, op.ifm.shape))} -> {'x'.join(map(str, op.ofm.shape))} ({len(op.phases)} copies)"


_SPATIAL = _Kind(lambda op: op.ofm.shape[0], lambda op: op.ofm.shape[2], _spatial_buffers, _spatial_tile,
                 _describe_spatial)  # fmt: skip
_ELEMENTWISE = _Kind(lambda op: op.ofm.shape[0], lambda op: op.ofm.shape[2], _elementwise_buffers,
                     _elementwise_tile, _describe_elementwise)  # fmt: skip
KINDS: dict[type, _Kind] = {
    Conv2D: _SPATIAL,
    TransposeConv2D: _phased(_describe_transpose),
    DepthwiseConv2D: _SPATIAL,
    Pool: _SPATIAL,
    FullyConnected: _Kind(lambda op: op.ofm.shape[1], lambda op: op.ofm.shape[2], _fc_buffers, _fc_tile,
                          _describe_fc),  # fmt: skip
    Mean: _Kind(lambda op: 1, lambda op: op.ofm.shape[2], _mean_buffers, _mean_tile,
                lambda op: f"mean {'x'.join(map(str, op.ifm.shape))}"),  # fmt: skip
    Add: _ELEMENTWISE,
    Mul: _ELEMENTWISE,
    Lut: _ELEMENTWISE,
    Gather: _phased(_describe_gather),
    ResizeBilinear: _phased(_describe_resize),
    Softmax: _Kind(lambda op: op.ofm.shape[0], lambda op: op.ofm.shape[2], _softmax_buffers, _softmax_tile,
                   _describe_elementwise, split_channels=False),
}


# ---------------------------------------------------------------------------------------------
# Checks, tiling choice, the schedule


def _sram_layout(bufs: dict[str, int], base: int = 0) -> tuple[dict[str, int], int]:
    addrs, top = {}, base
    for name, nbytes in bufs.items():
        addrs[name] = top
        top += _align(nbytes)
    return addrs, top - base


def _work_buffers(op: NpuOp, rows: int, channels: int, resident=()) -> dict[str, int]:
    """The op's own SRAM buffers for a tile: every buffer but the resident operands'."""
    return {k: v for k, v in KINDS[type(op)].buffers(op, rows, channels).items() if k not in resident}


def tile_sram_bytes(op: NpuOp, rows: int, channels: int, resident=()) -> int:
    """SRAM a tile of ``rows`` output rows x ``channels`` output channels of ``op`` needs,
    less the buffers named in ``resident`` ("ifm", "ifm2", "ofm": tensors kept in SRAM)."""
    return _sram_layout(_work_buffers(op, rows, channels, resident))[1]


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
    kh, kw = _kernel(op)
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


def _constants_of(op: NpuOp, pool: _Constants) -> dict[str, tuple[int, int]]:
    """Place the op's constants in the blob: name -> (offset, bytes per output channel)."""
    if isinstance(op, Phased):  # per phase (a transposed conv's sub-kernels, a copy's identity LUT)
        return {"phases": [_constants_of(p, pool) for p in op.phases]}
    if isinstance(op, Conv2D | DepthwiseConv2D | FullyConnected):
        per_channel = int(np.prod(op.weights.shape[1:]))
        return {
            "weights": (pool.add(np.ascontiguousarray(op.weights, np.int8).tobytes()), per_channel),
            "requant": (pool.add(_requant_table(op)), REQUANT_RECORD_BYTES),
        }
    if isinstance(op, Lut):
        return {"lut": (pool.add(np.asarray(op.table, np.int8).tobytes()), 0)}
    if isinstance(op, Softmax):
        return {"table": (pool.add(np.asarray(op.table, "<i4").tobytes()), 0)}
    return {}


def _op_steps(op: NpuOp, tiling: Tiling, io: _TileIo, consts: dict[str, tuple[int, int]]) -> list[Step]:
    """The steps of one op: its LUT once, per channel block its weights and requantize block,
    then its row tiles. A phased op: the steps of each of its phases."""
    if isinstance(op, Phased):
        return [step for p, c in zip(op.phases, consts["phases"])
                for step in _op_steps(p, Tiling(min(tiling.rows, KINDS[type(p)].rows(p)), tiling.channels), io, c)]
    kind = KINDS[type(op)]
    rows, channels = kind.rows(op), kind.channels(op)
    steps: list[Step] = []
    for name, nbytes in (("lut", LUT_BYTES), ("table", SOFTMAX_TABLE_BYTES)):
        if name in consts:  # a table does not depend on the channel block: load it once
            steps.append(_load(consts[name][0], io.sram[name], nbytes))
    for block, c0 in enumerate(range(0, channels, tiling.channels)):
        nc = min(tiling.channels, channels - c0)
        bio = io.second_weights() if block % 2 and SECOND_WEIGHTS in io.sram else io
        for name in ("weights", "requant"):  # once per channel block
            if name in consts:
                offset, per_channel = consts[name]
                steps.append(_load(offset + c0 * per_channel, bio.sram[name], nc * per_channel))
        for tile, r0 in enumerate(range(0, rows, tiling.rows)):
            rio = bio.second_ifm() if tile % 2 and SECOND_IFM in io.sram else bio
            steps += kind.tile(op, rio, r0, min(tiling.rows, rows - r0), c0, nc)
    return steps


def schedule_op(op: NpuOp, hw: HwConfig, pool: _Constants, layer: str = "") -> tuple[Tiling, list[Step]]:
    """The tiling and steps of one op by itself (every operand staged through its region);
    its constants are appended to ``pool``."""
    check_geometry(op, layer or op.name)
    tiling = choose_tiling(op, hw, layer)
    sram, _ = _sram_layout(_work_buffers(op, tiling.rows, tiling.channels))
    return tiling, _op_steps(op, tiling, _TileIo(sram), _constants_of(op, pool))


# ---------------------------------------------------------------------------------------------
# The partition: which intermediate tensors stay in SRAM (residency), then every op's steps

_INPUT_BUFFERS = ("ifm", "ifm2")  # op.inputs[i] is staged in buffer _INPUT_BUFFERS[i]


def _resident_names(op: NpuOp, k: int, keys: dict[int, Buffer]) -> dict[str, int]:
    """The op's operands that are resident tensors: buffer name -> tensor key (SCRATCH offset)."""
    names = {}
    for name, ref in zip(_INPUT_BUFFERS, op.inputs):
        if _dense_scratch(ref) and ref.offset in keys and keys[ref.offset].start < k:
            names[name] = ref.offset
    if _dense_scratch(op.ofm) and op.ofm.offset in keys and keys[op.ofm.offset].start == k:
        names["ofm"] = op.ofm.offset
    return names


def _dense_scratch(ref: TensorRef) -> bool:
    """A SCRATCH tensor that can be resident: not a channel slice of a concatenation (those
    are written in place by several ops and read whole, so they are staged through SCRATCH)."""
    return ref.region == Region.SCRATCH and not ref.is_slice


def scratch_live_ranges(plan: PartitionPlan) -> dict[int, Buffer]:
    """Every SCRATCH tensor an op of ``plan`` writes and a later op reads, keyed by its offset
    in SCRATCH: a Buffer live from its producer to its last reader."""
    producer = {op.ofm.offset: k for k, op in enumerate(plan.ops) if _dense_scratch(op.ofm)}
    last: dict[int, int] = {}
    staged = set()  # read or written by a phased op: its phases address strided boxes
    for k, op in enumerate(plan.ops):
        for ref in op.inputs:
            if _dense_scratch(ref) and producer.get(ref.offset, k) < k:
                last[ref.offset] = k
        if isinstance(op, Phased):
            staged |= {op.ifm.offset, op.ofm.offset}
    last = {key: end for key, end in last.items() if key not in staged}
    return {key: Buffer(key, producer[key], end, plan.ops[producer[key]].ofm.nbytes) for key, end in last.items()}


class _Drop(Exception):
    """Residency of these tensors (keys) made the schedule impossible: stage them instead."""

    def __init__(self, *keys: int):
        super().__init__(keys)
        self.keys = keys


@dataclass
class _OpPlan:
    tiling: Tiling
    resident: dict[str, int]  # buffer name -> resident tensor key
    base: int  # where the op's own buffers start
    end: int  # the end of the free SRAM they lie in


def _double_buffers(op: NpuOp, tiling: Tiling, resident=()) -> dict[str, int]:
    """The op's buffers for ``tiling`` with a second weight and requantize buffer (channel blocks)."""
    bufs = _work_buffers(op, tiling.rows, tiling.channels, resident)
    if "weights" in bufs and tiling.channels < KINDS[type(op)].channels(op):
        bufs |= {SECOND_WEIGHTS: bufs["weights"], SECOND_REQUANT: bufs["requant"]}
    if "ifm" in bufs and tiling.rows < KINDS[type(op)].rows(op):
        bufs |= {SECOND_IFM: bufs["ifm"]}
    return bufs


def _split_rows(op: NpuOp, tiling: Tiling, hw: HwConfig, budget: int, resident=()) -> Tiling:
    """Overlapped schedules: a convolution or pool that is one tile and reads a staged input
    (a partition input, a tensor in SCRATCH) that takes more than ROW_SPLIT_MIN_CYCLES to load
    is cut into ROW_SPLIT_TILES row tiles with two input buffers, so it starts computing once
    the first tile's rows are in (when both buffers fit the free SRAM)."""
    kind = KINDS[type(op)]
    rows = kind.rows(op)
    if kind is not _SPATIAL or "ifm" in resident or tiling.rows < rows or rows < ROW_SPLIT_TILES:
        return tiling
    if op.ifm.nbytes / hw.dma_bytes_per_cycle <= ROW_SPLIT_MIN_CYCLES:
        return tiling
    split = Tiling(-(-rows // ROW_SPLIT_TILES), tiling.channels)
    return split if _sram_layout(_double_buffers(op, split, resident))[1] <= budget else tiling


def _split_weights(op: NpuOp, tiling: Tiling, hw: HwConfig, budget: int, resident=()) -> Tiling:
    """Overlapped schedules: a CONV or FC whose weights take longer to load than it computes, in
    one full-channel tile, is cut into channel blocks of at most 3/16 of the SRAM of weights and
    requantize records with two weight buffers, so each block loads while the one before it
    computes (when both buffers fit the free SRAM; otherwise ``tiling`` as it is)."""
    channels = op.ofm.shape[2]
    if not isinstance(op, Conv2D | FullyConnected) or tiling.channels < channels:
        return tiling
    per_channel = int(np.prod(op.weights.shape[1:])) + REQUANT_RECORD_BYTES
    block_bytes = hw.sram_bytes * SPLIT_SRAM_SIXTEENTHS // 16
    if per_channel * channels <= 2 * block_bytes:
        return tiling
    if per_channel * channels / hw.dma_bytes_per_cycle <= op.macs / (hw.array_rows * hw.array_cols):
        return tiling
    block = max(hw.array_rows, block_bytes // per_channel // hw.array_rows * hw.array_rows)
    split = Tiling(tiling.rows, min(block, channels))
    if _sram_layout(_double_buffers(op, split, resident))[1] > budget:
        return tiling
    return split


def _blocked_by_channel_blocks(op: NpuOp, names: dict[str, int]) -> list[int]:
    """The resident tensors an op cut in channel blocks cannot use: a channel block of a tensor
    is not one contiguous run of it (a Conv2D reads all input channels whatever its block)."""
    return [key for name, key in names.items() if name != "ifm" or not isinstance(op, Conv2D)]


def _plan_ops(plan: PartitionPlan, hw: HwConfig, keep: dict[int, Buffer],
              overlapped: bool = False) -> tuple[list[_OpPlan], dict[int, int]]:  # fmt: skip
    """Addresses of the tensors in ``keep`` and every op's tiling in the SRAM they leave free;
    raises _Drop when a tensor cannot be resident."""
    placed, unplaced = place(keep.values(), hw.sram_bytes, ALIGN)
    if unplaced:
        raise _Drop(*(b.key for b in unplaced))
    out = []
    for k, op in enumerate(plan.ops):
        layer = f"{plan.name}: {op.name}"
        check_geometry(op, layer)
        names = _resident_names(op, k, keep)
        live = sorted((b for b in keep.values() if b.live_at(k)), key=lambda b: -b.nbytes)
        addr, budget = largest_gap(placed, k, hw.sram_bytes, ALIGN)
        try:
            tiling = choose_tiling(op, hw, layer, budget, names)
        except LoweringError:
            if not live:
                raise
            raise _Drop(live[0].key) from None
        channels = KINDS[type(op)].channels(op)
        if overlapped and op.tiling is None:
            tiling = _split_rows(op, tiling, hw, budget, names)
            split = _split_weights(op, tiling, hw, budget, names)
            if split != tiling:
                blocked = _blocked_by_channel_blocks(op, names)
                if blocked:
                    raise _Drop(*blocked)
                tiling = split
                out.append(_OpPlan(tiling, names, addr, addr + budget))
                continue
        if tiling.channels < channels:
            if live and tile_sram_bytes(op, 1, channels, names) <= hw.sram_bytes:
                raise _Drop(live[0].key)  # resident tensors crowd out a full-channel tile: keep fewer
            blocked = _blocked_by_channel_blocks(op, names)
            if blocked:
                raise _Drop(*blocked)
        out.append(_OpPlan(tiling, names, addr, addr + budget))
    return out, {p.buffer.key: p.addr for p in placed}


def _clear_start(recent: list[tuple[int, int]], lo: int, hi: int, size: int) -> int:
    """Where in the free SRAM [lo, hi) ``size`` bytes go clear of the most recent spans in
    ``recent`` (oldest first): clear of as many of the latest ones as can be, the lowest such."""
    top = max(lo, (hi - size) // ALIGN * ALIGN)
    starts = sorted({lo, top} | {_align(b) for _, b in recent} | {(a - size) // ALIGN * ALIGN for a, _ in recent})
    starts = [a for a in starts if lo <= a <= top]
    for m in range(len(recent), 0, -1):
        for a in starts:
            if all(a + size <= x or y <= a for x, y in recent[-m:]):
                return a
    return lo


def _schedule(plan: PartitionPlan, hw: HwConfig, keep: dict[int, Buffer], overlapped: bool) -> Schedule:
    """The schedule with the tensors in ``keep`` resident; raises _Drop when one cannot be."""
    ops, base = _plan_ops(plan, hw, keep, overlapped)
    pool = _Constants(plan.constants)
    steps: list[Step] = []
    step_op: list[int] = []
    spans: list[tuple[int, int]] = []  # each op's own buffers
    for k, (op, p) in enumerate(zip(plan.ops, ops)):
        bufs = _work_buffers(op, p.tiling.rows, p.tiling.channels, p.resident)
        if overlapped:  # channel blocks and row tiles alternate two buffers where they fit
            double = _double_buffers(op, p.tiling, p.resident)
            if _sram_layout(double)[1] <= p.end - p.base:
                bufs = double
        start = p.base
        if overlapped:  # clear of the last ops' buffers, so its weights can load while they compute
            start = _clear_start(spans[-CLEAR_OPS:], p.base, p.end, _sram_layout(bufs)[1])
        sram, size = _sram_layout(bufs, start)
        spans.append((start, start + size))
        io = _TileIo(sram, {name: base[key] for name, key in p.resident.items()})
        try:
            op_steps = _op_steps(op, p.tiling, io, _constants_of(op, pool))
        except NotResident as err:
            raise _Drop(err.ref.offset) from None
        steps += op_steps
        step_op += [k] * len(op_steps)
    if overlapped:
        steps, step_op = overlap(steps, step_op, ALIGN, hw.dma_queue_depth, hw)
    region_bytes = {int(Region.CONST): len(pool.blob), int(Region.SCRATCH): plan.scratch_bytes}
    for io_tensor in [*plan.inputs, *plan.outputs]:
        region_bytes[io_tensor.ref.region] = io_tensor.ref.nbytes
    layers = [op.name for op in plan.ops]
    resident = {plan.ops[b.start].name: base[b.key] for b in keep.values()}
    return Schedule(plan.name, bytes(pool.blob), steps, step_op, layers, [p.tiling for p in ops], region_bytes,
                    resident)  # fmt: skip


def schedule_partition(plan: PartitionPlan, hw: HwConfig = DEFAULT_CONFIG, residency: bool = True,
                       overlapped: bool | None = None) -> Schedule:  # fmt: skip
    """Tile every op of ``plan`` to ``hw.sram_bytes`` and list its DMA transfers and kicks.

    With ``residency`` (the default), an intermediate tensor stays in SRAM from the op that
    writes it to the last op that reads it whenever it fits and every tile of those ops reads
    or writes it as one contiguous run (full-channel tiles); the others go through SCRATCH.
    With ``overlapped`` (default: ``hw.dma_overlap``), DMAs run in the background while the array computes
    (npu_byoc.codegen.overlap); without, every command runs to completion in turn.
    Raises LoweringError naming the layer when an op cannot be tiled."""
    keep = scratch_live_ranges(plan) if residency else {}
    overlapped = bool(hw.dma_overlap) if overlapped is None else overlapped
    while True:
        try:
            return _schedule(plan, hw, keep, overlapped)
        except _Drop as drop:  # each retry stages at least one more tensor: this terminates
            for key in drop.keys:
                del keep[key]



def op_failures(plan: PartitionPlan, hw: HwConfig = DEFAULT_CONFIG) -> dict[int, str]:
    """Dry run of :func:`schedule_partition` and the encoder: op index -> why that op cannot
    be scheduled or encoded (a register value outside its range), for every op that fails."""
    pool = _Constants(plan.constants)
    failures = {}
    for k, op in enumerate(plan.ops):
        try:
            _, steps = schedule_op(op, hw, pool, plan.layers[k] if k < len(plan.layers) else op.name)
            encode_with_starts(steps)
        except LoweringError as err:
            failures[k] = err.reason
        except ValueError as err:  # the encoder: a register value out of range
            failures[k] = str(err)
    return failures


__all__ = ["Schedule", "op_failures", "schedule_partition", "schedule_op", "choose_tiling", "fit_tiling",
           "untileable_reason", "is_untileable_reason", "check_geometry", "tile_sram_bytes", "scratch_live_ranges",
           "NotResident", "KINDS", "ALIGN"]
