"""A standalone constant PAD of any axis but the batch of a tensor of rank <= 4 (TFLite PAD /
PADV2, ONNX Pad in QDQ, Relax nn.pad) with any fill, no opcode of its own: the NPU writes the
output as disjoint boxes, the input copied into the interior by the identity LUT and each border
strip (rows, columns, and the channels before and after the input's) filled by a LUT whose every
entry is the fill (reading the input's first pixel again and again: a DMA box of stride 0).
A pad filled with the dtype's minimum before a max pool does not come here: it folds into the
pool's padding (npu_byoc.ops.pool). Everything the compiler knows about it is here: its record,
its typed op, conventions, extraction, checks, lowering, golden semantics and tiling kind."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

import numpy as np
from tvm.relax.dpl import is_op, wildcard

from . import checks as C
from ._qdq import _DTYPE_RANGE, _INT_ACTIVATIONS, _activation, _carried, _deq, _is_constant, _quant
from ..arch.config import HwConfig
from .entry import Convention, NpuPattern
from .npu_op_spec import NpuOpSpec, shape_text
from .lowering import hwc
from .npu_ops import IDENTITY_TABLE, Lut, Phased, TensorRef, Tiling
from .records import QOp, QTensor, Reject
from ..util.relax_utils import int_list, op_name, resolve

_SPATIAL = {"NHWC": (1, 2), "NCHW": (2, 3)}


# ---------------------------------------------------------------------------------------------
# Record and typed op


@dataclass(frozen=True, eq=False)
class QPad(QOp):
    """``output = pad(input, widths, fill)``: ``widths`` (before, after) per axis of the rank-4
    tensor, ``fill`` the quantized value written in the border (in the model's dtype); the
    input's bytes are copied unchanged (input and output quantized alike)."""

    input: QTensor
    output: QTensor
    widths: tuple[int, ...]  # before_0, after_0, before_1, after_1, ... (Relax pad_width)
    fill: int
    convention: str = ""
    layout: str | None = None  # the partition's (lowering fills it in): which axes are H and W
    operands: tuple = field(default=(), compare=False, repr=False)
    takes_partition_layout: ClassVar[str] = "pad"

    @property
    def macs(self) -> int:
        return 0


@dataclass(eq=False)
class Pad(Phased):
    """out = the input with ``padding`` (top, left, bottom, right) rows and columns and
    ``channels`` (before, after) channels of ``fill`` around it (H x W x C maps). The NPU writes
    disjoint boxes of the output: the interior, an identity-LUT copy of the input; the top and
    bottom strips (full width), the left and right strips (the input's rows) and the channels
    before and after the input's (its pixels), each a LUT of constant ``fill`` reading the input's
    first pixel through a box of stride 0."""

    name: str
    ifm: TensorRef
    ofm: TensorRef
    padding: tuple[int, int, int, int]
    fill: int
    tiling: Tiling | None = None
    kind: str = field(default="pad", init=False)
    channels: tuple[int, int] = (0, 0)

    @property
    def macs(self) -> int:
        return 0

    @cached_property
    def phases(self) -> list[Lut]:
        t, l, b, r = self.padding
        before, after = self.channels
        h, w, c = self.ifm.shape
        wo, co = self.ofm.shape[1:]
        table = np.full(256, self.fill, np.int8)
        interior = self.ofm.box(t, l, (h, w, c), name=f"{self.name}[interior]", c0=before)
        out = [Lut(f"{self.name}[interior]", "copy", self.ifm, interior, IDENTITY_TABLE)]
        strips = (("top", 0, 0, 0, t, wo, co), ("bottom", t + h, 0, 0, b, wo, co), ("left", t, 0, 0, h, l, co),
                  ("right", t, l + w, 0, h, r, co), ("channels before", t, l, 0, h, w, before),
                  ("channels after", t, l, before + c, h, w, after))  # fmt: skip
        for side, h0, w0, c0, rows, cols, n in strips:
            if rows and cols and n:
                name = f"{self.name}[{side}]"
                out.append(Lut(name, "fill", self._fill_source(rows, cols, n, name),
                               self.ofm.box(h0, w0, (rows, cols, n), name=name, c0=c0), table))  # fmt: skip
        return out

    def _fill_source(self, rows: int, cols: int, n: int, name: str) -> TensorRef:
        """What a fill strip's LUT reads (any bytes: every entry of its table is the fill): the
        input's first pixel repeated, its first n channels (all at its first byte when n > C)."""
        s_c = self.ifm.strides[2] if n <= self.ifm.shape[2] else 0
        return TensorRef(name, self.ifm.region, self.ifm.offset, (rows, cols, n), self.ifm.layout, self.ifm.pitch,
                         (0, 0, s_c))  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Conventions and extraction


def _pad_conventions() -> tuple[Convention, ...]:
    return (
        Convention("qdq", "ONNX QDQ (Pad, constant)", _quant(is_op("relax.nn.pad")(_deq())),
                   "dequantize(x) → nn.pad(constant v) → quantize (same scale and zero point; fill = quantize(v))"),
        Convention("int8", "TFLite (PAD, PADV2)", is_op("relax.nn.pad")(wildcard()), "nn.pad(int8 x, constant fill)"),
    )


def quantized_fill(value: float, out: QTensor) -> int:
    """quantize(v) as TVM's CPU build and onnxruntime compute it: float32 v / scale rounded
    half to even, plus the zero point, clamped to the dtype."""
    lo, hi = _DTYPE_RANGE[out.dtype]
    q = np.round(np.float32(value) / np.float32(out.scale)) + out.zero_point
    return int(np.clip(q, lo, hi))


def _extract_pad(root, bindings) -> QPad:
    e = resolve(root, bindings)
    if op_name(e) == "relax.quantize":
        pad = resolve(e.args[0], bindings)
        deq = resolve(pad.args[0], bindings)
        x = deq.args[0]
        inp, out = _activation(deq, bindings, "input", x), _activation(e, bindings, "output", e)
        if str(pad.attrs.pad_mode) != "constant":
            raise Reject(f"PAD mode {pad.attrs.pad_mode}: the NPU pads with a constant")
        fill = quantized_fill(float(pad.attrs.pad_value), out)
        return QPad(inp, out, tuple(int_list(pad.attrs.pad_width)), fill, "qdq", operands=(x,))
    x = e.args[0]
    if str(e.attrs.pad_mode) != "constant":
        raise Reject(f"PAD mode {e.attrs.pad_mode}: the NPU pads with a constant")
    value = float(e.attrs.pad_value)
    out = _carried(root)
    lo, hi = _DTYPE_RANGE.get(out.dtype, (-128, 127))
    if value != int(value) or not lo <= value <= hi:
        raise Reject(f"PAD fill {value:g} of a {out.dtype} tensor: not one of its values")
    # a constant's pad (weights in the integer forms) is folded, not offloaded: not ours
    convention = "constant" if _is_constant(x, bindings) else "int8"
    return QPad(_carried(x), out, tuple(int_list(e.attrs.pad_width)), int(value), convention, operands=(x,))


# ---------------------------------------------------------------------------------------------
# Checks


def pad_same_quantization(op: QPad, hw: HwConfig) -> str | None:
    """A pad keeps the quantization (input and output share scale and zero point): the NPU copies the bytes."""
    if not C.same_quantization(op.input, op.output):
        return (f"PAD rescales (input scale {op.input.scale:.6g} zp {op.input.zero_point}, output scale "
                f"{op.output.scale:.6g} zp {op.output.zero_point}): an NPU pad copies the bytes")
    return None


def pad_axes(op: QPad, hw: HwConfig) -> str | None:
    """A tensor of rank 1 to 4 padded on any axis but the batch (the first of a rank-3 or rank-4 tensor), widths >= 0."""
    w = op.widths
    rank = len(w) // 2
    if not 1 <= rank <= 4:
        return f"PAD of a rank-{rank} tensor: the NPU pads tensors of rank 1 to 4"
    if min(w) < 0:
        return f"PAD widths {list(w)}: negative widths (cropping) are not a pad"
    if rank >= 3 and (w[0] or w[1]):
        return f"PAD widths {list(w)} pad the batch axis: the NPU runs image by image"
    return None


# ---------------------------------------------------------------------------------------------
# Lowering


def _npu_axes(rank: int, layout: str) -> tuple[int | None, ...]:
    """The NPU axis (0 = H, 1 = W, 2 = C; None: the batch) of each axis of a rank-``rank``
    tensor laid out as ``layout`` (limits.hwc's mapping)."""
    return {4: {"NHWC": (None, 0, 1, 2), "NCHW": (None, 2, 0, 1)}, 3: {"NHWC": (None, 1, 2), "NCHW": (None, 2, 1)},
            2: {"NHWC": (1, 2), "NCHW": (1, 2)}, 1: {"NHWC": (2,), "NCHW": (2,)}}[rank][layout]  # fmt: skip


def _spatial_layout(widths) -> str:
    """The layout a pad lowered alone (the dry run) maps: NCHW when it pads only NCHW's spatial
    axes (a pad of axis 2 alone is H of NCHW and W of NHWC, the same copy either way), else NHWC."""
    padded = {k for k in range(len(widths) // 2) if widths[2 * k] or widths[2 * k + 1]}
    return "NCHW" if len(widths) == 8 and padded <= set(_SPATIAL["NCHW"]) else "NHWC"


def _lower_pad(name: str, op: QPad, ifms: list[TensorRef], ofm: TensorRef) -> Pad:
    widths = op.widths
    rank = len(widths) // 2
    layout = op.layout if rank in (3, 4) else "NHWC"
    if op.layout is None:  # lowered alone (the dry run: tensors mapped as NCHW): the layout the widths fit
        layout = _spatial_layout(widths)
        if layout == "NHWC":
            one = (lambda s: (1, *s[1:])) if rank >= 3 else tuple  # one image
            ifms = [TensorRef(ifms[0].name, ifms[0].region, 0, hwc(one(op.input.shape), layout), layout)]
            ofm = TensorRef(ofm.name, ofm.region, 0, hwc(one(op.output.shape), layout), layout)
    pads = [[0, 0], [0, 0], [0, 0]]  # (before, after) of H, W, C
    for k, axis in enumerate(_npu_axes(rank, layout)):
        if axis is None and (widths[2 * k] or widths[2 * k + 1]):
            raise Reject(f"PAD widths {list(widths)} pad the batch axis: the NPU runs image by image")
        if axis is not None:
            pads[axis] = [widths[2 * k], widths[2 * k + 1]]
    (top, bottom), (left, right), channels = pads
    padding = (top, left, bottom, right)
    fill = op.fill - 128 if op.output.source_dtype == "uint8" else op.fill  # as the bytes are flipped
    pad = Pad(name, ifms[0], ofm, padding, fill, channels=tuple(channels))
    grown = tuple(n + a + b for n, (a, b) in zip(ifms[0].shape, pads))
    if grown != tuple(ofm.shape):
        raise Reject(f"PAD of {ifms[0].shape} by {[tuple(p) for p in pads]} does not give {ofm.shape}")
    return pad


# ---------------------------------------------------------------------------------------------
# Golden semantics


def golden_pad(op: Pad, x: np.ndarray) -> np.ndarray:
    t, l, b, r = op.padding
    return np.pad(x, ((t, b), (l, r), op.channels), constant_values=np.int8(op.fill))


# ---------------------------------------------------------------------------------------------
# Registry


ENTRY = NpuPattern(
    name="npu.pad",
    summary="constant PAD of any axis but the batch (rank <= 4), any fill: an identity copy into the interior, "
            "constant-LUT border strips",
    anchor_ops=("relax.nn.pad",),
    conventions=_pad_conventions(),
    extract=_extract_pad,
    checks=(*C.COMMON, pad_same_quantization, pad_axes),
    applies=lambda op: op.convention != "constant" and op.input.dtype in _INT_ACTIVATIONS,
    moves_data=True,
)

ENTRIES = (ENTRY,)
LOWERINGS = {QPad: _lower_pad}
NPU_OPS = {Pad: NpuOpSpec(golden_pad, "phased", describe=lambda op: f"pad {shape_text(op)}",
                          report_class=("pad", "pad (copies)"))}  # fmt: skip
