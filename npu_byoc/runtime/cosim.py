"""Co-simulation of a whole model on the RTL, partition by partition: cycles, utilization, mismatches.

    report = cosim(mod, [x], reference=[y])   # mod: from npu_byoc.load_model (or partitioned)
    print(report.to_text())
    report.write_json("report.json"); report.write_csv("layers.csv"); report.plot("util.png")

The model runs as on the golden backend — TVM's CPU build for the host graph, the NPU
partitions called from TVM's VM in the order the model calls them — but every NPU partition
runs on the RTL under Verilator (npu_byoc.runtime.verilator) as the one stream production
runs (``schedule_partition``: tiles, DMA transfers, kicks, intermediate tensors resident in
SRAM). The RTL's per-command trace attributes its cycles to layers (trace entry i is step i's
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
                   the run ends with :class:`CosimMismatch` (after the report is complete);
                   None for a layer whose output stayed in SRAM (``resident``): it is checked
                   through the outputs computed from it
max_diff_tvm       max |golden − TVM's CPU result| in LSB, TVM's CPU build of the layer's
                   composite function (the QDQ graph the frontend made of the operator,
                   computed in float) fed the golden model's inputs of that layer: the
                   float-vs-integer difference of that layer alone, not the error compounded
                   along the model
=================  ==========================================================================

The model's next layers and partitions are fed the golden model's values (equal to the RTL's
wherever they are observable). TVM's per-layer results come from one Relax module that calls
every layer's composite function, compiled once per model and cached on disk
(``compiled_reference``), run once after the co-simulation.
"""

from __future__ import annotations

import bisect
import csv
import io
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import tvm
from tvm import relax

from ..util import escape
from ..util.cache import atomic_output, build_lock, cache_dir, content_key, is_intact
from ..arch.encoder import encode_with_starts
from ..codegen.lower import PartitionPlan, partition_batch
from ..codegen.lower import per_image as per_image_shape
from ..ops.npu_ops import (
    Add, Conv2D, DepthwiseConv2D, FullyConnected, Gather, Lut, Mean, Mul, NpuOp, Pool, ResizeBilinear,
    Softmax, TransposeConv2D,
)  # fmt: skip
from ..codegen.schedule import schedule_partition
from ..errors import NpuByocError
from ..arch.config import DEFAULT_CONFIG, HwConfig
from ..arch.isa import DMA_OPCODES, Opcode, Region
from ..ops.composites import npu_functions
from ..partition.pipeline import partition_for_npu, partition_log
from ..ops.table import LAYER_ATTR, VIEW_PATTERNS
from ..util.progress import Progress
from ..util.relax_utils import dtype_of, shape_of
from ..ops.uint8 import to_model
from .tvm_legalize import register as _register_legalizations
from ..arch import cycles as cycle_model
from . import golden

_register_legalizations()  # TVM's CPU build of NHWC conv2d_transpose (npu_byoc.runtime.tvm_legalize)

OP_CLASSES = ("conv", "pointwise", "transpose_conv", "depthwise", "fc", "pool", "mean", "add", "mul", "lut", "gather",
              "resize", "softmax")
MAC_CLASSES = ("conv", "pointwise", "transpose_conv", "depthwise", "fc")
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
_CLASS_OF_TYPE = {TransposeConv2D: "transpose_conv", DepthwiseConv2D: "depthwise", FullyConnected: "fc", Pool: "pool",
                  Mean: "mean", Add: "add", Mul: "mul", Lut: "lut", Gather: "gather", ResizeBilinear: "resize",
                  Softmax: "softmax"}  # fmt: skip
_DMA = set(DMA_OPCODES)
_NOT_COMPUTE = {Opcode.NOP, Opcode.SET_REG, Opcode.STOP, Opcode.WAIT_DMA} | _DMA


def op_class(op: NpuOp) -> str:
    """The report's class of an NPU op: conv (standard), pointwise (1x1 conv), transpose_conv, depthwise, fc,
    pool, mean, add, mul, lut, gather, resize, softmax."""
    if isinstance(op, Conv2D):
        return "pointwise" if tuple(op.kernel) == (1, 1) else "conv"
    return _CLASS_OF_TYPE[type(op)]


class CosimMismatch(NpuByocError):
    """The RTL's output of a layer differs from the golden model's for the same inputs."""

    def __init__(self, message: str, report: "CosimReport"):
        super().__init__(message)
        self.report = report


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


@dataclass
class CosimReport:
    model: str
    hw: dict
    layers: list[LayerResult] = field(default_factory=list)
    summary: dict = field(default_factory=dict)

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
                         f"{hw.get('dma_bytes_per_cycle', 16)} per cycle = {s['memory_bound_cycles']:.0f}); "
                         f"cycles / bound = {s['cycles'] / max(s['bound_cycles'], 1):.2f}")  # fmt: skip
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


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _num(x) -> str:
    return "-" if x is None else f"{x:g}"


# ---------------------------------------------------------------------------------------------
# The structure of a partition: which tensors feed each layer (for TVM's per-layer results)


@dataclass
class _LayerCall:
    name: str
    composite: relax.Function  # a layer's composite, or a concatenation's copy (_copy_function)
    sources: list[tuple[str, int]]  # per composite argument: ("input", i), ("layer", k) or ("concat", (axis, sources))
    shape: tuple[int, ...]  # the layer output's shape in the model (Relax)
    dtype: str


def _layer_calls(func: relax.Function, plan: PartitionPlan | None = None) -> list[_LayerCall]:
    """The composite calls of a Codegen="npu" function in order (= the plan's ops, as
    lower_partition walks them) and where each call's arguments come from. A concatenation
    has no NPU op of its own: its value is its inputs' joined; the copies it adds to the plan
    (``plan.copy_ops``) get entries at their place among the ops (_copy_function)."""
    params = list(func.params)
    bindings = [b for block in func.body.blocks for b in block.bindings]
    local_funcs = {b.var: b.value for b in bindings if isinstance(b.value, relax.Function)}
    aliases = {b.var: b.value for b in bindings if isinstance(b.value, relax.Var)}
    copy_input = dict(plan.copy_ops) if plan is not None else {}  # op index -> concatenation input
    concats: dict = {}  # concatenation var -> (axis, its inputs' sources)
    index: dict = {}  # layer output var -> its entry
    out: list[_LayerCall] = []

    def source(a, layer: str):
        while a in aliases:
            a = aliases[a]
        if a in params:
            return ("input", params.index(a))
        if a in index:
            return ("layer", index[a])
        if a in concats:
            return ("concat", concats[a])
        raise NpuByocError(f"cosim: an argument of layer '{layer}' is neither a partition input "
                           "nor an NPU layer's output")  # fmt: skip

    for b in bindings:
        if not (isinstance(b.value, relax.Call) and b.value.op in local_funcs):
            continue
        composite = local_funcs[b.value.op]
        name = str(composite.attrs[LAYER_ATTR]) if LAYER_ATTR in composite.attrs else str(b.var.name)
        if str(composite.attrs["Composite"]) == "npu.concat":
            args = _concat_inputs(composite, b.value)
            parts = [source(a, name) for a in args]
            while len(out) in copy_input:  # this concatenation's copies, where lowering put them
                k = copy_input[len(out)]
                out.append(_LayerCall(plan.ops[len(out)].name, _copy_function(composite, k), [parts[k]],
                                      shape_of(args[k]), dtype_of(b.var)))  # fmt: skip
                parts[k] = ("layer", len(out) - 1)
            concats[b.var] = (_concat_axis(composite), parts)
        elif str(composite.attrs["Composite"]) in VIEW_PATTERNS:  # a view (reshape): its input's bytes
            aliases[b.var] = b.value.args[0]
        else:
            index[b.var] = len(out)
            out.append(_LayerCall(name, composite, [source(a, name) for a in b.value.args], shape_of(b.var),
                                  dtype_of(b.var)))  # fmt: skip
    return out


def _copy_function(composite: relax.Function, k: int) -> relax.Function:
    """TVM's reference for a concatenation's copy of input ``k``: that input requantized to the
    output's quantization, with the composite's own dequantize and quantize (the int8 form:
    the input as it is)."""
    inner = {b.var: b.value for block in composite.body.blocks for b in block.bindings}
    concat = next(v for v in inner.values() if isinstance(v, relax.Call) and getattr(v.op, "name", "") == "relax.concat")
    field = inner.get(inner.get(concat.args[0], concat.args[0]).fields[k], None)
    root = inner.get(composite.body.body, composite.body.body)
    bb = relax.BlockBuilder()
    if isinstance(field, relax.Call) and getattr(root.op, "name", "") == "relax.quantize":  # qdq
        x = relax.Var("x", field.args[0].ty)
        with bb.function("copy", [x]):
            with bb.dataflow():
                d = bb.emit(relax.op.dequantize(x, field.args[1], field.args[2], axis=int(field.attrs.axis)))
                q = bb.emit_output(relax.op.quantize(d, root.args[1], root.args[2], axis=int(root.attrs.axis),
                                                     out_dtype=str(root.attrs.out_dtype)))  # fmt: skip
            bb.emit_func_output(q)
    else:
        x = relax.Var("x", composite.params[0].ty)
        with bb.function("copy", [x]):
            bb.emit_func_output(x)
    return bb.get()["copy"].without_attr("global_symbol")


def _concat_inputs(composite: relax.Function, call: relax.Call) -> list:
    """The call arguments feeding an npu.concat composite's concatenation, in its order (each
    field is a composite parameter, or the dequantize of one)."""
    inner = {b.var: b.value for block in composite.body.blocks for b in block.bindings}
    concat = next(v for v in inner.values() if isinstance(v, relax.Call) and getattr(v.op, "name", "") == "relax.concat")
    fields = inner.get(concat.args[0], concat.args[0]).fields
    params = list(composite.params)
    out = []
    for f in fields:
        f = inner.get(f, f)
        if isinstance(f, relax.Call):  # dequantize(x, ...)
            f = f.args[0]
        out.append(call.args[params.index(f)])
    return out


def _concat_axis(composite: relax.Function) -> int:
    """The axis of the concat inside an npu.concat composite."""
    call = next(b.value for block in composite.body.blocks for b in block.bindings
                if isinstance(b.value, relax.Call) and getattr(b.value.op, "name", "") == "relax.concat")  # fmt: skip
    return int(call.attrs.axis)


def _source_value(src, inputs, model_values) -> np.ndarray:
    """A layer input's value in the model: a partition input, a layer's output, or the
    concatenation of such values."""
    kind, i = src
    if kind == "input":
        return np.asarray(inputs[i])
    if kind == "layer":
        return model_values[i]
    axis, parts = i
    return np.concatenate([_source_value(s, inputs, model_values) for s in parts], axis=axis)


def _images(calls: list[_LayerCall]) -> int:
    """The batch a partition runs image by image (codegen.lower.partition_batch of its layers)."""
    try:
        return partition_batch([c.shape for c in calls])
    except Exception:  # noqa: BLE001 - lowering reports it
        return 1


def _to_model_shape(hwc: np.ndarray, shape: tuple[int, ...], nchw: bool) -> np.ndarray:
    """An H x W x C feature map (the NPU's view) in the layout and shape of the model tensor."""
    if len(shape) == 4:
        h, w, c = hwc.shape
        if tuple(shape) == (1, c, h, w) and (nchw or tuple(shape) != (1, h, w, c)):
            return np.ascontiguousarray(hwc.transpose(2, 0, 1))[None]
    return hwc.reshape(shape)


def compiled_reference(mod: tvm.IRModule, target: str = "llvm") -> tvm.runtime.Module:
    """TVM's build of ``mod`` for ``target`` as a shared library, cached on disk: the key is the
    module's structural hash (every composite function, constants included), the target and
    TVM's version (with the module's script, so a 64-bit hash collision cannot alias two
    modules); entries are sealed and built once under a lock (npu_byoc.util.cache)."""
    from tvm_ffi import structural_hash  # TVM 0.27's home of structural hashing

    key = content_key(["cosim-layer-reference", str(structural_hash(mod)), mod.script(), str(target), tvm.__version__])
    path = cache_dir() / f"cosim_layers-{key}.so"
    with build_lock(path):
        if not is_intact(path):
            executable = tvm.compile(mod, target=target)
            with atomic_output(path) as tmp:
                executable.export_library(str(tmp))
    return tvm.runtime.load_module(str(path))


class _LayerReference:
    """TVM's CPU build of every layer's composite function, in one module: ``main`` takes every
    layer's inputs and returns every layer's output (compiled once, run once)."""

    def __init__(self, calls: dict[str, list[_LayerCall]], target: str = "llvm"):
        self.keys: list[tuple[str, int]] = []
        self.params: list[list[tuple[tuple[int, ...], str]]] = []  # per layer: (shape, dtype) of its inputs
        bb = relax.BlockBuilder()
        params: list[relax.Var] = []
        invocations = []
        for partition, layer_calls in calls.items():
            for k, call in enumerate(layer_calls):
                func = call.composite.without_attr("Composite")
                gv = bb.add_func(func, f"layer_{len(self.keys)}")
                args = [relax.Var(f"l{len(self.keys)}_{i}", p.ty) for i, p in enumerate(func.params)]
                params += args
                invocations.append((gv, args))
                self.keys.append((partition, k))
                self.params.append([(shape_of(a), dtype_of(a)) for a in args])
        with bb.function("main", params):
            with bb.dataflow():
                outs = [bb.emit(relax.Call(gv, args)) for gv, args in invocations]
                result = bb.emit_output(relax.Tuple(outs))
            bb.emit_func_output(result)
        self.vm = relax.VirtualMachine(compiled_reference(bb.get(), target), tvm.cpu())

    def run(self, inputs: dict[tuple[str, int], list[np.ndarray]]) -> dict[tuple[str, int], np.ndarray]:
        """Every layer's output for the given per-layer inputs (a layer not given is fed zeros
        and left out of the result)."""
        args = []
        for key, params in zip(self.keys, self.params):
            given = inputs.get(key)
            for i, (shape, dtype) in enumerate(params):
                value = given[i] if given is not None else np.zeros(shape, dtype)
                args.append(tvm.runtime.tensor(np.ascontiguousarray(value, dtype=dtype).reshape(shape)))
        out = self.vm["main"](*args)
        return {key: out[k].numpy() for k, key in enumerate(self.keys) if key in inputs}


# ---------------------------------------------------------------------------------------------
# The co-simulation


class _Cosim:
    """The partition runner of the co-simulation (npu_byoc.runtime.build.build_with_runner)."""

    def __init__(self, npu, hw: HwConfig, calls: dict[str, list[_LayerCall]], progress: Progress):
        self.npu, self.hw, self.calls, self.progress = npu, hw, calls, progress
        self.layers: list[LayerResult] = []
        self.keys: list[tuple[str, int]] = []  # per entry of layers: (partition, op index)
        self.layer_inputs: dict[tuple[str, int], list[np.ndarray]] = {}
        self.layer_outputs: dict[tuple[str, int], np.ndarray] = {}
        self.seconds = {"rtl": 0.0, "golden": 0.0}
        self.error: BaseException | None = None

    def __call__(self, plan: PartitionPlan, inputs: list[np.ndarray], on_op) -> list[np.ndarray]:
        try:
            return self._run(plan, inputs, on_op)
        except BaseException as err:  # kept: TVM's VM re-raises it as its own error type
            self.error = err
            raise

    def _run(self, plan: PartitionPlan, inputs: list[np.ndarray], on_op) -> list[np.ndarray]:
        calls = self.calls[plan.name]
        if len(calls) != len(plan.ops):
            raise NpuByocError(f"cosim: {plan.name} has {len(plan.ops)} NPU ops but {len(calls)} composite calls")
        nchw = any(io.ref.layout == "NCHW" for io in [*plan.inputs, *plan.outputs])
        # the golden model's value of every layer and image: the intermediate values of the report
        t0 = time.perf_counter()
        expected: list[list[np.ndarray]] = [[] for _ in plan.ops]  # [layer][image]
        index = {id(op): k for k, op in enumerate(plan.ops)}
        golden.run_plan(plan, inputs, on_op=lambda op, out: expected[index[id(op)]].append(np.asarray(out)))
        self.seconds["golden"] += time.perf_counter() - t0
        # the partition on the RTL: the one stream production runs, once per image
        schedule = schedule_partition(plan, self.hw)
        words, starts = encode_with_starts(schedule.steps)
        regions = golden.allocate_regions(plan, inputs)
        regions[int(Region.CONST)] = np.frombuffer(schedule.constants, np.uint8)
        n_img = plan.batch
        results: list[list[LayerResult]] = []  # [image][layer]
        for n in range(n_img):  # images one after the other: they share the scratch region
            image = golden.image_regions(plan, regions, n)
            first = len(self.layers) + n * len(plan.ops)
            results.append(self._run_image(plan, schedule, words, starts, image, [e[n] for e in expected], first))
        model_values = []
        for k, call in enumerate(calls):
            shape = per_image_shape(call.shape, n_img)
            images = [_to_model_shape(plan.model_order(plan.ops[k], e), shape, nchw) for e in expected[k]]
            value = np.concatenate(images).reshape(call.shape) if n_img > 1 else images[0]
            model_values.append(to_model(value, call.dtype))
        for n in range(n_img):
            for k, (op, call, result) in enumerate(zip(plan.ops, calls, results[n])):
                if n == 0:  # the layer's inputs as the model has them (TVM's per-layer reference is fed these)
                    self.layer_inputs[(plan.name, k)] = [_source_value(s, inputs, model_values) for s in call.sources]
                    self.layer_outputs[(plan.name, k)] = model_values[k]
                if n_img > 1:
                    result.name = f"{op.name} [image {n}]"
                self.layers.append(result)
                self.keys.append((plan.name, k))
        for n in range(n_img):
            for op, e in zip(plan.ops, expected):
                on_op(op, e[n])
        self.progress.update(len(self.layers), plan.name)
        return golden.read_outputs(plan, regions)

    def _run_image(self, plan: PartitionPlan, schedule, words, starts, regions, expected,
                   first_index: int) -> list[LayerResult]:  # fmt: skip
        """One image's run of the partition's stream on the RTL; per layer its cycles and, where
        its output went to external memory, its difference from the golden model."""
        t0 = time.perf_counter()
        status = self.npu.run(words, regions, trace=True)
        self.seconds["rtl"] += time.perf_counter() - t0
        if not status.ok:
            k = schedule.step_op[bisect.bisect_right(starts, status.word_index) - 1] if starts else 0
            raise NpuByocError(f"cosim: {plan.name}: the RTL stopped with {status.status.name} at word "
                               f"{status.word_index} (layer '{plan.ops[k].name}')")  # fmt: skip
        results = _layer_results(plan, schedule, starts, len(words), status, self.hw, first_index)
        for k, (op, result) in enumerate(zip(plan.ops, results)):
            if op.name not in schedule.resident:  # its output went to external memory: compare it
                got = golden.read_tensor(regions, op.ofm)
                result.max_diff_golden = int(np.max(np.abs(got.astype(np.int64) - expected[k].reshape(got.shape)),
                                                    initial=0))  # fmt: skip
        return results


def _layer_results(plan: PartitionPlan, schedule, starts: list[int], n_words: int, status, hw: HwConfig,
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
        ))  # fmt: skip
    return out


def cosim(
    mod: tvm.IRModule | str | Path,
    inputs: Sequence[np.ndarray],
    reference: Sequence[np.ndarray] | None = None,
    *,
    hw: HwConfig = DEFAULT_CONFIG,
    npu=None,
    progress: bool | Progress = False,
    strict: bool = True,
    target: str = "llvm",
) -> CosimReport:
    """Run ``mod`` with every NPU layer on the RTL; see the module docstring.

    ``mod``: a model path or an IRModule from :func:`npu_byoc.load_model` (partitioned here if
    it is not yet). ``npu``: a :class:`~npu_byoc.runtime.verilator.VerilatorNpu` to reuse.
    ``progress``: draw a progress bar on stderr. ``strict``: raise :class:`CosimMismatch`
    (with the complete report as ``.report``) when a layer differs from the golden model."""
    from ..frontends.load import load_model, model_info
    from .build import build_with_runner
    from .compare import Diff, reference_like
    from .verilator import VerilatorNpu

    t_start = time.perf_counter()
    if not isinstance(mod, tvm.IRModule):
        mod = load_model(mod)
    info = model_info(mod)
    part = mod if partition_log(mod) is not None or npu_functions(mod) else partition_for_npu(mod, hw=hw)
    funcs = npu_functions(part)
    bar = progress if isinstance(progress, Progress) else Progress(1, enabled=bool(progress))

    t0 = time.perf_counter()
    if npu is None:
        bar.note("cosim: loading the RTL model (Verilator: built on first use, then cached) ...")
        npu = VerilatorNpu(hw)
    t_build = time.perf_counter() - t0
    bar.note(f"cosim: compiling the host graph and TVM's per-layer reference ({len(funcs)} NPU partitions) ...")
    t0 = time.perf_counter()
    runner = _Cosim(npu, hw, {}, bar)
    model = build_with_runner(part, runner, backend="cosim", hw=hw, target=target)
    # the layers of the plans the build lowered (runner.calls is read only when the model runs)
    calls = runner.calls = {name: _layer_calls(f, model.plans[name]) for name, f in funcs.items()}
    total = sum(len(c) * _images(c) for c in calls.values())  # one row per layer and image
    bar.total = max(total, 1)
    reference_layers = _LayerReference(calls, target) if total else None
    t_compile = time.perf_counter() - t0

    t0 = time.perf_counter()
    bar.update(0)
    try:
        outputs = model.run(inputs)
    except Exception as err:
        if runner.error is not None and runner.error is not err:
            raise runner.error from None
        raise
    finally:
        bar.close()
    t_run = time.perf_counter() - t0

    t0 = time.perf_counter()
    cpu = reference_layers.run(runner.layer_inputs) if reference_layers is not None else {}
    for result, key in zip(runner.layers, runner.keys):
        if key in cpu:
            a, b = runner.layer_outputs[key], cpu[key].reshape(runner.layer_outputs[key].shape)
            result.max_diff_tvm = int(np.max(np.abs(a.astype(np.int64) - b.astype(np.int64)), initial=0))
    t_tvm = time.perf_counter() - t0

    report = CosimReport(
        model=Path(info.path).name if info else "<module>",
        hw=asdict(hw),  # every field: a report says which configuration it measured
        layers=runner.layers,
    )
    out_rows = []
    if reference is not None:
        for k, y in enumerate(outputs):
            r = reference_like(reference, k, y)
            d = Diff.of(y, r)
            out_rows.append({"output": k, "dtype": str(y.dtype), "integer": y.dtype.kind in "iu" and r.dtype.kind in "iu",
                             "max_diff": d.max_lsb, "mean_diff": d.mean_lsb, "fraction": d.fraction})  # fmt: skip
    seconds = {"build_rtl": t_build, "compile": t_compile, "run": t_run, "rtl": runner.seconds["rtl"],
               "golden": runner.seconds["golden"], "tvm_layers": t_tvm}  # fmt: skip
    report.summary = summarize(report.layers, hw, wall=time.perf_counter() - t_start, seconds=seconds)
    report.summary.update(roofline(model.plans.values(), hw))
    report.summary["outputs"] = out_rows
    report.summary["model_outputs"] = [list(y.shape) for y in outputs]
    if strict and report.mismatches:
        bad = ", ".join(f"'{r.name}' ({r.max_diff_golden} LSB)" for r in report.mismatches[:5])
        raise CosimMismatch(f"the RTL differs from the golden model on {len(report.mismatches)} layer(s): {bad}",
                            report)  # fmt: skip
    return report


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
    """``bound_cycles``: max(MACs / (rows · cols), minimum external bytes / dma_bytes_per_cycle),
    the cycles no schedule of these partitions on ``hw`` can beat."""
    plans = list(plans)
    macs = sum(plan.macs for plan in plans)
    ext = minimum_external_bytes(plans, hw)
    compute_bound = macs / (hw.array_rows * hw.array_cols)
    memory_bound = ext / hw.dma_bytes_per_cycle
    return {"minimum_external_bytes": ext, "compute_bound_cycles": compute_bound,
            "memory_bound_cycles": memory_bound, "bound_cycles": max(compute_bound, memory_bound)}  # fmt: skip


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
    rtl = sum(r.rtl_seconds for r in layers)
    summary["rtl_seconds"] = rtl
    summary["simulated_cycles_per_second"] = summary["cycles"] / rtl if rtl > 0 else 0.0
    summary["wall_seconds"] = wall
    summary["seconds"] = dict(seconds or {"rtl": rtl, "golden": 0.0, "compile": 0.0})
    return summary


# ---------------------------------------------------------------------------------------------
# The plot

CLASS_COLOURS = {"conv": "#1f77b4", "pointwise": "#2ca02c", "depthwise": "#ff7f0e", "fc": "#9467bd"}


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
    ax.bar(x, [100 * (r.utilization or 0) for r in rows], color=[CLASS_COLOURS[r.op] for r in rows], width=0.8)
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
    handles = [Patch(color=CLASS_COLOURS[c], label=CLASS_NAMES[c]) for c in present]
    handles.append(ax.plot([], [], "k.", label="overall (DMA included)")[0])
    ax.legend(handles=handles, fontsize=7, loc="upper center", ncol=len(handles), framealpha=0.9)
    fig.tight_layout()
    fig.savefig(str(path), format="png")


__all__ = [
    "cosim",
    "CosimReport",
    "CosimMismatch",
    "LayerResult",
    "Progress",
    "op_class",
    "summarize",
    "plot_utilization",
    "compiled_reference",
    "OP_CLASSES",
    "MAC_CLASSES",
]
