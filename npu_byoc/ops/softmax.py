"""SOFTMAX: int8 softmax over the last axis, bit-exact with TFLite's integer reference kernel:
its conventions, extraction into a :class:`QSoftmax`, checks and lowering to :class:`Softmax`
(the exp table compiled here). The kernel itself, which the golden model and the stream
machine run, is :mod:`npu_byoc.ops.softmax_kernel`."""

from __future__ import annotations

from tvm.relax.dpl import is_op, wildcard

from . import checks as C
from ._qdq import _Tail, _activation, _const, _deq, _qdq_unary, _requant_tail
from ..arch.config import HwConfig
from ..arch.isa import SOFTMAX_MAX_CHANNELS
from .entry import Convention, NpuPattern
from .npu_ops import NpuOp, Softmax, TensorRef
from . import softmax_kernel
from .npu_op_spec import NpuOpSpec, what
from .records import QSoftmax, Reject
from .softmax_kernel import OUTPUT_SCALE, OUTPUT_ZERO_POINT, exp_table, input_beta_params
from ..util.relax_utils import op_name, resolve


def _softmax_conventions() -> tuple[Convention, ...]:
    """TVM's TFLite import: dequantize → softmax(axis=-1) → quantize; with SoftmaxOptions.beta ≠ 1
    npu_byoc.frontends.tflite_ops scales the dequantized input by beta first (TVM's own import drops beta)."""
    plain = _qdq_unary(lambda x: is_op("relax.nn.softmax")(x), "dequantize(x) → softmax")
    scaled = [
        Convention(f"qdq-beta{tail}", "TFLite (beta ≠ 1)", pat, "dequantize(x) → multiply(beta) → softmax" + form)
        for tail, pat, form in _requant_tail(is_op("relax.nn.softmax")(is_op("relax.multiply")(_deq(), wildcard())))
    ]
    return tuple(plain + scaled)


def _extract_softmax(root, bindings) -> QSoftmax:
    tail = _Tail(root, bindings)
    if op_name(tail.body) != "relax.nn.softmax":
        raise Reject("not a softmax")
    x = resolve(tail.body.args[0], bindings)
    beta, convention = 1.0, "qdq"
    if op_name(x) == "relax.multiply":
        factor = _const(x.args[1], bindings, "the softmax's beta")
        if factor.size != 1:
            raise Reject(f"the softmax input is scaled by {factor.size} values, not one beta")
        beta, convention, x = float(factor.item()), "qdq-beta", resolve(x.args[0], bindings)
    if op_name(x) != "relax.dequantize":
        raise Reject("the softmax does not read a dequantized tensor")
    inp = _activation(x, bindings, "input", x.args[0])
    out = tail.output(bindings)
    lo, hi = tail.clamp(out, bindings)
    rank = max(len(inp.shape), 1)
    return QSoftmax(input=inp, output=out, axis=int(tail.body.attrs.axis) % rank, beta=beta, act_min=lo, act_max=hi,
                    convention=convention, operands=(x.args[0],))  # fmt: skip


def softmax_numerics(op, hw: HwConfig) -> str | None:
    """SOFTMAX runs TFLite's integer reference kernel, so it is offloaded from TFLite models (and hand-written Relax); onnxruntime computes Softmax in float, which no integer table reproduces."""
    if op.numerics != "tflite":
        return ("onnxruntime computes Softmax in float; the NPU's SOFTMAX is TFLite's integer kernel, "
                "so the ONNX model's results would change")
    return None


def softmax_axis(op, hw: HwConfig) -> str | None:
    """The softmax is over the last axis (TFLite's only one), of at most 4,095 elements (the int32 row sum)."""
    rank = len(op.input.shape)
    if op.axis != rank - 1:
        return f"softmax over axis {op.axis} of a rank-{rank} tensor: the NPU's SOFTMAX is over the last axis"
    if op.input.shape[-1] > SOFTMAX_MAX_CHANNELS:
        return f"softmax over {op.input.shape[-1]} elements: at most {SOFTMAX_MAX_CHANNELS} (the int32 row sum)"
    return None


def softmax_quantization(op, hw: HwConfig) -> str | None:
    """The output is quantized as TFLite's int8 softmax writes it (scale 1/256, zero point −128; uint8: 1/256, 0) with no clamp after it, and input scale × beta is at least 2^-26 (the kernel's input multiplier shifts left)."""
    out = op.output
    if out.dtype != "int8" or out.zero_point != OUTPUT_ZERO_POINT or out.scale != OUTPUT_SCALE:
        return (f"output quantized (scale {out.scale:g}, zero point {out.zero_point}): TFLite's int8 softmax "
                f"writes scale 1/256, zero point {OUTPUT_ZERO_POINT}")
    if (op.act_min, op.act_max) != (-128, 127):
        return f"a clamp [{op.act_min}, {op.act_max}] after the softmax"
    try:
        input_beta_params(op.input.scale, op.beta)
    except ValueError as err:
        return str(err)
    return None


CHECKS = (softmax_numerics, softmax_axis, softmax_quantization)


def _lower_softmax(name: str, op: QSoftmax, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    return Softmax(name=name, ifm=ifms[0], ofm=ofm, table=exp_table(op.input.scale, op.beta))


def last_axis_as_channels(ref: TensorRef) -> TensorRef:
    """``ref`` (H, W, C) seen as (H, C, W) in place: a strided view whose channels are the W axis.
    A partition that holds its tensors NCHW maps the model's last axis to W (limits.hwc), and the
    NPU's SOFTMAX runs over channels: through this view it runs over the model's last axis, so a
    softmax is placed alike whatever the layout of the ops it shares a partition with."""
    s_h, s_w, s_c = ref.strides
    h, w, c = ref.shape
    return TensorRef(ref.name, ref.region, ref.offset, (h, c, w), ref.layout, ref.pitch, (s_h, s_c, s_w))


ENTRY = NpuPattern(
    name="npu.softmax",
    summary="int8 softmax over the last axis, bit-exact with TFLite's integer reference kernel (exp table, "
            "fixed-point sum and reciprocal)",
    anchor_ops=("relax.nn.softmax",),
    conventions=_softmax_conventions(),
    extract=_extract_softmax,
    checks=(*C.COMMON, *CHECKS),
    subject=lambda numerics: "SOFTMAX" if numerics == "tflite" else "Softmax",
)


ENTRIES = (ENTRY,)
LOWERINGS = {QSoftmax: _lower_softmax}


# ---------------------------------------------------------------------------------------------
# Golden semantics, unit limits (the typed op's spec: npu_byoc.ops.npu_op_spec)


def golden_softmax(op: Softmax, x: np.ndarray) -> np.ndarray:
    return softmax_kernel.run(x.reshape(-1, x.shape[-1]), op.table).reshape(x.shape)


def _unit_reason(npu_op: Softmax, hw: HwConfig) -> str | None:
    if (c := npu_op.ofm.shape[2]) > SOFTMAX_MAX_CHANNELS:
        return f"{what(npu_op)} over {c} elements: the NPU's SOFTMAX takes up to {SOFTMAX_MAX_CHANNELS}"
    return None


NPU_OPS = {Softmax: NpuOpSpec(golden_softmax, "softmax", unit_reason=_unit_reason)}
