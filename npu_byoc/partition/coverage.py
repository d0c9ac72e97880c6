"""Coverage report: which operators of the model run on the NPU, and why the rest do not.

The report is built from three facts recorded along the flow: the model's operators and the
Relax bindings each became (frontend provenance), every candidate NPU match with the checks'
verdict (the partition log), and the partitioned module itself.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import tvm
from tvm import relax

from ..util import escape
from ..frontends.load import ModelInfo, annotate_provenance, model_info
from ..frontends.onnx_qop import QOPERATOR_OPS
from .pipeline import absorbed, partition_for_npu, partition_log
from ..ops.composites import npu_functions
from ..ops.table import PATTERN_TABLE
from ..util.relax_utils import NotConstant, dtype_of, op_name, shape_of

SCHEMA_VERSION = 1
# The reason of an operator TVM's import computed as a constant (it never runs: nothing to offload).
CONSTANT_REASON = "constant: computed at import, no run-time work"


@dataclass
class OpCoverage:
    index: int
    name: str
    op: str
    offloaded: bool
    pattern: str | None
    reason: str | None
    macs: int
    producers: list[int] = field(default_factory=list)
    convention: str | None = None  # how an offloaded op was read: "qdq+bias, uint8 activations (U8S8)"

    @property
    def detail(self) -> str | None:
        """The pattern (and convention) of an offloaded op, else the reason."""
        if not self.offloaded:
            return self.reason
        return f"{self.pattern} ({self.convention})" if self.convention else self.pattern


@dataclass
class CoverageReport:
    model: str
    format: str
    summary: dict
    ops: list[OpCoverage]

    # -- renderers -------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "model": self.model,
            "format": self.format,
            "summary": self.summary,
            "ops": [asdict(o) for o in self.ops],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_text(self) -> str:
        s = self.summary
        lines = [
            f"NPU coverage of {escape.text(self.model)}",
            f"  operators offloaded: {s['ops_offloaded']}/{s['ops_total']}"
            f"   MACs offloaded: {_pct(s['macs_offloaded'], s['macs_total'])}"
            f" ({s['macs_offloaded']:,} of {s['macs_total']:,})",
            f"  NPU partitions: {s['partitions']}   CPU<->NPU transitions: {s['transitions']}",
            "",
        ]
        w = max([len(o.name) for o in self.ops] + [4])
        w = min(w, 48)
        k = max([len(o.op) for o in self.ops] + [2])
        lines.append(f"  {'#':>3}  {'name':<{w}}  {'op':<{k}}  {'where':<5}  {'MACs':>10}  pattern / reason")
        for o in self.ops:
            where = "NPU" if o.offloaded else "CPU"
            name = escape.text_column(o.name, w)
            lines.append(f"  {o.index:>3}  {name:<{w}}  {escape.text(o.op):<{k}}  {where:<5}  {o.macs:>10,}  "
                         f"{escape.text(o.detail, 400)}")
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        s = self.summary
        out = [
            f"# NPU coverage of {escape.markdown(self.model)}",
            "",
            "| operators offloaded | MACs offloaded | NPU partitions | CPU↔NPU transitions |",
            "| --- | --- | --- | --- |",
            f"| {s['ops_offloaded']}/{s['ops_total']} | {_pct(s['macs_offloaded'], s['macs_total'])} "
            f"({s['macs_offloaded']:,} of {s['macs_total']:,}) | {s['partitions']} | {s['transitions']} |",
            "",
            "| # | name | op | where | MACs | pattern / reason |",
            "| ---: | --- | --- | --- | ---: | --- |",
        ]
        for o in self.ops:
            out.append(
                f"| {o.index} | {escape.markdown(o.name)} | {escape.markdown(o.op)} | {'NPU' if o.offloaded else 'CPU'} "
                f"| {o.macs:,} | {escape.markdown(o.detail or '')} |"
            )
        return "\n".join(out) + "\n"

    def to_html(self) -> str:
        from .report_html import render_coverage_html

        return render_coverage_html(self)

    def write(self, path: str | Path, fmt: str) -> None:
        Path(path).write_text(RENDERERS[fmt](self), encoding="utf-8", errors="backslashreplace")


RENDERERS = {
    "text": CoverageReport.to_text,
    "json": CoverageReport.to_json,
    "md": CoverageReport.to_markdown,
    "html": CoverageReport.to_html,
}


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f}%" if b else "n/a"


# ---------------------------------------------------------------------------------------------


def coverage_report(mod: tvm.IRModule, **partition_options) -> CoverageReport:
    """Coverage of ``mod``: an imported module (partitioned here with ``partition_options``)
    or a module already returned by :func:`npu_byoc.partition_for_npu`."""
    if model_info(mod) is None:
        mod = annotate_provenance(mod)
    if partition_log(mod) is None:
        if npu_functions(mod):
            raise ValueError(
                "this module was partitioned without npu_byoc's partition log; pass the "
                "module from load_model() (or partition it with npu_byoc.partition_for_npu)"
            )
        mod = partition_for_npu(mod, **partition_options)
    info = model_info(mod)
    log = partition_log(mod)
    return _build(mod, info, log)


def _build(mod: tvm.IRModule, info: ModelInfo, log) -> CoverageReport:
    accepted = {}
    rejected: dict[str, list[str]] = {}
    for d in log:
        if d.accepted:
            for v in d.vars:
                accepted[v] = d
        else:
            for v in d.vars:
                rejected.setdefault(v, []).append(f"{d.pattern}: {d.reason}")

    folded_into = _absorbed_into(absorbed(mod))
    kinds = {o.index: o.op for o in info.ops}
    bindings = _bindings_by_name(mod)
    macs_of_binding = {name: macs_of(value) for name, value in bindings.items()}
    qdq = {o.index for o in info.ops if o.qdq}
    funcs = npu_functions(mod)
    on_cpu = cpu_bindings(mod)
    owned: set[str] = set()
    ops: list[OpCoverage] = []
    for op in info.ops:
        if op.qdq:  # glue of the ops around it (counted as qdq_nodes), not an operator
            owned.update(op.vars)
            continue
        producers = _skip_qdq(op.producers, info, qdq)
        if not op.vars:
            ops.append(OpCoverage(op.index, op.name, op.op, False, None, CONSTANT_REASON, 0, producers))
            continue
        names = op.vars
        if not any(v in accepted or v in rejected for v in names):
            # an op the partitioner canonicalised into other bindings (a Split into one slice per
            # output, a chain of data movement into one gather): their matches speak for it
            names = [folded_into(v) for v in op.vars]
        owned.update(op.vars, names)
        decision = _working_decision([accepted[v] for v in names if v in accepted], macs_of_binding)
        macs = sum(macs_of_binding.get(v, 0) for v in op.vars)
        left = [v for v in dict.fromkeys([*op.vars, *names]) if v in on_cpu]
        if decision is not None and left:  # a match took part of it; its run-time rest is CPU work
            reason = "; ".join(_cpu_reason(v, on_cpu[v], rejected) for v in left)
            ops.append(OpCoverage(op.index, op.name, op.op, False, None, reason, macs, producers))
            continue
        if decision is not None:
            ops.append(OpCoverage(op.index, op.name, op.op, True, decision.pattern, None, macs, producers,
                                  _convention(decision, op)))
            continue
        reasons = []
        for v in names:
            for r in rejected.get(v, []):
                if r not in reasons:
                    reasons.append(r)
        reason = _dynamic_reason(op, kinds) or ("; ".join(reasons) if reasons else _no_pattern_reason(op, bindings))
        ops.append(OpCoverage(op.index, op.name, op.op, False, None, reason, macs, producers))

    # run-time CPU work no model operator owns (a binding a rewrite made): named after its binding
    start = max((o.index for o in ops), default=-1) + 1
    for k, v in enumerate(v for v in on_cpu if v not in owned):
        call = on_cpu[v]
        ops.append(OpCoverage(start + k, v, op_name(call), False, None, _cpu_reason(v, call, rejected),
                              macs_of_binding.get(v, 0)))
    summary = {
        "ops_total": len(ops),
        "ops_offloaded": sum(o.offloaded for o in ops),
        "macs_total": sum(o.macs for o in ops),
        "macs_offloaded": sum(o.macs for o in ops if o.offloaded),
        "partitions": len(funcs),
        "transitions": _transitions(mod, set(funcs)),
        "qdq_nodes": len(qdq),
    }
    return CoverageReport(model=Path(info.path).name, format=info.format, summary=summary, ops=ops)


# Patterns that only move bytes (NpuPattern.moves_data, from the registry): an op whose bindings
# also hold another match (a FULLY_CONNECTED with keep_num_dims ends in a reshape) is credited to
# that one.
_DATA_MOVEMENT = {p.name for p in PATTERN_TABLE if p.moves_data}


def _working_decision(decisions: list, macs_of_binding: dict):
    """Of the matches among an op's bindings, the one that does its work: the most MACs,
    then not a data-movement pattern, then the first (the op's output binding comes first)."""
    if not decisions:
        return None
    macs = [sum(macs_of_binding.get(v, 0) for v in d.vars) for d in decisions]
    best = max(range(len(decisions)), key=lambda k: (macs[k], decisions[k].pattern not in _DATA_MOVEMENT, -k))
    return decisions[best]


def _absorbed_into(folded: dict[str, str]):
    """var name -> the binding it was finally folded into (itself if none)."""

    def follow(v: str) -> str:
        seen = set()
        while v in folded and v not in seen:
            seen.add(v)
            v = folded[v]
        return v

    return follow


def _convention(d, op) -> str:
    """The convention a match came in and how its activations were read; "QOperator" first
    when the op is an ONNX QLinear op that onnx_qop rewrote into that form."""
    source = "QOperator" if op.op in QOPERATOR_OPS else None
    return ", ".join(x for x in (source, d.convention, d.activations) if x)


def _skip_qdq(producers, info: ModelInfo, qdq: set[int]) -> list[int]:
    """Producers with ONNX Q/DQ nodes looked through (they are glue, not operators)."""
    by_index = {o.index: o for o in info.ops}
    out, stack, seen = set(), list(producers), set()
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        if p in qdq:
            stack.extend(by_index[p].producers)
        else:
            out.add(p)
    return sorted(out)


# a Relax op -> the first entry it anchors (conv2d: npu.conv2d, not a variant's)
_ANCHORS = {a: p.name for p in reversed(PATTERN_TABLE) for a in p.anchor_ops}

DYNAMIC_QUANTIZE = "DynamicQuantizeLinear"
_STATIC = "the NPU's requantize needs them at compile time (quantize the model statically, e.g. onnxruntime's quantize_static)"


def _dynamic_reason(op, kinds: dict[int, str]) -> str | None:
    """Dynamic quantization (onnxruntime's quantize_dynamic) computes activation scales and zero
    points from each input at run time: say so instead of the conventions it does not match.
    ``kinds``: each source operator's type by index."""
    if op.op == DYNAMIC_QUANTIZE:
        return f"{DYNAMIC_QUANTIZE} computes a scale and zero point from each input at run time: {_STATIC}"
    if any(kinds.get(p) == DYNAMIC_QUANTIZE for p in op.producers):
        return f"{op.op} reads a dynamically quantized input (scale and zero point computed at run time): {_STATIC}"
    return None


_QDQ = ("relax.quantize", "relax.dequantize")


def _no_pattern_reason(op, bindings: dict) -> str:
    calls = [bindings.get(v) for v in op.vars]
    names = [op_name(c) if c is not None else None for c in calls]
    # A quantized op's own bindings (TFLite) or its inputs (ONNX QDQ) hold the Q/DQ: its float
    # arithmetic in between is TVM's way of computing int8, not float tensors in the model.
    quantized = any(n in _QDQ for n in names)
    steps = [n.removeprefix("relax.") for n in names if n and n not in _QDQ]
    if quantized and len(steps) > 1 and any(n in _ANCHORS for n in names):
        # several float steps for one int8 operator (an excluded SQUARED_DIFFERENCE: subtract,
        # multiply): no single step's conventions are the reason
        return f"no NPU unit for {op.op} on int8 tensors (TVM computes it in float as {', '.join(steps)})"
    for call, name in zip(calls, names):
        if name not in _ANCHORS:
            continue
        if _has_quantized_input(call, bindings):
            return f"{op.op} does not match any convention of {_ANCHORS[name]}"
        if quantized:  # an anchor not of int8 operands
            return f"no NPU unit for {op.op} on int8 tensors (TVM computes it in float as {', '.join(steps)})"
        if dtype_of(call) == "float32":
            return f"{op.op} on float tensors: the NPU runs quantized int8 operators only"
        return f"{op.op} does not match any convention of {_ANCHORS[name]}"
    return f"no NPU pattern for {op.op}"


def _has_quantized_input(call, bindings: dict) -> bool:
    for a in call.args:
        if isinstance(a, relax.Var) and op_name(bindings.get(a.name)) == "relax.dequantize":
            return True
    return False


def _bindings_by_name(mod) -> dict:
    """Binding name -> bound value over every function, composites included: bindings keep
    their provenance names wherever partitioning moved them."""
    out = {}

    def visit(e):
        if isinstance(e, relax.Function):
            for block in e.body.blocks:
                for b in block.bindings:
                    out.setdefault(b.var.name, b.value)

    for _, func in mod.functions_items():
        if isinstance(func, relax.Function):
            visit(func)
            relax.analysis.post_order_visit(func.body, visit)
    return out


def macs_of(call) -> int:
    """Multiply-accumulates of a conv2d or matmul call, from its shapes."""
    name = op_name(call)
    try:
        if name == "relax.nn.conv2d":
            out = shape_of(call)
            w = shape_of(call.args[1])
            layout = str(call.attrs.kernel_layout)
            kh, kw = w[layout.index("H")], w[layout.index("W")]
            cin = w[layout.index("I")]
            n = 1
            for d in out:
                n *= d
            return n * kh * kw * cin
        if name == "relax.matmul":
            out = shape_of(call)
            k = shape_of(call.args[0])[-1]
            n = 1
            for d in out:
                n *= d
            return n * k
    except NotConstant:
        return 0
    return 0


# Views: TVM's build (RewriteDataflowReshape) runs them as a new shape of the same buffer, no copy
_VIEWS = {"relax.reshape", "relax.squeeze", "relax.expand_dims", "relax.flatten"}


def cpu_bindings(mod) -> dict:
    """Binding name -> call of main's run-time work on the CPU: a call of a Relax operator (not
    of an NPU function, not a view) that reads a tensor (not one computed from constants alone).
    An operator counts as offloaded only when none of its bindings is here: a match of its
    flatten does not offload the take after it."""
    out = {}
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if (isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) and v.op.name not in _VIEWS
                    and relax.analysis.free_vars(v)):  # fmt: skip
                out[b.var.name] = v
    return out


def _cpu_reason(var: str, call, rejected: dict) -> str:
    """Why the binding ``var`` (``call``) runs on the CPU: its refused matches, or none."""
    why = "; ".join(rejected.get(var, [])) or "no NPU match covers it"
    return f"{op_name(call).removeprefix('relax.')} {var} runs on the CPU: {why}"


def _transitions(mod, npu_names: set[str]) -> int:
    """Tensors crossing between CPU and NPU in main (one per producer/consumer-side pair)."""
    main = mod["main"]
    side = {}
    for p in main.params:
        side[p] = "cpu"
    crossings = set()
    for block in main.body.blocks:
        for b in block.bindings:
            v = b.value
            here = "cpu"
            if isinstance(v, relax.TupleGetItem) and v.tuple_value in side:
                side[b.var] = side[v.tuple_value]  # unpacking an NPU result is not a crossing
                continue
            if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.GlobalVar) and v.op.name_hint in npu_names:
                here = "npu"
            for u in relax.analysis.free_vars(v):
                if side.get(u, "cpu") != here:
                    crossings.add((u.name, here))
            side[b.var] = here
    return len(crossings)
