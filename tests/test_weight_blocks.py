"""Weight blocks of a layer whose weights do not fit the SRAM: double-buffered, so each block
loads while the previous one computes (npu_byoc.codegen.schedule._split_weights), bit-exact with
the golden model, and close to the weights' memory bound (hand-derived below)."""

from __future__ import annotations

import numpy as np

from npu_byoc.arch import cycles
from npu_byoc.arch.config import configure
from npu_byoc.arch.encoder import Dma
from npu_byoc.arch.isa import Opcode, Region, Status
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.runtime import golden
from npu_byoc.runtime.functional import FunctionalNpu

from .test_cycles import _mac_plan

# 64 KiB of SRAM behind Ethos_U55_High_End_Embedded's SRAM (8 bytes a cycle, latency 32, bursts
# of 32 bytes, 4 reads in flight) on an 8-byte port
HW = configure(sram_bytes=64 * 1024, dma_bytes_per_cycle=8, const_mem_bytes_per_cycle=8, const_mem_read_latency=32,
               const_mem_burst_bytes=32, const_mem_max_reads=4, fm_mem_bytes_per_cycle=8, fm_mem_read_latency=32,
               fm_mem_burst_bytes=32, fm_mem_max_reads=4)  # fmt: skip


def test_an_fc_larger_than_the_sram_streams_its_weights():
    """FC 512 -> 1024 features: 524,288 weight bytes, 8x the SRAM. The weights alone take
    524,288 / 8 = 65,536 cycles on the port (long runs: 4 bursts of 256 requests in flight hide
    the latency). The SRAM takes ~120 channels a block in one buffer (load, then compute: 87,568
    cycles, 1.34x); blocks of 16 channels in two buffers load under the previous block's compute
    (78,901 cycles, 1.20x)."""
    plan = _mac_plan("fc", 1, 1, 1024, 512, 1, seed=5)
    schedule = schedule_partition(plan, HW)
    weight_loads = [s for s in schedule.steps if isinstance(s, Dma) and s.region == Region.CONST and s.nbytes >= 4096]
    assert len({s.sram_addr for s in weight_loads}) == 2  # two weight buffers, alternating
    assert sum(s.nbytes for s in weight_loads) == 1024 * 512
    inputs = [np.random.default_rng(1).integers(-128, 128, io.shape, dtype=np.int8) for io in plan.inputs]
    regions, statuses = golden.run_stream(FunctionalNpu(HW), plan, schedule.words(), schedule.constants, inputs)
    assert statuses[0].status == Status.OK
    np.testing.assert_array_equal(golden.read_outputs(plan, regions)[0], golden.run_plan(plan, inputs)[0])
    total = statuses[0].cycles
    assert total == cycles.stream_cycles(schedule.steps, HW)
    assert 65536 < total <= 1.25 * 65536, total
