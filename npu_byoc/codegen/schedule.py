"""Scheduling: a PartitionPlan of typed NPU ops -> tiles, DMA transfers and kicks (steps).

Each op is cut into tiles that fit the SRAM (npu_byoc.codegen.tiling: the tile sizes and the
SRAM they need) and each tile becomes DMA transfers and a kick (npu_byoc.codegen.tile_steps);
this module places every op's buffers in the SRAM and strings the ops' steps into the
partition's ``Schedule``.

Residency (``schedule_partition``): an intermediate tensor stays whole in SRAM from the op that
writes it to the last op that reads it (npu_byoc.codegen.residency places it), and those ops'
tiles address it in place instead of DMA_IN / DMA_OUT; the SRAM it leaves free at each op is
that op's budget for its own buffers. A tensor that does not fit, or that a channel-blocked
tile would read or write as a strided box, goes through SCRATCH as without residency.

Overlapped schedules (``hw.dma_overlap``): channel blocks and row tiles alternate two buffers
where they fit, and each op's buffers go clear of the previous ops', so that DMA runs in the
background while the array computes (npu_byoc.codegen.overlap).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import LoweringError
from ..arch.config import DEFAULT_CONFIG, HwConfig
from ..arch.isa import REQUANT_RECORD_BYTES, Opcode, Reg, Region
from ..arch.cycles import DMA_SETUP_CYCLES, kick_cycles
from ..arch.memory import memory, sustained_bytes_per_cycle
from ..util import escape
from ..arch.encoder import Step, disassemble, encode_with_starts
from .plan import PartitionPlan
from .residency import Buffer, largest_gap, place
from .weight_compress import compress_constants
from .overlap import overlap
from .tiling import (
    ALIGN, KINDS, SPATIAL_KIND, align, check_geometry, choose_tiling, kernel_of, sram_layout, tile_sram_bytes,
    work_buffers,
)  # fmt: skip
from .tile_steps import (
    SECOND_IFM, SECOND_REQUANT, SECOND_WEIGHTS, Constants, NotResident, TileIo, constants_of, op_steps,
)  # fmt: skip
from ..ops.npu_ops import Conv2D, FullyConnected, NpuOp, Phased, TensorRef, Tiling
from ..ops.registry import NPU_OPS

ROW_SPLIT_TILES = 4  # overlapped schedules: row tiles of a one-tile op whose staged input loads long
ROW_SPLIT_MIN_CYCLES = 512  # ... longer than this
# overlapped schedules: weights + requantize records per channel block of a load-bound CONV / FC,
# as a fraction of the SRAM (48 KiB of 256: two such buffers leave room for the next ops')
SPLIT_SRAM_SIXTEENTHS = 3
WEIGHT_RUN_BYTES = 4096  # a weight block's contiguous run, for the weights' memory's sustained bandwidth
CLEAR_OPS = 16  # overlapped schedules: an op's buffers go clear of up to this many previous ops' (prefetch distance)


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


def schedule_op(op: NpuOp, hw: HwConfig, pool: Constants, layer: str = "") -> tuple[Tiling, list[Step]]:
    """The tiling and steps of one op by itself (every operand staged through its region);
    its constants are appended to ``pool``."""
    check_geometry(op, layer or op.name)
    tiling = choose_tiling(op, hw, layer)
    sram, _ = sram_layout(work_buffers(op, tiling.rows, tiling.channels))
    return tiling, op_steps(op, tiling, TileIo(sram), constants_of(op, pool))


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
    # Read or written through a view (a strided box, a slice, the permuted view of a softmax over
    # the W axis) or by a phased op: those address the tensor's bytes in SCRATCH, so it is staged.
    staged = set()
    views = []
    for k, op in enumerate(plan.ops):
        for ref in op.inputs:
            if _dense_scratch(ref) and producer.get(ref.offset, k) < k:
                last[ref.offset] = k
        views += [ref.offset for ref in (*op.inputs, op.ofm) if ref.region == Region.SCRATCH and ref.is_slice]
        if isinstance(op, Phased):
            staged |= {ref.offset for ref in (*op.inputs, op.ofm)}
    nbytes = {key: plan.ops[producer[key]].ofm.nbytes for key in last}
    staged |= {key for key in last for v in views if key <= v < key + nbytes[key]}
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
    bufs = work_buffers(op, tiling.rows, tiling.channels, resident)
    if "weights" in bufs and tiling.channels < KINDS[type(op)].channels(op):
        bufs |= {SECOND_WEIGHTS: bufs["weights"], SECOND_REQUANT: bufs["requant"]}
    if "ifm" in bufs and tiling.rows < KINDS[type(op)].rows(op):
        bufs |= {SECOND_IFM: bufs["ifm"]}
    return bufs


def _split_rows(op: NpuOp, tiling: Tiling, hw: HwConfig, budget: int, resident=()) -> Tiling:
    """Overlapped schedules: a convolution, pool or interleave that is one tile and reads a staged input
    (a partition input, a tensor in SCRATCH) that takes more than ROW_SPLIT_MIN_CYCLES to load
    is cut into ROW_SPLIT_TILES row tiles with two input buffers, so it starts computing once
    the first tile's rows are in (when both buffers fit the free SRAM)."""
    kind = KINDS[type(op)]
    rows = kind.rows(op)
    splittable = kind is SPATIAL_KIND or NPU_OPS[type(op)].tiling == "interleave"  # an NCHW input's planes too
    if not splittable or "ifm" in resident or tiling.rows < rows or rows < ROW_SPLIT_TILES:
        return tiling
    if op.ifm.nbytes / hw.dma_bytes_per_cycle <= ROW_SPLIT_MIN_CYCLES:
        return tiling
    split = Tiling(-(-rows // ROW_SPLIT_TILES), tiling.channels)
    return split if sram_layout(_double_buffers(op, split, resident))[1] <= budget else tiling


def _weight_bandwidth(hw: HwConfig) -> float:
    """Bytes per core cycle the weights' memory sustains on long runs (its bursts, latency and
    reads in flight; the DMA port's width with the default memory)."""
    return sustained_bytes_per_cycle(memory(hw, "const_mem"), hw.dma_bytes_per_cycle, WEIGHT_RUN_BYTES)


def _split_weights(op: NpuOp, tiling: Tiling, hw: HwConfig, budget: int, resident=()) -> Tiling:
    """Overlapped schedules: a CONV or FC whose weights take longer to load than it computes, in
    one full-channel tile, is cut into channel blocks of at most 3/16 of the SRAM of weights and
    requantize records with two weight buffers, so each block loads while the one before it
    computes (when both buffers fit the free SRAM; otherwise ``tiling`` as it is). An op the SRAM
    already cuts into single-buffered channel blocks is cut so too when the estimate says the
    smaller, overlapped blocks are faster (_blocks_cost). Load times are on the weights' memory."""
    channels = op.ofm.shape[2]
    if not isinstance(op, Conv2D | FullyConnected):
        return tiling
    per_channel = int(np.prod(op.weights.shape[1:])) + REQUANT_RECORD_BYTES
    block_bytes = hw.sram_bytes * SPLIT_SRAM_SIXTEENTHS // 16
    if per_channel * channels <= 2 * block_bytes:
        return tiling
    if per_channel * channels / _weight_bandwidth(hw) <= op.macs / (hw.array_rows * hw.array_cols):
        return tiling
    # also when the SRAM already cuts it in (single-buffered) channel blocks: smaller blocks in
    # two buffers let each load under the previous block's compute
    block = max(hw.array_rows, block_bytes // per_channel // hw.array_rows * hw.array_rows)
    split = Tiling(tiling.rows, min(block, tiling.channels))
    if tiling.channels < channels and (_blocks_cost(op, split.channels, hw, True)
                                       >= _blocks_cost(op, tiling.channels, hw, False)):
        return tiling  # small blocks would pay more per block than the overlap saves
    if sram_layout(_double_buffers(op, split, resident))[1] > budget:
        return tiling
    return split


def _blocks_cost(op: Conv2D | FullyConnected, block: int, hw: HwConfig, double: bool) -> float:
    """Estimated cycles of ``op`` in channel blocks of ``block`` channels: each block's weight
    and requantize loads (their setups and latencies, the weights' memory's bandwidth) and its
    kicks, one after the other, or overlapped with ``double`` buffers."""
    channels = op.ofm.shape[2]
    per_channel = int(np.prod(op.weights.shape[1:])) + REQUANT_RECORD_BYTES
    load = block * per_channel / _weight_bandwidth(hw) + 2 * (DMA_SETUP_CYCLES + hw.const_mem_read_latency)
    # a staged input is read again per block and its output slice written (resident: less)
    load += op.ifm.nbytes / hw.dma_bytes_per_cycle + 2 * DMA_SETUP_CYCLES + hw.fm_mem_read_latency \
        + hw.fm_mem_write_latency
    oh, ow, _ = op.ofm.shape
    kh, kw = (1, 1) if isinstance(op, FullyConnected) else kernel_of(op)
    regs = {Reg.OFM_H: oh, Reg.OFM_W: ow, Reg.OFM_C: block, Reg.KERNEL_H: kh, Reg.KERNEL_W: kw,
            Reg.IFM_C: op.ifm.shape[2]}  # fmt: skip
    compute = kick_cycles(Opcode.FC if isinstance(op, FullyConnected) else Opcode.CONV, regs, hw)
    n = -(-channels // block)
    if double:
        return n * max(load, compute) + min(load, compute)
    return n * (load + compute)


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
    starts = sorted({lo, top} | {align(b) for _, b in recent} | {(a - size) // ALIGN * ALIGN for a, _ in recent})
    starts = [a for a in starts if lo <= a <= top]
    for m in range(len(recent), 0, -1):
        for a in starts:
            if all(a + size <= x or y <= a for x, y in recent[-m:]):
                return a
    return lo


def _schedule(plan: PartitionPlan, hw: HwConfig, keep: dict[int, Buffer], overlapped: bool) -> Schedule:
    """The schedule with the tensors in ``keep`` resident; raises _Drop when one cannot be."""
    ops, base = _plan_ops(plan, hw, keep, overlapped)
    pool = Constants(plan.constants)
    steps: list[Step] = []
    step_op: list[int] = []
    spans: list[tuple[int, int]] = []  # each op's own buffers
    for k, (op, p) in enumerate(zip(plan.ops, ops)):
        bufs = work_buffers(op, p.tiling.rows, p.tiling.channels, p.resident)
        if overlapped:  # channel blocks and row tiles alternate two buffers where they fit
            double = _double_buffers(op, p.tiling, p.resident)
            if sram_layout(double)[1] <= p.end - p.base:
                bufs = double
        start = p.base
        if overlapped:  # clear of the last ops' buffers, so its weights can load while they compute
            start = _clear_start(spans[-CLEAR_OPS:], p.base, p.end, sram_layout(bufs)[1])
        sram, size = sram_layout(bufs, start)
        spans.append((start, start + size))
        io = TileIo(sram, {name: base[key] for name, key in p.resident.items()})
        try:
            its_steps = op_steps(op, p.tiling, io, constants_of(op, pool))
        except NotResident as err:
            raise _Drop(err.ref.offset) from None
        steps += its_steps
        step_op += [k] * len(its_steps)
    constants = bytes(pool.blob)
    if hw.weight_decoder_bytes_per_cycle:  # CONST loads that load faster encoded are decoded on the way in
        steps, step_op, constants = compress_constants(steps, step_op, constants, hw)
    if overlapped:
        steps, step_op = overlap(steps, step_op, ALIGN, hw.dma_queue_depth, hw)
    region_bytes = {int(Region.CONST): len(constants), int(Region.SCRATCH): plan.scratch_bytes}
    for io_tensor in [*plan.inputs, *plan.outputs]:
        region_bytes[io_tensor.ref.region] = io_tensor.ref.nbytes
    layers = [op.name for op in plan.ops]
    resident = {plan.ops[b.start].name: base[b.key] for b in keep.values()}
    return Schedule(plan.name, constants, steps, step_op, layers, [p.tiling for p in ops], region_bytes,
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
    pool = Constants(plan.constants)
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


__all__ = ["Schedule", "op_failures", "schedule_partition", "schedule_op", "scratch_live_ranges"]
