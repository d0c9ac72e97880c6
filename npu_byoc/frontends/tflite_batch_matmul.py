"""Quantized TFLite BATCH_MATMUL, which TVM 0.27's Relax TFLite frontend refuses.

Imported as LiteRT's int8 kernel computes it (``kernels/batch_matmul.cc`` Prepare and
``internal/reference/batch_matmul.h``), in integer Relax ops only, so TVM's CPU build gives
LiteRT's integers exactly:

* operands: ``astype(x, int32) - zero_point``; ``adj_x`` / ``adj_y`` swap the last two axes of
  the LHS / RHS; the batch axes broadcast as numpy does (LiteRT extends both shapes to the
  output rank with leading 1s; each batch axis is 1 or the other's);
* ``matmul(..., out_dtype=int32)``: LiteRT accumulates in int32;
* requantize: ``real = double(float32(s_lhs * s_rhs)) / double(s_out)`` (the product in
  float32 first: GetQuantizedConvolutionMultipler), QuantizeMultiplier (npu_byoc.arch.
  fixed_point), then MultiplyByQuantizedMultiplier in TFLite's double-rounding form:
  ``RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(acc << left, M), right)``, written in
  int64 Relax arithmetic (:func:`requantize`); ``+ zero_point``, clamp to int8.

Only the per-tensor int8 form exists in LiteRT (int16 aside); anything else is refused with a
one-line reason.
"""

from __future__ import annotations

import numpy as np
from tvm import relax

from ..arch.fixed_point import quantize_multiplier

_I64 = "int64"


def multiplier(lhs_scale: float, rhs_scale: float, out_scale: float) -> tuple[int, int]:
    """LiteRT's (multiplier, shift) of a quantized BATCH_MATMUL (positive shift = left)."""
    product = np.float32(lhs_scale) * np.float32(rhs_scale)  # float32, as the kernel's Prepare
    return quantize_multiplier(float(product) / float(np.float32(out_scale)))


def _c(v: int):
    return relax.const(np.int64(v), _I64)


def requantize(acc, mult: int, shift: int, zero_point: int, dtype: str = "int8"):
    """``clamp(MultiplyByQuantizedMultiplier(acc, mult, shift) + zero_point)`` of an int32
    expression, as integer Relax ops (int64 intermediates; C's int32 wrap of the left shift
    and its truncating division kept)."""
    x = relax.op.astype(acc, _I64)
    left, right = max(shift, 0), max(-shift, 0)
    if left:  # acc * (1 << left) in int32: wraps
        x = relax.op.astype(relax.op.astype(relax.op.left_shift(x, _c(left)), "int32"), _I64)
    # SaturatingRoundingDoublingHighMul(x, mult): (x*mult + nudge) / 2^31, truncated toward 0
    # (no saturation case: mult > 0)
    ab = relax.op.multiply(x, _c(mult))
    nudge = relax.op.where(relax.op.greater_equal(ab, _c(0)), _c(1 << 30), _c(1 - (1 << 30)))
    t = relax.op.add(ab, nudge)
    hi = relax.op.where(relax.op.greater_equal(t, _c(0)), relax.op.right_shift(t, _c(31)),
                        relax.op.negative(relax.op.right_shift(relax.op.negative(t), _c(31))))
    if right:  # RoundingDivideByPOT: round half away from zero
        mask = (1 << right) - 1
        remainder = relax.op.bitwise_and(hi, _c(mask))
        threshold = relax.op.add(_c(mask >> 1), relax.op.astype(relax.op.less(hi, _c(0)), _I64))
        hi = relax.op.add(relax.op.right_shift(hi, _c(right)),
                          relax.op.astype(relax.op.greater(remainder, threshold), _I64))
    info = np.iinfo(dtype)
    y = relax.op.clip(relax.op.add(hi, _c(zero_point)), int(info.min), int(info.max))
    return relax.op.astype(y, dtype)


def _swap_last(x, rank: int):
    return relax.op.permute_dims(x, [*range(rank - 2), rank - 1, rank - 2])


def batch_matmul(lhs, rhs, lhs_shape, rhs_shape, adj_x: bool, adj_y: bool, zero_points, scales, out_dtype="int8"):
    """The Relax expression of an int8 BATCH_MATMUL: ``zero_points`` and ``scales`` are
    (lhs, rhs, output) triples. Raises ValueError on shapes LiteRT refuses."""
    lhs_shape, rhs_shape = [int(d) for d in lhs_shape], [int(d) for d in rhs_shape]
    if not (2 <= len(lhs_shape) <= 5 and 2 <= len(rhs_shape) <= 5):
        raise ValueError(f"operand ranks {len(lhs_shape)} and {len(rhs_shape)} (2 to 5 supported)")
    k_lhs = lhs_shape[-2] if adj_x else lhs_shape[-1]
    k_rhs = rhs_shape[-1] if adj_y else rhs_shape[-2]
    if k_lhs != k_rhs:
        raise ValueError(f"shapes {lhs_shape} and {rhs_shape} (adj_x {adj_x}, adj_y {adj_y}) do not multiply")
    rank = max(len(lhs_shape), len(rhs_shape))
    a_batch = [1] * (rank - len(lhs_shape)) + lhs_shape[:-2]
    b_batch = [1] * (rank - len(rhs_shape)) + rhs_shape[:-2]
    if any(p != q and 1 not in (p, q) for p, q in zip(a_batch, b_batch)):
        raise ValueError(f"batch dimensions {lhs_shape[:-2]} and {rhs_shape[:-2]} do not broadcast")

    def operand(x, zp, shape, adj):
        x = relax.op.astype(x, "int32")
        if zp:
            x = relax.op.subtract(x, relax.const(np.int32(zp), "int32"))
        return _swap_last(x, len(shape)) if adj else x

    a = operand(lhs, zero_points[0], lhs_shape, adj_x)
    b = operand(rhs, zero_points[1], rhs_shape, adj_y)
    acc = relax.op.matmul(a, b, out_dtype="int32")
    mult, shift = multiplier(*scales)
    if shift > 31 or shift < -62:
        raise ValueError(f"the output scale gives shift {shift}, outside LiteRT's range")
    return requantize(acc, mult, shift, zero_points[2], out_dtype)
