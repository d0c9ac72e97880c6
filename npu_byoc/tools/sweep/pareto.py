"""The area proxy of a configuration and the Pareto front of cycles against area.

The proxy ranks configurations; it is not a synthesis result. It counts what the grid
changes — MACs, SRAM, the external memory port — with per-unit weights of a 28 nm-class
process (docs/sweep.md says where they come from); ``--area-weights`` replaces them:

    area (µm²) = R·C·mac + sram_bytes·sram_byte + dma_bytes_per_cycle·dma_byte
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import NpuByocError
from ...arch.config import HwConfig

# µm² per unit: an int8 x int8 MAC with its int32 accumulator and pipeline registers; one byte
# of single-port SRAM with its periphery (~0.25 µm² per bit); one byte lane of the external
# memory port through the DMA and the SRAM write path.
AREA_WEIGHTS = {"mac": 400.0, "sram_byte": 2.0, "dma_byte": 1000.0}


def parse_area_weights(text: str | None) -> dict[str, float]:
    """``mac=400,sram_byte=2,dma_byte=1000`` (any subset) over the defaults."""
    weights = dict(AREA_WEIGHTS)
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        try:
            if not sep or name not in weights:
                raise ValueError
            weights[name] = float(value)
            if weights[name] < 0:
                raise ValueError
        except ValueError:
            raise NpuByocError(f"--area-weights '{item}': expected NAME=µm² with NAME one of "
                               f"{', '.join(AREA_WEIGHTS)} and a non-negative number") from None  # fmt: skip
    return weights


def area_um2(hw: HwConfig, weights: dict[str, float] = AREA_WEIGHTS) -> float:
    return (hw.array_rows * hw.array_cols * weights["mac"] + hw.sram_bytes * weights["sram_byte"]
            + hw.dma_bytes_per_cycle * weights["dma_byte"])  # fmt: skip


def pareto_front(points: Sequence[tuple[float, float]]) -> list[bool]:
    """Per (cycles, area) point: True when no other point is at least as good in both and
    better in one (equal points are all on the front)."""
    return [
        not any(c2 <= c and a2 <= a and (c2 < c or a2 < a) for c2, a2 in points)
        for c, a in points
    ]


def spread(front: Sequence[int], n: int) -> list[int]:
    """``n`` of the indices ``front`` (ordered along the front), evenly spaced, ends included."""
    if n <= 0:
        return []
    if n >= len(front):
        return list(front)
    if n == 1:
        return [front[0]]
    return [front[round(i * (len(front) - 1) / (n - 1))] for i in range(n)]


__all__ = ["AREA_WEIGHTS", "parse_area_weights", "area_um2", "pareto_front", "spread"]
