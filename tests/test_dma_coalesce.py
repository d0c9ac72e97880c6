"""Row coalescing of DMA descriptors (npu_byoc.codegen.dma_box): a coalesced descriptor copies
the same bytes to the same places in the same order as the box it replaces (checked against
docs/isa.md's address formula, enumerated here), in fewer and longer rows, and the memory
charges it what a hand count of its runs says."""

from __future__ import annotations

import random

import pytest

from npu_byoc.arch import cycles
from npu_byoc.arch.config import configure
from npu_byoc.arch.encoder import Dma
from npu_byoc.arch.isa import Opcode, Region
from npu_byoc.codegen.dma_box import box_dma, coalesce, is_one_run
from npu_byoc.codegen.tile_steps import _box
from npu_byoc.ops.npu_ops import TensorRef

# Ethos_U55_High_End_Embedded's SRAM behind an 8-byte port (npu-byoc hw --from-vela-ini)
U55_SRAM = configure(dma_bytes_per_cycle=8, fm_mem_bytes_per_cycle=8, fm_mem_read_latency=32,
                     fm_mem_write_latency=32, fm_mem_burst_bytes=32, fm_mem_max_reads=4,
                     fm_mem_max_writes=4)  # fmt: skip


def copies(dma: Dma) -> list[tuple[int, int]]:
    """(SRAM address, region address) of every byte, in copy order (docs/isa.md DMA_IN)."""
    return [(dma.sram_addr + (i2 * dma.n1 + i1) * dma.n0 + i0,
             dma.ext_addr + i2 * dma.stride2 + i1 * dma.stride1 + i0 * dma.stride0)
            for i2 in range(dma.n2) for i1 in range(dma.n1) for i0 in range(dma.n0)]  # fmt: skip


def rows(dma: Dma) -> int:
    """Contiguous rows the DMA asks the memory for (docs/memory.md, step 1)."""
    return dma.n2 * dma.n1 * (1 if dma.stride0 == 1 else dma.n0)


def test_coalesced_descriptor_copies_the_same_bytes_in_the_same_order():
    rng = random.Random(25)
    merged = 0
    for _ in range(3000):
        n = [rng.choice([1, 1, 2, 3, 5]) for _ in range(3)]
        s0 = rng.choice([1, 1, 2, 7, -1, 0])
        s1 = rng.choice([n[0] * s0, n[0] * s0, 11, 0, -3])
        s2 = rng.choice([n[1] * s1, n[1] * s1, 40, 0])
        raw = Dma(Opcode.DMA_IN, 1, 500, 64, n[0], n[1], n[2], s0, s1, s2)
        dma = box_dma(Opcode.DMA_IN, 1, 500, 64, [(n[0], s0), (n[1], s1), (n[2], s2)])
        assert copies(dma) == copies(raw), raw
        assert rows(dma) <= rows(raw), raw
        merged += rows(dma) < rows(raw)
    assert merged > 300  # the cases above do merge, not only pass through


def test_coalesce_by_hand():
    # 4 channels of every pixel of 11 columns, rows 88 bytes apart: one 44-byte run per row
    assert coalesce([(4, 1), (11, 4), (9, 88)]) == [(44, 1), (9, 88)]
    # a channel slice (8 of 16) keeps its 8-byte runs; its full-width rows merge into one dimension
    assert coalesce([(8, 1), (16, 16), (16, 256)]) == [(8, 1), (256, 16)]
    # one channel of an NCHW tensor: the plane's rows are contiguous, the whole box is one run
    assert coalesce([(1, 1024), (32, 1), (4, 32)]) == [(128, 1)]
    # three NCHW channels stay one byte per pixel (the SRAM side is HWC); full-width rows merge
    assert coalesce([(3, 1024), (32, 1), (4, 32)]) == [(3, 1024), (128, 1)]
    assert coalesce([(1, 5), (1, 7), (1, 9)]) == [(1, 1)]


def test_box_of_an_output_tile_is_rows_of_whole_pixels():
    """transpose_conv_int8's output tile (9 rows × 11 columns × 4 channels of a 22-column
    tensor): 9 runs of 44 bytes instead of 99 runs of 4. Under U55's SRAM each run pays one
    32-byte burst (4 cycles) at least and 4 writes in flight wait for the 32-cycle latency."""
    ref = TensorRef("out", int(Region.IO) + 1, 0, (18, 22, 4))
    dma = _box(Opcode.DMA_OUT, ref, 128, 0, 9, 0, 11, 0, 4)
    assert (dma.n0, dma.n1, dma.n2, dma.stride0, dma.stride1) == (44, 9, 1, 1, 88)
    # 9 runs of 44 bytes = 6 cycles each; (4 − 1)·6 < 32, so every 4th run waits:
    # d = 32 + 9·6 + floor(8 / 4)·(32 − 3·6) = 114
    assert cycles.step_cycles(dma, U55_SRAM) == cycles.DMA_SETUP_CYCLES + 114
    # the uncoalesced box: 99 runs of 4 bytes, 4 cycles each: 32 + 396 + 24·(32 − 12) = 908
    raw = Dma(Opcode.DMA_OUT, dma.region, 0, 128, 4, 11, 9, 1, 4, 88)
    assert cycles.step_cycles(raw, U55_SRAM) == cycles.DMA_SETUP_CYCLES + 908


@pytest.mark.parametrize("box, one_run", [
    ((0, 2, 0, 22, 0, 4), True),    # whole rows: contiguous
    ((0, 1, 3, 5, 0, 4), True),     # part of one row: contiguous
    ((0, 2, 0, 11, 0, 4), False),   # part of two rows
    ((0, 1, 0, 22, 0, 2), False),   # a channel block
])  # fmt: skip
def test_one_run(box, one_run):
    ref = TensorRef("t", int(Region.SCRATCH), 0, (18, 22, 4))
    assert is_one_run(_box(Opcode.DMA_IN, ref, 0, *box)) is one_run


def test_a_single_strided_pixel_is_not_one_run():
    """Three channels of one pixel of an NCHW tensor are 3 bytes 1024 apart: n0 == bytes, but
    not one run (a resident tensor cannot be addressed in place there)."""
    ref = TensorRef("nchw", int(Region.IO), 0, (32, 32, 3), "NCHW")
    assert not is_one_run(_box(Opcode.DMA_IN, ref, 0, 5, 1, 7, 1, 0, 3))
