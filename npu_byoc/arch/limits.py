"""Limits of the NPU that the partition checks and the compiler share, each from one definition.

- shapes: every tensor is an H x W x C feature map (:func:`hwc`: ranks 1, 2 and 4; the one
  batch: :func:`batch_of` / :func:`per_image` split a batch into the images the NPU runs one
  after the other, :func:`batch_reason` is the limit each image meets);
- registers: every dimension and every byte offset must fit the register that carries it
  (npu_byoc.arch.encoder.to_word, the encoder's own range check);
- the op lowered alone (the lowering registry npu_byoc.ops.registry.LOWERINGS): its shifts in
  the ranges the stream machine accepts, and the scheduler's own tiling search for the SRAM
  (npu_byoc.codegen.tiling.untileable_reason).

The checks (npu_byoc.ops.checks and each op's own, npu_byoc.ops.<op>) call these, so the
partition refuses exactly what lowering, scheduling and encoding would refuse.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from .config import HwConfig
from .isa import SHIFT_MAX, SHIFT_MIN, Reg, Region


class ShapeError(ValueError):
    """A tensor shape the NPU cannot map to an H x W x C feature map; the text is the reason."""


def batch_reason(shape: Sequence[int]) -> str | None:
    """The batch limit of one image (the first axis of a 3-D or 4-D tensor): a batch-N op runs as N
    images (:func:`per_image`), so this holds for any N that splits."""
    if len(shape) in (3, 4) and int(shape[0]) != 1:
        return f"batch {int(shape[0])}: the NPU runs batch 1"
    return None


def batch_of(shapes: Iterable[Sequence[int]]) -> int:
    """The images of an op or a partition: the common first axis of its 3-D and 4-D tensors (1
    if none)."""
    batches = sorted({int(s[0]) for s in shapes if len(s) in (3, 4)})
    if len(batches) > 1:
        raise ShapeError(f"tensors with batches {batches}: NPU partitions run image by image")
    return batches[0] if batches else 1


def per_image(shape: Sequence[int], batch: int) -> tuple[int, ...]:
    """One image's part of a tensor of a batch-``batch`` op: a 4-D tensor's first axis, a 2-D
    tensor's share of the rows (fully connected rows are independent). Raises ShapeError."""
    shape = tuple(int(d) for d in shape)
    if batch == 1:
        return shape
    if len(shape) in (2, 3, 4) and shape[0] % batch == 0:
        return (shape[0] // batch, *shape[1:])
    raise ShapeError(f"shape {list(shape)} does not split into the batch of {batch} images: "
                     "NPU partitions run image by image")  # fmt: skip


def rank_reason(shape: Sequence[int]) -> str | None:
    if len(shape) not in (1, 2, 3, 4):
        return f"tensor of rank {len(shape)}: the NPU maps tensors of rank 1 to 4"
    return None


def hwc(shape: Sequence[int], layout: str) -> tuple[int, int, int]:
    """The H x W x C feature map the NPU sees for a tensor of ``shape`` (raises ShapeError)."""
    shape = tuple(int(d) for d in shape)
    reason = rank_reason(shape) or batch_reason(shape)
    if reason:
        raise ShapeError(reason)
    if len(shape) == 4:
        return (shape[1], shape[2], shape[3]) if layout == "NHWC" else (shape[2], shape[3], shape[1])
    if len(shape) == 3:  # a sequence (Conv1D's [N, L, C]; NCHW: [N, C, L]): one row of L pixels
        return (1, shape[1], shape[2]) if layout == "NHWC" else (1, shape[2], shape[1])
    if len(shape) == 2:  # (rows, features)
        return (1, shape[0], shape[1])
    return (1, 1, shape[0])


def channel_broadcast(full: Sequence[int], vector: Sequence[int], out: Sequence[int]) -> str | None:
    """The layout in which ``vector`` is one channel vector broadcast over ``full`` = ``out``
    (a squeeze-excite gate, the NPU's IFM2_BROADCAST): "NHWC" for [1, 1, 1, C] over
    [1, H, W, C], "NCHW" for [1, C, 1, 1] over [1, C, H, W]; None if neither. Lowering, which
    knows the partition's layout, keeps the op only when the layouts agree."""
    full, vector, out = (tuple(int(d) for d in s) for s in (full, vector, out))
    if len(out) not in (3, 4) or full != out or full == vector:
        return None
    if vector == (*[1] * (len(out) - 1), out[-1]):  # [1, 1, 1, C] (a sequence's [1, 1, C])
        return "NHWC"
    return "NCHW" if vector == (1, out[1], *[1] * (len(out) - 2)) else None


def binary_layout(op) -> str:
    """The layout an elementwise ADD / MUL record is lowered alone in: NCHW for a [1, C, 1, 1]
    channel vector over an NCHW image (the unit's fast IFM2_BROADCAST), else NHWC. A rank-3
    [1, L, 1] vector is a transformer's per-token vector far more often than an NCHW sequence's
    channels: NHWC, where the DMA repeats it (a stride-0 view), and it never turns a partition
    that reads [N, L, C] as channels-last into an NCHW one."""
    a, b, out = op.input_a.shape, op.input_b.shape, op.output.shape
    if len(out) != 4:
        return "NHWC"
    return channel_broadcast(a, b, out) or channel_broadcast(b, a, out) or "NHWC"


_SHAPE_REGS = (Reg.IFM_H, Reg.IFM_W, Reg.IFM_C)


def register_reason(shape: tuple[int, int, int]) -> str | None:
    """Why a feature map of ``shape`` cannot be addressed: a dimension wider than its shape
    register, or a byte beyond what DMA_EXT_ADDR reaches."""
    from .encoder import to_word

    for reg, d in zip(_SHAPE_REGS, shape):
        try:
            to_word(reg, d)
        except ValueError as err:
            return f"dimension {d}: wider than the NPU's 32-bit shape registers ({err})"
    nbytes = shape[0] * shape[1] * shape[2]
    try:
        to_word(Reg.DMA_EXT_ADDR, nbytes - 1)  # the last byte of a tensor at offset 0
    except ValueError:
        return f"tensor of {nbytes} bytes: the NPU's DMA addresses 4 GiB (DMA_EXT_ADDR is 32 bits)"
    return None




# The typed NPU ops' shift fields and the range the machine accepts in each (isa: the
# requantize table's and the rescale registers' shifts; ADD's LEFT_SHIFT).
SHIFT_FIELDS = {
    "shift": (SHIFT_MIN, SHIFT_MAX), "ifm_shift": (SHIFT_MIN, SHIFT_MAX), "ifm2_shift": (SHIFT_MIN, SHIFT_MAX),
    "ofm_shift": (SHIFT_MIN, SHIFT_MAX), "left_shift": (0, 31),
}  # fmt: skip


def shift_reason(npu_op) -> str | None:
    """Why a lowered op's shifts are outside what the NPU runs (the stream machine's check)."""
    for name, (lo, hi) in SHIFT_FIELDS.items():
        if hasattr(npu_op, name):
            v = np.atleast_1d(np.asarray(getattr(npu_op, name), np.int64))
            bad = (v < lo) | (v > hi)
            if bad.any():
                return (f"{npu_op.kind} {name} {int(v[bad][0])}: NPU shifts lie in [{lo}, {hi}] "
                        "(a scale too small or too large for the others)")  # fmt: skip
    return None


__all__ = ["ShapeError", "channel_broadcast", "binary_layout", "batch_reason", "batch_of", "per_image", "rank_reason", "hwc", "register_reason", "shift_reason", "SHIFT_FIELDS"]  # fmt: skip
