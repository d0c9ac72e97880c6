"""Files mode, Relax ``.json``: mutations through the JSON object graph that ``tvm.ir.save_json``
writes (docs/fuzz.md).

A seed is a committed fixture imported with :func:`npu_byoc.load_model` and saved with
``tvm.ir.save_json``; it is made once per campaign under ``OUT/seeds/`` with a zero input of
the shapes :func:`npu_byoc.frontends.load.model_info` gives. Each mutator edits the parsed JSON
document in place (``doc["nodes"]``, ``doc["root_index"]``) and returns what it did and, when
the result must never load, why (``must_refuse``): a module that still loads after an
operator was swapped for ``relax.call_packed`` is a hole in the gates even when every command
exits 0.

Every reference of a node is an index into ``nodes``; objects are written after the objects
they refer to. :func:`insert` and :func:`delete` keep the other references right, so that a
mutation reaches the check it aims at instead of stopping at the first forward reference.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ...frontends import relax_json

# Relax seeds: small fixtures only (a case runs `run --backend cpu`, a TVM compile of the whole
# model).
SEED_MAX_BYTES = 12_000
NUMBERS = [0, -1, 2**31, 2**31 - 1, -(2**31) - 1, 2**63 - 1, -(2**63), 10**30, 1e308, -1e-308]
STRINGS = ["", "int4", "float8_e4m3fn", "handle", "NCHW", "OIHW", "relax.call_packed", "../../etc/passwd",
           "a\nb", "\x00", "x" * 5000, "main", "nearest_neighbor", "float32"]  # fmt: skip
DTYPES = ["int8", "uint8", "int32", "int64", "float32", "float64", "bool", "int4", "handle", "float8_e4m3fn", "int1"]
# Operators that call into code, allocate, print or touch the VM: swapped in half the time.
DANGEROUS_OPS = [
    "relax.call_packed", "relax.call_pure_packed", "relax.call_dps_packed", "relax.call_inplace_packed",
    "relax.call_tir", "relax.call_tir_inplace", "relax.call_tir_with_grad", "relax.call_builtin_with_ctx",
    "relax.call_py_func", "relax.print", "relax.assert_op", "relax.invoke_closure", "relax.invoke_pure_closure",
    "relax.make_closure", "relax.vm.alloc_storage", "relax.vm.alloc_tensor", "relax.vm.kill_object",
    "relax.vm.call_tir_dyn", "relax.memory.alloc_storage", "relax.memory.alloc_tensor", "relax.memory.view",
    "relax.memory.kill_tensor", "relax.to_vdevice", "relax.hint_on_device", "relax.scatter_elements",
    "relax.scatter_nd", "relax.gather_nd", "relax.gather_elements", "tirx.call_extern", "tirx.tvm_call_packed",
]  # fmt: skip
# Node types that carry code or control flow, written over an existing node or added.
CODE_TYPES = ["relax.expr.ExternFunc", "tirx.PrimFunc", "tirx.Evaluate", "tirx.Call", "relax.expr.If",
              "relax.expr.MatchCast", "relax.expr.Function", "runtime.Module", "ffi.Function", "Unknown.Type"]  # fmt: skip


def seed_fixtures(files: list[Path]) -> list[Path]:
    return [p for p in files if p.stat().st_size <= SEED_MAX_BYTES]


def make_seed(src: Path, seeds: Path) -> Path:
    """``seeds/<fixture name>/`` with ``input_<k>.npy`` (zeros of the model's input shapes) and
    ``model.json``, made once per campaign; no ``model.json`` when the saved module does not
    load back (an importer's PrimFunc: the gates refuse it, so it is no Relax seed)."""
    import tvm

    from ... import load_model
    from ...errors import NpuByocError

    folder = seeds / src.name
    done, bad = folder / "model.json", folder / "not-a-seed.txt"
    if done.exists() or bad.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    try:
        mod = load_model(src)
    except NpuByocError as err:  # e.g. an open input dimension: no inputs, no seed
        bad.write_text(f"{err}\n")
        return folder
    write_inputs(folder, mod)
    tmp = folder / "model.json.tmp"
    tmp.write_text(tvm.ir.save_json(mod))
    try:
        _check_loads(tmp)
    except NpuByocError as err:
        bad.write_text(f"{err}\n")
        tmp.unlink()
        return folder
    tmp.replace(done)
    return folder


def _check_loads(path: Path) -> None:
    from ... import load_model

    final = path.with_name("check.json")
    path.replace(final)
    try:
        load_model(final)
    finally:
        final.replace(path)


def write_inputs(folder: Path, mod) -> list[Path]:
    from ...frontends.load import model_info

    out = []
    for k, t in enumerate(model_info(mod).inputs):
        p = folder / f"input_{k}.npy"
        np.save(p, np.zeros([max(d, 1) for d in t.shape], t.dtype))
        out.append(p)
    return out


def seed_inputs(folder: Path) -> list[Path]:
    return sorted(folder.glob("input_*.npy"), key=lambda p: int(p.stem.split("_")[1]))


# ---------------------------------------------------------------------------------------------
# The object graph


def _ref_slots(node: dict) -> list[tuple]:
    """(container, key) of every reference ``node`` holds."""
    kind, body = node.get("type"), node.get("data")
    if kind in ("ffi.Array", "ffi.Map") and isinstance(body, list):
        return [(body, k) for k in range(len(body))]
    if isinstance(body, dict) and isinstance(kind, str):
        fields = relax_json._reference_fields(kind) or frozenset()
        return [(body, f) for f in body if f in fields and isinstance(body[f], int) and not isinstance(body[f], bool)]
    return []


def insert(doc: dict, at: int, chain: list[dict]) -> None:
    """Insert ``chain`` before node ``at``. The chain's own references are final indices; the
    references of every other node to ``at`` or later move along."""
    nodes, n = doc["nodes"], len(chain)
    for node in nodes:
        for box, key in _ref_slots(node):
            if box[key] >= at:
                box[key] += n
    if doc.get("root_index", -1) >= at:
        doc["root_index"] += n
    nodes[at:at] = chain


def delete(doc: dict, i: int) -> None:
    """Remove node ``i``; references to it now name its successor (often a forward reference)."""
    nodes = doc["nodes"]
    del nodes[i]
    for node in nodes:
        for box, key in _ref_slots(node):
            if box[key] > i:
                box[key] -= 1
    if doc.get("root_index", 0) > i:
        doc["root_index"] -= 1


def _indices(doc: dict, kind: str | tuple) -> list[int]:
    kinds = (kind,) if isinstance(kind, str) else kind
    return [i for i, n in enumerate(doc["nodes"]) if n.get("type") in kinds]


def _pick(rng, items):
    items = list(items)
    return items[int(rng.integers(0, len(items)))] if items else None


@functools.cache
def registered_ops() -> tuple[str, ...]:
    import tvm

    return tuple(sorted(str(n) for n in tvm.ir.Op.list_op_names()))


# ---------------------------------------------------------------------------------------------
# Mutators: (doc, rng, ctx) -> (what, must_refuse or None)


def op_swap(doc, rng, ctx):
    i = _pick(rng, _indices(doc, "ir.Op"))
    if i is None:
        return "no operator", None
    ops = registered_ops()
    # a third each: an operator that runs code, an allowed tensor operator (with the old call's
    # arguments and attributes: TVM's type inference trusts them), any registered operator
    pool = _pick(rng, [[o for o in DANGEROUS_OPS if o in ops], sorted(relax_json.TENSOR_OPS), ops])
    name = _pick(rng, pool)
    old = doc["nodes"][i]["data"]
    doc["nodes"][i]["data"] = name
    refuse = None if name in relax_json.TENSOR_OPS else f"operator {name} is not a tensor operator"
    return f"operator {old} -> {name}", refuse


def attr_value(doc, rng, ctx):
    """A number to 0 / -1 / 2^31 / huge, a string to another string: in operator attributes,
    integer / float immediates and strings."""
    slots = []
    for i, node in enumerate(doc["nodes"]):
        kind, body = node.get("type"), node.get("data")
        if kind in ("ffi.String", "int", "float", "bool"):  # leaves: IntImm values, strings
            slots.append((node, "data", i))
        elif isinstance(body, dict):
            refs = relax_json._reference_fields(kind) or frozenset()
            slots += [(body, f, i) for f, v in body.items() if f not in refs and isinstance(v, int | float | str)]
    if not slots:
        return "no attribute", None
    box, key, i = _pick(rng, slots)
    old = box[key]
    if isinstance(old, str):
        new = _pick(rng, STRINGS + [n["data"] for n in doc["nodes"] if n.get("type") == "ffi.String"])
    elif isinstance(old, bool):
        new = not old
    else:
        new = _pick(rng, NUMBERS)
    box[key] = new
    return f"object {i} ({doc['nodes'][i]['type']}) {key} {str(old)[:40]!r} -> {str(new)[:40]!r}", None


def type_lie(doc, rng, ctx):
    """A tensor type's dtype or one dimension changed, on a private copy (types are shared)."""
    nodes = doc["nodes"]
    t = _pick(rng, [i for i in _indices(doc, "relax.TensorType") if isinstance(nodes[i]["data"].get("shape"), int)
                    and nodes[nodes[i]["data"]["shape"]].get("type") == "relax.expr.ShapeExpr"])  # fmt: skip
    if t is None:
        return "no tensor type", None
    body = nodes[t]["data"]
    if rng.random() < 0.2:  # the rank field against the dimensions (TVM trusts ndim)
        rank = len(nodes[nodes[body["shape"]]["data"]["values"]]["data"])
        ndim = int(_pick(rng, [-2, -1, 0, rank + 1, 2**31 - 1, -(2**63)]))
        body["ndim"] = ndim
        return f"tensor type {t} ndim {rank} -> {ndim}", None if ndim == rank else f"a rank {ndim} over {rank} dimension(s)"
    if rng.random() < 0.4:
        dtype = _pick(rng, DTYPES)
        insert(doc, t, [{"type": "ir.PrimType", "data": {"span": 0, "dtype": dtype}}])
        nodes[t + 1]["data"]["dtype"] = t
        return f"tensor type {t} dtype -> {dtype}", None
    shape = nodes[body["shape"]]["data"]
    values = list(nodes[shape["values"]]["data"])
    if not values:
        values_new, what = [t + 1], "rank 0 -> 1"
        dim = 5
    else:
        k = int(rng.integers(0, len(values)))
        dim = int(_pick(rng, [0, -1, 2, 3, 1000, 2**31 - 1, 2**40]))
        values_new, what = values[:k] + [t + 1] + values[k + 1:], f"dim {k} -> {dim}"
    # int(dim), IntImm, Array(values), ShapeExpr(values) before the TensorType, which points to them
    chain = [{"type": "int", "data": dim},
             {"type": "ir.IntImm", "data": {"span": 0, "ty": _int64_type(doc, t), "value": t}},
             {"type": "ffi.Array", "data": values_new},
             {"type": "relax.expr.ShapeExpr", "data": {"span": 0, "ty": shape["ty"], "values": t + 2}}]  # fmt: skip
    insert(doc, t, chain)
    nodes[t + len(chain)]["data"]["shape"] = t + 3
    return f"tensor type {t} {what}", None


def _int64_type(doc, before: int) -> int:
    for i, n in enumerate(doc["nodes"][:before]):
        if n.get("type") == "ir.PrimType" and n["data"].get("dtype") == "int64":
            return i
    return 0


def reference(doc, rng, ctx):
    nodes = doc["nodes"]
    i = _pick(rng, [i for i, n in enumerate(nodes) if _ref_slots(n)])
    if i is None:
        return "no reference", None
    box, key = _pick(rng, _ref_slots(nodes[i]))
    how = _pick(rng, ["backward", "forward", "self", "out of range"])
    new = {"backward": int(rng.integers(0, max(i, 1))), "forward": int(rng.integers(i, len(nodes))),
           "self": i, "out of range": int(_pick(rng, [-1, len(nodes), 2**31]))}[how]  # fmt: skip
    box[key] = new
    return f"object {i} ({nodes[i]['type']}) reference {key} -> {new} ({how})", None


def nest(doc, rng, ctx):
    """The value of main's first binding replaced by a chain of unary calls around the first
    parameter, untyped (unnormalized), 10..50,000 deep (issue 22 route 5)."""
    nodes = doc["nodes"]
    x = next((i for i, n in enumerate(nodes) if n.get("type") == "ir.Var"), None)
    at = next((i for i, n in enumerate(nodes) if n.get("type") == "relax.expr.VarBinding"), None)
    if x is None or at is None or x > at:
        return "nothing to nest", None
    depth = int(10 ** rng.uniform(1, math.log10(50_000)))
    op = _pick(rng, ["relax.negative", "relax.nn.relu", "relax.abs"])
    chain = [{"type": "ffi.Array", "data": []}, {"type": "ir.Type", "data": {"span": 0}},
             {"type": "ir.Op", "data": op}]  # fmt: skip
    prev = x
    for _ in range(depth):
        chain.append({"type": "ffi.Array", "data": [prev]})
        chain.append({"type": "ir.Call", "data": {"span": 0, "ty": at + 1, "op": at + 2, "args": at + len(chain) - 1,
                                                  "attrs": 0, "ty_args": at}})  # fmt: skip
        prev = at + len(chain) - 1
    insert(doc, at, chain)
    nodes[at + len(chain)]["data"]["value"] = prev
    # past the depth cap, or unnormalized below it: never a model
    return f"{depth} nested {op} calls", "nested calls (not normalized)"


_TENSOR_MAGIC = 0xDD5E40F096B4A13F


def tensor(doc, rng, ctx):
    """A constant's serialized tensor: its payload or header fields."""
    nodes = doc["nodes"]
    i = _pick(rng, _indices(doc, "ffi.Tensor"))
    if i is None:
        return "no tensor", None
    raw = bytearray(base64.b64decode(nodes[i]["data"]))
    ndim = struct.unpack_from("<i", raw, 24)[0]
    how = _pick(rng, ["not base64", "random payload", "truncate", "extend", "magic", "ndim", "dtype", "shape",
                      "nbytes", "consistent reshape"])  # fmt: skip
    if how == "not base64":
        nodes[i]["data"] = "@@" + nodes[i]["data"][2:]
        return f"tensor {i}: not base64", None
    if how == "random payload":
        start = 40 + 8 * ndim
        raw[start:] = rng.integers(0, 256, len(raw) - start, dtype=np.uint8).tobytes()
    elif how == "truncate":
        raw = raw[: int(rng.integers(0, len(raw)))]
    elif how == "extend":
        raw += bytes(int(rng.integers(1, 4096)))
    elif how == "magic":
        struct.pack_into("<Q", raw, 0, _TENSOR_MAGIC ^ 1)
    elif how == "ndim":
        struct.pack_into("<i", raw, 24, int(_pick(rng, [-1, 9, 1000, 2**31 - 1, ndim + 1])))
    elif how == "dtype":
        struct.pack_into("<BBH", raw, 28, int(rng.integers(0, 20)), int(_pick(rng, [0, 1, 4, 7, 8, 16, 64, 255])),
                         int(_pick(rng, [0, 1, 2, 65535])))  # fmt: skip
    elif how == "shape" and ndim > 0:
        struct.pack_into("<q", raw, 32 + 8 * int(rng.integers(0, ndim)), int(_pick(rng, [0, -1, 2**20, 2**62])))
    elif how == "nbytes":
        struct.pack_into("<q", raw, 32 + 8 * ndim, int(_pick(rng, [0, -1, 2**62, len(raw)])))
    elif how == "consistent reshape":  # a valid tensor of another shape: a lie against its declared type
        bits = raw[29]
        n = int(rng.integers(1, 64))
        head = raw[:24] + struct.pack("<i", 1) + raw[28:32]
        raw = bytearray(head + struct.pack("<qq", n, n * bits // 8) + bytes(n * bits // 8))
    nodes[i]["data"] = base64.b64encode(bytes(raw)).decode()
    return f"tensor {i}: {how}", None


def code_node(doc, rng, ctx):
    """An ExternFunc / PrimFunc / If ... node: an existing expression retyped, or a new object
    named in main's bindings."""
    nodes = doc["nodes"]
    kind = _pick(rng, CODE_TYPES)
    if rng.random() < 0.5:
        i = _pick(rng, _indices(doc, ("ir.Call", "ir.Op", "ir.Var", "relax.expr.Function", "relax.expr.SeqExpr")))
        if i is None:
            return "no expression", None
        old = nodes[i]["type"]
        nodes[i]["type"] = kind
        return f"object {i} {old} -> {kind}", f"a {kind} object"
    arr = _pick(rng, [n["data"]["bindings"] for n in nodes if n.get("type") in ("relax.expr.DataflowBlock",
                                                                                 "relax.expr.BindingBlock")])  # fmt: skip
    if arr is None:
        return "no binding block", None
    chain = [{"type": "ffi.String", "data": "rpc.CreatePipeClient"},
             {"type": kind, "data": {"span": 0, "ty": 0, "global_symbol": arr, "attrs": 0}}]  # fmt: skip
    insert(doc, arr, chain)
    nodes[arr + 2]["data"].append(arr + 1)
    return f"a {kind} object among main's bindings", f"a {kind} object"


def duplicate_main(doc, rng, ctx):
    """A second function entry: another GlobalVar named main (or like it) to the same function."""
    nodes = doc["nodes"]
    m = next((i for i, n in enumerate(nodes) if n.get("type") == "ir.IRModule"), None)
    if m is None:
        return "no module", None
    funcs, gvars = nodes[m]["data"]["functions"], nodes[m]["data"]["global_var_map_"]
    if nodes[funcs].get("type") != "ffi.Map" or len(nodes[funcs]["data"]) < 2:
        return "no function map", None
    gv, fn = nodes[funcs]["data"][:2]
    name = _pick(rng, ["main", "main ", "Main", "main\n", "", "__init__"])
    at = min(funcs, gvars)
    chain = [{"type": "ffi.String", "data": name},
             {"type": "ir.GlobalVar", "data": {**nodes[gv]["data"], "name_hint": at}}]  # fmt: skip
    insert(doc, at, chain)
    funcs, gvars = funcs + 2, gvars + 2
    fn = fn + 2 if fn >= at else fn
    nodes[funcs]["data"] += [at + 1, fn]
    nodes[gvars]["data"] += [at, at + 1]
    return f"a second function {name!r}", f"a second function {name!r}"


def partition_attr(doc, rng, ctx):
    """A Codegen / Composite / Primitive attribute on main: a pre-partitioned module."""
    nodes = doc["nodes"]
    f = _pick(rng, _indices(doc, "relax.expr.Function"))
    if f is None:
        return "no function", None
    attrs = nodes[f]["data"].get("attrs")
    if not isinstance(attrs, int) or nodes[attrs].get("type") != "ir.DictAttrs":
        return "no attributes", None
    key = _pick(rng, list(relax_json.PARTITION_ATTRS))
    value = _pick(rng, ["npu", "ccompiler", "dnnl", "npu.conv2d"])
    d = nodes[attrs]["data"]["__dict__"]
    chain = [{"type": "ffi.String", "data": key}, {"type": "ffi.String", "data": value}]
    insert(doc, d, chain)
    nodes[d + 2]["data"] += [d, d + 1]
    return f"attribute {key}={value!r} on function {f}", f"a {key} attribute"


def delete_node(doc, rng, ctx):
    nodes = doc["nodes"]
    i = int(rng.integers(0, len(nodes) - 1))
    kind = nodes[i].get("type")
    delete(doc, i)
    return f"object {i} ({kind}) deleted", None


def planted_code(doc, rng, ctx):
    """issue 22 route 1, built with TVM's API as an attacker would: main first calls
    rpc.CreatePipeClient("/bin/sh", "-c", "touch MARKER"), or a TIR PrimFunc through call_tir."""
    import tvm
    from tvm import relax, topi

    mod = tvm.ir.load_json(json.dumps(doc))  # our own seed: safe to parse in this process
    main = mod["main"]
    if rng.random() < 0.7:
        args = [tvm.ir.StringImm(a) for a in ("/bin/sh", "-c", f"touch {ctx['marker']}")]
        call = relax.Call(relax.ExternFunc("rpc.CreatePipeClient"), args, ty_args=[relax.ObjectType()])
        pwn = relax.Var("pwn", relax.ObjectType())
        body = relax.SeqExpr([relax.BindingBlock([relax.VarBinding(pwn, call)]), *main.body.blocks], main.body.body)
        new = relax.Function(main.params, body, main.ret_ty, is_pure=False, attrs=main.attrs)
        out = relax.transform.Normalize()(tvm.IRModule({"main": new}, attrs=mod.attrs))  # typed, as TVM would save it
        what, why = "main calls rpc.CreatePipeClient (touch a marker)", "an ExternFunc call"
    else:
        x = main.params[0]
        bb = relax.BlockBuilder()
        with bb.function("main", [x]):
            y = bb.emit_te(topi.negative, x)
            bb.emit_func_output(y)
        out = tvm.IRModule(dict(bb.get().functions_items()), attrs=mod.attrs)
        what, why = "main calls a TIR PrimFunc (call_tir)", "a PrimFunc"
    doc.clear()
    doc.update(json.loads(tvm.ir.save_json(out)))
    return what, why


MUTATORS: dict[str, Callable] = {
    "op": op_swap, "attr": attr_value, "type": type_lie, "ref": reference, "nest": nest, "tensor": tensor,
    "code-node": code_node, "dup-main": duplicate_main, "codegen": partition_attr, "delete": delete_node,
    "planted-code": planted_code,
}  # fmt: skip


def mutate(seed_json: str, name: str, rng, ctx) -> tuple[bytes, str, str | None]:
    doc = json.loads(seed_json)
    what, refuse = MUTATORS[name](doc, rng, ctx)
    return json.dumps(doc).encode(), what, refuse


__all__ = ["MUTATORS", "make_seed", "mutate", "seed_fixtures", "seed_inputs", "insert", "delete"]
