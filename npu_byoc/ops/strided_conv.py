"""CONV_2D with a stride above the MAC array's (max_stride) whose windows overlap or pad (ConvNeXt
/ Swin-style 7x7 stride 4 pad 3; a kernel <= stride without padding is the patchify canonical
form's, npu_byoc.ops.patchify). No opcode of its own: the NPU runs it one output row at a time.

Output row i reads the KH input rows from ``sh·i − top``. In NHWC the KW columns of output pixel
j, all their channels, are one contiguous run of KW·C bytes starting at column ``sw·j − left``,
so those rows seen with a column stride of ``sw·C`` bytes and KW·C channels (a strided box of the
input: the DMA reads runs of KW·C bytes) are a (KH, OW, KW·C) map on which the convolution is a
KH x 1 kernel of stride 1, with weights ``w[o, ky, 0, kx·C + c] = w[o, ky, kx, c]``: the same
products summed in the same int32 accumulator, the same per-channel requantize, so exact. The
rows above and below the input are the kick's own top / bottom padding (read as zero points).
A column whose window leaves the input (left or right padding) is a KH x KW stride-1 kick of its
own over the columns it reads, padded by the kick. Its record is QConv2D; the typed op, checks,
lowering and golden semantics are here."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import ClassVar

import numpy as np

from . import checks as C
from ..arch.config import HwConfig
from .conv2d import (
    _CONV_CONVENTIONS, _extract_conv2d, _is_grouped, _is_strided, conv_channels, conv_kernel, golden_conv2d,
)  # fmt: skip
from .entry import NpuPattern
from .npu_op_spec import NpuOpSpec, shape_text
from .npu_ops import Conv2D, Phased, TensorRef, Tiling, _Convolution
from .records import QConv2D, Reject
from .requant import weighted_requant

# ---------------------------------------------------------------------------------------------
# Record and typed op


@dataclass(frozen=True, eq=False)
class QStridedConv2D(QConv2D):
    """A QConv2D (groups 1) with a stride of conv2d.LARGE_STRIDE or more."""


def _extract_strided_conv2d(root, bindings) -> QConv2D:
    """conv2d's extraction; a stride of LARGE_STRIDE or more becomes a QStridedConv2D (its own lowering)."""
    op = _extract_conv2d(root, bindings)
    return QStridedConv2D(**{f.name: getattr(op, f.name) for f in fields(op)}) if _is_strided(op) else op


@dataclass(eq=False)
class StridedConv2D(_Convolution, Phased):
    """Conv2D's arithmetic (``weights`` OHWI, per-channel requantize) at a stride above the MAC
    array's. The NPU runs ``phases``: per output row, one KH x 1 kick over a strided box of the
    input for the columns whose window lies inside it, one KH x KW kick per border column."""

    padding: tuple[int, int, int, int]
    act_min: int
    act_max: int
    tiling: Tiling | None = None
    kind: str = field(default="strided_conv2d", init=False)
    shares_constants: ClassVar[bool] = True  # every row kick has the same weights, every border kick too

    @property
    def macs(self) -> int:
        h, w, c = self.ofm.shape
        return h * w * c * int(np.prod(self.weights.shape[1:]))

    def _conv(self, name: str, ifm: TensorRef, ofm: TensorRef, weights: np.ndarray, padding) -> Conv2D:
        return Conv2D(name, ifm, ofm, weights, self.bias.copy(), self.multiplier.copy(), self.shift.copy(),
                      self.ifm_zero_point, self.ofm_zero_point, (1, 1), padding, self.act_min, self.act_max)  # fmt: skip

    @cached_property
    def phases(self) -> list[Conv2D]:
        (H, W, C), (OH, OW, O) = self.ifm.shape, self.ofm.shape
        (kh, kw), (sh, sw) = self.kernel, self.stride
        top, left = self.padding[:2]
        s_h, s_w, s_c = self.ifm.strides
        if s_c != 1 or s_w != C:
            raise ValueError(f"input {self.ifm.shape} is not a dense NHWC tensor: its columns are not runs of C bytes")
        rows_weights = np.ascontiguousarray(self.weights.reshape(O, kh, 1, kw * C))
        j_lo = -(-left // sw)  # the first and past-the-last column whose window lies inside the input
        j_hi = max(j_lo, min(OW, (W - kw + left) // sw + 1))
        out = []
        for i in range(OH):
            r0 = sh * i - top
            lo, hi = max(r0, 0), min(r0 + kh, H)
            if hi <= lo:
                raise ValueError(f"output row {i} reads only padding")
            pad_top, pad_bottom = lo - r0, r0 + kh - hi
            if j_hi > j_lo:
                name = f"{self.name}[row {i}]"
                c0 = sw * j_lo - left
                offset = self.ifm.offset + lo * s_h + c0 * s_w  # row lo, column c0: (rows, columns j, KW·C)
                ifm = TensorRef(name, self.ifm.region, offset, (hi - lo, j_hi - j_lo, kw * C), "NHWC", 0, (s_h, sw * s_w, 1))
                ofm = self.ofm.box(i, j_lo, (1, j_hi - j_lo, O), name=name)
                out.append(self._conv(name, ifm, ofm, rows_weights, (pad_top, 0, pad_bottom, 0)))
            for j in [*range(min(j_lo, OW)), *range(j_hi, OW)]:
                name = f"{self.name}[row {i}, column {j}]"
                c0 = sw * j - left
                a, b = max(c0, 0), min(c0 + kw, W)
                if b <= a:
                    raise ValueError(f"output column {j} reads only padding")
                ifm = self.ifm.box(lo, a, (hi - lo, b - a, C), name=name)
                ofm = self.ofm.box(i, j, (1, 1, O), name=name)
                out.append(self._conv(name, ifm, ofm, self.weights, (pad_top, a - c0, pad_bottom, c0 + kw - b)))
        return out


# ---------------------------------------------------------------------------------------------
# Checks


def strided_layout(op: QConv2D, hw: HwConfig) -> str | None:
    """The input is NHWC (TFLite's): a window's columns and channels are then one contiguous run, which the row kicks read as channels."""
    if op.layout != "NHWC":
        return f"conv2d stride {op.strides} in {op.layout}: the NPU runs strides above {hw.max_stride} on NHWC maps"
    return None


def strided_geometry(op: QConv2D, hw: HwConfig) -> str | None:
    """Dilation 1, each padding smaller than the kernel, and a row kick's KW·C channels at most max_channels."""
    (kh, kw), c = op.kernel, op.in_channels
    if tuple(op.dilation) != (1, 1):
        return f"conv2d stride {op.strides} with dilation {op.dilation}: the NPU runs large strides undilated"
    t, l, b, r = op.padding
    if max(t, b) >= kh or max(l, r) >= kw:
        return f"conv2d padding {op.padding} with a {kh}x{kw} kernel: NPU pads less than the kernel size"
    if kw * c > hw.max_channels:
        return (f"conv2d stride {op.strides}, kernel width {kw} x {c} channels: a row kick reads {kw * c} channels, "
                f"the NPU's MAC unit up to max_channels={hw.max_channels}")
    return None


# ---------------------------------------------------------------------------------------------
# Lowering


def _lower_strided_conv(name: str, op: QConv2D, ifms, ofm) -> StridedConv2D:
    mult, shift = weighted_requant(op)
    conv = StridedConv2D(
        name=name, ifm=ifms[0], ofm=ofm, weights=np.ascontiguousarray(op.weight), bias=op.bias.astype(np.int32),
        multiplier=mult, shift=shift, ifm_zero_point=op.input.zero_point, ofm_zero_point=op.output.zero_point,
        stride=tuple(op.strides), padding=tuple(op.padding), act_min=op.act_min, act_max=op.act_max,
    )  # fmt: skip
    try:
        conv.phases
    except ValueError as err:
        raise Reject(f"conv2d stride {op.strides}: {err}") from None
    return conv


# ---------------------------------------------------------------------------------------------
# Golden semantics: the convolution itself at its stride, not the kicks the NPU runs


def golden_strided_conv2d(op: StridedConv2D, x: np.ndarray) -> np.ndarray:
    return golden_conv2d(op, x)


def _describe(op: StridedConv2D) -> str:
    (kh, kw), (sh, sw) = op.kernel, op.stride
    return f"{op.kind} {shape_text(op)}, kernel {kh}x{kw} stride {sh}x{sw}"


ENTRY = NpuPattern(
    name="npu.strided_conv2d",
    summary="2-D convolution with a stride above the MAC array's (overlapping or padded windows): per output row, "
            "a KH x 1 conv over a strided view of the input, per-channel requantize",
    anchor_ops=("relax.nn.conv2d",),
    conventions=_CONV_CONVENTIONS,
    extract=_extract_strided_conv2d,
    checks=(*C.COMMON, *C.WEIGHTED, C.requant_left_shift_fits(_lower_strided_conv), strided_layout, conv_kernel,
            strided_geometry, conv_channels),
    applies=lambda op: isinstance(op, QStridedConv2D) and not op.depthwise and not _is_grouped(op),
)

ENTRIES = (ENTRY,)
LOWERINGS = {QStridedConv2D: _lower_strided_conv}
NPU_OPS = {StridedConv2D: NpuOpSpec(golden_strided_conv2d, "phased", describe=_describe,
                                    report_class=("strided_conv", "strided conv"))}  # fmt: skip
