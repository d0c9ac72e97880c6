"""AVERAGE_POOL_2D and MAX_POOL_2D: pooling on int8 that keeps the quantization (average over
the valid elements, rounded): the conventions, extraction into a :class:`QPool2D`, checks and
lowering to :class:`Pool`."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import tvm
from tvm import relax
from tvm.relax.dpl import is_op, wildcard
from tvm.relax.expr_functor import PyExprMutator, mutator

from . import checks as C
from ._qdq import (
    _DTYPE_RANGE, _Tail, _activation, _add_padding, _carried, _deq, _int_clip, _pad, _qdq_unary, _quant,
    _requant_tail, _unpad,
)  # fmt: skip
from ..arch.config import HwConfig
from ..arch import numerics as nx
from .canonical import CanonicalForm
from .entry import Convention, NpuPattern
from .npu_ops import NpuOp, Pool, TensorRef
from .pad import quantized_fill
from .npu_op_spec import NpuOpSpec, what
from .records import QPool2D, Reject
from ..util.relax_utils import dtype_of, int_list, op_name, prim_value, resolve


# ---------------------------------------------------------------------------------------------
# Conventions and extraction


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
        # ONNX QDQ: a Pad quantized on its own (onnxruntime's quantizer) whose fill is int8's minimum
        padded_qdq = is_op(op)(_deq(_quant(_pad(_deq()))))
        qdq = [Convention(f"qdq+pad{tail}", "ONNX QDQ", pat, f"dequantize(quantize(nn.pad(dequantize(x), v → -128))) → {short}"
                          + tail_form) for tail, pat, tail_form in _requant_tail(padded_qdq)] + qdq  # fmt: skip
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


def _single_window_strides(a, in_shape, out_shape, layout: str) -> tuple:
    """Along an axis with one output window the stride has no effect beyond keeping it the
    only one: the smallest such stride, so that a global pool written with stride = window
    (DS-CNN's 25x5 AVERAGE_POOL_2D) meets the NPU's stride limit. Floor mode only (a ceil-mode
    pool's extra window depends on its stride)."""
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


def _ceil_padding(a, in_shape, out_shape, layout: str) -> tuple:
    """A ceil-mode pool's padding with its extra bottom/right windows made explicit: the rows
    and columns past the edge that the last window reads. Those are padding the NPU excludes,
    as ONNX (onnxruntime) and TVM exclude them from a max and from an average's count
    (count_include_pad=0); the output shape is the model's own (ONNX drops a last window that
    would start in the padding, and then it needs no extra row)."""
    pad = list(int_list(a.padding))  # top, left, bottom, right
    if not bool(a.ceil_mode) or in_shape is None or out_shape is None or len(out_shape) != 4:
        return tuple(pad)
    axes = (1, 2) if layout == "NHWC" else (2, 3)
    for k, ax in enumerate(axes):
        reach = (int(out_shape[ax]) - 1) * int_list(a.strides)[k] + int_list(a.pool_size)[k]
        pad[k + 2] += max(0, reach - (int(in_shape[ax]) + pad[k] + pad[k + 2]))
    return tuple(pad)


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
        padding=_ceil_padding(a, inp.shape, out.shape, layout),
        dilation=int_list(a.dilation),
        ceil_mode=bool(a.ceil_mode),
        count_include_pad=bool(a.count_include_pad),
        act_min=lo,
        act_max=hi,
        convention=convention,
        operands=(x,),
    )


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
            x_deq, folded = resolve(pool.args[0], bindings), None
            if kind == "max":
                x_deq, folded = _unpad_qdq(x_deq, bindings, str(pool.attrs.layout))
            inp = _activation(x_deq, bindings, "input", x_deq.args[0])
            out = tail.output(bindings)
            lo, hi = tail.clamp(out, bindings)
            op = _pool_from_call(kind, pool, inp, out, lo, hi, "qdq", x_deq.args[0])
            return op if folded is None else replace(op, padding=_add_padding(op.padding, folded))
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


def _unpad_qdq(x_deq, bindings, layout: str):
    """``dequantize(quantize(nn.pad(dequantize(x), v)))`` with one quantization throughout and
    ``v`` quantizing to the dtype's minimum, which never wins a max: ``dequantize(x)`` and the
    pad's (top, left, bottom, right) widths. Anything else: ``x_deq`` unchanged."""
    q = resolve(x_deq.args[0], bindings)
    pad = resolve(q.args[0], bindings) if op_name(q) == "relax.quantize" else None
    inner = resolve(pad.args[0], bindings) if op_name(pad) == "relax.nn.pad" else None
    if op_name(inner) != "relax.dequantize":
        return x_deq, None
    tensors = [_activation(c, bindings, what, t) for c, what, t in
               ((inner, "PAD input", inner.args[0]), (q, "PAD output", q), (x_deq, "max_pool2d input", x_deq.args[0]))]
    if len({(t.scale, t.zero_point, t.dtype) for t in tensors}) != 1:
        raise Reject("PAD before max_pool2d changes the quantization: only a pad that keeps it folds")
    lowest = _DTYPE_RANGE.get(tensors[1].dtype, (-128, 127))[0]
    fill = quantized_fill(float(pad.attrs.pad_value), tensors[1])
    if fill != lowest:
        raise Reject(f"PAD fill {float(pad.attrs.pad_value):g} (quantized {fill}) before max_pool2d: only a pad "
                     f"filled with {lowest} folds into it (the others are npu.pad)")
    _, folded = _unpad(pad, bindings, layout, float(pad.attrs.pad_value), "max_pool2d")
    return inner, folded


# ---------------------------------------------------------------------------------------------
# Checks


def pool_window(op: QPool2D, hw: HwConfig) -> str | None:
    """Pool window at most max_pool_window, stride at most max_pool_stride, dilation 1."""
    if max(op.pool_size) > hw.max_pool_window:
        return f"{op.kind}_pool2d window {op.pool_size}: NPU supports windows up to {hw.max_pool_window}"
    if max(op.strides) > hw.max_pool_stride:
        return f"{op.kind}_pool2d stride {op.strides}: NPU supports strides up to {hw.max_pool_stride}"
    if op.dilation != (1, 1):
        return f"{op.kind}_pool2d dilation {op.dilation}: NPU supports dilation 1"
    return None


def pool_padding_semantics(op: QPool2D, hw: HwConfig) -> str | None:
    """Average pooling divides by the count of valid (non-padded) elements; a ceil-mode pool's
    extra windows are padding (its record's ``padding`` includes them)."""
    if op.kind == "avg" and op.count_include_pad and any(op.padding):
        ceil = " (ceil_mode's extra windows included)" if op.ceil_mode else ""
        return f"avg_pool2d counting padded elements{ceil}: NPU divides by the valid elements (TFLite semantics)"
    ph, pw = op.pool_size
    t, l, b, r = op.padding
    if max(t, b) >= ph or max(l, r) >= pw:
        return f"{op.kind}_pool2d padding {op.padding} with a {ph}x{pw} window: NPU pads less than the window"
    return None


def pool_same_quantization(op: QPool2D, hw: HwConfig) -> str | None:
    """Pooling keeps the quantization: input and output share scale and zero point."""
    if not C.same_quantization(op.input, op.output):
        return (
            f"{op.kind}_pool2d rescales (input scale {op.input.scale:.6g} zp {op.input.zero_point}, "
            f"output scale {op.output.scale:.6g} zp {op.output.zero_point}): NPU pooling keeps the quantization"
        )
    return None


def pool_uint8_rounding(op: QPool2D, hw: HwConfig) -> str | None:
    """Integer average pooling of uint8 tensors (TFLite) runs when every window holds an odd
    number of elements: TFLite rounds a uint8 average half up, the NPU (int8, the uint8 bytes
    flipped) half away from zero, and the two differ at exact ties, which need an even count."""
    if op.kind != "avg" or op.convention == "qdq" or op.input.source_dtype != "uint8":
        return None
    spatial = (1, 2) if op.layout == "NHWC" else (2, 3)
    t, l, b, r = op.padding
    for axis, k, s, lo, hi in zip(spatial, op.pool_size, op.strides, (t, l), (b, r)):
        n = op.input.shape[axis]
        for start in range(-lo, n + hi - k + 1, s):
            count = min(start + k, n) - max(start, 0)
            if count % 2 == 0:
                return (f"avg_pool2d of uint8 over windows of {count} valid elements along an axis: TFLite "
                        "rounds uint8 averages half up, the NPU's int8 average half away from zero "
                        "(they differ at ties; odd window counts only)")
    return None


# ---------------------------------------------------------------------------------------------
# Lowering


def _lower_pool(name: str, op: QPool2D, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    return Pool(
        name=name,
        pool=op.kind,
        ifm=ifms[0],
        ofm=ofm,
        kernel=tuple(op.pool_size),
        stride=tuple(op.strides),
        padding=tuple(op.padding),
        act_min=op.act_min,
        act_max=op.act_max,
    )


# ---------------------------------------------------------------------------------------------
# Table entries


AVG_POOL2D = NpuPattern(
    name="npu.avg_pool2d",
    summary="average pooling, dividing by the valid (non-padded) element count with rounding",
    anchor_ops=("relax.nn.avg_pool2d",),
    conventions=_pool_conventions("avg"),
    extract=_extract_pool("avg"),
    checks=(*C.COMMON, pool_window, pool_padding_semantics, pool_same_quantization, pool_uint8_rounding),
)


MAX_POOL2D = NpuPattern(
    name="npu.max_pool2d",
    summary="max pooling on int8",
    anchor_ops=("relax.nn.max_pool2d",),
    conventions=_pool_conventions("max"),
    extract=_extract_pool("max"),
    checks=(*C.COMMON, pool_window, pool_padding_semantics, pool_same_quantization),
    # max_pool2d(x) also matches the float max_pool2d inside a QDQ form whose QDQ match
    # was rejected: that is not an integer max_pool, so this entry stays silent.
    applies=lambda op: op.convention == "qdq" or not op.input.dtype.startswith(("float", "bfloat")),
)


ENTRIES = (AVG_POOL2D, MAX_POOL2D)
LOWERINGS = {QPool2D: _lower_pool}


# ---------------------------------------------------------------------------------------------
# Golden semantics, unit limits (the typed op's spec: npu_byoc.ops.npu_op_spec)


def golden_pool(op: Pool, x: np.ndarray) -> np.ndarray:
    kernel = nx.avg_pool2d if op.pool == "avg" else nx.max_pool2d
    return kernel(x[None], op.kernel, op.stride, tuple(op.padding), op.act_min, op.act_max)[0]


def _unit_reason(npu_op: Pool, hw: HwConfig) -> str | None:
    (kh, kw), (sh, sw) = npu_op.kernel, npu_op.stride
    if max(kh, kw) > hw.max_pool_window:
        return f"{what(npu_op)} runs a {kh}x{kw} window: the NPU takes up to max_pool_window={hw.max_pool_window}"
    if max(sh, sw) > hw.max_pool_stride:
        return f"{what(npu_op)} runs stride {sh}x{sw}: the NPU takes up to max_pool_stride={hw.max_pool_stride}"
    return None


NPU_OPS = {Pool: NpuOpSpec(golden_pool, "spatial", unit_reason=_unit_reason)}


# ---------------------------------------------------------------------------------------------
# Canonical form: a max pool's pad (npu_byoc.ops.canonical)


@mutator
class _PadFill(PyExprMutator):
    def __init__(self, fills: dict, mod=None):
        super().__init__(mod)
        self.fills = fills  # nn.pad Call -> its new fill

    def visit_call_(self, call):
        fill = next((f for c, f in self.fills.items() if c.same_as(call)), None)
        if fill is None:
            return super().visit_call_(call)
        a = call.attrs
        return relax.op.nn.pad(self.visit_expr(call.args[0]), int_list(a.pad_width), str(a.pad_mode), fill)


def floor_max_pool_pads(mod: tvm.IRModule) -> tvm.IRModule:
    """Canonicalise: a constant PAD read only by max pools, whose input is clamped at or above
    its fill (keras' ZeroPadding2D after a ReLU: fill = zero point = the clamp's floor), fills
    with the dtype's minimum instead. Every window keeps at least one input element (the pad
    plus the pool's own padding is narrower than the window), so no maximum changes, and the
    pad then folds into the pool (a max pool ignores its padding)."""
    main = mod["main"]
    values = {b.var: b.value for block in main.body.blocks for b in block.bindings}
    readers: dict = {}
    for var, value in values.items():
        for v in relax.analysis.free_vars(value):
            readers.setdefault(v, []).append(value)
    fills = {}
    for var, pad in values.items():
        if op_name(pad) != "relax.nn.pad" or str(pad.attrs.pad_mode) != "constant" or not isinstance(pad.args[0], relax.Var):
            continue
        clip, users = values.get(pad.args[0]), readers.get(var, [])
        lowest = _DTYPE_RANGE.get(dtype_of(var), (None,))[0]
        if lowest is None or op_name(clip) != "relax.clip" or not users or float(pad.attrs.pad_value) == lowest:
            continue
        if float(prim_value(clip.args[1])) >= float(pad.attrs.pad_value) and all(_keeps_an_element(u, pad) for u in users):
            fills[pad] = float(lowest)
    if not fills:
        return mod
    out = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    out["main"] = _PadFill(fills, mod).visit_expr(main)
    return out


def _keeps_an_element(user, pad) -> bool:
    """``user`` is a max pool whose every window holds an element of the pad's input."""
    if op_name(user) != "relax.nn.max_pool2d":
        return False
    a = user.attrs
    layout = str(a.layout)
    if layout not in ("NHWC", "NCHW") or any(int(d) != 1 for d in a.dilation):
        return False
    widths = int_list(pad.attrs.pad_width)
    axes = (1, 2) if layout == "NHWC" else (2, 3)
    top, left, bottom, right = int_list(a.padding)
    own = ((top, bottom), (left, right))
    return all(widths[2 * ax] + own[k][0] < int(a.pool_size[k]) and widths[2 * ax + 1] + own[k][1] < int(a.pool_size[k])
               for k, ax in enumerate(axes))


CANONICAL_FORMS = (CanonicalForm(2, floor_max_pool_pads),)
