"""An NCHW partition input laid out NHWC on chip (npu_byoc.ops.interleave, codegen.interleave):
the kicks against numpy's transpose on the stream machine, the C model and the RTL; the ONNX
tiny CNN under Vela's U55 memory with and without it (the same outputs, fewer cycles, the
three timing specifications equal); the compiler's choice against the cycle model."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from npu_byoc.arch import cycles
from npu_byoc.arch.config import DEFAULT_CONFIG
from npu_byoc.arch.isa import Region, Status
from npu_byoc.codegen import lower
from npu_byoc.codegen.interleave import _with_interleave, interleave_io
from npu_byoc.codegen.plan import IoTensor, PartitionPlan
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.ops.interleave import Deinterleave, Interleave
from npu_byoc.ops.npu_ops import TensorRef
from npu_byoc.runtime import golden
from npu_byoc.runtime.functional import FunctionalNpu
from npu_byoc.runtime.machine import Machine

from .test_memory import VELA_LIKE

MODEL = "tiny_cnn_qdq.onnx"


def _run(plan: PartitionPlan, hw, regions_of) -> list:
    """The plan's schedule on the stream machine and the C model: (its regions after each run,
    the schedule); both OK, the C model in the cycle model's cycles."""
    schedule = schedule_partition(plan, hw)
    out = []
    for npu in (Machine(hw), FunctionalNpu(hw)):
        regions = regions_of()
        regions[int(Region.CONST)] = np.frombuffer(schedule.constants, np.uint8).copy()
        got = npu.run(schedule.words(), regions)
        assert got.status == Status.OK, got
        out.append(regions)
    assert got.cycles == cycles.stream_cycles(schedule.steps, hw)
    return out, schedule


@pytest.mark.parametrize("c, h, w, sram", [(3, 5, 7, 256), (4, 9, 20, 512), (2, 1, 3, 512), (11, 3, 4, 512)])
def test_the_kicks_transpose_the_planes(c, h, w, sram):
    """The stream machine and the C model write the planes' transpose (numpy's), in one tile or
    in tiles of image rows when the SRAM is small, in the cycles the cycle model gives."""
    x = TensorRef("x", int(Region.IO), 0, (h, w, c), "NCHW")
    op = Interleave("x [interleave]", x, TensorRef("x", int(Region.SCRATCH), 0, (h, w, c), "NHWC"))
    plan = PartitionPlan("p", [IoTensor("x", (1, c, h, w), "int8", x)], [], [op], h * w * c, [op.name],
                         interleaves=((0, 0),))  # fmt: skip
    image = np.random.default_rng(c * h * w).integers(-128, 128, (1, c, h, w), dtype=np.int8)
    for hw in (DEFAULT_CONFIG, VELA_LIKE, replace(VELA_LIKE, sram_bytes=sram)):  # the last: tiles of a few rows
        runs, schedule = _run(plan, hw, lambda: golden.allocate_regions(plan, [image]))
        for regions in runs:
            assert (regions[int(Region.SCRATCH)].view(np.int8).reshape(h, w, c) == image[0].transpose(1, 2, 0)).all()
    assert schedule.tilings[0].rows < h or h == 1


@pytest.mark.parametrize("c, h, w, sram", [(3, 5, 7, 256), (4, 9, 20, 512), (2, 1, 3, 512), (40, 8, 8, 4096)])
def test_the_deinterleave_kicks_write_the_planes(c, h, w, sram):
    """The reverse: an NHWC map in SCRATCH written to an NCHW output region as planes, one kick
    per plane and tile of rows, one run per plane (numpy's transpose again)."""
    out = TensorRef("y", int(Region.IO) + 1, 0, (h, w, c), "NCHW")
    op = Deinterleave("y [deinterleave]", TensorRef("y", int(Region.SCRATCH), 0, (h, w, c), "NHWC"), out)
    plan = PartitionPlan("p", [], [IoTensor("y", (1, c, h, w), "int8", out)], [op], h * w * c, [op.name],
                         deinterleaves=((0, 0),))  # fmt: skip
    y = np.random.default_rng(c + h + w).integers(-128, 128, (h, w, c), dtype=np.int8)

    def regions():
        r = golden.allocate_regions(plan, [])
        r[int(Region.SCRATCH)] = y.reshape(-1).view(np.uint8).copy()
        return r

    for hw in (DEFAULT_CONFIG, VELA_LIKE, replace(VELA_LIKE, sram_bytes=sram)):
        runs, schedule = _run(plan, hw, regions)
        for r in runs:
            assert (golden.read_outputs(plan, r)[0][0] == y.transpose(2, 0, 1)).all()
    assert schedule.tilings[0].rows < h or h == 1


@pytest.fixture(scope="module")
def qdq_plans(partitioned):
    """tiny_cnn_qdq's partition under VELA_LIKE: (as compiled, with the interleave left out)."""
    mod = partitioned(MODEL)
    return lower.lower_module(mod, VELA_LIKE), lower.lower_module(mod, VELA_LIKE, interleave=False)


def test_the_onnx_cnn_runs_its_image_interleaved_under_vela_memory(qdq_plans):
    """The image (3 planes of 32 x 32) is interleaved first; the outputs equal those of the
    strided schedule, and its cycles (the cycle model's, which the C model equals) less than
    half of them: 3,072 one-byte rows became one run of 3,072 bytes (the weights' slow flash
    of VELA_LIKE, Shared_Sram's, takes most of the rest)."""
    plans, strided = qdq_plans
    (plan,), (before,) = plans.values(), strided.values()
    assert type(plan.ops[0]) is Interleave and plan.interleaves == ((0, 0),) and plan.ops[0].macs == 0
    assert plan.ops[1].ifm == plan.ops[0].ofm and plan.ops[1].ifm.layout == "NHWC"
    assert len(before.ops) == len(plan.ops) - 1 and before.ops[1:] == plan.ops[2:]
    x = np.random.default_rng(25).integers(-128, 128, plan.inputs[0].shape, dtype=np.int8)
    want = golden.run_plan(before, [x])
    for p in (plan, before):
        schedule = schedule_partition(p, VELA_LIKE)
        regions = golden.allocate_regions(p, [x])
        regions[int(Region.CONST)] = np.frombuffer(schedule.constants, np.uint8).copy()
        got = FunctionalNpu(VELA_LIKE).run(schedule.words(), regions)
        assert got.status == Status.OK and got.cycles == cycles.stream_cycles(schedule.steps, VELA_LIKE)
        assert all((a == b).all() for a, b in zip(golden.read_outputs(p, regions), want))
        if p is plan:
            after_cycles = got.cycles
    before_cycles = got.cycles
    assert after_cycles < before_cycles / 2, (after_cycles, before_cycles)  # 15,140 and 42,189


@pytest.mark.slow
def test_rtl_runs_the_interleaved_partition_exactly(qdq_plans):
    """The RTL under VELA_LIKE: every command in the cycle model's cycles, the outputs the golden model's."""
    from npu_byoc.runtime import verilator as V

    (plan,) = qdq_plans[0].values()
    schedule = schedule_partition(plan, VELA_LIKE)
    x = np.random.default_rng(7).integers(-128, 128, plan.inputs[0].shape, dtype=np.int8)
    regions = golden.allocate_regions(plan, [x])
    regions[int(Region.CONST)] = np.frombuffer(schedule.constants, np.uint8).copy()
    got = V.VerilatorNpu(VELA_LIKE).run(schedule.words(), regions)
    assert got.status == Status.OK, got
    assert got.cycles == cycles.stream_cycles(schedule.steps, VELA_LIKE)
    assert all((a == b).all() for a, b in zip(golden.read_outputs(plan, regions), golden.run_plan(plan, [x])))


def test_the_compiler_takes_the_faster_layout(qdq_plans):
    """Under each memory the compiled partition is the faster of the two by the cycle model
    (the same partition scheduled with and without the interleave)."""
    _, strided = qdq_plans
    (before,) = strided.values()
    for hw in (DEFAULT_CONFIG, VELA_LIKE, replace(VELA_LIKE, fm_mem_read_latency=0, fm_mem_burst_bytes=1)):
        candidate = _with_interleave(before, 0, before.inputs[0].ref, hw)
        with_it = cycles.stream_cycles(schedule_partition(candidate, hw).steps, hw)
        without = cycles.stream_cycles(schedule_partition(before, hw).steps, hw)
        chosen = interleave_io(before, hw)
        assert bool(chosen.interleaves) == (with_it < without), (hw, with_it, without)
    nhwc = replace(before.inputs[0].ref, layout="NHWC")  # whole pixels already: nothing to interleave
    assert _with_interleave(before, 0, nhwc, VELA_LIKE) is None


@pytest.mark.slow
@pytest.mark.parametrize("model", ["convt_qdq.onnx", "se_qdq.onnx"])
def test_cosim_of_a_deinterleaved_output(model):
    """ONNX fixtures whose partition output is an NCHW map (32 x 32 x 4, 8 x 8 x 40): on the
    RTL under VELA_LIKE the image is interleaved and the output deinterleaved, every layer
    bit-exact with the golden model in the cycle model's cycles, and both equal to TVM's value
    of the tensor they move."""
    from npu_byoc.runtime import cosim as C

    from .conftest import model_path, reference

    ref = reference(model)
    report = C.cosim(model_path(model), ref["inputs"][0], ref["outputs"][0], hw=VELA_LIKE)
    moved = [r for r in report.layers if r.op in ("interleave", "deinterleave")]
    assert {r.op for r in moved} == {"interleave", "deinterleave"}
    assert all(r.max_diff_tvm == 0 and r.macs == 0 for r in moved), moved
    assert all(r.max_diff_golden in (0, None) and r.cycles == r.predicted_cycles for r in report.layers)
    assert report.summary["max_diff_golden"] == 0 and report.summary["cycle_model_exact"]
