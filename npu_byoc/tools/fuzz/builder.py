"""Fuzz specs (npu_byoc.tools.fuzz.generators) built into Relax modules, deterministically.

Each op kind has an emitter (``EMITTERS``) writing the bindings of one convention of the
pattern table (npu_byoc/ops/table.py); ``build(spec)`` chains them, ``build(spec,
detached=True)`` computes every op from parameters of its own (TVM's CPU reference of each op
for the NPU path's inputs, npu_byoc.tools.fuzz.runner).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tvm
from tvm import relax

from ...frontends.load import MODEL_INFO_ATTR, ModelInfo, annotate_provenance, model_info
from ...util.relax_utils import shape_of
from .generators import InvalidSpec, Tensor, infer_shape, weights

R = relax.op


def _sc(v) -> relax.Constant:
    return relax.const(np.asarray(v, dtype=np.float32))


def _zp(v, dtype: str = "int8") -> relax.Constant:
    return relax.const(np.asarray(v).astype(dtype))


def _deq(bb, x, scale, zp, axis: int = -1, zp_dtype: str = "int8"):
    return bb.emit(R.dequantize(x, _sc(scale), _zp(zp, zp_dtype), axis=axis))


def _tail(bb, y, out: Tensor, c: dict):
    """[relu | float clip] -> quantize -> [int clip]"""
    if c["kind"] in ("relu", "relu+int_clip"):
        y = bb.emit(R.nn.relu(y))
    if c["kind"] == "float_clip":
        y = bb.emit(R.clip(y, float(c["lo"]), float(c["hi"])))
    q = bb.emit(R.quantize(y, _sc(out.scale), _zp(out.zp), axis=-1, out_dtype="int8"))
    return _int_clip(bb, q, c)


def _int_clip(bb, q, c: dict):
    if "int_clip" in c["kind"]:
        q = bb.emit(R.clip(q, int(c["lo"]), int(c["hi"])))
    return q


def _qdq_bias(bb, y, bias, acc_scale: np.ndarray, layout: str):
    """``y`` + dequantize(int32 ``bias``, scale s_x·s_w[c]) on the channel axis, the last one
    unless ``layout`` is NCHW (``bias`` None: ``y``)."""
    if bias is None:
        return y
    b = bb.emit(R.dequantize(relax.const(bias), _sc(acc_scale.astype(np.float32)), _zp(np.zeros(len(bias)), "int32"),
                             axis=0))  # fmt: skip
    if layout == "NCHW":
        b = bb.emit(R.reshape(b, (1, len(bias), 1, 1)))
    return bb.emit(R.add(y, b))


def emit_conv(bb, op: dict, t: Tensor, out: Tensor, layout: str, ctx: "BuildContext"):
    h, w, c = t.spatial(layout)
    oc, (kh, kw) = out.spatial(layout)[2], op["kernel"]
    depthwise = op["kind"] == "depthwise"
    cin_g = 1 if depthwise else c
    w_shape = (kh, kw, cin_g, oc) if layout == "NHWC" else (oc, cin_g, kh, kw)
    rng = np.random.default_rng(op["wseed"])
    wt = weights(rng, w_shape)
    bias = rng.integers(-op["bias_bound"], op["bias_bound"] + 1, size=oc).astype(np.int32) if op["bias"] else None
    ws = np.resize(np.asarray(op["weight_scales"], np.float32), oc)  # shrunk specs reuse the first scales
    w_axis = 3 if layout == "NHWC" else 0
    c_axis = 3 if layout == "NHWC" else 1
    conv_kw = dict(strides=op["strides"], padding=op["padding"], dilation=op["dilation"], groups=c if depthwise else 1,
                   data_layout=layout, kernel_layout="HWIO" if layout == "NHWC" else "OIHW")  # fmt: skip
    if op["convention"] == "int32":
        y = bb.emit(R.nn.conv2d(t.expr, relax.const(wt), out_dtype="int32", **conv_kw))
        if bias is not None:
            b = bias if layout == "NHWC" else bias.reshape(1, oc, 1, 1)
            y = bb.emit(R.add(y, relax.const(b)))
        acc = (np.float64(t.scale) * ws.astype(np.float64)).astype(np.float32)
        y = bb.emit(R.dequantize(y, _sc(acc), relax.const(np.zeros(oc, np.int32)), axis=c_axis))
    else:
        xd = _deq(bb, t.expr, t.scale, t.zp)
        wzp = np.full(oc, op.get("weight_zp", 0), np.int8)
        wd = bb.emit(R.dequantize(relax.const(wt), _sc(ws), relax.const(wzp), axis=w_axis))
        y = bb.emit(R.nn.conv2d(xd, wd, out_dtype="float32", **conv_kw))
        y = _qdq_bias(bb, y, bias, t.scale * ws.astype(np.float64), layout)
    return _tail(bb, y, out, op["clamp"])


def emit_transpose_conv(bb, op: dict, t: Tensor, out: Tensor, layout: str, ctx: "BuildContext"):
    """TVM's import of TFLite TRANSPOSE_CONV / ONNX QDQ ConvTranspose: IOHW weights quantized on axis 1."""
    c, oc = t.spatial(layout)[2], out.spatial(layout)[2]
    rng = np.random.default_rng(op["wseed"])
    wt = weights(rng, (c, oc, *op["kernel"]))
    bias = rng.integers(-op["bias_bound"], op["bias_bound"] + 1, size=oc).astype(np.int32) if op["bias"] else None
    ws = np.resize(np.asarray(op["weight_scales"], np.float32), oc)
    xd = _deq(bb, t.expr, t.scale, t.zp)
    wd = bb.emit(R.dequantize(relax.const(wt), _sc(ws), relax.const(np.zeros(oc, np.int8)), axis=1))
    y = bb.emit(R.nn.conv2d_transpose(xd, wd, strides=op["strides"], padding=op["padding"],
                                      output_padding=op["output_padding"], data_layout=layout, kernel_layout="IOHW",
                                      out_dtype="float32"))  # fmt: skip
    y = _qdq_bias(bb, y, bias, t.scale * ws.astype(np.float64), layout)
    return _tail(bb, y, out, op["clamp"])


def emit_fc(bb, op: dict, t: Tensor, out: Tensor, layout: str, ctx: "BuildContext"):
    n_in, n_out = t.shape[1], op["out_features"]
    rng = np.random.default_rng(op["wseed"])
    wt = weights(rng, (n_in, n_out))
    bias = rng.integers(-op["bias_bound"], op["bias_bound"] + 1, size=n_out).astype(np.int32) if op["bias"] else None
    ws = np.resize(np.asarray(op["weight_scales"], np.float32), n_out)
    if op["convention"] == "int32":
        y = bb.emit(R.matmul(t.expr, relax.const(wt), out_dtype="int32"))
        if bias is not None:
            y = bb.emit(R.add(y, relax.const(bias)))
        acc = (np.float64(t.scale) * ws.astype(np.float64)).astype(np.float32)
        y = bb.emit(R.dequantize(y, _sc(acc), relax.const(np.zeros(n_out, np.int32)), axis=-1))
    else:
        xd = _deq(bb, t.expr, t.scale, t.zp)
        transposed = op["convention"] == "qdq_transposed"
        stored = np.ascontiguousarray(wt.T) if transposed else wt
        wd = bb.emit(R.dequantize(relax.const(stored), _sc(ws), relax.const(np.zeros(n_out, np.int8)),
                                  axis=0 if transposed else 1))  # fmt: skip
        if transposed:
            wd = bb.emit(R.permute_dims(wd, [1, 0]))
        y = _qdq_bias(bb, bb.emit(R.matmul(xd, wd, out_dtype="float32")), bias, t.scale * ws.astype(np.float64), "NHWC")
    return _tail(bb, y, out, op["clamp"])


def emit_pool(bb, op: dict, t: Tensor, out: Tensor, layout: str, ctx: "BuildContext"):
    kind = op["kind"].split("_")[0]
    fn = R.nn.avg_pool2d if kind == "avg" else R.nn.max_pool2d
    kw = dict(pool_size=op["pool"], strides=op["strides"], padding=op["padding"], ceil_mode=op["ceil_mode"],
              layout=layout)  # fmt: skip
    if kind == "avg":
        kw["count_include_pad"] = op["count_include_pad"]
    if op["convention"] == "qdq":
        y = bb.emit(fn(_deq(bb, t.expr, t.scale, t.zp), **kw))
        q = bb.emit(R.quantize(y, _sc(out.scale), _zp(out.zp), axis=-1, out_dtype="int8"))
        return _int_clip(bb, q, op["int_clip"])
    if op["convention"] == "cast":
        y = bb.emit(fn(bb.emit(R.astype(t.expr, "int32")), **kw))
        q = bb.emit(R.astype(y, "int8"))
    else:
        q = bb.emit(fn(t.expr, **kw))
    return _int_clip(bb, q, op["int_clip"])


def emit_mean(bb, op: dict, t: Tensor, out: Tensor, layout: str, ctx: "BuildContext"):
    axes = [1, 2] if layout == "NHWC" else [2, 3]
    if op["convention"] == "int32":
        m = bb.emit(R.mean(bb.emit(R.astype(t.expr, "int32")), axis=axes, keepdims=op["keepdims"]))
        y = bb.emit(R.dequantize(m, _sc(t.scale), _zp(t.zp, "int32"), axis=-1))
    else:
        y = bb.emit(R.mean(_deq(bb, t.expr, t.scale, t.zp), axis=axes, keepdims=op["keepdims"]))
    return _tail(bb, y, out, op["clamp"])


def emit_sigmoid(bb, op: dict, t: Tensor, out: Tensor, layout: str, ctx: "BuildContext"):
    y = bb.emit(R.sigmoid(_deq(bb, t.expr, t.scale, t.zp)))
    return _tail(bb, y, out, op["clamp"])


def emit_softmax(bb, op: dict, t: Tensor, out: Tensor, layout: str, ctx: "BuildContext"):
    """dequantize -> [multiply(beta)] -> softmax(axis) -> quantize (npu_byoc.frontends.tflite_ops' SOFTMAX)."""
    x = _deq(bb, t.expr, t.scale, t.zp)
    if op["beta"] != 1.0:
        x = bb.emit(R.multiply(x, _sc(op["beta"])))
    return _tail(bb, bb.emit(R.nn.softmax(x, axis=op["axis"])), out, {"kind": "none"})


def emit_add(bb, op: dict, t: Tensor, out: Tensor, layout: str, ctx: "BuildContext"):
    other = ctx.operand_b(op, t)
    a = _deq(bb, t.expr, t.scale, t.zp)
    b = _deq(bb, other.expr, other.scale, other.zp)
    return _tail(bb, bb.emit(R.add(a, b)), out, op["clamp"])


EMITTERS: dict[str, Callable] = {
    "conv2d": emit_conv,
    "depthwise": emit_conv,
    "transpose_conv": emit_transpose_conv,
    "fc": emit_fc,
    "avg_pool": emit_pool,
    "max_pool": emit_pool,
    "mean": emit_mean,
    "sigmoid": emit_sigmoid,
    "add": emit_add,
    "softmax": emit_softmax,
}


class BuildContext:
    """Where ADD's second operand comes from: an earlier tensor of the chain of the same shape
    (``residual``), else a new model input (``b<k>``, its own quantization). ``roles`` says,
    per parameter of main, what it holds: ("tensor", i) the chain's tensor i (0: the model
    input), ("input", j) the j-th input of the chained model."""

    def __init__(self, detached: bool):
        self.detached = detached
        self.params: list[relax.Var] = []
        self.roles: list[tuple[str, int]] = []
        self.history: list[Tensor] = []  # history[k]: op k's input
        self.n_inputs = 0
        self.b_operands: dict[int, tuple[str, int]] = {}  # per ADD op: ("tensor", i) or ("input", j)

    def new_param(self, name: str, shape, role: tuple[str, int]) -> relax.Var:
        v = relax.Var(name, relax.TensorType(list(shape), "int8"))
        self.params.append(v)
        self.roles.append(role)
        return v

    def new_input(self, name: str, shape) -> relax.Var:
        role = ("input", self.n_inputs)
        self.n_inputs += 1
        if not self.detached or name == "x":
            role = ("tensor", 0) if name == "x" else role
        return self.new_param(name, shape, role)

    def operand_b(self, op: dict, t: Tensor) -> Tensor:
        shape = t.shape
        if op["broadcast"]:
            shape = (1,) * (len(shape) - 1) + (shape[-1],)
        if op["residual"] and not op["broadcast"]:
            for k in range(len(self.history) - 2, -1, -1):  # not the current tensor itself
                prev = self.history[k]
                if prev.shape == t.shape:
                    self.b_operands[len(self.history) - 1] = ("tensor", k)
                    if self.detached:
                        v = self.new_param(f"r{len(self.params)}", shape, ("tensor", k))
                        return Tensor(prev.shape, prev.scale, prev.zp, v)
                    return prev
        self.b_operands[len(self.history) - 1] = ("input", self.n_inputs)
        v = self.new_input(f"b{self.n_inputs}", shape)
        return Tensor(shape, op["b_scale"], op["b_zp"], v)


@dataclass
class Built:
    """A built case: the module, the chain's tensors (tensors[k] is op k's input, tensors[-1]
    the model output) and the roles of main's parameters (see BuildContext)."""

    mod: tvm.IRModule
    tensors: list[Tensor]
    roles: list[tuple[str, int]]
    b_operands: dict[int, tuple[str, int]]


def tensors_of(spec: dict) -> list[Tensor]:
    """The chain's tensors without building Relax: the input, then every op's output."""
    t = Tensor(tuple(spec["input"]["shape"]), spec["input"]["scale"], spec["input"]["zp"])
    out = [t]
    for op in spec["ops"]:
        t = infer_shape(dict(op), t, spec["layout"], spec)
        out.append(t)
    return out


def build(spec: dict, *, detached: bool = False) -> Built:
    """The Relax module of ``spec``.

    ``detached=True``: every op reads its inputs from parameters of its own instead of the
    previous op's output and main returns the tuple of every op's output — TVM's CPU result of
    each op for the same inputs as the NPU path (the per-op comparison of the runner)."""
    layout = spec["layout"]
    ctx = BuildContext(detached)
    tensors = tensors_of(spec)
    bb = relax.BlockBuilder()
    x0 = ctx.new_input("x", tensors[0].shape)
    if detached:  # op k > 0 reads parameter x<k>: the chain's tensor k
        xs = [x0] + [ctx.new_param(f"x{k}", tensors[k].shape, ("tensor", k)) for k in range(1, len(spec["ops"]))]
    outs = []
    try:
        with bb.function("main", None):
            with bb.dataflow():
                cur = x0
                for k, op in enumerate(spec["ops"]):
                    t = tensors[k]
                    t = Tensor(t.shape, t.scale, t.zp, xs[k] if detached else cur)
                    ctx.history.append(t)
                    cur = EMITTERS[op["kind"]](bb, op, t, tensors[k + 1], layout, ctx)
                    outs.append(cur)
                gv = bb.emit_output(relax.Tuple(outs) if detached else cur)
            bb.emit_func_output(gv, params=ctx.params)
    except Exception as err:  # noqa: BLE001 - shapes TVM's ops refuse (a shrink went too far)
        raise InvalidSpec(str(err).splitlines()[0] if str(err) else "TVM refused the op") from None
    mod = bb.get()
    if spec.get("origin") == "tflite" and not detached:  # partitioned with TFLite's numerics
        info = model_info(annotate_provenance(mod, "<fuzz case>"))  # its inputs and outputs
        mod = mod.with_attr(MODEL_INFO_ATTR, ModelInfo(info.path, "tflite", info.inputs, info.outputs).to_json())
    return Built(mod, tensors, ctx.roles, ctx.b_operands)


def random_inputs(spec: dict, built: Built) -> list[np.ndarray]:
    """int8 inputs for main's parameters (the non-detached build)."""
    rng = np.random.default_rng(spec["seed"] ^ 0x5EED)
    out = []
    for p in built.mod["main"].params:
        shape = list(shape_of(p))
        mode = spec.get("input_mode", "uniform")
        if mode == "extremes":
            out.append(rng.choice(np.array([-128, 127], np.int8), size=shape))
        elif mode == "zero_point":
            out.append(np.full(shape, spec["input"]["zp"], np.int8))
        else:
            out.append(rng.integers(-128, 128, size=shape, dtype=np.int8))
    return out
