"""DMA overlapped with compute (ISA 1.1: DMA_IN_ASYNC, DMA_OUT_ASYNC, WAIT_DMA).

The four executable specs agree exactly on overlapped streams: the golden model (whole
tensors), the stream machine, the C functional model and the RTL under Verilator give the same
bytes, and the RTL's cycles — per command in its trace and per run — equal the analytic model
(``cycles.command_timeline`` / ``stream_cycles``) and the C model's count. Hand-derived cycle
counts pin the timing rules of docs/cosim.md §5.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from npu_byoc.arch.encoder import Dma, Kick, encode
from npu_byoc.codegen.overlap import WAIT, races, touched, wait
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.arch.config import DEFAULT_CONFIG, HwConfig, configure
from npu_byoc.arch.isa import Opcode, Reg, Region, Status
from npu_byoc.arch import cycles
from npu_byoc.runtime import golden
from npu_byoc.runtime import verilator as V
from npu_byoc.runtime.functional import FunctionalNpu
from npu_byoc.runtime.machine import Machine

from .conftest import ALL_MODELS
from .test_isa import bind, one_op_plans, random_inputs

HW = DEFAULT_CONFIG



@pytest.fixture(scope="module")
def rtl() -> V.VerilatorNpu:
    return V.VerilatorNpu(HW)


def copies(regions):
    return {r: a.copy() for r, a in regions.items()}


def assert_specs_agree(rtl, plan, schedule, inputs, hw=HW, what=""):
    """RTL == machine == C model (bytes, status), RTL cycles == the analytic model == the C
    model's, per command and per run; the outputs == the golden model's."""
    words = schedule.words()
    regions = bind(plan, schedule, inputs)
    ours, mine, theirs = copies(regions), copies(regions), copies(regions)
    got = rtl.run(words, ours, trace=True)
    ref = Machine(hw).run(words, mine)
    c = FunctionalNpu(hw).run(words, theirs)
    assert got.status == ref.status == c.status == Status.OK, f"{what}: {got} / {ref} / {c}"
    for r in regions:
        np.testing.assert_array_equal(ours[r], mine[r], err_msg=f"{what} region {r}")
        np.testing.assert_array_equal(theirs[r], mine[r], err_msg=f"{what} region {r}")
    executed = [e for e in got.trace if e.opcode != Opcode.STOP]
    assert [e.opcode for e in executed] == [s.opcode for s in schedule.steps], what
    assert [e.cycles for e in executed] == cycles.command_timeline(schedule.steps, hw), what
    assert got.cycles == c.cycles == cycles.stream_cycles(schedule.steps, hw), what
    for io, expected in zip(plan.outputs, golden.run_plan(plan, inputs)):
        np.testing.assert_array_equal(mine[io.ref.region].view(np.int8).reshape(io.shape), expected, err_msg=what)
    return got


def test_hand_derived_timing(rtl):
    """A background DMA of 100 bytes (5 + 7 cycles) then STOP: 3 header + 4 SET_REGs (8), the
    DMA decoded at 11 and done with its checks at 15; the engine idle from 11 + 12 = 23, so
    STOP acts at 23: 24 cycles (the synchronous DMA: 3 + 8 + 13 + 1 = 25). A WAIT_DMA before
    STOP acts at 23 (24), STOP at 24: 25. A CONST region of 100 bytes."""
    dma = Dma(Opcode.DMA_IN, int(Region.CONST), 0, 0, 100)
    bg = Dma(Opcode.DMA_IN, int(Region.CONST), 0, 0, 100, background=True)
    const = {int(Region.CONST): np.arange(100, dtype=np.uint8)}
    for steps, want in (([dma], 25), ([bg], 24), ([bg, WAIT], 25)):
        words = encode(steps)
        got = rtl.run(words, copies(const), trace=True)
        assert got.ok and got.cycles == want == cycles.stream_cycles(steps), steps
        assert FunctionalNpu(HW).run(words, copies(const)).cycles == want
    # Two background DMAs in a row (queue depth 4): the second is queued at 15 (4 cycles) and
    # its copy starts when the first completes, its checks done: it completes at
    # max(15 + 12, 23 + 12 - 2) = 33. WAIT_DMA 0 at 19 waits for it: 33 + 1 - 19 = 15; STOP
    # at 34: 35 cycles. WAIT_DMA 1 (after its SET_REG DMA_WAIT_PENDING at 19, 20; a trace entry
    # leaves SET_REGs out) waits for the first only: 23 + 1 - 21 = 3; STOP at 24 waits for the
    # second: 34.
    for pending, trace, total in ((0, [4, 4, 15], 35), (1, [4, 4, 3], 34)):
        steps = [bg, bg, wait(pending)]
        got = rtl.run(encode(steps), copies(const), trace=True)
        assert [e.cycles for e in got.trace[-4:-1]] == trace == cycles.command_timeline(steps)
        assert got.cycles == cycles.stream_cycles(steps) == total
        assert FunctionalNpu(HW).run(encode(steps), copies(const)).cycles == total
    # WAIT_DMA 0 right after WAIT_DMA 1: its SET_REG DMA_WAIT_PENDING = 0 (24, 25) lands on the
    # edge the WAIT_DMA is decoded (26), which must see 0: it waits for e_2 = 33: 8 cycles.
    steps = [bg, bg, wait(1), WAIT]
    got = rtl.run(encode(steps), copies(const), trace=True)
    assert [e.cycles for e in got.trace[-5:-1]] == [4, 4, 3, 8] == cycles.command_timeline(steps)
    assert got.cycles == cycles.stream_cycles(steps) == 35
    # A full queue: Q + 1 transfers of 1000 bytes (5 + 63 = 68 cycles each; Q = 8 by default).
    # The first completes at 11 + 68 = 79, each next one 66 later (queued); the first Q are
    # issued 4 cycles apart (11, 15, ...), the last, decoded at 11 + 4Q, waits for room until
    # e_1 = 79: 79 + 4 - (11 + 4Q) = 72 - 4Q cycles (40). STOP waits for e_{Q+1} = 79 + 66Q:
    # 80 + 66Q cycles (608).
    q = HW.dma_queue_depth
    big = Dma(Opcode.DMA_IN, int(Region.CONST), 0, 0, 1000, background=True)
    steps = [big] * (q + 1)
    got = rtl.run(encode(steps), {int(Region.CONST): np.arange(1000, dtype=np.uint8)}, trace=True)
    assert [e.cycles for e in got.trace[:-1]] == [4] * q + [72 - 4 * q] == cycles.command_timeline(steps)
    assert got.cycles == cycles.stream_cycles(steps) == 80 + 66 * q


def test_background_dma_errors_name_the_dma(rtl):
    """A background DMA's checks fail at its own index, nothing copied, in every model."""
    bad = Dma(Opcode.DMA_OUT, int(Region.CONST), 0, 0, 16, background=True)  # DMA_OUT to CONST
    ok = Dma(Opcode.DMA_IN, int(Region.CONST), 0, 64, 32, background=True)
    words = encode([ok, bad])
    const = {int(Region.CONST): np.arange(100, dtype=np.uint8)}
    got = rtl.run(words, copies(const))
    ref = Machine(HW).run(words, copies(const))
    c = FunctionalNpu(HW).run(words, copies(const))
    assert got.status == ref.status == c.status == Status.INVALID_REGION
    assert got.word_index == ref.word_index == c.word_index == len(words) - 2


def _lut(ifm: int, table: int, ofm: int) -> Kick:
    """LUT over 32 bytes (1 x 1 x 32)."""
    return Kick.make(Opcode.LUT, {Reg.IFM_ADDR: ifm, Reg.OFM_ADDR: ofm, Reg.OFM_H: 1, Reg.OFM_W: 1, Reg.OFM_C: 32,
                                  Reg.LUT_ADDR: table})  # fmt: skip


def _raced(rtl, steps, regions):
    """Run a racing stream on every spec: RTL == machine == C model (status, regions); returns
    the RTL's result and regions and how many cycles longer the RTL held the last kick than the
    cycle model counts (the interlock's stall)."""
    words = encode(steps)
    ours, mine, theirs = copies(regions), copies(regions), copies(regions)
    got = rtl.run(words, ours, trace=True)
    ref = Machine(HW).run(words, mine)
    c = FunctionalNpu(HW).run(words, theirs)
    assert got.status == ref.status == c.status == Status.OK, (got, ref, c)
    for r in regions:
        np.testing.assert_array_equal(ours[r], mine[r], err_msg=f"region {r}: RTL vs machine")
        np.testing.assert_array_equal(theirs[r], mine[r], err_msg=f"region {r}: C model vs machine")
    stall = got.trace[-2].cycles - cycles.command_timeline(steps)[-1]
    return ours, stall


def test_the_interlock_holds_a_kick_on_a_dma_in_flight(rtl):
    """No WAIT_DMA between a background DMA of 1000 bytes (5 + 63 = 68 cycles) and a LUT on
    its bytes: the LUT waits for the copy, so every spec gets the sequential result. The DMA
    is decoded at t; the LUT's word, after its S SET_REGs, at t + 4 + 2S, its checks end 3
    cycles later, and it is held until the copy completes at t + 68: 61 - 2S cycles."""
    rng = np.random.default_rng(5)
    const = rng.integers(0, 256, 1000, dtype=np.uint8)
    regions = {int(Region.CONST): const, int(Region.SCRATCH): np.zeros(1000, np.uint8)}
    load = Dma(Opcode.DMA_IN, int(Region.CONST), 0, 0, 1000, background=True)

    # A DMA_IN writes the table the LUT reads (its last 256 bytes: copied last).
    steps = [load, _lut(0, 744, 2000), Dma(Opcode.DMA_OUT, int(Region.SCRATCH), 0, 2000, 32)]
    out, _ = _raced(rtl, steps, regions)
    x = const[:32].view(np.int8).astype(int)
    np.testing.assert_array_equal(out[int(Region.SCRATCH)][:32], const[744:][x + 128])  # the table as loaded
    setregs = (len(encode(steps[:2])) - len(encode(steps[:1])) - 1) // 2
    _, stall = _raced(rtl, steps[:2], regions)
    assert stall == 61 - 2 * setregs > 0

    # A DMA_OUT reads the bytes the LUT writes (its last 32): the region gets them as they were.
    export = Dma(Opcode.DMA_OUT, int(Region.SCRATCH), 0, 0, 1000, background=True)
    steps = [replace(load, background=False), export, _lut(2000, 3000, 968)]
    out, stall = _raced(rtl, steps, regions)
    np.testing.assert_array_equal(out[int(Region.SCRATCH)], const)
    assert stall > 0

    # A DMA_OUT reading what the LUT only reads holds nothing: the cycle model's count.
    _, stall = _raced(rtl, [replace(load, background=False), export, _lut(0, 3000, 2000)], regions)
    assert stall == 0


def test_races_names_the_kicks_the_interlock_would_hold():
    load = Dma(Opcode.DMA_IN, int(Region.CONST), 0, 0, 1000, background=True)  # SRAM [0, 1000)
    other = Dma(Opcode.DMA_IN, int(Region.CONST), 0, 4000, 100, background=True)
    export = Dma(Opcode.DMA_OUT, int(Region.SCRATCH), 0, 0, 1000, background=True)
    on_table, clear = _lut(2000, 744, 3000), _lut(2000, 2500, 3000)  # the table in / clear of the load
    assert races([load, on_table], 8) == [1]
    assert races([load, clear], 8) == []
    assert races([load, WAIT, on_table], 8) == []
    assert races([load, other, wait(1), on_table], 8) == []  # the load is the older: waited for
    assert races([other, load, wait(1), on_table], 8) == [3]
    assert races([load, other, on_table], 2) == [2] and races([load, other, on_table], 1) == []  # room for other
    assert races([export, _lut(0, 2500, 3000)], 8) == []  # both read [0, 32)
    assert races([export, _lut(2000, 2500, 968)], 8) == [1]  # the LUT writes what the DMA_OUT reads
    assert races([load, replace(other, background=False), on_table], 8) == []  # a synchronous DMA waits for all


@pytest.mark.slow
@pytest.mark.parametrize("model", ALL_MODELS)
def test_overlapped_fixture_partitions(rtl, plans, model):
    for hw in (configure(dma_overlap=1), configure(dma_overlap=1, sram_bytes=16384)):
        for name, plan in plans(model).items():
            schedule = schedule_partition(plan, hw)
            assert any(s.opcode in (Opcode.DMA_IN_ASYNC, Opcode.DMA_OUT_ASYNC) for s in schedule.steps)
            assert_specs_agree(rtl, plan, schedule, random_inputs(plan, 3), HW, f"{model} {name} {hw.sram_bytes}")


def test_overlap_never_costs_cycles(plans):
    """The overlapped schedule is never slower than the sequential one but for its extra
    stream words (an async DMA and a WAIT_DMA cost what the synchronous DMA does; a buffer
    moved to the top of SRAM may need SET_REGs), and much faster on MobileNetV2."""
    for model in ALL_MODELS:
        for plan in plans(model).values():
            seq, ovl = schedule_partition(plan, HW, overlapped=False), schedule_partition(plan, HW, overlapped=True)
            extra = max(0, len(ovl.words()) - len(seq.words()))
            assert cycles.stream_cycles(ovl.steps) <= cycles.stream_cycles(seq.steps) + extra, (model, plan.name)
    plan = plans("mobilenet_v2_int8.tflite")["npu_subgraph_0"]
    assert cycles.stream_cycles(schedule_partition(plan, HW, overlapped=True).steps) < 0.75 * 80504


def test_no_kick_touches_a_transfer_in_flight(plans):
    """The overlap pass's invariant, checked independently on the fixture schedules (queues
    of 1, 4 and 8): no kick writes the SRAM bytes of a transfer that may be outstanding, nor
    reads bytes a DMA_IN in flight writes. Outstanding: the last ``depth`` transfers issued,
    less those a WAIT_DMA has waited for (all but its DMA_WAIT_PENDING latest)."""
    for depth in (1, 4, 8):
        hw = configure(dma_overlap=1, dma_queue_depth=depth)
        for model in ALL_MODELS:
            for plan in plans(model).values():
                in_flight: list = []
                for s in schedule_partition(plan, hw).steps:
                    if isinstance(s, Dma):
                        in_flight = (in_flight + [s])[-depth:]
                    elif s.opcode == Opcode.WAIT_DMA:
                        pending = s[Reg.DMA_WAIT_PENDING]
                        in_flight = in_flight[max(0, len(in_flight) - pending) :] if pending else []
                    else:
                        kr, kw = touched(s)
                        for dma in in_flight:
                            dr, dw = touched(dma)
                            for lo, hi in dw:
                                assert all(hi <= a or b <= lo for a, b in kr + kw), (model, depth, s, dma)
                            for lo, hi in dr:
                                assert all(hi <= a or b <= lo for a, b in kw), (model, depth, s, dma)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(one_op_plans())
def test_random_one_op_plans_overlapped(rtl, plan_hw):
    """Random shapes, windows and tilings of every op kind, overlapped: every spec agrees."""
    plan, hw = plan_hw
    schedule = schedule_partition(plan, hw, overlapped=True)
    assert_specs_agree(rtl, plan, schedule, random_inputs(plan, 5), HW, str(plan.ops[0]))


def test_loads_are_issued_as_early_as_the_queue_and_sram_allow(plans):
    """The timed prefetch on MobileNetV2: some weights are issued more than dma_queue_depth
    kicks before the kick that needs them (a kick-count window of depth - 1 could not), and the
    queue never holds more than depth - 1 transfers when a DMA_IN is issued (one slot stays
    free for a DMA_OUT)."""
    plan = plans("mobilenet_v2_int8.tflite")["npu_subgraph_0"]
    seq, ovl = schedule_partition(plan, HW, overlapped=False), schedule_partition(plan, HW)
    kicks = [(i, k) for i, (s, k) in enumerate(zip(ovl.steps, ovl.step_op))
             if isinstance(s, Kick) and s.opcode != Opcode.WAIT_DMA]  # fmt: skip
    ahead = []  # per load: the compute kicks between it and the next kick of its op
    for i, (s, k) in enumerate(zip(ovl.steps, ovl.step_op)):
        if isinstance(s, Dma) and s.direction == Opcode.DMA_IN:
            after = [j for j, kk in kicks if j > i]
            own = next(n for n, j in enumerate(after) if ovl.step_op[j] == k)
            ahead.append(own)
    assert max(ahead) > HW.dma_queue_depth
    assert cycles.stream_cycles(ovl.steps) < cycles.stream_cycles(seq.steps)
    # at every DMA_IN's issue, fewer than depth transfers are outstanding on the cycle model's clock
    clock = cycles.Timeline(HW.dma_queue_depth)
    for s in ovl.steps:
        if isinstance(s, Dma) and s.direction == Opcode.DMA_IN:
            assert sum(e > clock.t for e in clock.ends[-HW.dma_queue_depth :]) <= HW.dma_queue_depth - 1
        pending = s[Reg.DMA_WAIT_PENDING] if s.opcode == Opcode.WAIT_DMA else 0
        clock.command(s.opcode, cycles.step_cycles(s, HW), pending)


def test_a_load_bound_conv_loads_its_next_weight_block_while_one_computes(rtl, plans):
    """MobileNetV2's last 1x1 convolution (112 -> 1280 channels, 158,720 bytes of weights and
    requantize records: 9,920 cycles to load at 16 B/cycle, 5,215 to compute) is cut into channel
    blocks of at most 3/16 of the SRAM, alternating between two weight buffers, so block b + 1's
    load is issued before block b's kick; the stream is exact on the RTL, and the op is cut
    only in the overlapped schedule."""
    plan = plans("mobilenet_v2_int8.tflite")["npu_subgraph_0"]
    k = next(i for i, op in enumerate(plan.ops) if op.ofm.shape == (3, 3, 1280))
    schedule = schedule_partition(plan, HW)
    assert schedule.tilings[k].channels * 124 <= HW.sram_bytes * 3 // 16 < schedule.tilings[k].channels * 124 + 8 * 124
    steps = [(i, s) for i, (s, j) in enumerate(zip(schedule.steps, schedule.step_op)) if j == k]
    convs = [(i, s) for i, s in steps if isinstance(s, Kick) and s.opcode == Opcode.CONV]
    loads = [(i, s) for i, s in steps if isinstance(s, Dma) and s.region == int(Region.CONST)]
    assert 2 * len(convs) == len(loads) and len(convs) == -(-1280 // schedule.tilings[k].channels) >= 3  # weights, table
    weights = [s[Reg.WEIGHT_ADDR] for _, s in convs]
    assert len(set(weights)) == 2 and weights[0::2] == [weights[0]] * len(weights[0::2])  # A, B, A, B, ...
    assert all(loads[2 * b + 2][0] < convs[b][0] for b in range(len(convs) - 1))  # the next block loads during this one
    assert schedule_partition(plan, HW, overlapped=False).tilings[k].channels == 1280
    assert_specs_agree(rtl, plan, schedule, random_inputs(plan, 3), HW, "mobilenet_v2 double-buffered")


def test_a_first_layer_computes_while_its_input_is_still_loading(rtl, plans):
    """MobileNetV2's first conv reads the 96x96x3 partition input (27,648 bytes, 1,728 cycles
    at 16 B/cycle): by default it runs as 4 row tiles whose inputs alternate between two
    buffers, tile t + 1's rows issued before tile t's kick; one tile when DMA is sequential.
    The stream is exact on the RTL."""
    plan = plans("mobilenet_v2_int8.tflite")["npu_subgraph_0"]
    schedule = schedule_partition(plan, HW)
    assert schedule.tilings[0].rows == 12 and plan.ops[0].ofm.shape[0] == 48  # 4 tiles of 12 rows
    steps = [(i, s) for i, (s, j) in enumerate(zip(schedule.steps, schedule.step_op)) if j == 0]
    convs = [(i, s) for i, s in steps if isinstance(s, Kick) and s.opcode == Opcode.CONV]
    inputs = [(i, s) for i, s in steps if isinstance(s, Dma) and s.region == int(Region.IO)]
    assert len(convs) == len(inputs) == 4
    addrs = [s[Reg.IFM_ADDR] for _, s in convs]
    assert addrs[0] == addrs[2] != addrs[1] == addrs[3]
    assert all(inputs[t + 1][0] < convs[t][0] for t in range(3))
    assert schedule_partition(plan, HW, overlapped=False).tilings[0].rows == 48
    assert_specs_agree(rtl, plan, schedule, random_inputs(plan, 4), HW, "mobilenet_v2 first conv in row tiles")
