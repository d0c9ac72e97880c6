"""Every benchmark's quick mode runs and prints its tables, so a benchmark that breaks fails CI.

Each runs as the README says (a subprocess of `python bench/<name>.py --quick`, with a time
limit); the test parses what it printed: the expected rows, numeric cells, and the figures
that must hold whatever the machine (the NPU output within 1 LSB of TVM's CPU build or 0 of
LiteRT's, cycles no fewer than the roofline bound, composites one per synthetic layer)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
NUMBER = r"[-+]?\d[\d,]*(?:\.\d+)?"


def run_quick(script: str, *args: str, timeout: int = 600) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the scripts find the repo themselves
    proc = subprocess.run([sys.executable, str(BENCH / script), "--quick", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert proc.stdout.startswith("quick mode:"), proc.stdout[:500]  # says its figures are not to quote
    return proc.stdout


def number(cell: str) -> float:
    assert re.fullmatch(NUMBER, cell.strip()), f"not a number: {cell!r}"
    return float(cell.replace(",", ""))


def text_row(out: str, *first: str) -> list[str]:
    """The cells after ``first`` of the one whitespace-aligned table row that starts with them."""
    rows = [line.split() for line in out.splitlines() if line[:1].strip()]  # not the indented notes
    rows = [cells[len(first):] for cells in rows if tuple(cells[: len(first)]) == first]
    assert len(rows) == 1, f"expected one row {first} in:\n{out}"
    return rows[0]


def markdown_rows(out: str, header_start: str) -> list[list[str]]:
    """The body rows of the markdown table whose header starts with ``header_start``."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    assert rows, f"no rows under {header_start!r}:\n{out}"
    return rows


def _bounds(cell: str) -> tuple[float, float]:
    """The interval a printed number was rounded from."""
    half = 0.5 * 10.0 ** -len(cell.split(".")[1]) if "." in cell else 0.5
    return number(cell) - half, number(cell) + half


def load_bench(name: str, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_partition_quick():
    out = run_quick("partition.py")
    for workload, layers in ((("tiny_cnn_int8.tflite",), None), (("synthetic", "conv", "x5"), 5),
                             (("synthetic", "conv", "x10"), 10)):  # fmt: skip
        cells = text_row(out, *workload)
        bindings, npu_s, n, raw_s, raw_n, ratio = cells[:6]
        assert number(bindings) > 0 and number(n) >= 1 and number(raw_n) >= 1
        assert number(npu_s) > 0 and number(raw_s) > 0
        # the printed ratio is of the unrounded times: it lies within what the rounded ones allow
        lo, hi = _bounds(npu_s), _bounds(raw_s)
        assert lo[0] / hi[1] - 0.01 <= number(ratio) <= lo[1] / max(hi[0], 1e-9) + 0.01
        if layers:  # one conv composite per layer, with and without the checks
            assert cells[-3:] == [str(layers), "|", str(layers)]
    assert re.search(r"5 -> 10\s+layers x2:\s+npu_byoc x" + NUMBER, out)


@pytest.mark.slow
def test_build_quick():
    out = run_quick("build.py")
    for backend in ("cpu", "functional"):
        cells = text_row(out, "tiny_cnn_int8.tflite", backend)
        assert number(cells[0]) == 1 and number(cells[1]) > 0  # n, total s
    summary = text_row(out.split("summary:")[1], "tiny_cnn_int8.tflite")
    compile_s, cpu_s, ratio = map(number, summary[:3])
    assert compile_s > 0 and cpu_s > 0 and ratio == pytest.approx(compile_s / cpu_s, abs=0.01)
    differ = re.search(r"(\d+)/(\d+) \(max (\d+) LSB\)", " ".join(summary))
    assert differ and int(differ.group(2)) == 10  # tiny_cnn's 10 class scores
    assert int(differ.group(3)) <= 1  # functional NPU vs TVM's CPU build: the project's tolerance


@pytest.mark.slow
def test_cosim_quick():
    out = run_quick("cosim.py")
    ((model, layers, macs, cycles, util, *_, sim, wall, compile_s, lsb),) = markdown_rows(out, "| model | layers")
    assert model == "tiny_cnn_int8.tflite" and number(layers) > 0 and number(macs) > 0 and number(cycles) > 0
    assert 0 < number(util.rstrip("%")) <= 100
    golden, tvm = (int(v) for v in lsb.split(" / "))
    assert golden == 0 and tvm <= 1  # the RTL is bit-exact with the golden model
    classes = markdown_rows(out, "| model | class")
    assert {r[1] for r in classes} >= {"standard conv", "depthwise conv", "fully connected"}
    assert "Targets (issue 5):" in out


def test_vela_compressed_quick():
    """The pruned and clustered fixtures: our encoded weights no larger than Vela's (recorded in
    quick mode), and the cycles lower with the decoder where the weights' flash is the wall."""
    out = run_quick("vela.py", "--compressed")
    rows = markdown_rows(out, "| model | weights | ours: encoded")
    assert {r[0] for r in rows} == {"mobilenet_v1_pruned_int8.tflite", "mobilenet_v1_clustered_int8.tflite"}
    for model, original, encoded, ratio, vela, vela_ratio, ours_vela in rows:
        assert number(encoded) <= number(vela.replace(" (recorded)", "")) and number(ours_vela) <= 1
        assert number(ratio) == pytest.approx(number(encoded) / number(original), abs=0.001)
    cycles = markdown_rows(out, "| model | memory | weight_decoder=0")
    assert len(cycles) == 6
    for model, memory, before, after, ratio in cycles:
        if memory == "U55 Shared_Sram":
            assert number(after) < 0.7 * number(before)


@pytest.mark.slow
def test_vela_quick():
    out = run_quick("vela.py", "--per-layer", "tiny_cnn_int8.tflite")
    ((model, width, macs, cycles, ms, bound, ratio, util, total, npu, vela_macs, vela_util, ours_vela),) = markdown_rows(
        out, "| model | memory (bytes/cycle) | MACs")
    assert model == "tiny_cnn_int8.tflite" and width == "16" and number(macs) > 0
    assert number(cycles) >= number(bound) > 0  # no schedule beats the roofline bound
    assert number(ms) == pytest.approx(number(cycles) / 500e3, abs=0.001)  # at the default 500 MHz
    assert number(ratio) == pytest.approx(number(cycles) / number(bound), abs=0.01)
    # MAC utilization: the MACs over 256 per cycle (the default 8 x 32 array), at most 100%
    assert number(util.rstrip("%")) == pytest.approx(100 * number(macs) / (256 * number(cycles)), abs=0.06)
    assert 0 < number(util.rstrip("%")) <= 100
    layers = markdown_rows(out, "| # | layer")
    classes = markdown_rows(out, "| model | memory (bytes/cycle) | class")
    # the classes' cycles are their layers' cycles (with Vela: of the layers it has an operator for)
    assert sum(number(r[4]) for r in classes) == sum(number(r[4]) for r in layers if r[5] != "-" or total == "-")
    if shutil.which("vela") or Path(sys.executable).with_name("vela").exists():  # as bench/vela.py looks
        assert number(total) > 0 and number(ours_vela) > 0
        assert number(vela_util.rstrip("%")) == pytest.approx(100 * number(vela_macs) / (256 * number(total)), abs=0.06)
    else:  # the quick run without Vela says so in its output, and leaves Vela's cells empty
        assert 'Vela columns empty' in out and 'pip install -e ".[bench]"' in out
        assert (total, npu, vela_macs, vela_util, ours_vela) == ("-", "-", "-", "-", "-")


def test_vela_full_run_without_vela_says_what_to_install(monkeypatch, tmp_path):
    vela = load_bench("vela", monkeypatch)
    monkeypatch.setattr(vela.shutil, "which", lambda name: None)
    monkeypatch.setattr(vela.sys, "executable", str(tmp_path / "python"))  # no vela beside it
    with pytest.raises(SystemExit) as exc:
        vela.main(["--models", "tiny_cnn_int8.tflite"])
    assert str(exc.value) == 'bench/vela.py needs Arm Vela: pip install -e ".[bench]" (ethos-u-vela)'


def test_vela_config_gives_both_sides_the_same_memory(monkeypatch):
    """--vela-config SYSTEM/MODE: Vela runs with that ini section, we with its conversion
    (npu-byoc hw --from-vela-ini) behind the accelerator's AXI width."""
    vela = load_bench("vela", monkeypatch)
    args = vela.argparse.Namespace(vela_config=["Ethos_U55_High_End_Embedded/Shared_Sram"], vela_ini=str(vela.VELA_FIXTURE),
                                   accelerator="ethos-u55-256", dma_bytes_per_cycle=None, quick=False)  # fmt: skip
    (setup,) = vela.setups(args)
    assert setup.dma_bytes == 8 and setup.vela[1:] == ("Ethos_U55_High_End_Embedded", "Shared_Sram")
    fields = dict(setup.fields)
    assert fields["const_mem_bytes_per_cycle"] == 1 and fields["const_mem_read_latency"] == 64  # the flash
    assert fields["fm_mem_bytes_per_cycle"] == 8 and fields["fm_mem_burst_bytes"] == 32  # the SRAM
    args.vela_config = ["Ethos_U55_High_End_Embedded"]
    with pytest.raises(SystemExit, match="expected SYSTEM/MODE"):
        vela.setups(args)


def test_vela_matched_memory_follows_the_accelerator_s_port(monkeypatch, tmp_path):
    """The matched SRAM at D bytes/cycle: Sram_clock_scale is D over the accelerator's AXI
    port (U55: 8 bytes, U85: 16), and the accelerator asked for is the one Vela runs."""
    vela = load_bench("vela", monkeypatch)
    args = vela.argparse.Namespace(vela_config=None, dma_bytes_per_cycle=[16], quick=False, accelerator="ethos-u85-256")
    (setup,) = vela.setups(args)
    assert setup.accelerator == "ethos-u85-256" and vela.macs_per_cycle(setup.accelerator) == 256
    seen = []
    monkeypatch.setattr(vela, "vela_exe", lambda: "vela")
    monkeypatch.setattr(vela.subprocess, "run", lambda cmd, **kw: seen.append(cmd) or
                        vela.subprocess.CompletedProcess(cmd, 1, "", "RuntimeError: Non-passthrough operation (Mul)\n"))
    row, layers = vela.run_vela(Path("m.tflite"), setup, tmp_path)
    assert "Sram_clock_scale=1.0" in (tmp_path / "npu_byoc.ini").read_text()
    assert seen[0][seen[0].index("--accelerator-config") + 1] == "ethos-u85-256"
    # a model Vela cannot compile is a row saying so, not the end of the run
    assert row == {"error": "vela failed: RuntimeError: Non-passthrough operation (Mul)"} and layers == []
    args.accelerator = "ethos-u55-256"
    (setup,) = vela.setups(args)
    vela.run_vela(Path("m.tflite"), setup, tmp_path)
    assert "Sram_clock_scale=2.0" in (tmp_path / "npu_byoc.ini").read_text()


def test_vela_csv_rows_sum_per_output_tensor(monkeypatch):
    """Vela's per-layer CSV: the Name column lists the fused tensors, the op's own output first."""
    vela = load_bench("vela", monkeypatch)
    rows = [{"Name": "conv1;relu1", "Op Cycles": "100.0"}, {"Name": "conv1", "Op Cycles": "20"},
            {"Name": "fc;softmax", "Op Cycles": "7"}]  # fmt: skip
    assert dict(vela.vela_cycles_by_layer(rows)) == {"conv1": 120, "fc": 7}


@pytest.mark.slow
def test_keras_apps_quick():
    out = run_quick("keras_apps.py")
    for name in ("ds_cnn", "fc_autoencoder"):
        cells = text_row(out, name)
        on_npu, total = (int(v) for v in cells[0].split("/"))
        assert 0 < on_npu <= total
        assert 0 <= number(cells[1].rstrip("%")) <= 100
        assert int(cells[4]) == 0  # golden backend vs LiteRT's reference kernels (their .npz: BUILTIN_REF)
        assert cells[5] == "-"  # no optimized kernels' output recorded for a fixture


def test_keras_apps_reads_both_litert_outputs(monkeypatch, tmp_path):
    """Step 2's LiteRT outputs by kernels: NAME.ref.npy / NAME.opt.npy, a legacy folder's NAME.out.npy
    as the optimized one, NAME.ref.txt (the reference kernels aborted) as an "abort" cell, and the
    logits row of a model cut before its SOFTMAX."""
    keras_apps = load_bench("keras_apps", monkeypatch)
    x = np.zeros((1, 4), np.int8)
    for name in ("a", "b", "b.logits"):
        (tmp_path / f"{name}.tflite").write_bytes(b"")
        np.save(tmp_path / f"{name}.in.npy", x)
    np.save(tmp_path / "a.ref.npy", np.array([[3, -2, 0, 1]], np.int8))
    np.save(tmp_path / "a.out.npy", np.array([[3, -4, 0, 1]], np.int8))  # made before: optimized
    (tmp_path / "b.ref.txt").write_text("LiteRT BUILTIN_REF failed (SIGABRT)\n")
    np.save(tmp_path / "b.opt.npy", np.array([[0, 0, 0, 5]], np.int8))
    np.save(tmp_path / "b.logits.ref.npy", np.array([[1, 1, 1, 1]], np.int8))
    rows = {name: refs for name, _, _, refs in keras_apps.made(tmp_path, ["a", "b"])}
    assert list(rows) == ["a", "b", "b:logits"]
    got = np.array([[3, -3, 0, 1]], np.int8)
    cells = {n: (keras_apps.lsb_cell(got, r["ref"]), keras_apps.lsb_cell(got, r["opt"])) for n, r in rows.items()}
    assert cells == {"a": ("1", "1"), "b": ("abort", "4"), "b:logits": ("4", "-")}
    assert rows["b"]["ref"] == "LiteRT BUILTIN_REF failed (SIGABRT)"


def test_keras_apps_make_without_tensorflow_says_what_to_install(monkeypatch, tmp_path):
    keras_apps = load_bench("keras_apps", monkeypatch)
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # `import tensorflow` raises ImportError
    with pytest.raises(SystemExit) as exc:
        keras_apps.make(tmp_path, ["ds_cnn"])
    assert "pip install tensorflow ai-edge-litert" in str(exc.value)


# onnx_apps --quick: each fixture's tolerance against onnxruntime (tests/test_transformer_fixtures.py's)
ONNX_QUICK = {"shufflenet_unit": 2, "squeezenet_pools": 1, "regnet_groups": 1}


@pytest.mark.slow
def test_onnx_apps_quick():
    out = run_quick("onnx_apps.py")
    for name, lsb in ONNX_QUICK.items():
        ops, macs, parts, trans, vs_ort, vs_tvm, tvm_ort, layers, rtl, cycles = text_row(out, name, "qdq")[:10]
        on_npu, total = (int(v) for v in ops.split("/"))
        assert 0 < on_npu <= total and 0 <= number(macs.rstrip("%")) <= 100 and number(parts) >= 1
        assert number(vs_ort) <= lsb and number(vs_tvm) <= lsb and number(tvm_ort) >= 0
        assert number(layers) <= 1  # every NPU layer within 1 LSB of TVM's CPU build fed the same input
        assert number(rtl) == 0 and number(cycles) > 0  # the RTL bit-exact with the golden model


def test_onnx_apps_make_without_torch_says_what_to_install(monkeypatch, tmp_path):
    onnx_apps = load_bench("onnx_apps", monkeypatch)
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(SystemExit) as exc:
        onnx_apps.make(tmp_path, ["squeezenet1_1"], ["qdq"])
    assert "pip install torch torchvision onnx onnxruntime" in str(exc.value)


@pytest.mark.slow
def test_interleave_quick():
    """tiny_cnn_qdq under U55 Sram_Only: its image laid out on chip, faster than the strided
    reads and, both, no faster than the roofline bound."""
    out = run_quick("interleave.py")
    (row,) = markdown_rows(out, "| model |")
    assert row[:2] == ["tiny_cnn_qdq.onnx", "Sram_Only"] and row[7] == "1 of 1"
    strided, on_chip, bound = (number(c) for c in row[2:5])
    assert bound <= on_chip < strided / 4


def test_waveform_quick():
    out = run_quick("waveform.py")
    ((k, layer, cycles, layer_ms, traced_ms, in_window, adds_ms, all_in, size),) = markdown_rows(out, "| # | layer")
    assert k == "0" and layer == "tiny_cnn_1/relu6_s2_1/Relu6" and number(cycles) > 0 and number(size) > 0
    assert number(in_window) == pytest.approx(number(traced_ms) / number(layer_ms), rel=0.1, abs=0.1)
    assert number(all_in) == pytest.approx((number(layer_ms) + number(adds_ms)) / number(layer_ms), rel=0.1, abs=0.1)
