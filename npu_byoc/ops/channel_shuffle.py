"""CHANNEL SHUFFLE (ShuffleNet's rank-5 reshape -> transpose -> reshape) and any gather along
one axis with a periodic index map, as strided copies: no opcode of its own. The canonical form
turns the rank-5 chain into the one ``take`` along one axis it is (ONNX's
``[N,g,C/g,H,W] -> (0,2,1,3,4)`` or TFLite's ``[N,H,W,g,C/g] -> (0,1,2,4,3)``: a channel
permutation), and the NPU copies each arithmetic run of that permutation (out[o0 + s·j] =
in[i0 + t·j]) with the identity LUT (a requantize table when the output is quantized unlike
the input), between two strided boxes: a shuffle of g groups is g
copies. Everything the compiler knows about it is here: record, typed op, canonical form,
conventions, checks, lowering, golden semantics and tiling kind."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

import numpy as np
import tvm
from tvm import relax
from tvm.relax.dpl import is_const, is_op, wildcard

from . import checks as C
from ._qdq import _INT_ACTIVATIONS, _activation, _carried, _const, _deq, _is_constant, _quant
from ..arch.config import HwConfig
from .canonical import CanonicalForm, record_absorbed
from .entry import Convention, NpuPattern
from .gather_canonical import _ReplaceCalls
from .gather_copies import MAX_COPIES, MAX_PERIOD, axis_runs
from .npu_op_spec import NpuOpSpec, shape_text
from .lut import requantize_table
from .npu_ops import Lut, Phased, TensorRef, Tiling, copy_lut
from .records import DEFAULT_NUMERICS, QOp, QTensor, Reject
from .transpose import hwc_axes
from ..util.relax_utils import constant_value, op_name, resolve, shape_of


# ---------------------------------------------------------------------------------------------
# Record and typed op


@dataclass(frozen=True, eq=False)
class QAxisGather(QOp):
    """``output = take(input, index, axis)``: output position i along ``axis`` copies input
    position ``index[i]``; the bytes are copied, requantized when the output is quantized unlike
    the input."""

    input: QTensor
    output: QTensor
    axis: int
    index: tuple[int, ...]
    convention: str = ""
    layout: str | None = None  # the partition's (lowering fills it in): which axis is C
    operands: tuple = field(default=(), compare=False, repr=False)
    numerics: str = DEFAULT_NUMERICS  # whose requantize a rescaling copy replicates
    takes_partition_layout: ClassVar[str] = "channel shuffle"

    @property
    def macs(self) -> int:
        return 0


def _axis_box(ref: TensorRef, q: int, start: int, step: int, count: int, name: str) -> TensorRef:
    """Positions start, start + step, ... (``count`` of them) of H x W x C axis ``q`` of ``ref``,
    the other axes whole, in place (a step of 0 repeats a position)."""
    strides = list(ref.strides)
    shape = list(ref.shape)
    offset = ref.offset + start * strides[q]
    strides[q] *= step
    shape[q] = count
    return TensorRef(name, ref.region, offset, tuple(shape), ref.layout, ref.pitch, tuple(strides))


@dataclass(eq=False)
class AxisGather(Phased):
    """out[..., i, ...] = table[in[..., index[i], ...]] along H x W x C axis ``axis``: one LUT
    copy per arithmetic run of ``index`` (a channel shuffle of g groups: g runs), the identity
    when ``table`` is None."""

    name: str
    ifm: TensorRef
    ofm: TensorRef
    axis: int  # 0, 1, 2: H, W, C of the maps
    index: tuple[int, ...]
    table: np.ndarray | None = None  # int8 [256] requantize; None: the identity (a plain copy)
    tiling: Tiling | None = None
    kind: str = field(default="channel_shuffle", init=False)

    @property
    def macs(self) -> int:
        return 0

    @cached_property
    def phases(self) -> list[Lut]:
        out = []
        for r in axis_runs(self.index):
            name = f"{self.name}[{'hwc'[self.axis]} {r.out0}::{r.out_step}]"
            src = _axis_box(self.ifm, self.axis, r.in0, r.in_step, r.count, name)
            dst = _axis_box(self.ofm, self.axis, r.out0, r.out_step, r.count, name)
            out.append(copy_lut(name, src, dst, self.table))
        return out


# ---------------------------------------------------------------------------------------------
# Canonical form: the rank-5 reshape -> transpose -> reshape of a channel shuffle as one take


def _scalar_qparams(call) -> tuple[float, int] | None:
    """(scale, zero point) of a per-tensor quantize or dequantize; None for per-channel ones."""
    try:
        scale, zp = (constant_value(a) for a in call.args[1:3])
    except (TypeError, ValueError, AttributeError):
        return None
    return (float(scale.ravel()[0]), int(zp.ravel()[0])) if scale.size == zp.size == 1 else None


def _through_qdq(x, values, qparams) -> tuple:
    """(``x`` with the dequantize(quantize(.)) pairs before it stepped over, the bindings
    stepped over). A pair is stepped over only when both quantize as ``qparams``, the chain's
    input: the values it reads are on that grid already, so the pair changes nothing."""
    stepped = []
    while isinstance(x, relax.Var) and op_name(values.get(x)) == "relax.dequantize":
        dq = values[x]
        q = values.get(dq.args[0]) if isinstance(dq.args[0], relax.Var) else None
        if op_name(q) != "relax.quantize" or qparams is None:
            break
        if not _scalar_qparams(q) == _scalar_qparams(dq) == qparams:
            break
        stepped += [x, dq.args[0]]
        x = q.args[0]
    return x, stepped


# The shapes come from the model file: the index below is materialised (a few int64 arrays of the
# tensor's size), so a tensor beyond this is not canonicalised (its reshapes stay what they are).
MAX_INDEX_ELEMENTS = 1 << 21


def shuffle_index(in_shape, mid_shape, axes, out_shape) -> tuple[int, np.ndarray] | None:
    """(axis, index) when reshape(in_shape -> mid_shape), transpose(axes), reshape(out_shape) is
    ``take(x, index, axis)``: a permutation along one axis, the others untouched; else None."""
    if tuple(in_shape) != tuple(out_shape) or int(np.prod(in_shape, dtype=object)) > MAX_INDEX_ELEMENTS:
        return None
    flat = np.arange(int(np.prod(in_shape))).reshape(mid_shape).transpose(axes).reshape(out_shape)
    coords = np.unravel_index(flat, in_shape)
    grid = np.indices(in_shape)
    moved = [a for a in range(len(in_shape)) if not np.array_equal(coords[a], grid[a])]
    if len(moved) != 1:
        return None
    a = moved[0]
    index = np.moveaxis(coords[a], a, 0).reshape(in_shape[a], -1)
    if not np.all(index == index[:, :1]):  # the position read depends on the other axes
        return None
    return a, index[:, 0]


def _chain_input(x, values):
    """The rank-4 tensor a chain starts from, and the per-tensor quantization of its values
    (x's dequantize's; None for an int8 x, whose chain has no quantize pairs to step over)."""
    deq = values.get(x) if isinstance(x, relax.Var) else None
    return _scalar_qparams(deq) if op_name(deq) == "relax.dequantize" else None


def _shuffle_of(b, values) -> tuple | None:
    """(x, axis, index, the chain's bindings) when binding ``b`` closes a rank-5 reshape ->
    permute_dims -> reshape back to the input's shape that permutes one axis."""
    if op_name(b.value) != "relax.reshape" or len(shape_of(b.value.args[0]) or ()) != 5:
        return None
    # find the chain's input first: the pairs stepped over must quantize as it does
    for qparams in _candidate_qparams(b.value.args[0], values):
        t, after = _through_qdq(b.value.args[0], values, qparams)
        perm = values.get(t) if isinstance(t, relax.Var) else None
        if op_name(perm) != "relax.permute_dims" or perm.attrs.axes is None:
            continue
        r, before = _through_qdq(perm.args[0], values, qparams)
        fwd = values.get(r) if isinstance(r, relax.Var) else None
        if op_name(fwd) != "relax.reshape" or ((after or before) and _chain_input(fwd.args[0], values) != qparams):
            continue
        x = fwd.args[0]
        in_shape = shape_of(x)
        if in_shape is None or len(in_shape) > 4:
            return None
        found = shuffle_index(in_shape, shape_of(r), [int(a) for a in perm.attrs.axes], shape_of(b.value))
        if found is None:
            return None
        return x, found[0], found[1], [*after, t, *before, r]
    return None


def _candidate_qparams(x, values) -> list:
    """The quantizations a chain ending at ``x`` may be in: none (int8), or that of the
    dequantize that reads it (ONNX QDQ: every op between a dequantize and a quantize)."""
    deq = values.get(x) if isinstance(x, relax.Var) else None
    found = _scalar_qparams(deq) if op_name(deq) == "relax.dequantize" else None
    return [None] if found is None else [found, None]


def shuffle_to_take(mod: tvm.IRModule) -> tvm.IRModule:
    """Canonicalise: a channel shuffle's rank-5 reshape -> transpose -> reshape (through the
    quantize/dequantize pairs of the input's own quantization that ONNX QDQ writes around each
    op) as one ``take`` along the axis it permutes; the chain's bindings are recorded as
    absorbed into it for coverage."""
    main = mod["main"]
    values = {b.var: b.value for block in main.body.blocks for b in block.bindings}
    new, names = {}, {}
    for block in main.body.blocks:
        for b in block.bindings:
            found = _shuffle_of(b, values)
            if found is None:
                continue
            x, axis, index, chain = found
            new[b.value] = relax.op.take(x, relax.const(index.astype("int32")), axis)
            names.update({v.name: b.var.name for v in chain if isinstance(v, relax.Var)})
    if not new:
        return mod
    out = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    out["main"] = _ReplaceCalls(new, mod).visit_expr(main)
    return record_absorbed(relax.transform.DeadCodeElimination(["main"])(out), names)


# ---------------------------------------------------------------------------------------------
# Conventions and extraction


def _conventions() -> tuple[Convention, ...]:
    take = is_op("relax.take")
    return (
        Convention("qdq", "ONNX QDQ (channel shuffle: Reshape, Transpose, Reshape)", _quant(take(_deq(), is_const())),
                   "dequantize(x) → take(constant indices, axis) → quantize (another scale or zero point: a requantizing copy)"),
        Convention("int8", "TFLite (channel shuffle: RESHAPE, TRANSPOSE, RESHAPE)", take(wildcard(), is_const()),
                   "take(int8 x, constant indices, axis)"),
    )  # fmt: skip


def _extract(root, bindings) -> QAxisGather:
    e = resolve(root, bindings)
    if op_name(e) == "relax.quantize":
        take = resolve(e.args[0], bindings)
        deq = resolve(take.args[0], bindings)
        x = deq.args[0]
        inp, out, convention = _activation(deq, bindings, "input", x), _activation(e, bindings, "output", e), "qdq"
    else:
        take, x = e, e.args[0]
        convention = "constant" if _is_constant(x, bindings) else "int8"
        inp, out = _carried(x), _carried(root)
    index = _const(take.args[1], bindings, "take indices").astype(np.int64)
    rank = len(inp.shape)
    if index.ndim != 1:
        raise Reject(f"take with {index.ndim}-D indices: the NPU copies along one axis")
    axis = int(take.attrs.axis) % rank
    return QAxisGather(inp, out, axis, tuple(int(i) for i in index), convention, operands=(x,))


# ---------------------------------------------------------------------------------------------
# Checks


def axis_gather_copies(op, hw: HwConfig) -> str | None:
    """The take keeps the batch axis, and its indices are at most 16 arithmetic runs of a period up to 8 (a shuffle of up to 8 groups): one strided copy each."""
    if len(op.input.shape) >= 3 and op.axis == 0:
        return "take along the batch axis: the NPU copies within one image"
    if any(i < 0 or i >= op.input.shape[op.axis] for i in op.index):
        return f"take indices outside axis {op.axis} of {list(op.input.shape)}"
    runs = axis_runs(op.index)
    if runs is None or len(runs) > MAX_COPIES:
        return (f"take along axis {op.axis} is not at most {MAX_COPIES} arithmetic runs of period up to "
                f"{MAX_PERIOD}: the NPU copies strided boxes")  # fmt: skip
    return None


# ---------------------------------------------------------------------------------------------
# Lowering


def _lower(name: str, op: QAxisGather, ifms: list[TensorRef], ofm: TensorRef) -> AxisGather:
    q = hwc_axes(len(op.input.shape), op.layout).get(op.axis)
    if q is None:
        raise Reject(f"take along axis {op.axis}: not an axis of the maps the NPU sees")
    return AxisGather(name, ifms[0], ofm, q, op.index, requantize_table(name, op.input, op.output, op.numerics))


# ---------------------------------------------------------------------------------------------
# Golden semantics


def golden_axis_gather(op: AxisGather, x: np.ndarray) -> np.ndarray:
    """The definition, not the copies the NPU runs."""
    y = np.take(x, np.asarray(op.index), axis=op.axis)
    return y if op.table is None else op.table[y.astype(np.int64) + 128]


# ---------------------------------------------------------------------------------------------
# Registry


ENTRY = NpuPattern(
    name="npu.channel_shuffle",
    summary="channel shuffle (rank-5 reshape, transpose, reshape) and any take along one axis of periodic "
    "indices: one LUT copy (the identity, or a requantize) between strided boxes per arithmetic run",
    anchor_ops=("relax.take",),
    conventions=_conventions(),
    extract=_extract,
    checks=(*C.COMMON, axis_gather_copies),
    # a rank-1 take is TFLite's flat gather (npu.gather's, around its views)
    applies=lambda op: op.convention != "constant" and op.input.dtype in _INT_ACTIVATIONS and len(op.input.shape) > 1,
    moves_data=True,
)

ENTRIES = (ENTRY,)
LOWERINGS = {QAxisGather: _lower}
NPU_OPS = {AxisGather: NpuOpSpec(golden_axis_gather, "phased",
                                 describe=lambda op: f"channel shuffle {shape_text(op)} ({len(op.phases)} copies)",
                                 report_class=("gather", "gather (copies)"))}  # fmt: skip
# with an ONNX Split's slices (order 0, after them in the registry's order), before gathers compose (1)
CANONICAL_FORMS = (CanonicalForm(0, shuffle_to_take),)
