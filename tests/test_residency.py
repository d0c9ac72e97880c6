"""SRAM residency: intermediate feature maps kept on chip between the ops of a partition.

* it happens: on the fixture models with the default SRAM every intermediate tensor stays in
  SRAM (no DMA to or from SCRATCH) and the DMA bytes drop;
* a tensor that does not fit spills through SCRATCH, and the stream is still exact;
* the live-range allocator never lets a live buffer be overwritten, checked on the emitted
  stream alone: every byte a command reads was last written by the command that should have
  produced it (a DMA_IN of that very tensor or constant, or a kick of the op producing it) —
  on the fixtures and on random small SRAM sizes (hypothesis), with the machine's outputs
  equal to the golden model's.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_byoc.arch.encoder import Dma, Kick
from npu_byoc.codegen.residency import Buffer, largest_gap, place
from npu_byoc.codegen.schedule import schedule_partition, scratch_live_ranges
from npu_byoc.codegen.tiling import tile_sram_bytes
from npu_byoc.arch.config import DEFAULT_CONFIG, HwConfig
from npu_byoc.arch.isa import REQUANT_RECORD_BYTES, Opcode, Reg, Region
from npu_byoc.runtime import golden
from npu_byoc.runtime.machine import Machine

from .conftest import ALL_MODELS

MOBILENET = "mobilenet_v2_int8.tflite"


def _region_bytes(schedule, region: int, direction: Opcode) -> int:
    return sum(s.nbytes for s in schedule.steps if isinstance(s, Dma) and s.region == region and s.direction == direction)


def _dma_bytes(schedule) -> int:
    return sum(s.nbytes for s in schedule.steps if isinstance(s, Dma))


# ---------------------------------------------------------------------------------------------
# The liveness check: an independent reading of the emitted steps


def _reads(step: Kick) -> dict[str, tuple[int, int]]:
    """The SRAM ranges (address, bytes) a kick reads, by operand, from its registers (isa.md §3)."""
    r = dict(step.regs)
    op = step.opcode
    if op in (Opcode.ADD, Opcode.LUT, Opcode.SOFTMAX):  # the input tiles have the output's shape
        n = r[Reg.OFM_H] * r[Reg.OFM_W] * r[Reg.OFM_C]
        if op == Opcode.LUT:
            return {"ifm": (r[Reg.IFM_ADDR], n), "lut": (r[Reg.LUT_ADDR], 256)}
        if op == Opcode.SOFTMAX:  # 256 int32 exponentials
            return {"ifm": (r[Reg.IFM_ADDR], n), "table": (r[Reg.LUT_ADDR], 1024)}
        return {"ifm": (r[Reg.IFM_ADDR], n), "ifm2": (r[Reg.IFM2_ADDR], n)}
    out = {"ifm": (r[Reg.IFM_ADDR], r[Reg.IFM_H] * r[Reg.IFM_W] * r[Reg.IFM_C])}
    if op == Opcode.MEAN:
        return out
    ofm_c = r[Reg.OFM_C]
    if op in (Opcode.CONV, Opcode.DWCONV, Opcode.FC):
        taps = 1 if op == Opcode.FC else r[Reg.KERNEL_H] * r[Reg.KERNEL_W]
        per = taps * (r[Reg.IFM_C] if op != Opcode.DWCONV else 1)
        out["weights"] = (r[Reg.WEIGHT_ADDR], ofm_c * per)
        out["requant"] = (r[Reg.REQUANT_ADDR], ofm_c * REQUANT_RECORD_BYTES)
    return out


def _write(step: Kick) -> tuple[int, int]:
    r = dict(step.regs)
    if step.opcode == Opcode.MEAN:
        return r[Reg.OFM_ADDR], r[Reg.IFM_C]
    return r[Reg.OFM_ADDR], r[Reg.OFM_H] * r[Reg.OFM_W] * r[Reg.OFM_C]


def check_liveness(plan, schedule, hw) -> int:
    """Walk the steps; every byte read must hold what the reader expects. Returns the number of
    operand reads served from a resident tensor (no DMA_IN of their own)."""
    writer = np.full(hw.sram_bytes, -1, np.int64)  # per SRAM byte: index of the step that wrote it last
    steps = schedule.steps
    producer = {op.ofm.offset: k for k, op in enumerate(plan.ops) if op.ofm.region == Region.SCRATCH}
    in_place = 0

    def expect(addr, n, ok, what):
        who = set(writer[addr : addr + n].tolist())
        assert -1 not in who, f"{what}: reads SRAM [{addr}, {addr + n}) before anything wrote it"
        bad = [w for w in who if not ok(w)]
        assert not bad, f"{what}: SRAM [{addr}, {addr + n}) was overwritten by step {bad[0]} ({steps[bad[0]]})"

    for i, step in enumerate(steps):
        k = schedule.step_op[i]
        op = plan.ops[k]
        if isinstance(step, Dma) and step.direction == Opcode.DMA_OUT:
            expect(step.sram_addr, step.nbytes, lambda w: isinstance(steps[w], Kick) and schedule.step_op[w] == k,
                   f"step {i} DMA_OUT of {op.name}")  # fmt: skip
        elif isinstance(step, Dma):
            writer[step.sram_addr : step.sram_addr + step.nbytes] = i
            continue
        elif step.opcode == Opcode.WAIT_DMA:  # ordering only: a background DMA counts as done at issue
            continue
        else:
            for name, (addr, n) in _reads(step).items():
                if name in ("ifm", "ifm2"):
                    ref = op.inputs[("ifm", "ifm2").index(name)]

                    def ok(w, ref=ref):
                        s = steps[w]
                        if isinstance(s, Dma):  # staged: a DMA_IN of this tensor
                            return s.region == ref.region and ref.offset <= s.ext_addr < ref.offset + ref.nbytes
                        src = producer.get(ref.offset) if ref.region == Region.SCRATCH else None
                        return src is not None and schedule.step_op[w] == src  # resident: its producer wrote it

                    expect(addr, n, ok, f"step {i} {step.opcode.name} {name} of {op.name}")
                    in_place += all(isinstance(steps[w], Kick) for w in set(writer[addr : addr + n].tolist()))
                else:
                    expect(addr, n, lambda w: isinstance(steps[w], Dma) and steps[w].region == Region.CONST,
                           f"step {i} {step.opcode.name} {name} of {op.name}")  # fmt: skip
            addr, n = _write(step)
            writer[addr : addr + n] = i
    return in_place


def _run_exact(plan, schedule, hw, seed=0):
    """The machine runs the stream and its outputs are the golden model's."""
    rng = np.random.default_rng(seed)
    inputs = [rng.integers(-128, 128, size=io.shape, dtype=np.int8) for io in plan.inputs]
    regions = golden.allocate_regions(plan, inputs)
    regions[int(Region.CONST)] = np.frombuffer(schedule.constants, np.uint8).copy()
    status = Machine(hw).run(schedule.words(), regions)
    assert status.ok, str(status)
    for io, want in zip(plan.outputs, golden.run_plan(plan, inputs)):
        np.testing.assert_array_equal(regions[io.ref.region].view(np.int8).reshape(io.shape), want)


# ---------------------------------------------------------------------------------------------
# Residency happens


@pytest.mark.parametrize("model", ALL_MODELS)
def test_fixture_feature_maps_stay_in_sram(plans, model):
    """Residency alone (sequential DMA: an overlapped schedule may stage a tensor on purpose, a
    load-bound conv's output cut into double-buffered channel blocks; see the next test)."""
    for name, plan in plans(model).items():
        schedule = schedule_partition(plan, overlapped=False)
        staged = schedule_partition(plan, residency=False, overlapped=False)
        tensors = scratch_live_ranges(plan)
        # every intermediate tensor fits the default 256 KiB: the only SCRATCH traffic is a
        # concatenation's, written slice by slice in place and read whole (never resident)
        written = {op.ofm.offset for op in plan.ops if op.ofm.region == Region.SCRATCH and not op.ofm.is_slice}
        slices = sum(op.ofm.nbytes for op in plan.ops if op.ofm.region == Region.SCRATCH and op.ofm.is_slice)
        joined = sum(r.nbytes for op in plan.ops for r in op.inputs
                     if r.region == Region.SCRATCH and r.offset not in written)  # fmt: skip
        assert len(schedule.resident) == len(tensors)
        assert _region_bytes(schedule, Region.SCRATCH, Opcode.DMA_OUT) == slices
        assert _region_bytes(schedule, Region.SCRATCH, Opcode.DMA_IN) == joined
        # what is left is what must cross: the constants, the inputs once, the outputs once
        assert _dma_bytes(schedule) == slices + joined + _dma_bytes(staged) - sum(
            s.nbytes for s in staged.steps if isinstance(s, Dma) and s.region == Region.SCRATCH)
        if tensors:
            assert _dma_bytes(schedule) < _dma_bytes(staged)
        assert check_liveness(plan, schedule, DEFAULT_CONFIG) >= len(tensors)


def test_mobilenet_dma_bytes(plans):
    """MobileNetV2: 1,607,702 DMA bytes staged, 508,130 resident (constants 480,472 with the
    SOFTMAX's 1,024-byte table, input 27,648, output 10)."""
    plan = plans(MOBILENET)["npu_subgraph_0"]
    staged = schedule_partition(plan, residency=False, overlapped=False)
    resident = schedule_partition(plan, overlapped=False)
    assert _dma_bytes(staged) == 1_607_702
    assert _dma_bytes(resident) == 508_130 == _region_bytes(resident, Region.CONST, Opcode.DMA_IN) + 96 * 96 * 3 + 10


def test_a_tensor_that_does_not_fit_spills(plans):
    """With 48 KiB, MobileNetV2's 48x48x48 expansion (110,592 bytes) cannot stay: it goes out
    to SCRATCH and comes back; smaller tensors still stay; the result is exact."""
    plan = plans(MOBILENET)["npu_subgraph_0"]
    hw = HwConfig(sram_bytes=48 * 1024)
    schedule = schedule_partition(plan, hw)
    tensors = scratch_live_ranges(plan)
    big = [b for b in tensors.values() if b.nbytes > hw.sram_bytes]
    assert big
    for b in big:
        assert plan.ops[b.start].name not in schedule.resident
    assert 0 < len(schedule.resident) < len(tensors)
    spilled = {s.ext_addr for s in schedule.steps if isinstance(s, Dma) and s.region == Region.SCRATCH
               and s.direction == Opcode.DMA_OUT}  # fmt: skip
    assert any(b.key <= a < b.key + b.nbytes for b in big for a in spilled)
    assert check_liveness(plan, schedule, hw) > 0
    _run_exact(plan, schedule, hw)


def test_the_liveness_check_catches_overlapping_buffers(plans, monkeypatch):
    """The check can fail: an allocator that puts every resident tensor at one address lets
    MobileNetV2's expand convolutions overwrite the block inputs its residual ADDs still read."""
    from npu_byoc.codegen import schedule as S
    from npu_byoc.codegen.residency import Placed

    def one_address(buffers, capacity, align=16):
        buffers = list(buffers)
        addr = (capacity - max(b.nbytes for b in buffers)) // align * align
        return [Placed(b, addr) for b in buffers], []

    monkeypatch.setattr(S, "place", one_address)
    plan = plans(MOBILENET)["npu_subgraph_0"]
    with pytest.raises(AssertionError, match="overwritten by step"):
        check_liveness(plan, schedule_partition(plan), DEFAULT_CONFIG)


# ---------------------------------------------------------------------------------------------
# The allocator


def test_place_first_fit_from_the_top():
    a, b, c = Buffer("a", 0, 2, 100), Buffer("b", 1, 3, 50), Buffer("c", 3, 4, 60)
    placed, unplaced = place([a, b, c], 256, 16)
    addr = {p.buffer.key: p.addr for p in placed}
    assert unplaced == [] and addr == {"a": 256 - 112, "b": 256 - 112 - 64, "c": 256 - 64}
    assert largest_gap(placed, 1, 256, 16) == (0, 80)
    assert largest_gap(placed, 4, 256, 16) == (0, 192)
    assert place([Buffer("d", 0, 0, 300)], 256)[1] == [Buffer("d", 0, 0, 300)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 4), st.integers(1, 400)), max_size=12),
       st.integers(16, 2000))  # fmt: skip
def test_place_never_overlaps_live_buffers(specs, capacity):
    buffers = [Buffer(i, s, s + d, n) for i, (s, d, n) in enumerate(specs)]
    placed, unplaced = place(buffers, capacity, 16)
    assert len(placed) + len(unplaced) == len(buffers)
    for p in placed:
        assert p.addr % 16 == 0 and 0 <= p.addr and p.top <= capacity
        for q in placed:
            if p is not q and p.buffer.overlaps_in_time(q.buffer):
                assert p.top <= q.addr or q.top <= p.addr
    for k in range(15):
        addr, size = largest_gap(placed, k, capacity, 16)
        for p in placed:
            if p.buffer.live_at(k):
                assert addr + size <= p.addr or p.top <= addr


# ---------------------------------------------------------------------------------------------
# Random small SRAM sizes: the emitted streams never read a clobbered byte, and stay exact


def _smallest_sram(plan) -> int:
    return max(tile_sram_bytes(op, 1, 1) for op in plan.ops)


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_sram_sizes_keep_live_buffers_apart(plans, data):
    model = data.draw(st.sampled_from(["tiny_cnn_int8.tflite", "tiny_cnn_qdq.onnx", MOBILENET]))
    part = plans(model)
    plan = part[data.draw(st.sampled_from(sorted(part)))]
    lo = max(_smallest_sram(plan), 16384 if model == MOBILENET else 0)  # MobileNetV2 below 16 KiB: thousands of tiles
    sram = data.draw(st.integers(lo, max(lo, sum(b.nbytes for b in scratch_live_ranges(plan).values()) + 4096)))
    hw = HwConfig(sram_bytes=sram)
    schedule = schedule_partition(plan, hw)
    check_liveness(plan, schedule, hw)
    if model != MOBILENET or data.draw(st.integers(0, 3)) == 0:  # the machine is slow on MobileNetV2
        _run_exact(plan, schedule, hw, seed=data.draw(st.integers(0, 2**31)))


def test_the_overlapped_schedule_stages_only_a_double_buffered_output(plans):
    """By default MobileNetV2's last 1x1 conv runs in double-buffered channel blocks, whose
    output slices cannot be one resident run: that tensor (3x3x1280) goes out to SCRATCH and
    back for the MEAN; every other intermediate tensor stays in SRAM, and the liveness check
    holds."""
    plan = plans(MOBILENET)["npu_subgraph_0"]
    schedule = schedule_partition(plan)
    tensors = scratch_live_ranges(plan)
    staged = [k for k in tensors if plan.ops[tensors[k].start].name not in schedule.resident]
    assert [plan.ops[tensors[k].start].ofm.shape for k in staged] == [(3, 3, 1280)]
    assert _region_bytes(schedule, Region.SCRATCH, Opcode.DMA_OUT) == _region_bytes(schedule, Region.SCRATCH, Opcode.DMA_IN) == 3 * 3 * 1280
    assert check_liveness(plan, schedule, DEFAULT_CONFIG) >= len(tensors) - 1
    _run_exact(plan, schedule, DEFAULT_CONFIG)
