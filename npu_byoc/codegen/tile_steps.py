"""The steps of one NPU op for a given tiling: per tile its DMA boxes and kick, and its constants.

Loops run channel blocks outside, row tiles inside, so a weights/requantize block is loaded
once per channel block. Per tile: DMA_IN the input rows (halo included; PAD_TOP/PAD_BOTTOM
only where the tile touches the tensor's true border), kick, DMA_OUT the output tile into its
TensorRef (strided when the tile is a channel sub-block or the tensor is NCHW). An operand
kept resident in SRAM by the partition's schedule is addressed in place instead (``TileIo``).

Constants (weights OHWI / CxKHxKW / OxI, requantize tables of (bias, multiplier, shift) int32
LE records, LUTs) are packed into one blob, the CONST region, at 16-byte aligned offsets.

The tile sizes come from npu_byoc.codegen.tiling; npu_byoc.codegen.schedule places the
buffers and strings the ops' steps into a partition's schedule.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..arch.isa import REQUANT_RECORD_BYTES, SOFTMAX_TABLE_BYTES, Opcode, Reg, Region
from ..arch import numerics as nx
from ..arch.encoder import Dma, Kick, Step
from .dma_box import box_dma, is_one_run
from .tiling import KINDS, LUT_BYTES, align, kernel_of
from ..ops.npu_ops import (
    Add, Conv2D, DepthwiseConv2D, FullyConnected, Lut, Mul, NpuOp, Phased, Pool, Softmax, TensorRef, Tiling,
)  # fmt: skip
from ..ops.layernorm import LayerNorm
from ..ops.matmul import MatMulHead
from ..ops.broadcast import ChannelReplicated
from ..ops.interleave import Deinterleave, Interleave, pixels_view, planes_view
from ..ops.registry import NPU_OPS
from ..ops.squared_difference import SquaredDifference

SECOND_WEIGHTS, SECOND_REQUANT = "weights (2nd)", "requant (2nd)"  # double-buffered channel blocks
SECOND_IFM = "ifm (2nd)"  # double-buffered row tiles of a staged input


# ---------------------------------------------------------------------------------------------
# Geometry helpers


def _window_span(o0: int, n_out: int, stride: int, kernel: int, pad_before: int, size: int):
    """Input rows [lo, lo + n) that output rows [o0, o0 + n_out) read, and the virtual pad
    rows before/after them (non-zero only at the tensor's true border)."""
    first = o0 * stride - pad_before
    last = (o0 + n_out - 1) * stride - pad_before + kernel - 1
    lo, hi = max(first, 0), min(last, size - 1)
    return lo, hi - lo + 1, lo - first, last - hi


def _box(direction: Opcode, ref: TensorRef, sram_addr: int, h0: int, nh: int, w0: int, nw: int,
         c0: int, nc: int) -> Dma:  # fmt: skip
    """DMA of the box [h0:h0+nh, w0:w0+nw, c0:c0+nc] of ``ref`` to/from a dense HWC SRAM tile
    (i2 = h, i1 = w, i0 = c), its contiguous dimensions merged into long rows (dma_box)."""
    s_h, s_w, s_c = ref.strides
    ext = ref.offset + h0 * s_h + w0 * s_w + c0 * s_c
    return box_dma(direction, ref.region, ext, sram_addr, [(nc, s_c), (nw, s_w), (nh, s_h)])


class NotResident(Exception):
    """A tile reads or writes a box of a resident tensor that is not one contiguous run of it
    (a channel block): that tensor must be staged through external memory instead."""

    def __init__(self, ref: TensorRef):
        super().__init__(ref.name)
        self.ref = ref


def _run_offset(ref: TensorRef, h0: int, nh: int, w0: int, nw: int, c0: int, nc: int) -> int:
    """Byte offset, within ``ref``, of a box that is one contiguous run (else NotResident)."""
    dma = _box(Opcode.DMA_IN, ref, 0, h0, nh, w0, nw, c0, nc)
    if not is_one_run(dma):
        raise NotResident(ref)
    return dma.ext_addr - ref.offset


class TileIo:
    """Where a tile's feature maps are in SRAM. A *staged* operand is copied per tile by DMA
    into the op's own buffer (``sram``: buffer name -> address); a *resident* one is a whole
    tensor kept in SRAM (``resident``: buffer name -> the tensor's base address), read or
    written in place with no DMA."""

    def __init__(self, sram: dict[str, int], resident: dict[str, int] | None = None):
        self.sram, self.resident = sram, resident or {}

    def second_ifm(self) -> "TileIo":
        """The same buffers with the second input buffer in place of the first (double-buffered
        row tiles: the next tile's input loads while this one computes)."""
        return TileIo(self.sram | {"ifm": self.sram[SECOND_IFM]}, self.resident)

    def second_weights(self) -> "TileIo":
        """The same buffers with the second weight and requantize buffers in place of the first
        (double-buffered channel blocks: the next block loads while this one computes)."""
        swap = {"weights": self.sram[SECOND_WEIGHTS], "requant": self.sram[SECOND_REQUANT]}
        return TileIo(self.sram | swap, self.resident)

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


class Constants:
    def __init__(self, head: bytes = b"") -> None:
        self.blob = bytearray(head)  # the plan's constant operands come first (PartitionPlan.constants)

    def add(self, data: bytes) -> int:
        offset = align(len(self.blob))
        self.blob += bytes(offset - len(self.blob)) + data
        return offset


# ---------------------------------------------------------------------------------------------
# One tile per op type: its DMA_INs, its kick, its DMA_OUTs


def _ofm_regs(addr: int, h: int, w: int, c: int) -> dict[Reg, int]:
    return {Reg.OFM_ADDR: addr, Reg.OFM_H: h, Reg.OFM_W: w, Reg.OFM_C: c}


def _window_regs(kernel, stride, pads) -> dict[Reg, int]:
    return {
        Reg.KERNEL_H: kernel[0], Reg.KERNEL_W: kernel[1], Reg.STRIDE_H: stride[0], Reg.STRIDE_W: stride[1],
        Reg.PAD_TOP: pads[0], Reg.PAD_LEFT: pads[1], Reg.PAD_BOTTOM: pads[2], Reg.PAD_RIGHT: pads[3],
    }  # fmt: skip


def _clamp_regs(op) -> dict[Reg, int]:
    return {Reg.ACT_MIN: op.act_min, Reg.ACT_MAX: op.act_max}


_SPATIAL_OPCODE = {Conv2D: Opcode.CONV, DepthwiseConv2D: Opcode.DWCONV}


def _spatial_tile(op, io: "TileIo", r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    H, W, C = op.ifm.shape
    _, OW, _ = op.ofm.shape
    kh, kw = kernel_of(op)
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
        opcode = next(_SPATIAL_OPCODE[t] for t in type(op).__mro__ if t in _SPATIAL_OPCODE)  # a CONV form too
        regs |= {Reg.IFM_ZERO_POINT: op.ifm_zero_point, Reg.OFM_ZERO_POINT: op.ofm_zero_point,
                 Reg.WEIGHT_ADDR: io.sram["weights"], Reg.REQUANT_ADDR: io.sram["requant"]}  # fmt: skip
    return [*steps, Kick.make(opcode, regs), *store]


def _fc_tile(op, io: "TileIo", r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    K = op.ifm.shape[2]
    steps: list[Step] = []
    ifm = io.load(steps, "ifm", op.ifm, 0, 1, r0, nr, 0, K)
    ofm, store = io.store("ofm", op.ofm, 0, 1, r0, nr, c0, nc)
    regs = {Reg.IFM_ADDR: ifm, Reg.IFM_H: 1, Reg.IFM_W: nr, Reg.IFM_C: K,
            Reg.IFM_ZERO_POINT: op.ifm_zero_point, Reg.OFM_ZERO_POINT: op.ofm_zero_point,
            Reg.WEIGHT_ADDR: io.sram["weights"], Reg.REQUANT_ADDR: io.sram["requant"]}  # fmt: skip
    regs |= _ofm_regs(ofm, 1, nr, nc) | _clamp_regs(op)
    return [*steps, Kick.make(Opcode.FC, regs), *store]


def _mean_tile(op, io: "TileIo", r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    H, W, _ = op.ifm.shape
    steps: list[Step] = []
    ifm = io.load(steps, "ifm", op.ifm, 0, H, 0, W, c0, nc)
    ofm, store = io.store("ofm", op.ofm, 0, 1, 0, 1, c0, nc)
    regs = {Reg.IFM_ADDR: ifm, Reg.IFM_H: H, Reg.IFM_W: W, Reg.IFM_C: nc,
            Reg.IFM_ZERO_POINT: op.ifm_zero_point, Reg.OFM_ADDR: ofm,
            Reg.OFM_ZERO_POINT: op.ofm_zero_point, Reg.OFM_MULTIPLIER: op.multiplier,
            Reg.OFM_SHIFT: op.shift} | _clamp_regs(op)  # fmt: skip
    return [*steps, Kick.make(Opcode.MEAN, regs), *store]


def _ifm2_regs(op, io: "TileIo", steps: list[Step], r0: int, nr: int, c0: int, nc: int) -> dict[Reg, int]:
    """The second operand's registers (ADD, SQDIFF, MUL): its tile, or its channel slice when broadcast."""
    box = (0, 1, 0, 1, c0, nc) if op.broadcast else (r0, nr, 0, op.ofm.shape[1], c0, nc)
    return {Reg.IFM2_ADDR: io.load(steps, "ifm2", op.ifm2, *box), Reg.IFM2_ZERO_POINT: op.ifm2_zero_point,
            Reg.IFM2_BROADCAST: int(op.broadcast), Reg.IFM_ZERO_POINT: op.ifm_zero_point,
            Reg.OFM_ZERO_POINT: op.ofm_zero_point} | _clamp_regs(op)  # fmt: skip


# The ops on ADD's datapath (LEFT_SHIFT and three multiplier / shift pairs) and their opcodes.
_RESCALED = {Add: Opcode.ADD, SquaredDifference: Opcode.SQDIFF}


def _binary_kick(op: Add | SquaredDifference | Mul, regs: dict[Reg, int]) -> Kick:
    """ADD's, SQDIFF's or MUL's kick: ``regs`` (addresses, shapes, zero points, clamp) and its rescale."""
    if type(op) in _RESCALED:  # ADD's datapath: both inputs rescaled, then combined
        return Kick.make(_RESCALED[type(op)], regs | {
            Reg.LEFT_SHIFT: op.left_shift, Reg.IFM_MULTIPLIER: op.ifm_multiplier, Reg.IFM_SHIFT: op.ifm_shift,
            Reg.IFM2_MULTIPLIER: op.ifm2_multiplier, Reg.IFM2_SHIFT: op.ifm2_shift,
            Reg.OFM_MULTIPLIER: op.ofm_multiplier, Reg.OFM_SHIFT: op.ofm_shift,
        })  # fmt: skip
    return Kick.make(Opcode.MUL, regs | {Reg.OFM_MULTIPLIER: op.multiplier, Reg.OFM_SHIFT: op.shift})


def _elementwise_tile(op, io: "TileIo", r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    W = op.ofm.shape[1]
    steps: list[Step] = []
    ifm = io.load(steps, "ifm", op.ifm, r0, nr, 0, W, c0, nc)
    ofm, store = io.store("ofm", op.ofm, r0, nr, 0, W, c0, nc)
    regs = {Reg.IFM_ADDR: ifm} | _ofm_regs(ofm, nr, W, nc)
    if type(op) in _RESCALED or isinstance(op, Mul):
        steps.append(_binary_kick(op, regs | _ifm2_regs(op, io, steps, r0, nr, c0, nc)))
    else:
        steps.append(Kick.make(Opcode.LUT, regs | {Reg.LUT_ADDR: io.sram["lut"]}))
    return steps + store


def _softmax_tile(op: Softmax, io: "TileIo", r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    W = op.ofm.shape[1]
    steps: list[Step] = []
    ifm = io.load(steps, "ifm", op.ifm, r0, nr, 0, W, c0, nc)
    ofm, store = io.store("ofm", op.ofm, r0, nr, 0, W, c0, nc)
    regs = {Reg.IFM_ADDR: ifm, Reg.LUT_ADDR: io.sram["table"]} | _ofm_regs(ofm, nr, W, nc)
    return [*steps, Kick.make(Opcode.SOFTMAX, regs), *store]


def _layernorm_tile(op, io: "TileIo", r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    W = op.ofm.shape[1]
    steps: list[Step] = []
    ifm = io.load(steps, "ifm", op.ifm, r0, nr, 0, W, c0, nc)
    ofm, store = io.store("ofm", op.ofm, r0, nr, 0, W, c0, nc)
    regs = {Reg.IFM_ADDR: ifm, Reg.IFM_ZERO_POINT: op.ifm_zero_point, Reg.OFM_ZERO_POINT: op.ofm_zero_point,
            Reg.IFM_MULTIPLIER: op.epsilon_fx, Reg.IFM_SHIFT: op.frac_bits, Reg.REQUANT_ADDR: io.sram["requant"]}
    return [*steps, Kick.make(Opcode.LAYERNORM, regs | _ofm_regs(ofm, nr, W, nc) | _clamp_regs(op)), *store]


def _matmul_tile(op, io: "TileIo", r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    """A matmul head's rows: one CONV kick, its 1 x (1 + fold) kernel over the repeated rows."""
    _, taps, k = op.ifm.shape
    steps: list[Step] = []
    ifm = io.load(steps, "ifm", op.ifm, r0, nr, 0, taps, 0, k)
    ofm, store = io.store("ofm", op.ofm, r0, nr, 0, 1, c0, nc)
    regs = {Reg.IFM_ADDR: ifm, Reg.IFM_H: nr, Reg.IFM_W: taps, Reg.IFM_C: k,
            Reg.IFM_ZERO_POINT: op.ifm_zero_point, Reg.OFM_ZERO_POINT: op.ofm_zero_point,
            Reg.WEIGHT_ADDR: io.sram["weights"], Reg.REQUANT_ADDR: io.sram["requant"]}  # fmt: skip
    regs |= _ofm_regs(ofm, nr, 1, nc) | _clamp_regs(op) | _window_regs((1, taps), (1, 1), (0, 0, 0, 0))
    return [*steps, Kick.make(Opcode.CONV, regs), *store]


def _matmul_weights(op, io: "TileIo", c0: int, nc: int, consts: dict) -> list[Step]:
    """A matmul head's weights for output channels [c0, c0 + nc): the rhs columns DMA'd from
    the second operand, each followed by its fold blocks (one DMA of the constant rows first,
    then a DMA per column into its row; without a fold, one DMA of every column)."""
    k = op.ifm.shape[2]
    if not op.fold:
        return [_box(Opcode.DMA_IN, op.rhs, io.sram["weights"], 0, 1, c0, nc, 0, k)]
    row = (1 + op.fold) * k
    fill = Dma(Opcode.DMA_IN, int(Region.CONST), consts["fold"][0], io.sram["weights"], row, nc, 1, 1, 0, 0)
    return [fill] + [_box(Opcode.DMA_IN, op.rhs, io.sram["weights"] + j * row, 0, 1, c0 + j, 1, 0, k)
                     for j in range(nc)]  # fmt: skip


def _replicated_tile(op: ChannelReplicated, io: "TileIo", r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    """ops.broadcast: the vector's rows replicated over channels c0 .. c0 + nc by a 1x1 CONV into
    the "replicated" buffer, then the binary op's kick reading that buffer as its ifm2."""
    copy, binary, W = op.replicate, op.binary, op.ofm.shape[1]
    steps: list[Step] = []
    vector = io.load(steps, "ifm2", copy.ifm, r0, nr, 0, W, 0, 1)
    replicated = io.sram["replicated"]
    regs = {Reg.IFM_ADDR: vector, Reg.IFM_H: nr, Reg.IFM_W: W, Reg.IFM_C: 1,
            Reg.IFM_ZERO_POINT: copy.ifm_zero_point, Reg.OFM_ZERO_POINT: copy.ofm_zero_point,
            Reg.WEIGHT_ADDR: io.sram["weights"], Reg.REQUANT_ADDR: io.sram["requant"]}  # fmt: skip
    regs |= _ofm_regs(replicated, nr, W, nc) | _clamp_regs(copy) | _window_regs((1, 1), (1, 1), (0,) * 4)
    steps.append(Kick.make(Opcode.CONV, regs))
    ifm = io.load(steps, "ifm", binary.ifm, r0, nr, 0, W, c0, nc)
    ofm, store = io.store("ofm", binary.ofm, r0, nr, 0, W, c0, nc)
    regs = {Reg.IFM_ADDR: ifm, Reg.IFM2_ADDR: replicated, Reg.IFM2_ZERO_POINT: binary.ifm2_zero_point,
            Reg.IFM2_BROADCAST: 0, Reg.IFM_ZERO_POINT: binary.ifm_zero_point,
            Reg.OFM_ZERO_POINT: binary.ofm_zero_point} | _ofm_regs(ofm, nr, W, nc) | _clamp_regs(binary)  # fmt: skip
    return [*steps, _binary_kick(binary, regs), *store]


def _interleave_tile(op: Interleave, io: "TileIo", r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    """ops.interleave: image rows [r0, r0 + nr) of the planes, C runs of n = nr·W bytes, as the
    map (C, n, 1); one CONV kick, kernel C x 1, writes (1, n, C): the rows' NHWC pixels."""
    _, W, C = op.ifm.shape
    n = nr * W
    steps: list[Step] = []
    ifm = io.load(steps, "ifm", planes_view(op.ifm), 0, C, r0 * W, n, 0, 1)
    ofm, store = io.store("ofm", pixels_view(op.ofm), 0, 1, r0 * W, n, 0, C)
    regs = {Reg.IFM_ADDR: ifm, Reg.IFM_H: C, Reg.IFM_W: n, Reg.IFM_C: 1} | _identity_conv_regs(op, io, (C, 1))
    return [*steps, Kick.make(Opcode.CONV, regs | _ofm_regs(ofm, 1, n, C)), *store]


def _deinterleave_tile(op: Deinterleave, io: "TileIo", r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    """ops.interleave: rows [r0, r0 + nr) of the NHWC map, n = nr·W pixels; per plane c one 1x1
    CONV kick with one output channel (weights and record c: pick channel c) into slot c of the
    output buffer; one DMA writes the slots as C runs of n bytes, one per plane."""
    _, W, C = op.ifm.shape
    n = nr * W
    steps: list[Step] = []
    ifm = io.load(steps, "ifm", pixels_view(op.ifm), 0, 1, r0 * W, n, 0, C)
    ofm, store = io.store("ofm", planes_view(op.ofm), 0, C, r0 * W, n, 0, 1)
    regs = {Reg.IFM_ADDR: ifm, Reg.IFM_H: 1, Reg.IFM_W: n, Reg.IFM_C: C} | _identity_conv_regs(op, io, (1, 1))
    for c in range(C):
        plane = {Reg.WEIGHT_ADDR: io.sram["weights"] + c * C,
                 Reg.REQUANT_ADDR: io.sram["requant"] + c * REQUANT_RECORD_BYTES}  # fmt: skip
        steps.append(Kick.make(Opcode.CONV, regs | plane | _ofm_regs(ofm + c * n, 1, n, 1)))
    return [*steps, *store]


def _identity_conv_regs(op, io: "TileIo", kernel: tuple[int, int]) -> dict[Reg, int]:
    return {Reg.IFM_ZERO_POINT: op.ifm_zero_point, Reg.OFM_ZERO_POINT: op.ofm_zero_point,
            Reg.WEIGHT_ADDR: io.sram["weights"], Reg.REQUANT_ADDR: io.sram["requant"]} | _clamp_regs(op) | _window_regs(
                kernel, (1, 1), (0, 0, 0, 0))  # fmt: skip


def _phased_tile(op, io, r0, nr, c0, nc) -> list[Step]:
    raise AssertionError("a phased op is scheduled phase by phase (op_steps)")


# The kick of one tile, per tiling kind (NpuOpSpec.tiling); per op type from the registry.
TILE_STEPS_BY_KIND: dict[str, Callable[[NpuOp, TileIo, int, int, int, int], list[Step]]] = {  # (op, io, r0, nr, c0, nc)
    "spatial": _spatial_tile,
    "fully_connected": _fc_tile,
    "mean": _mean_tile,
    "elementwise": _elementwise_tile,
    "softmax": _softmax_tile,
    "layernorm": _layernorm_tile,
    "phased": _phased_tile,
    "matmul": _matmul_tile,
    "replicated": _replicated_tile,
    "interleave": _interleave_tile,
    "deinterleave": _deinterleave_tile,
}
TILE_STEPS = {npu_op: TILE_STEPS_BY_KIND[spec.tiling] for npu_op, spec in NPU_OPS.items()}
# Weights a kind loads per channel block from its operands rather than from the constants.
BLOCK_LOADS_BY_KIND = {"matmul": _matmul_weights}
BLOCK_LOADS = {npu_op: BLOCK_LOADS_BY_KIND[spec.tiling] for npu_op, spec in NPU_OPS.items()
               if spec.tiling in BLOCK_LOADS_BY_KIND}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# One op: its constants, its steps


def constants_of(op: NpuOp, pool: Constants) -> dict[str, tuple[int, int]]:
    """Place the op's constants in the blob: name -> (offset, bytes per output channel)."""
    if isinstance(op, Phased):  # per phase (a transposed conv's sub-kernels, a copy's identity LUT)
        if not op.shares_constants:
            return {"phases": [constants_of(p, pool) for p in op.phases]}
        placed: dict = {}  # phases with one weights array and requantize table share their bytes in the blob
        out = []
        for p in op.phases:
            # by value: a strided conv's row kicks (O, KH, 1, KW·C) and border kicks (O, KH, KW, C) hold the same bytes
            key = (p.weights.tobytes(), _requant_table(p)) if isinstance(p, Conv2D) else None
            if key is None or key not in placed:
                placed[key] = constants_of(p, pool)
            out.append(placed[key])
        return {"phases": out}
    if isinstance(op, ChannelReplicated):  # its CONV kicks' weights (ones) and identity requantize
        return constants_of(op.replicate, pool)
    if isinstance(op, Conv2D | DepthwiseConv2D | FullyConnected | Interleave | Deinterleave):
        per_channel = int(np.prod(op.weights.shape[1:]))
        return {
            "weights": (pool.add(np.ascontiguousarray(op.weights, np.int8).tobytes()), per_channel),
            "requant": (pool.add(_requant_table(op)), REQUANT_RECORD_BYTES),
        }
    if isinstance(op, MatMulHead):  # per-tensor requantize; the fold's constant weight rows
        n, k = op.ofm.shape[2], op.ifm.shape[2]
        table = np.tile(np.array([0, op.multiplier, op.shift], "<i4"), (n, 1))
        consts = {"requant": (pool.add(table.tobytes()), REQUANT_RECORD_BYTES)}
        if op.fold:
            consts["fold"] = (pool.add(op.weight_row(np.zeros(k, np.int8)).tobytes()), 0)
        return consts
    if isinstance(op, Lut):
        return {"lut": (pool.add(np.asarray(op.table, np.int8).tobytes()), 0)}
    if isinstance(op, Softmax):
        return {"table": (pool.add(np.asarray(op.table, "<i4").tobytes()), 0)}
    if isinstance(op, LayerNorm):  # its per-channel (g, b) records
        return {"requant": (pool.add(np.asarray(op.records, "<i4").tobytes()), REQUANT_RECORD_BYTES)}
    return {}


def op_steps(op: NpuOp, tiling: Tiling, io: TileIo, consts: dict[str, tuple[int, int]],
             in_sram: dict[str, Dma] | None = None) -> list[Step]:  # fmt: skip
    """The steps of one op: its LUT once, per channel block its weights and requantize block,
    then its row tiles. A phased op: the steps of each of its phases; where its phases share
    their constants (``shares_constants``: a strided conv's row and border kicks), a weights or
    requantize block still in its SRAM buffer from the phase before (``in_sram``: the last load
    of each buffer) is not loaded again."""
    if isinstance(op, Phased):
        in_sram = {} if op.shares_constants else None
        return [step for p, c in zip(op.phases, consts["phases"])
                for step in op_steps(p, Tiling(min(tiling.rows, KINDS[type(p)].rows(p)), tiling.channels), io, c,
                                     in_sram)]  # fmt: skip
    kind, emit_tile = KINDS[type(op)], TILE_STEPS[type(op)]
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
                load = _load(offset + c0 * per_channel, bio.sram[name], nc * per_channel)
                if in_sram is not None and in_sram.get(name) == load:
                    continue  # the same bytes at the same address: still there
                steps.append(load)
                if in_sram is not None:
                    in_sram[name] = load
        if type(op) in BLOCK_LOADS:
            steps += BLOCK_LOADS[type(op)](op, bio, c0, nc, consts)
        for tile, r0 in enumerate(range(0, rows, tiling.rows)):
            rio = bio.second_ifm() if tile % 2 and SECOND_IFM in io.sram else bio
            steps += emit_tile(op, rio, r0, min(tiling.rows, rows - r0), c0, nc)
    return steps


__all__ = ["TileIo", "Constants", "NotResident", "TILE_STEPS", "TILE_STEPS_BY_KIND", "constants_of", "op_steps", "SECOND_WEIGHTS",
           "SECOND_REQUANT", "SECOND_IFM"]
