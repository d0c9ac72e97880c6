"""Weight compression of a schedule: CONST loads that encode smaller become DMA_IN_DECODE.

Runs on a partition's steps before the overlap pass (which then moves the encoded transfers
like any other, and never merges one with its neighbours) when the NPU has a weight decoder
(``hw.weight_decoder_bytes_per_cycle``). Every contiguous DMA_IN from CONST (a channel
block's weights, its requantize records, a table) is cut into pieces of ``PIECE_BYTES``
decoded bytes, each encoded on its own with npu_byoc.arch.weight_codec: the decoder loads a
whole code before it writes (isa.DECODE_BUFFER_BYTES), and a code is always smaller than its
piece. A piece is decoded when its transfer is no slower than its raw bytes (``worth_decoding``:
a slow decoder behind a fast memory would cost cycles for fewer bytes); neighbouring pieces
that are not stay one raw DMA_IN, and a load stays as it was when none of its pieces pays or
its transfers together take longer than it (``load_pieces``). The
CONST blob is rebuilt: the bytes still read raw (moved together, each at its old alignment
modulo 16), then each distinct encoded piece.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..arch import weight_codec
from ..arch.config import HwConfig
from ..arch.cycles import decode_dma_cycles, dma_cycles
from ..arch.encoder import Dma, Step
from ..arch.isa import DECODE_BUFFER_BYTES, Opcode, Region
from ..ops.npu_ops import Conv2D, DepthwiseConv2D, FullyConnected, NpuOp, Phased
from .tiling import ALIGN  # the blob's transfers start where the scheduler's constants do

# Decoded bytes per encoded piece: the largest whose code always fits the decoder's buffer
# (a code is kept only when smaller than its bytes). Smaller pieces pay a header (and palette)
# each; 4 KB kept the pruned and clustered MobileNets within 1% of one code per block.
PIECE_BYTES = DECODE_BUFFER_BYTES


def worth_decoding(code: bytes | None, decoded: int, hw: HwConfig) -> bool:
    """Whether ``code`` (None: the codec found nothing smaller) of ``decoded`` CONST bytes loads
    through the decoder in no more cycles than the raw bytes do on the const memory: fewer bytes
    read are worth having when they cost no time (the decoder's register write aside)."""
    if code is None or not hw.weight_decoder_bytes_per_cycle:
        return False
    raw = dma_cycles(decoded, hw=hw, region=int(Region.CONST))
    return decode_dma_cycles(len(code), decoded, hw, int(Region.CONST)) <= raw


def _is_const_load(step: Step) -> bool:
    return isinstance(step, Dma) and step.direction == Opcode.DMA_IN and step.region == Region.CONST and not step.decoded


def _contiguous(step: Dma) -> bool:
    return step.n1 == step.n2 == 1 and step.stride0 == 1


def _span(step: Dma) -> tuple[int, int]:
    """[first, last + 1): the CONST bytes a raw transfer reads."""
    counts, strides = (step.n2, step.n1, step.n0), (step.stride2, step.stride1, step.stride0)
    first = step.ext_addr + sum(min(0, (c - 1) * s) for c, s in zip(counts, strides))
    last = step.ext_addr + sum(max(0, (c - 1) * s) for c, s in zip(counts, strides))
    return first, last + 1


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _pad_to(blob: bytearray, offset: int) -> None:
    blob += bytes(offset - len(blob))


def load_pieces(data: np.ndarray, hw: HwConfig) -> list[tuple[int, int, bytes | None]]:
    """A contiguous CONST load of ``data`` (uint8) as (offset, bytes, code or None for raw)
    transfers: each piece of ``PIECE_BYTES`` encoded where worth decoding, raw neighbours
    merged into one; the whole load raw when no piece decodes or the transfers together would
    take longer than the one raw load (each pays its own setup and memory latency)."""
    parts: list[tuple[int, int, bytes | None]] = []
    for off in range(0, data.size, PIECE_BYTES):
        piece = data[off : off + PIECE_BYTES]
        code = weight_codec.encode(piece) if hw.weight_decoder_bytes_per_cycle else None
        code = code if worth_decoding(code, piece.size, hw) else None
        if code is None and parts and parts[-1][2] is None:
            parts[-1] = (parts[-1][0], parts[-1][1] + piece.size, None)
        else:
            parts.append((off, piece.size, code))
    const = int(Region.CONST)
    cost = sum(dma_cycles(n, hw=hw, region=const) if c is None else decode_dma_cycles(len(c), n, hw, const)
               for _, n, c in parts)  # fmt: skip
    if all(c is None for _, _, c in parts) or cost > dma_cycles(data.size, hw=hw, region=const):
        return [(0, data.size, None)]
    return parts


def _pieces(step: Dma, data: np.ndarray, hw: HwConfig, codes: dict[tuple[int, int], bytes | None]) -> list[Dma]:
    """``step`` (a contiguous CONST load) as its ``load_pieces`` (the codes in ``codes``, keyed
    by (CONST address, bytes); a raw part's key is never a decoded piece's)."""
    parts = load_pieces(data[step.ext_addr : step.ext_addr + step.n0], hw)
    if len(parts) == 1 and parts[0][2] is None:
        return [step]
    for off, size, code in parts:
        codes[(step.ext_addr + off, size)] = codes.get((step.ext_addr + off, size)) or code
    return [replace(step, ext_addr=step.ext_addr + off, sram_addr=step.sram_addr + off, n0=size) for off, size, _ in parts]


def compress_constants(steps: list[Step], step_op: list[int], constants: bytes,
                       hw: HwConfig) -> tuple[list[Step], list[int], bytes]:  # fmt: skip
    """``steps`` (and each one's op) with every CONST load cut into pieces and each piece that
    is worth decoding decoded on the way in, and the new CONST blob they address."""
    data = np.frombuffer(bytes(constants), np.uint8)
    codes: dict[tuple[int, int], bytes | None] = {}
    split: list[Step] = []
    split_op: list[int] = []
    for step, k in zip(steps, step_op):
        parts = _pieces(step, data, hw, codes) if _is_const_load(step) and _contiguous(step) else [step]
        split += parts
        split_op += [k] * len(parts)
    steps = split
    raw = [s for s in steps if _is_const_load(s) and codes.get((s.ext_addr, s.n0)) is None]
    blob = bytearray()
    moved: list[tuple[int, int, int]] = []  # (old start, old end, new start)
    for lo, hi in _merged([_span(s) for s in raw]):
        start = -(-len(blob) // ALIGN) * ALIGN + lo % ALIGN
        _pad_to(blob, start)
        blob += data[lo:hi].tobytes()
        moved.append((lo, hi, start))
    placed: dict[tuple[int, int], int] = {}
    for key, code in codes.items():
        if code is not None:
            placed[key] = -(-len(blob) // ALIGN) * ALIGN
            _pad_to(blob, placed[key])
            blob += code
    out: list[Step] = []
    for step in steps:
        if not _is_const_load(step):
            out.append(step)
        elif (key := (step.ext_addr, step.n0)) in placed:
            out.append(replace(step, ext_addr=placed[key], n0=len(codes[key]), decoded=step.n0))
        else:
            lo = _span(step)[0]
            old, _, new = next(m for m in moved if m[0] <= lo < m[1])
            out.append(replace(step, ext_addr=step.ext_addr + new - old))
    return out, split_op, bytes(blob)


def weight_bytes(op: NpuOp, channels_per_block: int, hw: HwConfig) -> tuple[int, int]:
    """(original, encoded) bytes of ``op``'s weights as its schedule loads them: one transfer
    per block of ``channels_per_block`` output channels (tile_steps.op_steps; a phased op's per
    phase), each cut into pieces encoded on their own where worth decoding (``worth_decoding``). The
    requantize records are not weights: they are counted in the memory traffic only."""
    if isinstance(op, Phased):
        parts, last = [], None
        for p in op.phases:
            one_block = isinstance(p, Conv2D) and p.weights.shape[0] <= channels_per_block
            held = p.weights.tobytes() if one_block else None
            if not (op.shares_constants and held is not None and held == last):  # else still in SRAM (op_steps)
                parts.append(weight_bytes(p, channels_per_block, hw))
            last = held
        return sum(p[0] for p in parts), sum(p[1] for p in parts)
    if not isinstance(op, Conv2D | DepthwiseConv2D | FullyConnected):
        return 0, 0
    w = np.ascontiguousarray(op.weights, np.int8).view(np.uint8)
    original = encoded = 0
    for c0 in range(0, w.shape[0], max(channels_per_block, 1)):
        block = w[c0 : c0 + channels_per_block].ravel()
        original += block.size
        encoded += sum(size if code is None else len(code) for _, size, code in load_pieces(block, hw))
    return original, encoded


__all__ = ["PIECE_BYTES", "compress_constants", "load_pieces", "weight_bytes", "worth_decoding"]
