"""The NPU's instruction set: command-stream encoding, registers, status codes.

This module is the single source of these numbers. docs/isa.md explains them; the C header
(npu_driver.h) and the Verilog include (hw/rtl/npu_isa.vh) are generated from here
(``npu_byoc.hwgen``), and tests check the generated files are current.

A command stream is a sequence of little-endian 32-bit words:

    header:   MAGIC, VERSION, total word count (header included)
    commands: SET_REG (2 words: opcode/register, value) or a 1-word operation kick
    STOP

Operations read their parameters from the register file, which keeps its values between
operations (a stream only sets what changes). Operations compute on the on-chip SRAM; DMA
operations move data between SRAM and external memory *regions* (buffers the driver binds
at submission: constants, scratch, the partition's inputs and outputs).
"""

from __future__ import annotations

from enum import IntEnum

MAGIC = 0x3155504E  # "NPU1" read as a little-endian word
VERSION_MAJOR = 1
VERSION_MINOR = 0
VERSION = (VERSION_MAJOR << 16) | VERSION_MINOR
HEADER_WORDS = 3

OPCODE_SHIFT = 24
REG_SHIFT = 16


class Opcode(IntEnum):
    NOP = 0x00
    SET_REG = 0x01  # word0 = opcode | reg << 16; word1 = value
    DMA_IN = 0x10  # external region -> SRAM
    DMA_OUT = 0x11  # SRAM -> external region
    CONV = 0x20  # 2-D convolution + per-channel requantize
    DWCONV = 0x21  # depthwise 2-D convolution + per-channel requantize
    FC = 0x22  # fully connected (matrix x weights^T) + per-channel requantize
    AVGPOOL = 0x30
    MAXPOOL = 0x31
    MEAN = 0x32  # mean over H and W + requantize
    ADD = 0x40  # elementwise add with rescaling
    LUT = 0x41  # 256-entry table lookup
    STOP = 0xFF


class Reg(IntEnum):
    """Register file. Addresses are byte offsets; SRAM addresses unless named EXT."""

    # DMA: copies N2 x N1 x N0 bytes. SRAM side dense (i2, i1, i0 order); external side
    # at EXT_ADDR + i2*STRIDE2 + i1*STRIDE1 + i0*STRIDE0 (strides signed) in EXT_REGION.
    DMA_EXT_REGION = 0x00
    DMA_EXT_ADDR = 0x01
    DMA_SRAM_ADDR = 0x02
    DMA_N0 = 0x03
    DMA_N1 = 0x04
    DMA_N2 = 0x05
    DMA_STRIDE0 = 0x06
    DMA_STRIDE1 = 0x07
    DMA_STRIDE2 = 0x08

    # Input feature map (dense HWC int8 tile in SRAM).
    IFM_ADDR = 0x10
    IFM_H = 0x11
    IFM_W = 0x12
    IFM_C = 0x13
    IFM_ZERO_POINT = 0x14
    # Second input (ADD): same shape as IFM.
    IFM2_ADDR = 0x15
    IFM2_ZERO_POINT = 0x16

    # Output feature map (dense HWC int8 tile in SRAM).
    OFM_ADDR = 0x20
    OFM_H = 0x21
    OFM_W = 0x22
    OFM_C = 0x23
    OFM_ZERO_POINT = 0x24
    ACT_MIN = 0x25
    ACT_MAX = 0x26

    # Window (CONV, DWCONV, AVGPOOL, MAXPOOL). Padded positions read as IFM_ZERO_POINT
    # (CONV, DWCONV) or are excluded (pools).
    KERNEL_H = 0x30
    KERNEL_W = 0x31
    STRIDE_H = 0x32
    STRIDE_W = 0x33
    PAD_TOP = 0x34
    PAD_LEFT = 0x35
    PAD_BOTTOM = 0x36
    PAD_RIGHT = 0x37

    # Weights (int8, OHWI; DWCONV: [C, KH, KW]; FC: [OFM_C, IFM_C]) and the per-output-channel
    # requantize table: OFM_C records of 3 little-endian int32 (bias, multiplier, shift).
    WEIGHT_ADDR = 0x40
    REQUANT_ADDR = 0x41

    # Rescaling (ADD, MEAN): TFLite multiplier / shift pairs.
    IFM_MULTIPLIER = 0x50
    IFM_SHIFT = 0x51
    IFM2_MULTIPLIER = 0x52
    IFM2_SHIFT = 0x53
    OFM_MULTIPLIER = 0x54
    OFM_SHIFT = 0x55
    LEFT_SHIFT = 0x56

    # LUT: 256 int8 entries in SRAM, indexed by (x + 128).
    LUT_ADDR = 0x60


class Status(IntEnum):
    OK = 0
    BAD_MAGIC = 1
    BAD_VERSION = 2
    BAD_LENGTH = 3  # the header's word count disagrees with the submitted stream
    INVALID_OPCODE = 4
    INVALID_REGISTER = 5
    INVALID_REGION = 6  # DMA to a region the driver did not bind
    ADDRESS_OUT_OF_RANGE = 7  # SRAM or region bounds exceeded
    INVALID_PARAMETER = 8  # e.g. zero stride, shapes that disagree
    MISSING_STOP = 9  # the stream ended without STOP
    CYCLE_LIMIT = 10  # the harness stopped a run that exceeded its cycle budget


# Registers holding signed values (zero points, clamps, shifts, strides): sign-extended.
SIGNED_REGS = frozenset(
    {
        Reg.DMA_STRIDE0,
        Reg.DMA_STRIDE1,
        Reg.DMA_STRIDE2,
        Reg.IFM_ZERO_POINT,
        Reg.IFM2_ZERO_POINT,
        Reg.OFM_ZERO_POINT,
        Reg.ACT_MIN,
        Reg.ACT_MAX,
        Reg.IFM_MULTIPLIER,
        Reg.IFM_SHIFT,
        Reg.IFM2_MULTIPLIER,
        Reg.IFM2_SHIFT,
        Reg.OFM_MULTIPLIER,
        Reg.OFM_SHIFT,
        Reg.LEFT_SHIFT,
    }
)

REQUANT_RECORD_BYTES = 12  # bias, multiplier, shift: int32 each


def set_reg_word(reg: Reg) -> int:
    return (Opcode.SET_REG << OPCODE_SHIFT) | (int(reg) << REG_SHIFT)


def kick_word(op: Opcode) -> int:
    return int(op) << OPCODE_SHIFT


def opcode_of(word: int) -> int:
    return (word >> OPCODE_SHIFT) & 0xFF


def reg_of(word: int) -> int:
    return (word >> REG_SHIFT) & 0xFF


class Region(IntEnum):
    """External memory regions a stream addresses; the driver binds a buffer to each."""

    CONST = 0  # weights, requantize tables, LUTs of the partition (read-only)
    SCRATCH = 1  # intermediate tensors of the partition
    IO = 2  # first input; inputs then outputs follow in order


MAX_REGIONS = 16

