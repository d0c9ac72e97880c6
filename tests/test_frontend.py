"""Model loading: real fixtures import with the right metadata, bad input gets a clear error."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tflite
import tvm
from onnx import TensorProto, helper
from tvm import relax

import npu_byoc
from npu_byoc import ModelLoadError, UnsupportedModelError, load_model, model_info

from .conftest import ALL_MODELS, model_path


def _tflite_io(path):
    """Inputs/outputs read straight from the flatbuffer with the tflite package (independent
    of npu_byoc's loader)."""
    m = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    g = m.Subgraphs(0)

    def info(i):
        t = g.Tensors(int(i))
        q = t.Quantization()
        return t.Name().decode(), tuple(t.ShapeAsNumpy()), float(q.ScaleAsNumpy()[0]), int(q.ZeroPointAsNumpy()[0])

    return [info(i) for i in g.InputsAsNumpy()], [info(i) for i in g.OutputsAsNumpy()], g.OperatorsLength()


@pytest.mark.parametrize("name", ["tiny_cnn_int8.tflite", "mobilenet_v2_int8.tflite"])
def test_tflite_model_info_matches_flatbuffer(imported, name):
    info = model_info(imported(name))
    ins, outs, n_ops = _tflite_io(model_path(name))
    assert info.format == "tflite"
    assert [(t.name, t.shape, t.scale, t.zero_point) for t in info.inputs] == ins
    assert [(t.name, t.shape, t.scale, t.zero_point) for t in info.outputs] == outs
    assert all(t.dtype == "int8" for t in info.inputs + info.outputs)
    # Every TFLite operator is a source op, in model order.
    assert [o.index for o in info.ops] == list(range(n_ops))


def test_onnx_model_info_matches_graph(imported):
    name = "tiny_cnn_qdq.onnx"
    model = onnx.load(model_path(name))
    info = model_info(imported(name))
    assert info.format == "onnx"
    assert [t.name for t in info.inputs] == [i.name for i in model.graph.input]
    assert info.inputs[0].shape == (1, 3, 32, 32)
    assert [o.op for o in info.ops] == [n.op_type for n in model.graph.node]
    qdq = [o for o in info.ops if o.qdq]
    assert len(qdq) == sum(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in model.graph.node)


@pytest.mark.parametrize("name", ALL_MODELS)
def test_every_binding_has_one_owner(imported, name):
    """Provenance: each binding of main belongs to exactly one source op and is named after it."""
    mod = imported(name)
    info = model_info(mod)
    owned = [v for o in info.ops for v in o.vars]
    assert len(owned) == len(set(owned))
    names = {b.var.name for block in mod["main"].body.blocks for b in block.bindings}
    assert set(owned) <= names


def test_relax_json_roundtrip(tmp_path):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([1, 4, 4, 8], "int8"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.max_pool2d(x, pool_size=(2, 2), strides=(2, 2), layout="NHWC"))
            gv = bb.emit_output(y)
        bb.emit_func_output(gv)
    path = tmp_path / "pool.json"
    path.write_text(tvm.ir.save_json(bb.get()))
    mod = load_model(path)
    info = model_info(mod)
    assert info.format == "relax"
    assert info.inputs[0].shape == (1, 4, 4, 8) and info.inputs[0].dtype == "int8"
    assert [o.op for o in info.ops] == ["relax.nn.max_pool2d"]
    report = npu_byoc.coverage_report(mod)
    assert report.ops[0].offloaded and report.ops[0].pattern == "npu.max_pool2d"


# --- bad input -----------------------------------------------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(ModelLoadError, match=r"nope\.tflite: no such file"):
        load_model(tmp_path / "nope.tflite")


def test_unknown_suffix(tmp_path):
    p = tmp_path / "model.pb"
    p.write_bytes(b"x")
    with pytest.raises(ModelLoadError, match=r"model\.pb: unknown model format"):
        load_model(p)


def test_empty_file(tmp_path):
    p = tmp_path / "empty.onnx"
    p.write_bytes(b"")
    with pytest.raises(ModelLoadError, match="empty"):
        load_model(p)


@pytest.mark.parametrize("suffix", [".tflite", ".onnx", ".json"])
def test_random_bytes(tmp_path, suffix):
    p = tmp_path / f"garbage{suffix}"
    p.write_bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(ModelLoadError, match=f"garbage\\{suffix}"):
        load_model(p)


@pytest.mark.parametrize("name", ["tiny_cnn_int8.tflite", "tiny_cnn_qdq.onnx"])
@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
def test_truncated_model(tmp_path, name, fraction):
    data = model_path(name).read_bytes()
    p = tmp_path / name
    p.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(ModelLoadError, match=name.replace(".", r"\.")):
        load_model(p)


def test_onnx_operator_tvm_cannot_import(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    graph = helper.make_graph([helper.make_node("Det", ["x"], ["y"])], "det", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    p = tmp_path / "det.onnx"
    onnx.save(model, p)
    with pytest.raises(UnsupportedModelError, match=r"det\.onnx: TVM cannot import this model: .*Det"):
        load_model(p)


def test_json_that_is_not_a_module(tmp_path):
    p = tmp_path / "const.json"
    p.write_text(tvm.ir.save_json(relax.const(np.zeros(3, "int8"))))
    with pytest.raises(ModelLoadError, match=r"const\.json: .*not an IRModule"):
        load_model(p)
