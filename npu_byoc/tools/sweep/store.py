"""The sweep's result cache: one JSON file per (model, configuration, code version).

A point's key hashes the model's SHA-256 (its file, and an ONNX model's external-data files:
npu_byoc.tools.sweep.point.model_sha256), the ``--exclude`` names, every field of the
configuration and the code version — a hash of the npu_byoc sources that can change a result (every module but the
command line and the sweep's own rendering) — so an edited compiler never serves stale numbers,
an interrupted sweep resumes where it stopped, and a repeated one reads files only (no model is
imported, nothing partitioned). Files live in ``cache_dir()/sweep`` (checked private:
npu_byoc.util.cache.cache_subdir) and are written atomically and sealed (npu_byoc.util.cache).
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict
from pathlib import Path

from ...util.cache import atomic_write, cache_subdir, content_key, is_intact
from ...arch.config import HwConfig

PACKAGE = Path(__file__).resolve().parents[2]
# Modules that only present results: editing them keeps the cached points.
PRESENTATION = {"cli.py", "docs.py", "report_html.py", "progress.py", "sweep/report.py", "sweep/command.py"}
KEY_VERSION = "sweep-point-1"  # bump when the point's fields change meaning


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """A hash of the npu_byoc sources that determine a point's numbers."""
    sources = sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).as_posix() not in PRESENTATION)
    return content_key(part for p in sources for part in (p.relative_to(PACKAGE).as_posix(), p.read_bytes()))


def point_key(model_sha256: str, hw: HwConfig, exclude: tuple[str, ...] = ()) -> str:
    """``exclude`` (the user's --exclude names, in a key of their own; none: the key as before)."""
    names = ["exclude", *sorted(set(exclude))] if exclude else []
    return content_key([KEY_VERSION, model_sha256, json.dumps(asdict(hw), sort_keys=True), code_version(), *names])


def _path(key: str) -> Path:
    return cache_subdir("sweep") / f"{key}.json"


def load(key: str) -> dict | None:
    """The cached result of ``key``, or None (missing, damaged or unreadable)."""
    path = _path(key)
    if not is_intact(path):
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def store(key: str, result: dict) -> None:
    atomic_write(_path(key), json.dumps(result, sort_keys=True).encode())


__all__ = ["code_version", "point_key", "load", "store"]
