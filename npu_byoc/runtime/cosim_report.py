"""The co-simulation's report: per-layer results, the summary and the roofline, and their
renderers (text, CSV, JSON, the utilization plot). npu_byoc.runtime.cosim runs the model and
fills it.

The RTL's per-command trace attributes its cycles to layers (trace entry i is step i's
command, ``Schedule.step_op`` names its layer; a layer's SET_REGs count with it, the header
with the first layer and STOP with the last). For each layer the report gives:

=================  ==========================================================================
cycles             the RTL's clock cycles of the layer's part of the stream
compute_cycles     the cycles of its compute kicks alone (CONV, DWCONV, FC, pools, MEAN, ADD,
                   LUT; each with the fetch of its word, without the SET_REGs before it)
ideal_cycles       MACs / (R·C): what a fully busy R × C array would need
utilization        ideal / compute cycles: how busy the array is while it computes
utilization_overall  ideal / cycles: DMA and register writes included
predicted_cycles   the analytic model (npu_byoc.arch.cycles) of the same words: equal
max_diff_golden    max |RTL − golden model| in LSB of the layer's output where it leaves the
                   NPU (a partition output, or a tensor spilled to SCRATCH): must be 0, else
                   the run ends with ``CosimMismatch`` (npu_byoc.runtime.cosim; after the
                   report is complete); None for a layer whose output stayed in SRAM (``resident``): it is checked
                   through the outputs computed from it
max_diff_tvm       max |golden − TVM's CPU result| in LSB, TVM's CPU build of the layer's
                   composite function (the QDQ graph the frontend made of the operator,
                   computed in float) fed the golden model's inputs of that layer: the
                   float-vs-integer difference of that layer alone, not the error compounded
                   along the model
=================  ==========================================================================
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from ..util import escape
from ..arch.config import HwConfig
from ..arch.isa import DMA_OPCODES, Opcode
from ..arch import cycles as cycle_model
from ..arch.memory import MEMORIES, memory, memory_name, sustained_bytes_per_cycle
from ..ops.npu_ops import (
    Add, Conv2D, DepthwiseConv2D, FullyConnected, Gather, Lut, Mean, Mul, NpuOp, Pool, ResizeBilinear,
    Softmax, TransposeConv2D,
)  # fmt: skip
from ..codegen.lower import PartitionPlan
from ..ops.registry import NPU_OPS
from ..codegen.schedule import schedule_partition
from ..codegen.weight_compress import weight_bytes
from ..codegen.tiling import tile_sram_bytes

LONG_RUN = 4096  # bytes: the contiguous run the roofline's sustained bandwidths assume

OP_CLASSES = ("conv", "pointwise", "transpose_conv", "depthwise", "fc", "pool", "mean", "add", "mul", "lut", "gather",
              "resize", "softmax")
MAC_CLASSES = ("conv", "pointwise", "transpose_conv", "depthwise", "fc", "grouped_conv", "matmul", "strided_conv")
CLASS_NAMES = {
    "conv": "standard conv",
    "pointwise": "pointwise conv (1x1)",
    "transpose_conv": "transposed conv",
    "depthwise": "depthwise conv",
    "fc": "fully connected",
    "pool": "pool",
    "mean": "mean",
    "add": "add",
    "mul": "mul",
    "lut": "lut",
    "gather": "gather (copies)",
    "resize": "bilinear resize",
    "softmax": "softmax",
}
# An op this table does not list is classed by its own spec (NpuOpSpec.report_class), after these.
_SPEC_CLASSES = {t: spec.report_class for t, spec in NPU_OPS.items() if spec.report_class is not None}
OP_CLASSES += tuple(dict.fromkeys(key for key, _ in _SPEC_CLASSES.values() if key not in OP_CLASSES))
CLASS_NAMES |= {key: name for key, name in _SPEC_CLASSES.values() if key not in CLASS_NAMES}
_CLASS_OF_TYPE = {TransposeConv2D: "transpose_conv", DepthwiseConv2D: "depthwise", FullyConnected: "fc", Pool: "pool",
                  Mean: "mean", Add: "add", Mul: "mul", Lut: "lut", Gather: "gather", ResizeBilinear: "resize",
                  Softmax: "softmax"}  # fmt: skip
_CLASS_OF_TYPE |= {t: key for t, (key, _) in _SPEC_CLASSES.items() if t not in _CLASS_OF_TYPE}
_DMA = set(DMA_OPCODES)
TRAFFIC_KEYS = ("const_mem_read_bytes", "fm_mem_read_bytes", "fm_mem_write_bytes", "weight_bytes", "weight_bytes_encoded")
_NOT_COMPUTE = {Opcode.NOP, Opcode.SET_REG, Opcode.STOP, Opcode.WAIT_DMA} | _DMA


def op_class(op: NpuOp) -> str:
    """The report's class of an NPU op: conv (standard), pointwise (1x1 conv), transpose_conv, depthwise, fc,
    pool, mean, add, mul, lut, gather, resize, softmax, then the classes ops name in their specs."""
    if isinstance(op, Conv2D) and type(op) not in _CLASS_OF_TYPE:  # a CONV form of another op keeps its class
        return "pointwise" if tuple(op.kernel) == (1, 1) else "conv"
    return _CLASS_OF_TYPE[type(op)]


@dataclass
class LayerResult:
    """One NPU layer co-simulated on the RTL (see the module docstring for every field)."""

    index: int  # in execution order, over the whole model
    partition: str
    name: str
    op: str  # op_class
    shape: str  # "HxWxC -> HxWxC"
    macs: int
    cycles: int
    compute_cycles: int
    dma_cycles: int
    control_cycles: int  # header, SET_REGs, WAIT_DMAs (waiting for background DMA), STOP
    predicted_cycles: int
    ideal_cycles: float
    utilization: float | None  # ideal / compute cycles (MAC layers)
    utilization_overall: float | None  # ideal / cycles (MAC layers)
    max_diff_golden: int | None  # None: the output stayed in SRAM (resident), not observable
    max_diff_tvm: int | None
    kicks: int
    rtl_seconds: float
    resident: bool = False  # its output stayed in SRAM for the next layers
    sram_bytes: int = 0  # the SRAM its tiles take (codegen.tiling.tile_sram_bytes)
    const_mem_read_bytes: int = 0  # bytes its DMAs read from the weights' memory (CONST)
    fm_mem_read_bytes: int = 0  # ... read from the feature maps' memory (SCRATCH, IO*)
    fm_mem_write_bytes: int = 0  # ... written to it
    weight_bytes: int = 0  # its weights' bytes as loaded (per channel block; requantize records not included)
    weight_bytes_encoded: int = 0  # ... as read from CONST: fewer where the weight decoder decodes them


@dataclass
class CosimReport:
    model: str
    hw: dict
    layers: list[LayerResult] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    runs: list = field(default_factory=list, repr=False)  # StreamRun per stream run: the timeline's data

    @property
    def mismatches(self) -> list[LayerResult]:
        """Layers whose RTL output differs from the golden model's (must be none)."""
        return [r for r in self.layers if r.max_diff_golden]

    def to_dict(self) -> dict:
        return {"model": self.model, "hw": self.hw, "layers": [asdict(r) for r in self.layers],
                "summary": self.summary}  # fmt: skip

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def write_json(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json() + "\n")

    def to_csv(self) -> str:
        out = io.StringIO()
        names = [f.name for f in fields(LayerResult)]
        writer = csv.DictWriter(out, names, lineterminator="\n")
        writer.writeheader()
        for r in self.layers:
            writer.writerow({k: ("" if v is None else escape.csv_cell(v)) for k, v in asdict(r).items()})
        return out.getvalue()

    def write_csv(self, path: str | Path) -> None:
        Path(path).write_text(self.to_csv())

    def write_timeline(self, path: str | Path) -> None:
        """The command timeline as Chrome / Perfetto trace-event JSON (npu_byoc.runtime.cosim_timeline)."""
        from .cosim_timeline import write_timeline

        write_timeline(self.runs, HwConfig(**self.hw), path, self.model)

    def plot(self, path: str | Path) -> None:
        """A PNG of the MAC layers' utilization, one bar per layer coloured by op class."""
        plot_utilization(self, path)

    # -- text ----------------------------------------------------------------------------------

    def to_text(self, layers: bool = True) -> str:
        """The per-layer table (``layers=False``: the summary only) and the summary."""
        hw, s = self.hw, self.summary
        lines = [f"Co-simulation of {escape.text(self.model)} on the RTL ({hw['array_rows']} x {hw['array_cols']} MAC array, "
                 f"{hw['sram_bytes'] // 1024} KiB SRAM, {hw.get('dma_bytes_per_cycle', 16)} DMA bytes per cycle): every NPU "
                 "partition on Verilator as the one stream production runs"]  # fmt: skip
        if layers:
            w = min(max([len(r.name) for r in self.layers] + [5]), 44)
            ow = max([len(r.op) for r in self.layers] + [9])
            lines.append("")
            lines.append(f"  {'#':>3} {'layer':<{w}} {'op':<{ow}} {'MACs':>9} {'cycles':>8} {'compute':>8} {'ideal':>7} "
                         f"{'util':>6} {'overall':>7} {'golden':>6} {'tvm':>4}")  # fmt: skip
            for r in self.layers:
                name = escape.text_column(r.name, w)
                lines.append(f"  {r.index:>3} {name:<{w}} {r.op:<{ow}} {r.macs:>9} {r.cycles:>8} {r.compute_cycles:>8} "
                             f"{r.ideal_cycles:>7.0f} {_pct(r.utilization):>6} {_pct(r.utilization_overall):>7} "
                             f"{_num(r.max_diff_golden):>6} {_num(r.max_diff_tvm):>4}")  # fmt: skip
        lines.append("")
        lines.append(f"  {'op class':<21} {'layers':>6} {'MACs':>10} {'cycles':>9} {'compute':>9} {'util':>6} "
                     f"{'overall':>7}")  # fmt: skip
        for cls, c in s["per_class"].items():
            lines.append(f"  {CLASS_NAMES[cls]:<21} {c['layers']:>6} {c['macs']:>10} {c['cycles']:>9} "
                         f"{c['compute_cycles']:>9} {_pct(c['utilization']):>6} {_pct(c['utilization_overall']):>7}")  # fmt: skip
        lines.append(f"  {'total':<21} {s['layers']:>6} {s['macs']:>10} {s['cycles']:>9} {s['compute_cycles']:>9} "
                     f"{_pct(s['utilization']):>6} {_pct(s['utilization_overall']):>7}")  # fmt: skip
        lines.append("")
        lines.append(f"  cycles: {s['cycles']} (compute {s['compute_cycles']}, DMA {s['dma_cycles']}, "
                     f"header/SET_REG/WAIT_DMA/STOP "
                     f"{s['control_cycles']}); analytic model {s['predicted_cycles']} "
                     f"({'exact' if s['cycle_model_exact'] else 'DIFFERS'})")  # fmt: skip
        if "bound_cycles" in s:
            lines.append(f"  roofline bound: {s['bound_cycles']:.0f} cycles = max(MACs / {hw['array_rows'] * hw['array_cols']} "
                         f"= {s['compute_bound_cycles']:.0f}, {s['minimum_external_bytes']} external bytes / "
                         f"{_bandwidths(s, hw)} = {s['memory_bound_cycles']:.0f}); "
                         f"cycles / bound = {s['cycles'] / max(s['bound_cycles'], 1):.2f}")  # fmt: skip
        if "milliseconds" in s:
            lines.append(f"  time: {s['milliseconds']:.3f} ms at {s['core_clock_hz'] / 1e6:g} MHz = "
                         f"{s['inferences_per_second']:.1f} inferences/s; memory: weights read {s['const_mem_read_bytes']} B "
                         f"({s['weight_bytes_encoded']} encoded of {s['weight_bytes']}), "
                         f"feature maps read {s['fm_mem_read_bytes']} B and written {s['fm_mem_write_bytes']} B; "
                         f"SRAM peak {s['sram_peak_bytes']} B of {hw['sram_bytes']}")  # fmt: skip
        exact = "bit-exact" if s["max_diff_golden"] == 0 else "MISMATCH"
        compared = s.get("layers_compared_golden", s["layers"])
        lines.append(f"  max LSB difference: vs golden model {s['max_diff_golden']} ({exact}; compared: the outputs "
                     f"of {compared} of {s['layers']} layers, those that leave the NPU, the others resident in SRAM "
                     f"feed them); vs TVM CPU (golden layer inputs) {_num(s['max_diff_tvm'])}")  # fmt: skip
        for o in s.get("outputs", []):
            unit = " LSB" if o["integer"] else f" ({o['dtype']} output)"
            lines.append(f"  model output {o['output']} vs reference: max |difference| {o['max_diff']:g}{unit}, "
                         f"{100 * o['fraction']:.1f}% of elements differ")  # fmt: skip
        lines.append(f"  simulated {s['simulated_cycles_per_second'] / 1e6:.2f} M cycles/s; wall {s['wall_seconds']:.1f} s "
                     f"(RTL {s['seconds']['rtl']:.2f} s, golden {s['seconds']['golden']:.2f} s, TVM compile "
                     f"{s['seconds']['compile']:.1f} s)")  # fmt: skip
        return "\n".join(lines) + "\n"


def _bandwidths(s: dict, hw: dict) -> str:
    """The roofline's bytes per cycle: the port's, or each memory's when they differ."""
    bw = s.get("sustained_bytes_per_cycle") or {}
    if not bw or bw["const_mem"] == bw["fm_mem"]:
        return f"{bw.get('fm_mem', hw.get('dma_bytes_per_cycle', 16)):g} per cycle"
    return (f"(weights {s['minimum_const_bytes']} at {bw['const_mem']:.3g}, the rest at {bw['fm_mem']:.3g} per "
            "cycle)")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _num(x) -> str:
    return "-" if x is None else f"{x:g}"


# ---------------------------------------------------------------------------------------------
# The figures: per layer from a run's trace, the summary, the roofline


def layer_results(plan: PartitionPlan, schedule, starts: list[int], n_words: int, status, hw: HwConfig,
                  first_index: int) -> list[LayerResult]:  # fmt: skip
    """Per layer of a whole-partition run: its cycles from the RTL trace (trace entry i is step
    i's command; a layer runs from the end of the previous layer's last command to the end of
    its own, so its SET_REGs count, the header goes to the first layer and STOP to the last)
    and the analytic model's cycles of the same words."""
    n = len(plan.ops)
    cyc = [0] * n
    compute, dma, kicks = [0] * n, [0] * n, [0] * n
    predicted = [0] * n
    ends = starts[1:] + [n_words - 1]  # per step: the word after its command
    last_end = 0
    timeline = cycle_model.command_timeline(schedule.steps, hw)
    for i, (entry, k) in enumerate(zip(status.trace, schedule.step_op)):
        if entry.opcode in _DMA:
            dma[k] += entry.cycles
        elif entry.opcode not in _NOT_COMPUTE:
            compute[k] += entry.cycles
            kicks[k] += 1
        cyc[k] += entry.end_cycle - last_end
        last_end = entry.end_cycle
        predicted[k] += ends[i] - starts[i] - 1 + timeline[i]  # SET_REGs + the command
    if n:
        cyc[n - 1] += status.cycles - last_end  # STOP
        predicted[0] += starts[0] if starts else 0  # the header
        predicted[n - 1] += cycle_model.stream_cycles(schedule.steps, hw) - sum(predicted)  # STOP
    traffic = [dict.fromkeys(TRAFFIC_KEYS, 0) for _ in range(n)]
    for step, k in zip(schedule.steps, schedule.step_op):
        if step.opcode in _DMA:
            key = "fm_mem_write_bytes" if step.direction == Opcode.DMA_OUT else f"{memory_name(step.region)}_read_bytes"
            traffic[k][key] += step.nbytes

    for k, op in enumerate(plan.ops):
        original, encoded = weight_bytes(op, schedule.tilings[k].channels, hw)
        traffic[k] |= {"weight_bytes": original, "weight_bytes_encoded": encoded}
    peak = hw.array_rows * hw.array_cols
    wall = status.wall_seconds / max(status.cycles, 1)
    out = []
    for k, op in enumerate(plan.ops):
        ideal = op.macs / peak
        mac = op_class(op) in MAC_CLASSES
        out.append(LayerResult(
            index=first_index + k, partition=plan.name, name=op.name, op=op_class(op),
            shape=f"{'x'.join(map(str, op.inputs[0].shape))} -> {'x'.join(map(str, op.ofm.shape))}",
            macs=int(op.macs), cycles=cyc[k], compute_cycles=compute[k], dma_cycles=dma[k],
            control_cycles=cyc[k] - compute[k] - dma[k], predicted_cycles=predicted[k],
            ideal_cycles=ideal, utilization=ideal / compute[k] if mac and compute[k] else None,
            utilization_overall=ideal / cyc[k] if mac and cyc[k] else None,
            max_diff_golden=None, max_diff_tvm=None, kicks=kicks[k], rtl_seconds=wall * cyc[k],
            resident=op.name in schedule.resident,
            sram_bytes=tile_sram_bytes(op, schedule.tilings[k].rows, schedule.tilings[k].channels), **traffic[k],
        ))  # fmt: skip
    return out


def minimum_external_bytes(plans, hw: HwConfig) -> int:
    """Bytes every execution of the partitions must move between external memory and the NPU:
    their constants (weights, requantize tables, LUTs) once, their inputs once, their outputs
    once. Spills that the SRAM size forces are not counted, so this is a lower bound."""
    total = 0
    for plan in plans:
        total += len(schedule_partition(plan, hw).constants)
        total += sum(io.ref.nbytes for io in [*plan.inputs, *plan.outputs])
    return total


def roofline(plans, hw: HwConfig) -> dict:
    """``bound_cycles``: max(MACs / (rows · cols), the minimum external bytes of each memory over
    the bandwidth it sustains on long runs with its bursts, latency and reads in flight —
    ``dma_bytes_per_cycle`` with the default memories), the cycles no schedule of these
    partitions on ``hw`` can beat."""
    plans = list(plans)
    macs = sum(plan.macs for plan in plans)
    ext = minimum_external_bytes(plans, hw)
    const = sum(len(schedule_partition(plan, hw).constants) for plan in plans)
    compute_bound = macs / (hw.array_rows * hw.array_cols)
    bw = {m: sustained_bytes_per_cycle(memory(hw, m), hw.dma_bytes_per_cycle, LONG_RUN) for m in MEMORIES}
    if bw["const_mem"] == bw["fm_mem"]:
        memory_bound = ext / bw["fm_mem"]
    else:  # the constants through their memory, the inputs and outputs through theirs
        memory_bound = const / bw["const_mem"] + (ext - const) / bw["fm_mem"]
    return {"minimum_external_bytes": ext, "minimum_const_bytes": const, "compute_bound_cycles": compute_bound,
            "memory_bound_cycles": memory_bound, "bound_cycles": max(compute_bound, memory_bound),
            "sustained_bytes_per_cycle": bw}  # fmt: skip


def summarize(layers: Sequence[LayerResult], hw: HwConfig, wall: float = 0.0, seconds: dict | None = None) -> dict:
    """Totals, utilization overall and per op class, speed."""
    peak = hw.array_rows * hw.array_cols

    def totals(rows: Sequence[LayerResult]) -> dict:
        macs = sum(r.macs for r in rows)
        cyc = sum(r.cycles for r in rows)
        mac_rows = [r for r in rows if r.op in MAC_CLASSES]
        compute_mac = sum(r.compute_cycles for r in mac_rows)
        ideal = macs / peak
        return {
            "layers": len(rows), "macs": macs, "cycles": cyc,
            "compute_cycles": sum(r.compute_cycles for r in rows),
            "dma_cycles": sum(r.dma_cycles for r in rows),
            "ideal_cycles": ideal,
            "utilization": ideal / compute_mac if macs and compute_mac else None,
            "utilization_overall": ideal / cyc if macs and cyc else None,
        }  # fmt: skip

    summary = totals(layers)
    summary["control_cycles"] = sum(r.control_cycles for r in layers)
    summary["mac_compute_cycles"] = sum(r.compute_cycles for r in layers if r.op in MAC_CLASSES)
    summary["predicted_cycles"] = sum(r.predicted_cycles for r in layers)
    summary["cycle_model_exact"] = all(r.predicted_cycles == r.cycles for r in layers)
    summary["per_class"] = {c: totals([r for r in layers if r.op == c]) for c in OP_CLASSES
                            if any(r.op == c for r in layers)}  # fmt: skip
    summary["max_diff_golden"] = max((r.max_diff_golden or 0 for r in layers), default=0)
    summary["layers_compared_golden"] = sum(r.max_diff_golden is not None for r in layers)
    tvm_diffs = [r.max_diff_tvm for r in layers if r.max_diff_tvm is not None]
    summary["max_diff_tvm"] = max(tvm_diffs) if tvm_diffs else None
    summary["layers_over_1_lsb_vs_tvm"] = [r.name for r in layers if (r.max_diff_tvm or 0) > 1]
    for key in TRAFFIC_KEYS:
        summary[key] = sum(getattr(r, key) for r in layers)
    summary["sram_peak_bytes"] = max((r.sram_bytes for r in layers), default=0)
    summary["core_clock_hz"] = hw.core_clock_hz
    summary["milliseconds"] = 1e3 * summary["cycles"] / hw.core_clock_hz
    summary["inferences_per_second"] = hw.core_clock_hz / summary["cycles"] if summary["cycles"] else 0.0
    rtl = sum(r.rtl_seconds for r in layers)
    summary["rtl_seconds"] = rtl
    summary["simulated_cycles_per_second"] = summary["cycles"] / rtl if rtl > 0 else 0.0
    summary["wall_seconds"] = wall
    summary["seconds"] = dict(seconds or {"rtl": rtl, "golden": 0.0, "compile": 0.0})
    return summary


# ---------------------------------------------------------------------------------------------
# The plot

CLASS_COLOURS = {"conv": "#1f77b4", "pointwise": "#2ca02c", "transpose_conv": "#17becf", "depthwise": "#ff7f0e",
                 "fc": "#9467bd", "grouped_conv": "#8c564b", "matmul": "#e377c2", "strided_conv": "#bcbd22"}


def plot_utilization(report: CosimReport, path: str | Path) -> None:
    """Bars: each MAC layer's utilization while it computes, coloured by class (standard,
    pointwise, depthwise, fully connected); dots: its utilization overall (DMA included)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # lazy: only the plot needs it
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    rows = [r for r in report.layers if r.op in MAC_CLASSES]
    fig = Figure(figsize=(max(6.0, 0.16 * len(rows) + 2.5), 4.0), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(rows))
    ax.bar(x, [100 * (r.utilization or 0) for r in rows], color=[CLASS_COLOURS.get(r.op, "#7f7f7f") for r in rows], width=0.8)
    ax.plot(x, [100 * (r.utilization_overall or 0) for r in rows], "k.", markersize=4)
    ax.axhline(90, color="grey", lw=0.7, ls="--")
    ax.axhline(50, color="grey", lw=0.7, ls=":")
    ax.set_ylim(0, 119)
    ax.set_yticks(range(0, 101, 20))
    ax.set_xlim(-0.6, max(len(rows), 1) - 0.4)
    ax.set_xlabel("MAC layer (execution order)")
    ax.set_ylabel("MAC array utilization (%)")
    s = report.summary
    ax.set_title(f"{report.model}: {report.hw['array_rows']}x{report.hw['array_cols']} array, "
                 f"{s.get('cycles', 0)} cycles, {100 * (s.get('utilization') or 0):.1f}% while computing", fontsize=9,
                 parse_math=False)  # a file name with "$" is not mathtext  # fmt: skip
    present = [c for c in MAC_CLASSES if any(r.op == c for r in rows)]
    handles = [Patch(color=CLASS_COLOURS.get(c, "#7f7f7f"), label=CLASS_NAMES.get(c, c)) for c in present]
    handles.append(ax.plot([], [], "k.", label="overall (DMA included)")[0])
    ax.legend(handles=handles, fontsize=7, loc="upper center", ncol=len(handles), framealpha=0.9)
    fig.tight_layout()
    fig.savefig(str(path), format="png")


__all__ = [
    "CosimReport",
    "LayerResult",
    "op_class",
    "layer_results",
    "summarize",
    "roofline",
    "minimum_external_bytes",
    "plot_utilization",
    "OP_CLASSES",
    "MAC_CLASSES",
    "CLASS_NAMES",
]
