"""TRANSPOSE of a rank <= 4 int8 tensor (TFLite TRANSPOSE, ONNX Transpose in QDQ, Relax
permute_dims) as strided DMA, no opcode of its own: the NPU reads the input through a view
whose strides are the input's, permuted (a DMA box), and copies it to the output with the
identity LUT (a requantize table when the output is quantized unlike the input), tile by tile. Everything the compiler knows about it is here: its record, its
typed op, conventions, extraction, checks, lowering, golden semantics and tiling kind."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

import numpy as np
from tvm.relax.dpl import is_op, wildcard

from . import checks as C
from ._qdq import _INT_ACTIVATIONS, _activation, _carried, _deq, _is_constant, _quant
from ..arch.config import HwConfig
from .entry import Convention, NpuPattern
from .npu_op_spec import NpuOpSpec, shape_text
from .lut import requantize_table
from .npu_ops import Lut, Phased, TensorRef, Tiling, copy_lut
from .records import DEFAULT_NUMERICS, QOp, QTensor, Reject
from ..util.relax_utils import int_list, op_name, resolve


# ---------------------------------------------------------------------------------------------
# Record and typed op


@dataclass(frozen=True, eq=False)
class QTranspose(QOp):
    """``output = transpose(input, axes)``: output axis j is input axis ``axes[j]``; the bytes
    are copied, requantized when the output is quantized unlike the input."""

    input: QTensor
    output: QTensor
    axes: tuple[int, ...]
    convention: str = ""
    layout: str | None = None  # the partition's (lowering fills it in): which axes are H, W, C
    operands: tuple = field(default=(), compare=False, repr=False)
    numerics: str = DEFAULT_NUMERICS  # whose requantize a rescaling transpose replicates
    takes_partition_layout: ClassVar[str] = "transpose"

    @property
    def macs(self) -> int:
        return 0


@dataclass(eq=False)
class Transpose(Phased):
    """out[i0, i1, i2] = table[in[j]] with j[perm[q]] = i_q (H x W x C maps). The NPU runs one
    LUT copy whose input is ``ifm`` seen through its strides permuted: the DMA does the
    transpose, the LUT the requantize (the identity when ``table`` is None)."""

    name: str
    ifm: TensorRef
    ofm: TensorRef
    perm: tuple[int, int, int]  # output H, W, C axis q reads input axis perm[q]
    table: np.ndarray | None = None  # int8 [256] requantize; None: the identity (a plain copy)
    tiling: Tiling | None = None
    kind: str = field(default="transpose", init=False)

    @property
    def macs(self) -> int:
        return 0

    @cached_property
    def phases(self) -> list[Lut]:
        strides = tuple(self.ifm.strides[p] for p in self.perm)
        src = TensorRef(self.name, self.ifm.region, self.ifm.offset, self.ofm.shape, self.ifm.layout, self.ifm.pitch,
                        strides)  # fmt: skip
        return [copy_lut(self.name, src, self.ofm, self.table)]


# ---------------------------------------------------------------------------------------------
# Conventions and extraction


def _transpose_conventions() -> tuple[Convention, ...]:
    return (
        Convention("qdq", "ONNX QDQ (Transpose)", _quant(is_op("relax.permute_dims")(_deq())),
                   "dequantize(x) → permute_dims → quantize (another scale or zero point: a requantizing copy)"),
        Convention("int8", "TFLite (TRANSPOSE)", is_op("relax.permute_dims")(wildcard()), "permute_dims(int8 x)"),
    )


def _axes(call, rank: int) -> tuple[int, ...]:
    axes = call.attrs.axes
    return tuple(reversed(range(rank))) if axes is None else tuple(int(a) % rank for a in int_list(axes))


def _extract_transpose(root, bindings) -> QTranspose:
    e = resolve(root, bindings)
    if op_name(e) == "relax.quantize":
        perm = resolve(e.args[0], bindings)
        deq = resolve(perm.args[0], bindings)
        x = deq.args[0]
        inp = _activation(deq, bindings, "input", x)
        return QTranspose(inp, _activation(e, bindings, "output", e), _axes(perm, len(inp.shape)), "qdq",
                          operands=(x,))  # fmt: skip
    x = e.args[0]
    # a constant's transpose (weights in the integer forms) is folded, not offloaded: not ours
    convention = "constant" if _is_constant(x, bindings) else "int8"
    inp = _carried(x)
    return QTranspose(inp, _carried(root), _axes(e, len(inp.shape)), convention, operands=(x,))


# ---------------------------------------------------------------------------------------------
# Checks


def transpose_keeps_batch(op, hw: HwConfig) -> str | None:
    """The batch axis of a rank-3 or rank-4 tensor stays first (the NPU runs a partition image by image)."""
    if len(op.axes) >= 3 and op.axes[0] != 0:
        return f"TRANSPOSE with axes {list(op.axes)} moves the batch axis: the NPU permutes the axes of one image"
    return None


# ---------------------------------------------------------------------------------------------
# Lowering


def hwc_axes(rank: int, layout: str | None) -> dict[int, int]:
    """Model axis -> the H, W, C axis it is in the map the NPU sees (as limits.hwc maps it;
    a batch axis maps to none)."""
    nhwc = layout == "NHWC"
    return {4: {1: 0, 2: 1, 3: 2} if nhwc else {1: 2, 2: 0, 3: 1},
            3: {1: 1, 2: 2} if nhwc else {1: 2, 2: 1},
            2: {0: 1, 1: 2},
            1: {0: 2}}[rank]  # fmt: skip


def hwc_perm(axes: tuple[int, ...], layout: str | None) -> tuple[int, int, int]:
    """The transpose of the H x W x C maps: output axis q reads input axis perm[q]."""
    to_hwc = hwc_axes(len(axes), layout)
    perm = [0, 1, 2]  # an axis no model axis maps to has size 1 in both: itself
    for j, a in enumerate(axes):
        if j in to_hwc:
            perm[to_hwc[j]] = to_hwc[a]
    return perm[0], perm[1], perm[2]


def _lower_transpose(name: str, op: QTranspose, ifms: list[TensorRef], ofm: TensorRef) -> Transpose:
    perm = hwc_perm(op.axes, op.layout)
    if tuple(ifms[0].shape[p] for p in perm) != tuple(ofm.shape):
        raise Reject(f"transpose of {ifms[0].shape} by {perm} does not give {ofm.shape}")
    return Transpose(name, ifms[0], ofm, perm, requantize_table(name, op.input, op.output, op.numerics))


def permuted_view(op: QTranspose, ifms: list[TensorRef], shape: tuple[int, int, int]) -> TensorRef:
    """The transpose as no op at all: its input's bytes seen in the output's shape through the
    input's strides, permuted (the view Transpose.phases copies from). Lowering takes it where
    every reader of the output reads its operands through their strides (registry.STRIDED_READERS:
    a matmul's DMAs), so the copy would only move bytes the reader's DMA can gather itself."""
    perm = hwc_perm(op.axes, op.layout)
    src = ifms[0]
    if tuple(src.shape[p] for p in perm) != tuple(shape):
        raise Reject(f"transpose of {src.shape} by {perm} does not give {shape}")
    strides = tuple(src.strides[p] for p in perm)  # named as its input: the tensor its strides walk
    return TensorRef(src.name, src.region, src.offset, shape, src.layout, src.pitch, strides)


# ---------------------------------------------------------------------------------------------
# Golden semantics


def golden_transpose(op: Transpose, x: np.ndarray) -> np.ndarray:
    y = np.transpose(x, op.perm)
    return y if op.table is None else op.table[y.astype(np.int64) + 128]


# ---------------------------------------------------------------------------------------------
# Registry


ENTRY = NpuPattern(
    name="npu.transpose",
    summary="transpose of a rank <= 4 int8 tensor: strided DMA through the permuted input and a LUT copy (the identity, or a requantize when the output is quantized unlike the input)",
    anchor_ops=("relax.permute_dims",),
    conventions=_transpose_conventions(),
    extract=_extract_transpose,
    checks=(*C.COMMON, transpose_keeps_batch),
    applies=lambda op: op.convention != "constant" and op.input.dtype in _INT_ACTIVATIONS,
    moves_data=True,
)

ENTRIES = (ENTRY,)
LOWERINGS = {QTranspose: _lower_transpose}
# ... or, read only by ops that gather their operands through strides, a view (lower.py)
STRIDED_VIEWS = {QTranspose: permuted_view}
NPU_OPS = {Transpose: NpuOpSpec(golden_transpose, "phased", describe=lambda op: f"transpose {shape_text(op)}",
                                report_class=("transpose", "transpose (copies)"))}  # fmt: skip
