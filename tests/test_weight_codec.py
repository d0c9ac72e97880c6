"""Weight compression (issue 25): the codec (npu_byoc.arch.weight_codec) against hand-derived
sizes and a round trip over random tensors; the decode DMA on the stream machine and the C
model (the same bytes, status and word index for good and hostile encoded streams; the
opcode invalid without a decoder; the load-then-decode cycles by hand); the compiler's pieces
within the decoder's buffer; the compressed fixtures bit-exact with LiteRT; the cycle model
equal to the C model under two memories, and the cycles dropping where the weights' memory
is the wall; the encoded bytes against Vela's mlw. The RTL's decoder: tests/test_rtl_wdec.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import npu_byoc
from npu_byoc.arch import cycles, weight_codec
from npu_byoc.arch.config import DEFAULT_CONFIG, configure
from npu_byoc.arch.encoder import Dma, encode
from npu_byoc.arch.isa import DECODE_BUFFER_BYTES, DECODE_DMA, Opcode, Reg, Region, Status, opcode_of, set_reg_word
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.codegen.weight_compress import PIECE_BYTES, load_pieces, weight_bytes
from npu_byoc.runtime import golden
from npu_byoc.runtime.machine import Machine

from .conftest import model_path, reference
from .test_functional import run_both
from .test_memory import VELA_LIKE

DECODER = replace(DEFAULT_CONFIG, weight_decoder_bytes_per_cycle=16)
# Where decoding pays: weights in a flash of 1 byte a cycle (Vela's Shared_Sram), or a decoder
# four times as fast as the default 16-byte port (load, then decode: code and writes add up)
FLASH_DECODER = replace(VELA_LIKE, weight_decoder_bytes_per_cycle=16)
FAST_DECODER = replace(DEFAULT_CONFIG, weight_decoder_bytes_per_cycle=64)
COMPRESSIBLE = ("mobilenet_v1_pruned_int8.tflite", "mobilenet_v1_clustered_int8.tflite")
VELA = Path(__file__).parent / "fixtures" / "models" / "compressible_vela.json"


# ---------------------------------------------------------------------------------------------
# The codec


def test_sizes_by_hand():
    rng = np.random.default_rng(25)
    # 16 values: a 16-entry palette and 4-bit indices, 2 + 16 + 1000 / 2
    clustered = rng.choice(rng.integers(1, 256, 16), 1000).astype(np.uint8)
    clustered[:16] = np.unique(clustered)[0]  # still at most 16 distinct values
    assert len(weight_codec.encode(clustered)) == 2 + np.unique(clustered).size + 500
    # 60% zeros, 100 distinct non-zero values: bitmap (125) + the 400 others raw (a 100-entry
    # palette and 7-bit indices would take 2 + 100 + 125 + 350); with 20 values, 5-bit indices pay
    pruned = np.zeros(1000, np.uint8)
    pruned[rng.permutation(1000)[:400]] = rng.permutation(np.arange(1, 101).repeat(4)).astype(np.uint8)
    assert len(weight_codec.encode(pruned)) == 2 + 125 + 400
    pruned[pruned > 20] = pruned[pruned > 20] % 20 + 1
    assert len(weight_codec.encode(pruned)) == 2 + 20 + 125 + 400 * 5 // 8
    # all zero: the header and the bitmap; one value: a one-entry palette, 1 bit each
    assert len(weight_codec.encode(np.zeros(1000, np.uint8))) == 2 + 125
    assert len(weight_codec.encode(np.full(1000, 7, np.uint8))) == 2 + 1 + 125
    # 256 values, uniformly: nothing is smaller, the transfer stays raw
    assert weight_codec.encode(np.arange(256, dtype=np.uint8).repeat(4)) is None


def tensors():
    n = st.integers(1, 700)
    kinds = st.sampled_from(["random", "zeros", "one", "all256", "pruned", "clustered"])
    return st.tuples(kinds, n, st.integers(0, 2**32 - 1))


def make_tensor(kind: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "zeros":
        return np.zeros(n, np.uint8)
    if kind == "one":
        return np.full(n, rng.integers(0, 256), np.uint8)
    if kind == "all256":
        return rng.permutation(np.arange(256, dtype=np.uint8).repeat(-(-n // 256)))[:n]
    x = rng.integers(-128, 128, n).astype(np.int8)
    if kind == "pruned":
        x[np.abs(x.astype(int)) < 77] = 0
    elif kind == "clustered":
        x = rng.choice(rng.integers(-128, 128, 16), n).astype(np.int8)
    return x.view(np.uint8)


@settings(max_examples=300, deadline=None)
@given(tensors())
def test_round_trip(t):
    data = make_tensor(*t)
    code = weight_codec.encode(data)
    sizes = [weight_codec.encoded_size(data, b, p) for b in (False, True) for p in (False, True)]
    if code is None:  # kept raw only when no mode is smaller
        assert min(sizes) >= data.size
        return
    assert len(code) == min(sizes) < data.size
    np.testing.assert_array_equal(weight_codec.decode(code, data.size), data)
    for b in (False, True):  # every mode decodes, not only the chosen one
        for p in (False, True):
            np.testing.assert_array_equal(weight_codec.decode(weight_codec.encode_mode(data, b, p), data.size), data)


# ---------------------------------------------------------------------------------------------
# The decode DMA on the machine and the C model


def decode_stream(code: bytes, n: int, background: bool = False, sram_addr: int = 64):
    steps = [Dma(Opcode.DMA_IN, int(Region.CONST), 3, sram_addr, len(code), decoded=n, background=background),
             Dma(Opcode.DMA_OUT, int(Region.SCRATCH), 0, sram_addr, n)]  # fmt: skip
    const = np.zeros(len(code) + 3, np.uint8)
    const[3:] = np.frombuffer(code, np.uint8)
    return encode(steps), {int(Region.CONST): const, int(Region.SCRATCH): np.zeros(max(n, 1), np.uint8)}


def test_decode_dma_writes_the_weights():
    data = make_tensor("pruned", 500, 3)
    for background in (False, True):
        words, regions = decode_stream(weight_codec.encode(data), data.size, background)
        expected, got, out = run_both(words, regions, DECODER)
        assert expected.ok, expected
        np.testing.assert_array_equal(out[int(Region.SCRATCH)], data)
        assert got.cycles == cycles.stream_cycles([Dma(Opcode.DMA_IN, 0, 3, 64, len(weight_codec.encode(data)),
                                                       decoded=500, background=background),
                                                   Dma(Opcode.DMA_OUT, 1, 0, 64, 500)], DECODER)  # fmt: skip


def test_decode_cycles_by_hand():
    """Load, then decode: 300 encoded bytes behind the default 16-byte port are 19 reads, one
    header cycle, then 1000 bytes at 16 a cycle (63): 5 + 19 + 1 + 63; at 1 byte a cycle 1000."""
    assert cycles.decode_dma_cycles(300, 1000, DECODER) == 5 + 19 + 1 + 63
    assert cycles.decode_dma_cycles(300, 1000, replace(DECODER, weight_decoder_bytes_per_cycle=1)) == 5 + 19 + 1 + 1000


def hostile(rng: np.random.Generator, code: bytes) -> bytes:
    b = bytearray(code)
    how = rng.integers(0, 6)
    if how == 0:  # reserved mode bits or index bits above 8
        b[0] = int(rng.choice([b[0] | 0x02, b[0] | 0x08, 0x90 | (b[0] & 1), 0xF0]))
    elif how == 1:  # a palette larger than its indices reach
        b[1] = 0xFF
    elif how == 2:  # truncated: the code overruns DMA_N0
        b = b[: int(rng.integers(0, len(b)))]
    elif how == 3:  # trailing bytes
        b += bytes(int(rng.integers(1, 4)))
    elif how == 4:  # the last (padding / index) byte all ones
        b[-1] = 0xFF
    else:  # a random byte flipped
        b[int(rng.integers(0, len(b)))] ^= int(rng.integers(1, 256))
    return bytes(b)


def test_hostile_encoded_streams_give_the_same_status():
    """Bad headers, overruns, padding bits, indices beyond the palette, random flips: the
    machine and the C model agree on status and word index (BAD_ENCODING at the kick; its SRAM
    bytes undefined), and never hang."""
    rng = np.random.default_rng(11)
    statuses = set()
    for trial in range(300):
        data = make_tensor(["pruned", "clustered", "zeros", "one"][trial % 4], int(rng.integers(1, 300)), trial)
        code = weight_codec.encode_mode(data, bool(trial & 4), bool(trial & 8))
        bad = hostile(rng, code)
        if not bad:
            continue
        words, regions = decode_stream(bad, data.size, background=bool(trial & 16))
        expected, _, _ = run_both(words, regions, DECODER)
        statuses.add(expected.status)
        if expected.status == Status.BAD_ENCODING:
            kick = [opcode_of(w) for w in words].index(Opcode.DMA_IN_DECODE_ASYNC if trial & 16 else Opcode.DMA_IN_DECODE)
            machine = Machine(DECODER)
            assert machine.run(words, {r: a.copy() for r, a in regions.items()}).word_index == kick == expected.word_index
    assert Status.BAD_ENCODING in statuses


def bad_code_then(failing: Dma, background: bool) -> tuple[np.ndarray, dict]:
    """A bad code's decode DMA (word 4 on) followed by ``failing``."""
    bad = bytes([0x02, 0])  # a reserved mode bit
    steps = [Dma(Opcode.DMA_IN, int(Region.CONST), 0, 64, len(bad), decoded=8, background=background), failing]
    return encode(steps), {int(Region.CONST): np.frombuffer(bad, np.uint8).copy(), int(Region.SCRATCH): np.zeros(8, np.uint8)}


def test_a_bad_background_code_is_the_runs_status():
    """Found at the end of its transfer, a background DMA's bad code is the run's status at
    its word, even when a later command fails first in stream order (here a DMA from an
    unbound region): the first bad transfer of the run wins."""
    for background in (False, True):
        words, regions = bad_code_then(Dma(Opcode.DMA_IN, 5, 0, 0, 4), background)
        kick = [opcode_of(w) for w in words].index(Opcode.DMA_IN_DECODE_ASYNC if background else Opcode.DMA_IN_DECODE)
        expected, got, _ = run_both(words, regions, DECODER)
        assert (expected.status, expected.word_index) == (got.status, got.word_index) == (Status.BAD_ENCODING, kick)


def test_decode_registers_and_no_decoder():
    data = make_tensor("clustered", 200, 1)
    code = weight_codec.encode(data)
    words, regions = decode_stream(code, data.size)
    # without a weight decoder the opcodes do not exist
    for op in DECODE_DMA:
        w = words.copy()
        w[w == (int(Opcode.DMA_IN_DECODE) << 24)] = int(op) << 24
        expected, _, _ = run_both(w, regions, DEFAULT_CONFIG)
        assert expected.status == Status.INVALID_OPCODE
    # DMA_DECODE_BYTES 0, an SRAM block past the end, a region overrun
    zero = encode([Dma(Opcode.DMA_IN, 0, 3, 64, len(code), decoded=1)])
    at = list(zero).index(set_reg_word(Reg.DMA_DECODE_BYTES))
    zero[at + 1] = 0  # DMA_DECODE_BYTES 0 instead of 1
    assert run_both(zero, regions, DECODER)[0].status == Status.INVALID_PARAMETER
    words, regions = decode_stream(code, data.size, sram_addr=DECODER.sram_bytes - data.size + 1)
    assert run_both(words, regions, DECODER)[0].status == Status.ADDRESS_OUT_OF_RANGE
    over = encode([Dma(Opcode.DMA_IN, 0, 3, 64, len(code) + 1, decoded=data.size)])
    assert run_both(over, regions, DECODER)[0].status == Status.ADDRESS_OUT_OF_RANGE
    # a code larger than the decoder's buffer (checked before the region's range)
    big = encode([Dma(Opcode.DMA_IN, 0, 3, 64, DECODE_BUFFER_BYTES + 1, decoded=data.size)])
    assert run_both(big, regions, DECODER)[0].status == Status.INVALID_PARAMETER


# ---------------------------------------------------------------------------------------------
# The compressed fixtures


@pytest.fixture(scope="module")
def compressible_plans(plans):
    return {name: plans(name) for name in COMPRESSIBLE}


def test_a_load_is_cut_into_pieces_the_buffer_holds():
    """16 KB: 4 KB of zeros, 8 KB of every byte value alike (no code is smaller), 4 KB of
    zeros. Behind the flash each zero piece decodes from 2 + 512 bytes (header and bitmap) and
    the 8 KB stay one raw transfer; behind the default port nothing pays, the load stays whole."""
    data = np.zeros(16384, np.uint8)
    data[4096:12288] = make_tensor("all256", 8192, 0)
    zeros = weight_codec.encode(np.zeros(4096, np.uint8))
    assert len(zeros) == 2 + 512
    assert load_pieces(data, FLASH_DECODER) == [(0, 4096, zeros), (4096, 8192, None), (12288, 4096, zeros)]
    assert load_pieces(data, DECODER) == [(0, 16384, None)]


@pytest.mark.parametrize("name", COMPRESSIBLE)
def test_compressed_fixture_is_bit_exact_with_litert(name):
    """The model library with the C model of an NPU with a decoder behind a flash (where it decodes): LiteRT's outputs."""
    model = npu_byoc.build(npu_byoc.load_model(model_path(name)), "functional", hw=FLASH_DECODER)
    ref = reference(name)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        got = model.run(inputs)[0]
        np.testing.assert_array_equal(got, np.asarray(outputs[0]).reshape(got.shape))


@pytest.mark.parametrize("name", COMPRESSIBLE)
def test_machine_c_model_and_cycles_with_the_decoder(compressible_plans, name):
    """Under the default memories (a 64-byte decoder) and Vela's Shared_Sram (weights in a 1
    byte a cycle flash): the machine's bytes = the C model's = the golden model's; the C model's
    cycles = the cycle model's; every code within the decoder's buffer; the cycles drop against
    the same NPU without a decoder where the flash is the wall."""
    for hw in (FAST_DECODER, FLASH_DECODER):
        raw = replace(hw, weight_decoder_bytes_per_cycle=0)
        for plan in compressible_plans[name].values():
            schedule = schedule_partition(plan, hw)
            decoded = [s for s in schedule.steps if s.opcode in DECODE_DMA]
            assert decoded and all(s.n0 <= DECODE_BUFFER_BYTES and s.decoded <= PIECE_BYTES for s in decoded)
            inputs = [np.random.default_rng(1).integers(-128, 128, io.shape, dtype=np.int8) for io in plan.inputs]
            regions = golden.allocate_regions(plan, inputs)
            regions[int(Region.CONST)] = np.frombuffer(schedule.constants, np.uint8).copy()
            expected, got, out = run_both(schedule.words(), regions, hw)
            assert expected.ok, expected
            assert got.cycles == cycles.stream_cycles(schedule.steps, hw)
            np.testing.assert_array_equal(golden.read_outputs(plan, out)[0], golden.run_plan(plan, inputs)[0])
            before = cycles.stream_cycles(schedule_partition(plan, raw).steps, raw)
            if hw is FLASH_DECODER:  # (behind the default port the weights hide behind the compute either way)
                assert got.cycles < 0.8 * before, (got.cycles, before)


def kernel_bytes(kick) -> int:
    """The weight bytes a MAC kick reads from WEIGHT_ADDR."""
    taps = 1 if kick.opcode == Opcode.FC else kick[Reg.KERNEL_H] * kick[Reg.KERNEL_W]
    return kick[Reg.OFM_C] * taps * (1 if kick.opcode == Opcode.DWCONV else kick[Reg.IFM_C])


@pytest.mark.parametrize("name", COMPRESSIBLE)
def test_encoded_weights_are_no_larger_than_vela(compressible_plans, name):
    """Our encoded weights (per channel block as loaded, in pieces of 4 KB, the requantize
    records not included, as Vela's weight_bytes exclude its scales) against Vela 5.2.0's
    total_npu_encoded_weights for the same file (recorded by bench/vela.py --record-compressed)
    on the memory Vela assumed (Shared_Sram: the weights in flash), and the report's sum equal
    to the schedule's encoded transfers of weights."""
    vela = json.loads(VELA.read_text())[name]
    original = encoded = 0
    for plan in compressible_plans[name].values():
        schedule = schedule_partition(plan, FLASH_DECODER, overlapped=False)  # no merged transfers
        for k, (op, tiling) in enumerate(zip(plan.ops, schedule.tilings)):
            o, e = weight_bytes(op, tiling.channels, FLASH_DECODER)
            original, encoded = original + o, encoded + e
            steps = [s for s, j in zip(schedule.steps, schedule.step_op) if j == k]
            blocks = [(s[Reg.WEIGHT_ADDR], s[Reg.WEIGHT_ADDR] + kernel_bytes(s)) for s in steps
                      if s.opcode in (Opcode.CONV, Opcode.DWCONV, Opcode.FC)]  # fmt: skip
            loads = [s for s in steps if isinstance(s, Dma) and s.region == Region.CONST
                     and any(lo <= s.sram_addr < hi for lo, hi in blocks)]  # a block's pieces  # fmt: skip
            assert sum(s.nbytes for s in loads) == e and sum(s.sram_bytes for s in loads) == o, op.name
    assert original <= vela["total_original_weights"]  # every kernel; Vela's count adds 1,040 bytes of its own
    assert encoded <= vela["total_npu_encoded_weights"], (encoded, vela)
    assert encoded < 0.55 * original


def test_a_slow_decoder_behind_a_fast_memory_is_not_used(compressible_plans):
    """A decoder of 1 byte per cycle behind the default 8-byte-per-cycle memory would load
    every block slower than its raw bytes: the compiler keeps them raw (the schedule, its
    constants and its cycles are the decoder-less ones), and the report counts no saving.
    Behind a U55-like flash (1 byte per cycle for weights) a 4-byte decoder pays."""
    slow = replace(DEFAULT_CONFIG, weight_decoder_bytes_per_cycle=1)
    for plan in compressible_plans[COMPRESSIBLE[0]].values():
        with_slow, without = schedule_partition(plan, slow), schedule_partition(plan, DEFAULT_CONFIG)
        assert not [s for s in with_slow.steps if s.opcode in DECODE_DMA]
        assert with_slow.constants == without.constants
        assert cycles.stream_cycles(with_slow.steps, slow) == cycles.stream_cycles(without.steps, DEFAULT_CONFIG)
        for op, tiling in zip(plan.ops, with_slow.tilings):
            original, encoded = weight_bytes(op, tiling.channels, slow)
            assert encoded == original, op.name
        flash = replace(VELA_LIKE, weight_decoder_bytes_per_cycle=4)
        assert [s for s in schedule_partition(plan, flash).steps if s.opcode in DECODE_DMA]


def test_the_rtl_without_a_decoder_rejects_the_opcodes():
    """An RTL built without a decoder (the default) rejects the decode opcodes as the models
    do (INVALID_OPCODE at the kick)."""
    from npu_byoc.runtime import verilator as V

    data = make_tensor("clustered", 200, 1)
    words, regions = decode_stream(weight_codec.encode(data), data.size)
    expected = Machine(DEFAULT_CONFIG).run(words, {r: a.copy() for r, a in regions.items()})
    got = V.VerilatorNpu(DEFAULT_CONFIG).run(words, {r: a.copy() for r, a in regions.items()})
    assert (got.status, got.word_index) == (expected.status, expected.word_index)
    assert expected.status == Status.INVALID_OPCODE
