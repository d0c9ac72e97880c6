"""GATHER: nearest-neighbour resize, strided slice, split, tile of int8 pixels run as strided
copies (TFLite's data movement, ONNX's Resize nearest / Slice / Split): the conventions,
extraction into a :class:`QGather`, its check and lowering to :class:`Gather`. The copies
themselves (which index maps are whole-pixel strided boxes) are
:mod:`npu_byoc.ops.gather_copies`, below the typed NPU ops that compute them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from tvm.relax.dpl import DFPattern, is_const, is_op, wildcard

from . import checks as C
from ._qdq import _INT_ACTIVATIONS, _activation, _carried, _const, _deq, _is_constant, _quant
from ..arch.config import HwConfig
from .canonical import CanonicalForm
from .entry import Convention, NpuPattern
from .gather_canonical import compose_gathers, split_to_slices
from .gather_copies import decompose, resize_index, slice_index
from .npu_ops import Gather, NpuOp, TensorRef
from .npu_op_spec import NpuOpSpec, shape_text
from .lut import requantize_table
from .records import QGather, Reject
from ..util.relax_utils import op_name, prim_value, resolve, shape_of


# ---------------------------------------------------------------------------------------------
# Conventions and extraction


def _moves(x: DFPattern) -> DFPattern:
    """TVM's own imports of data movement: a resize (nearest copies pixels) or a strided slice
    (ONNX Resize, Slice, and Split after split_to_slices)."""
    return (is_op("relax.image.resize2d")(x, wildcard())
            | is_op("relax.strided_slice")(x, wildcard(), wildcard(), wildcard(), wildcard()))  # fmt: skip


def _gather_conventions() -> tuple[Convention, ...]:
    core = is_op("relax.reshape")(is_op("relax.take")(is_op("relax.reshape")(wildcard(), wildcard()), is_const()), wildcard())
    moves = "image.resize2d(nearest) | strided_slice"
    return (Convention("int8", "TFLite (RESIZE_NEAREST_NEIGHBOR, STRIDED_SLICE, SPLIT, TILE, GATHER)", core,
                       "reshape(take(reshape(int8 x, [N]), constant indices), shape)"),
            Convention("qdq", "ONNX QDQ (Resize nearest, Slice, Split)", _quant(_moves(_deq())),
                       f"dequantize(x) → {moves} → quantize (another scale or zero point: a requantizing copy)"),
            Convention("int8-op", "TVM's import of int8 data movement", _moves(wildcard()), f"{moves}(int8 x)"))


def _move_index(call, bindings) -> tuple[np.ndarray, str | None] | None:
    """(the flat input element each output element copies, its layout if the op says) of a
    resize2d or strided_slice; None for a resize that interpolates (not this entry's)."""
    in_shape, out_shape = shape_of(call.args[0]), shape_of(call)
    if op_name(call) == "relax.image.resize2d":
        a = call.attrs
        if str(a.method) != "nearest_neighbor":
            return None
        layout = str(a.layout)
        if layout not in ("NCHW", "NHWC") or len(in_shape) != 4:
            raise Reject(f"resize2d layout {layout}: the NPU copies NHWC or NCHW feature maps")
        try:
            return resize_index(in_shape, out_shape, layout, str(a.coordinate_transformation_mode),
                                       str(a.rounding_method)), layout  # fmt: skip
        except ValueError as err:
            raise Reject(str(err)) from None
    axes, begin, end, strides = ([int(prim_value(f)) for f in t.fields] for t in call.args[1:5])
    try:
        index = slice_index(in_shape, axes, begin, end, strides)
    except (ValueError, IndexError) as err:
        raise Reject(f"strided_slice axes {axes}: {err}") from None
    if tuple(index.shape) != tuple(out_shape):
        raise Reject(f"strided_slice of {list(in_shape)} gives {list(index.shape)}, its output says {list(out_shape)}")
    return index, None


def _extract_gather(root, bindings) -> QGather:
    e = resolve(root, bindings)
    if op_name(e) == "relax.reshape":  # TFLite: reshape(take(reshape(x, [N]), indices), shape)
        take = resolve(e.args[0], bindings)
        x = resolve(take.args[0], bindings).args[0]
        flat = _const(take.args[1], bindings, "gather indices").astype(np.int64).ravel()
        out_shape = shape_of(e)
        if flat.size != int(np.prod(out_shape)):
            raise Reject("gather indices do not fill the output")
        convention = "constant" if _is_constant(x, bindings) else "int8"
        return QGather(_carried(x), _carried(root), flat.reshape(out_shape), convention, "NHWC", operands=(x,))
    qdq = op_name(e) == "relax.quantize"  # ONNX QDQ: dequantize -> move -> quantize
    move = resolve(e.args[0], bindings) if qdq else e
    deq = resolve(move.args[0], bindings) if qdq else None
    x = deq.args[0] if qdq else move.args[0]
    found = _move_index(move, bindings)
    if found is None:  # an interpolating resize: npu.resize_bilinear's
        return QGather(_carried(x), _carried(root), np.zeros(0, np.int64), "other", operands=(x,))
    index, layout = found
    if not qdq:
        return QGather(_carried(x), _carried(root), index, "int8", layout, operands=(x,))
    inp, out = _activation(deq, bindings, "input", x), _activation(e, bindings, "output", e)
    return QGather(inp, out, index, "qdq", layout, operands=(x,))  # quantized unlike x: a requantizing copy


# ---------------------------------------------------------------------------------------------
# Checks


def gather_copies(op, hw: HwConfig) -> str | None:
    """The gather copies whole pixels of a tensor of batch 1 as the NPU stores it (rows, columns and a run of channels of a 4-D map; pixels of a [1, L, C] sequence; a run of a vector's features), and each axis is at most MAX_PERIOD arithmetic runs, at most MAX_COPIES strided copies in all (npu_byoc.ops.gather)."""
    # A strided slice does not say its layout: the partition's decides at lowering, so either will do here
    layouts = (op.layout,) if op.layout else ("NHWC", "NCHW")
    reasons = [C.geometry_reason(lambda lay=lay: decompose(op.index, op.input.shape, lay)) for lay in layouts]
    return None if None in reasons else reasons[0]


# ---------------------------------------------------------------------------------------------
# Lowering


def _lower_gather(name: str, op: QGather, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    # no layout yet (the dry run, alone): one the copies exist in (a partition's lowering fills in its own)
    layout = op.layout or ("NCHW" if gather_copies(replace(op, layout="NHWC"), None) else "NHWC")
    try:
        g = decompose(op.index, op.input.shape, layout)
    except ValueError as err:
        raise Reject(str(err)) from None
    table = requantize_table(name, op.input, op.output, op.numerics)
    return Gather(name=name, ifm=ifms[0], ofm=ofm, rows=g.rows, cols=g.cols, c0=g.c0, table=table)



# ---------------------------------------------------------------------------------------------
# Table entry


ENTRY = NpuPattern(
    name="npu.gather",
    summary="nearest-neighbour resize, strided slice, split, tile of int8 pixels: strided copies (LUT passes: the identity, or a requantize when the output is quantized unlike the input)",
    anchor_ops=("relax.take",),
    conventions=_gather_conventions(),
    extract=_extract_gather,
    checks=(*C.COMMON, gather_copies),
    applies=lambda op: op.convention not in ("constant", "other") and op.input.dtype in _INT_ACTIVATIONS,
    moves_data=True,
)


ENTRIES = (ENTRY,)
LOWERINGS = {QGather: _lower_gather}


# ---------------------------------------------------------------------------------------------
# Golden semantics, tiling (the typed op's spec: npu_byoc.ops.npu_op_spec)


def golden_gather(op: Gather, x: np.ndarray) -> np.ndarray:
    """Pixels by their row and column maps (each through the requantize table, if any): the
    definition, not the copies the NPU runs."""
    c = op.ofm.shape[2]
    y = x[np.asarray(op.rows)][:, np.asarray(op.cols)][:, :, op.c0 : op.c0 + c]
    return y if op.table is None else op.table[y.astype(np.int64) + 128]


NPU_OPS = {Gather: NpuOpSpec(golden_gather, "phased",
                             describe=lambda op: f"gather {shape_text(op)} ({len(op.phases)} copies)")}  # fmt: skip
# an ONNX Split becomes slices (this op's), then chains of data movement compose
CANONICAL_FORMS = (CanonicalForm(0, split_to_slices), CanonicalForm(1, compose_gathers))
