#!/usr/bin/env python3
"""Build ``tests/fixtures/models/mul_tie_int8.tflite``: int8 MUL on issue 24's rounding tie.

Issue 24 (keras.applications EfficientNetB0, 9 LSB off LiteRT) came from MUL's multiplier:
LiteRT's ``mul.cc`` forms ``s1 · s2 / s_out`` in float32, and with s1 = 0.03517231,
s2 = 2^-8, s_out = 0.027174268 the float32 multiplier (1389769856, −7) sends the product
(x − zp1)(y − zp2) = 4845 to 24 where the double one (1389769914, −7) gives 25.

The model: three int8 inputs ``a`` [1, 8, 8, 16], ``b`` [1, 8, 8, 16] and a gate ``g``
[1, 1, 1, 16], two MULs ``a · b`` (same shape) and ``a · g`` (the squeeze-excite broadcast).
TensorFlow's converter builds it (full-integer int8), then the quantization of the five
tensors is set to the issue's scales (``a``: s1, zero point 3; ``b``, ``g``: 2^-8, −128 as a
sigmoid's output; both outputs: s_out, zero point 0). Sample 0 puts 85 · 57 = 4845 (the tie)
on a third of the elements, samples 1 and 2 are uniform random int8. The reference is
LiteRT's BUILTIN_REF interpreter, written with the inputs as ``mul_tie_int8.npz`` (the layout
of tools/make_models.py: input_k, output_k, reference, meta).

    pip install -e .[models]          # tensorflow-cpu, ai-edge-litert
    python tools/make_mul_tie.py [--out DIR]
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

NAME = "mul_tie_int8"
S1, S_GATE, S_OUT = 0.03517231, 2.0**-8, 0.027174268
ZP = {"a": 3, "b": -128, "g": -128, "out": 0}
SHAPES = {"a": (1, 8, 8, 16), "b": (1, 8, 8, 16), "g": (1, 1, 1, 16)}


def convert() -> bytes:
    import tensorflow as tf

    spec = [tf.TensorSpec(SHAPES[k], tf.float32, name=k) for k in "abg"]

    @tf.function(input_signature=spec)
    def f(a, b, g):
        return a * b, a * g

    rng = np.random.default_rng(24)

    def rep():
        for _ in range(16):
            yield [rng.uniform(-1, 1, SHAPES[k]).astype(np.float32) for k in "abg"]

    conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = conv.inference_output_type = tf.int8
    return conv.convert()


def set_scales(buf: bytes) -> bytes:
    """The graph inputs (matched by name) and outputs take the issue's quantization."""
    import flatbuffers
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(buf, 0))
    (sub,) = model.subgraphs
    ops = [model.operatorCodes[o.opcodeIndex].builtinCode for o in sub.operators]
    assert ops == [schema.BuiltinOperator.MUL] * 2, f"expected two MULs, the converter gave {ops}"
    quant = {}
    for i in sub.inputs:
        key = next(k for k in "abg" if sub.tensors[i].name.decode().split(":")[0].endswith(k))
        quant[i] = (S1 if key == "a" else S_GATE, ZP[key])
    quant.update({i: (S_OUT, ZP["out"]) for i in sub.outputs})
    for i, (scale, zp) in quant.items():
        q = sub.tensors[i].quantization
        q.scale, q.zeroPoint, q.min, q.max = [scale], [zp], None, None
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def samples() -> dict[str, np.ndarray]:
    """Three samples per input: sample 0 with the tie on every third element, 1-2 random."""
    rng = np.random.default_rng(2024)
    out = {k: rng.integers(-128, 128, (3, *SHAPES[k][1:]), dtype=np.int64) for k in "abg"}
    out["a"][0].reshape(-1)[::3] = 85 + ZP["a"]
    out["b"][0].reshape(-1)[::3] = 57 + ZP["b"]
    out["g"][0].reshape(-1)[::2] = 57 + ZP["g"]  # a · g: the tie on the even channels at a's tie pixels
    return {k: v.astype(np.int8) for k, v in out.items()}


def references(path: Path, data: dict[str, np.ndarray]) -> dict:
    import ai_edge_litert
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    ins, outs = it.get_input_details(), it.get_output_details()
    order = [next(k for k in "abg" if d["name"].split(":")[0].endswith(k)) for d in ins]
    arrays: dict = {f"input_{n}": data[k] for n, k in enumerate(order)}
    results = [[] for _ in outs]
    for s in range(3):
        for d, k in zip(ins, order):
            it.set_tensor(d["index"], data[k][s : s + 1])
        it.invoke()
        for r, d in zip(results, outs):
            r.append(it.get_tensor(d["index"])[0].copy())
    ref = f"litert {ai_edge_litert.__version__} BUILTIN_REF"

    def io(d):
        return {"name": d["name"], "shape": d["shape"].tolist(), "dtype": np.dtype(d["dtype"]).name,
                "scale": float(d["quantization"][0]), "zero_point": int(d["quantization"][1])}  # fmt: skip

    meta = {"model": "int8 MUL a·b and broadcast a·g on issue 24's float32 multiplier tie (tools/make_mul_tie.py)",
            "inputs": [io(d) for d in ins], "outputs": [io(d) for d in outs], "reference": ref}  # fmt: skip
    arrays.update({f"output_{k}": np.stack(r) for k, r in enumerate(results)})
    arrays["reference"] = np.array(ref)
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    return arrays


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    path = args.out / f"{NAME}.tflite"
    path.write_bytes(set_scales(convert()))
    arrays = references(path, samples())
    save_npz(path.with_suffix(".npz"), arrays)
    print(f"wrote {path} and {path.with_suffix('.npz').name} ({arrays['reference']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
