"""Ceil-mode max and average pools on the NPU: the extra bottom/right windows are padding the
pool excludes (from a max, and from an average's count, as TVM and onnxruntime define them with
count_include_pad=0). Compared with TVM's CPU build of the same Relax module; the ONNX fixture
(SqueezeNet-style, ceil_pool_qdq.onnx) runs in tests/test_transformer_fixtures.py."""

from __future__ import annotations

import numpy as np
import pytest

import npu_byoc
from npu_byoc.partition import pipeline as P

from . import relax_builders as rb

# (builder, geometry, max |NPU - TVM CPU| in LSB: the QDQ average rounds in float on the CPU)
CASES = {
    "max_7x7_3s2": (rb.int8_max_pool, dict(input_hw=(7, 7), pool_size=3, strides=2), 0),
    "max_nchw_9x6_2s2_pad1": (rb.int8_max_pool, dict(layout="NCHW", input_hw=(9, 6), pool_size=2, strides=2, padding=1), 0),
    "max_16_3s2": (rb.int8_max_pool, dict(input_hw=(16, 13), pool_size=3, strides=2), 0),
    "avg_qdq_7x7_2s2": (rb.qdq_avg_pool, dict(input_hw=(7, 7), pool_size=2, strides=2), 1),
    "avg_qdq_8x5_3s2": (rb.qdq_avg_pool, dict(input_hw=(8, 5), pool_size=3, strides=2), 1),
    "avg_qdq_nchw_10x7_3s3_pad1": (rb.qdq_avg_pool, dict(layout="NCHW", input_hw=(10, 7), pool_size=3, strides=3, padding=1), 1),
}


def _run_both(mod, x):
    part = npu_byoc.partition_for_npu(mod)
    assert P.npu_functions(part), "the ceil-mode pool stayed on the CPU"
    npu = npu_byoc.build(part, "functional").run([x])[0]
    cpu = npu_byoc.build(mod, "cpu").run([x])[0]
    return npu, cpu


@pytest.mark.parametrize("case", list(CASES))
def test_ceil_mode_pool_matches_tvm_cpu(case):
    builder, geometry, lsb = CASES[case]
    mod = builder(ceil_mode=True, channels=3, **geometry)
    shape = [int(d) for d in mod["main"].params[0].ty.shape]
    x = np.random.default_rng(len(case)).integers(-128, 128, shape, dtype=np.int8)
    x.flat[::7] = 127  # maxima in the last rows and columns too
    npu, cpu = _run_both(mod, x)
    assert npu.shape == cpu.shape
    assert np.abs(npu.astype(int) - cpu.astype(int)).max() <= lsb


def test_ceil_window_past_the_edge_averages_its_valid_element_only():
    """Hand-derived: a 7x7 input pooled 2x2/2 in ceil mode has a 4th row and column of windows
    holding one element each (x[6, 6] at the corner): its average is that element, not half of
    it (count_include_pad=0)."""
    mod = rb.qdq_avg_pool(ceil_mode=True, input_hw=(7, 7), channels=1, pool_size=2, strides=2, input_zp=0)
    x = np.full((1, 7, 7, 1), 5, np.int8)
    x[0, 6, 6, 0] = 101
    x[0, 6, 4, 0] = 51
    npu, _ = _run_both(mod, x)
    assert npu.shape == (1, 4, 4, 1)
    assert npu[0, 3, 3, 0] == 101 and npu[0, 3, 2, 0] == 28  # (51 + 5) / 2
    assert npu[0, 0, 0, 0] == 5


def test_ceil_mode_record_pads_the_last_window():
    part = npu_byoc.partition_for_npu(rb.int8_max_pool(ceil_mode=True, input_hw=(16, 16), pool_size=3, strides=2))
    (func,) = P.npu_functions(part).values()
    ((_, comp),) = P.composite_functions(func)
    op = P.extract_composite(comp)
    assert op.ceil_mode and op.padding == (0, 0, 1, 1) and op.output.shape == (1, 8, 8, 4)


def test_squeezenet_style_fixture_is_one_partition():
    """ceil_pool_qdq.onnx (SqueezeNet's ceil-mode MaxPool and AveragePool): every operator on
    the NPU in one partition (before: the two pools on the CPU, three partitions)."""
    from .conftest import model_path

    report = npu_byoc.coverage_report(npu_byoc.partition_for_npu(npu_byoc.load_model(model_path("ceil_pool_qdq.onnx"))))
    assert all(o.offloaded for o in report.ops) and report.summary["partitions"] == 1
