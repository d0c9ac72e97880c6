"""Hand-written quantized Relax modules, one NPU operation each.

Every builder returns an ``IRModule`` whose ``main`` holds exactly one quantized operator in
one of the conventions of the pattern table (docs: npu_byoc/ops/table.py). The defaults are
supported by the NPU; each keyword argument changes one property so that a test can break
exactly one thing ("the same conv2d, but with dilation 2").

Conventions used throughout:

- ``scale`` / ``zero_point`` arguments are Python numbers (per-tensor) or sequences
  (per-channel, quantized along ``axis``);
- conv weights are given in the kernel layout of the module (HWIO for NHWC, OIHW for NCHW),
  fully-connected weights as ``[in_features, out_features]`` (the matmul operand);
- ``clip=(lo, hi)`` adds an integer ``clip`` after the final ``quantize`` (TFLite's fused
  activation), ``float_clip=(lo, hi)`` a float ``clip`` before it (ONNX's Relu6 / Clip) and
  ``relu=True`` a float ``nn.relu`` before it.

The builders never call npu_byoc: they are the independent input of its tests.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tvm
from tvm import relax

R = relax.op

Number = float | int


# ---------------------------------------------------------------------------------------------
# Small helpers


def rng_weights(shape: Sequence[int], seed: int = 0, dtype: str = "int8", low: int = -127, high: int = 127) -> np.ndarray:
    """Deterministic integer weights (``low..high`` inclusive) for a builder."""
    rng = np.random.default_rng(seed)
    return rng.integers(low, high + 1, size=tuple(shape)).astype(dtype)


def rng_bias(n: int, seed: int = 1, bound: int = 1000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(-bound, bound + 1, size=n).astype(np.int32)


def default_weight_scales(n: int) -> np.ndarray:
    """Per-channel weight scales, distinct per channel, exactly representable in float32."""
    return (np.arange(1, n + 1, dtype=np.float64) / 256.0).astype(np.float32)


def _scale_const(v) -> relax.Constant:
    return relax.const(np.asarray(v, dtype=np.float32))


def _zp_const(v, dtype: str = "int8") -> relax.Constant:
    # Zero points of uint8/int16 tensors may lie outside int8: store them in the tensor's dtype.
    return relax.const(np.asarray(v).astype(dtype))


def _tensor(name: str, shape: Sequence[int], dtype: str) -> relax.Var:
    return relax.Var(name, relax.TensorType(list(shape), dtype))


def _param_or_const(value, name: str, as_param: bool, params: list) -> relax.Expr:
    """A constant, or (as_param) a function parameter of the same type (appended to params)."""
    arr = np.asarray(value)
    if not as_param:
        return relax.const(arr)
    v = _tensor(name, arr.shape, str(arr.dtype))
    params.append(v)
    return v


def _build(params: list, body) -> tvm.IRModule:
    """main(params) with one dataflow block; ``body(bb)`` emits the bindings, returns the result."""
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = body(bb)
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    return bb.get()


def _requantize_tail(bb, y, out_scale, out_zp, out_dtype, *, relu=False, float_clip=None, clip=None):
    """[nn.relu | float clip] -> quantize -> [integer clip]."""
    if relu:
        y = bb.emit(R.nn.relu(y))
    if float_clip is not None:
        y = bb.emit(R.clip(y, float(float_clip[0]), float(float_clip[1])))
    q = bb.emit(R.quantize(y, _scale_const(out_scale), _zp_const(out_zp, out_dtype), axis=-1, out_dtype=out_dtype))
    if clip is not None:
        q = bb.emit(R.clip(q, int(clip[0]), int(clip[1])))
    return q


def _dequantize_act(bb, x, scale, zp, dtype, channel_axis: int, scale_expr=None):
    """dequantize of an activation; a vector ``scale`` quantizes it along ``channel_axis``."""
    s = scale_expr if scale_expr is not None else _scale_const(scale)
    axis = channel_axis if np.ndim(scale) > 0 else -1
    return bb.emit(R.dequantize(x, s, _zp_const(zp, dtype), axis=axis))


def _add_bias(bb, y, bias, scale, layout: str):
    """``y`` + dequantize(int32 ``bias``, ``scale``) along the channel axis of ``layout``."""
    b = bb.emit(R.dequantize(relax.const(np.asarray(bias, np.int32)), _scale_const(scale), _zp_const(0, "int32"), axis=0))
    if layout == "NCHW":
        b = bb.emit(R.reshape(b, (1, len(bias), 1, 1)))
    return bb.emit(R.add(y, b))


def _conv_out_hw(hw, kernel, strides, padding, dilation):
    t, l, b, r = padding
    oh = (hw[0] + t + b - dilation[0] * (kernel[0] - 1) - 1) // strides[0] + 1
    ow = (hw[1] + l + r - dilation[1] * (kernel[1] - 1) - 1) // strides[1] + 1
    return oh, ow


def _pad4(padding) -> tuple[int, int, int, int]:
    p = (padding,) if isinstance(padding, int) else tuple(padding)
    if len(p) == 1:
        return (p[0],) * 4
    if len(p) == 2:
        return (p[0], p[1], p[0], p[1])
    return tuple(p)  # type: ignore[return-value]


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# conv2d


def conv_weight_shape(layout: str, kernel, in_channels: int, out_channels: int, groups: int = 1) -> tuple[int, ...]:
    """Kernel shape in the builder's kernel layout (HWIO for NHWC, OIHW for NCHW)."""
    kh, kw = _pair(kernel)
    cin_g = in_channels // groups
    return (kh, kw, cin_g, out_channels) if layout == "NHWC" else (out_channels, cin_g, kh, kw)


def qdq_conv2d(
    *,
    layout: str = "NHWC",
    input_hw: tuple[int, int] = (8, 8),
    in_channels: int = 4,
    out_channels: int = 8,
    kernel=(3, 3),
    strides=(1, 1),
    padding=(1, 1),
    dilation=(1, 1),
    groups: int = 1,
    weight: np.ndarray | None = None,
    weight_scale=None,
    weight_zp=None,
    weight_axis: int | None = None,
    weight_dtype: str = "int8",
    weights_as_param: bool = False,
    act_dtype: str = "int8",
    output_dtype: str | None = None,
    input_scale=0.5,
    input_zp: int = 3,
    input_scale_as_param: bool = False,
    output_scale: float = 0.25,
    output_zp: int = -5,
    bias: np.ndarray | None = None,
    bias_scale=None,
    relu: bool = False,
    float_clip=None,
    clip=None,
    input_name: str = "x",
    pre_pad=None,
    pre_pad_value: float | None = None,
) -> tvm.IRModule:
    """[nn.pad(x, pre_pad, pre_pad_value)] -> dequantize, dequantize(W, axis=out-channel) -> nn.conv2d -> [add(dequantize(bias))]
    -> [relu | clip] -> quantize -> [clip]  (TFLite / ONNX QDQ form).

    ``input_scale`` as a sequence quantizes the *activation* per-channel (unsupported).
    ``weight_axis`` overrides the weights' quantization axis (default: the out-channel axis).
    ``bias_scale`` defaults to s_x * s_w[c] (the only scale the NPU can add).
    Depthwise: ``groups == in_channels`` and ``out_channels = multiplier * in_channels``.
    """
    kernel, strides, dilation = _pair(kernel), _pair(strides), _pair(dilation)
    pad = _pad4(padding)
    c_axis = 3 if layout == "NHWC" else 1
    w_shape = conv_weight_shape(layout, kernel, in_channels, out_channels, groups)
    w = rng_weights(w_shape, dtype=weight_dtype) if weight is None else np.asarray(weight)
    assert w.shape == w_shape, (w.shape, w_shape)
    w_scale = default_weight_scales(out_channels) if weight_scale is None else np.asarray(weight_scale, np.float32)
    w_zp = np.zeros(np.shape(w_scale), weight_dtype) if weight_zp is None else np.asarray(weight_zp, weight_dtype)
    w_axis = (3 if layout == "NHWC" else 0) if weight_axis is None else weight_axis

    h, wd = input_hw
    x_shape = (1, h, wd, in_channels) if layout == "NHWC" else (1, in_channels, h, wd)
    x = _tensor(input_name, x_shape, act_dtype)
    params = [x]
    s_x_param = None
    if input_scale_as_param:
        s_x_param = _tensor("x_scale", (), "float32")
        params.append(s_x_param)
    w_expr = _param_or_const(w, "w", weights_as_param, params)

    def body(bb):
        xp = x
        if pre_pad is not None:  # TFLite PAD as tflite_ops writes it: on the int8 tensor
            fill = float(input_zp if pre_pad_value is None else pre_pad_value)
            xp = bb.emit(R.nn.pad(x, [int(v) for v in pre_pad], "constant", fill))
        xd = _dequantize_act(bb, xp, input_scale, input_zp, act_dtype, c_axis, s_x_param)
        wd_ = bb.emit(R.dequantize(w_expr, _scale_const(w_scale), _zp_const(w_zp, weight_dtype), axis=w_axis))
        y = bb.emit(
            R.nn.conv2d(
                xd,
                wd_,
                strides=strides,
                padding=pad,
                dilation=dilation,
                groups=groups,
                data_layout=layout,
                kernel_layout="HWIO" if layout == "NHWC" else "OIHW",
                out_dtype="float32",
            )
        )
        if bias is not None:
            b_scale = (np.float64(input_scale) * w_scale.astype(np.float64)) if bias_scale is None else bias_scale
            y = _add_bias(bb, y, bias, b_scale, layout)
        out_dtype = output_dtype or act_dtype
        return _requantize_tail(bb, y, output_scale, output_zp, out_dtype, relu=relu, float_clip=float_clip, clip=clip)

    return _build(params, body)


def qdq_conv2d_transpose(
    *,
    layout: str = "NHWC",
    input_hw: tuple[int, int] = (5, 6),
    in_channels: int = 4,
    out_channels: int = 6,
    kernel=(3, 3),
    strides=(2, 2),
    padding=(0, 0, 1, 1),
    output_padding=(0, 0),
    dilation=(1, 1),
    groups: int = 1,
    seed: int = 0,
    input_scale: float = 0.05,
    input_zp: int = 3,
    output_scale: float = 0.1,
    output_zp: int = -5,
    bias: np.ndarray | None = None,
    clip=None,
) -> tvm.IRModule:
    """dequantize(x), dequantize(W IOHW, axis=1) -> nn.conv2d_transpose -> [add(dequantize(bias))]
    -> quantize -> [clip]: how TVM imports TFLite's TRANSPOSE_CONV (NHWC) and ONNX QDQ
    ConvTranspose (NCHW)."""
    kernel, strides = _pair(kernel), _pair(strides)
    c_axis = 3 if layout == "NHWC" else 1
    w = rng_weights((in_channels, out_channels // groups, *kernel), seed=seed)
    w_scale = default_weight_scales(out_channels // groups)
    h, wd = input_hw
    x = _tensor("x", (1, h, wd, in_channels) if layout == "NHWC" else (1, in_channels, h, wd), "int8")

    def body(bb):
        xd = _dequantize_act(bb, x, input_scale, input_zp, "int8", c_axis)
        wq = bb.emit(R.dequantize(relax.const(w), _scale_const(w_scale), _zp_const(np.zeros(len(w_scale), "int8")),
                                  axis=1))  # fmt: skip
        y = bb.emit(R.nn.conv2d_transpose(xd, wq, strides=strides, padding=_pad4(padding),
                                          output_padding=tuple(output_padding), dilation=_pair(dilation),
                                          groups=groups, data_layout=layout, kernel_layout="IOHW",
                                          out_dtype="float32"))  # fmt: skip
        if bias is not None:
            y = _add_bias(bb, y, bias, np.float64(input_scale) * w_scale.astype(np.float64), layout)
        return _requantize_tail(bb, y, output_scale, output_zp, "int8", clip=clip)

    return _build([x], body)


def _zp_operands(bb, x, w, input_zp, weight_zp):
    """(x, W) as they enter the integer op: int8 as is, or widened with the zero points subtracted."""
    if input_zp is None:
        return x, relax.const(w)
    xi = bb.emit(R.subtract(bb.emit(R.astype(x, "int32")), relax.const(np.int32(input_zp))))
    wi = bb.emit(R.astype(relax.const(w), "int32"))
    if weight_zp is not None:
        wi = bb.emit(R.subtract(wi, relax.const(np.int32(weight_zp))))
    return xi, wi


def int32_conv2d(
    *,
    layout: str = "NHWC",
    input_hw: tuple[int, int] = (8, 8),
    in_channels: int = 4,
    out_channels: int = 8,
    kernel=(3, 3),
    strides=(1, 1),
    padding=(1, 1),
    dilation=(1, 1),
    groups: int = 1,
    weight: np.ndarray | None = None,
    input_scale: float = 0.5,
    weight_scale=None,
    requant_axis: int | None = None,
    requant_zp: int = 0,
    output_scale: float = 0.25,
    output_zp: int = -5,
    bias: np.ndarray | None = None,
    clip=None,
    input_zp: int | None = None,
    weight_zp: int | None = None,
    batch: int = 1,
) -> tvm.IRModule:
    """nn.conv2d(int8 x, int8 W, out_dtype=int32) -> [add(int32 bias)]
    -> dequantize(s_x * s_w[c], zp 0, axis=channel) -> quantize -> [clip].

    ``input_zp`` given: the zero-point-subtract form, conv2d(astype(x, int32) - input_zp,
    astype(W, int32) [- weight_zp]) (what QNN canonicalization and TVM's ONNX integer ops emit)."""
    kernel, strides, dilation = _pair(kernel), _pair(strides), _pair(dilation)
    pad = _pad4(padding)
    c_axis = 3 if layout == "NHWC" else 1
    w_shape = conv_weight_shape(layout, kernel, in_channels, out_channels, groups)
    w = rng_weights(w_shape) if weight is None else np.asarray(weight)
    assert w.shape == w_shape, (w.shape, w_shape)
    w_scale = default_weight_scales(out_channels) if weight_scale is None else np.asarray(weight_scale, np.float32)
    acc_scale = np.float64(input_scale) * w_scale.astype(np.float64)
    h, wd = input_hw
    x = _tensor("x", (batch, h, wd, in_channels) if layout == "NHWC" else (batch, in_channels, h, wd), "int8")

    def body(bb):
        xi, wi = _zp_operands(bb, x, w, input_zp, weight_zp)
        y = bb.emit(
            R.nn.conv2d(
                xi,
                wi,
                strides=strides,
                padding=pad,
                dilation=dilation,
                groups=groups,
                data_layout=layout,
                kernel_layout="HWIO" if layout == "NHWC" else "OIHW",
                out_dtype="int32",
            )
        )
        if bias is not None:
            b = np.asarray(bias, np.int32)
            b = b if layout == "NHWC" else b.reshape(1, out_channels, 1, 1)
            y = bb.emit(R.add(y, relax.const(b)))
        axis = c_axis if requant_axis is None else requant_axis
        zp = np.full(np.shape(acc_scale), requant_zp, np.int32)
        y = bb.emit(R.dequantize(y, _scale_const(acc_scale), relax.const(zp), axis=axis))
        return _requantize_tail(bb, y, output_scale, output_zp, "int8", clip=clip)

    return _build([x], body)


# ---------------------------------------------------------------------------------------------
# fully connected


def qdq_fc(
    *,
    batch: int = 2,
    in_features: int = 16,
    out_features: int = 8,
    weight: np.ndarray | None = None,
    weight_scale=None,
    weight_zp=None,
    transposed_weight: bool = False,
    weights_as_param: bool = False,
    input_scale: float = 0.5,
    input_zp: int = 3,
    output_scale: float = 0.25,
    output_zp: int = -5,
    bias: np.ndarray | None = None,
    clip=None,
) -> tvm.IRModule:
    """dequantize(x), dequantize(W[in, out], axis=1) -> matmul -> [add(dequantize(bias))]
    -> quantize -> [clip]. ``transposed_weight``: W stored as [out, in] (TFLite), dequantized
    along axis 0 and put through permute_dims. ``weight`` is always given as [in, out]."""
    w = rng_weights((in_features, out_features)) if weight is None else np.asarray(weight)
    w_scale = default_weight_scales(out_features) if weight_scale is None else np.asarray(weight_scale, np.float32)
    w_zp = np.zeros(np.shape(w_scale), np.int8) if weight_zp is None else np.asarray(weight_zp, np.int8)
    x = _tensor("x", (batch, in_features), "int8")
    params = [x]
    stored = np.ascontiguousarray(w.T) if transposed_weight else w
    w_expr = _param_or_const(stored, "w", weights_as_param, params)

    def body(bb):
        xd = bb.emit(R.dequantize(x, _scale_const(input_scale), _zp_const(input_zp), axis=-1))
        wd = bb.emit(R.dequantize(w_expr, _scale_const(w_scale), _zp_const(w_zp), axis=0 if transposed_weight else 1))
        if transposed_weight:
            wd = bb.emit(R.permute_dims(wd, [1, 0]))
        y = bb.emit(R.matmul(xd, wd, out_dtype="float32"))
        if bias is not None:
            b_scale = np.float64(input_scale) * w_scale.astype(np.float64)
            b = bb.emit(R.dequantize(relax.const(np.asarray(bias, np.int32)), _scale_const(b_scale), _zp_const(0, "int32"), axis=0))
            y = bb.emit(R.add(y, b))
        return _requantize_tail(bb, y, output_scale, output_zp, "int8", clip=clip)

    return _build(params, body)


def int32_fc(
    *,
    batch: int = 2,
    in_features: int = 16,
    out_features: int = 8,
    weight: np.ndarray | None = None,
    input_scale: float = 0.5,
    weight_scale=None,
    requant_axis: int = -1,
    output_scale: float = 0.25,
    output_zp: int = -5,
    bias: np.ndarray | None = None,
    clip=None,
    input_zp: int | None = None,
    weight_zp: int | None = None,
) -> tvm.IRModule:
    """matmul(int8 x, int8 W[in, out], out_dtype=int32) -> [add(int32 bias)]
    -> dequantize(s_x * s_w[c], zp 0, axis=requant_axis) -> quantize -> [clip].

    ``input_zp`` given: TVM's ONNX MatMulInteger form, matmul(astype(x, int32) - input_zp,
    astype(W, int32) [- weight_zp], out_dtype=int32)."""
    w = rng_weights((in_features, out_features)) if weight is None else np.asarray(weight)
    w_scale = default_weight_scales(out_features) if weight_scale is None else np.asarray(weight_scale, np.float32)
    acc_scale = np.float64(input_scale) * w_scale.astype(np.float64)
    x = _tensor("x", (batch, in_features), "int8")

    def body(bb):
        xi, wi = _zp_operands(bb, x, w, input_zp, weight_zp)
        y = bb.emit(R.matmul(xi, wi, out_dtype="int32"))
        if bias is not None:
            y = bb.emit(R.add(y, relax.const(np.asarray(bias, np.int32))))
        y = bb.emit(R.dequantize(y, _scale_const(acc_scale), relax.const(np.zeros(np.shape(acc_scale), np.int32)), axis=requant_axis))
        return _requantize_tail(bb, y, output_scale, output_zp, "int8", clip=clip)

    return _build([x], body)


# ---------------------------------------------------------------------------------------------
# elementwise / LUT


def qdq_sigmoid(
    *,
    shape=(1, 8, 8, 4),
    act_dtype: str = "int8",
    input_scale: float = 0.0625,
    input_zp: int = 2,
    output_scale: float = 1.0 / 256.0,
    output_zp: int = -128,
    clip=None,
) -> tvm.IRModule:
    """dequantize(x) -> sigmoid -> quantize -> [clip] (TFLite's int8 Logistic)."""
    x = _tensor("x", shape, act_dtype)

    def body(bb):
        xd = bb.emit(R.dequantize(x, _scale_const(input_scale), _zp_const(input_zp, act_dtype), axis=-1))
        y = bb.emit(R.sigmoid(xd))
        return _requantize_tail(bb, y, output_scale, output_zp, act_dtype, clip=clip)

    return _build([x], body)


def qdq_softmax(
    *,
    shape=(1, 10),
    act_dtype: str = "int8",
    input_scale: float = 0.125,
    input_zp: int = -3,
    output_scale: float = 1.0 / 256.0,
    output_zp: int = -128,
    axis: int = -1,
    beta: float | None = None,
    clip=None,
) -> tvm.IRModule:
    """dequantize(x) -> [multiply(beta)] -> softmax(axis) -> quantize -> [clip] (TFLite's int8
    SOFTMAX as npu_byoc.frontends.tflite_ops imports it)."""
    x = _tensor("x", shape, act_dtype)

    def body(bb):
        xd = bb.emit(R.dequantize(x, _scale_const(input_scale), _zp_const(input_zp, act_dtype), axis=-1))
        if beta is not None:
            xd = bb.emit(R.multiply(xd, _scale_const(beta)))
        y = bb.emit(R.nn.softmax(xd, axis=axis))
        return _requantize_tail(bb, y, output_scale, output_zp, act_dtype, clip=clip)

    return _build([x], body)


def qdq_layernorm(
    *,
    shape=(1, 4, 16),
    input_scale: float = 0.05,
    input_zp: int = 3,
    output_scale: float = 0.03,
    output_zp: int = -5,
    axes=(-1,),
    epsilon: float = 1e-5,
    gamma=None,
    beta=None,
) -> tvm.IRModule:
    """dequantize(x) -> layer_norm(gamma, beta, axes) -> quantize (ONNX LayerNormalization as TVM's
    ONNX frontend imports it, gamma and beta float constants)."""
    x = _tensor("x", shape, "int8")
    dims = tuple(shape[a] for a in axes)  # gamma and beta have the normalized axes' shape
    c = int(np.prod(dims))
    gamma = np.linspace(0.5, 1.5, c, dtype=np.float32).reshape(dims) if gamma is None else np.asarray(gamma, np.float32)
    beta = np.linspace(-0.3, 0.3, c, dtype=np.float32).reshape(dims) if beta is None else np.asarray(beta, np.float32)

    def body(bb):
        xd = bb.emit(R.dequantize(x, _scale_const(input_scale), _zp_const(input_zp), axis=-1))
        y = bb.emit(R.nn.layer_norm(xd, relax.const(gamma), relax.const(beta), axes=list(axes), epsilon=epsilon))
        return _requantize_tail(bb, y, output_scale, output_zp, "int8")

    return _build([x], body)


def qdq_add(
    *,
    shape=(1, 8, 8, 4),
    b_shape=None,
    b_const: np.ndarray | None = None,
    scale_a: float = 0.5,
    zp_a: int = 1,
    scale_b: float = 0.25,
    zp_b: int = -2,
    output_scale: float = 0.75,
    output_zp: int = 3,
    relu: bool = False,
    clip=None,
    op: str = "add",
    b_first: bool = False,
) -> tvm.IRModule:
    """dequantize(a), dequantize(b) -> add (``op="multiply"``: multiply, ``"subtract"``:
    subtract) -> [relu] -> quantize -> [clip].

    ``b_shape`` makes the second input broadcast; ``b_const`` makes it a constant int8 tensor
    instead of a model input; ``b_first`` computes op(b, a) (a constant minus an activation)."""
    a = _tensor("a", shape, "int8")
    params = [a]
    if b_const is None:
        b = _tensor("b", shape if b_shape is None else b_shape, "int8")
        params.append(b)
    else:
        b = relax.const(np.asarray(b_const, np.int8))

    def body(bb):
        ad = bb.emit(R.dequantize(a, _scale_const(scale_a), _zp_const(zp_a), axis=-1))
        bd = bb.emit(R.dequantize(b, _scale_const(scale_b), _zp_const(zp_b), axis=-1))
        y = bb.emit({"add": R.add, "multiply": R.multiply, "subtract": R.subtract}[op](*((bd, ad) if b_first else (ad, bd))))
        return _requantize_tail(bb, y, output_scale, output_zp, "int8", relu=relu, clip=clip)

    return _build(params, body)


def qdq_resize2d(shape, size, method: str, mode: str, rounding: str = "", output_scale: float = 0.1) -> tvm.IRModule:
    """dequantize(int8 NHWC x; scale 0.1, zp 3) -> image.resize2d(method, mode, rounding) to
    ``size`` -> quantize(``output_scale``, zp 3): TVM's import of a resize between quantized
    tensors (TFLite RESIZE_BILINEAR, ONNX Resize)."""
    x = _tensor("x", shape, "int8")
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            d = bb.emit(R.dequantize(x, _scale_const(0.1), _zp_const(3)))
            r = bb.emit(R.image.resize2d(d, size, None, "NHWC", method, mode, rounding))
            y = bb.emit_output(R.quantize(r, _scale_const(output_scale), _zp_const(3)))
        bb.emit_func_output(y)
    return bb.get()


# ---------------------------------------------------------------------------------------------
# pooling and mean


def _pool_kwargs(pool_size, strides, padding, ceil_mode, count_include_pad, layout):
    return dict(
        pool_size=_pair(pool_size),
        strides=_pair(strides),
        padding=_pad4(padding),
        ceil_mode=ceil_mode,
        count_include_pad=count_include_pad,
        layout=layout,
    )


def _act_shape(layout, hw, channels):
    return (1, hw[0], hw[1], channels) if layout == "NHWC" else (1, channels, hw[0], hw[1])


def qdq_avg_pool(
    *,
    layout: str = "NHWC",
    input_hw=(8, 8),
    channels: int = 4,
    pool_size=(2, 2),
    strides=(2, 2),
    padding=(0, 0),
    ceil_mode: bool = False,
    count_include_pad: bool = False,
    input_scale: float = 0.5,
    input_zp: int = 3,
    output_scale: float | None = None,
    output_zp: int | None = None,
    clip=None,
) -> tvm.IRModule:
    """dequantize(x) -> nn.avg_pool2d -> quantize -> [clip]; output qparams default to the input's."""
    x = _tensor("x", _act_shape(layout, input_hw, channels), "int8")
    out_s = input_scale if output_scale is None else output_scale
    out_z = input_zp if output_zp is None else output_zp

    def body(bb):
        xd = bb.emit(R.dequantize(x, _scale_const(input_scale), _zp_const(input_zp), axis=-1))
        y = bb.emit(R.nn.avg_pool2d(xd, **_pool_kwargs(pool_size, strides, padding, ceil_mode, count_include_pad, layout)))
        return _requantize_tail(bb, y, out_s, out_z, "int8", clip=clip)

    return _build([x], body)


def cast_avg_pool(
    *,
    layout: str = "NHWC",
    input_hw=(8, 8),
    channels: int = 4,
    pool_size=(2, 2),
    strides=(2, 2),
    padding=(0, 0),
    ceil_mode: bool = False,
    count_include_pad: bool = False,
    clip=None,
    dtype: str = "int8",
) -> tvm.IRModule:
    """astype(x, int32) -> nn.avg_pool2d -> astype(dtype) -> [clip] (TFLite's integer AveragePool)."""
    x = _tensor("x", _act_shape(layout, input_hw, channels), dtype)

    def body(bb):
        xi = bb.emit(R.astype(x, "int32"))
        y = bb.emit(R.nn.avg_pool2d(xi, **_pool_kwargs(pool_size, strides, padding, ceil_mode, count_include_pad, layout)))
        q = bb.emit(R.astype(y, dtype))
        if clip is not None:
            q = bb.emit(R.clip(q, int(clip[0]), int(clip[1])))
        return q

    return _build([x], body)


def int8_max_pool(
    *,
    layout: str = "NHWC",
    input_hw=(8, 8),
    channels: int = 4,
    pool_size=(2, 2),
    strides=(2, 2),
    padding=(0, 0),
    ceil_mode: bool = False,
    clip=None,
) -> tvm.IRModule:
    """nn.max_pool2d(int8 x) -> [clip]."""
    x = _tensor("x", _act_shape(layout, input_hw, channels), "int8")

    def body(bb):
        q = bb.emit(R.nn.max_pool2d(x, **_pool_kwargs(pool_size, strides, padding, ceil_mode, False, layout)))
        if clip is not None:
            q = bb.emit(R.clip(q, int(clip[0]), int(clip[1])))
        return q

    return _build([x], body)


def qdq_max_pool(
    *,
    layout: str = "NHWC",
    input_hw=(8, 8),
    channels: int = 4,
    pool_size=(2, 2),
    strides=(2, 2),
    padding=(0, 0),
    input_scale: float = 0.5,
    input_zp: int = 3,
    output_scale: float | None = None,
    output_zp: int | None = None,
    clip=None,
) -> tvm.IRModule:
    """dequantize(x) -> nn.max_pool2d -> quantize -> [clip]; output qparams default to the input's."""
    x = _tensor("x", _act_shape(layout, input_hw, channels), "int8")
    out_s = input_scale if output_scale is None else output_scale
    out_z = input_zp if output_zp is None else output_zp

    def body(bb):
        xd = bb.emit(R.dequantize(x, _scale_const(input_scale), _zp_const(input_zp), axis=-1))
        y = bb.emit(R.nn.max_pool2d(xd, **_pool_kwargs(pool_size, strides, padding, False, False, layout)))
        return _requantize_tail(bb, y, out_s, out_z, "int8", clip=clip)

    return _build([x], body)


def qdq_mean(
    *,
    shape=(1, 7, 7, 8),
    axis=(1, 2),
    keepdims: bool = True,
    input_scale: float = 0.5,
    input_zp: int = 3,
    output_scale: float = 0.25,
    output_zp: int = -5,
    clip=None,
) -> tvm.IRModule:
    """dequantize(x) -> mean(axis) -> quantize -> [clip] (global average pooling in QDQ form)."""
    x = _tensor("x", shape, "int8")

    def body(bb):
        xd = bb.emit(R.dequantize(x, _scale_const(input_scale), _zp_const(input_zp), axis=-1))
        y = bb.emit(R.mean(xd, axis=list(axis), keepdims=keepdims))
        return _requantize_tail(bb, y, output_scale, output_zp, "int8", clip=clip)

    return _build([x], body)


def int32_mean(
    *,
    shape=(1, 7, 7, 8),
    axis=(1, 2),
    keepdims: bool = True,
    input_scale: float = 0.5,
    input_zp: int = 3,
    output_scale: float = 0.25,
    output_zp: int = -5,
    clip=None,
) -> tvm.IRModule:
    """astype(x, int32) -> mean(axis) -> dequantize(s_x, zp_x) -> quantize -> [clip]."""
    x = _tensor("x", shape, "int8")

    def body(bb):
        xi = bb.emit(R.astype(x, "int32"))
        m = bb.emit(R.mean(xi, axis=list(axis), keepdims=keepdims))
        y = bb.emit(R.dequantize(m, _scale_const(input_scale), _zp_const(input_zp, "int32"), axis=-1))
        return _requantize_tail(bb, y, output_scale, output_zp, "int8", clip=clip)

    return _build([x], body)
