#!/usr/bin/env python3
"""Build single-op int8 test vectors from LiteRT's reference kernels.

Running ``/work/mkenv/bin/python tools/make_op_vectors.py`` (any Python with
``tensorflow-cpu``, ``ai-edge-litert`` and ``tflite``: ``pip install -e .[models]``)
regenerates ``tests/fixtures/ops/<op>.npz``. For every op kind it builds a handful of tiny
one-op models with TensorFlow (``tf.function`` + ``TFLiteConverter``, full-integer int8
quantization calibrated on fixed random data), runs each one in
``ai_edge_litert.interpreter.Interpreter`` with ``OpResolverType.BUILTIN_REF`` (the
reference kernels, no delegates) on random int8 inputs, and stores the inputs, the
constants and quantization parameters read back from the converted model, the op
attributes read from the flatbuffer, and LiteRT's int8 output.

The build is deterministic (fixed seeds, ``.npz`` members with fixed zip timestamps).
``tests/test_numerics.py`` replays the vectors against ``npu_byoc.arch.numerics`` without
TensorFlow.

Layout of ``<op>.npz``
----------------------
``meta``
    JSON string: ``{"op": ..., "cases": N, "reference": "litert <ver> BUILTIN_REF",
    "tensorflow": <ver>}``.
``c<i>.<field>``
    one array per field of case ``i``. Common fields: ``input`` (int8, NHWC or NC),
    ``input_scale`` (float32, shape ()), ``input_zero_point`` (int32, shape ()),
    ``output``, ``output_scale``, ``output_zero_point``, ``activation`` (str: NONE, RELU,
    RELU6, RELU_N1_TO_1). Per op:

    - conv2d / depthwise_conv2d: ``weights`` int8 (TFLite layout OHWI / 1HW(I*M)),
      ``weight_scales`` float32 [C_out], ``bias`` int32 [C_out], ``bias_scales``,
      ``stride`` int32 [2] (h, w), ``padding`` str SAME / VALID, ``dilation`` int32 [2],
      ``depth_multiplier`` (depthwise only).
    - fully_connected: ``weights`` int8 [C_out, C_in], ``weight_scales`` (1 value when
      per-tensor), ``bias``, ``bias_scales``.
    - logistic / tanh / hard_swish / leaky_relu / abs / exp / log / sqrt / rsqrt: input is every int8 value once
      (-128..127); leaky_relu also ``alpha`` (float32).
    - avg_pool / max_pool: ``filter`` int32 [2], ``stride`` int32 [2], ``padding``.
    - mean: ``axes`` int32 [k], ``keep_dims`` bool.
    - add, mul: ``input2``, ``input2_scale``, ``input2_zero_point``.
    - softmax: ``beta`` (float32, 1 or patched into the file); softmax over the last axis.

    ``model`` (str) names the one-op model a case ran on (``--models DIR`` writes them as
    ``DIR/<model>.tflite``; several cases share a model).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import zipfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "tests" / "fixtures" / "ops"

_ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6"}
_PADDINGS = {0: "SAME", 1: "VALID"}


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def save_npz(path: Path, arrays: dict) -> None:
    """np.savez with fixed zip timestamps, so identical content gives identical bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asanyarray(arrays[key]), allow_pickle=False)
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buf.getvalue())


def uniform_sample(rng, shape, lo, hi):
    return rng.uniform(lo, hi, size=shape)


def convert_int8(fn, input_specs, calib_ranges, seed: int, per_tensor_dense=False,
                 sample=uniform_sample) -> bytes:
    """Full-integer int8 conversion of a tf.function, calibrated on 32 samples in ranges."""
    import tensorflow as tf

    concrete = fn.get_concrete_function(*input_specs)
    rng = np.random.default_rng(seed)

    def rep():
        for _ in range(32):
            yield [
                sample(rng, tuple(spec.shape), lo, hi).astype(np.float32)
                for spec, (lo, hi) in zip(input_specs, calib_ranges)
            ]

    conv = tf.lite.TFLiteConverter.from_concrete_functions([concrete], fn)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    if per_tensor_dense:
        conv._experimental_disable_per_channel_quantization_for_dense_layers = True
    return conv.convert()


def single_op(model_bytes: bytes, expected: str):
    """The one operator of a converted model: (name, options dict, input/output indices)."""
    import tflite

    model = tflite.Model.GetRootAsModel(model_bytes, 0)
    graph = model.Subgraphs(0)
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    ops = []
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex())
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        ops.append((names[builtin], op))
    if [n for n, _ in ops] != [expected]:
        raise RuntimeError(f"expected one {expected} op, the converter made {[n for n, _ in ops]}")
    name, op = ops[0]
    opts = {}
    table = op.BuiltinOptions()
    if name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        o = tflite.Conv2DOptions() if name == "CONV_2D" else tflite.DepthwiseConv2DOptions()
        o.Init(table.Bytes, table.Pos)
        opts = {
            "stride": [o.StrideH(), o.StrideW()],
            "dilation": [o.DilationHFactor(), o.DilationWFactor()],
            "padding": _PADDINGS[o.Padding()],
            "activation": _ACTIVATIONS[o.FusedActivationFunction()],
        }
        if name == "DEPTHWISE_CONV_2D":
            opts["depth_multiplier"] = o.DepthMultiplier()
    elif name in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        o = tflite.Pool2DOptions()
        o.Init(table.Bytes, table.Pos)
        opts = {
            "stride": [o.StrideH(), o.StrideW()],
            "filter": [o.FilterHeight(), o.FilterWidth()],
            "padding": _PADDINGS[o.Padding()],
            "activation": _ACTIVATIONS[o.FusedActivationFunction()],
        }
    elif name == "FULLY_CONNECTED":
        o = tflite.FullyConnectedOptions()
        o.Init(table.Bytes, table.Pos)
        opts = {"activation": _ACTIVATIONS[o.FusedActivationFunction()]}
    elif name == "ADD":
        o = tflite.AddOptions()
        o.Init(table.Bytes, table.Pos)
        opts = {"activation": _ACTIVATIONS[o.FusedActivationFunction()]}
    elif name == "MUL":
        o = tflite.MulOptions()
        o.Init(table.Bytes, table.Pos)
        opts = {"activation": _ACTIVATIONS[o.FusedActivationFunction()]}
    elif name == "SOFTMAX":
        o = tflite.SoftmaxOptions()
        o.Init(table.Bytes, table.Pos)
        opts = {"beta": o.Beta(), "activation": "NONE"}
    elif name == "MEAN":
        o = tflite.ReducerOptions()
        o.Init(table.Bytes, table.Pos)
        opts = {"keep_dims": bool(o.KeepDims())}
    else:
        opts = {"activation": "NONE"}
    inputs = [op.Inputs(j) for j in range(op.InputsLength())]
    outputs = [op.Outputs(j) for j in range(op.OutputsLength())]
    return name, opts, inputs, outputs


MODELS: dict[bytes, str] = {}  # model bytes -> "<op>_<k>" (filled as models are run)


def run_reference(model_bytes: bytes, expected: str, inputs: list[np.ndarray]) -> dict:
    """Run the model with BUILTIN_REF; return tensors, qparams and op options."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    _, opts, op_inputs, op_outputs = single_op(model_bytes, expected)
    if model_bytes not in MODELS:
        MODELS[model_bytes] = f"{expected.lower()}_{sum(k.startswith(expected.lower() + '_') for k in MODELS.values())}"
    interp = Interpreter(
        model_content=model_bytes,
        experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
    )
    interp.allocate_tensors()
    details = {d["index"]: d for d in interp.get_tensor_details()}
    in_details = interp.get_input_details()
    assert len(in_details) == len(inputs), (len(in_details), len(inputs))
    for d, x in zip(in_details, inputs):
        assert d["dtype"] == np.int8 and tuple(d["shape"]) == x.shape, (d, x.shape)
        interp.set_tensor(d["index"], x)
    interp.invoke()
    out_d = interp.get_output_details()
    assert len(out_d) == 1 and out_d[0]["index"] == op_outputs[0]
    result = {"options": opts, "output": interp.get_tensor(out_d[0]["index"]).copy(),
              "model": MODELS[model_bytes]}

    def qp(idx):
        q = details[idx]["quantization_parameters"]
        return (
            np.asarray(q["scales"], np.float32),
            np.asarray(q["zero_points"], np.int32),
            int(q["quantized_dimension"]),
        )

    result["tensors"] = []
    for idx in op_inputs:
        if idx < 0:
            result["tensors"].append(None)
            continue
        scales, zps, qdim = qp(idx)
        try:
            value = interp.get_tensor(idx).copy()
        except ValueError:
            value = None
        result["tensors"].append(
            {"index": idx, "scales": scales, "zero_points": zps, "qdim": qdim, "value": value,
             "dtype": details[idx]["dtype"]}
        )
    result["out_q"] = qp(op_outputs[0])
    return result


def _per_tensor(scales, zps):
    assert scales.size == 1 and zps.size == 1, (scales, zps)
    return np.float32(scales[0]), np.int32(zps[0])


def activation_fields(ref: dict, x_list: list[np.ndarray]) -> dict:
    """input/output tensors and their per-tensor qparams for a case."""
    fields = {}
    names = ["input", "input2"]
    act_tensors = [t for t in ref["tensors"] if t is not None and t["dtype"] == np.int8
                   and t["value"] is not None and t["scales"].size == 1][: len(x_list)]
    for name, x, t in zip(names, x_list, act_tensors):
        s, z = _per_tensor(t["scales"], t["zero_points"])
        fields[name] = x
        fields[name + "_scale"] = s
        fields[name + "_zero_point"] = z
    s, z = _per_tensor(ref["out_q"][0], ref["out_q"][1])
    fields["output"] = ref["output"]
    fields["output_scale"] = s
    fields["output_zero_point"] = z
    fields["activation"] = np.str_(ref["options"].get("activation", "NONE"))
    fields["model"] = np.str_(ref["model"])
    return fields


def weight_fields(ref: dict) -> dict:
    """weights (int8), per-channel scales, int32 bias of a conv/FC op."""
    w = ref["tensors"][1]
    b = ref["tensors"][2] if len(ref["tensors"]) > 2 else None
    assert w["dtype"] == np.int8 and np.all(w["zero_points"] == 0)
    fields = {
        "weights": w["value"],
        "weight_scales": w["scales"],
        "weight_quantized_dimension": np.int32(w["qdim"]),
    }
    if b is not None:
        assert b["dtype"] == np.int32
        fields["bias"] = b["value"]
        fields["bias_scales"] = b["scales"]
    return fields


def rand_int8(rng, shape, lo=-128, hi=127):
    return rng.integers(lo, hi + 1, size=shape, dtype=np.int64).astype(np.int8)


# --------------------------------------------------------------------------------------
# op builders: each returns a list of case dicts
# --------------------------------------------------------------------------------------


def _tf():
    import tensorflow as tf

    return tf


def tf_fn(body, n_inputs=1):
    """A tf.function of exactly n_inputs tensors (body's keyword defaults stay Python-bound)."""
    tf = _tf()
    if n_inputs == 1:
        return tf.function(lambda x: body(x))
    return tf.function(lambda a, b: body(a, b))


def build_conv2d(seed=10):
    tf = _tf()
    cases = []
    # (H, W, Cin, Cout, kh, kw, stride, padding, activation, input range)
    configs = [
        (9, 9, 4, 6, 3, 3, 1, "SAME", None, (-1.0, 1.0)),
        (9, 9, 4, 6, 3, 3, 2, "SAME", "relu6", (-2.0, 6.0)),
        (10, 8, 3, 5, 3, 3, 2, "VALID", None, (0.0, 3.0)),
        (7, 7, 8, 4, 1, 1, 1, "VALID", "relu", (-0.5, 0.25)),
        (8, 8, 3, 4, 5, 5, 2, "SAME", None, (-4.0, 4.0)),
    ]
    for i, (h, w, cin, cout, kh, kw, stride, padding, act, rng_in) in enumerate(configs):
        rng = np.random.default_rng(seed + i)
        # per-output-channel weight magnitudes differ, so per-channel scales differ
        filt = (rng.normal(size=(kh, kw, cin, cout)) * rng.uniform(0.05, 1.0, size=cout)).astype(np.float32)
        bias = rng.normal(scale=0.3, size=cout).astype(np.float32)
        fk, bk = tf.constant(filt), tf.constant(bias)

        def body(x, fk=fk, bk=bk, stride=stride, padding=padding, act=act):
            y = tf.nn.bias_add(tf.nn.conv2d(x, fk, strides=stride, padding=padding), bk)
            if act == "relu6":
                y = tf.nn.relu6(y)
            elif act == "relu":
                y = tf.nn.relu(y)
            return y

        f = tf_fn(body)

        spec = tf.TensorSpec((1, h, w, cin), tf.float32)
        model = convert_int8(f, [spec], [rng_in], seed + 100 + i)
        for k in range(2):
            x = rand_int8(rng, (1, h, w, cin))
            ref = run_reference(model, "CONV_2D", [x])
            case = activation_fields(ref, [x])
            case.update(weight_fields(ref))
            o = ref["options"]
            case.update(stride=np.int32(o["stride"]), dilation=np.int32(o["dilation"]),
                        padding=np.str_(o["padding"]))
            cases.append(case)
    return cases


def build_depthwise_conv2d(seed=20):
    tf = _tf()
    cases = []
    configs = [
        (9, 9, 4, 1, 3, 3, 1, "SAME", None, (-1.0, 1.0)),
        (9, 9, 4, 1, 3, 3, 2, "SAME", "relu6", (-2.0, 6.0)),
        (8, 7, 3, 2, 3, 3, 2, "VALID", None, (0.0, 3.0)),
    ]
    for i, (h, w, cin, mult, kh, kw, stride, padding, act, rng_in) in enumerate(configs):
        rng = np.random.default_rng(seed + i)
        filt = (rng.normal(size=(kh, kw, cin, mult)) * rng.uniform(0.05, 1.0, size=(cin, mult))).astype(np.float32)
        bias = rng.normal(scale=0.3, size=cin * mult).astype(np.float32)
        fk, bk = tf.constant(filt), tf.constant(bias)

        def body(x, fk=fk, bk=bk, stride=stride, padding=padding, act=act):
            y = tf.nn.depthwise_conv2d(x, fk, strides=[1, stride, stride, 1], padding=padding)
            y = tf.nn.bias_add(y, bk)
            if act == "relu6":
                y = tf.nn.relu6(y)
            return y

        f = tf_fn(body)

        spec = tf.TensorSpec((1, h, w, cin), tf.float32)
        model = convert_int8(f, [spec], [rng_in], seed + 100 + i)
        for k in range(2):
            x = rand_int8(rng, (1, h, w, cin))
            ref = run_reference(model, "DEPTHWISE_CONV_2D", [x])
            case = activation_fields(ref, [x])
            case.update(weight_fields(ref))
            o = ref["options"]
            case.update(stride=np.int32(o["stride"]), dilation=np.int32(o["dilation"]),
                        padding=np.str_(o["padding"]), depth_multiplier=np.int32(o["depth_multiplier"]))
            cases.append(case)
    return cases


def build_fully_connected(seed=30):
    tf = _tf()
    cases = []
    # (batch, Cin, Cout, activation, per_tensor, input range)
    configs = [
        (2, 16, 8, None, False, (-1.0, 1.0)),
        (3, 32, 10, "relu", False, (-0.5, 2.0)),
        (2, 16, 8, None, True, (-1.0, 1.0)),
        (1, 24, 6, None, True, (0.0, 5.0)),
    ]
    for i, (n, cin, cout, act, per_tensor, rng_in) in enumerate(configs):
        rng = np.random.default_rng(seed + i)
        wm = (rng.normal(size=(cin, cout)) * rng.uniform(0.05, 1.0, size=cout)).astype(np.float32)
        bias = rng.normal(scale=0.3, size=cout).astype(np.float32)
        wk, bk = tf.constant(wm), tf.constant(bias)

        def body(x, wk=wk, bk=bk, act=act):
            y = tf.matmul(x, wk) + bk
            if act == "relu":
                y = tf.nn.relu(y)
            return y

        f = tf_fn(body)

        spec = tf.TensorSpec((n, cin), tf.float32)
        model = convert_int8(f, [spec], [rng_in], seed + 100 + i, per_tensor_dense=per_tensor)
        for k in range(2):
            x = rand_int8(rng, (n, cin))
            ref = run_reference(model, "FULLY_CONNECTED", [x])
            case = activation_fields(ref, [x])
            case.update(weight_fields(ref))
            assert (case["weight_scales"].size == 1) == per_tensor, case["weight_scales"]
            cases.append(case)
    return cases


def _build_table_op(fn, op_name, ranges, seed, extra=None):
    tf = _tf()
    cases = []
    for i, rng_in in enumerate(ranges):

        f = tf_fn(fn)

        spec = tf.TensorSpec((1, 256), tf.float32)
        model = convert_int8(f, [spec], [rng_in], seed + i)
        x = np.arange(-128, 128, dtype=np.int64).astype(np.int8).reshape(1, 256)
        ref = run_reference(model, op_name, [x])
        cases.append({**activation_fields(ref, [x]), **(extra or {})})
    return cases


# Ranges chosen to reach every branch of the integer kernels: HARD_SWISH's reluish multiplier
# with a left shift (wide inputs) and with a right shift (inputs within about ±0.75).
def build_hard_swish(seed=90):
    tf = _tf()
    return _build_table_op(lambda x: x * tf.nn.relu6(x + 3.0) / 6.0, "HARD_SWISH",
                           [(-6.0, 6.0), (-0.4, 0.6), (-40.0, 50.0), (-3.0, 1.0), (-1.5, 8.0)], seed)


def build_leaky_relu(seed=95):
    tf = _tf()
    cases = []
    for k, (alpha, rng_in) in enumerate([(0.2, (-2.0, 2.0)), (0.01, (-5.0, 3.0)), (0.5, (-1.0, 0.3)),
                                         (1.5, (-1.0, 1.0))]):
        cases += _build_table_op(lambda x, a=alpha: tf.nn.leaky_relu(x, a), "LEAKY_RELU", [rng_in],
                                 seed + k, {"alpha": np.float32(alpha)})
    return cases


def build_abs(seed=100):
    tf = _tf()
    return _build_table_op(tf.abs, "ABS", [(-2.0, 2.0), (-1.0, 3.0), (-0.2, 0.1)], seed)


def build_log(seed=110):
    tf = _tf()
    return _build_table_op(tf.math.log, "LOG", [(0.05, 4.0), (0.5, 30.0), (0.0, 1.0)], seed)


def build_sqrt(seed=115):
    tf = _tf()
    return _build_table_op(tf.math.sqrt, "SQRT", [(0.0, 4.0), (0.0, 50.0), (0.2, 1.0)], seed)


def build_rsqrt(seed=118):
    # inputs from 0 up: zero point -128, so every int8 is a valid input (LiteRT refuses x < zp)
    tf = _tf()
    return _build_table_op(tf.math.rsqrt, "RSQRT", [(0.01, 4.0), (0.05, 50.0), (0.2, 1.0), (1e-4, 0.02)], seed)


def build_exp(seed=105):
    tf = _tf()
    return _build_table_op(tf.exp, "EXP", [(-4.0, 2.0), (-1.0, 1.0), (-8.0, 0.0)], seed)


def build_logistic(seed=40):
    tf = _tf()
    return _build_table_op(tf.sigmoid, "LOGISTIC",
                           [(-8.0, 8.0), (-3.0, 5.0), (-1.0, 1.0), (-20.0, 3.0), (0.0, 0.7)], seed)


def build_tanh(seed=45):
    tf = _tf()
    return _build_table_op(tf.tanh, "TANH", [(-4.0, 4.0), (-1.0, 2.5), (-0.6, 0.6)], seed)


def _build_pool(kind, seed):
    tf = _tf()
    cases = []
    # (H, W, C, filter, stride, padding, input range)
    configs = [
        (6, 6, 3, (2, 2), (2, 2), "VALID", (-1.0, 1.0)),
        (7, 7, 3, (3, 3), (2, 2), "SAME", (-2.0, 1.0)),
        (5, 6, 2, (3, 3), (1, 1), "SAME", (-1.0, 3.0)),
        (8, 8, 2, (2, 2), (2, 2), "SAME", (0.0, 1.0)),
        (6, 7, 2, (4, 3), (2, 3), "SAME", (-3.0, -1.0)),
        (7, 5, 2, (7, 5), (1, 1), "VALID", (-1.0, 1.0)),
    ]
    pool = tf.nn.avg_pool2d if kind == "avg" else tf.nn.max_pool2d
    op_name = "AVERAGE_POOL_2D" if kind == "avg" else "MAX_POOL_2D"
    for i, (h, w, c, filt, stride, padding, rng_in) in enumerate(configs):
        rng = np.random.default_rng(seed + i)

        def body(x, filt=filt, stride=stride, padding=padding):
            return pool(x, ksize=filt, strides=stride, padding=padding)

        f = tf_fn(body)

        spec = tf.TensorSpec((1, h, w, c), tf.float32)
        model = convert_int8(f, [spec], [rng_in], seed + 100 + i)
        inputs = [
            rand_int8(rng, (1, h, w, c)),
            rand_int8(rng, (1, h, w, c), -128, -100),  # all negative: ties below zero
            # small odd/even values: many sums hit exact .5 with an even count
            (rng.integers(-3, 4, size=(1, h, w, c)) * 1).astype(np.int8),
        ]
        for x in inputs:
            ref = run_reference(model, op_name, [x])
            case = activation_fields(ref, [x])
            o = ref["options"]
            case.update(filter=np.int32(o["filter"]), stride=np.int32(o["stride"]),
                        padding=np.str_(o["padding"]))
            cases.append(case)
    return cases


def build_avg_pool(seed=50):
    return _build_pool("avg", seed)


def build_max_pool(seed=60):
    return _build_pool("max", seed)


def _offset_sample(axes):
    """Calibration fields with a random level per kept index (so means span the range)."""

    def sample(rng, shape, lo, hi):
        level_shape = tuple(1 if i in axes else d for i, d in enumerate(shape))
        level = rng.uniform(lo, hi, size=level_shape)
        return np.clip(level + rng.normal(scale=0.2 * (hi - lo), size=shape), lo, hi)

    return sample


def _offset_int8(rng, shape, axes, spread=12):
    """int8 test input: a random level per kept index plus noise (means stay in range)."""
    level_shape = tuple(1 if i in axes else d for i, d in enumerate(shape))
    level = rng.integers(-110, 111, size=level_shape)
    noise = rng.integers(-spread, spread + 1, size=shape)
    return np.clip(level + noise, -128, 127).astype(np.int8)


def build_mean(seed=70):
    tf = _tf()
    cases = []
    # (shape, axes, keepdims, input range)
    configs = [
        ((1, 7, 7, 4), (1, 2), True, (-1.0, 1.0)),
        ((1, 7, 7, 4), (1, 2), False, (-1.0, 1.0)),
        ((1, 8, 8, 3), (1, 2), True, (0.0, 6.0)),
        ((2, 5, 3, 3), (1, 2), False, (-3.0, 1.0)),
        ((1, 4, 4, 6), (3,), True, (-2.0, 2.0)),
        ((1, 3, 5, 2), (1, 2), True, (-0.2, 0.1)),
    ]
    for i, (shape, axes, keep, rng_in) in enumerate(configs):
        rng = np.random.default_rng(seed + i)

        def body(x, axes=axes, keep=keep):
            return tf.reduce_mean(x, axis=list(axes), keepdims=keep)

        f = tf_fn(body)

        spec = tf.TensorSpec(shape, tf.float32)
        norm_axes = tuple(a % len(shape) for a in axes)
        model = convert_int8(f, [spec], [rng_in], seed + 100 + i, sample=_offset_sample(norm_axes))
        for x in (rand_int8(rng, shape), _offset_int8(rng, shape, norm_axes),
                  _offset_int8(rng, shape, norm_axes, spread=40)):
            ref = run_reference(model, "MEAN", [x])
            case = activation_fields(ref, [x])
            case.update(axes=np.int32(axes), keep_dims=np.bool_(ref["options"]["keep_dims"]))
            cases.append(case)
    return cases


def _build_binary(kind: str, combine, configs, seed: int):
    """``kind`` (ADD / MUL) of two activations: per config (shape1, shape2, range1, range2,
    activation) one converted model, two random cases on it."""
    tf = _tf()
    cases = []
    for i, (s1, s2, r1, r2, act) in enumerate(configs):
        rng = np.random.default_rng(seed + i)

        def body(a, b, act=act):
            y = combine(a, b)
            if act == "relu":
                y = tf.nn.relu(y)
            return y

        f = tf_fn(body, n_inputs=2)

        specs = [tf.TensorSpec(s1, tf.float32), tf.TensorSpec(s2, tf.float32)]
        model = convert_int8(f, specs, [r1, r2], seed + 100 + i)
        for k in range(2):
            a, b = rand_int8(rng, s1), rand_int8(rng, s2)
            ref = run_reference(model, kind, [a, b])
            cases.append(activation_fields(ref, [a, b]))
    return cases


def build_add(seed=80):
    # (shape1, shape2, range1, range2, activation)
    configs = [
        ((1, 4, 4, 8), (1, 4, 4, 8), (-1.0, 1.0), (-4.0, 4.0), None),
        ((1, 4, 4, 8), (1, 4, 4, 8), (0.0, 6.0), (-0.3, 0.2), None),
        ((1, 3, 5, 4), (1, 3, 5, 4), (-2.0, 1.0), (-1.0, 2.5), "relu"),
        ((1, 4, 4, 8), (1, 1, 1, 8), (-1.0, 1.0), (-2.0, 2.0), None),
        ((2, 16), (2, 16), (-10.0, 10.0), (-0.05, 0.05), None),
    ]
    return _build_binary("ADD", lambda a, b: a + b, configs, seed)


def build_mul(seed=120):
    """MUL of two activations: same shape (swish's x * sigmoid(x)), and a [1, 1, 1, C] channel
    vector broadcast over [1, H, W, C] in either order (squeeze-excite); several scales,
    fused RELU / none."""
    configs = [
        ((1, 4, 4, 8), (1, 4, 4, 8), (-1.0, 1.0), (-4.0, 4.0), None),
        ((1, 3, 5, 40), (1, 3, 5, 40), (-6.0, 6.0), (0.0, 1.0), None),
        ((1, 3, 5, 4), (1, 3, 5, 4), (-2.0, 1.0), (-1.0, 2.5), "relu"),
        ((1, 4, 4, 8), (1, 1, 1, 8), (-3.0, 3.0), (0.0, 1.0), None),
        ((1, 5, 3, 37), (1, 1, 1, 37), (-0.5, 8.0), (0.0, 1.0), "relu"),
        ((1, 1, 1, 16), (1, 6, 6, 16), (0.0, 1.0), (-20.0, 20.0), None),
        ((1, 2, 2, 72), (1, 1, 1, 72), (-0.05, 0.05), (-100.0, 100.0), None),
    ]
    return _build_binary("MUL", lambda a, b: a * b, configs, seed)


def _softmax_rows(rng, n: int, c: int) -> np.ndarray:
    """Random rows, rows of ties (every element the max), a spike over a flat floor and a
    full-range sweep: the sum's extremes and the diff_min cut."""
    tie = np.full((1, c), int(rng.integers(-128, 128)), np.int8)
    if c >= 512:  # >= 512 ties: sum >= 2^28, LiteRT's kernel aborts (RoundingDivideByPOT exponent > 31)
        tie[0, 511:] = -128
    rows = [rand_int8(rng, (n, c)), tie,
            np.where(np.arange(c) == c // 2, 127, -128).astype(np.int8).reshape(1, c),
            (np.arange(c) % 256 - 128).astype(np.int8).reshape(1, c)]
    return np.concatenate(rows, axis=0)


def with_softmax_beta(model: bytes, beta: float) -> bytes:
    """The model with every SOFTMAX's ``beta`` set (TensorFlow's converter always writes 1)."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    m = flatbuffer_utils.read_model_from_bytearray(bytearray(model))
    for sub in m.subgraphs:
        for op in sub.operators:
            if m.operatorCodes[op.opcodeIndex].builtinCode == schema.BuiltinOperator.SOFTMAX:
                op.builtinOptions.beta = float(beta)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(m))


def build_softmax(seed=130):
    """SOFTMAX over the last axis: classifier widths (10, 12, 1000 classes), an NHWC map, input
    scales from 1/256 to 2 (the exp table's diff_min cut moves with the scale), and beta 1 (what
    the converter writes) or, patched into the file, 0.3, 0.5 and 2.5."""
    tf = _tf()
    configs = [((1, 10), (-8.0, 8.0), 1.0), ((1, 12), (-2.0, 2.0), 1.0), ((1, 1000), (-20.0, 20.0), 1.0),
               ((1, 3, 4, 16), (-4.0, 6.0), 1.0), ((1, 64), (-0.5, 0.5), 1.0), ((1, 37), (-256.0, 200.0), 1.0),
               ((1, 200), (-60.0, 5.0), 1.0), ((1, 10), (-8.0, 8.0), 0.5), ((1, 2, 2, 24), (-3.0, 3.0), 2.5),
               ((1, 100), (-30.0, 30.0), 0.3)]
    cases = []
    for i, (shape, rng_in, beta) in enumerate(configs):
        rng = np.random.default_rng(seed + i)
        f = tf_fn(lambda x: tf.nn.softmax(x, axis=-1))
        model = convert_int8(f, [tf.TensorSpec(shape, tf.float32)], [rng_in], seed + 100 + i)
        if beta != 1.0:
            model = with_softmax_beta(model, beta)
        c, n = shape[-1], int(np.prod(shape[:-1]))
        rows = _softmax_rows(rng, 3 * n, c)
        for k in range(0, rows.shape[0], n):  # each case: n rows (the model's batch), cycled
            x = np.resize(rows[k:], (n, c)).reshape(shape).astype(np.int8)
            ref = run_reference(model, "SOFTMAX", [x])
            case = activation_fields(ref, [x])
            case["beta"] = np.float32(ref["options"]["beta"])
            cases.append(case)
    return cases


BUILDERS = {
    "conv2d": build_conv2d,
    "depthwise_conv2d": build_depthwise_conv2d,
    "fully_connected": build_fully_connected,
    "logistic": build_logistic,
    "tanh": build_tanh,
    "hard_swish": build_hard_swish,
    "leaky_relu": build_leaky_relu,
    "abs": build_abs,
    "exp": build_exp,
    "log": build_log,
    "sqrt": build_sqrt,
    "rsqrt": build_rsqrt,
    "avg_pool": build_avg_pool,
    "max_pool": build_max_pool,
    "mean": build_mean,
    "add": build_add,
    "mul": build_mul,
    "softmax": build_softmax,
}


def _versions() -> dict:
    import tensorflow as tf
    from importlib.metadata import version

    return {"tensorflow": tf.__version__, "reference": f"litert {version('ai-edge-litert')} BUILTIN_REF"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--only", action="append", choices=sorted(BUILDERS))
    ap.add_argument("--models", type=Path, default=None,
                    help="also write the one-op .tflite models here (named as the cases' 'model')")
    args = ap.parse_args(argv)
    import tensorflow as tf

    tf.random.set_seed(0)
    versions = _versions()
    total = 0
    for name in args.only or list(BUILDERS):
        cases = BUILDERS[name]()
        arrays = {"meta": np.str_(json.dumps({"op": name, "cases": len(cases), **versions}))}
        for i, case in enumerate(cases):
            for key, value in case.items():
                arrays[f"c{i}.{key}"] = value
        path = args.out / f"{name}.npz"
        save_npz(path, arrays)
        size = path.stat().st_size
        total += size
        print(f"{name:18s} {len(cases):3d} cases  {size / 1024:6.1f} KiB  -> {path}")
    print(f"total {total / 1024:.1f} KiB")
    if args.models is not None:
        args.models.mkdir(parents=True, exist_ok=True)
        for model_bytes, name in MODELS.items():
            (args.models / f"{name}.tflite").write_bytes(model_bytes)
        print(f"{len(MODELS)} models -> {args.models}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
