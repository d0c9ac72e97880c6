"""Pixel gathers on the NPU (npu.gather): RESIZE_NEAREST_NEIGHBOR, STRIDED_SLICE, SPLIT and
constant GATHER as strided identity-LUT copies (npu_byoc.ops.gather).

* the decomposition of index maps into arithmetic runs, and the reasons for maps it refuses;
* upsample_cnn_int8 (TensorFlow's converter: nearest 2x and (3, 2) upsampling, a skip
  concatenation, Cropping2D, a strided slice) is one NPU partition, 0 LSB off LiteRT's
  reference kernels on golden, C model and RTL; the op fixtures' gathers likewise
  (test_tflite_ops.test_op_after_npu_conv_is_litert_exactly);
* what stays on the CPU gets the reason.
"""

from __future__ import annotations

import numpy as np
import pytest

import npu_byoc
from npu_byoc.ops.gather_copies import AxisRun, axis_runs, copies_reason, pixel_gather
from npu_byoc.partition.pipeline import partition_log
from npu_byoc.frontends.tflite_ops import nearest_indices

from .conftest import assert_equals_reference, model_path

MODEL = "upsample_cnn_int8.tflite"


# ------------------------------------------------------------------------------- index maps
def test_nearest_2x_upsampling_is_two_runs_per_axis():
    rows = nearest_indices(8, 16, align_corners=False, half_pixel_centers=True)
    assert axis_runs(rows) == [AxisRun(0, 2, 0, 1, 8), AxisRun(1, 2, 0, 1, 8)]


def test_slices_and_repeats_are_runs():
    assert axis_runs([1, 3, 5, 7]) == [AxisRun(0, 1, 1, 2, 4)]  # a strided slice: one run, step 2
    assert axis_runs([4, 4, 4]) == [AxisRun(0, 1, 4, 0, 3)]  # one row repeated: step 0
    assert axis_runs([0, 1, 2, 0, 1, 2]) == [AxisRun(k, 3, k, 0, 2) for k in range(3)]  # TILE x2 of 3 rows


def test_every_run_set_reproduces_its_map():
    rng = np.random.default_rng(5)
    for _ in range(300):
        n_in, n_out = (int(v) for v in rng.integers(1, 20, 2))
        index = nearest_indices(n_in, n_out, bool(rng.integers(0, 2)), bool(rng.integers(0, 2)))
        runs = axis_runs(index)
        if runs is None:
            continue
        rebuilt = np.full(n_out, -1)
        for r in runs:
            rebuilt[r.out0 :: r.out_step] = r.in0 + r.in_step * np.arange(r.count)
        np.testing.assert_array_equal(rebuilt, index)


def test_what_is_not_a_pixel_copy_is_refused_with_a_reason():
    x = np.arange(4 * 5 * 6).reshape(1, 4, 5, 6)
    assert pixel_gather(x[:, :, :, ::-1], (1, 4, 5, 6)).startswith("gather is not a copy of whole pixels")
    g = pixel_gather(x[:, 1:3, ::2, 2:5], (1, 4, 5, 6))
    assert (g.rows, g.cols, g.c0) == ((1, 2), (0, 2, 4), 2) and copies_reason(g) is None
    shuffled = pixel_gather(x[:, [3, 2, 2, 1, 1, 0, 0, 0, 0, 3, 2, 3, 2, 2, 3, 2, 2, 2, 2, 3, 1, 3, 2, 0]], (1, 4, 5, 6))
    assert "not periodic" in copies_reason(shuffled)
    assert "batch 1" in pixel_gather(np.zeros((2, 1, 1, 1), np.int64), (2, 1, 1, 1))


# ------------------------------------------------------------------------------- the TFLite model
def test_upsampling_unet_glue_is_one_partition():
    report = npu_byoc.coverage_report(npu_byoc.load_model(model_path(MODEL)))
    assert report.summary["ops_offloaded"] == report.summary["ops_total"] and report.summary["partitions"] == 1
    gathers = sorted(o.op for o in report.ops if o.pattern == "npu.gather")
    assert gathers == ["RESIZE_NEAREST_NEIGHBOR"] * 2 + ["STRIDED_SLICE"] * 2


@pytest.mark.parametrize("backend", ["golden", "functional", pytest.param("verilator", marks=pytest.mark.slow)])
def test_upsampling_unet_glue_is_litert_exact(backend):
    assert_equals_reference(MODEL, backend)


def test_non_integer_resize_stays_on_the_cpu_with_a_reason():
    """op_resize_nearest_neighbor_int8 resizes 8x8 to 13x11 (asymmetric and align-corners: 30
    and 42 copies, over MAX_COPIES) and to 5x16 (half-pixel: 2 x 2 copies, on the NPU). The
    model stays LiteRT-exact either way (test_tflite_ops)."""
    report = npu_byoc.coverage_report(npu_byoc.load_model(model_path("op_resize_nearest_neighbor_int8.tflite")))
    ops = [o for o in report.ops if o.op == "RESIZE_NEAREST_NEIGHBOR"]
    assert sum(o.offloaded for o in ops) == 2  # 5x16 of the input and of the conv's output
    refused = [o for o in ops if not o.offloaded]
    assert len(refused) == 4 and all("strided copies: the NPU runs up to 16" in o.reason for o in refused)


# ------------------------------------------------------------------ TVM's own data movement
def test_nearest_index_is_tvms_resize2d():
    """gather.resize_index against TVM's compiled image.resize2d(nearest_neighbor) on an index
    tensor: every coordinate mode and rounding rule ONNX Resize has, up- and downsampling,
    integer and fractional factors."""
    import itertools

    import tvm
    from tvm import relax

    from npu_byoc.ops.gather_copies import resize_index

    sizes = [(3, 7), (4, 8), (5, 3), (8, 16), (6, 4), (2, 5), (1, 3), (5, 15), (16, 8)]
    modes = ["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn"]
    roundings = ["", "round", "round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
    bb, cases = relax.BlockBuilder(), []
    for (i, o), mode, rounding in itertools.product(sizes, modes, roundings):
        x = relax.Var("x", relax.TensorType((1, 2, i, i + 1), "float32"))
        with bb.function(f"f{len(cases)}", [x]):
            bb.emit_func_output(bb.emit(relax.op.image.resize2d(
                x, (o, o + 2), layout="NCHW", method="nearest_neighbor", coordinate_transformation_mode=mode,
                rounding_method=rounding)))  # fmt: skip
        cases.append(((1, 2, i, i + 1), (1, 2, o, o + 2), mode, rounding))
    vm = relax.VirtualMachine(tvm.compile(bb.get(), target="llvm"), tvm.cpu())
    for k, (shape, out, mode, rounding) in enumerate(cases):
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        got = vm[f"f{k}"](tvm.runtime.tensor(x)).numpy().astype(np.int64)
        assert np.array_equal(got, resize_index(shape, out, "NCHW", mode, rounding)), (shape, out, mode, rounding)


def test_nchw_index_map_decomposes_like_its_nhwc_twin():
    """An NCHW gather (ONNX) is the NHWC gather of the transposed tensors: same rows, columns
    and channel offset."""
    from npu_byoc.ops.gather_copies import decompose, resize_index, slice_index

    nchw = slice_index((1, 6, 9, 8), [1, 2, 3], [2, 1, 0], [5, 9, 8], [1, 2, 3])
    nhwc = slice_index((1, 9, 8, 6), [3, 1, 2], [2, 1, 0], [5, 9, 8], [1, 2, 3])
    assert decompose(nchw, (1, 6, 9, 8), "NCHW") == decompose(nhwc, (1, 9, 8, 6), "NHWC")
    up = decompose(resize_index((1, 4, 3, 5), (1, 4, 6, 10), "NCHW", "half_pixel", "round_prefer_floor"),
                   (1, 4, 3, 5), "NCHW")  # fmt: skip
    assert up.rows == (0, 0, 1, 1, 2, 2) and up.cols == (0, 0, 1, 1, 2, 2, 3, 3, 4, 4) and up.c0 == 0


def _qdq_resize_nearest(out_scale: float):
    """dequantize(int8 NHWC x) -> image.resize2d(nearest, asymmetric, 2x) -> quantize."""
    from .relax_builders import qdq_resize2d

    return qdq_resize2d([1, 4, 5, 3], (8, 10), "nearest_neighbor", "asymmetric", "floor", output_scale=out_scale)


def test_qdq_nearest_resize_is_a_gather():
    """TVM's resize2d(nearest) between a dequantize and a quantize of the same parameters (ONNX
    Resize) is a strided copy: equal to TVM's CPU build exactly."""
    mod = _qdq_resize_nearest(0.1)
    (d,) = partition_log(npu_byoc.partition_for_npu(mod))
    assert d.pattern == "npu.gather" and d.accepted and d.convention == "qdq"
    x = np.random.default_rng(4).integers(-128, 128, (1, 4, 5, 3), dtype=np.int8)
    got = npu_byoc.build(npu_byoc.partition_for_npu(mod), "golden").run([x])[0]
    assert np.array_equal(got, npu_byoc.build(mod, "cpu").run([x])[0])
    assert np.array_equal(got, x.repeat(2, 1).repeat(2, 2))


def test_rescaling_nearest_resize_is_a_requantizing_copy():
    """A nearest resize whose output is quantized unlike its input (scale 0.1 -> 0.2, zp 3) is
    a copy plus a requantize: its copies run through the requantize table (a Relax module's
    numerics: LiteRT's int8 -> int8 QUANTIZE, tests/litert_reference.py), within 1 LSB of TVM's
    float CPU build."""
    from . import litert_reference as ref

    mod = _qdq_resize_nearest(0.2)
    part = npu_byoc.partition_for_npu(mod)
    (d,) = partition_log(part)
    assert d.pattern == "npu.gather" and d.accepted and d.convention == "qdq"
    x = np.random.default_rng(5).integers(-128, 128, (1, 4, 5, 3), dtype=np.int8)
    got = npu_byoc.build(part, "golden").run([x])[0]
    table = ref.requantize_table(0.1, 3, 0.2, 3)
    np.testing.assert_array_equal(got, table[x.repeat(2, 1).repeat(2, 2).astype(np.int64) + 128])
    cpu = npu_byoc.build(mod, "cpu").run([x])[0]
    assert np.abs(got.astype(int) - cpu.astype(int)).max() <= 1


def test_keras3_upsampling_is_one_gather():
    """upsample_keras3_int8 (batch None): Keras 3's UpSampling2D converts to EXPAND_DIMS -> TILE
    -> RESHAPE per axis with run-time target shapes (SHAPE -> STRIDED_SLICE -> CONCATENATION,
    folded at import). The partitioner composes each chain's gathers and views into one gather
    (partition.compose_gathers): every run-time op on the NPU in one partition, and the
    gather's output is the conv's output with every row and column repeated."""
    name = "upsample_keras3_int8.tflite"
    mod = npu_byoc.load_model(model_path(name))
    report = npu_byoc.coverage_report(mod)
    assert report.summary["partitions"] == 1
    assert all(o.offloaded for o in report.ops if o.op not in ("SHAPE", "STRIDED_SLICE", "CONCATENATION"))
    assert [o.pattern for o in report.ops if o.op == "TILE"] == ["npu.gather"] * 2
    model = npu_byoc.build(mod, "golden")
    seen = []
    model.layer_hooks.append(lambda partition, op, out: seen.append((op.kind, out.copy())))
    x = np.random.default_rng(8).integers(-128, 128, (1, 8, 8, 3), dtype=np.int8)
    model.run([x])
    kinds = [k for k, _ in seen]
    assert kinds == ["conv2d", "gather", "conv2d"], kinds
    assert np.array_equal(seen[1][1], seen[0][1].repeat(2, 0).repeat(2, 1))
