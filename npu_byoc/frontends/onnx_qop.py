"""ONNX QOperator and integer ops rewritten, before TVM's import, into graphs TVM imports.

TVM 0.27's Relax ONNX frontend has no QLinearConv, QLinearMatMul, ConvInteger nor
onnxruntime's contrib ops (com.microsoft QGemm, QLinearAdd, QLinearMul, QLinearSigmoid,
QLinearLeakyRelu, QLinearAveragePool, QLinearGlobalAveragePool, QLinearConcat,
QLinearSoftmax, QLinearWhere), the ops
``quantize_static(..., quant_format=QuantFormat.QOperator)`` writes. Each is rewritten into the
graph that defines it:

* a QLinear op -> ``DequantizeLinear`` of every quantized input -> the float op ->
  ``QuantizeLinear`` (the QDQ form the pattern table matches). An int32 bias (QLinearConv,
  QGemm) is dequantized with scale ``x_scale * w_scale`` (per channel), zero point 0, so the
  bias still adds to the integer accumulator;
* ConvInteger -> ``Cast(int32)`` -> ``Sub(zero point)`` of both operands -> ``Conv`` on int32.
  MatMulInteger is left to TVM, which imports it in that same form.

Scales given in float16 become float32 constants (the conversion is exact). The compute node
keeps the original node's name, the Q/DQ nodes are named after it, and :func:`rewrite` returns
which op type each rewritten compute node came from, so coverage reports name the QOperator op.
Names from the model are data only. An attribute value the rewrite does not know is a
:class:`ModelLoadError` naming the node and the attribute.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelLoadError

MS_DOMAIN = "com.microsoft"
_FLOAT = 1  # onnx.TensorProto.FLOAT
_INT32 = 6  # onnx.TensorProto.INT32


@dataclass
class Rewrite:
    """What :func:`rewrite` did: the new model and, for each rewritten compute node, the op
    type of the node it replaced (``{"conv1": "QLinearConv"}``)."""

    model: object
    origin: dict[str, str] = field(default_factory=dict)
    # helper nodes (Cast, Sub, Transpose ...) emitted before a compute node: provenance gives
    # their bindings to that compute node, so a report lists the original op once
    helpers: set[str] = field(default_factory=set)


class _Graph:
    """The graph being rewritten: its constants, the names in use, and the nodes emitted for
    one original node."""

    def __init__(self, model, path):
        from onnx import numpy_helper

        self.path = path
        self.graph = model.graph
        self.consts: dict[str, np.ndarray] = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
        for node in model.graph.node:  # Constant nodes hold constants too
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.output) == 1:
                value = next((a for a in node.attribute if a.name == "value"), None)
                if value is not None:
                    self.consts[node.output[0]] = numpy_helper.to_array(value.t)
        self.used = {i.name for i in model.graph.initializer} | {v.name for v in model.graph.input}
        for node in model.graph.node:
            self.used.update(node.output)
            self.used.add(node.name)
        self.ranks = _ranks(model)
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        self.new_inits: list = []
        self.nodes: list = []
        self.helpers: set[str] = set()

    # -- names and constants -------------------------------------------------------------
    def fresh(self, stem: str) -> str:
        name, k = stem, 1
        while name in self.used:
            name, k = f"{stem}_{k}", k + 1
        self.used.add(name)
        return name

    def const(self, stem: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        name = self.fresh(stem)
        self.new_inits.append(numpy_helper.from_array(np.array(value), name))  # keeps 0-d (ascontiguousarray would not)
        self.consts[name] = value
        return name

    def node(self, op_type: str, inputs, outputs, name: str, **attrs) -> None:
        from onnx import helper

        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), name=name, **attrs))


class _Node:
    """One original node being rewritten: its inputs and attributes, and checks that fail
    with the node and the attribute named."""

    def __init__(self, g: _Graph, proto):
        from onnx import helper

        self.g = g
        self.proto = proto
        self.name = proto.name or self.g.fresh(f"{proto.op_type}")
        self.attrs = {a.name: helper.get_attribute_value(a) for a in proto.attribute}
        self._scales: dict[int, str] = {}

    def fail(self, what: str) -> ModelLoadError:
        return ModelLoadError(f"{self.g.path}: {self.proto.op_type} node {self.name!r}: {what}")

    def input(self, k: int, what: str, required: bool = True) -> str | None:
        ins = self.proto.input
        name = ins[k] if k < len(ins) and ins[k] else None
        if name is None and required:
            raise self.fail(f"input {k} ({what}) is missing")
        return name

    def only_attrs(self, *known: str) -> None:
        for a in self.attrs:
            if a not in known:
                raise self.fail(f"attribute {a!r} is not supported (known: {', '.join(known) or 'none'})")

    def flag(self, attr: str) -> bool:
        v = self.attrs.get(attr, 0)
        if v not in (0, 1):
            raise self.fail(f"attribute {attr!r} = {v!r} (must be 0 or 1)")
        return bool(v)

    # -- quantization parameters ---------------------------------------------------------
    def scale(self, k: int, what: str) -> str:
        """A float32 scale (input k): a constant is checked (finite, > 0) and made float32
        (exact from float16), a size-1 one a scalar; a run-time one is cast to float32."""
        if k not in self._scales:
            self._scales[k] = self._scale(k, what)
        return self._scales[k]

    def _scale(self, k: int, what: str) -> str:
        name = self.input(k, what)
        value = self.g.consts.get(name)
        if value is None:
            out = self.g.fresh(f"{self.name}/{what}_f32")
            self.g.node("Cast", [name], [out], self.g.fresh(f"{self.name}/{what}_cast"), to=_FLOAT)
            return out
        if value.dtype.kind != "f":
            raise self.fail(f"{what} {name!r} has dtype {value.dtype}: scales are floating point")
        v64 = value.astype(np.float64)
        if v64.size == 0 or not np.all(np.isfinite(v64) & (v64 > 0)):
            bad = v64.ravel()[~(np.isfinite(v64.ravel()) & (v64.ravel() > 0))]
            raise self.fail(f"{what} {name!r} = {bad[0] if bad.size else 'empty'}: scales must be finite and > 0")
        f32 = value.astype(np.float32)
        f32 = f32.reshape(()) if f32.size == 1 else f32.reshape(-1)
        if value.dtype == np.float32 and value.shape == f32.shape:
            return name
        return self.g.const(f"{self.name}/{what}", f32)

    def zero_point(self, k: int, what: str, dtype, size: int = 1) -> str:
        """A zero point matching its scale's size (a size-1 one a scalar); absent: 0 of ``dtype``."""
        name = self.input(k, what, required=False)
        if name is None:
            if dtype is None:
                raise self.fail(f"{what} is absent and the quantized type of its tensor is unknown")
            return self.g.const(f"{self.name}/{what}", np.zeros((size,) if size > 1 else (), dtype))
        value = self.g.consts.get(name)
        if value is None:
            return name
        if value.size == size and value.shape == ((size,) if size > 1 else ()):
            return name
        if value.size == 1:
            value = np.full((size,) if size > 1 else (), value.ravel()[0], value.dtype)
        elif value.size != size:
            raise self.fail(f"{what} {name!r} has {value.size} values for {size} scales")
        return self.g.const(f"{self.name}/{what}", value.reshape(-1))

    def scale_size(self, scale: str) -> int:
        v = self.g.consts.get(scale)
        return 1 if v is None else int(v.size)

    def dequantize(self, x: str, scale: str, zp: str, what: str, axis: int | None = None) -> str:
        out = self.g.fresh(f"{self.name}/{what}_dq")
        attrs = {"axis": axis} if axis is not None and self.scale_size(scale) > 1 else {}
        self.g.node("DequantizeLinear", [x, scale, zp], [out], self.g.fresh(f"{self.name}/dequantize_{what}"), **attrs)
        return out

    def quantize(self, x: str, scale: str, zp: str, out: str) -> None:
        self.g.node("QuantizeLinear", [x, scale, zp], [out], self.g.fresh(f"{self.name}/quantize"))

    def quantized_input(self, k: int, what: str, dtypes: dict, axis: int | None = None) -> str:
        """DequantizeLinear of (input k, its scale k+1, its zero point k+2)."""
        x = self.input(k, what)
        s = self.scale(k + 1, f"{what}_scale")
        z = self.zero_point(k + 2, f"{what}_zero_point", dtypes.get(x), self.scale_size(s))
        return self.dequantize(x, s, z, what, axis)

    def compute(self, op_type: str, inputs, out: str | None = None, **attrs) -> str:
        """The op that yields the result, named like the original node (provenance names it
        after the QOperator); the nodes emitted before it, other than Q/DQ, are its helpers."""
        out = out or self.g.fresh(f"{self.name}/{op_type.lower()}")
        self.g.helpers.update(n.name for n in self.g.nodes if n.op_type not in _QDQ)
        self.g.node(op_type, inputs, [out], self.name, **attrs)
        self.g.used.add(self.name)
        return out

    def requantize(self, y: str, k: int, dtypes: dict, in_dtype_of: str) -> None:
        """QuantizeLinear of the float result with (scale k, zero point k+1) into the output."""
        s = self.scale(k, "y_scale")
        z = self.zero_point(k + 1, "y_zero_point", dtypes.get(in_dtype_of), 1)
        self.quantize(y, s, z, self.proto.output[0])

    def bias(self, k: int, x_scale: str, w_scale: str, channels: int, factor: float = 1.0) -> str | None:
        """An int32 bias dequantized with scale factor * x_scale * w_scale[c], zero point 0."""
        b = self.input(k, "bias", required=False)
        if b is None:
            return None
        xs, ws = self.g.consts.get(x_scale), self.g.consts.get(w_scale)
        if xs is not None and ws is not None:
            s = (np.float32(factor) * xs.astype(np.float32) * ws.astype(np.float32)).astype(np.float32)
            s = s.reshape(()) if s.size == 1 else s.reshape(-1)
            scale = self.g.const(f"{self.name}/bias_scale", s)
        else:
            scale = self.g.fresh(f"{self.name}/bias_scale")
            self.g.node("Mul", [x_scale, w_scale], [scale], self.g.fresh(f"{self.name}/bias_scale_mul"))
            if factor != 1.0:
                scaled = self.g.fresh(f"{self.name}/bias_scale_alpha")
                alpha = self.g.const(f"{self.name}/alpha", np.float32(factor))
                self.g.node("Mul", [scale, alpha], [scaled], self.g.fresh(f"{self.name}/bias_scale_alpha_mul"))
                scale = scaled
        zp = self.g.const(f"{self.name}/bias_zero_point", np.zeros((channels,) if self.scale_size(scale) > 1 else (), np.int32))
        return self.dequantize(b, scale, zp, "bias", axis=0)


# ---------------------------------------------------------------------------------------------
# One function per op. Each emits the replacement nodes through ``n`` (the original node).

_QDQ = ("QuantizeLinear", "DequantizeLinear")
_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
_POOL_ATTRS = ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides")


def _qlinear_conv(n: _Node, dtypes: dict) -> None:
    """QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp[, B]), weights per output channel."""
    n.only_attrs(*_CONV_ATTRS)
    x = n.quantized_input(0, "x", dtypes)
    w = n.quantized_input(3, "w", dtypes, axis=0)
    ws = n.scale(4, "w_scale")
    b = n.bias(8, n.scale(1, "x_scale"), ws, n.scale_size(ws))
    y = n.compute("Conv", [x, w] + ([b] if b else []), **{k: v for k, v in n.attrs.items()})
    n.requantize(y, 6, dtypes, n.proto.input[0])


def _qlinear_matmul(n: _Node, dtypes: dict) -> None:
    """QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp); a per row, b per column."""
    n.only_attrs()
    a = n.quantized_input(0, "a", dtypes, axis=-2)
    b_init = n.g.consts.get(n.input(3, "b"))
    b = n.quantized_input(3, "b", dtypes, axis=(b_init.ndim - 1) if b_init is not None else -1)
    y = n.compute("MatMul", [a, b])
    n.requantize(y, 6, dtypes, n.proto.input[0])


def _qgemm(n: _Node, dtypes: dict) -> None:
    """com.microsoft QGemm(A, a_scale, a_zp, B, b_scale, b_zp[, C[, y_scale, y_zp]]): C is int32
    with scale alpha * a_scale * b_scale; without y_scale the output is float."""
    n.only_attrs("alpha", "transA", "transB")
    alpha = float(n.attrs.get("alpha", 1.0))
    trans_a, trans_b = n.flag("transA"), n.flag("transB")
    a = n.quantized_input(0, "a", dtypes)
    b = n.quantized_input(3, "b", dtypes, axis=0 if trans_b else 1)
    bs = n.scale(4, "b_scale")
    c = n.bias(6, n.scale(1, "a_scale"), bs, n.scale_size(bs), factor=alpha)
    attrs = {"transA": int(trans_a), "transB": int(trans_b)}
    if alpha != 1.0:
        attrs["alpha"] = alpha
    if n.input(7, "y_scale", required=False) is None:
        n.compute("Gemm", [a, b] + ([c] if c else []), out=n.proto.output[0], **attrs)
        return
    y = n.compute("Gemm", [a, b] + ([c] if c else []), **attrs)
    n.requantize(y, 7, dtypes, n.proto.input[0])


def _binary(op_type: str):
    def rewrite(n: _Node, dtypes: dict) -> None:
        """com.microsoft QLinear{Add,Mul}(A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp)."""
        n.only_attrs()
        a = n.quantized_input(0, "a", dtypes)
        b = n.quantized_input(3, "b", dtypes)
        y = n.compute(op_type, [a, b])
        n.requantize(y, 6, dtypes, n.proto.input[0])

    return rewrite


def _unary(op_type: str, attrs: tuple[str, ...] = ()):
    def rewrite(n: _Node, dtypes: dict) -> None:
        """com.microsoft QLinear{Sigmoid,LeakyRelu}(X, X_scale, X_zp, Y_scale, Y_zp)."""
        n.only_attrs(*attrs)
        x = n.quantized_input(0, "x", dtypes)
        y = n.compute(op_type, [x], **{k: v for k, v in n.attrs.items()})
        n.requantize(y, 3, dtypes, n.proto.input[0])

    return rewrite


def _pool(op_type: str, attrs: tuple[str, ...]):
    def rewrite(n: _Node, dtypes: dict) -> None:
        """com.microsoft QLinear{Average,GlobalAverage}Pool(X, x_scale, x_zp, y_scale, y_zp);
        ``channels_last`` = 1 (NHWC) pools between two Transposes."""
        n.only_attrs(*attrs, "channels_last")
        x = n.quantized_input(0, "x", dtypes)
        pool_attrs = {k: v for k, v in n.attrs.items() if k != "channels_last"}
        if n.flag("channels_last"):
            rank = _rank(n, n.proto.input[0], pool_attrs)
            to_first = [0, rank - 1, *range(1, rank - 1)]
            to_last = [0, *range(2, rank), 1]
            xt, pooled = n.g.fresh(f"{n.name}/x_channels_first"), n.g.fresh(f"{n.name}/pooled")
            n.g.node("Transpose", [x], [xt], n.g.fresh(f"{n.name}/to_channels_first"), perm=to_first)
            n.g.node(op_type, [xt], [pooled], n.g.fresh(f"{n.name}/{op_type}"), **pool_attrs)
            # the node yielding the result carries the name (provenance: see compute)
            y = n.compute("Transpose", [pooled], perm=to_last)
        else:
            y = n.compute(op_type, [x], **pool_attrs)
        n.requantize(y, 3, dtypes, n.proto.input[0])

    return rewrite


def _rank(n: _Node, x: str, attrs: dict) -> int:
    if "kernel_shape" in attrs:
        return len(attrs["kernel_shape"]) + 2
    rank = n.g.ranks.get(x)
    if rank is None:
        raise n.fail("channels_last = 1 with an input of unknown rank")
    return rank


def _qlinear_concat(n: _Node, dtypes: dict) -> None:
    """com.microsoft QLinearConcat(Y_scale, Y_zp, X1, X1_scale, X1_zp, ...), attribute axis."""
    n.only_attrs("axis")
    if "axis" not in n.attrs:
        raise n.fail("attribute 'axis' is missing")
    count = len(n.proto.input) - 2
    if count < 1 or count % 3:
        raise n.fail(f"{len(n.proto.input)} inputs: expected Y_scale, Y_zero_point and (X, X_scale, X_zero_point) triples")
    xs = [n.quantized_input(2 + 3 * k, f"x{k}", dtypes) for k in range(count // 3)]
    y = n.compute("Concat", xs, axis=int(n.attrs["axis"]))
    n.requantize(y, 0, dtypes, n.proto.input[2])


def _qlinear_softmax(n: _Node, dtypes: dict) -> None:
    """com.microsoft QLinearSoftmax(X, X_scale, X_zp, Y_scale, Y_zp), attributes axis and opset
    (the Softmax opset it was quantized from: below 13, softmax over the input flattened to 2-D
    at axis, which equals Softmax(axis) of the model's opset only where both agree)."""
    n.only_attrs("axis", "opset")
    was_opset = int(n.attrs.get("opset", 13))
    axis = int(n.attrs.get("axis", -1 if was_opset >= 13 else 1))
    x = n.quantized_input(0, "x", dtypes)
    rank = n.g.ranks.get(n.proto.input[0])
    last = rank is not None and axis % rank == rank - 1
    if (was_opset >= 13) != (n.g.opset >= 13) and not last:
        raise n.fail(f"attribute 'opset' = {was_opset} with axis {axis} in an opset-{n.g.opset} model: "
                     "softmax over more than the last axis is not supported")
    y = n.compute("Softmax", [x], axis=axis)
    n.requantize(y, 3, dtypes, n.proto.input[0])


def _qlinear_where(n: _Node, dtypes: dict) -> None:
    """com.microsoft QLinearWhere(condition, X, x_scale, x_zp, Y, y_scale, y_zp, z_scale, z_zp)."""
    n.only_attrs()
    x = n.quantized_input(1, "x", dtypes)
    y = n.quantized_input(4, "y", dtypes)
    z = n.compute("Where", [n.input(0, "condition"), x, y])
    n.requantize(z, 7, dtypes, n.proto.input[1])


def _conv_integer(n: _Node, dtypes: dict) -> None:
    """ConvInteger(x, w[, x_zp[, w_zp]]) -> Conv(int32(x) - x_zp, int32(w) - w_zp[c]) in int32.
    Padding adds zeros after the subtraction: the zero point, as ConvInteger pads."""
    n.only_attrs(*_CONV_ATTRS)
    w_name = n.input(1, "w")
    w_const = n.g.consts.get(w_name)
    rank = w_const.ndim if w_const is not None else (len(n.attrs["kernel_shape"]) + 2 if "kernel_shape" in n.attrs else 4)
    x = _minus_zero_point(n, n.input(0, "x"), n.input(2, "x_zero_point", required=False), "x", None)
    w = _minus_zero_point(n, w_name, n.input(3, "w_zero_point", required=False), "w", rank)
    n.compute("Conv", [x, w], out=n.proto.output[0], **{k: v for k, v in n.attrs.items()})


def _minus_zero_point(n: _Node, x: str, zp: str | None, what: str, rank: int | None) -> str:
    """int32(x) - int32(zp); a per-output-channel weight zero point is shaped [O, 1, ...]."""
    xi = n.g.fresh(f"{n.name}/{what}_int32")
    n.g.node("Cast", [x], [xi], n.g.fresh(f"{n.name}/cast_{what}"), to=_INT32)
    if zp is None:
        return xi
    z = n.g.consts.get(zp)
    if z is not None:
        z = z.astype(np.int32)
        if not z.any():
            return xi
        if z.size > 1 and rank is not None:
            z = z.reshape((-1,) + (1,) * (rank - 1))
        elif z.size == 1:
            z = z.reshape(())
        zname = n.g.const(f"{n.name}/{what}_zero_point_int32", z)
    else:
        if rank is not None:
            raise n.fail(f"{what}_zero_point {zp!r} is not a constant")
        zname = n.g.fresh(f"{n.name}/{what}_zero_point_int32")
        n.g.node("Cast", [zp], [zname], n.g.fresh(f"{n.name}/cast_{what}_zero_point"), to=_INT32)
    out = n.g.fresh(f"{n.name}/{what}_centered")
    n.g.node("Sub", [xi, zname], [out], n.g.fresh(f"{n.name}/subtract_{what}_zero_point"))
    return out


# (domain, op_type) -> rewrite; the default domain is "" (also written "ai.onnx").
REWRITES: dict[tuple[str, str], Callable[[_Node, dict], None]] = {
    ("", "QLinearConv"): _qlinear_conv,
    ("", "QLinearMatMul"): _qlinear_matmul,
    ("", "ConvInteger"): _conv_integer,
    (MS_DOMAIN, "QGemm"): _qgemm,
    (MS_DOMAIN, "QLinearAdd"): _binary("Add"),
    (MS_DOMAIN, "QLinearMul"): _binary("Mul"),
    (MS_DOMAIN, "QLinearSigmoid"): _unary("Sigmoid"),
    (MS_DOMAIN, "QLinearLeakyRelu"): _unary("LeakyRelu", ("alpha",)),
    (MS_DOMAIN, "QLinearAveragePool"): _pool("AveragePool", _POOL_ATTRS),
    (MS_DOMAIN, "QLinearGlobalAveragePool"): _pool("GlobalAveragePool", ()),
    (MS_DOMAIN, "QLinearConcat"): _qlinear_concat,
    (MS_DOMAIN, "QLinearSoftmax"): _qlinear_softmax,
    (MS_DOMAIN, "QLinearWhere"): _qlinear_where,
}


# the op types of onnxruntime's QOperator format (coverage reports name it as the convention)
QOPERATOR_OPS = frozenset(op for _, op in REWRITES if op.startswith("Q"))


def _key(node) -> tuple[str, str]:
    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    return domain, node.op_type


def needs_rewrite(model) -> bool:
    return any(_key(n) in REWRITES for n in model.graph.node)


def rewrite(model, path="<model>") -> Rewrite:
    """Rewrite every QOperator / integer node of ``model`` (an ``onnx.ModelProto``, not changed)
    into its QDQ or integer-accumulate graph. Models without such nodes come back as they are."""
    if not needs_rewrite(model):
        return Rewrite(model)
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = _Graph(out, path)
    dtypes = _int_dtypes(out, g.consts)
    origin = {}
    new_nodes = []
    for proto in out.graph.node:
        fn = REWRITES.get(_key(proto))
        if fn is None:
            new_nodes.append(proto)
            continue
        g.nodes = []
        n = _Node(g, proto)
        try:
            fn(n, dtypes)
        except ModelLoadError:
            raise
        except Exception as err:  # a malformed attribute (a string alpha ...): one line, no traceback
            raise n.fail(f"cannot rewrite it ({type(err).__name__}: {err})") from None
        origin[n.name] = proto.op_type
        new_nodes.extend(g.nodes)
    del out.graph.node[:]
    out.graph.node.extend(new_nodes)
    out.graph.initializer.extend(g.new_inits)
    if not any(n.domain == MS_DOMAIN for n in out.graph.node):
        keep = [o for o in out.opset_import if o.domain != MS_DOMAIN]
        del out.opset_import[:]
        out.opset_import.extend(keep)
    return Rewrite(out, origin, g.helpers)


_NP_OF_ONNX = {2: np.uint8, 3: np.int8, 6: np.int32, 5: np.int16, 4: np.uint16}
# the input holding each quantized op's output zero point
_OUTPUT_ZERO_POINT = {
    ("", "QuantizeLinear"): 2, ("", "QLinearConv"): 7, ("", "QLinearMatMul"): 7, (MS_DOMAIN, "QGemm"): 8,
    (MS_DOMAIN, "QLinearAdd"): 7, (MS_DOMAIN, "QLinearMul"): 7, (MS_DOMAIN, "QLinearSigmoid"): 4,
    (MS_DOMAIN, "QLinearLeakyRelu"): 4, (MS_DOMAIN, "QLinearAveragePool"): 4,
    (MS_DOMAIN, "QLinearGlobalAveragePool"): 4, (MS_DOMAIN, "QLinearConcat"): 1,
    (MS_DOMAIN, "QLinearSoftmax"): 4, (MS_DOMAIN, "QLinearWhere"): 8,
}  # fmt: skip
# ops whose outputs have their first input's type (integers pass through them unchanged)
_SAME_TYPE = frozenset({"Identity", "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "MaxPool",
                        "Slice", "Split", "Pad", "Resize", "Gather", "Concat", "Relu", "Clip"})


def _int_dtypes(model, consts) -> dict:
    """The integer dtype of each tensor where it can be told: graph inputs, constants, the
    outputs of quantized ops (their output zero point's type; absent: QuantizeLinear's uint8,
    else the data input's) and of type-preserving ops. Needed only where a zero point is absent."""
    out = {name: v.dtype.type for name, v in consts.items()}
    for v in list(model.graph.input) + list(model.graph.value_info):
        t = _NP_OF_ONNX.get(v.type.tensor_type.elem_type)
        if t is not None:
            out[v.name] = t
    for node in model.graph.node:
        key, t = _key(node), None
        if key in _OUTPUT_ZERO_POINT:
            k = _OUTPUT_ZERO_POINT[key]
            k_data = {"QLinearConcat": 2, "QLinearWhere": 1}.get(key[1], 0)
            data = node.input[k_data] if k_data < len(node.input) else None
            zp = node.input[k] if k < len(node.input) and node.input[k] else None
            t = out.get(zp) if zp else (np.uint8 if key[1] == "QuantizeLinear" else out.get(data))
        elif key[0] == "" and key[1] in _SAME_TYPE and node.input:
            t = out.get(node.input[0])
        if t is not None:
            for o in node.output:
                out.setdefault(o, t)
    return out


def _ranks(model) -> dict:
    out = {}
    for v in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        tt = v.type.tensor_type
        if tt.HasField("shape"):
            out[v.name] = len(tt.shape.dim)
    return out
