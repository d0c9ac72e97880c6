"""A requantize left shift (effective scale >= 1) that overflows int32 (docs/numerics.md §3):
TFLite's reference wraps x · 2^left, as the NPU does; onnxruntime and TVM's CPU build requantize
in float and saturate. An ONNX (or Relax) op whose worst case can overflow stays on the CPU with
the reason; a TFLite one keeps TFLite's wrap on the NPU."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import npu_byoc
from npu_byoc.frontends.load import MODEL_INFO_ATTR, ModelInfo, model_info
from npu_byoc.partition.pipeline import partition_for_npu, partition_log

S_OUT = 1.0 / 4096  # s_in = s_w = 1: effective scale 4096 = 2^30 · 2^(13 − 31), shift +13
C_IN, K = 4, 3
W = np.full((2, C_IN, K, K), 127, np.int8)  # channel 1 negated: overflow to both sides
W[1] = -127


def _qdq_conv(path, transpose: bool = False) -> str:
    """x (float) -> Q/DQ -> Conv (int8 weights, scale 1; int32 bias) -> Q/DQ, per tensor."""
    init = [numpy_helper.from_array(np.float32(1.0), "s1"), numpy_helper.from_array(np.int8(0), "z"),
            numpy_helper.from_array(np.float32(S_OUT), "so"),
            numpy_helper.from_array(W.transpose(1, 0, 2, 3).copy() if transpose else W, "wq"),
            numpy_helper.from_array(np.array([5, -5], np.int32), "bq"),
            numpy_helper.from_array(np.int32(0), "zb")]  # fmt: skip
    op = "ConvTranspose" if transpose else "Conv"
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s1", "z"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "s1", "z"], ["xd"]),
        helper.make_node("DequantizeLinear", ["wq", "s1", "z"], ["wd"]),
        helper.make_node("DequantizeLinear", ["bq", "s1", "zb"], ["bd"]),
        helper.make_node(op, ["xd", "wd", "bd"], ["y"], kernel_shape=[K, K], pads=[1, 1, 1, 1]),
        helper.make_node("QuantizeLinear", ["y", "so", "z"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "so", "z"], ["out"]),
    ]
    graph = helper.make_graph(nodes, "overflow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C_IN, 6, 6])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 2, 6, 6])], init)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def _input() -> np.ndarray:
    # 36 taps of 127 · x: acc ≥ 2^18 overflows acc · 2^13; x in [64, 127] gives acc in [2^18, 2^19)
    # at the interior pixels (wraps negative), fewer taps at the border
    return np.random.default_rng(0).integers(64, 128, (1, C_IN, 6, 6)).astype(np.float32)


def _tflite_conv(x: np.ndarray) -> np.ndarray:
    """TFLite's reference conv, by hand: acc = Σ w·x + bias, wrap32(acc · 2^13), SRDHM by 2^30
    (= /2 rounded half up), clamp. NCHW, padding 1."""
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, 2, 6, 6), np.int64)
    for c in range(2):
        for i in range(6):
            for j in range(6):
                acc = int((xp[0, :, i:i + K, j:j + K] * W[c].astype(np.int64)).sum()) + (5 if c == 0 else -5)
                v = ((acc << 13) + 2**31) % 2**32 - 2**31  # int32 wrap
                v = (v * 2**30 + (2**30 if v >= 0 else 1 - 2**30))  # SRDHM numerator with nudge
                v = int(np.trunc(v / 2**31)) if abs(v) < 2**52 else (v // 2**31 if v >= 0 else -((-v) // 2**31))
                out[0, c, i, j] = min(max(v, -128), 127)
    return out.astype(np.int8)


@pytest.mark.parametrize("transpose", [False, True], ids=["Conv", "ConvTranspose"])
def test_onnx_conv_whose_left_shift_can_overflow_stays_on_the_cpu(tmp_path, transpose):
    """Before: listed on the NPU, 255 LSB from TVM's CPU build on the wrapped outputs. Now
    refused with the reason, and the model equals TVM's CPU build."""
    mod = npu_byoc.load_model(_qdq_conv(tmp_path / "conv.onnx", transpose))
    part = partition_for_npu(mod)
    pattern = "npu.transpose_conv2d" if transpose else "npu.conv2d"
    conv = [d for d in partition_log(part) if d.pattern == pattern]
    assert conv and not conv[0].accepted
    assert "requantize left shift 13" in conv[0].reason and "overflows int32" in conv[0].reason
    assert "saturates" in conv[0].reason
    x = _input()
    got = npu_byoc.build(mod, "golden").run([x])[0]
    cpu = npu_byoc.build(mod, "cpu").run([x])[0]
    assert np.array_equal(got, cpu)
    # the independent value: TVM saturates where TFLite wraps, so the two differ here (a stride-1
    # ConvTranspose with pads 1 is the conv with the kernel flipped: the same, for this kernel)
    assert np.abs(np.round(cpu / S_OUT) - _tflite_conv(x)).max() == 255


def test_tflite_origin_keeps_tflite_wrap_on_the_npu(tmp_path):
    """The same conv in a module of TFLite origin stays on the NPU and wraps exactly as
    TFLite's reference formula (derived by hand above): golden, C model and RTL."""
    mod = npu_byoc.load_model(_qdq_conv(tmp_path / "conv.onnx"))
    info = model_info(mod)
    mod = mod.with_attr(MODEL_INFO_ATTR, ModelInfo(info.path, "tflite", info.inputs, info.outputs, info.ops).to_json())
    part = partition_for_npu(mod)
    assert all(d.accepted for d in partition_log(part))
    x = _input()
    want = _tflite_conv(x)
    assert (want == -128).any() and (want == 127).any()  # wrapped and not
    for backend in ("golden", "functional", "verilator"):
        got = np.round(npu_byoc.build(mod, backend).run([x])[0] / S_OUT).astype(np.int64)
        assert np.array_equal(got, want), backend


def test_onnx_conv_whose_left_shift_cannot_overflow_stays_on_the_npu(tmp_path):
    """Small weights: worst case 36 · 1 · 128 · 2^13 < 2^31, nothing can wrap, the NPU keeps it."""
    global W
    saved, W = W, np.ones_like(W)
    try:
        mod = npu_byoc.load_model(_qdq_conv(tmp_path / "conv.onnx"))
    finally:
        W = saved
    assert all(d.accepted for d in partition_log(partition_for_npu(mod)))


def test_tflite_file_keeps_a_reachable_wrap_on_the_npu(tmp_path):
    """A real TFLite file: tiny_cnn_int8's first CONV_2D with its output scale divided by 2^24
    (requantize shift about +16: the worst case wraps). TFLite's reference wraps there as the
    NPU does, so it stays on the NPU; the same conv from an ONNX or Relax model would not."""
    import tflite

    from npu_byoc.codegen.lower import lower_partition
    from npu_byoc.ops.kick_limits import left_shift_wrap
    from npu_byoc.ops.composites import npu_functions

    from .conftest import model_path

    buf = bytearray(open(model_path("tiny_cnn_int8.tflite"), "rb").read())
    sg = tflite.Model.GetRootAsModel(buf, 0).Subgraphs(0)
    sg.Tensors(sg.Operators(0).Outputs(0)).Quantization().ScaleAsNumpy()[:] /= 2.0**24  # a view into buf
    path = tmp_path / "wraps.tflite"
    path.write_bytes(bytes(buf))
    part = partition_for_npu(npu_byoc.load_model(str(path)))
    first = partition_log(part)[0]
    assert (first.pattern, first.accepted) == ("npu.conv2d", True)
    # the only op with a left shift: the ops reading its output see their scales divided
    ops = [op for name, f in npu_functions(part).items() for op in lower_partition(name, f).ops]
    assert [op.kind for op in ops if left_shift_wrap(op)] == ["conv2d"]
