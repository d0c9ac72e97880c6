"""npu_byoc.softmax, the spec of an NPU SOFTMAX (not offloaded yet: no ISA, C model or RTL),
against LiteRT's reference kernel on the recorded per-op vectors (tools/make_op_vectors.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from npu_byoc import softmax as S

VECTORS = np.load(Path(__file__).parent / "fixtures" / "ops" / "softmax.npz")
CASES = sorted({k.split(".")[0] for k in VECTORS.files if k != "meta"})


def test_softmax_spec_equals_litert_reference():
    assert len(CASES) >= 40
    for c in CASES:
        x, want = VECTORS[c + ".input"], VECTORS[c + ".output"]
        table = S.exp_table(float(VECTORS[c + ".input_scale"]), float(VECTORS[c + ".beta"]))
        got = S.run(x.reshape(-1, x.shape[-1]), table).reshape(want.shape)
        np.testing.assert_array_equal(got, want, err_msg=c)


def test_output_quantization_is_tflites():
    for c in CASES:
        assert float(VECTORS[c + ".output_scale"]) == S.OUTPUT_SCALE
        assert int(VECTORS[c + ".output_zero_point"]) == S.OUTPUT_ZERO_POINT
