"""The differential fuzzer (npu_byoc.tools.fuzz, docs/fuzz.md): a seed-fixed sample of each mode must
find nothing, the fuzzer must find a planted bug and write a replayable reproducer, and the
cases it found stay fixed (regressions)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from npu_byoc.arch import numerics
from npu_byoc.tools.fuzz import builder, campaign, generators, reducer
from npu_byoc.tools.fuzz.command import cmd_fuzz
from npu_byoc.tools.fuzz.files import judge, run_files
from npu_byoc.tools.fuzz.runner import ALL_BACKENDS, Runner

# Violations of the one-clean-line rule that issue 10 lists as open and another branch fixes:
# counted and listed by the fuzzer under their own name, not hidden. Empty this set once fixed.
KNOWN_OPEN_FILE_VIOLATIONS = {"tvm warning after the error"}


@pytest.fixture(scope="module")
def runner():
    return Runner(ALL_BACKENDS)


def _argv(**kw):
    import argparse

    base = dict(count=0, seed=0, mode="ops", backends=",".join(ALL_BACKENDS), out=None, no_reduce=False,
                fixtures=None, timeout=120.0, replay=None)  # fmt: skip
    base.update(kw)
    return argparse.Namespace(**base)


# ---------------------------------------------------------------------------------------------
# Seed-fixed samples (CI)


@pytest.mark.slow
def test_ops_sample_finds_no_mismatch(runner, tmp_path):
    tally = campaign.run_campaign(30, 10, ALL_BACKENDS, tmp_path, reduce=False, progress=None, runner=runner)
    assert tally.cases == 30
    assert sum(c["npu"] for c in tally.per_op.values()) > 20  # most ops really ran on the NPU
    assert not tally.failures, tally.to_text(10, ALL_BACKENDS)
    assert all(n == 0 for n in tally.mismatches.values())


@pytest.mark.slow
def test_files_sample_keeps_the_one_clean_line_rule(tmp_path):
    tally = run_files(30, 3, tmp_path, progress=None)
    assert tally.cases == 30
    assert tally.outcomes["clean error"] > 0  # the mutations do break models
    hard = [f for f in tally.failures if not any(f.startswith(k) for k in KNOWN_OPEN_FILE_VIOLATIONS)]
    assert not hard, tally.to_text(3)


# ---------------------------------------------------------------------------------------------
# The fuzzer detects a planted bug


@pytest.mark.slow
def test_planted_requantize_bug_is_found_shrunk_and_replayable(monkeypatch, tmp_path, runner):
    real = numerics.requantize

    def off_by_one(*args, **kw):  # the golden model's requantize, 1 LSB high where it can be
        out = real(*args, **kw).astype(np.int16) + 1
        return np.minimum(out, 127).astype(np.int8)

    monkeypatch.setattr(numerics, "requantize", off_by_one)
    tally = campaign.run_campaign(4, 5, ALL_BACKENDS, tmp_path, reduce=True, progress=None, runner=runner,
                                  kinds=("conv2d", "fc"), reduce_tries=6)  # fmt: skip
    assert tally.failures, "the planted bug went unnoticed"
    assert tally.mismatches["golden-functional"] > 0 and tally.mismatches["golden-verilator"] > 0
    saved = sorted(tmp_path.glob("case-*/spec.json"))
    assert saved, "no reproducer written"
    case = saved[0].parent
    for name in ("model.json", "model.py", "inputs.npz", "README.txt"):
        assert (case / name).is_file()
    assert f"npu-byoc fuzz --replay {case}" in (case / "README.txt").read_text()
    assert cmd_fuzz(_argv(replay=str(case))) == 1  # still failing while the bug is there
    monkeypatch.setattr(numerics, "requantize", real)
    assert cmd_fuzz(_argv(replay=str(case))) == 0  # and passing once it is gone


def test_shrink_reduces_shapes():
    spec = {"seed": 1, "layout": "NHWC", "input": {"shape": [1, 12, 10, 6], "scale": 0.5, "zp": 0}, "ops": [
        {"kind": "max_pool", "convention": "integer", "pool": [3, 3], "strides": [1, 1], "padding": [0, 0, 0, 0],
         "ceil_mode": False, "count_include_pad": False, "int_clip": {"kind": "none"}}]}  # fmt: skip
    small = reducer.shrink(spec, lambda s: s["input"]["shape"][3] >= 2)  # "fails" while C >= 2
    assert small["input"]["shape"] == [1, 1, 1, 2]  # the pool shrinks to 1x1, then the map
    assert small["ops"][0]["pool"] == [1, 1]


def test_shrink_puts_configuration_fields_back_to_their_defaults():
    spec = {"seed": 1, "layout": "NHWC", "input": {"shape": [1, 2, 2, 2], "scale": 0.5, "zp": 0}, "ops": [
        {"kind": "max_pool", "convention": "integer", "pool": [1, 1], "strides": [1, 1], "padding": [0, 0, 0, 0],
         "ceil_mode": False, "count_include_pad": False, "int_clip": {"kind": "none"}}],
        "hw": {"array_rows": 3, "max_kernel": 1, "sram_bytes": 5000}}  # fmt: skip
    small = reducer.shrink(spec, lambda s: s.get("hw", {}).get("max_kernel") == 1)
    assert small["hw"] == {"max_kernel": 1}  # only the field the failure needs is left


# ---------------------------------------------------------------------------------------------
# Bugs the fuzzer found (regressions): each case passes, the op on the NPU or refused with a reason


def _mean_shift_38():
    # s_in / s_out = 1.9e11: requantize shift 38. Was partitioned; the golden model then raised.
    return {"seed": 715150840, "layout": "NHWC", "input": {"shape": [1, 1, 1, 1], "scale": 7.596632953721662e29, "zp": 0},
            "input_mode": "extremes", "ops": [{"kind": "mean", "convention": "int32", "keepdims": True,
            "out_scale_ratio": 5.183319688100685e-12, "out_zp": -127, "clamp": {"kind": "none"}}]}  # fmt: skip


def _add_rescale_huge():
    # twice_max / (2^20 s_out) = 6.9e24: TFLite's ADD rejects it. Was partitioned; lowering then failed.
    return {"seed": 35, "layout": "NHWC", "input": {"shape": [1, 2, 2, 3], "scale": 0.5, "zp": 0}, "ops": [
        {"kind": "add", "b_scale": 0.25, "b_zp": 0, "out_scale": 1e-31, "out_zp": 0, "residual": False,
         "broadcast": False, "clamp": {"kind": "none"}}]}  # fmt: skip


@pytest.mark.parametrize("make, words", [(_mean_shift_38, "mean shift"), (_add_rescale_huge, "add rescaling")])
def test_found_bugs_stay_on_the_cpu_with_a_reason(runner, make, words):
    out = runner.run(make())
    assert out.ok, out.mismatches
    assert out.placement == "cpu"
    assert out.reasons and words in out.reasons[0]


def test_ceil_mode_pool_feeds_the_next_op(runner):
    """Found by the campaign (a fuzzer bug): the generator sized a ceil-mode pool's output without
    TVM's rule (the last window starts inside the input), so the next op's input was mis-shaped.
    Ceil-mode pools now run on the NPU (their extra windows are padding): both ops offloaded."""
    spec = {'seed': 1749881506,
            'layout': 'NHWC',
            'input': {'shape': [1, 15, 16, 7], 'scale': 5.951192447244567e+18, 'zp': -6},
            'input_mode': 'extremes',
            'ops': [{'kind': 'avg_pool',
                     'convention': 'qdq',
                     'pool': [2, 15],
                     'strides': [4, 1],
                     'padding': [0, 2, 0, 0],
                     'ceil_mode': True,
                     'count_include_pad': False,
                     'int_clip': {'kind': 'int_clip', 'lo': -29, 'hi': 121}},
                    {'kind': 'conv2d',
                     'convention': 'qdq',
                     'out_channels': 3,
                     'kernel': [4, 2],
                     'strides': [3, 3],
                     'padding': [2, 0, 0, 1],
                     'dilation': [1, 1],
                     'bias': True,
                     'bias_bound': 100,
                     'wseed': 454681777,
                     'clamp': {'kind': 'none'},
                     'weight_scales': [0.0006325265276245773, 0.0035374208819121122, 0.0017998309340327978],
                     'out_scale': 4.722654985374925e+16,
                     'out_zp': 45}]}  # fmt: skip
    out = runner.run(spec)
    assert out.ok, out.mismatches
    assert out.offloaded == [True, True]


@pytest.mark.parametrize("origin", ["tflite", "relax"])
def test_mean_left_shift_wrap_is_an_expected_class(runner, origin):
    """Found by the campaign: s_in / s_out = 1.3e7 over 224 elements gives MEAN a requantize
    left shift of 17; sum << 17 wraps int32 as in TFLite, TVM saturates: 255 LSB apart, counted
    under its own class (docs/fuzz.md), not as a mismatch, in a TFLite-origin case. A Relax
    module's reference is TVM's saturating build: the MEAN stays on the CPU with the reason."""
    spec = {'seed': 3831714385, 'origin': origin,
            'layout': 'NHWC',
            'input': {'shape': [1, 14, 16, 14], 'scale': 0.41957929730415344, 'zp': -127},
            'input_mode': 'uniform',
            'ops': [{'kind': 'mean',
                     'convention': 'qdq',
                     'keepdims': True,
                     'out_scale_ratio': 7.843152177053537e-08,
                     'out_zp': 2,
                     'clamp': {'kind': 'none'}}]}  # fmt: skip
    _assert_wrap_class_or_refusal(runner.run(spec), origin)


def _assert_wrap_class_or_refusal(out, origin):
    assert out.ok, out.mismatches
    if origin == "tflite":
        assert out.offloaded == [True]
        assert out.max_cpu_lsb > 1 and out.expected == ["TFLite requantize left shift wraps on overflow"]
    else:
        assert out.offloaded == [False] and not out.expected
        assert "requantize left shift" in out.reasons[0] and "saturates" in out.reasons[0]


@pytest.mark.parametrize("origin", ["tflite", "relax"])
def test_transpose_conv_left_shift_wrap_is_an_expected_class(runner, origin):
    """``npu-byoc fuzz --count 1 --seed 11004`` failed: a TRANSPOSE_CONV with output scale 1e-11
    (requantize shifts up to +22) wraps like a conv, but the wrap class named conv, depthwise
    and MEAN only. The class now asks the partition check's own worst case
    (kick_limits.left_shift_wrap, per transposed-conv phase)."""
    spec = generators.random_spec(campaign.case_seed(11004, 0))
    assert spec["ops"][0]["kind"] == "transpose_conv"
    _assert_wrap_class_or_refusal(runner.run({**spec, "origin": origin}), origin)


def test_tflite_origin_case_with_a_host_graph_runs(runner):
    """A TFLite-origin case carries its model's inputs (fuzz --count 20 --seed 11004 crashed:
    "the model takes 0 input(s)") when an op stays on the CPU and the model runs whole."""
    spec = {'seed': 19827201, 'layout': 'NHWC', 'origin': 'tflite',
            'input': {'shape': [1, 1, 1, 1], 'scale': 1.7545253038406372, 'zp': 0}, 'input_mode': 'uniform',
            'ops': [{'kind': 'avg_pool', 'convention': 'qdq', 'pool': [1, 1], 'strides': [1, 1],
                     'padding': [0, 0, 0, 1], 'ceil_mode': False, 'count_include_pad': True,
                     'int_clip': {'kind': 'none'}}]}  # fmt: skip
    out = runner.run(spec)
    assert out.ok, out.mismatches
    assert out.offloaded == [False]


def test_nchw_softmaxes_are_placed_alike_alone_and_in_the_model(runner):
    """``npu-byoc fuzz --count 300 --seed 990011`` failed 1 LSB "fused vs per-op" (case 233):
    softmax, softmax (beta), max pool, softmax over the last axis of NCHW tensors. Alone each
    softmax was its own NHWC-held partition and ran on the NPU; in the model it shared the max
    pool's NCHW partition, where lowering refused a softmax over W and the fallback sent all three
    to TVM's float softmax. Lowering now runs the NPU's SOFTMAX over a view whose channels are the
    model's last axis, so the model is one NPU partition equal to the ops one at a time."""
    from npu_byoc.ops.composites import npu_functions
    from npu_byoc.partition.pipeline import partition_for_npu, partition_log

    spec = generators.random_spec(campaign.case_seed(990011, 233))
    assert spec["layout"] == "NCHW"
    assert [o["kind"] for o in spec["ops"]] == ["softmax", "softmax", "max_pool", "softmax"]
    part = partition_for_npu(builder.build(spec).mod)
    assert all(d.accepted for d in partition_log(part)) and len(npu_functions(part)) == 1
    out = runner.run(spec)
    assert out.ok, out.mismatches
    assert out.placement == "npu" and out.offloaded == [True] * 4


@pytest.mark.parametrize("case_seed", [1995231039, 182194032])
def test_softmax_view_of_a_resident_tensor_is_staged(runner, case_seed):
    """``npu-byoc fuzz --count 2000 --seed 5``: golden != C model and RTL (66 and 99 LSB) where an
    NCHW partition's softmax read a tensor through its last-axis view while the tensor stayed
    resident in SRAM for its other reader (a residual add): the view read SCRATCH, which the
    resident tensor never reached. A tensor any op addresses through a view is staged now
    (schedule.scratch_live_ranges); golden, C model and RTL agree."""
    from npu_byoc.codegen.lower import lower_module
    from npu_byoc.codegen.schedule import scratch_live_ranges
    from npu_byoc.partition.pipeline import partition_for_npu

    spec = generators.random_spec(case_seed)
    assert spec["layout"] == "NCHW" and "softmax" in [o["kind"] for o in spec["ops"]]
    (plan,) = lower_module(partition_for_npu(builder.build(spec).mod)).values()
    views = {r.offset for op in plan.ops for r in (*op.inputs, op.ofm) if r.is_slice}
    assert views and not views & set(scratch_live_ranges(plan))
    out = runner.run(spec)
    assert out.ok, out.mismatches


def _refusals(mod):
    from npu_byoc.ops.composites import npu_functions
    from npu_byoc.partition.pipeline import partition_for_npu, partition_log

    part = partition_for_npu(mod)
    return bool(npu_functions(part)), [d.reason for d in partition_log(part) if not d.accepted]


def test_new_checks_on_hand_written_modules():
    """The fuzzer's two findings on the hand-written builders (independent of the fuzzer): the
    partition's dry run of the lowering keeps out-of-range scales on the CPU with the reason,
    ordinary ones still offload."""
    try:
        from . import relax_builders as rb
    except ImportError:  # pragma: no cover
        import relax_builders as rb

    offloaded, reasons = _refusals(rb.qdq_mean(input_scale=1e30, output_scale=1.0))
    assert not offloaded and any("mean shift" in r for r in reasons)
    offloaded, reasons = _refusals(rb.qdq_add(output_scale=1e-31))
    assert not offloaded and any("add rescaling out of range" in r for r in reasons)
    assert _refusals(rb.qdq_mean())[0] and _refusals(rb.qdq_add())[0]


# ---------------------------------------------------------------------------------------------
# Pieces


def test_specs_are_deterministic_and_json():
    a, b = generators.random_spec(123), generators.random_spec(123)
    assert a == b
    assert json.loads(json.dumps(a)) == a
    built = builder.build(copy.deepcopy(a))
    assert len(builder.random_inputs(a, built)) == len(built.mod["main"].params)


@pytest.mark.parametrize(
    "code, stderr, verdict",
    [
        (0, "", "ok"),
        (2, "npu-byoc: error: m.tflite: corrupt\n", "clean error"),
        (2, "npu-byoc: error: m.tflite: corrupt\n[12:00:00] /x/block_builder.cc:67: Warning: BlockBuilder destroyed\n",
         "tvm warning after the error"),
        (1, "Traceback (most recent call last):\n  ...\nValueError: x\n", "traceback"),
        (-11, "", "signal 11"),
        (None, "", "hang"),
        (2, "npu-byoc: error: a\nmore\n", "2 stderr lines"),
    ],
)
def test_judge(code, stderr, verdict):
    assert judge(code, stderr) == verdict


def test_cli_counts_last_and_exit_status(tmp_path, capsys):
    from npu_byoc.cli import main

    assert main(["fuzz", "--count", "3", "--seed", "1", "--backends", "golden,functional", "--out", str(tmp_path)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-3:]
    assert last[0].startswith("  cases: 3 ")
    assert "golden-functional 0" in last[1] and "cases/s" in last[2] and last[2].endswith("PASS")
    assert not (tmp_path / "summary.txt").exists()  # written every 25 cases only
    assert main(["fuzz", "--count", "1", "--backends", "golden,gpu"]) == 2
    assert "unknown backend(s) gpu" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# --random-hw: every case under a hardware configuration of its own


def test_random_hw_cases_pass_with_the_budget_of_their_stream(monkeypatch, tmp_path):
    """A few --random-hw cases pass on golden and the C model; the C model gets the stream's
    cycle budget (cycles.stream_budget for the case's configuration), not the fixed default."""
    from npu_byoc.arch import cycles
    from npu_byoc.arch.config import DEFAULT_CONFIG
    from npu_byoc.runtime.functional import FunctionalNpu

    budgets = []
    real_run = FunctionalNpu.run

    def run(self, words, regions, **kw):
        budgets.append((self.hw, kw.get("max_cycles")))
        return real_run(self, words, regions, **kw)

    monkeypatch.setattr(FunctionalNpu, "run", run)
    backends = ("golden", "functional")
    tally = campaign.run_campaign(40, 23, backends, tmp_path, reduce=False, progress=None, random_hw=True)
    assert tally.cases == 40 and tally.random_hw == 40
    assert not tally.failures, tally.to_text(23, backends)
    assert sum(c["npu"] for c in tally.per_op.values()) > 20
    assert sum(tally.refused.values()) > 0  # some ops refused by their configuration: counted, not failed
    assert "random hardware configurations: 40 cases" in tally.to_text(23, backends)
    assert budgets and all(b is not None and b >= cycles.DEFAULT_MAX_CYCLES for _, b in budgets)
    assert any(hw != DEFAULT_CONFIG for hw, _ in budgets)  # not the default configuration


def test_random_hw_is_drawn_from_the_case_seed_within_the_ranges():
    from npu_byoc.arch.config import DEFAULT_CONFIG, FIELD_RANGES, configure

    draws = [generators.random_hw(s) for s in range(300)]
    assert draws == [generators.random_hw(s) for s in range(300)]  # the seed reproduces it
    assert json.loads(json.dumps(draws)) == draws
    for hw in draws:
        configure(DEFAULT_CONFIG, **hw)  # every value inside its documented range
        assert hw.get("sram_bytes", 0) <= generators.RANDOM_HW_MAX_SRAM
        assert all(getattr(DEFAULT_CONFIG, k) != v for k, v in hw.items())  # only fields off the default
    varied = {k for hw in draws for k in hw}
    assert varied == {k for k, (lo, hi) in FIELD_RANGES.items() if lo < hi}  # every field is drawn
    assert any(hw.get("array_rows") == 1 for hw in draws) and any(hw.get("max_kernel", 11) < 3 for hw in draws)
    # the ops of a seed do not change with --random-hw: the configuration has a generator of its own
    tally_specs = []

    class Recorder(Runner):
        def run(self, spec, inputs=None):
            tally_specs.append(copy.deepcopy(spec))
            return super().run(spec, inputs)

    for random_hw in (False, True):
        campaign.run_campaign(3, 7, ("golden",), None, reduce=False, progress=None, runner=Recorder(("golden",)),
                              random_hw=random_hw)  # fmt: skip
    plain, drawn = tally_specs[:3], tally_specs[3:]
    assert [{k: v for k, v in s.items() if k != "hw"} for s in drawn] == plain
    assert [s["hw"] for s in drawn] == [generators.random_hw(s["seed"]) for s in plain]


def _conv3x3():
    return {"seed": 5, "layout": "NHWC", "input": {"shape": [1, 6, 6, 4], "scale": 0.5, "zp": 0}, "origin": "relax",
            "ops": [{"kind": "conv2d", "convention": "int32", "out_channels": 5, "kernel": [3, 3], "strides": [1, 1],
                     "padding": [1, 1, 1, 1], "dilation": [1, 1], "bias": True, "bias_bound": 100, "wseed": 9,
                     "clamp": {"kind": "none"}, "weight_scales": [0.01] * 5, "out_scale": 0.2, "out_zp": 0}]}  # fmt: skip


def test_random_hw_configuration_is_saved_and_replayed(tmp_path, capsys):
    """The configuration goes into spec.json and --replay runs under it: max_kernel=1 keeps the
    3x3 conv on the CPU with its reason (refused, not failed); the default runs it on the NPU."""
    spec = _conv3x3()
    assert Runner(("golden", "functional")).run(spec).placement == "npu"
    spec["hw"] = {"max_kernel": 1, "array_rows": 3, "sram_bytes": 4096}
    case = reducer.save(tmp_path / "case-5", spec, builder.random_inputs(spec, builder.build(spec)), "test")
    assert json.loads((case / "spec.json").read_text())["hw"] == spec["hw"]
    out = campaign.replay(case, ("golden", "functional"))
    assert out.ok and out.hw == spec["hw"] and out.placement == "cpu"
    assert "kernel" in out.reasons[0]
    tally = campaign.Tally()
    tally.add(out)
    assert not tally.failures and sum(tally.refused.values()) == 1 and tally.per_op["conv2d/int32"]["cpu"] == 1
    assert cmd_fuzz(_argv(replay=str(case), backends="golden,functional")) == 0
    assert "hardware {'max_kernel': 1" in capsys.readouterr().out
    spec["hw"] = {"max_kernel": 0}  # outside the range: one clean error, not a crash
    (case / "spec.json").write_text(json.dumps(spec))
    from npu_byoc.errors import NpuByocError

    with pytest.raises(NpuByocError, match="max_kernel=0"):
        cmd_fuzz(_argv(replay=str(case)))


def test_random_hw_small_array_and_sram_run_on_the_npu():
    """Accepted under a tiny configuration (1x1 array, 2 KiB SRAM, narrow DMA): it runs, tiled,
    and golden = C model exactly."""
    spec = _conv3x3()
    spec["hw"] = {"array_rows": 1, "array_cols": 1, "sram_bytes": 2048, "dma_bytes_per_cycle": 1, "dma_queue_depth": 1}
    out = Runner(("golden", "functional")).run(spec)
    assert out.ok, out.mismatches
    assert out.placement == "npu"
