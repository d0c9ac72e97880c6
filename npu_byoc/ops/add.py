"""ADD and SUB: elementwise add / subtract of two int8 tensors with rescaling (TFLite's int8 add
and sub), either may be broadcast (ops.lowering.binary_operands) or a model constant: the
conventions, extraction into a :class:`QAdd` / :class:`QSub` (the extraction they share with MUL
is :func:`npu_byoc.ops._qdq._extract_binary`), and lowering to :class:`Add`.

SUB is the ADD unit with the subtrahend's multiplier negated, as LiteRT's ``sub.cc`` does it
(``input2_multiplier *= op_sign`` in Prepare, then the int8 add kernels): the same parameters,
the same rounding, no unit of its own. The multiplier registers are signed on every spec."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tvm.relax.dpl import is_const, is_op

from . import checks as C
from ._qdq import _deq, _extract_binary, _qdq_unary, _requant_tail
from ..arch import numerics as nx
from .broadcast import ChannelReplicated, replicated, replicated_spec, vector_second
from .entry import Convention, NpuPattern
from .lowering import binary_operands
from .npu_ops import Add, NpuOp, TensorRef
from .npu_op_spec import NpuOpSpec
from .records import QAdd, QSub, Reject


_extract_add = _extract_binary("add", "adds", QAdd, float_constant=True)
_extract_sub = _extract_binary("sub", "subtracts", QSub, commutes=False, float_constant=True)


# ---------------------------------------------------------------------------------------------
# Lowering


def _lower_add(name: str, op: QAdd, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    return _lowered("add", name, op, ifms, ofm)


def _lower_sub(name: str, op: QSub, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    return _lowered("sub", name, op, ifms, ofm, op.input_a if op.reverse else op.input_b)


def _lowered(word: str, name: str, op: QAdd | QSub, ifms: list[TensorRef], ofm: TensorRef,
             subtrahend=None) -> NpuOp:
    """The ADD unit's op for ``op``; the operand ``subtrahend`` (a SUB's) enters negated: its
    multiplier's sign flipped wherever the operands end up (the sum commutes exactly)."""
    a, b, ifm, ifm2, broadcast = binary_operands(word, op, ifms, ofm)
    a, b, ifm, ifm2 = vector_second(a, b, ifm, ifm2)
    try:
        p = nx.add_params(a.scale, b.scale, op.output.scale)
    except ValueError as err:
        raise Reject(f"{word} rescaling out of range: {err}") from None
    negate_a = subtrahend is not None and a is subtrahend and b is not subtrahend  # swapped to the first place
    negate_b = subtrahend is not None and not negate_a
    return replicated(Add(
        name=name,
        ifm=ifm,
        ifm2=ifm2,
        broadcast=broadcast,
        ofm=ofm,
        ifm_zero_point=a.zero_point,
        ifm2_zero_point=b.zero_point,
        ofm_zero_point=op.output.zero_point,
        left_shift=p.left_shift,
        ifm_multiplier=-p.input1_multiplier if negate_a else p.input1_multiplier,
        ifm_shift=p.input1_shift,
        ifm2_multiplier=-p.input2_multiplier if negate_b else p.input2_multiplier,
        ifm2_shift=p.input2_shift,
        ofm_multiplier=p.output_multiplier,
        ofm_shift=p.output_shift,
        act_min=op.act_min,
        act_max=op.act_max,
    ), ReplicatedAdd)


@dataclass(eq=False)
class ReplicatedAdd(ChannelReplicated):
    """ADD of an operand broadcast over the channels (a pixel vector, a scalar): per tile the
    vector replicated over them by the MAC array, then ADD (npu_byoc.ops.broadcast)."""

    kind: str = field(default="add", init=False)


# ---------------------------------------------------------------------------------------------
# Table entries


def _float_constant_forms(op: str, word: str) -> list[Convention]:
    """A float constant on either side (onnxruntime's QDQ quantizer leaves Sub's initializer
    float): quantized to int8 at extraction (npu_byoc.ops._qdq._quantized_constant)."""
    cores = (("qdq-float", lambda x: is_op(op)(x, is_const()), f"dequantize(a), float constant → {word}"),
             ("qdq-float-first", lambda x: is_op(op)(is_const(), x), f"float constant, dequantize(b) → {word}"))
    return [Convention(f"{name}{tail}", "ONNX QDQ (onnxruntime leaves the initializer float)", pat, form + tail_form)
            for name, core, form in cores for tail, pat, tail_form in _requant_tail(core(_deq()))]  # fmt: skip


ENTRY = NpuPattern(
    name="npu.add",
    summary="elementwise add of two int8 tensors with rescaling, either may be broadcast (a channel or pixel vector, a row, a scalar) or a model constant (TFLite int8 add)",
    anchor_ops=("relax.add",),
    conventions=(
        *_qdq_unary(lambda x: is_op("relax.add")(x, _deq()), "dequantize(a), dequantize(b) → add"),
        *_float_constant_forms("relax.add", "add"),
    ),
    extract=_extract_add,
    checks=(*C.COMMON, C.binary_broadcast),
)


SUB_ENTRY = NpuPattern(
    name="npu.sub",
    summary="elementwise subtract of two int8 tensors with rescaling, either may be broadcast (a channel or pixel vector, a row) or a model constant (a Normalization layer's mean): the ADD unit with the subtrahend negated (TFLite int8 sub)",
    anchor_ops=("relax.subtract",),
    conventions=(
        *_qdq_unary(lambda x: is_op("relax.subtract")(x, _deq()), "dequantize(a), dequantize(b) → subtract"),
        *_float_constant_forms("relax.subtract", "subtract"),
    ),
    extract=_extract_sub,
    checks=(*C.COMMON, C.binary_broadcast),
)


ENTRIES = (ENTRY, SUB_ENTRY)
LOWERINGS = {QAdd: _lower_add, QSub: _lower_sub}


# ---------------------------------------------------------------------------------------------
# Golden semantics (the typed op's spec: npu_byoc.ops.npu_op_spec)


def golden_add(op: Add, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    params = nx.AddParams(op.left_shift, op.ifm_multiplier, op.ifm_shift, op.ifm2_multiplier, op.ifm2_shift,
                          op.ofm_multiplier, op.ofm_shift)  # fmt: skip
    return nx.add(x, y, op.ifm_zero_point, op.ifm2_zero_point, op.ofm_zero_point, params, op.act_min, op.act_max)


NPU_OPS = {
    Add: NpuOpSpec(golden_add, "elementwise"),
    ReplicatedAdd: replicated_spec(golden_add, "add", ("add", "add")),
}
