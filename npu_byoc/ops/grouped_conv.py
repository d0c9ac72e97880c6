"""Grouped CONV_2D (groups G with 1 < G < channels, G dividing both channel counts): TFLite's
CONV_2D whose filter depth is C_in / G, ONNX Conv group=G, Relax conv2d(groups=G). No opcode of
its own: the NPU runs G CONV kicks, group g reading channels [g·C_in/G, (g+1)·C_in/G) of the
input and writing channels [g·C_out/G, (g+1)·C_out/G) of the output in place (channel slices, as
a concatenation's inputs write theirs), each with its groups' weights and per-channel requantize.
It shares the conventions, extraction and record (QConv2D) of :mod:`npu_byoc.ops.conv2d`; its
typed op, lowering, golden semantics and checks are here."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property

import numpy as np

from . import checks as C
from ..arch.config import HwConfig
from ..arch import numerics as nx
from .conv2d import (
    _CONV_CONVENTIONS, _extract_conv2d, _is_grouped, conv_dilation, conv_kernel, conv_padding, conv_stride,
    dilate_kernel, padded_windows,
)  # fmt: skip
from .entry import NpuPattern
from .npu_op_spec import NpuOpSpec, shape_text
from .npu_ops import Conv2D, Phased, Tiling, _Convolution, _model_taps
from .records import QConv2D, Reject
from .requant import weighted_requant


# ---------------------------------------------------------------------------------------------
# Record and typed op


@dataclass(frozen=True, eq=False)
class QGroupedConv2D(QConv2D):
    """A QConv2D with 1 < groups < in_channels: ``weight`` is [C_out, KH, KW, C_in / groups]."""


def _extract_grouped_conv2d(root, bindings) -> QConv2D:
    """conv2d's extraction; a grouped match becomes a QGroupedConv2D (its own lowering)."""
    op = _extract_conv2d(root, bindings)
    return QGroupedConv2D(**{f.name: getattr(op, f.name) for f in fields(op)}) if _is_grouped(op) else op


@dataclass(eq=False)
class GroupedConv2D(_Convolution, Phased):
    """acc[c] = bias[c] + sum_{kh,kw,i} (x[g·C_in/G + i] - ifm_zero_point) · w[c, kh, kw, i] for
    output channel c of group g = c // (C_out/G); requantized as Conv2D. ``weights`` are
    [C_out, KH, KW, C_in/G]. The NPU runs ``phases``: one Conv2D per group on its channel slices."""

    padding: tuple[int, int, int, int]
    act_min: int
    act_max: int
    groups: int = 1
    tiling: Tiling | None = None  # the tiling of every group's conv
    dilation: tuple[int, int] = (1, 1)  # the model's: ``weights`` hold the zero-inserted kernel
    kind: str = field(default="grouped_conv2d", init=False)

    @property
    def macs(self) -> int:
        h, w, c = self.ofm.shape
        return h * w * c * int(self.weights.shape[3]) * _model_taps(self)

    @cached_property
    def phases(self) -> list[Conv2D]:
        """Group g's Conv2D: its input channel slice to its output channel slice."""
        g_in, g_out = self.ifm.shape[2] // self.groups, self.ofm.shape[2] // self.groups
        out = []
        for g in range(self.groups):
            name, o = f"{self.name}[group {g}]", slice(g * g_out, (g + 1) * g_out)
            out.append(Conv2D(name, self.ifm.channel_slice(g * g_in, g_in, name),
                              self.ofm.channel_slice(g * g_out, g_out, name), np.ascontiguousarray(self.weights[o]),
                              self.bias[o].copy(), self.multiplier[o].copy(), self.shift[o].copy(),
                              self.ifm_zero_point, self.ofm_zero_point, self.stride, self.padding, self.act_min,
                              self.act_max, dilation=self.dilation))  # fmt: skip
        return out


# ---------------------------------------------------------------------------------------------
# Checks


def grouped_divides(op: QConv2D, hw: HwConfig | None = None) -> str | None:
    """The group count divides the input and the output channels (each group's conv reads C_in/G channels and writes C_out/G)."""
    g, c_in, c_out = op.groups, op.in_channels, op.out_channels
    if c_in % g or c_out % g or int(op.weight.shape[3]) * g != c_in:
        return (f"grouped conv2d (groups={g}) of {c_in}->{c_out} channels with a filter depth of "
                f"{int(op.weight.shape[3])}: the group count must divide both channel counts")
    return None


def grouped_channels(op: QConv2D, hw: HwConfig) -> str | None:
    """Each group's input and output channel counts are at most max_channels (one CONV kick per group)."""
    g_in, g_out = op.in_channels // op.groups, op.out_channels // op.groups
    if max(g_in, g_out) > hw.max_channels:
        return (f"grouped conv2d (groups={op.groups}) runs {g_in}->{g_out} channels per group: NPU supports up to "
                f"{hw.max_channels} channels")
    return None


# ---------------------------------------------------------------------------------------------
# Lowering


def _lower_grouped_conv(name: str, op: QConv2D, ifms, ofm) -> GroupedConv2D:
    if reason := grouped_divides(op):
        raise Reject(reason)
    mult, shift = weighted_requant(op)
    return GroupedConv2D(
        name=name, ifm=ifms[0], ofm=ofm, weights=np.ascontiguousarray(dilate_kernel(op.weight, op.dilation)),
        bias=op.bias.astype(np.int32), multiplier=mult, shift=shift, ifm_zero_point=op.input.zero_point,
        ofm_zero_point=op.output.zero_point, stride=tuple(op.strides), padding=tuple(op.padding),
        act_min=op.act_min, act_max=op.act_max, groups=op.groups, dilation=tuple(int(d) for d in op.dilation),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Golden semantics: the grouped sum over the whole tensor, not the phases the NPU runs


def golden_grouped_conv2d(op: GroupedConv2D, x: np.ndarray) -> np.ndarray:
    g = op.groups
    win = padded_windows(x, op.kernel, op.stride, op.padding, op.ifm_zero_point)  # (OH, OW, KH, KW, C_in)
    oh, ow, kh, kw, c_in = win.shape
    win = win.reshape(oh, ow, kh, kw, g, c_in // g) - op.ifm_zero_point
    w = op.weights.astype(np.int32).reshape(g, -1, kh, kw, c_in // g)  # (G, C_out/G, KH, KW, C_in/G)
    acc = np.einsum("hwklgi,gokli->hwgo", win, w, dtype=np.int64).reshape(oh, ow, -1)
    return nx.requantize(acc, op.bias, op.multiplier, op.shift, op.ofm_zero_point, op.act_min, op.act_max)


def _describe(op: GroupedConv2D) -> str:
    kh, kw = op.kernel
    return f"{op.kind} {shape_text(op)}, kernel {kh}x{kw}, {op.groups} groups"


# ---------------------------------------------------------------------------------------------
# Registry


ENTRY = NpuPattern(
    name="npu.grouped_conv2d",
    summary="grouped 2-D convolution (1 < groups < channels): one conv per group on its channel slices, "
            "per-channel requantize",
    anchor_ops=("relax.nn.conv2d",),
    conventions=_CONV_CONVENTIONS,
    extract=_extract_grouped_conv2d,
    checks=(*C.COMMON, *C.WEIGHTED, grouped_divides, C.requant_left_shift_fits(_lower_grouped_conv), conv_kernel,
            conv_stride, conv_dilation, conv_padding, grouped_channels),
    applies=lambda op: isinstance(op, QGroupedConv2D),
)

ENTRIES = (ENTRY,)
LOWERINGS = {QGroupedConv2D: _lower_grouped_conv}
NPU_OPS = {GroupedConv2D: NpuOpSpec(golden_grouped_conv2d, "phased", describe=_describe,
                                    report_class=("grouped_conv", "grouped conv"))}  # fmt: skip
