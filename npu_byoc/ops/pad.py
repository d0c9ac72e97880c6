"""A standalone constant PAD of the spatial axes (TFLite PAD / PADV2, ONNX Pad in QDQ, Relax
nn.pad) with any fill, no opcode of its own: the NPU writes the output as disjoint boxes, the
input copied into the interior by the identity LUT and each border strip filled by a LUT whose
every entry is the fill (reading the input's first pixel again and again: a DMA box of stride 0).
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
    """out = the input with ``padding`` (top, left, bottom, right) rows and columns of ``fill``
    around it (H x W x C maps). The NPU writes disjoint boxes of the output: the interior, an
    identity-LUT copy of the input; the top and bottom strips (full width) and the left and
    right strips (the input's rows), each a LUT of constant ``fill`` reading the input's first
    pixel through a box of stride 0."""

    name: str
    ifm: TensorRef
    ofm: TensorRef
    padding: tuple[int, int, int, int]
    fill: int
    tiling: Tiling | None = None
    kind: str = field(default="pad", init=False)

    @property
    def macs(self) -> int:
        return 0

    @cached_property
    def phases(self) -> list[Lut]:
        t, l, b, r = self.padding
        h, w, c = self.ifm.shape
        wo = self.ofm.shape[1]
        table = np.full(256, self.fill, np.int8)
        out = [Lut(f"{self.name}[interior]", "copy", self.ifm, self.ofm.box(t, l, (h, w, c), name=f"{self.name}[interior]"),
                   IDENTITY_TABLE)]  # fmt: skip
        strips = (("top", 0, 0, t, wo), ("bottom", t + h, 0, b, wo), ("left", t, 0, h, l), ("right", t, l + w, h, r))
        for side, h0, w0, rows, cols in strips:
            if rows and cols:
                name = f"{self.name}[{side}]"
                src = self.ifm.box(0, 0, (rows, cols, c), (0, 0), name)
                out.append(Lut(name, "fill", src, self.ofm.box(h0, w0, (rows, cols, c), name=name), table))
        return out


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


def pad_spatial(op: QPad, hw: HwConfig) -> str | None:
    """A rank-4 tensor padded on its spatial axes only (H, W of NHWC or of NCHW), widths >= 0."""
    w = op.widths
    if len(w) != 8:
        return f"PAD of a rank-{len(w) // 2} tensor: the NPU pads the spatial axes of a rank-4 tensor"
    if min(w) < 0:
        return f"PAD widths {list(w)}: negative widths (cropping) are not a pad"
    padded = {k for k in range(4) if w[2 * k] or w[2 * k + 1]}
    if not any(padded <= set(axes) for axes in _SPATIAL.values()):
        return f"PAD widths {list(w)} pad the batch or channel axis: the NPU pads the spatial axes (H, W)"
    return None


# ---------------------------------------------------------------------------------------------
# Lowering


def _spatial_layout(widths) -> str | None:
    """The layout whose spatial axes are the only ones ``widths`` pad (NCHW first: a pad of
    axis 2 alone is H of NCHW and W of NHWC, the same copy either way)."""
    padded = {k for k in range(4) if widths[2 * k] or widths[2 * k + 1]}
    return next((lay for lay in ("NCHW", "NHWC") if padded <= set(_SPATIAL[lay])), None)


def _lower_pad(name: str, op: QPad, ifms: list[TensorRef], ofm: TensorRef) -> Pad:
    widths = op.widths
    layout = op.layout
    if layout is None:  # lowered alone (the dry run: tensors mapped as NCHW): the layout the widths fit
        layout = _spatial_layout(widths) or "NCHW"
        if layout == "NHWC":
            ifms = [TensorRef(ifms[0].name, ifms[0].region, 0, hwc((1, *op.input.shape[1:]), layout), layout)]
            ofm = TensorRef(ofm.name, ofm.region, 0, hwc((1, *op.output.shape[1:]), layout), layout)
    h, w = _SPATIAL[layout]
    if any(widths[2 * k] or widths[2 * k + 1] for k in range(4) if k not in (h, w)):
        raise Reject(f"PAD widths {list(widths)} pad the channel axis of a {layout} partition: "
                     "the NPU pads the spatial axes (H, W)")  # fmt: skip
    padding = (widths[2 * h], widths[2 * w], widths[2 * h + 1], widths[2 * w + 1])
    fill = op.fill - 128 if op.output.source_dtype == "uint8" else op.fill  # as the bytes are flipped
    pad = Pad(name, ifms[0], ofm, padding, fill)
    (h_in, w_in, c_in), (top, left, bottom, right) = ifms[0].shape, padding
    if (h_in + top + bottom, w_in + left + right, c_in) != tuple(ofm.shape):
        raise Reject(f"PAD of {ifms[0].shape} by {padding} does not give {ofm.shape}")
    return pad


# ---------------------------------------------------------------------------------------------
# Golden semantics


def golden_pad(op: Pad, x: np.ndarray) -> np.ndarray:
    t, l, b, r = op.padding
    return np.pad(x, ((t, b), (l, r), (0, 0)), constant_values=np.int8(op.fill))


# ---------------------------------------------------------------------------------------------
# Registry


ENTRY = NpuPattern(
    name="npu.pad",
    summary="constant PAD of the spatial axes, any fill: an identity copy into the interior, constant-LUT border strips",
    anchor_ops=("relax.nn.pad",),
    conventions=_pad_conventions(),
    extract=_extract_pad,
    checks=(*C.COMMON, pad_same_quantization, pad_spatial),
    applies=lambda op: op.convention != "constant" and op.input.dtype in _INT_ACTIVATIONS,
    moves_data=True,
)

ENTRIES = (ENTRY,)
LOWERINGS = {QPad: _lower_pad}
NPU_OPS = {Pad: NpuOpSpec(golden_pad, "phased", describe=lambda op: f"pad {shape_text(op)}",
                          report_class=("pad", "pad (copies)"))}  # fmt: skip
