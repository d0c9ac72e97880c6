"""partition_for_npu on models made by real converters: every convention of the table is met,
extraction reads the values the converter wrote, and the partitioned module computes exactly
what the unpartitioned one does."""

from __future__ import annotations

import numpy as np
import pytest
import tflite
import tvm
from tvm import relax

import npu_byoc
from npu_byoc.ops.composites import composite_functions, extract_composite, npu_functions
from npu_byoc.partition.pipeline import partition_log, unpartition

from .conftest import ALL_MODELS, model_path, reference

# (NPU op, convention) pairs each real converter produces; all must be matched and accepted.
EXPECTED_CONVENTIONS = {
    "tiny_cnn_int8.tflite": {
        ("npu.conv2d", "qdq+bias+clip"),  # fused ReLU / ReLU6
        ("npu.conv2d", "qdq+bias"),  # no activation
        ("npu.depthwise_conv2d", "qdq+bias+clip"),  # per-channel weights through dequantize -> reshape
        ("npu.fully_connected", "qdq+bias"),  # dequantize(permute_dims(W))
        ("npu.sigmoid", "qdq"),
        ("npu.tanh", "qdq"),
        ("npu.requantize", "qdq"),  # QUANTIZE int8 -> int8 before CONCATENATION
        ("npu.avg_pool2d", "cast-wrapped"),
        ("npu.max_pool2d", "integer"),
        ("npu.mean", "qdq"),
        ("npu.add", "qdq"),
        ("npu.concat", "qdq"),  # the branches' outputs share the concatenation's quantization
        ("npu.softmax", "qdq"),  # dequantize -> softmax -> quantize(1/256, -128)
    },
    "tiny_cnn_qdq.onnx": {
        ("npu.conv2d", "qdq+bias"),  # bias through dequantize -> reshape(1, C, 1, 1)
        ("npu.depthwise_conv2d", "qdq+bias"),
        ("npu.fully_connected", "qdq+bias"),  # permute_dims(dequantize(W))
        ("npu.sigmoid", "qdq"),
        ("npu.tanh", "qdq"),
        ("npu.avg_pool2d", "qdq"),
        ("npu.max_pool2d", "qdq"),
        ("npu.mean", "qdq"),  # GlobalAveragePool
        ("npu.add", "qdq"),  # shared dequantize split per consumer
        ("npu.reshape", "qdq"),  # Flatten between GlobalAveragePool and Gemm
        ("npu.concat", "qdq"),  # each branch rescaled as it is copied in (onnxruntime's scales differ)
    },
    "mobilenet_v2_int8.tflite": {
        ("npu.conv2d", "qdq+bias+clip"),
        ("npu.conv2d", "qdq+bias"),
        ("npu.depthwise_conv2d", "qdq+bias+clip"),
        ("npu.fully_connected", "qdq+bias"),
        ("npu.mean", "qdq"),
        ("npu.add", "qdq"),
        ("npu.softmax", "qdq"),
    },
}


@pytest.mark.parametrize("name", ALL_MODELS)
def test_real_converter_conventions_are_matched(partitioned, name):
    accepted = {(d.pattern, d.convention) for d in partition_log(partitioned(name)) if d.accepted}
    assert accepted == EXPECTED_CONVENTIONS[name]


@pytest.mark.parametrize("name", ALL_MODELS)
def test_composites_are_the_accepted_matches(partitioned, name):
    """Every accepted check became a composite, and every composite re-extracts."""
    mod = partitioned(name)
    composites = [c for f in npu_functions(mod).values() for c in composite_functions(f)]
    accepted = [d for d in partition_log(mod) if d.accepted]
    assert sorted(n for n, _ in composites) == sorted(d.pattern for d in accepted)
    for _, func in composites:
        extract_composite(func)


def _tflite_conv0():
    """Op 0 of tiny_cnn_int8 (a CONV_2D) read with the tflite package, not with TVM."""
    m = tflite.Model.GetRootAsModel(model_path("tiny_cnn_int8.tflite").read_bytes(), 0)
    g = m.Subgraphs(0)
    op = g.Operators(0)
    assert m.OperatorCodes(op.OpcodeIndex()).BuiltinCode() == tflite.BuiltinOperator.CONV_2D

    def tensor(i):
        t = g.Tensors(int(op.Inputs(i)))
        buf = m.Buffers(t.Buffer()).DataAsNumpy()
        dtype = {9: np.int8, 2: np.int32}[t.Type()]
        return np.frombuffer(buf.tobytes(), dtype).reshape(t.ShapeAsNumpy()), t.Quantization()

    w, wq = tensor(1)
    b, _ = tensor(2)
    x_q = g.Tensors(int(op.Inputs(0))).Quantization()
    return w, wq.ScaleAsNumpy().astype(np.float64), b, float(x_q.ScaleAsNumpy()[0])


def test_extracted_conv_is_what_the_converter_wrote(partitioned):
    mod = partitioned("tiny_cnn_int8.tflite")
    convs = [
        extract_composite(c)
        for f in npu_functions(mod).values()
        for n, c in composite_functions(f)
        if n == "npu.conv2d"
    ]
    w, w_scale, bias, x_scale = _tflite_conv0()  # TFLite stores conv weights OHWI already
    match = [op for op in convs if op.weight.shape == w.shape and np.array_equal(op.weight, w)]
    assert len(match) == 1
    op = match[0]
    np.testing.assert_array_equal(op.bias, bias)
    np.testing.assert_allclose(op.weight_scale, w_scale, rtol=1e-7)
    assert op.input.scale == pytest.approx(x_scale, rel=1e-7)
    assert op.strides == (2, 2)
    assert op.act_min == op.output.zero_point  # fused ReLU6 clamps at real 0


def test_mobilenet_offloads_every_conv_depthwise_and_mean(partitioned):
    report = npu_byoc.coverage_report(partitioned("mobilenet_v2_int8.tflite"))
    kinds = {"CONV_2D", "DEPTHWISE_CONV_2D", "MEAN"}
    ops = [o for o in report.ops if o.op in kinds]
    assert len(ops) >= 50
    assert all(o.offloaded for o in ops), [o for o in ops if not o.offloaded]
    assert report.summary["macs_offloaded"] == report.summary["macs_total"]


_compiled: dict = {}


def _run(mod, inputs):
    key = id(mod)
    if key not in _compiled:
        _compiled[key] = (mod, relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu()))
    vm = _compiled[key][1]
    out = vm["main"](*[tvm.runtime.tensor(np.ascontiguousarray(x)) for x in inputs])
    return out.numpy()


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL_MODELS)
def test_partitioned_module_computes_the_same(imported, partitioned, name):
    """The NPU functions, compiled back for the CPU by TVM, give bit-identical outputs."""
    plain = imported(name)
    back = unpartition(partitioned(name))
    for inputs in reference(name)["inputs"]:
        np.testing.assert_array_equal(_run(back, inputs), _run(plain, inputs))
