"""FULLY_CONNECTED: matmul with constant weights and per-channel requantize: its conventions,
extraction into a :class:`QFullyConnected`, checks and lowering to :class:`FullyConnected`."""

from __future__ import annotations

import numpy as np

from . import checks as C
from ._qdq import (
    _INT_ACTIVATIONS, _Tail, _activation, _bias, _int32_operands, _int32_requant, _int32_weighted, _qdq_weighted,
    _split_bias, _weights, _zp_weighted,
)  # fmt: skip
from ..arch.config import HwConfig
from ..arch import numerics as nx
from .entry import NpuPattern
from .lowering import view
from .npu_ops import FullyConnected, NpuOp, TensorRef
from .npu_op_spec import NpuOpSpec, mac_channels_reason, what
from .records import QFullyConnected, Reject
from .requant import fc_scale
from ..util.relax_utils import dtype_of, op_name, resolve, shape_of


# ---------------------------------------------------------------------------------------------
# Extraction


def _extract_fc(root, bindings) -> QFullyConnected:
    per_tensor = False
    tail = _Tail(root, bindings)
    body = tail.body
    int32_form = op_name(body) == "relax.dequantize"
    if int32_form:
        requant = body
        body = resolve(body.args[0], bindings)
    mm, bias_expr = _split_bias(body, "relax.matmul", bindings)
    if int32_form:
        x, x_zp, w, convention = _int32_operands(mm, bindings)
        if dtype_of(x) not in _INT_ACTIVATIONS or dtype_of(mm) != "int32":
            raise Reject(f"integer matmul of {dtype_of(x)} into {dtype_of(mm)}: NPU accumulates int8 into int32")
        if w.ndim != 2:
            raise Reject(f"matmul weight of rank {w.ndim}: fully connected needs a 2-D weight")
        w = np.ascontiguousarray(w.T)
        rank = len(shape_of(mm))
        inp, w_scale, w_zp = _int32_requant(requant, bindings, x, w.shape[0], rank - 1, rank, x_zp)
    else:
        x_deq = resolve(mm.args[0], bindings)
        x = x_deq.args[0]
        inp = _activation(x_deq, bindings, "input", x)
        if len(shape_of(mm.args[1])) != 2:
            raise Reject("matmul of two activations: fully connected needs constant 2-D weights")
        w, w_scale, w_zp, per_tensor = _weights(mm.args[1], bindings, "IO")
        convention = "qdq"
    bias = (
        np.zeros(w.shape[0], np.int32)
        if bias_expr is None
        else _bias(bias_expr, bindings, w.shape[0], None if int32_form else inp.scale * w_scale)
    )
    out = tail.output(bindings)
    act_min, act_max = tail.clamp(out, bindings)
    return QFullyConnected(
        input=inp,
        output=out,
        weight=w,
        weight_scale=w_scale,
        weight_zero_point=w_zp,
        bias=bias,
        act_min=act_min,
        act_max=act_max,
        convention=convention,
        weight_per_tensor=per_tensor,
        operands=(x,),
    )


# ---------------------------------------------------------------------------------------------
# Checks


def fc_features(op: QFullyConnected, hw: HwConfig) -> str | None:
    """Input and output feature counts are at most min(max_fc_features, max_channels)."""
    if max(op.in_features, op.out_features) > hw.fc_feature_limit:
        return f"fully connected {op.in_features}->{op.out_features}: NPU supports up to {hw.fc_feature_limit} features"
    return None


# ---------------------------------------------------------------------------------------------
# Lowering


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



def contracts_pixels_in(op, layout: str) -> bool:
    """Whether ``op`` is a fully connected layer whose contracted (last) axis a partition of
    ``layout`` would store as pixels rather than channels: a rank >= 3 input ``[N, A, ..., K]``
    under NCHW keeps ``A`` innermost, so the rows would be read transposed (unless A or the
    pixels are 1, where both orders are the same bytes)."""
    if not isinstance(op, QFullyConnected) or layout != "NCHW" or len(op.input.shape) < 3:
        return False
    shape = op.input.shape
    return shape[1] > 1 and int(np.prod(shape[2:])) > 1

# ---------------------------------------------------------------------------------------------
# Table entry


ENTRY = NpuPattern(
    name="npu.fully_connected",
    summary="fully connected (matmul with constant weights) with per-channel requantize",
    anchor_ops=("relax.matmul",),
    conventions=tuple(_qdq_weighted("relax.matmul") + _zp_weighted("relax.matmul") + _int32_weighted("relax.matmul")),
    extract=_extract_fc,
    checks=(*C.COMMON, *C.WEIGHTED, fc_features),
)


ENTRIES = (ENTRY,)
LOWERINGS = {QFullyConnected: _lower_fc}


# ---------------------------------------------------------------------------------------------
# Golden semantics, unit limits (the typed op's spec: npu_byoc.ops.npu_op_spec)


def golden_fully_connected(op: FullyConnected, x: np.ndarray) -> np.ndarray:
    rows = x.reshape(-1, x.shape[-1]).astype(np.int64) - op.ifm_zero_point
    acc = rows @ op.weights.astype(np.int64).T
    out = nx.fc_requantize(acc, op.bias, op.mantissa, op.exponent, op.ofm_zero_point, op.act_min, op.act_max)
    return out.reshape(op.ofm.shape)


def _unit_reason(npu_op: FullyConnected, hw: HwConfig) -> str | None:
    if reason := mac_channels_reason(npu_op, hw):
        return reason
    c_in, c_out = npu_op.ifm.shape[2], npu_op.ofm.shape[2]
    if max(c_in, c_out) > hw.max_fc_features:
        return (f"{what(npu_op)} runs {c_in}->{c_out} features: the NPU takes up to "
                f"max_fc_features={hw.max_fc_features}")  # fmt: skip
    return None


def _describe(op: FullyConnected) -> str:
    _, rows, k = op.ifm.shape
    return f"fully_connected {rows} rows x {k} -> {op.ofm.shape[2]} features"


NPU_OPS = {FullyConnected: NpuOpSpec(golden_fully_connected, "fully_connected", _describe, _unit_reason)}
