"""The npu-byoc command line, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from npu_byoc.cli import main

from .conftest import model_path


def test_demo_runs_on_bundled_model(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "tiny_cnn_int8.tflite" in out and "18/18" in out  # every operator, SOFTMAX included, on the NPU


@pytest.mark.parametrize("fmt", ["text", "json", "md", "html"])
def test_coverage_formats(tmp_path, fmt):
    out = tmp_path / f"cov.{fmt}"
    assert main(["coverage", str(model_path("tiny_cnn_qdq.onnx")), "--format", fmt, "-o", str(out)]) == 0
    text = out.read_text()
    if fmt == "json":
        assert json.loads(text)["summary"]["ops_total"] == 17
    else:
        assert "Softmax" in text


def test_missing_model_is_a_clear_error(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "npu_byoc.cli", "coverage", str(tmp_path / "missing.tflite")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "missing.tflite: no such file" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_patterns_doc_is_current():
    """docs/patterns.md is generated from the table; regenerate with
    `npu-byoc patterns --format md -o docs/patterns.md`."""
    from pathlib import Path

    from npu_byoc.partition.docs import pattern_table_markdown

    doc = Path(__file__).parents[1] / "docs" / "patterns.md"
    assert doc.read_text() == pattern_table_markdown()


def test_run_and_compare(tmp_path):
    import numpy as np

    from .conftest import reference

    ref = reference("tiny_cnn_int8.tflite")
    x = tmp_path / "x.npy"
    np.save(x, ref["inputs"][1][0])
    out = tmp_path / "y.npy"
    model = str(model_path("tiny_cnn_int8.tflite"))
    assert main(["run", model, "--input", str(x), "--backend", "golden", "--output", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out), ref["outputs"][1][0])
    r = tmp_path / "r.npy"
    np.save(r, ref["outputs"][1][0])
    rep = tmp_path / "cmp.json"
    assert main(["compare", model, "--input", str(x), "--reference", str(r), "--format", "json", "-o", str(rep)]) == 0
    assert json.loads(rep.read_text())["outputs"][0]["golden_vs_reference"]["max_lsb"] == 0


def test_run_with_a_bad_input_file(tmp_path, capsys):
    bad = tmp_path / "x.npy"
    bad.write_text("not numpy")
    assert main(["run", str(model_path("tiny_cnn_int8.tflite")), "--input", str(bad)]) == 2
    assert "x.npy: not a .npy array" in capsys.readouterr().err
