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

Across transfers (:class:`InFlight`) the bursts of one memory and direction are one sequence:
the engine looks ahead into its queue and issues a queued transfer's requests from the cycle
it was queued (``ready``) while the one before it streams, so burst i starts at
``max(d_{i−1}, max(ready, d_{i−O}) + L)`` with d_{i−O} possibly an earlier transfer's, the
first no earlier than the transfer's first request (``origin``). :func:`transfer_cycles` is
a transfer alone (nothing in flight, ready = origin = 0).

With the defaults (latency 0, burst 1 byte, 64 bytes per cycle, divider 1) every burst is one
request of one cycle: d_N is the request count, today's zero-wait-state memory. The RTL harness
(hw/sim/npu_verilator.cc, ``MemoryModel``) grants the DMA's requests at these cycles and the C
model (npu_functional.cc, ``memory_cycles``) counts them: the three agree exactly.
"""

from __future__ import annotations

import functools
from collections import deque
from itertools import accumulate
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


def _span(times: tuple[int, ...], prefix: tuple[int, ...], i: int, k: int) -> int:
    """The T of bursts i .. k−1 of a transfer whose rows burst as ``times`` (prefix: its sums)."""
    n, row = len(times), prefix[-1]
    return (k // n - i // n) * row + prefix[k % n] - prefix[i % n]


def run_bursts(ends: deque, times: tuple[int, ...], rows: int, latency: int, ready: int, origin: int) -> int:
    """The end d_N (absolute) of a transfer of ``rows`` rows, each in bursts of occupancy
    ``times``, whose first request is presented at ``origin`` and whose requests may be issued
    from ``ready`` (the cycle it is queued: the engine looks ahead into its queue). ``ends``
    holds d of the last O bursts on the same memory and direction (maxlen O, oldest first:
    earlier transfers' included), and is updated. Burst i starts at
    ``max(d_{i−1}, max(ready, d_{i−O}) + L)``, the first at ``max(origin, …)``."""
    window = ends.maxlen
    n, bpr = rows * len(times), len(times)
    prefix = (0, *accumulate(times))
    streaming = latency == 0 or (window - 1) * min(times) >= latency
    prev, periodic, i = origin, 0, 0
    while i < n:
        if i >= window and streaming:  # d_{i-1} >= d_{i-O} + L: back to back from here
            for k in range(max(i, n - window), n):
                ends.append(prev + _span(times, prefix, i, k + 1))
            return ends[-1]
        if i >= window and periodic >= window:  # d_j = d_{j-O} + L + T from here (one T)
            snapshot, step = list(ends), latency + times[0]
            for k in range(max(i, n - window), n):
                q, r = divmod(k - (i - window), window)
                ends.append(snapshot[r] + q * step)
            return ends[-1]
        t = times[i % bpr]
        d = max(prev, max(ready, ends[0]) + latency) + t
        periodic = periodic + 1 if bpr == 1 and i >= window and d - ends[0] == latency + t else 0
        ends.append(d)
        prev, i = d, i + 1
    return prev


def row_times(row_bytes: int, port: int, mem: Memory) -> tuple[int, ...]:
    """The occupancies T of one row's bursts (first, middle ones, last)."""
    bursts, first, mid, last = _row_bursts(row_bytes, port, mem)
    return (first,) if bursts == 1 else (first,) + (mid,) * (bursts - 2) + (last,)


@functools.lru_cache(maxsize=4096)
def transfer_cycles(rows: int, row_bytes: int, port: int, mem: Memory, write: bool) -> int:
    """d_N: the cycles ``rows`` rows of ``row_bytes`` contiguous bytes take on ``mem`` through a
    port of ``port`` bytes per request, alone (nothing in flight before it: module docstring)."""
    window = mem.max_writes if write else mem.max_reads
    latency = mem.write_latency if write else mem.read_latency
    return run_bursts(deque([0] * window, maxlen=window), row_times(row_bytes, port, mem), rows, latency, 0, 0)


class InFlight:
    """The bursts in flight of one run, per memory and direction, in absolute cycles: the DMA
    engine issues a queued transfer's first requests while the one before it still streams
    (up to the memory's reads or writes in flight), so a transfer that waited in the queue
    finds its latency already paid."""

    def __init__(self, hw: HwConfig) -> None:
        self.hw = hw
        self.ends: dict[tuple[str, bool], deque] = {}

    def transfer(self, rows: int, row_bytes: int, region: int, write: bool, ready: int, origin: int) -> int:
        """The absolute end d_N of a transfer of ``rows`` rows of ``row_bytes`` contiguous bytes
        on the memory of ``region``, queued at ``ready``, its first request at ``origin``."""
        name = memory_name(region)
        mem = memory(self.hw, name)
        latency = mem.write_latency if write else mem.read_latency
        times = row_times(row_bytes, self.hw.dma_bytes_per_cycle, mem)
        if latency == 0:  # nothing to hide: the bursts back to back from the first request
            return origin + rows * sum(times)
        window = mem.max_writes if write else mem.max_reads
        ends = self.ends.setdefault((name, write), deque([0] * window, maxlen=window))
        return run_bursts(ends, times, rows, latency, ready, origin)

    def dma(self, n0: int, n1: int, n2: int, stride0: int, region: int, write: bool, ready: int, origin: int) -> int:
        """As :meth:`transfer` for a DMA of n2 × n1 × n0 bytes (``stride0`` region-side)."""
        if stride0 == 1:
            return self.transfer(n1 * n2, n0, region, write, ready, origin)
        return self.transfer(n0 * n1 * n2, 1, region, write, ready, origin)


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
           "run_bursts", "row_times", "InFlight",
           "sustained_bytes_per_cycle"]  # fmt: skip
