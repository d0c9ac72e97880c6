"""The canonical forms of npu.gather (npu_byoc.ops.gather): each output of an ONNX Split read as
its own slice, and chains of data movement (reshape of reshape, gather of gather) composed into
one gather and one view each way. Relax rewrites, applied by the partitioner before the table."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from .canonical import record_absorbed
from ..util.relax_utils import Constant, constant_value, op_name, shape_of


@mutator
class _SplitToSlices(PyExprMutator):
    def __init__(self, parts: dict, mod=None):
        super().__init__(mod)
        self.parts = parts  # split var -> (its input, axis, [(begin, end) per output])

    def visit_tuple_getitem_(self, op):
        found = self.parts.get(op.tuple_value) if isinstance(op.tuple_value, relax.Var) else None
        if found is None:
            return super().visit_tuple_getitem_(op)
        x, axis, bounds, span = found
        begin, end = bounds[op.index]
        c = relax.op.strided_slice(self.visit_expr(x), [axis], [begin], [end], [1])
        return relax.Call(c.op, c.args, c.attrs, c.ty_args, span)  # the Split's provenance, for coverage


def split_to_slices(mod: tvm.IRModule) -> tvm.IRModule:
    """Canonicalise: each output of a ``split`` (TVM's import of ONNX Split) read as its own
    ``strided_slice`` of the input, as TVM's TFLite import writes SPLIT: one op per output, so
    each can be its own match (npu.gather) instead of a tuple no pattern takes."""
    main = mod["main"]
    parts = {}
    readers = {}  # a split's var -> the first binding reading one of its outputs (to be a slice)
    for block in main.body.blocks:
        for b in block.bindings:
            if isinstance(b.value, relax.TupleGetItem) and b.value.tuple_value in parts:
                readers.setdefault(b.value.tuple_value.name, b.var.name)
            if op_name(b.value) != "relax.split":
                continue
            x, a = b.value.args[0], b.value.attrs
            shape = shape_of(x)
            axis = int(a.axis) % len(shape)
            sections = a.indices_or_sections
            if isinstance(sections, tvm.ir.prim.expr.IntImm):  # n equal sections, else split points
                cuts = [shape[axis] * k // int(sections) for k in range(1, int(sections))]
            else:
                cuts = [int(v) for v in sections]
            edges = [0, *cuts, shape[axis]]
            parts[b.var] = (x, axis, list(zip(edges[:-1], edges[1:])), b.value.span)
    if not parts:
        return mod
    out = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    out["main"] = _SplitToSlices(parts, mod).visit_expr(main)
    return record_absorbed(relax.transform.DeadCodeElimination(["main"])(out), readers)


@mutator
class _ReplaceCalls(PyExprMutator):
    """Calls swapped for new ones (matched by identity), the new ones' arguments visited."""

    def __init__(self, new: dict, mod=None):
        super().__init__(mod)
        self.new = new  # old Call (by identity) -> new Call

    def visit_call_(self, call):
        found = self.new.get(call)
        if found is None:
            return super().visit_call_(call)
        return relax.Call(found.op, [self.visit_expr(a) for a in found.args], found.attrs, found.ty_args, call.span)


def _flat_take(value, values) -> tuple | None:
    """(x, indices) of ``take(reshape(x, [N]), constant indices, axis=0)``: TFLite data movement
    as npu_byoc.frontends.tflite_ops imports it."""
    if op_name(value) != "relax.take" or int(value.attrs.axis) != 0 or not isinstance(value.args[1], Constant):
        return None
    flat = values.get(value.args[0])
    if op_name(flat) != "relax.reshape" or len(shape_of(value.args[0])) != 1:
        return None
    return flat.args[0], constant_value(value.args[1]).astype(np.int64)


def _collapse(b, values: dict, uses: dict) -> tuple | None:
    """(the new call, the single-use bindings it folds) for binding ``b``: a reshape of a reshape
    is one reshape, a gather of a gather (through reshapes) one gather; None if neither."""
    inner = b.value.args[0] if isinstance(b.value, relax.Call) and b.value.args else None
    if op_name(b.value) == "relax.reshape" and op_name(values.get(inner)) == "relax.reshape" and uses.get(inner) == 1:
        return relax.op.reshape(values[inner].args[0], b.value.args[1]), [inner]
    outer = _flat_take(b.value, values)
    if outer is None:
        return None
    y, path = values[inner].args[0], [inner]
    while isinstance(y, relax.Var) and op_name(values.get(y)) == "relax.reshape":
        path.append(y)
        y = values[y].args[0]
    first = _flat_take(values.get(y), values) if isinstance(y, relax.Var) else None
    if first is None or any(uses.get(v) != 1 for v in (*path, y)):
        return None
    index = first[1].ravel()[outer[1]]  # the second gather reads the first's output
    flat = values[y].args[0]  # reshape(x, [N]): the first gather's input, now this one's
    return relax.op.take(flat, relax.const(index.astype("int32")), 0, str(b.value.attrs.mode)), [*path, y]


def compose_gathers(mod: tvm.IRModule) -> tvm.IRModule:
    """Canonicalise chains of data movement into one gather and one view each way:
    ``reshape(reshape(x))`` is ``reshape(x)``, and a gather of a gather (through views) is one
    gather whose indices are composed. Keras 3's UpSampling2D converts to RESHAPE (rank 5) ->
    TILE -> RESHAPE per axis; composed, it is the one nearest-neighbour gather npu.gather runs.
    Only single-use intermediates fold; the folded bindings are recorded for coverage."""
    names: dict[str, str] = {}
    while True:
        main = mod["main"]
        bindings = [b for block in main.body.blocks for b in block.bindings]
        values = {b.var: b.value for b in bindings}
        uses: dict = {}
        for e in (*(b.value for b in bindings), main.body.body):
            for v in relax.analysis.free_vars(e):
                uses[v] = uses.get(v, 0) + 1
        new, touched = {}, set()  # rewrites whose bindings do not overlap, all made in one pass
        for b in bindings:
            found = _collapse(b, values, uses)
            if found is None or touched & {b.var, *found[1]}:
                continue
            call, folded = found
            new[b.value] = call
            touched |= {b.var, *folded}
            names.update({v.name: b.var.name for v in folded})
        if not new:
            return record_absorbed(mod, names)
        out = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
        out["main"] = _ReplaceCalls(new, mod).visit_expr(main)
        mod = relax.transform.DeadCodeElimination(["main"])(out)
