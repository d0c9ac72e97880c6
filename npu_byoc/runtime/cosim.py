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
with the first layer and STOP with the last). The report (``CosimReport``: per layer its cycles,
utilization and differences from the golden model and TVM; the summary; text, CSV, JSON and
the plot) is npu_byoc.runtime.cosim_report.

The model's next layers and partitions are fed the golden model's values (equal to the RTL's
wherever they are observable). TVM's per-layer results come from one Relax module that calls
every layer's composite function, compiled once per model and cached on disk
(``compiled_reference``), run once after the co-simulation.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import tvm
from tvm import relax

from ..util.cache import atomic_output, build_lock, cache_dir, content_key, is_intact
from ..arch.encoder import encode_with_starts
from ..codegen.lower import PartitionPlan, partition_batch
from ..codegen.lower import per_image as per_image_shape
from ..codegen.schedule import schedule_partition
from ..errors import NpuByocError
from ..arch.config import DEFAULT_CONFIG, HwConfig
from ..arch.isa import Region
from ..ops.composites import npu_functions
from ..partition.pipeline import partition_for_npu, partition_log
from ..ops.table import LAYER_ATTR, VIEW_PATTERNS
from ..util.progress import Progress
from ..util.relax_utils import Constant, constant_value, dtype_of, shape_of
from ..ops.uint8 import to_model
from .tvm_legalize import register as _register_legalizations
from .cosim_report import CosimReport, LayerResult, layer_results, roofline, summarize
from .cosim_timeline import StreamRun
from .waveform import NS_PER_CYCLE, Stream, WaveformWindow, step_cycles, step_words
from . import golden

_register_legalizations()  # TVM's CPU build of NHWC conv2d_transpose (npu_byoc.runtime.tvm_legalize)


class CosimMismatch(NpuByocError):
    """The RTL's output of a layer differs from the golden model's for the same inputs."""

    def __init__(self, message: str, report: "CosimReport"):
        super().__init__(message)
        self.report = report


# ---------------------------------------------------------------------------------------------
# The structure of a partition: which tensors feed each layer (for TVM's per-layer results)


@dataclass
class _LayerCall:
    name: str
    composite: relax.Function  # a layer's composite, or a concatenation's copy (_copy_function)
    sources: list[tuple[str, int]]  # per composite argument: ("input", i), ("layer", k), ("constant", value),
    # ("concat", (axis, sources)) or ("permute", (axes, input shape, source))
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
    # op index -> the partition input an interleave lays out NHWC, or -1 - the output a deinterleave writes
    interleaved = dict(plan.interleaves) | {k: -1 - j for k, j in plan.deinterleaves} if plan is not None else {}
    concats: dict = {}  # concatenation var -> (axis, its inputs' sources)
    permuted: dict = {}  # var of a transpose lowered to a view (no NPU op) -> ("permute", (axes, source))
    plan_layers = set(plan.layers) if plan is not None else None
    index: dict = {}  # layer output var -> its entry
    out: list[_LayerCall] = []

    def source(a, layer: str):
        if isinstance(a, Constant):  # a concatenation's constant input
            return ("constant", constant_value(a))
        while a in aliases:
            a = aliases[a]
        if a in params:
            return ("input", params.index(a))
        if a in index:
            return ("layer", index[a])
        if a in concats:
            return ("concat", concats[a])
        if a in permuted:
            return permuted[a]
        raise NpuByocError(f"cosim: an argument of layer '{layer}' is neither a partition input "
                           "nor an NPU layer's output")  # fmt: skip

    def interleaves():  # an NCHW input or output laid out where lowering put it: TVM's value is the tensor
        while len(out) in interleaved:
            k = interleaved[len(out)]
            io, source = (plan.inputs[k], ("input", k)) if k >= 0 else (plan.outputs[-1 - k], ("layer", len(out) - 1))
            out.append(_LayerCall(plan.ops[len(out)].name, _identity_function(io.shape, io.dtype), [source],
                                  tuple(io.shape), io.dtype))  # fmt: skip

    for b in bindings:
        if not (isinstance(b.value, relax.Call) and b.value.op in local_funcs):
            continue
        interleaves()
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
        elif plan_layers is not None and name not in plan_layers and _permute_axes(composite) is not None:
            # a transpose its readers read in place (ops.transpose.permuted_view): its input, permuted
            arg = b.value.args[0]
            permuted[b.var] = ("permute", (_permute_axes(composite), shape_of(arg), source(arg, name)))
        else:
            index[b.var] = len(out)
            out.append(_LayerCall(name, composite, [source(a, name) for a in b.value.args], shape_of(b.var),
                                  dtype_of(b.var)))  # fmt: skip
    interleaves()
    return out


def _identity_function(shape, dtype: str) -> relax.Function:
    """x -> x: TVM's reference of an interleave or deinterleave (the same values, laid out anew)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([int(d) for d in shape], dtype))
    with bb.function("interleave", [x]):
        bb.emit_func_output(x)
    return bb.get()["interleave"].without_attr("global_symbol")


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
        out.append(f if isinstance(f, Constant) else call.args[params.index(f)])  # a class token: itself
    return out


def _permute_axes(composite: relax.Function) -> tuple[int, ...] | None:
    """The axes of the permute_dims inside an npu.transpose composite (None: another composite)."""
    if str(composite.attrs["Composite"]) != "npu.transpose":
        return None
    call = next(b.value for block in composite.body.blocks for b in block.bindings
                if isinstance(b.value, relax.Call) and getattr(b.value.op, "name", "") == "relax.permute_dims")  # fmt: skip
    return tuple(int(a) for a in call.attrs.axes)


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
    if kind == "constant":
        return i
    if kind == "permute":
        axes, shape, inner = i  # the input seen in its own shape (a reshape before it is an alias)
        return np.transpose(_source_value(inner, inputs, model_values).reshape(shape), axes)
    axis, parts = i
    return np.concatenate([_source_value(s, inputs, model_values) for s in parts], axis=axis)


def _images(calls: list[_LayerCall]) -> int:
    """The batch a partition runs image by image (codegen.lower.partition_batch of its layers)."""
    try:
        return partition_batch([c.shape for c in calls])
    except Exception:  # noqa: BLE001 - lowering reports it
        return 1


def _to_model_shape(hwc: np.ndarray, shape: tuple[int, ...], nchw: bool) -> np.ndarray:
    """An H x W x C feature map (the NPU's view) in the layout and shape of the model tensor:
    channels first for an NCHW image [N, C, H, W] and an NCHW sequence [N, C, L] (one row of L
    pixels, limits.hwc), which the NPU stores channel-last like every map."""
    h, w, c = hwc.shape
    spatial = {4: (h, w), 3: (w,) if h == 1 else None}.get(len(shape))
    if spatial is not None and tuple(shape) == (1, c, *spatial) and (nchw or tuple(shape) != (1, *spatial, c)):
        return np.ascontiguousarray(np.moveaxis(hwc, -1, 0)).reshape(shape)
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
        self.runs: list[StreamRun] = []  # every stream run, for the timeline
        self.waveform = None  # (WaveformWindow, partition, its steps to dump, layers, traced VerilatorNpu), or None
        self.waveform_info: dict | None = None
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
            results.append(self._run_image(plan, schedule, words, starts, image, [e[n] for e in expected], first, n))
        model_values = []
        for k, call in enumerate(calls):
            shape = per_image_shape(call.shape, n_img)
            held = plan.nchw_sequences(nchw) if len(shape) == 3 else nchw
            images = [_to_model_shape(plan.model_order(plan.ops[k], e), shape, held) for e in expected[k]]
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
                   first_index: int, image: int = 0) -> list[LayerResult]:  # fmt: skip
        """One image's run of the partition's stream on the RTL; per layer its cycles and, where
        its output went to external memory, its difference from the golden model."""
        t0 = time.perf_counter()
        window = self.waveform if self.waveform and self.waveform[1] == plan.name and image == 0 else None
        if window is None:
            status = self.npu.run(words, regions, trace=True)
        else:  # the traced build, dumping the layers' words only
            w, _, steps, layers, traced = window
            span = step_words(starts, len(words), steps)
            status = traced.run(words, regions, trace=True, waveform_path=w.path, waveform_words=span)
            cycles = step_cycles(status.trace, len(schedule.steps), steps, status.cycles)
            self.waveform_info = {"path": str(w.path), "format": w.format, "partition": plan.name,
                                  "layers": layers, "words": list(span),
                                  "cycles": list(cycles), "ns_per_cycle": NS_PER_CYCLE}  # fmt: skip
        self.seconds["rtl"] += time.perf_counter() - t0
        if not status.ok:
            k = schedule.step_op[bisect.bisect_right(starts, status.word_index) - 1] if starts else 0
            raise NpuByocError(f"cosim: {plan.name}: the RTL stopped with {status.status.name} at word "
                               f"{status.word_index} (layer '{plan.ops[k].name}')")  # fmt: skip
        self.runs.append(StreamRun(plan.name, image, [op.name for op in plan.ops], list(schedule.steps),
                                   list(schedule.step_op), list(starts), len(words), status.trace, status.cycles))
        results = layer_results(plan, schedule, starts, len(words), status, self.hw, first_index)
        for k, (op, result) in enumerate(zip(plan.ops, results)):
            if op.name not in schedule.resident:  # its output went to external memory: compare it
                got = golden.read_tensor(regions, op.ofm)
                result.max_diff_golden = int(np.max(np.abs(got.astype(np.int64) - expected[k].reshape(got.shape)),
                                                    initial=0))  # fmt: skip
        return results


def _stream(plan: PartitionPlan, hw: HwConfig) -> Stream:
    """The partition's stream as _run_image runs it, for cutting a waveform window from it."""
    schedule = schedule_partition(plan, hw)
    words, starts = encode_with_starts(schedule.steps)
    return Stream(schedule.steps, schedule.step_op, starts, len(words))


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
    waveform: WaveformWindow | None = None,
) -> CosimReport:
    """Run ``mod`` with every NPU layer on the RTL; see the module docstring.

    ``mod``: a model path or an IRModule from :func:`npu_byoc.load_model` (partitioned here if
    it is not yet). ``npu``: a :class:`~npu_byoc.runtime.verilator.VerilatorNpu` to reuse.
    ``progress``: draw a progress bar on stderr. ``strict``: raise :class:`CosimMismatch`
    (with the complete report as ``.report``) when a layer differs from the golden model.
    ``waveform``: dump the cycles of these layers to a VCD / FST file (npu_byoc.runtime.waveform;
    the report's ``summary["waveform"]`` says which words and cycles)."""
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
    if waveform is not None:
        partition, steps, layers = waveform.resolve(model.plans, lambda name: _stream(model.plans[name], hw))
        bar.note(f"cosim: loading the traced RTL model ({waveform.format}; built on first use, then cached) ...")
        runner.waveform = (waveform, partition, steps, layers, VerilatorNpu(hw, waveform=waveform.format))
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
        runs=runner.runs,
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
    if runner.waveform_info is not None:
        report.summary["waveform"] = runner.waveform_info
    if strict and report.mismatches:
        bad = ", ".join(f"'{r.name}' ({r.max_diff_golden} LSB)" for r in report.mismatches[:5])
        raise CosimMismatch(f"the RTL differs from the golden model on {len(report.mismatches)} layer(s): {bad}",
                            report)  # fmt: skip
    return report


__all__ = [
    "cosim",
    "CosimMismatch",
    "compiled_reference",
]
