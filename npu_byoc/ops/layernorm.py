"""LAYERNORM: ONNX LayerNormalization (opset 17) between a DequantizeLinear and a
QuantizeLinear, over the channels of every pixel (token), within 1 LSB of the float operator:
its convention, extraction into a :class:`QLayerNorm`, checks, lowering to :class:`LayerNorm`
(gamma and beta converted to integer records here) and golden semantics. The integer kernel
is npu_byoc.arch.numerics_layernorm (docs/numerics.md §8e).

The NPU runs it when built with its LAYERNORM unit (``HwConfig.layernorm_unit``, 1 by default):
the golden model, the stream machine, the C model, the RTL (hw/rtl/npu_vec.v) and the cycle
model implement it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from tvm.relax.dpl import is_op, wildcard

from . import checks as C
from ._qdq import _Tail, _activation, _const, _deq, _qparams, _qdq_unary
from ..arch import numerics_layernorm as ln
from ..arch.config import HwConfig
from ..arch.isa import LAYERNORM_MAX_CHANNELS
from .entry import NpuPattern
from .npu_op_spec import NpuOpSpec, what
from .npu_ops import NpuOp, TensorRef, Tiling
from .records import QOp, QTensor, Reject
from ..util.relax_utils import op_name, resolve


@dataclass(frozen=True, eq=False)
class QLayerNorm(QOp):
    """LayerNormalization of an int8 tensor over its last axis: (x − mean) / sqrt(var + epsilon)
    · gamma + beta, requantized; gamma and beta are the model's float32 constants."""

    input: QTensor
    output: QTensor
    axis: int  # non-negative: the normalized axis of the model's tensor
    epsilon: float
    gamma: np.ndarray  # float32 [C]
    beta: np.ndarray  # float32 [C]
    act_min: int = -128
    act_max: int = 127
    convention: str = ""
    operands: tuple = field(default=(), compare=False, repr=False)
    reduces_last_axis: ClassVar[bool] = True  # the model's last axis is read as the channels

    @property
    def macs(self) -> int:
        return 0


@dataclass(eq=False)
class LayerNorm(NpuOp):
    """Layer normalization over the channels of every pixel (npu_byoc.arch.numerics_layernorm):
    the epsilon term ``epsilon_fx`` / 2^``frac_bits`` and per channel ``g`` (gamma / s_out in
    Q16) and ``b`` (beta / s_out in Q40)."""

    name: str
    ifm: TensorRef
    ofm: TensorRef
    ifm_zero_point: int
    ofm_zero_point: int
    epsilon_fx: int
    frac_bits: int
    g: np.ndarray  # int64 [C]
    b: np.ndarray  # int64 [C]
    act_min: int = -128
    act_max: int = 127
    tiling: Tiling | None = None
    kind: str = field(default="layernorm", init=False)

    @property
    def macs(self) -> int:
        return 0

    @property
    def records(self) -> np.ndarray:
        """The (C, 3) int32 records the kick reads at REQUANT_ADDR."""
        return ln.records(self.g, self.b)


def _layernorm_conventions():
    """ONNX QDQ as TVM's ONNX frontend imports LayerNormalization: dequantize → layer_norm(x,
    gamma, beta) → quantize, gamma and beta dequantized constants (or float constants)."""
    def param():  # inside the match, so extraction reads it (a dequantized initializer, or a float one)
        return _deq() | wildcard()

    return tuple(_qdq_unary(lambda x: is_op("relax.nn.layer_norm")(x, param(), param()),
                            "dequantize(x) → layer_norm(dequantize(gamma), dequantize(beta))"))  # fmt: skip


def _float_constant(expr, bindings, role: str, channels: int) -> np.ndarray:
    """A float32 [channels] vector from a constant, or from a dequantize of one evaluated in
    float32 as the model's runtime does: float32(q − zp) · float32(scale)."""
    e = resolve(expr, bindings)
    if op_name(e) == "relax.dequantize":
        q = _const(e.args[0], bindings, role).astype(np.int64)
        scale, zp, axis = _qparams(e, bindings, role)
        if scale.size > 1 and q.ndim:
            shape = [1] * q.ndim
            shape[axis % q.ndim] = scale.size
            scale, zp = scale.reshape(shape), (zp.reshape(shape) if zp.size > 1 else zp)
        value = (q - zp).astype(np.float32) * scale.astype(np.float32)
    else:
        value = np.asarray(_const(e, bindings, role), np.float32)
    try:
        return np.ascontiguousarray(np.broadcast_to(value.astype(np.float32), (channels,)))
    except ValueError:
        raise Reject(f"the layer norm's {role} has shape {value.shape}, not one value per channel ({channels})") from None


def _extract_layernorm(root, bindings) -> QLayerNorm:
    tail = _Tail(root, bindings)
    body = tail.body
    if op_name(body) != "relax.nn.layer_norm":
        raise Reject("not a layer norm")
    x = resolve(body.args[0], bindings)
    if op_name(x) != "relax.dequantize":
        raise Reject("the layer norm does not read a dequantized tensor")
    inp = _activation(x, bindings, "input", x.args[0])
    rank = max(len(inp.shape), 1)
    axes = sorted({int(a) % rank for a in body.attrs.axes})
    if axes != [rank - 1]:
        raise Reject(f"layer norm over axes {tuple(axes)} of a rank-{rank} tensor: the NPU's LAYERNORM normalizes "
                     "the last axis (the channels) only")  # fmt: skip
    channels = int(inp.shape[-1])
    if not (body.attrs.center and body.attrs.scale):
        raise Reject("a layer norm without its scale or its offset")
    gamma = _float_constant(body.args[1], bindings, "scale (gamma)", channels)
    beta = _float_constant(body.args[2], bindings, "offset (beta)", channels)
    out = tail.output(bindings)
    lo, hi = tail.clamp(out, bindings)
    return QLayerNorm(input=inp, output=out, axis=rank - 1, epsilon=float(body.attrs.epsilon), gamma=gamma,
                      beta=beta, act_min=lo, act_max=hi, convention="qdq", operands=(x.args[0],))  # fmt: skip


def layernorm_unit(op, hw: HwConfig) -> str | None:
    """The NPU is built with its LAYERNORM unit (``layernorm_unit=1``, the default)."""
    if not hw.layernorm_unit:
        return "the NPU has no LAYERNORM unit (layernorm_unit=0)"
    return None


def layernorm_channels(op, hw: HwConfig) -> str | None:
    """The normalized axis holds at most 4,096 values (the exact sums stay within the unit's 64-bit datapath)."""
    c = op.input.shape[-1]
    if c > LAYERNORM_MAX_CHANNELS:
        return f"layer norm over {c} values: the NPU's LAYERNORM takes at most {LAYERNORM_MAX_CHANNELS}"
    return None


def layernorm_quantization(op, hw: HwConfig) -> str | None:
    """eps·C²/s_in² is below 2^31, and per channel |gamma / s_out| < 2^14 and |beta / s_out| < 2^20 (the fixed-point ranges of docs/numerics.md §8e, where the error stays below 0.07 LSB)."""
    try:
        ln.epsilon_term(op.epsilon, op.input.shape[-1], op.input.scale)
        ln.channel_params(op.gamma, op.beta, op.output.scale)
    except ValueError as err:
        return str(err)
    return None


CHECKS = (layernorm_unit, layernorm_channels, layernorm_quantization)


def _lower_layernorm(name: str, op: QLayerNorm, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    epsilon_fx, frac_bits = ln.epsilon_term(op.epsilon, op.input.shape[-1], op.input.scale)
    g, b = ln.channel_params(op.gamma, op.beta, op.output.scale)
    return LayerNorm(name=name, ifm=ifms[0], ofm=ofm, ifm_zero_point=op.input.zero_point,
                     ofm_zero_point=op.output.zero_point, epsilon_fx=epsilon_fx, frac_bits=frac_bits, g=g, b=b,
                     act_min=op.act_min, act_max=op.act_max)  # fmt: skip


ENTRY = NpuPattern(
    name="npu.layernorm",
    summary="int8 layer normalization over the last axis (ONNX LayerNormalization, QDQ): exact sums, a fixed-point "
            "1/sqrt, per-channel gamma and beta; within 1 LSB of the float operator",
    anchor_ops=("relax.nn.layer_norm",),
    conventions=_layernorm_conventions(),
    extract=_extract_layernorm,
    checks=(*C.COMMON, *CHECKS),
    subject=lambda numerics: "LayerNormalization",
)

ENTRIES = (ENTRY,)
LOWERINGS = {QLayerNorm: _lower_layernorm}


# ---------------------------------------------------------------------------------------------
# Golden semantics, unit limits (the typed op's spec: npu_byoc.ops.npu_op_spec)


def golden_layernorm(op: LayerNorm, x: np.ndarray) -> np.ndarray:
    return ln.run(x, op.ifm_zero_point, op.ofm_zero_point, op.epsilon_fx, op.frac_bits, op.g, op.b,
                  op.act_min, op.act_max)  # fmt: skip


def _unit_reason(npu_op: LayerNorm, hw: HwConfig) -> str | None:
    if not hw.layernorm_unit:
        return f"{what(npu_op)}: the NPU has no LAYERNORM unit (layernorm_unit=0)"
    if (c := npu_op.ofm.shape[2]) > LAYERNORM_MAX_CHANNELS:
        return f"{what(npu_op)} over {c} channels: the NPU's LAYERNORM takes up to {LAYERNORM_MAX_CHANNELS}"
    return None


NPU_OPS = {LayerNorm: NpuOpSpec(golden_layernorm, "layernorm", unit_reason=_unit_reason,
                                report_class=("layernorm", "layer norm"))}  # fmt: skip
