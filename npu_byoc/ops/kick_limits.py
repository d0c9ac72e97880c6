"""What a lowered NPU op must meet at each kick, for the configuration it runs with: where a
requantize left shift can wrap int32. ``lower_alone`` lowers a record by itself, as the checks'
dry run needs. The unit limits the stream machine checks (INVALID_PARAMETER) are each op's own
(NpuOpSpec.unit_reason in npu_byoc.ops.<op>), applied by npu_byoc.ops.registry.unit_reason.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..arch.config import HwConfig
from ..arch.isa import Region
from ..arch.limits import batch_of, binary_layout, hwc, per_image
from .npu_ops import Conv2D, DepthwiseConv2D, Mean, Phased, TensorRef


def lower_alone(op, hw: HwConfig, lower, layout: str = "NHWC"):
    """``op`` (a quantized-op record) lowered by ``lower`` (its op's lowering: the compiler's
    own, registry.LOWERINGS[type(op)]) as if it were a partition on its own (inputs and output
    in IO regions). Raises ShapeError or Reject."""

    layout = getattr(op, "layout", binary_layout(op) if hasattr(op, "input_b") else layout)
    if layout is None and op.layout_alone:  # the partition's layout: as codegen.lower fills it in
        op = replace(op, layout=op.layout_alone)
        layout = op.layout
    tensors = [*_inputs(op), op.output]
    n = batch_of(t.shape for t in tensors)
    refs = [
        TensorRef(f"t{k}", int(Region.IO) + k, 0, hwc(per_image(t.shape, n), layout), layout)
        for k, t in enumerate(tensors)
    ]
    return lower("op", op, refs[:-1], refs[-1])


def _inputs(op) -> list:
    return [op.input_a, op.input_b] if hasattr(op, "input_b") else [op.input]


def left_shift_wrap(npu_op) -> str | None:
    """Where a lowered op's requantize can wrap: the worst-case int32 accumulator (conv,
    depthwise, each transposed-conv phase or conv group: sum |w| · max|x − zp| + |bias|; MEAN: n · max|x − zp|)
    times 2^shift for a positive (left) shift reaches 2^31. None: no input can wrap it. Fully
    connected multiplies by a double below 1 and ADD / SQUARED_DIFFERENCE / MUL shifts are
    bounded: never."""

    if isinstance(npu_op, Phased):  # each phase (output phase, group) sums only its own taps
        return next(filter(None, map(left_shift_wrap, npu_op.phases)), None)
    if not isinstance(npu_op, (Conv2D, DepthwiseConv2D, Mean)):
        return None
    zp = int(npu_op.ifm_zero_point)
    max_x = max(127 - zp, zp + 128)
    if isinstance(npu_op, (Conv2D, DepthwiseConv2D)):
        w = np.abs(npu_op.weights.astype(np.int64)).reshape(npu_op.weights.shape[0], -1).sum(axis=1)
        worst = w * max_x + np.abs(npu_op.bias.astype(np.int64))
    else:  # MEAN
        h, w, _ = npu_op.ifm.shape
        worst = np.asarray([h * w * max_x], np.int64)
    shift = np.broadcast_to(np.asarray(npu_op.shift, np.int64), worst.shape)
    wraps = (shift > 0) & ((worst << np.maximum(shift, 0)) >= 2**31)
    if not wraps.any():
        return None
    c = int(np.argmax(wraps))
    return (f"requantize left shift {int(shift[c])} (channel {c}): the worst-case accumulator {int(worst[c])} "
            f"times 2^{int(shift[c])} overflows int32")


__all__ = ["lower_alone", "left_shift_wrap"]
