"""The glue between NPU ops that used to split partitions (issue 9): zero-point PADs folded into
the next conv / depthwise / max pool, against LiteRT's reference kernels (glue_cnn_int8, the
keras ResNet / DenseNet stems) and against the same conv with the padding written in."""

from __future__ import annotations

import numpy as np
import pytest

import npu_byoc
from npu_byoc.ops.composites import npu_functions
from npu_byoc.partition.pipeline import partition_for_npu

from .conftest import check_onnx_fixture, model_path, reference
from .relax_builders import qdq_conv2d

_reports: dict = {}
_built: dict = {}


def _coverage(name: str):
    if name not in _reports:
        _reports[name] = npu_byoc.coverage_report(npu_byoc.load_model(model_path(name)))
    return _reports[name]


def _ops(name: str, kind: str):
    return [o for o in _coverage(name).ops if o.op == kind]


# ------------------------------------------------------------------------------- PAD folding
def test_zero_padding_folds_into_the_stride2_conv_and_the_depthwise():
    pads = _ops("glue_cnn_int8.tflite", "PAD")
    folded = {o.name.split("/")[1]: o for o in pads}
    assert folded["pad_conv_1"].offloaded and folded["pad_conv_1"].pattern == "npu.conv2d"
    assert folded["pad_dw_1"].offloaded and folded["pad_dw_1"].pattern == "npu.depthwise_conv2d"


def test_a_pad_too_wide_to_fold_runs_as_its_own_npu_pad():
    """(3, 3, 3, 3) before a 3x3 conv cannot fold into it: the PAD is an NPU op of its own
    (npu.pad), the conv reads its output."""
    wide = next(o for o in _ops("glue_cnn_int8.tflite", "PAD") if "pad_wide" in o.name)
    assert wide.offloaded and wide.pattern == "npu.pad"
    conv = next(o for o in _ops("glue_cnn_int8.tflite", "CONV_2D") if "conv_wide" in o.name)
    assert conv.offloaded and conv.pattern == "npu.conv2d"


@pytest.mark.parametrize("name", ["resnet_small_int8.tflite", "densenet_small_int8.tflite"])
def test_keras_stem_pads_run_on_the_npu(name):
    """ZeroPadding2D(3) -> 7x7/2 conv and ZeroPadding2D(1) -> 3x3/2 max pool (the pad fills
    with -128 after the ReLU: it never wins a max, so it is max-pool padding)."""
    pads = _ops(name, "PAD")
    assert len(pads) == 2 and all(o.offloaded for o in pads)
    assert {o.pattern for o in pads} == {"npu.conv2d", "npu.max_pool2d"}


def test_resnet_is_one_partition():
    s = _coverage("resnet_small_int8.tflite").summary
    assert s["partitions"] == 1 and s["transitions"] == 1 and s["ops_offloaded"] == s["ops_total"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["glue_cnn_int8.tflite", "resnet_small_int8.tflite", "densenet_small_int8.tflite"])
def test_folded_models_are_litert_exactly(name):
    model = npu_byoc.build(npu_byoc.load_model(model_path(name)), "functional")
    ref = reference(name)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        got = model.run(inputs)
        assert len(got) == len(outputs)
        for g, w in zip(got, outputs):
            assert g.shape == w.shape
            np.testing.assert_array_equal(g, w)


# Relax-level: the TFLite form (nn.pad on the int8 tensor, then dequantize -> conv2d).
_PAD = [0, 0, 2, 1, 0, 2, 0, 0]  # top 2, bottom 1, left 0, right 2


def _conv(**kw):
    base = dict(input_hw=(7, 6), in_channels=4, out_channels=8, kernel=3, strides=2, padding=0,
                bias=np.arange(8, dtype=np.int32) * 37, relu=True)
    return qdq_conv2d(**{**base, **kw})


def _decisions(mod):
    from npu_byoc.partition.pipeline import partition_log

    return partition_log(partition_for_npu(mod))


@pytest.mark.parametrize("groups", [1, 4])
def test_folded_pad_equals_the_conv_with_that_padding(groups):
    """pad(x, zero point) -> conv(padding 0) is conv(padding = the pad) exactly: compared with
    the conv that has the asymmetric padding written in, and within 1 LSB of TVM's float CPU
    build of the padded form (QDQ rounds in float there)."""
    out_c = 4 if groups == 4 else 8
    kw = dict(groups=groups, out_channels=out_c, bias=np.arange(out_c, dtype=np.int32) * 37)
    padded = _conv(pre_pad=_PAD, **kw)
    written = _conv(padding=(2, 0, 1, 2), **kw)
    part = partition_for_npu(padded)
    (func,) = npu_functions(part).values()
    assert "R.nn.pad" in func.script() and "R.nn.pad" not in part["main"].script()
    x = np.random.default_rng(3).integers(-128, 128, (1, 7, 6, 4), dtype=np.int8)
    got = npu_byoc.build(part, "golden").run([x])[0]
    want = npu_byoc.build(partition_for_npu(written), "golden").run([x])[0]
    np.testing.assert_array_equal(got, want)
    cpu = npu_byoc.build(padded, "cpu").run([x])[0]
    assert np.abs(got.astype(int) - cpu.astype(int)).max() <= 1


@pytest.mark.parametrize(
    "kw, reason, pad_on_npu",
    [
        (dict(pre_pad=_PAD, pre_pad_value=7.0), "PAD fill 7 before conv2d", True),
        (dict(pre_pad=[1, 0, 1, 1, 1, 1, 0, 0]), "only padding of the spatial axes", False),
        (dict(pre_pad=[0, 0, 3, 0, 0, 0, 0, 0]), "with the PAD (3, 0, 0, 0) folded in", True),
    ],
)
def test_unfoldable_pads_are_not_folded_and_say_why(kw, reason, pad_on_npu):
    """The conv refuses to fold the pad (the reason is in the decisions); a pad of the spatial
    axes then runs as its own npu.pad, one of the batch axis stays on the CPU; the output is TVM's
    CPU build's within 1 LSB either way."""
    mod = _conv(**kw)
    part = partition_for_npu(mod)
    assert ("R.nn.pad" not in part["main"].script()) == pad_on_npu
    assert npu_functions(part), "the conv still runs on the NPU"
    reasons = [d.reason for d in _decisions(mod) if not d.accepted]
    assert any(reason in r for r in reasons), reasons
    from npu_byoc.util.relax_utils import shape_of

    x = np.random.default_rng(5).integers(-128, 128, shape_of(mod["main"].params[0]), dtype=np.int8)
    got = npu_byoc.build(part, "golden").run([x])[0]
    cpu = npu_byoc.build(mod, "cpu").run([x])[0]
    assert np.abs(got.astype(int) - cpu.astype(int)).max() <= 1


# ------------------------------------------------------------------------------- dilation
def test_dilated_convs_run_on_the_npu():
    for kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        dilated = [o for o in _ops("glue_cnn_int8.tflite", kind) if "_dil" in o.name]
        assert len(dilated) == 1 and dilated[0].offloaded, kind


def test_dilate_kernel_inserts_zeros_between_taps():
    from npu_byoc.ops.conv2d import dilate_kernel

    w = np.arange(1, 1 + 2 * 2 * 3 * 1, dtype=np.int8).reshape(2, 2, 3, 1)
    d = dilate_kernel(w, (3, 2))
    assert d.shape == (2, 4, 5, 1)  # (k - 1) * d + 1
    np.testing.assert_array_equal(d[:, ::3, ::2], w)
    assert np.count_nonzero(d) == np.count_nonzero(w)


@pytest.mark.parametrize("groups", [1, 4])
def test_dilated_conv_equals_the_zero_inserted_kernel(groups):
    """Independent of the lowering: a conv with dilation 2 and a 3x3 kernel is, on TVM's CPU
    build, the undilated conv with the hand-written 5x5 zero-inserted kernel; the NPU's result
    equals the latter's exactly and is within 1 LSB of TVM's float CPU build."""
    out_c = 4 if groups == 4 else 8
    w = np.random.default_rng(5).integers(-127, 128, (3, 3, 4 // groups, out_c), dtype=np.int8)  # HWIO
    w5 = np.zeros((5, 5, 4 // groups, out_c), np.int8)
    w5[::2, ::2] = w
    kw = dict(input_hw=(9, 8), groups=groups, out_channels=out_c, strides=1, padding=(2, 1, 2, 3),
              bias=np.arange(out_c, dtype=np.int32) * 37, relu=True)
    dilated = qdq_conv2d(kernel=3, dilation=2, weight=w, **kw)
    inserted = qdq_conv2d(kernel=5, weight=w5, **kw)
    part = partition_for_npu(dilated)
    assert npu_functions(part) and "conv2d" not in part["main"].script()
    x = np.random.default_rng(4).integers(-128, 128, (1, 9, 8, 4), dtype=np.int8)
    got = npu_byoc.build(part, "golden").run([x])[0]
    cpu_dilated = npu_byoc.build(dilated, "cpu").run([x])[0]
    cpu_inserted = npu_byoc.build(inserted, "cpu").run([x])[0]
    np.testing.assert_array_equal(cpu_dilated, cpu_inserted)
    np.testing.assert_array_equal(got, npu_byoc.build(partition_for_npu(inserted), "golden").run([x])[0])
    assert np.abs(got.astype(int) - cpu_dilated.astype(int)).max() <= 1


# ------------------------------------------------------------------------------- reshape
def test_flatten_joins_the_mean_and_the_classifier():
    """ONNX QDQ Flatten between GlobalAveragePool and Gemm no longer splits the partition."""
    (flatten,) = _ops("tiny_cnn_qdq.onnx", "Flatten")
    assert flatten.offloaded and flatten.pattern == "npu.reshape"
    assert _coverage("tiny_cnn_qdq.onnx").summary["partitions"] == 1  # 3 before the views and the concatenation


@pytest.mark.parametrize("name", ["mobilenet_v1_batch_none_int8.tflite", "mobilenet_v3_small_int8.tflite"])
def test_classifier_reshape_is_a_view_at_the_partition_output(name):
    (reshape,) = [o for o in _coverage(name).ops if o.op == "RESHAPE"]
    assert reshape.offloaded and reshape.pattern == "npu.reshape"


def _mean_reshape_fc(layout: str, reshape_first: bool):
    """int8 x -> [1x1 conv] -> QDQ mean (keepdims) -> int8 reshape [1, C] -> QDQ matmul."""
    from tvm import relax
    from tvm.relax.op import dequantize, mean, quantize, reshape
    from tvm.relax.op.nn import conv2d

    c, hw = 4, 6
    shape = (1, c, hw, hw) if layout == "NCHW" else (1, hw, hw, c)
    axes = [2, 3] if layout == "NCHW" else [1, 2]
    s, z = relax.const(np.float32(0.05)), relax.const(np.int8(-3))
    w = np.random.default_rng(1).integers(-127, 128, (c, 8), dtype=np.int8)
    wc = np.random.default_rng(2).integers(-127, 128, (c, c, 1, 1) if layout == "NCHW" else (1, 1, c, c), dtype=np.int8)
    x = relax.Var("x", relax.TensorType(shape, "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = x
            if reshape_first:  # flatten [1, C, H, W] (NCHW: not the NPU's byte order)
                wd = bb.emit(dequantize(relax.const(wc), relax.const(np.float32(0.01)), relax.const(np.int8(0))))
                k = "OIHW" if layout == "NCHW" else "HWIO"
                y = bb.emit(conv2d(bb.emit(dequantize(x, s, z)), wd, data_layout=layout, kernel_layout=k))
                y = bb.emit(quantize(y, s, z, out_dtype="int8"))
                y = bb.emit(reshape(y, (1, c * hw * hw)))
                w = np.random.default_rng(1).integers(-127, 128, (c * hw * hw, 8), dtype=np.int8)
            else:
                y = bb.emit(quantize(bb.emit(mean(bb.emit(dequantize(x, s, z)), axes, keepdims=True)), s, z, out_dtype="int8"))
                y = bb.emit(reshape(y, (1, c)))
            wd = bb.emit(dequantize(relax.const(w), relax.const(np.float32(0.02)), relax.const(np.int8(0))))
            out = bb.emit(quantize(bb.emit(relax.op.matmul(bb.emit(dequantize(y, s, z)), wd)),
                                   relax.const(np.float32(0.1)), relax.const(np.int8(5)), out_dtype="int8"))
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    return bb.get(), shape


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_mean_reshape_fc_is_one_partition(layout):
    mod, shape = _mean_reshape_fc(layout, reshape_first=False)
    part = partition_for_npu(mod)
    assert len(npu_functions(part)) == 1 and "reshape" not in part["main"].script()
    x = np.random.default_rng(6).integers(-128, 128, shape, dtype=np.int8)
    got = npu_byoc.build(part, "golden").run([x])[0]
    cpu = npu_byoc.build(mod, "cpu").run([x])[0]
    assert got.shape == cpu.shape == (1, 8)
    assert np.abs(got.astype(int) - cpu.astype(int)).max() <= 1


def _golden_and_cpu(mod, part, shape, seed=6):
    x = np.random.default_rng(seed).integers(-128, 128, shape, dtype=np.int8)
    got = npu_byoc.build(part, "golden").run([x])[0]
    cpu = npu_byoc.build(mod, "cpu").run([x])[0]
    return got.astype(int), cpu.astype(int)


def test_nchw_flatten_of_a_feature_map_feeds_the_fc_in_byte_order():
    """[1, C, H, W] -> [1, C*H*W] in an NCHW model lists features in CHW order, the NPU stores
    the map HWC: the fully connected layer takes its weight rows in HWC order instead, so the
    flatten is a view and the model one partition (TVM's CPU build flattens the NCHW tensor)."""
    mod, shape = _mean_reshape_fc("NCHW", reshape_first=True)
    part = partition_for_npu(mod)
    assert len(npu_functions(part)) == 1 and "R.reshape" not in part["main"].script()
    got, cpu = _golden_and_cpu(mod, part, shape)
    assert got.shape == cpu.shape == (1, 8)
    assert np.abs(got - cpu).max() <= 1  # TVM's QDQ conv rounds in float


def _fc_unflatten_conv(flatten_output: bool = False):
    """int8 x [1, 12] -> QDQ matmul [12 -> C*H*W] -> int8 reshape [1, C, H, W] -> QDQ conv NCHW
    (a decoder's Linear -> view); with ``flatten_output`` the reshape is the model output."""
    from tvm import relax
    from tvm.relax.op import dequantize, quantize, reshape
    from tvm.relax.op.nn import conv2d

    c, h, w = 3, 4, 5
    s, z = relax.const(np.float32(0.05)), relax.const(np.int8(-3))
    wf = np.random.default_rng(1).integers(-127, 128, (12, c * h * w), dtype=np.int8)
    wf_scale = relax.const(np.random.default_rng(4).uniform(0.005, 0.02, c * h * w).astype(np.float32))
    wc = np.random.default_rng(2).integers(-127, 128, (6, c, 3, 3), dtype=np.int8)
    x = relax.Var("x", relax.TensorType((1, 12), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            wd = bb.emit(dequantize(relax.const(wf), wf_scale, relax.const(np.int8(0)), axis=1))
            y = bb.emit(quantize(bb.emit(relax.op.matmul(bb.emit(dequantize(x, s, z)), wd)), s, z, out_dtype="int8"))
            y = bb.emit(reshape(y, (1, c, h, w)))
            if not flatten_output:
                wd = bb.emit(dequantize(relax.const(wc), relax.const(np.float32(0.01)), relax.const(np.int8(0))))
                y = bb.emit(conv2d(bb.emit(dequantize(y, s, z)), wd, padding=1, data_layout="NCHW", kernel_layout="OIHW"))
                y = bb.emit(quantize(y, relax.const(np.float32(0.1)), relax.const(np.int8(2)), out_dtype="int8"))
            gv = bb.emit_output(y)
        bb.emit_func_output(gv)
    return bb.get()


def test_nchw_unflatten_after_an_fc_takes_its_features_in_byte_order():
    """A decoder's Linear -> view(1, C, H, W) in NCHW: the fully connected layer computes its
    output features (weights, bias, per-channel scales) in HWC order, the reshape is a view,
    and the conv after it reads the map as TVM's CPU build does."""
    mod = _fc_unflatten_conv()
    part = partition_for_npu(mod)
    assert len(npu_functions(part)) == 1 and "R.reshape" not in part["main"].script()
    got, cpu = _golden_and_cpu(mod, part, (1, 12))
    assert got.shape == cpu.shape == (1, 6, 4, 5)
    assert np.abs(got - cpu).max() <= 1
    functional = npu_byoc.build(part, "functional").run([np.random.default_rng(6).integers(-128, 128, (1, 12), dtype=np.int8)])[0]
    assert np.array_equal(functional.astype(int), got)  # the C model on the same plan


def test_nchw_unflatten_as_the_model_output_keeps_the_model_order():
    """An unflatten that is the model's output: the fully connected layer writes the output
    region in the model's order (no NPU reader wants HWC), and the reshape is its view."""
    mod = _fc_unflatten_conv(flatten_output=True)
    part = partition_for_npu(mod)
    assert len(npu_functions(part)) == 1 and "R.reshape" not in part["main"].script()
    got, cpu = _golden_and_cpu(mod, part, (1, 12))
    assert got.shape == (1, 3, 4, 5) and np.abs(got - cpu).max() <= 1


def _qdq_pad_conv(pad_scale: float):
    """int8 x -> dequantize -> nn.pad(0.0) -> quantize(pad_scale) -> dequantize -> conv2d (the
    QDQ form of a float Pad between quantized tensors)."""
    from tvm import relax
    from tvm.relax.op import dequantize, quantize
    from tvm.relax.op.nn import conv2d, pad

    s, z = relax.const(np.float32(0.05)), relax.const(np.int8(-3))
    w = np.random.default_rng(1).integers(-127, 128, (3, 3, 4, 8), dtype=np.int8)
    x = relax.Var("x", relax.TensorType((1, 7, 6, 4), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            p = bb.emit(pad(bb.emit(dequantize(x, s, z)), _PAD, "constant", 0.0))
            p = bb.emit(quantize(p, relax.const(np.float32(pad_scale)), z, out_dtype="int8"))
            wd = bb.emit(dequantize(relax.const(w), relax.const(np.float32(0.01)), relax.const(np.int8(0)), axis=3))
            y = bb.emit(conv2d(bb.emit(dequantize(p, relax.const(np.float32(pad_scale)), z)), wd, strides=2,
                               data_layout="NHWC", kernel_layout="HWIO"))
            gv = bb.emit_output(bb.emit(quantize(y, relax.const(np.float32(0.2)), relax.const(np.int8(1)), out_dtype="int8")))
        bb.emit_func_output(gv)
    return bb.get()


def test_qdq_float_pad_folds_when_it_keeps_the_quantization():
    mod = _qdq_pad_conv(0.05)
    part = partition_for_npu(mod)
    assert "pad" not in part["main"].script() and len(npu_functions(part)) == 1
    x = np.random.default_rng(8).integers(-128, 128, (1, 7, 6, 4), dtype=np.int8)
    got = npu_byoc.build(part, "golden").run([x])[0]
    cpu = npu_byoc.build(mod, "cpu").run([x])[0]
    assert np.abs(got.astype(int) - cpu.astype(int)).max() <= 1
    rescaled = _qdq_pad_conv(0.07)
    reasons = [d.reason for d in _decisions(rescaled) if not d.accepted]
    assert any("PAD before conv2d changes the quantization" in r for r in reasons), reasons


def test_a_pad_read_by_two_convs_is_not_folded_and_runs_once():
    from tvm import relax
    from tvm.relax.op import dequantize, quantize
    from tvm.relax.op.nn import conv2d, pad

    s, z = relax.const(np.float32(0.05)), relax.const(np.int8(-3))
    x = relax.Var("x", relax.TensorType((1, 7, 6, 4), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            p = bb.emit(pad(x, _PAD, "constant", -3.0))
            outs = []
            for seed in (1, 2):
                w = np.random.default_rng(seed).integers(-127, 128, (3, 3, 4, 8), dtype=np.int8)
                wd = bb.emit(dequantize(relax.const(w), relax.const(np.float32(0.01)), relax.const(np.int8(0)), axis=3))
                y = bb.emit(conv2d(bb.emit(dequantize(p, s, z)), wd, strides=2, data_layout="NHWC", kernel_layout="HWIO"))
                outs.append(bb.emit(quantize(y, relax.const(np.float32(0.2)), relax.const(np.int8(1)), out_dtype="int8")))
            gv = bb.emit_output(relax.Tuple(outs))
        bb.emit_func_output(gv)
    mod = bb.get()
    part = partition_for_npu(mod)
    assert "R.nn.pad" not in part["main"].script() and npu_functions(part)  # npu.pad, read by both convs
    reasons = [d.reason for d in _decisions(mod) if not d.accepted]
    assert any("PAD is also read by another operator" in r for r in reasons), reasons
    x = np.random.default_rng(6).integers(-128, 128, (1, 7, 6, 4), dtype=np.int8)
    got, cpu = npu_byoc.build(part, "golden").run([x]), npu_byoc.build(mod, "cpu").run([x])
    assert all(np.abs(g.astype(int) - c.astype(int)).max() <= 1 for g, c in zip(got, cpu))


# ------------------------------------------------------------- PAD before a max pool, after a ReLU
def _clip_pad_pool(floor: int, fill: float, pad=(1, 1), also_add: bool = False):
    """clip(x, floor, 127) -> nn.pad(fill) -> max_pool2d 3x3/2 [-> + the pad itself]: keras'
    ReLU -> ZeroPadding2D -> MaxPooling2D (DenseNet, ResNet stems) in TFLite's int8 form."""
    from tvm import relax
    from tvm.relax.op import clip, nn

    from .relax_builders import _build, _tensor

    x = _tensor("x", (1, 9, 9, 4), "int8")

    def body(bb):
        c = bb.emit(clip(x, relax.prim_value(floor), relax.prim_value(127)))
        p = bb.emit(nn.pad(c, [0, 0, pad[0], pad[1], pad[0], pad[1], 0, 0], "constant", fill))
        y = bb.emit(nn.max_pool2d(p, pool_size=(3, 3), strides=(2, 2), layout="NHWC"))
        if also_add:  # a second reader of the pad: an integer max of the pad's corner
            y = bb.emit(relax.op.maximum(y, relax.op.strided_slice(p, [1, 2], [0, 0], [5, 5])))
        return y

    return _build([x], body)


_X9 = np.random.default_rng(11).integers(-128, 128, (1, 9, 9, 4), dtype=np.int8)


@pytest.mark.parametrize("floor", [-13, 0])
def test_pad_filled_at_the_relu_floor_folds_into_the_max_pool(floor):
    """fill -13 above a clamp at -13 (or 0) is a -128 fill for the max pool: folded, and the
    output is TVM's CPU build of the model exactly."""
    mod = _clip_pad_pool(floor, -13.0)
    part = partition_for_npu(mod)
    (func,) = npu_functions(part).values()
    assert "R.nn.pad" in func.script() and "R.nn.pad" not in part["main"].script()
    got = npu_byoc.build(part, "golden").run([_X9])[0]
    want = npu_byoc.build(mod, "cpu").run([_X9])[0]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "kw", [dict(floor=-20, fill=-13.0), dict(floor=-13, fill=-13.0, pad=(3, 1)), dict(floor=-13, fill=-13.0, also_add=True)],
    ids=["clamp_below_fill", "pad_as_wide_as_the_window", "pad_read_twice"],
)
def test_pad_that_would_change_a_maximum_keeps_its_fill(kw):
    """Not folded into the pool (the reason says why): the pad runs as its own npu.pad with its
    fill, and the output is TVM's CPU build's exactly."""
    mod = _clip_pad_pool(**kw)
    part = partition_for_npu(mod)
    assert "R.nn.pad" not in part["main"].script(), "the pad runs on the NPU (npu.pad)"
    reasons = [d.reason for d in _decisions(mod) if not d.accepted]
    assert any("PAD fill -13 before max_pool2d" in (r or "") for r in reasons), reasons
    np.testing.assert_array_equal(npu_byoc.build(part, "golden").run([_X9])[0], npu_byoc.build(mod, "cpu").run([_X9])[0])


# ----------------------------------------------------------------- NCHW flatten / unflatten
def test_onnx_flatten_gemm_unflatten_is_one_partition_at_onnxruntime():
    """flatten_fc_qdq.onnx (onnxruntime's QDQ quantizer, NCHW): Flatten -> Gemm, Gemm ->
    Reshape [1, 3, 4, 4] -> Conv, and Flatten -> Gemm again. Every op on the NPU in one
    partition; golden and the C model equal, within 1 LSB of onnxruntime (QDQ in float); the
    RTL co-simulation equals golden on every layer."""
    name = "flatten_fc_qdq.onnx"
    report = _coverage(name)
    assert [o.pattern for o in report.ops if o.op in ("Flatten", "Reshape")] == ["npu.reshape"] * 3
    assert report.summary["ops_offloaded"] == report.summary["ops_total"] and report.summary["partitions"] == 1
    mod = check_onnx_fixture(name, lsb=1)
    ref = reference(name)
    from npu_byoc.runtime.compare import compare

    rows = compare(mod, ref["inputs"][0], ref["outputs"][0]).layers
    assert [r.layer for r in rows] == ["conv1", "pool1", "fc1", "conv2", "fc2"] and all(r.golden_vs_cpu.max_lsb <= 1 for r in rows)
