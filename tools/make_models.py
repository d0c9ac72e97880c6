#!/usr/bin/env python3
"""Build the real int8 model fixtures of npu_byoc, with reference outputs.

Running ``python tools/make_models.py`` regenerates everything in
``tests/fixtures/models/`` (and the bundled demo model(s) in ``npu_byoc/data/``).
The build is deterministic: fixed seeds (numpy, ``tf.random.set_seed``,
``keras.utils.set_random_seed``), fixed calibration data, and ``.npz`` files written
with fixed zip timestamps, so re-running it on the same package versions gives the
same bytes.

Dependencies (not needed by the package itself)::

    pip install -e .[models]      # tensorflow-cpu, ai-edge-litert, onnxruntime (+ onnx)

``--verify-tvm`` additionally needs ``apache-tvm`` (0.27) and ``tflite`` (the
flatbuffer bindings TVM's TFLite frontend reads).

Options::

    --out DIR        output folder (default tests/fixtures/models next to this repo)
    --only NAME      build one model only (repeatable): mobilenet_v2_int8, tiny_cnn_int8,
                     tiny_cnn_qdq, resnet_small_int8, densenet_small_int8,
                     mobilenet_v1_batch_none_int8, ds_cnn_int8, op_<op>_int8, ops_uint8,
                     tiny_cnn_qdq_u8s8, tiny_cnn_uint8, qop_cnn_s8s8, qop_cnn_u8s8, qop_ops,
                     autoencoder_int8, batch2_mean_int8, lut_ops_qdq, mobilenet_v3_small_int8,
                     concat_cnn_int8
    --no-data-copy   do not copy the demo models to npu_byoc/data/
    --skip-build     with --verify-tvm: check the existing files only
    --verify-tvm     import every model in TVM (Relax frontends), dump the Relax script to
                     /tmp/relax_<NAME>.txt, compile for llvm, run the sample inputs and print
                     the max |TVM CPU - reference| in output LSB

The models
----------
``mobilenet_v2_int8.tflite``
    ``keras.applications.MobileNetV2(alpha=0.35, input_shape=(96, 96, 3), classes=10,
    weights=None)``, full-integer (int8 in/out) TFLite, batch 1. The real MobileNetV2
    architecture: conv, depthwise, pointwise, residual ADD, ReLU6, PAD, global average
    pool (MEAN), FULLY_CONNECTED, SOFTMAX. The "realistic network" end-to-end fixture.
``tiny_cnn_int8.tflite``
    A small Keras CNN (input 1x32x32x3) holding every TFLite op the NPU supports at least
    once - CONV_2D (fused RELU6 / RELU / none; stride 2 'same'; 'valid'),
    DEPTHWISE_CONV_2D, FULLY_CONNECTED, LOGISTIC, AVERAGE_POOL_2D, MAX_POOL_2D, MEAN,
    ADD of two activations - plus ops the NPU does not support and must leave on the CPU
    with a reason: SOFTMAX, TANH, a dilated CONV_2D (dilation 2), CONCATENATION. The
    coverage / partitioning fixture; also the bundled demo model.
``tiny_cnn_qdq.onnx``
    The ONNX counterpart: the same trained float tiny CNN rewritten with onnx.helper as an
    NCHW graph (input 1x3x32x32; BN folded; checked equal to Keras to 1e-4): Conv + Clip(0,6)
    / Relu, depthwise Conv (group == channels), dilated Conv, Add of two activations,
    MaxPool, AveragePool, Sigmoid, Tanh, Concat, GlobalAveragePool, Flatten, Gemm, Softmax;
    quantized with ``onnxruntime.quantization.quantize_static`` (QDQ, per-channel int8
    weights, int8 activations). Graph input/output stay float32. Note that the ORT QDQ
    quantizer folds Relu/Clip into the preceding Conv's output quantization (zero point
    -128), so the quantized graph has no Relu/Clip nodes - as in real ORT QDQ models.

``resnet_small_int8.tflite``, ``densenet_small_int8.tflite``
    keras.applications-style ResNet (ZeroPadding2D(3) -> Conv 7x7/2 -> ZeroPadding2D(1) ->
    MaxPool 3x3/2, three bottleneck blocks) and DenseNet (the same stem, dense blocks
    concatenating conv1x1-conv3x3 bottlenecks, a conv1x1 + AvgPool 2x2/2 transition) at
    32x32: int8 PAD. (DenseNet121 itself, ~7M parameters, is too large for a fixture.)
``mobilenet_v1_batch_none_int8.tflite``
    ``keras.applications.MobileNet(alpha=0.25)`` at 96x96 converted with batch None: its
    input signature is [-1, 96, 96, 3] and its head computes SHAPE -> STRIDED_SLICE -> PACK
    -> RESHAPE.
``ds_cnn_int8.tflite``
    The MLPerf Tiny keyword-spotting DS-CNN (49x10x1 input), output declared [1, 12].
``op_<op>_int8.tflite`` (pad, padv2, strided_slice, split, split_v, transpose, squeeze,
resize_nearest_neighbor, pack, tile, gather, shape)
    One data-movement op applied to the int8 input and to a quantized 1x1 CONV_2D's output
    (outputs: the first half, then the second). SQUEEZE (batch and width open) and SHAPE
    (batch open) keep their op only with open dimensions. TILE's references use LiteRT's
    builtin kernels without delegates (its reference resolver has no int8 TILE).
``op_<op>_int8.tflite`` (logistic, tanh, exp, hard_swish, leaky_relu, elu, neg, sin, square, sqrt, log,
add_scalar, sub_scalar, mul_scalar, abs, relu, relu6, relu_n1_to_1, quantize)
    One int8 -> int8 elementwise op (the NPU's LUT unit) on the int8 input and after a
    quantized 1x1 CONV_2D; reference sample 0 holds each of the 256 int8 input values once.
    QUANTIZE int8 -> int8 appears where CONCATENATION joins LOGISTIC's and TANH's fixed output
    scales. ELU, NEG, SIN and SQUARE stay float in the converter (DEQUANTIZE -> op -> QUANTIZE); LiteRT's
    reference resolver has no ELU: its references use the builtin kernels.
``op_mul_int8.tflite``
    MUL of two activations and broadcast ADD after quantized 1x1 CONV_2Ds of 40 channels:
    swish y·sigmoid(y), a RELU-fused product, the squeeze-excite gate [1, 1, 1, 40] in both
    operand orders, y + gate.
``se_qdq.onnx``
    onnxruntime's QDQ squeeze-excite block (NCHW gate [1, 40, 1, 1], Mul with the vector
    first), swish and a broadcast Add; references from onnxruntime, optimizations disabled.
``lut_ops_qdq.onnx``
    Hand-written ONNX QDQ branches (chosen scales): Sigmoid, Tanh, HardSwish, LeakyRelu, Abs,
    Exp, Relu, Clip, Elu and a bare DequantizeLinear -> QuantizeLinear requantize; references
    from onnxruntime with graph optimizations disabled.
``ops_uint8.tflite``
    uint8 PAD, PADV2, TRANSPOSE, STRIDED_SLICE, RESIZE_NEAREST_NEIGHBOR, GATHER, PACK made
    with the legacy converter (fake-quant graph, inference_type uint8).
``tiny_cnn_qdq_u8s8.onnx``
    The tiny CNN's float ONNX graph quantized with onnxruntime's default activation type
    (``activation_type=QUInt8``, ``weight_type=QInt8``: "U8S8"), per-channel; its dilated
    conv is given dilation 1 (pads 1, the same shapes) so that every MAC op is NPU-supported.
``tiny_cnn_uint8.tflite``
    A small uint8 CNN (1x16x16x3) made with the legacy converter from a fake-quant graph:
    CONV_2D (ReLU6, none), DEPTHWISE_CONV_2D (ReLU), ADD, MAX_POOL_2D, AVERAGE_POOL_2D 3x3/1,
    CONCATENATION (not an NPU op), MEAN, LOGISTIC, FULLY_CONNECTED. Weights fake-quantized
    over [-a, a*127/128] (uint8 zero point 128), activations over their calibrated range.
``qop_cnn_s8s8.onnx``, ``qop_cnn_u8s8.onnx``
    A small float CNN (1x3x16x16, seeded random weights: Conv+Relu, depthwise, Add, Sigmoid,
    LeakyRelu, Concat, AveragePool, GlobalAveragePool, Gemm) quantized by onnxruntime in
    QOperator format (``quant_format=QuantFormat.QOperator``, per-channel int8 weights; int8
    resp. uint8 activations): QLinearConv, QLinearAdd, QLinearSigmoid, QLinearLeakyRelu,
    QLinearConcat, QLinearAveragePool, QLinearGlobalAveragePool, QGemm. Float input/output.
``qop_ops.onnx``
    One branch per QOperator / integer op variant npu_byoc/frontends/onnx_qop.py rewrites (int8 and
    uint8, per-channel weights, bias, groups, dilation, auto_pad, alpha, count_include_pad,
    channels_last, float QGemm output, Softmax of opset 13 and 11, Where, ConvInteger,
    MatMulInteger), reading integer (and one bool) graph
    inputs; ``qop_ops.npz`` holds ``in:<input>`` (3 random full-range samples) and
    ``out:<output>``, onnxruntime's outputs.
``autoencoder_int8.tflite``
    The MLPerf Tiny anomaly-detection autoencoder shape, FULLY_CONNECTED only:
    640-128-128-128-8-128-128-128-640 (ReLU, linear output), trained 6 epochs to reconstruct
    5x128 smooth fields, converted with per-channel FC weight scales
    (``_experimental_disable_per_channel_quantization_for_dense_layers = False``; the build
    checks the flatbuffer's scale counts). Proves FC's double requantize (docs/numerics.md).
``batch2_mean_int8.tflite``
    A batch-2 input [2, 6, 6, 4] (as TFLite-Micro's MEAN tests use): CONV_2D + RELU, MEAN over
    H, W (keep dims), a 1x1 CONV_2D. Its ``input_0`` / ``output_0`` are (N=3, 2, ...): each
    sample is a whole batch.

Weights and data
----------------
Inputs are smooth random fields (low-resolution gaussian noise upsampled bilinearly + a
random gradient + a little fine noise, scaled to [-1, 1]) - image-like, not white noise.
Random-weight networks amplify small perturbations chaotically (an untrained MobileNetV2
turned TVM's 1-LSB-per-layer differences into ~100 LSB at the output), so both Keras models
are briefly trained (fixed seeds, deterministic ops, no shuffling) on a synthetic 10-class
task - the bin of the input's dominant gradient direction - over 1280 such fields (seeds
5000..6279). BatchNorm moving statistics are then set exactly to the statistics of the 64
calibration samples (seeds 1000..1063; one training-mode pass with momentum 0), which also
calibrate quantization. The reference inputs use seeds 0, 1, 2.

References
----------
For each ``NAME.<tflite|onnx>``:

``NAME.npz``
    ``input_0``  (N=3, *model input shape), model dtype: int8 for TFLite (the float field
    quantized with the model's input scale/zero point), float32 for ONNX QDQ;
    ``output_0`` (N, *model output shape), the reference runtime's outputs;
    ``reference`` e.g. "litert 2.3.0 BUILTIN_REF" / "onnxruntime 1.31.1 ORT_DISABLE_ALL";
    ``meta`` a JSON string (tool versions, seeds, input/output quantization).
``NAME.tensors.npz``
    every activation tensor for sample 0 (graph inputs and all op outputs; constants
    are left out - they are in the model). TFLite: key = tensor name, and ``__index__`` is a
    JSON array indexed by TFLite tensor index giving that key (null for constants).
    ONNX: key = ONNX value name (every node output, obtained by adding all values as graph
    outputs of an in-memory copy), ``__index__`` = JSON list of the keys in node order.

TFLite references come from ``ai_edge_litert.interpreter.Interpreter`` with
``OpResolverType.BUILTIN_REF`` (the reference kernels, the de-facto int8 spec) and
``experimental_preserve_all_tensors=True``. ONNX references come from onnxruntime with
``GraphOptimizationLevel.ORT_DISABLE_ALL`` (its fused uint8 x int8 conv kernels overflow
internally on CPUs without VNNI, so optimized sessions are not a reference).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "tests" / "fixtures" / "models"
DATA_DIR = REPO / "npu_byoc" / "data"

SEED = 1234
N_CALIB = 64
CALIB_SEEDS = list(range(1000, 1000 + N_CALIB))
REF_SEEDS = [0, 1, 2]
TRAIN_SEEDS = range(5000, 5000 + 1280)
DATA_COPY_LIMIT = 1 << 20  # copy a TFLite demo model to npu_byoc/data only if < 1 MB

MODELS = ("mobilenet_v2_int8", "tiny_cnn_int8", "tiny_cnn_qdq")
DEMO_MODELS = ("tiny_cnn_int8", "mobilenet_v2_int8")


# --------------------------------------------------------------------------- helpers
def structured_input(seed: int, h: int, w: int, c: int, lo: float = -1.0, hi: float = 1.0):
    """A smooth random field (H, W, C) float32 in [lo, hi]: image-like, not white noise."""
    rng = np.random.default_rng(seed)
    gh, gw = rng.integers(3, 7, size=2)
    low = rng.normal(size=(gh, gw, c))
    # bilinear upsampling (align corners) of the low-resolution grid
    ys = np.linspace(0, gh - 1, h)
    xs = np.linspace(0, gw - 1, w)
    y0 = np.clip(np.floor(ys).astype(int), 0, gh - 2)
    x0 = np.clip(np.floor(xs).astype(int), 0, gw - 2)
    fy = (ys - y0)[:, None, None]
    fx = (xs - x0)[None, :, None]
    a = low[y0][:, x0]
    b = low[y0][:, x0 + 1]
    cc = low[y0 + 1][:, x0]
    d = low[y0 + 1][:, x0 + 1]
    field = (a * (1 - fx) + b * fx) * (1 - fy) + (cc * (1 - fx) + d * fx) * fy
    # a random linear gradient per channel
    gy, gx = np.meshgrid(np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing="ij")
    ang = rng.uniform(0, 2 * np.pi, size=c)
    field += rng.uniform(0.3, 1.0, size=c) * (
        np.cos(ang) * gx[..., None] + np.sin(ang) * gy[..., None]
    )
    field += 0.05 * rng.normal(size=field.shape)
    fmin, fmax = field.min(), field.max()
    unit = (field - fmin) / max(fmax - fmin, 1e-6)  # [0, 1]
    contrast = rng.uniform(0.7, 1.0)
    mid = 0.5 + rng.uniform(-0.5, 0.5) * (1 - contrast)
    unit = mid + (unit - 0.5) * contrast
    return (lo + (hi - lo) * unit).astype(np.float32)


def nhwc_batch(seeds, h, w, c):
    return np.stack([structured_input(s, h, w, c) for s in seeds])


def save_npz(path: Path, arrays: dict):
    """np.savez_compressed with fixed zip timestamps (byte-reproducible output)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key, val in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asanyarray(val), allow_pickle=False)
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue())


def summarize(name: str, outputs: np.ndarray, qmin=None, qmax=None):
    """Print min/max/std/distinct values of reference outputs; fail if input-independent."""
    o = np.asarray(outputs)
    flat = o.reshape(o.shape[0], -1)
    msg = (
        f"  {name}: shape {o.shape} {o.dtype} min {o.min():.4g} max {o.max():.4g} "
        f"std {o.astype(np.float64).std():.4g} distinct {len(np.unique(o))}"
    )
    if qmin is not None:
        sat = np.mean((o == qmin) | (o == qmax))
        msg += f" saturated {sat:.1%}"
    differs = [not np.array_equal(flat[0], flat[i]) for i in range(1, len(flat))]
    msg += f" differs-across-samples {all(differs)}"
    print(msg)
    if not all(differs) or len(np.unique(o)) < 3:
        raise SystemExit(f"{name}: reference output does not depend on the input")


def _set_seeds():
    import keras
    import tensorflow as tf

    keras.backend.clear_session()  # also resets layer-name counters (tensor names)
    np.random.seed(SEED)
    tf.random.set_seed(SEED)
    keras.utils.set_random_seed(SEED)
    try:
        tf.config.experimental.enable_op_determinism()
    except Exception:  # noqa: BLE001 - best effort
        pass


def _versions():
    v = {"numpy": np.__version__}
    for mod in ("tensorflow", "keras", "ai_edge_litert", "onnx", "onnxruntime"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - optional
            pass
    return v


# --------------------------------------------------------------------------- Keras / TFLite
def synthetic_task(seeds, h, w, c):
    """Structured inputs and 10-class labels: the bin of the mean-channel gradient angle."""
    xs = nhwc_batch(seeds, h, w, c)
    m = xs.mean(-1)
    gy, gx = np.meshgrid(np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing="ij")
    ang = np.arctan2((m * gy).mean((1, 2)), (m * gx).mean((1, 2)))
    ys = np.floor((ang + np.pi) / (2 * np.pi) * 10).astype(np.int64) % 10
    return xs, ys


def train_keras(make_model, shape, epochs: int, lr: float):
    """Train make_model(None) briefly on the synthetic task; return make_model(1) with its
    weights (batch fixed to 1: a dynamic batch makes the converter emit SHAPE ops)."""
    import keras

    xs, ys = synthetic_task(TRAIN_SEEDS, *shape)
    model = make_model(None)
    model.compile(optimizer=keras.optimizers.Adam(lr),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    hist = model.fit(xs, ys, batch_size=32, epochs=epochs, shuffle=False, verbose=0)
    acc = float(hist.history["accuracy"][-1])
    print(f"  trained {epochs} epochs on {len(xs)} samples: train accuracy {acc:.2f}")
    fixed = make_model(1)
    fixed.set_weights(model.get_weights())
    return fixed, acc


def calibrate_bn(model, calib: np.ndarray):
    """Set every BatchNorm's moving statistics to the exact statistics of the calibration
    data: one training-mode pass with momentum 0 (moving stats := batch stats)."""
    import keras

    bns = [l for l in model.layers if isinstance(l, keras.layers.BatchNormalization)]
    for bn in bns:
        bn.momentum = 0.0
    if bns:
        model([calib], training=True)
    for bn in bns:
        bn.momentum = 0.99


def convert_int8(model, calib: np.ndarray, per_channel_dense: bool = False) -> bytes:
    """Full-integer TFLite conversion (int8 in/out) of a Keras model or a tf.function with a
    batch-1 input. ``per_channel_dense``: per-channel FULLY_CONNECTED weights (the
    converter's default for dense layers is per-tensor)."""
    import tensorflow as tf

    if isinstance(model, tf.types.experimental.GenericFunction):
        conv = tf.lite.TFLiteConverter.from_concrete_functions([model.get_concrete_function()], model)
    else:
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
    if per_channel_dense:
        conv._experimental_disable_per_channel_quantization_for_dense_layers = False
    return quantized_int8(conv, [calib[i : i + 1] for i in range(len(calib))])


def quantized_int8(conv, calib_batches) -> bytes:
    """Run a TFLiteConverter as full-integer int8 (in/out), calibrated on ``calib_batches``."""
    import tensorflow as tf

    def rep():
        for x in calib_batches:
            yield [x]

    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    return conv.convert()


def tflite_op_counts(path: Path) -> dict:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path))
    counts: dict = {}
    for op in it._get_ops_details():
        counts[op["op_name"]] = counts.get(op["op_name"], 0) + 1
    return dict(sorted(counts.items()))


def tflite_references(path: Path, float_inputs: np.ndarray, meta: dict):
    """Run the LiteRT reference kernels; write NAME.npz and NAME.tensors.npz."""
    import ai_edge_litert
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    resolver = OpResolverType.BUILTIN_REF
    try:
        it = Interpreter(model_path=str(path), experimental_op_resolver_type=resolver,
                         experimental_preserve_all_tensors=True)
    except ValueError as err:  # LiteRT's reference resolver lacks some op versions (TILE v3)
        if "Didn't find op" not in str(err):
            raise
        resolver = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        it = Interpreter(model_path=str(path), experimental_op_resolver_type=resolver,
                         experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    ins, outs = it.get_input_details(), it.get_output_details()
    assert len(ins) == 1, "one input expected"
    if (ins[0]["shape_signature"] < 0).any():  # a dynamic dimension: run at the data's shape
        it.resize_tensor_input(ins[0]["index"], [1, *float_inputs.shape[1:]])
        it.allocate_tensors()
        ins, outs = it.get_input_details(), it.get_output_details()
    ind = ins[0]
    scale, zp = ind["quantization"]
    lim = np.iinfo(ind["dtype"])
    q = np.clip(np.round(float_inputs / scale) + zp, lim.min, lim.max).astype(ind["dtype"])
    batch = int(ind["shape"][0])  # batch > 1: float_inputs is (N, batch, ...), kept whole
    q = q.reshape(len(float_inputs), *ind["shape"][1:]) if batch == 1 else q

    act = set()  # activation tensors: graph inputs and op outputs (not constants)
    for op in it._get_ops_details():
        act.update(int(t) for t in op["outputs"] if t >= 0)
    act.update(int(d["index"]) for d in ins)

    results = [[] for _ in outs]
    tensors = {}
    details = it.get_tensor_details()
    for n in range(len(q)):
        it.set_tensor(ind["index"], q[n : n + 1] if batch == 1 else q[n])
        it.invoke()
        for k, od in enumerate(outs):
            y = it.get_tensor(od["index"])
            results[k].append((y[0] if batch == 1 else y).copy())
        if n == 0:
            index = [None] * (max(d["index"] for d in details) + 1)
            used = set()
            for d in details:
                ti = int(d["index"])
                if ti not in act:
                    continue
                key = d["name"] or f"t{ti}"
                if key in used or key.startswith("__"):
                    key = f"{key}#{ti}"
                used.add(key)
                index[ti] = key
                tensors[key] = it.get_tensor(ti).copy()
            tensors["__index__"] = np.array(json.dumps(index))

    ref = f"litert {ai_edge_litert.__version__} {resolver.name}"
    io_meta = {
        "inputs": [
            {"name": d["name"], "shape": d["shape"].tolist(), "dtype": np.dtype(d["dtype"]).name,
             "scale": float(d["quantization"][0]), "zero_point": int(d["quantization"][1])}
            for d in ins
        ],
        "outputs": [
            {"name": d["name"], "shape": d["shape"].tolist(), "dtype": np.dtype(d["dtype"]).name,
             "scale": float(d["quantization"][0]), "zero_point": int(d["quantization"][1])}
            for d in outs
        ],
    }
    meta = {**meta, **io_meta, "reference": ref}
    arrays = {"input_0": q}
    for k, r in enumerate(results):
        arrays[f"output_{k}"] = np.stack(r)
    arrays["reference"] = np.array(ref)
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    stem = path.with_suffix("")
    save_npz(Path(f"{stem}.npz"), arrays)
    save_npz(Path(f"{stem}.tensors.npz"), tensors)
    print(f"  reference: {ref}; {len(tensors) - 1} activation tensors saved")
    for k in range(len(results)):
        summarize(f"output_{k}", arrays[f"output_{k}"], -128, 127)
    return arrays


def build_mobilenet_v2(out: Path):
    import keras

    _set_seeds()
    shape = (96, 96, 3)
    alpha = 0.35

    def make(batch_size):
        return keras.applications.MobileNetV2(
            alpha=alpha, weights=None, classes=10,
            input_tensor=keras.Input(shape=shape, batch_size=batch_size, name="input"))

    model, acc = train_keras(make, shape, epochs=6, lr=2e-3)
    calib = nhwc_batch(CALIB_SEEDS, *shape)
    calibrate_bn(model, calib)
    path = out / "mobilenet_v2_int8.tflite"
    path.write_bytes(convert_int8(model, calib))
    meta = {"model": "keras.applications.MobileNetV2", "alpha": alpha, "input_shape": [1, *shape],
            "classes": 10, "train_accuracy": round(acc, 4), **_common_meta()}
    tflite_references(path, nhwc_batch(REF_SEEDS, *shape), meta)
    return path


def build_mobilenet_v3_small(out: Path):
    """keras.applications.MobileNetV3Small (alpha 0.75, 96x96, random weights, BN calibrated):
    19 HARD_SWISH and the squeeze-excite MULs between its convs — the LUT glue fixture."""
    import keras

    _set_seeds()
    shape, alpha = (96, 96, 3), 0.75
    model = keras.applications.MobileNetV3Small(
        alpha=alpha, weights=None, classes=10, include_preprocessing=False,
        input_tensor=keras.Input(shape=shape, batch_size=1, name="input"))
    calib = nhwc_batch(CALIB_SEEDS, *shape)
    calibrate_bn(model, calib)
    path = out / "mobilenet_v3_small_int8.tflite"
    path.write_bytes(convert_int8(model, calib))
    meta = {"model": "keras.applications.MobileNetV3Small (random weights)", "alpha": alpha,
            "input_shape": [1, *shape], "classes": 10, **_common_meta()}
    tflite_references(path, nhwc_batch(REF_SEEDS, *shape), meta)
    return path


def _common_meta():
    return {"train_seeds": [TRAIN_SEEDS.start, TRAIN_SEEDS.stop],
            "calib_seeds": CALIB_SEEDS, "ref_seeds": REF_SEEDS,
            "input_range": [-1.0, 1.0], "versions": _versions()}


def make_tiny_cnn(batch_size):
    """The tiny CNN (NHWC 32x32x3). Comments name the TFLite op each layer becomes."""
    import keras
    from keras import layers as L

    x0 = keras.Input(shape=(32, 32, 3), batch_size=batch_size, name="input")
    # CONV_2D stride 2 'same' (BN folded) + fused RELU6
    a = L.Conv2D(16, 3, strides=2, padding="same", use_bias=False, name="conv_s2")(x0)
    a = L.BatchNormalization(name="bn_s2")(a)
    a = L.ReLU(6.0, name="relu6_s2")(a)  # 16x16x16
    # DEPTHWISE_CONV_2D + fused RELU
    b = L.DepthwiseConv2D(3, padding="same", activation="relu", name="dw")(a)
    # CONV_2D 1x1, no activation
    c = L.Conv2D(16, 1, name="pw_linear")(b)
    # ADD of two int8 activations (residual)
    d = L.Add(name="residual_add")([a, c])
    # MAX_POOL_2D
    e = L.MaxPooling2D(2, name="maxpool")(d)  # 8x8x16
    # CONV_2D 'valid' + fused RELU
    f = L.Conv2D(24, 3, padding="valid", activation="relu", name="conv_valid")(e)  # 6x6x24
    # NPU-unsupported: dilated CONV_2D (dilation 2)
    g = L.Conv2D(8, 3, padding="same", dilation_rate=2, activation="relu",
                 name="conv_dilated")(f)
    # NPU-unsupported: TANH (CONV_2D + TANH)
    h = L.Conv2D(8, 1, activation="tanh", name="conv_tanh")(f)
    # LOGISTIC (CONV_2D + LOGISTIC)
    s = L.Conv2D(8, 1, activation="sigmoid", name="conv_sigmoid")(f)
    # NPU-unsupported: CONCATENATION (the converter also adds QUANTIZE requantize ops
    # because concat inputs must share the output scale)
    i = L.Concatenate(name="concat")([g, h, s])  # 6x6x24
    # AVERAGE_POOL_2D
    j = L.AveragePooling2D(2, name="avgpool")(i)  # 3x3x24
    # MEAN (global average pool over H, W)
    k = L.GlobalAveragePooling2D(name="gap")(j)  # 24
    # FULLY_CONNECTED
    lg = L.Dense(10, name="fc")(k)
    # NPU-unsupported: SOFTMAX
    y = L.Softmax(name="softmax")(lg)
    return keras.Model(x0, y, name="tiny_cnn")


_TINY = None


def tiny_cnn_trained():
    """The trained, BN-calibrated float tiny CNN (shared by the TFLite and ONNX fixtures)."""
    global _TINY
    if _TINY is None:
        _set_seeds()
        model, acc = train_keras(make_tiny_cnn, (32, 32, 3), epochs=12, lr=3e-3)
        calibrate_bn(model, nhwc_batch(CALIB_SEEDS, 32, 32, 3))
        _TINY = (model, acc)
    return _TINY


def build_tiny_cnn_int8(out: Path):
    model, acc = tiny_cnn_trained()
    shape = (32, 32, 3)
    calib = nhwc_batch(CALIB_SEEDS, *shape)
    path = out / "tiny_cnn_int8.tflite"
    path.write_bytes(convert_int8(model, calib))
    meta = {"model": "tiny_cnn (tools/make_models.py)", "input_shape": [1, *shape],
            "train_accuracy": round(acc, 4), **_common_meta()}
    tflite_references(path, nhwc_batch(REF_SEEDS, *shape), meta)
    return path


# --------------------------------------------------------------------------- TFLite ops TVM refuses
# Real keras models whose int8 TFLite form holds PAD (ZeroPadding2D), a batch-None model
# (SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE) and a DS-CNN whose output is declared [1, 12];
# then one small model per data-movement op (a quantized CONV_2D feeds it, so the op is int8).
def _train_and_convert(name: str, out: Path, make, shape, epochs: int, lr: float, meta: dict,
                       batch=1):
    """Train ``make(None)``; convert ``make(batch)`` (None keeps the batch dynamic) to int8."""
    _set_seeds()
    trained, acc = train_keras(make, shape, epochs=epochs, lr=lr)
    model = trained
    if batch is None:
        model = make(None)
        model.set_weights(trained.get_weights())
    calib = nhwc_batch(CALIB_SEEDS, *shape)
    calibrate_bn(model, calib)
    path = out / f"{name}.tflite"
    path.write_bytes(convert_int8(model, calib))
    meta = {**meta, "input_shape": [batch, *shape], "train_accuracy": round(acc, 4),
            **_common_meta()}
    tflite_references(path, nhwc_batch(REF_SEEDS, *shape), meta)
    return path


def make_resnet_small(batch_size):
    """keras.applications ResNet stem and bottleneck blocks, at 32x32 and narrow widths."""
    import keras
    from keras import layers as L

    x0 = keras.Input(shape=(32, 32, 3), batch_size=batch_size, name="input")
    x = L.ZeroPadding2D(3, name="conv1_pad")(x0)
    x = L.Conv2D(16, 7, strides=2, name="conv1_conv")(x)
    x = L.BatchNormalization(name="conv1_bn")(x)
    x = L.ReLU(name="conv1_relu")(x)
    x = L.ZeroPadding2D(1, name="pool1_pad")(x)
    x = L.MaxPooling2D(3, strides=2, name="pool1_pool")(x)

    def block(x, filters, stride, shortcut_conv, name):
        if shortcut_conv:
            s = L.Conv2D(4 * filters, 1, strides=stride, name=name + "_0_conv")(x)
            s = L.BatchNormalization(name=name + "_0_bn")(s)
        else:
            s = x
        y = L.Conv2D(filters, 1, strides=stride, name=name + "_1_conv")(x)
        y = L.ReLU(name=name + "_1_relu")(L.BatchNormalization(name=name + "_1_bn")(y))
        y = L.Conv2D(filters, 3, padding="same", name=name + "_2_conv")(y)
        y = L.ReLU(name=name + "_2_relu")(L.BatchNormalization(name=name + "_2_bn")(y))
        y = L.Conv2D(4 * filters, 1, name=name + "_3_conv")(y)
        y = L.BatchNormalization(name=name + "_3_bn")(y)
        return L.ReLU(name=name + "_out")(L.Add(name=name + "_add")([s, y]))

    x = block(x, 8, 1, True, "conv2_block1")
    x = block(x, 8, 1, False, "conv2_block2")
    x = block(x, 16, 2, True, "conv3_block1")
    x = L.GlobalAveragePooling2D(name="avg_pool")(x)
    return keras.Model(x0, L.Dense(10, activation="softmax", name="predictions")(x),
                       name="resnet_small")


def make_densenet_small(batch_size):
    """keras.applications DenseNet stem, dense blocks (conv1x1-conv3x3 bottlenecks whose
    outputs are concatenated) and a transition (conv1x1, average pool 2x2/2), at 32x32.
    BN-ReLU come after each conv (they fold into it); DenseNet's own pre-activation BN on a
    concatenation would become int8 MUL/ADD, which TVM's CPU build rounds in float."""
    import keras
    from keras import layers as L

    x0 = keras.Input(shape=(32, 32, 3), batch_size=batch_size, name="input")
    x = L.ZeroPadding2D(3, name="zero_padding2d")(x0)
    x = L.Conv2D(16, 7, strides=2, use_bias=False, name="conv1_conv")(x)
    x = L.ReLU(name="conv1_relu")(L.BatchNormalization(name="conv1_bn")(x))
    x = L.ZeroPadding2D(1, name="zero_padding2d_1")(x)
    x = L.MaxPooling2D(3, strides=2, name="pool1")(x)

    def conv_bn_relu(x, filters, kernel, name):
        x = L.Conv2D(filters, kernel, padding="same", use_bias=False, name=name + "_conv")(x)
        return L.ReLU(name=name + "_relu")(L.BatchNormalization(name=name + "_bn")(x))

    def conv_block(x, growth, name):
        y = conv_bn_relu(x, 4 * growth, 1, name + "_1")
        y = conv_bn_relu(y, growth, 3, name + "_2")
        return L.Concatenate(name=name + "_concat")([x, y])

    for k in range(3):
        x = conv_block(x, 8, f"conv2_block{k + 1}")
    x = conv_bn_relu(x, 20, 1, "pool2")
    x = L.AveragePooling2D(2, strides=2, name="pool2_pool")(x)
    for k in range(2):
        x = conv_block(x, 8, f"conv3_block{k + 1}")
    x = L.GlobalAveragePooling2D(name="avg_pool")(x)
    return keras.Model(x0, L.Dense(10, activation="softmax", name="predictions")(x),
                       name="densenet_small")


def make_mobilenet_v1(batch_size):
    import keras

    return keras.applications.MobileNet(
        alpha=0.25, weights=None, classes=10,
        input_tensor=keras.Input(shape=(96, 96, 3), batch_size=batch_size, name="input"))


def make_ds_cnn(batch_size):
    """MLPerf Tiny keyword spotting DS-CNN (49x10x1 MFCC input, 12 classes)."""
    import keras
    from keras import layers as L

    x0 = keras.Input(shape=(49, 10, 1), batch_size=batch_size, name="input")
    x = L.Conv2D(64, (10, 4), strides=(2, 2), padding="same", name="conv")(x0)
    x = L.ReLU(name="relu")(L.BatchNormalization(name="bn")(x))
    for k in range(4):
        x = L.DepthwiseConv2D(3, padding="same", name=f"dw{k}")(x)
        x = L.ReLU(name=f"dw{k}_relu")(L.BatchNormalization(name=f"dw{k}_bn")(x))
        x = L.Conv2D(64, 1, name=f"pw{k}")(x)
        x = L.ReLU(name=f"pw{k}_relu")(L.BatchNormalization(name=f"pw{k}_bn")(x))
    x = L.AveragePooling2D(pool_size=(25, 5), name="avg_pool")(x)
    x = L.Flatten(name="flatten")(x)
    return keras.Model(x0, L.Dense(12, activation="softmax", name="fc")(x), name="ds_cnn")


def make_glue_cnn(batch_size):
    """The glue between NPU ops that splits partitions: keras ZeroPadding2D before a VALID
    stride-2 conv and (asymmetric) before a depthwise, dilated conv and depthwise, a pad too
    wide to fold (2 + the conv's own SAME 1 = the 3x3 kernel), and global average pooling
    with keepdims -> Flatten (a RESHAPE) -> Dense."""
    import keras
    from keras import layers as L

    x0 = keras.Input(shape=(16, 16, 3), batch_size=batch_size, name="input")

    def bn_relu(x, name):
        return L.ReLU(name=name + "_relu")(L.BatchNormalization(name=name + "_bn")(x))

    x = L.ZeroPadding2D(1, name="pad_conv")(x0)
    x = bn_relu(L.Conv2D(8, 3, strides=2, name="conv_s2")(x), "conv_s2")
    x = L.ZeroPadding2D(((1, 1), (0, 2)), name="pad_dw")(x)
    x = bn_relu(L.DepthwiseConv2D(3, name="dw")(x), "dw")
    x = bn_relu(L.Conv2D(8, 3, dilation_rate=2, padding="same", name="conv_dil")(x), "conv_dil")
    x = bn_relu(L.DepthwiseConv2D(3, dilation_rate=2, padding="same", name="dw_dil")(x), "dw_dil")
    x = L.ZeroPadding2D(2, name="pad_wide")(x)
    x = bn_relu(L.Conv2D(8, 3, padding="same", name="conv_wide")(x), "conv_wide")
    x = L.GlobalAveragePooling2D(keepdims=True, name="gap")(x)
    x = L.Flatten(name="flatten")(x)
    return keras.Model(x0, L.Dense(10, activation="softmax", name="fc")(x), name="glue_cnn")


def make_bn_concat(batch_size):
    """DenseNet121's pre-activation BatchNorm on a concatenation, which no conv absorbs: the
    converter writes it as MUL and ADD by per-channel constants (then ReLU), twice."""
    import keras
    from keras import layers as L

    x0 = keras.Input(shape=(16, 16, 3), batch_size=batch_size, name="input")
    x = L.Conv2D(8, 3, padding="same", name="conv0")(x0)
    x = L.ReLU(name="conv0_relu")(L.BatchNormalization(name="conv0_bn")(x))
    y = L.Conv2D(8, 3, padding="same", name="conv1")(x)
    x = L.Concatenate(name="concat")([x, y])
    x = L.ReLU(name="block_relu")(L.BatchNormalization(name="block_bn")(x))
    x = L.Conv2D(12, 1, name="conv2")(x)
    x = L.ReLU(name="final_relu")(L.BatchNormalization(name="final_bn")(x))
    x = L.GlobalAveragePooling2D(name="gap")(x)
    return keras.Model(x0, L.Dense(10, activation="softmax", name="fc")(x), name="bn_concat")


def build_bn_concat(out: Path):
    return _train_and_convert("bn_concat_int8", out, make_bn_concat, (16, 16, 3), 2, 3e-3,
                              {"model": "BatchNorm on a concatenation: MUL / ADD by channel constants"})


def build_glue_cnn(out: Path):
    return _train_and_convert("glue_cnn_int8", out, make_glue_cnn, (16, 16, 3), 2, 3e-3,
                              {"model": "glue ops: ZeroPadding2D, dilated conv, Flatten"})


def make_concat_cnn(batch_size):
    """CONCATENATION as CNNs write it: inception-like branches of different ranges (a ReLU
    conv, a linear 1x1 conv, a max pool) joined on channels, a DenseNet-style concat of a
    block's input and its output, a concat of the model input (a partition input: copied in
    by a LUT op) and a concat along H (each conv writes its box of rows in place)."""
    import keras
    from keras import layers as L

    x0 = keras.Input(shape=(16, 16, 3), batch_size=batch_size, name="input")
    s = L.Concatenate(name="cat_input")([x0, L.Conv2D(5, 3, padding="same", name="stem_conv")(x0)])
    a = L.ReLU(name="br_a_relu")(L.Conv2D(8, 3, padding="same", name="br_a")(s))
    b = L.Conv2D(8, 1, name="br_b")(s)
    m = L.MaxPooling2D(3, strides=1, padding="same", name="br_pool")(a)
    x = L.Concatenate(name="cat_branches")([a, b, m])
    x = L.ReLU(name="mix_relu")(L.BatchNormalization(name="mix_bn")(L.Conv2D(16, 1, name="mix")(x)))
    y = L.Conv2D(8, 3, padding="same", activation="relu", name="dense")(x)
    x = L.Concatenate(name="cat_dense")([x, y])
    h = L.Concatenate(axis=1, name="cat_rows")([L.Conv2D(8, 1, name="top")(x), L.Conv2D(8, 1, name="bottom")(x)])
    x = L.GlobalAveragePooling2D(name="gap")(h)
    return keras.Model(x0, L.Dense(10, activation="softmax", name="fc")(x), name="concat_cnn")


def make_transpose_conv(batch_size):
    """A U-Net decoder's upsampling: Conv2DTranspose (TRANSPOSE_CONV) of kernel 3 stride 2 SAME
    with a fused RELU6, a skip connection concatenated on channels, kernel 2 stride 2 (the
    common 2x upsampler), kernel 3 stride 1, and on a second output kernel 4 stride (2, 1)
    VALID. Random weights: the op's arithmetic, not a task, is under test."""
    import keras
    from keras import layers as L

    x0 = keras.Input(shape=(16, 16, 3), batch_size=batch_size, name="input")
    e1 = L.Conv2D(8, 3, padding="same", activation="relu", name="enc1")(x0)
    e2 = L.Conv2D(12, 3, strides=2, padding="same", activation="relu", name="enc2")(e1)
    u1 = L.Conv2DTranspose(8, 3, strides=2, padding="same", activation="relu6", name="up_k3s2")(e2)
    c = L.Concatenate(name="skip")([u1, e1])
    u2 = L.Conv2DTranspose(6, 2, strides=2, padding="same", name="up_k2s2")(c)
    u3 = L.Conv2DTranspose(5, 3, strides=1, padding="same", activation="relu", name="up_k3s1")(u2)
    side = L.Conv2DTranspose(4, 4, strides=(2, 1), padding="valid", name="up_k4s21")(e2)
    return keras.Model(x0, [u3, side], name="transpose_conv")


def build_transpose_conv(out: Path):
    return _random_weights_and_convert("transpose_conv_int8", out, make_transpose_conv, (16, 16, 3),
                                    {"model": "TRANSPOSE_CONV: a U-Net decoder's upsampling (tools/make_models.py)"}, seed=11)


def make_upsample_cnn(batch_size):
    """U-Net glue that only moves pixels: nearest-neighbour upsampling (RESIZE_NEAREST_NEIGHBOR,
    2x and (3, 2); tf.image.resize: Keras 3's UpSampling2D converts to RESHAPE + TILE chains
    instead, whose TILE LiteRT's reference resolver lacks), the result concatenated with a skip
    connection, Cropping2D (STRIDED_SLICE) and a strided slice of every other row and column."""
    import keras
    import tensorflow as tf
    from keras import layers as L

    def up(factors, name):
        return L.Lambda(lambda t: tf.image.resize(t, [t.shape[1] * factors[0], t.shape[2] * factors[1]],
                                                  method="nearest"), name=name)  # fmt: skip

    x0 = keras.Input(shape=(16, 16, 3), batch_size=batch_size, name="input")
    e1 = L.Conv2D(8, 3, padding="same", activation="relu", name="enc1")(x0)
    e2 = L.Conv2D(12, 3, strides=2, padding="same", activation="relu", name="enc2")(e1)
    x = L.Concatenate(name="skip")([up((2, 2), "up2x")(e2), e1])
    x = L.Conv2D(8, 3, padding="same", activation="relu", name="dec")(x)
    x = L.Cropping2D(((1, 2), (2, 1)), name="crop")(x)
    side = up((3, 2), "up32")(L.Conv2D(4, 1, name="head")(e2))
    sub = L.Lambda(lambda t: t[:, ::2, 1::2, :], name="subsample")(side)
    return keras.Model(x0, [x, sub], name="upsample_cnn")


def make_resize_bilinear(batch_size):
    """RESIZE_BILINEAR as decoders use it: tf.image.resize(method="bilinear") 2x (half-pixel
    centres, TF2's default) between convs, 4x without half-pixel centres
    (tf.compat.v1.image.resize_bilinear), and 2x with aligned corners."""
    import keras
    import tensorflow as tf
    from keras import layers as L

    x0 = keras.Input(shape=(8, 8, 3), batch_size=batch_size, name="input")
    e = L.Conv2D(8, 3, padding="same", activation="relu", name="enc")(x0)
    u = L.Lambda(lambda t: tf.image.resize(t, [16, 16], method="bilinear"), name="up2x")(e)
    a = L.Conv2D(4, 3, padding="same", name="dec")(u)
    b = L.Lambda(lambda t: tf.compat.v1.image.resize_bilinear(t, [32, 32]), name="up4x")(L.Conv2D(4, 1, name="head")(e))
    c = L.Lambda(lambda t: tf.compat.v1.image.resize_bilinear(t, [16, 16], align_corners=True), name="up2x_ac")(e)
    return keras.Model(x0, [a, b, c], name="resize_bilinear")


def build_resize_bilinear(out: Path):
    return _random_weights_and_convert("resize_bilinear_int8", out, make_resize_bilinear, (8, 8, 3),
                                       {"model": "RESIZE_BILINEAR: 2x half-pixel, 4x asymmetric, 2x aligned corners"},
                                       seed=17)


def make_unet(batch_size):
    """A small U-Net with the glue of segmentation models: ZeroPadding2D (PAD) before a VALID
    conv, LeakyReLU, hard-swish, a dilated conv with tanh, a transposed conv back up, a
    bilinear 2x upsampling of the bottleneck, and the skip connections concatenated."""
    import keras
    import tensorflow as tf
    from keras import layers as L

    x0 = keras.Input(shape=(16, 16, 3), batch_size=batch_size, name="input")
    e1 = L.LeakyReLU(0.2, name="enc1_lrelu")(L.Conv2D(8, 3, name="enc1")(L.ZeroPadding2D(((1, 1), (0, 2)), name="pad")(x0)))
    e2 = L.Activation("hard_swish", name="enc2_hswish")(L.Conv2D(12, 3, strides=2, padding="same", name="enc2")(e1))
    b = L.Conv2D(12, 3, dilation_rate=2, padding="same", activation="tanh", name="bottleneck")(e2)
    up = L.Conv2DTranspose(8, 3, strides=2, padding="same", activation="relu", name="up")(b)
    bl = L.Lambda(lambda t: tf.image.resize(t, [16, 16], method="bilinear"), name="up_bilinear")(b)
    x = L.Concatenate(name="skip")([up, e1, bl])
    x = L.Conv2D(8, 3, padding="same", activation="relu", name="dec")(x)
    return keras.Model(x0, L.Conv2D(4, 1, name="head")(x), name="unet")


def build_unet(out: Path):
    return _random_weights_and_convert("unet_int8", out, make_unet, (16, 16, 3),
                                       {"model": "small U-Net: PAD, LEAKY_RELU, HARD_SWISH, dilated conv, TANH, "
                                                 "TRANSPOSE_CONV, RESIZE_BILINEAR, CONCATENATION"}, seed=19)


def build_upsample_cnn(out: Path):
    return _random_weights_and_convert("upsample_cnn_int8", out, make_upsample_cnn, (16, 16, 3),
                                    {"model": "U-Net pixel glue: UpSampling2D, Cropping2D, strided slice"}, seed=13)


def make_conv1d_cnn(batch_size):
    """A 1-D CNN over a sequence (keyword spotting / sensor data): Conv1D k5 + ReLU, MaxPooling1D,
    a dilated Conv1D k3 (rate 2) + ReLU, GlobalAveragePooling1D, Dense + softmax. TensorFlow's
    converter writes each Conv1D as EXPAND_DIMS -> CONV_2D -> RESHAPE, the dilated one inside
    SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND: operators TVM's TFLite import refuses when quantized."""
    import keras
    from keras import layers as L

    x0 = keras.Input((64, 8), batch_size=batch_size)
    x = L.Conv1D(16, 5, padding="same", activation="relu")(x0)
    x = L.MaxPooling1D(2)(x)
    x = L.Conv1D(16, 3, dilation_rate=2, padding="same", activation="relu")(x)
    x = L.GlobalAveragePooling1D()(x)
    return keras.Model(x0, L.Dense(4, activation="softmax")(x))


def build_conv1d_cnn(out: Path):
    """conv1d_cnn_int8: the 1-D CNN with random weights and batch None; its inputs are the
    structured images' first rows (64 steps x 8 features)."""
    _set_seeds()
    model = make_conv1d_cnn(None)  # batch None: the converter keeps SPACE_TO_BATCH_ND around the dilated conv
    rng = np.random.default_rng(17)
    for w in model.weights:
        fan_in = int(np.prod(w.shape[:-1])) if len(w.shape) > 1 else 1
        w.assign(rng.normal(size=w.shape).astype(np.float32) * (1.5 / np.sqrt(fan_in) if len(w.shape) > 1 else 0.2))
    path = out / "conv1d_cnn_int8.tflite"
    path.write_bytes(convert_int8(model, nhwc_batch(CALIB_SEEDS, 1, 64, 8)[:, 0]))
    meta = {"model": "1-D CNN: Conv1D, MaxPooling1D, dilated Conv1D, GlobalAveragePooling1D, Dense",
            "input_shape": [1, 64, 8], **_common_meta()}
    tflite_references(path, nhwc_batch(REF_SEEDS, 1, 64, 8)[:, 0], meta)
    return path


def make_upsample_keras3(batch_size):
    """Keras 3's UpSampling2D (nearest, 2x): TensorFlow's converter writes it as EXPAND_DIMS ->
    TILE -> RESHAPE per axis, the target shape built by SHAPE -> STRIDED_SLICE -> CONCATENATION,
    between two convs."""
    import keras
    from keras import layers as L

    x0 = keras.Input((8, 8, 3), batch_size=batch_size)
    x = L.Conv2D(8, 3, padding="same", activation="relu")(x0)
    x = L.UpSampling2D()(x)
    return keras.Model(x0, L.Conv2D(4, 3, padding="same")(x))


def build_upsample_keras3(out: Path):
    """Batch None, as keras models are saved: the converter then computes the RESHAPE targets
    at run time (SHAPE -> STRIDED_SLICE -> CONCATENATION), which the import folds."""
    return _random_weights_and_convert("upsample_keras3_int8", out, lambda _: make_upsample_keras3(None), (8, 8, 3),
                                       {"model": "Keras 3 UpSampling2D (EXPAND_DIMS, TILE, RESHAPE chains)"}, seed=19)


def make_dense_seq(batch_size):
    """A Dense layer applied to a sequence (a [N, 4, 64] tensor after Reshape + Permute): Keras
    writes it as Tensordot, which TensorFlow's converter turns into shape arithmetic (SHAPE ->
    GATHER -> REDUCE_PROD -> PACK) around RESHAPE -> FULLY_CONNECTED -> RESHAPE."""
    import keras
    from keras import layers as L

    x0 = keras.Input((8, 8, 3), batch_size=batch_size)
    x = L.Conv2D(4, 3, padding="same", activation="relu")(x0)
    x = L.Permute((2, 1))(L.Reshape((64, 4))(x))
    return keras.Model(x0, L.Dense(8)(x))


def build_dense_seq(out: Path):
    return _random_weights_and_convert("dense_seq_int8", out, lambda _: make_dense_seq(None), (8, 8, 3),
                                       {"model": "Dense on a 3-D tensor (Tensordot shape arithmetic), batch None"},
                                       seed=23)


def _random_weights_and_convert(name: str, out: Path, make, shape, meta: dict, seed: int):
    """``make(1)`` with random fan-in-scaled weights (no task: the op's arithmetic, not a
    prediction, is under test), converted to int8 with LiteRT's references."""
    _set_seeds()
    model = make(1)
    rng = np.random.default_rng(seed)
    for w in model.weights:
        fan_in = int(np.prod(w.shape[:-1])) if len(w.shape) > 1 else 1
        w.assign(rng.normal(size=w.shape).astype(np.float32) * (1.5 / np.sqrt(fan_in) if len(w.shape) > 1 else 0.2))
    path = out / f"{name}.tflite"
    path.write_bytes(convert_int8(model, nhwc_batch(CALIB_SEEDS, *shape)))
    meta = {**meta, "input_shape": [1, *shape], **_common_meta()}
    tflite_references(path, nhwc_batch(REF_SEEDS, *shape), meta)
    return path


def build_concat_cnn(out: Path):
    return _train_and_convert("concat_cnn_int8", out, make_concat_cnn, (16, 16, 3), 2, 3e-3,
                              {"model": "CONCATENATION: branches of different scales, dense, input, along H"})


def build_resnet_small(out: Path):
    return _train_and_convert("resnet_small_int8", out, make_resnet_small, (32, 32, 3), 4, 3e-3,
                              {"model": "ResNet-style (keras.applications stem + bottlenecks)"})


def build_densenet_small(out: Path):
    return _train_and_convert("densenet_small_int8", out, make_densenet_small, (32, 32, 3), 4,
                              3e-3, {"model": "DenseNet-style (keras.applications stem, blocks)"})


def build_mobilenet_v1_batch_none(out: Path):
    return _train_and_convert("mobilenet_v1_batch_none_int8", out, make_mobilenet_v1,
                              (96, 96, 3), 8, 2e-3,
                              {"model": "keras.applications.MobileNet alpha 0.25, batch None"},
                              batch=None)


def build_ds_cnn(out: Path):
    return _train_and_convert("ds_cnn_int8", out, make_ds_cnn, (49, 10, 1), 4, 3e-3,
                              {"model": "DS-CNN (MLPerf Tiny KWS)"})


def _op_model(body, in_shape=(8, 8, 4), batch=1, seed=7):
    """A tf.function returning ``body`` of the int8 input (the op alone: TVM's CPU build must
    give LiteRT's integers exactly), then ``body`` of a quantized 1x1 CONV_2D's output (an
    NPU partition feeding the op)."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    c = in_shape[-1]
    w = tf.constant(rng.normal(size=(1, 1, c, c)).astype(np.float32) * 0.6)
    b = tf.constant(rng.normal(size=(c,)).astype(np.float32) * 0.1)

    @tf.function(input_signature=[tf.TensorSpec([batch, *in_shape], tf.float32)])
    def f(x):
        y = tf.nn.conv2d(x, w, 1, "SAME") + b
        direct, after_conv = body(x), body(y)
        if not isinstance(direct, tuple):
            return direct, after_conv
        return (*direct, *after_conv)

    return f


def _op_models():
    import tensorflow as tf

    resize = tf.compat.v1.image.resize_nearest_neighbor
    return {
        "pad": lambda y: tf.pad(y, [[0, 0], [1, 2], [3, 0], [0, 1]]),
        "padv2": lambda y: tf.pad(y, [[0, 0], [2, 1], [0, 2], [0, 0]], constant_values=0.75),
        "strided_slice": lambda y: (
            y[:, 1:7:2, ::-1, 1:3],            # strides, negative stride, begin/end
            y[..., 2],                         # ellipsis + shrink
            y[:, tf.newaxis, -3:, :, ::2],     # new axis, negative begin
            y[:, -2:0:-3, 5:1:-1, :],          # negative strides with explicit bounds
        ),
        "split": lambda y: tuple(tf.split(y, 2, axis=3)),
        "split_v": lambda y: tuple(tf.split(y, [3, 1, 4], axis=1)),
        "transpose": lambda y: tf.transpose(y, [0, 3, 1, 2]),
        "squeeze": ("squeeze", (1, None, 4)),
        "resize_nearest_neighbor": lambda y: (
            resize(y, [13, 11]),
            resize(y, [13, 11], align_corners=True),
            resize(y, [5, 16], half_pixel_centers=True),
        ),
        "pack": lambda y: tf.stack([y, tf.nn.relu(y)], axis=1),
        "tile": lambda y: tf.tile(y, [1, 2, 1, 3]),
        "gather": lambda y: (tf.gather(y, [3, 0, 2, 2], axis=3), tf.gather(y, [7, 1], axis=1)),
        "shape": ("shape", (8, 8, 4)),
    }


def build_op_model(op: str, out: Path):
    import tensorflow as tf

    _set_seeds()
    spec = _op_models()[op]
    batch, shape = 1, (8, 8, 4)
    if op == "squeeze":  # batch and width None: else the converter makes it a RESHAPE
        batch, shape = None, spec[1]
        body = lambda y: tf.squeeze(y, [1])  # noqa: E731
    elif op == "shape":  # batch None: the converter keeps SHAPE -> STRIDED_SLICE -> PACK
        batch = None
        body = lambda y: tf.reshape(y, [tf.shape(y)[0], 16, -1])  # noqa: E731
    else:
        body = spec
    f = _op_model(body, shape, batch)
    shape = tuple(8 if d is None else d for d in shape)  # the data's shape
    calib = nhwc_batch(CALIB_SEEDS, *shape)

    path = out / f"op_{op}_int8.tflite"
    path.write_bytes(convert_int8(f, calib))
    meta = {"model": f"single-op {op.upper()} after a quantized CONV_2D (tools/make_models.py)",
            "input_shape": [batch, *shape], **_common_meta()}
    tflite_references(path, nhwc_batch(REF_SEEDS, *shape), meta)
    return path


def _convert_legacy_uint8(graph, x, outs) -> bytes:
    """The legacy converter on a fake-quant graph: inference_type uint8, input ``x`` with
    scale 1/128 and zero point 128."""
    import tensorflow as tf
    import tensorflow.compat.v1 as v1

    with v1.Session(graph=graph) as sess:
        conv = v1.lite.TFLiteConverter.from_session(sess, [x], outs)
        conv.inference_type = tf.uint8
        conv.quantized_input_stats = {"x": (128.0, 128.0)}  # (mean, std): scale 1/128, zp 128
        return conv.convert()


def build_ops_uint8(out: Path):
    """uint8 (TFLite 1.x style: fake-quant graph, the legacy converter with inference_type
    uint8) data-movement ops on the uint8 input: TVM's frontend refuses them all."""
    import tensorflow as tf
    import tensorflow.compat.v1 as v1

    _set_seeds()
    fq = lambda t: tf.quantization.fake_quant_with_min_max_args(t, -1.0, 127 / 128)  # noqa: E731
    resize = v1.image.resize_nearest_neighbor
    g = v1.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [1, 8, 8, 4], name="x")
        y = fq(x)
        outs = [
            tf.pad(y, [[0, 0], [1, 2], [3, 0], [0, 1]]),
            tf.pad(y, [[0, 0], [2, 0], [0, 1], [0, 0]], constant_values=0.5),
            tf.transpose(y, [0, 3, 1, 2]),
            y[:, 1:7:2, ::-1, 1:3],
            resize(y, [13, 11], align_corners=True),
            tf.gather(y, [3, 0, 2, 2], axis=3),
            tf.stack([y, y], axis=2),
        ]
        outs = [v1.identity(fq(o), name=f"out{k}") for k, o in enumerate(outs)]
        data = _convert_legacy_uint8(g, x, outs)
    path = out / "ops_uint8.tflite"
    path.write_bytes(data)
    meta = {"model": "uint8 data-movement ops (tools/make_models.py, legacy converter)",
            "input_shape": [1, 8, 8, 4], **_common_meta()}
    tflite_references(path, nhwc_batch(REF_SEEDS, 8, 8, 4), meta)
    return path


def _lut_op_models():
    """int8 -> int8 elementwise ops (the NPU's LUT unit): op -> (body, input range). The range
    is the calibration data's, so the int8 input spans the op's interesting region."""
    import tensorflow as tf

    return {
        "logistic": (tf.nn.sigmoid, 6.0),
        "tanh": (tf.nn.tanh, 3.0),
        "hard_swish": (lambda y: y * tf.nn.relu6(y + 3.0) / 6.0, 5.0),
        "leaky_relu": (lambda y: tf.nn.leaky_relu(y, 0.2), 2.0),
        "relu": (tf.nn.relu, 2.0),
        "relu6": (tf.nn.relu6, 8.0),
        "relu_n1_to_1": (lambda y: tf.clip_by_value(y, -1.0, 1.0), 2.0),
        "abs": (tf.abs, 2.0),
        "exp": (tf.exp, 2.0),
        "elu": (tf.nn.elu, 3.0),  # kept in float by the converter: DEQUANTIZE -> ELU -> QUANTIZE
        "neg": (tf.negative, 2.0),  # kept in float too
        "sin": (tf.math.sin, 3.0),  # kept in float too
        "square": (tf.math.square, 2.0),  # kept in float too
        "gelu": (lambda y: tf.nn.gelu(y, approximate=False), 3.0),  # GELU, which TVM refuses quantized
        "gelu_tanh": (lambda y: tf.nn.gelu(y, approximate=True), 3.0),  # GELU, approximate=True
        # a scalar constant operand: on the model input the converter folds these into the
        # input's quantization, so only the op after the conv remains
        "add_scalar": (lambda y: y + 0.75, 2.0),
        "sub_scalar": (lambda y: y - 0.6, 2.0),
        "mul_scalar": (lambda y: y * 0.37, 2.0),
        "sqrt": (lambda y: tf.math.sqrt(tf.abs(y)), 2.0),  # ABS -> SQRT: two LUTs
        # LOG needs positive inputs: ABS, then an ADD of a constant (on the CPU), then LOG
        "log": (lambda y: tf.math.log(tf.abs(y) + 0.05), 2.0),
        # CONCATENATION needs one scale: LOGISTIC's and TANH's fixed output scales are
        # requantized by int8 -> int8 QUANTIZE ops.
        "quantize": (lambda y: tf.concat([tf.nn.sigmoid(y), tf.nn.tanh(y)], axis=3), 4.0),
    }


def build_lut_op_model(op: str, out: Path):
    """One int8 elementwise op on the int8 input and on a quantized 1x1 CONV_2D's output; the
    reference inputs start with a sample holding each of the 256 int8 values once."""
    from ai_edge_litert.interpreter import Interpreter

    _set_seeds()
    body, span = _lut_op_models()[op]
    shape = (8, 8, 4)  # 256 elements
    f = _op_model(body, shape)
    calib = span * nhwc_batch(CALIB_SEEDS, *shape)

    path = out / f"op_{op}_int8.tflite"
    path.write_bytes(convert_int8(f, calib))
    scale, zp = Interpreter(model_path=str(path)).get_input_details()[0]["quantization"]
    levels = np.random.default_rng(SEED).permutation(np.arange(-128, 128))
    sweep = (scale * (levels - zp)).astype(np.float32).reshape(1, *shape)
    meta = {"model": f"single-op {op.upper()} on the input and after a quantized CONV_2D "
                     "(tools/make_models.py); sample 0 holds all 256 int8 input values",
            "input_shape": [1, *shape], **_common_meta(), "input_range": [-span, span]}
    tflite_references(path, np.concatenate([sweep, span * nhwc_batch(REF_SEEDS, *shape)]), meta)
    return path


def build_softmax_beta_model(out: Path):
    """SOFTMAX over the 16 channels of each pixel, on the int8 input and after a quantized 1x1
    CONV_2D, with beta 0.6 patched into the file (TensorFlow's converter always writes 1; TVM's
    own import drops beta)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from make_op_vectors import with_softmax_beta

    import tensorflow as tf

    _set_seeds()
    shape, span = (4, 4, 16), 6.0
    f = _op_model(lambda y: tf.nn.softmax(y, axis=-1), shape)
    path = out / "op_softmax_beta_int8.tflite"
    path.write_bytes(with_softmax_beta(convert_int8(f, span * nhwc_batch(CALIB_SEEDS, *shape)), 0.6))
    meta = {"model": "SOFTMAX (beta 0.6) on the input and after a quantized CONV_2D (tools/make_models.py)",
            "input_shape": [1, *shape], **_common_meta(), "input_range": [-span, span]}
    tflite_references(path, span * nhwc_batch(REF_SEEDS, *shape), meta)
    return path


LUT_OP_MODELS = tuple(f"op_{op}_int8" for op in (
    "logistic", "tanh", "hard_swish", "leaky_relu", "relu", "relu6", "relu_n1_to_1", "abs", "exp",
    "elu", "neg", "sin", "square", "sqrt", "log", "add_scalar", "sub_scalar", "mul_scalar", "quantize", "gelu",
    "gelu_tanh"))


def _tiny_cnn_uint8_graph(x, fq, fqw):
    """The body of tiny_cnn_uint8: conv (ReLU6), depthwise (ReLU), 1x1 conv, residual ADD,
    MAX_POOL, AVERAGE_POOL 3x3/1 VALID (9 elements a window), CONCATENATION (CPU), MEAN,
    LOGISTIC, FULLY_CONNECTED. ``fq(t, key)`` quantizes an activation, ``fqw(w)`` a weight."""
    import tensorflow as tf

    rng = np.random.default_rng(SEED)

    def weight(*shape):
        return fqw(tf.constant(rng.normal(0, 0.4, shape).astype(np.float32)))

    def bias(n):
        return tf.constant(rng.normal(0, 0.1, n).astype(np.float32))

    def conv(t, k, cin, cout):
        return tf.nn.bias_add(tf.nn.conv2d(t, weight(k, k, cin, cout), 1, "SAME"), bias(cout))

    a = fq(tf.nn.relu6(conv(x, 3, 3, 8)), "conv")
    dw = tf.nn.depthwise_conv2d(a, weight(3, 3, 8, 1), [1, 1, 1, 1], "SAME")
    b = fq(tf.nn.relu(tf.nn.bias_add(dw, bias(8))), "dw")
    c = fq(conv(b, 1, 8, 8), "pw")
    d = fq(a + c, "add")
    # pooling keeps its input's quantization (TFLite requires it)
    e = fq(tf.nn.max_pool2d(d, 2, 2, "VALID"), "add")  # 8x8
    f = fq(tf.nn.avg_pool2d(e, 3, 1, "VALID"), "add")  # 6x6, 9 elements a window
    g = fq(tf.concat([f, f], 3), "add")  # not an NPU op: a second partition, uint8 boundaries
    h = fq(tf.reduce_mean(g, [1, 2], keepdims=True), "mean")
    s = fq(tf.sigmoid(fq(conv(h, 1, 16, 8), "logit")), "sigmoid")
    flat = tf.reshape(s, [-1, 8])
    return fq(tf.matmul(flat, weight(8, 10)) + bias(10), "fc")


def build_tiny_cnn_uint8(out: Path):
    """A uint8 (TFLite 1.x style) CNN: fake-quant graph, the legacy converter with
    inference_type uint8. Weights are fake-quantized symmetrically (range [-a, a·127/128]:
    uint8 zero point 128), activations over their calibrated float range."""
    import tensorflow as tf
    import tensorflow.compat.v1 as v1

    _set_seeds()
    shape = (16, 16, 3)
    calib = nhwc_batch(CALIB_SEEDS, *shape)

    ranges: dict = {}
    g = v1.Graph()  # pass 1: the float graph, to calibrate the activation ranges
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, *shape], name="x")
        taps = {}

        def record(t, key):
            taps.setdefault(key, t)  # a pool reuses its input's key: keep the first
            return t

        with v1.Session(graph=g) as sess:
            _tiny_cnn_uint8_graph(x, record, lambda w: w)
            vals = sess.run(taps, {x: calib})
    for key, v in vals.items():
        lo, hi = min(float(v.min()), 0.0), max(float(v.max()), 0.0)
        ranges[key] = (0.0, 255 / 256) if key == "sigmoid" else (lo, hi)

    g = v1.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [1, *shape], name="x")
        y = tf.quantization.fake_quant_with_min_max_args(x, -1.0, 127 / 128)
        fq = lambda t, key: tf.quantization.fake_quant_with_min_max_args(t, *ranges[key])  # noqa: E731
        out_t = v1.identity(_tiny_cnn_uint8_graph(y, fq, _symmetric_fqw), name="logits")
        data = _convert_legacy_uint8(g, x, [out_t])
    path = out / "tiny_cnn_uint8.tflite"
    path.write_bytes(data)
    meta = {"model": "uint8 tiny CNN (tools/make_models.py, legacy converter)",
            "input_shape": [1, *shape], **_common_meta()}
    tflite_references(path, nhwc_batch(REF_SEEDS, *shape), meta)
    return path


def _symmetric_fqw(w):
    """A weight constant fake-quantized over [-a, a·127/128]: uint8 zero point 128."""
    import tensorflow as tf

    a = float(np.abs(tf.get_static_value(w)).max())
    return tf.quantization.fake_quant_with_min_max_args(w, -a, a * 127 / 128)
# --------------------------------------------------------------------------- numerics / batch
AE_DIMS = (128, 128, 128, 8, 128, 128, 128)  # MLPerf Tiny anomaly detection (ToyCar) FC stack


def ae_inputs(seeds):
    """Autoencoder inputs: 5 frames x 128 log-mel-like bins flattened to 640 (smooth fields)."""
    return np.stack([structured_input(s, 5, 128, 1).reshape(640) for s in seeds])


def make_autoencoder(batch_size):
    import keras
    from keras import layers as L

    x0 = keras.Input(shape=(640,), batch_size=batch_size, name="input")
    y = x0
    for k, units in enumerate(AE_DIMS):
        y = L.Dense(units, activation="relu", name=f"fc{k}")(y)
    return keras.Model(x0, L.Dense(640, name="fc_out")(y), name="autoencoder")


def build_autoencoder(out: Path):
    """The FC-only anomaly-detection autoencoder with per-channel int8 FULLY_CONNECTED weights
    (the converter's default is per-tensor for dense layers; the private flag turns it off)."""
    import keras

    _set_seeds()
    xs = ae_inputs(TRAIN_SEEDS)
    model = make_autoencoder(None)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
    hist = model.fit(xs, xs, batch_size=32, epochs=6, shuffle=False, verbose=0)
    loss = float(hist.history["loss"][-1])
    print(f"  trained 6 epochs: reconstruction mse {loss:.4f}")
    fixed = make_autoencoder(1)
    fixed.set_weights(model.get_weights())
    path = out / "autoencoder_int8.tflite"
    path.write_bytes(convert_int8(fixed, ae_inputs(CALIB_SEEDS), per_channel_dense=True))
    scales = fc_weight_scale_counts(path)
    print(f"  FULLY_CONNECTED weight scales per layer: {scales}")
    if not all(n > 1 for n in scales):
        raise SystemExit("autoencoder: the converter did not emit per-channel FC weights")
    meta = {"model": "FC autoencoder 640-128-128-128-8-128-128-128-640 (MLPerf Tiny AD), "
                     "per-channel FULLY_CONNECTED weights",
            "input_shape": [1, 640], "train_mse": round(loss, 5), "fc_weight_scales": scales,
            **_common_meta()}
    tflite_references(path, ae_inputs(REF_SEEDS), meta)
    return path


def fc_weight_scale_counts(path: Path) -> list:
    """Number of quantization scales of each FULLY_CONNECTED's weight tensor (flatbuffer)."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path))
    details = {d["index"]: d for d in it.get_tensor_details()}
    return [len(details[int(op["inputs"][1])]["quantization_parameters"]["scales"])
            for op in it._get_ops_details() if op["op_name"] == "FULLY_CONNECTED"]


def build_batch2_mean(out: Path):
    """A batch-2 model as TFLite-Micro's MEAN tests use ([2, H, W, C]): CONV_2D + RELU, then
    MEAN over H, W (keep dims) and a second CONV_2D on the mean."""
    import tensorflow as tf

    _set_seeds()
    rng = np.random.default_rng(11)
    shape = (6, 6, 4)
    w1 = tf.constant(rng.normal(size=(3, 3, 4, 8)).astype(np.float32) * 0.3)
    b1 = tf.constant(rng.normal(size=(8,)).astype(np.float32) * 0.1)
    w2 = tf.constant(rng.normal(size=(1, 1, 8, 6)).astype(np.float32) * 0.5)

    @tf.function(input_signature=[tf.TensorSpec([2, *shape], tf.float32)])
    def f(x):
        y = tf.nn.relu(tf.nn.conv2d(x, w1, 1, "SAME") + b1)
        m = tf.reduce_mean(y, axis=[1, 2], keepdims=True)
        return tf.nn.conv2d(m, w2, 1, "VALID")

    calib = nhwc_batch(CALIB_SEEDS, *shape).reshape(-1, 2, *shape)
    conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    path = out / "batch2_mean_int8.tflite"
    path.write_bytes(quantized_int8(conv, calib))
    meta = {"model": "batch-2 CONV_2D + MEAN(H, W) + CONV_2D (tools/make_models.py)",
            "input_shape": [2, *shape], **_common_meta()}
    seeds = REF_SEEDS + [s + 10 for s in REF_SEEDS]  # 3 samples of batch 2
    tflite_references(path, nhwc_batch(seeds, *shape).reshape(2, 3, *shape).transpose(1, 0, 2, 3, 4),
                      meta)
    return path


def build_mul_model(out: Path):
    """op_mul_int8: MUL of two activations and broadcast ADD after quantized 1x1 CONV_2Ds of
    40 channels (two 32-lane groups): swish y·sigmoid(y) (same shape), a RELU-fused product
    of two convs, the squeeze-excite gate y·s and s·y' with s = sigmoid(conv(mean(y)))
    [1, 1, 1, 40] in both operand orders, and y + s (broadcast ADD)."""
    import tensorflow as tf

    _set_seeds()
    rng = np.random.default_rng(SEED)
    shape, c = (8, 8, 4), 40

    def const(*dims, scale=0.6):
        return tf.constant(rng.normal(size=dims).astype(np.float32) * scale)

    w1, b1, w2, b2 = const(1, 1, 4, c), const(c, scale=0.1), const(1, 1, 4, c), const(c, scale=0.1)
    w3, b3 = const(1, 1, c, c, scale=0.3), const(c, scale=0.1)

    @tf.function(input_signature=[tf.TensorSpec([1, *shape], tf.float32)])
    def f(x):
        y = tf.nn.conv2d(x, w1, 1, "SAME") + b1
        y2 = tf.nn.conv2d(x, w2, 1, "SAME") + b2
        swish = y * tf.nn.sigmoid(y)
        product = tf.nn.relu(y * y2)
        s = tf.nn.sigmoid(tf.nn.conv2d(tf.reduce_mean(y, axis=[1, 2], keepdims=True), w3, 1, "VALID") + b3)
        return swish, product, y * s, s * y2, y + s

    path = out / "op_mul_int8.tflite"
    path.write_bytes(convert_int8(f, nhwc_batch(CALIB_SEEDS, *shape)))
    meta = {"model": "MUL (same shape, squeeze-excite broadcast, both orders) and broadcast ADD after "
                     "quantized CONV_2Ds (tools/make_models.py)",
            "input_shape": [1, *shape], **_common_meta()}
    tflite_references(path, nhwc_batch(REF_SEEDS, *shape), meta)
    return path


TFLITE_OP_MODELS = tuple(f"op_{op}_int8" for op in (
    "pad", "padv2", "strided_slice", "split", "split_v", "transpose", "squeeze",
    "resize_nearest_neighbor", "pack", "tile", "gather", "shape"))


# --------------------------------------------------------------------------- ONNX QDQ
def tiny_cnn_float_onnx(kmodel):
    """The Keras tiny CNN rewritten as a float NCHW onnx.ModelProto (opset 13), same weights
    (BN folded into the first conv). Keras 'same' padding becomes explicit ONNX pads."""
    from onnx import helper, numpy_helper

    nodes, inits = [], []
    W = {l.name: l.get_weights() for l in kmodel.layers}

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr, np.float32), name))
        return name

    def conv(name, x, w_oihw, b, stride=1, pads=(0, 0, 0, 0), group=1, dil=1):
        k = w_oihw.shape[2]
        nodes.append(helper.make_node(
            "Conv", [x, const(name + ".weight", w_oihw), const(name + ".bias", b)], [name],
            name=name, kernel_shape=[k, k], strides=[stride, stride], pads=list(pads),
            group=group, dilations=[dil, dil]))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    hwio = lambda w: w.transpose(3, 2, 0, 1)  # noqa: E731  Keras HWIO -> ONNX OIHW

    # conv_s2 + bn_s2 folded; TF 'same' with stride 2 on 32 pads (top/left 0, bottom/right 1)
    (k1,) = W["conv_s2"]
    gamma, beta, mean, var = W["bn_s2"]
    eps = kmodel.get_layer("bn_s2").epsilon
    sc = gamma / np.sqrt(var + eps)
    a = conv("conv_s2", "input", hwio(k1 * sc), beta - mean * sc, stride=2, pads=(0, 0, 1, 1))
    a = node("Clip", [a, const("relu6.min", np.float32(0)), const("relu6.max", np.float32(6))],
             "conv_s2_relu6")
    kd, bd = W["dw"]  # (3, 3, C, 1) -> (C, 1, 3, 3)
    b = node("Relu", [conv("dw", a, kd.transpose(2, 3, 0, 1), bd, pads=(1, 1, 1, 1),
                           group=kd.shape[2])], "dw_relu")
    c = conv("pw_linear", b, hwio(W["pw_linear"][0]), W["pw_linear"][1])
    d = node("Add", [a, c], "residual_add")
    e = node("MaxPool", [d], "maxpool", kernel_shape=[2, 2], strides=[2, 2])
    f = node("Relu", [conv("conv_valid", e, hwio(W["conv_valid"][0]), W["conv_valid"][1])],
             "conv_valid_relu")
    g = node("Relu", [conv("conv_dilated", f, hwio(W["conv_dilated"][0]), W["conv_dilated"][1],
                           pads=(2, 2, 2, 2), dil=2)], "conv_dilated_relu")
    h = node("Tanh", [conv("conv_tanh", f, hwio(W["conv_tanh"][0]), W["conv_tanh"][1])], "tanh")
    s = node("Sigmoid", [conv("conv_sigmoid", f, hwio(W["conv_sigmoid"][0]),
                              W["conv_sigmoid"][1])], "sigmoid")
    i = node("Concat", [g, h, s], "concat", axis=1)
    j = node("AveragePool", [i], "avgpool", kernel_shape=[2, 2], strides=[2, 2])
    k = node("GlobalAveragePool", [j], "gap")
    fl = node("Flatten", [k], "flatten", axis=1)
    kf, bf = W["fc"]
    lg = node("Gemm", [fl, const("fc.weight", kf.T), const("fc.bias", bf)], "fc", transB=1)
    nodes.append(helper.make_node("Softmax", [lg], ["output"], name="softmax", axis=-1))
    return _float_onnx_model("tiny_cnn", nodes, inits, [1, 3, 32, 32], [1, 10])


def _ort_quantize(fmodel, calib, quant_format: str, activation_type: str, path: Path, weight_type: str = "QInt8"):
    """onnxruntime's quantize_static of ``fmodel`` (per-channel ``weight_type`` weights,
    ``activation_type`` activations), calibrated on ``calib`` (the "input" batch, one sample at
    a time), saved to ``path``."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"input": calib[i:i + 1]} for i in range(len(calib))])

        def get_next(self):
            return next(self.it, None)

    with tempfile.TemporaryDirectory() as td:
        fpath = Path(td) / "float.onnx"
        onnx.save(fmodel, str(fpath))
        quantize_static(str(fpath), str(Path(td) / "q.onnx"), Reader(),
                        quant_format=QuantFormat[quant_format], per_channel=True,
                        activation_type=QuantType[activation_type], weight_type=QuantType[weight_type])
        qmodel = onnx.load(str(Path(td) / "q.onnx"))
    qmodel.producer_name = "npu_byoc tools/make_models.py (onnxruntime.quantization)"
    onnx.save(qmodel, str(path))
    return qmodel


def _float_onnx_model(name: str, nodes, inits, input_shape, output_shape, opset: int = 13):
    """A float ONNX model (opset 13 unless told) with one input "input" and one output "output",
    checked."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, input_shape)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, output_shape)],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="npu_byoc tools/make_models.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _ort_session(model_or_path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    src = model_or_path if isinstance(model_or_path, str) else model_or_path.SerializeToString()
    return ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])


def _with_all_outputs(model):
    """Copy of ``model`` whose graph outputs are every node output (for tensor dumps)."""
    import onnx

    m = onnx.shape_inference.infer_shapes(model)
    known = {vi.name: vi for vi in list(m.graph.value_info) + list(m.graph.output)}
    have = {o.name for o in m.graph.output}
    names = []
    for node in m.graph.node:
        for o in node.output:
            if not o:
                continue
            names.append(o)
            if o in have:
                continue
            if o not in known:
                raise RuntimeError(f"no type for {o}")
            m.graph.output.append(known[o])
            have.add(o)
    return m, names


def build_tiny_cnn_qdq(out: Path):
    return _build_tiny_cnn_onnx(out, "tiny_cnn_qdq", "QInt8")


def build_tiny_cnn_qdq_u8s8(out: Path):
    """onnxruntime's default U8S8: uint8 activations, int8 per-channel weights. The dilated
    conv gets dilation 1 (pads 1, same output shape) so that every MAC op is NPU-supported."""
    return _build_tiny_cnn_onnx(out, "tiny_cnn_qdq_u8s8", "QUInt8", undilate=True)


def _undilate(model):
    """conv_dilated with dilation 1 and pads 1: the same shapes, an NPU-supported conv."""
    from onnx import helper

    for n in model.graph.node:
        if n.name == "conv_dilated":
            keep = [a for a in n.attribute if a.name not in ("dilations", "pads")]
            del n.attribute[:]
            n.attribute.extend(keep + [helper.make_attribute("dilations", [1, 1]),
                                       helper.make_attribute("pads", [1, 1, 1, 1])])
    return model


def _build_tiny_cnn_onnx(out: Path, stem: str, activation_type: str, undilate: bool = False):
    import onnx
    import onnxruntime

    kmodel, acc = tiny_cnn_trained()
    fmodel = tiny_cnn_float_onnx(kmodel)
    calib = nhwc_batch(CALIB_SEEDS, 32, 32, 3).transpose(0, 3, 1, 2).copy()
    # the float ONNX graph must compute what the Keras model computes
    fsess = _ort_session(fmodel)
    kx = nhwc_batch(REF_SEEDS, 32, 32, 3)
    kref = kmodel.predict(kx, batch_size=1, verbose=0)
    fout = np.concatenate([fsess.run(None, {"input": kx[i:i + 1].transpose(0, 3, 1, 2)})[0]
                           for i in range(len(kx))])
    err = float(np.abs(fout - kref).max())
    assert err < 1e-4, f"float ONNX differs from Keras by {err}"
    if undilate:
        fmodel = _undilate(fmodel)

    path = out / f"{stem}.onnx"
    qmodel = _ort_quantize(fmodel, calib, "QDQ", activation_type, path)

    ref = f"onnxruntime {onnxruntime.__version__} ORT_DISABLE_ALL"
    x = nhwc_batch(REF_SEEDS, 32, 32, 3).transpose(0, 3, 1, 2).copy()
    sess = _ort_session(str(path))
    out_names = [o.name for o in sess.get_outputs()]
    outs = [np.concatenate(r) for r in
            zip(*[sess.run(out_names, {"input": x[i:i + 1]}) for i in range(len(x))])]
    full, names = _with_all_outputs(qmodel)
    sess_all = _ort_session(full)
    vals = sess_all.run(names, {"input": x[0:1]})
    tensors = {"input": x[0:1]}
    tensors.update({n: v for n, v in zip(names, vals)})
    tensors["__index__"] = np.array(json.dumps(["input", *names]))

    # output quantization (the DequantizeLinear producing each graph output)
    producer = {o: n for n in qmodel.graph.node for o in n.output}
    qinits = {t.name: onnx.numpy_helper.to_array(t) for t in qmodel.graph.initializer}
    out_q = []
    for name in out_names:
        n = producer[name]
        if n.op_type == "DequantizeLinear":
            out_q.append({"name": name, "scale": float(qinits[n.input[1]]),
                          "zero_point": int(qinits[n.input[2]])})
        else:
            out_q.append({"name": name})
    meta = {"model": f"tiny_cnn ONNX QDQ (tools/make_models.py){' conv_dilated: dilation 1' if undilate else ''}",
            "input_shape": [1, 3, 32, 32],
            "layout": "NCHW", "train_accuracy": round(acc, 4), **_common_meta(),
            "onnxruntime": onnxruntime.__version__,
            "quantize_static": {"quant_format": "QDQ", "per_channel": True,
                                "activation_type": activation_type, "weight_type": weight_type},
            "outputs": out_q, "reference": ref, "versions": _versions()}
    arrays = {"input_0": x}
    for k, o in enumerate(outs):
        arrays[f"output_{k}"] = o
    arrays["reference"] = np.array(ref)
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    save_npz(out / f"{stem}.npz", arrays)
    save_npz(out / f"{stem}.tensors.npz", tensors)
    print(f"  reference: {ref}; {len(names) + 1} tensors saved")
    for k, o in enumerate(outs):
        q = out_q[k]
        summarize(f"output_{k}", np.round(o / q["scale"]) + q["zero_point"] if "scale" in q else o)
    return path


# --------------------------------------------------------------------------- ONNX QOperator
def qop_cnn_float_onnx():
    """A small float NCHW CNN (input 1x3x16x16, seeded random weights) whose QOperator
    quantization holds every op npu_byoc/frontends/onnx_qop.py rewrites in a CNN: Conv (+Relu, depthwise),
    Add, Sigmoid, LeakyRelu, Concat, AveragePool, GlobalAveragePool, Gemm."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(SEED)
    nodes, inits = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr, np.float32), name))
        return name

    def conv(name, x, cin, cout, k=1, group=1, relu=False):
        w = rng.normal(0, np.sqrt(2.0 / (cin // group * k * k)), (cout, cin // group, k, k))
        b = rng.normal(0, 0.1, cout)
        nodes.append(helper.make_node(
            "Conv", [x, const(name + ".weight", w), const(name + ".bias", b)], [name], name=name,
            kernel_shape=[k, k], pads=[k // 2] * 4, group=group))
        return node("Relu", [name], name + "_relu") if relu else name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    a = conv("conv1", "input", 3, 8, k=3, relu=True)
    b = conv("dw", a, 8, 8, k=3, group=8, relu=True)
    c = conv("pw", b, 8, 8)
    d = node("Add", [a, c], "residual_add")
    e = node("Sigmoid", [conv("conv_sigmoid", d, 8, 8)], "sigmoid")
    f = node("LeakyRelu", [conv("conv_leaky", d, 8, 8)], "leaky_relu", alpha=0.1)
    g = node("Concat", [d, e, f], "concat", axis=1)
    h = node("AveragePool", [g], "avgpool", kernel_shape=[2, 2], strides=[2, 2])
    i = node("GlobalAveragePool", [conv("conv_head", h, 24, 16, relu=True)], "gap")
    fl = node("Flatten", [i], "flatten", axis=1)
    wf = rng.normal(0, np.sqrt(1.0 / 16), (10, 16))
    nodes.append(helper.make_node("Gemm", [fl, const("fc.weight", wf), const("fc.bias", rng.normal(0, 0.1, 10))],
                                  ["output"], name="fc", transB=1))
    return _float_onnx_model("qop_cnn", nodes, inits, [1, 3, 16, 16], [1, 10])


def se_float_onnx():
    """A float NCHW squeeze-excite block with swish (opset 13): x = Relu(Conv1x1(input)),
    s = Sigmoid(Conv1x1(GlobalAveragePool(x))) [1, 40, 1, 1], g = Mul(s, x) (the vector
    first), w = Mul(g, Sigmoid(g)) (swish, same shape), output = Add(w, s) (broadcast)."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(SEED)
    c = 40
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in (
        ("w1", rng.normal(0, 0.6, (c, 3, 1, 1))), ("b1", rng.normal(0, 0.1, c)),
        ("w2", rng.normal(0, 0.3, (c, c, 1, 1))), ("b2", rng.normal(0, 0.1, c)))]
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], name="conv1"),
        helper.make_node("Relu", ["c1"], ["x"], name="relu1"),
        helper.make_node("GlobalAveragePool", ["x"], ["m"], name="gap"),
        helper.make_node("Conv", ["m", "w2", "b2"], ["c2"], name="conv2"),
        helper.make_node("Sigmoid", ["c2"], ["s"], name="gate"),
        helper.make_node("Mul", ["s", "x"], ["g"], name="se_mul"),
        helper.make_node("Sigmoid", ["g"], ["sg"], name="swish_sigmoid"),
        helper.make_node("Mul", ["g", "sg"], ["w"], name="swish_mul"),
        helper.make_node("Add", ["w", "s"], ["output"], name="bcast_add"),
    ]
    return _float_onnx_model("se_block", nodes, inits, [1, 3, 8, 8], [1, c, 8, 8])


def build_se_qdq(out: Path):
    """se_qdq.onnx: the squeeze-excite block quantized by onnxruntime in QDQ format (int8
    activations, per-channel int8 weights); references from onnxruntime, graph optimizations
    disabled (float Mul / Add between DequantizeLinear and QuantizeLinear)."""
    return _int8_qdq_8x8(out, "se_qdq", se_float_onnx(), "squeeze-excite + swish")


def _int8_qdq_8x8(out: Path, stem: str, fmodel, what: str, activation_type: str = "QInt8",
                  weight_type: str = "QInt8") -> Path:
    """``fmodel`` (an 8x8x3 NCHW input) quantized by onnxruntime in QDQ format (int8 activations
    and weights unless told), saved as ``stem``.onnx with onnxruntime's references."""
    calib = nhwc_batch(CALIB_SEEDS, 8, 8, 3).transpose(0, 3, 1, 2).copy()
    path = out / f"{stem}.onnx"
    qmodel = _ort_quantize(fmodel, calib, "QDQ", activation_type, path, weight_type)
    _ort_references(path, qmodel, f"{stem} ONNX QDQ {what} (tools/make_models.py)", (8, 8, 3), "QDQ",
                    activation_type, weight_type)
    return path


def convt_float_onnx():
    """A float NCHW decoder (opset 13): Relu(Conv 3x3), then ConvTranspose kernel 3 stride 2
    with pads 1 and output_padding 1 (8 -> 16, as PyTorch writes a 2x upsampler), Relu, and
    ConvTranspose kernel 2 stride 2 (16 -> 32)."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(SEED)
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in (
        ("w1", rng.normal(0, 0.4, (8, 3, 3, 3))), ("b1", rng.normal(0, 0.1, 8)),
        ("w2", rng.normal(0, 0.3, (8, 6, 3, 3))), ("b2", rng.normal(0, 0.1, 6)),
        ("w3", rng.normal(0, 0.4, (6, 4, 2, 2))), ("b3", rng.normal(0, 0.1, 4)))]
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("ConvTranspose", ["r1", "w2", "b2"], ["u1"], name="up1", strides=[2, 2],
                         pads=[1, 1, 1, 1], output_padding=[1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["u1"], ["r2"], name="relu2"),
        helper.make_node("ConvTranspose", ["r2", "w3", "b3"], ["output"], name="up2", strides=[2, 2],
                         kernel_shape=[2, 2]),
    ]
    return _float_onnx_model("convt_decoder", nodes, inits, [1, 3, 8, 8], [1, 4, 32, 32])


def build_convt_qdq(out: Path):
    """convt_qdq.onnx: the ConvTranspose decoder quantized by onnxruntime in QDQ format (int8
    activations, per-channel int8 weights); references from onnxruntime, graph optimizations
    disabled (its ConvTranspose runs in float between DequantizeLinear and QuantizeLinear)."""
    return _int8_qdq_8x8(out, "convt_qdq", convt_float_onnx(), "ConvTranspose decoder")


def flatten_fc_float_onnx():
    """A float NCHW model (opset 13) that flattens feature maps into Gemm layers and a Gemm's
    features back into a map, as PyTorch exports ``x.flatten(1)`` / ``x.view(N, C, H, W)``:
    Relu(Conv 3x3) -> MaxPool 2 -> Flatten -> Relu(Gemm 128 -> 48) -> Reshape [1, 3, 4, 4]
    -> Relu(Conv 3x3) -> Flatten -> Gemm 64 -> 10."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(SEED)
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in (
        ("w1", rng.normal(0, 0.4, (8, 3, 3, 3))), ("b1", rng.normal(0, 0.1, 8)),
        ("g1", rng.normal(0, 0.15, (48, 128))), ("c1", rng.normal(0, 0.1, 48)),
        ("w2", rng.normal(0, 0.3, (4, 3, 3, 3))), ("b2", rng.normal(0, 0.1, 4)),
        ("g2", rng.normal(0, 0.2, (64, 10))), ("c2", rng.normal(0, 0.1, 10)))]
    inits.append(numpy_helper.from_array(np.array([1, 3, 4, 4], np.int64), "map_shape"))
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["x1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["x1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p1"], ["f1"], name="flatten1"),
        helper.make_node("Gemm", ["f1", "g1", "c1"], ["h1"], name="fc1", transB=1),
        helper.make_node("Relu", ["h1"], ["r2"], name="relu2"),
        helper.make_node("Reshape", ["r2", "map_shape"], ["m2"], name="unflatten"),
        helper.make_node("Conv", ["m2", "w2", "b2"], ["x2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["x2"], ["r3"], name="relu3"),
        helper.make_node("Flatten", ["r3"], ["f2"], name="flatten2"),
        helper.make_node("Gemm", ["f2", "g2", "c2"], ["output"], name="fc2"),
    ]
    return _float_onnx_model("flatten_fc", nodes, inits, [1, 3, 8, 8], [1, 10])


def build_flatten_fc_qdq(out: Path):
    """flatten_fc_qdq.onnx: the flatten/unflatten model quantized by onnxruntime in QDQ format
    (int8 activations, per-channel int8 weights); references from onnxruntime, graph
    optimizations disabled."""
    return _int8_qdq_8x8(out, "flatten_fc_qdq", flatten_fc_float_onnx(), "Flatten/Gemm/Reshape")


def onnx_glue_float_onnx():
    """A float NCHW model (opset 13) with the ONNX operators TVM's importer writes as TIR
    kernels: Relu(Conv 3x3) -> Conv 1x1 -> Add (residual) -> Clip(0, 6) -> Pad bottom/right
    (tf2onnx's SAME for stride 2) -> depthwise Conv 3x3 stride 2 -> x · HardSigmoid(x)."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(SEED)
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in (
        ("w1", rng.normal(0, 0.4, (8, 3, 3, 3))), ("b1", rng.normal(0, 0.1, 8)),
        ("w2", rng.normal(0, 0.3, (8, 8, 1, 1))), ("b2", rng.normal(0, 0.1, 8)),
        ("w3", rng.normal(0, 0.4, (8, 1, 3, 3))), ("b3", rng.normal(0, 0.1, 8)))]
    inits += [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("lo", 0.0), ("hi", 6.0))]
    inits.append(numpy_helper.from_array(np.array([0, 0, 0, 0, 0, 0, 1, 1], np.int64), "pads"))
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["x1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["x1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["x2"], name="conv2"),
        helper.make_node("Add", ["x2", "r1"], ["a2"], name="add"),
        helper.make_node("Clip", ["a2", "lo", "hi"], ["c2"], name="relu6"),
        helper.make_node("Pad", ["c2", "pads"], ["p2"], name="pad", mode="constant"),
        helper.make_node("Conv", ["p2", "w3", "b3"], ["x3"], name="dwconv", group=8, strides=[2, 2]),
        helper.make_node("HardSigmoid", ["x3"], ["g3"], name="hardsigmoid", alpha=0.2, beta=0.5),
        helper.make_node("Mul", ["x3", "g3"], ["output"], name="gate"),
    ]
    return _float_onnx_model("onnx_glue", nodes, inits, [1, 3, 8, 8], [1, 8, 4, 4])


def build_onnx_glue_qdq(out: Path):
    """onnx_glue_qdq.onnx: onnxruntime's QDQ quantization of the Pad / Clip / HardSigmoid
    model (int8 activations, per-channel int8 weights)."""
    return _int8_qdq_8x8(out, "onnx_glue_qdq", onnx_glue_float_onnx(), "Pad / Clip / HardSigmoid")


def onnx_ops_float_onnx():
    """A float NCHW model (opset 18) with the operators of PyTorch / tf2onnx exports of mobile
    CNNs: Conv, HardSwish, Pad, depthwise Conv, Clip, squeeze-excite (GlobalAveragePool, Conv,
    Relu, Conv, HardSigmoid, Mul), Split along channels, Tanh and LeakyRelu, Concat, Resize
    nearest 2x, Slice, AveragePool, Add of a constant, ReduceMean and Gemm."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(SEED)
    inits, nodes = [], []

    def weight(name, shape, std):
        inits.append(numpy_helper.from_array(rng.normal(0, std, shape).astype(np.float32), name))
        return name

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))

    node("Conv", ["input", weight("w1", (16, 3, 3, 3), 0.3), weight("b1", (16,), 0.1)], "c1", pads=[1, 1, 1, 1])
    node("HardSwish", ["c1"], "h1")
    node("Pad", ["h1", const("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))], "p1", mode="constant")
    node("Conv", ["p1", weight("w2", (16, 1, 3, 3), 0.3), weight("b2", (16,), 0.1)], "c2", group=16, strides=[2, 2])
    node("Clip", ["c2", const("lo", np.array(0, np.float32)), const("hi", np.array(6, np.float32))], "r2")
    node("GlobalAveragePool", ["r2"], "g")
    node("Conv", ["g", weight("w3", (4, 16, 1, 1), 0.3), weight("b3", (4,), 0.1)], "se1")
    node("Relu", ["se1"], "se2")
    node("Conv", ["se2", weight("w4", (16, 4, 1, 1), 0.3), weight("b4", (16,), 0.1)], "se3")
    node("HardSigmoid", ["se3"], "se4", alpha=1 / 6, beta=0.5)
    node("Mul", ["r2", "se4"], "m")
    nodes.append(helper.make_node("Split", ["m", const("split", np.array([8, 8], np.int64))], ["s1", "s2"],
                                  name="split", axis=1))
    node("Tanh", ["s1"], "t1")
    node("LeakyRelu", ["s2"], "t2", alpha=0.1)
    node("Concat", ["t1", "t2"], "cat", axis=1)
    node("Resize", ["cat", "", const("scales", np.array([1, 1, 2, 2], np.float32))], "up", mode="nearest")
    node("Slice", ["up", const("starts", np.array([1, 1], np.int64)), const("ends", np.array([7, 7], np.int64)),
                   const("axes", np.array([2, 3], np.int64))], "sl")
    node("AveragePool", ["sl"], "ap", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0)
    node("Add", ["ap", const("bias", rng.normal(0, 0.1, (1, 16, 1, 1)).astype(np.float32))], "ad")
    node("ReduceMean", ["ad", const("mean_axes", np.array([2, 3], np.int64))], "rm", keepdims=0)
    node("Gemm", ["rm", weight("g1", (10, 16), 0.3)], "output", transB=1)
    return _float_onnx_model("onnx_ops", nodes, inits, [1, 3, 8, 8], [1, 10], opset=18)


def build_onnx_ops_qdq(out: Path):
    """onnx_ops_qdq.onnx: onnxruntime's QDQ quantization of the mobile-CNN operator model (int8
    activations, per-channel int8 weights)."""
    return _int8_qdq_8x8(out, "onnx_ops_qdq", onnx_ops_float_onnx(), "mobile-CNN operators")


def build_int4_weights_qdq(out: Path):
    """int4_weights_qdq.onnx: the flatten/Gemm model with onnxruntime's 4-bit weights (QInt4,
    per-channel; int8 activations); its DequantizeLinear ops are com.microsoft's (opset 13)."""
    return _int8_qdq_8x8(out, "int4_weights_qdq", flatten_fc_float_onnx(), "QInt4 weights", "QInt8", "QInt4")


def build_uint4_weights_qdq(out: Path):
    """uint4_weights_qdq.onnx: the same with QUInt4 weights (zero point 8) and uint8 activations."""
    return _int8_qdq_8x8(out, "uint4_weights_qdq", flatten_fc_float_onnx(), "QUInt4 weights", "QUInt8", "QUInt4")


def build_dynamic_quant(out: Path):
    """dynamic_quant.onnx: the flatten/Gemm model through onnxruntime's quantize_dynamic
    (DynamicQuantizeLinear -> ConvInteger / MatMulInteger, per-channel int8 weights): scales
    computed at run time, so nothing for the NPU. References from onnxruntime (optimizations
    disabled), float outputs."""
    import onnx
    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic

    path = out / "dynamic_quant.onnx"
    with tempfile.TemporaryDirectory() as td:
        fpath = Path(td) / "float.onnx"
        onnx.save(flatten_fc_float_onnx(), str(fpath))
        quantize_dynamic(str(fpath), str(Path(td) / "q.onnx"), per_channel=True, weight_type=QuantType.QInt8)
        qmodel = onnx.load(str(Path(td) / "q.onnx"))
    qmodel.producer_name = "npu_byoc tools/make_models.py (onnxruntime.quantization)"
    onnx.save(qmodel, str(path))
    ref = f"onnxruntime {onnxruntime.__version__} ORT_DISABLE_ALL"
    x = nhwc_batch(REF_SEEDS, 8, 8, 3).transpose(0, 3, 1, 2).copy()
    sess = _ort_session(str(path))
    outs = np.concatenate([sess.run(["output"], {"input": x[i:i + 1]})[0] for i in range(len(x))])
    meta = {"model": "dynamic_quant ONNX quantize_dynamic (tools/make_models.py)", "input_shape": [1, 3, 8, 8],
            "layout": "NCHW", "weights_seed": SEED, "ref_seeds": REF_SEEDS, "input_range": [-1.0, 1.0],
            "onnxruntime": onnxruntime.__version__,
            "quantize_dynamic": {"per_channel": True, "weight_type": "QInt8"}, "reference": ref, "versions": _versions()}
    save_npz(path.with_suffix(".npz"), {"input_0": x, "output_0": outs, "reference": np.array(ref),
                                        "meta": np.array(json.dumps(meta, sort_keys=True))})
    return path


def _ort_references(path: Path, qmodel, description: str, hwc, quant_format: str, activation_type: str,
                    weight_type: str = "QInt8"):
    """onnxruntime's outputs (graph optimizations disabled) on the REF_SEEDS inputs (NCHW) and
    the output's quantization, written to ``path``.npz with the model's meta."""
    import onnx
    import onnxruntime

    ref = f"onnxruntime {onnxruntime.__version__} ORT_DISABLE_ALL"
    x = nhwc_batch(REF_SEEDS, *hwc).transpose(0, 3, 1, 2).copy()
    sess = _ort_session(str(path))
    outs = np.concatenate([sess.run(["output"], {"input": x[i:i + 1]})[0] for i in range(len(x))])
    producer = {o: n for n in qmodel.graph.node for o in n.output}
    qinits = {t.name: onnx.numpy_helper.to_array(t) for t in qmodel.graph.initializer}
    deq = producer["output"]
    assert deq.op_type == "DequantizeLinear", deq.op_type
    out_q = {"name": "output", "scale": float(qinits[deq.input[1]]), "zero_point": int(qinits[deq.input[2]])}
    meta = {"model": description, "input_shape": [1, hwc[2], hwc[0], hwc[1]],
            "layout": "NCHW", "weights_seed": SEED, "calib_seeds": CALIB_SEEDS, "ref_seeds": REF_SEEDS,
            "input_range": [-1.0, 1.0], "onnxruntime": onnxruntime.__version__,
            "quantize_static": {"quant_format": quant_format, "per_channel": True,
                                "activation_type": activation_type, "weight_type": weight_type},
            "outputs": [out_q], "reference": ref, "versions": _versions()}
    save_npz(path.with_suffix(".npz"), {"input_0": x, "output_0": outs, "reference": np.array(ref),
                                        "meta": np.array(json.dumps(meta, sort_keys=True))})
    print(f"  reference: {ref}")
    summarize("output_0", np.round(outs / out_q["scale"]) + out_q["zero_point"])


def build_qop_cnn(out: Path, stem: str, activation_type: str):
    """The small CNN quantized by onnxruntime in QOperator format (QLinearConv, QLinearAdd,
    QLinearSigmoid, QLinearLeakyRelu, QLinearConcat, QLinearAveragePool,
    QLinearGlobalAveragePool, QGemm), per-channel int8 weights, ``activation_type``
    activations; references from onnxruntime with graph optimizations disabled."""
    fmodel = qop_cnn_float_onnx()
    calib = nhwc_batch(CALIB_SEEDS, 16, 16, 3).transpose(0, 3, 1, 2).copy()

    path = out / f"{stem}.onnx"
    qmodel = _ort_quantize(fmodel, calib, "QOperator", activation_type, path)
    _ort_references(path, qmodel, f"{stem} ONNX QOperator (tools/make_models.py)", (16, 16, 3), "QOperator",
                    activation_type)
    return path


def qop_ops_model():
    """One ONNX model, one branch per QOperator / integer op variant npu_byoc/frontends/onnx_qop.py
    rewrites (int8 and uint8, per-channel weights, bias, padding, channels_last ...), each
    reading the integer graph inputs directly; an output per branch, named after it."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(SEED + 8)
    inits, nodes, outputs = [], [], []
    ins = {"x_i8": (TensorProto.INT8, [1, 4, 6, 6]), "y_i8": (TensorProto.INT8, [1, 4, 6, 6]),
           "x_u8": (TensorProto.UINT8, [1, 4, 6, 6]), "y_u8": (TensorProto.UINT8, [1, 4, 6, 6]),
           "m_i8": (TensorProto.INT8, [2, 5, 8]), "m_u8": (TensorProto.UINT8, [4, 8]),
           "cond": (TensorProto.BOOL, [1, 4, 6, 6])}

    def c(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def f32(name, v):
        return c(name, np.asarray(v, np.float32))

    def ints(name, dtype, shape, lo=None, hi=None):
        info = np.iinfo(dtype)
        return c(name, rng.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1, shape).astype(dtype))

    def branch(name, op, inputs, elem, domain="", **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, domain=domain, **attrs))
        outputs.append(helper.make_tensor_value_info(name, elem, None))

    i8, u8, I32, F = TensorProto.INT8, TensorProto.UINT8, TensorProto.INT32, TensorProto.FLOAT
    ms = "com.microsoft"
    qx_i8 = ["x_i8", f32("sx_i8", 0.05), c("zx_i8", np.int8(-3))]
    qy_i8 = ["y_i8", f32("sy_i8", 0.07), c("zy_i8", np.int8(5))]
    qx_u8 = ["x_u8", f32("sx_u8", 0.04), c("zx_u8", np.uint8(131))]
    qy_u8 = ["y_u8", f32("sy_u8", 0.03), c("zy_u8", np.uint8(120))]
    out_i8 = lambda k, s: [f32(f"so_{k}", s), c(f"zo_{k}", np.int8(rng.integers(-20, 20)))]  # noqa: E731
    out_u8 = lambda k, s: [f32(f"so_{k}", s), c(f"zo_{k}", np.uint8(rng.integers(110, 150)))]  # noqa: E731

    # QLinearConv: int8, per-channel weights, bias, stride 2, pads 1
    branch("qlinearconv_i8", "QLinearConv",
           qx_i8 + [ints("w1", np.int8, (6, 4, 3, 3)), f32("sw1", rng.uniform(0.002, 0.01, 6)), c("zw1", np.zeros(6, np.int8))]
           + out_i8(1, 0.2) + [ints("b1", np.int32, 6, -2000, 2000)], i8, strides=[2, 2], pads=[1, 1, 1, 1])
    # QLinearConv: uint8, uint8 weights with zero point, groups 2, dilation 2, no bias
    branch("qlinearconv_u8_group", "QLinearConv",
           qx_u8 + [ints("w2", np.uint8, (4, 2, 3, 3)), f32("sw2", 0.004), c("zw2", np.uint8(128))] + out_u8(2, 0.1),
           u8, group=2, dilations=[2, 2], pads=[2, 2, 2, 2])
    # QLinearConv: int8 depthwise, per-tensor weight scale, auto_pad SAME_UPPER
    branch("qlinearconv_i8_depthwise", "QLinearConv",
           qx_i8 + [ints("w3", np.int8, (4, 1, 3, 3)), f32("sw3", 0.006), c("zw3", np.int8(0))] + out_i8(3, 0.1)
           + [ints("b3", np.int32, 4, -500, 500)], i8, group=4, auto_pad="SAME_UPPER", kernel_shape=[3, 3])
    # QLinearMatMul: int8, 3-D a, per-column b scales
    branch("qlinearmatmul_i8", "QLinearMatMul",
           ["m_i8", f32("sm", 0.02), c("zm", np.int8(2)), ints("wm", np.int8, (8, 3)),
            f32("swm", rng.uniform(0.005, 0.02, 3)), c("zwm", np.zeros(3, np.int8))] + out_i8(4, 0.05), i8)
    # QGemm: int8, transB, per-channel, bias, alpha 0.5
    nodes.append(helper.make_node("Reshape", ["m_i8", c("m_shape", np.array([10, 8], np.int64))], ["m_i8_2d"], name="m_i8_2d"))
    branch("qgemm_i8", "QGemm",
           ["m_i8_2d", f32("sg", 0.02), c("zg", np.int8(-1)), ints("wg", np.int8, (3, 8)),
            f32("swg", rng.uniform(0.005, 0.02, 3)), c("zwg", np.zeros(3, np.int8)), ints("bg", np.int32, 3, -3000, 3000)]
           + out_i8(5, 0.04), i8, domain=ms, transB=1, alpha=0.5)
    # QGemm: uint8 activations, no bias, float output (no y_scale). Weights in [-64, 63]:
    # onnxruntime's u8 x s8 kernels on CPUs without VNNI saturate pairs of products at int16
    # (what the quantizer's reduce_range avoids), which would make the reference wrong.
    branch("qgemm_u8_float", "QGemm",
           ["m_u8", f32("sgu", 0.03), c("zgu", np.uint8(128)), ints("wgu", np.int8, (8, 3), -64, 63), f32("swgu", 0.01),
            c("zwgu", np.int8(0))], F, domain=ms)
    branch("qlinearadd_i8", "QLinearAdd", qx_i8 + qy_i8 + out_i8(6, 0.09), i8, domain=ms)
    branch("qlinearmul_u8", "QLinearMul", qx_u8 + qy_u8 + out_u8(7, 0.05), u8, domain=ms)
    branch("qlinearsigmoid_i8", "QLinearSigmoid", qx_i8 + [f32("so_8", 1 / 256), c("zo_8", np.int8(-128))], i8, domain=ms)
    branch("qlinearleakyrelu_u8", "QLinearLeakyRelu", qx_u8 + out_u8(9, 0.03), u8, domain=ms, alpha=0.2)
    branch("qlinearaveragepool_i8", "QLinearAveragePool", qx_i8 + out_i8(10, 0.04), i8, domain=ms,
           kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0)
    branch("qlinearaveragepool_u8_nhwc", "QLinearAveragePool", qx_u8 + out_u8(11, 0.035), u8, domain=ms,
           kernel_shape=[2, 2], strides=[1, 1], pads=[1, 1, 0, 0], count_include_pad=1, channels_last=1)
    branch("qlinearglobalaveragepool_i8", "QLinearGlobalAveragePool", qx_i8 + out_i8(12, 0.02), i8, domain=ms)
    branch("qlinearglobalaveragepool_u8_nhwc", "QLinearGlobalAveragePool", qx_u8 + out_u8(13, 0.02), u8,
           domain=ms, channels_last=1)
    branch("qlinearconcat_i8", "QLinearConcat", out_i8(14, 0.06) + qx_i8 + qy_i8, i8, domain=ms, axis=1)
    branch("qlinearconcat_u8", "QLinearConcat", out_u8(15, 0.04) + qx_u8 + qy_u8, u8, domain=ms, axis=-1)
    branch("qlinearsoftmax_i8", "QLinearSoftmax", qx_i8 + [f32("so_16", 1 / 256), c("zo_16", np.int8(-128))], i8,
           domain=ms, axis=-1, opset=13)
    branch("qlinearsoftmax_u8_opset11", "QLinearSoftmax", qx_u8 + [f32("so_17", 1 / 256), c("zo_17", np.uint8(0))], u8,
           domain=ms, axis=3, opset=11)
    branch("qlinearwhere_i8", "QLinearWhere", ["cond"] + qx_i8 + qy_i8 + out_i8(18, 0.06), i8, domain=ms)
    # ConvInteger: uint8, pads 1 (onnxruntime has no per-channel weight zero points here; ONNX's
    # node test test_convinteger_with_padding has them)
    branch("convinteger_u8", "ConvInteger",
           ["x_u8", ints("wc", np.uint8, (5, 4, 3, 3)), c("zxc", np.uint8(131)), c("zwc", np.uint8(119))],
           I32, pads=[1, 1, 1, 1])
    # MatMulInteger: left to TVM's own importer
    branch("matmulinteger_u8", "MatMulInteger",
           ["m_u8", ints("wmi", np.uint8, (8, 3)), c("zmi", np.uint8(128)), ints("zwmi", np.uint8, 3, 120, 136)], I32)
    graph = helper.make_graph(
        nodes, "qop_ops", [helper.make_tensor_value_info(k, t, s) for k, (t, s) in ins.items()], outputs,
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(ms, 1)],
                              producer_name="npu_byoc tools/make_models.py")
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model), ins


def build_qop_ops(out: Path):
    """qop_ops.onnx and its onnxruntime references (graph optimizations disabled) on random
    full-range integer inputs: ``in:<input>`` (N=3 samples), ``out:<output>``."""
    import onnx
    import onnxruntime

    model, ins = qop_ops_model()
    path = out / "qop_ops.onnx"
    onnx.save(model, str(path))
    rng = np.random.default_rng(SEED + 9)
    np_types = {onnx.TensorProto.INT8: np.int8, onnx.TensorProto.UINT8: np.uint8, onnx.TensorProto.BOOL: np.bool_}
    bounds = {np.int8: (-128, 128), np.uint8: (0, 256), np.bool_: (0, 2)}
    feeds = []
    for _ in REF_SEEDS:
        feeds.append({k: rng.integers(*bounds[np_types[t]], s).astype(np_types[t]) for k, (t, s) in ins.items()})
    sess = _ort_session(str(path))
    names = [o.name for o in sess.get_outputs()]
    results = [sess.run(names, f) for f in feeds]
    # contrib ops have no shape inference in onnx: declare the output shapes onnxruntime gave
    for o, r in zip(model.graph.output, results[0]):
        del o.type.tensor_type.shape.dim[:]
        for d in r.shape:
            o.type.tensor_type.shape.dim.add().dim_value = d
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    ref = f"onnxruntime {onnxruntime.__version__} ORT_DISABLE_ALL"
    arrays = {f"in:{k}": np.stack([f[k] for f in feeds]) for k in ins}
    for k, name in enumerate(names):
        arrays[f"out:{name}"] = np.stack([r[k] for r in results])
        summarize(name, arrays[f"out:{name}"])
    arrays["reference"] = np.array(ref)
    arrays["meta"] = np.array(json.dumps({"model": "qop_ops (tools/make_models.py)", "seed": SEED + 9,
                                          "reference": ref, "versions": _versions()}, sort_keys=True))
    save_npz(out / "qop_ops.npz", arrays)
    print(f"  reference: {ref}")

# Hand-written QDQ branches of lut_ops_qdq.onnx: (ONNX op, attributes, output scale, zero point).
LUT_QDQ_INPUT = (0.05, -3)  # x in [-6.25, 6.5]
LUT_QDQ_BRANCHES = (
    ("Sigmoid", {}, 1.0 / 256, -128),
    ("Tanh", {}, 1.0 / 128, 0),
    ("HardSwish", {}, 0.03, -100),
    ("LeakyRelu", {"alpha": 0.1}, 0.04, -30),
    ("Abs", {}, 0.03, -128),
    ("Exp", {}, 3.0, -128),
    ("Relu", {}, 0.03, -128),
    ("Clip", {"min": 0.0, "max": 6.0}, 6.0 / 255, -128),
    ("Elu", {"alpha": 1.0}, 0.03, -90),
    ("Identity", {}, 0.08, 10),  # DequantizeLinear -> QuantizeLinear: a requantize
    ("HardSigmoid", {"alpha": 1.0 / 6, "beta": 0.5}, 1.0 / 255, -128),  # PyTorch's hardsigmoid
)


def build_lut_ops_qdq(out: Path):
    """Every int8 -> int8 unary function in ONNX QDQ form, written by hand (chosen scales, no
    quantizer): x -> QuantizeLinear -> DequantizeLinear -> op -> QuantizeLinear ->
    DequantizeLinear, one branch per op. Sample 0 holds each of the 256 int8 inputs once.
    References: onnxruntime (graph optimizations disabled)."""
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper

    s_in, zp_in = LUT_QDQ_INPUT
    inits = [helper.make_tensor("s_in", TensorProto.FLOAT, [], [s_in]),
             helper.make_tensor("zp_in", TensorProto.INT8, [], [zp_in])]
    nodes = [helper.make_node("QuantizeLinear", ["input", "s_in", "zp_in"], ["x_q"]),
             helper.make_node("DequantizeLinear", ["x_q", "s_in", "zp_in"], ["x"])]
    outputs = []
    for k, (op, attrs, s_out, zp_out) in enumerate(LUT_QDQ_BRANCHES):
        inits += [helper.make_tensor(f"s_{k}", TensorProto.FLOAT, [], [s_out]),
                  helper.make_tensor(f"zp_{k}", TensorProto.INT8, [], [zp_out])]
        if op == "Identity":
            y = "x"
        elif op == "Clip":
            inits += [helper.make_tensor(f"lo_{k}", TensorProto.FLOAT, [], [attrs["min"]]),
                      helper.make_tensor(f"hi_{k}", TensorProto.FLOAT, [], [attrs["max"]])]
            y = f"y_{k}"
            nodes.append(helper.make_node("Clip", ["x", f"lo_{k}", f"hi_{k}"], [y]))
        else:
            y = f"y_{k}"
            nodes.append(helper.make_node(op, ["x"], [y], **attrs))
        nodes += [helper.make_node("QuantizeLinear", [y, f"s_{k}", f"zp_{k}"], [f"q_{k}"]),
                  helper.make_node("DequantizeLinear", [f"q_{k}", f"s_{k}", f"zp_{k}"], [f"output_{k}"])]
        outputs.append(helper.make_tensor_value_info(f"output_{k}", TensorProto.FLOAT, [1, 256]))
    graph = helper.make_graph(nodes, "lut_ops_qdq",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 256])],
                              outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = out / "lut_ops_qdq.onnx"
    path.write_bytes(model.SerializeToString())

    levels = np.random.default_rng(SEED).permutation(np.arange(-128, 128))
    sweep = (np.float32(s_in) * (levels - zp_in).astype(np.float32)).reshape(1, 256)
    rng = np.random.default_rng(SEED + 1)
    x = np.concatenate([sweep, rng.uniform(-7, 7, (2, 256)).astype(np.float32)])
    sess = _ort_session(str(path))
    outs = [np.concatenate(r) for r in zip(*(sess.run(None, {"input": x[i:i + 1]}) for i in range(len(x))))]
    ref = f"onnxruntime {onnxruntime.__version__} CPU (graph optimizations disabled)"
    meta = {"model": "hand-written ONNX QDQ unary ops (tools/make_models.py); sample 0 holds all "
                     "256 int8 input values", "input": {"scale": s_in, "zero_point": zp_in},
            "outputs": [{"name": f"output_{k}", "op": op, "attrs": attrs, "scale": so, "zero_point": zo}
                        for k, (op, attrs, so, zo) in enumerate(LUT_QDQ_BRANCHES)],
            "reference": ref, "versions": _versions()}
    arrays = {"input_0": x, **{f"output_{k}": o for k, o in enumerate(outs)}}
    arrays["reference"] = np.array(ref)
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    save_npz(out / "lut_ops_qdq.npz", arrays)
    print(f"  reference: {ref}")
    for k, o in enumerate(outs):
        _, _, so, zo = LUT_QDQ_BRANCHES[k]
        summarize(f"output_{k} {LUT_QDQ_BRANCHES[k][0]}", np.round(o / so) + zo)
    return path


def onnx_op_counts(path: Path) -> dict:
    import onnx

    counts: dict = {}
    for n in onnx.load(str(path)).graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return dict(sorted(counts.items()))


BUILDERS = {
    "mobilenet_v2_int8": build_mobilenet_v2,
    "tiny_cnn_int8": build_tiny_cnn_int8,
    "tiny_cnn_qdq": build_tiny_cnn_qdq,
    "tiny_cnn_qdq_u8s8": build_tiny_cnn_qdq_u8s8,
    "resnet_small_int8": build_resnet_small,
    "densenet_small_int8": build_densenet_small,
    "mobilenet_v1_batch_none_int8": build_mobilenet_v1_batch_none,
    "ds_cnn_int8": build_ds_cnn,
    "glue_cnn_int8": build_glue_cnn,
    "bn_concat_int8": build_bn_concat,
    "concat_cnn_int8": build_concat_cnn,
    "transpose_conv_int8": build_transpose_conv,
    "upsample_cnn_int8": build_upsample_cnn,
    "resize_bilinear_int8": build_resize_bilinear,
    "unet_int8": build_unet,
    **{name: (lambda out, op=name[3:-5]: build_op_model(op, out)) for name in TFLITE_OP_MODELS},
    **{name: (lambda out, op=name[3:-5]: build_lut_op_model(op, out)) for name in LUT_OP_MODELS},
    "lut_ops_qdq": build_lut_ops_qdq,
    "mobilenet_v3_small_int8": build_mobilenet_v3_small,
    "ops_uint8": build_ops_uint8,
    "tiny_cnn_uint8": build_tiny_cnn_uint8,
    "qop_cnn_s8s8": lambda out: build_qop_cnn(out, "qop_cnn_s8s8", "QInt8"),
    "qop_cnn_u8s8": lambda out: build_qop_cnn(out, "qop_cnn_u8s8", "QUInt8"),
    "qop_ops": build_qop_ops,
    "autoencoder_int8": build_autoencoder,
    "batch2_mean_int8": build_batch2_mean,
    "op_mul_int8": build_mul_model,
    "op_softmax_beta_int8": build_softmax_beta_model,
    "se_qdq": build_se_qdq,
    "convt_qdq": build_convt_qdq,
    "flatten_fc_qdq": build_flatten_fc_qdq,
    "int4_weights_qdq": build_int4_weights_qdq,
    "uint4_weights_qdq": build_uint4_weights_qdq,
    "dynamic_quant": build_dynamic_quant,
    "onnx_glue_qdq": build_onnx_glue_qdq,
    "onnx_ops_qdq": build_onnx_ops_qdq,
    "conv1d_cnn_int8": build_conv1d_cnn,
    "upsample_keras3_int8": build_upsample_keras3,
    "dense_seq_int8": build_dense_seq,
}
MODELS = tuple(BUILDERS)


# --------------------------------------------------------------------------- TVM check
def verify_tvm(out: Path, names):
    """Import each model with TVM's Relax frontends, compile for llvm, compare outputs."""
    import tvm
    from tvm import relax

    results = {}
    for name in names:
        ext = ".onnx" if "_qdq" in name else ".tflite"
        path = out / (name + ext)
        if not path.exists():
            continue
        if ext == ".tflite":
            import tflite
            from tvm.relax.frontend.tflite import from_tflite

            mod = from_tflite(tflite.Model.GetRootAsModel(path.read_bytes(), 0))
        else:
            import onnx
            from tvm.relax.frontend.onnx import from_onnx

            mod = from_onnx(onnx.load(str(path)))
        Path(f"/tmp/relax_{name}.txt").write_text(mod.script())
        ref = np.load(out / (name + ".npz"))
        meta = json.loads(str(ref["meta"]))
        ex = tvm.compile(mod, target="llvm")
        vm = relax.VirtualMachine(ex, tvm.cpu())
        x = ref["input_0"]
        got = []
        for i in range(len(x)):
            r = vm["main"](tvm.runtime.tensor(x[i:i + 1]))
            if not hasattr(r, "numpy"):  # a tuple of outputs
                r = r[0]
            got.append(r.numpy()[0])
        got = np.stack(got)
        want = ref["output_0"]
        if ext == ".tflite":
            diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
        else:
            scale = meta["outputs"][0]["scale"]
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64)) / scale
        results[name] = (float(diff.max()), float(diff.mean()), int((diff > 0.5).sum()), diff.size)
        print(f"  TVM llvm vs reference {name}: max {diff.max():.3g} LSB, mean {diff.mean():.3g}, "
              f"{(diff > 0.5).sum()}/{diff.size} elements differ; relax -> /tmp/relax_{name}.txt")
    return results


# --------------------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--only", action="append", choices=MODELS)
    ap.add_argument("--no-data-copy", action="store_true")
    ap.add_argument("--verify-tvm", action="store_true")
    ap.add_argument("--skip-build", action="store_true", help="only --verify-tvm existing files")
    args = ap.parse_args(argv)
    names = args.only or list(MODELS)
    args.out.mkdir(parents=True, exist_ok=True)

    if not args.skip_build:
        for name in names:
            print(f"== {name}")
            path = BUILDERS[name](args.out)
            counts = onnx_op_counts(path) if path.suffix == ".onnx" else tflite_op_counts(path)
            print(f"  ops: {counts}")
        if not args.no_data_copy and args.out.resolve() == DEFAULT_OUT.resolve():
            for name in DEMO_MODELS:
                src = args.out / f"{name}.tflite"
                if name in names and src.exists() and src.stat().st_size < DATA_COPY_LIMIT:
                    DATA_DIR.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src, DATA_DIR / src.name)
                    print(f"copied {src.name} -> {DATA_DIR.relative_to(REPO)}/")
    if args.verify_tvm:
        print("== TVM import / compile / compare")
        verify_tvm(args.out, names)

    total = 0
    print(f"== files in {args.out}")
    for p in sorted(args.out.iterdir()):
        total += p.stat().st_size
        print(f"  {p.stat().st_size:>10,d}  {p.name}")
    print(f"  {total:>10,d}  total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
