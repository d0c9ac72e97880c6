"""DMA overlapped with compute (ISA 1.1: DMA_IN_ASYNC, DMA_OUT_ASYNC, WAIT_DMA).

The four executable specs agree exactly on overlapped streams: the golden model (whole
tensors), the stream machine, the C functional model and the RTL under Verilator give the same
bytes, and the RTL's cycles — per command in its trace and per run — equal the analytic model
(``cycles.command_timeline`` / ``stream_cycles``) and the C model's count. Hand-derived cycle
counts pin the timing rules of docs/cosim.md §5.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from npu_byoc.codegen.encoder import Dma, Kick, encode
from npu_byoc.codegen.overlap import touched
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.hwconfig import DEFAULT_CONFIG, HwConfig, configure
from npu_byoc.isa import Opcode, Region, Status
from npu_byoc.runtime import cycles, golden
from npu_byoc.runtime import verilator as V
from npu_byoc.runtime.functional import FunctionalNpu
from npu_byoc.runtime.machine import Machine

from .conftest import ALL_MODELS
from .test_isa import bind, one_op_plans, random_inputs

HW = DEFAULT_CONFIG
WAIT = Kick(Opcode.WAIT_DMA, ())


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
    # two background DMAs in a row: the second waits for the first (12 cycles from 11)
    steps = [bg, bg, WAIT]
    got = rtl.run(encode(steps), copies(const), trace=True)
    assert [e.cycles for e in got.trace[-4:-1]] == [4, 23 - 15 + 4, 12 + 1 - 4] == cycles.command_timeline(steps)
    assert got.cycles == cycles.stream_cycles(steps) == 23 + 12 + 1 + 1


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
            seq, ovl = schedule_partition(plan, HW), schedule_partition(plan, HW, overlapped=True)
            extra = max(0, len(ovl.words()) - len(seq.words()))
            assert cycles.stream_cycles(ovl.steps) <= cycles.stream_cycles(seq.steps) + extra, (model, plan.name)
    plan = plans("mobilenet_v2_int8.tflite")["npu_subgraph_0"]
    assert cycles.stream_cycles(schedule_partition(plan, HW, overlapped=True).steps) < 0.9 * 80376


def test_no_kick_touches_a_transfer_in_flight(plans):
    """The overlap pass's invariant, checked independently on the fixture schedules: between a
    background DMA and the next WAIT_DMA / DMA, no kick writes its SRAM bytes or reads bytes a
    DMA_IN writes."""
    for model in ALL_MODELS:
        for plan in plans(model).values():
            steps = schedule_partition(plan, HW, overlapped=True).steps
            in_flight = None
            for s in steps:
                if isinstance(s, Dma):
                    in_flight = s
                elif s.opcode == Opcode.WAIT_DMA:
                    in_flight = None
                elif in_flight is not None:
                    (dr, dw), (kr, kw) = touched(in_flight), touched(s)
                    for lo, hi in dw:
                        assert all(hi <= a or b <= lo for a, b in kr + kw), (model, s, in_flight)
                    for lo, hi in dr:
                        assert all(hi <= a or b <= lo for a, b in kw), (model, s, in_flight)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(one_op_plans())
def test_random_one_op_plans_overlapped(rtl, plan_hw):
    """Random shapes, windows and tilings of every op kind, overlapped: every spec agrees."""
    plan, hw = plan_hw
    schedule = schedule_partition(plan, hw, overlapped=True)
    assert_specs_agree(rtl, plan, schedule, random_inputs(plan, 5), HW, str(plan.ops[0]))
