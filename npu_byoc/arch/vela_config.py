"""Vela's system configurations as hardware configurations (``npu-byoc hw --from-vela-ini``).

Arm's Vela describes the memory behind an Ethos-U in an ini file: a ``[System_Config.NAME]``
section gives the core clock and, for each memory on the two AXI ports (Sram, Dram,
OnChipFlash, OffChipFlash), its clock scale, ports used, burst length, read and write latency
and reads / writes in flight; a ``[Memory_Mode.NAME]`` section says which port holds the
constants (``const_mem_area``) and the feature maps (``arena_mem_area``). Here the constants'
memory becomes ``const_mem``, the feature maps' ``fm_mem`` (npu_byoc.arch.memory), with the
same meaning, so both tools pay for the same memory:

- bytes per core cycle = AXI port bytes (8 on Ethos-U55, 16 on U65/U85) × ports used × clock
  scale, written as ``bytes_per_cycle / clock_divider`` (a scale of 0.125 on an 8-byte port:
  8 bytes every 8 cycles); a scale that is no ratio with a divider up to 64 cannot map;
- latencies and burst lengths as they are (core cycles, bytes); reads / writes in flight as
  they are, 0 (a read-only flash's writes) as 1, never used;
- Dedicated_Sram (feature maps off chip, Vela's SRAM a cache): fm_mem is the off-chip memory
  and ``arena_cache_size``, if given, the NPU's ``sram_bytes``.

The file's strings are data: a name that is not found is reported, never evaluated.
"""

from __future__ import annotations

import configparser
import math
import os
import stat
from fractions import Fraction
from pathlib import Path

from ..errors import NpuByocError
from .config import HwConfigError, check_value

MAX_INI_BYTES = 1 << 20
MEMORIES = ("Sram", "Dram", "OnChipFlash", "OffChipFlash")
PORTS = {"Axi0": "axi0_port", "Axi1": "axi1_port"}
MAX_DIVIDER = 64


def _read(path: str | Path) -> configparser.ConfigParser:
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_INI_BYTES:
            raise NpuByocError(f"{path}: not a Vela configuration file (a regular file of at most {MAX_INI_BYTES} bytes)")
        with open(path, encoding="utf-8") as f:
            text = f.read(MAX_INI_BYTES + 1)
    except FileNotFoundError:
        raise NpuByocError(f"{path}: no such Vela configuration file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise NpuByocError(f"{path}: cannot read the Vela configuration ({err})") from None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as err:
        raise NpuByocError(f"{path}: not a Vela configuration file ({str(err).splitlines()[0]})") from None
    return parser


def _section(parser: configparser.ConfigParser, path, kind: str, name: str) -> dict[str, str]:
    """The keys of ``[kind.name]``, its ``inherit=`` chain first (Vela's own rule)."""
    title, seen, chain = f"{kind}.{name}", set(), []
    while title:
        if title in seen:
            raise NpuByocError(f"{path}: [{title}] inherits from itself")
        if not parser.has_section(title):
            known = sorted(s.split(".", 1)[1] for s in parser.sections() if s.startswith(kind + "."))
            raise NpuByocError(f"{path}: no [{title}] section (has: {', '.join(known) or 'none'})")
        seen.add(title)
        chain.append(dict(parser[title]))
        title = chain[-1].pop("inherit", "")
    out: dict[str, str] = {}
    for keys in reversed(chain):
        out.update(keys)
    return {k.lower(): v for k, v in out.items()}


def _number(path, key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise NpuByocError(f"{path}: {key}={text!r} is not a number") from None
    if not math.isfinite(value):  # inf / nan / 1e400 would overflow int() and Fraction() below
        raise NpuByocError(f"{path}: {key}={text!r} is not a finite number")
    return value


def _memory(path, sys: dict[str, str], area: str, port_bytes: int, prefix: str) -> dict[str, int]:
    """The ``prefix`` (fm_mem / const_mem) fields of Vela memory ``area``."""

    def get(field: str, default: float) -> float:
        key = f"{area}_{field}".lower()
        return _number(path, key, sys[key]) if key in sys else default

    scale = Fraction(get("clock_scale", 1.0)).limit_denominator(1 << 20)
    per_core = scale * port_bytes * max(1, int(get("ports_used", 1)))
    if per_core <= 0 or per_core.denominator > MAX_DIVIDER:
        raise NpuByocError(f"{path}: {area}_clock_scale={float(scale)} on a {port_bytes}-byte port is "
                           f"{float(per_core)} bytes per core cycle, not n / d with d <= {MAX_DIVIDER}; "
                           "this memory cannot map")  # fmt: skip
    return {f"{prefix}_bytes_per_cycle": per_core.numerator, f"{prefix}_clock_divider": per_core.denominator,
            f"{prefix}_read_latency": int(get("read_latency", 0)), f"{prefix}_write_latency": int(get("write_latency", 0)),
            f"{prefix}_burst_bytes": int(get("burst_length", 1)), f"{prefix}_max_reads": max(1, int(get("max_reads", 8))),
            f"{prefix}_max_writes": max(1, int(get("max_writes", 8)))}  # fmt: skip


def _area(path, sys: dict[str, str], mode: dict[str, str], key: str) -> str:
    port = mode.get(key, "Axi0")
    if port not in PORTS:
        raise NpuByocError(f"{path}: {key}={port!r}: expected Axi0 or Axi1")
    area = sys.get(PORTS[port], "Sram")
    if area not in MEMORIES:
        raise NpuByocError(f"{path}: {PORTS[port]}={area!r}: expected one of {', '.join(MEMORIES)}")
    return area


def from_vela_ini(path: str | Path, system_config: str, memory_mode: str, port_bytes: int = 8) -> dict[str, int]:
    """The HwConfig fields of Vela's ``system_config`` and ``memory_mode`` in ``path`` (on an
    AXI port of ``port_bytes`` bytes per cycle); NpuByocError for what cannot map."""
    parser = _read(path)
    sys = _section(parser, path, "System_Config", system_config)
    mode = _section(parser, path, "Memory_Mode", memory_mode)
    fields = {"core_clock_hz": int(_number(path, "core_clock", sys.get("core_clock", "500e6")))}
    fields |= _memory(path, sys, _area(path, sys, mode, "arena_mem_area"), port_bytes, "fm_mem")
    fields |= _memory(path, sys, _area(path, sys, mode, "const_mem_area"), port_bytes, "const_mem")
    if mode.get("arena_mem_area", "Axi0") != mode.get("cache_mem_area", "Axi0") and "arena_cache_size" in mode:
        fields["sram_bytes"] = int(_number(path, "arena_cache_size", mode["arena_cache_size"]))
    for name, value in fields.items():
        try:
            check_value(name, value)
        except HwConfigError as err:
            raise NpuByocError(f"{path} [{system_config} / {memory_mode}]: {err}; this configuration cannot map") from None
    return fields


__all__ = ["from_vela_ini", "MAX_INI_BYTES"]
