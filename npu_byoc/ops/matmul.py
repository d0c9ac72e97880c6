"""MATMUL of two int8 activations (TFLite BATCH_MATMUL as npu_byoc.frontends.tflite_batch_matmul
imports it, ONNX MatMul between two DequantizeLinear in QDQ): ``out[h] = requantize(sum_k
(a[h, i, k] - za) (b[h, k, j] - zb))`` per batch-head ``h``, one per-tensor (multiplier, shift)
as LiteRT's batch_matmul.cc Prepare computes it. No opcode of its own: each head is one CONV
kick whose weights the DMA reads from the second operand in external memory.

The fold (exact): the CONV computes ``sum_k (x_k - ifm_zero_point) w_k`` with weights without
zero point; with ``x = a`` and ``w = b`` the term ``-zb sum_k (a_ik - za)`` is missing. The
input row is read ``1 + fold`` times (a 1 x (1 + fold) kernel over a stride-0 view of the row)
and each extra copy meets a constant weight block ``fold_value``: ``fold * fold_value = -zb``
(one block of ``-zb``; two of 64 for ``zb = -128``, whose ``128`` is not an int8 weight).
``zb = 0`` needs no fold: one kick of K MACs per output. Where only ``za`` is 0 the head runs
transposed (``out^T = b^T a^T``), so that no fold is needed either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

import numpy as np
from tvm.relax.dpl import is_const, is_op, wildcard

from . import checks as C
from ._qdq import _Tail, _activation, _const, _is_constant
from ..arch.config import HwConfig
from ..arch import numerics as nx
from ..arch.isa import SHIFT_MAX, SHIFT_MIN
from .entry import Convention, NpuPattern
from ..frontends.tflite_batch_matmul import multiplier as batch_matmul_multiplier
from .npu_op_spec import NpuOpSpec, mac_channels_reason, shape_text, what
from .npu_ops import NpuOp, Phased, TensorRef, Tiling
from .records import QOp, QTensor, Reject
from .transpose import hwc_axes
from ..util.relax_utils import dtype_of, op_name, prim_value, resolve, shape_of


# ---------------------------------------------------------------------------------------------
# Record and typed ops


@dataclass(frozen=True, eq=False)
class QMatMul(QOp):
    """``output = requantize((input_a - za) @ (input_b - zb))`` over the last two axes (after
    ``adj_a`` / ``adj_b`` swap them), the batch axes broadcast; (multiplier, shift) in TFLite's
    convention (positive shift = left)."""

    input_a: QTensor
    input_b: QTensor
    output: QTensor
    adj_a: bool
    adj_b: bool
    multiplier: int
    shift: int
    act_min: int = -128
    act_max: int = 127
    convention: str = ""
    layout: str | None = None  # the partition's (lowering fills it in)
    operands: tuple = field(default=(), compare=False, repr=False)
    takes_partition_layout: ClassVar[str] = "matmul"

    @property
    def k(self) -> int:
        a = self.input_a.shape
        return int(a[-2] if self.adj_a else a[-1])

    @property
    def macs(self) -> int:
        return int(np.prod(self.output.shape)) * self.k


def fold_of(zero_point_b: int) -> tuple[int, int]:
    """(copies of the input row beyond the first, constant weight of each) so that their sum is
    ``-zero_point_b`` with int8 weights."""
    if zero_point_b == 0:
        return 0, 0
    if -128 <= -zero_point_b <= 127:
        return 1, -zero_point_b
    return 2, -zero_point_b // 2  # zb = -128: two blocks of 64


@dataclass(eq=False)
class MatMulHead(NpuOp):
    """One head: a CONV with a 1 x (1 + fold) kernel over ``ifm`` (M rows, 1 + fold stride-0
    copies of a row of K), whose weights for output channel j are column j of ``rhs`` (K
    values) followed by ``fold`` blocks of ``fold_value``; ``ofm`` M x 1 x N."""

    name: str
    ifm: TensorRef  # (M, 1 + fold, K), W stride 0
    rhs: TensorRef  # (1, N, K): output channel j reads rhs[0, j, :]
    ofm: TensorRef  # (M, 1, N)
    fold: int
    fold_value: int
    multiplier: int
    shift: int
    ifm_zero_point: int
    ofm_zero_point: int
    act_min: int
    act_max: int
    tiling: Tiling | None = None
    kind: str = field(default="matmul_head", init=False)

    @property
    def inputs(self) -> tuple[TensorRef, ...]:
        return (self.ifm, self.rhs)

    @property
    def kernel(self) -> tuple[int, int]:
        return 1, 1 + self.fold

    @property
    def stride(self) -> tuple[int, int]:
        return 1, 1

    @property
    def macs(self) -> int:
        m, taps, k = self.ifm.shape
        return m * self.ofm.shape[2] * taps * k

    def weight_row(self, column: np.ndarray) -> np.ndarray:
        """The CONV weights of one output channel: its rhs column, then the fold blocks."""
        k = self.ifm.shape[2]
        return np.concatenate([column, np.full(self.fold * k, self.fold_value)]).astype(np.int8)


@dataclass(eq=False)
class MatMul(Phased):
    """``ofm = requantize((ifm - za) @ (ifm2 - zb))`` per head. Each operand's (head, row,
    column) axes are the H, W, C axes ``*_axes`` name (a head axis of size 1 broadcasts)."""

    name: str
    ifm: TensorRef
    ifm2: TensorRef
    ofm: TensorRef
    a_axes: tuple[int, int, int]  # ifm: head, M, K
    b_axes: tuple[int, int, int]  # ifm2: head, K, N
    c_axes: tuple[int, int, int]  # ofm: head, M, N
    ifm_zero_point: int
    ifm2_zero_point: int
    ofm_zero_point: int
    multiplier: int
    shift: int
    act_min: int
    act_max: int
    tiling: Tiling | None = None
    kind: str = field(default="matmul", init=False)

    @property
    def inputs(self) -> tuple[TensorRef, ...]:
        return (self.ifm, self.ifm2)

    def _dims(self, ref: TensorRef, axes) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return tuple(ref.shape[a] for a in axes), tuple(ref.strides[a] for a in axes)

    @property
    def macs(self) -> int:
        (heads, m, n), _ = self._dims(self.ofm, self.c_axes)
        return heads * m * n * self.ifm.shape[self.a_axes[2]]

    @property
    def transposed(self) -> bool:
        """Whether each head computes ``out^T = b^T a^T`` instead: the operand the DMA reads as
        weights is the one whose zero point is folded, so take the one that needs the smaller
        fold (no fold for a zero point of 0)."""
        return fold_of(self.ifm_zero_point)[0] < fold_of(self.ifm2_zero_point)[0]

    @cached_property
    def phases(self) -> list[MatMulHead]:
        (ha, m, k), (sha, sm, sk) = self._dims(self.ifm, self.a_axes)
        (hb, _, n), (shb, sbk, sbn) = self._dims(self.ifm2, self.b_axes)
        (heads, _, _), (shc, scm, scn) = self._dims(self.ofm, self.c_axes)
        # rows: (region, offset, count, stride, stride along K, heads, head stride, zero point)
        rows = (self.ifm.region, self.ifm.offset, m, sm, sk, ha, sha, self.ifm_zero_point)
        columns = (self.ifm2.region, self.ifm2.offset, n, sbn, sbk, hb, shb, self.ifm2_zero_point)
        out_strides = (scm, scn)
        if self.transposed:
            rows, columns, out_strides = columns, rows, (scn, scm)
        fold, value = fold_of(columns[7])
        out = []
        for h in range(heads):
            x = TensorRef(f"{self.name}/x{h}", rows[0], _head_offset(rows, h), (rows[2], 1 + fold, k), "NHWC", 0,
                          (rows[3], 0, rows[4]))  # fmt: skip
            w = TensorRef(f"{self.name}/w{h}", columns[0], _head_offset(columns, h), (1, columns[2], k), "NHWC", 0,
                          (0, columns[3], columns[4]))  # fmt: skip
            y = TensorRef(f"{self.name}/y{h}", self.ofm.region, self.ofm.offset + h * shc, (rows[2], 1, columns[2]),
                          "NHWC", 0, (out_strides[0], 0, out_strides[1]))  # fmt: skip
            out.append(MatMulHead(f"{self.name}/head{h}", x, w, y, fold, value, self.multiplier, self.shift, rows[7],
                                  self.ofm_zero_point, self.act_min, self.act_max))  # fmt: skip
        return out


def _head_offset(operand: tuple, h: int) -> int:
    """Where head ``h`` of an operand starts (a head axis of size 1 broadcasts)."""
    _, offset, _, _, _, heads, head_stride, _ = operand
    return offset + (h if heads > 1 else 0) * head_stride


# ---------------------------------------------------------------------------------------------
# Conventions


def _operand():
    """``astype(x, int32) [- z] [permute_dims]`` (tflite_batch_matmul.batch_matmul's operand)."""
    plain = is_op("relax.astype")(wildcard())
    zp = is_op("relax.subtract")(is_op("relax.astype")(wildcard()), is_const())
    return plain | zp | is_op("relax.permute_dims")(plain | zp)


def _requantized(acc, left: bool, right: bool):
    """tflite_batch_matmul.requantize's integer ops after ``acc``, with or without its left and
    right shifts."""
    x = is_op("relax.astype")(acc)
    if left:
        x = is_op("relax.astype")(is_op("relax.astype")(is_op("relax.left_shift")(x, is_const())))
    ab = is_op("relax.multiply")(x, is_const())
    nudge = is_op("relax.where")(is_op("relax.greater_equal")(ab, is_const()), is_const(), is_const())
    t = is_op("relax.add")(ab, nudge)
    down = is_op("relax.negative")(is_op("relax.right_shift")(is_op("relax.negative")(t), is_const()))
    plain = is_op("relax.right_shift")(t, is_const())
    hi = is_op("relax.where")(is_op("relax.greater_equal")(t, is_const()), plain, down)
    if right:
        remainder = is_op("relax.bitwise_and")(hi, is_const())
        threshold = is_op("relax.add")(is_const(), is_op("relax.astype")(is_op("relax.less")(hi, is_const())))
        up = is_op("relax.astype")(is_op("relax.greater")(remainder, threshold))
        hi = is_op("relax.add")(is_op("relax.right_shift")(hi, is_const()), up)
    return is_op("relax.astype")(is_op("relax.clip")(is_op("relax.add")(hi, is_const()), wildcard(), wildcard()))


def _conventions() -> tuple[Convention, ...]:
    out = [Convention("qdq", "ONNX QDQ (MatMul of two activations)",
                      _qdq_pattern(), "dequantize(a), dequantize(b) → matmul → quantize")]  # fmt: skip
    for left in (False, True):
        for right in (True, False):
            acc = is_op("relax.matmul")(_operand(), _operand())
            name = "int32" + ("-left" if left else "") + ("-right" if right else "")
            shifts = " and ".join(w for w, on in (("left", left), ("right", right)) if on) or "no"
            out.append(Convention(name, "TFLite (BATCH_MATMUL)", _requantized(acc, left, right),
                                  f"astype(int32) [- zp] [permute_dims] → matmul(int32) → LiteRT's integer "
                                  f"requantize ({shifts} shift)"))  # fmt: skip
    return tuple(out)


def _qdq_pattern():
    deq = is_op("relax.dequantize")
    mm = is_op("relax.matmul")(deq(wildcard(), wildcard(), wildcard()), deq(wildcard(), wildcard(), wildcard()))
    return is_op("relax.quantize")(mm, wildcard(), wildcard())


# ---------------------------------------------------------------------------------------------
# Extraction


def _int(expr, bindings, what: str) -> int:
    v = _const(expr, bindings, what)
    if v.size != 1:
        raise Reject(f"{what} has {v.size} values: the NPU takes one per tensor")
    return int(v.item())


def _int_operand(expr, bindings):
    """(int8 tensor, zero point, adj) of ``astype(x, int32) [- z] [permute_dims]``."""
    e = resolve(expr, bindings)
    adj = op_name(e) == "relax.permute_dims"
    if adj:
        axes = [int(a) for a in e.attrs.axes] if e.attrs.axes is not None else None
        rank = len(shape_of(e))
        if axes != [*range(rank - 2), rank - 1, rank - 2]:
            raise Reject(f"matmul operand permuted by {axes}: only the last two axes may swap (adj_x / adj_y)")
        e = resolve(e.args[0], bindings)
    zp = 0
    if op_name(e) == "relax.subtract":
        zp = _int(e.args[1], bindings, "operand zero point")
        e = resolve(e.args[0], bindings)
    x = e.args[0]
    if dtype_of(x) != "int8":
        raise Reject(f"matmul operand of {dtype_of(x)}: the NPU multiplies int8 activations")
    return x, zp, adj


def _extract_int32(root, bindings) -> QMatMul:
    e = resolve(root, bindings)
    clip = resolve(e.args[0], bindings)
    act_min, act_max = int(prim_value(clip.args[1])), int(prim_value(clip.args[2]))
    add = resolve(clip.args[0], bindings)
    out_zp = _int(add.args[1], bindings, "output zero point")
    hi = resolve(add.args[0], bindings)
    right = 0
    if op_name(hi) == "relax.add":  # RoundingDivideByPOT
        shifted = resolve(hi.args[0], bindings)
        right = _int(shifted.args[1], bindings, "right shift")
        greater = resolve(resolve(hi.args[1], bindings).args[0], bindings)
        mask = _int(resolve(greater.args[0], bindings).args[1], bindings, "rounding mask")
        threshold = _int(resolve(greater.args[1], bindings).args[0], bindings, "rounding threshold")
        if (mask, threshold) != ((1 << right) - 1, ((1 << right) - 1) >> 1):
            raise Reject("integer requantize does not round as RoundingDivideByPOT")
        hi = resolve(shifted.args[0], bindings)
    t = resolve(resolve(hi.args[1], bindings).args[0], bindings)
    nudge = resolve(t.args[1], bindings)
    constants = (_int(resolve(hi.args[1], bindings).args[1], bindings, "high-mul shift"),
                 _int(nudge.args[1], bindings, "nudge"), _int(nudge.args[2], bindings, "nudge"))  # fmt: skip
    if constants != (31, 1 << 30, 1 - (1 << 30)):
        raise Reject("integer requantize is not SaturatingRoundingDoublingHighMul")
    ab = resolve(t.args[0], bindings)
    mult = _int(ab.args[1], bindings, "multiplier")
    x = resolve(ab.args[0], bindings)
    left = 0
    if op_name(resolve(x.args[0], bindings)) == "relax.astype":  # the wrapped left shift
        ls = resolve(resolve(x.args[0], bindings).args[0], bindings)
        left = _int(ls.args[1], bindings, "left shift")
        x = resolve(ls.args[0], bindings)
    mm = resolve(x.args[0], bindings)
    a, za, adj_a = _int_operand(mm.args[0], bindings)
    b, zb, adj_b = _int_operand(mm.args[1], bindings)
    qa = QTensor(shape_of(a), "int8", None, za)
    qb = QTensor(shape_of(b), "int8", None, zb)
    out = QTensor(shape_of(root), dtype_of(root), None, out_zp)
    return QMatMul(qa, qb, out, adj_a, adj_b, mult, left - right, max(act_min, -128), min(act_max, 127), "int32",
                   operands=(a, b))  # fmt: skip


def _extract_qdq(root, bindings) -> QMatMul:
    tail = _Tail(root, bindings)
    mm = tail.body
    if op_name(mm) != "relax.matmul":
        raise Reject("not a matmul")
    da, db = (resolve(x, bindings) for x in mm.args)
    qa = _activation(da, bindings, "input a", da.args[0])
    qb = _activation(db, bindings, "input b", db.args[0])
    out = tail.output(bindings)
    if _is_constant(da.args[0], bindings) or _is_constant(db.args[0], bindings):  # npu.fully_connected's
        return QMatMul(qa, qb, out, False, False, 0, 0, convention="constant")
    if None in (qa.scale, qb.scale, out.scale) or min(qa.scale, qb.scale, out.scale) <= 0:
        raise Reject("matmul scales must be finite and > 0")
    mult, shift = batch_matmul_multiplier(qa.scale, qb.scale, out.scale)
    lo, hi = tail.clamp(out, bindings)
    return QMatMul(qa, qb, out, False, False, mult, shift, lo, hi, "qdq", operands=(da.args[0], db.args[0]))


def _extract(root, bindings) -> QMatMul:
    if op_name(resolve(root, bindings)) == "relax.astype":
        return _extract_int32(root, bindings)
    return _extract_qdq(root, bindings)


# ---------------------------------------------------------------------------------------------
# Checks


def _matrix(shape, adj: bool) -> tuple[int, int]:
    return (int(shape[-1]), int(shape[-2])) if adj else (int(shape[-2]), int(shape[-1]))


def matmul_shapes(op: QMatMul, hw: HwConfig) -> str | None:
    """Both operands and the output have the same rank, 2 to 4; the batch axes agree, and the
    head axis (the second of a rank-4 tensor) may broadcast from 1."""
    a, b, out = op.input_a.shape, op.input_b.shape, op.output.shape
    if not (len(a) == len(b) == len(out) and 2 <= len(out) <= 4):
        return f"matmul of shapes {list(a)} and {list(b)}: the NPU multiplies operands of the same rank, 2 to 4"
    for axis in range(len(out) - 2):
        broadcast = axis == 1 and len(out) == 4
        if not (a[axis] == b[axis] == out[axis] or broadcast and {a[axis], b[axis]} <= {1, out[axis]}):
            return (f"matmul of shapes {list(a)} and {list(b)}: batch axis {axis} differs (the NPU broadcasts "
                    f"only the head axis of a rank-4 operand)")  # fmt: skip
    return None


def matmul_sizes(op: QMatMul, hw: HwConfig) -> str | None:
    """K and N are at most max_channels (the MAC unit's input and output channels)."""
    (_, k), (_, n) = _matrix(op.input_a.shape, op.adj_a), _matrix(op.input_b.shape, op.adj_b)
    if max(k, n) > hw.max_channels:
        return f"matmul of K={k} into N={n}: the NPU's MAC unit takes up to max_channels={hw.max_channels}"
    if 1 + fold_of(op.input_b.zero_point)[0] > hw.max_kernel:
        return (f"matmul with rhs zero point {op.input_b.zero_point}: its fold needs a wider kernel than "
                f"max_kernel={hw.max_kernel}")  # fmt: skip
    return None


def matmul_requant(op: QMatMul, hw: HwConfig) -> str | None:
    """The requantize shift lies in the NPU's range [-31, 30]."""
    if not SHIFT_MIN <= op.shift <= SHIFT_MAX or op.multiplier < 0:
        return f"matmul requantize shift {op.shift}: the NPU takes [{SHIFT_MIN}, {SHIFT_MAX}]"
    return None


# ---------------------------------------------------------------------------------------------
# Lowering


def _axes(ref: TensorRef, shape, layout, adj: bool) -> tuple[int, int, int]:
    """The H, W, C axes of ``ref`` holding the (head, rows, columns) of a model tensor."""
    rank = len(shape)
    to_hwc = hwc_axes(rank, layout)
    rows, cols = (rank - 1, rank - 2) if adj else (rank - 2, rank - 1)
    r, c = to_hwc[rows], to_hwc[cols]
    head = to_hwc.get(1) if rank == 4 else None
    if head is None:
        head = ({0, 1, 2} - {r, c}).pop()
    axes = (head, r, c)
    want = (shape[1] if rank == 4 else 1, shape[rows], shape[cols])
    if tuple(ref.shape[x] for x in axes) != tuple(int(d) for d in want):
        raise Reject(f"matmul operand {ref.name} held as {ref.shape}: not the {list(shape)} it multiplies")
    return axes


def _lower(name: str, op: QMatMul, ifms: list[TensorRef], ofm: TensorRef) -> MatMul:
    a_axes = _axes(ifms[0], op.input_a.shape, op.layout, op.adj_a)
    b_axes = _axes(ifms[1], op.input_b.shape, op.layout, op.adj_b)
    c_axes = _axes(ofm, op.output.shape, op.layout, False)
    return MatMul(name, ifms[0], ifms[1], ofm, a_axes, b_axes, c_axes, op.input_a.zero_point, op.input_b.zero_point,
                  op.output.zero_point, op.multiplier, op.shift, op.act_min, op.act_max)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Golden semantics and unit limits


def golden_matmul(op: MatMul, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.transpose(a, op.a_axes).astype(np.int64) - op.ifm_zero_point
    b = np.transpose(b, op.b_axes).astype(np.int64) - op.ifm2_zero_point
    acc = np.matmul(a, b)  # heads broadcast
    n = acc.shape[-1]
    out = nx.requantize(acc, None, np.full(n, op.multiplier), np.full(n, op.shift), op.ofm_zero_point, op.act_min,
                        op.act_max)  # fmt: skip
    return np.transpose(out, np.argsort(op.c_axes))


def golden_matmul_head(op: MatMulHead, x: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """The head's CONV: its 1 x (1 + fold) kernel over the repeated rows."""
    w = np.stack([op.weight_row(column) for column in rhs[0]]).astype(np.int64)  # (N, (1 + fold) K)
    acc = (x.reshape(x.shape[0], -1).astype(np.int64) - op.ifm_zero_point) @ w.T
    n = acc.shape[-1]
    out = nx.requantize(acc, None, np.full(n, op.multiplier), np.full(n, op.shift), op.ofm_zero_point, op.act_min,
                        op.act_max)  # fmt: skip
    return out.reshape(op.ofm.shape)


def _head_unit_reason(op: MatMulHead, hw: HwConfig) -> str | None:
    if reason := mac_channels_reason(op, hw):
        return reason
    if 1 + op.fold > hw.max_kernel:
        return f"{what(op)} runs a 1x{1 + op.fold} kernel: the NPU takes up to max_kernel={hw.max_kernel}"
    return None


def _describe(op) -> str:
    return f"matmul {shape_text(op)}"


# ---------------------------------------------------------------------------------------------
# Registry


ENTRY = NpuPattern(
    name="npu.matmul",
    summary="matmul of two int8 activations (BATCH_MATMUL, QDQ MatMul): one CONV kick per head, "
            "the second operand DMA'd as its weights, the zero-point cross term folded exactly",
    anchor_ops=("relax.matmul",),
    conventions=_conventions(),
    extract=_extract,
    checks=(*C.COMMON, matmul_shapes, matmul_sizes, matmul_requant),
    applies=lambda op: op.convention != "constant",
)

ENTRIES = (ENTRY,)
LOWERINGS = {QMatMul: _lower}
# Each head's rows and columns are DMA boxes over the operands' strides: a transposed operand
# (registry.STRIDED_VIEWS) is read in place, a key's column as one run of the key's row.
STRIDED_READERS = {QMatMul: "a matmul head's DMAs read its operands through their strides"}
NPU_OPS = {
    MatMul: NpuOpSpec(golden_matmul, "phased", _describe, report_class=("matmul", "matmul (two activations)")),
    MatMulHead: NpuOpSpec(golden_matmul_head, "matmul", _describe, _head_unit_reason),
}
