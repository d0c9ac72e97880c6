"""Batch N: a partition runs its per-image command stream once per image (the generated entry
and the golden runner offset every IO region by one image's bytes; docs/codegen.md). Checked on
a batch-2 TFLite model made by TensorFlow's converter (CONV_2D, MEAN over H and W, CONV_2D;
tools/make_models.py, batch2_mean_int8) against LiteRT's reference kernels, and on a batch-3
Relax module against TVM's CPU build."""

from __future__ import annotations

import numpy as np
import pytest

import npu_byoc
from npu_byoc.codegen.lower import lower_module
from npu_byoc.partition.pipeline import partition_log

from . import relax_builders as rb
from .conftest import MODELS, model_path
from .test_zero_point_subtract import conv

NAME = "batch2_mean_int8.tflite"
_built: dict = {}


def _partitioned():
    if "mod" not in _built:
        _built["mod"] = npu_byoc.partition_for_npu(npu_byoc.load_model(model_path(NAME)))
    return _built["mod"]


def _reference():
    """Three samples, each a whole batch of two images: input_0 (3, 2, 6, 6, 4)."""
    data = np.load(MODELS / "batch2_mean_int8.npz")
    return data["input_0"], data["output_0"]


def test_batch_two_is_offloaded_as_one_partition_of_batch_two():
    part = _partitioned()
    s = npu_byoc.coverage_report(part).summary
    assert s["ops_offloaded"] == s["ops_total"] == 3 and s["partitions"] == 1
    (plan,) = lower_module(part).values()
    assert plan.batch == 2
    assert plan.inputs[0].shape == (2, 6, 6, 4) and plan.inputs[0].ref.shape == (6, 6, 4)


@pytest.mark.parametrize("backend", ["golden", "functional", pytest.param("verilator", marks=pytest.mark.slow)])
def test_batch_two_is_litert_exactly(backend):
    if backend not in _built:
        _built[backend] = npu_byoc.build(_partitioned(), backend)
    xs, ys = _reference()
    for x, y in zip(xs, ys):
        got = _built[backend].run([x])[0]
        assert got.shape == y.shape == (2, 1, 1, 6)
        np.testing.assert_array_equal(got, y)


def test_batch_three_relax_module_is_tvm_cpu_exactly():
    """A batch-3 conv (the tie-free scales of test_zero_point_subtract: TVM's float32
    requantize and TFLite's rounding agree exactly) on golden and the C functional model."""
    mod = conv(batch=3, input_zp=-7, bias=rb.rng_bias(8))
    part = npu_byoc.partition_for_npu(mod)
    (plan,) = lower_module(part).values()
    assert plan.batch == 3
    rng = np.random.default_rng(8)
    x = np.clip(-7 + rng.integers(-6, 7, (3, 8, 8, 4)), -128, 127).astype(np.int8)
    want = npu_byoc.build(mod, "cpu").run([x])[0]
    assert want.shape == (3, 8, 8, 8) and len({want[n].tobytes() for n in range(3)}) == 3
    for backend in ("golden", "functional"):
        np.testing.assert_array_equal(npu_byoc.build(part, backend).run([x])[0], want, err_msg=backend)


def test_a_batch_that_does_not_split_stays_on_the_cpu_with_the_reason():
    """MEAN over the batch axis mixes images: refused at partition time, never at run time."""
    part = npu_byoc.partition_for_npu(rb.qdq_mean(shape=(2, 7, 7, 8), axis=(0, 1, 2)))
    (decision,) = partition_log(part)
    assert not decision.accepted
    assert "NPU partitions run image by image" in decision.reason
    x = np.random.default_rng(0).integers(-128, 128, (2, 7, 7, 8)).astype(np.int8)
    assert npu_byoc.build(part, "functional").run([x])[0].shape == (1, 1, 1, 8)  # runs, on the CPU


@pytest.mark.slow
def test_batch_two_cosimulates_image_by_image():
    """The partition's stream runs on the RTL once per image: every output that leaves the NPU
    golden-exact (resident layers stay in SRAM), cycles the analytic model's, the model output
    LiteRT's."""
    from npu_byoc.runtime import cosim as C

    xs, ys = _reference()
    report = C.cosim(model_path(NAME), [xs[0]], [ys[0]])
    assert [r.name.endswith(f"[image {n}]") for n in (0, 1) for r in report.layers[3 * n : 3 * n + 3]] == [True] * 6
    for r in report.layers:
        assert r.max_diff_golden == (None if r.resident else 0) and r.cycles == r.predicted_cycles, r
        assert r.max_diff_tvm is not None and r.max_diff_tvm <= 1, r
    assert any(not r.resident for r in report.layers[:3]) and any(not r.resident for r in report.layers[3:])
    (out,) = report.summary["outputs"]
    assert out["max_diff"] == 0
