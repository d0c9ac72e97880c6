"""Coverage reports: every operator listed with its status and reason, in every format."""

from __future__ import annotations

import json
import re

import onnx
import pytest
import tflite

import npu_byoc

from .conftest import ALL_MODELS, model_path

SCHEMA_SUMMARY = {"ops_total", "ops_offloaded", "macs_total", "macs_offloaded", "partitions"}
SCHEMA_OP = {"index", "name", "op", "offloaded", "pattern", "reason", "macs"}


@pytest.fixture(scope="module")
def reports(partitioned):
    return {name: npu_byoc.coverage_report(partitioned(name)) for name in ALL_MODELS}


def _source_op_count(name: str) -> int:
    path = model_path(name)
    if path.suffix == ".tflite":
        return tflite.Model.GetRootAsModel(path.read_bytes(), 0).Subgraphs(0).OperatorsLength()
    nodes = onnx.load(path).graph.node
    return sum(n.op_type not in ("QuantizeLinear", "DequantizeLinear") for n in nodes)


@pytest.mark.parametrize("name", ALL_MODELS)
def test_json_schema_and_every_operator_listed(reports, name):
    doc = json.loads(reports[name].to_json())
    assert SCHEMA_SUMMARY <= set(doc["summary"])
    assert all(SCHEMA_OP <= set(op) for op in doc["ops"])
    assert doc["summary"]["ops_total"] == len(doc["ops"]) == _source_op_count(name)
    for op in doc["ops"]:
        if op["offloaded"]:
            assert op["pattern"].startswith("npu.") and op["reason"] is None
        else:
            assert op["pattern"] is None and op["reason"]
    s = doc["summary"]
    assert s["ops_offloaded"] == sum(o["offloaded"] for o in doc["ops"])
    assert s["macs_offloaded"] == sum(o["macs"] for o in doc["ops"] if o["offloaded"])
    assert s["partitions"] >= 1


def _by_op(report, kind):
    return [o for o in report.ops if o.op == kind]


def test_tiny_cnn_reasons(reports):
    r = reports["tiny_cnn_int8.tflite"]
    assert r.summary["ops_offloaded"] == r.summary["ops_total"] == 18
    for kind in ("SOFTMAX", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "LOGISTIC", "TANH", "QUANTIZE", "AVERAGE_POOL_2D",
                 "MAX_POOL_2D", "MEAN", "ADD"):
        assert all(o.offloaded for o in _by_op(r, kind)), kind


def test_onnx_reasons(reports):
    r = reports["tiny_cnn_qdq.onnx"]
    assert [o.reason for o in _by_op(r, "Softmax")] == [
        "npu.softmax: Softmax: onnxruntime computes Softmax in float; the NPU's SOFTMAX is TFLite's integer "
        "kernel, so the ONNX model's results would change"]
    assert all(o.offloaded for o in _by_op(r, "Add"))
    assert all(o.offloaded for o in _by_op(r, "GlobalAveragePool"))


def test_macs_are_hand_countable(reports):
    # tiny_cnn's first conv: 3x3 kernel, 3 -> 16 channels, stride 2 on 32x32 -> 16x16 output.
    first = reports["tiny_cnn_int8.tflite"].ops[0]
    assert first.op == "CONV_2D" and first.macs == 16 * 16 * 16 * 3 * 3 * 3


def test_transitions_counted(reports):
    # the whole of tiny_cnn and MobileNetV2 is one NPU partition: one call; the ONNX tiny_cnn
    # leaves its final Softmax on the CPU: into the NPU, out to the softmax.
    assert reports["tiny_cnn_int8.tflite"].summary["transitions"] == 1
    assert reports["mobilenet_v2_int8.tflite"].summary["transitions"] == 1
    assert reports["tiny_cnn_qdq.onnx"].summary["transitions"] == 2


def test_text_and_markdown(reports):
    r = reports["tiny_cnn_int8.tflite"]
    text = r.to_text()
    assert "operators offloaded: 18/18" in text and "npu.softmax" in text
    md = r.to_markdown()
    rows = [l for l in md.splitlines() if re.match(r"\| \d+ \|", l)]
    assert len(rows) == len(r.ops)


def test_html_draws_the_graph_with_reasons(reports):
    r = reports["tiny_cnn_int8.tflite"]
    html = r.to_html()
    assert html.count("<rect") == len(r.ops)
    assert html.count('fill="#d4f3dc"') == r.summary["ops_offloaded"]
    assert "npu.softmax" in html and "<line" in html
    onnx = reports["tiny_cnn_qdq.onnx"].to_html()
    assert "onnxruntime computes Softmax in float" in onnx


def test_report_on_unpartitioned_module(imported):
    # coverage_report partitions an imported module itself.
    r = npu_byoc.coverage_report(imported("tiny_cnn_int8.tflite"))
    assert r.summary["ops_offloaded"] == 18


_no_gather: dict = {}


def _kws_without_gather():
    """The keyword transformer partitioned with npu.gather excluded, once: its class-token
    STRIDED_SLICE (flatten, take, reshape) keeps the take on the CPU between two partitions,
    the flatten and the reshape NPU views."""
    if not _no_gather:
        mod = npu_byoc.load_model(model_path("kws_transformer_int8.tflite"))
        _no_gather["mod"] = npu_byoc.partition_for_npu(mod, exclude=["npu.gather"])
    return _no_gather["mod"]


def test_a_cpu_take_between_npu_views_is_not_counted_offloaded():
    """The report counted that STRIDED_SLICE offloaded ("npu.reshape", 114/114) because a match
    took one of its bindings; every run-time binding left on the CPU now keeps its operator on
    the CPU, the binding named in the reason."""
    report = npu_byoc.coverage_report(_kws_without_gather())
    s = report.summary
    assert s["partitions"] == 2 and s["ops_offloaded"] == s["ops_total"] - 1
    (cpu,) = [o for o in report.ops if not o.offloaded]
    assert cpu.op == "STRIDED_SLICE" and cpu.reason.startswith("take strided_slice_98_2 runs on the CPU")
    assert re.search(r"STRIDED_SLICE +CPU .*take strided_slice_98_2", report.to_text())


def test_cpu_work_no_operator_owns_is_listed_by_its_binding():
    """A run-time CPU binding no model operator's provenance names (one a rewrite made) is a row
    of its own, named after its binding, never dropped from the count."""
    from dataclasses import replace

    from npu_byoc.frontends.load import model_info
    from npu_byoc.partition.coverage import _build
    from npu_byoc.partition.pipeline import partition_log

    part = _kws_without_gather()
    info = model_info(part)
    orphaned = replace(info, ops=[o for o in info.ops if o.op != "STRIDED_SLICE"])
    report = _build(part, orphaned, partition_log(part))
    (row,) = [o for o in report.ops if not o.offloaded]
    assert (row.name, row.op) == ("strided_slice_98_2", "relax.take") and "runs on the CPU" in row.reason
    assert report.summary["ops_total"] == len(info.ops) - report.summary["qdq_nodes"]
