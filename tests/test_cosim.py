"""Co-simulation of whole models on the RTL (npu_byoc.runtime.cosim, `npu-byoc cosim`).

Every NPU partition runs on the Verilog RTL under Verilator as the one stream production runs
(intermediate tensors resident in SRAM); every output that leaves the NPU must equal the
golden model bit for bit; against TVM's CPU build of each layer fed the golden model's inputs
(float QDQ arithmetic) a layer may differ by 1 LSB. Cycle counts, attributed to layers from the
RTL's per-command trace, are the analytic model's, layer by layer;
the report's files (JSON, CSV, PNG) and the command line are checked as a user sees them.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from npu_byoc.cli import main
from npu_byoc.codegen.lower import lower_module
from npu_byoc.ops.lut import golden_lut
from npu_byoc.ops.npu_ops import Lut
from npu_byoc.ops.composites import npu_functions
from npu_byoc.runtime import cosim as C
from npu_byoc.runtime import cosim_report as R
from npu_byoc.runtime import golden
from npu_byoc.runtime.compare import _layer_flat

from .conftest import model_path, reference

OP_CLASSES_OF_TINY = {"conv", "pointwise", "depthwise", "fc", "pool", "mean", "add", "lut"}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_reports: dict = {}


def run_cosim(model: str, sample: int = 0) -> R.CosimReport:
    if (model, sample) not in _reports:
        ref = reference(model)
        _reports[(model, sample)] = C.cosim(model_path(model), ref["inputs"][sample], ref["outputs"][sample])
    return _reports[(model, sample)]


def check_layers(report: R.CosimReport) -> None:
    assert report.layers
    for r in report.layers:
        assert r.max_diff_golden == (None if r.resident else 0), r
        assert r.max_diff_tvm is not None and r.max_diff_tvm <= 1, r
        assert r.cycles == r.predicted_cycles, r  # the analytic model is the RTL's count
        assert r.cycles == r.compute_cycles + r.dma_cycles + r.control_cycles
        assert r.kicks >= 1 and r.compute_cycles > 0
        if r.op in R.MAC_CLASSES:
            assert r.utilization == pytest.approx(r.macs / (256 * r.compute_cycles))
            assert r.utilization_overall == pytest.approx(r.macs / (256 * r.cycles))
        else:
            assert r.macs == 0 and r.utilization is None
    s = report.summary
    assert s["max_diff_golden"] == 0 and s["max_diff_tvm"] <= 1 and s["cycle_model_exact"]
    assert s["cycles"] == sum(r.cycles for r in report.layers)
    assert 1 <= s["layers_compared_golden"] == sum(not r.resident for r in report.layers)


@pytest.mark.parametrize("model", ["tiny_cnn_int8.tflite", "tiny_cnn_qdq.onnx"])
def test_tiny_cnns_cosimulate_bit_exact(model):
    report = run_cosim(model)
    check_layers(report)
    # TFLite's final SOFTMAX runs on the NPU; ONNX's stays on the CPU (onnxruntime's float Softmax)
    # ONNX's NCHW image is laid out NHWC on chip first (the identity CONV of ops.interleave)
    assert {r.op for r in report.layers} == OP_CLASSES_OF_TINY | ({"softmax"} if model.endswith(".tflite")
                                                                  else {"interleave"})  # fmt: skip
    # TFLite: TANH and the two int8 -> int8 QUANTIZEs before CONCATENATION run as LUTs too
    assert len(report.layers) == {"tiny_cnn_int8.tflite": 17, "tiny_cnn_qdq.onnx": 18}[model]  # onnx: 3 concat copies
    if model.endswith(".onnx"):  # the interleave's value is the image itself: TVM's identity agrees exactly
        assert report.layers[0].op == "interleave" and report.layers[0].max_diff_tvm == 0
    # the model's output on the NPU path equals the reference runtime's (LiteRT / onnxruntime)
    # to within its quantization step
    (out,) = report.summary["outputs"]
    assert out["max_diff"] <= (0 if out["integer"] else 0.05)


def test_per_layer_numbers_are_the_layers(partitioned):
    """Independent numbers for the tiny CNN's first conv: its MACs from its shape, its compute
    cycles from docs/cosim.md's formula worked out here (fetch + 14 + table scan + drain +
    blocks of max(K, R) + the last K)."""
    report = run_cosim("tiny_cnn_int8.tflite")
    first = report.layers[0]
    plan = next(iter(lower_module(partitioned("tiny_cnn_int8.tflite")).values()))
    op = plan.ops[0]
    (oh, ow, oc), (kh, kw), ic = op.ofm.shape, op.kernel, op.ifm.shape[2]
    assert first.op == "conv" and first.macs == oh * ow * oc * kh * kw * ic
    k = kh * kw * ic
    blocks = -(-oh * ow // 32) * -(-oc // 8)  # 32 pixels per block, no folding at this size
    assert oh * ow % 32 == 0
    assert first.compute_cycles == 1 + 14 + -(-oc // 32) + 8 + (blocks - 1) * max(k, 8) + k


def test_layers_split_the_whole_partition_stream(partitioned):
    """Each partition runs as one stream: its layers' cycles add up to that stream's cycles
    (the analytic model of schedule_partition's steps), and the layers whose outputs stay in
    SRAM are the schedule's resident ones."""
    from npu_byoc.codegen.schedule import schedule_partition
    from npu_byoc.arch import cycles

    report = run_cosim("tiny_cnn_int8.tflite")
    for name, plan in lower_module(partitioned("tiny_cnn_int8.tflite")).items():
        schedule = schedule_partition(plan)
        rows = [r for r in report.layers if r.partition == name]
        assert [r.name for r in rows] == [op.name for op in plan.ops]
        assert sum(r.cycles for r in rows) == cycles.stream_cycles(schedule.steps)
        assert {r.name for r in rows if r.resident} == set(schedule.resident)
    assert any(r.resident for r in report.layers)


def test_tvm_reference_is_tvms_own_layer_output(imported):
    """The per-layer TVM reference equals TVM's whole-model CPU build where both see the same
    input: the first layer (fed the model input) gives the same LSB difference as
    ``npu-byoc compare`` reports for it."""
    from npu_byoc.runtime.compare import compare

    ref = reference("tiny_cnn_int8.tflite")
    report = run_cosim("tiny_cnn_int8.tflite")
    cmp = compare(imported("tiny_cnn_int8.tflite"), ref["inputs"][0])
    assert cmp.layers[0].layer == report.layers[0].name
    assert cmp.layers[0].golden_vs_cpu.max_lsb == report.layers[0].max_diff_tvm


def test_sigmoid_table_agrees_with_tvm_on_every_input(partitioned):
    """All 256 int8 inputs through the sigmoid layer: the NPU's table against TVM's float
    dequantize -> sigmoid -> quantize (round half to even). They agree within 1 LSB."""
    part = partitioned("tiny_cnn_int8.tflite")
    plans = lower_module(part)
    calls = {name: C._layer_calls(f) for name, f in npu_functions(part).items()}
    (name, k, op) = next((n, k, op) for n, p in plans.items() for k, op in enumerate(p.ops) if isinstance(op, Lut))
    layer_ref = C._LayerReference({name: calls[name]})
    shape = layer_ref.params[layer_ref.keys.index((name, k))][0][0]
    x = np.resize(np.arange(-128, 128, dtype=np.int8), shape)
    cpu = layer_ref.run({(name, k): [x]})[(name, k)].astype(np.int64)
    npu = golden_lut(op, x).astype(np.int64)
    assert np.abs(npu - cpu).max() <= 1


@pytest.mark.slow
def test_layer_reference_build_is_cached(partitioned, tmp_path, monkeypatch):
    """TVM's per-layer reference is compiled once per model: a second co-simulation loads the
    sealed library from the cache (no TVM compile) and computes the same; a damaged entry is
    rebuilt, not loaded."""
    monkeypatch.setenv("NPU_BYOC_CACHE", str(tmp_path))
    part = partitioned("tiny_cnn_int8.tflite")
    calls = {name: C._layer_calls(f) for name, f in npu_functions(part).items()}
    first = C._LayerReference(calls)
    (entry,) = tmp_path.glob("cosim_layers-*.so")
    rng = np.random.default_rng(0)
    inputs = {key: [rng.integers(-128, 128, size=shape).astype(dtype) for shape, dtype in params]
              for key, params in zip(first.keys, first.params)}  # fmt: skip
    want = first.run(inputs)
    compile_ = C.tvm.compile

    def no_compile(*args, **kwargs):
        raise AssertionError("a cached reference was compiled again")

    monkeypatch.setattr(C.tvm, "compile", no_compile)
    got = C._LayerReference(calls).run(inputs)
    assert set(got) == set(want) and all(np.array_equal(got[k], want[k]) for k in want)
    damaged = tmp_path / "damaged"
    damaged.write_bytes(entry.read_bytes()[:100])
    damaged.replace(entry)  # truncated (a new file: the loaded one stays mapped): the seal no longer matches
    monkeypatch.setattr(C.tvm, "compile", compile_)
    got = C._LayerReference(calls).run(inputs)
    assert all(np.array_equal(got[k], want[k]) for k in want)
    assert entry.stat().st_size > 100


def test_json_csv_and_plot(tmp_path, capsys):
    ref = reference("tiny_cnn_int8.tflite")
    x, y = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(x, ref["inputs"][1][0])
    np.save(y, ref["outputs"][1][0])
    rep, table, png = tmp_path / "r.json", tmp_path / "l.csv", tmp_path / "u.png"
    code = main(["cosim", str(model_path("tiny_cnn_int8.tflite")), "--input", str(x), "--reference", str(y),
                 "--report", str(rep), "--csv", str(table), "--plot", str(png)])  # fmt: skip
    assert code == 0
    captured = capsys.readouterr()
    assert "standard conv" in captured.out and "depthwise" in captured.out
    assert "cosim [" in captured.err and "17/17 layers" in captured.err  # the progress bar
    data = json.loads(rep.read_text())
    assert len(data["layers"]) == 17
    for layer in data["layers"]:
        for key in ("name", "op", "macs", "cycles", "utilization", "max_diff_golden", "max_diff_tvm"):
            assert key in layer
        assert layer["max_diff_golden"] == (None if layer["resident"] else 0)
    summary = data["summary"]
    for key in ("cycles", "utilization", "utilization_overall", "per_class", "simulated_cycles_per_second",
                "wall_seconds", "outputs", "max_diff_golden", "max_diff_tvm"):  # fmt: skip
        assert key in summary
    assert set(summary["per_class"]) == OP_CLASSES_OF_TINY | {"softmax"}
    assert summary["outputs"][0]["max_diff"] == 0
    rows = list(csv.DictReader(io.StringIO(table.read_text())))
    assert [r["name"] for r in rows] == [layer["name"] for layer in data["layers"]]
    assert int(rows[0]["cycles"]) == data["layers"][0]["cycles"]
    assert png.read_bytes()[:8] == PNG_SIGNATURE and png.stat().st_size > 5000


def test_a_golden_mismatch_fails_loudly(tmp_path, monkeypatch, capsys):
    """A layer whose RTL output differs from the golden model's (here: a golden model made
    wrong on purpose) ends the run with CosimMismatch — exit code 1, naming the layer — once
    the report is complete; the report is written."""
    real = golden.KERNELS[Lut]
    # wrong on one LUT layer whose output leaves the NPU (the sigmoid branch's output
    # requantize; the sigmoid itself stays in SRAM, and so do the tanh's)
    bad_layer = "tiny_cnn_1/conv_sigmoid_1/Sigmoid1"
    monkeypatch.setitem(golden.KERNELS, Lut, lambda op, x: real(op, x) ^ np.int8(op.name == bad_layer))
    ref = reference("tiny_cnn_int8.tflite")
    x, rep = tmp_path / "x.npy", tmp_path / "r.json"
    np.save(x, ref["inputs"][0][0])
    assert main(["cosim", str(model_path("tiny_cnn_int8.tflite")), "--input", str(x), "--report", str(rep),
                 "--no-progress"]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "differs from the golden model on" in err and bad_layer in err
    # the wrong layer first; the RTL's (right) value then flows on through the concatenation
    # and may differ from the golden chain's downstream too
    bad = [layer for layer in json.loads(rep.read_text())["layers"] if layer["max_diff_golden"]]
    assert bad[0]["name"] == bad_layer and bad[0]["op"] == "lut" and bad[0]["max_diff_golden"] == 1


def test_progress_bar_off_a_terminal():
    out = io.StringIO()
    bar = C.Progress(20, stream=out)
    for k in range(21):
        bar.update(k, f"layer {k}")
    bar.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 11 and lines[-1].startswith("cosim [" + "#" * 28 + "]") and "20/20" in lines[-1]


@pytest.mark.slow
def test_mobilenet_cosimulates_within_targets():
    """MobileNetV2 (64 NPU layers) end to end on the RTL: bit-exact with the golden model,
    within 1 LSB of TVM per layer, and issue 5's utilization targets: >= 90% on standard and
    pointwise convolutions and >= 50% on depthwise while the array computes (cycle counts,
    not timings: simulation speed and wall time are bench/cosim.py's figures)."""
    report = run_cosim("mobilenet_v2_int8.tflite")
    check_layers(report)
    s = report.summary
    assert len(report.layers) == 65
    assert s["per_class"]["conv"]["utilization"] >= 0.9
    assert s["per_class"]["pointwise"]["utilization"] >= 0.9
    assert s["per_class"]["depthwise"]["utilization"] >= 0.5
    assert s["outputs"][0]["max_diff"] <= 1


def test_npu_maps_in_the_model_layout():
    """(Before, cosim and compare read such a sequence row-major: the keyword transformer showed
    141 LSB at an ADD and the ViT 158 at a SQUARED_DIFFERENCE, the NPU exact.) The NPU's H x W x C view of a tensor back in the model's shape, worked out by hand: an
    NCHW sequence [1, C=2, L=3] is stored as one row of 3 pixels of 2 channels."""
    stored = np.arange(6).reshape(1, 3, 2)  # pixel l, channel c at 2 * l + c
    assert C._to_model_shape(stored, (1, 2, 3), nchw=True).tolist() == [[[0, 2, 4], [1, 3, 5]]]
    assert C._to_model_shape(stored, (1, 3, 2), nchw=False).tolist() == [[[0, 1], [2, 3], [4, 5]]]
    image = np.arange(12).reshape(2, 3, 2)  # NCHW [1, 2, 2, 3]
    assert C._to_model_shape(image, (1, 2, 2, 3), nchw=True)[0, 1].tolist() == [[1, 3, 5], [7, 9, 11]]
    assert C._to_model_shape(stored, (1, 6), nchw=True).tolist() == [[0, 1, 2, 3, 4, 5]]  # flat: bytes as stored
    # compare's reading of TVM's [1, C, L] tensor is the inverse: back to the stored order
    assert _layer_flat(np.array([[[0, 2, 4], [1, 3, 5]]]), nchw=True).tolist() == list(range(6))


@pytest.mark.slow
def test_the_keyword_transformer_cosimulates_layer_by_layer(partitioned):
    """The keyword transformer whole on the RTL (LayerNorm, attention, the class token): every
    layer within 1 LSB of TVM's CPU build of that layer fed the same inputs, bit-exact with the
    golden model, the cycle model exact, and the output LiteRT's exactly. (Its position-embedding
    partition once held the tokens as an NCHW sequence, and the report read it row-major: 141 LSB
    at the ADD, 197 at the MEAN fed that misread; test_npu_maps_in_the_model_layout keeps the
    mapping, which no fixture partition exercises since the MEANs read the partition's layout.)"""
    name = "kws_transformer_int8.tflite"
    part = partitioned(name)
    ref = reference(name)
    report = C.cosim(part, ref["inputs"][0], ref["outputs"][0])
    check_layers(report)
    assert report.summary["outputs"][0]["max_diff"] == 0  # test_transformer_fixtures' bound on LiteRT


@pytest.mark.parametrize("input_hw, window", [((23, 23), (23, 23)), ((26, 5), (25, 5))], ids=["529 taps", "DS-CNN 25x5"])
def test_one_wide_average_window_on_the_rtl(input_hw, window):
    """A pool window of more than 511 taps (the vector unit's tap counter is sized from
    max_pool_window) and a global pool written with stride = window, as DS-CNN has (the
    stride of a single window is normalised so it meets the stride limit): the RTL equals the
    hand-derived TFLite average (sum / n rounded half away from zero) and the cycle model."""
    from .relax_builders import cast_avg_pool

    mod = cast_avg_pool(input_hw=input_hw, channels=8, pool_size=window, strides=window)
    x = np.random.default_rng(5).integers(-128, 128, (1, *input_hw, 8)).astype(np.int8)
    h, w = window
    s = x[:, :h, :w, :].astype(np.int64).sum(axis=(1, 2), keepdims=True)
    want = (np.sign(s) * ((np.abs(s) + h * w // 2) // (h * w))).astype(np.int8)
    report = C.cosim(mod, [x], [want])
    (layer,) = report.layers
    assert (layer.op, layer.max_diff_golden, layer.cycles) == ("pool", 0, layer.predicted_cycles), layer
    assert report.summary["outputs"][0]["max_diff"] == 0


def test_memory_report():
    """The memory report (docs/memory.md): every constant is read from the weights' memory at
    least once (the blob's alignment padding between constants is never read), all traffic at
    least the roofline's minimum less that padding, SRAM within the configuration, time at the
    default 500 MHz core clock."""
    from npu_byoc.codegen.tiling import ALIGN

    report = run_cosim("tiny_cnn_int8.tflite")
    s = report.summary
    padding = 3 * ALIGN * len(report.layers)  # at most a weight, a table and a LUT per layer, each aligned
    assert s["const_mem_read_bytes"] == sum(r.const_mem_read_bytes for r in report.layers) > 0
    assert s["const_mem_read_bytes"] >= s["minimum_const_bytes"] - padding
    traffic = s["const_mem_read_bytes"] + s["fm_mem_read_bytes"] + s["fm_mem_write_bytes"]
    assert traffic >= s["minimum_external_bytes"] - padding > s["minimum_const_bytes"]
    assert all(0 < r.sram_bytes <= s["sram_peak_bytes"] for r in report.layers)
    assert s["sram_peak_bytes"] <= report.hw["sram_bytes"]
    assert s["milliseconds"] == pytest.approx(s["cycles"] / 500e3)
    assert s["inferences_per_second"] == pytest.approx(500e6 / s["cycles"])
    assert f"{s['milliseconds']:.3f} ms at 500 MHz" in report.to_text(layers=False)
