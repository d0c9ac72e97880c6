"""MEAN / SUM-free MEAN with requantize over the axes the MEAN unit can reach: the spatial axes
(global average pooling), and through a strided view any axis set whose reduced axes the DMA can
lay out as the unit's H x W and whose kept axes as its channels. A mean over each pixel's (or
token's) channels, LayerNorm's, lowers to :class:`ChannelMean` instead: a 1x1 CONV that reads
the map as it lies. The conventions, extraction into a :class:`QMean`, checks and lowering to
:class:`Mean` / :class:`ChannelMean`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tvm.relax.dpl import is_op, wildcard

from . import checks as C
from ._qdq import _Tail, _activation, _deq, _qdq_unary, _qparams, _requant_tail
from ..arch import numerics as nx
from ..arch.config import HwConfig
from ..arch.limits import ShapeError, batch_of, per_image
from .conv2d import conv_unit_reason
from .entry import Convention, NpuPattern
from .lowering import hwc, view
from .npu_ops import Conv2D, Mean, NpuOp, TensorRef
from .npu_op_spec import NpuOpSpec, what
from .records import QMean, QTensor, Reject
from ..util.relax_utils import dtype_of, op_name, resolve, shape_of


# ---------------------------------------------------------------------------------------------
# Conventions and extraction


def _mean_conventions() -> tuple[Convention, ...]:
    qdq = _qdq_unary(lambda x: is_op("relax.mean")(x), "dequantize(x) → mean")
    int_body = _deq(is_op("relax.mean")(is_op("relax.astype")(wildcard())))
    form = "astype(x, int32) → mean → dequantize(s_x, zp_x)"
    integer = [
        Convention(f"int32-requantize{t}", "hand-written Relax", p, form + f)
        for t, p, f in _requant_tail(int_body)
    ]
    return tuple(qdq + integer)


def _extract_mean(root, bindings) -> QMean:
    tail = _Tail(root, bindings)
    body = tail.body
    if op_name(body) == "relax.dequantize":  # astype(int32) -> mean -> requantize
        requant = body
        mean = resolve(body.args[0], bindings)
        x = resolve(mean.args[0], bindings)
        if op_name(x) != "relax.astype":
            raise Reject("integer mean input is not cast from int8")
        x = x.args[0]
        scale, zp, _ = _qparams(requant, bindings, "input")
        if scale.size != 1:
            raise Reject("input is quantized per-channel: NPU activations are per-tensor")
        inp = QTensor(shape_of(x), dtype_of(x), float(scale.item()), int(zp.item()))
        convention = "int32-requantize"
    else:
        mean = body
        x_deq = resolve(mean.args[0], bindings)
        x = x_deq.args[0]
        inp = _activation(x_deq, bindings, "input", x)
        convention = "qdq"
    out = tail.output(bindings)
    lo, hi = tail.clamp(out, bindings)
    rank = len(inp.shape)
    axes = tuple(sorted(int(a) % rank for a in mean.attrs.axis)) if mean.attrs.axis is not None else tuple(range(rank))
    # Axes that name a layout's spatial axes fix the layout; any other set (a channel mean) is
    # read through the partition's layout, which lowering fills in (QMean.takes_partition_layout).
    layout = {(4, (1, 2)): "NHWC", (4, (2, 3)): "NCHW", (3, (1,)): "NHWC"}.get((rank, axes))
    return QMean(
        input=inp,
        output=out,
        axes=axes,
        keepdims=bool(mean.attrs.keepdims),
        layout=layout,
        act_min=lo,
        act_max=hi,
        convention=convention,
        operands=(x,),
    )


# ---------------------------------------------------------------------------------------------
# Checks


def _axis_positions(rank: int, layout: str) -> dict[int, int]:
    """Logical axis -> its H (0), W (1), C (2) position in the NPU's map (limits.hwc); a batch
    axis has none."""
    if rank == 4:
        return {1: 0, 2: 1, 3: 2} if layout == "NHWC" else {1: 2, 2: 0, 3: 1}
    if rank == 3:
        return {1: 1, 2: 2} if layout == "NHWC" else {1: 2, 2: 1}
    return {0: 1, 1: 2} if rank == 2 else {0: 2}


def _merged(dims: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(size, stride) dims, outer first, with size-1 dims dropped and neighbours that form one
    run (outer stride = inner stride x inner size) merged into one."""
    out: list[tuple[int, int]] = []
    for size, stride in dims:
        if size == 1:
            continue
        if out and out[-1][1] == stride * size:
            out[-1] = (out[-1][0] * size, stride)
        else:
            out.append((size, stride))
    return out


def _logical_dims(ref: TensorRef, rank: int, layout: str, axes) -> list[tuple[int, int]]:
    pos = _axis_positions(rank, layout)
    return [(ref.shape[pos[a]], ref.strides[pos[a]]) for a in axes]


def reduction_view(op: QMean, ifm: TensorRef, ofm: TensorRef, layout: str) -> tuple[TensorRef, TensorRef]:
    """(input, output) of the MEAN unit for ``op`` in a partition of ``layout``: the input seen
    as (reduced, reduced, kept) through its strides and the output as (1, 1, kept), kept axes in
    the model's order. The spatial mean is the identity; LayerNorm's mean over the channels of
    [1, H, W, C] reads (1, C, H·W) with the pixels as the unit's channels. Raises Reject when the
    DMA cannot reach the set (two kept runs, three reduced ones)."""
    rank = len(op.input.shape)
    pos = _axis_positions(rank, layout)
    if any(a not in pos and op.input.shape[a] != 1 for a in op.axes):
        raise Reject(f"mean over axes {list(op.axes)} of a {rank}-D tensor reduces its batch axis")
    kept_axes = [a for a in pos if a not in op.axes]
    reduced = [d for d in _logical_dims(ifm, rank, layout, [a for a in pos if a in op.axes]) if d[0] != 1]
    reduced = reduced if len(reduced) <= 2 else _merged(reduced)  # a spatial mean keeps its H and W
    kept = _merged(_logical_dims(ifm, rank, layout, kept_axes))
    if len(reduced) > 2 or len(kept) > 1:
        raise Reject(f"mean over axes {list(op.axes)} of a {rank}-D tensor: the NPU's MEAN reduces up to two "
                     "strided axes and keeps one run of the others")  # fmt: skip
    unit = (1, max(ifm.nbytes, 1))  # a size-1 axis: any stride but 0 (0 marks a broadcast)
    (r_h, s_h), (r_w, s_w) = ([unit] * 2 + reduced)[-2:]
    (n, s_n) = (kept or [(1, 1)])[0]
    src = TensorRef(ifm.name, ifm.region, ifm.offset, (r_h, r_w, n), ifm.layout, ifm.pitch, (s_h, s_w, s_n))
    out_rank = len(op.output.shape)
    out_dims = _merged(_logical_dims(ofm, out_rank, layout, list(_axis_positions(out_rank, layout))))
    if len(out_dims) > 1 or math.prod(d for d, _ in out_dims) != n:
        raise Reject(f"{ofm.name}: cannot write the mean's {n} outputs {ofm.shape} {ofm.layout} as one run")
    s_o = out_dims[0][1] if out_dims else 1
    dst = TensorRef(ofm.name, ofm.region, ofm.offset, (1, 1, n), ofm.layout, ofm.pitch, (n * s_o, n * s_o, s_o))
    if s_o == 1 and not ofm.is_slice and (ofm.layout == "NHWC" or ofm.shape[0] * ofm.shape[1] == 1):
        dst = view(ofm, (1, 1, n))  # one dense run: the same bytes, no strides
    if src.shape == ifm.shape and all(d == 1 or a == b for d, a, b in zip(src.shape, src.strides, ifm.strides)):
        src = ifm  # the spatial mean: its input as it is
    return src, dst


def mean_axes(op: QMean, hw: HwConfig) -> str | None:
    """Mean reduces the spatial axes of a map, the length of a sequence, or (through a strided view) any axes the DMA can lay out as the MEAN unit's H x W with the kept axes as its channels (LayerNorm's mean over channels)."""
    rank = len(op.input.shape)
    if rank > 4:
        return f"mean of a {rank}-D tensor: the NPU maps tensors of rank 1 to 4"
    layout = op.layout or "NHWC"
    try:  # one image's map: a batch-N mean runs image by image (its batch limit is checked apart)
        batch = batch_of([op.input.shape, op.output.shape])
        ifm = TensorRef("x", 0, 0, hwc(per_image(op.input.shape, batch), layout))
        ofm = TensorRef("y", 0, 0, hwc(per_image(op.output.shape, batch), layout))
        src, _ = reduction_view(op, ifm, ofm, layout)
    except (Reject, ShapeError) as err:
        return str(err)
    n = src.shape[0] * src.shape[1]
    if n > hw.max_mean_elements:
        return f"mean over {n} elements: NPU reduces up to {hw.max_mean_elements}"
    return None


def layout_is_guess(op) -> bool:
    """A MEAN record that reads the last axis of a rank-3 tensor as an NCHW sequence's length
    ([N, C, L]) guesses its layout: in a transformer's [N, L, C] the same axis is the channels.
    Extraction no longer makes such a record (a set of axes that names no layout's spatial axes
    takes the partition's layout, :func:`reduction_view`, so its reduced axis is the model's by
    construction); codegen.layout_agreement still refuses one where the partition contradicts it."""
    return isinstance(op, QMean) and op.layout == "NCHW" and len(op.input.shape) == 3


# ---------------------------------------------------------------------------------------------
# Lowering


@dataclass(eq=False)
class ChannelMean(Conv2D):
    """MEAN over the channels of each pixel (LayerNorm's), run as a 1x1 CONV with one output
    channel of all-ones weights, bias 0 and the MEAN's (multiplier, shift): the CONV's
    accumulator is then sum(x - ifm_zero_point) over the channels and its requantize is
    MultiplyByQuantizedMultiplier + ofm_zero_point, clamped: MEAN's arithmetic exactly. The MEAN
    unit would read the pixels as its channels through a strided view (one-byte DMA runs); the
    CONV reads the map as it lies. Its golden semantics are MEAN's (golden_channel_mean), not
    the CONV's, so the stream it runs is checked against the definition."""

    kind: str = field(default="channel_mean", init=False)

    @property
    def macs(self) -> int:
        return 0  # a reduction, as the MEAN unit's: no model MACs


def _channel_mean(name: str, op: QMean, ifm: TensorRef, ofm: TensorRef, layout: str) -> ChannelMean | None:
    """The CONV form of a mean whose reduced axes are exactly the channels of a dense map (size-1
    axes aside) and whose output is one dense run of the pixels; None otherwise."""
    rank = len(op.input.shape)
    pos = _axis_positions(rank, layout)
    reduced = {pos[a] for a in op.axes if a in pos and op.input.shape[a] != 1}
    h, w, c = ifm.shape
    if reduced != {2} or ifm.is_slice or ifm.strides[2] != 1 or ofm.is_slice or ofm.nbytes != h * w:
        return None
    try:
        dst = view(ofm, (h, w, 1))
    except Reject:
        return None
    mult, shift = nx.mean_params(op.input.scale, op.output.scale, c)
    return ChannelMean(
        name=name, ifm=ifm, ofm=dst, weights=np.ones((1, 1, 1, c), np.int8), bias=np.zeros(1, np.int32),
        multiplier=np.array([mult], np.int32), shift=np.array([shift], np.int32),
        ifm_zero_point=op.input.zero_point, ofm_zero_point=op.output.zero_point, stride=(1, 1),
        padding=(0, 0, 0, 0), act_min=op.act_min, act_max=op.act_max,
    )  # fmt: skip


def _lower_mean(name: str, op: QMean, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    layout = op.layout or "NHWC"
    if (conv := _channel_mean(name, op, ifms[0], ofm, layout)) is not None:
        return conv
    src, dst = reduction_view(op, ifms[0], ofm, layout)
    h, w, _ = src.shape
    mult, shift = nx.mean_params(op.input.scale, op.output.scale, h * w)
    return Mean(
        name=name,
        ifm=src,
        ofm=dst,
        ifm_zero_point=op.input.zero_point,
        ofm_zero_point=op.output.zero_point,
        multiplier=int(mult),
        shift=int(shift),
        act_min=op.act_min,
        act_max=op.act_max,
    )


# ---------------------------------------------------------------------------------------------
# Table entry


ENTRY = NpuPattern(
    name="npu.mean",
    summary="mean with requantize over the spatial axes (global average pooling), over each pixel's channels "
            "(LayerNorm: a 1x1 conv of all-ones weights) or, through a strided view, over other axes",
    anchor_ops=("relax.mean",),
    conventions=_mean_conventions(),
    extract=_extract_mean,
    checks=(*C.COMMON, mean_axes, C.requant_left_shift_fits(_lower_mean)),
)


ENTRIES = (ENTRY,)
LOWERINGS = {QMean: _lower_mean}


# ---------------------------------------------------------------------------------------------
# Golden semantics, unit limits (the typed op's spec: npu_byoc.ops.npu_op_spec)


def golden_mean(op: Mean, x: np.ndarray) -> np.ndarray:
    out = nx.mean(x, (0, 1), True, op.ifm_zero_point, op.ofm_zero_point, op.multiplier, op.shift)
    return np.clip(out, op.act_min, op.act_max).astype(np.int8)


def _unit_reason(npu_op: Mean, hw: HwConfig) -> str | None:
    if (n := npu_op.ifm.shape[0] * npu_op.ifm.shape[1]) > hw.max_mean_elements:
        return f"{what(npu_op)} reduces {n} elements: the NPU takes up to max_mean_elements={hw.max_mean_elements}"
    return None


def golden_channel_mean(op: ChannelMean, x: np.ndarray) -> np.ndarray:
    out = nx.mean(x, (2,), True, op.ifm_zero_point, op.ofm_zero_point, int(op.multiplier[0]), int(op.shift[0]))
    return np.clip(out, op.act_min, op.act_max).astype(np.int8)


NPU_OPS = {
    Mean: NpuOpSpec(golden_mean, "mean", lambda op: f"mean {'x'.join(map(str, op.ifm.shape))}", _unit_reason),
    ChannelMean: NpuOpSpec(golden_channel_mean, "spatial", unit_reason=conv_unit_reason, report_class=("mean", "mean")),
}
