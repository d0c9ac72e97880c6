"""RESIZE_BILINEAR on the NPU (npu.resize_bilinear): LiteRT's int8 kernel as depthwise passes,
one per run of output positions with equal weights (npu_byoc.ops.resize).

* npu_byoc.ops.resize.reference is LiteRT's kernel: equal to LiteRT's own tensors of
  resize_bilinear_int8 in all three coordinate modes;
* the passes, run as the golden model's depthwise convolutions through strided boxes, equal the
  reference on random sizes, factors and modes;
* resize_bilinear_int8 (TensorFlow's converter): 2x half-pixel and 4x asymmetric on the NPU,
  0 LSB off LiteRT on golden, C model and RTL; 2x with aligned corners stays on the CPU with the
  reason (256 passes), within 1 LSB (TVM's float resize).
"""

from __future__ import annotations

import numpy as np
import pytest

import npu_byoc
from npu_byoc.patterns import partition_log
from npu_byoc.ops.npu_ops import ResizeBilinear, TensorRef
from npu_byoc.arch.isa import Region
from npu_byoc.ops.resize import golden_resize_bilinear
from npu_byoc.ops.resize_passes import passes, reference
from npu_byoc.runtime import golden

from .conftest import MODELS, built, model_path, run_phases
from .conftest import reference as model_reference

MODEL = "resize_bilinear_int8.tflite"


def _litert_tensors() -> dict:
    t = np.load(MODELS / "resize_bilinear_int8.tensors.npz")
    return {k.split(";")[0]: t[k][0] for k in t.files if k != "__index__"}


@pytest.mark.parametrize(
    "src, dst, align_corners, half_pixel",
    [
        ("resize_bilinear_1/enc_1/Relu", "resize_bilinear_1/up2x_1/resize/ResizeBilinear", False, True),
        ("resize_bilinear_1/head_1/BiasAdd", "StatefulPartitionedCall_1:1", False, False),
        ("resize_bilinear_1/enc_1/Relu", "StatefulPartitionedCall_1:2", True, False),
    ],
)
def test_reference_is_litert(src, dst, align_corners, half_pixel):
    t = _litert_tensors()
    got = reference(t[src], t[dst].shape[:2], align_corners, half_pixel)
    np.testing.assert_array_equal(got, t[dst])


def test_passes_equal_the_reference():
    """Each pass, run by the golden model as the depthwise conv the NPU runs (through its
    strided input and output boxes), builds LiteRT's result; refused cases give a reason."""
    rng = np.random.default_rng(31)
    ran = refused = 0
    for _ in range(120):
        h, w, c = (int(v) for v in rng.integers(1, 9, 3))
        fh, fw = (int(v) for v in rng.choice([1, 2, 3, 4], 2))
        align, half = [(False, True), (False, False), (True, False)][int(rng.integers(0, 3))]
        op = ResizeBilinear("r", TensorRef("x", int(Region.IO), 0, (h, w, c)),
                            TensorRef("y", int(Region.IO) + 1, 0, (h * fh, w * fw, c)), align, half)  # fmt: skip
        try:
            passes((h, w), (h * fh, w * fw), align, half)
        except ValueError:
            refused += 1
            continue
        x = rng.integers(-128, 128, (h, w, c)).astype(np.int8)
        np.testing.assert_array_equal(run_phases(op, x), golden_resize_bilinear(op, x))
        ran += 1
    assert ran >= 40 and refused >= 10  # both kinds occur in the sample


def test_model_coverage_and_reason():
    report = npu_byoc.coverage_report(npu_byoc.load_model(model_path(MODEL)))
    resizes = {o.name.split("/")[1] if "/" in o.name else o.name: o for o in report.ops if o.op == "RESIZE_BILINEAR"}
    assert sum(o.offloaded for o in resizes.values()) == 2 and report.summary["partitions"] == 1
    (refused,) = [o for o in resizes.values() if not o.offloaded]
    assert "needs 256 depthwise passes" in refused.reason


@pytest.mark.parametrize("backend", ["golden", "functional", pytest.param("verilator", marks=pytest.mark.slow)])
def test_model_is_litert_exact_where_the_npu_resizes(backend):
    """Outputs 0 (2x half-pixel, then a conv) and 1 (4x asymmetric) come from the NPU: exact.
    Output 2 (aligned corners, TVM's float resize on the CPU) is within 1 LSB."""
    ref = model_reference(MODEL)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        got = built(MODEL, backend).run(inputs)
        np.testing.assert_array_equal(got[0], outputs[0])
        np.testing.assert_array_equal(got[1], outputs[1])
        assert np.abs(got[2].astype(int) - outputs[2].astype(int)).max() <= 1


def test_rescaling_resize_stays_on_the_cpu():
    """A resize whose output is quantized unlike its input is not LiteRT's int8 kernel."""
    from .relax_builders import qdq_resize2d

    mod = qdq_resize2d([1, 4, 4, 2], (8, 8), "linear", "half_pixel", output_scale=0.2)
    (d,) = partition_log(npu_byoc.partition_for_npu(mod))
    assert d.pattern == "npu.resize_bilinear" and not d.accepted
    assert "LiteRT's int8 kernel does not rescale" in d.reason
