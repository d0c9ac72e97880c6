"""Typed NPU operations: the contract between the compiler and the hardware.

Lowering (npu_byoc.codegen.lower) produces these from the quantized-op records; everything
downstream — the scheduler and command-stream encoder, the C templates, the golden model,
the reports — reads only these. They hold integers, integer arrays and shapes: no float.

Tensors live in external memory *regions* (npu_byoc.arch.isa.Region): a partition's inputs and
outputs in their own regions, in the model's layout; intermediates in the scratch region,
NHWC. Every tensor is seen by the NPU as an H x W x C int8 feature map (batch 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import ClassVar

import numpy as np


@dataclass(frozen=True)
class TensorRef:
    """An int8 feature map in external memory."""

    name: str
    region: int
    offset: int
    shape: tuple[int, int, int]  # H, W, C
    layout: str = "NHWC"  # memory order in the region: "NHWC" or "NCHW"
    # Channels per pixel of the tensor this one is a channel slice of (a concatenation's
    # output: each input's producer writes its slice in place); 0 = dense, no slice.
    pitch: int = 0
    # Bytes between neighbours along H, W, C when this is a strided box of a larger tensor (a
    # transposed convolution's phase: every s-th row and column); None = derived from the above.
    box_strides: tuple[int, int, int] | None = None

    @property
    def nbytes(self) -> int:
        h, w, c = self.shape
        return h * w * c

    @property
    def strides(self) -> tuple[int, int, int]:
        """Bytes between neighbours along H, W, C in the region."""
        if self.box_strides is not None:
            return self.box_strides
        h, w, c = self.shape
        if self.layout == "NCHW":  # a channel slice of an NCHW tensor is a run of whole planes
            return w, 1, h * w
        p = self.pitch or c
        return w * p, p, 1

    @property
    def is_slice(self) -> bool:
        """A slice of a wider tensor (not one contiguous run of its own): a channel slice, or a
        strided box."""
        return self.box_strides is not None or (self.layout == "NHWC" and self.pitch not in (0, self.shape[2]))

    def box(self, h0: int, w0: int, shape: tuple[int, int, int], step: tuple[int, int] = (1, 1),
            name: str | None = None, c0: int = 0) -> "TensorRef":  # fmt: skip
        """Rows h0, h0 + step_h, ... and columns w0, w0 + step_w, ... of this tensor and channels
        c0, c0 + 1, ..., ``shape`` of them, in place (a step of 0 repeats a row or column)."""
        s_h, s_w, s_c = self.strides
        if shape == self.shape and (h0, w0, step, c0) == (0, 0, (1, 1), 0):
            return self
        return TensorRef(name or self.name, self.region, self.offset + h0 * s_h + w0 * s_w + c0 * s_c, shape,
                         self.layout, self.pitch, (s_h * step[0], s_w * step[1], s_c))  # fmt: skip

    def channel_slice(self, c0: int, nc: int, name: str) -> "TensorRef":
        """Channels [c0, c0 + nc) of this tensor, in place."""
        h, w, c = self.shape
        offset = self.offset + c0 * self.strides[2]
        return TensorRef(name, self.region, offset, (h, w, nc), self.layout, self.pitch or c, self.box_strides)


@dataclass(frozen=True)
class Tiling:
    """How an operation is cut to fit the SRAM: output rows and output channels per tile."""

    rows: int
    channels: int


class NpuOp:
    """Base of the typed NPU ops: equality that compares arrays by value (dataclass eq would
    compare them elementwise), the inputs (``ifm``; a binary op adds ``ifm2``). A typed op is an
    ``eq=False`` dataclass with ``name``, ``ifm``, ``ofm``, ``tiling``, a ``kind`` and ``macs``;
    a new op's may live in its own module (npu_byoc.ops.<op>), with its NpuOpSpec in that
    module's ``NPU_OPS`` (npu_byoc.ops.npu_op_spec)."""

    kind: str = ""

    def __eq__(self, other) -> bool:
        if type(self) is not type(other):
            return NotImplemented
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
                if not (np.shape(a) == np.shape(b) and np.array_equal(a, b)):
                    return False
            elif a != b:
                return False
        return True

    __hash__ = None

    @property
    def inputs(self) -> tuple[TensorRef, ...]:
        return (self.ifm,)


class Phased(NpuOp):
    """An op the NPU runs as a sequence of simpler ops, its ``phases``: each reads a box of the
    op's input and writes a box of its output (TensorRef.box). The scheduler runs the phases
    one after the other in the same buffers; the golden model computes the op whole, by its own
    definition, so the phases are checked against it. ``shares_constants``: phases that hold one
    weights array (the same object) and requantize table load them from one copy in the blob."""

    shares_constants: ClassVar[bool] = False

    @property
    def phases(self) -> list:
        raise NotImplementedError


class _Binary(NpuOp):
    """Add, Mul: two inputs, no MAC."""

    @property
    def inputs(self) -> tuple[TensorRef, ...]:
        return (self.ifm, self.ifm2)

    @property
    def macs(self) -> int:
        return 0


def _model_taps(op) -> int:
    """Taps of the model's kernel: a zero-inserted k_d = (k - 1)·d + 1 window holds k."""
    (kh, kw), (dh, dw) = op.kernel, op.dilation
    return ((kh - 1) // dh + 1) * ((kw - 1) // dw + 1)


@dataclass(eq=False)
class _Convolution(NpuOp):
    """The fields every convolution shares: its weights, the per-channel requantize (bias,
    multiplier, shift in TFLite's sign convention, positive = left) and the zero points."""

    name: str
    ifm: TensorRef
    ofm: TensorRef
    weights: np.ndarray  # int8 [C_out, KH, KW, C_in]; DepthwiseConv2D: [C, KH, KW]
    bias: np.ndarray  # int32 [C_out]
    multiplier: np.ndarray  # int32 [C_out]
    shift: np.ndarray  # int32 [C_out]
    ifm_zero_point: int
    ofm_zero_point: int
    stride: tuple[int, int]

    @property
    def kernel(self) -> tuple[int, int]:
        return int(self.weights.shape[1]), int(self.weights.shape[2])


@dataclass(eq=False)
class Conv2D(_Convolution):
    """acc[c] = bias[c] + sum_{kh,kw,ci} (x - ifm_zero_point) * w[c, kh, kw, ci];
    out = clamp(requantize(acc, multiplier[c], shift[c]) + ofm_zero_point, act_min, act_max)."""

    padding: tuple[int, int, int, int]  # top, left, bottom, right
    act_min: int
    act_max: int
    tiling: Tiling | None = None
    # the model's dilation: ``weights`` then hold the kernel with zeros inserted between taps
    dilation: tuple[int, int] = (1, 1)
    kind: str = field(default="conv2d", init=False)

    @property
    def macs(self) -> int:
        """The model's MACs (a dilated kernel's inserted zeros are array work, not MACs)."""
        h, w, c = self.ofm.shape
        return h * w * c * int(self.weights.shape[3]) * _model_taps(self)


@dataclass(eq=False)
class TransposeConv2D(_Convolution, Phased):
    """TFLite's TRANSPOSE_CONV: acc[o] = bias + sum over the input pixels i and taps k with
    o = i·stride + k − pad of (x[i] − ifm_zero_point)·w[k]; requantized as Conv2D. ``weights``
    are the model's kernel (scatter orientation). The NPU runs it as ``phases``: one stride-1
    Conv2D per output phase, which reads its crop of the input and writes every stride-th row
    and column of the output (npu_byoc.ops.transpose_conv)."""

    pad_before: tuple[int, int]  # top, left; the output's size gives the rest
    act_min: int
    act_max: int
    tiling: Tiling | None = None  # the tiling of every phase (rows of the tallest phase)
    kind: str = field(default="transpose_conv2d", init=False)

    @property
    def macs(self) -> int:
        """Its phases' MACs: every output position times the taps of its phase."""
        return sum(p.macs for p in self.phases)

    @cached_property
    def phases(self) -> list[Conv2D]:
        """The stride-1 convolutions that compute it, one per output phase (φ_h, φ_w)."""
        from .transpose_conv_phases import phases

        (h, w, _), (oh, ow, c) = self.ifm.shape, self.ofm.shape
        out = []
        for p in phases(self.weights, self.stride, self.pad_before, (h, w), (oh, ow)):
            (ph, pw), name = (p.h.phase, p.w.phase), f"{self.name}[phase {p.h.phase},{p.w.phase}]"
            ifm = self.ifm.box(p.h.in_start, p.w.in_start, (p.h.in_count, p.w.in_count, self.ifm.shape[2]), name=name)
            ofm = self.ofm.box(ph, pw, (p.h.count, p.w.count, c), self.stride, name)
            out.append(Conv2D(name, ifm, ofm, p.weights, self.bias, self.multiplier, self.shift, self.ifm_zero_point,
                              self.ofm_zero_point, (1, 1), p.padding, self.act_min, self.act_max))  # fmt: skip
        return out


@dataclass(eq=False)
class DepthwiseConv2D(_Convolution):
    """As Conv2D with one input channel per output channel (channel multiplier 1)."""

    padding: tuple[int, int, int, int]
    act_min: int
    act_max: int
    tiling: Tiling | None = None
    # the model's dilation: ``weights`` then hold the kernel with zeros inserted between taps
    dilation: tuple[int, int] = (1, 1)
    kind: str = field(default="depthwise_conv2d", init=False)

    @property
    def macs(self) -> int:
        """The model's MACs (a dilated kernel's inserted zeros are array work, not MACs)."""
        h, w, c = self.ofm.shape
        return h * w * c * _model_taps(self)


@dataclass(eq=False)
class FullyConnected(NpuOp):
    """Rows of the input (ifm W axis, H = 1) times weights^T, per-channel requantize in
    LiteRT's FULLY_CONNECTED form: the output scale is a double, mantissa[c] * 2^exponent[c]
    (numerics.fc_requantize), not a (multiplier, shift) pair."""

    name: str
    ifm: TensorRef  # (1, rows, in_features)
    ofm: TensorRef  # (1, rows, out_features)
    weights: np.ndarray  # int8 [out_features, in_features]
    bias: np.ndarray
    mantissa: np.ndarray  # int64 [out_features], 0 or in [2^52, 2^53)
    exponent: np.ndarray  # int32 [out_features], in [-128, -53]
    ifm_zero_point: int
    ofm_zero_point: int
    act_min: int
    act_max: int
    tiling: Tiling | None = None
    kind: str = field(default="fully_connected", init=False)

    @property
    def macs(self) -> int:
        _, rows, n = self.ofm.shape
        return rows * n * int(self.weights.shape[1])


@dataclass(eq=False)
class Pool(NpuOp):
    """avg: sum of raw int8 over the valid (non-padded) window / count, rounded half away from
    zero; max: maximum over the valid window. Then clamp."""

    name: str
    pool: str  # "avg" | "max"
    ifm: TensorRef
    ofm: TensorRef
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int, int, int]
    act_min: int
    act_max: int
    tiling: Tiling | None = None
    kind: str = field(default="pool", init=False)

    @property
    def macs(self) -> int:
        return 0


@dataclass(eq=False)
class Mean(NpuOp):
    """TFLite int8 MEAN over H and W: sum(x - ifm_zero_point) requantized with
    (multiplier, shift) that already include 1/(H*W), plus ofm_zero_point, clamped."""

    name: str
    ifm: TensorRef
    ofm: TensorRef  # (1, 1, C)
    ifm_zero_point: int
    ofm_zero_point: int
    multiplier: int
    shift: int
    act_min: int
    act_max: int
    tiling: Tiling | None = None
    kind: str = field(default="mean", init=False)

    @property
    def macs(self) -> int:
        return 0


@dataclass(eq=False)
class Add(_Binary):
    """TFLite int8 ADD: both inputs shifted left by left_shift, rescaled to a common scale,
    summed, rescaled to the output, plus ofm_zero_point, clamped."""

    name: str
    ifm: TensorRef
    ifm2: TensorRef
    ofm: TensorRef
    ifm_zero_point: int
    ifm2_zero_point: int
    ofm_zero_point: int
    left_shift: int
    ifm_multiplier: int
    ifm_shift: int
    ifm2_multiplier: int
    ifm2_shift: int
    ofm_multiplier: int
    ofm_shift: int
    act_min: int
    act_max: int
    tiling: Tiling | None = None
    broadcast: bool = False  # ifm2 is one (1, 1, C) channel vector, repeated over H and W
    kind: str = field(default="add", init=False)


@dataclass(eq=False)
class Mul(_Binary):
    """TFLite int8 MUL: (x − ifm_zero_point)·(y − ifm2_zero_point) requantized with
    (multiplier, shift) = s1·s2/s_out, plus ofm_zero_point, clamped."""

    name: str
    ifm: TensorRef
    ifm2: TensorRef  # the ofm shape, or (1, 1, C) when broadcast
    ofm: TensorRef
    ifm_zero_point: int
    ifm2_zero_point: int
    ofm_zero_point: int
    multiplier: int
    shift: int
    act_min: int
    act_max: int
    tiling: Tiling | None = None
    broadcast: bool = False  # ifm2 is one (1, 1, C) channel vector, repeated over H and W
    kind: str = field(default="mul", init=False)


# The LUT table that copies its input: a copy into a concatenation's slice, a gather's copies.
IDENTITY_TABLE = np.arange(-128, 128, dtype=np.int8)
IDENTITY_TABLE.setflags(write=False)


@dataclass(eq=False)
class Lut(NpuOp):
    """out = table[x + 128] (the table already includes requantize and clamp)."""

    name: str
    function: str  # what the table computes, for reports ("sigmoid")
    ifm: TensorRef
    ofm: TensorRef
    table: np.ndarray  # int8 [256]
    tiling: Tiling | None = None
    kind: str = field(default="lut", init=False)

    @property
    def macs(self) -> int:
        return 0


@dataclass(eq=False)
class Gather(Phased):
    """out[h, w, c] = in[rows[h], cols[w], c0 + c]: a nearest-neighbour resize, a strided slice,
    a tile of rows or columns. The NPU runs it as identity-LUT copies, one per pair of
    arithmetic runs of ``rows`` and ``cols`` (npu_byoc.ops.gather), each reading a strided box of
    the input and writing every s-th row and column of the output."""

    name: str
    ifm: TensorRef
    ofm: TensorRef
    rows: tuple[int, ...]  # per output row, the input row it copies
    cols: tuple[int, ...]  # per output column, the input column
    c0: int = 0  # the first input channel copied
    tiling: Tiling | None = None
    kind: str = field(default="gather", init=False)

    @property
    def macs(self) -> int:
        return 0

    @cached_property
    def phases(self) -> list[Lut]:
        from .gather_copies import axis_runs

        out, c = [], self.ofm.shape[2]
        for rh in axis_runs(self.rows):
            for rw in axis_runs(self.cols):
                name = f"{self.name}[rows {rh.out0}::{rh.out_step}, cols {rw.out0}::{rw.out_step}]"
                shape = (rh.count, rw.count, c)
                ifm = self.ifm.box(rh.in0, rw.in0, shape, (rh.in_step, rw.in_step), name, self.c0)
                ofm = self.ofm.box(rh.out0, rw.out0, shape, (rh.out_step, rw.out_step), name)
                out.append(Lut(name, "copy", ifm, ofm, IDENTITY_TABLE))
        return out


@dataclass(eq=False)
class ResizeBilinear(Phased):
    """LiteRT's int8 RESIZE_BILINEAR (npu_byoc.ops.resize.reference). The NPU runs it as depthwise
    passes of 1 or 2 taps per axis, one per run of output positions with equal weights, each
    writing every factor-th row and column of the output."""

    name: str
    ifm: TensorRef
    ofm: TensorRef
    align_corners: bool
    half_pixel: bool
    tiling: Tiling | None = None
    kind: str = field(default="resize_bilinear", init=False)

    @property
    def macs(self) -> int:
        return 0

    @cached_property
    def phases(self) -> list[DepthwiseConv2D]:
        from .resize_passes import passes

        (h, w, c), (oh, ow, _) = self.ifm.shape, self.ofm.shape
        out = []
        for p in passes((h, w), (oh, ow), self.align_corners, self.half_pixel):
            r, k = p.rows, p.cols
            kh, kw = p.weights.shape
            name = f"{self.name}[rows {r.out0}::{r.step} from {r.in0}, cols {k.out0}::{k.step} from {k.in0}]"
            ifm = self.ifm.box(r.in0, k.in0, (r.count + kh - 1, k.count + kw - 1, c), name=name)
            ofm = self.ofm.box(r.out0, k.out0, (r.count, k.count, c), (r.step, k.step), name)
            out.append(DepthwiseConv2D(
                name, ifm, ofm, np.ascontiguousarray(np.broadcast_to(p.weights, (c, kh, kw))), np.zeros(c, np.int32),
                np.full(c, 1 << 30, np.int32), np.full(c, p.shift, np.int32), 0, 0, (1, 1), (0, 0, 0, 0), -128, 127,
            ))  # fmt: skip
        return out


@dataclass(eq=False)
class Softmax(NpuOp):
    """TFLite's int8 softmax over the channels of every pixel (output scale 1/256, zero point
    −128); ``table`` holds exp(−k) for the differences k = max − x at the input's scale and beta
    (npu_byoc.ops.softmax.exp_table)."""

    name: str
    ifm: TensorRef
    ofm: TensorRef
    table: np.ndarray  # int32 [256]
    tiling: Tiling | None = None
    kind: str = field(default="softmax", init=False)

    @property
    def macs(self) -> int:
        return 0

