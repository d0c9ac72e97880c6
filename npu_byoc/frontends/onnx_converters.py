"""ONNX operators imported as the Relax operators the pattern table matches, where TVM's
importer emits something else.

TVM's ONNX importer lowers some operators straight to TIR functions (``call_tir``), which no
pattern can read, so they always split the partition:

- a constant-mode ``Pad`` (tf2onnx's SAME padding, PyTorch's ``F.pad`` / ``ZeroPad2d``) becomes
  ``relax.op.nn.pad``, as TVM's TFLite importer writes it, so a zero-point pad folds into the
  next conv like a TFLite PAD (docs/patterns.md), its fill a constant or, in a QDQ model, a
  dequantized constant;
- a ``Clip`` with constant bounds (PyTorch's ReLU6 / Hardtanh) becomes ``relax.op.clip``: the
  activation clamp of the op before it, or a standalone LUT op.

Anything else is left to TVM's converter.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from tvm import relax

from ..util.relax_utils import Constant, constant_value, dtype_of, op_name


def _pad(importer, inputs, attrs, opset: int):
    """Pad-11 and later (pads, constant_value and axes as inputs), constant mode."""
    from tvm.relax.frontend.onnx import onnx_frontend

    if opset < 11 or attrs.get("mode", b"constant").decode("utf-8") != "constant":
        return None
    args = [inputs[k] for k in range(len(inputs))] + [None] * (3 - len(inputs))  # constant_value optional
    quantized = _dequantized_constant(args[2])
    if quantized is not None:  # a QDQ model's fill (onnxruntime quantizes Pad's constant_value)
        args[2] = None
    try:
        before, after, value = onnx_frontend.Pad._parse_pads_and_axes(args, [importer._nodes, importer._params])
    except ValueError:  # dynamic pads: TVM's converter says so
        return None
    value = value if quantized is None else quantized
    widths = [int(w) for pair in zip(before, after) for w in pair]
    return relax.op.nn.pad(inputs[0], widths, "constant", float(value))


def _dequantized_constant(expr) -> float | None:
    """DequantizeLinear of a constant scalar as onnxruntime computes it, (q - zp) * scale in
    float32; None for anything else."""
    if op_name(expr) != "relax.dequantize":
        return None
    if not all(isinstance(a, Constant) for a in expr.args):
        return None
    q, scale, zp = (constant_value(a) for a in expr.args)
    if q.size != 1 or scale.size != 1 or zp.size != 1:
        return None
    return float(np.float32(int(q.reshape(-1)[0]) - int(zp.reshape(-1)[0])) * np.float32(scale.reshape(-1)[0]))


def _bound(importer, inputs, k: int, default: float) -> float | None:
    """Clip's bound input ``k`` as a float (absent or NaN: unbounded), None if not constant."""
    from tvm.relax.frontend.onnx import onnx_frontend

    if len(inputs) <= k or inputs[k] is None:
        return default
    c = onnx_frontend.get_constant(inputs[k], [importer._nodes, importer._params])
    if not isinstance(c, Constant) or constant_value(c).size != 1:
        return None
    v = float(constant_value(c).reshape(-1)[0])
    return default if math.isnan(v) else v


def _clip(importer, inputs, attrs, opset: int):
    """Clip with constant bounds (attributes before opset 11, inputs after)."""
    if opset < 11:
        lo, hi = float(attrs.get("min", -math.inf)), float(attrs.get("max", math.inf))
    else:
        lo, hi = _bound(importer, inputs, 1, -math.inf), _bound(importer, inputs, 2, math.inf)
    if lo is None or hi is None:
        return None
    if not dtype_of(inputs[0]).startswith("float"):
        return None  # integer clips: TVM's converter (bounds in the tensor's type)
    return relax.op.clip(inputs[0], lo, hi)


# ONNX op type -> converter(importer, inputs, attrs, opset): a Relax expression, or None to use TVM's
CONVERTERS: dict[str, Callable] = {"Pad": _pad, "Clip": _clip}


def convert(importer, op_name: str, inputs, attrs, opset: int):
    """The override for ``op_name`` if it applies, else None."""
    fn = CONVERTERS.get(op_name)
    if fn is None:
        return None
    try:
        return fn(importer, inputs, attrs, opset)
    except Exception:  # noqa: BLE001 - an input this override does not know: TVM's converter decides
        return None
