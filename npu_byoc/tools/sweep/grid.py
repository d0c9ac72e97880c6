"""The grid of a sweep: ``--grid FIELD=v1,v2,...`` options over a base configuration.

Values are written as ``--hw`` takes them (``128K``, ``0x100``, ``1M``) and checked against
the field's range; a bad one is one line naming the option, field, value and range.
The points are the Cartesian product, in the order the options and values were given.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator

from ...errors import NpuByocError
from ...arch.config import DEFAULT_CONFIG, HwConfig, HwConfigError, check_value, configure
from ...arch.options import parse_value


def parse_grid_option(text: str) -> tuple[str, list[int]]:
    """``FIELD=v1,v2,...`` -> (field, [values]); each value checked against the field's range."""
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep or not name or not values.strip():
        raise NpuByocError(f"--grid '{text}': expected FIELD=v1,v2,..., e.g. --grid sram_bytes=128K,256K")
    out: list[int] = []
    for item in values.split(","):
        try:
            value = check_value(name, parse_value(item))
        except (ValueError, HwConfigError) as err:
            raise NpuByocError(f"--grid {name}: {err}") from None
        if value in out:
            raise NpuByocError(f"--grid {name}: the value {value} is given twice")
        out.append(value)
    return name, out


def parse_grid(options: Iterable[str]) -> dict[str, list[int]]:
    """Every ``--grid`` option, field -> values (in the order given); a field at most once."""
    grid: dict[str, list[int]] = {}
    for text in options:
        name, values = parse_grid_option(text)
        if name in grid:
            raise NpuByocError(f"--grid {name}: the field is given twice (list its values in one option)")
        grid[name] = values
    return grid


def point_count(grid: dict[str, list[int]]) -> int:
    """The number of configurations of the grid, without making them."""
    return math.prod(len(v) for v in grid.values())


def iter_points(grid: dict[str, list[int]], base: HwConfig = DEFAULT_CONFIG) -> Iterator[HwConfig]:
    """The configurations of the grid over ``base``, one at a time (no grid: the base alone)."""
    names = list(grid)
    for combo in itertools.product(*grid.values()):
        try:
            yield configure(base, **dict(zip(names, combo)))
        except HwConfigError as err:
            raise NpuByocError(str(err)) from None


def points(grid: dict[str, list[int]], base: HwConfig = DEFAULT_CONFIG) -> list[HwConfig]:
    """The configurations of the grid over ``base`` (no grid: the base alone)."""
    return list(iter_points(grid, base))


__all__ = ["parse_grid_option", "parse_grid", "point_count", "iter_points", "points"]
