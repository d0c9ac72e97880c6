"""RESIZE_BILINEAR: bilinear resize by an integer factor as LiteRT's int8 kernel computes it,
run as depthwise passes per output phase: the convention, extraction into a
:class:`QResizeBilinear`, checks and lowering to :class:`ResizeBilinear`. The passes (and the
kernel the golden model runs) are :mod:`npu_byoc.ops.resize_passes`, below the typed NPU ops
that compute them."""

from __future__ import annotations

from tvm.relax.dpl import is_op, wildcard

from . import checks as C
from ._qdq import _activation, _carried, _deq, _quant
from ..arch.config import HwConfig
from .entry import Convention, NpuPattern
from .lowering import with_phases
from .npu_ops import NpuOp, ResizeBilinear, TensorRef
import numpy as np

from .npu_op_spec import NpuOpSpec, shape_text
from .resize_passes import passes
from .resize_passes import passes, reference
from .records import QResizeBilinear, Reject
from ..util.relax_utils import resolve


# ---------------------------------------------------------------------------------------------
# Extraction


_RESIZE_MODES = {"half_pixel": (False, True), "align_corners": (True, False), "asymmetric": (False, False)}


def _extract_resize_bilinear(root, bindings) -> QResizeBilinear:
    """dequantize(x) -> image.resize2d(linear) -> quantize: TVM's import of TFLite RESIZE_BILINEAR."""
    q = resolve(root, bindings)
    resize = resolve(q.args[0], bindings)
    deq = resolve(resize.args[0], bindings)
    a = resize.attrs
    mode = str(a.coordinate_transformation_mode)
    if str(a.method) == "nearest_neighbor":  # npu.gather's: a copy
        return QResizeBilinear(_carried(deq.args[0]), _carried(q), False, False, str(a.layout), "nearest")
    if str(a.method) != "linear" or mode not in _RESIZE_MODES:
        raise Reject(f"resize2d {a.method} with {mode} coordinates: the NPU runs bilinear with half-pixel, "
                     "align-corners or asymmetric coordinates")  # fmt: skip
    x = deq.args[0]
    align, half = _RESIZE_MODES[mode]
    return QResizeBilinear(_activation(deq, bindings, "input", x), _activation(q, bindings, "output", q), align, half,
                           str(a.layout), "qdq", operands=(x,))  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Checks


def resize_same_quantization(op, hw: HwConfig) -> str | None:
    """Input and output share scale and zero point: LiteRT's int8 RESIZE_BILINEAR interpolates the integers and does not rescale."""
    if not C.same_quantization(op.input, op.output):
        return (f"RESIZE_BILINEAR input (scale {op.input.scale:.6g} zp {op.input.zero_point}) quantized unlike its output "
                f"(scale {op.output.scale:.6g} zp {op.output.zero_point}): LiteRT's int8 kernel does not rescale")
    return None


def resize_passes(op, hw: HwConfig) -> str | None:
    """The resize is by an integer factor per axis and its weights fit int8 depthwise passes with a power-of-two requantize, at most MAX_SEGMENTS of them (npu_byoc.ops.resize): 2x and 4x with half-pixel centres or neither always are. Each pass is a depthwise kick over all the channels with 1 or 2 taps per axis, so max_channels and max_kernel bind it."""
    if op.layout != "NHWC":
        return f"RESIZE_BILINEAR in {op.layout}: the NPU runs LiteRT's NHWC int8 kernel"
    (_, h, w, _), (_, oh, ow, _) = op.input.shape, op.output.shape
    return C.geometry_reason(lambda: passes((h, w), (oh, ow), op.align_corners, op.half_pixel))


# ---------------------------------------------------------------------------------------------
# Lowering


def _lower_resize_bilinear(name: str, op: QResizeBilinear, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    out = ResizeBilinear(name=name, ifm=ifms[0], ofm=ofm, align_corners=op.align_corners, half_pixel=op.half_pixel)
    return with_phases(out, "")


# ---------------------------------------------------------------------------------------------
# Table entry


ENTRY = NpuPattern(
    name="npu.resize_bilinear",
    summary="bilinear resize by an integer factor (RESIZE_BILINEAR, LiteRT's int8 kernel): depthwise passes per output phase",
    anchor_ops=("relax.image.resize2d",),
    conventions=(Convention("qdq", "TFLite RESIZE_BILINEAR", _quant(is_op("relax.image.resize2d")(_deq(), wildcard())),
                            "dequantize(x) → image.resize2d(linear) → quantize"),),
    extract=_extract_resize_bilinear,
    checks=(*C.COMMON, resize_same_quantization, resize_passes),
    applies=lambda op: op.convention != "nearest",
)


ENTRIES = (ENTRY,)
LOWERINGS = {QResizeBilinear: _lower_resize_bilinear}


# ---------------------------------------------------------------------------------------------
# Golden semantics, tiling (the typed op's spec: npu_byoc.ops.npu_op_spec)


def golden_resize_bilinear(op: ResizeBilinear, x: np.ndarray) -> np.ndarray:
    """LiteRT's integer kernel on the whole map, not the depthwise passes the NPU runs."""
    return reference(x, op.ofm.shape[:2], op.align_corners, op.half_pixel)


NPU_OPS = {ResizeBilinear: NpuOpSpec(golden_resize_bilinear, "phased",
                                     describe=lambda op: f"bilinear resize {shape_text(op)} ({len(op.phases)} depthwise passes)")}  # fmt: skip
