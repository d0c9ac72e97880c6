"""Refuse model files TVM's importers would mis-handle, before importing them.

Each check reads the raw file (never trusting it) and raises :class:`ModelLoadError` with one
line naming the file, the tensor or op and the parameter. Examples: two tensors with one name
(TVM's TFLite importer silently drops an op), zero / negative / non-finite scales (TVM divides
by zero), dimensions <= 0, ONNX opsets newer than TVM's importer knows, node names that are not
UTF-8.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import numpy as np

from ..errors import ModelLoadError


def _bad_scale(s: float) -> bool:
    return not (math.isfinite(s) and s > 0)


def check_tflite(path: Path, model) -> None:
    """``model``: the parsed ``tflite.Model``."""
    for g in range(model.SubgraphsLength()):
        sub = model.Subgraphs(g)
        seen: set[bytes] = set()
        for i in range(sub.TensorsLength()):
            t = sub.Tensors(i)
            raw = t.Name() or b""
            name = raw.decode("utf-8", "backslashreplace")
            if raw in seen:
                raise ModelLoadError(f"{path}: two tensors are named {name!r}: tensor names must be unique")
            seen.add(raw)
            dims = [int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else []
            if any(d <= 0 for d in dims):
                raise ModelLoadError(f"{path}: tensor {name!r} has shape {dims}: dimensions must be > 0")
            q = t.Quantization()
            if q is not None and q.ScaleLength():
                bad = [float(s) for s in q.ScaleAsNumpy() if _bad_scale(float(s))]
                if bad:
                    raise ModelLoadError(f"{path}: tensor {name!r} has scale {bad[0]}: scales must be finite and > 0")


@cache
def max_onnx_opset() -> int:
    """The newest default-domain opset TVM's ONNX importer has a converter version for."""
    from tvm.relax.frontend.onnx import onnx_frontend

    versions = [
        int(attr[len("_impl_v"):])
        for cls in vars(onnx_frontend).values() if isinstance(cls, type)
        for attr in vars(cls) if attr.startswith("_impl_v") and attr[len("_impl_v"):].isdigit()
    ]  # fmt: skip
    return max(versions)


def check_onnx(path: Path, model) -> None:
    """``model``: the parsed ``onnx.ModelProto``."""
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx") and imp.version > max_onnx_opset():
            raise ModelLoadError(
                f"{path}: ONNX opset {imp.version}: TVM's ONNX importer knows opsets up to {max_onnx_opset()}"
            )
    _check_onnx_scales(path, model)
    for node in model.graph.node:
        # protobuf hands back bytes, not str, for a string field that is not valid UTF-8
        for what, name in (("name", node.name), *(("input", n) for n in node.input), *(("output", n) for n in node.output)):
            if not isinstance(name, str):
                raise ModelLoadError(f"{path}: {node.op_type} node {what} {name!r} is not valid UTF-8")


def _check_onnx_scales(path: Path, model) -> None:
    """The scale operand (input 1) of every QuantizeLinear / DequantizeLinear given as an initializer."""
    from onnx import numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") and len(node.input) > 1 and node.input[1] in inits:
            scale = numpy_helper.to_array(inits[node.input[1]]).astype(np.float64).ravel()
            bad = scale[~(np.isfinite(scale) & (scale > 0))]
            if bad.size:
                raise ModelLoadError(
                    f"{path}: {node.op_type} node {node.name!r} scale {node.input[1]!r} = {bad[0]}: "
                    "scales must be finite and > 0"
                )


_QDQ_OPS = ("relax.quantize", "relax.dequantize")


def check_relax(path: Path, mod) -> None:
    """``mod``: an IRModule loaded from a Relax ``.json``. The dimensions of ``main``'s
    parameters, and the scale operand of every quantize / dequantize that is a constant
    (directly or through bindings)."""
    import tvm
    from tvm import relax

    for p in mod["main"].params:
        values = getattr(getattr(p.ty, "shape", None), "values", None) or []
        dims = [int(d) for d in values if isinstance(d, tvm.ir.prim.expr.IntImm)]
        if any(d <= 0 for d in dims):
            raise ModelLoadError(f"{path}: parameter {p.name!r} has shape {dims}: dimensions must be > 0")
    from ..util.relax_utils import Constant, constant_value, op_name, resolve

    bound: dict = {}
    calls: list = []

    def visit(e) -> None:
        if isinstance(e, relax.SeqExpr):
            bound.update((b.var, b.value) for block in e.blocks for b in block.bindings)
        elif op_name(e) in _QDQ_OPS:
            calls.append(e)

    for _, func in mod.functions_items():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    for call in calls:
        scale = resolve(call.args[1], bound)
        if isinstance(scale, Constant):
            values = constant_value(scale).astype(np.float64).ravel()
            bad = values[~(np.isfinite(values) & (values > 0))]
            if bad.size:
                raise ModelLoadError(
                    f"{path}: {call.op.name.removeprefix('relax.')} with scale {bad[0]}: scales must be finite and > 0"
                )
