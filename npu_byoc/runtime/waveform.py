"""Waveforms of a window of the co-simulation (``npu-byoc cosim ... --trace FILE.vcd
--trace-layers NAME[,NAME]``; docs/waveforms.md).

A whole model's waveform is far too large, so the co-simulation dumps only the cycles of the
named layers: their partition's stream runs on the traced Verilator build (a separate cached
library, npu_byoc.runtime.verilator ``waveform=``) and the harness samples every signal while
the word being executed lies in the layers' part of the stream: from the first SET_REG of
their first command to their last command, background prefetches (DMA_IN_ASYNC of their
weights, issued while an earlier layer computes) left out, so a window is the layers' own
stretch of the stream. The format follows the file's suffix: ``.vcd``
(Verilator's VCD writer) or ``.fst`` (its FST writer; needs the LZ4 and zlib headers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..arch.isa import ASYNC_DMA
from ..errors import NpuByocError
from ..util import escape

FORMATS = {".vcd": "vcd", ".fst": "fst"}
NS_PER_CYCLE = 10  # the harness samples cycle c at 10*c ns


def waveform_format(path: str | Path) -> str:
    """"vcd" or "fst", from the file's suffix."""
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise NpuByocError(f"{path}: a waveform file ends in .vcd or .fst")
    return fmt


@dataclass(frozen=True)
class WaveformWindow:
    """What to dump: the layers (by name) of one partition, to ``path``."""

    path: Path
    layers: tuple[str, ...]

    @property
    def format(self) -> str:
        return waveform_format(self.path)

    def resolve(self, plans: Mapping[str, object]) -> tuple[str, list[int]]:
        """(partition, op indexes) of the layers in the lowered plans: one line naming a layer
        that no partition has, or layers of two partitions."""
        if not self.layers:
            raise NpuByocError("--trace-layers: name at least one layer (a whole model's waveform is too large)")
        where: dict[str, tuple[str, int]] = {}
        for name, plan in plans.items():
            for k, op in enumerate(plan.ops):
                where.setdefault(op.name, (name, k))
        missing = [n for n in self.layers if n not in where]
        if missing:
            shown = ", ".join(escape.text(n, 80) for n in list(where)[:4])
            raise NpuByocError(f"--trace-layers: no NPU layer is named '{escape.text(missing[0], 120)}' "
                               f"(NPU layers are named as in the report, e.g. {shown})")  # fmt: skip
        partitions = sorted({where[n][0] for n in self.layers})
        if len(partitions) > 1:
            raise NpuByocError(f"--trace-layers: the layers are in different NPU partitions ({', '.join(partitions)}); "
                               "trace the layers of one partition at a time")  # fmt: skip
        return partitions[0], sorted(where[n][1] for n in self.layers)


def _window_steps(steps: Sequence, step_op: Sequence[int], ops: Sequence[int]) -> list[int]:
    """The ops' steps from their first one that is not a background DMA (a prefetch issued
    among an earlier layer's commands) to their last."""
    mine = [i for i, k in enumerate(step_op) if k in set(ops)]
    if not mine:
        raise NpuByocError("--trace-layers: the layers have no commands in their partition's stream")
    own = [i for i in mine if steps[i].opcode not in ASYNC_DMA]
    return [i for i in mine if i >= own[0]] if own else mine


def word_window(steps: Sequence, step_op: Sequence[int], starts: Sequence[int], n_words: int,
                ops: Sequence[int]) -> tuple[int, int]:  # fmt: skip
    """[first, end) words of the ops' part of a stream: from the first word (SET_REGs included)
    of their first step (_window_steps) to the end of their last step (STOP included for the
    last op)."""
    steps = _window_steps(steps, step_op, ops)
    last = steps[-1] + 1
    return starts[steps[0]], starts[last] if last < len(starts) else n_words


def cycle_window(trace: Sequence, steps: Sequence, step_op: Sequence[int], ops: Sequence[int],
                 total: int) -> tuple[int, int]:  # fmt: skip
    """[first, end) cycles of the ops' window (word_window) in a run's RTL trace: from the end of
    the command before their first one to the end of their last one."""
    steps = [i for i in _window_steps(steps, step_op, ops) if i < len(trace)]
    first = trace[steps[0] - 1].end_cycle if steps[0] else 0
    end = trace[steps[-1]].end_cycle if steps[-1] + 1 < len(step_op) else total
    return int(first), int(end)


__all__ = ["FORMATS", "NS_PER_CYCLE", "WaveformWindow", "waveform_format", "word_window", "cycle_window"]
