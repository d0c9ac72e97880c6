"""DEPTHWISE_CONV_2D: a convolution with groups == channels (multiplier 1), its own table
entry and composite (npu.depthwise_conv2d). It shares the conventions, extraction, checks and
lowering of :mod:`npu_byoc.ops.conv2d` (one record type, QConv2D, lowered by conv2d's
registry entry); this entry only selects the depthwise matches."""

from __future__ import annotations

from .conv2d import _CONV_CHECKS, _CONV_CONVENTIONS, _extract_conv2d, _is_depthwise
from .entry import NpuPattern


ENTRY = NpuPattern(
    name="npu.depthwise_conv2d",
    summary="depthwise 2-D convolution (groups == channels) with per-channel requantize",
    anchor_ops=("relax.nn.conv2d",),
    conventions=_CONV_CONVENTIONS,
    extract=_extract_conv2d,
    checks=_CONV_CHECKS,
    applies=_is_depthwise,
)


ENTRIES = (ENTRY,)
LOWERINGS: dict = {}  # QConv2D: npu_byoc.ops.conv2d's
