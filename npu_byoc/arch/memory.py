"""The external memories and what a DMA transfer pays for them (docs/memory.md).

Two memories serve the DMA engine: ``fm_mem`` the feature maps (regions SCRATCH and IO*) and
``const_mem`` the weights and constants (CONST). Each has the fields of
:class:`~npu_byoc.arch.config.HwConfig` named ``<memory>_<field>`` (:class:`Memory`). Their
meaning is Vela's (ethos-u-vela's architecture_features / npu_performance): the bandwidth is
``bytes_per_cycle / clock_divider`` bytes per core cycle, a latency is paid in core cycles
before a burst's data, and a contiguous run shorter than ``burst_bytes`` costs a whole burst
(Vela's ``_estimate_memory_transfer_efficiency``); ``max_reads`` / ``max_writes`` bursts are in
flight at most, so enough of them hide the latency (``(max − 1) · T >= latency``).

One transfer (a DMA command's copy) with the DMA port's D bytes per request:

- its rows: N2·N1 rows of N0 bytes when DMA_STRIDE0 == 1, else N2·N1·N0 rows of one byte;
- a row's bursts: the DMA asks for a row in bursts of up to MAX_BURST_BEATS requests (the
  last one shorter), so a burst of b bytes has ``n = ceil(b / D)`` requests; long rows make
  long bursts, and a few in flight hide the latency;
- a burst's charged bytes: ``max(b, burst_bytes)`` for the first burst of a row, else b (a row
  of r bytes costs ``max(r, burst_bytes)``, Vela's efficiency); its occupancy
  ``T = max(n, ceil(clock_divider · charged / bytes_per_cycle))`` core cycles (the port moves
  one request per cycle);
- bursts i = 1..N, in order: ``start_i = max(d_{i−1}, d_{i−O} + L)``, ``d_i = start_i + T_i``
  with d_j = 0 for j <= 0, L the read (DMA_IN) or write (DMA_OUT) latency and O the reads or
  writes in flight at most. The transfer's memory cycles are d_N.

With the defaults (latency 0, burst 1 byte, 64 bytes per cycle, divider 1) every burst is one
request of one cycle: d_N is the request count, today's zero-wait-state memory. The RTL harness
(hw/sim/npu_verilator.cc, ``MemoryModel``) grants the DMA's requests at these cycles and the C
model (npu_functional.cc, ``memory_cycles``) counts them: the three agree exactly.
"""

from __future__ import annotations

import functools
from collections import deque
from dataclasses import dataclass

from .config import HwConfig
from .isa import Region

MEMORIES = ("fm_mem", "const_mem")
MAX_BURST_BEATS = 256  # requests of one burst at most (AXI4's longest INCR burst)
FIELDS = ("bytes_per_cycle", "clock_divider", "read_latency", "write_latency", "burst_bytes", "max_reads",
          "max_writes")  # fmt: skip


@dataclass(frozen=True)
class Memory:
    """One external memory's timing (fields as in HwConfig, without the memory's prefix)."""

    bytes_per_cycle: int
    clock_divider: int
    read_latency: int
    write_latency: int
    burst_bytes: int
    max_reads: int
    max_writes: int

    def bytes_per_core_cycle(self) -> float:
        return self.bytes_per_cycle / self.clock_divider


@functools.lru_cache(maxsize=64)  # read on every DMA step of every timeline pass
def memory(hw: HwConfig, name: str) -> Memory:
    """The memory ``name`` ("fm_mem" or "const_mem") of ``hw``."""
    return Memory(*(getattr(hw, f"{name}_{f}") for f in FIELDS))


def memory_name(region: int) -> str:
    """The memory a region lives in: CONST in const_mem, every other in fm_mem."""
    return "const_mem" if region == Region.CONST else "fm_mem"


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _row_bursts(row_bytes: int, port: int, mem: Memory) -> tuple[int, int, int, int]:
    """(bursts, T of the first, T of a middle one, T of the last) of one row of ``row_bytes``
    contiguous bytes."""
    per_burst = MAX_BURST_BEATS * port
    bursts = _ceil_div(row_bytes, per_burst)

    def occupancy(b: int, first: bool) -> int:
        charged = max(b, mem.burst_bytes) if first else b
        return max(_ceil_div(b, port), _ceil_div(mem.clock_divider * charged, mem.bytes_per_cycle))

    first = occupancy(min(per_burst, row_bytes), True)
    last = occupancy(row_bytes - (bursts - 1) * per_burst, False) if bursts > 1 else first
    return bursts, first, occupancy(per_burst, False), last


@functools.lru_cache(maxsize=4096)
def transfer_cycles(rows: int, row_bytes: int, port: int, mem: Memory, write: bool) -> int:
    """d_N: the cycles ``rows`` rows of ``row_bytes`` contiguous bytes take on ``mem`` through a
    port of ``port`` bytes per request (module docstring)."""
    bursts, first, mid, last = _row_bursts(row_bytes, port, mem)
    row = first + (bursts - 2) * mid + last if bursts > 1 else first
    t_min = min(first, mid, last) if bursts > 2 else min(first, last)
    latency = mem.write_latency if write else mem.read_latency
    window = mem.max_writes if write else mem.max_reads
    if latency == 0:
        return rows * row
    if (window - 1) * t_min >= latency:  # enough bursts in flight: the latency is paid once
        return latency + rows * row
    if bursts == 1:  # every burst alike: d_N = L + N·T + floor((N − 1) / O)·(L − (O − 1)·T)
        return latency + rows * first + (rows - 1) // window * (latency - (window - 1) * first)
    ends: deque[int] = deque([0] * window, maxlen=window)  # d_{i-O} .. d_{i-1}
    times = [first] + [mid] * (bursts - 2) + [last]
    for _ in range(rows):
        for t in times:
            ends.append(max(ends[-1], ends[0] + latency) + t)
    return ends[-1]


def dma_memory_cycles(n0: int, n1: int, n2: int, stride0: int, hw: HwConfig, region: int = 0,
                      write: bool = False) -> int:  # fmt: skip
    """The memory cycles of a DMA of n2 × n1 × n0 bytes (``stride0`` its region-side innermost
    stride) on the memory of ``region``; ``write`` for DMA_OUT."""
    mem = memory(hw, memory_name(region))
    if stride0 == 1:
        return transfer_cycles(n1 * n2, n0, hw.dma_bytes_per_cycle, mem, write)
    return transfer_cycles(n0 * n1 * n2, 1, hw.dma_bytes_per_cycle, mem, write)


def sustained_bytes_per_cycle(mem: Memory, port: int, run_bytes: int, write: bool = False) -> float:
    """The bandwidth a long stream of ``run_bytes`` contiguous runs sustains on ``mem`` (its
    burst, latency and in-flight limits; the roofline of a memory-bound layer)."""
    rows = max(1, 65536 // max(run_bytes, 1))
    return rows * run_bytes / transfer_cycles(rows, run_bytes, port, mem, write)


__all__ = ["MEMORIES", "FIELDS", "MAX_BURST_BEATS", "Memory", "memory", "memory_name", "transfer_cycles", "dma_memory_cycles",
           "sustained_bytes_per_cycle"]  # fmt: skip
