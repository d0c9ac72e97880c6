"""Per-channel FULLY_CONNECTED numerics: LiteRT's reference kernel requantizes FC in double
(numerics.fc_scale), checked on the MLPerf Tiny anomaly-detection autoencoder made by
TensorFlow's converter with per-channel FC weights (tools/make_models.py, autoencoder_int8),
against LiteRT's BUILTIN_REF outputs and per-layer tensors."""

from __future__ import annotations

import json

import numpy as np
import pytest

import npu_byoc
from npu_byoc.codegen.lower import lower_module
from npu_byoc.partition.pipeline import partition_log
from npu_byoc.runtime import golden

from . import relax_builders as rb
from .conftest import MODELS, model_path, reference

NAME = "autoencoder_int8.tflite"
_built: dict = {}


def _partitioned():
    if "mod" not in _built:
        _built["mod"] = npu_byoc.partition_for_npu(npu_byoc.load_model(model_path(NAME)))
    return _built["mod"]


def _model(backend: str):
    if backend not in _built:
        _built[backend] = npu_byoc.build(_partitioned(), backend)
    return _built[backend]


def test_fixture_has_per_channel_fc_weights():
    meta = json.loads(str(np.load(MODELS / "autoencoder_int8.npz")["meta"]))
    assert meta["fc_weight_scales"] == [128, 128, 128, 8, 128, 128, 128, 640]


def test_autoencoder_offloads_every_mac():
    s = npu_byoc.coverage_report(_partitioned()).summary
    assert s["macs_offloaded"] == s["macs_total"] == 231424


def test_every_layer_equals_litert():
    """Per layer, on sample 0: each FC's golden output is LiteRT's tensor exactly."""
    tensors = np.load(MODELS / "autoencoder_int8.tensors.npz")
    keys = [k for k in json.loads(str(tensors["__index__"])) if k][1:]  # op outputs in order
    (plan,) = lower_module(_partitioned()).values()
    layers = []
    golden.run_plan(plan, reference(NAME)["inputs"][0], on_op=lambda op, out: layers.append(out))
    assert len(layers) == len(keys) == 8
    for k, (out, key) in enumerate(zip(layers, keys)):
        np.testing.assert_array_equal(out.reshape(-1), tensors[key].reshape(-1), err_msg=f"layer {k} ({key})")


@pytest.mark.parametrize("backend", ["golden", "functional", pytest.param("verilator", marks=pytest.mark.slow)])
def test_autoencoder_is_litert_exactly(backend):
    model = _model(backend)
    ref = reference(NAME)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        got = model.run(inputs)
        assert got[0].shape == outputs[0].shape
        np.testing.assert_array_equal(got[0], outputs[0])


def test_fc_scale_of_one_or_more_stays_on_the_cpu():
    """An output scale finer than the accumulator's (s_in * s_w / s_out >= 1) is refused at
    partition time with the reason."""
    mod = rb.qdq_fc(batch=1, in_features=4, out_features=3, weight=np.ones((4, 3), np.int8),
                    weight_scale=np.float32(0.5), input_scale=0.5, input_zp=0, output_scale=0.125, output_zp=0)
    part = npu_byoc.partition_for_npu(mod)
    assert npu_byoc.coverage_report(part).summary["ops_offloaded"] == 0
    (decision,) = partition_log(part)
    assert not decision.accepted and "NPU FC scales lie below 1" in decision.reason
