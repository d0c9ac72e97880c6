"""Each NPU operation lowered alone: a quantized-op record and the tensors it reads and writes
-> a typed, integer-only NPU op (the real-valued scales become multipliers, shifts and
tables here, and nowhere after). LOWERINGS is the registry by record type; the partition's
placement of tensors in regions is npu_byoc.codegen.lower."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ..arch import limits
from ..arch import numerics as nx
from ..errors import LoweringError
from . import lut as lut_ops, softmax
from .records import (
    QAdd, QConcat, QConv2D, QFullyConnected, QGather, QLut, QMean, QMul, QOp, QPool2D, QReshape,
    QResizeBilinear, QSoftmax, QTransposeConv2D,
)  # fmt: skip
from .records import Reject
from .requant import fc_scale, weighted_requant
from .npu_ops import (
    IDENTITY_TABLE, Add, Conv2D, DepthwiseConv2D, FullyConnected, Gather, Lut, Mean, Mul, NpuOp, Phased,
    Pool, ResizeBilinear, Softmax, TensorRef, TransposeConv2D,
)  # fmt: skip


def hwc(shape: tuple[int, ...], layout: str) -> tuple[int, int, int]:
    try:  # one definition of the shapes (and the batch) the NPU maps, shared with the checks
        return limits.hwc(shape, layout)
    except limits.ShapeError as err:
        raise Reject(str(err)) from None


def partition_batch(shapes) -> int:
    """The images per call of a partition: the common first dimension of its 4-D tensors."""
    try:
        return limits.batch_of(shapes)
    except limits.ShapeError as err:
        raise Reject(str(err)) from None


def per_image(shape: tuple[int, ...], batch: int) -> tuple[int, ...]:
    """One image's part of a tensor of a batch-``batch`` partition (2-D: its share of the rows)."""
    try:
        return limits.per_image(shape, batch)
    except limits.ShapeError as err:
        raise Reject(str(err)) from None


def view(ref: TensorRef, shape: tuple[int, int, int]) -> TensorRef:
    """The same bytes seen with another H x W x C shape (memory order must agree)."""
    if ref.shape == shape:
        return ref
    if ref.is_slice:
        raise Reject(f"{ref.name}: cannot view a channel slice {ref.shape} as {shape}")
    same_order = ref.layout == "NHWC" or ref.shape[0] * ref.shape[1] == 1
    if not same_order or ref.nbytes != shape[0] * shape[1] * shape[2]:
        raise Reject(f"{ref.name}: cannot view {ref.shape} {ref.layout} as {shape}")
    return TensorRef(ref.name, ref.region, ref.offset, shape, "NHWC")


# ---------------------------------------------------------------------------------------------
# One lowering per quantized-op record type.


def dilate_kernel(weight: np.ndarray, dilation) -> np.ndarray:
    """OHWI weights with d - 1 zeros between taps: the dilated conv as an undilated one
    (exact: a zero weight adds nothing to the accumulator)."""
    dh, dw = (int(d) for d in dilation)
    if (dh, dw) == (1, 1):
        return weight
    o, kh, kw, i = weight.shape
    out = np.zeros((o, (kh - 1) * dh + 1, (kw - 1) * dw + 1, i), weight.dtype)
    out[:, ::dh, ::dw, :] = weight
    return out


def _lower_conv(name: str, op: QConv2D, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    mult, shift = weighted_requant(op)
    weight = dilate_kernel(op.weight, op.dilation)
    common = dict(
        name=name,
        ifm=ifms[0],
        ofm=ofm,
        bias=op.bias.astype(np.int32),
        multiplier=mult,
        shift=shift,
        ifm_zero_point=op.input.zero_point,
        ofm_zero_point=op.output.zero_point,
        stride=tuple(op.strides),
        padding=tuple(op.padding),
        act_min=op.act_min,
        act_max=op.act_max,
        dilation=tuple(int(d) for d in op.dilation),
    )
    if op.depthwise:
        return DepthwiseConv2D(weights=np.ascontiguousarray(weight[:, :, :, 0]), **common)
    return Conv2D(weights=np.ascontiguousarray(weight), **common)


def _lower_transpose_conv(name: str, op: QTransposeConv2D, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    mult, shift = weighted_requant(op)
    out = TransposeConv2D(
        name=name, ifm=ifms[0], ofm=ofm, weights=np.ascontiguousarray(op.weight), bias=op.bias.astype(np.int32),
        multiplier=mult, shift=shift, ifm_zero_point=op.input.zero_point, ofm_zero_point=op.output.zero_point,
        stride=tuple(op.strides), pad_before=tuple(op.padding[:2]), act_min=op.act_min, act_max=op.act_max,
    )  # fmt: skip
    return _with_phases(out, "conv2d_transpose: ")


def _lower_gather(name: str, op: QGather, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    from .gather import decompose

    try:
        g = decompose(op.index, op.input.shape, op.layout or "NHWC")
    except ValueError as err:
        raise Reject(str(err)) from None
    return Gather(name=name, ifm=ifms[0], ofm=ofm, rows=g.rows, cols=g.cols, c0=g.c0)


def _lower_resize_bilinear(name: str, op: QResizeBilinear, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    out = ResizeBilinear(name=name, ifm=ifms[0], ofm=ofm, align_corners=op.align_corners, half_pixel=op.half_pixel)
    return _with_phases(out, "")


def _with_phases(op: Phased, prefix: str) -> Phased:
    """``op`` once its phases are computed (cached on it); a geometry they cannot take is a Reject."""
    try:
        op.phases
    except ValueError as err:
        raise Reject(f"{prefix}{err}") from None
    return op


def _lower_fc(name: str, op: QFullyConnected, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    mantissa, exponent = fc_scale(op)
    rows = ofm.shape[0] * ofm.shape[1] * ofm.shape[2] // op.out_features
    return FullyConnected(
        name=name,
        ifm=view(ifms[0], (1, rows, op.in_features)),
        ofm=view(ofm, (1, rows, op.out_features)),
        weights=np.ascontiguousarray(op.weight),
        bias=op.bias.astype(np.int32),
        mantissa=np.ascontiguousarray(mantissa),
        exponent=np.ascontiguousarray(exponent),
        ifm_zero_point=op.input.zero_point,
        ofm_zero_point=op.output.zero_point,
        act_min=op.act_min,
        act_max=op.act_max,
    )


def _lower_pool(name: str, op: QPool2D, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    return Pool(
        name=name,
        pool=op.kind,
        ifm=ifms[0],
        ofm=ofm,
        kernel=tuple(op.pool_size),
        stride=tuple(op.strides),
        padding=tuple(op.padding),
        act_min=op.act_min,
        act_max=op.act_max,
    )


def _lower_mean(name: str, op: QMean, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    h, w, c = ifms[0].shape
    mult, shift = nx.mean_params(op.input.scale, op.output.scale, h * w)
    return Mean(
        name=name,
        ifm=ifms[0],
        ofm=view(ofm, (1, 1, c)),
        ifm_zero_point=op.input.zero_point,
        ofm_zero_point=op.output.zero_point,
        multiplier=int(mult),
        shift=int(shift),
        act_min=op.act_min,
        act_max=op.act_max,
    )


def _binary_operands(word: str, op: QAdd | QMul, ifms: list[TensorRef], ofm: TensorRef):
    """(first, second, their refs, broadcast): the second is the channel vector of a broadcast
    (the operands swapped if the model gives it first; ADD and MUL commute exactly)."""
    (a, b), (ra, rb) = (op.input_a, op.input_b), ifms
    if ra.shape != ofm.shape:
        (a, b), (ra, rb) = (b, a), (rb, ra)
    if ra.shape == rb.shape == ofm.shape:
        return a, b, ra, rb, False
    if ra.shape == ofm.shape and rb.shape == (1, 1, ofm.shape[2]):  # any layout: C contiguous bytes
        return a, b, ra, rb, True
    raise Reject(f"{word} with broadcasting {op.input_a.shape} × {op.input_b.shape}: NPU {word} broadcasts only a "
                 "channel vector in the partition's layout (NHWC [1, 1, 1, C], NCHW [1, C, 1, 1])")


def _lower_add(name: str, op: QAdd, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    a, b, ifm, ifm2, broadcast = _binary_operands("add", op, ifms, ofm)
    try:
        p = nx.add_params(a.scale, b.scale, op.output.scale)
    except ValueError as err:
        raise Reject(f"add rescaling out of range: {err}") from None
    return Add(
        name=name,
        ifm=ifm,
        ifm2=ifm2,
        broadcast=broadcast,
        ofm=ofm,
        ifm_zero_point=a.zero_point,
        ifm2_zero_point=b.zero_point,
        ofm_zero_point=op.output.zero_point,
        left_shift=p.left_shift,
        ifm_multiplier=p.input1_multiplier,
        ifm_shift=p.input1_shift,
        ifm2_multiplier=p.input2_multiplier,
        ifm2_shift=p.input2_shift,
        ofm_multiplier=p.output_multiplier,
        ofm_shift=p.output_shift,
        act_min=op.act_min,
        act_max=op.act_max,
    )


def _lower_mul(name: str, op: QMul, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    a, b, ifm, ifm2, broadcast = _binary_operands("mul", op, ifms, ofm)
    try:
        multiplier, shift = nx.mul_params(a.scale, b.scale, op.output.scale)
    except ValueError as err:
        raise Reject(f"mul rescale out of range: {err}") from None
    return Mul(name=name, ifm=ifm, ifm2=ifm2, ofm=ofm, ifm_zero_point=a.zero_point, ifm2_zero_point=b.zero_point,
               ofm_zero_point=op.output.zero_point, multiplier=multiplier, shift=shift, act_min=op.act_min,
               act_max=op.act_max, broadcast=broadcast)  # fmt: skip


def _lower_lut(name: str, op: QLut, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    return Lut(name=name, function=op.function, ifm=ifms[0], ofm=ofm, table=lut_ops.table(op))


def _lower_softmax(name: str, op: QSoftmax, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    return Softmax(name=name, ifm=ifms[0], ofm=ofm, table=softmax.exp_table(op.input.scale, op.beta))


def last_axis_as_channels(ref: TensorRef) -> TensorRef:
    """``ref`` (H, W, C) seen as (H, C, W) in place: a strided view whose channels are the W axis.
    A partition that holds its tensors NCHW maps the model's last axis to W (limits.hwc), and the
    NPU's SOFTMAX runs over channels: through this view it runs over the model's last axis, so a
    softmax is placed alike whatever the layout of the ops it shares a partition with."""
    s_h, s_w, s_c = ref.strides
    h, w, c = ref.shape
    return TensorRef(ref.name, ref.region, ref.offset, (h, c, w), ref.layout, ref.pitch, (s_h, s_c, s_w))


LOWERINGS: dict[type, Callable[[str, QOp, list[TensorRef], TensorRef], NpuOp]] = {
    QConv2D: _lower_conv,
    QTransposeConv2D: _lower_transpose_conv,
    QFullyConnected: _lower_fc,
    QPool2D: _lower_pool,
    QMean: _lower_mean,
    QAdd: _lower_add,
    QMul: _lower_mul,
    QLut: _lower_lut,
    QSoftmax: _lower_softmax,
    QGather: _lower_gather,
    QResizeBilinear: _lower_resize_bilinear,
}
