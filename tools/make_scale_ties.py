#!/usr/bin/env python3
"""Build the scale-tie fixtures of issue 24 (and its SQUARED_DIFFERENCE fixture) in
``tests/fixtures/models/``, with LiteRT references.

Each model sits on a scale where the order of LiteRT's float32 / double operations decides an
output (docs/numerics.md §8b, §12). TensorFlow's converter builds it (full-integer int8), then
the quantization of a few tensors is set to the tie's scales; LiteRT's BUILTIN_REF interpreter
gives the reference, written with the int8 inputs as ``NAME.npz`` (the layout of
tools/make_models.py: input_k, output_k, reference, meta). Three samples per model.

``mul_tie_int8``
    Issue 24 (keras.applications EfficientNetB0, 9 LSB off LiteRT): ``mul.cc`` forms
    ``s1 · s2 / s_out`` in float32; with s1 = 0.03517231, s2 = 2^-8, s_out = 0.027174268 the
    float32 multiplier (1389769856, −7) sends (x − zp1)(y − zp2) = 4845 to 24 where the double
    one (1389769914, −7) gives 25. Three int8 inputs ``a`` [1, 8, 8, 16] (s1, zero point 3),
    ``b`` [1, 8, 8, 16] and a gate ``g`` [1, 1, 1, 16] (2^-8, −128, a sigmoid's output); two
    MULs ``a · b`` and the squeeze-excite broadcast ``a · g`` (s_out, 0). Sample 0 puts the tie
    on a third of the elements, samples 1 and 2 are uniform random int8.
``relu6_tie_int8``
    A 1x1 CONV_2D with fused RELU6 whose output is quantized at float32(6 / 253.5), zero point
    −128: LiteRT's ``CalculateActivationRangeQuantized`` divides 6 by it in float32 (253.5, a
    tie, rounded away from zero) and clamps at 126; TVM's importer rounds the double quotient
    253.4999967 to 253 and clamps at 125. Input [1, 8, 8, 4], 16 output channels, random int8.
``sqdiff_int8``
    LayerNorm's variance term as TFLite writes it, ``tf.math.squared_difference`` (int8
    SQUARED_DIFFERENCE: ``squared_difference.cc``'s left shift 7 and three multipliers from
    float32 / double scales, docs/numerics.md §8d) at the converter's own scales: ``x − y``
    [1, 8, 8, 48] of one shape, ``x − m`` with a per-pixel mean m [1, 8, 8, 1], ``x − c`` with a
    channel vector c [1, 1, 1, 48], and a sequence ``t − u`` [1, 12, 40] with a per-token
    mean u [1, 12, 1]. Random int8 samples.

    pip install -e .[models]          # tensorflow-cpu, ai-edge-litert
    python tools/make_scale_ties.py [--out DIR] [--only NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_models import DEFAULT_OUT, save_npz  # noqa: E402

SAMPLES = 3


def convert(fn, shapes: dict[str, tuple]) -> bytes:
    """Full-integer int8 conversion of ``fn`` (one float input per entry of ``shapes``)."""
    import tensorflow as tf

    spec = [tf.TensorSpec(shape, tf.float32, name=k) for k, shape in shapes.items()]
    f = tf.function(fn, input_signature=spec)
    rng = np.random.default_rng(24)

    def rep():
        for _ in range(16):
            yield [rng.uniform(-1, 1, shape).astype(np.float32) for shape in shapes.values()]

    conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = conv.inference_output_type = tf.int8
    return conv.convert()


def _input_key(name: str, keys) -> str:
    return next(k for k in keys if name.split(":")[0].endswith(k))


def set_quantization(buf: bytes, ops: list[str], inputs: dict[str, tuple], output: tuple) -> bytes:
    """Graph inputs (matched by name) and every graph output take the given (scale, zero point)."""
    import flatbuffers
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(buf, 0))
    (sub,) = model.subgraphs
    got = [model.operatorCodes[o.opcodeIndex].builtinCode for o in sub.operators]
    assert got == [getattr(schema.BuiltinOperator, op) for op in ops], f"expected {ops}, the converter gave {got}"
    quant = {i: inputs[_input_key(sub.tensors[i].name.decode(), inputs)] for i in sub.inputs if inputs}
    quant.update({i: output for i in sub.outputs})
    for i, (scale, zp) in quant.items():
        q = sub.tensors[i].quantization
        q.scale, q.zeroPoint, q.min, q.max = [scale], [zp], None, None
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def references(path: Path, data: dict[str, np.ndarray], description: str) -> dict:
    """LiteRT BUILTIN_REF on every sample: the arrays of ``NAME.npz``."""
    import ai_edge_litert
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    ins, outs = it.get_input_details(), it.get_output_details()
    order = [_input_key(d["name"], data) for d in ins]
    arrays: dict = {f"input_{n}": data[k] for n, k in enumerate(order)}
    results = [[] for _ in outs]
    for s in range(SAMPLES):
        for d, k in zip(ins, order):
            it.set_tensor(d["index"], data[k][s : s + 1])
        it.invoke()
        for r, d in zip(results, outs):
            r.append(it.get_tensor(d["index"])[0].copy())
    ref = f"litert {ai_edge_litert.__version__} BUILTIN_REF"

    def io(d):
        return {"name": d["name"], "shape": d["shape"].tolist(), "dtype": np.dtype(d["dtype"]).name,
                "scale": float(d["quantization"][0]), "zero_point": int(d["quantization"][1])}  # fmt: skip

    meta = {"model": f"{description} (tools/make_scale_ties.py)", "inputs": [io(d) for d in ins],
            "outputs": [io(d) for d in outs], "reference": ref}  # fmt: skip
    arrays.update({f"output_{k}": np.stack(r) for k, r in enumerate(results)})
    arrays["reference"] = np.array(ref)
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    return arrays


def _random_int8(rng, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    return {k: rng.integers(-128, 128, (SAMPLES, *shape[1:]), dtype=np.int64) for k, shape in shapes.items()}


def build_mul_tie() -> tuple[bytes, dict, str]:
    s1, s_gate, s_out = 0.03517231, 2.0**-8, 0.027174268
    shapes = {"a": (1, 8, 8, 16), "b": (1, 8, 8, 16), "g": (1, 1, 1, 16)}
    zp = {"a": 3, "b": -128, "g": -128}
    buf = convert(lambda a, b, g: (a * b, a * g), shapes)
    buf = set_quantization(buf, ["MUL", "MUL"], {"a": (s1, zp["a"]), "b": (s_gate, zp["b"]), "g": (s_gate, zp["g"])},
                           (s_out, 0))  # fmt: skip
    data = _random_int8(np.random.default_rng(2024), shapes)
    data["a"][0].reshape(-1)[::3] = 85 + zp["a"]  # (a − zp)(b − zp) = 85 · 57 = 4845, the tie
    data["b"][0].reshape(-1)[::3] = 57 + zp["b"]
    data["g"][0].reshape(-1)[::2] = 57 + zp["g"]  # a · g: the tie on the even channels at a's tie pixels
    return buf, data, "int8 MUL a·b and broadcast a·g on issue 24's float32 multiplier tie"


def build_relu6_tie() -> tuple[bytes, dict, str]:
    import tensorflow as tf

    rng = np.random.default_rng(253)
    w = tf.constant(rng.normal(size=(1, 1, 4, 16)).astype(np.float32) * 4)  # outputs past 6: the clamp
    b = tf.constant(rng.normal(size=16).astype(np.float32) * 0.5)
    shapes = {"x": (1, 8, 8, 4)}
    buf = convert(lambda x: tf.nn.relu6(tf.nn.conv2d(x, w, 1, "VALID") + b), shapes)
    buf = set_quantization(buf, ["CONV_2D"], {}, (float(np.float32(6.0 / 253.5)), -128))
    data = _random_int8(np.random.default_rng(2530), shapes)
    return buf, data, "1x1 CONV_2D + fused RELU6, output scale float32(6/253.5): LiteRT clamps at 126, TVM's import at 125"


def build_sqdiff() -> tuple[bytes, dict, str]:
    import tensorflow as tf

    shapes = {"x": (1, 8, 8, 48), "y": (1, 8, 8, 48), "m": (1, 8, 8, 1), "c": (1, 1, 1, 48), "t": (1, 12, 40),
              "u": (1, 12, 1)}  # fmt: skip
    sd = tf.math.squared_difference
    buf = convert(lambda x, y, m, c, t, u: (sd(x, y), sd(x, m), sd(x, c), sd(t, u)), shapes)
    _check_ops(buf, ["SQUARED_DIFFERENCE"] * 4)
    data = _random_int8(np.random.default_rng(8), shapes)
    return buf, data, "int8 SQUARED_DIFFERENCE: same shape, per-pixel, channel-vector and per-token broadcasts"


def _check_ops(buf: bytes, ops: list[str]) -> None:
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(buf, 0))
    got = [model.operatorCodes[o.opcodeIndex].builtinCode for o in model.subgraphs[0].operators]
    assert got == [getattr(schema.BuiltinOperator, op) for op in ops], f"expected {ops}, the converter gave {got}"


MODELS = {"mul_tie_int8": build_mul_tie, "relu6_tie_int8": build_relu6_tie, "sqdiff_int8": build_sqdiff}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--only", action="append", choices=sorted(MODELS), help="build this model only (repeatable)")
    args = ap.parse_args(argv)
    for name in args.only or MODELS:
        buf, data, description = MODELS[name]()
        path = args.out / f"{name}.tflite"
        path.write_bytes(buf)
        arrays = references(path, {k: v.astype(np.int8) for k, v in data.items()}, description)
        save_npz(path.with_suffix(".npz"), arrays)
        print(f"wrote {path} and {path.with_suffix('.npz').name} ({arrays['reference']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
