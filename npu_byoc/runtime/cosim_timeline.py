"""The co-simulation's command timeline as Chrome / Perfetto trace-event JSON
(``npu-byoc cosim ... --timeline FILE.json``; docs/timeline.md).

One process, the NPU, with one track (thread) per unit:

=================  ============================================================================
command processor  every command the RTL executed, from the retirement of the word before it to its
                   own (the RTL's trace entry: its fetch included); the register writes before a
                   command are one slice ``<layer>: SET_REG`` (``args.registers``: how many)
DMA in, DMA out    the DMA engine copying a transfer (DMA_IN[_ASYNC] / DMA_OUT[_ASYNC]); a
                   background (_ASYNC) transfer overlaps the commands after it
MAC array          the CONV, DWCONV and FC kicks (the command processor's slice of that kick)
vector unit        the other compute kicks: pools, MEAN, ADD, SQDIFF, MUL, LUT, SOFTMAX, LAYERNORM
=================  ============================================================================

Each slice is named ``<layer>: <OPCODE>`` and carries its partition, image, stream word and
cycles in ``args``. Time is the NPU's clock: ``ts`` and ``dur`` are in cycles (the viewer's
"1 µs" is one cycle), the partitions' runs one after the other in execution order, as the
report's layers are. The command processor's and the kicks' slices are the RTL's trace; the DMA
engine's copies are not in that trace and come from the analytic model (npu_byoc.arch.cycles,
exact with the RTL cycle for cycle: ``Timeline``'s transfer ends ``e_j``, each copy lasting its
``kick_cycles``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..arch import cycles as cycle_model
from ..arch.config import HwConfig
from ..arch.isa import ASYNC_DMA, DMA_OPCODES, Opcode, Reg
from ..util import escape

PID = 1
TRACKS = {"command processor": 1, "DMA in": 2, "DMA out": 3, "MAC array": 4, "vector unit": 5}
MAC_OPCODES = frozenset({Opcode.CONV, Opcode.DWCONV, Opcode.FC})
_NOT_COMPUTE = frozenset({Opcode.NOP, Opcode.SET_REG, Opcode.STOP, Opcode.WAIT_DMA}) | DMA_OPCODES
_DIRECTION = {Opcode.DMA_IN: "DMA in", Opcode.DMA_OUT: "DMA out", Opcode.DMA_IN_DECODE: "DMA in",
              **{a: "DMA out" if s == Opcode.DMA_OUT else "DMA in" for a, s in ASYNC_DMA.items()}}  # fmt: skip


@dataclass
class StreamRun:
    """One run of a partition's stream on the RTL (one image): what its timeline needs."""

    partition: str
    image: int
    layer_names: list[str]  # per op of the plan
    steps: list  # the schedule's steps (Dma / Kick)
    step_op: list[int]  # per step: its op's index
    starts: list[int]  # per step: its first word (encode_with_starts)
    n_words: int
    trace: list  # the RTL's TraceEntry per step
    cycles: int  # the run's cycles (start pulse to done)


def _slice(name: str, track: str, ts: int, dur: int, args: dict) -> dict:
    return {"name": name, "cat": track, "ph": "X", "pid": PID, "tid": TRACKS[track], "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def _dma_copies(run: StreamRun, hw: HwConfig) -> dict[int, tuple[int, int]]:
    """Per DMA step: (first, end) cycle of the engine's copy, from the analytic model."""
    clock, out = cycle_model.Timeline(hw.dma_queue_depth, hw), {}
    ends = run.starts[1:] + [run.n_words - 1]
    clock.t = run.starts[0] if run.starts else 0
    busy_until = 0
    for i, (step, start, end) in enumerate(zip(run.steps, run.starts, ends)):
        clock.t += end - 1 - start  # its SET_REGs
        own = cycle_model.step_cycles(step, hw)
        pending = step[Reg.DMA_WAIT_PENDING] if step.opcode == Opcode.WAIT_DMA else 0
        clock.command(step.opcode, own, pending, cycle_model.dma_registers(step))
        if step.opcode in DMA_OPCODES:
            e = clock.ends[-1]
            # one copy at a time: a queued one starts as the last ends (its latency may be paid
            # already: then it ends sooner than `own` after that)
            first = max(e - own, busy_until)
            out[i], busy_until = (first, e), e
    return out


def run_events(run: StreamRun, hw: HwConfig, offset: int) -> list[dict]:
    """The slices of one run, its cycle 0 at ``offset``."""
    events = []
    copies = _dma_copies(run, hw)
    last_end = 0
    for i, (entry, k) in enumerate(zip(run.trace, run.step_op)):
        op = Opcode(entry.opcode)
        layer = escape.text(run.layer_names[k], 200)
        name = f"{layer}: {op.name}"
        args = {"layer": layer, "partition": run.partition, "image": run.image, "word": int(entry.word_index),
                "cycles": int(entry.cycles)}  # fmt: skip
        ts = offset + int(entry.start_cycle)
        if entry.start_cycle > last_end:  # its SET_REGs (the first command: the header too)
            regs = (int(entry.word_index) - run.starts[i]) // 2
            events.append(_slice(f"{layer}: SET_REG", "command processor", offset + last_end,
                                 int(entry.start_cycle) - last_end, {**args, "registers": regs,
                                                                     "cycles": int(entry.start_cycle) - last_end}))
        last_end = int(entry.end_cycle)
        events.append(_slice(name, "command processor", ts, int(entry.cycles), args))
        if op in MAC_OPCODES:
            events.append(_slice(name, "MAC array", ts, int(entry.cycles), args))
        elif op not in _NOT_COMPUTE:
            events.append(_slice(name, "vector unit", ts, int(entry.cycles), args))
        elif i in copies:
            first, end = copies[i]
            events.append(_slice(name, _DIRECTION[op], offset + first, end - first, {**args, "cycles": end - first}))
    if run.layer_names and run.cycles > last_end:  # STOP, after the DMA engine drained
        k = run.step_op[-1] if run.step_op else 0
        events.append(_slice(f"{escape.text(run.layer_names[k], 200)}: STOP", "command processor", offset + last_end,
                             run.cycles - last_end, {"partition": run.partition, "image": run.image,
                                                     "cycles": run.cycles - last_end}))  # fmt: skip
    return events


def trace_events(runs: list[StreamRun], hw: HwConfig, model: str = "") -> dict:
    """The trace-event JSON object of the runs, in order, one after the other."""
    title = f"NPU {hw.array_rows}x{hw.array_cols}" + (f": {escape.text(model, 200)}" if model else "")
    events: list[dict] = [{"name": "process_name", "ph": "M", "pid": PID, "tid": 0, "args": {"name": title}}]
    for track, tid in TRACKS.items():
        events.append({"name": "thread_name", "ph": "M", "pid": PID, "tid": tid, "args": {"name": track}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": tid, "args": {"sort_index": tid}})
    offset = 0
    for run in runs:
        events += run_events(run, hw, offset)
        offset += run.cycles
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"time_unit": "1 ts = 1 NPU clock cycle", "model": escape.text(model, 200),
                          "cycles": offset}}  # fmt: skip


def write_timeline(runs: list[StreamRun], hw: HwConfig, path: str | Path, model: str = "") -> None:
    Path(path).write_text(json.dumps(trace_events(runs, hw, model)) + "\n")


__all__ = ["StreamRun", "TRACKS", "MAC_OPCODES", "run_events", "trace_events", "write_timeline"]
