"""Lowering: a Codegen="npu" partition -> a PartitionPlan of typed, integer-only NPU ops.

Each composite is re-extracted into its quantized-op record (its table entry, npu_byoc.ops.<op>) and lowered
by the registry entry for its record type (npu_byoc.ops.registry.LOWERINGS); the real-valued scales become multipliers, shifts
and tables here (npu_byoc.arch.numerics), and nowhere after. Tensors are placed in regions: the
partition's inputs and outputs in their own regions in the model's layout, intermediates in
the scratch region, NHWC.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import tvm
from tvm import relax

from ..arch import limits
from ..errors import LoweringError
from ..arch.config import DEFAULT_CONFIG, HwConfig
from ..arch.isa import MAX_REGIONS, Region
from ..ops.composites import extract_composite
from ..ops.records import DEFAULT_NUMERICS, Reject
from ..ops.table import LAYER_ATTR, PATTERNS_BY_NAME
from . import dryrun
from .layout_agreement import layout_conflict
from .tokens import channels_in_a_row, pixels_to_sequence, sequence_layout
from ..ops.records import QFullyConnected, QOp, QReshape
from ..util.relax_utils import dtype_of, shape_of
from ..ops.npu_ops import NpuOp, TensorRef
from .interleave import interleave_io
from .plan import IoTensor, PartitionPlan

from ..ops.lowering import hwc, partition_batch, per_image, view  # noqa: F401 (lower.X callers)
from ..ops.reshape import order_free
from ..ops.registry import IN_PLACE, LOWERINGS, STRIDED_READERS, STRIDED_VIEWS, VIEWS, unit_reason
from ..ops.softmax import last_axis_as_channels

SCRATCH_ALIGN = 16


# ---------------------------------------------------------------------------------------------
# Shapes: every tensor is an H x W x C feature map to the NPU.


def _constant_operand(name: str, op: QOp, layout: str, blob: bytearray) -> TensorRef:
    """A constant input_b of the record, appended to ``blob`` (the plan's CONST head) as its
    bytes in the model's order, which ``layout`` names. One broadcast over the channels (a
    scalar, a [1, H, W, 1] plane) is stored repeated along them: a channel vector the unit
    broadcasts itself, or rows the DMA repeats at full speed (a stride-0 innermost axis copies
    a byte per cycle)."""
    value, out = np.asarray(op.constant), op.output.shape
    axis = 1 if layout == "NCHW" and len(out) in (3, 4) else -1  # the model's channel axis
    if value.ndim == len(out) and value.shape[axis] == 1 < out[axis]:
        value = np.repeat(value, out[axis], axis)
    return _constant_tensor(f"{name}/constant", value, layout, blob)


def _constant_tensor(name: str, value: np.ndarray, layout: str, blob: bytearray) -> TensorRef:
    """``value`` appended to ``blob`` (the plan's CONST head) in the model's order, which
    ``layout`` names: its TensorRef there."""
    offset = -(-len(blob) // SCRATCH_ALIGN) * SCRATCH_ALIGN
    blob += bytes(offset - len(blob)) + np.ascontiguousarray(value, np.int8).tobytes()
    return TensorRef(name, int(Region.CONST), offset, hwc(value.shape, layout), layout)


def _hwc_order(c: int, h: int, w: int) -> np.ndarray:
    """The CHW (model) index of each feature of an NHWC-stored [H, W, C] map, in byte order."""
    return np.arange(c * h * w).reshape(c, h, w).transpose(1, 2, 0).ravel()


def _flatten_dims(op: QReshape, model_layout: str) -> tuple[int, int, int] | None:
    """(C, H, W) if ``op`` flattens an NCHW feature map whose bytes the NPU stores reordered
    ([N, C, H, W] -> [N, C*H*W]), or unflattens features into one; None otherwise."""
    if model_layout != "NCHW":
        return None
    a, b = (op.input.shape, op.output.shape) if len(op.input.shape) == 4 else (op.output.shape, op.input.shape)
    if len(a) != 4 or len(b) != 2 or order_free(a) or a[0] != b[0] or b[1] != a[1] * a[2] * a[3]:
        return None
    return int(a[1]), int(a[2]), int(a[3])


def _fc_output_order(extracted: list, local_funcs: dict, readers: dict, output_region: dict, concat_slots,
                     model_layout: str) -> dict:  # fmt: skip
    """Fully connected layers whose features only an NCHW unflatten reads (a decoder's
    Linear -> view(N, C, H, W)): var -> the model index of each output feature in NHWC byte
    order. The layer computes its features in that order, so the reshape becomes a view.
    ``readers``: var -> the records of the composites reading it."""
    producers = {b.var: q for b, _, q in extracted}
    out = {}
    for b, _, q in extracted:
        dims = _flatten_dims(q, model_layout) if type(q) is QReshape and len(q.output.shape) == 4 else None
        if dims is None or b.var in output_region:
            continue
        (src,) = _operand_args(local_funcs[b.value.op], b.value, q)
        if (type(producers.get(src)) is QFullyConnected and len(readers.get(src, ())) == 1
                and src not in output_region and src not in concat_slots):  # fmt: skip
            out[src] = _hwc_order(*dims)
    return out


def _reordered_fc(op: QFullyConnected, inputs: np.ndarray | None, outputs: np.ndarray | None) -> QFullyConnected:
    """The layer with its input features and/or output features taken in the given orders."""
    weight = op.weight if inputs is None else op.weight[:, inputs]
    if outputs is None:
        return replace(op, weight=np.ascontiguousarray(weight))

    def per_channel(a):
        a = np.asarray(a)
        return a[outputs] if a.ndim == 1 and a.shape[0] == op.out_features else a

    return replace(op, weight=np.ascontiguousarray(weight[outputs]), bias=per_channel(op.bias),
                   weight_scale=per_channel(op.weight_scale), weight_zero_point=per_channel(op.weight_zero_point))


class _InPlaceSlots:
    """Where each input of an op that takes its inputs in place (registry.IN_PLACE: a
    concatenation) lives: its slice of that op's output, written in place by the op that
    produces it (zero copy, as Vela does). Decided before the ops are lowered, outermost first,
    so a concatenation of a concatenation nests (its whole output is a slice of the outer
    one's). An input the op's ``place`` hook cannot take in place -- a partition input, a
    reshape's view, a partition output, one placed twice -- is copied into its slice by the
    op's ``copy_in`` hook (npu_byoc.ops.concat)."""

    def __init__(self, extracted: list, local_funcs: dict, output_region: dict, model_layout: str):
        self.slots: dict = {}  # var -> (the in-place op's output var, its Slice)
        self.copies: dict = {}  # in-place op var -> [(input index, Slice)] copied in
        produced = {b.var for b, _, q in extracted if type(q) not in VIEWS}  # by an op or a concatenation
        self.errors: dict = {}  # in-place op var -> the reason it cannot be done
        for b, _, qop in reversed(extracted):
            hook = IN_PLACE.get(type(qop))
            if hook is None:
                continue

            def placeable(src) -> bool:
                return src in produced and src not in output_region and src not in self.slots

            try:
                srcs = _operand_args(local_funcs[b.value.op], b.value, qop)
                slots, self.copies[b.var] = hook.place(qop, srcs, placeable, model_layout)
            except Reject as err:
                self.errors[b.var] = str(err)
                continue
            self.slots |= {src: (b.var, where) for src, where in slots.items()}


def _alias_view_outputs(name: str, extracted: list, local_funcs: dict, params: list, output_region: dict) -> None:
    """A reshape that is a partition output hands its region to its input's producer, which then
    writes the output's bytes there directly."""
    views = {b.var for b, _, q in extracted if type(q) in VIEWS}
    for b, layer, qop in extracted:
        if type(qop) not in VIEWS or b.var not in output_region:
            continue
        (src,) = _operand_args(local_funcs[b.value.op], b.value, qop)
        if src in params or src in output_region or src in views:
            reason = "a reshape alone between partition inputs and outputs: nothing for the NPU to compute"
            raise LoweringError(f"{name}: layer '{layer}': {reason}", layer=layer, reason=reason)
        output_region[src] = output_region[b.var]


def _layout_of(op: QOp, model_layout: str) -> str:
    """The op's activation layout; elementwise ops (no layout of their own) follow the
    partition's spatial ops, so their inputs and outputs agree with their neighbours."""
    return getattr(op, "layout", None) or model_layout


# ---------------------------------------------------------------------------------------------
# Partitions


def lower_partition(name: str, func: relax.Function, hw: HwConfig = DEFAULT_CONFIG,
                    interleave: bool = True) -> PartitionPlan:  # fmt: skip
    """Lower one Codegen="npu" function. Raises LoweringError naming the layer and the reason.
    ``interleave``: lay NCHW inputs and outputs out on chip where that is faster
    (npu_byoc.codegen.interleave); without, they move as strided transfers."""
    params = list(func.params)
    bindings = [b for block in func.body.blocks for b in block.bindings]
    local_funcs = {b.var: b.value for b in bindings if isinstance(b.value, relax.Function)}
    calls = [b for b in bindings if isinstance(b.value, relax.Call) and b.value.op in local_funcs]
    result = func.body.body
    result_vars = list(result.fields) if isinstance(result, relax.Tuple) else [result]
    aliases = {b.var: b.value for b in bindings if isinstance(b.value, relax.Var)}
    result_vars = [aliases.get(v, v) for v in result_vars]

    # First pass: extract every composite; the layout a tensor has in its region comes from
    # the op that produces it (outputs) or the first op that reads it (inputs).
    extracted = []
    param_layout: dict = {}
    for b in calls:
        composite = local_funcs[b.value.op]
        layer = str(composite.attrs[LAYER_ATTR]) if LAYER_ATTR in composite.attrs else str(b.var.name)
        try:
            qop = extract_composite(composite, hw)
            reason = dryrun.final_reason(PATTERNS_BY_NAME[str(composite.attrs["Composite"])], qop, hw,
                                         getattr(qop, "numerics", DEFAULT_NUMERICS))
            if reason:
                raise Reject(reason)
        except Reject as err:
            raise LoweringError(f"{name}: layer '{layer}' ({composite.attrs['Composite']}): {err}", layer=layer,
                                reason=str(err)) from None  # fmt: skip
        extracted.append((b, layer, qop))
    # The spatial ops give the layout; a partition of elementwise ops only takes the one a channel
    # vector broadcast implies ([1, C, 1, 1]: NCHW), else NHWC (the same bytes for the rest).
    model_layout = next((q.layout for _, _, q in extracted if getattr(q, "layout", None)), None) or next(
        (lay for _, _, q in extracted if hasattr(q, "input_b") and (lay := limits.binary_layout(q)) != "NHWC"), "NHWC")
    conflict = layout_conflict([(layer, q) for _, layer, q in extracted])
    if conflict:
        layer, reason = conflict
        raise LoweringError(f"{name}: layer '{layer}': {reason}", layer=layer, reason=reason)
    seq_layout = sequence_layout(extracted, model_layout)  # an NCHW ViT's tokens: NHWC

    def layout_for(qop, var) -> str:
        """The op's layout for ``var``; a sequence takes the partition's sequence layout."""
        lay = _layout_of(qop, model_layout)
        return seq_layout if len(shape_of(var)) == 3 and getattr(qop, "layout", None) is None else lay

    for b, _, qop in extracted:
        for a in b.value.args:
            if a in params:
                param_layout.setdefault(a, layout_for(qop, a))

    try:
        batch = partition_batch([shape_of(v) for v in (*params, *(b.var for b, _, _ in extracted))])
    except Reject as err:
        raise LoweringError(f"{name}: {err}") from None
    next_region = int(Region.IO)
    refs: dict = {}
    inputs: list[IoTensor] = []
    for p in params:
        shape = shape_of(p)
        layout = param_layout.get(p, "NHWC")
        ref = TensorRef(p.name, next_region, 0, _hwc_or_fail(name, p.name, shape, layout, batch), layout)
        refs[p] = ref
        inputs.append(IoTensor(p.name, shape, dtype_of(p), ref))
        next_region += 1

    output_region = {v: next_region + k for k, v in enumerate(result_vars)}
    _check_regions(name, refs, output_region, extracted)
    _alias_view_outputs(name, extracted, local_funcs, params, output_region)
    concat = _InPlaceSlots(extracted, local_funcs, output_region, model_layout)
    scratch = 0
    constants = bytearray()
    placed: dict = {}  # var -> its TensorRef, for the tensors concatenations write in place
    layout_of = {b.var: layout_for(q, b.var) for b, _, q in extracted}
    layer_of = {b.var: layer for b, layer, _ in extracted}

    def home(var) -> TensorRef:
        """Where the op producing ``var`` writes it: its slice of a concatenation, its output
        region, or a new SCRATCH tensor."""
        nonlocal scratch
        if var in placed:
            return placed[var]
        layer = layer_of[var]
        hwc_shape = hwc(per_image(shape_of(var), batch), layout_of[var])
        if var in concat.slots:
            outer, where = concat.slots[var]
            ref = where.of(home(outer), hwc_shape, layer)
        elif var in output_region:
            ref = TensorRef(layer, output_region[var], 0, hwc_shape, layout_of[var])
        else:
            ref = TensorRef(layer, int(Region.SCRATCH), scratch, hwc_shape, "NHWC")
            scratch += -(-ref.nbytes // SCRATCH_ALIGN) * SCRATCH_ALIGN
        placed[var] = ref
        return ref

    # An NCHW model's flatten before a classifier (and unflatten after a decoder's Linear) reads
    # its features in CHW order; the NPU stores maps HWC. The fully connected layer on the other
    # side takes its features in HWC order instead, so the reshape stays a view.
    readers: dict = {}
    for b, _, q in extracted:
        for a in b.value.args:
            readers.setdefault(a, []).append(q)
    fc_outputs = _fc_output_order(extracted, local_funcs, readers, output_region, concat.slots, model_layout)
    fc_inputs: dict = {}  # a flatten's var -> the model index of each feature in byte order

    ops: list[NpuOp] = []
    layers = []
    copy_ops: list[tuple[int, int]] = []
    feature_orders: list[tuple[int, np.ndarray]] = []
    for b, layer, qop in extracted:
        layout = layout_for(qop, b.var)
        shape = shape_of(b.var)
        try:
            hwc_shape = hwc(per_image(shape, batch), layout)
            if qop.takes_partition_layout:  # laid out as it says, or as the partition (a gather's index map)
                if len(shape) == 4 and qop.layout not in (None, model_layout):
                    reason = f"laid out {qop.layout} in a partition that holds its tensors {model_layout}"
                    raise Reject(f"{qop.takes_partition_layout} {reason}")
                qop = replace(qop, layout=seq_layout if len(shape) == 3 else model_layout)
            if b.var in concat.errors:
                raise Reject(concat.errors[b.var])
            if type(qop) in IN_PLACE:  # its inputs write their slices; copy in the others
                refs[b.var] = out = home(b.var)
                srcs = IN_PLACE[type(qop)].sources(qop, _operand_args(local_funcs[b.value.op], b.value, qop))
                for k, where in concat.copies.get(b.var, ()):
                    if srcs[k] is None:  # a model constant
                        ifm = _constant_tensor(f"{layer}/input {k}", qop.constants[k], layout, constants)
                    else:
                        ifm = refs[srcs[k]]
                    copy_ops.append((len(ops), k))
                    ops.append(IN_PLACE[type(qop)].copy_in(layer, k, qop, ifm, where.of(out, ifm.shape, layer)))
                    layers.append(layer)
                continue
            if type(qop) in VIEWS:
                args = _operand_args(local_funcs[b.value.op], b.value, qop)
                ifms = [refs[a] for a in args]
                dims = _flatten_dims(qop, model_layout)
                if seq_layout != model_layout and pixels_to_sequence(qop):
                    if b.var in output_region:
                        raise Reject("a patches-to-tokens reshape as a partition output: its bytes are the tokens'")
                    refs[b.var] = channels_in_a_row(qop, ifms[0])
                elif dims and len(qop.input.shape) == 4 and _flattens_into_fc(b.var, ifms[0], readers, output_region):
                    fc_inputs[b.var] = _hwc_order(*dims)
                    refs[b.var] = view(ifms[0], hwc_shape)
                elif dims and args[0] in fc_outputs:
                    refs[b.var] = view(ifms[0], hwc_shape)
                else:
                    refs[b.var] = VIEWS[type(qop)](qop, ifms, hwc_shape, model_layout)
                continue
            if (type(qop) in STRIDED_VIEWS and b.var not in output_region and b.var not in concat.slots
                    and readers.get(b.var) and all(type(r) in STRIDED_READERS for r in readers[b.var])):
                args = _operand_args(local_funcs[b.value.op], b.value, qop)
                refs[b.var] = STRIDED_VIEWS[type(qop)](qop, [refs[a] for a in args], hwc_shape)
                continue
            ofm = home(b.var)
            args = _operand_args(local_funcs[b.value.op], b.value, qop)
            ifms = [refs[a] for a in args]
            if type(qop) is QFullyConnected and (args[0] in fc_inputs or b.var in fc_outputs):
                qop = _reordered_fc(qop, fc_inputs.get(args[0]), fc_outputs.get(b.var))
                if b.var in fc_outputs:
                    feature_orders.append((len(ops), fc_outputs[b.var]))
            if getattr(qop, "constant", None) is not None:
                ifms.append(_constant_operand(layer, qop, seq_layout if len(shape) == 3 else model_layout, constants))
            if qop.reduces_last_axis and layout == "NCHW" and len(shape) >= 3:
                op = LOWERINGS[type(qop)](layer, qop, [last_axis_as_channels(ifms[0])], last_axis_as_channels(ofm))
            else:
                op = LOWERINGS[type(qop)](layer, qop, ifms, ofm)
        except Reject as err:
            raise LoweringError(f"{name}: layer '{layer}': {err}", layer=layer, reason=str(err)) from None
        except KeyError as err:
            reason = f"input {err} is not produced by the partition"
            raise LoweringError(f"{name}: layer '{layer}': {reason}", layer=layer, reason=reason) from None
        reason = unit_reason(op, hw)  # the check's own limit, again on the op as lowered here
        if reason:
            raise LoweringError(f"{name}: layer '{layer}': {reason}", layer=layer, reason=reason)
        refs[b.var] = ofm
        ops.append(op)
        layers.append(layer)

    outputs = []
    for k, v in enumerate(result_vars):
        if v not in refs or refs[v].region != output_region.get(v):
            raise LoweringError(f"{name}: output {k} is not produced by an NPU operation")
        outputs.append(IoTensor(f"output_{k}", shape_of(v), dtype_of(v), refs[v]))
    plan = PartitionPlan(name, inputs, outputs, ops, scratch, layers, batch, bytes(constants), tuple(copy_ops),
                         feature_orders=tuple(feature_orders),
                         sequence_layout="" if seq_layout == model_layout else seq_layout)
    return interleave_io(plan, hw) if interleave else plan


def _flattens_into_fc(var, src: TensorRef, readers: dict, output_region: dict) -> bool:
    """A flatten of an NHWC-stored map read by fully connected layers only (their first
    operand), and not a partition output: they can take its features in byte order."""
    users = readers.get(var, ())
    return (src.layout == "NHWC" and not src.is_slice and var not in output_region and bool(users)
            and all(type(q) is QFullyConnected for q in users))  # fmt: skip


def _operand_args(composite: relax.Function, call: relax.Call, qop: QOp) -> list:
    """The call arguments feeding the record's inputs, in the record's order (a composite's
    parameters are ordered by the fusion pass, not by the op's operands)."""
    params = list(composite.params)
    out = []
    for operand in qop.operands:
        if operand not in params:
            raise Reject("an NPU operand is computed inside the composite")
        out.append(call.args[params.index(operand)])
    return out


def _check_regions(name: str, input_refs: dict, output_region: dict, extracted: list) -> None:
    """The partition's inputs and outputs each take a region; the driver binds MAX_REGIONS.
    Blames the last op that reads or writes a region beyond them (without it, the partition
    re-formed by the compile fallback has fewer)."""
    n = max([int(Region.IO) - 1, *(r.region for r in input_refs.values()), *output_region.values()]) + 1
    if n <= MAX_REGIONS:
        return
    over = {p for p, r in input_refs.items() if r.region >= MAX_REGIONS}
    over |= {v for v, r in output_region.items() if r >= MAX_REGIONS}
    culprits = [layer for b, layer, _ in extracted if b.var in over or any(a in over for a in b.value.args)]
    reason = (f"{len(input_refs)} input(s) and {len(output_region)} output(s) need {n} regions: "
              f"the NPU driver binds {MAX_REGIONS}")  # fmt: skip
    raise LoweringError(f"{name}: {reason}", layer=culprits[-1] if culprits else None, reason=reason)


def _hwc_or_fail(partition: str, tensor: str, shape, layout, batch: int = 1) -> tuple[int, int, int]:
    try:
        return hwc(per_image(shape, batch), layout)
    except Reject as err:
        raise LoweringError(f"{partition}: input '{tensor}': {err}") from None


def lower_module(mod: tvm.IRModule, hw: HwConfig = DEFAULT_CONFIG, interleave: bool = True) -> dict[str, PartitionPlan]:
    """Lower every Codegen="npu" function of a partitioned module."""
    from ..ops.composites import npu_functions

    return {name: lower_partition(name, f, hw, interleave) for name, f in npu_functions(mod).items()}


__all__ = ["PartitionPlan", "IoTensor", "lower_partition", "lower_module", "LOWERINGS", "hwc", "view"]

