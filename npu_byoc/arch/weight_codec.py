"""The weight codec: the lossless code a DMA_IN_DECODE transfer carries (docs/isa.md, "Weight codec").

One encoded transfer decodes into N bytes (the DMA_DECODE_BYTES register); it is, in order:

    byte 0     mode: bit 0 = a zero bitmap follows the palette; bits 4..7 = k, the bits of
               a palette index (1..8), or 0 for raw values; bits 1..3 are 0
    byte 1     k > 0: palette size P − 1 (P <= 2^k); k = 0: 0
    palette    k > 0: P bytes, the values the indices select
    bitmap     if bit 0: ceil(N / 8) bytes, bit i (byte i // 8, bit i % 8) = byte i is not
               zero; the padding bits past N are 0
    values     the M bytes the bitmap marks non-zero (M = N without a bitmap), in order:
               k = 0: M raw bytes; k > 0: M k-bit palette indices packed LSB-first (index j
               in bits j·k .. j·k + k − 1 of the little-endian bit string), padded with 0 bits

and ends there: a transfer of DMA_N0 bytes must be exactly that long. The layout is
bit-serial friendly (every field LSB first, no entropy code): the decoder reads the bitmap
and the index bits as shift registers and writes SRAM at its rate
(``HwConfig.weight_decoder_bytes_per_cycle``). The compiler picks the smallest of the four
modes (bitmap or not, raw or palette) per transfer, and keeps a transfer raw (plain DMA_IN)
when no mode is smaller than its bytes.

Magnitude-pruned weights pay N/8 for the bitmap and lose their zeros; clustered weights (16
values) pay 4 bits a weight; pruned weights whose surviving magnitudes span fewer than 128
values per transfer pay 7 bits each.
"""

from __future__ import annotations

import numpy as np

HEADER_BYTES = 2
MODE_BITMAP = 0x01
MAX_INDEX_BITS = 8


class CodecError(ValueError):
    """Encoded bytes that do not decode (the NPU's BAD_ENCODING)."""


def _index_bits(palette_size: int) -> int:
    return max(1, (palette_size - 1).bit_length())


def encoded_size(data: np.ndarray, bitmap: bool, palette: bool) -> int:
    """Bytes of ``data`` (uint8) encoded in one mode."""
    n = data.size
    values = data[data != 0] if bitmap else data
    size = HEADER_BYTES + (-(-n // 8) if bitmap else 0)
    if not palette:
        return size + values.size
    p = max(1, np.unique(values).size)
    return size + p + -(-values.size * _index_bits(p) // 8)


def _pack_bits(values: np.ndarray, k: int) -> bytes:
    """``values`` (< 2^k) as k-bit fields, LSB-first."""
    bits = ((values.astype(np.uint16)[:, None] >> np.arange(k, dtype=np.uint16)) & 1).astype(np.uint8).ravel()
    return np.packbits(bits, bitorder="little").tobytes()


def encode_mode(data: np.ndarray, bitmap: bool, palette: bool) -> bytes:
    """``data`` (uint8) encoded in the given mode."""
    data = np.ascontiguousarray(data, np.uint8).ravel()
    values = data[data != 0] if bitmap else data
    head = bytearray(HEADER_BYTES)
    body = bytearray()
    if palette:
        table = np.unique(values) if values.size else np.zeros(1, np.uint8)
        k = _index_bits(table.size)
        head[0] = (k << 4) | (MODE_BITMAP if bitmap else 0)
        head[1] = table.size - 1
        body += table.tobytes()
    else:
        head[0] = MODE_BITMAP if bitmap else 0
    if bitmap:
        body += np.packbits(data != 0, bitorder="little").tobytes()
    if palette:
        body += _pack_bits(np.searchsorted(table, values), k)
    else:
        body += values.tobytes()
    return bytes(head + body)


def encode(data: bytes | np.ndarray) -> bytes | None:
    """The smallest encoding of ``data``, or None when none is smaller than the raw bytes."""
    arr = np.frombuffer(bytes(data), np.uint8) if isinstance(data, bytes | bytearray) else np.asarray(data, np.uint8)
    arr = arr.ravel()
    if arr.size == 0:
        return None
    bitmap, palette = min(((b, p) for b in (False, True) for p in (False, True)),
                          key=lambda m: encoded_size(arr, *m))  # fmt: skip
    if encoded_size(arr, bitmap, palette) >= arr.size:
        return None
    return encode_mode(arr, bitmap, palette)


def decode(encoded: bytes | np.ndarray, n: int) -> np.ndarray:
    """The ``n`` bytes (uint8) ``encoded`` decodes into; CodecError saying what is wrong."""
    enc = np.frombuffer(bytes(encoded), np.uint8) if not isinstance(encoded, np.ndarray) else encoded.astype(np.uint8)
    if enc.size < HEADER_BYTES:
        raise CodecError(f"{enc.size} bytes: shorter than the {HEADER_BYTES}-byte header")
    mode, p_minus_1 = int(enc[0]), int(enc[1])
    k, bitmap = mode >> 4, bool(mode & MODE_BITMAP)
    if mode & 0x0E or k > MAX_INDEX_BITS:
        raise CodecError(f"mode byte 0x{mode:02X}: reserved bits set or index bits above {MAX_INDEX_BITS}")
    palette_size = p_minus_1 + 1 if k else 0
    if (k == 0 and p_minus_1) or palette_size > (1 << k):
        raise CodecError(f"palette of {p_minus_1 + 1} values with {k}-bit indices")
    pos = HEADER_BYTES
    if enc.size < pos + palette_size:
        raise CodecError("the palette overruns the transfer")
    table = enc[pos : pos + palette_size]
    pos += palette_size
    if bitmap:
        nbm = -(-n // 8)
        if enc.size < pos + nbm:
            raise CodecError("the zero bitmap overruns the transfer")
        mask = np.unpackbits(enc[pos : pos + nbm], bitorder="little")
        if mask[n:].any():
            raise CodecError("zero bitmap padding bits are set")
        mask = mask[:n].astype(bool)
        pos += nbm
    else:
        mask = np.ones(n, bool)
    m = int(mask.sum())
    nvalues = -(-m * k // 8) if k else m
    if enc.size != pos + nvalues:
        raise CodecError(f"the values need {pos + nvalues} bytes, the transfer has {enc.size}")
    if k:
        bits = np.unpackbits(enc[pos:], bitorder="little")
        if bits[m * k :].any():
            raise CodecError("index padding bits are set")
        idx = (bits[: m * k].reshape(m, k).astype(np.uint16) << np.arange(k, dtype=np.uint16)).sum(axis=1)
        if m and int(idx.max()) >= palette_size:
            raise CodecError(f"palette index {int(idx.max())} beyond the {palette_size}-entry palette")
        values = table[idx]
    else:
        values = enc[pos:]
    out = np.zeros(n, np.uint8)
    out[mask] = values
    return out


__all__ = ["CodecError", "HEADER_BYTES", "MODE_BITMAP", "decode", "encode", "encode_mode", "encoded_size"]
