"""The analytic cycle model of the NPU: an estimate, per command, of the cycles it takes.

The C functional model (npu_byoc/runtime/csrc/npu_functional.cc) reports the same numbers in
``npu_result_t.cycles`` — the formulas below are written there a second time and
tests/test_functional.py checks the two agree. It is a first-order model for reports and for
comparing schedules, not a promise: the RTL co-simulation reports the cycles the hardware
really takes (a later issue compares the two).

With R = ``hw.array_rows`` (output channels in parallel), C = ``hw.array_cols`` (output pixels,
or FC rows, in parallel) and L = C (the vector unit of pools, MEAN, ADD and LUT has one lane
per array column):

=========  ==================================================================================
fetch      1 cycle per stream word fetched: the header's 3 words, SET_REG 2, every other
           command 1 (the failing command and the words after STOP cost nothing)
DMA        ``DMA_SETUP_CYCLES + N2·N1·ceil(N0 / DMA_BURST_BYTES)`` when the region side is
           contiguous along i0 (``DMA_STRIDE0 == 1``), else ``DMA_SETUP_CYCLES + N2·N1·N0``
           (one byte per beat)
CONV       ``KICK_SETUP_CYCLES + ceil(OFM_C/R)·ceil(OFM_H·OFM_W/C)·(KERNEL_H·KERNEL_W·IFM_C + C)``:
           per R×C block of outputs, one MAC per cycle per cell over the accumulation depth,
           then C cycles to drain the block's columns through the requantize stage
DWCONV     ``KICK_SETUP_CYCLES + ceil(OFM_C/R)·ceil(OFM_H·OFM_W/C)·(KERNEL_H·KERNEL_W + C)``
FC         ``KICK_SETUP_CYCLES + ceil(OFM_C/R)·ceil(OFM_W/C)·(IFM_C + C)`` (rows = OFM_W)
AVGPOOL,   ``KICK_SETUP_CYCLES + OFM_H·OFM_W·ceil(OFM_C/L)·KERNEL_H·KERNEL_W``
MAXPOOL
MEAN       ``KICK_SETUP_CYCLES + ceil(IFM_C/L)·(IFM_H·IFM_W + 1)`` (+1: requantize the lanes)
ADD, LUT   ``KICK_SETUP_CYCLES + ceil(OFM_H·OFM_W·OFM_C / L)``
NOP, STOP  fetch only
=========  ==================================================================================

A run's cycles are the sum over the commands it executed; for a stream that reaches its STOP
as its last word, ``stream_cycles(steps, hw)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..hwconfig import DEFAULT_CONFIG, HwConfig
from ..isa import Opcode, Reg

DMA_SETUP_CYCLES = 16  # descriptor setup and first-beat latency of the external memory
DMA_BURST_BYTES = 16  # bytes per cycle of a contiguous transfer
KICK_SETUP_CYCLES = 8  # register latch and pipeline fill of a compute kick


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def dma_cycles(n0: int, n1: int = 1, n2: int = 1, stride0: int = 1) -> int:
    """Cycles of a DMA of n2 × n1 × n0 bytes whose region-side innermost stride is ``stride0``."""
    beats = _ceil_div(n0, DMA_BURST_BYTES) if stride0 == 1 else n0
    return DMA_SETUP_CYCLES + n2 * n1 * beats


def kick_cycles(opcode: Opcode, regs: Mapping[Reg, int], hw: HwConfig = DEFAULT_CONFIG) -> int:
    """Cycles of one kick (not counting the fetch of its word) from the registers it reads
    (``Kick.regs`` / ``Dma.registers()`` values, signed registers as signed ints)."""
    opcode = Opcode(opcode)
    r = {Reg(k): int(v) for k, v in dict(regs).items()}
    rows, cols = max(hw.array_rows, 1), max(hw.array_cols, 1)
    lanes = cols
    if opcode in (Opcode.DMA_IN, Opcode.DMA_OUT):
        return dma_cycles(r[Reg.DMA_N0], r[Reg.DMA_N1], r[Reg.DMA_N2], r[Reg.DMA_STRIDE0])
    if opcode in (Opcode.NOP, Opcode.STOP, Opcode.SET_REG):
        return 0
    if opcode in (Opcode.CONV, Opcode.DWCONV, Opcode.FC):
        pixels = r[Reg.OFM_W] if opcode == Opcode.FC else r[Reg.OFM_H] * r[Reg.OFM_W]
        blocks = _ceil_div(r[Reg.OFM_C], rows) * _ceil_div(pixels, cols)
        if opcode == Opcode.CONV:
            depth = r[Reg.KERNEL_H] * r[Reg.KERNEL_W] * r[Reg.IFM_C]
        elif opcode == Opcode.DWCONV:
            depth = r[Reg.KERNEL_H] * r[Reg.KERNEL_W]
        else:
            depth = r[Reg.IFM_C]
        return KICK_SETUP_CYCLES + blocks * (depth + cols)
    if opcode in (Opcode.AVGPOOL, Opcode.MAXPOOL):
        window = r[Reg.KERNEL_H] * r[Reg.KERNEL_W]
        return KICK_SETUP_CYCLES + r[Reg.OFM_H] * r[Reg.OFM_W] * _ceil_div(r[Reg.OFM_C], lanes) * window
    if opcode == Opcode.MEAN:
        return KICK_SETUP_CYCLES + _ceil_div(r[Reg.IFM_C], lanes) * (r[Reg.IFM_H] * r[Reg.IFM_W] + 1)
    if opcode in (Opcode.ADD, Opcode.LUT):
        return KICK_SETUP_CYCLES + _ceil_div(r[Reg.OFM_H] * r[Reg.OFM_W] * r[Reg.OFM_C], lanes)
    raise ValueError(f"kick_cycles: no cycle model for {opcode!r}")


def step_cycles(step, hw: HwConfig = DEFAULT_CONFIG) -> int:
    """Cycles of one scheduler step (``Dma`` or ``Kick``), not counting the fetch of its words."""
    return kick_cycles(step.opcode, dict(step.registers()), hw)


def stream_cycles(steps: Iterable, hw: HwConfig = DEFAULT_CONFIG) -> int:
    """Cycles of the stream ``encode(steps)`` run to its STOP: every word fetched plus every
    step's kick (what the functional model reports for that stream)."""
    from ..codegen.encoder import encode  # the encoder imports isa only; no cycle at import

    steps = list(steps)
    return len(encode(steps)) + sum(step_cycles(s, hw) for s in steps)


__all__ = [
    "DMA_SETUP_CYCLES",
    "DMA_BURST_BYTES",
    "KICK_SETUP_CYCLES",
    "dma_cycles",
    "kick_cycles",
    "step_cycles",
    "stream_cycles",
]
