"""The pieces the op modules (npu_byoc.ops.<op>) share: the QDQ / int32-accumulate pattern
builders (requantize tails, weighted and unary conventions) and the extraction helpers
(quantization parameters, the output stage, weights, biases, folded pads).

Matching is structural and permissive (weights and scales are wildcards): extraction then
demands constants, per-tensor activations, int8 and so on, so that every near miss gets a
reason a user can act on instead of silently not matching.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
from tvm import relax
from tvm.relax.dpl import DFPattern, is_op, wildcard

from .entry import Convention
from .records import QTensor, Reject
from ..util.relax_utils import (
    NotConstant, const_eval, dtype_of, int_list, op_name, prim_value, resolve, shape_of,
)  # fmt: skip


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
    """The float clip bound x as the quantize after it maps it: round_half_even(float32(x) /
    float32(s_out)) + zp_out, as onnxruntime's QuantizeLinear and TVM's legalized quantize
    divide (a double quotient rounds the other way where the float32 one lands on a tie)."""
    if not np.isfinite(x):
        return -(2**31) if x < 0 else 2**31 - 1
    with np.errstate(over="ignore"):
        q = float(np.rint(np.float32(x) / np.float32(out.scale)))
    return int(max(min(q, 2.0**31 - 1), -(2.0**31))) + out.zero_point


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
# Shared by several ops


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


def _carried(tensor) -> QTensor:
    """An integer tensor whose quantization passes through the op unchanged (scale unknown here)."""
    return QTensor(shape=shape_of(tensor), dtype=dtype_of(tensor), scale=None, zero_point=0)


def _extract_binary(word: str, verb: str, record: type, operands: Callable = lambda body, bindings: body.args,
                    commutes: bool = True, float_constant: bool = False):
    """add / multiply / subtract of two dequantized int8 tensors -> QAdd / QMul / QSub. One may be
    a constant of the model (a BatchNorm's scale or offset left after a concat, a Normalization
    layer's mean): it becomes input_b, carried as ``constant`` with its shape padded to the
    output's rank as numpy broadcasts it; an op that does not commute (SUB) records the swap as
    ``reverse``. ``float_constant``: the constant may also be float (onnxruntime's QDQ quantizer
    leaves Sub's initializer float): quantized here (:func:`_quantized_constant`).
    ``operands(body, bindings)``: the two dequantized operands of the float computation before
    the output's quantize (its arguments; a squared difference's subtract's)."""

    def extract(root, bindings):
        tail = _Tail(root, bindings)
        out = tail.output(bindings)
        a, b = (resolve(x, bindings) for x in operands(tail.body, bindings))
        (qa, ca, xa), (qb, cb, xb) = (_binary_operand(d, bindings, role, word, out, float_constant)
                                      for role, d in (("a", a), ("b", b)))  # fmt: skip
        if ca is not None and cb is not None:
            raise Reject(f"both operands of {word} are constants: nothing for the NPU to {verb.removesuffix('s')}")
        swapped = ca is not None
        if swapped:  # ADD, MUL, SQUARED_DIFFERENCE commute exactly (both rescaled alike); SUB says so
            (qa, ca, xa), (qb, cb, xb) = (qb, cb, xb), (qa, ca, xa)
        if cb is not None:
            shape = (1,) * (len(out.shape) - cb.ndim) + cb.shape
            qb, cb = replace(qb, shape=shape), cb.reshape(shape)
        lo, hi = tail.clamp(out, bindings)
        return record(
            input_a=qa, input_b=qb, output=out, act_min=lo, act_max=hi,
            convention="qdq" if xb is not None else "qdq-float",  # "qdq-float": a float constant quantized here
            constant=cb, operands=(xa,) if cb is not None else (xa, xb),
            **({} if commutes else {"reverse": swapped}),
        )

    return extract


def _binary_operand(d, bindings, role: str, word: str, out: QTensor, float_constant: bool):
    """(its quantization, its int8 values when it is a model constant else None, the quantized
    tensor the composite reads) of operand ``role`` ("a", "b") of a binary op."""
    if op_name(d) == "relax.dequantize":
        return _activation(d, bindings, f"input {role}", d.args[0]), _constant_value(d, bindings), d.args[0]
    value = _float_value(d, bindings) if float_constant else None
    if value is None:
        raise Reject(f"{'first' if role == 'a' else 'second'} operand of {word} is not a quantized tensor")
    return (*_quantized_constant(value, word, out.scale), None)


def _float_value(expr, bindings) -> np.ndarray | None:
    """The values of a float constant of the model, None for anything else."""
    try:
        value = np.asarray(const_eval(expr, bindings))
    except NotConstant:
        return None
    return value if value.dtype.kind == "f" else None


def _quantized_constant(value: np.ndarray, word: str, out_scale: float) -> tuple[QTensor, np.ndarray]:
    """A float constant operand as int8 (its range, 0 included, in 255 steps; each value within
    half a step of itself): exact in the ADD unit's arithmetic thereafter. Its step must not
    exceed the output's scale, so the result stays within 1 LSB of the float computation."""
    v = value.astype(np.float32)
    lo, hi = min(float(v.min()), 0.0), max(float(v.max()), 0.0)
    scale = float(np.float32((hi - lo) / 255.0)) or float(out_scale)
    if scale > out_scale:
        raise Reject(f"{word}'s float constant spans [{lo:.6g}, {hi:.6g}]: as int8 its step {scale:.6g} is coarser "
                     f"than the output's scale {out_scale:.6g} (more than 1 LSB off the float result)")  # fmt: skip
    zp = int(np.clip(round(-128 - lo / scale), -128, 127))
    ints = np.clip(np.rint(v / np.float32(scale)) + zp, -128, 127).astype(np.int8)
    return QTensor(tuple(v.shape), "int8", scale, zp), ints


def _constant_value(dequantize, bindings) -> np.ndarray | None:
    """The integer values of a dequantized model constant, None for an activation."""
    try:
        return np.asarray(const_eval(dequantize.args[0], bindings))
    except NotConstant:
        return None
