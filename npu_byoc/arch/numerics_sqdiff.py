"""Integer numerics of int8 SQUARED_DIFFERENCE (docs/numerics.md §8d), bit-exact with LiteRT's
``squared_difference.cc``: the compile-time parameters (its ``Prepare``'s float32 / double
order) and the run-time kernel the SQDIFF opcode executes. Apart from npu_byoc.arch.numerics
only to keep that module small; the parameters are ADD's tuple (:class:`numerics.AddParams`),
since the datapath is ADD's with a subtract and a square in place of the sum.
"""

from __future__ import annotations

import numpy as np

from .fixed_point import INT8_MAX, INT8_MIN, _int64, _wrap_i32, multiply_by_quantized_multiplier, quantize_multiplier
from .numerics import AddParams

# LiteRT's left shift: 255² · 2^(2·7) is the largest squared difference, inside int32.
SQDIFF_LEFT_SHIFT = 7


def squared_difference_params(input1_scale, input2_scale, output_scale) -> AddParams:
    """LiteRT int8 SQUARED_DIFFERENCE parameters (``squared_difference.cc`` Prepare)::

        twice_max = double(float32(2 · max(s1, s2)))                  # a float32 product, widened
        input1_multiplier, input1_shift = quantize_multiplier(double(s1) / twice_max)   # ≤ 0.5
        input2_multiplier, input2_shift = quantize_multiplier(double(s2) / twice_max)
        output_multiplier, output_shift = quantize_multiplier(
            twice_max · twice_max / double(float32(2^14 · s_out)))  # a double square, a float32 product

    Every real goes through ``QuantizeMultiplierSmallerThanOneExp`` (the output's too, unlike
    ADD's), which requires it in (0, 1); a ValueError says which is not.
    """
    f32 = np.float32
    twice_max = float(f32(2) * max(f32(input1_scale), f32(input2_scale)))
    denominator = float(f32(1 << (2 * SQDIFF_LEFT_SHIFT)) * f32(output_scale))
    reals = (float(f32(input1_scale)) / twice_max, float(f32(input2_scale)) / twice_max,
             (twice_max * twice_max) / denominator)  # fmt: skip
    out = []
    for what, r in zip(("input 1", "input 2", "output"), reals):
        if not 0.0 < r < 1.0:
            raise ValueError(f"squared_difference_params: {what} real multiplier {r} outside (0, 1); LiteRT rejects it too")
        out.extend(quantize_multiplier(r))
    return AddParams(SQDIFF_LEFT_SHIFT, *out)


def squared_difference(a, b, input1_zero_point, input2_zero_point, output_zero_point, params: AddParams,
                       act_min=INT8_MIN, act_max=INT8_MAX) -> np.ndarray:  # fmt: skip
    """int8 SQUARED_DIFFERENCE as LiteRT's ``SquaredDifference(int8_t, int8_t, params)``
    (numpy broadcasting of a and b)::

        a' = (a − zp1) · 2^left_shift;  b' = (b − zp2) · 2^left_shift        # left_shift = 7
        a″ = multiply_by_quantized_multiplier(a', input1_multiplier, input1_shift)
        b″ = multiply_by_quantized_multiplier(b', input2_multiplier, input2_shift)
        d  = a″ − b″                                   # the unrounded difference, squared:
        out = multiply_by_quantized_multiplier(d · d, output_multiplier, output_shift) + zp_out
        out = clamp(out, act_min, act_max)

    Every int32 step wraps (the NPU's registers allow any shift; LiteRT's never wrap).
    """
    a = _int64(a, "squared_difference a")
    b = _int64(b, "squared_difference b")
    sa = (a - int(input1_zero_point)) << params.left_shift
    sb = (b - int(input2_zero_point)) << params.left_shift
    ra = multiply_by_quantized_multiplier(_wrap_i32(sa), params.input1_multiplier, params.input1_shift)
    rb = multiply_by_quantized_multiplier(_wrap_i32(sb), params.input2_multiplier, params.input2_shift)
    diff = _wrap_i32(ra.astype(np.int64) - rb.astype(np.int64))
    out = multiply_by_quantized_multiplier(_wrap_i32(diff * diff), params.output_multiplier, params.output_shift)
    out = out.astype(np.int64) + int(output_zero_point)
    lo, hi = max(int(act_min), INT8_MIN), min(int(act_max), INT8_MAX)
    return np.clip(out, lo, hi).astype(np.int8)


__all__ = ["SQDIFF_LEFT_SHIFT", "squared_difference_params", "squared_difference"]
