"""What the NPU supports: one small function per constraint. The constraints several ops share
live here (activations, scales, ranks, weights, requantize); each op's own are in its module
(npu_byoc.ops.<op>).

Each check takes the extracted quantized op and the hardware configuration and returns None
(supported) or the reason, in words a user understands, that the op stays on the CPU. Its
docstring is the constraint as the supported-operators page states it (docs/patterns.md is
generated from them).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..arch import limits
from ..arch.config import HwConfig
from ..arch.isa import SHIFT_MAX, SHIFT_MIN
from .records import QAdd, QConvolution, QFullyConnected, QOp, QSub, QTensor
from .requant import fc_scale, weighted_requant

Check = Callable[[QOp, HwConfig], "str | None"]

ACTIVATION_DTYPES = ("int8",)


def _tensors(op: QOp) -> list[tuple[str, QTensor]]:
    if hasattr(op, "inputs"):  # QConcat
        return [*((f"input {k}", t) for k, t in enumerate(op.inputs)), ("output", op.output)]
    if hasattr(op, "input_b"):  # QAdd, QSub, QMul
        return [("input a", op.input_a), ("input b", op.input_b), ("output", op.output)]
    return [("input", op.input), ("output", op.output)]


def activations_int8(op: QOp, hw: HwConfig) -> str | None:
    """Activations (inputs and outputs) are int8, or uint8 run as their int8 equivalent."""
    for role, t in _tensors(op):
        if t.dtype not in ACTIVATION_DTYPES:
            return f"{role} dtype {t.dtype}: NPU activations are int8 or uint8"
    return None


def scales_valid(op: QOp, hw: HwConfig) -> str | None:
    """Every quantization scale is finite and > 0."""
    for role, t in _tensors(op):
        if t.scale is not None and not (math.isfinite(t.scale) and t.scale > 0):
            return f"{role} scale {t.scale}: scales must be finite and > 0"
    w = getattr(op, "weight_scale", None)
    if w is not None:
        bad = ~(np.isfinite(w) & (w > 0))
        if bad.any():
            c = int(np.argmax(bad))
            return f"weight scale {w[c]} (channel {c}): scales must be finite and > 0"
    return None


def zero_points_in_range(op: QOp, hw: HwConfig) -> str | None:
    """Activation zero points lie in the int8 range [-128, 127]."""
    for role, t in _tensors(op):
        if not -128 <= t.zero_point <= 127:
            return f"{role} zero point {t.zero_point}: must lie in [-128, 127] for int8"
    return None


def _per_tensor(op: QOp, reason_of: Callable[[QTensor], "str | None"]) -> str | None:
    """The first tensor's reason, prefixed with its role."""
    for role, t in _tensors(op):
        reason = reason_of(t)
        if reason:
            return f"{role}: {reason}"
    return None


def tensor_ranks(op: QOp, hw: HwConfig) -> str | None:
    """Tensors are of rank 1 to 4: the NPU sees each as an H×W×C feature map (a rank-3 sequence [N, L, C] as one row of L pixels)."""
    return _per_tensor(op, lambda t: limits.rank_reason(t.shape))


def _batch(op: QOp) -> int:
    return limits.batch_of(t.shape for _, t in _tensors(op))


def batch_splits(op: QOp, hw: HwConfig) -> str | None:
    """A batch above 1 splits into whole images: the NPU runs the partition once per image, so every 4-D tensor has the batch N as its first dimension and every 2-D one a multiple of N rows (fully connected rows are independent)."""
    try:
        n = _batch(op)
    except limits.ShapeError as err:
        return str(err)

    def split(t: QTensor) -> str | None:
        try:
            limits.per_image(t.shape, n)
        except limits.ShapeError as err:
            return str(err)
        return None

    return _per_tensor(op, split)


def tensors_addressable(op: QOp, hw: HwConfig) -> str | None:
    """Every dimension of an image fits the 32-bit shape registers and every tensor the 32-bit DMA address range (4 GiB)."""
    layout = getattr(op, "layout", "NHWC")
    n = _batch(op)
    return _per_tensor(op, lambda t: limits.register_reason(limits.hwc(limits.per_image(t.shape, n), layout)))


def weights_int8(op: QOp, hw: HwConfig) -> str | None:
    """Weights are int8 (uint8 weights with zero point 128 run as int8 weights with zero point 0)."""
    if op.weight.dtype == np.uint8:
        zp = np.asarray(op.weight_zero_point)
        c = int(np.argmax(zp != 128))
        return (f"uint8 weight zero point {int(zp.flat[c])} on channel {c}: NPU weights are symmetric int8 "
                "(uint8 weights need zero point 128)")
    if op.weight.dtype != np.int8:
        return f"weight dtype {op.weight.dtype}: NPU weights are int8"
    return None


def weights_symmetric(op: QOp, hw: HwConfig) -> str | None:
    """Weights are quantized symmetrically (zero point 0 on every channel)."""
    zp = np.asarray(op.weight_zero_point)
    if np.any(zp != 0):
        c = int(np.argmax(zp != 0))
        return f"weight zero point {int(zp.flat[c])} on channel {c}: NPU weights need zero point 0"
    return None


def accumulator_fits(op: QOp, hw: HwConfig) -> str | None:
    """The worst-case accumulation fits int32: sum over the kernel of |w| * max|x - zp| + |bias| < 2^31."""
    zp = op.input.zero_point
    max_x = max(127 - zp, zp + 128)
    w = np.abs(op.weight.astype(np.int64)).reshape(op.weight.shape[0], -1).sum(axis=1)
    worst = w * max_x + np.abs(op.bias.astype(np.int64))
    limit = 1 << (hw.accumulator_bits - 1)
    if worst.max() >= limit:
        c = int(np.argmax(worst))
        return f"worst-case accumulator {int(worst[c])} on channel {c} overflows int32"
    return None


def geometry_reason(build: Callable[[], object]) -> str | None:
    """The ValueError message of ``build()``, the geometry an op's own module computes (None: it runs)."""
    try:
        build()
    except ValueError as err:
        return str(err)
    return None


def requant_in_range(op: QOp, hw: HwConfig) -> str | None:
    """The requantize scale s_in * s_w / s_out gives a shift the NPU accepts ([-31, 30]); a fully
    connected scale (a double, as LiteRT's reference FULLY_CONNECTED) is below 1."""
    if isinstance(op, QFullyConnected):
        try:
            fc_scale(op)
        except ValueError:
            return "fully connected requantize scale s_in * s_w / s_out is 1 or more: NPU FC scales lie below 1"
        return None
    mult, shift = weighted_requant(op)
    bad = (shift < SHIFT_MIN) | (shift > SHIFT_MAX)
    if bad.any():
        c = int(np.argmax(bad))
        return (
            f"requantize shift {int(shift[c])} (channel {c}): NPU shifts lie in [{SHIFT_MIN}, {SHIFT_MAX}] "
            "(output scale too small or too large for the input and weight scales)"
        )
    return None


def requant_left_shift_fits(lower: Callable) -> Check:
    """The check below for an op whose lowering is ``lower`` (its module's): the dry run of the
    op's own lowering, a call down the layers."""

    def requant_left_shift_fits(op: QOp, hw: HwConfig) -> str | None:
        """In an ONNX or Relax model, a requantize left shift (effective scale of 1 or more) runs when no input can overflow int32 in it: worst-case accumulator * 2^shift < 2^31, the accumulator being sum |w| * max|x - zp| + |bias| (a transposed conv: per output phase; a MEAN: n * max|x - zp|). The NPU wraps there as TFLite's reference does, which TFLite models keep; onnxruntime and TVM saturate (docs/numerics.md §3)."""
        if getattr(op, "left_shift_overflow", "wrap") == "wrap":
            return None
        if isinstance(op, QConvolution) and weighted_requant(op)[1].max() <= 0:
            return None  # right shifts only: nothing to overflow
        from ..errors import LoweringError
        from . import kick_limits
        from .records import Reject

        try:
            npu_op = kick_limits.lower_alone(op, hw, lower)
        except (limits.ShapeError, Reject, LoweringError, ValueError):
            return None  # lowers_and_fits says why it cannot be lowered
        # a shift out of range is said so by lowers_and_fits
        where = None if limits.shift_reason(npu_op) else kick_limits.left_shift_wrap(npu_op)
        if where is None:
            return None
        return (f"{where}: the NPU wraps there as TFLite's reference kernel does, this model's runtime "
                "(onnxruntime, TVM) saturates; results would differ by up to 255 LSB")

    return requant_left_shift_fits


def binary_broadcast(op: QOp, hw: HwConfig) -> str | None:
    """The operands broadcast to the output's shape as numpy does: the same shape, a channel
    vector (the unit's IFM2_BROADCAST), or any other broadcast (a pixel vector [1, H, W, 1], a
    row, a scalar, both operands) that the DMA repeats with a stride of 0 (ops.lowering.broadcast_view)."""
    word = "add" if isinstance(op, QAdd) else "sub" if isinstance(op, QSub) else "mul"
    if getattr(op, "constant", None) is not None and op.constant.size == 1 and op.convention != "qdq-float":
        # the table entry (npu.lut's add / mul of a quantized constant) computes it in one pass, in place
        return f"{word} of a constant scalar: a 256-entry table computes it (npu.lut)"
    return broadcast_reason(op, word)


def broadcast_reason(op: QOp, word: str) -> str | None:
    """Why the two operands of an elementwise op do not broadcast to its output's shape, or None."""
    a, b, out = op.input_a.shape, op.input_b.shape, op.output.shape
    try:
        if tuple(np.broadcast_shapes(tuple(a), tuple(b))) == tuple(out):
            return None
    except ValueError:
        pass
    return f"{word} with broadcasting {a} × {b}: the operands do not broadcast to the output's shape {out}"


def same_quantization(a: QTensor, b: QTensor) -> bool:
    """Equal scale (to float32 precision) and zero point, or both carried through (integer form)."""
    if a.scale is None or b.scale is None:  # integer form: quantization carried through
        return a.scale is None and b.scale is None
    return a.zero_point == b.zero_point and math.isclose(a.scale, b.scale, rel_tol=1e-6)


COMMON: tuple[Check, ...] = (
    activations_int8, scales_valid, zero_points_in_range, tensor_ranks, batch_splits, tensors_addressable,
)  # fmt: skip
WEIGHTED: tuple[Check, ...] = (weights_int8, weights_symmetric, accumulator_fits, requant_in_range)
