"""SQUARED_DIFFERENCE: (a − b)² of two int8 tensors as LiteRT's int8 kernel computes it
(``squared_difference.cc``: both inputs rescaled as ADD's with a left shift of 7, subtracted,
the unrounded difference squared, rescaled to the output), LayerNorm's variance. TVM's TFLite
frontend writes it in float as ``dequantize(a), dequantize(b) → subtract → multiply(d, d) →
quantize``; SUB then MUL on the NPU would round twice and not be LiteRT's result, so it is one
op on its own opcode (SQDIFF, ADD's datapath). The second operand is usually broadcast (the
per-token or per-pixel mean, (1, T, 1) or (1, H, W, 1)): a channel vector takes the unit's
IFM2_BROADCAST, a vector repeated over the channels (a pixel or token vector) is replicated
over them by the MAC array (ops.broadcast), any other broadcast a stride-0 DMA view
(ops.lowering.binary_operands)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from tvm.relax.dpl import is_op

from . import checks as C
from ._qdq import _deq, _extract_binary, _qdq_unary
from ..arch import numerics as nx
from ..arch import numerics_sqdiff as sqd
from ..arch.config import HwConfig
from ..util.relax_utils import resolve
from .broadcast import ChannelReplicated, replicated, replicated_spec, vector_second
from .entry import NpuPattern
from .lowering import binary_operands
from .npu_ops import NpuOp, TensorRef, Tiling, _Binary
from .npu_op_spec import NpuOpSpec
from .records import QOp, Reject, _QBinary


@dataclass(frozen=True, eq=False)
class QSquaredDifference(_QBinary):
    """LiteRT int8 SQUARED_DIFFERENCE."""


@dataclass(eq=False)
class SquaredDifference(_Binary):
    """LiteRT int8 SQUARED_DIFFERENCE: both inputs shifted left by left_shift (7) and rescaled
    to a common scale as ADD's, subtracted, the difference squared, rescaled to the output,
    plus ofm_zero_point, clamped (the SQDIFF opcode)."""

    name: str
    ifm: TensorRef
    ifm2: TensorRef
    ofm: TensorRef
    ifm_zero_point: int
    ifm2_zero_point: int
    ofm_zero_point: int
    left_shift: int
    ifm_multiplier: int
    ifm_shift: int
    ifm2_multiplier: int
    ifm2_shift: int
    ofm_multiplier: int
    ofm_shift: int
    act_min: int
    act_max: int
    tiling: Tiling | None = None
    broadcast: bool = False  # ifm2 is one (1, 1, C) channel vector, repeated over H and W
    kind: str = field(default="squared_difference", init=False)


# ---------------------------------------------------------------------------------------------
# Convention and extraction


def _square(body, bindings):
    """The subtract's operands under ``multiply(d, d)``: a multiply of two different values is
    not a square."""
    d, e = body.args
    if not resolve(d, bindings).same_as(resolve(e, bindings)):
        raise Reject("multiply of two different values: not a squared difference")
    return resolve(d, bindings).args


_extract = _extract_binary("squared difference", "subtracts", QSquaredDifference, operands=_square)


def _square_of_difference(x):
    d = is_op("relax.subtract")(x, _deq())
    return is_op("relax.multiply")(d, d)


def operands_broadcast(op: QOp, hw: HwConfig) -> str | None:
    """The operands broadcast to the output's shape as numpy does: the same shape, a channel
    vector (the unit's IFM2_BROADCAST), or any other broadcast (the per-token or per-pixel mean
    of a LayerNorm, a row, a scalar) that the DMA repeats with a stride of 0."""
    return C.broadcast_reason(op, "squared difference")


# ---------------------------------------------------------------------------------------------
# Lowering


def _lower(name: str, op: QSquaredDifference, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    # (a − b)² = (b − a)² exactly: swapping the operands swaps their multipliers and negates d
    a, b, ifm, ifm2, broadcast = binary_operands("squared difference", op, ifms, ofm)
    a, b, ifm, ifm2 = vector_second(a, b, ifm, ifm2)
    try:
        p = sqd.squared_difference_params(a.scale, b.scale, op.output.scale)
    except ValueError as err:
        raise Reject(f"squared difference rescaling out of range: {err}") from None
    return replicated(SquaredDifference(
        name=name, ifm=ifm, ifm2=ifm2, broadcast=broadcast, ofm=ofm, ifm_zero_point=a.zero_point,
        ifm2_zero_point=b.zero_point, ofm_zero_point=op.output.zero_point, left_shift=p.left_shift,
        ifm_multiplier=p.input1_multiplier, ifm_shift=p.input1_shift, ifm2_multiplier=p.input2_multiplier,
        ifm2_shift=p.input2_shift, ofm_multiplier=p.output_multiplier, ofm_shift=p.output_shift,
        act_min=op.act_min, act_max=op.act_max,
    ), ReplicatedSquaredDifference)  # fmt: skip


@dataclass(eq=False)
class ReplicatedSquaredDifference(ChannelReplicated):
    """SQUARED_DIFFERENCE from a vector broadcast over the channels (LayerNorm's per-pixel or
    per-token mean): per tile the vector replicated over them by the MAC array, then SQDIFF."""

    kind: str = field(default="squared_difference", init=False)


# ---------------------------------------------------------------------------------------------
# Table entry


ENTRY = NpuPattern(
    name="npu.squared_difference",
    summary="(a − b)² of two int8 tensors with LiteRT's int8 rescaling (left shift 7, the unrounded difference "
    "squared), either may be broadcast (LayerNorm's per-token or per-pixel mean)",
    anchor_ops=(),  # generic ops (subtract, multiply): "no pattern" reasons name other entries
    conventions=tuple(
        _qdq_unary(_square_of_difference, "dequantize(a), dequantize(b) → subtract → multiply(d, d)")
    ),
    extract=_extract,
    checks=(*C.COMMON, operands_broadcast),
)


ENTRIES = (ENTRY,)
LOWERINGS = {QSquaredDifference: _lower}


# ---------------------------------------------------------------------------------------------
# Golden semantics (the typed op's spec: npu_byoc.ops.npu_op_spec)


def golden_squared_difference(op: SquaredDifference, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # a broadcast ifm2 is (1, 1, C): numpy broadcasting repeats it over H and W
    params = nx.AddParams(op.left_shift, op.ifm_multiplier, op.ifm_shift, op.ifm2_multiplier, op.ifm2_shift,
                          op.ofm_multiplier, op.ofm_shift)  # fmt: skip
    return sqd.squared_difference(x, y, op.ifm_zero_point, op.ifm2_zero_point, op.ofm_zero_point, params,
                                  op.act_min, op.act_max)  # fmt: skip


NPU_OPS = {
    SquaredDifference: NpuOpSpec(golden_squared_difference, "elementwise",
                                 report_class=("squared_difference", "squared difference")),
    ReplicatedSquaredDifference: replicated_spec(golden_squared_difference, "squared difference",
                                                 ("squared_difference", "squared difference")),
}  # fmt: skip
