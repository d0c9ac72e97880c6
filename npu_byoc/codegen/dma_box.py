"""The DMA descriptor of a box: its dimensions coalesced into the fewest, longest rows.

A DMA copies N2 × N1 × N0 bytes, dense in SRAM and strided in its region (docs/isa.md). The
memory charges every contiguous row at least a burst and may wait for its latency every few
rows (docs/memory.md), so the descriptor should say "one long row" wherever the bytes are one:
a dimension of extent 1 is dropped, and a dimension whose region stride equals the extent
times the stride of the dimension inside it continues that dimension's run on both sides
(the SRAM side is always dense), so the two merge. The bytes copied, their order and the
checks' lowest and highest addresses are unchanged; only the rows are longer and fewer.
"""

from __future__ import annotations

from ..arch.encoder import Dma
from ..arch.isa import Opcode

MAX_DIMS = 3  # N0, N1, N2


def coalesce(dims: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(extent, region stride) per dimension, innermost first, with extent-1 dimensions dropped
    and each dimension that continues the one inside it merged into it (at least one left)."""
    out: list[tuple[int, int]] = []
    for n, stride in dims:
        if n == 1:
            continue
        if out and stride == out[-1][0] * out[-1][1]:
            out[-1] = (out[-1][0] * n, out[-1][1])
        else:
            out.append((n, stride))
    return out or [(1, 1)]


def box_dma(direction: Opcode, region: int, ext_addr: int, sram_addr: int,
            dims: list[tuple[int, int]]) -> Dma:  # fmt: skip
    """The DMA of ``dims`` = [(n0, stride0), (n1, stride1), (n2, stride2)] (innermost first)
    at ``ext_addr`` of ``region`` and ``sram_addr``, coalesced."""
    merged = coalesce(dims)
    if len(merged) > MAX_DIMS:  # cannot happen with three dimensions in; a guard for callers
        raise ValueError(f"a DMA has at most {MAX_DIMS} dimensions, not {len(merged)}")
    if len(merged) == 1 and merged[0][1] == 1:
        return Dma(direction, region, ext_addr, sram_addr, merged[0][0])
    (n0, s0), (n1, s1), (n2, s2) = merged + [(1, 0)] * (MAX_DIMS - len(merged))
    return Dma(direction, region, ext_addr, sram_addr, n0, n1, n2, s0, s1, s2)


def is_one_run(dma: Dma) -> bool:
    """Whether a (coalesced) DMA's region bytes are one contiguous run."""
    return dma.n1 == dma.n2 == 1 and (dma.stride0 == 1 or dma.n0 == 1)


__all__ = ["coalesce", "box_dma", "is_one_run"]
