"""The analytic cycle model of the NPU: the clock cycles the RTL (hw/rtl) takes per command.

FINN's habit: the model predicts what the hardware does, and the tests check it against the
RTL simulation — exactly, per command, on every fixture schedule (tests/test_cycles.py,
tests/test_rtl_stream.py; docs/cosim.md §5 states the same formulas). The C functional model
(npu_byoc/runtime/csrc/npu_functional.cc) reports the same numbers in
``npu_result_t.cycles``; tests/test_functional.py checks the two agree.

A run's cycles are the fetch of every word it executes plus each command's own cycles. With
R = ``hw.array_rows`` (output channels), C = ``hw.array_cols`` (columns of the MAC array, and
lanes of the vector unit):

=========  ==================================================================================
fetch      1 cycle per stream word: the header's 3 words, SET_REG 2, every other command 1
           (a kick's fetch is the first cycle of the RTL trace entry of that kick)
DMA        ``DMA_SETUP_CYCLES + N2·N1·ceil(N0 / D)`` when ``DMA_STRIDE0 == 1`` (a row is
           contiguous on both sides), else ``DMA_SETUP_CYCLES + N2·N1·N0`` (one byte per
           cycle); D = ``hw.dma_bytes_per_cycle``; setup = the two check cycles, start, the
           first request and done. That is the default memory's; a memory with latency,
           bursts or a lower bandwidth replaces the request count with its cycles
           (npu_byoc.arch.memory: ``DMA_SETUP_CYCLES + d_N``)
DMA_IN_    ``DMA_SETUP_CYCLES + d_N + DECODE_HEADER_CYCLES + ceil(DMA_DECODE_BYTES / W)``: d_N
DECODE     of the DMA_N0 encoded bytes read as one contiguous row into the decoder's buffer,
           then its header check, then W = ``hw.weight_decoder_bytes_per_cycle`` bytes of SRAM
           a cycle (load, then decode: the code's header, palette and bitmap precede the
           values, so no byte can be written before the whole code is in; hw/rtl/npu_wdec.v)
CONV,      ``MAC_SETUP_CYCLES + ceil(OFM_C/C) + R + (B − 1)·max(K, R) + K`` with K the taps of
DWCONV,    the reduction (CONV ``KH·KW·IFM_C``, DWCONV ``KH·KW``, FC ``IFM_C``) and B the
FC         blocks of the kick (``mac_blocks``): the ``P·ceil(OFM_C/R)`` items (P output pixels,
           FC: rows; pixel-major) taken C at a time, a block ending early when a fifth channel
           block would need a weight lane (``MAC_WEIGHT_LANES``). ceil(OFM_C/C): the
           requantize-table scan (C records per cycle); R: the last block's drain; a block
           takes max(K, R) cycles because its drain (R cycles) overlaps the next reduction
AVGPOOL,   ``VECTOR_SETUP_CYCLES + OFM_H·OFM_W·ceil(OFM_C/C)·KERNEL_H·KERNEL_W``
MAXPOOL
MEAN       ``VECTOR_SETUP_CYCLES + IFM_H·IFM_W·ceil(IFM_C/C)``
ADD, MUL,  ``VECTOR_SETUP_CYCLES + ceil(OFM_H·OFM_W·OFM_C / C)``; with IFM2_BROADCAST
           ``VECTOR_SETUP_CYCLES + OFM_H·OFM_W·ceil(OFM_C/C)`` (pixel by pixel, the channel
           vector read again at each)
SQDIFF
LUT        ``VECTOR_SETUP_CYCLES + ceil(256/C) + ceil(OFM_H·OFM_W·OFM_C / C)`` (the table is
           loaded into registers first)
SOFTMAX    ``VECTOR_SETUP_CYCLES + ceil(1024/C) + OFM_H·OFM_W·(3·ceil(OFM_C/C) + 4)``: the int32
           table, then per row a max, a sum and an output pass and the 4 reciprocal steps
LAYERNORM  ``VECTOR_SETUP_CYCLES + OFM_H·OFM_W·(ceil(OFM_C/C) + 100 + ceil(12·OFM_C/C))``: per
           pixel a sum pass, the 100-step 1/sqrt and an output pass over the 12-byte records
           (x read again beside each group's last record chunk)
NOP, STOP  fetch only
=========  ==================================================================================

Concurrency (ISA 1.1): the DMA engine copies transfers one at a time, in stream order, beside
the command processor, from a queue of ``hw.dma_queue_depth`` transfers (the one being copied
included). Transfers j = 1, 2, ... complete at cycles e_j (the first cycle they no longer count
as outstanding; e_0 = 0, and e_j = 0 for j <= 0); with t the cycle a command's word is fetched
(decoded) and J the transfers issued before it, a command that needs the engine starts at ``a``:

=============  ==================================================================================
DMA_IN/OUT     ``a = max(t, e_J)``; next command fetched at ``a + 1 + dma``; ``e = a + dma``
…_ASYNC        ``a = max(t, e_{J-Q+1})`` (room in the queue of depth Q); next command at
               ``a + ASYNC_ISSUE_CYCLES + 1`` (the copy's checks);
               ``e = max(a + dma, e_J + dma - QUEUE_HANDOFF_CYCLES)``: queued behind a copy, it
               starts the cycle that one completes, its checks already done
WAIT_DMA       ``a = max(t, e_{J-n})`` with n = DMA_WAIT_PENDING; next command at ``a + 1``
STOP           the run ends (done) at ``max(t, e_J) + 1``; a run that fails also waits for the
               engine
=============  ==================================================================================

With a memory of latency > 0 a transfer's ``dma`` depends on the bursts in flight before it:
a queued one's requests go out while the one before it streams (``Timeline`` given ``hw``,
npu_byoc.arch.memory.InFlight; docs/memory.md "Across transfers"), so ``e`` may come sooner
than the table says. Compute kicks do not wait for the engine. Without background DMAs, ``E <= t`` always and a run
is the sum of its commands. ``stream_cycles(steps, hw)`` is the RTL's ``cycles`` (start pulse
to done) of ``encode(steps)``; ``command_timeline`` its per-command trace cycles.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .config import DEFAULT_CONFIG, HwConfig
from .isa import ASYNC_DMA, DECODE_DMA, DMA_OPCODES, REQUANT_RECORD_BYTES, SOFTMAX_TABLE_BYTES, Opcode, Reg
from .memory import InFlight, dma_memory_cycles, memory, memory_name, transfer_cycles

DMA_SETUP_CYCLES = 5  # fixed cycles of a DMA: its checks (2), start, the first request's latency, done
MAC_SETUP_CYCLES = 14  # checks 3, start 1, table-scan pipeline 3, first block 1, array pipeline 2,
#                       last drain's tail 3, done 1 (docs/cosim.md §5)
MAC_WEIGHT_LANES = 4  # channel blocks one MAC block may span (npu_top's LANES)
VECTOR_SETUP_CYCLES = 8  # fixed cycles of a vector kick: checks, start, the three-stage pipeline, done
LUT_BYTES = 256
SOFTMAX_RECIP_CYCLES = 4  # GetReciprocal: the initial estimate, three Newton-Raphson steps
# LAYERNORM's per-pixel 1/sqrt (hw/rtl/npu_vec.v), one bit a cycle: V and the normalized A (1),
# the 65-bit quotient 2^124 / A' (65), its 33-bit integer square root (33), the exponent (1).
LAYERNORM_RSQRT_CYCLES = 100
ASYNC_ISSUE_CYCLES = 3  # a background DMA holds the command processor for its start and checks
QUEUE_HANDOFF_CYCLES = 2  # the checks a queued transfer has done before the mover takes it
DMA_READY_CYCLES = 3  # from the cycle a DMA acts to its descriptor queued: start and the two checks
DMA_DONE_CYCLES = DMA_SETUP_CYCLES - DMA_READY_CYCLES  # from the last burst's end: the last write, done
DECODE_HEADER_CYCLES = 1  # the weight decoder checks a loaded code's header before its first write


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def dma_cycles(n0: int, n1: int = 1, n2: int = 1, stride0: int = 1, hw: HwConfig = DEFAULT_CONFIG,
               region: int = 0, write: bool = False) -> int:  # fmt: skip
    """Cycles of a DMA of n2 × n1 × n0 bytes whose region-side innermost stride is ``stride0``
    (not counting the fetch of its word), on the memory of ``region`` (``write``: DMA_OUT):
    the setup and the memory's cycles (npu_byoc.arch.memory; with its defaults one request per
    cycle, ``N2·N1·ceil(N0/D)`` or ``N2·N1·N0``)."""
    return DMA_SETUP_CYCLES + dma_memory_cycles(n0, n1, n2, stride0, hw, region, write)


def decode_dma_cycles(encoded: int, decoded: int, hw: HwConfig = DEFAULT_CONFIG, region: int = 0) -> int:
    """Cycles of a DMA_IN_DECODE (not counting the fetch of its word): the read of ``encoded``
    contiguous bytes on the memory of ``region`` into the decoder's buffer, its header check,
    then the decoder's ``decoded`` bytes of SRAM writes, one after the other (the RTL's
    npu_wdec loads a whole code before it decodes: the same cycles whatever the data)."""
    read = transfer_cycles(1, encoded, hw.dma_bytes_per_cycle, memory(hw, memory_name(region)), False)
    return DMA_SETUP_CYCLES + read + _after_load(decoded, hw)


def _after_load(decoded: int, hw: HwConfig) -> int:
    """A decode's cycles once its code is loaded: the header check, then W bytes a cycle."""
    return DECODE_HEADER_CYCLES + _ceil_div(decoded, max(hw.weight_decoder_bytes_per_cycle, 1))


def mac_blocks(pixels: int, channel_blocks: int, cols: int, lanes: int = MAC_WEIGHT_LANES) -> int:
    """Blocks of a MAC kick: ``cols`` columns of (pixel, channel block) items, pixel-major, at
    most ``lanes`` channel blocks per block (hw/rtl/npu_mac.v's walker)."""
    if pixels <= 0 or channel_blocks <= 0:
        return 0
    blocks = p = cb = 0
    while cb < channel_blocks:
        n = used = 0
        while n < cols and cb < channel_blocks and used < lanes:
            used += 1  # a new channel block: one more weight lane
            take = min(cols - n, pixels - p)
            n, p = n + take, p + take
            if p == pixels:
                p, cb = 0, cb + 1
        blocks += 1
    return blocks


def mac_reduction(opcode: Opcode, regs: Mapping[Reg, int]) -> int:
    """K, the taps of a MAC kick's reduction (one per cycle per block)."""
    if opcode == Opcode.FC:
        return regs[Reg.IFM_C]
    window = regs[Reg.KERNEL_H] * regs[Reg.KERNEL_W]
    return window * regs[Reg.IFM_C] if opcode == Opcode.CONV else window


def kick_cycles(opcode: Opcode, regs: Mapping[Reg, int], hw: HwConfig = DEFAULT_CONFIG) -> int:
    """Cycles of one command, not counting the fetch of its word, from the registers it reads
    (``Kick.regs`` / ``Dma.registers()`` values, signed registers as signed ints)."""
    opcode = Opcode(opcode)
    r = {Reg(k): int(v) for k, v in dict(regs).items()}
    rows, cols = max(hw.array_rows, 1), max(hw.array_cols, 1)
    lanes = cols  # the vector unit has one lane per array column
    if opcode in DECODE_DMA:
        return decode_dma_cycles(r[Reg.DMA_N0], r[Reg.DMA_DECODE_BYTES], hw, r.get(Reg.DMA_EXT_REGION, 0))
    if opcode in DMA_OPCODES:
        write = opcode in (Opcode.DMA_OUT, Opcode.DMA_OUT_ASYNC)
        return dma_cycles(r[Reg.DMA_N0], r[Reg.DMA_N1], r[Reg.DMA_N2], r[Reg.DMA_STRIDE0], hw,
                          r.get(Reg.DMA_EXT_REGION, 0), write)  # fmt: skip
    if opcode in (Opcode.NOP, Opcode.STOP, Opcode.SET_REG, Opcode.WAIT_DMA):
        return 0
    if opcode in (Opcode.CONV, Opcode.DWCONV, Opcode.FC):
        pixels = r[Reg.OFM_W] if opcode == Opcode.FC else r[Reg.OFM_H] * r[Reg.OFM_W]
        k = mac_reduction(opcode, r)
        blocks = mac_blocks(pixels, _ceil_div(r[Reg.OFM_C], rows), cols)
        return MAC_SETUP_CYCLES + _ceil_div(r[Reg.OFM_C], cols) + rows + (blocks - 1) * max(k, rows) + k
    if opcode in (Opcode.AVGPOOL, Opcode.MAXPOOL):
        window = r[Reg.KERNEL_H] * r[Reg.KERNEL_W]
        return VECTOR_SETUP_CYCLES + r[Reg.OFM_H] * r[Reg.OFM_W] * _ceil_div(r[Reg.OFM_C], lanes) * window
    if opcode == Opcode.MEAN:
        return VECTOR_SETUP_CYCLES + r[Reg.IFM_H] * r[Reg.IFM_W] * _ceil_div(r[Reg.IFM_C], lanes)
    if opcode in (Opcode.ADD, Opcode.MUL, Opcode.SQDIFF):
        if r.get(Reg.IFM2_BROADCAST, 0):
            return VECTOR_SETUP_CYCLES + r[Reg.OFM_H] * r[Reg.OFM_W] * _ceil_div(r[Reg.OFM_C], lanes)
        return VECTOR_SETUP_CYCLES + _ceil_div(r[Reg.OFM_H] * r[Reg.OFM_W] * r[Reg.OFM_C], lanes)
    if opcode == Opcode.LUT:
        n = r[Reg.OFM_H] * r[Reg.OFM_W] * r[Reg.OFM_C]
        return VECTOR_SETUP_CYCLES + _ceil_div(LUT_BYTES, lanes) + _ceil_div(n, lanes)
    if opcode == Opcode.SOFTMAX:
        passes = 3 * _ceil_div(r[Reg.OFM_C], lanes) + SOFTMAX_RECIP_CYCLES
        return VECTOR_SETUP_CYCLES + _ceil_div(SOFTMAX_TABLE_BYTES, lanes) + r[Reg.OFM_H] * r[Reg.OFM_W] * passes
    if opcode == Opcode.LAYERNORM:
        c = r[Reg.OFM_C]
        passes = _ceil_div(c, lanes) + LAYERNORM_RSQRT_CYCLES + _ceil_div(REQUANT_RECORD_BYTES * c, lanes)
        return VECTOR_SETUP_CYCLES + r[Reg.OFM_H] * r[Reg.OFM_W] * passes
    raise ValueError(f"kick_cycles: no cycle model for {opcode!r}")


def step_cycles(step, hw: HwConfig = DEFAULT_CONFIG) -> int:
    """Cycles of one scheduler step (``Dma`` or ``Kick``), not counting the fetch of its words."""
    return kick_cycles(step.opcode, dict(step.registers()), hw)


def command_cycles(step, hw: HwConfig = DEFAULT_CONFIG) -> int:
    """Cycles of a step's command with the fetch of its command word when the DMA engine is
    idle (the RTL trace entry of the command, less the SET_REGs before it)."""
    if step.opcode == Opcode.WAIT_DMA:
        return 1
    if step.opcode in ASYNC_DMA:
        return 1 + ASYNC_ISSUE_CYCLES
    return 1 + step_cycles(step, hw)


class Timeline:
    """The command processor's and the DMA engine's clocks over a stream (module docstring).

    Given ``hw``, a DMA given its registers is timed against the bursts in flight before it
    (npu_byoc.arch.memory.InFlight): a transfer queued at ``a + DMA_READY_CYCLES`` behind
    another has its first requests issued while that one streams, so it may find its latency
    paid when the mover takes it (``origin``, the cycle after the one before completes); its
    copy completes ``DMA_DONE_CYCLES`` after its last burst (a decode: after the header check and
    the decode that follow the code's last burst)."""

    def __init__(self, depth: int = 1, hw: HwConfig | None = None) -> None:
        self.t = 0  # cycles elapsed: the next word is fetched at cycle t
        self.depth = depth  # Q: transfers outstanding at most
        self.ends: list[int] = []  # e_j: when each transfer issued so far completes (in order)
        self.hw = hw
        self.in_flight = InFlight(hw) if hw is not None else None

    def drained(self, pending: int) -> int:
        """The first cycle at most ``pending`` of the transfers issued are outstanding."""
        return self.ends[-1 - pending] if len(self.ends) > pending else 0

    def command(self, opcode: Opcode, own: int, pending: int = 0, transfer: Mapping[Reg, int] | None = None) -> int:
        """Advance over a command whose own cycles (kick_cycles) are ``own`` (``pending``: a
        WAIT_DMA's DMA_WAIT_PENDING): its trace cycles. A DMA with its registers
        (``transfer``) on a Timeline with ``hw`` is timed with the bursts in flight (exact);
        without, as a transfer of ``own`` cycles alone (an estimate when latency > 0)."""
        t0 = self.t
        if opcode == Opcode.WAIT_DMA:
            self.t = max(self.t, self.drained(pending)) + 1
        elif opcode in DMA_OPCODES:
            background = opcode in ASYNC_DMA
            a = max(self.t, self.drained(self.depth - 1 if background else 0))
            if transfer is not None and self.in_flight is not None:
                e = self._copy(opcode, transfer, a)
            else:
                e = max(a + own, self.drained(0) + own - QUEUE_HANDOFF_CYCLES) if background else a + own
            self.ends.append(e)
            self.t = a + 1 + ASYNC_ISSUE_CYCLES if background else e + 1
        else:
            self.t += 1 + own
        return self.t - t0

    def _copy(self, opcode: Opcode, r: Mapping[Reg, int], a: int) -> int:
        """e: when the transfer of the DMA acting at ``a`` (registers ``r``) completes."""
        ready = a + DMA_READY_CYCLES
        origin = max(ready, self.drained(0) + DMA_READY_CYCLES - QUEUE_HANDOFF_CYCLES)
        region = r.get(Reg.DMA_EXT_REGION, 0)
        if opcode in DECODE_DMA:
            end = self.in_flight.transfer(1, r[Reg.DMA_N0], region, False, ready, origin)  # the code loaded
            return end + _after_load(r[Reg.DMA_DECODE_BYTES], self.hw) + DMA_DONE_CYCLES
        write = opcode in (Opcode.DMA_OUT, Opcode.DMA_OUT_ASYNC)
        end = self.in_flight.dma(r[Reg.DMA_N0], r[Reg.DMA_N1], r[Reg.DMA_N2], r[Reg.DMA_STRIDE0], region, write,
                                 ready, origin)  # fmt: skip
        return end + DMA_DONE_CYCLES

    def stop(self) -> int:
        """The run's cycles when STOP is the next word."""
        return max(self.t, self.drained(0)) + 1


def dma_registers(step) -> dict[Reg, int] | None:
    """A DMA step's registers (Timeline.command's ``transfer``), None for any other step."""
    if step.opcode not in DMA_OPCODES:
        return None
    return {Reg(k): int(v) for k, v in dict(step.registers()).items()}


def _timeline(steps: list, hw: HwConfig) -> tuple[list[int], int]:
    from .encoder import encode_with_starts  # the encoder imports isa only

    words, starts = encode_with_starts(steps)
    clock, per_step = Timeline(hw.dma_queue_depth, hw), []
    ends = starts[1:] + [len(words) - 1]  # per step: the word after its command
    clock.t = starts[0] if starts else len(words) - 1
    for step, start, end in zip(steps, starts, ends):
        clock.t += end - 1 - start  # its SET_REGs, two words each
        pending = step[Reg.DMA_WAIT_PENDING] if step.opcode == Opcode.WAIT_DMA else 0
        per_step.append(clock.command(step.opcode, step_cycles(step, hw), pending, dma_registers(step)))
    return per_step, clock.stop()


def command_timeline(steps: Iterable, hw: HwConfig = DEFAULT_CONFIG) -> list[int]:
    """Per step of ``encode(steps)``: the cycles of its command in the run (the RTL trace
    entry: from the retirement of the word before it to its own), waits for the engine included."""
    return _timeline(list(steps), hw)[0]


def stream_cycles(steps: Iterable, hw: HwConfig = DEFAULT_CONFIG) -> int:
    """Cycles of the stream ``encode(steps)`` run to its STOP (the RTL's and the functional
    model's count for that stream)."""
    return _timeline(list(steps), hw)[1]


# The harnesses' default cycle budget (npu_submit of the C model and of the RTL): a guard
# against a stream that runs away, not a limit on legal work.
DEFAULT_MAX_CYCLES = 200_000_000
BUDGET_MARGIN = 2


def stream_budget(steps: Iterable, hw: HwConfig = DEFAULT_CONFIG) -> int:
    """The cycle budget a generated partition passes to npu_submit_budget: the default, or
    BUDGET_MARGIN times the stream's estimate when that is more, so the budget follows the work
    (the RTL's cycles equal the estimate; a legal stream never meets its budget)."""
    return max(DEFAULT_MAX_CYCLES, BUDGET_MARGIN * stream_cycles(steps, hw))


__all__ = [
    "DMA_SETUP_CYCLES",
    "MAC_SETUP_CYCLES",
    "MAC_WEIGHT_LANES",
    "VECTOR_SETUP_CYCLES",
    "dma_cycles",
    "decode_dma_cycles",
    "mac_blocks",
    "mac_reduction",
    "kick_cycles",
    "step_cycles",
    "command_cycles",
    "command_timeline",
    "stream_cycles",
    "stream_budget",
    "DEFAULT_MAX_CYCLES",
    "Timeline",
    "dma_registers",
    "DMA_READY_CYCLES",
    "DMA_DONE_CYCLES",
    "ASYNC_ISSUE_CYCLES",
    "QUEUE_HANDOFF_CYCLES",
    "DECODE_HEADER_CYCLES",
]
