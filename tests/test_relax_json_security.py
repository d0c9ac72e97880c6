"""A Relax ``.json`` model file is data (issue 22, routes 1 and 5): it runs no code, reads and
writes no files, cannot crash TVM's parser, and cannot lie about its types.

Each hostile file is the smallest that shows one route: built as TVM would save it, then the
JSON edited where TVM's Python API refuses to build the lie. On main before this change the
ExternFunc file ran ``/bin/sh`` under ``npu-byoc run``, the nested file killed the process, and
the lying types reached TVM's CPU build."""

from __future__ import annotations

import base64
import json
import struct

import numpy as np
import pytest
import tvm
from tvm import relax

import npu_byoc
from npu_byoc import cli
from npu_byoc.frontends import relax_json
from npu_byoc.errors import ModelLoadError

from .conftest import model_path, reference


def _save(tmp_path, mod, name="model.json"):
    path = tmp_path / name
    path.write_text(tvm.ir.save_json(mod))
    return path


def _small_module(shape=(1, 8), target=(2, 4)):
    x = relax.Var("x", relax.TensorType(list(shape), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.reshape(x, list(target)))
            z = bb.emit_output(relax.op.negative(y))
        bb.emit_func_output(z)
    return bb.get()


def _nodes_edit(path, edit) -> None:
    doc = json.loads(path.read_text())
    edit(doc["nodes"])
    path.write_text(json.dumps(doc))


def _input(tmp_path, shape=(1, 4)):
    x = tmp_path / "x.npy"
    np.save(x, np.zeros(shape, np.int8))
    return x


# --- route 1: no code execution ---------------------------------------------------------------


def _extern_call_module(marker) -> tvm.IRModule:
    """The reviewer's attack: main calls TVM's global rpc.CreatePipeClient, which spawns
    /bin/sh -c CMD when the VM runs main."""
    x = relax.Var("x", relax.TensorType([1, 4], "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x], pure=False):
        args = [tvm.ir.StringImm(a) for a in ("/bin/sh", "-c", f"touch {marker}")]
        bb.emit(relax.Call(relax.ExternFunc("rpc.CreatePipeClient"), args, ty_args=[relax.ObjectType()]))
        bb.emit_func_output(x)
    return bb.get()


@pytest.mark.parametrize("command", [
    ["run", "--backend", "cpu"], ["run", "--backend", "golden"], ["coverage"], ["partition"],
])  # fmt: skip
def test_extern_call_runs_no_command(tmp_path, capsys, command):
    marker = tmp_path / "PWNED"
    path = _save(tmp_path, _extern_call_module(marker))
    argv = [command[0], str(path), *command[1:]]
    if command[0] == "run":
        argv += ["--input", str(_input(tmp_path))]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "model.json: the module holds a call into native code by name (ExternFunc)" in err
    assert "Traceback" not in err
    assert not marker.exists()


def test_packed_call_operator_refused(tmp_path):
    """relax.call_packed is an operator node naming the global: refused by name, before TVM parses."""
    path = _save(tmp_path, _small_module())
    _nodes_edit(path, lambda nodes: [n.update(data="relax.call_packed") for n in nodes
                                     if n["type"] == "ir.Op" and n["data"] == "relax.negative"])  # fmt: skip
    with pytest.raises(ModelLoadError, match=r"model\.json: the module calls operator 'relax\.call_packed'"):
        npu_byoc.load_model(path)


def test_primfunc_refused(tmp_path):
    """A TIR function may call native code (call_extern): no PrimFunc in a model file."""
    from tvm import topi

    x = relax.Var("x", relax.TensorType([1, 4], "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit_te(topi.negative, x)
        bb.emit_func_output(y)
    path = _save(tmp_path, bb.get())
    with pytest.raises(ModelLoadError, match=r"model\.json: the module holds a TIR function \(PrimFunc\)"):
        npu_byoc.load_model(path)


def test_partitioned_module_refused(tmp_path):
    mod = npu_byoc.partition_for_npu(npu_byoc.load_model(model_path("tiny_cnn_int8.tflite")))
    path = _save(tmp_path, mod)
    with pytest.raises(ModelLoadError, match=r"with attribute (Codegen|Composite): a partitioned module is not accepted from a file"):
        npu_byoc.load_model(path)


# --- route 5: nesting, normalization, types ---------------------------------------------------


def _nested_calls(path, depth: int) -> None:
    """Replace the value of main's first binding by ``depth`` nested negative() calls around x,
    unnormalized (no types), as the reviewer's 30,000-deep file was. The chain is inserted
    before the binding, as save_json orders objects (every reference points backwards)."""
    doc = json.loads(path.read_text())
    nodes = doc["nodes"]
    x = next(i for i, n in enumerate(nodes) if n["type"] == "ir.Var")
    at = next(i for i, n in enumerate(nodes) if n["type"] == "relax.expr.VarBinding")
    chain = [{"type": "ffi.Array", "data": []}, {"type": "ir.Type", "data": {"span": 0}},
             {"type": "ir.Op", "data": "relax.negative"}]  # fmt: skip
    op = at + 2
    prev = x
    for _ in range(depth):
        chain.append({"type": "ffi.Array", "data": [prev]})
        chain.append({"type": "ir.Call", "data": {"span": 0, "ty": at + 1, "op": op, "args": at + len(chain) - 1,
                                                  "attrs": 0, "ty_args": at}})  # fmt: skip
        prev = at + len(chain) - 1

    def shift(r):  # references to objects after the insertion point move by len(chain)
        return r + len(chain) if isinstance(r, int) and not isinstance(r, bool) and r >= at else r

    for n in nodes[at:]:
        if n["type"] in ("ffi.Array", "ffi.Map"):
            n["data"] = [shift(r) for r in n["data"]]
        elif isinstance(n.get("data"), dict):  # "ndim" is the one inline integer these objects have
            n["data"] = {k: (v if k == "ndim" else shift(v)) for k, v in n["data"].items()}
    nodes[at]["data"]["value"] = prev
    doc["nodes"] = nodes[:at] + chain + nodes[at:]
    doc["root_index"] = shift(doc["root_index"])
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("depth", [1_000, 30_000])
def test_deep_nesting_refused_before_parsing(tmp_path, depth):
    path = _save(tmp_path, _small_module())
    _nested_calls(path, depth)
    with pytest.raises(ModelLoadError, match=rf"model\.json: the module nests objects more than {relax_json.MAX_DEPTH} deep"):
        npu_byoc.load_model(path)


def test_deep_nesting_cli_one_line(tmp_path):
    """The 30,000-deep file through the CLI, in a child process: it killed every command with
    SIGSEGV inside load_json before."""
    import subprocess
    import sys

    path = _save(tmp_path, _small_module())
    _nested_calls(path, 30_000)
    proc = subprocess.run([sys.executable, "-m", "npu_byoc.cli", "coverage", str(path)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and "nests objects more than" in proc.stderr


def test_forward_reference_refused(tmp_path):
    """TVM's reader follows references recursively: a reference to a later object (which
    save_json never writes) could form a cycle or a chain the depth count does not see."""
    path = _save(tmp_path, _small_module())

    def edit(nodes):
        first = next(n for n in nodes if n["type"] == "relax.expr.VarBinding")
        first["data"]["value"] = len(nodes) - 1  # the IRModule itself

    _nodes_edit(path, edit)
    with pytest.raises(ModelLoadError, match=r"refers to an object not written before it"):
        npu_byoc.load_model(path)


def test_unnormalized_shallow_nesting_refused(tmp_path):
    """Below the depth cap, a call nested in a call's arguments (not A-normal form) is refused
    by name, not by TVM's type functor."""
    path = _save(tmp_path, _small_module())
    _nested_calls(path, 3)
    with pytest.raises(ModelLoadError, match=r"not normalized"):
        npu_byoc.load_model(path)


def test_declared_type_that_lies_is_refused(tmp_path):
    """A binding typed larger than its value: the CPU build would size its buffer from the lie."""
    x = relax.Var("x", relax.TensorType([1, 8], "int8"))
    lie = relax.TensorType([64, 64], "int8")
    call = relax.Call(tvm.ir.Op.get("relax.reshape"), [x, relax.ShapeExpr([2, 4])], ret_ty=lie)
    y = relax.Var("y", lie)
    body = relax.SeqExpr([relax.BindingBlock([relax.VarBinding(y, call)])], y)
    func = relax.Function([x], body, lie)
    path = _save(tmp_path, tvm.IRModule({"main": func}))
    with pytest.raises(ModelLoadError, match=r"binding 'y' declares type int8\[64, 64\], but its value has int8\[2, 4\]"):
        npu_byoc.load_model(path)


def _add_constant_module(tmp_path):
    x = relax.Var("x", relax.TensorType([1, 8], "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(relax.op.add(x, relax.const(np.ones((1, 8), "int8"))))
        bb.emit_func_output(y)
    return _save(tmp_path, bb.get())


def _tensor_bytes(shape, payload: bytes) -> str:
    """A serialized int8 tensor (TVM's layout: magic, reserved, device, ndim, dtype, shape,
    byte count, bytes)."""
    header = struct.pack("<QQiiiBBH", 0xDD5E40F096B4A13F, 0, 1, 0, len(shape), 0, 8, 1)
    raw = header + struct.pack(f"<{len(shape)}q", *shape) + struct.pack("<q", len(payload)) + payload
    return base64.b64encode(raw).decode()


def test_constant_whose_type_lies_is_refused(tmp_path):
    """A constant typed [1, 8] holding 2 bytes: the kernels would read 6 bytes past it."""
    path = _add_constant_module(tmp_path)
    _nodes_edit(path, lambda nodes: [n.update(data=_tensor_bytes([2], b"\1\2")) for n in nodes if n["type"] == "ffi.Tensor"])
    with pytest.raises(ModelLoadError, match=r"a constant declares type int8\[1, 8\] but holds int8\[2\]"):
        npu_byoc.load_model(path)


def test_tensor_header_that_lies_is_refused(tmp_path):
    """TVM's reader trusts a serialized tensor's header: a shape larger than the payload reads
    past it."""
    path = _add_constant_module(tmp_path)

    def grow(nodes):
        t = next(n for n in nodes if n["type"] == "ffi.Tensor")
        raw = bytearray(base64.b64decode(t["data"]))
        struct.pack_into("<qq", raw, 32, 1, 1 << 20)  # shape [1, 8] -> [1, 1048576]
        struct.pack_into("<q", raw, 48, 1 << 20)  # and the byte count to match the shape
        t["data"] = base64.b64encode(bytes(raw)).decode()

    _nodes_edit(path, grow)
    with pytest.raises(ModelLoadError, match=r"tensor object \d+ of shape \[1, 1048576\] declares 1048576 bytes and holds 8"):
        npu_byoc.load_model(path)


def test_conv_groups_zero_refused(tmp_path):
    """TVM's conv2d type inference divides by groups."""
    x = relax.Var("x", relax.TensorType([1, 4, 4, 8], "int8"))
    w = relax.const(np.ones((8, 1, 1, 8), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(relax.op.nn.conv2d(x, w, data_layout="NHWC", kernel_layout="OHWI", out_dtype="int32"))
        bb.emit_func_output(y)
    path = _save(tmp_path, bb.get())
    _nodes_edit(path, lambda nodes: [n["data"].update(groups=0) for n in nodes if n["type"] == "relax.attrs.Conv2DAttrs"])
    with pytest.raises(ModelLoadError, match=r"nn\.conv2d: groups 0: must be >= 1"):
        npu_byoc.load_model(path)


def test_take_out_of_range_refused(tmp_path):
    """take's default mode reads without bounds checks: constant indices must be in range."""
    x = relax.Var("x", relax.TensorType([1, 4], "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(relax.op.take(x, relax.const(np.array([0, 1 << 20], "int32")), axis=1))
        bb.emit_func_output(y)
    path = _save(tmp_path, bb.get())
    with pytest.raises(ModelLoadError, match=r"take: indices 0\.\.1048576 out of range for a dimension of 4"):
        npu_byoc.load_model(path)


def test_size_cap(tmp_path, monkeypatch):
    path = _save(tmp_path, _small_module())
    monkeypatch.setattr(relax_json, "MAX_BYTES", 100)
    with pytest.raises(ModelLoadError, match=r"bytes: a Relax model file may be at most"):
        npu_byoc.load_model(path)


# --- what still loads -------------------------------------------------------------------------


def test_imported_model_round_trips_and_runs(tmp_path):
    """A real model imported from TFLite, saved with save_json, loads again (rebuilt with the
    types TVM infers) and gives LiteRT's recorded outputs on the golden model."""
    mod = npu_byoc.load_model(model_path("tiny_cnn_int8.tflite"))
    path = _save(tmp_path, mod)
    loaded = npu_byoc.load_model(path)
    ref = reference("tiny_cnn_int8.tflite")
    model = npu_byoc.build(npu_byoc.partition_for_npu(loaded), "golden")
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        got = model.run(inputs)
        np.testing.assert_array_equal(got[0], np.asarray(outputs[0]).reshape(got[0].shape))


@pytest.mark.parametrize("name", ["tiny_cnn_qdq.onnx", "mobilenet_v2_int8.tflite", "unet_int8.tflite"])
def test_frontend_output_is_accepted(tmp_path, name):
    """Every operator and form TVM's frontends produce for these models passes the gates, and
    the rebuilt main equals the saved one."""
    import tvm_ffi

    mod = npu_byoc.load_model(model_path(name))
    loaded = npu_byoc.load_model(_save(tmp_path, mod))
    assert tvm_ffi.structural_equal(loaded["main"].ret_ty, mod["main"].ret_ty)
    assert len(loaded["main"].body.blocks[0].bindings) == len(mod["main"].body.blocks[0].bindings)


def test_type_lie_message_shows_a_difference():
    """Two tuple types (a main returning a tuple that lies) printed as "TupleType" both; the
    refusal names their fields."""
    def t(*shape):
        return relax.TensorType(list(shape), "int8")

    declared, inferred = relax_json._two_types(relax.TupleType([t(2, 4)]), relax.TupleType([t(4, 2)]))
    assert declared != inferred
    assert "int8[2, 4]" in declared and "int8[4, 2]" in inferred


def test_rank_that_disagrees_with_the_dimensions_refused(tmp_path):
    """A constant typed with ndim 2^31 - 1 over its [1, 8] dimensions (found by `npu-byoc fuzz
    --mode files`, attribute mutation): it passed the gates and `run --backend cpu` stopped with
    a traceback in TVM's CallTIRRewrite. Refused before TVM parses the file."""
    path = _add_constant_module(tmp_path)

    def edit(nodes):
        const = next(n for n in nodes if n["type"] == "ir.GenericConst")
        nodes[const["data"]["ty"]]["data"]["ndim"] = 2**31 - 1

    _nodes_edit(path, edit)
    with pytest.raises(ModelLoadError, match=r"\(relax\.TensorType\) declares rank 2147483647 over 2 dimension\(s\)"):
        npu_byoc.load_model(path)
    assert cli.main(["run", str(path), "--backend", "cpu", "--input", str(_input(tmp_path, (1, 8)))]) == 2


@pytest.mark.parametrize("kind, ndim", [("relax.ShapeType", 9), ("relax.TensorType", -2), ("relax.TensorType", "2")])
def test_rank_fields_checked_on_every_type(tmp_path, kind, ndim):
    path = _save(tmp_path, _small_module())
    _nodes_edit(path, lambda nodes: next(n for n in nodes if n["type"] == kind)["data"].update(ndim=ndim))
    with pytest.raises(ModelLoadError, match=rf"\({kind}\) (declares rank {ndim} over|has rank)"):
        npu_byoc.load_model(path)


@pytest.mark.parametrize("op, match", [
    ("relax.nn.group_norm", r"call \d+ to relax\.nn\.group_norm carries no attributes \(it takes relax\.attrs\.GroupNormAttrs\)"),
    ("relax.mean", r"carries no attributes \(it takes relax\.attrs\.StatisticalAttrs\)"),
])  # fmt: skip
def test_call_with_attributes_of_another_operator_refused(tmp_path, op, match):
    """An operator renamed to another allowed one keeps the old call's attributes (found by
    `npu-byoc fuzz --mode files`: dequantize -> group_norm killed the process with SIGSEGV in
    TVM's type inference, which casts the attributes without checking)."""
    path = _save(tmp_path, _small_module())
    _nodes_edit(path, lambda nodes: [n.update(data=op) for n in nodes if n["type"] == "ir.Op" and n["data"] == "relax.negative"])
    with pytest.raises(ModelLoadError, match=match):
        npu_byoc.load_model(path)


def test_quantize_attributes_on_group_norm_refused(tmp_path):
    x = relax.Var("x", relax.TensorType([1, 8], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(relax.op.quantize(x, relax.const(0.5, "float32"), relax.const(0, "int8"), axis=-1, out_dtype="int8"))
        bb.emit_func_output(y)
    path = _save(tmp_path, bb.get())
    _nodes_edit(path, lambda nodes: [n.update(data="relax.nn.group_norm") for n in nodes if n["type"] == "ir.Op"])
    with pytest.raises(ModelLoadError, match=r"carries attributes relax\.attrs\.QuantizeAttrs \(it takes relax\.attrs\.GroupNormAttrs\)"):
        npu_byoc.load_model(path)


@pytest.mark.parametrize("op, kind", [("relax.bitwise_xor", "integer"), ("relax.left_shift", "integer"),
                                      ("relax.logical_or", "bool")])  # fmt: skip
def test_bitwise_op_on_float_tensors_refused(tmp_path, op, kind):
    """subtract -> bitwise_xor / logical_or on float32 tensors (found by `npu-byoc fuzz --mode
    files`): TVM's type inference accepts it, its lowering then stopped `run` with an
    InternalError traceback."""
    x = relax.Var("x", relax.TensorType([1, 8], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(relax.op.subtract(x, x))
        bb.emit_func_output(y)
    path = _save(tmp_path, bb.get())
    _nodes_edit(path, lambda nodes: [n.update(data=op) for n in nodes if n["type"] == "ir.Op"])
    with pytest.raises(ModelLoadError, match=rf"{op.removeprefix('relax.')}: an operand of dtype float32: this operator takes {kind} tensors"):
        npu_byoc.load_model(path)
    argv = ["run", str(path), "--backend", "cpu", "--input", str(tmp_path / "x.npy")]
    np.save(tmp_path / "x.npy", np.zeros((1, 8), np.float32))
    assert cli.main(argv) == 2


@pytest.mark.parametrize("bound", [2**63 - 1, 128, -129])
def test_clip_bound_outside_the_dtype_refused(tmp_path, bound):
    """A clip of an int8 tensor whose bound int8 cannot hold (found by `npu-byoc fuzz --mode
    files`: a bound of 2^63 - 1 stopped `run` with a traceback in TVM's lowering)."""
    x = relax.Var("x", relax.TensorType([1, 8], "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(relax.op.clip(x, -128, 127))
        bb.emit_func_output(y)
    path = _save(tmp_path, bb.get())
    old = 127 if bound > 0 else -128
    _nodes_edit(path, lambda nodes: next(n for n in nodes if n["type"] == "int" and n["data"] == old).update(data=bound))
    with pytest.raises(ModelLoadError, match=rf"clip: bound {bound} is outside the range of int8 \(-128\.\.127\)"):
        npu_byoc.load_model(path)
