"""SQUARED_DIFFERENCE on the NPU (opcode SQDIFF 0x44, npu_byoc.ops.squared_difference): LiteRT's
int8 kernel (``squared_difference.cc``), LayerNorm's variance term.

* the parameters (npu_byoc.arch.numerics_sqdiff) against LiteRT's Prepare as
  tests/litert_reference.py transcribes it, on thousands of seeded random float32 scales;
* the kernel on every int8 pair against LiteRT's ``SquaredDifference``, for random scales and
  zero points; SUB then MUL (TVM's float form, rounded twice) is not it;
* one SQDIFF kick (same shape and channel-vector broadcast, every int8 pair) on the stream
  machine, the C model and the RTL: LiteRT's outputs, equal cycles (the cycle model's); any
  registers (wrapping shifts) agree on all three; the kick's checks on all three;
* sqdiff_int8.tflite (tools/make_scale_ties.py: same shape, per-pixel, channel-vector and
  per-token broadcasts at the converter's scales): every op on the NPU, 0 LSB off LiteRT on the
  golden model, the C model and (slow) the RTL.
"""

from __future__ import annotations

import numpy as np
import pytest

import npu_byoc
from npu_byoc.arch import cycles
from npu_byoc.arch import numerics_sqdiff as sqd
from npu_byoc.arch.config import DEFAULT_CONFIG
from npu_byoc.arch.encoder import Dma, Kick, encode
from npu_byoc.arch.isa import KICK_REGS, Opcode, Reg, Status
from npu_byoc.runtime import verilator as V
from npu_byoc.runtime.functional import FunctionalNpu
from npu_byoc.runtime.machine import Machine

from . import litert_reference as L
from .conftest import model_path, reference

HW = DEFAULT_CONFIG
IO_IN, IO_OUT = 2, 3
MODEL = "sqdiff_int8.tflite"
ALL_PAIRS = (np.arange(-128, 128)[:, None], np.arange(-128, 128)[None, :])  # 256 x 256: every (a, b)


def _random_case(rng) -> tuple[tuple, tuple[int, int, int]]:
    """Scales as LayerNorm's (inputs 2^-9..1, an output 2^5..2^9 times their larger square: a
    squared int8 range of 2^16 lands on 2^7..2^11 output steps) and zero points (the output's
    low: a square is never negative)."""
    s1, s2 = np.exp2(rng.uniform(-9, 0, 2)).astype(np.float32)
    s_out = np.float32(max(s1, s2) ** 2 * np.exp2(rng.uniform(5, 9)))
    zp1, zp2 = (int(z) for z in rng.integers(-128, 128, 2))
    return (s1, s2, s_out), (zp1, zp2, int(rng.integers(-128, 0)))


# =============================================================================================
# the parameters and the kernel, against LiteRT's source


def test_prepare_is_litert_s_on_random_scales():
    rng = np.random.default_rng(2401)
    refused = 0
    for _ in range(4000):
        s1, s2, s_out = np.exp2(rng.uniform(-20, 4, 3)).astype(np.float32)
        want = L.squared_difference_prepare(s1, s2, s_out)
        try:
            got = tuple(sqd.squared_difference_params(s1, s2, s_out))
        except ValueError:
            got = None
        refused += want is None
        assert got == want, (s1, s2, s_out)
    assert 100 < refused < 3900  # both sides of LiteRT's (0, 1) check are exercised


def test_kernel_is_litert_s_on_every_int8_pair():
    rng = np.random.default_rng(2402)
    for _ in range(24):
        scales, (zp1, zp2, zpo) = _random_case(rng)
        p = L.squared_difference_prepare(*scales)
        want = L.squared_difference_func(*ALL_PAIRS, zp1, zp2, zpo, p)
        got = sqd.squared_difference(*ALL_PAIRS, zp1, zp2, zpo, sqd.squared_difference_params(*scales))
        np.testing.assert_array_equal(got, want, err_msg=str(scales))
        assert len(np.unique(want)) > 16  # not saturated: the cases reach the rescale's rounding


def test_a_worked_example_by_hand():
    """s1 = s2 = 2^-4 (twice_max 2^-3: both input multipliers 0.5 = (2^30, 0)), s_out = 2^-8:
    the output multiplier 2^-6 / (2^14 · 2^-8) = 2^-12 = (2^30, -11). a − zp1 = 3, b − zp2 = −2:
    a″ = 3 · 2^7 / 2 = 192, b″ = −128, d = 320, d² = 102400, · 2^-12 = 25 (exactly (5 · 2^-4)² / 2^-8)."""
    p = sqd.squared_difference_params(2**-4, 2**-4, 2**-8)
    assert tuple(p) == (7, 2**30, 0, 2**30, 0, 2**30, -11)
    assert int(sqd.squared_difference(np.int8(4), np.int8(-3), 1, -1, -100, p)) == 25 - 100


def test_sub_then_mul_is_not_litert_s():
    """TVM's float form rounds the difference to int8 before squaring it: SUB then MUL on the NPU
    (two requantizes, LiteRT's own SUB and MUL) would be several LSB off LiteRT's
    SQUARED_DIFFERENCE; one SQDIFF is exact (above)."""
    (s1, s2, s_out), (zp1, zp2, zpo) = (np.float32(0.02), np.float32(0.0015), np.float32(0.0004)), (9, -3, -128)
    want = L.squared_difference_func(*ALL_PAIRS, zp1, zp2, zpo, L.squared_difference_prepare(s1, s2, s_out))
    s_d = np.float32(0.02)  # the difference's scale, as a calibrated SUB would have it
    sub = list(L.add_prepare(s1, s2, s_d))
    sub[3] = -sub[3]  # sub.cc: input 2's multiplier negated
    d = L.add_func(*ALL_PAIRS, zp1, zp2, 0, sub)
    two_step = L.mul_elementwise(d, d, 0, 0, zpo, *L.mul_prepare(s_d, s_d, s_out))
    assert np.abs(two_step.astype(int) - want.astype(int)).max() > 1


# =============================================================================================
# one kick, three implementations


@pytest.fixture(scope="module")
def rtl() -> V.VerilatorNpu:
    return V.VerilatorNpu(HW)


def sqdiff_stream(a: np.ndarray, b: np.ndarray, zps, p, broadcast: bool = False):
    """One SQDIFF kick on an (H, W, C) tile ``a`` and ``b`` (its shape, or (C,) when
    ``broadcast``): both DMAed in at SRAM 0, the output after them, DMAed out; (steps, regions,
    kick registers)."""
    h, w, c = a.shape
    blob = np.concatenate([a.astype(np.int8).ravel(), b.astype(np.int8).ravel()]).view(np.uint8)
    ofm = -(-blob.size // 16) * 16
    regs = {Reg.IFM_ADDR: 0, Reg.IFM2_ADDR: a.size, Reg.OFM_ADDR: ofm, Reg.OFM_H: h, Reg.OFM_W: w, Reg.OFM_C: c,
            Reg.IFM_ZERO_POINT: zps[0], Reg.IFM2_ZERO_POINT: zps[1], Reg.OFM_ZERO_POINT: zps[2],
            Reg.ACT_MIN: -128, Reg.ACT_MAX: 127, Reg.IFM2_BROADCAST: int(broadcast), Reg.LEFT_SHIFT: p[0],
            Reg.IFM_MULTIPLIER: p[1], Reg.IFM_SHIFT: p[2], Reg.IFM2_MULTIPLIER: p[3], Reg.IFM2_SHIFT: p[4],
            Reg.OFM_MULTIPLIER: p[5], Reg.OFM_SHIFT: p[6]}  # fmt: skip
    steps = [Dma(Opcode.DMA_IN, IO_IN, 0, 0, blob.size), Kick.make(Opcode.SQDIFF, regs),
             Dma(Opcode.DMA_OUT, IO_OUT, 0, ofm, a.size)]  # fmt: skip
    regions = {IO_IN: blob.copy(), IO_OUT: np.zeros(a.size, np.uint8)}
    return steps, regions, regs


def run_three(rtl, a, b, zps, p, broadcast=False):
    """The kick on the machine, the C model and the RTL: the same status, output and (C model,
    RTL) cycles, the cycle model's; (the machine's status, its output)."""
    steps, regions, _ = sqdiff_stream(a, b, zps, p, broadcast)
    words = encode(steps)
    results = []
    for npu in (Machine(HW), FunctionalNpu(HW), rtl):
        mine = {r: x.copy() for r, x in regions.items()}
        results.append((npu.run(words, mine), mine[IO_OUT].view(np.int8).reshape(a.shape)))
    (m, want), (f, got_f), (r, got_r) = results
    assert m.status == f.status == r.status, results
    assert f.cycles == r.cycles == cycles.stream_cycles(steps, HW)
    np.testing.assert_array_equal(got_f, want, err_msg="C model vs machine")
    np.testing.assert_array_equal(got_r, want, err_msg="RTL vs machine")
    return m, want


def test_kick_on_every_int8_pair_is_litert_s_on_all_three(rtl):
    """Every (a, b) pair as a 256 x 8 x 32 tile, at four random scales: LiteRT's outputs."""
    rng = np.random.default_rng(2403)
    a, b = (np.broadcast_to(x, (256, 256)).reshape(256, 8, 32) for x in ALL_PAIRS)
    for _ in range(4):
        scales, zps = _random_case(rng)
        p = L.squared_difference_prepare(*scales)
        res, got = run_three(rtl, a, b, zps, p)
        assert res.status == Status.OK
        np.testing.assert_array_equal(got, L.squared_difference_func(a, b, *zps, p), err_msg=str(scales))


def test_channel_vector_broadcast_kick_on_all_three(rtl):
    """IFM2_BROADCAST: the (C,) vector read again at every pixel, 33 channels (two lane groups)."""
    rng = np.random.default_rng(2404)
    a = rng.integers(-128, 128, (3, 5, 33))
    b = rng.integers(-128, 128, 33)
    scales, zps = _random_case(rng)
    p = L.squared_difference_prepare(*scales)
    res, got = run_three(rtl, a, b, zps, p, broadcast=True)
    assert res.status == Status.OK
    np.testing.assert_array_equal(got, L.squared_difference_func(a, b[None, None, :], *zps, p))


def test_any_registers_agree_on_all_three(rtl):
    """Registers the compiler never sets (left shifts up to 31, positive shifts, any multiplier,
    a narrow clamp): every int32 step wraps alike on the three."""
    rng = np.random.default_rng(2405)
    a, b = (rng.integers(-128, 128, (4, 4, 40)) for _ in range(2))
    for _ in range(8):
        p = (int(rng.integers(0, 32)), *(int(v) for k in range(3)
             for v in (rng.integers(-(2**31), 2**31), rng.integers(-31, 31))))  # fmt: skip
        res, _ = run_three(rtl, a, b, tuple(int(z) for z in rng.integers(-128, 128, 3)), p)
        assert res.status == Status.OK


def test_cycle_formula_by_hand():
    """ADD's: 8 setup cycles, then 32 bytes a cycle flat (8 x 8 x 48: 8 + 96 = 104), or with the
    channel vector broadcast ceil(48 / 32) = 2 cycles a pixel (8 + 64 · 2 = 136)."""
    regs = {Reg.OFM_H: 8, Reg.OFM_W: 8, Reg.OFM_C: 48, Reg.IFM2_BROADCAST: 0}
    assert cycles.kick_cycles(Opcode.SQDIFF, regs, HW) == 104
    assert cycles.kick_cycles(Opcode.SQDIFF, regs | {Reg.IFM2_BROADCAST: 1}, HW) == 136


@pytest.mark.parametrize(
    "change, status",
    [
        ({Reg.LEFT_SHIFT: 32}, Status.INVALID_PARAMETER),
        ({Reg.LEFT_SHIFT: -1}, Status.INVALID_PARAMETER),
        ({Reg.IFM_SHIFT: 31}, Status.INVALID_PARAMETER),
        ({Reg.IFM2_SHIFT: -32}, Status.INVALID_PARAMETER),
        ({Reg.OFM_SHIFT: 31}, Status.INVALID_PARAMETER),
        ({Reg.IFM2_BROADCAST: 2}, Status.INVALID_PARAMETER),
        ({Reg.IFM2_ZERO_POINT: 128}, Status.INVALID_PARAMETER),
        ({Reg.ACT_MIN: 5, Reg.ACT_MAX: 4}, Status.INVALID_PARAMETER),
        ({Reg.OFM_ADDR: 16}, Status.INVALID_PARAMETER),  # the output overlaps the first input
        ({Reg.IFM2_ADDR: HW.sram_bytes - 10}, Status.ADDRESS_OUT_OF_RANGE),
    ],
)
def test_kick_checks_on_all_three(rtl, change, status):
    a = np.arange(-64, 64).reshape(2, 2, 32)
    steps, regions, regs = sqdiff_stream(a, a[::-1], (0, 0, -128), sqd.squared_difference_params(0.1, 0.1, 0.2))
    steps[1] = Kick.make(Opcode.SQDIFF, {r: change.get(r, regs.get(r, 0)) for r in KICK_REGS[Opcode.SQDIFF]})
    words = encode(steps)
    got = [npu.run(words, {r: x.copy() for r, x in regions.items()}) for npu in (Machine(HW), FunctionalNpu(HW), rtl)]
    assert [(g.status, g.word_index) for g in got] == [(status, got[0].word_index)] * 3


# =============================================================================================
# the model: sqdiff_int8.tflite


def test_every_squared_difference_is_offloaded_in_its_broadcast_form():
    """The same-shape op on two full tiles, the channel vector on IFM2_BROADCAST, the per-pixel
    and per-token means (vectors repeated over the channels) replicated by the MAC array
    (ops.broadcast) from stride-0 views of the output's shape."""
    from npu_byoc.codegen.lower import lower_module
    from npu_byoc.ops.squared_difference import ReplicatedSquaredDifference, SquaredDifference

    mod = npu_byoc.partition_for_npu(npu_byoc.load_model(model_path(MODEL)))
    report = npu_byoc.coverage_report(mod)
    assert [(o.op, o.pattern) for o in report.ops] == [("SQUARED_DIFFERENCE", "npu.squared_difference")] * 4
    ops = [op for plan in lower_module(mod).values() for op in plan.ops]
    binaries = [op.binary if isinstance(op, ReplicatedSquaredDifference) else op for op in ops]
    assert len(ops) == 4 and all(isinstance(b, SquaredDifference) and b.left_shift == 7 for b in binaries)
    forms = sorted((isinstance(op, ReplicatedSquaredDifference), b.broadcast,
                    any(0 in (r.box_strides or ()) for r in b.inputs)) for op, b in zip(ops, binaries))  # fmt: skip
    assert forms == [(False, False, False), (False, True, False), (True, False, True), (True, False, True)]


_built: dict = {}


def _assert_litert_exact(backend: str):
    if backend not in _built:
        _built[backend] = npu_byoc.build(npu_byoc.load_model(model_path(MODEL)), backend)
    recorded = reference(MODEL)
    assert recorded["reference"].endswith("BUILTIN_REF")
    for inputs, outputs in zip(recorded["inputs"], recorded["outputs"]):
        got = _built[backend].run(inputs)
        assert len(got) == len(outputs) == 4
        for g, w in zip(got, outputs):
            assert len(np.unique(w)) > 16  # the outputs span the rescale, not a clamp
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("backend", ["golden", "functional"])
def test_model_is_litert_exactly(backend):
    _assert_litert_exact(backend)


@pytest.mark.slow
def test_model_on_the_rtl_is_litert_exactly():
    _assert_litert_exact("verilator")


# =============================================================================================
# issue 24's fixtures: every LayerNorm SQUARED_DIFFERENCE on the NPU, LiteRT's tensor exactly


def _model_squared_differences(name: str) -> list[tuple[str, str, str]]:
    """(input 1, input 2, output) tensor names of each SQUARED_DIFFERENCE in the .tflite (the
    first of a fused tensor's ';'-joined names)."""
    tflite = pytest.importorskip("tflite")
    model = tflite.Model.GetRootAsModel(model_path(name).read_bytes(), 0)
    sub = model.Subgraphs(0)
    out = []
    for i in range(sub.OperatorsLength()):
        op = sub.Operators(i)
        if model.OperatorCodes(op.OpcodeIndex()).BuiltinCode() == tflite.BuiltinOperator.SQUARED_DIFFERENCE:
            names = [sub.Tensors(op.Inputs(k)).Name() for k in range(2)] + [sub.Tensors(op.Outputs(0)).Name()]
            out.append(tuple(n.decode().split(";")[0] for n in names))  # the first name, as tensors.npz keys it
    return out


@pytest.mark.parametrize("name, count", [("vit_tiny_int8.tflite", 5), ("kws_transformer_int8.tflite", 5),
                                         ("convnext_block_int8.tflite", 3)])  # fmt: skip
def test_transformer_fixture_squared_differences_are_litert_s_layer_by_layer(name, count):
    """Each SQUARED_DIFFERENCE as the compiler lowered it (its operands ordered, its multipliers),
    run by its golden semantics on LiteRT's recorded input tensors (the per-token or per-pixel
    mean broadcast as numpy does), gives LiteRT's recorded output tensor exactly."""
    from npu_byoc.codegen.lower import lower_module
    from npu_byoc.ops.squared_difference import (
        ReplicatedSquaredDifference, SquaredDifference, golden_squared_difference)

    mod = npu_byoc.partition_for_npu(npu_byoc.load_model(model_path(name)))
    rows = [o for o in npu_byoc.coverage_report(mod).ops if o.op == "SQUARED_DIFFERENCE"]
    assert len(rows) == count and all(o.pattern == "npu.squared_difference" for o in rows), rows
    ops = [op for plan in lower_module(mod).values() for op in plan.ops]
    ops = [op.binary if isinstance(op, ReplicatedSquaredDifference) else op for op in ops]  # the op it wraps
    lowered = {op.name: op for op in ops if isinstance(op, SquaredDifference)}
    recorded = np.load(model_path(name).with_name(name.replace(".tflite", ".tensors.npz")))
    tensors = {k.split(";")[0]: recorded[k] for k in recorded.files if k != "__index__"}
    checked = 0
    for a_name, b_name, out_name in _model_squared_differences(name):
        a, b, want = tensors[a_name], tensors[b_name], tensors[out_name]
        if a.shape != want.shape:  # the compiler's first operand has the output's shape
            a, b = b, a
        got = golden_squared_difference(lowered[out_name], a, b)
        np.testing.assert_array_equal(got, want, err_msg=f"{name}: {out_name}")
        checked += 1
    assert checked == count
