"""What an exported library runs: the partitioned model's ``main`` read as a sequence of NPU
partition calls, and where each one's inputs come from and the model's outputs.

An exported model runs without TVM, so ``main`` may hold nothing but calls of NPU partitions
and the plumbing between them (tuples, their items, aliases, and reshapes: a view of the same
bytes). A model with float inputs or outputs (ONNX QDQ) has a per-tensor ``quantize`` of each
input and ``dequantize`` of each output in ``main``: the library takes and gives the quantized
tensors and declares their scale and zero point, the caller converts (as with LiteRT's int8
models). Any other operator would run on a CPU the library does not have: the export is refused
with the list of those operators and the coverage report's reason for each.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import relax

from ...errors import NpuByocError
from ...ops.composites import npu_functions
from ...partition.coverage import CONSTANT_REASON, coverage_report
from ...util import escape
from ...util.relax_utils import Constant, constant_value

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
class Tensor:
    """A model input or output as the library takes or gives it."""

    shape: tuple[int, ...]
    dtype: str  # int8 or uint8
    qparams: tuple[float, int] | None = None  # (scale, zero point) of a boundary (de)quantize


@dataclass(frozen=True)
class ExportGraph:
    calls: tuple[Call, ...]
    inputs: tuple[Tensor, ...]
    outputs: tuple[tuple[Source, Tensor], ...]  # model output m: where its bytes come from


def _per_tensor(call: relax.Call) -> tuple[float, int] | None:
    """(scale, zero point) of a quantize / dequantize with scalar constant parameters, else None."""
    scale, zp = call.args[1], call.args[2]
    if not (isinstance(scale, Constant) and isinstance(zp, Constant)):
        return None
    s, z = constant_value(scale), constant_value(zp)
    return (float(s), int(z)) if s.size == 1 and z.size == 1 else None


def _tensor(ty, model: str, what: str, qparams=None) -> Tensor:
    if not isinstance(ty, relax.TensorType) or ty.shape is None or str(ty.dtype) not in ("int8", "uint8"):
        raise ExportError(f"{model}: cannot export: {what} is {escape.text(ty, 80)}, not an int8 or uint8 tensor "
                          "(nor quantized per tensor at the boundary)")  # fmt: skip
    return Tensor(tuple(int(d) for d in ty.shape.values), str(ty.dtype), qparams)


def _cpu_ops(part: tvm.IRModule) -> list[str]:
    """Every operator the coverage report leaves on the CPU, with its reason, but those computed
    at import (none without the partition log the report needs: a module partitioned by hand)."""
    try:
        report = coverage_report(part)
    except ValueError:
        return []
    return [f"{o.op} '{escape.text(o.name, 80)}' ({o.reason or 'no NPU pattern'})" for o in report.ops
            if not o.offloaded and o.reason != CONSTANT_REASON]


def _refuse_cpu(model: str, part: tvm.IRModule, relax_ops: list[str]) -> ExportError:
    listed = _cpu_ops(part) or [f"{op} (left in main)" for op in relax_ops]
    shown = "; ".join(listed[:CPU_OPS_SHOWN])
    if len(listed) > CPU_OPS_SHOWN:
        shown += f"; and {len(listed) - CPU_OPS_SHOWN} more"
    return ExportError(f"{model}: cannot export: {len(listed)} operator(s) would run on the CPU, and an exported "
                       f"library runs only NPU partitions: {shown}")  # fmt: skip


class _Reader:
    """The walk over ``main``'s bindings: what each variable holds (a Source, a tuple of them, or
    a dequantized NPU output), the partition calls, and the operators that would need a CPU."""

    def __init__(self, main: relax.Function, npu: dict) -> None:
        self.npu = npu
        self.values: dict = {p: ("input", i) for i, p in enumerate(main.params)}
        self.calls: list[Call] = []
        self.quantized: dict[int, tuple] = {}  # model input m -> (its int8 type, (scale, zero point))

    def npu_call(self, b, value):
        args = [self.values.get(a) for a in value.args]
        if not all(isinstance(a, tuple) and a[0] in ("input", "output") for a in args):
            return None  # fed by a CPU operator, which is listed
        c = len(self.calls)
        self.calls.append(Call(value.op.name_hint, self.npu[value.op.name_hint], tuple(args)))
        ty = b.var.ty
        return tuple(("output", c, k) for k in range(len(ty.fields))) if isinstance(ty, relax.TupleType) else ("output", c, 0)

    def view(self, b, value):  # the same bytes
        return self.values.get(value.args[0])

    def quantize(self, b, value):  # a float model input, quantized per tensor: the caller's work
        source, q = self.values.get(value.args[0]), _per_tensor(value)
        if q is None or source is None or source[0] != "input":
            return None
        key = (str(b.var.ty), q)
        if self.quantized.setdefault(source[1], (b.var.ty, q, key))[2] != key:
            return None  # quantized twice, two ways
        return ("input", source[1])

    def dequantize(self, b, value):  # an NPU output dequantized per tensor: a model output only
        source, q = self.values.get(value.args[0]), _per_tensor(value)
        if q is None or source is None or source[0] != "output":
            return None
        return ("dequantized", source, q, value.args[0])

    def item(self, b, value):
        whole = self.values.get(value.tuple_value)
        return whole[value.index] if isinstance(whole, tuple) and isinstance(whole[0], tuple) else None

    def fields(self, b, value):
        fields = [self.values.get(f) for f in value.fields]
        return tuple(fields) if all(f is not None for f in fields) else None

    def alias(self, b, value):
        return self.values.get(value)


# The Relax operators main may hold besides partition calls: what the library does for them.
_OP_RULES = {**{name: _Reader.view for name in VIEWS}, "relax.quantize": _Reader.quantize,
             "relax.dequantize": _Reader.dequantize}  # fmt: skip
_PLUMBING = ((relax.TupleGetItem, _Reader.item), (relax.Tuple, _Reader.fields), (relax.Var, _Reader.alias))


def _rule(value, npu: dict):
    if isinstance(value, relax.Call) and isinstance(value.op, relax.GlobalVar) and value.op.name_hint in npu:
        return _Reader.npu_call
    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
        return _OP_RULES.get(value.op.name)
    return next((rule for kind, rule in _PLUMBING if isinstance(value, kind)), None)


def read_graph(part: tvm.IRModule, model: str) -> ExportGraph:
    """The NPU partition calls of ``part`` (a module from partition_for_npu) in order, and where
    the model's outputs come from; ExportError when anything in ``main`` would run on a CPU."""
    main = part["main"]
    reader = _Reader(main, npu_functions(part))
    cpu: list[str] = []
    body = main.body
    for block in body.blocks if isinstance(body, relax.SeqExpr) else []:
        for b in block.bindings:
            rule = _rule(b.value, reader.npu)
            held = rule(reader, b, b.value) if rule is not None else None
            if held is not None:
                reader.values[b.var] = held
            elif isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op):
                cpu.append(str(b.value.op.name))
            elif rule is None:  # (an NPU call fed by a CPU operator, plumbing of a CPU value: not listed)
                cpu.append(type(b.value).__name__)
    values, calls, quantized = reader.values, reader.calls, reader.quantized
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
        qparams = None
        if isinstance(source, tuple) and source[0] == "dequantized":
            source, qparams, ty = source[1], source[2], source[3].ty
        if not (isinstance(source, tuple) and source[0] == "output"):
            raise ExportError(f"{model}: cannot export: model output {m} is not computed by an NPU partition")
        if any(source == s for s, _ in outputs):
            raise ExportError(f"{model}: cannot export: model outputs repeat one tensor")
        outputs.append((source, _tensor(ty, model, f"model output {m}", qparams)))
    inputs = []
    for m, p in enumerate(main.params):
        ty, qparams, _ = quantized.get(m, (p.ty, None, None))
        inputs.append(_tensor(ty, model, f"model input {m}", qparams))
    return ExportGraph(tuple(calls), tuple(inputs), tuple(outputs))
