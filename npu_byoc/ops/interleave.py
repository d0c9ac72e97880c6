"""The on-chip interleave of an NCHW partition input (its planes laid out NHWC by the MAC array),
and the deinterleave of an NCHW partition output (its NHWC map written back as planes).

An ONNX model's input [1, C, H, W] is C planes of H·W bytes. Read straight into NHWC tiles it is
one-byte DMA rows (channels innermost, a plane apart in memory): each row pays a burst and,
every window of outstanding reads, the latency (tiny_cnn_qdq: 3,072 rows, 17x its roofline
bound under Vela's Ethos_U55_High_End_Embedded Sram_Only). A tile of image rows [r0, r0 + n)
is, in the planes, C runs of n·W bytes: the DMA reads them at the port's full rate into SRAM as
the map (C, n·W, 1), and one CONV kick with a C x 1 kernel, one output channel per plane, the
identity as weights (w[c][k] = 1 if k == c) and as requantize (broadcast.IDENTITY_MULTIPLIER /
IDENTITY_SHIFT, zero points 0: acc = x exactly) writes (1, n·W, C): the tile's NHWC pixels.

An NCHW output is the reverse: written straight from NHWC tiles it is one-byte rows again. The
producer writes it NHWC (SCRATCH, or SRAM when it stays resident) and the Deinterleave runs,
per tile of rows, one 1x1 CONV kick per plane c with one output channel whose weights pick
channel c, each into its slot of the output buffer; one DMA writes the C runs of n·W bytes.

No new hardware: the kicks are CONVs (docs/memory.md, "NCHW inputs and outputs"); their MACs are
bookkeeping (``macs`` = 0), like a concatenation's copies. The tiling kinds "interleave" and
"deinterleave" (npu_byoc.codegen.tiling, tile_steps) cut them into rows of the image. The
compiler inserts them where the cycle model finds the partition faster (npu_byoc.codegen.interleave)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .broadcast import IDENTITY_MULTIPLIER, IDENTITY_SHIFT
from .npu_op_spec import NpuOpSpec, mac_channels_reason, shape_text, what
from .npu_ops import NpuOp, TensorRef, Tiling


def planes_view(ref: TensorRef) -> TensorRef:
    """The C planes of an NCHW (H, W, C) tensor as the NHWC map (C, H·W, 1) of the same bytes."""
    h, w, c = ref.shape
    return TensorRef(ref.name, ref.region, ref.offset, (c, h * w, 1), "NHWC")


def pixels_view(ref: TensorRef) -> TensorRef:
    """An NHWC (H, W, C) tensor as the one-row map (1, H·W, C) of the same bytes."""
    h, w, c = ref.shape
    return TensorRef(ref.name, ref.region, ref.offset, (1, h * w, c), "NHWC")


@dataclass(eq=False)
class _LayoutMove(NpuOp):
    """out = x, the (H, W, C) map ``ifm`` written to ``ofm`` in the other layout, by CONV kicks
    whose weights are ``weights`` and whose requantize is the identity."""

    name: str
    ifm: TensorRef
    ofm: TensorRef
    tiling: Tiling | None = None
    ifm_zero_point = ofm_zero_point = 0
    act_min, act_max = -128, 127

    @property
    def macs(self) -> int:
        return 0  # the model computes nothing here

    @property
    def channels(self) -> int:
        return self.ifm.shape[2]

    @cached_property
    def bias(self) -> np.ndarray:
        return np.zeros(self.channels, np.int32)

    @cached_property
    def multiplier(self) -> np.ndarray:
        return np.full(self.channels, IDENTITY_MULTIPLIER, np.int32)

    @cached_property
    def shift(self) -> np.ndarray:
        return np.full(self.channels, IDENTITY_SHIFT, np.int32)


@dataclass(eq=False)
class Interleave(_LayoutMove):
    """An NCHW partition input (``ifm``) laid out NHWC (``ofm``): per tile, one CONV kick with
    kernel C x 1 over the tile's planes. ``weights`` [C_out = C, KH = C, KW = 1, C_in = 1]."""

    kind: str = field(default="interleave", init=False)

    @cached_property
    def weights(self) -> np.ndarray:
        return np.eye(self.channels, dtype=np.int8).reshape(self.channels, self.channels, 1, 1)


@dataclass(eq=False)
class Deinterleave(_LayoutMove):
    """An NHWC map (``ifm``) written as the planes of an NCHW partition output (``ofm``): per
    tile, one 1x1 CONV kick per plane. ``weights`` [C_out = C, 1, 1, C_in = C]: plane c's kick
    takes row c, which picks input channel c."""

    kind: str = field(default="deinterleave", init=False)

    @cached_property
    def weights(self) -> np.ndarray:
        return np.eye(self.channels, dtype=np.int8).reshape(self.channels, 1, 1, self.channels)


def golden_layout_move(op: _LayoutMove, x: np.ndarray) -> np.ndarray:
    """The map itself: a layout move changes where its bytes are, not their values."""
    return x.copy()


def _describe(op: _LayoutMove) -> str:
    return f"{op.kind} {shape_text(op)}"


def _unit_reason(op: _LayoutMove, hw) -> str | None:
    """The MAC unit's channels; an interleave's kernel is C x 1."""
    if reason := mac_channels_reason(op, hw):
        return reason
    if isinstance(op, Interleave) and op.channels > hw.max_kernel:
        return f"{what(op)} runs a {op.channels}x1 kernel: the NPU takes up to max_kernel={hw.max_kernel}"
    return None


NPU_OPS = {
    Interleave: NpuOpSpec(golden_layout_move, "interleave", describe=_describe, unit_reason=_unit_reason,
                          report_class=("interleave", "NCHW interleave")),
    Deinterleave: NpuOpSpec(golden_layout_move, "deinterleave", describe=_describe, unit_reason=_unit_reason,
                            report_class=("deinterleave", "NCHW deinterleave")),
}  # fmt: skip
