"""NCHW partition inputs laid out NHWC on chip when that is faster (npu_byoc.ops.interleave).

An NCHW input's readers load it as one-byte DMA rows. The alternative is an Interleave: the
planes read as C contiguous runs, the MAC array's identity CONV writes them NHWC into SCRATCH,
and the readers load that as whole pixels. Which one is faster depends on the memory (a
one-byte row costs a burst and, every window of outstanding reads, the latency): the cycle
model decides, on the partition scheduled both ways (npu_byoc.arch.cycles.stream_cycles, which
the C model and the RTL equal)."""

from __future__ import annotations

from dataclasses import fields, replace

from ..arch import cycles
from ..arch.config import HwConfig
from ..arch.isa import Region
from ..errors import LoweringError
from ..ops.interleave import Interleave
from ..ops.npu_ops import NpuOp, TensorRef
from ..ops.registry import unit_reason
from .plan import PartitionPlan
from .schedule import schedule_partition
from .tiling import tile_sram_bytes

SCRATCH_ALIGN = 16


def interleave_inputs(plan: PartitionPlan, hw: HwConfig) -> PartitionPlan:
    """``plan`` with an Interleave before the readers of each NCHW input where the cycle model
    finds the partition faster with it; else ``plan`` unchanged."""
    best = None
    for index, io in enumerate(plan.inputs):
        candidate = _with_interleave(plan, index, io.ref, hw)
        if candidate is None:
            continue
        best = best if best is not None else _cycles(plan, hw)
        if best is None:
            return plan  # the partition does not schedule as it is: its own error will say why
        cost = _cycles(candidate, hw)
        if cost is not None and cost < best:
            plan, best = candidate, cost
    return plan


def _cycles(plan: PartitionPlan, hw: HwConfig) -> int | None:
    try:
        return cycles.stream_cycles(schedule_partition(plan, hw).steps, hw)
    except LoweringError:
        return None


def _with_interleave(plan: PartitionPlan, index: int, ref: TensorRef, hw: HwConfig) -> PartitionPlan | None:
    """``plan`` with input ``index`` (``ref``) interleaved into SCRATCH and its readers reading
    that; None when the input is not NCHW, its readers cannot take it or no kick fits."""
    h, w, c = ref.shape
    if ref.layout != "NCHW" or c == 1 or h * w == 1 or ref.box_strides is not None:
        return None
    readers = [k for k, op in enumerate(plan.ops) if ref in op.inputs]
    if not readers:
        return None
    offset = -(-plan.scratch_bytes // SCRATCH_ALIGN) * SCRATCH_ALIGN
    nhwc = TensorRef(ref.name, int(Region.SCRATCH), offset, ref.shape, "NHWC")  # the same tensor, NHWC
    moved = {k: _reading(plan.ops[k], ref, nhwc) for k in readers}
    if None in moved.values():
        return None
    op = _interleave(ref, nhwc, hw)
    if op is None:
        return None
    first = readers[0]
    ops = [moved.get(k, o) for k, o in enumerate(plan.ops)]

    def shifted(pairs):
        return tuple((k + (k >= first), v) for k, v in pairs)

    return replace(plan, ops=[*ops[:first], op, *ops[first:]],
                   layers=[*plan.layers[:first], op.name, *plan.layers[first:]],
                   scratch_bytes=offset + -(-ref.nbytes // SCRATCH_ALIGN) * SCRATCH_ALIGN,
                   copy_ops=shifted(plan.copy_ops), feature_orders=shifted(plan.feature_orders),
                   interleaves=tuple(sorted((*shifted(plan.interleaves), (first, index)))))  # fmt: skip


def _interleave(ref: TensorRef, nhwc: TensorRef, hw: HwConfig) -> Interleave | None:
    """The Interleave of ``ref`` with the most pixels a kick whose tile fits the SRAM."""
    h, w, c = ref.shape
    pixels = h * w
    while True:
        op = Interleave(f"{ref.name} [interleave]", ref, nhwc, pixels)
        if tile_sram_bytes(op.phases[0], 1, c) <= hw.sram_bytes:
            return None if unit_reason(op, hw) else op
        if pixels == 1:
            return None
        pixels = -(-pixels // 2)


def _reading(op: NpuOp, old: TensorRef, new: TensorRef) -> NpuOp | None:
    """``op`` with its operand fields that are ``old`` set to ``new``; None when it still reads
    ``old`` through another field (an operand inside a wrapped op)."""
    changes = {f.name: new for f in fields(op) if f.init and isinstance(getattr(op, f.name), TensorRef)
               and getattr(op, f.name) == old}  # fmt: skip
    out = replace(op, **changes)
    return None if old in out.inputs else out


__all__ = ["interleave_inputs"]
