"""The RTL's weight decoder (hw/rtl/npu_wdec.v behind npu_dma) against the C model and the
cycle model: decode transfers of every mode, in the foreground and the background, for W in
{1, 16} under the default, Vela-like and a random memory (the same cycles per command and
in total, the same bytes); each register of a decode DMA at its boundaries and hostile codes
with the C model's status and word; both compressed
MobileNets co-simulated bit-exact with the golden model, the analytic model exact.

One Verilator build per W (the default configuration otherwise; the memories are passed at
run time), cached for the session: a few minutes each on a cold cache."""

from __future__ import annotations

import random
from dataclasses import replace
from functools import cache

import numpy as np
import pytest

from npu_byoc.arch import cycles, weight_codec
from npu_byoc.arch.config import DEFAULT_CONFIG, HwConfig
from npu_byoc.arch.encoder import Dma, encode
from npu_byoc.arch.isa import DECODE_BUFFER_BYTES, DECODE_DMA, KICK_REGS, Opcode, Region, Status, opcode_of, set_reg_word
from npu_byoc.arch.memory import FIELDS as MEMORY_FIELDS, MEMORIES
from npu_byoc.runtime.functional import FunctionalNpu

from .conftest import model_path, reference
from .test_memory import VELA_LIKE, random_memory_config
from .test_weight_codec import COMPRESSIBLE, bad_code_then, hostile, make_tensor

pytestmark = pytest.mark.slow

BASE = DEFAULT_CONFIG


def with_memories(hw: HwConfig, source: HwConfig) -> HwConfig:
    return replace(hw, **{f"{m}_{f}": getattr(source, f"{m}_{f}") for m in MEMORIES for f in MEMORY_FIELDS})


MEMORY_CASES = {"default": DEFAULT_CONFIG, "vela": VELA_LIKE, "random": random_memory_config(random.Random(11))}


@pytest.fixture(scope="session")
def rtl():
    """VerilatorNpu for a configuration, built once per W (the memories are run-time options)."""
    from npu_byoc.runtime import verilator as V

    return cache(V.VerilatorNpu)


def transfers() -> tuple[list[Dma], dict]:
    """Decode transfers of each mode (one a 4096-byte code, the buffer's size) into SRAM, a
    raw DMA_IN between them, and the decoded bytes written back to SCRATCH."""
    tensors = [make_tensor(kind, n, 7 + j) for j, (kind, n) in
               enumerate([("pruned", 700), ("clustered", 333), ("zeros", 65), ("one", 9), ("random", 400)])]  # fmt: skip
    codes = [weight_codec.encode_mode(t, bool(j & 1), bool(j & 2)) for j, t in enumerate(tensors)]
    full = make_tensor("random", DECODE_BUFFER_BYTES - 2, 3)  # raw, no bitmap: 2 + N bytes
    tensors.append(full)
    codes.append(weight_codec.encode_mode(full, False, False))
    assert len(codes[-1]) == DECODE_BUFFER_BYTES
    const = bytearray()
    steps: list[Dma] = []
    sram = 0
    for j, (t, code) in enumerate(zip(tensors, codes)):
        steps.append(Dma(Opcode.DMA_IN, int(Region.CONST), len(const), sram, len(code), decoded=t.size,
                         background=bool(j % 2)))  # fmt: skip
        const += code
        if j == 2:  # a raw copy among them
            steps.append(Dma(Opcode.DMA_IN, int(Region.CONST), 0, 20000, 100, background=True))
        sram += t.size
    steps.append(Dma(Opcode.DMA_OUT, int(Region.SCRATCH), 0, 0, sram))
    regions = {int(Region.CONST): np.frombuffer(bytes(const), np.uint8).copy(),
               int(Region.SCRATCH): np.zeros(sram, np.uint8)}  # fmt: skip
    return steps, regions | {"expected": np.concatenate(tensors)}


# W = 1 (a byte a cycle, the slowest) and 16 (the bench's): each W is a Verilator build of its own
@pytest.mark.parametrize("w", [1, 16])
def test_decode_transfers_equal_the_c_model_and_the_cycle_model(rtl, w):
    steps, regions = transfers()
    expected = regions.pop("expected")
    words = encode(steps)
    for name, memories in MEMORY_CASES.items():
        hw = with_memories(replace(BASE, weight_decoder_bytes_per_cycle=w), memories)
        mine = {r: a.copy() for r, a in regions.items()}
        got = rtl(hw).run(words, mine, trace=True)
        c_model = FunctionalNpu(hw).run(words, {r: a.copy() for r, a in regions.items()})
        assert got.status == c_model.status == Status.OK, (name, got, c_model)
        np.testing.assert_array_equal(mine[int(Region.SCRATCH)], expected)
        executed = [e.cycles for e in got.trace if e.opcode != Opcode.STOP]
        assert executed == cycles.command_timeline(steps, hw), name
        assert got.cycles == cycles.stream_cycles(steps, hw) == c_model.cycles, name


def with_register(words: np.ndarray, reg, value: int) -> np.ndarray:
    """``words`` with ``reg`` set to ``value`` just before its decode DMA (the header's length fixed)."""
    at = next(i for i, w in enumerate(words) if opcode_of(int(w)) in DECODE_DMA)
    out = np.concatenate([words[:at], np.array([set_reg_word(reg), value & 0xFFFFFFFF], np.uint32), words[at:]])
    out[2] = out.size
    return out


def test_decode_registers_at_their_boundaries(rtl):
    """Every register of DMA_IN_DECODE(_ASYNC) at its boundaries (0, 1, the buffer's 4096 and
    4097, the SRAM's end, 2^31, 2^32 - 1, the value ± 1): the RTL's checks in the ISA's order,
    the C model's status and word; the same bytes when the run is OK."""
    from .test_rtl_stream import _boundaries
    from .test_weight_codec import decode_stream

    hw = replace(BASE, weight_decoder_bytes_per_cycle=16)
    npu, c_model = rtl(hw), FunctionalNpu(hw)
    data = make_tensor("pruned", 200, 4)
    seen = set()
    for background in (False, True):
        words, regions = decode_stream(weight_codec.encode(data), data.size, background)
        op = Opcode.DMA_IN_DECODE_ASYNC if background else Opcode.DMA_IN_DECODE
        step = Dma(Opcode.DMA_IN, int(Region.CONST), 3, 64, len(weight_codec.encode(data)), decoded=data.size)
        for reg, value in zip(KICK_REGS[op], (r for _, r in step.registers())):
            for word in _boundaries(value):
                mutated = with_register(words, reg, word)
                ours, theirs = {r: a.copy() for r, a in regions.items()}, {r: a.copy() for r, a in regions.items()}
                got, want = npu.run(mutated, ours), c_model.run(mutated, theirs)
                assert (got.status, got.word_index) == (want.status, want.word_index), (reg, word, got, want)
                if got.status == Status.OK:
                    np.testing.assert_array_equal(ours[int(Region.SCRATCH)], theirs[int(Region.SCRATCH)])
                seen.add(got.status)
    assert seen >= {Status.OK, Status.INVALID_REGION, Status.INVALID_PARAMETER, Status.ADDRESS_OUT_OF_RANGE,
                    Status.BAD_ENCODING}  # fmt: skip


@pytest.mark.parametrize("w", [16])
def test_hostile_codes_give_the_c_models_status(rtl, w):
    """Bad headers, overruns, padding bits, indices beyond the palette, random flips, in the
    foreground and the background, and a bad background code before a failing command: the
    RTL's status and word are the C model's (BAD_ENCODING at the transfer), and it never hangs."""
    from .test_weight_codec import decode_stream

    hw = with_memories(replace(BASE, weight_decoder_bytes_per_cycle=w), VELA_LIKE)
    npu, c_model = rtl(hw), FunctionalNpu(hw)
    rng = np.random.default_rng(25 + w)
    statuses = set()
    cases = [bad_code_then(Dma(Opcode.DMA_IN, 5, 0, 0, 4), background) for background in (False, True)]
    for trial in range(120):
        data = make_tensor(["pruned", "clustered", "zeros", "one"][trial % 4], int(rng.integers(1, 300)), trial)
        bad = hostile(rng, weight_codec.encode_mode(data, bool(trial & 4), bool(trial & 8)))
        if bad:
            cases.append(decode_stream(bad, data.size, background=bool(trial & 16)))
    for words, regions in cases:
        want = c_model.run(words, {r: a.copy() for r, a in regions.items()})
        got = npu.run(words, {r: a.copy() for r, a in regions.items()})
        assert (got.status, got.word_index) == (want.status, want.word_index), (got, want)
        statuses.add(got.status)
    assert Status.BAD_ENCODING in statuses and Status.OK in statuses


@pytest.mark.parametrize("name", COMPRESSIBLE)
def test_compressed_mobilenets_cosimulate_bit_exact(rtl, name):
    """Behind Vela's memories (Shared_Sram: weights in a flash of 1 byte a cycle) with a
    16-byte decoder: every layer's output equals the golden model's and the analytic model's
    cycles are the RTL's; the weights went encoded."""
    from npu_byoc.runtime.cosim import cosim

    hw = with_memories(replace(BASE, weight_decoder_bytes_per_cycle=16), VELA_LIKE)
    ref = reference(name)
    rep = cosim(model_path(name), ref["inputs"][0], ref["outputs"][0], hw=hw, npu=rtl(hw))
    s = rep.summary
    assert s["max_diff_golden"] == 0 and s["cycle_model_exact"], s
    assert s["weight_bytes_encoded"] < 0.65 * s["weight_bytes"], s
