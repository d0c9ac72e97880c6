"""Hardware configurations from the command line: ``--hw FIELD=VALUE`` and ``--hw-file cfg.toml``.

A configuration is the default :class:`~npu_byoc.arch.config.HwConfig` with some fields changed.
Values are integers, written plainly, in hex (``0x40000``) or with a binary size suffix
(``256K``, ``1M``, ``4G``). A TOML file holds the same assignments as keys, at the top level or
in a ``[hw]`` table; ``--hw`` options apply after the file, so they win::

    # cfg.toml
    array_rows = 16
    sram_bytes = "512K"

Every failure is a :class:`~npu_byoc.errors.NpuByocError` naming the option or file, the
field, the value and the allowed range.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tomllib
from collections.abc import Iterable
from pathlib import Path

from ..errors import NpuByocError
from .config import DEFAULT_CONFIG, FIELD_RANGES, HwConfig, HwConfigError, check_value, configure, field_names

_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_NUMBER = re.compile(r"\s*(0[xX][0-9a-fA-F]+|\d+)\s*([KMG]?)(?:i?B)?\s*", re.IGNORECASE)


def parse_value(text: str) -> int:
    """``256``, ``0x100``, ``256K``, ``1M``, ``1MiB``: the integer; ValueError otherwise."""
    m = _NUMBER.fullmatch(text)
    if not m:
        raise ValueError(f"'{text}' is not an integer (256, 0x100, 256K, 1M)")
    return int(m.group(1), 0) * _SUFFIX[m.group(2).upper()]


def parse_assignment(text: str) -> tuple[str, int]:
    """``FIELD=VALUE`` -> (field, value); the value is checked against the field's range."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise NpuByocError(f"--hw '{text}': expected FIELD=VALUE, e.g. --hw array_rows=16")
    try:
        return name, check_value(name, parse_value(value))
    except (ValueError, HwConfigError) as err:
        raise NpuByocError(f"--hw {name}: {err}") from None


# A configuration is a few dozen lines; the cap keeps /dev/zero or a huge file from being read.
MAX_FILE_BYTES = 1 << 20


def read_file(path: str | Path) -> dict[str, int]:
    """The assignments of a TOML configuration file: a regular file of at most
    :data:`MAX_FILE_BYTES` (a device, FIFO or directory is refused before it is opened)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise NpuByocError(f"{path}: not a regular file (--hw-file takes a TOML file)")
        if st.st_size > MAX_FILE_BYTES:
            raise NpuByocError(f"{path}: {st.st_size} bytes, more than a hardware configuration's "
                               f"{MAX_FILE_BYTES} (--hw-file takes a TOML file)")  # fmt: skip
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)  # the file may have grown since the stat
        if len(raw) > MAX_FILE_BYTES:
            raise NpuByocError(f"{path}: more than {MAX_FILE_BYTES} bytes (--hw-file takes a TOML file)")
        data = tomllib.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise NpuByocError(f"{path}: no such hardware configuration file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise NpuByocError(f"{path}: cannot read the hardware configuration ({err})") from None
    except tomllib.TOMLDecodeError as err:
        raise NpuByocError(f"{path}: not a TOML file ({err})") from None
    if set(data) == {"hw"} and isinstance(data["hw"], dict):
        data = data["hw"]
    out = {}
    for name, value in data.items():
        try:
            if isinstance(value, str):
                value = parse_value(value)
            out[name] = check_value(name, value)
        except (ValueError, HwConfigError) as err:
            raise NpuByocError(f"{path}: {err}") from None
    return out


def config_from(assignments: Iterable[tuple[str, int]] = (), file: str | Path | None = None,
                base: dict[str, int] | None = None) -> HwConfig:  # fmt: skip
    """The configuration of ``base`` fields (e.g. a Vela system configuration's), a ``--hw-file``
    (optional) and ``--hw`` assignments, in that order."""
    overrides = dict(base or {})
    overrides.update(read_file(file) if file else {})
    overrides.update(assignments)
    try:
        return configure(DEFAULT_CONFIG, **overrides)
    except HwConfigError as err:
        raise NpuByocError(str(err)) from None


def _doc(name: str) -> str:
    from .hwgen import config_doc

    return config_doc(name)


def render(hw: HwConfig, fmt: str = "text") -> str:
    """The configuration as a table (text), TOML (readable by ``--hw-file``) or JSON."""
    values = {n: getattr(hw, n) for n in field_names()}
    if fmt == "json":
        return json.dumps(values, indent=2) + "\n"
    if fmt == "toml":
        return "".join(f"{n} = {v}\n" for n, v in values.items())
    rows = [("field", "value", "default", "range", "meaning")]
    for n, v in values.items():
        lo, hi = FIELD_RANGES[n]
        default = getattr(DEFAULT_CONFIG, n)
        rows.append((n, str(v), "" if v == default else str(default), f"{lo}..{hi}", _doc(n)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4] for r in rows]
    return "\n".join(line.rstrip() for line in lines) + "\n"
