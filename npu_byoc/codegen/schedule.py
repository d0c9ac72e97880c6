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
Nothing stays in SRAM between ops: every op reads its inputs from, and writes its output to,
its region (a later optimisation can chain tiles through SRAM).

Constants (weights OHWI / CxKHxKW / OxI, requantize tables of (bias, multiplier, shift) int32
LE records, LUTs) are packed into one blob, the CONST region, at 16-byte aligned offsets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import LoweringError
from ..hwconfig import DEFAULT_CONFIG, HwConfig
from ..isa import REQUANT_RECORD_BYTES, Opcode, Reg, Region
from .. import escape
from .. import numerics as nx
from .encoder import Dma, Kick, Step, disassemble, encode_with_starts
from .lower import PartitionPlan
from .npu_ops import Add, Conv2D, DepthwiseConv2D, FullyConnected, Lut, Mean, NpuOp, Pool, TensorRef, Tiling

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
    H, W, C = ref.shape
    s_h, s_w, s_c = (W * C, C, 1) if ref.layout == "NHWC" else (W, 1, H * W)
    ext = ref.offset + h0 * s_h + w0 * s_w + c0 * s_c
    dense = (1, nc, nc * nw)
    if all(n == 1 or s == d for n, s, d in zip((nc, nw, nh), (s_c, s_w, s_h), dense)):
        return Dma(direction, ref.region, ext, sram_addr, nc * nw * nh)
    return Dma(direction, ref.region, ext, sram_addr, nc, nw, nh, s_c, s_w, s_h)


def _load(region_offset: int, sram_addr: int, nbytes: int) -> Dma:
    return Dma(Opcode.DMA_IN, int(Region.CONST), region_offset, sram_addr, nbytes)


def _requant_table(op) -> bytes:
    if isinstance(op, FullyConnected):  # (bias, mantissa low word, mantissa high bits | exponent)
        table = np.stack([op.bias, *nx.pack_fc_scale(op.mantissa, op.exponent)], axis=1).astype("<i4")
        return table.tobytes()
    table = np.stack([op.bias, op.multiplier, op.shift], axis=1).astype("<i4")
    return table.tobytes()


class _Constants:
    def __init__(self) -> None:
        self.blob = bytearray()

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
    tile: Callable[[NpuOp, dict, int, int, int, int], list[Step]]  # (op, sram, r0, nr, c0, nc)
    describe: Callable[[NpuOp], str]


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


def _spatial_tile(op, sram: dict, r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    H, W, C = op.ifm.shape
    _, OW, _ = op.ofm.shape
    kh, kw = _kernel(op)
    top, left, _, right = (int(p) for p in op.padding)  # the tile's bottom pad follows from its rows
    h0, nh, pad_top, pad_bottom = _window_span(r0, nr, op.stride[0], kh, top, H)
    per_channel_ifm = not isinstance(op, Conv2D)  # depthwise and pools: channel c reads channel c
    ic0, inc = (c0, nc) if per_channel_ifm else (0, C)
    regs = {Reg.IFM_ADDR: sram["ifm"], Reg.IFM_H: nh, Reg.IFM_W: W, Reg.IFM_C: inc}
    regs |= _ofm_regs(sram["ofm"], nr, OW, nc) | _clamp_regs(op)
    regs |= _window_regs((kh, kw), op.stride, (pad_top, left, pad_bottom, right))
    if isinstance(op, Pool):
        opcode = Opcode.AVGPOOL if op.pool == "avg" else Opcode.MAXPOOL
    else:
        opcode = _SPATIAL_OPCODE[type(op)]
        regs |= {Reg.IFM_ZERO_POINT: op.ifm_zero_point, Reg.OFM_ZERO_POINT: op.ofm_zero_point,
                 Reg.WEIGHT_ADDR: sram["weights"], Reg.REQUANT_ADDR: sram["requant"]}  # fmt: skip
    return [
        _box(Opcode.DMA_IN, op.ifm, sram["ifm"], h0, nh, 0, W, ic0, inc),
        Kick.make(opcode, regs),
        _box(Opcode.DMA_OUT, op.ofm, sram["ofm"], r0, nr, 0, OW, c0, nc),
    ]


def _describe_spatial(op) -> str:
    kh, kw = _kernel(op)
    return f"{op.kind} {'x'.join(map(str, op.ifm.shape))} -> {'x'.join(map(str, op.ofm.shape))}, kernel {kh}x{kw}"


# FullyConnected: rows are the W axis of (1, rows, K).


def _fc_buffers(op, r: int, cb: int) -> dict[str, int]:
    K = op.ifm.shape[2]
    return {"weights": cb * K, "requant": cb * REQUANT_RECORD_BYTES, "ifm": r * K, "ofm": r * cb}


def _fc_tile(op, sram: dict, r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    K = op.ifm.shape[2]
    regs = {Reg.IFM_ADDR: sram["ifm"], Reg.IFM_H: 1, Reg.IFM_W: nr, Reg.IFM_C: K,
            Reg.IFM_ZERO_POINT: op.ifm_zero_point, Reg.OFM_ZERO_POINT: op.ofm_zero_point,
            Reg.WEIGHT_ADDR: sram["weights"], Reg.REQUANT_ADDR: sram["requant"]}  # fmt: skip
    regs |= _ofm_regs(sram["ofm"], 1, nr, nc) | _clamp_regs(op)
    return [
        _box(Opcode.DMA_IN, op.ifm, sram["ifm"], 0, 1, r0, nr, 0, K),
        Kick.make(Opcode.FC, regs),
        _box(Opcode.DMA_OUT, op.ofm, sram["ofm"], 0, 1, r0, nr, c0, nc),
    ]


def _describe_fc(op) -> str:
    _, rows, K = op.ifm.shape
    return f"fully_connected {rows} rows x {K} -> {op.ofm.shape[2]} features"


# Mean: channels only.


def _mean_buffers(op, r: int, cb: int) -> dict[str, int]:
    H, W, _ = op.ifm.shape
    return {"ifm": H * W * cb, "ofm": cb}


def _mean_tile(op, sram: dict, r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    H, W, _ = op.ifm.shape
    regs = {Reg.IFM_ADDR: sram["ifm"], Reg.IFM_H: H, Reg.IFM_W: W, Reg.IFM_C: nc,
            Reg.IFM_ZERO_POINT: op.ifm_zero_point, Reg.OFM_ADDR: sram["ofm"],
            Reg.OFM_ZERO_POINT: op.ofm_zero_point, Reg.OFM_MULTIPLIER: op.multiplier,
            Reg.OFM_SHIFT: op.shift} | _clamp_regs(op)  # fmt: skip
    return [
        _box(Opcode.DMA_IN, op.ifm, sram["ifm"], 0, H, 0, W, c0, nc),
        Kick.make(Opcode.MEAN, regs),
        _box(Opcode.DMA_OUT, op.ofm, sram["ofm"], 0, 1, 0, 1, c0, nc),
    ]


# Elementwise: Add, Lut (no halo).


def _elementwise_buffers(op, r: int, cb: int) -> dict[str, int]:
    W = op.ofm.shape[1]
    bufs = {"lut": LUT_BYTES} if isinstance(op, Lut) else {}
    bufs |= {"ifm": r * W * cb}
    if isinstance(op, Add):
        bufs["ifm2"] = r * W * cb
    return bufs | {"ofm": r * W * cb}


def _elementwise_tile(op, sram: dict, r0: int, nr: int, c0: int, nc: int) -> list[Step]:
    W = op.ofm.shape[1]
    steps: list[Step] = [_box(Opcode.DMA_IN, op.ifm, sram["ifm"], r0, nr, 0, W, c0, nc)]
    regs = {Reg.IFM_ADDR: sram["ifm"]} | _ofm_regs(sram["ofm"], nr, W, nc)
    if isinstance(op, Add):
        steps.append(_box(Opcode.DMA_IN, op.ifm2, sram["ifm2"], r0, nr, 0, W, c0, nc))
        regs |= _clamp_regs(op) | {
            Reg.IFM2_ADDR: sram["ifm2"], Reg.IFM_ZERO_POINT: op.ifm_zero_point,
            Reg.IFM2_ZERO_POINT: op.ifm2_zero_point, Reg.OFM_ZERO_POINT: op.ofm_zero_point,
            Reg.LEFT_SHIFT: op.left_shift, Reg.IFM_MULTIPLIER: op.ifm_multiplier, Reg.IFM_SHIFT: op.ifm_shift,
            Reg.IFM2_MULTIPLIER: op.ifm2_multiplier, Reg.IFM2_SHIFT: op.ifm2_shift,
            Reg.OFM_MULTIPLIER: op.ofm_multiplier, Reg.OFM_SHIFT: op.ofm_shift,
        }  # fmt: skip
        steps.append(Kick.make(Opcode.ADD, regs))
    else:
        steps.append(Kick.make(Opcode.LUT, regs | {Reg.LUT_ADDR: sram["lut"]}))
    steps.append(_box(Opcode.DMA_OUT, op.ofm, sram["ofm"], r0, nr, 0, W, c0, nc))
    return steps


def _describe_elementwise(op) -> str:
    return f"{op.kind} {'x'.join(map(str, op.ofm.shape))}"


_SPATIAL = _Kind(lambda op: op.ofm.shape[0], lambda op: op.ofm.shape[2], _spatial_buffers, _spatial_tile,
                 _describe_spatial)  # fmt: skip
_ELEMENTWISE = _Kind(lambda op: op.ofm.shape[0], lambda op: op.ofm.shape[2], _elementwise_buffers,
                     _elementwise_tile, _describe_elementwise)  # fmt: skip
KINDS: dict[type, _Kind] = {
    Conv2D: _SPATIAL,
    DepthwiseConv2D: _SPATIAL,
    Pool: _SPATIAL,
    FullyConnected: _Kind(lambda op: op.ofm.shape[1], lambda op: op.ofm.shape[2], _fc_buffers, _fc_tile,
                          _describe_fc),  # fmt: skip
    Mean: _Kind(lambda op: 1, lambda op: op.ofm.shape[2], _mean_buffers, _mean_tile,
                lambda op: f"mean {'x'.join(map(str, op.ifm.shape))}"),  # fmt: skip
    Add: _ELEMENTWISE,
    Lut: _ELEMENTWISE,
}


# ---------------------------------------------------------------------------------------------
# Checks, tiling choice, the schedule


def _sram_layout(bufs: dict[str, int]) -> tuple[dict[str, int], int]:
    addrs, top = {}, 0
    for name, nbytes in bufs.items():
        addrs[name] = top
        top += _align(nbytes)
    return addrs, top


def tile_sram_bytes(op: NpuOp, rows: int, channels: int) -> int:
    """SRAM a tile of ``rows`` output rows x ``channels`` output channels of ``op`` needs."""
    return _sram_layout(KINDS[type(op)].buffers(op, rows, channels))[1]


def _check_geometry(op: NpuOp, layer: str) -> None:
    """Shapes the kicks can run with: the output size formula, and no window entirely in
    padding."""
    if not isinstance(op, Conv2D | DepthwiseConv2D | Pool):
        return
    (H, W, _), (OH, OW, _) = op.ifm.shape, op.ofm.shape
    kh, kw = _kernel(op)
    top, left, bottom, right = op.padding
    sh, sw = op.stride
    expect = ((H + top + bottom - kh) // sh + 1, (W + left + right - kw) // sw + 1)
    if (OH, OW) != expect:
        raise LoweringError(
            f"layer '{layer}': output {OH}x{OW} disagrees with {expect[0]}x{expect[1]} from input "
            f"{H}x{W}, kernel {kh}x{kw}, stride {sh}x{sw}, padding {tuple(op.padding)}"
        )
    if max(top, bottom) >= kh or max(left, right) >= kw:
        # a window entirely in padding has no input element to tile (TFLite SAME never does this)
        raise LoweringError(f"layer '{layer}': padding {tuple(op.padding)} not smaller than the kernel {kh}x{kw}")


def choose_tiling(op: NpuOp, hw: HwConfig, layer: str = "") -> Tiling:
    """Full channels and as many rows as fit; else the largest channel block of one row.
    A preset ``op.tiling`` is used as given (after checking it fits)."""
    kind = KINDS[type(op)]
    rows, channels = kind.rows(op), kind.channels(op)

    def fits(r: int, cb: int) -> bool:
        return tile_sram_bytes(op, r, cb) <= hw.sram_bytes

    if op.tiling is not None:
        t = op.tiling
        if not (1 <= t.rows <= rows and 1 <= t.channels <= channels and fits(t.rows, t.channels)):
            raise LoweringError(f"layer '{layer or op.name}': tiling {t} does not fit {rows} rows x "
                                f"{channels} channels in {hw.sram_bytes} bytes of SRAM")  # fmt: skip
        return t
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
        blocks = -(-channels // (cb - 1)) if cb > 1 else channels + 1  # next smaller block size
    need = tile_sram_bytes(op, 1, 1)
    raise LoweringError(
        f"layer '{layer or op.name}' ({kind.describe(op)}): a 1-row x 1-channel tile needs {need} bytes "
        f"of SRAM, the NPU has {hw.sram_bytes}"
    )


def _constants_of(op: NpuOp, pool: _Constants) -> dict[str, tuple[int, int]]:
    """Place the op's constants in the blob: name -> (offset, bytes per output channel)."""
    if isinstance(op, Conv2D | DepthwiseConv2D | FullyConnected):
        per_channel = int(np.prod(op.weights.shape[1:]))
        return {
            "weights": (pool.add(np.ascontiguousarray(op.weights, np.int8).tobytes()), per_channel),
            "requant": (pool.add(_requant_table(op)), REQUANT_RECORD_BYTES),
        }
    if isinstance(op, Lut):
        return {"lut": (pool.add(np.asarray(op.table, np.int8).tobytes()), 0)}
    return {}


def schedule_op(op: NpuOp, hw: HwConfig, pool: _Constants, layer: str = "") -> tuple[Tiling, list[Step]]:
    """The tiling and steps of one op; its constants are appended to ``pool``."""
    _check_geometry(op, layer or op.name)
    kind = KINDS[type(op)]
    tiling = choose_tiling(op, hw, layer)
    sram, _ = _sram_layout(kind.buffers(op, tiling.rows, tiling.channels))
    consts = _constants_of(op, pool)
    rows, channels = kind.rows(op), kind.channels(op)
    steps: list[Step] = []
    if "lut" in consts:  # the table does not depend on the channel block: load it once
        steps.append(_load(consts["lut"][0], sram["lut"], LUT_BYTES))
    for c0 in range(0, channels, tiling.channels):
        nc = min(tiling.channels, channels - c0)
        for name in ("weights", "requant"):  # once per channel block
            if name in consts:
                offset, per_channel = consts[name]
                steps.append(_load(offset + c0 * per_channel, sram[name], nc * per_channel))
        for r0 in range(0, rows, tiling.rows):
            steps += kind.tile(op, sram, r0, min(tiling.rows, rows - r0), c0, nc)
    return tiling, steps


def schedule_partition(plan: PartitionPlan, hw: HwConfig = DEFAULT_CONFIG) -> Schedule:
    """Tile every op of ``plan`` to ``hw.sram_bytes`` and list its DMA transfers and kicks.
    Raises LoweringError naming the layer when an op cannot be tiled."""
    pool = _Constants()
    steps: list[Step] = []
    step_op: list[int] = []
    tilings: list[Tiling] = []
    layers = [op.name for op in plan.ops]
    for k, op in enumerate(plan.ops):
        tiling, op_steps = schedule_op(op, hw, pool, f"{plan.name}: {layers[k]}")
        tilings.append(tiling)
        steps += op_steps
        step_op += [k] * len(op_steps)
    region_bytes = {int(Region.CONST): len(pool.blob), int(Region.SCRATCH): plan.scratch_bytes}
    for io in [*plan.inputs, *plan.outputs]:
        region_bytes[io.ref.region] = io.ref.nbytes
    return Schedule(plan.name, bytes(pool.blob), steps, step_op, layers, tilings, region_bytes)


__all__ = ["Schedule", "schedule_partition", "schedule_op", "choose_tiling", "tile_sram_bytes", "KINDS", "ALIGN"]
