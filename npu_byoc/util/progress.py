"""A progress bar on stderr, without a dependency (cosim's layers, sweep's points).

``[#####.....]  12/64 layers  1.3 s  name``, redrawn in place on a terminal; elsewhere a line
every 10%. It imports nothing heavy, so a command can draw it before TVM is loaded.
"""

from __future__ import annotations

import sys
import time

from . import escape


class Progress:
    """``<prefix> [#####.....]  12/64 <unit>  1.3 s  label`` on ``stream`` (stderr)."""

    def __init__(self, total: int, stream=None, enabled: bool = True, width: int = 28, prefix: str = "cosim",
                 unit: str = "layers"):  # fmt: skip
        self.total, self.width, self.enabled = max(total, 1), width, enabled
        self.prefix, self.unit = prefix, unit
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.perf_counter()
        self.last_decile = -1
        self.drawn = False

    def note(self, text: str) -> None:
        if self.enabled:
            self._clear()
            print(text, file=self.stream, flush=True)

    def update(self, done: int, label: str = "") -> None:
        if not self.enabled:
            return
        decile = 10 * done // self.total
        if not self.tty and decile == self.last_decile and done != self.total:
            return
        self.last_decile = decile
        fill = self.width * done // self.total
        bar = "#" * fill + "." * (self.width - fill)
        label = escape.text_column(label, 40)
        text = (f"{self.prefix} [{bar}] {done:>4}/{self.total} {self.unit} {time.perf_counter() - self.t0:6.1f} s  "
                f"{label}")  # fmt: skip
        if self.tty:
            self.stream.write("\r" + text.ljust(110)[:110])
            self.stream.flush()
            self.drawn = True
        else:
            print(text, file=self.stream, flush=True)

    def _clear(self) -> None:
        if self.drawn:
            self.stream.write("\r" + " " * 110 + "\r")
            self.drawn = False

    def close(self) -> None:
        if self.enabled and self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False


__all__ = ["Progress"]
