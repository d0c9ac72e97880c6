"""RSQRT (LayerNorm's 1/sqrt(variance + eps)) as a LUT entry: the table is LiteRT's integer kernel
(elementwise.cc RsqrtEvalQuantized: GetInvSqrtQuantizedMultiplierExp's Newton-Raphson steps and
two MBQMs), checked against LiteRT's BUILTIN_REF on all 256 inputs of four one-op models
(tests/fixtures/ops/rsqrt.npz, tools/make_op_vectors.py --only rsqrt) and against the
transcription in tests/litert_reference.py over random scales."""

from __future__ import annotations

import numpy as np
import pytest

from npu_byoc.ops.lut import table
from npu_byoc.ops.records import QLut, QTensor

from . import litert_reference as L
from .test_golden_properties import litert_cases


def _record(s_in, zp_in, s_out, zp_out) -> QLut:
    t = lambda s, zp: QTensor((1, 256), "int8", float(s), int(zp))  # noqa: E731
    return QLut("rsqrt", t(s_in, zp_in), t(s_out, zp_out), -128, 127)


def _params(c: dict) -> tuple:
    return (float(c["input_scale"]), int(c["input_zero_point"]), float(c["output_scale"]), int(c["output_zero_point"]))


CASES = litert_cases("rsqrt")


@pytest.mark.parametrize("k", range(len(CASES)))
def test_transcription_and_npu_table_reproduce_litert(k):
    c = CASES[k]
    x = c["input"].astype(np.int64).ravel() + 128
    want = c["output"].ravel().astype(np.int64)
    assert len(np.unique(x)) == 256  # every int8 input once (zero point -128: all valid)
    np.testing.assert_array_equal(L.rsqrt_table(*_params(c))[x], want)
    np.testing.assert_array_equal(table(_record(*_params(c))).astype(np.int64)[x], want)


def test_litert_vectors_reach_the_kernel_s_branches():
    """The four models cover a saturated output (127 at small inputs), outputs near zero and the
    v = 0 entry; otherwise the test above would pin one regime only."""
    outs = np.concatenate([c["output"].ravel() for c in CASES]).astype(int)
    assert (outs == 127).sum() > 4 and outs.min() < -100 and len(np.unique(outs)) > 100


def test_npu_table_matches_the_transcription_over_random_scales():
    rng = np.random.default_rng(24)
    for _ in range(60):
        s_in, s_out = (float(np.float32(10.0 ** rng.uniform(-5, 1))) for _ in range(2))
        zp_in, zp_out = int(rng.integers(-128, 0)), int(rng.integers(-128, 128))
        got = table(_record(s_in, zp_in, s_out, zp_out)).astype(np.int64)
        want = L.rsqrt_table(s_in, zp_in, s_out, zp_out)
        valid = np.arange(-128, 128) >= zp_in  # LiteRT refuses the others
        np.testing.assert_array_equal(got[valid], want[valid], err_msg=f"{s_in} {zp_in} {s_out} {zp_out}")


def test_inv_sqrt_multiplier_is_one_over_sqrt():
    """A hand-derived check of the Newton-Raphson transcription: m · 2^(shift - 31) ≈ 1/sqrt(v)."""
    for v in (2, 3, 4, 100, 255, 1 << 20, (1 << 29) + 5):
        m, s = L.get_inv_sqrt_quantized_multiplier_exp(v)
        assert m * 2.0 ** (s - 31) == pytest.approx(1 / np.sqrt(v), rel=1e-5)
