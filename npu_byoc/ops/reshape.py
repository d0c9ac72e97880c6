"""RESHAPE / SQUEEZE / FLATTEN between NPU ops: a view of the same bytes inside the partition,
no NPU op of its own (its VIEWS hook makes its output a view of its input): the
conventions, extraction into a :class:`QReshape` and its check."""

from __future__ import annotations

import numpy as np
from tvm.relax.dpl import DFPattern, is_op, wildcard

from . import checks as C
from ._qdq import _INT_ACTIVATIONS, _activation, _carried, _deq, _is_constant, _quant
from ..arch.config import HwConfig
from .entry import Convention, NpuPattern
from .lowering import view
from .npu_ops import TensorRef
from .records import QReshape, Reject
from ..util.relax_utils import op_name, resolve


# ---------------------------------------------------------------------------------------------
# Conventions and extraction


_RESHAPE_OPS = ("relax.reshape", "relax.squeeze", "relax.expand_dims")


def _reshape_core(x: DFPattern) -> DFPattern:
    return is_op("relax.reshape")(x, wildcard()) | is_op("relax.squeeze")(x) | is_op("relax.expand_dims")(x)


def _reshape_conventions() -> tuple[Convention, ...]:
    form = "reshape | squeeze | expand_dims"
    return (
        Convention("qdq", "ONNX QDQ (Flatten, Reshape, Squeeze)", _quant(_reshape_core(_deq())),
                   f"dequantize(x) → {form} → quantize (same scale and zero point)"),
        Convention("int8", "TFLite (RESHAPE, SQUEEZE)", _reshape_core(wildcard()), f"{form}(int8 x)"),
    )


def _extract_reshape(root, bindings) -> QReshape:
    e = resolve(root, bindings)
    if op_name(e) == "relax.quantize":
        deq = resolve(resolve(e.args[0], bindings).args[0], bindings)
        x = deq.args[0]
        return QReshape(_activation(deq, bindings, "input", x), _activation(e, bindings, "output", e), "qdq",
                        operands=(x,))
    x = e.args[0]
    # a constant's reshape (weights in the integer forms) is folded, not offloaded: not ours
    convention = "constant" if _is_constant(x, bindings) else "int8"
    return QReshape(_carried(x), _carried(root), convention, operands=(x,))


# ---------------------------------------------------------------------------------------------
# Checks


def reshape_same_quantization(op, hw: HwConfig) -> str | None:
    """A reshape keeps the quantization (input and output share scale and zero point): it only renames the bytes."""
    if not C.same_quantization(op.input, op.output):
        return (f"reshape rescales (input scale {op.input.scale:.6g} zp {op.input.zero_point}, output scale "
                f"{op.output.scale:.6g} zp {op.output.zero_point}): an NPU reshape is a view of the same bytes")
    return None


# ---------------------------------------------------------------------------------------------
# Table entry


ENTRY = NpuPattern(
    name="npu.reshape",
    summary="reshape / squeeze / flatten between NPU ops: a view of the same bytes inside the partition (no NPU work)",
    anchor_ops=_RESHAPE_OPS,
    conventions=_reshape_conventions(),
    extract=_extract_reshape,
    checks=(*C.COMMON, reshape_same_quantization),
    applies=lambda op: op.convention != "constant" and op.input.dtype in _INT_ACTIVATIONS,
    view=True,
    moves_data=True,
)


ENTRIES = (ENTRY,)
LOWERINGS: dict = {}  # a view: VIEWS below
NPU_OPS: dict = {}  # no typed op of its own


# ---------------------------------------------------------------------------------------------
# Lowering: a view, no NPU op (registry.VIEWS)


def order_free(shape) -> bool:
    """An NCHW tensor whose bytes read the same stored NHWC: one channel, or one pixel. A rank-3
    sequence counts: an NCHW partition stores [N, C, L] as L pixels of C channels, so a
    transformer's [1, T, C] is held transposed (its Tensordot reshape to [T, C] is no view)."""
    return len(shape) < 3 or shape[1] == 1 or int(np.prod(shape[2:])) == 1


def view_reshape(op: QReshape, ifms: list[TensorRef], shape: tuple[int, int, int], model_layout: str) -> TensorRef:
    """A reshape is its input's bytes seen with the output's shape: no op, no copy. The
    partition's feature maps are stored NHWC, so an NCHW model's reshape must not move a
    channel past a pixel (flatten of [1, C, 1, 1] is a view, flatten of [1, C, H, W] is not)."""
    if model_layout == "NCHW" and not (order_free(op.input.shape) and order_free(op.output.shape)):
        raise Reject(f"reshape {op.input.shape} -> {op.output.shape} of an NCHW model reorders the bytes the NPU "
                     "stores NHWC")  # fmt: skip
    return view(ifms[0], shape)


# Records that lower to no NPU op: their output is a view of an input (a TensorRef).
VIEWS = {QReshape: view_reshape}
