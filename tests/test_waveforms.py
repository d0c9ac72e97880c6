"""Waveforms of a window (`npu-byoc cosim --trace FILE.vcd --trace-layers NAME`): a valid VCD
of the RTL's signals (hw/sim/npu_trace.vlt leaves out block-local temporaries and the per-tap
operand addresses), the MAC array's among them, sampled only in the layer's cycles (checked
against the command timeline of the same run). What the trace costs is bench/waveform.py's."""

import json
import re

import numpy as np
import pytest

from pathlib import Path

from npu_byoc.arch.isa import Opcode
from npu_byoc.cli import main
from npu_byoc.errors import NpuByocError
from npu_byoc.frontends.bundled import bundled_model
from npu_byoc.runtime import verilator
from npu_byoc.runtime.waveform import Stream, WaveformWindow, WordRange, step_words

TINY = bundled_model("tiny_cnn")
LAYER = "tiny_cnn_1/conv_valid_1/Relu"  # a 3x3 conv in the middle of the stream


def declarations(head: str) -> list[tuple[str, str]]:
    """[(id, hierarchical name)] of a VCD header, aliases (one id, several names) included."""
    out, scope = [], []
    for m in re.finditer(r"\$(scope|upscope|var)\b(.*?)\$end", head, re.S):
        kind, tokens = m.group(1), m.group(2).split()
        if kind == "scope":
            scope.append(tokens[1])
        elif kind == "upscope":
            scope.pop()
        else:
            assert len(tokens) >= 4 and int(tokens[1]) > 0, tokens  # type, width, id, name
            out.append((tokens[2], ".".join([*scope, tokens[3]])))
    assert not scope, "unbalanced $scope"
    return out


def parse_vcd(text: str) -> tuple[str, dict[str, str], list[tuple[int, list[tuple[str, str]]]]]:
    """(timescale, id -> hierarchical name, [(time, [(id, value)])]); asserts the syntax."""
    head, sep, body = text.partition("$enddefinitions $end")
    assert sep, "no $enddefinitions"
    timescale = re.search(r"\$timescale\s+(\S+)\s+\$end", head).group(1)
    names = {}
    for ident, name in declarations(head):
        names.setdefault(ident, name)
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
    text = (d / "w.vcd").read_text()
    return parse_vcd(text), report, timeline, {name for _, name in declarations(text.partition("$enddefinitions")[0])}


def test_the_vcd_holds_the_mac_array_and_only_the_layers_cycles(traced):
    (timescale, names, samples), report, timeline, _ = traced
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


# what a hardware engineer looks at, unit by unit (docs/waveforms.md "Which signals matter")
NEEDED = [
    "npu.npu_top.mac.array.en", "npu.npu_top.mac.array.act_valid", "npu.npu_top.mac.array.w[0]",  # taps, operands
    "npu.npu_top.mac.act_en[0]", "npu.npu_top.w_data[0]", "npu.npu_top.mac.t", "npu.npu_top.mac.toff",
    "npu.npu_top.mac.col_abase[0]", "npu.npu_top.mac.lane_wbase[0]", "npu.npu_top.mac.row_k[0]",
    "npu.npu_top.mac.p2_acc[0]", "npu.npu_top.mac.p2_valid", "npu.npu_top.mac.d_ch0[0]", "npu.npu_top.mac.d_row",
    "npu.npu_top.out_data[0]", "npu.npu_top.out_en[0]", "npu.npu_top.out_addr[0]",  # the requantize units
    "npu.npu_top.mac.requant_addr", "npu.npu_top.mac.ofm_zero_point", "npu.npu_top.mac.act_min",
    "npu.npu_top.dma.mem_valid", "npu.npu_top.dma.mem_addr", "npu.npu_top.dma.busy", "npu.npu_top.dma.outstanding",
    "npu.npu_top.cmdproc.cur_index", "npu.npu_top.cmdproc.state", "npu.npu_top.cmdproc.cmd_opcode",
    "npu.npu_top.status",
]  # fmt: skip


def test_the_vcd_keeps_the_signals_that_matter_and_drops_the_temporaries(traced):
    (_, _, samples), _, _, present = traced
    assert [n for n in NEEDED if n not in present] == []
    dropped = [n for n in present if ".mac.engine." in n or ".sram.w_gather." in n or n.endswith(".act_addr[0]")
               or n.endswith(".rq_bias[0]")]  # fmt: skip
    assert dropped == []
    # tiny_cnn's 3x3 conv changes 179 values a cycle when every signal is dumped, 22 with
    # hw/sim/npu_trace.vlt's selection (both counted from the VCDs)
    assert sum(len(changes) for _, changes in samples[1:]) / (len(samples) - 1) < 60


def test_the_signal_selection_keys_the_traced_build_only(tmp_path, monkeypatch):
    plain, traced = verilator.build_key(), verilator.build_key(waveform="vcd")
    (tmp_path / "npu_trace.vlt").write_text("`verilator_config\n")
    monkeypatch.setattr(verilator, "TRACE_CONFIG", tmp_path / "npu_trace.vlt")
    assert verilator.build_key() == plain and verilator.build_key(waveform="vcd") != traced


def test_a_word_range_dumps_the_same_window_as_its_layers(traced, tmp_path):
    """--trace-words A:B with the words the layer's window reported dumps the same cycles and
    values; a range that starts or ends inside a command's register writes takes the whole
    command (here: one word into the first command's SET_REGs, one word before the end)."""
    (_, _, samples), report, _, _ = traced
    first, end = report["summary"]["waveform"]["words"]
    np.save(tmp_path / "x.npy", np.load(TINY.with_suffix(".input.npy")))
    argv = ["cosim", str(TINY), "--input", str(tmp_path / "x.npy"), "--summary-only", "--no-progress", "--report",
            str(tmp_path / "r.json"), "--trace", str(tmp_path / "w.vcd"), "--trace-words", f"{first + 1}:{end - 1}"]
    assert main(argv) == 0
    window = json.loads((tmp_path / "r.json").read_text())["summary"]["waveform"]
    assert window["words"] == [first, end] and window["cycles"] == report["summary"]["waveform"]["cycles"]
    assert LAYER in window["layers"]
    assert parse_vcd((tmp_path / "w.vcd").read_text())[2] == samples


class _Op:
    def __init__(self, name):
        self.name = name


class _Step:
    def __init__(self, opcode):
        self.opcode = opcode


# two partitions; a layer whose name holds a comma; 3 header words, then 4 steps of 2 SET_REGs + a command
PLANS = {"npu_subgraph_0": type("Plan", (), {"ops": [_Op("conv,1"), _Op("conv"), _Op("pool")]}),
         "npu_subgraph_1": type("Plan", (), {"ops": [_Op("fc")]})}  # fmt: skip
STREAM = Stream([_Step(Opcode.DMA_IN), _Step(Opcode.CONV), _Step(Opcode.CONV), _Step(Opcode.MAXPOOL)],
                [0, 0, 1, 2], [3, 8, 13, 18], 24)  # fmt: skip


@pytest.mark.parametrize("layers, steps, names", [
    (("conv,1",), [0, 1], ["conv,1"]),  # the name with a comma, whole
    (("conv,pool",), [2, 3], ["conv", "pool"]),  # two names, comma-separated
    (("pool", "conv,1"), [0, 1, 2, 3], ["conv,1", "pool"]),  # repeated, one name a time; the window spans conv
])  # fmt: skip
def test_layer_names_may_hold_commas(layers, steps, names):
    assert WaveformWindow(Path("w.vcd"), layers).resolve(PLANS, lambda p: STREAM) == ("npu_subgraph_0", steps, names)


@pytest.mark.parametrize("window, needle", [
    (WaveformWindow(Path("w.vcd"), ("conv,nope",)), "no NPU layer is named 'nope'"),
    (WaveformWindow(Path("w.vcd"), ("conv", "fc")), "different NPU partitions"),
    (WaveformWindow(Path("w.vcd"), words=WordRange(3, 9)), "2 NPU partitions (npu_subgraph_0, npu_subgraph_1)"),
    (WaveformWindow(Path("w.vcd"), words=WordRange(3, 9, "npu_subgraph_9")), "no NPU partition is named"),
    (WaveformWindow(Path("w.vcd"), words=WordRange(3, 25, "npu_subgraph_0")), "has 24 words (0 to 23)"),
    (WaveformWindow(Path("w.vcd"), words=WordRange(0, 3, "npu_subgraph_0")), "no command there"),
])  # fmt: skip
def test_an_unknown_layer_or_partition_or_a_range_off_the_stream_is_refused(window, needle):
    with pytest.raises(NpuByocError, match=re.escape(needle)):
        window.resolve(PLANS, lambda p: STREAM)


def test_a_word_range_is_whole_commands():
    one = {"npu_subgraph_0": PLANS["npu_subgraph_0"]}
    pick = lambda a, b: WaveformWindow(Path("w.vcd"), words=WordRange(a, b)).resolve(one, lambda p: STREAM)[1]  # noqa: E731
    assert pick(8, 13) == [1] and pick(7, 14) == [0, 1, 2] and pick(0, 24) == [0, 1, 2, 3] and pick(23, 24) == [3]
    assert step_words(STREAM.starts, STREAM.n_words, [1, 2]) == (8, 18)
    assert WordRange.parse("npu_subgraph_1:5:9") == WordRange(5, 9, "npu_subgraph_1")


@pytest.mark.parametrize("argv, needle", [
    (["--trace", "w.vcd", "--trace-layers", "no/such/layer"], "'no/such/layer'"),
    (["--trace", "w.txt", "--trace-layers", LAYER], "w.txt: a waveform file ends in .vcd or .fst"),
    (["--trace", "w.vcd"], "--trace-layers"),
    (["--trace-layers", LAYER], "--trace FILE.vcd"),
    (["--trace-words", "3:9"], "--trace FILE.vcd"),
    (["--trace", "w.vcd", "--trace-words", "9:3"], "'9:3': expected 0 <= A < B"),
    (["--trace", "w.vcd", "--trace-words", "a:b:c:d"], "expected A:B or PARTITION:A:B"),
    (["--trace", "w.vcd", "--trace-words", "3:9", "--trace-layers", LAYER], "give one of them"),
    (["--trace", "w.vcd", "--trace-words", "3:100000"], "the stream of npu_subgraph_0 has"),
])  # fmt: skip
def test_a_bad_window_is_one_line(tmp_path, capsys, monkeypatch, argv, needle):
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.load(TINY.with_suffix(".input.npy")))
    assert main(["cosim", str(TINY), "--input", "x.npy", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err
