"""Model loading: .tflite / .onnx / Relax JSON -> Relax IRModule, through TVM's own frontends.

Besides the module, the loader records *provenance*: which Relax bindings each operator of the
original model became. Bindings are renamed after their source operator (``conv_2d_3``,
``conv_2d_3_1`` ...) so the partitioned module stays readable, and a :class:`ModelInfo` with
the model's inputs, outputs (names, shapes, dtypes, quantization) and operators is attached to
the module as the attribute ``npu_byoc.model_info``. Every failure raises
:class:`~npu_byoc.errors.ModelLoadError` naming the file and the problem.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from . import onnx_converters, onnx_external, onnx_int4, onnx_qop, relax_json, validate
from ..errors import ModelLoadError, UnsupportedModelError, tvm_message
from ..util.tvm_scopes import builders_closed_on_error

MODEL_INFO_ATTR = "npu_byoc.model_info"
QDQ_SPAN_PREFIX = "qdq:"


@dataclass(frozen=True)
class TensorInfo:
    """A model input or output as the model declares it."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    scale: float | None = None
    zero_point: int | None = None


@dataclass(frozen=True)
class SourceOp:
    """One operator of the original model and the Relax bindings it became."""

    index: int
    name: str
    op: str  # the model's own op kind: CONV_2D (TFLite), Conv (ONNX), relax.nn.conv2d (Relax)
    vars: tuple[str, ...] = ()  # Relax binding names owned by this op, output binding first
    qdq: bool = False  # an ONNX QuantizeLinear/DequantizeLinear: quantization glue, not compute
    producers: tuple[int, ...] = ()  # indices of the source ops whose results this op reads; -1: a model input


@dataclass(frozen=True)
class ModelInfo:
    path: str
    format: str  # "tflite" | "onnx" | "relax"
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    ops: tuple[SourceOp, ...] = field(default=())

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "ModelInfo":
        d = json.loads(text)
        return cls(
            path=d["path"],
            format=d["format"],
            inputs=tuple(TensorInfo(**{**t, "shape": tuple(t["shape"])}) for t in d["inputs"]),
            outputs=tuple(TensorInfo(**{**t, "shape": tuple(t["shape"])}) for t in d["outputs"]),
            ops=tuple(
                SourceOp(**{**o, "vars": tuple(o["vars"]), "producers": tuple(o["producers"])})
                for o in d["ops"]
            ),
        )


def model_info(mod: tvm.IRModule) -> ModelInfo | None:
    """The :class:`ModelInfo` that :func:`load_model` attached to ``mod`` (None if absent)."""
    attrs = mod.attrs
    if attrs is None or MODEL_INFO_ATTR not in attrs:
        return None
    return ModelInfo.from_json(str(attrs[MODEL_INFO_ATTR]))


def load_model(path: str | Path, input_shapes: dict[str, Sequence[int]] | int | None = None) -> tvm.IRModule:
    """Import a quantized model into a Relax IRModule.

    ``.tflite`` goes through ``tvm.relax.frontend.tflite``, ``.onnx`` through
    ``tvm.relax.frontend.onnx`` and ``.json`` is a Relax IRModule saved with
    ``tvm.ir.save_json``. The result carries a :class:`ModelInfo` (see :func:`model_info`).

    ``input_shapes`` fixes the shapes of inputs the model leaves open (a batch-None keras
    model has batch -1): a dict input name -> shape, or a batch size for every input whose
    batch is open (default 1). Other open dimensions must be given by name. The outputs
    have the shapes the model file declares (with an open batch fixed the same way).
    """
    path = Path(path)
    if not path.exists():
        raise ModelLoadError(f"{path}: no such file")
    if not path.is_file():
        raise ModelLoadError(f"{path}: not a file")
    loader = _LOADERS.get(path.suffix.lower())
    if loader is None:
        known = ", ".join(sorted(_LOADERS))
        raise ModelLoadError(f"{path}: unknown model format '{path.suffix}' (expected one of {known})")
    data = path.read_bytes()
    if not data:
        raise ModelLoadError(f"{path}: the file is empty")
    if loader is _load_relax_json:
        if input_shapes is not None:
            raise ModelLoadError(f"{path}: input_shapes applies to .tflite and .onnx models only")
        return loader(path, data)
    return loader(path, data, input_shapes)


# ---------------------------------------------------------------------------------------------
# TFLite


def _load_tflite(path: Path, data: bytes, input_shapes=None) -> tvm.IRModule:
    import tflite
    from tvm.relax.frontend.tflite import tflite_frontend

    from .tflite_ops import DataMovementConverter

    # A TFLite flatbuffer carries the file identifier "TFL3" at bytes 4..8.
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ModelLoadError(f"{path}: not a TFLite flatbuffer (missing the 'TFL3' identifier)")
    try:
        model = tflite.Model.GetRootAsModel(data, 0)
        subgraph = model.Subgraphs(0)
        inputs = tuple(_tflite_tensor_info(subgraph, i) for i in subgraph.InputsAsNumpy())
        outputs = tuple(_tflite_tensor_info(subgraph, i) for i in subgraph.OutputsAsNumpy())
        validate.check_tflite(path, model)  # reads every tensor: the same parser failures
    except ModelLoadError:
        raise
    except Exception as err:  # a truncated flatbuffer fails in many ways inside the parser
        raise ModelLoadError(f"{path}: corrupt or truncated TFLite file ({err})") from None
    inputs, outputs = fix_shapes(path, inputs, outputs, input_shapes)

    records: list[tuple[str, str, object]] = []

    class RecordingConverter(DataMovementConverter):
        """TVM's converter, remembering which Relax expression each TFLite op became."""

        def convert_op_to_relax(self):
            for op_idx in range(self.subgraph.OperatorsLength()):
                op = self.subgraph.Operators(op_idx)
                op_code = self.get_op_code_str(op)
                output_tensors = self.get_output_tensors(op)
                ret = self.convert_map[op_code](op=op)
                out_name = tflite_frontend.get_tensor_name(self.subgraph, output_tensors[0].tensor_idx)
                if ret is None:  # prefetched constant: the op vanished at import
                    records.append((out_name, op_code, None))
                    continue
                ret = self.bb.normalize(ret)
                records.append((out_name, op_code, ret))
                if len(output_tensors) == 1:
                    self.exp_tab.set_expr(out_name, ret)
                else:
                    for k, t in enumerate(output_tensors):
                        self.exp_tab.set_expr(
                            tflite_frontend.get_tensor_name(self.subgraph, t.tensor_idx), ret[k]
                        )

    try:
        with builders_closed_on_error():
            mod = tflite_frontend.from_tflite(
                model, shape_dict={t.name: t.shape for t in inputs}, op_converter=RecordingConverter
            )
    except tvm.error.OpNotImplemented as err:
        raise UnsupportedModelError(f"{path}: TVM cannot import this model: {tvm_message(err)}") from None
    except Exception as err:
        raise UnsupportedModelError(
            f"{path}: TVM's TFLite frontend failed: {type(err).__name__}: {tvm_message(err)}"
        ) from None

    # TFLite ops are unnamed: name them after their output tensor (first ';' component).
    named = [(name.split(";")[0], kind, ret) for name, kind, ret in records]
    mod = declare_output_shapes(mod, outputs)
    return _finish(mod, path, "tflite", inputs, outputs, named)


_TFLITE_DTYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 6: "bool", 7: "int16", 9: "int8"}


def _tflite_tensor_info(subgraph, index: int) -> TensorInfo:
    t = subgraph.Tensors(int(index))
    q = t.Quantization()
    scale = zero_point = None
    if q is not None and q.ScaleLength() == 1:
        scale = float(q.ScaleAsNumpy()[0])
        zero_point = int(q.ZeroPointAsNumpy()[0])
    # the shape signature keeps an open dimension (-1) that the shape itself writes as 1
    dims = t.ShapeSignatureAsNumpy() if t.ShapeSignatureLength() else t.ShapeAsNumpy()
    return TensorInfo(
        name=t.Name().decode(),
        shape=tuple(int(d) for d in dims),
        dtype=_TFLITE_DTYPES.get(t.Type(), f"tflite_type_{t.Type()}"),
        scale=scale,
        zero_point=zero_point,
    )


# ---------------------------------------------------------------------------------------------
# ONNX


def _load_onnx(path: Path, data: bytes, input_shapes=None) -> tvm.IRModule:
    import onnx
    from tvm.relax.frontend.onnx import onnx_frontend

    try:
        model = onnx.load_from_string(data)
    except Exception as err:
        raise ModelLoadError(f"{path}: not an ONNX model ({type(err).__name__}: {tvm_message(err)})") from None
    if not model.graph.node:
        raise ModelLoadError(f"{path}: not an ONNX model (the graph has no nodes)")
    # External data is read here, from the model's own folder after its checks, and nowhere else:
    # onnx's helpers (numpy_helper.to_array, which TVM's importer calls too) would read it
    # relative to the current directory.
    onnx_external.load(path, model)
    validate.check_onnx(path, model)
    try:
        onnx.checker.check_model(model)
    except Exception as err:
        raise ModelLoadError(f"{path}: invalid ONNX model: {tvm_message(err)}") from None
    model = onnx_int4.widen(model)  # 4-bit weights TVM cannot read, as 8-bit ones
    # QOperator / integer ops TVM cannot import become QDQ / int32 graphs (npu_byoc/frontends/onnx_qop.py);
    # the compute node keeps the original name, and its op type is reported as the original's.
    rewritten = onnx_qop.rewrite(model, path)
    model = rewritten.model
    if rewritten.origin:
        validate.check_onnx(path, model)  # the scales of the new Q/DQ nodes

    initializers = {i.name for i in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in initializers]
    inputs = tuple(_onnx_value_info(v) for v in graph_inputs)
    outputs = tuple(_onnx_value_info(v) for v in model.graph.output)
    inputs, outputs = fix_shapes(path, inputs, outputs, input_shapes)

    records: list[tuple[str, str, object]] = []

    class RecordingImporter(onnx_frontend.ONNXGraphImporter):
        def _convert_operator(self, op_name, inputs, attrs, opset):
            ret = onnx_converters.convert(self, op_name, inputs, attrs, opset)
            ret = super()._convert_operator(op_name, inputs, attrs, opset) if ret is None else self.bb.normalize(ret)
            name = attrs["tvm_custom"]["name"]
            if name not in rewritten.helpers:  # owned by the rewritten op they serve
                records.append((name, rewritten.origin.get(name, op_name), ret))
            return ret

    opset = next(
        (o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1
    )
    shape_dict = {t.name: t.shape for t in inputs if t.shape}
    importer = RecordingImporter(shape_dict, "float32", keep_params_in_input=False, sanitize=True)
    try:
        with builders_closed_on_error():
            mod = importer.from_onnx(model.graph, opset)
    except tvm.error.OpNotImplemented as err:
        raise UnsupportedModelError(f"{path}: TVM cannot import this model: {tvm_message(err)}") from None
    except Exception as err:
        raise UnsupportedModelError(
            f"{path}: TVM's ONNX frontend failed: {type(err).__name__}: {tvm_message(err)}"
        ) from None
    named = []
    for k, (name, kind, ret) in enumerate(records):
        named.append((name or f"{kind}_{k}", kind, ret))
    mod = declare_output_shapes(mod, outputs)
    return _finish(mod, path, "onnx", inputs, outputs, named)


_ONNX_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 10: "float16", 9: "bool"}


def external_data_files(path: str | Path) -> list[str]:
    """The files an ONNX model's external data is read from (real paths, sorted), checked as
    :func:`load_model` checks them; empty for other formats. Anything whose results depend on the
    model (a cache key) must hash these with the model file."""
    if Path(path).suffix.lower() != ".onnx":
        return []
    return onnx_external.external_files(path)


def _onnx_value_info(v) -> TensorInfo:
    tt = v.type.tensor_type
    shape = tuple(int(d.dim_value) if d.HasField("dim_value") else -1 for d in tt.shape.dim)
    return TensorInfo(name=v.name, shape=shape, dtype=_ONNX_DTYPES.get(tt.elem_type, f"onnx_type_{tt.elem_type}"))


# ---------------------------------------------------------------------------------------------
# Open input dimensions and declared output shapes


def fix_shapes(path, inputs, outputs, input_shapes):
    """Close the open (-1) dimensions of the model's inputs with ``input_shapes`` (see
    :func:`load_model`); an open output batch takes the inputs' batch."""
    given, batch = {}, 1
    if isinstance(input_shapes, dict):
        given = input_shapes
    elif isinstance(input_shapes, int) and not isinstance(input_shapes, bool):
        batch = input_shapes
    elif input_shapes is not None:
        raise ModelLoadError(f"{path}: input_shapes must be a dict name -> shape or a batch size, not {input_shapes!r}")
    if batch < 1:
        raise ModelLoadError(f"{path}: input_shapes: batch size {batch} (must be >= 1)")
    names = [t.name for t in inputs]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ModelLoadError(f"{path}: input_shapes names no input {unknown[0]!r} (inputs: {', '.join(names)})")
    fixed = []
    for t in inputs:
        if t.name in given:
            shape = _checked_shape(path, t, given[t.name])
        else:
            shape = tuple(batch if (k == 0 and d < 0) else d for k, d in enumerate(t.shape))
            if any(d < 0 for d in shape):
                k = next(k for k, d in enumerate(shape) if d < 0)
                raise ModelLoadError(
                    f"{path}: input {t.name!r} has an open dimension {k} (shape {list(t.shape)}): "
                    f"give its shape with input_shapes (CLI: --input-shape {t.name}=...)"
                )
        if 0 in shape:  # TVM's importers and the NPU lowering divide by dimensions
            raise ModelLoadError(f"{path}: input {t.name!r} has a dimension 0 (shape {list(shape)}): "
                                 "a model input needs at least one element")  # fmt: skip
        fixed.append(replace(t, shape=shape))
    out_batch = fixed[0].shape[0] if fixed and fixed[0].shape else batch
    outs = [
        replace(t, shape=tuple(out_batch if (k == 0 and d < 0) else d for k, d in enumerate(t.shape)))
        for t in outputs
    ]
    return tuple(fixed), tuple(outs)


def _checked_shape(path, t: TensorInfo, shape) -> tuple[int, ...]:
    try:
        shape = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise ModelLoadError(f"{path}: input_shapes[{t.name!r}] is not a list of integers: {shape!r}") from None
    fits = len(shape) == len(t.shape) and all(d == s or s < 0 for d, s in zip(shape, t.shape))
    if not fits or min(shape, default=1) < 1:
        raise ModelLoadError(
            f"{path}: input_shapes[{t.name!r}] = {list(shape)} does not fit the declared shape {list(t.shape)}"
        )
    return shape


def declare_output_shapes(mod: tvm.IRModule, outputs) -> tvm.IRModule:
    """Reshape main's outputs to the shapes the model declares, where they differ and hold
    the same number of elements (TVM's TFLite frontend keeps FULLY_CONNECTED's 4-D input
    shape, so a DS-CNN declared [1, 12] would return [1, 1, 1, 12])."""
    main = mod["main"]
    ret = main.ret_ty
    rets = list(ret.fields) if isinstance(ret, relax.TupleType) else [ret]
    declared = [t.shape for t in outputs]
    if len(rets) != len(declared) or len(main.body.blocks) != 1:
        return mod
    have = [_relax_tensor_info("", r).shape for r in rets]
    change = [
        bool(d) and min(d) > 0 and h != d and min(h, default=0) > 0 and _count(h) == _count(d)
        for h, d in zip(have, declared)
    ]
    if not any(change):
        return mod
    bb = relax.BlockBuilder()
    attrs = {k: v for k, v in main.attrs.items() if k != "global_symbol"} if main.attrs else None
    with bb.function("main", list(main.params), attrs=attrs):
        with bb.dataflow():
            for binding in main.body.blocks[0].bindings:
                bb.emit_normalized(binding)
            out = main.body.body
            fields = [out] if len(rets) == 1 else [bb.emit(relax.TupleGetItem(out, k)) for k in range(len(rets))]
            fields = [bb.emit(relax.op.reshape(f, d)) if c else f for f, d, c in zip(fields, declared, change)]
            gv = bb.emit_output(fields[0] if len(fields) == 1 else relax.Tuple(fields))
        bb.emit_func_output(gv)
    new = bb.get()["main"]
    mod = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    mod["main"] = new
    return mod


def _count(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


# ---------------------------------------------------------------------------------------------
# Relax JSON


def _load_relax_json(path: Path, data: bytes) -> tvm.IRModule:
    # The file is data: checked before TVM parses it, and rebuilt with inferred types after.
    relax_json.check_text(path, data)
    try:
        mod = tvm.ir.load_json(data.decode("utf-8"))
    except Exception as err:
        raise ModelLoadError(f"{path}: not a Relax module saved with tvm.ir.save_json ({tvm_message(err)})") from None
    if not isinstance(mod, tvm.IRModule):
        raise ModelLoadError(f"{path}: the JSON holds a {type(mod).__name__}, not an IRModule")
    if "main" not in [gv.name_hint for gv in mod.get_global_vars()]:
        raise ModelLoadError(f"{path}: the IRModule has no 'main' function")
    if not isinstance(mod["main"], relax.Function):
        raise ModelLoadError(f"{path}: 'main' is not a Relax function")
    mod = relax_json.rebuild(path, mod)
    validate.check_relax(path, mod)
    return annotate_provenance(mod, str(path))


def annotate_provenance(mod: tvm.IRModule, name: str = "<relax module>") -> tvm.IRModule:
    """Attach a :class:`ModelInfo` to a Relax module built in Python (what :func:`load_model`
    does for files), so coverage reports can name its operators."""
    if "main" not in [gv.name_hint for gv in mod.get_global_vars()]:
        raise ModelLoadError(f"{name}: the IRModule has no 'main' function")
    main = mod["main"]
    inputs = tuple(_relax_tensor_info(p.name, p.ty) for p in main.params)
    ret = main.ret_ty
    rets = ret.fields if isinstance(ret, relax.TupleType) else [ret]
    outputs = tuple(_relax_tensor_info(f"output_{k}", r) for k, r in enumerate(rets))
    mod = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    return _finish(mod, name, "relax", inputs, outputs, None)


def _relax_tensor_info(name: str, sinfo) -> TensorInfo:
    if not isinstance(sinfo, relax.TensorType) or sinfo.shape is None:
        return TensorInfo(name=name, shape=(), dtype=str(getattr(sinfo, "dtype", "unknown")))
    shape = tuple(int(d) if isinstance(d, tvm.ir.prim.expr.IntImm) else -1 for d in sinfo.shape.values)
    return TensorInfo(name=name, shape=shape, dtype=str(sinfo.dtype))


_LOADERS = {".tflite": _load_tflite, ".onnx": _load_onnx, ".json": _load_relax_json}


# ---------------------------------------------------------------------------------------------
# Provenance: which bindings each source op became, and readable binding names.

# Ops that only move quantization around; a Relax module's "operator" is named by its first
# call that is not one of these.
GLUE_OPS = frozenset(
    {
        "relax.quantize",
        "relax.dequantize",
        "relax.astype",
        "relax.clip",
        "relax.reshape",
        "relax.permute_dims",
        "relax.multiply",
        "relax.expand_dims",
        "relax.squeeze",
    }
)


def _finish(mod, path, fmt, inputs, outputs, records) -> tvm.IRModule:
    main = mod["main"]
    bindings = _main_bindings(main)
    if records is None:
        records = _relax_records(bindings, main)
    ops = _assign_bindings(bindings, records, main.params)
    mod = _rename_bindings(mod, ops)
    info = ModelInfo(path=str(path), format=fmt, inputs=inputs, outputs=outputs, ops=tuple(ops))
    return mod.with_attr(MODEL_INFO_ATTR, info.to_json())


def _main_bindings(main) -> list:
    body = main.body
    return [b for block in body.blocks for b in block.bindings]


def _relax_records(bindings, main):
    """Source ops of a hand-written Relax module: one per binding that yields a quantized
    tensor (int8/uint8) or the function's result, named after its first non-glue call."""
    out_vars = set()
    body = main.body.body
    for v in relax.analysis.free_vars(body) if not isinstance(body, relax.Var) else [body]:
        out_vars.add(v)
    records = []
    for b in bindings:
        if isinstance(b.value, relax.Var):  # an alias (gv = lv) is no operator
            continue
        sinfo = b.var.ty
        quantized = isinstance(sinfo, relax.TensorType) and sinfo.dtype in ("int8", "uint8")
        if quantized or b.var in out_vars or not isinstance(b.var, relax.DataflowVar):
            records.append((None, None, b.var))
    return records


def _call_op_name(value) -> str | None:
    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
        return value.op.name
    return None


def _assign_bindings(bindings, records, params_of=()) -> list[SourceOp]:
    var_of_value = {}
    for b in bindings:
        var_of_value.setdefault(b.value, b.var)
    binding_of_var = {b.var: b for b in bindings}
    owner: dict = {}
    order = {b.var: k for k, b in enumerate(bindings)}
    ops: list[SourceOp] = []
    for index, (name, kind, ret) in enumerate(records):
        anchors = _anchor_vars(ret, var_of_value, binding_of_var)
        owned = []
        stack = list(anchors)
        while stack:
            v = stack.pop()
            if v in owner or v not in binding_of_var:
                continue
            owner[v] = index
            owned.append(v)
            stack.extend(relax.analysis.free_vars(binding_of_var[v].value))
        # Output binding first, the rest in program order.
        rest = sorted((v for v in owned if v not in anchors), key=lambda v: order[v])
        owned = [v for v in anchors if v in owned] + rest
        if kind is None:  # hand-written Relax: name by the first non-glue call
            calls = [_call_op_name(binding_of_var[v].value) for v in sorted(owned, key=lambda v: order[v])]
            calls = [c for c in calls if c]
            kind = next((c for c in calls if c not in GLUE_OPS), calls[-1] if calls else "relax.binding")
            name = f"{kind.removeprefix('relax.').replace('.', '_')}_{index}"
        ops.append(
            SourceOp(
                index=index,
                name=name,
                op=kind,
                vars=tuple(owned),  # Vars for now; renamed to strings below
                qdq=kind in ("QuantizeLinear", "DequantizeLinear"),
            )
        )
    params = set(params_of)
    out = []
    for op in ops:
        producers = set()
        for v in op.vars:
            for u in relax.analysis.free_vars(binding_of_var[v].value):
                if u in owner and owner[u] != op.index:
                    producers.add(owner[u])
                elif u in params:
                    producers.add(-1)
        out.append(replace(op, producers=tuple(sorted(producers))))
    return out


def _anchor_vars(ret, var_of_value, binding_of_var) -> list:
    if ret is None:
        return []
    if isinstance(ret, relax.Var):
        return [ret] if ret in binding_of_var else []
    if isinstance(ret, relax.Tuple):
        out = []
        for f in ret.fields:
            out += _anchor_vars(f, var_of_value, binding_of_var)
        return out
    v = var_of_value.get(ret)
    return [v] if v is not None else []


_IDENT = re.compile(r"[^0-9a-zA-Z_]+")


def _rename_bindings(mod, ops: list[SourceOp]) -> tvm.IRModule:
    names = {}
    for op in ops:
        stem = _IDENT.sub("_", op.op.removeprefix("relax.")).strip("_").lower() or "op"
        for k, v in enumerate(op.vars):
            if not isinstance(v, relax.DataflowVar):  # the function's output keeps its name
                names[v] = v.name
            else:
                names[v] = f"{stem}_{op.index}" if k == 0 else f"{stem}_{op.index}_{k}"
    spans = {}
    for op in ops:
        # Q/DQ glue is marked so that a composite is named after its compute operator.
        label = QDQ_SPAN_PREFIX + op.name if op.qdq else op.name
        span = tvm.ir.Span(tvm.ir.SourceName(label), op.index, op.index, 0, 0)
        for v in op.vars:
            spans[v] = span
    renamed = _Renamer(names, spans, mod).visit_expr(mod["main"])
    new_names = {}
    for op in ops:
        new_names[op.index] = tuple(names[v] for v in op.vars)
    ops[:] = [replace(o, vars=new_names[o.index]) for o in ops]
    mod["main"] = renamed
    return mod


@mutator
class _Renamer(PyExprMutator):
    """Re-emits main's dataflow bindings under the names provenance gave them, each call
    carrying a span whose source name is its source operator (passes keep spans, so a
    composite still knows which operator it offloads)."""

    def __init__(self, names, spans, mod=None):
        super().__init__(mod)
        self.names = names
        self.spans = spans

    def visit_var_binding_(self, binding):
        name = self.names.get(binding.var)
        if name is None or not isinstance(binding.var, relax.DataflowVar):
            return super().visit_var_binding_(binding)
        value = self.visit_expr(binding.value)
        span = self.spans.get(binding.var)
        if span is not None and isinstance(value, relax.Call):
            value = relax.Call(value.op, value.args, value.attrs, value.ty_args, span)
        new_var = self.builder_.emit(value, name)
        self.set_var_remap(binding.var, new_var)


def source_op_of(expr) -> str | None:
    """The source operator name that provenance stamped on a call's span, if any."""
    span = getattr(expr, "span", None)
    if span is None or span.source_name is None:
        return None
    name = str(span.source_name.name)
    return None if name.startswith(QDQ_SPAN_PREFIX) else name
