"""Command-stream encoder, decoder and disassembler.

The scheduler (npu_byoc.codegen.schedule) describes a partition as a list of *steps*:
``Dma`` (a DMA_IN / DMA_OUT with its nine parameters) and ``Kick`` (a compute operation with
the value of every register it reads). The encoder turns steps into 32-bit words; the register
file persists between operations and is 0 at the start of a stream, so a SET_REG is emitted
only when a register's value changes. ``decode`` rebuilds each step's full register snapshot,
so ``decode(encode(steps)) == steps``. Every number comes from npu_byoc.arch.isa.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .isa import (
    ASYNC_DMA, DECODE_DMA, DMA_OPCODES, HEADER_WORDS, KICK_REGS, MAGIC, REG_SHIFT, SIGNED_REGS, VERSION,
    VERSION_MAJOR, VERSION_MINOR, Opcode, Reg, Region, kick_word, opcode_of, reg_of, set_reg_word,
)  # fmt: skip

WORD_MASK = 0xFFFFFFFF
_REG_VALUES = {int(r) for r in Reg}


class DecodeError(ValueError):
    """A word stream that is not a well-formed command stream (decode() only; the machine
    reports the same problems as a status instead)."""


@dataclass(frozen=True)
class Dma:
    """Copy n2 x n1 x n0 bytes between SRAM (dense, i2-i1-i0 order) and a region at
    ext_addr + i2*stride2 + i1*stride1 + i0*stride0."""

    direction: Opcode  # DMA_IN (region -> SRAM) or DMA_OUT (SRAM -> region)
    region: int
    ext_addr: int
    sram_addr: int
    n0: int
    n1: int = 1
    n2: int = 1
    stride0: int = 1
    stride1: int = 0
    stride2: int = 0
    background: bool = False  # DMA_IN_ASYNC / DMA_OUT_ASYNC: runs while later commands execute
    # DMA_IN_DECODE: the n0 contiguous encoded bytes decode into this many SRAM bytes (0: a raw copy)
    decoded: int = 0

    @property
    def opcode(self) -> Opcode:
        if self.decoded:
            return Opcode.DMA_IN_DECODE_ASYNC if self.background else Opcode.DMA_IN_DECODE
        if self.background:
            return Opcode.DMA_IN_ASYNC if self.direction == Opcode.DMA_IN else Opcode.DMA_OUT_ASYNC
        return self.direction

    @property
    def nbytes(self) -> int:
        """The bytes the transfer moves in external memory (encoded ones for DMA_IN_DECODE)."""
        return self.n0 * self.n1 * self.n2

    @property
    def sram_bytes(self) -> int:
        """The bytes the transfer reads or writes in SRAM."""
        return self.decoded or self.nbytes

    def registers(self) -> tuple[tuple[Reg, int], ...]:
        if self.decoded:
            return tuple(zip(KICK_REGS[Opcode.DMA_IN_DECODE],
                             (self.region, self.ext_addr, self.sram_addr, self.n0, self.decoded)))  # fmt: skip
        values = (self.region, self.ext_addr, self.sram_addr, self.n0, self.n1, self.n2,
                  self.stride0, self.stride1, self.stride2)  # fmt: skip
        return tuple(zip(KICK_REGS[self.direction], values))


@dataclass(frozen=True)
class Kick:
    """A compute operation and the value of every register it reads (KICK_REGS order)."""

    opcode: Opcode
    regs: tuple[tuple[Reg, int], ...]

    @classmethod
    def make(cls, opcode: Opcode, values: Mapping[Reg, int]) -> Kick:
        order = KICK_REGS[opcode]
        missing = [r.name for r in order if r not in values]
        extra = [Reg(r).name for r in values if r not in order]
        if missing or extra:
            raise ValueError(f"{opcode.name}: missing registers {missing}, unread registers {extra}")
        return cls(opcode, tuple((r, int(values[r])) for r in order))

    def registers(self) -> tuple[tuple[Reg, int], ...]:
        return self.regs

    def __getitem__(self, reg: Reg) -> int:
        return dict(self.regs)[reg]


Step = Dma | Kick


# ---------------------------------------------------------------------------------------------
# Register values <-> words


def to_word(reg: Reg, value: int) -> int:
    """The 32-bit word of a register value; signed registers hold two's complement."""
    value = int(value)
    lo, hi = (-(2**31), 2**31 - 1) if reg in SIGNED_REGS else (0, WORD_MASK)
    if not lo <= value <= hi:
        raise ValueError(f"{Reg(reg).name} = {value}: outside [{lo}, {hi}]")
    return value & WORD_MASK


def from_word(reg: int, word: int) -> int:
    """The value a register holds: sign-extended for signed registers."""
    word = int(word) & WORD_MASK
    if reg in SIGNED_REGS and word & 0x80000000:
        return word - (1 << 32)
    return word


# ---------------------------------------------------------------------------------------------
# Encoder


def _step_registers(step: Step) -> tuple[tuple[Reg, int], ...]:
    regs = step.registers()
    expected = KICK_REGS.get(step.opcode)
    if expected is None or tuple(r for r, _ in regs) != expected:
        raise ValueError(f"{step.opcode!r}: registers must be exactly {expected} in that order")
    return regs


def encode_with_starts(steps: Iterable[Step]) -> tuple[np.ndarray, list[int]]:
    """The word stream of ``steps`` and, per step, the index of its first word."""
    file = {r: 0 for r in Reg}  # the register file after reset
    body: list[int] = []
    starts: list[int] = []
    for step in steps:
        starts.append(HEADER_WORDS + len(body))
        for reg, value in _step_registers(step):
            word = to_word(reg, value)
            if file[reg] != word:
                body += [set_reg_word(reg), word]
                file[reg] = word
        body.append(kick_word(step.opcode))
    body.append(kick_word(Opcode.STOP))
    words = [MAGIC, VERSION, HEADER_WORDS + len(body), *body]
    return np.asarray(words, dtype=np.uint32), starts


def encode(steps: Iterable[Step]) -> np.ndarray:
    """Header (MAGIC, VERSION, word count), SET_REGs of changed registers, kicks, STOP."""
    return encode_with_starts(steps)[0]


# ---------------------------------------------------------------------------------------------
# Decoder


def _step_of(opcode: Opcode, file: Mapping[int, int]) -> Step:
    values = [from_word(r, file[r]) for r in KICK_REGS[opcode]]
    if opcode in DECODE_DMA:
        region, ext, sram, n0, decoded = values
        return Dma(Opcode.DMA_IN, region, ext, sram, n0, decoded=decoded, background=opcode in ASYNC_DMA)
    if opcode in DMA_OPCODES:
        return Dma(ASYNC_DMA.get(opcode, opcode), *values, background=opcode in ASYNC_DMA)
    return Kick(opcode, tuple(zip(KICK_REGS[opcode], values)))


def _check_header(words: Sequence[int]) -> None:
    if len(words) < HEADER_WORDS:
        raise DecodeError(f"stream of {len(words)} words is shorter than the header")
    if words[0] != MAGIC:
        raise DecodeError(f"word 0: magic 0x{words[0]:08X}, expected 0x{MAGIC:08X}")
    if not version_ok(words[1]):
        raise DecodeError(f"word 1: version 0x{words[1]:08X} not supported (0x{VERSION:08X})")
    if words[2] != len(words):
        raise DecodeError(f"word 2: header says {words[2]} words, stream has {len(words)}")


def version_ok(word: int) -> bool:
    """Same major version, minor version not newer than ours."""
    return (word >> 16) == VERSION_MAJOR and (word & 0xFFFF) <= VERSION_MINOR


def decode(words: Sequence[int]) -> list[Step]:
    """The steps of a well-formed stream (raises DecodeError otherwise). NOPs are dropped."""
    words = [int(w) & WORD_MASK for w in np.asarray(words, dtype=np.uint64).ravel()]
    _check_header(words)
    file = {int(r): 0 for r in Reg}
    steps: list[Step] = []
    i = HEADER_WORDS
    while i < len(words):
        word, op = words[i], opcode_of(words[i])
        if op == Opcode.SET_REG:
            if word & ((1 << REG_SHIFT) - 1) or reg_of(word) not in _REG_VALUES:
                raise DecodeError(f"word {i}: bad SET_REG 0x{word:08X}")
            if i + 1 >= len(words):
                raise DecodeError(f"word {i}: SET_REG without its value")
            file[reg_of(word)] = words[i + 1]
            i += 2
            continue
        if word & 0x00FFFFFF or op not in {int(o) for o in Opcode}:
            raise DecodeError(f"word {i}: invalid command 0x{word:08X}")
        if op == Opcode.STOP:
            return steps
        if op != Opcode.NOP:
            steps.append(_step_of(Opcode(op), file))
        i += 1
    raise DecodeError("stream ends without STOP")


# ---------------------------------------------------------------------------------------------
# Disassembler


def region_name(region: int) -> str:
    if region == Region.CONST:
        return "CONST"
    if region == Region.SCRATCH:
        return "SCRATCH"
    return f"IO{region - Region.IO}"


def _fmt_value(reg: Reg, value: int) -> str:
    if reg.name.endswith("_ADDR"):
        return f"0x{value:05X}"
    if reg == Reg.DMA_EXT_REGION:
        return f"{value} ({region_name(value)})" if value < 256 else str(value)
    return str(value)


def _summary(opcode: Opcode, v: Mapping[Reg, int]) -> str:
    """One readable line of what a kick does, from the registers it reads."""
    R = Reg
    if opcode == Opcode.WAIT_DMA:
        return f"until at most {v[R.DMA_WAIT_PENDING]} DMA transfers are outstanding"
    if opcode in DMA_OPCODES:
        ext = f"{region_name(v[R.DMA_EXT_REGION])}+0x{v[R.DMA_EXT_ADDR]:X}"
        sram = f"sram 0x{v[R.DMA_SRAM_ADDR]:05X}"
        src, dst = (ext, sram) if ASYNC_DMA.get(opcode, opcode) != Opcode.DMA_OUT else (sram, ext)
        if opcode in DECODE_DMA:
            return f"{src} -> {dst}  {v[R.DMA_N0]} encoded bytes -> {v[R.DMA_DECODE_BYTES]} bytes"
        if v[R.DMA_N1] == v[R.DMA_N2] == 1 and v[R.DMA_STRIDE0] == 1:
            return f"{src} -> {dst}  {v[R.DMA_N0]} bytes"
        size = f"{v[R.DMA_N2]}x{v[R.DMA_N1]}x{v[R.DMA_N0]}"
        strides = f"{v[R.DMA_STRIDE2]},{v[R.DMA_STRIDE1]},{v[R.DMA_STRIDE0]}"
        return f"{src} -> {dst}  {size} bytes, strides {strides}"
    parts = []
    if R.IFM_H in v:
        parts.append(f"ifm {v[R.IFM_H]}x{v[R.IFM_W]}x{v[R.IFM_C]} @0x{v[R.IFM_ADDR]:05X}")
    else:
        parts.append(f"ifm @0x{v[R.IFM_ADDR]:05X}")
    if R.IFM2_ADDR in v:
        parts.append(f"+ ifm2 @0x{v[R.IFM2_ADDR]:05X}")
    if R.OFM_H in v:
        parts.append(f"-> ofm {v[R.OFM_H]}x{v[R.OFM_W]}x{v[R.OFM_C]} @0x{v[R.OFM_ADDR]:05X}")
    else:
        parts.append(f"-> ofm @0x{v[R.OFM_ADDR]:05X}")
    if R.KERNEL_H in v:
        parts.append(
            f"k{v[R.KERNEL_H]}x{v[R.KERNEL_W]} s{v[R.STRIDE_H]}x{v[R.STRIDE_W]} "
            f"pad {v[R.PAD_TOP]},{v[R.PAD_LEFT]},{v[R.PAD_BOTTOM]},{v[R.PAD_RIGHT]}"
        )
    if R.WEIGHT_ADDR in v:
        parts.append(f"w @0x{v[R.WEIGHT_ADDR]:05X} rq @0x{v[R.REQUANT_ADDR]:05X}")
    if R.LUT_ADDR in v:
        parts.append(f"table @0x{v[R.LUT_ADDR]:05X}")
    zps = [f"{name} {v[r]}" for name, r in (("zp", R.IFM_ZERO_POINT), ("zp2", R.IFM2_ZERO_POINT),
                                             ("ozp", R.OFM_ZERO_POINT)) if r in v]  # fmt: skip
    if zps:
        parts.append(" ".join(zps))
    if R.LEFT_SHIFT in v:
        parts.append(f"ls {v[R.LEFT_SHIFT]} m1 {v[R.IFM_MULTIPLIER]},{v[R.IFM_SHIFT]} "
                     f"m2 {v[R.IFM2_MULTIPLIER]},{v[R.IFM2_SHIFT]}")  # fmt: skip
    if R.OFM_MULTIPLIER in v:
        parts.append(f"mo {v[R.OFM_MULTIPLIER]},{v[R.OFM_SHIFT]}")
    if R.ACT_MIN in v:
        parts.append(f"act {v[R.ACT_MIN]}..{v[R.ACT_MAX]}")
    return " ".join(parts)


def disassemble(words: Sequence[int], notes: Mapping[int, str] | None = None) -> str:
    """One line per command: word index, mnemonic, fields. ``notes`` maps a word index to a
    comment line printed before it (e.g. the layer a step belongs to). Never raises: words
    that are not valid commands are shown as such."""
    words = [int(w) & WORD_MASK for w in np.asarray(words, dtype=np.uint64).ravel()]
    notes = notes or {}
    lines: list[str] = []

    def emit(i: int, mnemonic: str, text: str) -> None:
        if i in notes:
            lines.append(f"; {notes[i]}")
        lines.append(f"{i:04d}  {mnemonic:<8} {text}".rstrip())

    header = [("MAGIC", lambda w: f"0x{w:08X}" + (" (NPU1)" if w == MAGIC else " (bad)")),
              ("VERSION", lambda w: f"{w >> 16}.{w & 0xFFFF}"),
              ("LENGTH", lambda w: f"{w} words")]  # fmt: skip
    for i, (name, fmt) in enumerate(header[: len(words)]):
        emit(i, name, fmt(words[i]))
    file = {int(r): 0 for r in Reg}
    i = HEADER_WORDS
    while i < len(words):
        word, op = words[i], opcode_of(words[i])
        if op == Opcode.SET_REG and not word & 0xFFFF and reg_of(word) in _REG_VALUES:
            reg = Reg(reg_of(word))
            if i + 1 >= len(words):
                emit(i, "SET_REG", f"{reg.name} = <missing value>")
                break
            file[reg] = words[i + 1]
            emit(i, "SET_REG", f"{reg.name} = {_fmt_value(reg, from_word(reg, words[i + 1]))}")
            i += 2
            continue
        if word & 0x00FFFFFF or op not in {int(o) for o in Opcode} or op == Opcode.SET_REG:
            emit(i, "???", f"0x{word:08X}")
        elif op in KICK_REGS:
            values = {r: from_word(r, file[r]) for r in KICK_REGS[Opcode(op)]}
            emit(i, Opcode(op).name, _summary(Opcode(op), values))
        else:
            emit(i, Opcode(op).name, "")
        i += 1
    return "\n".join(lines) + "\n"


__all__ = [
    "Dma",
    "Kick",
    "Step",
    "DecodeError",
    "encode",
    "encode_with_starts",
    "decode",
    "disassemble",
    "to_word",
    "from_word",
    "version_ok",
    "region_name",
]
