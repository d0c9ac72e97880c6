"""CONCATENATION along channels, rows or columns (of a map, or of a sequence): each input's producer writes its slice of the
output in place (codegen.lower), an input that cannot be is copied in by a LUT op: the
conventions, extraction into a :class:`QConcat` and its checks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from tvm.relax.dpl import DFPattern, is_op, is_tuple, wildcard

from . import checks as C
from ._qdq import _INT_ACTIVATIONS, _activation, _carried, _deq, _quant
from ..arch.config import HwConfig
from .entry import Convention, NpuPattern
from .lowering import InPlace
from .lut import _lower_lut
from .npu_ops import IDENTITY_TABLE, Lut, NpuOp, TensorRef
from .records import QConcat, QLut, Reject
from ..util.relax_utils import NotConstant, const_eval, op_name, resolve, shape_of


# ---------------------------------------------------------------------------------------------
# Conventions and extraction


MAX_CONCAT_INPUTS = 8  # the concatenations the table matches (one tuple pattern per count)


def _any_count(field: Callable[[], DFPattern]) -> DFPattern:
    """concat((f, f), axis) | concat((f, f, f), axis) | ... up to MAX_CONCAT_INPUTS fields."""
    alternatives = [is_op("relax.concat")(is_tuple([field() for _ in range(n)]))
                    for n in range(2, MAX_CONCAT_INPUTS + 1)]  # fmt: skip
    out = alternatives[0]
    for alt in alternatives[1:]:
        out = out | alt
    return out


def _concat_conventions() -> tuple[Convention, ...]:
    n = f"2..{MAX_CONCAT_INPUTS}"
    return (
        Convention("qdq", "TFLite CONCATENATION, ONNX QDQ Concat", _quant(_any_count(_deq)),
                   f"concat((dequantize(x1), …, dequantize(xn)), axis) → quantize, n = {n}"),
        Convention("int8", "hand-written Relax", _any_count(wildcard), f"concat((int8 x1, …, int8 xn), axis), n = {n}"),
        # any other concatenation: only to say why it is not matched (more inputs than the table takes)
        Convention("other", "TFLite, ONNX QDQ", _quant(is_op("relax.concat")(wildcard())),
                   f"concat of more than {MAX_CONCAT_INPUTS} dequantized inputs → quantize: stays on the CPU"),
    )


def _extract_concat(root, bindings) -> QConcat:
    e = resolve(root, bindings)
    quantize = e if op_name(e) == "relax.quantize" else None
    concat = resolve(e.args[0], bindings) if quantize is not None else e
    fields = list(resolve(concat.args[0], bindings).fields)
    if len(fields) > MAX_CONCAT_INPUTS:
        raise Reject(f"CONCATENATION of {len(fields)} inputs: the NPU pattern table matches up to {MAX_CONCAT_INPUTS}")
    rank = len(shape_of(concat))
    axis = int(concat.attrs.axis) % rank
    if quantize is None:  # the integer form: quantization carried through
        xs = fields
        return QConcat(tuple(_carried(x) for x in xs), _carried(root), axis, "int8", operands=tuple(xs))
    deqs = [resolve(f, bindings) for f in fields]
    if any(op_name(d) != "relax.dequantize" for d in deqs):
        return QConcat((), _carried(root), axis, "other")  # matched by the catch-all: not ours
    xs = [d.args[0] for d in deqs]
    inputs = tuple(_activation(d, bindings, f"input {k}", x) for k, (d, x) in enumerate(zip(deqs, xs)))
    values = tuple(_constant_value(x, bindings) for x in xs)  # a class token: copied in from CONST
    constants = values if any(v is not None for v in values) else ()
    operands = tuple(x for x, v in zip(xs, values) if v is None)
    return QConcat(inputs, _activation(quantize, bindings, "output", quantize), axis, "qdq", constants=constants,
                   operands=operands)  # fmt: skip


def _constant_value(x, bindings) -> np.ndarray | None:
    try:
        value = np.asarray(const_eval(x, bindings))
    except NotConstant:
        return None
    return value if value.dtype == np.int8 else None


# ---------------------------------------------------------------------------------------------
# Checks


def concat_axis(op, hw: HwConfig) -> str | None:
    """A concatenation joins channels, rows or columns of 4-D tensors (each input's producer writes its slice of the output in place), the length or the channels of 3-D sequences (a transformer's class token), or the features (axis 1) of 2-D ones."""
    rank = len(op.output.shape)
    if (rank == 4 and op.axis in (1, 2, 3)) or (rank == 3 and op.axis in (1, 2)) or (rank == 2 and op.axis == 1):
        return None
    return (f"CONCATENATION along axis {op.axis} of a {rank}-D tensor: the NPU concatenates the H, W or C axis "
            "of a 4-D tensor, the length or channels of a 3-D one or the features of a 2-D one")


def concat_same_quantization(op, hw: HwConfig) -> str | None:
    """In a TFLite model every input of a concatenation has the output's scale and zero point (LiteRT's int8 CONCATENATION copies bytes, it does not rescale; the converter inserts a QUANTIZE where they differ). ONNX's Concat / QLinearConcat rescale each input; the NPU does that with a requantize LUT as it copies the input into its slice."""
    if op.numerics != "tflite":
        return None
    for k, t in enumerate(op.inputs):
        if not C.same_quantization(t, op.output):
            return (f"CONCATENATION input {k} (scale {t.scale:.6g} zp {t.zero_point}) is quantized unlike its output "
                    f"(scale {op.output.scale:.6g} zp {op.output.zero_point}): LiteRT's int8 concatenation copies "
                    "bytes without rescaling, TVM's import rescales; no single answer to match")
    return None


# ---------------------------------------------------------------------------------------------
# Table entry


ENTRY = NpuPattern(
    name="npu.concat",
    summary="concatenation along channels, rows or columns: each input's producer writes its slice of the "
            "output in place; an input that cannot be (a partition input, one to rescale) is copied in by a LUT op",
    anchor_ops=("relax.concat",),
    conventions=_concat_conventions(),
    extract=_extract_concat,
    checks=(*C.COMMON, concat_axis, concat_same_quantization),
    applies=lambda op: op.convention != "other" and all(t.dtype in _INT_ACTIVATIONS for t in op.inputs),
    view=True,
)


ENTRIES = (ENTRY,)
LOWERINGS: dict = {}  # each input written in place: IN_PLACE below
NPU_OPS: dict = {}  # no typed op of its own


# ---------------------------------------------------------------------------------------------
# Lowering: each input written in place (registry.IN_PLACE), the others copied in


@dataclass(frozen=True)
class Slice:
    """A concatenation input's place in the output: from ``start`` along ``dim`` (H, W or C)."""

    dim: str
    start: int

    def of(self, ref: TensorRef, shape: tuple[int, int, int], name: str) -> TensorRef:
        """The slice of ``ref`` an input of H x W x C ``shape`` fills, in place."""
        if self.dim == "C":
            return ref.channel_slice(self.start, shape[2], name)
        h0, w0 = (self.start, 0) if self.dim == "H" else (0, self.start)
        return ref.box(h0, w0, shape, name=name)


def place_inputs(op: QConcat, srcs: list, placeable: Callable, model_layout: str) -> tuple[dict, list]:
    """Each input's slice of the output: written in place by its producer when the partition
    allows it (``placeable``), it appears once and is quantized as the output; else copied
    (rescaled) into its slice by a LUT op (:func:`copy_in`)."""
    rank = len(op.output.shape)
    # the H, W or C axis of the map the NPU sees that the model's axis is (limits.hwc)
    axes = {4: ("NHWC", "NCHW"), 3: ("NWC", "NCW"), 2: ("WC", "WC")}[rank]
    dim = axes[model_layout != "NHWC"][op.axis]
    if rank == 2 and op.axis != 1:
        raise Reject(f"CONCATENATION along axis {op.axis} of a 2-D tensor: the NPU concatenates features (axis 1)")
    c0, slots, copies = 0, {}, []
    for k, (src, t) in enumerate(zip(sources(op, srcs), op.inputs)):
        if src is not None and placeable(src) and src not in slots and C.same_quantization(t, op.output):
            slots[src] = Slice(dim, c0)
        else:
            copies.append((k, Slice(dim, c0)))
        c0 += t.shape[op.axis]
    return slots, copies


def sources(op: QConcat, srcs: list) -> list:
    """The operand feeding each input of ``op``, None for a model constant (not an operand)."""
    operands = iter(srcs)
    return [None if op.constants and op.constants[k] is not None else next(operands) for k in range(len(op.inputs))]


def copy_in(layer: str, k: int, op: QConcat, ifm: TensorRef, ofm: TensorRef) -> NpuOp:
    """Concatenation input ``k`` copied into its slice ``ofm``: the int8 -> int8 requantize
    from the input's quantization to the output's (the identity when they agree), as a LUT."""
    t, name = op.inputs[k], f"{layer} [input {k}]"
    if C.same_quantization(t, op.output):  # also the int8 form's (carried) ones
        return Lut(name=name, function="requantize", ifm=ifm, ofm=ofm, table=IDENTITY_TABLE)
    rescale = QLut("requantize", t, op.output, -128, 127, params=(("activation", ""),), numerics=op.numerics)
    return _lower_lut(name, rescale, [ifm], ofm)


IN_PLACE = {QConcat: InPlace(place_inputs, copy_in, sources)}
