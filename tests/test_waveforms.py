"""Waveforms of a window (`npu-byoc cosim --trace FILE.vcd --trace-layers NAME`): a valid VCD
of every RTL signal, the MAC array's among them, sampled only in the layer's cycles (checked
against the command timeline of the same run). What the trace costs is bench/waveform.py's."""

import json
import re

import numpy as np
import pytest

from npu_byoc.cli import main
from npu_byoc.frontends.bundled import bundled_model

TINY = bundled_model("tiny_cnn")
LAYER = "tiny_cnn_1/conv_valid_1/Relu"  # a 3x3 conv in the middle of the stream


def parse_vcd(text: str) -> tuple[str, dict[str, str], list[tuple[int, list[tuple[str, str]]]]]:
    """(timescale, id -> hierarchical name, [(time, [(id, value)])]); asserts the syntax."""
    head, sep, body = text.partition("$enddefinitions $end")
    assert sep, "no $enddefinitions"
    timescale = re.search(r"\$timescale\s+(\S+)\s+\$end", head).group(1)
    names, scope = {}, []
    for m in re.finditer(r"\$(scope|upscope|var)\b(.*?)\$end", head, re.S):
        kind, tokens = m.group(1), m.group(2).split()
        if kind == "scope":
            scope.append(tokens[1])
        elif kind == "upscope":
            scope.pop()
        else:
            assert len(tokens) >= 4 and int(tokens[1]) > 0, tokens  # type, width, id, name
            names.setdefault(tokens[2], ".".join([*scope, tokens[3]]))
    assert not scope, "unbalanced $scope"
    samples: list = []
    for line in body.split("\n"):
        line = line.strip()
        if not line or line.startswith("$"):  # $dumpvars / $end around the first values
            continue
        if line[0] == "#":
            t = int(line[1:])
            assert not samples or t > samples[-1][0], "time goes back"
            samples.append((t, []))
        elif line[0] in "bB":
            value, ident = line[1:].split()
            assert set(value) <= set("01xzXZ") and ident in names, line
            samples[-1][1].append((ident, value))
        else:
            assert line[0] in "01xzXZ" and line[1:] in names, line
            samples[-1][1].append((line[1:], line[0]))
    return timescale, names, samples


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    d = tmp_path_factory.mktemp("wave")
    np.save(d / "x.npy", np.load(TINY.with_suffix(".input.npy")))
    argv = ["cosim", str(TINY), "--input", str(d / "x.npy"), "--summary-only", "--no-progress", "--report",
            str(d / "r.json"), "--timeline", str(d / "t.json"), "--trace", str(d / "w.vcd"), "--trace-layers", LAYER]
    assert main(argv) == 0
    report = json.loads((d / "r.json").read_text())
    timeline = json.loads((d / "t.json").read_text())
    return parse_vcd((d / "w.vcd").read_text()), report, timeline


def test_the_vcd_holds_the_mac_array_and_only_the_layers_cycles(traced):
    (timescale, names, samples), report, timeline = traced
    assert timescale == "1ns"
    assert any(".mac.array." in n for n in names.values())  # the MAC array, the DMA, the command processor
    assert any(".dma." in n for n in names.values()) and any(".cmdproc." in n for n in names.values())
    # the layer's cycles as the timeline (the RTL's per-command trace) shows them: from the register
    # writes of its first command that is not a background prefetch to the end of its last command
    mine = [e for e in timeline["traceEvents"] if e["ph"] == "X" and e["tid"] == 1 and e["args"].get("layer") == LAYER]
    commands = sorted((e for e in mine if not e["name"].endswith(": SET_REG")), key=lambda e: e["ts"])
    own = next(e for e in commands if not e["name"].endswith("_ASYNC"))
    set_regs = [e for e in mine if e["name"].endswith(": SET_REG") and e["args"]["word"] == own["args"]["word"]]
    first = set_regs[0]["ts"] if set_regs else own["ts"]
    end = commands[-1]["ts"] + commands[-1]["dur"]
    assert commands[0]["name"].endswith("DMA_IN_ASYNC") and commands[0]["ts"] < first  # its weights came early
    assert 0 < first < end < report["summary"]["cycles"]
    times = [t for t, _ in samples]
    assert times[0] == 10 * first and times[-1] == 10 * (end - 1)  # one sample per cycle, 10 ns apart
    assert times == list(range(10 * first, 10 * end, 10))
    assert report["summary"]["waveform"]["cycles"] == [first, end] and report["summary"]["waveform"]["layers"] == [LAYER]
    # the MAC array computes in the window: its signals change from sample to sample
    mac = {i for i, n in names.items() if ".mac." in n}
    assert sum(1 for _, changes in samples[1:] if any(i in mac for i, _ in changes)) > len(samples) // 2


@pytest.mark.parametrize("argv, needle", [
    (["--trace", "w.vcd", "--trace-layers", "no/such/layer"], "'no/such/layer'"),
    (["--trace", "w.txt", "--trace-layers", LAYER], "w.txt: a waveform file ends in .vcd or .fst"),
    (["--trace", "w.vcd"], "--trace-layers"),
    (["--trace-layers", LAYER], "--trace FILE.vcd"),
])  # fmt: skip
def test_a_bad_window_is_one_line(tmp_path, capsys, monkeypatch, argv, needle):
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.load(TINY.with_suffix(".input.npy")))
    assert main(["cosim", str(TINY), "--input", "x.npy", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err
