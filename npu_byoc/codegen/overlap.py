"""DMA overlapped with compute: a sequential schedule rewritten for the background DMA engine.

The NPU's DMA engine copies one transfer at a time, in stream order, beside the compute units,
from a queue of ``hw.dma_queue_depth`` transfers (docs/isa.md, "Concurrency"): DMA_IN_ASYNC /
DMA_OUT_ASYNC queue a transfer and let the next command run (waiting only for room in the
queue), and WAIT_DMA waits until at most DMA_WAIT_PENDING transfers are outstanding. The
hardware holds a kick whose SRAM operands meet a DMA in flight (the interlock), but the cycle
model does not count that stall: this pass orders them with WAIT_DMAs itself (``races``
checks the result), and keeps the stream's meaning that of the sequential one:

0. *merge*: consecutive DMA_INs of constants that are one run in CONST and in SRAM up to
   the alignment padding between them (an op's weights and requantize table) become one
   transfer, so they can be prefetched together;
1. *prefetch*: DMA_INs move ahead of compute kicks, so they run while the array computes.
   A DMA_IN moves only ahead of steps it commutes with (their SRAM bytes untouched by it, no
   DMA_OUT among them writing the region it reads). With a queue (depth > 1) the pass walks
   the schedule on the cycle model's clock (``_prefetch_timed``): before each kick it issues
   the following DMA_INs, in schedule order, as long as the queue has a free slot at that
   cycle besides one kept for a DMA_OUT — however many kicks ahead they are, as far as the
   SRAM allows (the scheduler puts each op's buffers clear of up to ``CLEAR_OPS`` previous
   ops'). One deep, the largest DMA_IN the next kick needs moves ahead of the kick before it;
2. every DMA runs in the background; after a DMA is issued at most ``depth`` transfers (the
   last ones issued) are outstanding. Before a kick, a WAIT_DMA lets the latest in-flight
   transfer whose SRAM bytes meet the kick's complete: DMA_WAIT_PENDING = the transfers issued
   after it, which may go on.

The result runs in as many cycles as the sequential schedule or fewer (an async DMA followed
by a WAIT_DMA costs what the synchronous DMA costs).
"""

from __future__ import annotations

from dataclasses import replace

from ..arch.isa import REQUANT_RECORD_BYTES, SOFTMAX_TABLE_BYTES, Opcode, Reg, Region
from ..arch.encoder import Dma, Kick, Step

Span = tuple[int, int]  # [lo, hi) SRAM bytes
SKIP_KICKS = 16  # how far the timed prefetch looks past a DMA_IN it must leave in place

def wait(pending: int = 0) -> Kick:
    """WAIT_DMA until at most ``pending`` transfers are outstanding."""
    return Kick.make(Opcode.WAIT_DMA, {Reg.DMA_WAIT_PENDING: pending})


WAIT = wait(0)


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
    """ADD, MUL, SQDIFF: IFM2 is one OFM_C channel vector when IFM2_BROADCAST."""
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
    Opcode.SQDIFF: _binary_reads,
    Opcode.LUT: lambda k: [(Reg.IFM_ADDR, _hwc(k, "OFM")), (Reg.LUT_ADDR, 256)],
    Opcode.SOFTMAX: lambda k: [(Reg.IFM_ADDR, _hwc(k, "OFM")), (Reg.LUT_ADDR, SOFTMAX_TABLE_BYTES)],
    Opcode.LAYERNORM: lambda k: [(Reg.IFM_ADDR, _hwc(k, "OFM")), (Reg.REQUANT_ADDR, k[Reg.OFM_C] * REQUANT_RECORD_BYTES)],
}


def _ofm_bytes(k: Kick) -> int:
    return k[Reg.IFM_C] if k.opcode == Opcode.MEAN else _hwc(k, "OFM")


def touched(step: Step) -> tuple[list[Span], list[Span]]:
    """(reads, writes): the SRAM byte ranges a step reads and writes."""
    if isinstance(step, Dma):
        span = [(step.sram_addr, step.sram_addr + step.sram_bytes)]
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
    return d.n1 == d.n2 == 1 and d.stride0 == 1 and not d.decoded  # an encoded transfer decodes alone


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


def _prefetch(steps: list[Step], depth: int) -> tuple[list[Step], list[int]]:
    """Step 1: (steps, the index of each new step in ``steps``)."""
    order = list(range(len(steps)))
    kicks = [i for i, s in enumerate(steps) if isinstance(s, Kick)]
    for kick, after in zip(kicks, kicks[1:] + [len(steps)]):
        pos = order.index(kick)
        found: list[int] = []
        # one deep: the DMA_INs up to the next kick (each kick prefetches for the next); with a
        # queue, up to depth - 1 DMA_INs issued before this kick, from the next kicks' too
        prior = 0
        while pos - prior - 1 >= 0 and isinstance(steps[order[pos - prior - 1]], Dma):
            prior += 1
        room = depth - 1 - prior
        kicks_passed = 0
        for j in range(pos + 1, len(order)):
            s = steps[order[j]]
            if isinstance(s, Kick):
                kicks_passed += 1
                if depth == 1 or kicks_passed >= depth:
                    break
                continue
            if s.direction != Opcode.DMA_IN or (depth > 1 and len(found) >= room):
                continue
            # with a queue, the DMA_INs moved before this one stay before it
            if all(_commutes(s, steps[order[m]]) for m in range(pos, j) if depth == 1 or m not in found):
                found.append(j)
        if depth == 1:
            found = sorted(found, key=lambda j: steps[order[j]].nbytes)[-1:]
        picked = sorted(found)
        moved = [order[j] for j in picked]
        for j in reversed(picked):
            order.pop(j)
        order[pos:pos] = moved
    return [steps[i] for i in order], order


def _prefetch_timed(steps: list[Step], depth: int, hw) -> tuple[list[Step], list[int]]:
    """Step 1 with a queue (depth > 1): (steps, the index of each new step in ``steps``).

    Walk the sequential schedule on the cycle model's clock (npu_byoc.arch.cycles.Timeline,
    SET_REGs not counted). Before each compute kick, issue the DMA_INs that come after it, in
    schedule order, while the queue has a free slot at that cycle besides one kept for a
    DMA_OUT: each must commute with every step it passes (those still after it). A DMA_IN that
    does not commute is left in place and later ones may overtake it, for at most
    ``SKIP_KICKS`` kicks past it: the engine copies in issue order, so an overtaking load
    delays the one left behind, and further ahead that stops paying."""
    from ..arch.cycles import Timeline, step_cycles

    n = len(steps)
    spans = [touched(s) for s in steps]  # (reads, writes) of each step, asked again for every kick before it
    done = [False] * n
    order: list[int] = []
    clock = Timeline(depth)
    in_flight: list[Dma] = []

    def outstanding() -> int:
        return sum(e > clock.t for e in clock.ends[-depth:])

    def emit(i: int) -> None:
        nonlocal in_flight
        s = steps[i]
        done[i] = True
        order.append(i)
        if isinstance(s, Dma):
            in_flight = (in_flight + [s])[-depth:]
            clock.command(Opcode.DMA_IN_ASYNC, step_cycles(s, hw))
            return
        r, w = spans[i]
        hit = [k for k, dma in enumerate(in_flight) if _conflicts(dma, r, w)]
        if hit:
            clock.command(Opcode.WAIT_DMA, 0, len(in_flight) - 1 - hit[-1])
            in_flight = in_flight[hit[-1] + 1 :]
        clock.command(s.opcode, step_cycles(s, hw))

    for i, s in enumerate(steps):
        if done[i]:
            continue
        if isinstance(s, Kick) and s.opcode != Opcode.WAIT_DMA:
            blocked_at = None  # kicks passed when the first DMA_IN was left behind
            kicks = 0
            reads: list[Span] = []  # what the steps a candidate would pass touch
            out_regions: set[int] = set()
            for j in range(i, n):
                if outstanding() >= depth - 1:
                    break
                t = steps[j]
                if done[j]:
                    continue
                if j > i and isinstance(t, Dma) and t.direction == Opcode.DMA_IN:
                    if blocked_at is not None and kicks - blocked_at >= SKIP_KICKS:
                        break
                    w = spans[j][1]
                    ok = not _meets(w, reads) and (t.region == int(Region.CONST) or t.region not in out_regions)
                    if ok:
                        emit(j)
                        continue
                    if blocked_at is None:
                        blocked_at = kicks
                r, w = spans[j]
                reads += r + w
                if isinstance(t, Dma) and t.direction == Opcode.DMA_OUT:
                    out_regions.add(t.region)
                if isinstance(t, Kick) and t.opcode != Opcode.WAIT_DMA:
                    kicks += 1
        emit(i)
    return [steps[i] for i in order], order


def _conflicts(dma: Dma, reads: list[Span], writes: list[Span]) -> bool:
    dma_r, dma_w = touched(dma)
    return _meets(dma_w, reads + writes) or _meets(dma_r, writes)


def overlap(steps: list[Step], step_op: list[int], pad: int = 16, depth: int = 1,
            hw=None) -> tuple[list[Step], list[int]]:  # fmt: skip
    """The schedule ``steps`` with DMAs in the background (module docstring); ``step_op``
    (the op of each step) follows the steps, a WAIT_DMA belonging to the kick after it.
    ``pad``: constants' alignment (the SRAM padding between two of them is their own);
    ``depth``: the DMA queue's (HwConfig.dma_queue_depth); ``hw``: the configuration whose
    cycle model times the prefetch (None: prefetch by kick count alone)."""
    merged, merged_ops = _merge(list(steps), list(step_op), pad)
    if depth > 1 and hw is not None:
        moved, order = _prefetch_timed(merged, depth, hw)
    else:
        moved, order = _prefetch(merged, depth)
    ops = [merged_ops[i] for i in order]
    out: list[Step] = []
    out_ops: list[int] = []
    in_flight: list[Dma] = []  # transfers that may be outstanding, in issue order
    for n, step in enumerate(moved):
        if isinstance(step, Dma):
            step = replace(step, background=True)
            in_flight = (in_flight + [step])[-depth:]  # it waited for room: older ones are done
        elif step.opcode != Opcode.WAIT_DMA:
            r, w = touched(step)
            hit = [i for i, dma in enumerate(in_flight) if _conflicts(dma, r, w)]
            if hit:
                out.append(wait(len(in_flight) - 1 - hit[-1]))
                out_ops.append(ops[n])
                in_flight = in_flight[hit[-1] + 1 :]
        out.append(step)
        out_ops.append(ops[n])
    assert not races(out, depth), "the overlap pass left a kick meeting a DMA in flight"
    return out, out_ops


def races(steps: list[Step], depth: int) -> list[int]:
    """The kicks of ``steps`` (indices) that the NPU's DMA interlock would hold: an SRAM operand
    meets a background DMA that may still be in flight (docs/isa.md, "Concurrency"). The
    cycle model does not count that stall, so a compiled stream has none. A transfer counts as
    in flight from its issue until a WAIT_DMA, a synchronous DMA or ``depth`` later issues
    (each waits for room in the queue) rule it out — never less than the hardware's."""
    in_flight: list[Dma] = []
    found = []
    for n, step in enumerate(steps):
        if isinstance(step, Dma):
            in_flight = (in_flight + [step])[-depth:] if step.background else []
        elif step.opcode == Opcode.WAIT_DMA:
            pending = step[Reg.DMA_WAIT_PENDING]
            in_flight = in_flight[-pending:] if pending else []
        elif any(_conflicts(dma, *touched(step)) for dma in in_flight):
            found.append(n)
    return found


__all__ = ["overlap", "races", "touched", "wait", "WAIT"]
