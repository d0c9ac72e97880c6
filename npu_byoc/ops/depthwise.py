"""DEPTHWISE_CONV_2D: a convolution with groups == channels (multiplier 1), its own table
entry and composite (npu.depthwise_conv2d). It shares the conventions, extraction, checks and
lowering of :mod:`npu_byoc.ops.conv2d` (one record type, QConv2D, lowered by conv2d's
registry entry); this entry only selects the depthwise matches."""

from __future__ import annotations

import numpy as np

from ..arch import numerics as nx
from .conv2d import _CONV_CHECKS, _CONV_CONVENTIONS, _extract_conv2d, conv_unit_reason, padded_windows
from .entry import NpuPattern
from .npu_op_spec import NpuOpSpec
from .npu_ops import DepthwiseConv2D


ENTRY = NpuPattern(
    name="npu.depthwise_conv2d",
    summary="depthwise 2-D convolution (groups == channels) with per-channel requantize",
    anchor_ops=("relax.nn.conv2d",),
    conventions=_CONV_CONVENTIONS,
    extract=_extract_conv2d,
    checks=_CONV_CHECKS,
    applies=lambda op: op.depthwise,
)


ENTRIES = (ENTRY,)
LOWERINGS: dict = {}  # QConv2D: npu_byoc.ops.conv2d's


# ---------------------------------------------------------------------------------------------
# Golden semantics (the typed op's spec: npu_byoc.ops.npu_op_spec)


def golden_depthwise_conv2d(op: DepthwiseConv2D, x: np.ndarray) -> np.ndarray:
    win = padded_windows(x, op.kernel, op.stride, op.padding, op.ifm_zero_point)
    w = op.weights.astype(np.int32).transpose(1, 2, 0)  # (KH, KW, C)
    acc = np.einsum("hwklc,klc->hwc", win - op.ifm_zero_point, w, dtype=np.int64)
    return nx.requantize(acc, op.bias, op.multiplier, op.shift, op.ofm_zero_point, op.act_min, op.act_max)


NPU_OPS = {DepthwiseConv2D: NpuOpSpec(golden_depthwise_conv2d, "spatial", unit_reason=conv_unit_reason)}
