"""The NPU's instruction set: command-stream encoding, registers, status codes.

This module is the single source of these numbers. docs/isa.md explains them; the C header
(npu_byoc/codegen/templates/npu_isa.h) and the Verilog include (hw/rtl/npu_config.vh) are generated from here
(``npu_byoc.arch.hwgen``), and tests check the generated files are current.

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
VERSION_MINOR = 2  # 1.1: DMA_IN_ASYNC, DMA_OUT_ASYNC, WAIT_DMA (DMA overlapped with compute); MUL, IFM2_BROADCAST
#                   1.2: SOFTMAX; SQDIFF; DMA_IN_DECODE(_ASYNC) with a weight decoder (an NPU without
#                        one of these: INVALID_OPCODE); LAYERNORM with a LAYERNORM unit
#                        (HwConfig.layernorm_unit; without it: INVALID_OPCODE)
VERSION = (VERSION_MAJOR << 16) | VERSION_MINOR
HEADER_WORDS = 3

OPCODE_SHIFT = 24
REG_SHIFT = 16


class Opcode(IntEnum):
    NOP = 0x00
    SET_REG = 0x01  # word0 = opcode | reg << 16; word1 = value
    DMA_IN = 0x10  # external region -> SRAM
    DMA_OUT = 0x11  # SRAM -> external region
    DMA_IN_ASYNC = 0x12  # DMA_IN in the background: the stream goes on once its checks pass
    DMA_OUT_ASYNC = 0x13  # DMA_OUT in the background
    WAIT_DMA = 0x14  # wait until at most DMA_WAIT_PENDING DMA transfers are outstanding
    DMA_IN_DECODE = 0x15  # DMA_IN of an encoded weight stream, decoded into SRAM (hw.weight_decoder_bytes_per_cycle)
    DMA_IN_DECODE_ASYNC = 0x16  # DMA_IN_DECODE in the background
    CONV = 0x20  # 2-D convolution + per-channel requantize
    DWCONV = 0x21  # depthwise 2-D convolution + per-channel requantize
    FC = 0x22  # fully connected (matrix x weights^T) + per-channel requantize
    AVGPOOL = 0x30
    MAXPOOL = 0x31
    MEAN = 0x32  # mean over H and W + requantize
    ADD = 0x40  # elementwise add with rescaling
    LUT = 0x41  # 256-entry table lookup
    MUL = 0x42  # elementwise multiply with rescaling
    SOFTMAX = 0x43  # int8 softmax over C (TFLite's integer reference kernel) from a 256-entry int32 exp table
    SQDIFF = 0x44  # elementwise squared difference: ADD's input rescaling, a subtract, a square, the output rescale
    LAYERNORM = 0x45  # layer normalization over C (ONNX LayerNormalization) with per-channel gamma / beta records
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
    # WAIT_DMA: wait until at most this many DMA transfers are outstanding (0: all complete).
    DMA_WAIT_PENDING = 0x09
    # DMA_IN_DECODE: the bytes the DMA_N0 encoded bytes at DMA_EXT_ADDR decode into (weight_codec).
    DMA_DECODE_BYTES = 0x0A

    # Input feature map (dense HWC int8 tile in SRAM).
    IFM_ADDR = 0x10
    IFM_H = 0x11
    IFM_W = 0x12
    IFM_C = 0x13
    IFM_ZERO_POINT = 0x14
    # Second input (ADD, MUL, SQDIFF): same shape as the OFM, or a channel vector (IFM2_BROADCAST).
    IFM2_ADDR = 0x15
    IFM2_ZERO_POINT = 0x16
    # ADD, MUL, SQDIFF: 0 = IFM2 has the OFM shape; 1 = IFM2 is one OFM_C channel vector, read again
    # at every output pixel (squeeze-excite's [1,1,1,C] operand).
    IFM2_BROADCAST = 0x17

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

    # Rescaling (ADD, SQDIFF, MEAN): TFLite multiplier / shift pairs.
    IFM_MULTIPLIER = 0x50
    IFM_SHIFT = 0x51
    IFM2_MULTIPLIER = 0x52
    IFM2_SHIFT = 0x53
    OFM_MULTIPLIER = 0x54
    OFM_SHIFT = 0x55
    LEFT_SHIFT = 0x56

    # LUT: 256 int8 entries in SRAM, indexed by (x + 128). SOFTMAX: 256 int32 little-endian
    # entries, indexed by max(row) - x.
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
    OUT_OF_MEMORY = 11  # the harness had no host memory for the run (never the NPU's own status)
    BAD_ENCODING = 12  # a DMA_IN_DECODE's encoded bytes are malformed (npu_byoc.arch.weight_codec)


# The background DMA commands and the transfer each one performs; the synchronous DMA_IN /
# DMA_OUT wait until no transfer is outstanding; the engine copies transfers one at a time, in order.
ASYNC_DMA: dict[Opcode, Opcode] = {Opcode.DMA_IN_ASYNC: Opcode.DMA_IN, Opcode.DMA_OUT_ASYNC: Opcode.DMA_OUT,
                                   Opcode.DMA_IN_DECODE_ASYNC: Opcode.DMA_IN_DECODE}  # fmt: skip
DMA_OPCODES = frozenset({Opcode.DMA_IN, Opcode.DMA_OUT, Opcode.DMA_IN_DECODE, *ASYNC_DMA})
# The transfers through the weight decoder: opcodes of an NPU built with one only
# (HwConfig.weight_decoder_bytes_per_cycle > 0; without it they are INVALID_OPCODE).
DECODE_DMA = frozenset({Opcode.DMA_IN_DECODE, Opcode.DMA_IN_DECODE_ASYNC})
# The decoder loads a transfer's whole code before it writes (the header, palette and bitmap
# precede the values): DMA_N0 of a decode transfer is at most its buffer (INVALID_PARAMETER).
DECODE_BUFFER_BYTES = 4096

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
SOFTMAX_TABLE_BYTES = 1024  # 256 int32 entries: exp(−k) in Q0.31 (bit 31 ignored)
# Each element adds at most 2^19 to a row's int32 sum (exp(0) in Q12.19): below 4096 it cannot wrap.
SOFTMAX_MAX_CHANNELS = 4095
# LAYERNORM: C·Σd² − (Σd)² < C²·2^14 stays below 2^38 (npu_byoc.arch.numerics_layernorm).
LAYERNORM_MAX_CHANNELS = 4096
LAYERNORM_MAX_FRAC_BITS = 22  # IFM_SHIFT of a LAYERNORM: the epsilon term's fraction bits, even
# Every requantize / rescale shift register and table entry lies in this range (TFLite's).
SHIFT_MIN, SHIFT_MAX = -31, 30


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


# ---------------------------------------------------------------------------------------------
# What each operation reads, and the meaning of every number (docs/isa.md is generated from
# these, through markdown_tables()).

_DMA_REGS = (
    Reg.DMA_EXT_REGION, Reg.DMA_EXT_ADDR, Reg.DMA_SRAM_ADDR,
    Reg.DMA_N0, Reg.DMA_N1, Reg.DMA_N2, Reg.DMA_STRIDE0, Reg.DMA_STRIDE1, Reg.DMA_STRIDE2,
)  # fmt: skip
# DMA_IN_DECODE: DMA_N0 contiguous encoded bytes in, DMA_DECODE_BYTES dense bytes out.
_DECODE_REGS = (Reg.DMA_EXT_REGION, Reg.DMA_EXT_ADDR, Reg.DMA_SRAM_ADDR, Reg.DMA_N0, Reg.DMA_DECODE_BYTES)
_IFM_REGS = (Reg.IFM_ADDR, Reg.IFM_H, Reg.IFM_W, Reg.IFM_C, Reg.IFM_ZERO_POINT)
_OFM_REGS = (Reg.OFM_ADDR, Reg.OFM_H, Reg.OFM_W, Reg.OFM_C, Reg.OFM_ZERO_POINT, Reg.ACT_MIN, Reg.ACT_MAX)
_WINDOW_REGS = (
    Reg.KERNEL_H, Reg.KERNEL_W, Reg.STRIDE_H, Reg.STRIDE_W,
    Reg.PAD_TOP, Reg.PAD_LEFT, Reg.PAD_BOTTOM, Reg.PAD_RIGHT,
)  # fmt: skip
_POOL_REGS = (
    Reg.IFM_ADDR, Reg.IFM_H, Reg.IFM_W, Reg.IFM_C,
    Reg.OFM_ADDR, Reg.OFM_H, Reg.OFM_W, Reg.OFM_C, Reg.ACT_MIN, Reg.ACT_MAX,
) + _WINDOW_REGS  # fmt: skip

# The registers each operation reads, in a fixed order (the encoder's and decoder's order).
KICK_REGS: dict[Opcode, tuple[Reg, ...]] = {
    Opcode.DMA_IN: _DMA_REGS,
    Opcode.DMA_OUT: _DMA_REGS,
    Opcode.DMA_IN_ASYNC: _DMA_REGS,
    Opcode.DMA_OUT_ASYNC: _DMA_REGS,
    Opcode.WAIT_DMA: (Reg.DMA_WAIT_PENDING,),
    Opcode.DMA_IN_DECODE: _DECODE_REGS,
    Opcode.DMA_IN_DECODE_ASYNC: _DECODE_REGS,
    Opcode.CONV: _IFM_REGS + _OFM_REGS + _WINDOW_REGS + (Reg.WEIGHT_ADDR, Reg.REQUANT_ADDR),
    Opcode.DWCONV: _IFM_REGS + _OFM_REGS + _WINDOW_REGS + (Reg.WEIGHT_ADDR, Reg.REQUANT_ADDR),
    Opcode.FC: _IFM_REGS + _OFM_REGS + (Reg.WEIGHT_ADDR, Reg.REQUANT_ADDR),
    Opcode.AVGPOOL: _POOL_REGS,
    Opcode.MAXPOOL: _POOL_REGS,
    Opcode.MEAN: _IFM_REGS
    + (Reg.OFM_ADDR, Reg.OFM_ZERO_POINT, Reg.OFM_MULTIPLIER, Reg.OFM_SHIFT, Reg.ACT_MIN, Reg.ACT_MAX),
    Opcode.ADD: (
        Reg.IFM_ADDR, Reg.IFM_ZERO_POINT, Reg.IFM2_ADDR, Reg.IFM2_ZERO_POINT,
        Reg.OFM_ADDR, Reg.OFM_H, Reg.OFM_W, Reg.OFM_C, Reg.OFM_ZERO_POINT, Reg.ACT_MIN, Reg.ACT_MAX,
        Reg.LEFT_SHIFT, Reg.IFM_MULTIPLIER, Reg.IFM_SHIFT, Reg.IFM2_MULTIPLIER, Reg.IFM2_SHIFT,
        Reg.OFM_MULTIPLIER, Reg.OFM_SHIFT, Reg.IFM2_BROADCAST,
    ),  # fmt: skip
    Opcode.LUT: (Reg.IFM_ADDR, Reg.OFM_ADDR, Reg.OFM_H, Reg.OFM_W, Reg.OFM_C, Reg.LUT_ADDR),
    Opcode.MUL: (
        Reg.IFM_ADDR, Reg.IFM_ZERO_POINT, Reg.IFM2_ADDR, Reg.IFM2_ZERO_POINT, Reg.IFM2_BROADCAST,
        Reg.OFM_ADDR, Reg.OFM_H, Reg.OFM_W, Reg.OFM_C, Reg.OFM_ZERO_POINT, Reg.ACT_MIN, Reg.ACT_MAX,
        Reg.OFM_MULTIPLIER, Reg.OFM_SHIFT,
    ),  # fmt: skip
    Opcode.SOFTMAX: (Reg.IFM_ADDR, Reg.OFM_ADDR, Reg.OFM_H, Reg.OFM_W, Reg.OFM_C, Reg.LUT_ADDR),
}
KICK_REGS[Opcode.LAYERNORM] = (
    Reg.IFM_ADDR, Reg.IFM_ZERO_POINT, Reg.OFM_ADDR, Reg.OFM_H, Reg.OFM_W, Reg.OFM_C, Reg.OFM_ZERO_POINT,
    Reg.ACT_MIN, Reg.ACT_MAX, Reg.IFM_MULTIPLIER, Reg.IFM_SHIFT, Reg.REQUANT_ADDR,
)  # fmt: skip
KICK_REGS[Opcode.SQDIFF] = KICK_REGS[Opcode.ADD]  # the ADD datapath's registers: only the combine differs

OPCODE_DOC: dict[Opcode, str] = {
    Opcode.NOP: "does nothing",
    Opcode.SET_REG: "register ← the next word",
    Opcode.DMA_IN: "copy N2×N1×N0 bytes from a region (strided) to SRAM (dense)",
    Opcode.DMA_OUT: "copy N2×N1×N0 bytes from SRAM (dense) to a region (strided)",
    Opcode.DMA_IN_ASYNC: "DMA_IN queued for the DMA engine, run in the background (waits for room in the queue, "
    "then for the copy's checks only)",
    Opcode.DMA_OUT_ASYNC: "DMA_OUT run in the background, as DMA_IN_ASYNC",
    Opcode.DMA_IN_DECODE: "read DMA_N0 contiguous encoded bytes from a region and decode them into DMA_DECODE_BYTES "
    "dense bytes of SRAM (the weight codec, docs/isa.md); only on an NPU with a weight decoder",
    Opcode.DMA_IN_DECODE_ASYNC: "DMA_IN_DECODE run in the background, as DMA_IN_ASYNC (a bad code ends the run with "
    "BAD_ENCODING at its word when the run ends)",
    Opcode.WAIT_DMA: "wait until at most DMA_WAIT_PENDING DMA transfers are outstanding (0: every earlier DMA has completed)",
    Opcode.CONV: "2-D convolution + per-channel requantize",
    Opcode.DWCONV: "depthwise 2-D convolution (channel multiplier 1) + per-channel requantize",
    Opcode.FC: "fully connected: IFM_W rows × weightsᵀ + per-channel requantize",
    Opcode.AVGPOOL: "average pool, padding excluded, rounding half away from zero",
    Opcode.MAXPOOL: "max pool, padding excluded",
    Opcode.MEAN: "mean over H and W + requantize",
    Opcode.ADD: "elementwise add with TFLite int8 rescaling",
    Opcode.LUT: "256-entry table lookup: out = table[x + 128]",
    Opcode.MUL: "elementwise multiply with TFLite int8 rescaling: (x − zp1)·(y − zp2) rescaled by OFM_MULTIPLIER/SHIFT",
    Opcode.SOFTMAX: "softmax over the OFM_C channels of each of the OFM_H·OFM_W pixels, TFLite's int8 reference "
    "kernel (output scale 1/256, zero point −128) with the exp of max − x read from the int32 table at LUT_ADDR",
    Opcode.SQDIFF: "elementwise squared difference with TFLite int8 rescaling (LiteRT's squared_difference.cc): "
    "both inputs rescaled as ADD's, subtracted, squared in int32, rescaled by OFM_MULTIPLIER/SHIFT",
    Opcode.LAYERNORM: "layer normalization over the OFM_C channels of each of the OFM_H·OFM_W pixels (ONNX "
    "LayerNormalization): exact sums of x − IFM_ZERO_POINT and of its squares, a fixed-point "
    "1/sqrt of the variance plus the epsilon term IFM_MULTIPLIER / 2^IFM_SHIFT, then per channel the gamma and beta "
    "records at REQUANT_ADDR; only on an NPU with a LAYERNORM unit",
    Opcode.STOP: "end of stream: status OK",
}

REG_DOC: dict[Reg, str] = {
    Reg.DMA_EXT_REGION: "external region number (Region)",
    Reg.DMA_EXT_ADDR: "byte offset of element (0, 0, 0) in the region",
    Reg.DMA_SRAM_ADDR: "SRAM byte address of the dense block",
    Reg.DMA_N0: "innermost count (bytes)",
    Reg.DMA_N1: "middle count",
    Reg.DMA_N2: "outermost count",
    Reg.DMA_STRIDE0: "external byte stride of i0",
    Reg.DMA_STRIDE1: "external byte stride of i1",
    Reg.DMA_STRIDE2: "external byte stride of i2",
    Reg.DMA_DECODE_BYTES: "DMA_IN_DECODE: bytes the encoded stream decodes into (SRAM side)",
    Reg.DMA_WAIT_PENDING: "WAIT_DMA: DMA transfers that may still be outstanding (0: wait for all)",
    Reg.IFM_ADDR: "SRAM address of the input tile (dense H×W×C int8)",
    Reg.IFM_H: "input tile height",
    Reg.IFM_W: "input tile width",
    Reg.IFM_C: "input tile channels",
    Reg.IFM_ZERO_POINT: "input zero point (−128..127)",
    Reg.IFM2_ADDR: "SRAM address of the second input tile (ADD, MUL, SQDIFF; OFM shape, or OFM_C bytes if IFM2_BROADCAST)",
    Reg.IFM2_ZERO_POINT: "second input zero point (−128..127)",
    Reg.IFM2_BROADCAST: "ADD, MUL, SQDIFF: 0 = second input has the OFM shape; 1 = it is OFM_C bytes, repeated at every pixel",
    Reg.OFM_ADDR: "SRAM address of the output tile (dense H×W×C int8)",
    Reg.OFM_H: "output tile height",
    Reg.OFM_W: "output tile width",
    Reg.OFM_C: "output tile channels",
    Reg.OFM_ZERO_POINT: "output zero point (−128..127)",
    Reg.ACT_MIN: "lower clamp of the output (−128..ACT_MAX)",
    Reg.ACT_MAX: "upper clamp of the output (ACT_MIN..127)",
    Reg.KERNEL_H: "window height",
    Reg.KERNEL_W: "window width",
    Reg.STRIDE_H: "vertical stride",
    Reg.STRIDE_W: "horizontal stride",
    Reg.PAD_TOP: "virtual rows above the tile",
    Reg.PAD_LEFT: "virtual columns left of the tile",
    Reg.PAD_BOTTOM: "virtual rows below the tile",
    Reg.PAD_RIGHT: "virtual columns right of the tile",
    Reg.WEIGHT_ADDR: "SRAM address of the int8 weights (CONV OHWI, DWCONV C×KH×KW, FC O×I)",
    Reg.REQUANT_ADDR: "SRAM address (4-aligned) of OFM_C records (bias, multiplier, shift), int32 LE; LAYERNORM: "
    "OFM_C records (g, b low word, b high word)",
    Reg.IFM_MULTIPLIER: "ADD, SQDIFF: first input multiplier; LAYERNORM: the epsilon term E_fx (0..2^31−1)",
    Reg.IFM_SHIFT: "ADD, SQDIFF: first input shift (−31..30, positive = left); LAYERNORM: E_fx's fraction bits F "
    "(0, 2, .., 22)",
    Reg.IFM2_MULTIPLIER: "ADD, SQDIFF: second input multiplier",
    Reg.IFM2_SHIFT: "ADD, SQDIFF: second input shift (−31..30)",
    Reg.OFM_MULTIPLIER: "ADD, SQDIFF, MEAN, MUL: output multiplier",
    Reg.OFM_SHIFT: "ADD, SQDIFF, MEAN, MUL: output shift (−31..30)",
    Reg.LEFT_SHIFT: "ADD, SQDIFF: left shift of both inputs (0..31; ADD 20, SQDIFF 7 for int8)",
    Reg.LUT_ADDR: "SRAM address of the table: LUT 256 int8 entries; SOFTMAX 256 int32 LE entries (4-aligned)",
}

STATUS_DOC: dict[Status, str] = {
    Status.OK: "STOP reached; the index is the STOP word",
    Status.BAD_MAGIC: "word 0 is not MAGIC",
    Status.BAD_VERSION: "word 1: major version differs, or minor version is newer than the NPU's",
    Status.BAD_LENGTH: "the header's word count differs from the submitted length, or the header is incomplete",
    Status.INVALID_OPCODE: "unknown opcode, or non-zero reserved bits in a command word",
    Status.INVALID_REGISTER: "SET_REG of a register address that does not exist",
    Status.INVALID_REGION: "DMA to a region that is not bound, or DMA_OUT to CONST",
    Status.ADDRESS_OUT_OF_RANGE: "an SRAM or region access outside its memory",
    Status.INVALID_PARAMETER: "register values an operation cannot run with (see the per-operation rules)",
    Status.MISSING_STOP: "the stream ended (or a SET_REG lost its value word) before STOP; the index is the word count",
    Status.CYCLE_LIMIT: "the harness stopped a run that exceeded its command or cycle budget",
    Status.OUT_OF_MEMORY: "the harness had no host memory for the run; the index is the command that needed it",
    Status.BAD_ENCODING: "a DMA_IN_DECODE's encoded bytes are malformed: a bad header, a palette index beyond the "
    "palette, or more or fewer bytes than DMA_N0 (an overrun); found at the end of the transfer, its SRAM bytes "
    "undefined; the index is the DMA's kick (the run's first bad one)",
}


def markdown_tables() -> str:
    """The opcode, register and status tables of docs/isa.md (a test keeps the doc current)."""
    out = ["### Opcodes", "", "| opcode | value | words | reads registers | meaning |", "| --- | --- | --- | --- | --- |"]
    for op in Opcode:
        words = 2 if op == Opcode.SET_REG else 1
        regs = ", ".join(r.name for r in KICK_REGS.get(op, ())) or "—"
        out.append(f"| `{op.name}` | `0x{int(op):02X}` | {words} | {regs} | {OPCODE_DOC[op]} |")
    out += ["", "### Registers", "", "| register | address | signed | meaning |", "| --- | --- | --- | --- |"]
    for reg in Reg:
        signed = "yes" if reg in SIGNED_REGS else "no"
        out.append(f"| `{reg.name}` | `0x{int(reg):02X}` | {signed} | {REG_DOC[reg]} |")
    out += ["", "### Status codes", "", "| status | code | meaning |", "| --- | --- | --- |"]
    for st in Status:
        out.append(f"| `{st.name}` | {int(st)} | {STATUS_DOC[st]} |")
    out += ["", "### Regions", "", "| region | number | holds |", "| --- | --- | --- |"]
    out.append(f"| `CONST` | {int(Region.CONST)} | the partition's constants packed by the compiler into one blob: "
               "weights, requantize tables, LUTs (read-only for the NPU) |")
    out.append(f"| `SCRATCH` | {int(Region.SCRATCH)} | intermediate tensors, NHWC |")
    out.append(
        f"| `IO0`, `IO1`, … | {int(Region.IO)}, {int(Region.IO) + 1}, … | the partition's inputs in order, then its "
        f"outputs in order, each in its model's layout (NHWC or NCHW); at most {MAX_REGIONS} regions in all |"
    )
    return "\n".join(out) + "\n"
