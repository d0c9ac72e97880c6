"""build() for the functional backend: generated C linked with the C functional model runs
every fixture bit-exactly like the golden model; failures are compile-time errors."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import npu_byoc
from npu_byoc.patterns import partition_log
from npu_byoc.cli import main
from npu_byoc.errors import LoweringError, NpuStreamError
from npu_byoc.arch.config import HwConfig

from .conftest import ALL_MODELS, model_path, reference

_models: dict = {}


def _built(imported, name, backend):
    if (name, backend) not in _models:
        _models[(name, backend)] = npu_byoc.build(imported(name), backend)
    return _models[(name, backend)]


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL_MODELS)
def test_functional_equals_golden(imported, name):
    functional = _built(imported, name, "functional")
    golden = _built(imported, name, "golden")
    assert functional.plans, "the model has NPU partitions"
    for inputs in reference(name)["inputs"]:
        for a, b in zip(functional.run(inputs), golden.run(inputs)):
            np.testing.assert_array_equal(a, b)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tiny_cnn_int8.tflite", "mobilenet_v2_int8.tflite"])
def test_functional_equals_litert(imported, name):
    model = _built(imported, name, "functional")
    ref = reference(name)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        np.testing.assert_array_equal(model.run(inputs)[0], outputs[0])


def test_library_exports_one_function_per_partition(imported):
    model = _built(imported, "tiny_cnn_int8.tflite", "functional")
    lib = Path(model.extra["library"])
    assert lib.exists()
    symbols = lib.read_bytes()
    for name in model.plans:
        assert f"__tvm_ffi_{name}".encode() in symbols


def test_unlowerable_partition_is_a_compile_time_error(imported):
    # partitioned for the default NPU, then built for one whose SRAM no tile fits
    mod = npu_byoc.partition_for_npu(imported("tiny_cnn_int8.tflite"))
    message = "npu_subgraph_0: layer 'tiny_cnn_1/relu6_s2_1/Relu6' (npu.conv2d): conv2d 32x32x3 -> 16x16x16, kernel 3x3"
    with pytest.raises(LoweringError, match=re.escape(message) + ".*tile needs 352 bytes of SRAM, the NPU has 256"):
        npu_byoc.build(mod, "functional", hw=HwConfig(sram_bytes=256))


@pytest.mark.slow
def test_ops_no_tile_fits_stay_on_the_cpu(imported):
    # partitioned for that NPU: the ops no tile fits stay on the CPU with the scheduler's
    # reason, the rest run on it, and the model still gives LiteRT's outputs
    name = "tiny_cnn_int8.tflite"
    hw = HwConfig(sram_bytes=256)
    mod = npu_byoc.partition_for_npu(imported(name), hw=hw)
    log = partition_log(mod)
    refused = {d.layer: d.reason for d in log if not d.accepted and "tile needs" in d.reason}
    assert "tiny_cnn_1/relu6_s2_1/Relu6" in refused and any(d.accepted for d in log)
    assert all(r.endswith("the NPU has 256") for r in refused.values())
    model, golden = npu_byoc.build(mod, "functional", hw=hw), npu_byoc.build(mod, "golden", hw=hw)
    ref = reference(name)
    for x, y in zip(ref["inputs"], ref["outputs"]):
        out = model.run(x)[0]
        np.testing.assert_array_equal(out, golden.run(x)[0])  # the C model = the golden model
        assert np.abs(out.astype(int) - y[0].astype(int)).max() <= 1  # TVM's CPU ops: 1 LSB off LiteRT at most


def test_cli_compile_and_run(tmp_path, capsys):
    lib = tmp_path / "model.so"
    model = str(model_path("tiny_cnn_int8.tflite"))
    assert main(["compile", model, "-o", str(lib)]) == 0
    assert lib.exists() and "1 NPU partition(s)" in capsys.readouterr().out
    ref = reference("tiny_cnn_int8.tflite")
    x, out = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(x, ref["inputs"][2][0])
    assert main(["run", model, "--input", str(x), "--output", str(out)]) == 0  # functional by default
    np.testing.assert_array_equal(np.load(out), ref["outputs"][2][0])


@pytest.mark.slow
def test_functional_work_limit_stops_a_run(imported, monkeypatch):
    # npu_submit's cycle budget (NPU_FUNCTIONAL_MAX_CYCLES) stops a run with CYCLE_LIMIT, as the
    # RTL simulator's does; with the default budget the same model runs.
    name = "tiny_cnn_int8.tflite"
    model = _built(imported, name, "functional")
    inputs = reference(name)["inputs"][0]
    monkeypatch.setenv("NPU_FUNCTIONAL_MAX_CYCLES", "10")
    with pytest.raises(NpuStreamError, match=r"exceeded its cycle budget \(CYCLE_LIMIT\)"):
        model.run(inputs)
    monkeypatch.delenv("NPU_FUNCTIONAL_MAX_CYCLES")
    np.testing.assert_array_equal(model.run(inputs)[0], reference(name)["outputs"][0][0])


def test_temporary_library_is_removed_with_the_model(imported, tmp_path, monkeypatch):
    # every fuzz case builds one: the npu_byoc_*/model.so must go when the model does
    import gc
    import tempfile

    fresh = tmp_path / "tmp"
    fresh.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(fresh))
    model = npu_byoc.build(imported("tiny_cnn_int8.tflite"), "functional")
    lib = Path(model.extra["library"])
    assert lib.parent.parent == fresh and lib.parent.name.startswith("npu_byoc_") and lib.is_file()
    ref = reference("tiny_cnn_int8.tflite")
    np.testing.assert_array_equal(model.run(ref["inputs"][0])[0], ref["outputs"][0][0])
    del model
    gc.collect()
    assert not lib.parent.exists() and sorted(fresh.glob("npu_byoc_*")) == []
