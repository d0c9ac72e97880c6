"""The partition pass: the pattern table's matches become NPU composites and partitions.

``partition_for_npu`` canonicalises the module (one slice per split output, one dequantize per
consumer, max-pool pads filled with the dtype's minimum), runs TVM's ``FuseOpsByPattern`` with
the table of :mod:`npu_byoc.ops.table` (each match extracted and checked, every verdict recorded
for the coverage report) and ``MergeCompositeFunctions``, and names composites after the source
operators they offload. Partitions whose lowering fails are re-formed without the failing
match (npu_byoc.partition.fallback), so the reason reaches the report. The composite walks below
(``npu_functions``, ``composite_functions``, ``extract_composite``) serve lowering,
co-simulation and the reports alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator
from tvm.relax.transform import FusionPattern, PatternCheckContext

from ..arch.config import DEFAULT_CONFIG, HwConfig
from ..ops.entry import NOT_MINE, Convention, NpuPattern
from ..ops.records import DEFAULT_NUMERICS, numerics_for
from ..ops.table import (
    LAYER_ATTR, LEFT_SHIFT_ATTR, NUMERICS_ATTR, PARTITION_LOG_ATTR, PATTERN_TABLE, PATTERNS_BY_NAME,
)  # fmt: skip
from ..codegen import dryrun
from ..ops.canonical import absorbed  # noqa: F401 (the coverage report and the facade read it here)
from ..ops.composites import composite_functions, extract_composite, npu_functions
from ..ops.gather_canonical import compose_gathers, split_to_slices  # noqa: F401 (the facade)
from ..ops.pool import floor_max_pool_pads  # noqa: F401 (the facade)
from ..ops.registry import CANONICAL_FORMS
from ..ops.records import QOp
from ..ops.requant import left_shift_overflow_for
from ..util.relax_utils import op_name
from ..ops.uint8 import activations_label
from .exclude import excluded_layers, match_exclusion, split_names

@dataclass
class Decision:
    """One candidate match and what the checks said."""

    pattern: str
    convention: str
    vars: tuple[str, ...]  # names of the bindings the match covers
    accepted: bool
    reason: str | None
    macs: int = 0
    layer: str | None = None  # the source operator the match offloads
    activations: str = ""  # how the activations were read: "uint8 activations (U8S8)"


class _Recorder:
    def __init__(self, hw: HwConfig, denied: Mapping | None = None, numerics: str = DEFAULT_NUMERICS,
                 left_shift_overflow: str = "wrap", excluded: Mapping[str, str] | None = None):
        self.hw = hw
        self.excluded = dict(excluded or {})  # source operator -> the user's exclude name
        self.numerics = numerics
        self.left_shift_overflow = left_shift_overflow
        self.decisions: list[Decision] = []
        self._seen: set = set()
        self._last_layer: str | None = None
        self._layers: set[str] = set()
        self.denied = dict(denied or {})  # match key -> reason: lowering failed on it (compile_fallback)
        self.layer_keys: dict[str, tuple] = {}  # composite layer name -> its match key
        self._last_key: tuple | None = None

    def attrs(self, annotated) -> dict[str, str]:
        """Composite attributes, asked by FuseOpsByPattern right after a check accepts.

        Every composite gets a distinct layer name. Besides naming, this keeps the passes
        linear: TVM deduplicates functions by a hash that ignores constant values, so
        composites differing only in their weights would all collide (O(n^2) compares)."""
        name = self._last_layer or f"layer_{len(self._layers)}"
        unique, k = name, 1
        while unique in self._layers:
            unique, k = f"{name}#{k}", k + 1
        self._layers.add(unique)
        self.layer_keys[unique] = self._last_key
        return {LAYER_ATTR: unique, NUMERICS_ATTR: self.numerics, LEFT_SHIFT_ATTR: self.left_shift_overflow}

    def check_fn(self, entry: NpuPattern, convention: Convention):
        def check(ctx: PatternCheckContext) -> bool:
            bindings = dict(ctx.matched_bindings)
            root_var = ctx.value_to_bound_var.get(ctx.matched_expr) if ctx.value_to_bound_var else None
            op, reason = dryrun.evaluate(entry, ctx.matched_expr, bindings, self.hw, self.numerics, self.left_shift_overflow)
            if reason == NOT_MINE:
                return False
            from ..frontends.load import source_op_of

            values = [ctx.matched_expr, *bindings.values()]
            sources = [source_op_of(v) for v in values]
            reason = match_exclusion(sources, self.excluded) or reason or _shared_pad_reason(ctx, bindings)
            layer = next((n for n in sources if n), None)
            names = tuple(sorted(v.name for v in bindings))
            if root_var is not None:
                names = (root_var.name,) + tuple(n for n in names if n != root_var.name)
            key = (entry.name, names)
            if reason is None and key in self.denied:
                reason = self.denied[key]
            if key not in self._seen:
                self._seen.add(key)
                self.decisions.append(
                    Decision(
                        pattern=entry.name,
                        convention=convention.name,
                        vars=names,
                        accepted=reason is None,
                        reason=reason,
                        macs=int(getattr(op, "macs", 0) or 0),
                        layer=layer,
                        activations=activations_label(op) if op is not None else "",
                    )
                )
            self._last_layer, self._last_key = layer, key
            return reason is None

        return check


def _shared_pad_reason(ctx: PatternCheckContext, bindings: Mapping) -> str | None:
    """A folded pad must have no other reader: the composite takes its binding (a pad that is
    the composite's output, npu.pad, is read by whoever reads it)."""
    root = ctx.value_to_bound_var.get(ctx.matched_expr) if ctx.value_to_bound_var else None
    for var, value in bindings.items():
        if op_name(value) == "relax.nn.pad" and not var.same_as(root):
            users = ctx.var_usages.get(var, []) if ctx.var_usages else []
            if any(u not in bindings and not u.same_as(root) for u in users):
                return "PAD is also read by another operator: it folds into its only consumer's padding"
    return None


def fusion_patterns(
    table: Iterable[NpuPattern] = PATTERN_TABLE, check_factory=None, attrs_getter=None
) -> list[FusionPattern]:
    """The table as TVM FusionPatterns, most specific convention first."""
    out = []
    for entry in table:
        for conv in entry.conventions:
            check = check_factory(entry, conv) if check_factory else None
            out.append(FusionPattern(entry.name, conv.pattern, {}, check, attrs_getter))
    return out


@mutator
class _SplitSharedDequantize(PyExprMutator):
    """Give every consumer of a shared dequantize its own copy.

    ONNX QDQ graphs dequantize a tensor once for all its consumers, TFLite once per consumer.
    A pattern cannot take a binding that another match already owns, so without this the
    second consumer (a residual add after a conv, say) would never match.
    """

    def __init__(self, shared: dict, mod=None):
        super().__init__(mod)
        self.shared = shared  # original Var -> its dequantize Call
        self.copies: dict = {}

    def visit_call_(self, call):
        new_args = []
        changed = False
        for a in call.args:
            if isinstance(a, relax.Var) and a in self.shared:
                deq = self.shared[a]
                k = self.copies[a] = self.copies.get(a, 0) + 1
                copy = relax.Call(deq.op, [self.visit_expr(x) for x in deq.args], deq.attrs, deq.ty_args)
                new_args.append(self.builder_.emit(copy, f"{a.name}_c{k}"))
                changed = True
            else:
                new_args.append(self.visit_expr(a))
        if not changed:
            return super().visit_call_(call)
        return relax.Call(call.op, new_args, call.attrs, call.ty_args, call.span)


def split_shared_dequantize(mod: tvm.IRModule) -> tvm.IRModule:
    """Canonicalise: one dequantize per consumer (see :class:`_SplitSharedDequantize`)."""
    main = mod["main"]
    uses: dict = {}
    deqs: dict = {}
    for block in main.body.blocks:
        for b in block.bindings:
            if op_name(b.value) == "relax.dequantize":
                deqs[b.var] = b.value
            if isinstance(b.value, relax.Call):
                for a in b.value.args:
                    if isinstance(a, relax.Var):
                        uses[a] = uses.get(a, 0) + 1
            else:
                for a in relax.analysis.free_vars(b.value):
                    uses[a] = uses.get(a, 0) + 2  # tuples and the like: never split
    shared = {v: c for v, c in deqs.items() if uses.get(v, 0) > 1}
    if not shared:
        return mod
    new_main = _SplitSharedDequantize(shared, mod).visit_expr(main)
    out = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    out["main"] = new_main
    return relax.transform.DeadCodeElimination(["main"])(out)


def partition_for_npu(
    mod: tvm.IRModule,
    *,
    hw: HwConfig = DEFAULT_CONFIG,
    exclude: Iterable[str] = (),
) -> tvm.IRModule:
    """Partition ``mod`` for the NPU.

    NPU-supported subgraphs become ``Composite="npu.<op>"`` functions grouped into
    ``Codegen="npu"`` functions (FuseOpsByPattern + MergeCompositeFunctions); the rest stays
    in ``main`` on the CPU. Every candidate match and the checks' verdict is recorded in the
    module attribute ``npu_byoc.partition_log`` for :func:`npu_byoc.coverage_report`.

    ``exclude`` keeps operators on the CPU: NPU operations (``"npu.sigmoid"``), operator types
    of the model (``"SOFTMAX"``) or layers by name (npu_byoc.partition.exclude); the coverage
    report gives "excluded by the user" as their reason. An unknown name raises
    UnknownExcludeError naming it.
    """
    if not isinstance(mod, tvm.IRModule):
        raise TypeError(f"partition_for_npu expects a tvm.IRModule, got {type(mod).__name__}")
    from .fallback import partition_until_lowerable
    from ..frontends.load import model_info

    info = model_info(mod)
    npu_ops, names = split_names(exclude, PATTERNS_BY_NAME)
    excluded = excluded_layers(names, info, PATTERNS_BY_NAME)
    table = [p for p in PATTERN_TABLE if p.name not in npu_ops]
    numerics = numerics_for(info.format if info else None)
    overflow = left_shift_overflow_for(info.format if info else None)
    mod = canonicalise(mod)  # once: every fallback round partitions the same canonical module
    return partition_until_lowerable(
        mod, lambda denied: _partition_once(mod, table, hw, denied, numerics, overflow, excluded), hw)


def check_exclude(mod: tvm.IRModule, exclude: Iterable[str]) -> None:
    """Raise UnknownExcludeError for a name ``partition_for_npu(mod, exclude=...)`` would refuse,
    without partitioning (a command that does not partition still checks its --exclude)."""
    from ..frontends.load import model_info

    _, names = split_names(exclude, PATTERNS_BY_NAME)
    excluded_layers(names, model_info(mod), PATTERNS_BY_NAME)


def canonicalise(mod: tvm.IRModule) -> tvm.IRModule:
    """The forms the pattern table matches: each op's canonical forms (registry.CANONICAL_FORMS:
    one slice per split output, data-movement chains composed, max-pool pads filled with the
    dtype's minimum), then one dequantize per consumer."""
    for form in CANONICAL_FORMS:
        mod = form.rewrite(mod)
    return split_shared_dequantize(mod)


def _partition_once(mod: tvm.IRModule, table: list[NpuPattern], hw: HwConfig, denied: Mapping, numerics: str,
                    left_shift_overflow: str = "wrap", excluded: Mapping[str, str] | None = None):
    """One partitioning of the canonical ``mod`` with the matches in ``denied`` kept on the CPU:
    (module, recorder)."""
    recorder = _Recorder(hw, denied, numerics, left_shift_overflow, excluded)
    seq = tvm.transform.Sequential(
        [
            relax.transform.FuseOpsByPattern(
                fusion_patterns(table, recorder.check_fn, recorder.attrs),
                bind_constants=True,
                annotate_codegen=False,
            ),
            relax.transform.MergeCompositeFunctions(),
        ]
    )
    attrs = dict(mod.attrs) if mod.attrs is not None else {}
    out = _name_partitions(seq(mod))
    log = [d.__dict__ for d in recorder.decisions]
    for k, v in attrs.items():
        if out.attrs is None or k not in out.attrs:
            out = out.with_attr(k, v)
    return out.with_attr(PARTITION_LOG_ATTR, json.dumps(log)), recorder




@mutator
class _LayerNamer(PyExprMutator):
    """Names each composite after the source operator it offloads (its anchor binding)."""

    def __init__(self, mod=None):
        super().__init__(mod)
        self.count = 0

    def visit_function_(self, func):
        from ..frontends.load import source_op_of

        func = super().visit_function_(func)
        if func.attrs is not None and "Composite" in func.attrs and LAYER_ATTR not in func.attrs:
            # The root binding is the op's output; its span names the source operator.
            values = [b.value for block in func.body.blocks for b in block.bindings]
            names = [source_op_of(v) for v in reversed(values)]
            layer = next((n for n in names if n), None)
            func = func.with_attr(LAYER_ATTR, layer or f"layer_{self.count}")
            self.count += 1
        return func


@mutator
class _CallRenamer(PyExprMutator):
    def __init__(self, new_gvs: dict, mod=None):
        super().__init__(mod)
        self.new_gvs = new_gvs

    def visit_call_(self, call):
        call = super().visit_call_(call)
        if isinstance(call.op, tvm.ir.GlobalVar) and call.op.name_hint in self.new_gvs:
            return relax.Call(self.new_gvs[call.op.name_hint], call.args, call.attrs, call.ty_args, call.span)
        return call


def _name_partitions(mod: tvm.IRModule) -> tvm.IRModule:
    """Readable names: partitions become npu_subgraph_<k> (in call order) — they are the C
    symbols of the generated code — and composites carry the source operator's name."""
    funcs = npu_functions(mod)
    order = []
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.GlobalVar) and v.op.name_hint in funcs:
                if v.op.name_hint not in order:
                    order.append(v.op.name_hint)
    rename = {old: f"npu_subgraph_{k}" for k, old in enumerate(order)}
    others = {gv: f for gv, f in mod.functions_items() if gv.name_hint not in rename and gv.name_hint != "main"}
    bb = relax.BlockBuilder(tvm.IRModule(others))
    # add_func gives the new GlobalVars their function type, which calls to them need.
    new_gvs = {
        old: bb.add_func(_LayerNamer().visit_expr(mod[old]).with_attr("global_symbol", new), new)
        for old, new in rename.items()
    }
    out = bb.get()
    out["main"] = _CallRenamer(new_gvs).visit_expr(mod["main"])
    return tvm.IRModule(dict(out.functions_items()), attrs=mod.attrs)


def partition_log(mod: tvm.IRModule) -> list[Decision] | None:
    if mod.attrs is None or PARTITION_LOG_ATTR not in mod.attrs:
        return None
    return [Decision(**d) for d in json.loads(str(mod.attrs[PARTITION_LOG_ATTR]))]


@mutator
class _StripComposite(PyExprMutator):
    def visit_function_(self, func):
        func = super().visit_function_(func)
        if func.attrs is not None and "Composite" in func.attrs:
            func = func.without_attr("Composite")
        return func


def unpartition(mod: tvm.IRModule) -> tvm.IRModule:
    """The partitioned module with its NPU functions turned back into plain Relax functions,
    so TVM compiles them for the CPU: what a partition computes, as TVM computes it."""
    out = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    for name, func in npu_functions(mod).items():
        out[name] = _StripComposite().visit_expr(func.without_attr("Codegen"))
    return relax.transform.LambdaLift()(out)
