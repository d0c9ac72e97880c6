"""ONNX QOperator and integer ops (npu_byoc/frontends/onnx_qop.py): rewritten before TVM's import, then
imported, partitioned and run, against ONNX's own node tests (expected outputs shipped in the
onnx package), onnxruntime's outputs recorded by tools/make_models.py, and hand-derived values."""

from __future__ import annotations

import importlib
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import npu_byoc
from npu_byoc import ModelLoadError, UnsupportedModelError
from npu_byoc.frontends import onnx_qop
from npu_byoc.cli import main

from .conftest import MODELS, model_path

# ------------------------------------------------------------------ ONNX's own node tests
# onnx.backend.test.case.node.<module>.<class>.export*() build each case through `expect`;
# the wheel ships these generators (not the data/node/*.pb files), so the cases are built here.
NODE_TEST_MODULES = {"qlinearconv": "QLinearConv", "qlinearmatmul": "QLinearMatMul",
                     "convinteger": "ConvInteger", "matmulinteger": "MatMulInteger"}


def _node_cases() -> dict:
    cases = {}
    for module_name, cls in NODE_TEST_MODULES.items():
        module = importlib.import_module(f"onnx.backend.test.case.node.{module_name}")

        def expect(node, inputs, outputs, name, **kwargs):
            cases[name] = (node, [np.asarray(i) for i in inputs], [np.asarray(o) for o in outputs], kwargs)

        saved, module.expect = module.expect, expect
        try:
            for attr in dir(getattr(module, cls)):
                if attr.startswith("export"):
                    getattr(getattr(module, cls), attr)()
        finally:
            module.expect = saved
    return cases


NODE_CASES = _node_cases()


def _folded(node, inputs, outputs, kwargs) -> onnx.ModelProto:
    """The node test as a real model has it: the activation (input 0) a graph input, the
    weights, scales and zero points initializers; the opset the node test uses."""
    inits = [numpy_helper.from_array(v, n) for n, v in zip(node.input[1:], inputs[1:]) if n]
    x, y = inputs[0], outputs[0]
    graph = helper.make_graph(
        [node], "node_test",
        [helper.make_tensor_value_info(node.input[0], helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)],
        [helper.make_tensor_value_info(node.output[0], helper.np_dtype_to_tensor_dtype(y.dtype), y.shape)],
        inits)
    opsets = kwargs.get("opset_imports") or [
        helper.make_operatorsetid(node.domain, onnx.defs.get_schema(node.op_type, domain=node.domain).since_version)
    ]
    return helper.make_model(graph, opset_imports=opsets)


_node_models: dict = {}


def _node_model(name, tmp_path_factory):
    if name not in _node_models:
        node, inputs, outputs, kwargs = NODE_CASES[name]
        path = tmp_path_factory.mktemp("node") / f"{name}.onnx"
        onnx.save(_folded(node, inputs, outputs, kwargs), str(path))
        _node_models[name] = (path, npu_byoc.load_model(path))
    return _node_models[name]


def test_node_tests_are_collected():
    """Every node test of the four ops (12 in onnx 1.23; a newer onnx may add some)."""
    ops = {NODE_CASES[n][0].op_type for n in NODE_CASES}
    assert ops == set(NODE_TEST_MODULES.values())
    assert len(NODE_CASES) >= 12


@pytest.mark.parametrize("name", sorted(NODE_CASES))
def test_onnx_node_test_is_exact_on_tvm_cpu(name, tmp_path_factory):
    """Float16 scales included: the rewrite makes them float32 constants (exact), so those
    cases compute what the float32 ones do and must give the same expected outputs."""
    _, mod = _node_model(name, tmp_path_factory)
    _, inputs, outputs, _ = NODE_CASES[name]
    got = npu_byoc.build(mod, "cpu").run([inputs[0]])
    assert len(got) == 1
    assert got[0].dtype == outputs[0].dtype and got[0].shape == outputs[0].shape
    np.testing.assert_array_equal(got[0], outputs[0])


def test_node_tests_keep_their_op_type_in_coverage(tmp_path_factory):
    for name in ("test_qlinearconv", "test_convinteger_with_padding", "test_qlinearmatmul_2D_int8_float32"):
        _, mod = _node_model(name, tmp_path_factory)
        ops = npu_byoc.coverage_report(mod).ops
        assert [o.op for o in ops] == [NODE_CASES[name][0].op_type]


@pytest.mark.parametrize("name", sorted(NODE_CASES))
def test_onnx_node_test_is_exact_through_npu_byoc_run(name, tmp_path_factory, tmp_path):
    """`npu-byoc run --backend functional` on each folded node test: the expected output.
    None of them reaches the NPU (uint8 weights, weight zero points != 0, 3-D matmuls, int32
    results: the coverage report says which); the QOperator CNNs below do."""
    path, _ = _node_model(name, tmp_path_factory)
    _, inputs, outputs, _ = NODE_CASES[name]
    x, out = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(x, inputs[0])
    assert main(["run", str(path), "--input", str(x), "--backend", "functional", "--output", str(out)]) == 0
    got = np.load(out)
    assert got.dtype == outputs[0].dtype
    np.testing.assert_array_equal(got, outputs[0])


# ------------------------------------------------------------------ rewriter unit tests
QOP_OPS = "qop_ops.onnx"
_qop: dict = {}


def _qop_ops():
    if not _qop:
        ref = np.load(MODELS / "qop_ops.npz")
        mod = npu_byoc.load_model(model_path(QOP_OPS))
        _qop.update(ref=ref, mod=mod, model=npu_byoc.build(mod, "cpu"))
    return _qop


def _qop_ops_outputs():
    return [o.name for o in onnx.load(str(model_path(QOP_OPS))).graph.output]


# onnxruntime's pooling kernels sum dequantized floats (GlobalAveragePool: integers times a
# float multiplier) and round after adding the output zero point, where ONNX's QuantizeLinear
# (the QDQ form) rounds, then adds it: on values at (or within float error of) a .5 tie the two
# may differ by 1. QGemm with a float output scales an integer accumulator in onnxruntime, a
# float matmul here: equal to float32 rounding.
POOLS = {"qlinearaveragepool_i8", "qlinearaveragepool_u8_nhwc", "qlinearglobalaveragepool_i8",
         "qlinearglobalaveragepool_u8_nhwc"}
FLOAT_OUTPUTS = {"qgemm_u8_float"}


def _qop_run(output):
    """(TVM CPU outputs, onnxruntime outputs) of one branch of qop_ops.onnx, per sample."""
    q = _qop_ops()
    ref, info = q["ref"], npu_byoc.model_info(q["mod"])
    k = [t.name for t in info.outputs].index(output)
    pairs = []
    for s in range(ref["in:x_i8"].shape[0]):
        got = q["model"].run([ref[f"in:{t.name}"][s] for t in info.inputs])[k]
        want = ref[f"out:{output}"][s]
        assert got.dtype == want.dtype and got.shape == want.shape
        pairs.append((got, want))
    return pairs


@pytest.mark.slow  # the first one compiles qop_ops.onnx (~10 s)
@pytest.mark.parametrize("output", [o for o in _qop_ops_outputs() if o not in POOLS | FLOAT_OUTPUTS])
def test_rewrite_matches_onnxruntime(output):
    """Each branch of qop_ops.onnx (one op variant each) on TVM's CPU vs onnxruntime with graph
    optimizations disabled, on random full-range inputs: exact."""
    for got, want in _qop_run(output):
        np.testing.assert_array_equal(got, want)


@pytest.mark.slow
def test_qgemm_float_output_matches_onnxruntime_to_float_rounding():
    for got, want in _qop_run("qgemm_u8_float"):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _avg_pool(x, kernel, strides, pads, count_include_pad):
    """Average pooling of NCHW float64 x as ONNX defines it (pads: begin..., end...)."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])), constant_values=np.nan)
    oh, ow = (xp.shape[2] - kernel[0]) // strides[0] + 1, (xp.shape[3] - kernel[1]) // strides[1] + 1
    out = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * strides[0]: i * strides[0] + kernel[0], j * strides[1]: j * strides[1] + kernel[1]]
            out[:, :, i, j] = np.nansum(win, (2, 3)) / (win[0, 0].size if count_include_pad else np.sum(~np.isnan(win[0, 0])))
    return out


POOL_DEFS = {  # output: (input, hand-derived pooling of the dequantized input, channels_last)
    "qlinearaveragepool_i8": ("x_i8", lambda x: _avg_pool(x, (3, 3), (2, 2), (1, 1, 1, 1), False), False),
    "qlinearaveragepool_u8_nhwc": ("x_u8", lambda x: _avg_pool(x, (2, 2), (1, 1), (1, 1, 0, 0), True), True),
    "qlinearglobalaveragepool_i8": ("x_i8", lambda x: x.mean((2, 3), keepdims=True), False),
    "qlinearglobalaveragepool_u8_nhwc": ("x_u8", lambda x: x.mean((2, 3), keepdims=True), True),
}


@pytest.mark.slow
@pytest.mark.parametrize("output", sorted(POOLS))
def test_pool_rewrite_is_onnx_exact_and_onnxruntime_differs_only_at_ties(output):
    """The rewrite equals the ONNX definition (hand-derived here in float64: pool the dequantized
    input, QuantizeLinear with round-half-to-even) exactly, except where that exact value is
    within float32 error of a .5 tie; onnxruntime differs from it by at most 1, at ties only."""
    model = onnx.load(str(model_path(QOP_OPS)))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    node = next(n for n in model.graph.node if n.output[0] == output)
    x_name, pool, channels_last = POOL_DEFS[output]
    sx, zx, sy, zy = (inits[node.input[k]] for k in (1, 2, 3, 4))
    info = np.iinfo(zy.dtype)
    ref = np.load(MODELS / "qop_ops.npz")
    for s, (got, want) in enumerate(_qop_run(output)):
        x = ref[f"in:{x_name}"][s].astype(np.float64)
        x = (x - zx.astype(np.float64)) * np.float64(sx)
        if channels_last:
            x = x.transpose(0, 3, 1, 2)
        exact = pool(x) / np.float64(sy)
        if channels_last:
            exact = exact.transpose(0, 2, 3, 1)
        onnx_def = np.clip(np.round(exact) + zy.astype(np.int64), info.min, info.max)
        near_tie = np.abs(np.abs(exact - np.floor(exact)) - 0.5) < 1e-4
        assert not np.any((got != onnx_def) & ~near_tie), "the rewrite differs from ONNX's definition"
        diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
        assert diff.max() <= 1 and not np.any((diff > 0) & ~near_tie)


def test_every_rewrite_is_exercised():
    ops = {n.op_type for n in onnx.load(str(model_path(QOP_OPS))).graph.node}
    assert {op for _, op in onnx_qop.REWRITES} <= ops


def _single(op, inputs, inits, attrs=None, domain="", out_type=TensorProto.INT8, opset=13, out_shape=None):
    node = helper.make_node(op, [i for i, _ in inputs] + [n for n, _ in inits], ["y"], name="the_node",
                            domain=domain, **(attrs or {}))
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs],
        [helper.make_tensor_value_info("y", out_type, out_shape or inputs[0][1][1])],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    ops = [helper.make_operatorsetid("", opset)] + ([helper.make_operatorsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=ops)


def test_qlinearconv_bias_is_dequantized_with_the_accumulator_scale():
    """The rewrite's structure: DQ(x), DQ(W, axis 0), DQ(int32 bias, s_x*s_w[c], 0), Conv
    named like the node, Q; hand-derived output: (x - z_x)·(w) + b, requantized."""
    x_s, w_s, y_s = np.float32(0.5), np.array([0.25, 0.125], np.float32), np.float32(1.0)
    model = _single("QLinearConv", [("x", (TensorProto.INT8, [1, 1, 2, 2]))], [
        ("xs", x_s), ("xz", np.int8(1)), ("w", np.array([[[[1]]], [[[2]]]], np.int8)), ("ws", w_s),
        ("wz", np.int8(0)), ("ys", y_s), ("yz", np.int8(-3)), ("b", np.array([4, -8], np.int32))],
        out_shape=[1, 2, 2, 2])
    rw = onnx_qop.rewrite(model)
    ops = [(n.op_type, n.name) for n in rw.model.graph.node]
    assert ("Conv", "the_node") in ops and rw.origin == {"the_node": "QLinearConv"}
    assert [o for o, _ in ops].count("DequantizeLinear") == 3 and ops[-1][0] == "QuantizeLinear"
    inits = {i.name: numpy_helper.to_array(i) for i in rw.model.graph.initializer}
    bias_dq = next(n for n in rw.model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] == "b")
    np.testing.assert_array_equal(inits[bias_dq.input[1]], x_s * w_s)
    assert inits[bias_dq.input[2]].dtype == np.int32 and not inits[bias_dq.input[2]].any()
    # x = [3, -1, 5, 1]: (x - 1)*0.5 = [1, -1, 2, 0]; channel 0: 1*0.25*v + 4*0.125 ...
    x = np.array([3, -1, 5, 1], np.int8).reshape(1, 1, 2, 2)
    xf = (x.astype(np.float64) - 1) * 0.5
    want = np.stack([xf[0, 0] * 0.25 * 1 + 4 * 0.125, xf[0, 0] * 0.125 * 2 + -8 * 0.0625])[None]
    want = np.clip(np.round(want / 1.0) - 3, -128, 127).astype(np.int8)
    got = _run_model(model, [x])
    np.testing.assert_array_equal(got, want)


def _run_model(model, inputs, tmp=None):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as td:
        path = Path(td) / "m.onnx"
        onnx.save(model, str(path))
        return npu_byoc.build(npu_byoc.load_model(path), "cpu").run(inputs)[0]


def test_float16_scales_become_exact_float32_constants():
    model = _single("QLinearMatMul", [("a", (TensorProto.INT8, [1, 2]))], [
        ("as", np.float16(0.0066)), ("az", np.int8(0)), ("b", np.array([[1], [2]], np.int8)),
        ("bs", np.float16(0.00705)), ("bz", np.int8(0)), ("ys", np.float16(0.0107)), ("yz", np.int8(0))], opset=21, out_shape=[1, 1])
    rw = onnx_qop.rewrite(model)
    inits = {i.name: numpy_helper.to_array(i) for i in rw.model.graph.initializer}
    scales = [inits[n.input[1]] for n in rw.model.graph.node if n.op_type in ("DequantizeLinear", "QuantizeLinear")]
    assert [s.dtype for s in scales] == [np.float32] * 3
    assert [float(s) for s in scales] == [float(np.float16(v)) for v in (0.0066, 0.00705, 0.0107)]


def test_model_without_qoperator_ops_is_untouched():
    model = onnx.load(str(model_path("tiny_cnn_qdq.onnx")))
    rw = onnx_qop.rewrite(model)
    assert rw.model is model and rw.origin == {} and not rw.helpers


@pytest.mark.parametrize("op, domain, attrs, message", [
    ("QLinearSigmoid", "com.microsoft", {"mode": 3}, "attribute 'mode' is not supported"),
    ("QLinearAveragePool", "com.microsoft", {"kernel_shape": [2, 2], "channels_last": 2},
     "attribute 'channels_last' = 2 (must be 0 or 1)"),
])
def test_unknown_attributes_are_one_line_errors(tmp_path, op, domain, attrs, message):
    model = _single(op, [("x", (TensorProto.INT8, [1, 1, 4, 4]))],
                    [("xs", np.float32(0.1)), ("xz", np.int8(0)), ("ys", np.float32(0.1)), ("yz", np.int8(0))],
                    attrs, domain=domain)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    with pytest.raises(ModelLoadError) as err:
        npu_byoc.load_model(path)
    text = str(err.value)
    assert "\n" not in text and f"{op} node 'the_node'" in text and message in text


@pytest.mark.parametrize("op, keep", [("QLinearGlobalAveragePool", 0), ("QLinearAveragePool", 2),
                                      ("QLinearConcat", 4), ("QLinearAdd", 5), ("QGemm", 3)])
def test_missing_inputs_are_one_line_errors(tmp_path, op, keep):
    """A node cut short (found by truncating qop_ops' nodes at random): ModelLoadError, one line."""
    model = onnx.load(str(model_path(QOP_OPS)))
    node = next(n for n in model.graph.node if n.op_type == op)
    del node.input[keep:]
    outs = [o for o in model.graph.output if o.name == node.output[0]]
    del model.graph.output[:]
    model.graph.output.extend(outs)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    with pytest.raises(ModelLoadError) as err:
        npu_byoc.load_model(path)
    assert "\n" not in str(err.value) and f"{op} node {node.name!r}" in str(err.value)


def test_softmax_of_an_older_opset_over_a_middle_axis_is_refused(tmp_path):
    """QLinearSoftmax quantized from opset-11 Softmax (flatten to 2-D at axis) in an opset-13
    model, axis 1 of 3: no single Softmax of opset 13 computes it."""
    model = _single("QLinearSoftmax", [("x", (TensorProto.INT8, [1, 4, 5]))],
                    [("xs", np.float32(0.1)), ("xz", np.int8(0)), ("ys", np.float32(1 / 256)), ("yz", np.int8(-128))],
                    {"axis": 1, "opset": 11}, domain="com.microsoft", out_shape=[1, 4, 5])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    with pytest.raises(ModelLoadError, match=r"QLinearSoftmax node 'the_node': attribute 'opset' = 11 with axis 1"):
        npu_byoc.load_model(path)


def test_bad_scale_names_the_node_and_the_scale(tmp_path):
    model = _single("QLinearSigmoid", [("x", (TensorProto.INT8, [1, 4]))],
                    [("xs", np.float32(0.1)), ("xz", np.int8(0)), ("ys", np.float32(-1.0)), ("yz", np.int8(0))],
                    domain="com.microsoft")
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    with pytest.raises(ModelLoadError, match=r"QLinearSigmoid node 'the_node': y_scale 'ys' = -1.0: scales must be finite and > 0"):
        npu_byoc.load_model(path)


def test_absent_zero_points_are_zero_of_the_tensor_type():
    """com.microsoft QLinearAdd with its optional zero points left out (int8 inputs): hand-derived
    round-half-to-even of a·0.5 + b·0.25 over 0.25."""
    model = _single("QLinearAdd", [("a", (TensorProto.INT8, [1, 4])), ("b", (TensorProto.INT8, [1, 4]))],
                    [], domain="com.microsoft")
    node = model.graph.node[0]
    del node.input[:]
    node.input.extend(["a", "as", "", "b", "bs", "", "ys"])
    model.graph.initializer.extend([numpy_helper.from_array(np.float32(v), n)
                                    for n, v in (("as", 0.5), ("bs", 0.25), ("ys", 0.25))])
    a = np.array([[1, -3, 100, 7]], np.int8)
    b = np.array([[1, 1, 100, -128]], np.int8)
    # (a*0.5 + b*0.25) / 0.25 = 2a + b = [3, -5, 300, -114] -> saturated to int8
    got = _run_model(model, [a, b])
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, np.array([[3, -5, 127, -114]], np.int8))


def test_malformed_attribute_is_one_line(tmp_path):
    model = _single("QGemm", [("a", (TensorProto.INT8, [2, 3]))], [
        ("as", np.float32(0.1)), ("az", np.int8(0)), ("b", np.ones((3, 2), np.int8)), ("bs", np.float32(0.1)),
        ("bz", np.int8(0))], {"alpha": "abc"}, domain="com.microsoft", out_type=TensorProto.FLOAT, out_shape=[2, 2])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    with pytest.raises(ModelLoadError) as err:
        npu_byoc.load_model(path)
    assert "\n" not in str(err.value) and "QGemm node 'the_node': cannot rewrite it" in str(err.value)


def test_contrib_op_without_a_rewrite_is_refused_with_tvms_reason(tmp_path):
    model = _single("QLinearReduceMean", [("x", (TensorProto.INT8, [1, 4]))],
                    [("xs", np.float32(0.1)), ("xz", np.int8(0)), ("ys", np.float32(0.1)), ("yz", np.int8(0))],
                    {"axes": [1], "keepdims": 1}, domain="com.microsoft", out_shape=[1, 1])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    with pytest.raises(UnsupportedModelError, match="TVM cannot import this model: .*QLinearReduceMean"):
        npu_byoc.load_model(path)


def test_names_from_the_model_stay_data(tmp_path):
    """A node name that looks like code (quotes, newlines) is only ever a name."""
    name = "x'); import os #\n\"evil\""
    model = _single("QLinearSigmoid", [("x", (TensorProto.INT8, [1, 4]))],
                    [("xs", np.float32(0.1)), ("xz", np.int8(0)), ("ys", np.float32(1 / 256)), ("yz", np.int8(-128))],
                    domain="com.microsoft")
    model.graph.node[0].name = name
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    mod = npu_byoc.load_model(path)
    assert [o.op for o in npu_byoc.coverage_report(mod).ops] == ["QLinearSigmoid"]
    assert [o.name for o in npu_byoc.coverage_report(mod).ops] == [name]


# ------------------------------------------------------------------ onnxruntime QOperator CNN
QOP_CNNS = ["qop_cnn_s8s8.onnx", "qop_cnn_u8s8.onnx"]
QOP_CNN_OPS = {"QLinearConv", "QLinearAdd", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearConcat",
               "QLinearAveragePool", "QLinearGlobalAveragePool", "QGemm"}


def test_qop_cnn_fixtures_are_qoperator_models():
    for name in QOP_CNNS:
        ops = {n.op_type for n in onnx.load(str(model_path(name))).graph.node}
        assert QOP_CNN_OPS <= ops and "Conv" not in ops


@pytest.mark.parametrize("name", QOP_CNNS)
def test_qop_cnn_coverage(imported, name):
    """S8S8 and U8S8 (uint8 activations, read as int8 by the NPU): every MAC on the NPU, each
    offloaded op named by its QOperator type, its convention saying it came in as QOperator."""
    report = npu_byoc.coverage_report(imported(name))
    s = report.summary
    by_op = {}
    for o in report.ops:
        by_op.setdefault(o.op, []).append(o)
    assert QOP_CNN_OPS <= set(by_op)
    assert s["macs_offloaded"] / s["macs_total"] >= 0.999
    offloaded = ("QLinearConv", "QLinearAdd", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearGlobalAveragePool", "QGemm")
    assert all(o.offloaded and o.convention.startswith("QOperator, qdq") for op in offloaded for o in by_op[op])
    if name == "qop_cnn_u8s8.onnx":
        assert all("uint8 activations" in o.convention for op in offloaded for o in by_op[op])
    # the concat rescales its inputs as it copies them in (LUT ops); the pool rescales too
    # (onnxruntime gives it its own scale), which NPU pooling does not
    assert all(o.offloaded and o.pattern == "npu.concat" for o in by_op["QLinearConcat"])
    assert not any(o.offloaded for o in by_op["QLinearAveragePool"])
    assert "avg_pool2d rescales" in by_op["QLinearAveragePool"][0].reason


def _lsb_off(got, want, name) -> float:
    meta = json.loads(str(np.load(MODELS / name.replace(".onnx", ".npz"))["meta"]))
    return float(np.abs(got.astype(np.float64) - want) .max() / meta["outputs"][0]["scale"])


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["cpu", "functional"])
@pytest.mark.parametrize("name", QOP_CNNS)
def test_qop_cnn_matches_onnxruntime(imported, name, backend):
    """<= 1 LSB off onnxruntime (graph optimizations disabled): the NPU requantizes in fixed
    point where onnxruntime multiplies in float, and TVM's CPU runs the QDQ form in float."""
    ref = np.load(MODELS / name.replace(".onnx", ".npz"))
    model = npu_byoc.build(imported(name), backend)
    for s in range(ref["input_0"].shape[0]):
        got = model.run([ref["input_0"][s : s + 1]])[0]
        want = ref["output_0"][s : s + 1]
        assert got.shape == want.shape
        assert _lsb_off(got, want, name) <= 1.0 + 1e-4
