"""An NCHW ViT's patches to tokens inside one partition (npu_byoc.codegen.tokens): the patch
conv's [1, C, H, W] -> Reshape [1, C, H*W] -> Transpose(0, 2, 1) -> [1, H*W, C] tokens.

* the NPU's NHWC bytes of the conv's map, read through the reshape's view, are the model's
  [1, C, L] (numpy, by hand);
* a Relax QDQ model conv -> reshape -> transpose -> LayerNorm over the tokens' channels is one
  NPU partition (the reshape used to stay on the CPU), golden == C model, within 1 LSB of TVM's
  CPU build;
* a reshape to [1, C, L] read by anything else keeps its NCHW refusal.
(layernorm_qdq.onnx, the fixture with this pair: tests/test_layernorm.py and
tests/test_transformer_fixtures.py, the RTL there.)
"""

from __future__ import annotations

import numpy as np
import pytest
from tvm import relax
from tvm.relax import op as R

import npu_byoc
from npu_byoc.codegen.tokens import channels_in_a_row
from npu_byoc.ops.npu_ops import TensorRef
from npu_byoc.ops.records import QReshape, QTensor
from npu_byoc.partition.pipeline import partition_log

C, H, W = 8, 4, 4  # the conv's output: 16 tokens of 8 channels


def test_the_view_reads_the_conv_bytes_as_the_model_s_sequence():
    y = np.arange(C * H * W).reshape(1, C, H, W)  # the model's conv output, NCHW
    stored = np.moveaxis(y[0], 0, -1).ravel()  # as the NPU stores it: H x W pixels of C channels
    t = QTensor((1, C, H, W), "int8", 0.1, 0)
    op = QReshape(t, QTensor((1, C, H * W), "int8", 0.1, 0), "qdq")
    ref = channels_in_a_row(op, TensorRef("patch", 5, 0, (H, W, C), "NHWC"))
    assert ref.shape == (1, C, H * W) and ref.strides == (C * H * W, 1, C)
    seen = np.array([[stored[ref.strides[1] * c + ref.strides[2] * k] for k in range(H * W)] for c in range(C)])
    np.testing.assert_array_equal(seen, y.reshape(1, C, H * W)[0])  # the reshape, by hand


def _deq(bb, x, scale, zp, axis=1):
    return bb.emit(R.dequantize(x, relax.const(scale, "float32"), relax.const(zp, "int8"), axis=axis))


def _q(bb, y, scale, zp, axis=1):
    return bb.emit(R.quantize(y, relax.const(scale, "float32"), relax.const(zp, "int8"), axis=axis, out_dtype="int8"))


def _patch_tokens(then: str):
    """x int8 [1, 3, 8, 8] -> QDQ 2x2/2 conv (NCHW) -> [1, 8, 4, 4] -> reshape [1, 8, 16] ->
    ``then``: "layernorm" (transpose to [1, 16, 8], LayerNorm over the 8 channels) or
    "sigmoid" (of the [1, 8, 16] as it is)."""
    rng = np.random.default_rng(24)
    w = rng.integers(-127, 128, (C, 3, 2, 2)).astype("int8")
    s_w = np.linspace(0.002, 0.006, C).astype("float32")
    bias = rng.integers(-2000, 2000, C).astype("int32")
    x = relax.Var("x", relax.TensorType([1, 3, 2 * H, 2 * W], "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            wd = bb.emit(R.dequantize(relax.const(w), relax.const(s_w), relax.const(np.zeros(C, "int8")), axis=0))
            y = bb.emit(R.nn.conv2d(_deq(bb, x, 0.02, 3), wd, strides=2, out_dtype="float32"))
            bd = bb.emit(R.dequantize(relax.const(bias), relax.const(0.02 * s_w), relax.const(np.zeros(C, "int32")),
                                      axis=0))  # fmt: skip
            y = _q(bb, bb.emit(R.add(y, R.reshape(bd, (1, C, 1, 1)))), 0.1, -7)
            t = _q(bb, bb.emit(R.reshape(_deq(bb, y, 0.1, -7), (1, C, H * W))), 0.1, -7)
            if then == "layernorm":
                t = _q(bb, bb.emit(R.permute_dims(_deq(bb, t, 0.1, -7), [0, 2, 1])), 0.1, -7)
                ln = R.nn.layer_norm(_deq(bb, t, 0.1, -7, -1), relax.const(np.linspace(0.5, 1.5, C, dtype="float32")),
                                     relax.const(np.linspace(-0.3, 0.3, C, dtype="float32")), axes=[-1])  # fmt: skip
                out = _q(bb, bb.emit(ln), 0.03, -5, -1)
            else:
                out = _q(bb, bb.emit(R.sigmoid(_deq(bb, t, 0.1, -7))), 1 / 256, -128)
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    return bb.get()


@pytest.fixture(scope="module")
def tokens_builds():
    return {b: npu_byoc.build(_patch_tokens("layernorm"), b) for b in ("golden", "functional", "cpu")}


def test_conv_reshape_transpose_layernorm_is_one_partition(tokens_builds):
    log = partition_log(npu_byoc.partition_for_npu(_patch_tokens("layernorm")))
    assert all(d.accepted for d in log if d.pattern in ("npu.reshape", "npu.transpose")), log
    golden = tokens_builds["golden"]
    assert len(golden.plans) == 1, "one NPU partition"
    (plan,) = golden.plans.values()
    assert [type(op).__name__ for op in plan.ops][-3:] == ["Conv2D", "Transpose", "LayerNorm"]  # the reshape: a view
    for seed in range(3):
        x = np.random.default_rng(seed).integers(-128, 128, (1, 3, 2 * H, 2 * W)).astype("int8")
        got = golden.run([x])[0]
        np.testing.assert_array_equal(got, tokens_builds["functional"].run([x])[0])
        cpu = tokens_builds["cpu"].run([x])[0]
        assert got.shape == cpu.shape == (1, H * W, C)
        assert np.abs(got.astype(int) - cpu.astype(int)).max() <= 1


def test_a_reshape_to_channels_by_pixels_read_otherwise_stays_refused():
    log = partition_log(npu_byoc.partition_for_npu(_patch_tokens("sigmoid")))
    (d,) = [d for d in log if d.pattern == "npu.reshape"]
    assert not d.accepted and "reorders the bytes the NPU stores NHWC" in d.reason
