"""The analytic cycle model (npu_byoc.arch.cycles) against the RTL under Verilator.

FINN's habit: predicted cycles are asserted against RTL-simulated cycles. Here the tolerance
is zero: every command's cycles in the RTL's trace equal ``cycles.command_cycles`` (its own
cycles plus the fetch of its word), and a whole run's cycles equal ``cycles.stream_cycles``,
on every fixture schedule (default SRAM and small-SRAM tiled schedules), on random one-op
plans, and on MAC kicks chosen to fold several channel blocks into the 32 columns (the weight
lane limit). The C functional model reports the same numbers (tests/test_functional.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_byoc.arch.encoder import Kick, encode
from npu_byoc.codegen.lower import IoTensor, PartitionPlan
from npu_byoc.ops.npu_ops import Conv2D, DepthwiseConv2D, FullyConnected, TensorRef
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.errors import LoweringError
from npu_byoc.arch.config import DEFAULT_CONFIG, HwConfig
from npu_byoc.arch.isa import Opcode, Reg, Region, Status
from npu_byoc.arch import cycles
from npu_byoc.runtime import golden
from npu_byoc.runtime import verilator as V
from npu_byoc.runtime.functional import FunctionalNpu

from .conftest import ALL_MODELS
from .test_isa import one_op_plans

HW = DEFAULT_CONFIG
SEQUENTIAL = HwConfig(dma_overlap=0)
SMALL_SRAM = {"tiny_cnn_int8.tflite": 1536, "tiny_cnn_qdq.onnx": 1536, "mobilenet_v2_int8.tflite": 4096,
              "op_mul_int8.tflite": 1024}


@pytest.fixture(scope="module")
def rtl() -> V.VerilatorNpu:
    return V.VerilatorNpu(HW)



def bind(plan, schedule, seed: int = 0) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    inputs = [rng.integers(-128, 128, size=io.shape, dtype=np.int8) for io in plan.inputs]
    regions = golden.allocate_regions(plan, inputs)
    regions[int(Region.CONST)] = np.frombuffer(schedule.constants, np.uint8).copy()
    return regions


def assert_cycles_exact(rtl, plan, schedule, hw=HW, what: str = "") -> int:
    """Run the schedule on the RTL with a trace; every command and the total as predicted."""
    got = rtl.run(schedule.words(), bind(plan, schedule), trace=True)
    assert got.status == Status.OK, f"{what}: {got}"
    executed = [e for e in got.trace if e.opcode != Opcode.STOP]
    assert [e.opcode for e in executed] == [s.opcode for s in schedule.steps]
    for entry, step, want in zip(executed, schedule.steps, cycles.command_timeline(schedule.steps, hw)):
        assert entry.cycles == want, f"{what}: {step}"
    assert got.cycles == cycles.stream_cycles(schedule.steps, hw), what
    return got.cycles


@pytest.mark.parametrize("model", [*ALL_MODELS, "op_mul_int8.tflite"])  # + MUL / broadcast ADD kicks
def test_fixture_schedules(rtl, plans, model):
    for name, plan in plans(model).items():
        # background DMAs (the default) and the sequential schedule, each also in a small SRAM
        for hw in (HW, SEQUENTIAL, HwConfig(sram_bytes=SMALL_SRAM[model]),
                   HwConfig(sram_bytes=SMALL_SRAM[model], dma_overlap=0)):  # fmt: skip
            try:
                schedule = schedule_partition(plan, hw)
            except LoweringError:
                continue
            what = f"{model} {name} ({hw.sram_bytes} B SRAM, dma_overlap={hw.dma_overlap})"
            assert_cycles_exact(rtl, plan, schedule, HW, what)


def test_mobilenet_partition_total(rtl, plans):
    """The numbers docs/cosim.md quotes for MobileNetV2's partition (SOFTMAX included): 51,757
    cycles by default (feature maps resident in SRAM, DMA in the background; 51,765 before
    contiguous DMA rows were coalesced); sequential DMA 80,504 with the feature maps resident,
    150,992 with every one staged through SCRATCH."""
    plan = plans("mobilenet_v2_int8.tflite")["npu_subgraph_0"]
    schedule = schedule_partition(plan, HW)
    assert cycles.stream_cycles(schedule.steps, HW) == assert_cycles_exact(rtl, plan, schedule) == 51757
    sequential = schedule_partition(plan, SEQUENTIAL)
    assert cycles.stream_cycles(sequential.steps, SEQUENTIAL) == assert_cycles_exact(rtl, plan, sequential) == 80504
    staged = schedule_partition(plan, SEQUENTIAL, residency=False)
    assert cycles.stream_cycles(staged.steps, SEQUENTIAL) == 150992


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(one_op_plans())
def test_random_one_op_plans(rtl, plan_hw):
    """Random shapes, windows, tilings (row tiles, channel blocks, NCHW strided DMA) of every
    op kind; small-SRAM schedules run on the default RTL (their addresses fit)."""
    plan, hw = plan_hw
    assert_cycles_exact(rtl, plan, schedule_partition(plan, hw), HW, str(plan.ops[0]))


def _ref(name, region, shape):
    return TensorRef(name, region, 0, shape, "NHWC")


def _mac_plan(kind: str, oh: int, ow: int, oc: int, ic: int, k: int, seed: int = 0) -> PartitionPlan:
    rng = np.random.default_rng(seed)
    io = int(Region.IO)
    requant = dict(bias=rng.integers(-1000, 1000, oc).astype(np.int32),
                   multiplier=np.full(oc, 1 << 30, np.int32), shift=np.full(oc, -4, np.int32))  # fmt: skip
    if kind == "fc":
        x, y = _ref("x", io, (1, ow, ic)), _ref("y", io + 1, (1, ow, oc))
        op = FullyConnected("fc", x, y, rng.integers(-128, 128, (oc, ic)).astype(np.int8), requant["bias"],
                            np.full(oc, 2**52, np.int64), np.full(oc, -60, np.int32),  # scale 2^-8
                            ifm_zero_point=3, ofm_zero_point=-2, act_min=-128, act_max=127)  # fmt: skip
    else:
        pad = (k - 1) // 2
        x = _ref("x", io, (oh, ow, ic if kind == "conv" else oc))
        y = _ref("y", io + 1, (oh, ow, oc))
        shape = (oc, k, k, ic) if kind == "conv" else (oc, k, k)
        cls = Conv2D if kind == "conv" else DepthwiseConv2D
        op = cls(kind, x, y, rng.integers(-128, 128, shape).astype(np.int8), **requant, ifm_zero_point=3,
                 ofm_zero_point=-2, stride=(1, 1), padding=(pad, pad, k - 1 - pad, k - 1 - pad), act_min=-128,
                 act_max=127)  # fmt: skip

    def model_shape(ref):
        return (1, *ref.shape)

    return PartitionPlan("p", [IoTensor("x", model_shape(op.ifm), "int8", op.ifm)],
                         [IoTensor("y", model_shape(op.ofm), "int8", op.ofm)], [op])  # fmt: skip


@pytest.mark.parametrize(
    "kind, oh, ow, oc, ic, k",
    [
        ("conv", 2, 3, 40, 16, 1),  # 6 pixels x 5 channel blocks: 4 weight lanes, then 1
        ("conv", 6, 6, 16, 3, 3),  # 36 pixels x 2 blocks: 32 | 4 + 28 | 8
        ("conv", 1, 1, 72, 5, 1),  # 1 pixel x 9 channel blocks, K = 5 < R
        ("dwconv", 3, 3, 48, 0, 3),  # 9 pixels x 6 blocks
        ("dwconv", 7, 5, 8, 0, 5),  # K = 25
        ("fc", 1, 1, 100, 64, 1),  # 13 channel blocks of one row
        ("fc", 1, 5, 20, 33, 1),  # 5 rows x 3 blocks
    ],
)
def test_mac_kicks_fold_columns(rtl, kind, oh, ow, oc, ic, k):
    plan = _mac_plan(kind, oh, ow, oc, ic, k)
    schedule = schedule_partition(plan, HW)
    assert_cycles_exact(rtl, plan, schedule, HW, kind)
    kick = next(s for s in schedule.steps if isinstance(s, Kick) and s.opcode != Opcode.WAIT_DMA)
    r = dict(kick.regs)
    pixels = r[Reg.OFM_W] * (1 if kind == "fc" else r[Reg.OFM_H])
    reference = _item_blocks(pixels, -(-r[Reg.OFM_C] // HW.array_rows), HW.array_cols, cycles.MAC_WEIGHT_LANES)
    assert cycles.mac_blocks(pixels, -(-r[Reg.OFM_C] // HW.array_rows), HW.array_cols) == reference


def _item_blocks(pixels: int, channel_blocks: int, cols: int, lanes: int) -> int:
    """mac_blocks item by item, as the RTL's walker fills its columns."""
    blocks = p = cb = 0
    while cb < channel_blocks:
        used, last, n = 0, None, 0
        while n < cols and cb < channel_blocks:
            if cb != last:
                if used == lanes:
                    break
                used, last = used + 1, cb
            n, p = n + 1, p + 1
            if p == pixels:
                p, cb = 0, cb + 1
        blocks += 1
    return blocks


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 200), st.integers(1, 40), st.sampled_from([1, 3, 8, 32]), st.integers(1, 6))
def test_mac_blocks_equals_the_item_walk(pixels, channel_blocks, cols, lanes):
    assert cycles.mac_blocks(pixels, channel_blocks, cols, lanes) == _item_blocks(pixels, channel_blocks, cols, lanes)


def test_functional_model_reports_the_rtl_cycles(rtl, plans):
    """The C functional model's estimate is the RTL's count (same stream, same number)."""
    for model in ("tiny_cnn_int8.tflite", "tiny_cnn_qdq.onnx"):
        for name, plan in plans(model).items():
            schedule = schedule_partition(plan, HW)
            words = schedule.words()
            assert FunctionalNpu(HW).run(words, bind(plan, schedule)).cycles == rtl.run(words, bind(plan, schedule)).cycles


def test_header_setreg_stop_fetch(rtl):
    """3 header words, 2 cycles per SET_REG, 1 per NOP and STOP."""
    from npu_byoc.arch.encoder import Dma

    dma = Dma(Opcode.DMA_IN, int(Region.CONST), 0, 0, 100)
    words = encode([dma])
    got = rtl.run(words, {int(Region.CONST): np.zeros(100, np.uint8)})
    assert got.ok and got.cycles == 3 + 2 * 4 + (1 + cycles.DMA_SETUP_CYCLES + 7) + 1 == cycles.stream_cycles([dma])
