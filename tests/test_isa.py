"""The command stream: scheduler, encoder/decoder/disassembler, and the command-stream machine.

Evidence:

* round trip: steps -> words -> steps, for the schedules of the real fixture partitions and
  for hypothesis-generated steps and ops; the encoder sets only registers that change;
* the machine running a schedule equals the golden model (npu_byoc.runtime.golden: the
  typed ops on whole tensors), bit for bit — for the fixtures with the default SRAM and with
  SRAM so small that row tiles (halo, pads at true borders only), channel tiles and strided
  NCHW transfers all occur, and for hypothesis-generated ops, layouts and tilings;
* every error status from a stream built or mutated for it, with the exact word index;
* fuzz: random and mutated streams never raise and always finish;
* docs/isa.md carries the current opcode/register/status tables.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from npu_byoc.arch import isa
from npu_byoc.arch import numerics as nx
from npu_byoc.arch.encoder import DecodeError, Dma, Kick, decode, disassemble, encode, encode_with_starts
from npu_byoc.codegen.lower import IoTensor, PartitionPlan
from npu_byoc.ops.npu_ops import (
    Add, Conv2D, DepthwiseConv2D, FullyConnected, Lut, Mean, Mul, Pool, TensorRef, Tiling,
)  # fmt: skip
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.codegen.tiling import tile_sram_bytes
from npu_byoc.errors import LoweringError
from npu_byoc.arch.config import HwConfig
from npu_byoc.arch.isa import HEADER_WORDS, KICK_REGS, MAGIC, VERSION, Opcode, Reg, Region, Status
from npu_byoc.runtime import golden
from npu_byoc.runtime.machine import Machine

from .conftest import ALL_MODELS, SPLIT_TINY

DEFAULT = HwConfig()
SMALL = HwConfig(sram_bytes=1536)  # forces row and channel tiles on the tiny CNN (its dilated conv, 5x5 zero-inserted, needs 1360 B)
FUZZ_HW = HwConfig(sram_bytes=4096)


def random_inputs(plan: PartitionPlan, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, size=io.shape, dtype=np.int8) for io in plan.inputs]


def bind(plan: PartitionPlan, schedule, inputs) -> dict[int, np.ndarray]:
    regions = golden.allocate_regions(plan, inputs)
    regions[int(Region.CONST)] = np.frombuffer(schedule.constants, np.uint8).copy()
    return regions


def run_on_machine(plan, schedule, inputs, hw):
    regions = bind(plan, schedule, inputs)
    status = Machine(hw).run(schedule.words(), regions)
    outputs = [regions[io.ref.region].view(np.int8).reshape(io.shape).copy() for io in plan.outputs]
    return status, outputs


def commands(words) -> list[tuple[int, int]]:
    """(index, opcode) of every command of a well-formed stream, walked independently."""
    out, i = [], HEADER_WORDS
    while i < len(words):
        op = int(words[i]) >> 24
        out.append((i, op))
        if op == Opcode.STOP:
            break
        i += 2 if op == Opcode.SET_REG else 1
    return out


def with_header(body: list[int]) -> np.ndarray:
    return np.asarray([MAGIC, VERSION, HEADER_WORDS + len(body), *body], np.uint32)


def kick_index(steps, k: int) -> int:
    """The word index of step k's kick: the last word before step k + 1 (or STOP)."""
    words, starts = encode_with_starts(steps)
    nxt = starts[k + 1] if k + 1 < len(steps) else len(words) - 1
    return nxt - 1


# =============================================================================================
# (a) round trip and encoding


@pytest.mark.parametrize("model", ALL_MODELS)
@pytest.mark.parametrize("hw", [DEFAULT, SMALL], ids=["default", "small"])
def test_round_trip_fixture_schedules(plans, model, hw):
    for name, plan in plans(model).items():
        try:
            schedule = schedule_partition(plan, hw)
        except LoweringError:
            assert hw is SMALL and "mobilenet" in model  # MobileNet's rows do not fit 1.5 KiB
            continue
        words = schedule.words()
        assert words.dtype == np.uint32
        assert list(words[:3]) == [MAGIC, VERSION, len(words)] and words[-1] == isa.kick_word(Opcode.STOP)
        assert decode(words) == schedule.steps
        # the register file persists: a SET_REG never writes the value a register already holds
        file = dict.fromkeys(range(256), 0)
        for i, op in commands(words):
            if op == Opcode.SET_REG:
                reg = isa.reg_of(int(words[i]))
                assert file[reg] != int(words[i + 1]), f"{name}: redundant SET_REG at {i}"
                file[reg] = int(words[i + 1])
        # one disassembly line per command (+ 3 header lines), with field names
        lines = disassemble(words).splitlines()
        assert len(lines) == 3 + len(commands(words))
        for line, (i, op) in zip(lines[3:], commands(words)):
            assert line.split()[:2] == [f"{i:04d}", Opcode(op).name]


def test_disassembly_reads_like_the_doc(plans):
    plan = plans("tiny_cnn_int8.tflite")["npu_subgraph_0"]
    text = schedule_partition(plan, HwConfig(dma_overlap=0)).disassembly()
    assert "; layer 0: tiny_cnn_1/relu6_s2_1/Relu6" in text
    conv = next(line for line in text.splitlines() if " CONV " in line)
    # 32x32x3 input, 3x3 stride 2, TFLite SAME padding (0, 0, 1, 1)
    assert "ifm 32x32x3 @" in conv and "-> ofm 16x16x16 @" in conv and "k3x3 s2x2 pad 0,0,1,1" in conv
    # registers reset to 0 (DMA_EXT_REGION = CONST, addresses 0): the first command sets N0
    assert "0003  SET_REG  DMA_N0 = 432\n" in text  # 16 x 3 x 3 x 3 weights
    assert "DMA_IN   CONST+0x0 -> sram 0x00000  432 bytes\n" in text
    # the default schedule: weights and requantize table (16 records of 12 bytes) as one
    # background transfer, and waits before the kicks that read what is still loading
    text = schedule_partition(plan).disassembly()
    assert "0003  SET_REG  DMA_N0 = 624\n" in text and "DMA_IN_ASYNC CONST+0x0 -> sram 0x00000  624 bytes\n" in text
    assert "WAIT_DMA until at most " in text


_SIGNED = (-(2**31), 2**31 - 1)
_UNSIGNED = (0, 2**32 - 1)


def reg_value(reg: Reg):
    lo, hi = _SIGNED if reg in isa.SIGNED_REGS else _UNSIGNED
    return st.one_of(st.integers(lo, hi), st.integers(0, 64), st.sampled_from([lo, hi]))


@st.composite
def steps_strategy(draw):
    out = []
    for _ in range(draw(st.integers(0, 12))):
        opcode = draw(st.sampled_from(sorted(KICK_REGS)))
        values = {r: draw(reg_value(r)) for r in KICK_REGS[opcode]}
        if opcode in isa.DECODE_DMA:  # Dma(decoded=...): decoded 0 is a raw copy
            region, ext, sram, n0, decoded = values.values()
            out.append(Dma(Opcode.DMA_IN, region, ext, sram, n0, decoded=max(decoded, 1),
                           background=opcode in isa.ASYNC_DMA))  # fmt: skip
        elif opcode in isa.DMA_OPCODES:  # the background ones decode as Dma(background=True)
            out.append(Dma(isa.ASYNC_DMA.get(opcode, opcode), *values.values(), background=opcode in isa.ASYNC_DMA))
        else:
            out.append(Kick.make(opcode, values))
    return out


@settings(max_examples=200, deadline=None)
@given(steps_strategy())
def test_round_trip_random_steps(steps):
    words = encode(steps)
    assert decode(words) == steps
    assert len(disassemble(words).splitlines()) == 3 + len(commands(words))


def test_encoder_rejects_values_a_register_cannot_hold():
    with pytest.raises(ValueError, match="IFM_H"):
        encode([Kick.make(Opcode.LUT, dict.fromkeys(KICK_REGS[Opcode.LUT], 0)) ,
                Kick.make(Opcode.MEAN, {**dict.fromkeys(KICK_REGS[Opcode.MEAN], 0), Reg.IFM_H: -1})])  # fmt: skip
    with pytest.raises(ValueError, match="missing registers"):
        Kick.make(Opcode.LUT, {Reg.IFM_ADDR: 0})


# =============================================================================================
# (b) the machine running a schedule == the golden model on whole tensors


@pytest.mark.parametrize("model", ALL_MODELS)
def test_machine_equals_golden_on_fixtures(plans, model):
    for name, plan in plans(model).items():
        schedule = schedule_partition(plan, DEFAULT)
        inputs = random_inputs(plan, seed=1)
        status, got = run_on_machine(plan, schedule, inputs, DEFAULT)
        assert status.ok, f"{name}: {status}"
        assert status.word_index == len(schedule.words()) - 1
        expected_kicks = {}
        for step in schedule.steps:
            expected_kicks[step.opcode] = expected_kicks.get(step.opcode, 0) + 1
        assert dict(status.kicks) == expected_kicks
        for a, b in zip(got, golden.run_plan(plan, inputs)):
            np.testing.assert_array_equal(a, b, err_msg=f"{model} {name}")


@pytest.mark.parametrize("model", ["tiny_cnn_int8.tflite", "tiny_cnn_qdq.onnx"])
def test_machine_equals_golden_with_tiling(plans, model):
    """1.5 KiB of SRAM: row tiles with halo, channel blocks, pads only at true borders."""
    seen = set()
    for name, plan in plans(model).items():
        schedule = schedule_partition(plan, SMALL)
        for op, tiling in zip(plan.ops, schedule.tilings):
            assert tile_sram_bytes(op, tiling.rows, tiling.channels) <= SMALL.sram_bytes
        for step in schedule.steps:
            if isinstance(step, Kick) and step.opcode in (Opcode.CONV, Opcode.DWCONV):
                regs = dict(step.regs)
                if regs[Reg.KERNEL_H] == 3 and regs[Reg.STRIDE_H] == 1:
                    assert regs[Reg.IFM_H] == regs[Reg.OFM_H] + 2 - regs[Reg.PAD_TOP] - regs[Reg.PAD_BOTTOM]
                    seen.add(("pads", regs[Reg.PAD_TOP], regs[Reg.PAD_BOTTOM]))
                if regs[Reg.OFM_C] < regs[Reg.IFM_C] or step.opcode == Opcode.DWCONV and regs[Reg.IFM_C] < 16:
                    seen.add("channel block")
            if isinstance(step, Dma) and step.direction == Opcode.DMA_OUT and step.n1 > 1:
                seen.add("strided out")
        for k in range(3):
            inputs = random_inputs(plan, seed=k)
            status, got = run_on_machine(plan, schedule, inputs, SMALL)
            assert status.ok, f"{name}: {status}"
            for a, b in zip(got, golden.run_plan(plan, inputs)):
                np.testing.assert_array_equal(a, b, err_msg=f"{model} {name}")
    # first tile has the top pad only, last tile the bottom pad only, middle tiles neither
    assert {("pads", 1, 0), ("pads", 0, 1), ("pads", 0, 0), "channel block", "strided out"} <= seen


def test_machine_equals_golden_mobilenet_tiled(plans):
    plan = plans("mobilenet_v2_int8.tflite")["npu_subgraph_0"]
    hw = HwConfig(sram_bytes=4096)
    schedule = schedule_partition(plan, hw)
    assert any(t.rows < op.ofm.shape[0] for op, t in zip(plan.ops, schedule.tilings))
    inputs = random_inputs(plan, seed=3)
    status, got = run_on_machine(plan, schedule, inputs, hw)
    assert status.ok, str(status)
    np.testing.assert_array_equal(got[0], golden.run_plan(plan, inputs)[0])


def test_tiling_policy(plans):
    """Full channels whenever one full-channel row fits, and the fewest row tiles (each op by
    itself: no tensor resident; residency is tests/test_residency.py's)."""
    for hw in (DEFAULT, SMALL, HwConfig(sram_bytes=3000)):
        for plan in plans("tiny_cnn_qdq.onnx").values():
            schedule = schedule_partition(plan, hw, residency=False)
            for op, t in zip(plan.ops, schedule.tilings):
                rows = op.ofm.shape[1] if isinstance(op, FullyConnected) else op.ofm.shape[0]
                rows = 1 if isinstance(op, Mean) else rows
                channels = op.ofm.shape[2]
                assert tile_sram_bytes(op, t.rows, t.channels) <= hw.sram_bytes
                if tile_sram_bytes(op, 1, channels) <= hw.sram_bytes:
                    assert t.channels == channels
                tiles = -(-rows // t.rows)
                if tiles > 1:
                    assert tile_sram_bytes(op, -(-rows // (tiles - 1)), t.channels) > hw.sram_bytes
    plan = plans("tiny_cnn_int8.tflite")["npu_subgraph_0"]
    assert all(t == Tiling(op.ofm.shape[0], op.ofm.shape[2]) for op, t in
               zip(plan.ops, schedule_partition(plan, DEFAULT).tilings))  # fmt: skip


def test_layer_too_large_names_the_layer(plans):
    plan = plans("tiny_cnn_int8.tflite")["npu_subgraph_0"]
    with pytest.raises(LoweringError, match=r"relu6_s2_1/Relu6.*conv2d 32x32x3 -> 16x16x16.*needs \d+ bytes.*has 256"):
        schedule_partition(plan, HwConfig(sram_bytes=256))


# Hypothesis-generated ops: one op per partition, its tensors in IO regions, random layouts.

_i8 = st.integers(-128, 127)


@st.composite
def clamp(draw):
    lo, hi = sorted((draw(_i8), draw(_i8)))
    return draw(st.sampled_from([(-128, 127), (lo, hi)]))


@st.composite
def requant(draw, channels):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    bias = rng.integers(-(2**16), 2**16, channels).astype(np.int32)
    multiplier = rng.integers(2**30, 2**31, channels).astype(np.int32)
    shift = rng.integers(-14, 1, channels).astype(np.int32)
    return bias, multiplier, shift, rng


@st.composite
def window(draw, size_hw, max_k, max_s):
    H, W = size_hw
    kh, kw = draw(st.integers(1, max_k)), draw(st.integers(1, max_k))
    sh, sw = draw(st.integers(1, max_s)), draw(st.integers(1, max_s))
    pads = tuple(draw(st.integers(0, k - 1)) for k in (kh, kw, kh, kw))
    assume(H + pads[0] + pads[2] >= kh and W + pads[1] + pads[3] >= kw)
    oh = (H + pads[0] + pads[2] - kh) // sh + 1
    ow = (W + pads[1] + pads[3] - kw) // sw + 1
    return (kh, kw), (sh, sw), pads, (oh, ow)


def _ref(name, region, shape, layout):
    return TensorRef(name, region, 0, shape, layout)


@st.composite
def one_op_plans(draw):
    kind = draw(st.sampled_from(["conv", "dwconv", "fc", "avg", "max", "mean", "add", "mul", "lut"]))
    H, W, C = draw(st.integers(1, 9)), draw(st.integers(1, 9)), draw(st.integers(1, 12))
    layout = lambda: draw(st.sampled_from(["NHWC", "NCHW"]))  # noqa: E731
    zp = lambda: draw(_i8)  # noqa: E731
    io = int(Region.IO)
    if kind == "fc":
        H = 1
    ifm = _ref("x", io, (H, W, C), layout())
    inputs = [ifm]
    if kind in ("conv", "dwconv"):
        kernel, stride, pads, (oh, ow) = draw(window((H, W), 4, 3))
        oc = draw(st.integers(1, 12)) if kind == "conv" else C
        bias, m, s, rng = draw(requant(oc))
        ofm = _ref("y", io + 1, (oh, ow, oc), layout())
        wshape = (oc, *kernel, C) if kind == "conv" else (C, *kernel)
        weights = rng.integers(-128, 128, wshape).astype(np.int8)
        cls = Conv2D if kind == "conv" else DepthwiseConv2D
        op = cls(kind, ifm, ofm, weights, bias, m, s, zp(), zp(), stride, pads, *draw(clamp()))
    elif kind == "fc":
        oc = draw(st.integers(1, 12))
        bias, _, _, rng = draw(requant(oc))
        mantissa = rng.integers(2**52, 2**53, oc, dtype=np.int64)  # FC: a double scale below 1
        exponent = rng.integers(-72, -58, oc).astype(np.int32)
        ofm = _ref("y", io + 1, (1, W, oc), layout())
        weights = rng.integers(-128, 128, (oc, C)).astype(np.int8)
        op = FullyConnected("fc", ifm, ofm, weights, bias, mantissa, exponent, zp(), zp(), *draw(clamp()))
    elif kind in ("avg", "max"):
        kernel, stride, pads, (oh, ow) = draw(window((H, W), 5, 3))
        ofm = _ref("y", io + 1, (oh, ow, C), layout())
        op = Pool("pool", kind, ifm, ofm, kernel, stride, pads, *draw(clamp()))
    elif kind == "mean":
        m, s = nx.mean_params(draw(st.floats(0.01, 1.0)), draw(st.floats(0.01, 1.0)), H * W)
        ofm = _ref("y", io + 1, (1, 1, C), layout())
        op = Mean("mean", ifm, ofm, zp(), zp(), m, s, *draw(clamp()))
    elif kind in ("add", "mul"):
        broadcast = draw(st.booleans())  # IFM2 one channel vector
        ifm2 = _ref("x2", io + 1, (1, 1, C) if broadcast else (H, W, C), layout())
        inputs.append(ifm2)
        scales = draw(st.floats(0.01, 0.1)), draw(st.floats(0.01, 0.1)), draw(st.floats(0.02, 0.3))
        ofm = _ref("y", io + 2, (H, W, C), layout())
        if kind == "add":
            op = Add("add", ifm, ifm2, ofm, zp(), zp(), zp(), *nx.add_params(*scales), *draw(clamp()))
        else:
            op = Mul("mul", ifm, ifm2, ofm, zp(), zp(), zp(), *nx.mul_params(*scales), *draw(clamp()))
        op.broadcast = broadcast
    else:
        table = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).integers(-128, 128, 256).astype(np.int8)
        ofm = _ref("y", io + 1, (H, W, C), layout())
        op = Lut("lut", "random", ifm, ofm, table)

    def model_shape(ref):
        h, w, c = ref.shape
        return (1, h, w, c) if ref.layout == "NHWC" else (1, c, h, w)

    plan = PartitionPlan(
        "p",
        [IoTensor(r.name, model_shape(r), "int8", r) for r in inputs],
        [IoTensor("y", model_shape(op.ofm), "int8", op.ofm)],
        [op],
    )
    # SRAM between the smallest tile and the whole op, or a tiling chosen at random
    rows = op.ofm.shape[1] if kind == "fc" else op.ofm.shape[0]
    rows = 1 if kind == "mean" else rows
    channels = op.ofm.shape[2]
    if draw(st.booleans()):
        op.tiling = Tiling(draw(st.integers(1, rows)), draw(st.integers(1, channels)))
        hw = DEFAULT
    else:
        lo, hi = tile_sram_bytes(op, 1, 1), tile_sram_bytes(op, rows, channels)
        hw = HwConfig(sram_bytes=draw(st.integers(lo, hi)))
    return plan, hw


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(one_op_plans(), st.integers(0, 2**32 - 1))
def test_machine_equals_golden_random_ops(plan_hw, seed):
    plan, hw = plan_hw
    schedule = schedule_partition(plan, hw)
    words = schedule.words()
    assert decode(words) == schedule.steps
    inputs = random_inputs(plan, seed)
    status, got = run_on_machine(plan, schedule, inputs, hw)
    assert status.ok, str(status)
    np.testing.assert_array_equal(got[0], golden.run_plan(plan, inputs)[0])


# =============================================================================================
# (c) every error status, with its word index


@pytest.fixture(scope="module")
def small_stream(plans):
    """The tiny CNN's head (avg pool, mean, fully connected) and its bound regions."""
    plan = plans("tiny_cnn_int8.tflite", SPLIT_TINY)["npu_subgraph_1"]
    schedule = schedule_partition(plan, DEFAULT)
    return plan, schedule


def _run(words, plan, schedule, hw=DEFAULT, **kw):
    return Machine(hw).run(words, bind(plan, schedule, random_inputs(plan)), **kw)


def _expect(result, status: Status, index: int):
    assert (result.status, result.word_index) == (status, index), str(result)


def test_ok_status(small_stream):
    plan, schedule = small_stream
    words = schedule.words()
    _expect(_run(words, plan, schedule), Status.OK, len(words) - 1)


def test_header_errors(small_stream):
    plan, schedule = small_stream
    words = schedule.words()
    _expect(_run(np.r_[words[:1] ^ 1, words[1:]], plan, schedule), Status.BAD_MAGIC, 0)
    bad = words.copy()
    bad[1] = (isa.VERSION_MAJOR + 1) << 16
    _expect(_run(bad, plan, schedule), Status.BAD_VERSION, 1)
    bad[1] = VERSION + 1  # a newer minor version
    _expect(_run(bad, plan, schedule), Status.BAD_VERSION, 1)
    bad = words.copy()
    bad[2] += 1
    _expect(_run(bad, plan, schedule), Status.BAD_LENGTH, 2)
    _expect(_run(words[:-1], plan, schedule), Status.BAD_LENGTH, 2)
    _expect(_run(words[:2], plan, schedule), Status.BAD_LENGTH, 2)
    _expect(_run(words[:0], plan, schedule), Status.BAD_LENGTH, 0)


def _insert(words, at: int, new: list[int]) -> np.ndarray:
    body = [int(w) for w in words[HEADER_WORDS:]]
    k = at - HEADER_WORDS
    return with_header(body[:k] + new + body[k:])


def test_command_errors(small_stream):
    plan, schedule = small_stream
    words, starts = encode_with_starts(schedule.steps)
    at = starts[2]  # the third step begins here
    _expect(_run(_insert(words, at, [0x7E000000]), plan, schedule), Status.INVALID_OPCODE, at)
    _expect(_run(_insert(words, at, [isa.kick_word(Opcode.CONV) | 1]), plan, schedule), Status.INVALID_OPCODE, at)
    _expect(_run(_insert(words, at, [isa.set_reg_word(Reg.IFM_H) | 4, 1]), plan, schedule), Status.INVALID_OPCODE, at)
    unknown = (Opcode.SET_REG << isa.OPCODE_SHIFT) | (0x7F << isa.REG_SHIFT)
    _expect(_run(_insert(words, at, [unknown, 5]), plan, schedule), Status.INVALID_REGISTER, at)
    # no STOP: the stream ends; a SET_REG whose value word is missing
    _expect(_run(with_header([int(w) for w in words[HEADER_WORDS:-1]]), plan, schedule),
            Status.MISSING_STOP, len(words) - 1)  # fmt: skip
    _expect(_run(with_header([isa.set_reg_word(Reg.IFM_H)]), plan, schedule), Status.MISSING_STOP, 4)
    # stops at the first error: the kicks before it ran, nothing after
    result = _run(_insert(words, at, [0x7E000000]), plan, schedule)
    assert sum(result.kicks.values()) == 2


def test_command_budget(small_stream):
    plan, schedule = small_stream
    words = schedule.words()
    sixth = commands(words)[5][0]
    _expect(_run(words, plan, schedule, max_commands=5), Status.CYCLE_LIMIT, sixth)


def _dma_stream(*dmas: Dma):
    return list(dmas), encode(list(dmas))


def test_dma_errors(small_stream):
    plan, schedule = small_stream
    const = len(schedule.constants)
    sram = DEFAULT.sram_bytes
    cases = [
        (Dma(Opcode.DMA_IN, 9, 0, 0, 4), Status.INVALID_REGION),  # region not bound
        (Dma(Opcode.DMA_IN, 2**20, 0, 0, 4), Status.INVALID_REGION),
        (Dma(Opcode.DMA_OUT, int(Region.CONST), 0, 0, 4), Status.INVALID_REGION),  # CONST is read-only
        (Dma(Opcode.DMA_IN, int(Region.CONST), 0, sram - 4, 8), Status.ADDRESS_OUT_OF_RANGE),  # SRAM end
        (Dma(Opcode.DMA_IN, int(Region.CONST), const - 4, 0, 8), Status.ADDRESS_OUT_OF_RANGE),  # region end
        (Dma(Opcode.DMA_IN, int(Region.CONST), 4, 0, 8, 1, 1, -1), Status.ADDRESS_OUT_OF_RANGE),  # below 0
        (Dma(Opcode.DMA_IN, int(Region.CONST), 0, 0, 4, 2, 2, 1, const, 0), Status.ADDRESS_OUT_OF_RANGE),
        (Dma(Opcode.DMA_IN, int(Region.CONST), 0, 0, 0), Status.INVALID_PARAMETER),  # empty transfer
        (Dma(Opcode.DMA_IN, int(Region.CONST), 0, 0, 4, 2, 2, 1, 4, 8), Status.OK),  # a valid 3-D one
    ]
    for dma, status in cases:
        good = Dma(Opcode.DMA_IN, int(Region.CONST), 0, 0, 16)
        steps = [good, dma]
        words = encode(steps)
        expect_index = len(words) - 1 if status == Status.OK else kick_index(steps, 1)
        result = _run(words, plan, schedule)
        _expect(result, status, expect_index)
        assert result.kicks[Opcode.DMA_IN] == 1 + (status == Status.OK)


def _replace_kick(steps, opcode: Opcode, **changes):
    """The steps with the first ``opcode`` kick's registers changed; and that step's index."""
    k = next(i for i, s in enumerate(steps) if s.opcode == opcode)
    regs = dict(steps[k].regs) | {Reg[name]: v for name, v in changes.items()}
    return steps[:k] + [Kick.make(opcode, regs)] + steps[k + 1 :], k


@pytest.mark.parametrize(
    "opcode, changes, status",
    [
        (Opcode.AVGPOOL, {"OFM_H": 4}, Status.INVALID_PARAMETER),  # disagrees with the window
        (Opcode.AVGPOOL, {"STRIDE_W": 0}, Status.INVALID_PARAMETER),
        (Opcode.AVGPOOL, {"PAD_TOP": 2}, Status.INVALID_PARAMETER),  # a window entirely in padding
        (Opcode.AVGPOOL, {"ACT_MIN": 5, "ACT_MAX": 4}, Status.INVALID_PARAMETER),
        (Opcode.AVGPOOL, {"IFM_C": 0}, Status.INVALID_PARAMETER),
        (Opcode.AVGPOOL, {"OFM_ADDR": DEFAULT.sram_bytes - 8}, Status.ADDRESS_OUT_OF_RANGE),
        (Opcode.AVGPOOL, {"IFM_ADDR": 2**32 - 1}, Status.ADDRESS_OUT_OF_RANGE),
        (Opcode.AVGPOOL, {"OFM_ADDR": 16}, Status.INVALID_PARAMETER),  # output overlaps the input
        (Opcode.MEAN, {"OFM_SHIFT": 31}, Status.INVALID_PARAMETER),
        (Opcode.MEAN, {"IFM_ZERO_POINT": 128}, Status.INVALID_PARAMETER),
        (Opcode.FC, {"IFM_H": 2}, Status.INVALID_PARAMETER),
        (Opcode.FC, {"REQUANT_ADDR": 0xF2}, Status.INVALID_PARAMETER),  # not 4-byte aligned
        (Opcode.FC, {"REQUANT_ADDR": 0x00}, Status.INVALID_PARAMETER),  # weights read as shifts
        (Opcode.FC, {"WEIGHT_ADDR": DEFAULT.sram_bytes}, Status.ADDRESS_OUT_OF_RANGE),
    ],
)
def test_kick_errors(small_stream, opcode, changes, status):
    plan, schedule = small_stream
    steps, k = _replace_kick(schedule.steps, opcode, **changes)
    result = _run(encode(steps), plan, schedule)
    _expect(result, status, kick_index(steps, k))
    assert result.kicks[opcode] == 0


# =============================================================================================
# (d) fuzz: never raises, always finishes


def _check_finishes(words, regions, hw=FUZZ_HW):
    result = Machine(hw).run(words, regions, max_commands=10_000)
    assert isinstance(result.status, Status)
    assert 0 <= result.word_index <= len(words)
    try:
        decode(words)
    except DecodeError:
        pass
    disassemble(words)
    return result


def _fuzz_regions():
    rng = np.random.default_rng(0)
    return {r: rng.integers(0, 256, 300, dtype=np.uint8) for r in range(4)}


command_words = st.one_of(
    st.tuples(st.sampled_from(list(Reg)), st.one_of(st.integers(0, 40), st.integers(0, 2**32 - 1))).map(
        lambda rv: [isa.set_reg_word(rv[0]), rv[1]]
    ),
    st.sampled_from(sorted(KICK_REGS) + [Opcode.NOP, Opcode.STOP]).map(lambda op: [isa.kick_word(op)]),
    st.integers(0, 2**32 - 1).map(lambda w: [w]),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(command_words, max_size=60), st.booleans())
def test_fuzz_random_streams(cmds, header):
    body = [w for c in cmds for w in c]
    words = with_header(body) if header else np.asarray(body, np.uint32)
    _check_finishes(words, _fuzz_regions())


@st.composite
def plausible_steps(draw):
    """Kicks and DMAs with small register values, so that many pass their checks and compute."""
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        opcode = draw(st.sampled_from(sorted(KICK_REGS)))
        values = {}
        for reg in KICK_REGS[opcode]:
            if reg in isa.SIGNED_REGS:
                values[reg] = draw(st.integers(-40, 40))
            elif reg.name.endswith("_ADDR"):
                values[reg] = draw(st.integers(0, FUZZ_HW.sram_bytes + 100))
            else:
                values[reg] = draw(st.integers(0, 12))
        if opcode in (Opcode.DMA_IN, Opcode.DMA_OUT):
            steps.append(Dma(opcode, *values.values()))
        else:
            steps.append(Kick.make(opcode, values))
    return steps


@settings(max_examples=300, deadline=None)
@given(plausible_steps())
def test_fuzz_plausible_kicks(steps):
    result = _check_finishes(encode(steps), _fuzz_regions())
    assert result.status != Status.OK or sum(result.kicks.values()) == len(steps)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_mutated_streams(plans, data):
    plan = plans("tiny_cnn_int8.tflite", SPLIT_TINY)[data.draw(st.sampled_from(["npu_subgraph_0", "npu_subgraph_1"]))]
    schedule = schedule_partition(plan, FUZZ_HW)
    words = [int(w) for w in schedule.words()]
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(words) - 1))
        how = data.draw(st.sampled_from(["flip", "word", "delete", "insert", "small"]))
        if how == "flip":
            words[i] ^= 1 << data.draw(st.integers(0, 31))
        elif how == "word":
            words[i] = data.draw(st.integers(0, 2**32 - 1))
        elif how == "small":
            words[i] = data.draw(st.integers(0, 300))
        elif how == "delete":
            del words[i]
        else:
            words.insert(i, data.draw(st.integers(0, 2**32 - 1)))
    if data.draw(st.booleans()) and len(words) >= HEADER_WORDS:
        words[2] = len(words)  # keep the header's count right so execution gets further
    _check_finishes(np.asarray(words, np.uint32), bind(plan, schedule, random_inputs(plan)))


# =============================================================================================
# (e) the doc


def test_isa_doc_has_current_tables():
    doc = (Path(__file__).parents[1] / "docs" / "isa.md").read_text(encoding="utf-8")
    assert isa.markdown_tables() in doc, "docs/isa.md: paste npu_byoc.arch.isa.markdown_tables() output"


def test_every_opcode_register_and_status_is_documented():
    assert set(isa.OPCODE_DOC) == set(Opcode)
    assert set(isa.REG_DOC) == set(Reg)
    assert set(isa.STATUS_DOC) == set(Status)
    for op, regs in KICK_REGS.items():
        assert len(set(regs)) == len(regs), op


def test_worked_example_is_the_current_stream(plans):
    """docs/isa.md §6 shows op_softmax_beta_int8's first partition as the compiler emits it today."""
    doc = (Path(__file__).parents[1] / "docs" / "isa.md").read_text(encoding="utf-8")
    listing = schedule_partition(plans("op_softmax_beta_int8.tflite")["npu_subgraph_0"]).disassembly()
    assert "```\n" + listing + "\n```" in doc, "docs/isa.md §6: paste the disassembly again"
