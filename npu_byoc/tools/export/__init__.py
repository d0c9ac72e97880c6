"""``npu-byoc export``: a model as a stand-alone C99 library of its NPU command stream.

    from npu_byoc.tools.export import export_model
    export_model(npu_byoc.load_model("model.tflite"), "out/", model_name="model.tflite")

writes a directory a hardware team builds without Python or TVM (docs/export.md):

- ``model.h`` / ``model.c``: the command stream and the constants as ``const`` arrays, the model's
  input and output tensors, and ``npu_model_run()``, which runs the model through the HAL of
  ``npu_hal.h`` (bind the regions, submit the stream, wait);
- ``npu_hal_driver.c``: that HAL on the driver API (npu_driver.h), ``npu_functional.c``: the C
  functional model behind it, ``model_run.c``: ``model_run in.bin out.bin``;
- ``rtl/``, ``sim/``: the Verilog for this configuration and the Verilator harness;
- ``Makefile``: ``make`` builds model_run with cc alone, ``make rtl`` model_run_rtl on the RTL.

Only a model whose every run-time operator is in an NPU partition exports (graph.py); its
partitions run in turn, one command stream each.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from ...arch import hwgen
from ...arch.config import DEFAULT_CONFIG, HwConfig
from ...arch.cycles import stream_budget
from ...codegen import c_codegen
from ...codegen.lower import lower_partition
from ...codegen.schedule import schedule_partition
from ...frontends.load import model_info
from ...ops.composites import npu_functions
from ...ops.uint8 import FLIPPED_DTYPES
from ...partition.pipeline import partition_for_npu
from ...runtime import functional, verilator
from ...util import escape
from .graph import ExportError, ExportGraph, Tensor, read_graph

__all__ = ["ExportError", "ExportResult", "export_model"]

CONST_BYTES_PER_LINE = 16
_TEMPLATES = {  # file written -> template (npu_byoc/codegen/templates)
    "model.h": "export_model.h.j2",
    "model.c": "export_model.c.j2",
    "model_run.c": "export_model_run.c.j2",
    "npu_hal_driver.h": "export_hal_driver.h.j2",
    "npu_hal_driver.c": "export_hal_driver.c.j2",
    "Makefile": "export_Makefile.j2",
}


@dataclass(frozen=True)
class ExportResult:
    directory: Path
    partitions: tuple[str, ...]  # the NPU partitions, in execution order
    files: tuple[str, ...]
    stream_words: int
    constant_bytes: int
    scratch_bytes: int
    inputs: tuple[dict, ...] = ()  # as model.h declares them: name, dtype, shape, nbytes, scale, zero_point
    outputs: tuple[dict, ...] = ()


def _const_lines(data: bytes) -> list[str]:
    return [
        " ".join(f"0x{b:02X}," for b in data[k : k + CONST_BYTES_PER_LINE])
        for k in range(0, len(data), CONST_BYTES_PER_LINE)
    ] or ["0"]


def _tensor(role: str, m: int, tensor: Tensor, info, offset: int) -> dict:
    """A model input or output for the templates: the library's int8 / uint8 view of it, with the
    scale and zero point of the boundary (de)quantize, or else those the model file declares."""
    nbytes = 1
    for d in tensor.shape:
        nbytes *= d
    scale, zero_point = tensor.qparams or (getattr(info, "scale", None), getattr(info, "zero_point", None))
    return dict(
        arg=f"{role}{m}",
        name=info.name if info is not None else f"{role}{m}",
        dtype=tensor.dtype,
        ctype="uint8_t" if tensor.dtype in FLIPPED_DTYPES else "int8_t",
        flip=tensor.dtype in FLIPPED_DTYPES,
        shape=list(tensor.shape),
        nbytes=nbytes,
        scale=float(scale) if scale is not None else 0.0,
        zero_point=int(zero_point) if zero_point is not None else 0,
        offset=offset,
    )


def _tensors(role: str, declared, infos) -> list[dict]:
    out, offset = [], 0
    for m, tensor in enumerate(declared):
        out.append(_tensor(role, m, tensor, infos[m] if m < len(infos) else None, offset))
        offset += out[-1]["nbytes"]
    return out


def _context(graph: ExportGraph, mod, model: str, hw: HwConfig) -> dict:
    info = model_info(mod)
    inputs = _tensors("input", graph.inputs, info.inputs if info else ())
    outputs = _tensors("output", [t for _, t in graph.outputs], info.outputs if info else ())
    # Where each tensor's bytes live: a model input (its int8 copy if uint8), a model output, or a
    # static buffer of the library for a tensor between partitions.
    homes: dict = {("input", m): f"{t['arg']}_int8" if t["flip"] else t["arg"] for m, t in enumerate(inputs)}
    homes.update({source: outputs[m]["arg"] for m, (source, _) in enumerate(graph.outputs)})
    sizes = {("input", m): t["nbytes"] for m, t in enumerate(inputs)}
    sizes.update({source: outputs[m]["nbytes"] for m, (source, _) in enumerate(graph.outputs)})
    notes = {("input", m): f"model input {m} '{t['name']}'" for m, t in enumerate(inputs)}
    notes.update({source: f"model output {m} '{outputs[m]['name']}'" for m, (source, _) in enumerate(graph.outputs)})
    buffers, partitions = [], []
    for c, call in enumerate(graph.calls):
        if not escape.is_c_identifier(call.name):  # a module partitioned elsewhere names its own partitions
            raise ExportError(f"{model}: partition name {escape.text(call.name, 80)!r} is not a C identifier")
        plan = lower_partition(call.name, call.func, hw)
        schedule = schedule_partition(plan, hw)
        rows, n_words = c_codegen.stream_rows(schedule)
        regions = []
        ios = [("input", k, io, call.args[k]) for k, io in enumerate(plan.inputs)]
        ios += [("output", k, io, ("output", c, k)) for k, io in enumerate(plan.outputs)]
        for j, (role, k, io, source) in enumerate(ios):
            if io.ref.region != 2 + j:
                raise ExportError(f"{model}: {call.name} {role} {k} is in region {io.ref.region}, expected {2 + j}")
            if source not in homes:  # a tensor only partitions read: the library holds it
                homes[source] = f"npu_model_p{c}_output{k}"
                notes[source] = f"{homes[source]}, between streams"
                sizes[source] = int(io.ref.nbytes) * plan.batch
                buffers.append(dict(name=homes[source], nbytes=sizes[source]))
            if int(io.ref.nbytes) * plan.batch != sizes[source]:  # every binding covers its tensor exactly
                raise ExportError(f"{model}: {call.name} {role} {k} is {io.ref.nbytes} x {plan.batch} bytes, "
                                  f"its tensor {sizes[source]}")  # fmt: skip
            regions.append(dict(region=2 + j, role=role, index=k, home=homes[source], note=notes[source],
                                layout=io.ref.layout, image_bytes=int(io.ref.nbytes)))  # fmt: skip
        partitions.append(dict(
            index=c, name=call.name, stream=rows, n_words=n_words, max_cycles=stream_budget(schedule.steps, hw),
            constants=_const_lines(schedule.constants), n_const=len(schedule.constants), batch=plan.batch,
            scratch_bytes=plan.scratch_bytes, regions=regions,
            layers=[dict(kind=op.kind, name=op.name, ifm="x".join(map(str, op.ifm.shape)),
                         ofm="x".join(map(str, op.ofm.shape))) for op in plan.ops],
        ))  # fmt: skip
    return dict(
        model=model,
        inputs=inputs,
        outputs=outputs,
        partitions=partitions,
        buffers=buffers,
        flips=any(t["flip"] for t in inputs + outputs),
        n_words=sum(p["n_words"] for p in partitions),
        n_const=sum(p["n_const"] for p in partitions),
        scratch_bytes=max(1, *(p["scratch_bytes"] for p in partitions)),
        verilator_flags=verilator.VERILATOR_FLAGS,
        verilator_defines=verilator.VERILATOR_DEFINES,
    )


def _copy_sources(out: Path, hw: HwConfig) -> list[str]:
    """The headers for ``hw``, the C functional model as C, the RTL and the Verilator harness."""
    (out / "rtl").mkdir(exist_ok=True)
    (out / "sim").mkdir(exist_ok=True)
    (out / "npu_isa.h").write_text(hwgen.c_header(hw))
    shutil.copy(functional.include_dir() / "npu_driver.h", out / "npu_driver.h")
    shutil.copy(functional.include_dir() / "npu_hal.h", out / "npu_hal.h")
    (src,) = functional.functional_sources()
    shutil.copy(src, out / "npu_functional.c")  # one source, C99 and C++ (see its header)
    files = ["npu_isa.h", "npu_driver.h", "npu_hal.h", "npu_functional.c"]
    for path in verilator.rtl_sources():
        shutil.copy(path, out / "rtl" / path.name)
        files.append(f"rtl/{path.name}")
    (out / "rtl" / "npu_config.vh").write_text(hwgen.verilog_header(replace(hw, dma_overlap=DEFAULT_CONFIG.dma_overlap)))
    files.append("rtl/npu_config.vh")
    for path in verilator.sim_sources():
        if path.name.startswith("npu_verilator"):
            shutil.copy(path, out / "sim" / path.name)
            files.append(f"sim/{path.name}")
    return files


def export_model(mod, directory: str | Path, hw: HwConfig = DEFAULT_CONFIG, model_name: str | None = None) -> ExportResult:
    """Partition ``mod`` (from load_model) for ``hw`` and write its library into ``directory``.
    A module partition_for_npu already partitioned (for ``hw``) is taken as it is."""
    model = model_name or "model"
    part = mod if npu_functions(mod) else partition_for_npu(mod, hw=hw)
    graph = read_graph(part, model)
    context = _context(graph, mod, model, hw)
    out = Path(directory)
    try:
        out.mkdir(parents=True, exist_ok=True)
        files = [name for name in _TEMPLATES]
        for name, template in _TEMPLATES.items():
            (out / name).write_text(c_codegen.render(template, **context))
        files += _copy_sources(out, hw)
    except OSError as err:
        raise ExportError(f"{directory}: cannot write ({err.strerror})") from None
    return ExportResult(out, tuple(c.name for c in graph.calls), tuple(files), context["n_words"],
                        context["n_const"], context["scratch_bytes"], tuple(context["inputs"]),
                        tuple(context["outputs"]))  # fmt: skip
