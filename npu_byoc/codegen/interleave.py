"""NCHW partition inputs and outputs laid out on chip when that is faster (npu_byoc.ops.interleave).

An NCHW input's readers load it as one-byte DMA rows. The alternative is an Interleave: the
planes read as C contiguous runs, the MAC array's identity CONV writes them NHWC into SCRATCH,
and the readers load that as whole pixels; an NCHW output, likewise, is written NHWC and
deinterleaved plane by plane (one run each). Which one is faster depends on the memory (a
one-byte row costs a burst and, every window of outstanding reads, the latency): the cycle
model decides, on the partition scheduled both ways (npu_byoc.arch.cycles.stream_cycles, which
the C model and the RTL equal)."""

from __future__ import annotations

from dataclasses import fields, replace

from ..arch import cycles
from ..arch.config import HwConfig
from ..arch.isa import Region
from ..errors import LoweringError
from ..ops.interleave import Deinterleave, Interleave
from ..ops.npu_ops import NpuOp, TensorRef
from ..ops.registry import unit_reason
from .plan import PartitionPlan
from .schedule import schedule_partition

SCRATCH_ALIGN = 16


def interleave_io(plan: PartitionPlan, hw: HwConfig) -> PartitionPlan:
    """``plan`` with an Interleave before the readers of each NCHW input, and a Deinterleave
    after the producer of each NCHW output, where the cycle model finds the partition faster
    with it; else ``plan`` unchanged."""
    best = None
    candidates = [(_with_interleave, k, io.ref) for k, io in enumerate(plan.inputs)]
    candidates += [(_with_deinterleave, k, io.ref) for k, io in enumerate(plan.outputs)]
    for rewrite, index, ref in candidates:
        candidate = rewrite(plan, index, ref, hw)
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


def _planes(ref: TensorRef) -> bool:
    """An NCHW map whose pixels are not whole in memory: C > 1 planes of more than one byte."""
    h, w, c = ref.shape
    return ref.layout == "NCHW" and c > 1 and h * w > 1 and ref.box_strides is None


def _with_interleave(plan: PartitionPlan, index: int, ref: TensorRef, hw: HwConfig) -> PartitionPlan | None:
    """``plan`` with input ``index`` (``ref``) interleaved into SCRATCH and its readers reading
    that; None when the input is not NCHW planes, its readers cannot take it or the kick
    breaks a unit limit."""
    readers = [k for k, op in enumerate(plan.ops) if ref in op.inputs]
    if not _planes(ref) or not readers:
        return None
    plan, nhwc = _scratch_for(plan, ref)
    op = _checked(Interleave, f"{ref.name} [interleave]", ref, nhwc, hw)
    return _inserted(plan, ref, nhwc, op, readers[0], index, "interleaves")


def _with_deinterleave(plan: PartitionPlan, index: int, ref: TensorRef, hw: HwConfig) -> PartitionPlan | None:
    """``plan`` with output ``index`` (``ref``) written NHWC to SCRATCH by its producer (and
    read there by any later op) and deinterleaved into its region; None when it is not NCHW
    planes, no one op writes it whole or the kicks break a unit limit."""
    producers = [k for k, op in enumerate(plan.ops) if op.ofm == ref]
    if not _planes(ref) or len(producers) != 1:
        return None
    plan, nhwc = _scratch_for(plan, ref)
    op = _checked(Deinterleave, f"{plan.layers[producers[0]]} [deinterleave]", nhwc, ref, hw)
    return _inserted(plan, ref, nhwc, op, producers[0] + 1, index, "deinterleaves")


def _scratch_for(plan: PartitionPlan, ref: TensorRef) -> tuple[PartitionPlan, TensorRef]:
    """``plan`` with SCRATCH grown by an NHWC copy of ``ref`` (the same tensor and name)."""
    offset = -(-plan.scratch_bytes // SCRATCH_ALIGN) * SCRATCH_ALIGN
    nhwc = TensorRef(ref.name, int(Region.SCRATCH), offset, ref.shape, "NHWC")
    return replace(plan, scratch_bytes=offset + -(-ref.nbytes // SCRATCH_ALIGN) * SCRATCH_ALIGN), nhwc


def _inserted(plan: PartitionPlan, old: TensorRef, new: TensorRef, op, at: int, index: int,
              field: str) -> PartitionPlan | None:  # fmt: skip
    """``plan`` with every op's ``old`` operand or output retargeted to ``new`` and ``op`` inserted
    at ``at``, noted in ``plan.<field>`` as (at, ``index``); None if ``op`` is None or an op
    still addresses ``old`` through a wrapped op."""
    moved = [_retargeted(o, old, new) for o in plan.ops]
    if op is None or None in moved:
        return None

    def shifted(pairs):
        return tuple((k + (k >= at), v) for k, v in pairs)

    notes = {name: shifted(getattr(plan, name))
             for name in ("copy_ops", "feature_orders", "interleaves", "deinterleaves")}  # fmt: skip
    notes[field] = tuple(sorted((*notes[field], (at, index))))
    return replace(plan, ops=[*moved[:at], op, *moved[at:]], layers=[*plan.layers[:at], op.name, *plan.layers[at:]],
                   **notes)  # fmt: skip


def _checked(cls, name: str, ifm: TensorRef, ofm: TensorRef, hw: HwConfig):
    """``cls`` (Interleave or Deinterleave), or None when its kicks break a unit limit (the
    SRAM is the tiler's: a partition whose tiles cannot fit is not faster)."""
    op = cls(name, ifm, ofm)
    return None if unit_reason(op, hw) else op


def _retargeted(op: NpuOp, old: TensorRef, new: TensorRef) -> NpuOp | None:
    """``op`` with its tensor fields that are ``old`` set to ``new``; None when it still
    addresses ``old`` through another field (an operand inside a wrapped op)."""
    changes = {f.name: new for f in fields(op) if f.init and isinstance(getattr(op, f.name), TensorRef)
               and getattr(op, f.name) == old}  # fmt: skip
    out = replace(op, **changes) if changes else op
    return None if old in (*out.inputs, out.ofm) else out


__all__ = ["interleave_io"]
