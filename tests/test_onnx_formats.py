"""ONNX models beyond the textbook QDQ CNN: 4-bit weights (QInt4 / QUInt4, which TVM's importer
cannot read), dynamic quantization (quantize_dynamic: nothing for the NPU, said so), the
operators TVM imports as TIR kernels (Pad, Clip), and the data movement of mobile CNNs (Resize
nearest, Slice, Split). Fixtures from tools/make_models.py with onnxruntime's outputs
(optimizations disabled)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import npu_byoc
from npu_byoc.frontends import onnx_int4

from .conftest import check_onnx_fixture, model_path, reference

FOUR_BIT = ["int4_weights_qdq.onnx", "uint4_weights_qdq.onnx"]


def _weights(model) -> dict:
    """Each DequantizeLinear weight's integer values minus its zero point (the real value over
    the scale), keyed by the node's output."""
    inits = {t.name: numpy_helper.to_array(t).astype(np.int32) for t in model.graph.initializer}
    out = {}
    for n in model.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[0] in inits and len(n.input) > 2:
            x, zp = inits[n.input[0]], inits[n.input[2]]
            axis = next((a.i for a in n.attribute if a.name == "axis"), 1) % max(x.ndim, 1)
            shape = [1] * x.ndim
            if zp.ndim:
                shape[axis] = zp.size
            out[n.output[0]] = x - zp.reshape(shape)
    return out


@pytest.mark.parametrize("name", FOUR_BIT)
def test_widening_keeps_every_weight_value(name):
    model = onnx.load(model_path(name))
    kinds = {t.data_type for t in model.graph.initializer}
    assert kinds & {onnx_int4.INT4, onnx_int4.UINT4}
    wide = onnx_int4.widen(model)
    assert not {t.data_type for t in wide.graph.initializer} & {onnx_int4.INT4, onnx_int4.UINT4}
    before, after = _weights(model), _weights(wide)
    assert before.keys() == after.keys() and all(np.array_equal(before[k], after[k]) for k in before)
    if "uint4" in name:  # QUInt4's zero point 8 becomes the symmetric int8 weight the NPU takes
        zps = [numpy_helper.to_array(t) for t in wide.graph.initializer if t.name.endswith("zero_point__int8")]
        assert zps and all(z.dtype == np.int8 and not z.any() for z in zps)


@pytest.mark.parametrize("name", FOUR_BIT)
def test_four_bit_weights_run_on_the_npu(name):
    """Every op on the NPU in one partition. TVM's CPU build of the widened model equals
    onnxruntime (which reads the 4-bit tensors itself) exactly; each NPU layer is within 1 LSB of
    TVM's on the same input (fixed-point requantize against QDQ's float); the model output,
    where those differences travel through five layers, within 2 LSB of onnxruntime."""
    report = npu_byoc.coverage_report(npu_byoc.load_model(model_path(name)))
    assert report.summary["ops_offloaded"] == report.summary["ops_total"] == 8
    assert report.summary["partitions"] == 1
    check_onnx_fixture(name, lsb=2, cpu_exact=True)


def test_dynamic_quantization_stays_on_the_cpu_with_its_reason():
    """quantize_dynamic's scales come from each input at run time: the NPU takes nothing, the
    report says why (not "no convention matched"), and the model runs on TVM's CPU build."""
    name = "dynamic_quant.onnx"
    mod = npu_byoc.load_model(model_path(name))
    report = npu_byoc.coverage_report(mod)
    assert report.summary["ops_offloaded"] == 0 and report.summary["partitions"] == 0
    by_op = {}
    for o in report.ops:
        by_op.setdefault(o.op, []).append(o.reason)
    assert all("at run time" in r and "quantize_static" in r for r in by_op["DynamicQuantizeLinear"])
    assert all("dynamically quantized input" in r for r in by_op["MatMulInteger"] + by_op["ConvInteger"])
    ref = reference(name)
    model, cpu = npu_byoc.build(mod, "functional"), npu_byoc.build(mod, "cpu")
    for x, y in zip(ref["inputs"], ref["outputs"]):
        got = model.run(x)[0]
        assert np.array_equal(got, cpu.run(x)[0])
        # TVM's own DynamicQuantizeLinear against onnxruntime's: a quantization step apart at most
        assert np.abs(got - y[0]).max() <= 0.03 * np.abs(y[0]).max()


def test_onnx_pad_and_hard_sigmoid_run_on_the_npu():
    """onnx_glue_qdq.onnx: TVM's importer writes ONNX Pad as a TIR kernel no pattern reads; the
    import makes it relax.nn.pad (npu_byoc.frontends.onnx_converters), so tf2onnx's bottom/right SAME pad
    folds into the stride-2 depthwise conv, and HardSigmoid is a LUT op: every op on the NPU in
    one partition. TVM's CPU build of the same import equals onnxruntime exactly; the NPU is
    within 1 LSB (fixed-point requantize), golden == C model == RTL."""
    name = "onnx_glue_qdq.onnx"
    report = npu_byoc.coverage_report(npu_byoc.load_model(model_path(name)))
    by_op = {o.op: o for o in report.ops}
    assert by_op["Pad"].offloaded and by_op["Pad"].pattern == "npu.depthwise_conv2d"
    assert by_op["HardSigmoid"].pattern == "npu.hard_sigmoid"
    assert report.summary["ops_offloaded"] == report.summary["ops_total"] and report.summary["partitions"] == 1
    check_onnx_fixture(name, lsb=1, cpu_exact=True, layer_lsb=None)


def test_onnx_mobile_cnn_operators_are_one_partition():
    """onnx_ops_qdq.onnx (opset 18; onnxruntime's QDQ quantizer): Conv, HardSwish, Pad, depthwise
    Conv, squeeze-excite with HardSigmoid, Split along channels (one slice per output), Tanh,
    LeakyRelu, Concat, Resize nearest 2x and Slice (strided copies, NCHW), AveragePool, Add,
    ReduceMean, Gemm: all 19 on the NPU in one partition, within 1 LSB of onnxruntime, golden ==
    C model == RTL with the cycle model exact."""
    name = "onnx_ops_qdq.onnx"
    report = npu_byoc.coverage_report(npu_byoc.load_model(model_path(name)))
    assert report.summary["ops_offloaded"] == report.summary["ops_total"] == 19
    assert report.summary["partitions"] == 1
    moves = {o.op: o.pattern for o in report.ops if o.op in ("Split", "Resize", "Slice")}
    assert moves == {"Split": "npu.gather", "Resize": "npu.gather", "Slice": "npu.gather"}
    check_onnx_fixture(name, lsb=1)


@pytest.mark.parametrize("sections", [2, [3, 9]])
def test_split_becomes_one_slice_per_output(sections):
    """relax.split (TVM's import of ONNX Split) read through TupleGetItems is the same values as
    one strided_slice per output; each is then its own NPU gather (equal sections, or explicit
    split points along channels of an NCHW tensor)."""
    from tvm import relax
    from tvm.relax.op import dequantize, quantize

    from npu_byoc.ops.composites import npu_functions
    from npu_byoc.partition.pipeline import partition_for_npu, split_to_slices

    s, z = relax.const(np.float32(0.05)), relax.const(np.int8(-3))
    x = relax.Var("x", relax.TensorType((1, 12, 5, 6), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            parts = bb.emit(relax.op.split(bb.emit(dequantize(x, s, z)), sections, axis=1))
            outs = [bb.emit(quantize(bb.emit(relax.TupleGetItem(parts, k)), s, z, out_dtype="int8"))
                    for k in range(2 if sections == 2 else 3)]  # fmt: skip
            gv = bb.emit_output(relax.Tuple(outs))
        bb.emit_func_output(gv)
    mod = bb.get()
    assert "R.split" not in split_to_slices(mod)["main"].script()
    part = partition_for_npu(mod)
    n = 2 if sections == 2 else 3
    # each slice on the NPU (with nothing between them, TVM merges them into no common partition)
    assert len(npu_functions(part)) == n and "strided_slice" not in part["main"].script()
    value = np.random.default_rng(2).integers(-128, 128, (1, 12, 5, 6), dtype=np.int8)
    want = npu_byoc.build(mod, "cpu").run([value])
    got = npu_byoc.build(part, "golden").run([value])
    edges = [0, 6, 12] if sections == 2 else [0, 3, 9, 12]
    assert len(got) == len(want) == len(edges) - 1
    for k, (g, w) in enumerate(zip(got, want)):
        assert np.array_equal(g, w) and np.array_equal(g, value[:, edges[k]:edges[k + 1]])
