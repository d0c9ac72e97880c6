"""What an exported library runs: the partitioned model's ``main`` read as a sequence of NPU
partition calls, and where each one's inputs come from and the model's outputs.

An exported model runs without TVM, so ``main`` may hold nothing but calls of NPU partitions
and the plumbing between them (tuples, their items, aliases, and reshapes: a view of the same
bytes). Any other operator would run on a CPU the library does not have: the export is refused
with the list of those operators and the coverage report's reason for each.
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


# Where a tensor's bytes come from: ("input", m) is model input m, ("output", c, k) output k of
# the c-th partition call. A view (reshape and its kin) names the bytes of its operand.
Source = tuple
VIEWS = frozenset({"relax.reshape", "relax.squeeze", "relax.expand_dims", "relax.flatten"})


@dataclass(frozen=True)
class Call:
    """One NPU partition call of ``main``, in execution order."""

    name: str  # the Codegen="npu" function's global name
    func: relax.Function
    args: tuple[Source, ...]


@dataclass(frozen=True)
class ExportGraph:
    calls: tuple[Call, ...]
    inputs: tuple[tuple[tuple[int, ...], str], ...]  # model input m: shape, dtype
    outputs: tuple[tuple[Source, tuple[int, ...], str], ...]  # model output m: source, shape, dtype


def _shape_dtype(ty) -> tuple[tuple[int, ...], str]:
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        raise ExportError(f"a model input or output of type {escape.text(ty, 80)} is not a tensor of fixed shape")
    return tuple(int(d) for d in ty.shape.values), str(ty.dtype)


def _cpu_ops(part: tvm.IRModule) -> list[str]:
    """Every operator the coverage report leaves on the CPU, with its reason."""
    report = coverage_report(part)
    return [f"{o.op} '{escape.text(o.name, 80)}' ({o.reason or 'no NPU pattern'})" for o in report.ops if not o.offloaded]


def _refuse_cpu(model: str, part: tvm.IRModule, relax_ops: list[str]) -> ExportError:
    listed = _cpu_ops(part) or [f"{op} (left in main)" for op in relax_ops]
    shown = "; ".join(listed[:CPU_OPS_SHOWN])
    if len(listed) > CPU_OPS_SHOWN:
        shown += f"; and {len(listed) - CPU_OPS_SHOWN} more"
    return ExportError(f"{model}: cannot export: {len(listed)} operator(s) would run on the CPU, and an exported "
                       f"library runs only NPU partitions: {shown}")  # fmt: skip


def read_graph(part: tvm.IRModule, model: str) -> ExportGraph:
    """The NPU partition calls of ``part`` (a module from partition_for_npu) in order, and where
    the model's outputs come from; ExportError when anything in ``main`` would run on a CPU."""
    main = part["main"]
    npu = npu_functions(part)
    values: dict = {p: ("input", i) for i, p in enumerate(main.params)}  # var -> Source, or a tuple of them
    calls: list[Call] = []
    cpu: list[str] = []
    body = main.body
    for block in body.blocks if isinstance(body, relax.SeqExpr) else []:
        for b in block.bindings:
            value, held = b.value, None
            if isinstance(value, relax.Call) and isinstance(value.op, relax.GlobalVar) and value.op.name_hint in npu:
                args = [values.get(a) for a in value.args]
                if all(isinstance(a, tuple) and isinstance(a[0], str) for a in args):
                    c = len(calls)
                    calls.append(Call(value.op.name_hint, npu[value.op.name_hint], tuple(args)))
                    ty = b.var.ty
                    held = tuple(("output", c, k) for k in range(len(ty.fields))) if isinstance(ty, relax.TupleType) \
                        else ("output", c, 0)  # fmt: skip
            elif isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name in VIEWS:
                held = values.get(value.args[0])
            elif isinstance(value, relax.TupleGetItem):
                whole = values.get(value.tuple_value)
                held = whole[value.index] if isinstance(whole, tuple) and isinstance(whole[0], tuple) else None
            elif isinstance(value, relax.Tuple):
                fields = [values.get(f) for f in value.fields]
                held = tuple(fields) if all(f is not None for f in fields) else None
            elif isinstance(value, relax.Var):
                held = values.get(value)
            if held is not None:
                values[b.var] = held
            elif isinstance(value, relax.Call):  # an operator, or an NPU call fed by one
                cpu.append(str(value.op.name) if isinstance(value.op, tvm.ir.Op) else escape.text(value.op, 80))
            elif not isinstance(value, (relax.Var, relax.TupleGetItem, relax.Tuple)):  # plumbing of a CPU value is not listed
                cpu.append(type(value).__name__)
    if cpu:
        raise _refuse_cpu(model, part, cpu)
    if not calls:
        raise ExportError(f"{model}: cannot export: no operator of the model runs on the NPU")
    result = body.body if isinstance(body, relax.SeqExpr) else body
    fields = list(result.fields) if isinstance(result, relax.Tuple) else [result]
    held = values.get(result) if len(fields) == 1 else None
    if held is not None and isinstance(held[0], tuple):  # main returns a tuple var
        leaves = list(zip(held, result.ty.fields))
    else:
        leaves = [(values.get(f), f.ty) for f in fields]
    outputs = []
    for m, (source, ty) in enumerate(leaves):
        if not (isinstance(source, tuple) and source[:1] == ("output",)):
            raise ExportError(f"{model}: cannot export: model output {m} is not computed by an NPU partition")
        if any(source == s for s, _, _ in outputs):
            raise ExportError(f"{model}: cannot export: model outputs repeat one tensor")
        outputs.append((source, *_shape_dtype(ty)))
    inputs = tuple(_shape_dtype(p.ty) for p in main.params)
    return ExportGraph(tuple(calls), inputs, tuple(outputs))
