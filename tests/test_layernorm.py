"""LAYERNORM: ONNX LayerNormalization (QDQ) on the NPU (npu_byoc.ops.layernorm, the kernel
npu_byoc.arch.numerics_layernorm, docs/numerics.md §8e).

* the kernel against the float operator (numpy in double: onnxruntime's LayerNormalization
  formula, then QuantizeLinear's round-half-even and saturation) over random scales, zero
  points, epsilons, gammas, betas and channel counts: at most 1 LSB, and the error before the
  final rounding below the documented 0.07 LSB;
* the worked example of docs/numerics.md by hand, the records' bytes, the cycle formula;
* one kick on the stream machine, the C model and the RTL: equal outputs, statuses and cycles
  (the cycle model's), and every kick check on all three; no LAYERNORM unit: INVALID_OPCODE;
* partitioning: a hand-written Relax layer norm offloaded and equal to the spec on the golden
  and C backends; what the NPU refuses, with the reason; the ONNX fixture's LayerNormalization
  on the NPU (its co-simulation against TVM and onnxruntime: test_transformer_fixtures).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import npu_byoc
from npu_byoc.arch import cycles
from npu_byoc.arch import numerics_layernorm as ln
from npu_byoc.arch.config import DEFAULT_CONFIG
from npu_byoc.arch.encoder import Dma, Kick, encode
from npu_byoc.arch.isa import KICK_REGS, LAYERNORM_MAX_CHANNELS, Opcode, Reg, Status
from npu_byoc.partition.pipeline import partition_log
from npu_byoc.runtime import verilator as V
from npu_byoc.runtime.functional import FunctionalNpu
from npu_byoc.runtime.machine import Machine

from . import relax_builders as rb
from .conftest import model_path

HW = DEFAULT_CONFIG
IO_IN, IO_OUT = 2, 3
F32 = np.float32


@pytest.fixture(scope="module")
def rtl() -> V.VerilatorNpu:
    return V.VerilatorNpu(HW)


def float_layernorm(x, zp_in, s_in, eps, gamma, beta):
    """The float operator in double (two-pass mean and variance) on the dequantized input:
    the value QuantizeLinear divides by the output scale."""
    xf = float(F32(s_in)) * (x.astype(np.float64) - zp_in)
    mean = xf.mean(axis=-1, keepdims=True)
    var = ((xf - mean) ** 2).mean(axis=-1, keepdims=True)
    return (xf - mean) / np.sqrt(var + float(F32(eps))) * gamma.astype(np.float64) + beta.astype(np.float64)


def quantize_linear(y, s_out, zp_out):
    return np.clip(np.rint(y / float(F32(s_out))) + zp_out, -128, 127)


def random_case(rng):
    c = int(rng.choice([1, 2, 3, 8, 16, 31, 64, 100, 384, 768, 4096]))
    tokens = int(rng.integers(1, 5))
    s_in, s_out = (float(F32(10 ** rng.uniform(-3, 0))) for _ in range(2))
    zp_in, zp_out = (int(rng.integers(-128, 128)) for _ in range(2))
    eps = float(F32(10 ** rng.uniform(-8, -1)))
    gamma = (rng.normal(size=c) * 10 ** rng.uniform(-2, 0.5)).astype(F32)
    beta = (rng.normal(size=c) * 10 ** rng.uniform(-2, 0.5)).astype(F32)
    kind = rng.integers(0, 3)
    if kind == 0:  # uniform bytes
        x = rng.integers(-128, 128, (tokens, c))
    elif kind == 1:  # clustered round the zero point: a small variance, ε matters
        x = np.clip(np.rint(rng.normal(zp_in, 3, (tokens, c))), -128, 127)
    else:  # all equal but one (and all equal when C = 1): V = 0 or tiny
        x = np.full((tokens, c), zp_in)
        x[:, 0] = np.clip(zp_in + 1, -128, 127)
    return x.astype(np.int8), zp_in, s_in, zp_out, s_out, eps, gamma, beta


def test_kernel_within_one_lsb_of_the_float_operator():
    rng = np.random.default_rng(2417)
    diffs, worst_real, cases = [], 0.0, 0
    while cases < 400:
        x, zp_in, s_in, zp_out, s_out, eps, gamma, beta = random_case(rng)
        try:
            e_fx, frac_bits = ln.epsilon_term(eps, x.shape[-1], s_in)
            g, b = ln.channel_params(gamma, beta, s_out)
        except ValueError:  # out of the unit's ranges: the check refuses such a layer
            continue
        cases += 1
        y = ln.run(x, zp_in, zp_out, e_fx, frac_bits, g, b)
        y_float = float_layernorm(x, zp_in, s_in, eps, gamma, beta)
        diffs.append(np.abs(y.astype(np.int64) - quantize_linear(y_float, s_out, zp_out)).max())
        real = y_float / float(F32(s_out))
        # the value before the final rounding, against the exact one (docs/numerics.md §8e)
        d = x.astype(np.int64) - zp_in
        s1, v = d.sum(-1), x.shape[-1] * (d * d).sum(-1) - d.sum(-1) ** 2
        for t in np.flatnonzero(v):
            inv, s = ln.rsqrt((int(v[t]) << frac_bits) + e_fx)
            xhat = ln.rdbpot((x.shape[-1] * d[t] - s1[t]) * inv, 38 - frac_bits // 2 - s)
            worst_real = max(worst_real, np.abs((xhat * g + b) / 2.0**40 - real[t]).max())
    assert max(diffs) <= 1 and np.mean(np.array(diffs) == 0) > 0.9
    assert worst_real < 0.07


def test_worked_example_by_hand():
    """docs/numerics.md §8e: the layernorm_qdq fixture's scales, a token d = −8, −6, …, 22."""
    e_fx, frac_bits = ln.epsilon_term(9.9999997473787516e-06, 16, 0.019603323191404343)
    assert (e_fx, frac_bits) == (27940904, 22)  # E = 1e-5 · 256 / 0.019603323² = 6.66163
    v = 16 * sum(k * k for k in range(-8, 23, 2)) - 112**2
    assert v == 21760
    inv, s = ln.rsqrt((v << 22) + e_fx)
    assert (inv, s) == (3726266549, 12)
    assert inv == int(2**62 / np.sqrt(91295995944 * 4**12))
    g, b = ln.channel_params(np.array([1.0], F32), np.array([0.25], F32), 0.027553051710128784)
    assert (int(g[0]), int(b[0])) == (round(2**16 / 0.027553051710128784), round(0.25 * 2**40 / 0.027553051710128784))
    x = np.array([[7 + k for k in range(-8, 23, 2)]], np.int8)
    y = ln.run(x, 7, -7, e_fx, frac_bits, np.full(16, g[0]), np.full(16, b[0]))
    assert y[0, 0] == -57  # (−1.6267294 + 0.25) / 0.027553 = −49.97 → −50, + zp −7


def test_records_hold_g_then_b_low_and_high_words():
    g, b = np.array([-3, 70000]), np.array([-(2**40) - 5, 2**33 + 7])
    words = ln.records(g, b)
    assert words.tolist() == [[-3, -5, -257], [70000, 7, 2]]
    back = ln.from_records(words)
    assert back[0].tolist() == g.tolist() and back[1].tolist() == b.tolist()


def test_out_of_range_parameters_are_named():
    with pytest.raises(ValueError, match="reaches 2\\^31"):
        ln.epsilon_term(0.1, 4096, 1e-4)
    with pytest.raises(ValueError, match="gamma / output scale of channel 1"):
        ln.channel_params(np.array([1.0, 500.0], F32), np.zeros(2, F32), 0.01)
    with pytest.raises(ValueError, match="beta / output scale of channel 0"):
        ln.channel_params(np.ones(1, F32), np.array([2e4], F32), 0.01)


def test_cycle_formula_by_hand():
    """8 setup cycles, then per pixel a sum pass of ceil(C / 32), 100 reciprocal-square-root
    steps and ceil(12·C / 32) record chunks: 16 channels 8 + (1 + 100 + 6) = 115; 2 x 3 pixels
    of 33 channels 8 + 6 · (2 + 100 + 13) = 698."""
    def kick(h, w, c):
        return cycles.kick_cycles(Opcode.LAYERNORM, {Reg.OFM_H: h, Reg.OFM_W: w, Reg.OFM_C: c}, HW)

    assert (kick(1, 1, 16), kick(2, 3, 33)) == (115, 698)


# =============================================================================================
# the kick on the three implementations


def layernorm_stream(x, zp_in, zp_out, e_fx, frac_bits, g, b, act=(-128, 127)):
    """One LAYERNORM kick over the pixels of ``x`` (H, W, C): the records at SRAM 0, the input
    after them, the output after that; (steps, regions, kick registers)."""
    rec = np.asarray(ln.records(g, b), "<i4").view(np.uint8).ravel()
    ifm = -(-rec.size // 16) * 16
    ofm = ifm + -(-x.size // 16) * 16
    blob = np.concatenate([rec, np.zeros(ifm - rec.size, np.uint8), x.astype(np.int8).view(np.uint8).ravel()])
    h, w, c = x.shape
    regs = {Reg.IFM_ADDR: ifm, Reg.IFM_ZERO_POINT: zp_in, Reg.OFM_ADDR: ofm, Reg.OFM_H: h, Reg.OFM_W: w,
            Reg.OFM_C: c, Reg.OFM_ZERO_POINT: zp_out, Reg.ACT_MIN: act[0], Reg.ACT_MAX: act[1],
            Reg.IFM_MULTIPLIER: e_fx, Reg.IFM_SHIFT: frac_bits, Reg.REQUANT_ADDR: 0}  # fmt: skip
    steps = [Dma(Opcode.DMA_IN, IO_IN, 0, 0, blob.size), Kick.make(Opcode.LAYERNORM, regs),
             Dma(Opcode.DMA_OUT, IO_OUT, 0, ofm, x.size)]  # fmt: skip
    return steps, {IO_IN: blob.copy(), IO_OUT: np.zeros(x.size, np.uint8)}, regs


def run_three(rtl, steps, regions, shape):
    words = encode(steps)
    out = []
    for npu in (Machine(HW), FunctionalNpu(HW), rtl):
        mine = {r: a.copy() for r, a in regions.items()}
        out.append((npu.run(words, mine), mine[IO_OUT].view(np.int8).reshape(shape)))
    (m, want), (f, got_f), (r, got_r) = out
    assert m.status == f.status == r.status and m.word_index == f.word_index == r.word_index, out
    np.testing.assert_array_equal(got_f, want, err_msg="C model vs machine")
    np.testing.assert_array_equal(got_r, want, err_msg="RTL vs machine")
    return m, f, r, want


def test_kick_equals_the_kernel_on_machine_c_model_and_rtl(rtl):
    """Random layers (1 to 130 channels, a clamp, a constant pixel) on the three: each equal to
    the kernel, and the C model's and the RTL's cycles the cycle model's."""
    rng = np.random.default_rng(45)
    done = 0
    while done < 10:
        c = int(rng.choice([1, 5, 32, 33, 64, 130]))
        x = rng.integers(-128, 128, (int(rng.integers(1, 3)), int(rng.integers(1, 4)), c)).astype(np.int8)
        zp_in, zp_out = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
        x[0, 0, :] = zp_in  # V = 0: the output is beta's
        try:
            e_fx, frac_bits = ln.epsilon_term(float(10 ** rng.uniform(-7, -2)), c, float(10 ** rng.uniform(-2.5, 0)))
            g, b = ln.channel_params(rng.normal(size=c).astype(F32), rng.normal(size=c).astype(F32),
                                     float(10 ** rng.uniform(-2, 0)))  # fmt: skip
        except ValueError:
            continue
        act = (-100, 90) if done % 3 == 0 else (-128, 127)
        steps, regions, _ = layernorm_stream(x, zp_in, zp_out, e_fx, frac_bits, g, b, act)
        m, f, r, got = run_three(rtl, steps, regions, x.shape)
        assert m.status == Status.OK
        np.testing.assert_array_equal(got, ln.run(x, zp_in, zp_out, e_fx, frac_bits, g, b, *act))
        assert f.cycles == r.cycles == cycles.stream_cycles(steps, HW)
        done += 1


def test_widest_rows_at_the_largest_variance_on_all_three(rtl):
    """4,096 channels (the unit's limit), half at −128 and half at 127: V = C²·255²/4, the
    largest the sums reach (numerics_layernorm's ranges), equal on the three and to the kernel."""
    c = LAYERNORM_MAX_CHANNELS
    x = np.random.default_rng(11).integers(-128, 128, (1, 2, c)).astype(np.int8)
    x[0, 1, : c // 2], x[0, 1, c // 2 :] = -128, 127
    for zp, s_in in ((-128, 0.5), (127, 0.001)):
        e_fx, frac_bits = ln.epsilon_term(1e-5, c, s_in)
        g, b = ln.channel_params(np.linspace(-3, 3, c, dtype=F32), np.linspace(1, -1, c, dtype=F32), 0.01)
        steps, regions, _ = layernorm_stream(x, zp, 3, e_fx, frac_bits, g, b)
        m, f, r, got = run_three(rtl, steps, regions, x.shape)
        assert m.status == Status.OK and f.cycles == r.cycles == cycles.stream_cycles(steps, HW)
        np.testing.assert_array_equal(got, ln.run(x, zp, 3, e_fx, frac_bits, g, b))


@pytest.mark.parametrize(
    "change, status",
    [
        ({Reg.OFM_C: 0}, Status.INVALID_PARAMETER),
        ({Reg.OFM_C: LAYERNORM_MAX_CHANNELS + 1, Reg.OFM_H: 1, Reg.OFM_W: 1}, Status.INVALID_PARAMETER),
        ({Reg.IFM_SHIFT: 3}, Status.INVALID_PARAMETER),  # odd: sqrt(2^F) is no shift
        ({Reg.IFM_SHIFT: 24}, Status.INVALID_PARAMETER),
        ({Reg.IFM_MULTIPLIER: -1}, Status.INVALID_PARAMETER),
        ({Reg.IFM_ZERO_POINT: 128}, Status.INVALID_PARAMETER),
        ({Reg.ACT_MIN: 5, Reg.ACT_MAX: 4}, Status.INVALID_PARAMETER),
        ({Reg.REQUANT_ADDR: 2}, Status.INVALID_PARAMETER),
        ({Reg.REQUANT_ADDR: HW.sram_bytes - 200}, Status.ADDRESS_OUT_OF_RANGE),
        ({Reg.OFM_ADDR: 8}, Status.INVALID_PARAMETER),  # the output overlaps the records
    ],
)
def test_kick_checks_on_all_three(rtl, change, status):
    x = np.arange(-40, 40, dtype=np.int8).reshape(2, 2, 20)
    e_fx, frac_bits = ln.epsilon_term(1e-5, 20, 0.1)
    g, b = ln.channel_params(np.ones(20, F32), np.zeros(20, F32), 0.05)
    steps, regions, regs = layernorm_stream(x, 0, 0, e_fx, frac_bits, g, b)
    steps[1] = Kick.make(Opcode.LAYERNORM, {r: change.get(r, regs[r]) for r in KICK_REGS[Opcode.LAYERNORM]})
    words = encode(steps)
    got = [npu.run(words, {r: a.copy() for r, a in regions.items()}) for npu in (Machine(HW), FunctionalNpu(HW), rtl)]
    assert [(g.status, g.word_index) for g in got] == [(status, got[0].word_index)] * 3
    assert encode(steps)[got[0].word_index] >> 24 == Opcode.LAYERNORM  # the kick's own word


def test_an_npu_without_the_unit_refuses_the_opcode():
    hw = replace(HW, layernorm_unit=0)
    x = np.zeros((1, 1, 4), np.int8)
    steps, regions, _ = layernorm_stream(x, 0, 0, 0, 0, np.zeros(4, np.int64), np.zeros(4, np.int64))
    words = encode(steps)
    got = [npu.run(words, {r: a.copy() for r, a in regions.items()}) for npu in (Machine(hw), FunctionalNpu(hw))]
    assert {(g.status, g.kicks.get(Opcode.LAYERNORM, 0)) for g in got} == {(Status.INVALID_OPCODE, 0)}
    assert got[0].word_index == got[1].word_index


# =============================================================================================
# partitioning


def test_hand_written_layer_norm_is_offloaded_and_equals_the_spec():
    mod = rb.qdq_layernorm(shape=(1, 6, 40))
    (d,) = partition_log(npu_byoc.partition_for_npu(mod))
    assert (d.pattern, d.accepted) == ("npu.layernorm", True)
    x = np.random.default_rng(7).integers(-128, 128, (1, 6, 40)).astype(np.int8)
    gamma, beta = np.linspace(0.5, 1.5, 40, dtype=F32), np.linspace(-0.3, 0.3, 40, dtype=F32)
    e_fx, frac_bits = ln.epsilon_term(1e-5, 40, 0.05)
    g, b = ln.channel_params(gamma, beta, 0.03)
    want = ln.run(x, 3, -5, e_fx, frac_bits, g, b)
    real = float_layernorm(x, 3, 0.05, 1e-5, gamma, beta)
    assert np.abs(want.astype(int) - quantize_linear(real, 0.03, -5)).max() <= 1
    for backend in ("golden", "functional"):
        np.testing.assert_array_equal(npu_byoc.build(mod, backend).run([x])[0], want, err_msg=backend)


@pytest.mark.parametrize(
    "kw, hw, reason",
    [
        (dict(axes=(1,)), HW, "layer norm over axes (1,) of a rank-3 tensor"),
        (dict(axes=(1, 2)), HW, "layer norm over axes (1, 2) of a rank-3 tensor"),
        (dict(shape=(1, 4097)), HW, "over 4097 values: the NPU's LAYERNORM takes at most 4096"),
        (dict(output_scale=1e-5), HW, "gamma / output scale of channel 0"),
        (dict(input_scale=1e-6, epsilon=0.1), HW, "reaches 2^31"),
        ({}, replace(HW, layernorm_unit=0), "no LAYERNORM unit (layernorm_unit=0)"),
    ],
)
def test_what_the_npu_refuses_keeps_a_reason(kw, hw, reason):
    (d,) = partition_log(npu_byoc.partition_for_npu(rb.qdq_layernorm(**kw), hw=hw))
    assert d.pattern == "npu.layernorm" and not d.accepted
    assert d.reason.startswith("LayerNormalization: ") and reason in d.reason


def test_the_onnx_fixture_s_layer_norm_runs_on_the_npu():
    """layernorm_qdq.onnx: LayerNormalization offloaded beside the transpose and the MatMuls;
    the Reshape from NCHW patches to tokens before Transpose(0, 2, 1) is a view of the patch
    conv's bytes (npu_byoc.codegen.tokens), so the whole model is one partition (it was two,
    the reshape on the CPU)."""
    cov = npu_byoc.coverage_report(npu_byoc.partition_for_npu(npu_byoc.load_model(model_path("layernorm_qdq.onnx"))))
    rows = {o.op: o for o in cov.ops}
    assert rows["LayerNormalization"].offloaded and rows["LayerNormalization"].pattern == "npu.layernorm"
    assert rows["Reshape"].offloaded and rows["Reshape"].pattern == "npu.reshape"
    assert [o.op for o in cov.ops if not o.offloaded] == []
    assert cov.summary["partitions"] == 1
