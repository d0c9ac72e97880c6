"""Walks of a partitioned module back to the records: its Codegen="npu" functions, the
composites inside each, and a composite's quantized-op record extracted again by its table
entry (lowering, reports and the runtime read partitions through these)."""

from __future__ import annotations

import tvm
from tvm import relax

from ..arch.config import DEFAULT_CONFIG, HwConfig
from .entry import NOT_MINE
from .records import DEFAULT_NUMERICS, QOp, Reject
from .table import CODEGEN_NAME, LEFT_SHIFT_ATTR, NUMERICS_ATTR, PATTERNS_BY_NAME


def npu_functions(mod: tvm.IRModule) -> dict[str, relax.Function]:
    """The Codegen="npu" functions of a partitioned module, by global name."""
    out = {}
    for gv, func in mod.functions_items():
        if isinstance(func, relax.Function) and func.attrs is not None and func.attrs.get("Codegen") == CODEGEN_NAME:
            out[gv.name_hint] = func
    return out


def composite_functions(func: relax.Function) -> list[tuple[str, relax.Function]]:
    """The (composite name, function) pairs inside a Codegen="npu" function, in call order."""
    found = []

    def visit(e):
        if isinstance(e, relax.Function) and e.attrs is not None and "Composite" in e.attrs:
            found.append((str(e.attrs["Composite"]), e))

    relax.analysis.post_order_visit(func.body, visit)
    return found


def extract_composite(composite: relax.Function, hw: HwConfig = DEFAULT_CONFIG) -> QOp:
    """Re-extract the quantized op of a composite function (used by lowering and reports)."""
    name = str(composite.attrs["Composite"])
    entry = PATTERNS_BY_NAME[name]
    bindings = {b.var: b.value for block in composite.body.blocks for b in block.bindings}
    root = composite.body.body
    numerics = str(composite.attrs[NUMERICS_ATTR]) if NUMERICS_ATTR in composite.attrs else DEFAULT_NUMERICS
    overflow = str(composite.attrs[LEFT_SHIFT_ATTR]) if LEFT_SHIFT_ATTR in composite.attrs else "wrap"
    op, reason = entry.evaluate(root, bindings, hw, numerics, overflow)
    if op is None or (reason and reason != NOT_MINE):
        raise Reject(reason or f"{name}: extraction failed")
    return op


__all__ = ["npu_functions", "composite_functions", "extract_composite"]
