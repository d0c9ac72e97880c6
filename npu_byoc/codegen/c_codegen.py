"""C++ source for NPU partitions, rendered from Jinja templates (templates/partition.cc.j2).

Per partition: the command stream as a ``const uint32_t`` array with the disassembly as
comments, the constant region as one string literal (cheap to compile, unlike an array
initializer), and an entry function that checks its tensors and submits the stream through
the driver API (npu_driver.h). :func:`relax_ext_npu` is TVM's RunCodegen hook ``relax.ext.npu``,
registered by ``import npu_byoc`` (npu_byoc.tvm_register).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

import tvm
from jinja2 import Environment, FileSystemLoader, StrictUndefined, TemplateError
from markupsafe import Markup

from ..util import escape
from ..errors import LoweringError
from ..arch.config import DEFAULT_CONFIG, HwConfig
from ..arch.isa import HEADER_WORDS, Opcode, opcode_of
from ..arch.cycles import stream_budget
from ..ops.uint8 import FLIPPED_DTYPES
from ..arch.encoder import disassemble, encode_with_starts
from .lower import PartitionPlan, lower_partition
from .schedule import Schedule, schedule_partition

TEMPLATES = Path(__file__).parent / "templates"
CONST_BYTES_PER_LINE = 32


def include_dir() -> Path:
    """Where npu_driver.h and npu_isa.h live (pass it with -I when compiling generated code)."""
    return TEMPLATES


# Model-supplied strings (names, the file name) reach the C++ only through the filters
# `comment` and `cstring`, which escape them for where they go. As a safety net, any other
# string the template prints must consist of characters that are inert everywhere in C++:
# a template that forgets a filter fails to render instead of emitting what a name says.
_RAW_SAFE = re.compile(r"[A-Za-z0-9_ .,:;+=<>()\[\]{}@-]*")


def _finalize(value):
    if isinstance(value, Markup) or isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _RAW_SAFE.fullmatch(value):
        return value
    raise TemplateError(f"refusing to print {str(value)[:40]!r} into C++ unescaped: use |comment or |cstring")


_env = Environment(
    loader=FileSystemLoader(str(TEMPLATES)),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    finalize=_finalize,
)
_env.filters["comment"] = lambda v: Markup(escape.c_comment(v))
_env.filters["cstring"] = lambda v: Markup(escape.c_string(v))


@dataclass
class _Row:
    words: str
    text: str
    note: str | None


def stream_rows(schedule: Schedule) -> tuple[list[_Row], int]:
    """One row per command: its words in hex and its disassembly, layer notes before."""
    words, starts = encode_with_starts(schedule.steps)
    notes = schedule.layer_notes(starts)
    rows = []
    for line in disassemble(words).splitlines():
        index, _, text = line.partition("  ")
        i = int(index)
        n = 2 if i >= HEADER_WORDS and opcode_of(int(words[i])) == Opcode.SET_REG else 1
        hexes = ", ".join(f"0x{int(w):08X}u" for w in words[i : i + n]) + ","
        rows.append(_Row(f"{hexes:<26}", f"{i:04d} {text.strip()}", notes.get(i)))
    return rows, len(words)


def render(template: str, **context) -> str:
    """Render one of templates/ with the escaping rules above (the exporter's C, npu_byoc.tools.export)."""
    return _env.get_template(template).render(**context)


def _const_lines(data: bytes) -> list[str]:
    out = []
    for k in range(0, len(data), CONST_BYTES_PER_LINE):
        out.append(Markup("".join(f"\\x{b:02x}" for b in data[k : k + CONST_BYTES_PER_LINE])))
    return out or [""]


def generate_source(plan: PartitionPlan, schedule: Schedule, model: str | None = None,
                    hw: HwConfig = DEFAULT_CONFIG) -> str:  # fmt: skip
    if not escape.is_c_identifier(plan.name):  # symbols are npu_byoc's own names, never a model's
        raise LoweringError(f"partition name {escape.text(plan.name)!r} is not a C identifier")
    rows, n_words = stream_rows(schedule)
    tensors = []
    for role, ios in (("input", plan.inputs), ("output", plan.outputs)):
        for io in ios:
            tensors.append(
                dict(
                    arg=f"{role}{len([t for t in tensors if t['role'] == role])}",
                    role=role,
                    name=io.name,
                    shape=[int(d) for d in io.shape],
                    nbytes=io.ref.nbytes,
                    layout=io.ref.layout,
                    flip=io.dtype in FLIPPED_DTYPES,  # uint8: flipped to int8 at the boundary
                )
            )
    layers = [
        dict(kind=op.kind, name=op.name, ifm="x".join(map(str, op.ifm.shape)), ofm="x".join(map(str, op.ofm.shape)))
        for op in plan.ops
    ]
    return _env.get_template("partition.cc.j2").render(
        name=plan.name,
        model=model,
        layers=layers,
        stream=rows,
        n_words=n_words,
        max_cycles=stream_budget(schedule.steps, hw),
        constants=_const_lines(schedule.constants),
        n_const=len(schedule.constants),
        scratch_bytes=max(plan.scratch_bytes, 1),
        tensors=tensors,
        n_regions=2 + len(tensors),
        batch=plan.batch,
    )


def generate_partition(name: str, func, hw: HwConfig = DEFAULT_CONFIG, model: str | None = None) -> str:
    """Lower, schedule and render one Codegen="npu" function."""
    plan = lower_partition(name, func, hw)
    return generate_source(plan, schedule_partition(plan, hw), model, hw)


TARGET = "npu"  # the Codegen attribute, RunCodegen's target name and the hook's suffix


def codegen_options(hw: HwConfig = DEFAULT_CONFIG, model: str | None = None) -> dict:
    """``RunCodegen``'s target options: the hook lowers for ``hw`` (every field) and names the
    model file in the generated comments."""
    return {TARGET: {**dataclasses.asdict(hw), "model": model or ""}}


def _options_config(options) -> tuple[HwConfig, str | None]:
    """The hardware configuration and model name the hook got from :func:`codegen_options`
    (a missing field takes its default: a plain ``RunCodegen()`` lowers for DEFAULT_CONFIG)."""
    opts = dict(options) if options is not None else {}
    hw = HwConfig(**{f.name: int(opts[f.name]) for f in dataclasses.fields(HwConfig) if f.name in opts})
    return hw, (str(opts.get("model", "")) or None)


# What the last RunCodegen produced: each partition's C++, and the original LoweringError of a
# failure (TVM's FFI turns the hook's exception into a RuntimeError).
LAST = {"sources": {}, "error": None}


def relax_ext_npu(functions, options, constant_names):
    """TVM's BYOC hook: the generated C++ of every Codegen="npu" function, in one source module
    (compiling TVM's FFI headers once instead of once per partition)."""
    create = tvm.get_global_func("runtime.CSourceModuleCreate")
    hw, model = _options_config(options)
    LAST.update(sources={}, error=None)
    names, sources = [], []
    for func in functions:
        name = str(func.attrs["global_symbol"])
        try:
            src = generate_partition(name, func, hw, model)
        except LoweringError as err:
            LAST["error"] = err
            raise
        LAST["sources"][name] = src
        names.append(name)
        sources.append(src)
    if not names:
        return []
    return [create("\n".join(sources), "cc", names, [])]
