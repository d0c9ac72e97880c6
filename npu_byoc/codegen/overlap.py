"""DMA overlapped with compute: a sequential schedule rewritten for the background DMA engine.

The NPU's DMA engine runs one transfer at a time, in stream order, beside the compute units
(docs/isa.md, "Concurrency"): DMA_IN_ASYNC / DMA_OUT_ASYNC start a transfer and let the next
command run; a later DMA waits for the engine, and WAIT_DMA waits until it is idle. The
hardware checks no hazard, so this pass keeps the stream's meaning that of the sequential one:

0. *merge*: consecutive DMA_INs of constants that are one run in CONST and in SRAM up to
   the alignment padding between them (an op's weights and requantize table) become one
   transfer, so they can be prefetched together;
1. *prefetch*: before each compute kick, one DMA_IN that a later kick needs moves ahead of it
   (the largest one that commutes with every step it passes: its SRAM bytes untouched by them,
   and no DMA_OUT among them writing the region it reads), so it runs while the kick computes;
2. every DMA runs in the background; since a DMA only starts once the previous one is done,
   at most the last one issued is in flight when a kick starts: a WAIT_DMA goes before the kick
   when that DMA's SRAM bytes meet the kick's.

The result runs in as many cycles as the sequential schedule or fewer (an async DMA followed
by a WAIT_DMA costs what the synchronous DMA costs).
"""

from __future__ import annotations

from dataclasses import replace

from ..isa import REQUANT_RECORD_BYTES, Opcode, Reg, Region
from .encoder import Dma, Kick, Step

Span = tuple[int, int]  # [lo, hi) SRAM bytes

WAIT = Kick(Opcode.WAIT_DMA, ())


def _hwc(k: Kick, prefix: str) -> int:
    return k[Reg[f"{prefix}_H"]] * k[Reg[f"{prefix}_W"]] * k[Reg[f"{prefix}_C"]]


def _weights(k: Kick) -> int:
    if k.opcode == Opcode.FC:
        return k[Reg.OFM_C] * k[Reg.IFM_C]
    window = k[Reg.KERNEL_H] * k[Reg.KERNEL_W]
    return k[Reg.OFM_C] * window * (k[Reg.IFM_C] if k.opcode == Opcode.CONV else 1)


def _mac_reads(k: Kick) -> list[tuple[Reg, int]]:
    return [(Reg.IFM_ADDR, _hwc(k, "IFM")), (Reg.WEIGHT_ADDR, _weights(k)),
            (Reg.REQUANT_ADDR, k[Reg.OFM_C] * REQUANT_RECORD_BYTES)]  # fmt: skip


def _binary_reads(k: Kick) -> list[tuple[Reg, int]]:
    """ADD, MUL: IFM2 is one OFM_C channel vector when IFM2_BROADCAST."""
    ifm2 = k[Reg.OFM_C] if k[Reg.IFM2_BROADCAST] else _hwc(k, "OFM")
    return [(Reg.IFM_ADDR, _hwc(k, "OFM")), (Reg.IFM2_ADDR, ifm2)]


# SRAM each kick reads: (address register, bytes); every kick writes its OFM.
_READS = {
    Opcode.CONV: _mac_reads,
    Opcode.DWCONV: _mac_reads,
    Opcode.FC: _mac_reads,
    Opcode.AVGPOOL: lambda k: [(Reg.IFM_ADDR, _hwc(k, "IFM"))],
    Opcode.MAXPOOL: lambda k: [(Reg.IFM_ADDR, _hwc(k, "IFM"))],
    Opcode.MEAN: lambda k: [(Reg.IFM_ADDR, _hwc(k, "IFM"))],
    Opcode.ADD: _binary_reads,
    Opcode.MUL: _binary_reads,
    Opcode.LUT: lambda k: [(Reg.IFM_ADDR, _hwc(k, "OFM")), (Reg.LUT_ADDR, 256)],
}


def _ofm_bytes(k: Kick) -> int:
    return k[Reg.IFM_C] if k.opcode == Opcode.MEAN else _hwc(k, "OFM")


def touched(step: Step) -> tuple[list[Span], list[Span]]:
    """(reads, writes): the SRAM byte ranges a step reads and writes."""
    if isinstance(step, Dma):
        span = [(step.sram_addr, step.sram_addr + step.nbytes)]
        return ([], span) if step.direction == Opcode.DMA_IN else (span, [])
    if step.opcode == Opcode.WAIT_DMA:
        return [], []
    reads = [(k[reg], k[reg] + n) for reg, n in _READS[step.opcode](step) for k in [step]]
    out = step[Reg.OFM_ADDR]
    return reads, [(out, out + _ofm_bytes(step))]


def _meets(a: list[Span], b: list[Span]) -> bool:
    return any(lo < hi2 and lo2 < hi for lo, hi in a for lo2, hi2 in b)


def _commutes(dma_in: Dma, step: Step) -> bool:
    """May ``dma_in`` run before ``step`` instead of after it?"""
    reads, writes = touched(step)
    if _meets(touched(dma_in)[1], reads + writes):
        return False
    # a DMA_OUT may write the external bytes this DMA_IN reads (CONST is never written)
    return not (isinstance(step, Dma) and step.direction == Opcode.DMA_OUT
                and dma_in.region != int(Region.CONST) and step.region == dma_in.region)  # fmt: skip


def _contiguous(d: Dma) -> bool:
    return d.n1 == d.n2 == 1 and d.stride0 == 1


def _merge(steps: list[Step], step_op: list[int], pad: int) -> tuple[list[Step], list[int]]:
    """Step 0: (steps, step_op)."""
    out: list[Step] = []
    ops: list[int] = []
    for step, k in zip(steps, step_op):
        prev = out[-1] if out else None
        if (isinstance(step, Dma) and isinstance(prev, Dma) and ops[-1] == k
                and step.direction == prev.direction == Opcode.DMA_IN
                and step.region == prev.region == int(Region.CONST) and _contiguous(step) and _contiguous(prev)):  # fmt: skip
            gap = step.sram_addr - prev.sram_addr
            if gap == step.ext_addr - prev.ext_addr and 0 <= gap - prev.n0 < pad:
                out[-1] = replace(prev, n0=gap + step.n0)
                continue
        out.append(step)
        ops.append(k)
    return out, ops


def _prefetch(steps: list[Step]) -> tuple[list[Step], list[int]]:
    """Step 1: (steps, the index of each new step in ``steps``)."""
    order = list(range(len(steps)))
    kicks = [i for i, s in enumerate(steps) if isinstance(s, Kick)]
    for kick, after in zip(kicks, kicks[1:] + [len(steps)]):
        pos = order.index(kick)
        best = None
        # DMA_INs between this kick and the next one, then those the next kick's own DMA_INs
        # are not: only the segment up to the next kick, so each kick prefetches for the next
        for j in range(pos + 1, len(order)):
            s = steps[order[j]]
            if isinstance(s, Kick):
                break
            if s.direction != Opcode.DMA_IN:
                continue
            if all(_commutes(s, steps[order[m]]) for m in range(pos, j)):
                if best is None or s.nbytes > steps[order[best]].nbytes:
                    best = j
        if best is not None:
            order.insert(pos, order.pop(best))
    return [steps[i] for i in order], order


def overlap(steps: list[Step], step_op: list[int], pad: int = 16) -> tuple[list[Step], list[int]]:
    """The schedule ``steps`` with DMAs in the background (module docstring); ``step_op``
    (the op of each step) follows the steps, a WAIT_DMA belonging to the kick after it.
    ``pad``: constants' alignment (the SRAM padding between two of them is their own)."""
    merged, merged_ops = _merge(list(steps), list(step_op), pad)
    moved, order = _prefetch(merged)
    ops = [merged_ops[i] for i in order]
    out: list[Step] = []
    out_ops: list[int] = []
    in_flight: Dma | None = None
    for n, step in enumerate(moved):
        if isinstance(step, Dma):
            step = replace(step, background=True)
            in_flight = step
        elif in_flight is not None and step.opcode != Opcode.WAIT_DMA:
            r, w = touched(step)
            dma_r, dma_w = touched(in_flight)
            if _meets(dma_w, r + w) or _meets(dma_r, w):
                out.append(WAIT)
                out_ops.append(ops[n])
                in_flight = None
        out.append(step)
        out_ops.append(ops[n])
    return out, out_ops


__all__ = ["overlap", "touched", "WAIT"]
