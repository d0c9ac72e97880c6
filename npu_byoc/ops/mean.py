"""MEAN over the spatial axes with requantize (global average pooling): the conventions,
extraction into a :class:`QMean`, checks and lowering to :class:`Mean`."""

from __future__ import annotations

import math

import numpy as np

from tvm.relax.dpl import is_op, wildcard

from . import checks as C
from ._qdq import _Tail, _activation, _deq, _qdq_unary, _qparams, _requant_tail
from ..arch import numerics as nx
from ..arch.config import HwConfig
from .entry import Convention, NpuPattern
from .lowering import view
from .npu_ops import Mean, NpuOp, TensorRef
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
    layout = "NCHW" if axes == (2, 3) or (rank == 3 and axes == (2,)) else "NHWC"  # [N, C, L]: NCHW's sequence
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


def mean_spatial(op: QMean, hw: HwConfig) -> str | None:
    """Mean reduces the two spatial axes of a 4-D tensor, or the length of a 3-D sequence (GlobalAveragePooling1D)."""
    rank = len(op.input.shape)
    spatial = {(4, "NHWC"): (1, 2), (4, "NCHW"): (2, 3), (3, "NHWC"): (1,), (3, "NCHW"): (2,)}.get((rank, op.layout))
    if spatial is None or tuple(sorted(op.axes)) != spatial:
        return (f"mean over axes {list(op.axes)} of a {rank}-D tensor: NPU reduces the spatial axes of 4-D tensors "
                "(or the length of 3-D ones)")  # fmt: skip
    n = math.prod(op.input.shape[a] for a in spatial)
    if n > hw.max_mean_elements:
        return f"mean over {n} elements: NPU reduces up to {hw.max_mean_elements}"
    return None



def layout_is_guess(op) -> bool:
    """A MEAN over the last axis of a rank-3 tensor takes NCHW (a ``[N, C, L]`` sequence's length)
    as a guess: in a ``[N, L, C]`` sequence the same axis is the channels (LayerNorm's mean), which
    the MEAN unit cannot reduce. codegen.layout_agreement checks the guess against the partition."""
    return isinstance(op, QMean) and op.layout == "NCHW" and len(op.input.shape) == 3

# ---------------------------------------------------------------------------------------------
# Lowering


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


# ---------------------------------------------------------------------------------------------
# Table entry


ENTRY = NpuPattern(
    name="npu.mean",
    summary="mean over the spatial axes with requantize (global average pooling)",
    anchor_ops=("relax.mean",),
    conventions=_mean_conventions(),
    extract=_extract_mean,
    checks=(*C.COMMON, mean_spatial, C.requant_left_shift_fits(_lower_mean)),
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


NPU_OPS = {Mean: NpuOpSpec(golden_mean, "mean", lambda op: f"mean {'x'.join(map(str, op.ifm.shape))}", _unit_reason)}
