"""MUL: elementwise multiply of two int8 tensors (TFLite's int8 mul), either may be broadcast
(ops.lowering.binary_operands) or a model constant: the convention, extraction into a :class:`QMul` (the extraction it
shares with ADD is :func:`npu_byoc.ops._qdq._extract_binary`), and lowering to :class:`Mul`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from tvm.relax.dpl import is_op

from . import checks as C
from ._qdq import _deq, _extract_binary, _qdq_unary
from ..arch import numerics as nx
from .broadcast import ChannelReplicated, replicated, replicated_spec, vector_second
from .entry import NpuPattern
from .lowering import binary_operands
from .npu_ops import Mul, NpuOp, TensorRef
from .npu_op_spec import NpuOpSpec
from .records import QMul, Reject


_extract_mul = _extract_binary("mul", "multiplies", QMul)


# ---------------------------------------------------------------------------------------------
# Lowering


def _lower_mul(name: str, op: QMul, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    a, b, ifm, ifm2, broadcast = binary_operands("mul", op, ifms, ofm)
    a, b, ifm, ifm2 = vector_second(a, b, ifm, ifm2)
    try:
        multiplier, shift = nx.mul_params(a.scale, b.scale, op.output.scale)
    except ValueError as err:
        raise Reject(f"mul rescale out of range: {err}") from None
    mul = Mul(name=name, ifm=ifm, ifm2=ifm2, ofm=ofm, ifm_zero_point=a.zero_point, ifm2_zero_point=b.zero_point,
              ofm_zero_point=op.output.zero_point, multiplier=multiplier, shift=shift, act_min=op.act_min,
              act_max=op.act_max, broadcast=broadcast)  # fmt: skip
    return replicated(mul, ReplicatedMul)


@dataclass(eq=False)
class ReplicatedMul(ChannelReplicated):
    """MUL by an operand broadcast over the channels (a pixel vector, a scalar): per tile the
    vector replicated over them by the MAC array, then MUL (npu_byoc.ops.broadcast)."""

    kind: str = field(default="mul", init=False)


# ---------------------------------------------------------------------------------------------
# Table entry


ENTRY = NpuPattern(
    name="npu.mul",
    summary="elementwise multiply of two int8 tensors, either may be broadcast (a channel or pixel vector, a row, a scalar) or a model constant (TFLite int8 mul)",
    anchor_ops=("relax.multiply",),
    conventions=tuple(
        _qdq_unary(lambda x: is_op("relax.multiply")(x, _deq()), "dequantize(a), dequantize(b) → multiply")
    ),
    extract=_extract_mul,
    checks=(*C.COMMON, C.binary_broadcast),
)


ENTRIES = (ENTRY,)
LOWERINGS = {QMul: _lower_mul}


# ---------------------------------------------------------------------------------------------
# Golden semantics (the typed op's spec: npu_byoc.ops.npu_op_spec)


def golden_mul(op: Mul, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # a broadcast ifm2 is (1, 1, C): numpy broadcasting repeats it over H and W (any other
    # broadcast operand is already the output's shape: a stride-0 view)
    return nx.mul(x, y, op.ifm_zero_point, op.ifm2_zero_point, op.ofm_zero_point, op.multiplier, op.shift,
                  op.act_min, op.act_max)


NPU_OPS = {
    Mul: NpuOpSpec(golden_mul, "elementwise"),
    ReplicatedMul: replicated_spec(golden_mul, "mul", ("mul", "mul")),
}
