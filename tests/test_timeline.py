"""The co-simulation's command timeline (`npu-byoc cosim --timeline`): Chrome / Perfetto
trace-event JSON, one track per unit, checked against the report and the analytic cycle model."""

import json

import numpy as np
import pytest

import npu_byoc
from npu_byoc.arch import cycles as cycle_model
from npu_byoc.cli import main
from npu_byoc.codegen.lower import lower_module
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.frontends.bundled import bundled_model
from npu_byoc.runtime.cosim_timeline import MAC_OPCODES, TRACKS

MODEL = bundled_model("mobilenet_v2")
TIDS = set(TRACKS.values())


@pytest.fixture(scope="module")
def timeline(tmp_path_factory):
    """(trace-event JSON, cosim report JSON) of MobileNetV2, written by the command line."""
    d = tmp_path_factory.mktemp("timeline")
    np.save(d / "x.npy", np.load(MODEL.with_suffix(".input.npy")))
    assert main(["cosim", str(MODEL), "--input", str(d / "x.npy"), "--summary-only", "--no-progress",
                 "--report", str(d / "r.json"), "--timeline", str(d / "t.json")]) == 0  # fmt: skip
    return json.loads((d / "t.json").read_text()), json.loads((d / "r.json").read_text())


def slices(trace, track):
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == TRACKS[track]]


def test_is_valid_trace_event_json(timeline):
    trace, report = timeline
    events = trace["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == set(TRACKS)
    layers = {r["name"] for r in report["layers"]}
    for e in events:
        assert e["ph"] in ("X", "M") and e["pid"] == 1 and isinstance(e["name"], str)
        if e["ph"] == "X":
            assert e["tid"] in TIDS and isinstance(e["ts"], int) and isinstance(e["dur"], int)
            assert e["ts"] >= 0 and e["dur"] > 0
            layer, _, opcode = e["name"].rpartition(": ")
            assert layer in layers and opcode.isupper()
    for track in ("command processor", "DMA in", "DMA out", "MAC array", "vector unit"):
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in slices(trace, track))
        assert spans and all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), track  # a unit does one thing at a time
    # the command processor is never idle: its slices tile the whole run
    cp = sorted((e["ts"], e["ts"] + e["dur"]) for e in slices(trace, "command processor"))
    assert cp[0][0] == 0 and cp[-1][1] == report["summary"]["cycles"] == trace["otherData"]["cycles"]
    assert all(a[1] == b[0] for a, b in zip(cp, cp[1:]))


def test_mac_array_slices_sum_to_the_reports_compute_cycles(timeline):
    trace, report = timeline
    s = report["summary"]
    mac = sum(e["dur"] for e in slices(trace, "MAC array"))
    vector = sum(e["dur"] for e in slices(trace, "vector unit"))
    assert mac == s["mac_compute_cycles"] > 0  # MobileNetV2's MAC layers compute with CONV/DWCONV/FC kicks only
    assert mac + vector == s["compute_cycles"]
    # and the analytic model's cycles of the same kicks (fetch included), independent of the RTL
    plans = lower_module(npu_byoc.partition_for_npu(npu_byoc.load_model(MODEL)))
    steps = [st for plan in plans.values() for st in schedule_partition(plan).steps]
    assert mac == sum(cycle_model.command_cycles(st) for st in steps if st.opcode in MAC_OPCODES)


def test_dma_copies_overlap_compute(timeline):
    """MobileNetV2's weights stream in the background (DMA_IN_ASYNC): some copy overlaps a kick."""
    trace, _ = timeline
    kicks = [(e["ts"], e["ts"] + e["dur"]) for e in slices(trace, "MAC array")]
    copies = [(e["ts"], e["ts"] + e["dur"]) for e in slices(trace, "DMA in")]
    assert any(c0 < k1 and k0 < c1 for c0, c1 in copies for k0, k1 in kicks)


def test_every_dma_opcode_has_a_dma_track():
    """The decode DMAs of a weight decoder included: a timeline of a stream holding one must not
    raise KeyError (it did for the synchronous DMA_IN_DECODE)."""
    from npu_byoc.arch.isa import DMA_OPCODES, Opcode
    from npu_byoc.runtime import cosim_timeline

    assert {op: cosim_timeline._DIRECTION[op] for op in DMA_OPCODES} == {
        op: "DMA out" if "OUT" in op.name else "DMA in" for op in DMA_OPCODES}
    assert cosim_timeline._DIRECTION[Opcode.DMA_IN_DECODE] == "DMA in"
