"""Waveforms of a window of the co-simulation (``npu-byoc cosim ... --trace FILE.vcd
--trace-layers NAME[,NAME]`` or ``--trace-words [PARTITION:]A:B``; docs/waveforms.md).

A whole model's waveform is far too large, so the co-simulation dumps only the cycles of a
window of one partition's stream: its stream runs on the traced Verilator build (a separate
cached library, npu_byoc.runtime.verilator ``waveform=``) and the harness samples the signals
while the word being executed lies in the window. The window is whole commands (each with the
SET_REGs before it): the named layers' commands, from the first that is not a background
prefetch (DMA_IN_ASYNC of their weights, issued while an earlier layer computes) to their last,
or the commands whose words lie in a range of the stream. The format follows the file's suffix:
``.vcd`` (Verilator's VCD writer) or ``.fst`` (its FST writer; needs the LZ4 and zlib headers).
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
class WordRange:
    """``--trace-words [PARTITION:]A:B``: the commands whose words lie in [A, B) of a stream."""

    first: int
    end: int
    partition: str | None = None

    @classmethod
    def parse(cls, text: str) -> WordRange:
        parts = str(text).split(":")
        try:
            if len(parts) not in (2, 3):
                raise ValueError
            *partition, a, b = parts
            first, end = int(a), int(b)
        except ValueError:
            raise NpuByocError(f"--trace-words '{escape.text(text, 80)}': expected A:B or PARTITION:A:B "
                               "(stream words, A < B)") from None  # fmt: skip
        if not 0 <= first < end:
            raise NpuByocError(f"--trace-words '{escape.text(text, 80)}': expected 0 <= A < B")
        return cls(first, end, partition[0] if partition else None)


@dataclass(frozen=True)
class Stream:
    """What a window is cut from: a partition's schedule steps, the op of each, and their words."""

    steps: Sequence
    step_op: Sequence[int]
    starts: Sequence[int]  # per step: its first word (encode_with_starts)
    n_words: int


@dataclass(frozen=True)
class WaveformWindow:
    """What to dump to ``path``: the ``layers`` (each item a layer's name, or names joined by
    commas) or the ``words`` of one partition."""

    path: Path
    layers: tuple[str, ...] = ()
    words: WordRange | None = None

    @property
    def format(self) -> str:
        return waveform_format(self.path)

    def resolve(self, plans: Mapping[str, object], stream_of) -> tuple[str, list[int], list[str]]:
        """(partition, its steps to dump, the layers named) among the lowered ``plans`` (for a
        word range: the layers of its commands); ``stream_of(partition)`` gives its
        :class:`Stream`. One line naming an unknown layer or partition, layers of two
        partitions, or a range outside the stream."""
        if self.words is not None and self.layers:
            raise NpuByocError("--trace-layers and --trace-words: give one of them")
        if self.words is not None:
            partition = self._partition(plans)
            s = stream_of(partition)
            steps = range_steps(s, self.words, partition)
            return partition, steps, [plans[partition].ops[k].name for k in sorted({s.step_op[i] for i in steps})]
        if not self.layers:
            raise NpuByocError("--trace-layers: name at least one layer (a whole model's waveform is too large)")
        where: dict[str, tuple[str, int]] = {}
        for name, plan in plans.items():
            for k, op in enumerate(plan.ops):
                where.setdefault(op.name, (name, k))
        names = [n for item in self.layers for n in split_layers(item, where)]
        partitions = sorted({where[n][0] for n in names})
        if len(partitions) > 1:
            raise NpuByocError(f"--trace-layers: the layers are in different NPU partitions ({', '.join(partitions)}); "
                               "trace the layers of one partition at a time")  # fmt: skip
        s = stream_of(partitions[0])
        ops = sorted({where[n][1] for n in names})
        return partitions[0], layer_steps(s.steps, s.step_op, ops), [plans[partitions[0]].ops[k].name for k in ops]

    def _partition(self, plans: Mapping[str, object]) -> str:
        given = self.words.partition
        if given is None:
            if len(plans) != 1:
                raise NpuByocError(f"--trace-words: the model has {len(plans)} NPU partitions "
                                   f"({escape.text(', '.join(plans), 200)}); name one: PARTITION:A:B")  # fmt: skip
            return next(iter(plans))
        if given not in plans:
            raise NpuByocError(f"--trace-words: no NPU partition is named '{escape.text(given, 80)}' "
                               f"(the model's: {escape.text(', '.join(plans), 200) or 'none'})")  # fmt: skip
        return given


def split_layers(item: str, known: Mapping[str, object]) -> list[str]:
    """The layer names of one ``--trace-layers`` value: itself if a layer has that name (a name
    may contain commas), else its comma-separated parts; one line naming an unknown one."""
    if item in known:
        return [item]
    parts = [n for n in item.split(",") if n] or [item]
    missing = [n for n in parts if n not in known]
    if missing:
        shown = ", ".join(escape.text(n, 80) for n in list(known)[:4])
        raise NpuByocError(f"--trace-layers: no NPU layer is named '{escape.text(missing[0], 120)}' "
                           f"(NPU layers are named as in the report, e.g. {shown})")  # fmt: skip
    return parts


def layer_steps(steps: Sequence, step_op: Sequence[int], ops: Sequence[int]) -> list[int]:
    """The steps from the ops' first one that is not a background DMA (a prefetch issued among
    an earlier layer's commands) to their last, and every step between (a window is one
    stretch of the stream)."""
    mine = [i for i, k in enumerate(step_op) if k in set(ops)]
    if not mine:
        raise NpuByocError("--trace-layers: the layers have no commands in their partition's stream")
    own = [i for i in mine if steps[i].opcode not in ASYNC_DMA]
    return list(range(own[0] if own else mine[0], mine[-1] + 1))


def range_steps(stream: Stream, words: WordRange, partition: str) -> list[int]:
    """The steps (each a command and the SET_REGs before it) with a word in [first, end)."""
    starts, n = list(stream.starts), stream.n_words
    if words.end > n:
        raise NpuByocError(f"--trace-words {words.first}:{words.end}: the stream of {partition} has {n} words "
                           f"(0 to {n - 1})")  # fmt: skip
    ends = starts[1:] + [n]
    steps = [i for i, (a, b) in enumerate(zip(starts, ends)) if a < words.end and words.first < b]
    if not steps:
        raise NpuByocError(f"--trace-words {words.first}:{words.end}: no command there (the commands of "
                           f"{partition} are words {starts[0] if starts else 0} to {n - 1})")  # fmt: skip
    return steps


def step_words(starts: Sequence[int], n_words: int, steps: Sequence[int]) -> tuple[int, int]:
    """[first, end) words of consecutive steps: from the first word (SET_REGs included) of the
    first to the end of the last (STOP included for the stream's last step)."""
    last = steps[-1] + 1
    return starts[steps[0]], starts[last] if last < len(starts) else n_words


def step_cycles(trace: Sequence, n_steps: int, steps: Sequence[int], total: int) -> tuple[int, int]:
    """[first, end) cycles of consecutive steps in a run's RTL trace (one entry per step): from
    the end of the command before the first to the end of the last (``total`` for the last step)."""
    steps = [i for i in steps if i < len(trace)]
    first = trace[steps[0] - 1].end_cycle if steps[0] else 0
    end = trace[steps[-1]].end_cycle if steps[-1] + 1 < n_steps else total
    return int(first), int(end)


def word_window(steps: Sequence, step_op: Sequence[int], starts: Sequence[int], n_words: int,
                ops: Sequence[int]) -> tuple[int, int]:  # fmt: skip
    """[first, end) words of the ops' part of a stream (layer_steps, step_words)."""
    return step_words(starts, n_words, layer_steps(steps, step_op, ops))


def cycle_window(trace: Sequence, steps: Sequence, step_op: Sequence[int], ops: Sequence[int],
                 total: int) -> tuple[int, int]:  # fmt: skip
    """[first, end) cycles of the ops' window (word_window) in a run's RTL trace."""
    return step_cycles(trace, len(step_op), layer_steps(steps, step_op, ops), total)


__all__ = ["FORMATS", "NS_PER_CYCLE", "WaveformWindow", "WordRange", "Stream", "waveform_format", "split_layers",
           "layer_steps", "range_steps", "step_words", "step_cycles", "word_window", "cycle_window"]  # fmt: skip
