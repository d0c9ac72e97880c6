"""MEAN over the channel axis (LayerNorm's mean and variance: a 1x1 CONV of all-ones weights with
MEAN's requantize, npu_byoc.ops.mean.ChannelMean) and other axis sets the MEAN unit reaches
through a strided view (npu_byoc.ops.mean.reduction_view): the reduced axes become the unit's
H x W, the kept ones its channels. Checked against LiteRT's BUILTIN_REF vectors of a mean
over C (tests/fixtures/ops/mean.npz) and LiteRT's formula transcribed in tests/litert_reference.py,
on the golden model, the C model and the RTL."""

from __future__ import annotations

import numpy as np
import pytest

import npu_byoc
from npu_byoc.ops.mean import reduction_view
from npu_byoc.ops.npu_ops import TensorRef
from npu_byoc.ops.records import QMean, QTensor, Reject

from . import litert_reference as L
from . import relax_builders as rb
from .test_golden_properties import litert_cases

_built: dict = {}


def _model(key: tuple, backend: str):
    if (key, backend) not in _built:
        shape, axes, keepdims, s_in, zp_in, s_out, zp_out = key
        mod = rb.qdq_mean(shape=shape, axis=axes, keepdims=keepdims, input_scale=s_in, input_zp=zp_in,
                          output_scale=s_out, output_zp=zp_out)  # fmt: skip
        _built[key, backend] = npu_byoc.build(mod, backend)
    return _built[key, backend]


def _litert_mean(x, axes, s_in, zp_in, s_out, zp_out) -> np.ndarray:
    """reference_ops::QuantizedMeanOrSum: sum, minus zp_in · n, MBQM with the folded 1/n, + zp_out."""
    n = int(np.prod([x.shape[a] for a in axes]))
    m, s = L.mean_prepare(s_in, s_out, n)
    acc = L.wrap32(x.astype(np.int64).sum(axis=axes, keepdims=True) - zp_in * n)
    return np.clip(L.mbqm(acc, m, s) + zp_out, -128, 127)


CHANNEL_CASES = [c for c in litert_cases("mean") if [int(a) for a in c["axes"]] == [3]]


@pytest.mark.parametrize("backend", ["golden", "functional"])
def test_mean_over_channels_reproduces_litert(backend):
    assert len(CHANNEL_CASES) == 3
    for c in CHANNEL_CASES:
        key = (tuple(c["input"].shape), (3,), bool(c["keep_dims"]), float(c["input_scale"]),
               int(c["input_zero_point"]), float(c["output_scale"]), int(c["output_zero_point"]))  # fmt: skip
        model = _model(key, backend)
        assert model.plans and [op.kind for p in model.plans.values() for op in p.ops] == ["channel_mean"]
        np.testing.assert_array_equal(model.run([c["input"]])[0], c["output"])


# (shape, axes): LayerNorm's mean over a token's features ([1, L, C]), over a 2-D tensor's
# features (ConvNeXt's head), over everything; each a different view.
GEOMETRIES = [((1, 50, 32), (2,)), ((1, 768), (1,)), ((1, 6, 5, 40), (3,)), ((1, 4, 3, 8), (1, 2, 3)),
              ((1, 9, 16), (1,))]  # fmt: skip


@pytest.mark.parametrize("shape, axes", GEOMETRIES)
def test_mean_over_any_reachable_axes_is_litert_s_formula(shape, axes):
    rng = np.random.default_rng(len(shape) * 7 + sum(axes))
    key = (shape, axes, True, 0.043, -7, 0.031, 5)
    x = rng.integers(-128, 128, shape, dtype=np.int64).astype(np.int8)
    want = _litert_mean(x, axes, *key[3:])
    for backend in ("golden", "functional"):
        model = _model(key, backend)
        assert model.plans, "the mean is offloaded"
        np.testing.assert_array_equal(model.run([x])[0].reshape(want.shape), want, err_msg=backend)


def test_mean_over_channels_on_the_rtl():
    """The RTL (Verilator) agrees with the golden model (MEAN's definition) and the analytic cycle
    model on the CONV form of a channel mean."""
    from npu_byoc.runtime.cosim import cosim

    rng = np.random.default_rng(5)
    mod = rb.qdq_mean(shape=(1, 6, 5, 40), axis=(3,), input_scale=0.043, input_zp=-7, output_scale=0.031,
                      output_zp=5)  # fmt: skip
    x = rng.integers(-128, 128, (1, 6, 5, 40), dtype=np.int64).astype(np.int8)
    rep = cosim(mod, [x])
    assert rep.summary["max_diff_golden"] == 0 and rep.summary["cycle_model_exact"]


def _record(shape, axes, out_shape) -> QMean:
    t = lambda s: QTensor(s, "int8", 0.5, 0)  # noqa: E731
    return QMean(t(shape), t(out_shape), axes, True, None, -128, 127)


def test_channel_view_of_an_nchw_tensor_reads_its_planes():
    """In an NCHW partition a mean over axis 1 (channels) reads each plane's pixel as a unit
    channel: reduced stride H·W, kept pixels stride 1."""
    op = _record((1, 8, 3, 4), (1,), (1, 1, 3, 4))
    ifm = TensorRef("x", 4, 0, (3, 4, 8), "NCHW")
    ofm = TensorRef("y", 5, 0, (3, 4, 1), "NCHW")
    src, dst = reduction_view(op, ifm, ofm, "NCHW")
    assert (src.shape, src.strides) == ((1, 8, 12), (96, 12, 1))
    assert (dst.shape, dst.strides[2]) == ((1, 1, 12), 1)


def test_unreachable_axes_say_why():
    op = _record((1, 4, 5, 6), (2,), (1, 4, 1, 6))  # kept H and C: two runs
    ifm, ofm = TensorRef("x", 4, 0, (4, 5, 6)), TensorRef("y", 5, 0, (4, 1, 6))
    with pytest.raises(Reject, match="reduces up to two strided axes and keeps one run"):
        reduction_view(op, ifm, ofm, "NHWC")


# Scales that put MEAN's (multiplier, shift) at its ends: a ratio of 1 over n = 768 (shift -8),
# a tiny output scale (a left shift of 5, both ends saturate), a ratio just under 2.
CONV_FORM_CASES = [((1, 3, 768), 0.02, 5, 0.02, -3), ((1, 7, 5), 0.5, 3, 0.004, -100),
                   ((1, 2, 2, 33), 0.0999, 127, 0.05, 0)]  # fmt: skip


@pytest.mark.parametrize("shape, s_in, zp_in, s_out, zp_out", CONV_FORM_CASES)
def test_channel_mean_runs_as_a_conv_and_equals_litert(shape, s_in, zp_in, s_out, zp_out):
    """A mean over the channels lowers to the CONV form (ChannelMean); the stream it runs on the
    C model equals LiteRT's MEAN formula, including saturation at both ends."""
    axes = (len(shape) - 1,)
    key = (shape, axes, True, s_in, zp_in, s_out, zp_out)
    rng = np.random.default_rng(sum(shape))
    x = rng.integers(-128, 128, shape, dtype=np.int64).astype(np.int8)
    x[..., 0, :] = 127  # a saturated pixel for the left-shifting case
    want = _litert_mean(x, axes, s_in, zp_in, s_out, zp_out)
    model = _model(key, "functional")
    assert [op.kind for p in model.plans.values() for op in p.ops] == ["channel_mean"]
    np.testing.assert_array_equal(model.run([x])[0].reshape(want.shape), want)
