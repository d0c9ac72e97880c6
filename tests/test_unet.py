"""Issue 9's small U-Net (tools/make_models.py unet_int8, TensorFlow's converter): PAD, a
dilated conv, LEAKY_RELU, HARD_SWISH, TANH (and the QUANTIZE the converter puts after it),
TRANSPOSE_CONV, RESIZE_BILINEAR and a three-way skip CONCATENATION. Every operator runs on
the NPU in one partition, and the output is 0 LSB off LiteRT's reference kernels on the golden
model, the C model and the RTL."""

from __future__ import annotations

import pytest

import npu_byoc

from .conftest import assert_equals_reference, model_path

MODEL = "unet_int8.tflite"


def test_every_operator_is_on_the_npu_in_one_partition():
    report = npu_byoc.coverage_report(npu_byoc.load_model(model_path(MODEL)))
    assert report.summary["ops_offloaded"] == report.summary["ops_total"] == 13
    assert report.summary["partitions"] == 1
    assert {o.op for o in report.ops} == {"PAD", "CONV_2D", "LEAKY_RELU", "HARD_SWISH", "TANH", "QUANTIZE",
                                          "TRANSPOSE_CONV", "RESIZE_BILINEAR", "CONCATENATION"}  # fmt: skip


@pytest.mark.parametrize("backend", ["golden", "functional", pytest.param("verilator", marks=pytest.mark.slow)])
def test_unet_is_litert_exact(backend):
    assert_equals_reference(MODEL, backend)
