"""Pixel gathers on the NPU (npu.gather): RESIZE_NEAREST_NEIGHBOR, STRIDED_SLICE, SPLIT and
constant GATHER as strided identity-LUT copies (npu_byoc.gather).

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
from npu_byoc.gather import AxisRun, axis_runs, copies_reason, pixel_gather
from npu_byoc.tflite_ops import nearest_indices

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
