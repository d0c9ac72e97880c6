"""What an exported library runs: the partitioned model's ``main`` read as one NPU partition
whose inputs and outputs are the model's.

An exported model runs without TVM, so ``main`` may hold nothing but the call of its NPU
partition and the plumbing of its result (tuples, their items, aliases). Any other operator
would run on a CPU the library does not have: the export is refused with the list of those
operators and the coverage report's reason for each. A model of several NPU partitions is
refused too (docs/export.md says why): each needs a CPU operator between them, or they are
independent branches, which one partition covers after a re-export with the branches merged.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import relax

from ...errors import NpuByocError
from ...ops.composites import npu_functions
from ...partition.coverage import coverage_report
from ...util import escape

CPU_OPS_SHOWN = 20  # the refusal lists this many operators, then counts the rest


class ExportError(NpuByocError):
    """A model that cannot be exported as a stand-alone NPU library (one line says why)."""


@dataclass(frozen=True)
class Binding:
    """Where one partition argument comes from and one model output goes: ``model`` is the
    index among the model's inputs (arguments) or outputs (results)."""

    partition: int  # index among the partition's inputs or outputs
    model: int


@dataclass(frozen=True)
class ExportGraph:
    partition: str  # the Codegen="npu" function's global name
    func: relax.Function
    inputs: tuple[Binding, ...]  # partition input k <- model input m
    outputs: tuple[Binding, ...]  # model output m <- partition output k


def _cpu_ops(part: tvm.IRModule) -> list[str]:
    """Every operator the coverage report leaves on the CPU, with its reason."""
    report = coverage_report(part)
    return [f"{o.op} '{escape.text(o.name, 80)}' ({o.reason or 'no NPU pattern'})" for o in report.ops if not o.offloaded]


def _refuse_cpu(model: str, part: tvm.IRModule, relax_ops: list[str]) -> ExportError:
    listed = _cpu_ops(part) or [f"{op} (Relax operator left in main)" for op in relax_ops]
    shown = "; ".join(listed[:CPU_OPS_SHOWN]) + (f"; and {len(listed) - CPU_OPS_SHOWN} more" if len(listed) > CPU_OPS_SHOWN else "")
    return ExportError(f"{model}: cannot export: {len(listed)} operator(s) would run on the CPU, and an exported "
                       f"library runs only NPU partitions: {shown}")  # fmt: skip


def read_graph(part: tvm.IRModule, model: str) -> ExportGraph:
    """The single NPU partition of ``part`` (a module from partition_for_npu) and how the model's
    inputs and outputs bind to it; ExportError when anything in ``main`` would run on the CPU."""
    main = part["main"]
    npu = npu_functions(part)
    params = {p: i for i, p in enumerate(main.params)}
    values: dict = {p: ("input", i) for p, i in params.items()}  # var -> what it holds
    calls: list[tuple[str, list]] = []
    cpu: list[str] = []
    body = main.body
    blocks = body.blocks if isinstance(body, relax.SeqExpr) else []
    for block in blocks:
        for b in block.bindings:
            value = b.value
            if isinstance(value, relax.Call) and isinstance(value.op, relax.GlobalVar) and value.op.name_hint in npu:
                calls.append((value.op.name_hint, list(value.args)))
                n_out = len(b.var.ty.fields) if isinstance(b.var.ty, relax.TupleType) else 0
                values[b.var] = tuple(("output", k) for k in range(n_out)) if n_out else ("output", 0)
            elif isinstance(value, relax.TupleGetItem) and isinstance(values.get(value.tuple_value), tuple) \
                    and isinstance(values[value.tuple_value][0], tuple):  # fmt: skip
                values[b.var] = values[value.tuple_value][value.index]
            elif isinstance(value, relax.Tuple) and all(f in values for f in value.fields):
                values[b.var] = tuple(values[f] for f in value.fields)
            elif isinstance(value, relax.Var) and value in values:
                values[b.var] = values[value]
            elif isinstance(value, relax.Call):
                cpu.append(str(value.op.name) if isinstance(value.op, tvm.ir.Op) else str(value.op))
            else:
                cpu.append(type(value).__name__)
    if cpu:
        raise _refuse_cpu(model, part, cpu)
    if not calls:
        raise ExportError(f"{model}: cannot export: no operator of the model runs on the NPU")
    if len(calls) > 1:
        raise ExportError(f"{model}: cannot export: {len(calls)} NPU partitions ({', '.join(n for n, _ in calls)}); "
                          "an exported library runs one (docs/export.md)")  # fmt: skip
    name, args = calls[0]
    inputs = []
    for k, arg in enumerate(args):
        if arg not in params:
            raise ExportError(f"{model}: cannot export: argument {k} of {name} is not a model input")
        inputs.append(Binding(k, params[arg]))
    result = body.body if isinstance(body, relax.SeqExpr) else body
    held = values.get(result) if isinstance(result, relax.Var) else None
    if isinstance(result, relax.Tuple):
        held = tuple(values.get(f) for f in result.fields)
    leaves = [held] if held and not isinstance(held[0], tuple) else list(held or [])
    outputs = []
    for m, leaf in enumerate(leaves):
        if not (isinstance(leaf, tuple) and leaf[0] == "output"):
            raise ExportError(f"{model}: cannot export: model output {m} is not an output of {name}")
        outputs.append(Binding(leaf[1], m))
    if not outputs:
        raise ExportError(f"{model}: cannot export: main returns no NPU output")
    return ExportGraph(name, npu[name], tuple(inputs), tuple(outputs))
