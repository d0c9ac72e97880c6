"""A Relax module read from a ``.json`` file is data: checked before and after TVM parses it.

``tvm.ir.load_json`` rebuilds whatever objects the file names. A module may call any registered
TVM global by name (``ExternFunc``, ``call_packed``), carry TIR PrimFuncs that call native code,
nest calls deep enough to overflow TVM's recursive visitors, or declare types that its
operators do not produce (the CPU build then sizes buffers from the lie). So a model file
passes three gates, each refusing with one line that names what it found:

1. :func:`check_text`, before TVM sees a byte: the size, the node count, the nesting depth of
   the object graph, every node's type against :data:`NODE_TYPES`, every operator against
   :data:`TENSOR_OPS`, and every serialized tensor's header against its payload.
2. :func:`rebuild`, after parsing: the module holds only Relax functions without partition
   attributes, ``main`` calls only allowed operators, and every binding is re-emitted through a
   fresh ``BlockBuilder``, which infers its type again; a declared type that differs from the
   inferred one is refused. The rebuilt module, not the parsed one, goes on.
3. Per-operator attribute checks (:data:`ATTR_CHECKS`) for values TVM's type inference would
   divide by or index with (a conv with ``groups=0``, a ``take`` without bounds checks).

Pre-partitioned modules (``Codegen`` / ``Composite`` functions) are not accepted from files:
save the module before ``partition_for_npu``; npu_byoc partitions it itself. docs/models.md
describes what a Relax model file may hold.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import json
import math
import struct
from collections.abc import Callable
from pathlib import Path

from ..errors import ModelLoadError, tvm_message
from ..util.relax_utils import int_list
from ..util.tvm_scopes import builders_closed_on_error

MAX_BYTES = 256 << 20
MAX_NODES = 4_000_000
# Graph depth of the serialized objects. Modules the frontends produce are in A-normal form,
# so their depth is ~20 whatever their size; TVM's recursive visitors overflow the C stack
# somewhere past a few thousand.
MAX_DEPTH = 256

# Object types a model file may hold: Relax expressions, types, shapes, attributes and the
# arithmetic of symbolic dimensions. No ExternFunc, no TIR function, no If (recursion).
NODE_TYPES = frozenset({
    "None", "int", "float", "bool", "DataType",
    "ffi.String", "ffi.Array", "ffi.Map", "ffi.Tensor",
    "ir.IRModule", "ir.GlobalVar", "ir.DictAttrs", "ir.SourceMap", "ir.SourceName", "ir.Span",
    "ir.Op", "ir.Call", "ir.Var", "ir.GenericConst", "ir.Tuple", "ir.TupleGetItem",
    "ir.PrimType", "ir.TupleType", "ir.IntImm", "ir.FloatImm",
    "ir.Type",  # a missing type (unnormalized Relax): the rebuild infers it or refuses
    "relax.expr.Function", "relax.expr.SeqExpr", "relax.expr.DataflowBlock",
    "relax.expr.BindingBlock", "relax.expr.VarBinding", "relax.expr.DataflowVar",
    "relax.expr.ShapeExpr", "relax.expr.PrimValue", "relax.expr.StringImm",
    "relax.expr.DataTypeImm",
    "relax.FuncType", "relax.ShapeType", "relax.TensorType", "relax.ObjectType",
    "relax.PrimType",
    # symbolic dimensions (n * 2, n // 4, ...)
    "prim.Add", "prim.Sub", "prim.Mul", "prim.Div", "prim.Mod", "prim.FloorDiv",
    "prim.FloorMod", "prim.Min", "prim.Max", "prim.EQ", "prim.NE", "prim.LT", "prim.LE",
    "prim.GT", "prim.GE", "prim.And", "prim.Or", "prim.Not", "prim.Cast",
})  # fmt: skip
ATTRS_PREFIX = "relax.attrs."  # operator attributes are plain data

# The tensor operators TVM's TFLite and ONNX frontends produce (and users write by hand).
# Not here: call_tir / call_packed / call_dps_packed and every other call into code, closures,
# memory and VM builtins, printing and asserts, devices, distributed and gradient ops, and
# scatters / gathers whose indices TVM does not bounds-check.
TENSOR_OPS = frozenset("relax." + name for name in """
    abs acos acosh add arange argmax argmin argsort asin asinh astype atan atan2 atanh
    bitwise_and bitwise_not bitwise_or bitwise_xor broadcast_to ceil clip concat cos cosh
    cumprod cumsum dequantize divide einsum equal erf exp expand_dims flatten flip floor
    floor_divide floor_mod full full_like greater greater_equal isfinite isinf isnan
    layout_transform left_shift less less_equal log logical_and logical_not logical_or
    logical_xor matmul max maximum mean min minimum mod multiply negative not_equal ones
    ones_like outer permute_dims power prod quantize repeat reshape right_shift round rsqrt
    sigmoid sign sin sinh sort split sqrt square squeeze stack std strided_slice subtract sum
    take tan tanh tile topk tril triu trunc variance where zeros zeros_like
    image.resize2d
    nn.adaptive_avg_pool1d nn.adaptive_avg_pool2d nn.avg_pool1d nn.avg_pool2d nn.batch_flatten
    nn.batch_norm nn.conv1d nn.conv1d_transpose nn.conv2d nn.conv2d_transpose nn.dropout
    nn.gelu nn.gelu_tanh nn.group_norm nn.instance_norm nn.layer_norm nn.leakyrelu
    nn.log_softmax nn.max_pool1d nn.max_pool2d nn.pad nn.pixel_shuffle nn.prelu nn.relu
    nn.rms_norm nn.selu nn.silu nn.softmax nn.softplus
""".split())  # fmt: skip

PARTITION_ATTRS = ("Codegen", "Composite", "Primitive")

_TENSOR_MAGIC = 0xDD5E40F096B4A13F


def _refuse(path, what: str) -> ModelLoadError:
    return ModelLoadError(f"{path}: {what}")


# ---------------------------------------------------------------------------------------------
# Gate 1: the text, before TVM parses it


def check_text(path: Path, data: bytes) -> None:
    """Refuse a file that TVM should not be asked to parse."""
    if len(data) > MAX_BYTES:
        raise _refuse(path, f"{len(data):,} bytes: a Relax model file may be at most {MAX_BYTES >> 20} MiB")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise _refuse(path, f"not a Relax module saved with tvm.ir.save_json ({type(err).__name__})") from None
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    if not isinstance(nodes, list) or not all(isinstance(n, dict) for n in nodes):
        raise _refuse(path, "not a Relax module saved with tvm.ir.save_json (no node list)")
    if len(nodes) > MAX_NODES:
        raise _refuse(path, f"{len(nodes):,} objects: a Relax model file may hold at most {MAX_NODES:,}")
    kinds = [node.get("type") for node in nodes]
    if not all(isinstance(k, str) for k in kinds):
        raise _refuse(path, "not a Relax module saved with tvm.ir.save_json (an object has no type)")
    refused = sorted({k for k in kinds if k not in NODE_TYPES and not k.startswith(ATTRS_PREFIX)}, key=_severity)
    if refused and _severity(refused[0])[0] < 2:
        raise _refuse(path, f"the module holds a {_describe(refused[0])}: {_ALLOWED_SENTENCE}")
    marks = sorted({n.get("data") for n in nodes if n["type"] == "ffi.String"} & set(PARTITION_ATTRS))
    if marks:
        raise _refuse(path, _PARTITIONED.format(what=f"a function with attribute {marks[0]}"))
    if refused:
        raise _refuse(path, f"the module holds a {_describe(refused[0])}: {_ALLOWED_SENTENCE}")
    root = doc.get("root_index")
    if not isinstance(root, int) or isinstance(root, bool) or not 0 <= root < len(nodes):
        raise _refuse(path, "not a Relax module saved with tvm.ir.save_json (no root object)")
    # TVM's reader decodes the graph recursively from the root. save_json writes every object
    # after the objects it refers to, so references that point backwards are all a genuine
    # file has: that rules out cycles, and bounds the reader's recursion by the depth below.
    depth = [0] * len(nodes)
    for i, node in enumerate(nodes):
        kind = node["type"]
        body = node.get("data")
        if kind == "ir.Op" and body not in TENSOR_OPS:
            raise _refuse(path, f"the module calls operator {body!r}: {_ALLOWED_SENTENCE}")
        if kind == "ffi.Tensor":
            _check_tensor(path, i, body)
        refs = _references(path, i, kind, body)
        if kind in _RANKED:
            _check_rank(path, i, kind, body, nodes)
        if kind == "ir.Call":
            _check_call_attrs(path, i, body, nodes)
        depth[i] = 1 + max((depth[r] for r in refs), default=0)
        if depth[i] > MAX_DEPTH:
            raise _refuse(path, f"the module nests objects more than {MAX_DEPTH} deep: {_ALLOWED_SENTENCE}")


# Types that carry their rank twice: as ``ndim`` and as the length of their dimensions. TVM
# trusts ``ndim`` (a constant typed rank 2^31 - 1 over a scalar reached the CPU build, which
# failed with a traceback), and its own constructors keep the two equal: a file must too.
_RANKED = {"relax.TensorType": "shape", "relax.ShapeType": "values"}


def _check_rank(path: Path, i: int, kind: str, body, nodes: list) -> None:
    ndim = body.get("ndim") if isinstance(body, dict) else None
    if not isinstance(ndim, int) or isinstance(ndim, bool) or ndim < -1:
        raise _refuse(path, f"object {i} ({kind}) has rank {ndim!r}: {_ALLOWED_SENTENCE}")
    dims = body.get(_RANKED[kind])
    if kind == "relax.TensorType" and isinstance(dims, int) and nodes[dims]["type"] == "relax.expr.ShapeExpr":
        dims = nodes[dims]["data"].get("values") if isinstance(nodes[dims].get("data"), dict) else None
    if isinstance(dims, int) and not isinstance(dims, bool) and nodes[dims]["type"] == "ffi.Array":
        n = len(nodes[dims]["data"])
        if ndim != n:
            raise _refuse(path, f"object {i} ({kind}) declares rank {ndim} over {n} dimension(s): {_ALLOWED_SENTENCE}")


# The attributes an operator reads whose registration does not name them (TVM casts a call's
# attributes to the registered type without checking: a group_norm call carrying a quantize's
# attributes crashed the process with SIGSEGV in type inference).
_UNREGISTERED_ATTRS = {
    "relax.matmul": "relax.attrs.MatmulAttrs",
    "relax.argmax": "relax.attrs.ArgmaxArgminAttrs", "relax.argmin": "relax.attrs.ArgmaxArgminAttrs",
    **{f"relax.{op}": "relax.attrs.StatisticalAttrs" for op in ("max", "mean", "min", "prod", "std", "sum", "variance")},
}  # fmt: skip


@functools.cache
def _attrs_type(op: str) -> str:
    """The attribute type ``op``'s calls must carry ("None": none)."""
    import tvm

    return str(tvm.ir.Op.get(op).attrs_type_key) or _UNREGISTERED_ATTRS.get(op, "None")


def _check_call_attrs(path: Path, i: int, body, nodes: list) -> None:
    if not isinstance(body, dict) or not isinstance(body.get("op"), int):
        return
    op = nodes[body["op"]]
    if op["type"] != "ir.Op":
        return
    attrs = body.get("attrs", 0)
    have = nodes[attrs]["type"] if isinstance(attrs, int) and not isinstance(attrs, bool) else "None"
    want = _attrs_type(op["data"])
    if have != want:
        what = "no attributes" if have == "None" else f"attributes {have}"
        raise _refuse(path, f"call {i} to {op['data']} carries {what} (it takes {'none' if want == 'None' else want})")


_SEQUENCES = frozenset({"ffi.Array", "ffi.Map"})
# Field types TVM's serializer writes inline (None, int, bool, float, DataType): every other
# field of an object holds the index of another object.
_INLINE_FIELD_TYPES = frozenset({0, 1, 2, 3, 5})


@functools.cache
def _reference_fields(kind: str) -> frozenset[str] | None:
    """The fields of a ``kind`` object that refer to other objects (None: not a TVM type)."""
    from tvm_ffi import core

    try:
        info = core._lookup_or_register_type_info_from_type_key(kind)
    except Exception:
        return None
    fields: set[str] = set()
    while info is not None:
        fields.update(f.name for f in info.fields if f.field_static_type_index not in _INLINE_FIELD_TYPES)
        info = info.parent_type_info
    return frozenset(fields)


def _references(path: Path, i: int, kind: str, body) -> list[int]:
    if kind in _SEQUENCES:
        refs = body if isinstance(body, list) else None
    elif isinstance(body, dict):
        fields = _reference_fields(kind)
        if fields is None:
            raise _refuse(path, f"object {i} ({kind}) is not a TVM object")
        refs = [body[f] for f in fields if f in body]
    elif body is None or isinstance(body, str | int | float):  # a leaf written as plain data
        return []
    else:
        raise _refuse(path, f"object {i} ({kind}) is not a TVM object")
    if refs is None or not all(isinstance(r, int) and not isinstance(r, bool) and 0 <= r < i for r in refs):
        raise _refuse(path, f"object {i} ({kind}) refers to an object not written before it: {_ALLOWED_SENTENCE}")
    return refs


_PARTITIONED = (
    "the module holds {what}: a partitioned module is not accepted from a file; "
    "save the module before partition_for_npu"
)
_ALLOWED_SENTENCE = "a Relax model file may hold only Relax functions of tensor operators (docs/models.md)"


def _severity(kind: str) -> tuple[int, str]:
    """Name the code-carrying object first (an ExternFunc, then a PrimFunc), not its parts."""
    return (0 if kind.endswith("ExternFunc") else 1 if kind.endswith("PrimFunc") else 2, kind)


def _describe(kind: str) -> str:
    if kind in ("relax.expr.ExternFunc", "ir.ExternFunc"):
        return "call into native code by name (ExternFunc)"
    if kind.startswith(("tirx.", "tir.", "s_tir.")) and kind.endswith("PrimFunc"):
        return "TIR function (PrimFunc)"
    if kind.startswith(("tirx.", "tir.", "s_tir.")):
        return f"TIR object ({kind})"
    return repr(kind)


def _check_tensor(path: Path, index: int, body) -> None:
    """A serialized tensor: magic, device, ndim, dtype, shape and a payload of exactly the size
    they imply (TVM's reader trusts the header)."""
    try:
        raw = base64.b64decode(body, validate=True) if isinstance(body, str) else None
    except (binascii.Error, ValueError):
        raw = None
    if raw is None or len(raw) < 28:
        raise _refuse(path, f"tensor object {index} is not a serialized tensor")
    magic, _reserved, _dev_type, _dev_id, ndim = struct.unpack_from("<QQiii", raw, 0)
    if magic != _TENSOR_MAGIC or not 0 <= ndim <= 8:
        raise _refuse(path, f"tensor object {index} has a bad header")
    code, bits, lanes = struct.unpack_from("<BBH", raw, 28)
    offset = 32
    if len(raw) < offset + 8 * ndim + 8:
        raise _refuse(path, f"tensor object {index} is truncated")
    shape = struct.unpack_from(f"<{ndim}q", raw, offset)
    (nbytes,) = struct.unpack_from("<q", raw, offset + 8 * ndim)
    payload = len(raw) - offset - 8 * ndim - 8
    if bits == 0 or bits % 8 or lanes != 1 or any(d < 0 for d in shape):
        raise _refuse(path, f"tensor object {index} has dtype code {code}, {bits} bits, {lanes} lanes, shape {list(shape)}")
    if nbytes != math.prod(shape) * bits // 8 or nbytes != payload:
        raise _refuse(
            path, f"tensor object {index} of shape {list(shape)} declares {nbytes} bytes and holds {payload}"
        )


# ---------------------------------------------------------------------------------------------
# Gates 2 and 3: the parsed module, rebuilt with the types TVM infers


def rebuild(path: Path, mod):
    """Check the parsed module and return it rebuilt through a fresh BlockBuilder."""
    import tvm
    from tvm import relax

    for gv, func in mod.functions_items():
        name = gv.name_hint
        if not isinstance(func, relax.Function):
            raise _refuse(path, f"function {name!r} is a {type(func).__name__}: {_ALLOWED_SENTENCE}")
        attrs = dict(func.attrs) if func.attrs is not None else {}
        found = [a for a in PARTITION_ATTRS if a in attrs]
        if found:
            raise _refuse(path, _PARTITIONED.format(what=f"function {name!r} with attribute {found[0]}"))
    names = [gv.name_hint for gv in mod.get_global_vars()]
    if names != ["main"]:
        others = sorted(n for n in names if n != "main")
        raise _refuse(path, f"the module holds functions {others} besides 'main': a model file holds one function, main")
    main = mod["main"]
    try:
        return tvm.IRModule({"main": _rebuild_main(path, main)}, attrs=mod.attrs)
    except ModelLoadError:
        raise
    except Exception as err:  # TVM's type inference refusing an operator's arguments
        raise _refuse(path, f"invalid Relax: {tvm_message(err)}") from None


def _rebuild_main(path: Path, main):
    import tvm
    from tvm import relax

    for p in main.params:
        if not isinstance(p.ty, relax.TensorType) or p.ty.shape is None:
            raise _refuse(path, f"parameter {p.name!r} is a {type(p.ty).__name__}: inputs must be tensors of known rank")
    body = main.body
    if not isinstance(body, relax.SeqExpr):
        raise _refuse(path, "'main' is not normalized (its body is not a sequence of bindings)")
    bb = relax.BlockBuilder()
    env: dict = {p: p for p in main.params}
    with builders_closed_on_error(), bb.function("main", list(main.params), attrs=_plain_attrs(main)):
        for block in body.blocks:
            dataflow = isinstance(block, relax.DataflowBlock)
            with bb.dataflow() if dataflow else contextlib.nullcontext():
                for binding in block.bindings:
                    env[binding.var] = _emit(path, bb, binding, env, dataflow)
        bb.emit_func_output(_arg(path, body.body, env))
    func = bb.get()["main"]
    if not tvm_ffi_equal(func.ret_ty, main.ret_ty):
        declared, inferred = _two_types(main.ret_ty, func.ret_ty)
        raise _refuse(path, f"'main' declares return type {declared}, but returns {inferred}")
    return func


def _emit(path: Path, bb, binding, env: dict, dataflow: bool):
    from tvm import relax

    if not isinstance(binding, relax.VarBinding):
        raise _refuse(path, f"binding {binding.var.name!r} is a {type(binding).__name__}: {_ALLOWED_SENTENCE}")
    value = _arg(path, binding.value, env, top=True)
    var = binding.var
    if dataflow and not isinstance(var, relax.DataflowVar):
        new = bb.emit_output(value, name_hint=var.name)
    else:
        new = bb.emit(value, name_hint=var.name)
    if not tvm_ffi_equal(var.ty, new.ty):
        declared, inferred = _two_types(var.ty, new.ty)
        raise _refuse(path, f"binding {var.name!r} declares type {declared}, but its value has {inferred}")
    return new


def _plain_attrs(func) -> dict | None:
    if func.attrs is None:
        return None
    return {k: v for k, v in dict(func.attrs).items() if k != "global_symbol"} or None


def _arg(path: Path, expr, env: dict, top: bool = False):
    """``expr`` with its variables renamed to the rebuilt ones (a call's type is inferred again
    when the builder emits it)."""
    import tvm
    from tvm import relax

    from ..util.relax_utils import Constant, constant_value

    if isinstance(expr, relax.Var):
        if expr not in env:
            raise _refuse(path, f"{expr.name!r} is used before it is defined")
        return env[expr]
    if isinstance(expr, Constant):
        declared = expr.ty
        if isinstance(declared, tvm.ir.PrimType):  # a scalar (clip bounds, ...): no buffer
            return expr
        value = constant_value(expr)
        if not isinstance(declared, relax.TensorType) or tuple(int(d) for d in declared.shape.values) != value.shape \
                or int(declared.ndim) != value.ndim or str(declared.dtype) != str(value.dtype):  # fmt: skip
            raise _refuse(path, f"a constant declares type {_type_text(declared)} but holds {value.dtype}{list(value.shape)}")
        return expr
    if isinstance(expr, relax.Tuple):
        return relax.Tuple([_arg(path, f, env) for f in expr.fields])
    if isinstance(expr, relax.TupleGetItem):
        return relax.TupleGetItem(_arg(path, expr.tuple_value, env), int(expr.index))
    if isinstance(expr, relax.ShapeExpr):
        return relax.ShapeExpr(list(expr.values))
    if isinstance(expr, relax.Call):
        if not top:
            raise _refuse(path, "'main' is not normalized (a call nested in another call's arguments)")
        op = expr.op
        if not isinstance(op, tvm.ir.Op):
            raise _refuse(path, f"'main' calls {type(op).__name__} {getattr(op, 'name_hint', '')!r}: {_ALLOWED_SENTENCE}")
        if op.name not in TENSOR_OPS:
            raise _refuse(path, f"the module calls operator {op.name!r}: {_ALLOWED_SENTENCE}")
        args = [_arg(path, a, env) for a in expr.args]
        check = ATTR_CHECKS.get(op.name)
        if check is not None:
            problem = check(expr, args)
            if problem:
                raise _refuse(path, f"{op.name.removeprefix('relax.')}: {problem}")
        return relax.Call(op, args, expr.attrs)
    if type(expr).__name__ in ("PrimValue", "StringImm", "DataTypeImm"):
        return expr
    raise _refuse(path, f"'main' holds a {type(expr).__name__}: {_ALLOWED_SENTENCE}")


def tvm_ffi_equal(a, b) -> bool:
    import tvm_ffi

    return bool(tvm_ffi.structural_equal(a, b, map_free_vars=True))


def _two_types(declared, inferred) -> tuple[str, str]:
    """Two types that differ, as texts that differ: the rank fields too when the dtype and
    dimensions print the same (a file can make them disagree with the dimensions)."""
    a, b = _type_text(declared), _type_text(inferred)
    if a == b:
        a, b = _type_ranks(declared), _type_ranks(inferred)
    if a == b:
        a, b = a + " (differing in a field not shown)", b
    return a, b


def _type_ranks(t) -> str:
    from tvm import relax

    if isinstance(t, relax.TupleType):
        return "(" + ", ".join(_type_ranks(f) for f in t.fields) + ")"
    if not isinstance(t, relax.TensorType):
        return _type_text(t)
    shape_ndim = getattr(getattr(t.shape, "ty", None), "ndim", None)
    return f"{_type_text(t)} (ndim {int(t.ndim)}, its shape's ndim {shape_ndim})"


def _type_text(t) -> str:
    import tvm
    from tvm import relax

    if isinstance(t, relax.TensorType):
        dims = "?" if t.shape is None else ", ".join(
            str(int(d)) if isinstance(d, tvm.ir.prim.expr.IntImm) else str(d) for d in t.shape.values
        )
        return f"{t.dtype}[{dims}]"
    if type(t) is tvm.ir.Type:
        return "none (the module is not normalized)"
    return type(t).__name__


# ---------------------------------------------------------------------------------------------
# Gate 3: attribute values TVM's type inference divides by or indexes with


def _int_list(values) -> list[int]:
    return [] if values is None else list(int_list(values))


def _window(call, _args) -> str | None:
    a = call.attrs
    for field in ("strides", "dilation", "pool_size"):
        bad = [v for v in _int_list(getattr(a, field, None)) if v < 1]
        if bad:
            return f"{field} {_int_list(getattr(a, field))}: every value must be >= 1"
    if any(v < 0 for v in _int_list(getattr(a, "padding", None))):
        return f"padding {_int_list(a.padding)}: every value must be >= 0"
    if getattr(a, "groups", 1) is not None and int(getattr(a, "groups", 1)) < 1:
        return f"groups {int(a.groups)}: must be >= 1"
    return None


def _take(call, args) -> str | None:
    """TVM's take in mode 'fast' reads without bounds checks: only constant, in-range indices."""
    from tvm import relax

    from ..util.relax_utils import Constant, constant_value

    mode = str(getattr(call.attrs, "mode", "fast"))
    if mode in ("clip", "wrap"):
        return None
    data, indices = args[0], args[1]
    if not isinstance(indices, Constant):
        return f"mode {mode!r} with run-time indices reads without bounds checks (use mode 'clip')"
    if not isinstance(data.ty, relax.TensorType) or data.ty.shape is None:
        return "the data's shape is unknown"
    axis = call.attrs.axis
    dims = list(data.ty.shape.values)
    axis = 0 if axis is None else int(axis)
    if not -len(dims) <= axis < max(len(dims), 1):
        return f"axis {axis} out of range for rank {len(dims)}"
    extent = dims[axis % len(dims)] if dims else None
    try:
        extent = int(extent)
    except (TypeError, ValueError):
        return "indices into a dimension of unknown size"
    idx = constant_value(indices)
    if idx.size and (int(idx.min()) < -extent or int(idx.max()) >= extent):
        return f"indices {int(idx.min())}..{int(idx.max())} out of range for a dimension of {extent}"
    return None


def _strided_slice(call, _args) -> str | None:
    if bool(getattr(call.attrs, "assume_inbound", False)):
        return "assume_inbound=True skips the bounds checks"
    return None


def _operands_of(kinds: tuple[str, ...], what: str) -> Callable:
    """TVM infers a bitwise, shift or logical op's type for any dtype; its lowering then fails
    on floats (an InternalError traceback under run; found by the files fuzzer)."""

    def check(call, args) -> str | None:
        from tvm import relax

        for a in args:
            t = getattr(a, "ty", None)
            if isinstance(t, relax.TensorType) and not str(t.dtype).startswith(kinds):
                return f"an operand of dtype {t.dtype}: this operator takes {what} tensors"
        return None

    return check


_integer_operands = _operands_of(("int", "uint", "bool"), "integer")
_bool_operands = _operands_of(("bool",), "bool")


def _clip(call, args) -> str | None:
    """TVM lowers an integer clip's bounds to constants of the tensor's dtype and fails (a
    traceback under run) on one outside its range: a clip of int8 to 2^63 - 1 (found by the
    files fuzzer)."""
    import numpy as np
    from tvm import relax

    t = getattr(args[0], "ty", None) if args else None
    if not isinstance(t, relax.TensorType) or not str(t.dtype).startswith(("int", "uint")):
        return None
    try:
        info = np.iinfo(str(t.dtype))
    except TypeError:  # int4 and other widths numpy has no type for
        return None
    for a in args[1:]:
        v = getattr(a, "value", None)
        v = getattr(v, "value", v)  # a PrimValue holds an IntImm / FloatImm
        if isinstance(v, int | float) and not (math.isfinite(v) and info.min <= v <= info.max):
            return f"bound {v} is outside the range of {t.dtype} ({info.min}..{info.max})"
    return None


ATTR_CHECKS: dict[str, Callable] = {
    "relax.clip": _clip,
    **{f"relax.{op}": _integer_operands for op in (
        "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "left_shift", "right_shift",
    )},  # fmt: skip
    **{f"relax.{op}": _bool_operands for op in ("logical_and", "logical_or", "logical_xor", "logical_not")},
    **{f"relax.nn.{op}": _window for op in (
        "conv1d", "conv2d", "conv1d_transpose", "conv2d_transpose", "avg_pool1d", "avg_pool2d",
        "max_pool1d", "max_pool2d",
    )},  # fmt: skip
    "relax.take": _take,
    "relax.strided_slice": _strided_slice,
}


__all__ = ["check_text", "rebuild", "TENSOR_OPS", "NODE_TYPES", "MAX_BYTES", "MAX_DEPTH", "MAX_NODES"]

