"""The pieces every op's lowering shares (each op lowers itself in its module, npu_byoc.ops.<op>:
a quantized-op record and the tensors it reads and writes -> a typed, integer-only NPU op, the
real-valued scales become multipliers, shifts and tables there, and nowhere after). The
registry by record type is npu_byoc.ops.registry.LOWERINGS; the partition's placement of
tensors in regions is npu_byoc.codegen.lower."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..arch import limits
from .npu_ops import Phased, TensorRef
from .records import QAdd, QMul, QSub, Reject


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


def with_phases(op: Phased, prefix: str) -> Phased:
    """``op`` once its phases are computed (cached on it); a geometry they cannot take is a Reject."""
    try:
        op.phases
    except ValueError as err:
        raise Reject(f"{prefix}{err}") from None
    return op


def binary_operands(word: str, op: QAdd | QSub | QMul, ifms: list[TensorRef], ofm: TensorRef):
    """(first, second, their refs, broadcast) of a two-operand record (ADD, MUL, SQUARED_DIFFERENCE):
    the second is the channel vector of a broadcast (the operands swapped if the model gives it
    first; the three commute exactly). Any other broadcast (a pixel vector, a row, a scalar, both
    operands broadcast) is a stride-0 view of the smaller operand with the output's shape: the
    DMA repeats its bytes, the unit sees two full tensors (:func:`broadcast_view`)."""
    (a, b), (ra, rb) = (op.input_a, op.input_b), ifms
    if ra.shape != ofm.shape:
        (a, b), (ra, rb) = (b, a), (rb, ra)
    if ra.shape == rb.shape == ofm.shape:
        return a, b, ra, rb, False
    if ra.shape == ofm.shape and rb.shape == (1, 1, ofm.shape[2]):  # any layout: C contiguous bytes
        return a, b, ra, rb, True
    shapes = _padded_shapes(op, (a, b), (ra, rb), ofm)
    views = [broadcast_view(r, shape, ofm.shape) for r, shape in zip((ra, rb), shapes)]
    if None in views:
        raise Reject(f"{word} with broadcasting {op.input_a.shape} × {op.input_b.shape}: an operand is not "
                     f"broadcast along whole axes of the output's {ofm.shape} (H, W, C)")
    return a, b, views[0], views[1], False


def _padded_shapes(op: QAdd | QSub | QMul, qs, refs: tuple[TensorRef, TensorRef], ofm: TensorRef) -> list:
    """Each operand's H x W x C shape once its model shape is padded to the output's rank (as
    numpy broadcasts it): its ref's shape when the ranks agree, else mapped in the layout in
    which the record's shapes give its refs' shapes; None where no layout does."""
    out_rank = len(op.output.shape)
    layouts = [lay for lay in ("NHWC", "NCHW") if _maps(op.output.shape, ofm.shape, lay)
               and all(len(q.shape) == out_rank or _maps(q.shape, r.shape, lay) for q, r in zip(qs, refs))]  # fmt: skip
    shapes = []
    for q, r in zip(qs, refs):
        if len(q.shape) == out_rank:
            shapes.append(r.shape)
        elif layouts:
            shapes.append(hwc((1,) * (out_rank - len(q.shape)) + tuple(q.shape), layouts[0]))
        else:
            raise Reject(f"broadcast of {q.shape} to {op.output.shape}: the shapes map to no layout of the NPU's")
    return shapes


def _maps(shape, ref_shape, layout: str) -> bool:
    try:
        return limits.hwc(shape, layout) == ref_shape
    except limits.ShapeError:
        return False


def broadcast_view(ref: TensorRef, shape: tuple[int, int, int], out: tuple[int, int, int]) -> TensorRef | None:
    """``ref`` (whose H x W x C shape, its model shape padded to the output's rank, is
    ``shape``) seen with the output's shape ``out``: the stride of each broadcast axis 0, so a
    strided DMA repeats its bytes. None when an axis of ``shape`` is neither the output's nor 1."""
    if shape == out:
        return ref
    if any(d not in (1, o) for d, o in zip(shape, out)) or ref.nbytes != shape[0] * shape[1] * shape[2]:
        return None
    dense = view(ref, shape)  # the operand's model rank padded: the same bytes
    strides = tuple(0 if d == 1 and o > 1 else s for d, o, s in zip(shape, out, dense.strides))
    return TensorRef(ref.name, ref.region, ref.offset, out, ref.layout, ref.pitch, strides)


@dataclass(frozen=True)
class InPlace:
    """The lowering of an op that computes nothing itself: each input's producer writes its
    slice of the op's output in place (a concatenation, registry.IN_PLACE).

    ``place(op, srcs, placeable, model_layout) -> (slots, copies)``: the input vars ``srcs``
    written in place (src -> its slice) and the input indices copied in ((k, slice)), a var
    taken in place only when ``placeable(src)`` (the partition's say: produced by an op of the
    partition, not a partition output, not another op's slice); raises Reject when the op cannot
    be done. ``copy_in(layer, k, op, ifm, ofm)``: the NPU op that copies input ``k`` into its
    slice ``ofm``. A slice has ``of(ref, shape, name)``: the TensorRef it is in ``ref``."""

    place: Callable
    copy_in: Callable
    # ``sources(op, srcs)``: the operand feeding each of the op's inputs, None for a model
    # constant (copied in from the CONST region)
    sources: Callable = lambda op, srcs: list(srcs)
