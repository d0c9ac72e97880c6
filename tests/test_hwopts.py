"""Hardware configurations from the command line: --hw FIELD=VALUE, --hw-file, npu-byoc hw."""

from __future__ import annotations

import json

import numpy as np
import pytest

from npu_byoc.arch import options as hwopts
from npu_byoc.cli import main
from npu_byoc.errors import NpuByocError
from npu_byoc.arch.config import DEFAULT_CONFIG, FIELD_RANGES, HwConfig, HwConfigError, configure, field_names

from .conftest import model_path, reference


@pytest.mark.parametrize(
    "text, value",
    [("256", 256), ("0x100", 256), ("256K", 262144), ("1M", 1 << 20), ("1MiB", 1 << 20), ("2g", 2 << 30)],
)
def test_values(text, value):
    assert hwopts.parse_value(text) == value


@pytest.mark.parametrize("text", ["", "1.5", "-3", "12Q", "K", "1e3", "0x"])
def test_bad_values(text):
    with pytest.raises(ValueError):
        hwopts.parse_value(text)


def test_every_field_has_a_range_that_holds_its_default():
    assert set(FIELD_RANGES) == set(field_names())
    for name in field_names():
        lo, hi = FIELD_RANGES[name]
        assert lo <= getattr(DEFAULT_CONFIG, name) <= hi, name


@pytest.mark.parametrize(
    "assignment, message",
    [
        ("array_rows=0", "--hw array_rows: array_rows=0: must be in [1, 128]"),
        ("sram_bytes=512", "--hw sram_bytes: sram_bytes=512: must be in [1024, 67108864]"),
        ("accumulator_bits=16", "must be in [32, 32]"),
        ("array_rows=eight", "'eight' is not an integer"),
        ("colour=3", "unknown hardware field 'colour'"),
        ("array_rows", "expected FIELD=VALUE"),
    ],
)
def test_bad_assignments_name_field_value_and_range(assignment, message):
    with pytest.raises(NpuByocError, match=message.replace("[", r"\[").replace("]", r"\]")):
        hwopts.parse_assignment(assignment)


def test_configure_checks_like_the_cli():
    assert configure(array_rows=16).array_rows == 16
    with pytest.raises(HwConfigError, match="array_cols=True"):
        configure(array_cols=True)


def test_file_then_options(tmp_path):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('array_rows = 16\nsram_bytes = "512K"\n')
    hw = hwopts.config_from([("array_rows", 4)], cfg)
    assert hw == HwConfig(array_rows=4, sram_bytes=512 * 1024)  # the option wins
    cfg.write_text("[hw]\narray_cols = 8\n")
    assert hwopts.config_from([], cfg) == HwConfig(array_cols=8)


@pytest.mark.parametrize(
    "text, message",
    [("array_rows = 0\n", "array_rows=0: must be in"), ("array_rows = \n", "not a TOML file"),
     ("array_rows = 1.5\n", "expected an integer"), ("nope = 1\n", "unknown hardware field 'nope'")],
)
def test_bad_files(tmp_path, text, message):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(text)
    with pytest.raises(NpuByocError, match=message):
        hwopts.config_from([], cfg)
    with pytest.raises(NpuByocError, match="no such hardware configuration file"):
        hwopts.config_from([], tmp_path / "missing.toml")


def test_hw_command_round_trips_through_toml(tmp_path, capsys):
    cfg = tmp_path / "cfg.toml"
    assert main(["hw", "--hw", "array_rows=16", "--hw", "sram_bytes=1M", "--format", "toml", "-o", str(cfg)]) == 0
    assert hwopts.config_from([], cfg) == HwConfig(array_rows=16, sram_bytes=1 << 20)
    assert main(["hw", "--hw-file", str(cfg), "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["sram_bytes"] == 1 << 20
    assert main(["hw", "--hw", "array_rows=0"]) == 2
    assert "array_rows=0: must be in [1, 128]" in capsys.readouterr().err


def test_the_configuration_reaches_partitioning(tmp_path):
    """max_kernel=1 keeps the tiny CNN's 3x3 convolutions on the CPU, with the limit as reason."""
    out = tmp_path / "cov.json"
    model = str(model_path("tiny_cnn_int8.tflite"))
    assert main(["coverage", model, "--format", "json", "-o", str(out)]) == 0
    default = json.loads(out.read_text())
    assert main(["coverage", model, "--hw", "max_kernel=1", "--format", "json", "-o", str(out)]) == 0
    small = json.loads(out.read_text())
    assert small["summary"]["macs_offloaded"] < default["summary"]["macs_offloaded"]
    assert "NPU supports kernels up to 1x1" in out.read_text()


@pytest.mark.slow
def test_run_on_another_configuration_gives_the_reference(tmp_path):
    """A 16x16 array with 8 KiB of SRAM tiles every layer differently; the outputs are LiteRT's."""
    ref = reference("tiny_cnn_int8.tflite")
    x, y = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(x, ref["inputs"][1][0])
    args = ["run", str(model_path("tiny_cnn_int8.tflite")), "--input", str(x), "--output", str(y)]
    assert main([*args, "--hw", "array_rows=16", "--hw", "array_cols=16", "--hw", "sram_bytes=8K"]) == 0
    np.testing.assert_array_equal(np.load(y), ref["outputs"][1][0])


@pytest.mark.slow
def test_cosim_builds_the_rtl_for_the_configuration(tmp_path):
    """--hw reaches the RTL: a 4x8 array with 4 KiB of SRAM (the configuration
    tests/test_rtl_stream.py builds too, so the Verilator build is shared) runs every layer with
    the analytic model's cycles and the golden model's bytes (on every output that leaves the
    NPU; a layer whose output stays in SRAM has none to compare)."""
    ref = reference("tiny_cnn_int8.tflite")
    x, rep = tmp_path / "x.npy", tmp_path / "r.json"
    np.save(x, ref["inputs"][1][0])
    hw = ["--hw", "array_rows=4", "--hw", "array_cols=8", "--hw", "sram_bytes=4096"]
    assert main(["cosim", str(model_path("tiny_cnn_int8.tflite")), "--input", str(x), "--report", str(rep),
                 "--no-progress", "--summary-only", *hw]) == 0  # fmt: skip
    report = json.loads(rep.read_text())
    assert (report["hw"]["array_rows"], report["hw"]["array_cols"], report["hw"]["sram_bytes"]) == (4, 8, 4096)
    assert report["layers"]
    for layer in report["layers"]:
        assert layer["cycles"] == layer["predicted_cycles"], layer
        assert layer["max_diff_golden"] == (None if layer["resident"] else 0), layer
    assert report["summary"]["layers_compared_golden"] >= 1 and report["summary"]["max_diff_golden"] == 0
