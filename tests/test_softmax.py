"""SOFTMAX on the NPU (opcode 0x43, npu_byoc.ops.softmax): TFLite's int8 reference kernel.

* the spec (npu_byoc.ops.softmax) against LiteRT's BUILTIN_REF on the recorded per-op vectors
  (tools/make_op_vectors.py: classifier widths 10 to 1000, an NHWC map, input scales 1/256 to 2);
* each vector as one SOFTMAX kick on the stream machine, the C model and the RTL: outputs equal
  LiteRT's, the RTL's cycles equal the cycle model's;
* any table (bit 31 set, entry 0 not exp(0)) and any rows: the three implementations agree, so
  a stream the compiler did not make is still defined;
* the kick's register checks on all three;
* models: SOFTMAX partitions with the rest of the model and its output equals LiteRT's; a beta
  other than 1 (TVM's own import drops it) is folded into the table; ONNX's Softmax stays on the
  CPU with a reason.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import npu_byoc
from npu_byoc.ops import softmax_kernel as S
from npu_byoc.arch.encoder import Dma, Kick, encode
from npu_byoc.arch.config import DEFAULT_CONFIG
from npu_byoc.partition.pipeline import partition_log
from npu_byoc.arch.isa import KICK_REGS, SOFTMAX_MAX_CHANNELS, SOFTMAX_TABLE_BYTES, Opcode, Reg, Status
from npu_byoc.arch import cycles
from npu_byoc.runtime import verilator as V
from npu_byoc.runtime.functional import FunctionalNpu
from npu_byoc.runtime.machine import Machine

from . import relax_builders as rb
from .conftest import model_path, reference

HERE = Path(__file__).parent
VECTORS = np.load(HERE / "fixtures" / "ops" / "softmax.npz")
CASES = sorted({k.split(".")[0] for k in VECTORS.files if k != "meta"})
IO_IN, IO_OUT = 2, 3
HW = DEFAULT_CONFIG


@pytest.fixture(scope="module")
def rtl() -> V.VerilatorNpu:
    return V.VerilatorNpu(HW)


def _case(c: str):
    x, want = VECTORS[c + ".input"], VECTORS[c + ".output"]
    table = S.exp_table(float(VECTORS[c + ".input_scale"]), float(VECTORS[c + ".beta"]))
    return x, want, table


def softmax_stream(x: np.ndarray, table: np.ndarray):
    """One SOFTMAX kick over rows of ``x`` (its last axis the channels): the table at SRAM 0, the
    input after it, the output after that; (steps, regions, kick registers)."""
    rows, c = int(np.prod(x.shape[:-1])), x.shape[-1]
    h = next(d for d in (4, 3, 2, 1) if rows % d == 0)  # a few pixels as H, the rest as W
    ifm = SOFTMAX_TABLE_BYTES
    ofm = ifm + -(-x.size // 16) * 16
    blob = np.concatenate([np.asarray(table, "<i4").view(np.uint8), x.astype(np.int8).view(np.uint8).ravel()])
    regs = {Reg.IFM_ADDR: ifm, Reg.OFM_ADDR: ofm, Reg.OFM_H: h, Reg.OFM_W: rows // h, Reg.OFM_C: c, Reg.LUT_ADDR: 0}
    steps = [Dma(Opcode.DMA_IN, IO_IN, 0, 0, blob.size), Kick.make(Opcode.SOFTMAX, regs),
             Dma(Opcode.DMA_OUT, IO_OUT, 0, ofm, x.size)]  # fmt: skip
    regions = {IO_IN: blob.copy(), IO_OUT: np.zeros(x.size, np.uint8)}
    return steps, regions, regs


def run_three(rtl, x, table):
    """The kick on the machine, the C model and the RTL: their status and output must agree;
    (the RTL's run status, the output, the kick's registers)."""
    steps, regions, regs = softmax_stream(x, table)
    words = encode(steps)
    results = {}
    for name, npu in (("machine", Machine(HW)), ("c model", FunctionalNpu(HW)), ("rtl", rtl)):
        mine = {r: b.copy() for r, b in regions.items()}
        res = npu.run(words, mine)
        results[name] = (res, mine[IO_OUT].view(np.int8).reshape(x.shape))
    (m, want), (f, got_f), (r, got_r) = results.values()
    assert m.status == f.status == r.status, results
    assert f.cycles == r.cycles == cycles.stream_cycles(steps, HW)
    np.testing.assert_array_equal(got_f, want, err_msg="C model vs machine")
    np.testing.assert_array_equal(got_r, want, err_msg="RTL vs machine")
    return r, want, regs


# =============================================================================================
# the spec


def test_spec_equals_litert_reference():
    assert len(CASES) >= 40
    for c in CASES:
        x, want, table = _case(c)
        got = S.run(x.reshape(-1, x.shape[-1]), table).reshape(want.shape)
        np.testing.assert_array_equal(got, want, err_msg=c)


def test_output_quantization_is_tflites():
    for c in CASES:
        assert float(VECTORS[c + ".output_scale"]) == S.OUTPUT_SCALE
        assert int(VECTORS[c + ".output_zero_point"]) == S.OUTPUT_ZERO_POINT


def test_table_entries_by_hand():
    """Entry 0 is exp(0) = 0x7FFFFFFF; at input scale 1/16 (beta 1) entry 16 is exp(-1) in Q0.31,
    2^31 / e = 790015084, within gemmlowp's polynomial error (1e-6). At scale 1/2 the input
    multiplier is 2^30 with left shift 26, so TFLite's input radius is floor(31 · 2^26 / 2^26) =
    31: entries of differences below −31 are 0."""
    t = S.exp_table(1 / 16)
    assert t[0] == 2**31 - 1
    assert abs(int(t[16]) - 790015084) <= 2**31 * 1e-6
    t = S.exp_table(0.5)
    assert S.input_beta_params(0.5) == (2**30, 26, -31)
    assert t[31] > 0 and (t[32:] == 0).all()


# =============================================================================================
# one kick, three implementations


def test_kick_equals_litert_on_machine_c_model_and_rtl(rtl):
    for c in CASES:
        x, want, table = _case(c)
        res, got, regs = run_three(rtl, x.reshape(-1, x.shape[-1]), table)
        assert res.status == Status.OK, (c, res)
        np.testing.assert_array_equal(got.reshape(want.shape), want, err_msg=c)


def test_cycle_formula_by_hand():
    """8 setup cycles, the 1024-byte table at 32 bytes per cycle, then per row three passes of
    ceil(C / 32) cycles and the 4 reciprocal steps: 10 classes 8 + 32 + (3 + 4) = 47; 1000
    classes 8 + 32 + (3 * 32 + 4) = 140; 6 pixels of 33 channels 8 + 32 + 6 * (6 + 4) = 100."""
    def kick(h, w, c):
        return cycles.kick_cycles(Opcode.SOFTMAX, {Reg.OFM_H: h, Reg.OFM_W: w, Reg.OFM_C: c}, HW)

    assert (kick(1, 1, 10), kick(1, 1, 1000), kick(2, 3, 33)) == (47, 140, 100)


def test_any_table_and_rows_agree_on_all_three(rtl):
    """Tables the compiler never makes (random words, bit 31 set, entry 0 small) and rows from
    1 to 130 channels: the datapath reads entry 0 as exp(0) and drops bit 31, so every
    implementation stays in gemmlowp's domain and they agree."""
    rng = np.random.default_rng(430)
    for case in range(12):
        c = int(rng.choice([1, 2, 31, 32, 33, 64, 100, 130]))
        rows = int(rng.integers(1, 7))
        x = rng.integers(-128, 128, (rows, c)).astype(np.int8)
        if case % 3 == 0:
            table = rng.integers(-(2**31), 2**31, 256, dtype=np.int64).astype(np.int32)
        elif case % 3 == 1:
            table = S.exp_table(float(rng.choice([1 / 256, 0.05, 0.5, 2.0])))
        else:
            table = np.zeros(256, np.int32)  # only the max contributes: 0 or 127 after the -128
        res, got, _ = run_three(rtl, x, table)
        assert res.status == Status.OK
        np.testing.assert_array_equal(got, S.run(x, table), err_msg=f"case {case}")
    zeros = S.run(np.array([[5, 5, -3]], np.int8), np.zeros(256, np.int32))
    assert zeros.tolist() == [[0, 0, -128]]  # two ties share the whole mass: 128/256 each → 0


@pytest.mark.parametrize(
    "change, status",
    [
        ({Reg.OFM_C: 0}, Status.INVALID_PARAMETER),
        ({Reg.OFM_C: SOFTMAX_MAX_CHANNELS + 1, Reg.OFM_H: 1, Reg.OFM_W: 1}, Status.INVALID_PARAMETER),
        ({Reg.LUT_ADDR: 2}, Status.INVALID_PARAMETER),
        ({Reg.LUT_ADDR: HW.sram_bytes - 1020}, Status.ADDRESS_OUT_OF_RANGE),
        ({Reg.OFM_ADDR: 0}, Status.INVALID_PARAMETER),  # the output overlaps the table
    ],
)
def test_kick_checks_on_all_three(rtl, change, status):
    x = np.arange(-20, 20, dtype=np.int8).reshape(2, 20)
    steps, regions, regs = softmax_stream(x, S.exp_table(0.1))
    steps[1] = Kick.make(Opcode.SOFTMAX, {r: change.get(r, regs.get(r, 0)) for r in KICK_REGS[Opcode.SOFTMAX]})
    words = encode(steps)
    got = [npu.run(words, {r: b.copy() for r, b in regions.items()}) for npu in (Machine(HW), FunctionalNpu(HW), rtl)]
    assert [(g.status, g.word_index) for g in got] == [(status, got[0].word_index)] * 3


# =============================================================================================
# models


def _cov(mod):
    return npu_byoc.coverage_report(npu_byoc.partition_for_npu(mod))


@pytest.mark.parametrize("name", ["tiny_cnn_int8.tflite", "op_softmax_beta_int8.tflite"])
@pytest.mark.parametrize("backend", ["golden", "functional"])
def test_models_end_on_the_npu_equal_to_litert(name, backend):
    """tiny_cnn ends with SOFTMAX over 10 classes; op_softmax_beta_int8 (tools/make_models.py)
    has two SOFTMAX over 16 channels per pixel with beta 0.6 patched into the file. Every
    operator runs on the NPU and every output equals LiteRT's reference kernels."""
    mod = npu_byoc.load_model(model_path(name))
    report = _cov(mod)
    assert report.summary["ops_offloaded"] == report.summary["ops_total"]
    conventions = {o.convention.split(",")[0] for o in report.ops if o.op == "SOFTMAX"}
    assert conventions == ({"qdq-beta"} if "beta" in name else {"qdq"})
    model = npu_byoc.build(mod, backend)
    ref = reference(name)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        for got, want in zip(model.run(inputs), outputs):
            np.testing.assert_array_equal(got, want)


def test_beta_reaches_the_cpu_build_too():
    """TVM's own TFLite import drops SoftmaxOptions.beta; npu_byoc's scales the input by it, so
    the CPU build of op_softmax_beta_int8 is within 1 LSB of LiteRT too (with beta dropped, the
    0.6-scaled distribution would be tens of LSB away)."""
    name = "op_softmax_beta_int8.tflite"
    cpu = npu_byoc.build(npu_byoc.load_model(model_path(name)), "cpu")
    ref = reference(name)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        for got, want in zip(cpu.run(inputs), outputs):
            assert np.abs(got.astype(int) - want.astype(int)).max() <= 1


@pytest.mark.parametrize(
    "kw, reason",
    [
        (dict(output_scale=0.01, output_zp=0), "TFLite's int8 softmax writes scale 1/256"),
        (dict(shape=(1, 4, 4, 8), axis=1), "softmax over axis 1 of a rank-4 tensor"),
        (dict(shape=(1, 4096)), "softmax over 4096 elements: at most 4095"),
        (dict(input_scale=1e-9), "below 2^-26"),
    ],
)
def test_what_the_npu_refuses_keeps_a_reason(kw, reason):
    (d,) = partition_log(npu_byoc.partition_for_npu(rb.qdq_softmax(**kw)))
    assert d.pattern == "npu.softmax" and not d.accepted
    assert d.reason.startswith("SOFTMAX: ") and reason in d.reason


def test_a_clamp_after_the_softmax_stays_on_the_cpu():
    """The NPU's SOFTMAX has no clamp: the match with the integer clip is refused, the softmax
    alone (up to its quantize) is offloaded, and the clip runs on the CPU."""
    log = partition_log(npu_byoc.partition_for_npu(rb.qdq_softmax(clip=(-100, 100))))
    assert [(d.convention, d.accepted) for d in log] == [("qdq+clip", False), ("qdq", True)]
    assert "a clamp [-100, 100] after the softmax" in log[0].reason


def test_hand_written_softmax_with_beta_is_offloaded_and_uses_it():
    """The Relax form with a beta multiply: the NPU's result equals the spec with that beta, and
    differs from beta 1's on a row with spread."""
    mod = rb.qdq_softmax(shape=(2, 12), beta=2.5)
    (d,) = partition_log(npu_byoc.partition_for_npu(mod))
    assert (d.pattern, d.convention, d.accepted) == ("npu.softmax", "qdq-beta", True)
    x = np.array([np.arange(-60, 60, 10), np.arange(12) - 6], np.int8)
    (got,) = npu_byoc.build(mod, "functional").run([x])
    np.testing.assert_array_equal(got, S.run(x.astype(np.int64) + 3, S.exp_table(0.125, 2.5)))
    assert (got != S.run(x.astype(np.int64) + 3, S.exp_table(0.125, 1.0))).any()


def test_softmax_in_an_nchw_partition_runs_over_the_last_axis():
    """Found by `npu-byoc fuzz` (ops mode, case seed 741348339): in an NCHW partition (a MEAN
    of a [1, 89, 4, 2] tensor, ADD, sigmoid) a softmax over the last axis of [1, 89, 1, 1] is
    over W, while the NPU's channels there are axis 1. It used to run over the 89 channels
    (253 LSB off), then stayed on the CPU; now the lowering gives the NPU's SOFTMAX a view whose
    channels are the model's last axis (lower.last_axis_as_channels) and it runs on the NPU,
    within 1 LSB of TVM's CPU build, golden = C model = RTL."""
    from npu_byoc.tools.fuzz import builder
    from npu_byoc.tools.fuzz import generators as gen
    from npu_byoc.tools.fuzz.runner import ALL_BACKENDS, Runner

    # the op kinds the fuzzer had when it found the case (a new kind changes every seed's draws)
    kinds = ("conv2d", "depthwise", "fc", "avg_pool", "max_pool", "mean", "sigmoid", "add", "softmax")
    spec = gen.random_spec(741348339, kinds)
    assert spec["layout"] == "NCHW" and [op["kind"] for op in spec["ops"]] == ["mean", "add", "sigmoid", "softmax"]
    log = partition_log(npu_byoc.partition_for_npu(builder.build(spec).mod))
    assert [(d.pattern, d.accepted) for d in log][-1] == ("npu.softmax", True)
    out = Runner(ALL_BACKENDS).run(spec)
    assert out.mismatches == [] and out.placement == "npu"


@pytest.mark.parametrize("heads, tokens", [(1, 5), (2, 64), (3, 197), (8, 197)])
def test_attention_scores_of_every_mha_shape_are_one_npu_softmax(heads, tokens):
    """A Keras MultiHeadAttention's scores [1, heads, tokens, tokens] softmaxed over the last axis
    (heads 1..8, up to ViT-Tiny's 197 tokens, 3 heads): one NPU SOFTMAX, tiled by rows of tokens
    within the SRAM (8 x 197 x 197 is 310 KB), no shape refused. ViT-Tiny's own shape runs on the
    stream machine equal to the spec (which equals LiteRT: test_spec_equals_litert_reference)."""
    from npu_byoc.codegen.lower import lower_module
    from npu_byoc.codegen.schedule import schedule_partition
    from npu_byoc.runtime import golden

    shape = (1, heads, tokens, tokens)
    part = npu_byoc.partition_for_npu(rb.qdq_softmax(shape=shape))
    assert [(d.pattern, d.accepted) for d in partition_log(part)] == [("npu.softmax", True)]
    (plan,) = lower_module(part).values()
    (op,) = plan.ops
    assert op.kind == "softmax" and op.ofm.shape == (heads, tokens, tokens)
    schedule = schedule_partition(plan, HW)
    if (heads, tokens) != (3, 197):
        return
    x = np.random.default_rng(heads).integers(-128, 128, shape, dtype=np.int8)
    regions, statuses = golden.run_stream(Machine(HW), plan, schedule.words(), schedule.constants, [x])
    assert all(s.ok for s in statuses), statuses
    want = S.run(x.reshape(-1, tokens).astype(np.int64) + 3, S.exp_table(0.125, 1.0)).reshape(shape)
    np.testing.assert_array_equal(golden.read_outputs(plan, regions)[0], want)
