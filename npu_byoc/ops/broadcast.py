"""An elementwise operand broadcast over the channels (LayerNorm's (1, H, W, 1) pixel vector, a
scalar), replicated over them on the MAC array instead of by the DMA.

Read through a stride-0 view (ops.lowering.broadcast_view) such an operand has a stride-0
innermost axis, which the DMA copies one byte per cycle. A 1x1 CONV whose weights are all 1 and
whose requantize is the identity writes the vector repeated over the C channels at the array's
rate instead: acc = x - zero_point, then multiplier 2^30 with shift 1 (left) is exact
(SRDHM(2·acc, 2^30) = acc for |acc| < 2^30; here |acc| <= 255), and the same zero point is
added back. The binary op then reads the replicated copy from SRAM as a full operand, tile by tile
(:class:`ChannelReplicated`, the tiling kind "replicated" of npu_byoc.codegen).

On convnext_block_int8 (`npu-byoc cosim`) that takes the NPU cycles from 16,111 to 7,469."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .npu_op_spec import NpuOpSpec, mac_channels_reason, shape_text
from .npu_ops import Conv2D, NpuOp, TensorRef, Tiling

IDENTITY_MULTIPLIER, IDENTITY_SHIFT = 1 << 30, 1  # MBQM(acc, 2^30, +1) == acc, exactly


def channel_vector(ref: TensorRef) -> TensorRef | None:
    """The (H, W, 1) operand a stride-0 channel view ``ref`` repeats over C > 1 channels (dense
    when its H and W strides are a plane's), or None when ``ref`` is not such a view."""
    h, w, c = ref.shape
    s_h, s_w, s_c = ref.strides
    if c == 1 or s_c != 0:
        return None
    if (s_h, s_w) == (w, 1):
        return TensorRef(ref.name, ref.region, ref.offset, (h, w, 1), "NHWC")
    return TensorRef(ref.name, ref.region, ref.offset, (h, w, 1), ref.layout, ref.pitch, (s_h, s_w, 1))


def replicate_channels(name: str, vector: TensorRef, out: TensorRef, zero_point: int) -> Conv2D:
    """The 1x1 CONV that writes ``vector`` (H, W, 1) repeated over ``out``'s channels, unchanged."""
    c = out.shape[2]
    return Conv2D(name, vector, out, np.ones((c, 1, 1, 1), np.int8), np.zeros(c, np.int32),
                  np.full(c, IDENTITY_MULTIPLIER, np.int32), np.full(c, IDENTITY_SHIFT, np.int32), zero_point,
                  zero_point, (1, 1), (0, 0, 0, 0), -128, 127)  # fmt: skip


@dataclass(eq=False)
class ChannelReplicated(NpuOp):
    """An ADD, MUL or SQUARED_DIFFERENCE (``binary``) whose ``ifm2`` repeats a vector over the channels (a stride-0
    view). Each tile (tiling kind "replicated") reads the vector's rows, replicates them into an
    SRAM buffer with :attr:`replicate`'s CONV kick and runs ``binary`` on that buffer: the vector
    never crosses the DMA at a byte per cycle, nor the replicated copy at all. Its inputs are
    ``binary``'s first operand and the (H, W, 1) vector itself, so both may stay resident in SRAM.
    A subclass per binary op names its golden model."""

    name: str
    binary: NpuOp  # Add, Mul or SquaredDifference, ifm2 the stride-0 view of the vector
    tiling: Tiling | None = None
    kind: str = field(default="channel_replicated", init=False)

    @property
    def ifm(self) -> TensorRef:
        return self.binary.ifm

    @property
    def ofm(self) -> TensorRef:
        return self.binary.ofm

    @property
    def vector(self) -> TensorRef:
        return channel_vector(self.binary.ifm2)

    @property
    def inputs(self) -> tuple[TensorRef, ...]:
        return (self.binary.ifm, self.vector)

    @property
    def macs(self) -> int:
        return 0  # the model's op has none; the replication's are bookkeeping

    @cached_property
    def replicate(self) -> Conv2D:
        """The CONV kick of every tile (its ofm: the tile's replicated copy in SRAM)."""
        return replicate_channels(f"{self.name}[channels replicated]", self.vector, self.ofm,
                                  self.binary.ifm2_zero_point)  # fmt: skip


def vector_second(a, b, ifm: TensorRef, ifm2: TensorRef) -> tuple:
    """(a, b, ifm, ifm2) with an operand repeated over the channels second (ADD, MUL and
    SQUARED_DIFFERENCE commute exactly: each operand has its own zero point and rescale, and
    (a - b)^2 = (b - a)^2), so :func:`replicated` finds it."""
    if channel_vector(ifm) is not None and channel_vector(ifm2) is None:
        return b, a, ifm2, ifm
    return a, b, ifm, ifm2


def replicated(op: NpuOp, cls: type[ChannelReplicated]) -> NpuOp:
    """``op`` (an ADD, MUL or SQUARED_DIFFERENCE whose broadcast operand, if any, is its ``ifm2``) as ``cls`` when that
    operand repeats a vector over the channels; else ``op`` itself."""
    if channel_vector(op.ifm2) is None or channel_vector(op.ifm) is not None:
        return op
    return cls(op.name, op)


def replicated_spec(golden_binary, verb: str, report_class: tuple[str, str]) -> NpuOpSpec:
    """The spec of a :class:`ChannelReplicated` op: ``golden_binary`` (the wrapped op's golden
    model) on the (H, W, 1) vector broadcast over C, described as ``verb``, limited by the
    replicating CONV's channels."""

    def golden(op: ChannelReplicated, x: np.ndarray, vector: np.ndarray) -> np.ndarray:
        return golden_binary(op.binary, x, np.broadcast_to(vector, op.ofm.shape))

    def describe(op: ChannelReplicated) -> str:
        return f"{verb} {shape_text(op)} (the vector replicated over the channels)"

    def unit_reason(op: ChannelReplicated, hw) -> str | None:
        return mac_channels_reason(op.replicate, hw)

    return NpuOpSpec(golden, "replicated", describe=describe, unit_reason=unit_reason, report_class=report_class)


__all__ = ["ChannelReplicated", "replicated_spec", "channel_vector", "replicate_channels", "replicated", "vector_second",
           "IDENTITY_MULTIPLIER", "IDENTITY_SHIFT"]  # fmt: skip
