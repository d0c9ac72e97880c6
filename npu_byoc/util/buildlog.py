"""Compiler output goes to a log file; the error is one line naming it.

A failing g++ / Verilator prints thousands of lines (the whole command, every template
instantiation); users need the first error and where the rest is. The log lives in the cache
directory's ``logs/`` (npu_byoc.util.cache.cache_subdir: private, a temporary directory when the
cache is unwritable).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from pathlib import Path

from . import escape
from .cache import cache_subdir

_ERROR_LINE = re.compile(r"\b(error|Error|ERROR)\b")


def first_error(output: str) -> str:
    """The first line of ``output`` that reports an error (else its first non-empty line)."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    line = next((ln for ln in lines if _ERROR_LINE.search(ln)), lines[0] if lines else "no output")
    return escape.text(line, 300)


def write_log(what: str, cmd: Sequence[str] | str, output: str) -> Path:
    """Write the command and its output to a new log file; its path."""
    logs = cache_subdir("logs")
    slug = re.sub(r"[^A-Za-z0-9]+", "-", what).strip("-")[:40] or "build"
    path = logs / f"{slug}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    command = cmd if isinstance(cmd, str) else " ".join(map(str, cmd))
    path.write_text(f"$ {command}\n{output}", errors="backslashreplace")
    return path


def failure(what: str, cmd: Sequence[str] | str, output: str) -> str:
    """The one-line message of a failed build step whose output went to a log file."""
    return f"{what} failed: {first_error(output)} (full output: {write_log(what, cmd, output)})"


__all__ = ["failure", "first_error", "write_log"]
