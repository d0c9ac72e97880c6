"""The on-chip interleave of an NCHW partition input (its planes laid out NHWC by the MAC array),
and the deinterleave of an NCHW partition output (its NHWC map written back as planes).

An ONNX model's input [1, C, H, W] is C planes of H·W bytes. Read straight into NHWC tiles it is
one-byte DMA rows (channels innermost, a plane apart in memory): each row pays a burst and,
every window of outstanding reads, the latency (tiny_cnn_qdq: 3,072 rows, 17x its roofline
bound under Vela's Ethos_U55_High_End_Embedded Sram_Only). The same bytes seen as an NHWC map
of C rows, H·W columns and one channel are C contiguous runs: the DMA reads them at the port's
full rate. A CONV with a C x 1 kernel over those rows and one output channel per plane, its
weights the identity (w[c, k] = 1 if k == c) and the requantize the identity
(broadcast.IDENTITY_MULTIPLIER / IDENTITY_SHIFT, zero points 0: acc = x exactly), writes one
output row of H·W pixels x C channels: the NHWC layout. No new hardware: the kick is a CONV
(docs/memory.md, "NCHW inputs"); its MACs are bookkeeping (``macs`` = 0), like a
concatenation's copies. A map larger than the SRAM takes several kicks, ``pixels`` columns
each (the phases).

An NCHW output is the reverse: written straight from NHWC tiles it is one-byte rows again. The
producer writes it NHWC to SCRATCH (or keeps it in SRAM) and a Deinterleave writes each plane
with a 1x1 CONV of one output channel that picks channel c: H·W bytes, one run.

The compiler inserts them when the cycle model says the partition is faster with them than
with the strided transfers (npu_byoc.codegen.interleave)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .broadcast import IDENTITY_MULTIPLIER, IDENTITY_SHIFT
from .conv2d import conv_unit_reason
from .npu_op_spec import NpuOpSpec, shape_text
from .npu_ops import Conv2D, Phased, TensorRef, Tiling


def planes_view(ref: TensorRef) -> TensorRef:
    """The C planes of an NCHW (H, W, C) tensor as the NHWC map (C, H·W, 1) of the same bytes."""
    h, w, c = ref.shape
    return TensorRef(ref.name, ref.region, ref.offset, (c, h * w, 1), "NHWC")


def identity_weights(c: int) -> np.ndarray:
    """[C_out, KH = C, KW = 1, C_in = 1]: output channel c takes kernel row c (plane c)."""
    return np.eye(c, dtype=np.int8).reshape(c, c, 1, 1)


@dataclass(eq=False)
class Interleave(Phased):
    """out = x: the (H, W, C) map ``ifm`` (a partition input, NCHW in its region) written to
    ``ofm`` (NHWC). ``pixels``: the H·W columns each phase (one CONV kick) interleaves."""

    name: str
    ifm: TensorRef
    ofm: TensorRef
    pixels: int
    tiling: Tiling | None = None
    kind: str = field(default="interleave", init=False)
    shares_constants = True  # every phase holds the one identity kernel and requantize table

    @property
    def macs(self) -> int:
        return 0  # the model computes nothing here

    @property
    def stages_operands(self) -> bool:
        return len(self.phases) > 1  # one kick writes the whole map: its readers may find it in SRAM

    @cached_property
    def weights(self) -> np.ndarray:
        return identity_weights(self.ifm.shape[2])

    @cached_property
    def phases(self) -> list[Conv2D]:
        h, w, c = self.ifm.shape
        planes = planes_view(self.ifm)
        pixels = TensorRef(self.ofm.name, self.ofm.region, self.ofm.offset, (1, h * w, c), "NHWC")
        ones = np.ones(c, np.int32)
        out = []
        for p0 in range(0, h * w, self.pixels):
            n = min(self.pixels, h * w - p0)
            out.append(Conv2D(f"{self.name}[pixels {p0}..{p0 + n - 1}]", planes.box(0, p0, (c, n, 1)),
                              pixels.box(0, p0, (1, n, c)), self.weights, np.zeros(c, np.int32),
                              ones * IDENTITY_MULTIPLIER, ones * IDENTITY_SHIFT, 0, 0, (1, 1), (0, 0, 0, 0), -128,
                              127))  # fmt: skip
        return out


@dataclass(eq=False)
class Deinterleave(Phased):
    """out = x: the (H, W, C) map ``ifm`` (NHWC in SCRATCH) written to ``ofm`` (a partition
    output, NCHW in its region). One 1x1 CONV kick per plane and run of ``pixels``: one output
    channel, weights picking input channel c, the identity requantize; its output, ``pixels``
    bytes of plane c, leaves as one contiguous run. Every kick reads the whole map when one
    run holds all its pixels, so the map may stay resident in SRAM for them all."""

    name: str
    ifm: TensorRef
    ofm: TensorRef
    pixels: int
    tiling: Tiling | None = None
    kind: str = field(default="deinterleave", init=False)

    @property
    def macs(self) -> int:
        return 0

    @property
    def stages_operands(self) -> bool:
        return self.pixels < self.ifm.shape[0] * self.ifm.shape[1]  # a box of the map per kick

    @cached_property
    def phases(self) -> list[Conv2D]:
        h, w, c = self.ifm.shape
        pixels = TensorRef(self.ifm.name, self.ifm.region, self.ifm.offset, (1, h * w, c), "NHWC")
        planes = planes_view(self.ofm)
        picks = np.eye(c, dtype=np.int8).reshape(c, 1, 1, 1, c)  # plane k's kernel: input channel k
        one = np.ones(1, np.int32)
        return [Conv2D(f"{self.name}[plane {k}, pixels {p0}..{p0 + n - 1}]", pixels.box(0, p0, (1, n, c)),
                       planes.box(k, p0, (1, n, 1)), picks[k], np.zeros(1, np.int32), one * IDENTITY_MULTIPLIER,
                       one * IDENTITY_SHIFT, 0, 0, (1, 1), (0, 0, 0, 0), -128, 127)
                for p0 in range(0, h * w, self.pixels) for n in [min(self.pixels, h * w - p0)]
                for k in range(c)]  # fmt: skip


def golden_interleave(op: Interleave | Deinterleave, x: np.ndarray) -> np.ndarray:
    """The map itself: an interleave changes where its bytes are, not their values."""
    return x.copy()


def _describe(op: Interleave | Deinterleave) -> str:
    return f"{op.kind} {shape_text(op)} ({op.pixels} pixels a kick)"


def _unit_reason(op: Interleave | Deinterleave, hw) -> str | None:
    return next(filter(None, (conv_unit_reason(p, hw) for p in op.phases)), None)


NPU_OPS = {
    Interleave: NpuOpSpec(golden_interleave, "phased", describe=_describe, unit_reason=_unit_reason,
                          report_class=("interleave", "NCHW interleave")),
    Deinterleave: NpuOpSpec(golden_interleave, "phased", describe=_describe, unit_reason=_unit_reason,
                            report_class=("deinterleave", "NCHW deinterleave")),
}  # fmt: skip
