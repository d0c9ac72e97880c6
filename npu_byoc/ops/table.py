"""The canonical QNN pattern table (the partition pass that applies it: npu_byoc.partition.pipeline).

TVM's frontends write the same quantized operator in several *conventions*: the QDQ form of
TFLite and ONNX (dequantize -> float op -> quantize), TFLite's cast-wrapped integer pooling
(astype(int32) -> avg_pool2d -> astype(int8)), and the int32-accumulate form of hand-written
modules (conv2d(int8, int8, out_dtype=int32) -> requantize written as dequantize -> quantize),
also with explicit zero-point subtraction (astype(x, int32) - z_x, as QNN canonicalization and
TVM's ONNX MatMulInteger import write it).
Each :class:`NpuPattern` lists the conventions of one NPU operation; a match is *extracted*
into one quantized-op record (:mod:`npu_byoc.ops.records`) whatever the convention was, and the NPU
checks (:mod:`npu_byoc.ops.checks`) accept it or give the reason it stays on the CPU.

Matching is structural and permissive (weights and scales are wildcards): extraction then
demands constants, per-tensor activations, int8 and so on, so that every near miss gets a
reason a user can act on instead of silently not matching.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from tvm import relax
from tvm.relax.dpl import DFPattern, is_const, is_op, is_tuple, wildcard

from . import checks as C
from . import gather, lut as lut_ops
from ..arch.config import DEFAULT_CONFIG, HwConfig
from .records import Reject
from .records import (
    QAdd, QConcat, QConv2D, QFullyConnected, QLut, QMean, QMul, QOp, QPool2D, QReshape, QSoftmax, QTensor,
    QGather, QResizeBilinear, QTransposeConv2D,
)  # fmt: skip
from .uint8 import int8_equivalent
from ..util.relax_utils import (
    NotConstant, const_eval, dtype_of, int_list, op_name, prim_value, resolve, shape_of,
)  # fmt: skip

PARTITION_LOG_ATTR = "npu_byoc.partition_log"
LAYER_ATTR = "npu_byoc.layer"  # on each composite: the source operator it offloads
NUMERICS_ATTR = "npu_byoc.numerics"  # on each composite: whose arithmetic it replicates (lut_ops)
LEFT_SHIFT_ATTR = "npu_byoc.left_shift_overflow"  # on each composite: the model's requant.LEFT_SHIFT_OVERFLOW
CODEGEN_NAME = "npu"


@dataclass(frozen=True)
class Convention:
    """One way a frontend writes an NPU operation."""

    name: str
    source: str  # who produces it, for the docs
    pattern: DFPattern
    form: str = ""  # the Relax ops of this convention, for the docs


@dataclass(frozen=True)
class NpuPattern:
    """One NPU operation: its conventions, the extraction and the checks."""

    name: str  # composite name, "npu.<op>"
    summary: str
    anchor_ops: tuple[str, ...]  # Relax ops this entry offloads (for "no NPU pattern" reasons)
    conventions: tuple[Convention, ...]
    extract: Callable[[relax.Expr, Mapping], QOp]
    checks: tuple[Callable, ...]
    # Silent selector between entries that share conventions (conv2d vs depthwise).
    applies: Callable[[QOp], bool] = field(default=lambda op: True)
    # The source operator's name for a numerics ("HARD_SWISH"): reasons start with it.
    subject: Callable[[str], str] | None = None
    # A view (reshape): no NPU op of its own, lowering makes its output a view of its input
    # (codegen.lower.VIEWS); nothing to dry-run through lowering alone.
    view: bool = False

    def evaluate(
        self, root, bindings: Mapping, hw: HwConfig = DEFAULT_CONFIG, numerics: str = lut_ops.DEFAULT_NUMERICS,
        left_shift_overflow: str = "wrap",
    ) -> tuple[QOp | None, str | None]:
        """Extract and check a match: (op, None) if the NPU runs it, else (op or None, reason).
        ``left_shift_overflow``: what the model's runtime does when a requantize left shift
        overflows (requant.left_shift_overflow_for)."""
        op, reason = self._evaluate(root, bindings, hw, numerics, left_shift_overflow)
        if reason and reason != _NOT_MINE and self.subject is not None:
            reason = f"{self.subject(numerics)}: {reason}"
        return op, reason

    def _evaluate(self, root, bindings, hw, numerics, left_shift_overflow="wrap"):
        try:
            op = int8_equivalent(self.extract(root, bindings))
        except Reject as err:
            return None, str(err)
        if hasattr(op, "numerics"):  # records whose meaning depends on the source runtime
            op = replace(op, numerics=numerics)
        if hasattr(op, "left_shift_overflow"):
            op = replace(op, left_shift_overflow=left_shift_overflow)
        if not self.applies(op):
            return op, _NOT_MINE
        for check in self.checks:
            reason = check(op, hw)
            if reason:
                return op, reason
        return op, None


_NOT_MINE = "__not_this_entry__"


# ---------------------------------------------------------------------------------------------
# Pattern building blocks. Every argument that must be constant is a wildcard here: extraction
# checks it, so a non-constant weight is reported rather than silently unmatched.


def _deq(x: DFPattern | None = None) -> DFPattern:
    return is_op("relax.dequantize")(x if x is not None else wildcard(), wildcard(), wildcard())


def _quant(x: DFPattern) -> DFPattern:
    return is_op("relax.quantize")(x, wildcard(), wildcard())


def _int_clip(x: DFPattern) -> DFPattern:
    return is_op("relax.clip")(x, wildcard(), wildcard())


def _layout_chain(x: DFPattern) -> DFPattern:
    """x, or x reshaped / transposed / expanded (weights and biases arrive that way)."""
    # The bare x comes last: an OrPattern takes the first alternative that matches, and the
    # layout ops must be inside the match for their bindings to join the composite.
    return (
        is_op("relax.reshape")(x, wildcard())
        | is_op("relax.permute_dims")(x)
        | is_op("relax.expand_dims")(x)
        | x
    )


def _float_act(x: DFPattern) -> DFPattern:
    """A float activation between the op and its quantize (ONNX QDQ keeps Relu/Clip there)."""
    return x | is_op("relax.nn.relu")(x) | is_op("relax.clip")(x, wildcard(), wildcard())


def _with_bias(core: DFPattern, bias: DFPattern) -> DFPattern:
    return is_op("relax.add")(core, bias) | is_op("relax.add")(bias, core)


def _requant_tail(body: DFPattern) -> list[tuple[str, DFPattern, str]]:
    """The output stage: [relu | clip] -> quantize, optionally followed by an integer clip."""
    q = _quant(_float_act(body))
    return [("+clip", _int_clip(q), " → [nn.relu | clip] → quantize → clip"), ("", q, " → [nn.relu | clip] → quantize")]


def _pad(x: DFPattern) -> DFPattern:
    """A constant spatial pad (TFLite PAD / PADV2, keras ZeroPadding2D) folded into its consumer."""
    return is_op("relax.nn.pad")(x)


def _int8_pad() -> DFPattern:
    """A pad of an int8 tensor: nn.pad on the integers (TFLite), or ONNX QDQ's float Pad between
    a dequantize and a quantize."""
    return _pad(wildcard()) | _quant(_pad(_deq()))


def _qdq_weighted(core_op: str, padded: bool = False) -> list[Convention]:
    """conv2d / matmul in the QDQ form of TFLite and ONNX, with and without bias; ``padded``:
    the input is an int8 nn.pad (filled with the zero point) folded into the conv's padding."""
    out = []
    short = core_op.removeprefix("relax.")
    pad_name, pad_form = ("+pad", "nn.pad(x, fill=z_x) [ONNX: dequantize → nn.pad(0.0) → quantize] → ") if padded else ("", "")
    for bias_name, with_bias in (("+bias", True), ("", False)):
        weight = _layout_chain(_deq(_layout_chain(wildcard())))
        core = is_op(core_op)(_deq(_int8_pad() if padded else None), weight)
        body = _with_bias(core, _layout_chain(_deq())) if with_bias else core
        form = f"{pad_form}dequantize(x), [reshape | permute_dims](dequantize(W, axis=out-channel)) → {short}"
        if with_bias:
            form += " → add([reshape](dequantize(int32 bias, scale=s_x·s_w)))"
        for tail_name, pat, tail_form in _requant_tail(body):
            out.append(Convention(f"qdq{pad_name}{bias_name}{tail_name}", "TFLite, ONNX QDQ", pat, form + tail_form))
    return out


def _int32_weighted(core_op: str) -> list[Convention]:
    """Integer accumulate: op(int8, int8, out_dtype=int32) [+ int32 bias] -> dequantize(s_x*s_w[c]) -> quantize."""
    out = []
    short = core_op.removeprefix("relax.")
    for bias_name, with_bias in (("+bias", True), ("", False)):
        core = is_op(core_op)(wildcard(), _layout_chain(wildcard()))
        body = _with_bias(core, _layout_chain(wildcard())) if with_bias else core
        form = f"{short}(int8 x, int8 W, out_dtype=int32)"
        form += " → add(int32 bias)" if with_bias else ""
        form += " → dequantize(scale=s_x·s_w[c], zero_point=0, axis=C)"
        for tail_name, pat, tail_form in _requant_tail(_deq(body)):
            out.append(Convention(f"int32-accumulate{bias_name}{tail_name}", "hand-written Relax", pat, form + tail_form))
    return out


ZP_SUBTRACT = "int32-accumulate, zero-point subtract"


def _zp_subtracted(x: DFPattern) -> DFPattern:
    """astype(x, int32) -> subtract(zero point), or astype alone (zero point 0)."""
    widened = is_op("relax.astype")(x)
    return is_op("relax.subtract")(widened, wildcard()) | widened


def _zp_weighted(core_op: str) -> list[Convention]:
    """Integer accumulate with explicit zero-point subtraction (QNN canonicalization, TVM's ONNX
    MatMulInteger / ConvInteger): op(astype(x) - z_x, [astype(W) - z_w], out_dtype=int32)
    [+ int32 bias] -> dequantize(s_x*s_w[c]) -> quantize."""
    out = []
    short = core_op.removeprefix("relax.")
    for bias_name, with_bias in (("+bias", True), ("", False)):
        core = is_op(core_op)(_zp_subtracted(wildcard()), _layout_chain(_zp_subtracted(wildcard()) | wildcard()))
        body = _with_bias(core, _layout_chain(wildcard())) if with_bias else core
        form = f"astype(x, int32) → subtract(z_x) → {short}(·, [astype(W, int32) → subtract(z_w = 0)], out_dtype=int32)"
        form += " → add(int32 bias)" if with_bias else ""
        form += " → dequantize(scale=s_x·s_w[c], zero_point=0, axis=C)"
        for tail_name, pat, tail_form in _requant_tail(_deq(body)):
            out.append(Convention(f"{ZP_SUBTRACT}{bias_name}{tail_name}", "QNN canonicalization, TVM ONNX integer ops",
                                  pat, form + tail_form))
    return out


def _qdq_unary(core: Callable[[DFPattern], DFPattern], form: str) -> list[Convention]:
    return [
        Convention(f"qdq{tail}", "TFLite, ONNX QDQ", pat, form + tail_form)
        for tail, pat, tail_form in _requant_tail(core(_deq()))
    ]


# ---------------------------------------------------------------------------------------------
# Extraction helpers


def _const(expr, bindings, what: str) -> np.ndarray:
    try:
        return const_eval(expr, bindings)
    except NotConstant:
        raise Reject(f"{what} is not a compile-time constant: the NPU needs it at compile time") from None


def _qparams(call, bindings, what: str) -> tuple[np.ndarray, np.ndarray, int]:
    scale = _const(call.args[1], bindings, f"{what} scale").astype(np.float64)
    zp = _const(call.args[2], bindings, f"{what} zero point").astype(np.int64)
    return scale, zp, int(call.attrs.axis)


def _activation(call, bindings, what: str, tensor) -> QTensor:
    """A per-tensor quantized activation from a quantize/dequantize call."""
    scale, zp, _ = _qparams(call, bindings, what)
    if scale.size != 1 or zp.size != 1:
        raise Reject(
            f"{what} is quantized per-channel ({scale.size} scales): NPU activations are per-tensor"
        )
    q_dtype = dtype_of(tensor)
    return QTensor(shape=shape_of(tensor), dtype=q_dtype, scale=float(scale.item()), zero_point=int(zp.item()))


_DTYPE_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "int32": (-(2**31), 2**31 - 1)}


class _Tail:
    """The output stage of a match: output qparams and the folded activation clamp."""

    def __init__(self, root, bindings):
        e = resolve(root, bindings)
        self.int_clip = None
        if op_name(e) == "relax.clip":
            self.int_clip = e
            e = resolve(e.args[0], bindings)
        if op_name(e) != "relax.quantize":
            raise Reject("the op's result is not requantized to int8")
        self.quantize = e
        e = resolve(e.args[0], bindings)
        self.float_act = None
        if op_name(e) in ("relax.nn.relu", "relax.clip"):
            self.float_act = e
            e = resolve(e.args[0], bindings)
        self.body = e

    def output(self, bindings) -> QTensor:
        return _activation(self.quantize, bindings, "output", self.quantize)

    def clamp(self, out: QTensor, bindings) -> tuple[int, int]:
        lo, hi = _DTYPE_RANGE.get(out.dtype, (-128, 127))
        if self.float_act is not None:
            if op_name(self.float_act) == "relax.nn.relu":
                lo = max(lo, out.zero_point)
            else:
                fmin = float(prim_value(self.float_act.args[1]))
                fmax = float(prim_value(self.float_act.args[2]))
                lo = max(lo, _quantize_bound(fmin, out))
                hi = min(hi, _quantize_bound(fmax, out))
        if self.int_clip is not None:
            lo = max(lo, int(np.ceil(float(prim_value(self.int_clip.args[1])))))
            hi = min(hi, int(np.floor(float(prim_value(self.int_clip.args[2])))))
        if lo > hi:
            raise Reject(f"activation clamp [{lo}, {hi}] is empty")
        return lo, hi


def _quantize_bound(x: float, out: QTensor) -> int:
    if not np.isfinite(x):
        return -(2**31) if x < 0 else 2**31 - 1
    return int(np.round(x / out.scale)) + out.zero_point


def _weights(weight_expr, bindings, layout: str, what: str = "weight"):
    """int8 weights, per-channel scale and zero point, canonicalised to ``layout`` -> O first,
    and whether the model gave a single (per-tensor) scale.

    The weight path is dequantize(W, scale, zp, axis) possibly wrapped in reshape /
    permute_dims (TFLite depthwise, fully connected). The scales are broadcast to the
    weight's full shape and carried through the same reshapes, so a per-channel axis is
    tracked whatever the frontend did.
    """
    chain = []
    e = resolve(weight_expr, bindings)
    while op_name(e) in ("relax.reshape", "relax.permute_dims", "relax.expand_dims"):
        chain.append(e)
        e = resolve(e.args[0], bindings)
    if op_name(e) != "relax.dequantize":
        raise Reject(f"{what} is not dequantized from integers")
    w = _const(e.args[0], bindings, what)
    scale, zp, axis = _qparams(e, bindings, what)
    per_tensor = scale.size == 1
    if scale.size > 1:
        shape = [1] * w.ndim
        shape[axis % w.ndim] = scale.size
        scale = scale.reshape(shape)
        zp = zp.reshape(shape) if zp.size > 1 else zp
    scale = np.broadcast_to(scale, w.shape)
    zp = np.broadcast_to(zp, w.shape)
    for call in reversed(chain):
        w, scale, zp = (_apply_layout(call, a) for a in (w, scale, zp))
    perm = [layout.index(c) for c in _canonical(layout)]
    w, scale, zp = (np.ascontiguousarray(np.transpose(a, perm)) for a in (w, scale, zp))
    flat_s = scale.reshape(scale.shape[0], -1)
    flat_z = zp.reshape(zp.shape[0], -1)
    # NaN != NaN: compare with equal_nan so a NaN scale reaches the scales_valid check.
    same_s = (flat_s == flat_s[:, :1]) | (np.isnan(flat_s) & np.isnan(flat_s[:, :1]))
    if not np.all(same_s) or np.any(flat_z != flat_z[:, :1]):
        raise Reject(f"{what} is quantized along an axis other than the output channel")
    return w, flat_s[:, 0].copy(), flat_z[:, 0].copy(), per_tensor


def _canonical(layout: str) -> str:
    return "OHWI" if len(layout) == 4 else "OI"


def _apply_layout(call, a: np.ndarray) -> np.ndarray:
    name = op_name(call)
    if name == "relax.reshape":
        return a.reshape(int_list(call.args[1].values))
    if name == "relax.permute_dims":
        axes = call.attrs.axes
        return np.transpose(a, None if axes is None else int_list(axes))
    return np.expand_dims(a, int_list(call.attrs.axis))


def _bias(bias_expr, bindings, out_channels: int, acc_scale: np.ndarray | None) -> np.ndarray:
    """The int32 bias (one value per output channel). In the QDQ form its dequantize scale
    must be input_scale * weight_scale: the bias is then added to the accumulator as is."""
    e = resolve(bias_expr, bindings)
    while op_name(e) in ("relax.reshape", "relax.expand_dims"):
        e = resolve(e.args[0], bindings)
    if op_name(e) == "relax.dequantize":
        b = _const(e.args[0], bindings, "bias")
        scale, zp, _ = _qparams(e, bindings, "bias")
        if np.any(zp != 0):
            raise Reject("bias zero point is not 0")
        if acc_scale is not None:
            s = np.broadcast_to(scale.reshape(-1), (out_channels,)) if scale.size in (1, out_channels) else None
            if s is None or not np.allclose(s, acc_scale, rtol=1e-5, atol=0):
                raise Reject("bias scale differs from input_scale * weight_scale: cannot add it to the accumulator")
    else:
        b = _const(e, bindings, "bias")
    if b.dtype != np.int32:
        raise Reject(f"bias dtype {b.dtype}: NPU biases are int32")
    b = b.reshape(-1)
    if b.size == 1:
        b = np.full(out_channels, b.item(), np.int32)
    if b.size != out_channels:
        raise Reject(f"bias has {b.size} values for {out_channels} output channels")
    return b.astype(np.int32)


def _int32_requant(requant, bindings, x, out_channels: int, channel_axis: int, rank: int, x_zp: int = 0):
    """The int32-accumulate form's requantize ``dequantize(acc, s_x*s_w[c], 0, axis=C)``:
    (input record, per-channel accumulator scale, weight zero points). The scale is given
    whole, so the input record carries scale 1.0 and weight_scale holds s_x*s_w[c]."""
    scale, zp, axis = _qparams(requant, bindings, "requantize")
    if np.any(zp != 0):
        raise Reject("requantize input zero point is not 0")
    if scale.size > 1 and axis % rank != channel_axis:
        raise Reject(
            f"requantize scale is per-channel along axis {axis % rank}, not the output-channel "
            f"axis {channel_axis}: NPU requantizes per output channel"
        )
    acc_scale = np.broadcast_to(scale.reshape(-1), (out_channels,)).astype(np.float64)
    inp = QTensor(shape=shape_of(x), dtype=dtype_of(x), scale=1.0, zero_point=x_zp)
    return inp, acc_scale, np.zeros(out_channels, np.int64)


_INT_ACTIVATIONS = ("int8", "uint8")  # integer forms: uint8 runs as int8 with zero point -128


def _split_bias(body, core_op: str, bindings):
    """body is core or add(core, bias) in either order: (core call, bias expr or None)."""
    if op_name(body) == "relax.add":
        a, b = (resolve(x, bindings) for x in body.args)
        if op_name(a) == core_op:
            return a, body.args[1]
        return b, body.args[0]
    return body, None


def _zp_input(expr, bindings):
    """The int8 input and zero point of ``astype(x, int32) [- z_x]``; (expr, None) otherwise."""
    e = resolve(expr, bindings)
    zp = 0
    if op_name(e) == "relax.subtract":
        z = _const(e.args[1], bindings, "input zero point")
        if z.size != 1:
            raise Reject(f"input zero point has {z.size} values (per row): NPU activations are per-tensor")
        zp, e = int(z.item()), resolve(e.args[0], bindings)
    if op_name(e) == "relax.astype" and str(e.attrs.dtype) == "int32":
        return e.args[0], zp
    return expr, None


def _zp_weight(expr, bindings) -> np.ndarray:
    """The int8 weights of ``[layout](astype(W, int32) [- z_w])``; a non-zero z_w is refused."""
    e = resolve(expr, bindings)
    layout = []
    while op_name(e) in ("relax.reshape", "relax.permute_dims", "relax.expand_dims"):
        layout.append(e)
        e = resolve(e.args[0], bindings)
    if op_name(e) == "relax.subtract":
        z = _const(e.args[1], bindings, "weight zero point")
        if np.any(z != 0):
            raise Reject(f"weight zero point {int(z.reshape(-1)[np.argmax(z.reshape(-1) != 0)])}: "
                         "weight zero point must be 0 (NPU weights are symmetric int8)")
        e = resolve(e.args[0], bindings)
    if op_name(e) == "relax.astype":
        e = e.args[0]
    w = _const(e, bindings, "weight")
    if not (np.issubdtype(w.dtype, np.integer) and w.min(initial=0) >= -128 and w.max(initial=0) <= 127):
        raise Reject(f"weight dtype {w.dtype} with values outside int8: NPU weights are int8")
    w = w.astype(np.int8)
    for call in reversed(layout):
        w = _apply_layout(call, w)
    return w


def _int32_operands(core, bindings):
    """(int8 input expr, its zero point, int8 weights, convention) of an integer-accumulate op."""
    x, zp = _zp_input(core.args[0], bindings)
    if zp is None:
        return x, 0, _const(core.args[1], bindings, "weight"), "int32-accumulate"
    return x, zp, _zp_weight(core.args[1], bindings), ZP_SUBTRACT


def _unpad(x, bindings, layout: str, fill: int, consumer: str):
    """``x`` or, if it is a constant spatial nn.pad filled with ``fill``, the pad's input and
    its (top, left, bottom, right) widths: the consumer pads by that much more instead."""
    pad = resolve(x, bindings)
    source = None
    if op_name(pad) == "relax.quantize":  # ONNX QDQ: quantize(nn.pad(dequantize(x), 0.0))
        q, pad = pad, resolve(pad.args[0], bindings)
        inner = resolve(pad.args[0], bindings) if op_name(pad) == "relax.nn.pad" else None
        if op_name(inner) != "relax.dequantize":
            return x, None
        qi, qo = _activation(inner, bindings, "PAD input", inner.args[0]), _activation(q, bindings, "PAD output", q)
        if (qi.scale, qi.zero_point) != (qo.scale, qo.zero_point):
            raise Reject(f"PAD before {consumer} changes the quantization: only a pad that keeps it folds")
        source, fill = inner.args[0], 0.0  # the real zero: quantized, the zero point
    if op_name(pad) != "relax.nn.pad":
        return x, None
    a = pad.attrs
    widths = int_list(a.pad_width)
    rank = len(widths) // 2
    spatial = (1, 2) if layout == "NHWC" else (2, 3)
    if str(a.pad_mode) != "constant":
        raise Reject(f"PAD mode {a.pad_mode} before {consumer}: only a constant pad folds into its padding")
    if rank != 4 or any(widths[2 * k] or widths[2 * k + 1] for k in range(rank) if k not in spatial):
        raise Reject(f"PAD widths {widths} before {consumer}: only padding of the spatial axes (H, W) folds into it")
    if min(widths) < 0:
        raise Reject(f"PAD widths {widths} before {consumer}: negative widths (cropping) do not fold")
    if float(a.pad_value) != fill:
        raise Reject(f"PAD fill {float(a.pad_value):g} before {consumer}: only a pad filled with {fill} "
                     "(the input's zero point for a conv, int8's minimum for a max pool — or, read only by max pools, "
                     "any fill at or below its input's clamp) folds into it")
    (h, w) = spatial
    return pad.args[0] if source is None else source, (widths[2 * h], widths[2 * w], widths[2 * h + 1], widths[2 * w + 1])


def _add_padding(padding, folded) -> tuple[int, ...]:
    """The op's own (top, left, bottom, right) padding plus a folded pad's."""
    return tuple(padding) if folded is None else tuple(int(p) + int(f) for p, f in zip(padding, folded))


# ---------------------------------------------------------------------------------------------
# Extraction per NPU operation


def _extract_conv2d(root, bindings) -> QConv2D:
    tail = _Tail(root, bindings)
    body = tail.body
    int32_form = op_name(body) == "relax.dequantize"
    if int32_form:  # requantize written as dequantize(acc, s_x*s_w[c]) -> quantize
        requant = body
        body = resolve(body.args[0], bindings)
    conv, bias_expr = _split_bias(body, "relax.nn.conv2d", bindings)
    attrs = conv.attrs
    layout = str(attrs.data_layout)
    if layout not in ("NHWC", "NCHW") or str(attrs.out_layout) != layout:
        raise Reject(f"conv2d layout {layout}->{attrs.out_layout}: NPU supports NHWC and NCHW")
    kernel_layout = str(attrs.kernel_layout)
    if int32_form:
        x, x_zp, w, convention = _int32_operands(conv, bindings)
        if dtype_of(x) not in _INT_ACTIVATIONS or dtype_of(conv) != "int32":
            raise Reject(f"integer conv2d of {dtype_of(x)} into {dtype_of(conv)}: NPU accumulates int8 into int32")
        perm = [kernel_layout.index(c) for c in "OHWI"]
        w = np.ascontiguousarray(np.transpose(w, perm))
        inp, w_scale, w_zp = _int32_requant(requant, bindings, x, w.shape[0], layout.index("C"), 4, x_zp)
    else:
        x_deq = resolve(conv.args[0], bindings)
        x = x_deq.args[0]
        inp = _activation(x_deq, bindings, "input", x)
        x, folded_pad = _unpad(x, bindings, layout, inp.zero_point, "conv2d")
        inp = replace(inp, shape=shape_of(x))
        w, w_scale, w_zp, per_tensor = _weights(conv.args[1], bindings, kernel_layout)
        convention = "qdq"
    oc = w.shape[0]
    acc_scale_vec = inp.scale * w_scale
    bias = (
        np.zeros(oc, np.int32)
        if bias_expr is None
        else _bias(bias_expr, bindings, oc, None if int32_form else acc_scale_vec)
    )
    out = tail.output(bindings)
    act_min, act_max = tail.clamp(out, bindings)
    per_tensor = False if int32_form else per_tensor
    return QConv2D(
        layout=layout,
        input=inp,
        output=out,
        weight=w,
        weight_scale=w_scale,
        weight_zero_point=w_zp,
        bias=bias,
        strides=int_list(attrs.strides),
        padding=_add_padding(int_list(attrs.padding), None if int32_form else folded_pad),
        dilation=int_list(attrs.dilation),
        groups=int(attrs.groups),
        act_min=act_min,
        act_max=act_max,
        convention=convention,
        operands=(x,),
        weight_per_tensor=per_tensor,
        folded_pad=None if int32_form else folded_pad,
    )


def _extract_transpose_conv(root, bindings) -> QTransposeConv2D:
    """dequantize(x), dequantize(W, axis=O) -> conv2d_transpose [-> add(bias)] -> quantize: how
    TVM imports TFLite's TRANSPOSE_CONV and ONNX QDQ ConvTranspose."""
    tail = _Tail(root, bindings)
    conv, bias_expr = _split_bias(tail.body, "relax.nn.conv2d_transpose", bindings)
    attrs = conv.attrs
    layout = str(attrs.data_layout)
    if layout not in ("NHWC", "NCHW") or str(attrs.out_layout) != layout:
        raise Reject(f"conv2d_transpose layout {layout}->{attrs.out_layout}: NPU supports NHWC and NCHW")
    x_deq = resolve(conv.args[0], bindings)
    x = x_deq.args[0]
    inp = _activation(x_deq, bindings, "input", x)
    w, w_scale, w_zp, per_tensor = _weights(conv.args[1], bindings, str(attrs.kernel_layout))
    oc = w.shape[0]
    bias = np.zeros(oc, np.int32) if bias_expr is None else _bias(bias_expr, bindings, oc, inp.scale * w_scale)
    out = tail.output(bindings)
    act_min, act_max = tail.clamp(out, bindings)
    return QTransposeConv2D(
        layout=layout, input=inp, output=out, weight=w, weight_scale=w_scale, weight_zero_point=w_zp, bias=bias,
        strides=int_list(attrs.strides), padding=int_list(attrs.padding),
        dilation=int_list(attrs.dilation), groups=int(attrs.groups),
        act_min=act_min, act_max=act_max, convention="qdq", operands=(x,), weight_per_tensor=per_tensor,
    )  # fmt: skip


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


def _lut_entry(fn: lut_ops.LutFunction) -> NpuPattern:
    """One function of the LUT registry (npu_byoc.ops.lut) as a table entry."""

    def extract(root, bindings) -> QLut:
        tail = _Tail(root, bindings)
        deqs = _dequantize_leaves(tail.body, bindings)
        try:
            params = fn.params(tail.body, bindings, tail)
        except (lut_ops.NotThisFunction, AttributeError, IndexError) as err:
            raise Reject(f"not a {fn.name}: {err}") from None
        x = deqs[0].args[0]
        inp = _activation(deqs[0], bindings, "input", x)
        for d in deqs[1:]:
            if not d.args[0].same_as(x) or _activation(d, bindings, "input", x) != inp:
                raise Reject(f"the {fn.name} form reads two different tensors")
        out = tail.output(bindings)
        lo, hi = tail.clamp(out, bindings)
        return QLut(
            function=fn.name, input=inp, output=out, act_min=lo, act_max=hi, convention="qdq",
            params=tuple(sorted(params.items())), operands=(x,),
        )

    conventions = tuple(
        Convention(f"{form.name}{tail}", form.source, pat, form.text + tail_form)
        for form in fn.forms
        for tail, pat, tail_form in _requant_tail(form.build(_deq))
    )
    return NpuPattern(
        name=f"npu.{fn.name}",
        summary=fn.summary,
        anchor_ops=tuple(sorted({a for form in fn.forms for a in form.anchor_ops})),
        conventions=conventions,
        extract=extract,
        checks=(*C.COMMON, lut_ops.int8_to_int8, lut_ops.has_table, *fn.checks, lut_ops.table_computable),
        applies=fn.applies,
        subject=fn.op_name,
    )


def _is_constant(expr, bindings) -> bool:
    try:
        const_eval(expr, bindings)
    except NotConstant:
        return False
    return True


def _dequantize_leaves(body, bindings) -> list:
    """The dequantize calls a float body reads (each use of x has its own copy)."""
    out, stack = [], [body]
    while stack:
        e = resolve(stack.pop(), bindings)
        if op_name(e) == "relax.dequantize":
            if not _is_constant(e.args[0], bindings):  # a constant operand is a parameter
                out.append(e)
        elif isinstance(e, relax.Call):
            stack.extend(e.args)
    if not out:
        raise Reject("no quantized input")
    return out


def _single_window_strides(a, in_shape, out_shape, layout: str) -> tuple:
    """Along an axis with one output window the stride has no effect beyond keeping it the
    only one: the smallest such stride, so that a global pool written with stride = window
    (DS-CNN's 25x5 AVERAGE_POOL_2D) meets the NPU's stride limit. Floor mode only (ceil-mode
    pools are refused by the checks)."""
    strides = int_list(a.strides)
    if bool(a.ceil_mode) or in_shape is None or out_shape is None or len(out_shape) != 4:
        return strides
    axes = (1, 2) if layout == "NHWC" else (2, 3)
    pad = int_list(a.padding)  # top, left, bottom, right
    out = []
    for k, (s, ax) in enumerate(zip(strides, axes)):
        slack = int(in_shape[ax]) + pad[k] + pad[k + 2] - int_list(a.pool_size)[k]  # >= 0 when valid
        out.append(max(1, min(s, slack + 1)) if int(out_shape[ax]) == 1 and slack >= 0 else s)
    return tuple(out)


def _pool_from_call(kind, pool, inp, out, lo, hi, convention, x) -> QPool2D:
    a = pool.attrs
    layout = str(a.layout)
    if layout not in ("NHWC", "NCHW") or str(a.out_layout) != layout:
        raise Reject(f"{kind}_pool2d layout {layout}: NPU supports NHWC and NCHW")
    return QPool2D(
        kind=kind,
        layout=layout,
        input=inp,
        output=out,
        pool_size=int_list(a.pool_size),
        strides=_single_window_strides(a, inp.shape, out.shape, layout),
        padding=int_list(a.padding),
        dilation=int_list(a.dilation),
        ceil_mode=bool(a.ceil_mode),
        count_include_pad=bool(a.count_include_pad),
        act_min=lo,
        act_max=hi,
        convention=convention,
        operands=(x,),
    )


def _carried(tensor) -> QTensor:
    """An integer tensor whose quantization passes through the op unchanged (scale unknown here)."""
    return QTensor(shape=shape_of(tensor), dtype=dtype_of(tensor), scale=None, zero_point=0)


def _extract_pool(kind: str):
    relax_op = f"relax.nn.{kind}_pool2d"

    def extract(root, bindings) -> QPool2D:
        e = resolve(root, bindings)
        int_clip = None
        if op_name(e) == "relax.clip":
            int_clip, e = e, resolve(e.args[0], bindings)
        if op_name(e) == "relax.quantize":  # QDQ form
            tail = _Tail(root, bindings)
            pool = tail.body
            x_deq = resolve(pool.args[0], bindings)
            inp = _activation(x_deq, bindings, "input", x_deq.args[0])
            out = tail.output(bindings)
            lo, hi = tail.clamp(out, bindings)
            return _pool_from_call(kind, pool, inp, out, lo, hi, "qdq", x_deq.args[0])
        # Integer forms: max_pool2d on int8, or astype(int32) -> avg_pool2d -> astype(int8).
        if op_name(e) == "relax.astype":
            e = resolve(e.args[0], bindings)
        pool = e
        if op_name(pool) != relax_op:
            raise Reject(f"not a {kind}_pool2d")
        x = resolve(pool.args[0], bindings)
        convention = "integer"
        folded = None
        if op_name(x) == "relax.astype":
            x = x.args[0]
            convention = "cast-wrapped"
        elif kind == "max" and op_name(x) == "relax.nn.pad":
            # a pad filled with the dtype's minimum never wins a max: it is max-pool padding
            lowest = _DTYPE_RANGE.get(dtype_of(x), (-128, 127))[0]
            x, folded = _unpad(x, bindings, str(pool.attrs.layout), lowest, "max_pool2d")
        inp = _carried(x)
        out = _carried(root)
        lo, hi = _DTYPE_RANGE.get(out.dtype, (-128, 127))
        if int_clip is not None:
            lo = max(lo, int(np.ceil(float(prim_value(int_clip.args[1])))))
            hi = min(hi, int(np.floor(float(prim_value(int_clip.args[2])))))
        op = _pool_from_call(kind, pool, inp, out, lo, hi, convention, x)
        return op if folded is None else replace(op, padding=_add_padding(op.padding, folded))

    return extract


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


def _extract_binary(word: str, verb: str, record: type):
    """add / multiply of two dequantized int8 tensors -> QAdd / QMul. One may be a constant of
    the model (a BatchNorm's scale or offset left after a concat): it becomes input_b, carried
    as ``constant`` with its shape padded to the output's rank as numpy broadcasts it."""

    def extract(root, bindings):
        tail = _Tail(root, bindings)
        a, b = (resolve(x, bindings) for x in tail.body.args)
        for role, d in (("first", a), ("second", b)):
            if op_name(d) != "relax.dequantize":
                raise Reject(f"{role} operand of {word} is not a quantized tensor")
        constants = [_constant_value(d, bindings) for d in (a, b)]
        if all(c is not None for c in constants):
            raise Reject(f"both operands of {word} are constants: nothing for the NPU to {verb.removesuffix('s')}")
        if constants[0] is not None:  # ADD and MUL commute exactly (TFLite rescales both alike)
            (a, b), constants = (b, a), constants[::-1]
        out = tail.output(bindings)
        qa = _activation(a, bindings, "input a", a.args[0])
        qb = _activation(b, bindings, "input b", b.args[0])
        constant = constants[1]
        if constant is not None:
            shape = (1,) * (len(out.shape) - constant.ndim) + constant.shape
            qb = replace(qb, shape=shape)
            constant = constant.reshape(shape)
        lo, hi = tail.clamp(out, bindings)
        return record(
            input_a=qa, input_b=qb, output=out, act_min=lo, act_max=hi,
            convention="qdq", constant=constant,
            operands=(a.args[0],) if constant is not None else (a.args[0], b.args[0]),
        )

    return extract


def _constant_value(dequantize, bindings) -> np.ndarray | None:
    """The integer values of a dequantized model constant, None for an activation."""
    try:
        return np.asarray(const_eval(dequantize.args[0], bindings))
    except NotConstant:
        return None


_extract_add = _extract_binary("add", "adds", QAdd)
_extract_mul = _extract_binary("mul", "multiplies", QMul)


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


_RESHAPE_OPS = ("relax.reshape", "relax.squeeze", "relax.expand_dims")


def _reshape_core(x: DFPattern) -> DFPattern:
    return is_op("relax.reshape")(x, wildcard()) | is_op("relax.squeeze")(x) | is_op("relax.expand_dims")(x)


def _reshape_conventions() -> tuple[Convention, ...]:
    form = "reshape | squeeze | expand_dims"
    return (
        Convention("qdq", "ONNX QDQ (Flatten, Reshape, Squeeze)", _quant(_reshape_core(_deq())),
                   f"dequantize(x) → {form} → quantize (same scale and zero point)"),
        Convention("int8", "TFLite (RESHAPE, SQUEEZE)", _reshape_core(wildcard()), f"{form}(int8 x)"),
    )


def _moves(x: DFPattern) -> DFPattern:
    """TVM's own imports of data movement: a resize (nearest copies pixels) or a strided slice
    (ONNX Resize, Slice, and Split after split_to_slices)."""
    return (is_op("relax.image.resize2d")(x, wildcard())
            | is_op("relax.strided_slice")(x, wildcard(), wildcard(), wildcard(), wildcard()))  # fmt: skip


def _gather_conventions() -> tuple[Convention, ...]:
    core = is_op("relax.reshape")(is_op("relax.take")(is_op("relax.reshape")(wildcard(), wildcard()), is_const()), wildcard())
    moves = "image.resize2d(nearest) | strided_slice"
    return (Convention("int8", "TFLite (RESIZE_NEAREST_NEIGHBOR, STRIDED_SLICE, SPLIT, TILE, GATHER)", core,
                       "reshape(take(reshape(int8 x, [N]), constant indices), shape)"),
            Convention("qdq", "ONNX QDQ (Resize nearest, Slice, Split)", _quant(_moves(_deq())),
                       f"dequantize(x) → {moves} → quantize (same scale and zero point)"),
            Convention("int8-op", "TVM's import of int8 data movement", _moves(wildcard()), f"{moves}(int8 x)"))


def _move_index(call, bindings) -> tuple[np.ndarray, str | None] | None:
    """(the flat input element each output element copies, its layout if the op says) of a
    resize2d or strided_slice; None for a resize that interpolates (not this entry's)."""
    in_shape, out_shape = shape_of(call.args[0]), shape_of(call)
    if op_name(call) == "relax.image.resize2d":
        a = call.attrs
        if str(a.method) != "nearest_neighbor":
            return None
        layout = str(a.layout)
        if layout not in ("NCHW", "NHWC") or len(in_shape) != 4:
            raise Reject(f"resize2d layout {layout}: the NPU copies NHWC or NCHW feature maps")
        try:
            return gather.resize_index(in_shape, out_shape, layout, str(a.coordinate_transformation_mode),
                                       str(a.rounding_method)), layout  # fmt: skip
        except ValueError as err:
            raise Reject(str(err)) from None
    axes, begin, end, strides = ([int(prim_value(f)) for f in t.fields] for t in call.args[1:5])
    try:
        index = gather.slice_index(in_shape, axes, begin, end, strides)
    except (ValueError, IndexError) as err:
        raise Reject(f"strided_slice axes {axes}: {err}") from None
    if tuple(index.shape) != tuple(out_shape):
        raise Reject(f"strided_slice of {list(in_shape)} gives {list(index.shape)}, its output says {list(out_shape)}")
    return index, None


def _extract_gather(root, bindings) -> QGather:
    e = resolve(root, bindings)
    if op_name(e) == "relax.reshape":  # TFLite: reshape(take(reshape(x, [N]), indices), shape)
        take = resolve(e.args[0], bindings)
        x = resolve(take.args[0], bindings).args[0]
        flat = _const(take.args[1], bindings, "gather indices").astype(np.int64).ravel()
        out_shape = shape_of(e)
        if flat.size != int(np.prod(out_shape)):
            raise Reject("gather indices do not fill the output")
        convention = "constant" if _is_constant(x, bindings) else "int8"
        return QGather(_carried(x), _carried(root), flat.reshape(out_shape), convention, "NHWC", operands=(x,))
    qdq = op_name(e) == "relax.quantize"  # ONNX QDQ: dequantize -> move -> quantize
    move = resolve(e.args[0], bindings) if qdq else e
    deq = resolve(move.args[0], bindings) if qdq else None
    x = deq.args[0] if qdq else move.args[0]
    found = _move_index(move, bindings)
    if found is None:  # an interpolating resize: npu.resize_bilinear's
        return QGather(_carried(x), _carried(root), np.zeros(0, np.int64), "other", operands=(x,))
    index, layout = found
    if not qdq:
        return QGather(_carried(x), _carried(root), index, "int8", layout, operands=(x,))
    inp, out = _activation(deq, bindings, "input", x), _activation(e, bindings, "output", e)
    if not C.same_quantization(inp, out):
        raise Reject(f"input (scale {inp.scale:.6g} zp {inp.zero_point}) quantized unlike the output (scale "
                     f"{out.scale:.6g} zp {out.zero_point}): the NPU copies the integers unchanged")  # fmt: skip
    return QGather(inp, out, index, "qdq", layout, operands=(x,))


_RESIZE_MODES = {"half_pixel": (False, True), "align_corners": (True, False), "asymmetric": (False, False)}


def _extract_resize_bilinear(root, bindings) -> QResizeBilinear:
    """dequantize(x) -> image.resize2d(linear) -> quantize: TVM's import of TFLite RESIZE_BILINEAR."""
    q = resolve(root, bindings)
    resize = resolve(q.args[0], bindings)
    deq = resolve(resize.args[0], bindings)
    a = resize.attrs
    mode = str(a.coordinate_transformation_mode)
    if str(a.method) == "nearest_neighbor":  # npu.gather's: a copy
        return QResizeBilinear(_carried(deq.args[0]), _carried(q), False, False, str(a.layout), "nearest")
    if str(a.method) != "linear" or mode not in _RESIZE_MODES:
        raise Reject(f"resize2d {a.method} with {mode} coordinates: the NPU runs bilinear with half-pixel, "
                     "align-corners or asymmetric coordinates")  # fmt: skip
    x = deq.args[0]
    align, half = _RESIZE_MODES[mode]
    return QResizeBilinear(_activation(deq, bindings, "input", x), _activation(q, bindings, "output", q), align, half,
                           str(a.layout), "qdq", operands=(x,))  # fmt: skip


def _extract_reshape(root, bindings) -> QReshape:
    e = resolve(root, bindings)
    if op_name(e) == "relax.quantize":
        deq = resolve(resolve(e.args[0], bindings).args[0], bindings)
        x = deq.args[0]
        return QReshape(_activation(deq, bindings, "input", x), _activation(e, bindings, "output", e), "qdq",
                        operands=(x,))
    x = e.args[0]
    # a constant's reshape (weights in the integer forms) is folded, not offloaded: not ours
    convention = "constant" if _is_constant(x, bindings) else "int8"
    return QReshape(_carried(x), _carried(root), convention, operands=(x,))


MAX_CONCAT_INPUTS = 8  # the concatenations the table matches (one tuple pattern per count)


def _any_count(field: Callable[[], DFPattern]) -> DFPattern:
    """concat((f, f), axis) | concat((f, f, f), axis) | ... up to MAX_CONCAT_INPUTS fields."""
    alternatives = [is_op("relax.concat")(is_tuple([field() for _ in range(n)]))
                    for n in range(2, MAX_CONCAT_INPUTS + 1)]  # fmt: skip
    out = alternatives[0]
    for alt in alternatives[1:]:
        out = out | alt
    return out


def _concat_conventions() -> tuple[Convention, ...]:
    n = f"2..{MAX_CONCAT_INPUTS}"
    return (
        Convention("qdq", "TFLite CONCATENATION, ONNX QDQ Concat", _quant(_any_count(_deq)),
                   f"concat((dequantize(x1), …, dequantize(xn)), axis) → quantize, n = {n}"),
        Convention("int8", "hand-written Relax", _any_count(wildcard), f"concat((int8 x1, …, int8 xn), axis), n = {n}"),
        # any other concatenation: only to say why it is not matched (more inputs than the table takes)
        Convention("other", "TFLite, ONNX QDQ", _quant(is_op("relax.concat")(wildcard())),
                   f"concat of more than {MAX_CONCAT_INPUTS} dequantized inputs → quantize: stays on the CPU"),
    )


def _extract_concat(root, bindings) -> QConcat:
    e = resolve(root, bindings)
    quantize = e if op_name(e) == "relax.quantize" else None
    concat = resolve(e.args[0], bindings) if quantize is not None else e
    fields = list(resolve(concat.args[0], bindings).fields)
    if len(fields) > MAX_CONCAT_INPUTS:
        raise Reject(f"CONCATENATION of {len(fields)} inputs: the NPU pattern table matches up to {MAX_CONCAT_INPUTS}")
    rank = len(shape_of(concat))
    axis = int(concat.attrs.axis) % rank
    if quantize is None:  # the integer form: quantization carried through
        xs = fields
        return QConcat(tuple(_carried(x) for x in xs), _carried(root), axis, "int8", operands=tuple(xs))
    deqs = [resolve(f, bindings) for f in fields]
    if any(op_name(d) != "relax.dequantize" for d in deqs):
        return QConcat((), _carried(root), axis, "other")  # matched by the catch-all: not ours
    xs = [d.args[0] for d in deqs]
    inputs = tuple(_activation(d, bindings, f"input {k}", x) for k, (d, x) in enumerate(zip(deqs, xs)))
    return QConcat(inputs, _activation(quantize, bindings, "output", quantize), axis, "qdq", operands=tuple(xs))


# ---------------------------------------------------------------------------------------------
# The table. Order matters: earlier entries win a contested binding.


def _is_depthwise(op: QConv2D) -> bool:
    return op.groups > 1 and op.groups == op.in_channels


_CONV_CHECKS = (*C.COMMON, *C.WEIGHTED, C.requant_left_shift_fits, C.conv_groups, C.conv_kernel, C.conv_stride, C.conv_dilation, C.conv_padding, C.conv_channels)

_CONV_CONVENTIONS = tuple(_qdq_weighted("relax.nn.conv2d", padded=True)
                          + _qdq_weighted("relax.nn.conv2d") + _zp_weighted("relax.nn.conv2d")
                          + _int32_weighted("relax.nn.conv2d"))


def _pool_conventions(kind: str) -> tuple[Convention, ...]:
    op = f"relax.nn.{kind}_pool2d"
    short = op.removeprefix("relax.")
    qdq = _qdq_unary(lambda x: is_op(op)(x), f"dequantize(x) → {short}")
    if kind == "avg":
        cast = is_op("relax.astype")(is_op(op)(is_op("relax.astype")(wildcard())))
        form = f"astype(x, int32) → {short} → astype(int8)"
        integer = [
            Convention("cast-wrapped+clip", "TFLite", _int_clip(cast), form + " → clip"),
            Convention("cast-wrapped", "TFLite", cast, form),
        ]
    else:
        plain = is_op(op)(wildcard())
        padded = is_op(op)(_pad(wildcard()))
        pad_form = f"nn.pad(int8 x, fill=-128) → {short}"
        integer = [
            Convention("integer+pad+clip", "TFLite", _int_clip(padded), pad_form + " → clip"),
            Convention("integer+pad", "TFLite", padded, pad_form),
            Convention("integer+clip", "TFLite", _int_clip(plain), f"{short}(int8 x) → clip"),
            Convention("integer", "TFLite", plain, f"{short}(int8 x)"),
        ]
    return tuple(qdq + integer)


def _mean_conventions() -> tuple[Convention, ...]:
    qdq = _qdq_unary(lambda x: is_op("relax.mean")(x), "dequantize(x) → mean")
    int_body = _deq(is_op("relax.mean")(is_op("relax.astype")(wildcard())))
    form = "astype(x, int32) → mean → dequantize(s_x, zp_x)"
    integer = [
        Convention(f"int32-requantize{t}", "hand-written Relax", p, form + f)
        for t, p, f in _requant_tail(int_body)
    ]
    return tuple(qdq + integer)


PATTERN_TABLE: tuple[NpuPattern, ...] = (
    NpuPattern(
        name="npu.conv2d",
        summary="2-D convolution with per-channel requantize (bias, fused ReLU/ReLU6 clamp)",
        anchor_ops=("relax.nn.conv2d",),
        conventions=_CONV_CONVENTIONS,
        extract=_extract_conv2d,
        checks=_CONV_CHECKS,
        applies=lambda op: not _is_depthwise(op),
    ),
    NpuPattern(
        name="npu.transpose_conv2d",
        summary="transposed 2-D convolution (TRANSPOSE_CONV) with per-channel requantize, run as one stride-1 conv per output phase",
        anchor_ops=("relax.nn.conv2d_transpose",),
        conventions=tuple(_qdq_weighted("relax.nn.conv2d_transpose")),
        extract=_extract_transpose_conv,
        checks=(*C.COMMON, *C.WEIGHTED, C.requant_left_shift_fits, C.transpose_conv_form, C.transpose_conv_stride, C.transpose_conv_kernel,
                C.transpose_conv_channels),
    ),
    NpuPattern(
        name="npu.depthwise_conv2d",
        summary="depthwise 2-D convolution (groups == channels) with per-channel requantize",
        anchor_ops=("relax.nn.conv2d",),
        conventions=_CONV_CONVENTIONS,
        extract=_extract_conv2d,
        checks=_CONV_CHECKS,
        applies=_is_depthwise,
    ),
    NpuPattern(
        name="npu.fully_connected",
        summary="fully connected (matmul with constant weights) with per-channel requantize",
        anchor_ops=("relax.matmul",),
        conventions=tuple(_qdq_weighted("relax.matmul") + _zp_weighted("relax.matmul") + _int32_weighted("relax.matmul")),
        extract=_extract_fc,
        checks=(*C.COMMON, *C.WEIGHTED, C.fc_features),
    ),
    NpuPattern(
        name="npu.avg_pool2d",
        summary="average pooling, dividing by the valid (non-padded) element count with rounding",
        anchor_ops=("relax.nn.avg_pool2d",),
        conventions=_pool_conventions("avg"),
        extract=_extract_pool("avg"),
        checks=(*C.COMMON, C.pool_window, C.pool_padding_semantics, C.pool_same_quantization, C.pool_uint8_rounding),
    ),
    NpuPattern(
        name="npu.max_pool2d",
        summary="max pooling on int8",
        anchor_ops=("relax.nn.max_pool2d",),
        conventions=_pool_conventions("max"),
        extract=_extract_pool("max"),
        checks=(*C.COMMON, C.pool_window, C.pool_padding_semantics, C.pool_same_quantization),
        # max_pool2d(x) also matches the float max_pool2d inside a QDQ form whose QDQ match
        # was rejected: that is not an integer max_pool, so this entry stays silent.
        applies=lambda op: op.convention == "qdq" or not op.input.dtype.startswith(("float", "bfloat")),
    ),
    NpuPattern(
        name="npu.mean",
        summary="mean over the spatial axes with requantize (global average pooling)",
        anchor_ops=("relax.mean",),
        conventions=_mean_conventions(),
        extract=_extract_mean,
        checks=(*C.COMMON, C.mean_spatial, C.requant_left_shift_fits),
    ),
    NpuPattern(
        name="npu.add",
        summary="elementwise add of two int8 tensors with rescaling, one may be a channel vector or a model constant (TFLite int8 add)",
        anchor_ops=("relax.add",),
        conventions=tuple(
            _qdq_unary(lambda x: is_op("relax.add")(x, _deq()), "dequantize(a), dequantize(b) → add")
        ),
        extract=_extract_add,
        checks=(*C.COMMON, C.binary_broadcast),
    ),
    NpuPattern(
        name="npu.mul",
        summary="elementwise multiply of two int8 tensors, one may be a [1, 1, 1, C] channel vector or a model constant (TFLite int8 mul)",
        anchor_ops=("relax.multiply",),
        conventions=tuple(
            _qdq_unary(lambda x: is_op("relax.multiply")(x, _deq()), "dequantize(a), dequantize(b) → multiply")
        ),
        extract=_extract_mul,
        checks=(*C.COMMON, C.binary_broadcast),
    ),
    *(_lut_entry(fn) for fn in lut_ops.FUNCTIONS.values()),
    NpuPattern(
        name="npu.softmax",
        summary="int8 softmax over the last axis, bit-exact with TFLite's integer reference kernel (exp table, "
                "fixed-point sum and reciprocal)",
        anchor_ops=("relax.nn.softmax",),
        conventions=_softmax_conventions(),
        extract=_extract_softmax,
        checks=(*C.COMMON, *C.SOFTMAX),
        subject=lambda numerics: "SOFTMAX" if numerics == "tflite" else "Softmax",
    ),
    NpuPattern(
        name="npu.gather",
        summary="nearest-neighbour resize, strided slice, split, tile of int8 pixels: strided copies (identity LUT passes)",
        anchor_ops=("relax.take",),
        conventions=_gather_conventions(),
        extract=_extract_gather,
        checks=(*C.COMMON, C.gather_copies),
        applies=lambda op: op.convention not in ("constant", "other") and op.input.dtype in _INT_ACTIVATIONS,
    ),
    NpuPattern(
        name="npu.resize_bilinear",
        summary="bilinear resize by an integer factor (RESIZE_BILINEAR, LiteRT's int8 kernel): depthwise passes per output phase",
        anchor_ops=("relax.image.resize2d",),
        conventions=(Convention("qdq", "TFLite RESIZE_BILINEAR", _quant(is_op("relax.image.resize2d")(_deq(), wildcard())),
                                "dequantize(x) → image.resize2d(linear) → quantize"),),
        extract=_extract_resize_bilinear,
        checks=(*C.COMMON, C.resize_same_quantization, C.resize_passes),
        applies=lambda op: op.convention != "nearest",
    ),
    NpuPattern(
        name="npu.reshape",
        summary="reshape / squeeze / flatten between NPU ops: a view of the same bytes inside the partition (no NPU work)",
        anchor_ops=_RESHAPE_OPS,
        conventions=_reshape_conventions(),
        extract=_extract_reshape,
        checks=(*C.COMMON, C.reshape_same_quantization),
        applies=lambda op: op.convention != "constant" and op.input.dtype in _INT_ACTIVATIONS,
        view=True,
    ),
    NpuPattern(
        name="npu.concat",
        summary="concatenation along channels, rows or columns: each input's producer writes its slice of the "
                "output in place; an input that cannot be (a partition input, one to rescale) is copied in by a LUT op",
        anchor_ops=("relax.concat",),
        conventions=_concat_conventions(),
        extract=_extract_concat,
        checks=(*C.COMMON, C.concat_axis, C.concat_same_quantization),
        applies=lambda op: op.convention != "other" and all(t.dtype in _INT_ACTIVATIONS for t in op.inputs),
        view=True,
    ),
)

PATTERNS_BY_NAME = {p.name: p for p in PATTERN_TABLE}
VIEW_PATTERNS = frozenset(p.name for p in PATTERN_TABLE if p.view)  # composites with no NPU op
