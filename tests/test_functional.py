"""The C functional model (npu_byoc/runtime/csrc/npu_functional.cc) against the golden model
of the stream (npu_byoc.runtime.machine.Machine).

Evidence:

* (a) functional == machine, bit for bit in every region, with the same status, word index,
  command count and kicks: on the schedules of every fixture partition (default SRAM, and SRAM
  so small that row tiles, channel blocks and strided transfers occur; outputs also == the
  golden model on whole tensors) and on hypothesis-generated one-op plans of every op kind;
* (b) every error status, from streams and regions mutated for it — every register of every
  kick swept over boundary values, header and command errors, requantize tables, unbound and
  short regions, the command budget — gives the machine's status and word index;
* (c) fuzz: thousands of random, plausible and mutated streams run in a subprocess (a crash
  fails the test instead of killing pytest), and again under AddressSanitizer and
  UndefinedBehaviorSanitizer; every run returns a status; a sample is compared with the machine;
* (d) the analytic cycle model: hand-computed numbers for npu_byoc.arch.cycles, and the
  C model's cycles == cycles.stream_cycles for every schedule above;
* the driver API npu_submit() itself, through ctypes.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import textwrap
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_byoc.arch import isa
from npu_byoc.codegen.overlap import WAIT
from npu_byoc.arch.encoder import Dma, Kick, encode, encode_with_starts, from_word
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.arch.config import HwConfig
from npu_byoc.arch.isa import HEADER_WORDS, KICK_REGS, MAGIC, VERSION, Opcode, Reg, Region, Status
from npu_byoc.arch import cycles
from npu_byoc.runtime import golden
from npu_byoc.runtime.functional import FunctionalNpu, build_library, functional_sources, include_dir, submit
from npu_byoc.runtime.machine import Machine

from .conftest import ALL_MODELS
from .test_isa import DEFAULT, FUZZ_HW, SMALL, bind, one_op_plans, random_inputs

ROOT = Path(__file__).parents[1]
SRAM = DEFAULT.sram_bytes
# the default NPU with a weight decoder four times its 16-byte port (load, then decode: only
# then do the tiny CNN's loads decode faster than they copy): its schedules decode CONST loads
# (DMA_IN_DECODE), and both models accept the decode opcodes, so the sweeps below reach them too
DECODER = replace(DEFAULT, weight_decoder_bytes_per_cycle=64)


# =============================================================================================
# Helpers


def copy_regions(regions: dict) -> dict:
    return {r: np.array(buf, copy=True) for r, buf in regions.items()}


def machine_run(hw: HwConfig, words, regions: dict, **kw):
    """Machine(hw).run, or None where the machine raises instead of returning a status.

    Known machine.py bug: it sizes operands with ``int(np.prod(shape))``, which wraps in int64
    when three shape registers multiply to 2^63 or more; the wrapped size can pass the SRAM
    range check and the reshape then raises ValueError. docs/isa.md asks for exact arithmetic
    and ADDRESS_OUT_OF_RANGE, which the functional model returns (test_shape_product_overflow).
    """
    try:
        return Machine(hw).run(words, regions, **kw)
    except ValueError as err:
        if "cannot reshape" not in str(err):
            raise
        return None


def run_both(words, regions: dict, hw: HwConfig = DECODER, **kw):
    """Run ``words`` on the machine and on the functional model, each on its own copy of
    ``regions``; assert they agree on everything; return the machine's result and regions."""
    words = np.asarray(words, np.uint32)
    mine, theirs = copy_regions(regions), copy_regions(regions)
    expected = machine_run(hw, words, mine, **kw)
    got = FunctionalNpu(hw).run(words, theirs, **kw)
    if expected is None:  # the machine's int64 overflow: the spec's status instead
        assert got.status == Status.ADDRESS_OUT_OF_RANGE, str(got)
        return got, got, theirs
    what = f"machine: {expected}; functional: {got.status.name} at word {got.word_index}"
    assert (got.status, got.word_index) == (expected.status, expected.word_index), what
    assert got.commands == expected.commands, what
    assert got.kicks == expected.kicks, what
    for r in regions:
        np.testing.assert_array_equal(theirs[r], mine[r], err_msg=f"region {r} ({what})")
    return expected, got, mine


def with_header(body) -> np.ndarray:
    return np.asarray([MAGIC, VERSION, HEADER_WORDS + len(body), *[int(w) for w in body]], np.uint32)


# =============================================================================================
# (a) functional == machine == golden on the fixtures and on random one-op plans


@pytest.mark.parametrize("model", ALL_MODELS)
@pytest.mark.parametrize("small", [False, True], ids=["default", "small"])
def test_functional_equals_machine_on_fixtures(plans, model, small):
    for name, plan in plans(model).items():
        # 1.5 KiB forces row tiles, channel blocks and strided DMA on the tiny CNNs; MobileNet's
        # rows need 4 KiB
        hw = (HwConfig(sram_bytes=4096) if "mobilenet" in model else SMALL) if small else DEFAULT
        schedule = schedule_partition(plan, hw)
        inputs = random_inputs(plan, seed=7)
        expected, got, regions = run_both(schedule.words(), bind(plan, schedule, inputs), hw)
        assert expected.ok, f"{model} {name}: {expected}"
        assert got.cycles == cycles.stream_cycles(schedule.steps, hw)
        outputs = [regions[io.ref.region].view(np.int8).reshape(io.shape) for io in plan.outputs]
        for a, b in zip(outputs, golden.run_plan(plan, inputs)):
            np.testing.assert_array_equal(a, b, err_msg=f"{model} {name}")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(one_op_plans(), st.integers(0, 2**32 - 1))
def test_functional_equals_machine_random_ops(plan_hw, seed):
    plan, hw = plan_hw
    schedule = schedule_partition(plan, hw)
    inputs = random_inputs(plan, seed)
    expected, got, regions = run_both(schedule.words(), bind(plan, schedule, inputs), hw)
    assert expected.ok, str(expected)
    assert got.cycles == cycles.stream_cycles(schedule.steps, hw)
    out = regions[plan.outputs[0].ref.region].view(np.int8).reshape(plan.outputs[0].shape)
    np.testing.assert_array_equal(out, golden.run_plan(plan, inputs)[0])


def test_functional_runs_the_whole_mobilenet_partition(plans):
    """The whole MobileNetV2 partition (10.7 M MACs) in one stream: the golden model's bytes.
    (Its speed is bench/build.py's figure; tests do not time.)"""
    plan = plans("mobilenet_v2_int8.tflite")["npu_subgraph_0"]
    schedule = schedule_partition(plan, DEFAULT)
    inputs = random_inputs(plan)
    regions = bind(plan, schedule, inputs)
    assert FunctionalNpu(DEFAULT).run(schedule.words(), regions).ok
    io = plan.outputs[0]
    got = regions[io.ref.region][io.ref.offset:io.ref.offset + io.ref.nbytes].view(np.int8).reshape(io.shape)
    np.testing.assert_array_equal(got, golden.run_plan(plan, inputs)[0])


# =============================================================================================
# (b) every error status: the same status and word index as the machine


@pytest.fixture(scope="module")
def tiny(plans):
    """The tiny CNN's partitions, the MUL fixture's, the SQUARED_DIFFERENCE one's and the ONNX
    LayerNormalization one's (every opcode between them), scheduled for the default SRAM with sequential DMA, so that each op's steps
    stand alone (op_streams makes the background DMA variants itself)."""
    out = []
    for model in ("tiny_cnn_int8.tflite", "op_mul_int8.tflite", "sqdiff_int8.tflite", "layernorm_qdq.onnx"):
        for name, plan in plans(model).items():
            schedule = schedule_partition(plan, DEFAULT, overlapped=False)
            out.append((plan, schedule, bind(plan, schedule, random_inputs(plan, seed=2))))
    for plan in plans("tiny_cnn_int8.tflite").values():  # last: the decode DMAs (op_streams takes the first of each opcode)
        schedule = schedule_partition(plan, DECODER, overlapped=False)
        out.append((plan, schedule, bind(plan, schedule, random_inputs(plan, seed=2))))
    return out


def op_streams(tiny):
    """Per opcode, the steps of the first op that kicks it (an op's steps are self-contained:
    nothing stays in SRAM between ops), the index of that kick, and the regions."""
    found = {}
    for plan, schedule, regions in tiny:
        for k in range(len(plan.ops)):
            steps = [s for s, j in zip(schedule.steps, schedule.step_op) if j == k]
            for i, step in enumerate(steps):
                found.setdefault(step.opcode, (steps, i, regions))
                if isinstance(step, Dma):  # the same transfer in the background, waited for
                    bg = replace(step, background=True)
                    stream = steps[:i] + [bg, WAIT] + steps[i + 1 :]
                    found.setdefault(bg.opcode, (stream, i, regions))
                    found.setdefault(Opcode.WAIT_DMA, (stream, i + 1, regions))
    assert set(found) == {op for op, regs in KICK_REGS.items() if regs}, "the tiny CNN, MUL, SQUARED_DIFFERENCE and LayerNormalization fixtures no longer kick every opcode"
    return found


def with_registers(step, words: dict[Reg, int]):
    """``step`` with some registers set to raw 32-bit words."""
    values = dict(step.registers()) | {reg: from_word(reg, w) for reg, w in words.items()}
    if isinstance(step, Dma) and step.decoded:  # DMA_DECODE_BYTES 0 is a raw DMA_IN's: tests/test_weight_codec.py
        region, ext, sram, n0, decoded = (values[r] for r in KICK_REGS[step.opcode])
        return Dma(step.direction, region, ext, sram, n0, decoded=decoded or 1, background=step.background)
    if isinstance(step, Dma):
        return Dma(step.direction, *(values[r] for r in KICK_REGS[step.opcode]), background=step.background)
    return Kick.make(step.opcode, values)


def boundary_words(reg: Reg, value: int) -> set[int]:
    """Register words at and around every limit a check compares with."""
    limits = [0, 1, 2, 3, 4, 11, 12, 16, 17, 30, 31, 32, 127, 128, 4096, 4097, 65536, 65537]
    limits += [SRAM - 256, SRAM - 1, SRAM, SRAM + 1, 2**31 - 1, 2**31, 2**32 - 1]
    limits += [-1, -2, -31, -32, -128, -129, -(2**31)]
    limits += [value - 1, value + 1, 2 * value, value + 16, value - 16]
    return {v & 0xFFFFFFFF for v in limits}


def test_every_register_of_every_kick(tiny):
    """Each register a kick reads, swept over boundary values: the same status at the same
    word (and the same memory) as the machine."""
    seen: Counter = Counter()
    for opcode, (steps, k, regions) in sorted(op_streams(tiny).items()):
        for reg, value in steps[k].registers():
            for word in sorted(boundary_words(reg, value)):
                mutated = steps[:k] + [with_registers(steps[k], {reg: word})] + steps[k + 1 :]
                expected, _, _ = run_both(encode(mutated), regions)
                seen[(opcode, expected.status)] += 1
    statuses = {status for _, status in seen}
    assert {Status.OK, Status.INVALID_REGION, Status.ADDRESS_OUT_OF_RANGE, Status.INVALID_PARAMETER} <= statuses
    # WAIT_DMA checks nothing: every DMA_WAIT_PENDING is valid
    assert {status for op, status in seen if op == Opcode.WAIT_DMA} == {Status.OK}
    for opcode in (op for op, regs in KICK_REGS.items() if regs and op != Opcode.WAIT_DMA):  # every kick's checks were reached, and ran
        assert seen[(opcode, Status.OK)] and (seen[(opcode, Status.INVALID_PARAMETER)] or
                                              seen[(opcode, Status.INVALID_REGION)]), opcode  # fmt: skip


def test_register_pairs_of_every_kick(tiny):
    """Two registers at once, so that checks later in a kick's order are reached with an
    earlier one also failing (which one wins is the order of docs/isa.md §3)."""
    rng = np.random.default_rng(5)
    for opcode, (steps, k, regions) in sorted(op_streams(tiny).items()):
        regs = dict(steps[k].registers())
        if len(regs) < 2:  # WAIT_DMA
            continue
        for _ in range(60):
            a, b = rng.choice(list(regs), 2, replace=False)
            words = {Reg(a): int(rng.choice(sorted(boundary_words(Reg(a), regs[a])))),
                     Reg(b): int(rng.choice(sorted(boundary_words(Reg(b), regs[b]))))}  # fmt: skip
            mutated = steps[:k] + [with_registers(steps[k], words)] + steps[k + 1 :]
            run_both(encode(mutated), regions)


def test_requantize_table_errors(tiny):
    """A requantize record's shift outside [-31, 30]; an FC record's exponent above -53 or bits
    23..21 of its third word set (read from SRAM, loaded from CONST)."""
    fc_words = {(-60 & 0xFF) << 24 | 0x1FFFFF: True, (-128 & 0xFF) << 24: True, (-53 & 0xFF) << 24: True,
                (-52 & 0xFF) << 24: False, 127 << 24: False, (-60 & 0xFF) << 24 | 1 << 21: False}
    for opcode in (Opcode.CONV, Opcode.DWCONV, Opcode.FC):
        steps, k, regions = op_streams(tiny)[opcode]
        kick = dict(steps[k].registers())
        load = next(s for s in steps[:k] if isinstance(s, Dma) and s.sram_addr == kick[Reg.REQUANT_ADDR])
        channels = kick[Reg.OFM_C]
        words = fc_words if opcode == Opcode.FC else {v: -31 <= v <= 30 for v in (31, -32, 2**31 - 1, 30, -31)}
        for channel in sorted({0, channels // 2, channels - 1}):
            for word, ok in words.items():
                bad = copy_regions(regions)
                at = load.ext_addr + channel * isa.REQUANT_RECORD_BYTES + 8
                bad[int(Region.CONST)][at : at + 4] = np.frombuffer(struct.pack("<I", word & 0xFFFFFFFF), np.uint8)
                expected, _, _ = run_both(encode(steps), bad)
                assert expected.status == (Status.OK if ok else Status.INVALID_PARAMETER), (opcode, hex(word))


def test_header_command_and_budget_errors(tiny):
    plan, schedule, regions = tiny[1]
    words, starts = encode_with_starts(schedule.steps)
    words = [int(w) for w in words]
    at = starts[2]
    body = words[HEADER_WORDS:]

    def insert(new):
        k = at - HEADER_WORDS
        return with_header(body[:k] + new + body[k:])

    bad_version = list(words)
    bad_version[1] = VERSION + 1
    streams = [
        np.asarray(words, np.uint32),
        np.asarray([words[0] ^ 1, *words[1:]], np.uint32),  # BAD_MAGIC
        np.asarray(bad_version, np.uint32),  # BAD_VERSION (newer minor)
        np.asarray([MAGIC, (isa.VERSION_MAJOR + 1) << 16], np.uint32),
        np.asarray(words[:-1], np.uint32),  # BAD_LENGTH: the header's count
        np.asarray(words[:2], np.uint32),  # BAD_LENGTH: incomplete header
        np.asarray(words[:1], np.uint32),
        np.asarray([], np.uint32),
        np.asarray([MAGIC, VERSION, 2**32 - 1], np.uint32),
        insert([0x7E000000]),  # INVALID_OPCODE
        insert([isa.kick_word(Opcode.CONV) | 1]),  # reserved bits of a kick
        insert([isa.set_reg_word(Reg.IFM_H) | 4, 1]),  # reserved bits of a SET_REG
        insert([isa.kick_word(Opcode.SET_REG) | (0x7F << 16), 5]),  # INVALID_REGISTER
        insert([isa.kick_word(Opcode.NOP)] * 3),  # NOPs are fine
        insert([isa.kick_word(Opcode.STOP)]),  # an early STOP
        with_header(body[:-1]),  # MISSING_STOP
        with_header([isa.set_reg_word(Reg.IFM_H)]),  # a SET_REG without its value word
        with_header([isa.kick_word(Opcode.SET_REG) | (0x7F << 16)]),  # bad register beats missing value
        with_header([]),
        with_header(body + [0xDEADBEEF, 0x12345678]),  # words after STOP are not executed
    ]
    statuses = set()
    for stream in streams:
        expected, _, _ = run_both(stream, regions)
        statuses.add(expected.status)
    for budget in (0, 1, 5, 6, 40):  # CYCLE_LIMIT at the command after the budget
        expected, _, _ = run_both(words, regions, max_commands=budget)
        statuses.add(expected.status)
    # OUT_OF_MEMORY is the host's, not the stream's (test_hw_binding)
    assert statuses == set(Status) - {Status.INVALID_REGION, Status.ADDRESS_OUT_OF_RANGE, Status.INVALID_PARAMETER,
                                      Status.OUT_OF_MEMORY, Status.BAD_ENCODING}  # BAD_ENCODING: test_weight_codec.py


def test_region_binding_errors(tiny):
    """Unbound regions, short regions, regions beyond MAX_REGIONS: as the machine."""
    plan, schedule, regions = tiny[0]
    words = schedule.words()
    statuses = set()
    for r in regions:
        without = {k: v for k, v in regions.items() if k != r}
        statuses.add(run_both(words, without)[0].status)
        short = copy_regions(regions)
        short[r] = short[r][: max(short[r].size - 1, 0)].copy()
        statuses.add(run_both(words, short)[0].status)
        empty = copy_regions(regions) | {r: np.zeros(0, np.uint8)}
        statuses.add(run_both(words, empty)[0].status)
    extra = copy_regions(regions) | {isa.MAX_REGIONS: np.zeros(8, np.uint8)}
    statuses.add(run_both(words, extra)[0].status)
    dma = Dma(Opcode.DMA_OUT, isa.MAX_REGIONS, 0, 0, 4)
    statuses.add(run_both(encode([dma]), extra)[0].status)
    assert {Status.OK, Status.INVALID_REGION, Status.ADDRESS_OUT_OF_RANGE} <= statuses


def test_dma_edge_cases(tiny):
    """Strided, negative-stride, repeated-address and huge transfers."""
    _, schedule, regions = tiny[1]
    const = len(schedule.constants)
    scratch = regions[int(Region.SCRATCH)].size
    cases = [
        Dma(Opcode.DMA_IN, 0, 0, 0, 4, 2, 2, 1, 4, 8),
        Dma(Opcode.DMA_IN, 0, const - 1, 0, 5, 3, 1, -1, -5, 0),
        Dma(Opcode.DMA_IN, 0, 40, 0, 4, 4, 4, 3, -7, 11),
        Dma(Opcode.DMA_IN, 0, 0, 0, 16, 4, 1, 0, 0, 0),  # one byte, 64 times
        Dma(Opcode.DMA_IN, 0, 3, SRAM - 17, 17),
        Dma(Opcode.DMA_IN, 0, 3, SRAM - 16, 17),
        Dma(Opcode.DMA_IN, 0, 0, 0, 2**32 - 1, 2**32 - 1, 2**32 - 1, 1, 1, 1),
        Dma(Opcode.DMA_IN, 0, 2**32 - 1, 0, 1),
        Dma(Opcode.DMA_IN, 0, 0, 0, 2, 1, 1, -(2**31), 0, 0),
        Dma(Opcode.DMA_IN, 0, 0, 0, 2, 2, 2, 2**31 - 1, 2**31 - 1, 2**31 - 1),
        Dma(Opcode.DMA_IN, 0, 2**32 - 1, 0, 3, 1, 1, -(2**31), 0, 0),
        Dma(Opcode.DMA_OUT, 1, 0, 0, 8, 8, 1, 0, 1, 0),  # repeated addresses: the last write wins
        Dma(Opcode.DMA_OUT, 1, scratch - 1, 0, 4, 4, 2, -1, -4, 0),
        Dma(Opcode.DMA_OUT, 1, 0, 100, 16, 1, 1, 2),
    ]
    for dma in cases:
        setup = Dma(Opcode.DMA_IN, 0, 0, 0, min(const, 256))
        run_both(encode([setup, dma, Dma(Opcode.DMA_OUT, 1, 0, 0, min(scratch, 64))]), regions)


def shape_overflow_stream():
    """A LUT whose OFM_H * OFM_W * OFM_C is 6 * (2^31 - 1) * (2^32 - 129): 2^64 - 6·2^39 + ...,
    far outside the SRAM."""
    regs = dict.fromkeys(KICK_REGS[Opcode.LUT], 0) | {Reg.IFM_ADDR: 256, Reg.LUT_ADDR: 0, Reg.OFM_ADDR: 512,
                                                     Reg.OFM_H: 6, Reg.OFM_W: 2**31 - 1, Reg.OFM_C: 2**32 - 129}
    return encode([Kick.make(Opcode.LUT, regs)])


def test_shape_product_overflow():
    """Sizes are exact: a shape whose product exceeds 2^63 is out of range (docs/isa.md §2)."""
    words = shape_overflow_stream()
    result = FunctionalNpu().run(words, {})
    assert (result.status, result.word_index) == (Status.ADDRESS_OUT_OF_RANGE, len(words) - 2)


def test_machine_shape_product_overflow():
    words = shape_overflow_stream()
    result = Machine(DEFAULT).run(words, {})
    assert (result.status, result.word_index) == (Status.ADDRESS_OUT_OF_RANGE, len(words) - 2)


# =============================================================================================
# (c) fuzz in a subprocess: never a crash, always a status


def _random_body(rng) -> list[int]:
    body = []
    for _ in range(int(rng.integers(0, 60))):
        kind = rng.integers(0, 3)
        if kind == 0:
            reg = Reg(rng.choice([int(r) for r in Reg]))
            value = int(rng.integers(0, 41)) if rng.random() < 0.5 else int(rng.integers(0, 2**32))
            body += [isa.set_reg_word(reg), value]
        elif kind == 1:
            body.append(isa.kick_word(rng.choice(sorted(KICK_REGS) + [Opcode.NOP, Opcode.STOP])))
        else:
            body.append(int(rng.integers(0, 2**32)))
    return body


def _plausible_steps(rng, hw) -> list:
    """Kicks and DMAs with small register values, so that many pass their checks."""
    steps = []
    for _ in range(int(rng.integers(1, 7))):
        opcode = Opcode(rng.choice(sorted(KICK_REGS)))
        values = {}
        for reg in KICK_REGS[opcode]:
            if reg in isa.SIGNED_REGS:
                values[reg] = int(rng.integers(-40, 41))
            elif reg.name.endswith("_ADDR"):
                values[reg] = int(rng.integers(0, hw.sram_bytes + 101))
            else:
                values[reg] = int(rng.integers(0, 13))
        steps.append(_step(opcode, values))
    return steps


def _step(opcode: Opcode, values: dict):
    if opcode in isa.DECODE_DMA:
        region, ext, sram, n0, decoded = (values[r] for r in KICK_REGS[opcode])
        return Dma(Opcode.DMA_IN, region, ext, sram, n0, decoded=max(decoded, 1), background=opcode in isa.ASYNC_DMA)
    if opcode in isa.DMA_OPCODES:
        direction = isa.ASYNC_DMA.get(opcode, opcode)
        return Dma(direction, *(values[r] for r in KICK_REGS[opcode]), background=opcode in isa.ASYNC_DMA)
    return Kick.make(opcode, values)


def _operand_bytes(opcode: Opcode, v: dict) -> dict[Reg, int]:
    """The SRAM bytes behind each address register of a kick (docs/isa.md §3)."""
    R = Reg
    if opcode in isa.DECODE_DMA:
        return {R.DMA_SRAM_ADDR: v[R.DMA_DECODE_BYTES]}
    if opcode in isa.DMA_OPCODES:
        return {R.DMA_SRAM_ADDR: v[R.DMA_N0] * v[R.DMA_N1] * v[R.DMA_N2]}
    ifm = v.get(R.IFM_H, 0) * v.get(R.IFM_W, 0) * v.get(R.IFM_C, 0)
    ofm = v.get(R.OFM_H, 0) * v.get(R.OFM_W, 0) * v.get(R.OFM_C, 0)
    if opcode in (Opcode.ADD, Opcode.LUT):
        out = {R.IFM_ADDR: ofm, R.OFM_ADDR: ofm}
        return out | ({R.IFM2_ADDR: ofm} if opcode == Opcode.ADD else {R.LUT_ADDR: 256})
    if opcode == Opcode.MEAN:
        return {R.IFM_ADDR: ifm, R.OFM_ADDR: v[R.IFM_C]}
    out = {R.IFM_ADDR: ifm, R.OFM_ADDR: ofm}
    if opcode in (Opcode.CONV, Opcode.DWCONV, Opcode.FC):
        oc, taps = v[R.OFM_C], v.get(R.KERNEL_H, 1) * v.get(R.KERNEL_W, 1)
        weights = {Opcode.CONV: oc * taps * v[R.IFM_C], Opcode.DWCONV: oc * taps, Opcode.FC: oc * v[R.IFM_C]}
        out |= {R.WEIGHT_ADDR: weights[opcode], R.REQUANT_ADDR: 12 * oc}
    return out


def _edge_steps(rng, hw, region_bytes: int) -> list:
    """Kicks with consistent geometry and valid parameters, operands packed from the end of
    the SRAM, one of them (or a DMA's external range) moved by -1, 0 or +1 byte: an off-by-one
    anywhere reads or writes just outside the SRAM or the region."""
    R = Reg
    steps = []
    for _ in range(int(rng.integers(1, 5))):
        opcode = Opcode(rng.choice(sorted(set(KICK_REGS) - isa.DECODE_DMA)))  # decode DMAs: test_weight_codec.py
        v = {reg: 0 for reg in KICK_REGS[opcode]}
        small = lambda lo=1, hi=5: int(rng.integers(lo, hi + 1))  # noqa: E731
        if opcode == Opcode.WAIT_DMA:
            steps.append(_step(opcode, {R.DMA_WAIT_PENDING: small(0, 4)}))
            continue
        if opcode in isa.DMA_OPCODES:
            v |= {R.DMA_EXT_REGION: small(0, 3), R.DMA_N0: small(), R.DMA_N1: small(), R.DMA_N2: small()}
            v |= {R.DMA_STRIDE0: small(-6, 6), R.DMA_STRIDE1: small(-20, 20), R.DMA_STRIDE2: small(-60, 60)}
            counts = (v[R.DMA_N2], v[R.DMA_N1], v[R.DMA_N0])
            strides = (v[R.DMA_STRIDE2], v[R.DMA_STRIDE1], v[R.DMA_STRIDE0])
            low = sum(min(0, (c - 1) * s) for c, s in zip(counts, strides))
            high = sum(max(0, (c - 1) * s) for c, s in zip(counts, strides))
            delta = small(-1, 1)
            v[R.DMA_EXT_ADDR] = max(0, region_bytes - 1 - high + delta if rng.random() < 0.5 else -low + delta)
        else:
            kernel, stride = (small(1, 3), small(1, 3)), (small(1, 2), small(1, 2))
            pads = [small(0, k - 1) for k in (kernel[0], kernel[1], kernel[0], kernel[1])]
            ifm = [small(), small(), small(1, 8)]
            v |= {R.IFM_H: ifm[0], R.IFM_W: ifm[1], R.IFM_C: ifm[2], R.ACT_MIN: -128, R.ACT_MAX: 127}
            if R.KERNEL_H in v:
                oh = (ifm[0] + pads[0] + pads[2] - kernel[0]) // stride[0] + 1
                ow = (ifm[1] + pads[1] + pads[3] - kernel[1]) // stride[1] + 1
                v |= dict(zip((R.KERNEL_H, R.KERNEL_W, R.STRIDE_H, R.STRIDE_W), (*kernel, *stride)))
                v |= dict(zip((R.PAD_TOP, R.PAD_LEFT, R.PAD_BOTTOM, R.PAD_RIGHT), pads))
                v |= {R.OFM_H: max(oh, 1), R.OFM_W: max(ow, 1)}
                v[R.OFM_C] = small(1, 8) if opcode == Opcode.CONV else ifm[2]
            elif opcode == Opcode.FC:
                v |= {R.IFM_H: 1, R.OFM_H: 1, R.OFM_W: ifm[1], R.OFM_C: small(1, 8)}
            elif R.OFM_H in v:
                v |= {R.OFM_H: ifm[0], R.OFM_W: ifm[1], R.OFM_C: ifm[2]}
            for reg in (R.IFM_SHIFT, R.IFM2_SHIFT, R.OFM_SHIFT):
                if reg in v:
                    v[reg] = small(-20, 0)
            for reg in (R.IFM_MULTIPLIER, R.IFM2_MULTIPLIER, R.OFM_MULTIPLIER):
                if reg in v:
                    v[reg] = int(rng.integers(2**30, 2**31))
            if R.LEFT_SHIFT in v:
                v[R.LEFT_SHIFT] = 20
            v = {reg: value for reg, value in v.items() if reg in KICK_REGS[opcode]}
        # operands packed down from the end of the SRAM, 4-aligned; one moved by -1, 0 or +1
        sizes = _operand_bytes(opcode, v)
        top = hw.sram_bytes
        for reg in sorted(sizes, key=lambda r: rng.random()):
            top = (top - sizes[reg]) & ~3
            v[reg] = max(top, 0)
        moved = list(sizes)[int(rng.integers(0, len(sizes)))]
        v[moved] = max(v[moved] + small(-1, 1) * (4 if moved == R.REQUANT_ADDR else 1), 0)
        steps.append(_step(opcode, v))
    return steps


def _mutate(rng, words: list[int]) -> list[int]:
    words = list(words)
    for _ in range(int(rng.integers(1, 5))):
        if not words:
            break
        i = int(rng.integers(0, len(words)))
        how = rng.integers(0, 5)
        if how == 0:
            words[i] ^= 1 << int(rng.integers(0, 32))
        elif how == 1:
            words[i] = int(rng.integers(0, 2**32))
        elif how == 2:
            words[i] = int(rng.integers(0, 301))
        elif how == 3:
            del words[i]
        else:
            words.insert(i, int(rng.integers(0, 2**32)))
    if rng.random() < 0.5 and len(words) >= HEADER_WORDS:
        words[2] = len(words)  # keep the header's count right so execution gets further
    return words


def fuzz_cases(tiny_fuzz, n_random: int, n_plausible: int, n_mutated: int, seed: int = 0):
    """(hw, words, regions) cases: random words, plausible kicks and kicks at the edges of the
    memories, mutated real streams."""
    rng = np.random.default_rng(seed)
    cases, edges = [], []

    def small_regions():
        return {r: rng.integers(0, 256, 300, dtype=np.uint8) for r in range(4)}

    for _ in range(n_random):
        body = _random_body(rng)
        words = with_header(body) if rng.random() < 0.8 else np.asarray(body, np.uint32)
        cases.append((FUZZ_HW, words, small_regions()))
    for k in range(n_plausible):
        if k % 2:
            cases.append((FUZZ_HW, encode(_plausible_steps(rng, FUZZ_HW)), small_regions()))
        else:
            edges.append(len(cases))
            cases.append((FUZZ_HW, encode(_edge_steps(rng, FUZZ_HW, 300)), small_regions()))
    for _ in range(n_mutated):
        words, regions = tiny_fuzz[int(rng.integers(0, len(tiny_fuzz)))]
        regions = copy_regions(regions)
        if rng.random() < 0.1:  # unbind or shorten a region
            r = int(rng.choice(list(regions)))
            if rng.random() < 0.5:
                del regions[r]
            else:
                regions[r] = regions[r][: int(rng.integers(0, regions[r].size + 1))].copy()
        cases.append((FUZZ_HW, np.asarray(_mutate(rng, words), np.uint32), regions))
    return cases, set(edges)  # and which are the edge-of-memory cases


CASES_MAGIC = 0x5A5A5546  # "FUZZ"
UNBOUND = 0xFFFFFFFF


def write_cases(path: Path, cases) -> None:
    """The case file the fuzz runners read: per case its SRAM size, words and 16 regions."""
    out = [struct.pack("<II", CASES_MAGIC, len(cases))]
    for hw, words, regions in cases:
        words = np.asarray(words, np.uint32)
        out.append(struct.pack("<QI", hw.sram_bytes, words.size) + words.astype("<u4").tobytes())
        for r in range(isa.MAX_REGIONS):
            buf = regions.get(r)
            out.append(struct.pack("<I", UNBOUND if buf is None else buf.size))
            if buf is not None:
                out.append(np.asarray(buf, np.uint8).tobytes())
    path.write_bytes(b"".join(out))


# Reads the case file, runs every case on the functional model, writes (status, word_index).
PY_RUNNER = textwrap.dedent(
    """
    import struct, sys
    import numpy as np
    from npu_byoc.arch.config import HwConfig
    from npu_byoc.arch.isa import Status
    from npu_byoc.runtime.functional import FunctionalNpu

    data = open(sys.argv[1], "rb").read()
    magic, count = struct.unpack_from("<II", data, 0)
    pos, results = 8, []
    npus = {}
    for _ in range(count):
        sram, n = struct.unpack_from("<QI", data, pos); pos += 12
        words = np.frombuffer(data, "<u4", n, pos).astype(np.uint32); pos += 4 * n
        regions = {}
        for r in range(16):
            (size,) = struct.unpack_from("<I", data, pos); pos += 4
            if size != 0xFFFFFFFF:
                regions[r] = np.frombuffer(data, np.uint8, size, pos).copy(); pos += size
        npu = npus.setdefault(sram, FunctionalNpu(HwConfig(sram_bytes=sram)))
        res = npu.run(words, regions, max_commands=10_000)
        assert isinstance(res.status, Status) and 0 <= res.word_index <= n, (res, n)
        results.append((int(res.status), res.word_index))
    np.save(sys.argv[2], np.asarray(results, np.int64))
    """
)


@pytest.fixture(scope="module")
def tiny_fuzz(plans):
    out = []
    for plan in plans("tiny_cnn_int8.tflite").values():
        schedule = schedule_partition(plan, FUZZ_HW)
        out.append(([int(w) for w in schedule.words()], bind(plan, schedule, random_inputs(plan))))
    return out


def test_fuzz_never_crashes(tmp_path, tiny_fuzz):
    """3000 streams on the functional model in a subprocess; the edge-of-memory kicks and a
    sample of the others also on the machine."""
    cases, edges = fuzz_cases(tiny_fuzz, 1000, 1000, 1000, seed=11)
    write_cases(tmp_path / "cases.bin", cases)
    build_library()  # build here, so that the subprocess's time is the fuzz's
    proc = subprocess.run([sys.executable, "-c", PY_RUNNER, str(tmp_path / "cases.bin"), str(tmp_path / "out.npy")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 0, f"the fuzz subprocess died (return code {proc.returncode}):\n{proc.stderr[-3000:]}"
    results = np.load(tmp_path / "out.npy")
    assert len(results) == len(cases)
    statuses = Counter(Status(int(s)).name for s, _ in results)
    assert len(statuses) >= 8, statuses  # the fuzz reaches deep into the checks
    for k in sorted(set(range(0, len(cases), 7)) | edges):  # the same status and index as the machine
        hw, words, regions = cases[k]
        expected = machine_run(hw, words, copy_regions(regions), max_commands=10_000)
        if expected is None:  # machine.py's int64 overflow (see machine_run)
            assert results[k][0] == Status.ADDRESS_OUT_OF_RANGE
            continue
        assert (int(expected.status), expected.word_index) == tuple(results[k]), f"case {k}: {expected}"


SANITIZER_HARNESS = textwrap.dedent(
    """
    // Runs the fuzz case file through npu_functional_submit, built with ASan and UBSan: a bad
    // memory access or an undefined operation aborts with a report.
    #include <cstdio>
    #include <cstring>
    #include <vector>
    #include "npu_driver.h"
    typedef struct npu_functional_config {
        uint64_t sram_bytes; uint32_t array_rows, array_cols, max_kernel, max_stride, max_channels,
        max_pool_window, max_pool_stride, max_mean_elements, max_fc_features, dma_bytes_per_cycle, dma_queue_depth;
        uint32_t fm_mem[7], const_mem[7];  // npu_memory_t
        uint32_t weight_decoder_bytes_per_cycle, layernorm_unit;
        uint64_t max_commands, max_cycles;
    } npu_functional_config_t;
    extern "C" uint32_t npu_functional_submit(const npu_functional_config_t *, const uint32_t *, size_t,
                                              const npu_buffer_t *, size_t, npu_result_t *, uint64_t *);
    int main(int argc, char **argv) {
        if (argc < 2) return 2;
        FILE *f = std::fopen(argv[1], "rb");
        if (!f) return 2;
        std::vector<unsigned char> data;
        unsigned char chunk[65536];
        size_t got;
        while ((got = std::fread(chunk, 1, sizeof chunk, f)) > 0) data.insert(data.end(), chunk, chunk + got);
        std::fclose(f);
        size_t pos = 0;
        auto u32 = [&]() { uint32_t v; std::memcpy(&v, &data[pos], 4); pos += 4; return v; };
        auto u64 = [&]() { uint64_t v; std::memcpy(&v, &data[pos], 8); pos += 8; return v; };
        u32();
        const uint32_t count = u32();
        unsigned long counts[16] = {0};
        for (uint32_t k = 0; k < count; ++k) {
            npu_functional_config_t cfg = {u64(), NPU_ARRAY_ROWS, NPU_ARRAY_COLS, NPU_MAX_KERNEL, NPU_MAX_STRIDE,
                NPU_MAX_CHANNELS, NPU_MAX_POOL_WINDOW, NPU_MAX_POOL_STRIDE, NPU_MAX_MEAN_ELEMENTS,
                NPU_MAX_FC_FEATURES, NPU_DMA_BYTES_PER_CYCLE, NPU_DMA_QUEUE_DEPTH,
                {NPU_FM_MEM_BYTES_PER_CYCLE, NPU_FM_MEM_CLOCK_DIVIDER, NPU_FM_MEM_READ_LATENCY, NPU_FM_MEM_WRITE_LATENCY, NPU_FM_MEM_BURST_BYTES, NPU_FM_MEM_MAX_READS, NPU_FM_MEM_MAX_WRITES},
                {NPU_CONST_MEM_BYTES_PER_CYCLE, NPU_CONST_MEM_CLOCK_DIVIDER, NPU_CONST_MEM_READ_LATENCY, NPU_CONST_MEM_WRITE_LATENCY, NPU_CONST_MEM_BURST_BYTES, NPU_CONST_MEM_MAX_READS, NPU_CONST_MEM_MAX_WRITES},
                NPU_WEIGHT_DECODER_BYTES_PER_CYCLE, NPU_LAYERNORM_UNIT, 10000, UINT64_MAX};
            const uint32_t n = u32();
            uint32_t *words = new uint32_t[n ? n : 1];  // exactly sized: ASan sees any overrun
            std::memcpy(words, &data[pos], 4 * (size_t)n);
            pos += 4 * (size_t)n;
            npu_buffer_t regions[16];
            for (int r = 0; r < 16; ++r) {
                const uint32_t size = u32();
                regions[r].data = nullptr;
                regions[r].size = 0;
                if (size != 0xFFFFFFFFu) {
                    unsigned char *buf = new unsigned char[size ? size : 1];
                    std::memcpy(buf, &data[pos], size);
                    pos += size;
                    regions[r].data = buf;
                    regions[r].size = size;
                }
            }
            npu_result_t res;
            uint64_t kicks[256] = {0};
            const uint32_t status = npu_functional_submit(&cfg, n ? words : nullptr, n, regions, 16, &res, kicks);
            if (status > NPU_STATUS_CYCLE_LIMIT || res.word_index > n) return 3;
            counts[status] += 1;
            for (int r = 0; r < 16; ++r) delete[] static_cast<unsigned char *>(regions[r].data);
            delete[] words;
        }
        for (int s = 0; s < 16; ++s) std::printf("%lu ", counts[s]);
        std::printf("\\n");
        return 0;
    }
    """
)


def test_fuzz_under_sanitizers(tmp_path, tiny_fuzz):
    """The same kind of cases through a harness built with -fsanitize=address,undefined."""
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++")
    harness = tmp_path / "harness.cc"
    harness.write_text(SANITIZER_HARNESS)
    exe = tmp_path / "harness"
    cmd = [cxx, "-O1", "-g", "-std=c++17", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
           "-Wall", "-Wextra", "-Werror", f"-I{include_dir()}", str(harness), *map(str, functional_sources()),
           "-o", str(exe)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 and "sanitize" in proc.stderr and "cannot find" in proc.stderr:
        pytest.skip("the sanitizer runtimes are not installed")
    assert proc.returncode == 0, proc.stderr
    cases, _ = fuzz_cases(tiny_fuzz, 600, 600, 600, seed=12)
    write_cases(tmp_path / "cases.bin", cases)
    run = subprocess.run([str(exe), str(tmp_path / "cases.bin")], capture_output=True, text=True, timeout=300,
                         env={"ASAN_OPTIONS": "detect_leaks=1", "UBSAN_OPTIONS": "print_stacktrace=1"})  # fmt: skip
    assert run.returncode == 0, f"return code {run.returncode}:\n{run.stderr[-4000:]}"
    counts = [int(c) for c in run.stdout.split()]
    assert sum(counts) == len(cases) and sum(1 for c in counts if c) >= 8, counts


# =============================================================================================
# (d) the analytic cycle model


def test_cycle_formulas_by_hand():
    """The RTL's cycles (docs/cosim.md §5) worked by hand, without the fetch of the kick word."""
    hw = HwConfig(array_rows=16, array_cols=16)
    conv = {Reg.OFM_H: 8, Reg.OFM_W: 8, Reg.OFM_C: 32, Reg.IFM_C: 16, Reg.KERNEL_H: 3, Reg.KERNEL_W: 3}
    # 2 channel blocks x 64 pixels = 128 items, 16 columns: 8 blocks of K = 3*3*16 = 144 taps;
    # 14 fixed + table scan ceil(32/16) + last drain 16 + 7 blocks of max(144, 16) + the last 144
    assert cycles.kick_cycles(Opcode.CONV, conv, hw) == 14 + 2 + 16 + 7 * 144 + 144
    # K = 9 < R = 16: a block lasts its drain, 16 cycles
    assert cycles.kick_cycles(Opcode.DWCONV, conv | {Reg.OFM_C: 17}, hw) == 14 + 2 + 16 + 7 * 16 + 9
    fc = {Reg.OFM_W: 1, Reg.OFM_C: 10, Reg.IFM_C: 100}
    assert cycles.kick_cycles(Opcode.FC, fc, hw) == 14 + 1 + 16 + 0 + 100
    pool = {Reg.OFM_H: 4, Reg.OFM_W: 5, Reg.OFM_C: 33, Reg.KERNEL_H: 2, Reg.KERNEL_W: 3}
    assert cycles.kick_cycles(Opcode.AVGPOOL, pool, hw) == 8 + 20 * 3 * 6
    assert cycles.kick_cycles(Opcode.MEAN, {Reg.IFM_H: 7, Reg.IFM_W: 7, Reg.IFM_C: 20}, hw) == 8 + 49 * 2
    assert cycles.kick_cycles(Opcode.ADD, {Reg.OFM_H: 3, Reg.OFM_W: 3, Reg.OFM_C: 3}, hw) == 8 + 2  # 27 bytes, 16 lanes
    assert cycles.kick_cycles(Opcode.LUT, {Reg.OFM_H: 1, Reg.OFM_W: 1, Reg.OFM_C: 16}, hw) == 8 + 256 // 16 + 1
    assert cycles.dma_cycles(100) == 5 + 7  # contiguous: 16-byte beats
    assert cycles.dma_cycles(5, 3, 2, stride0=7) == 5 + 30  # strided: one byte per beat
    wide = HwConfig(array_rows=32, array_cols=8)
    assert cycles.kick_cycles(Opcode.CONV, conv, wide) == 14 + 4 + 32 + 7 * 144 + 144
    # column folding: 6 pixels x 5 channel blocks fill 24 columns with 4 weight lanes, then 6
    assert cycles.mac_blocks(6, 5, 32) == 2
    # 36 pixels x 2 channel blocks on 32 columns: 32 | 4 + 28 | 8
    assert cycles.mac_blocks(36, 2, 32) == 3


def test_cycles_count_fetch_and_kicks():
    """3 header words + one cycle per word of each executed command + the kicks' cycles; the
    failing command and the words after STOP cost nothing."""
    nops = with_header([0, 0, isa.kick_word(Opcode.STOP), 0xFFFFFFFF])
    result = FunctionalNpu().run(nops, {})
    assert (result.status, result.cycles, result.commands) == (Status.OK, 6, 3)
    dma = Dma(Opcode.DMA_IN, 0, 0, 0, 100)
    words = encode([dma])  # SET_REG of DMA_N0, DMA_N1, DMA_N2, DMA_STRIDE0; DMA_IN; STOP
    assert len(words) == 3 + 4 * 2 + 1 + 1
    result = FunctionalNpu().run(words, {0: np.zeros(100, np.uint8)})
    assert result.cycles == 3 + 4 * 2 + 1 + 1 + (5 + 7) == cycles.stream_cycles([dma])
    result = FunctionalNpu().run(words, {})  # the DMA fails: INVALID_REGION
    assert (result.status, result.cycles, result.commands) == (Status.INVALID_REGION, 3 + 4 * 2, 4)


def test_cycle_budget():
    words = with_header([0] * 10 + [isa.kick_word(Opcode.STOP)])
    result = FunctionalNpu().run(words, {}, max_cycles=7)  # exceeded after the 5th NOP
    assert (result.status, result.word_index, result.commands) == (Status.CYCLE_LIMIT, 8, 5)


# =============================================================================================
# The driver API itself


def test_npu_submit_driver_api(tiny):
    plan, schedule, regions = tiny[1]
    words = schedule.words()
    mine = copy_regions(regions)
    expected = Machine(DEFAULT).run(words, mine)
    buffers = [np.array(regions.get(r), copy=True) if r in regions else None for r in range(max(regions) + 1)]
    status, index, cyc, commands = submit(words, buffers)
    assert (status, index, commands) == (expected.status, expected.word_index, expected.commands)
    assert cyc == cycles.stream_cycles(schedule.steps)
    for r, buf in enumerate(buffers):
        if buf is not None:
            np.testing.assert_array_equal(buf, mine[r])
    # unbound regions and empty streams are statuses, not crashes
    assert submit(words, [])[0] == Status.INVALID_REGION
    assert submit(np.zeros(0, np.uint32), [])[:2] == (Status.BAD_LENGTH, 0)


def test_concurrent_submissions_are_independent(tiny):
    """Each call has its own machine state: threads running different streams at once (ctypes
    releases the GIL) give the results of running them one by one."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = []
    for seed in range(8):
        plan, schedule, _ = tiny[seed % len(tiny)]
        jobs.append((schedule.words(), bind(plan, schedule, random_inputs(plan, seed))))
    expected = []
    for words, regions in jobs:
        mine = copy_regions(regions)
        expected.append((FunctionalNpu().run(words, mine), mine))

    def work(job):
        words, regions = job
        theirs = copy_regions(regions)
        return FunctionalNpu().run(words, theirs), theirs

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(work, jobs * 4))
    for k, (got, regions) in enumerate(results):
        want, want_regions = expected[k % len(jobs)]
        assert (got.status, got.word_index, got.cycles) == (want.status, want.word_index, want.cycles)
        for r in regions:
            np.testing.assert_array_equal(regions[r], want_regions[r])


def test_regions_in_any_memory_layout(tiny):
    """Non-contiguous views are written back; read-only buffers are refused except CONST."""
    plan, schedule, regions = tiny[1]
    words = schedule.words()
    expected = copy_regions(regions)
    Machine(DEFAULT).run(words, expected)
    strided = {r: np.repeat(buf, 2)[::2] for r, buf in regions.items()}
    assert not strided[2].flags.c_contiguous
    const = regions[0].copy()
    const.flags.writeable = False
    assert FunctionalNpu().run(words, strided | {0: const}).ok
    for r in regions:
        np.testing.assert_array_equal(strided[r], expected[r])
    readonly = copy_regions(regions)
    readonly[1].flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        FunctionalNpu().run(words, readonly)


def test_driver_header_compiles_as_c99_and_cxx(tmp_path):
    """npu_driver.h is C99 and C++ (the generated code and the backends include it)."""
    src = tmp_path / "use.c"
    src.write_text('#include "npu_driver.h"\nint use(void) { npu_result_t r; return (int)npu_submit(0, 0, 0, 0, &r); }\n')
    for compiler, flags in (("gcc", ["-std=c99", "-x", "c"]), ("g++", ["-std=c++17", "-x", "c++"])):
        if shutil.which(compiler) is None:
            continue
        cmd = [compiler, *flags, "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{include_dir()}", "-c", str(src),
               "-o", str(tmp_path / "use.o")]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_functional_model_compiles_without_warnings(tmp_path):
    cmd = ["g++", "-O2", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wconversion", "-Wsign-conversion",
           f"-I{include_dir()}", "-c", *map(str, functional_sources()), "-o", str(tmp_path / "f.o")]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_cache_is_keyed_and_atomic(tmp_path, monkeypatch):
    from npu_byoc.util import cache

    monkeypatch.setenv("NPU_BYOC_CACHE", str(tmp_path / "c"))
    assert cache.cache_dir() == tmp_path / "c" and (tmp_path / "c").is_dir()
    a = cache.content_key([b"x", "y"])
    assert a == cache.content_key([b"x", "y"]) != cache.content_key([b"xy"])
    dest = tmp_path / "c" / "f.bin"
    cache.atomic_write(dest, b"one")
    with pytest.raises(RuntimeError), cache.atomic_output(dest) as tmp:
        tmp.write_bytes(b"partial")
        raise RuntimeError
    assert dest.read_bytes() == b"one" and sorted(p.name for p in dest.parent.iterdir()) == ["f.bin", "f.bin.sha256"]
    lib = build_library()  # a fresh cache: built there, then reused
    assert lib.parent == tmp_path / "c" and lib.name.startswith("npu_functional-") and build_library() == lib
    assert build_library(["-DNPU_FUNCTIONAL_SRAM_BYTES=4096"]) != lib  # other flags, another entry
