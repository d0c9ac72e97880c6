"""The command-stream machine: the golden model of the NPU's command stream (docs/isa.md).

``Machine(hw).run(words, regions)`` executes a stream the way the hardware does — header
check, register file, SRAM, DMA between SRAM and the bound regions, one kick at a time on
SRAM tiles with the integer kernels of npu_byoc.arch.numerics — and returns a ``RunStatus``. It
never raises on a bad stream and always finishes: the stream has no jumps, every command
advances, and ``max_commands`` bounds the run. The C functional model and the RTL must equal
it bit for bit, including the status and the index of the failing word.

Check order inside a kick (so that every implementation reports the same error): the
registers' values (INVALID_PARAMETER), then each SRAM operand's range in the order the
operation lists them (ADDRESS_OUT_OF_RANGE), then the output overlapping an input
(INVALID_PARAMETER), then table contents (a requantize shift out of range: INVALID_PARAMETER).
DMA: region bound (INVALID_REGION), counts (INVALID_PARAMETER), SRAM range, region range
(ADDRESS_OUT_OF_RANGE), all at issue. A DMA_IN_DECODE's code is checked at the end of its
transfer (BAD_ENCODING, the SRAM bytes of that transfer undefined): a synchronous one ends the
run there; after a background one the run goes on and ends with BAD_ENCODING at that transfer's
word whatever else happens (the first such transfer: the engine completes them in order).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import math

import numpy as np

from ..arch import numerics as nx
from ..arch import weight_codec
from ..arch import numerics_sqdiff as sqd
from ..arch import numerics_layernorm as ln
from ..ops import softmax_kernel as softmax
from ..arch.config import DEFAULT_CONFIG, HwConfig
from ..arch.isa import (
    DECODE_BUFFER_BYTES, DECODE_DMA, HEADER_WORDS, LAYERNORM_MAX_CHANNELS, LAYERNORM_MAX_FRAC_BITS, MAGIC, MAX_REGIONS,
    REQUANT_RECORD_BYTES, SHIFT_MAX, SHIFT_MIN, SIGNED_REGS,
    SOFTMAX_MAX_CHANNELS, SOFTMAX_TABLE_BYTES, VERSION_MAJOR, VERSION_MINOR, Opcode, Reg, Region, Status,
    opcode_of, reg_of,
)  # fmt: skip

WORD_MASK = 0xFFFFFFFF
_REGS = {int(r) for r in Reg}
_OPCODES = {int(o) for o in Opcode}


@dataclass
class RunStatus:
    status: Status
    word_index: int  # the offending word (OK: the STOP word)
    kicks: Counter = field(default_factory=Counter)  # Opcode -> number executed
    commands: int = 0  # commands executed (SET_REG, NOP and kicks)
    detail: str = ""  # for people; not part of the contract

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    def __str__(self) -> str:
        text = f"{self.status.name} at word {self.word_index}"
        return f"{text}: {self.detail}" if self.detail else text


class _Fault(Exception):
    """Stops the run with a status; at the current command's word unless ``index`` is given."""

    def __init__(self, status: Status, detail: str, index: int | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.index = index


def _param(ok: bool, detail: str) -> None:
    if not ok:
        raise _Fault(Status.INVALID_PARAMETER, detail)


class _Registers:
    """The register file: 32-bit words, read signed or unsigned as the register is."""

    def __init__(self) -> None:
        self.words = dict.fromkeys(_REGS, 0)

    def __getitem__(self, reg: Reg) -> int:
        w = self.words[int(reg)]
        return w - (1 << 32) if reg in SIGNED_REGS and w & 0x80000000 else w


class Machine:
    """One NPU: a register file, ``hw.sram_bytes`` of SRAM, a DMA engine and the compute units."""

    def __init__(self, hw: HwConfig = DEFAULT_CONFIG) -> None:
        self.hw = hw
        self.sram = np.zeros(hw.sram_bytes, np.uint8)
        self.regs = _Registers()

    # -----------------------------------------------------------------------------------------
    # The command loop

    def run(self, words: Sequence[int], regions: Mapping[int, np.ndarray],
            max_commands: int = 1 << 22) -> RunStatus:  # fmt: skip
        """Execute ``words`` (uint32) with ``regions`` (region number -> uint8 buffer, written in
        place by DMA_OUT). Registers reset to 0; SRAM is zero-filled (a stream must not read
        SRAM it has not written: on hardware its contents are undefined)."""
        w = [int(x) & WORD_MASK for x in np.asarray(words, dtype=np.uint64).ravel()]
        n = len(w)
        self.sram[:] = 0
        self.regs = _Registers()
        self.regions = regions
        header = self._check_header(w)
        if header is not None:
            return header
        kicks: Counter = Counter()
        commands = 0
        i = HEADER_WORDS
        self._bad_code: _Fault | None = None  # the first DMA_IN_DECODE whose code was bad
        try:
            while True:
                if i >= n:
                    raise _Fault(Status.MISSING_STOP, "the stream ended before STOP", index=n)
                if commands >= max_commands:
                    raise _Fault(Status.CYCLE_LIMIT, f"more than {max_commands} commands")
                op = self._command(w, i)
                commands += 1
                if op == Opcode.STOP:
                    return self._ended(RunStatus(Status.OK, i, kicks, commands))
                if op in _EXECUTE:
                    kicks[op] += 1
                i += 2 if op == Opcode.SET_REG else 1
        except _Fault as fault:
            index = i if fault.index is None else fault.index
            return self._ended(RunStatus(fault.status, index, kicks, commands, fault.detail))

    def _ended(self, result: RunStatus) -> RunStatus:
        """``result``, unless a DMA_IN_DECODE's code was bad: then BAD_ENCODING at its word."""
        bad = self._bad_code
        if bad is None:
            return result
        return RunStatus(Status.BAD_ENCODING, bad.index, result.kicks, result.commands, bad.detail)

    def _command(self, w: list[int], i: int) -> Opcode:
        """Execute the command at word i; raises _Fault."""
        word, op = w[i], opcode_of(w[i])
        reserved = word & (0xFFFF if op == Opcode.SET_REG else 0xFFFFFF)
        if (op not in _OPCODES or reserved or (op in DECODE_DMA and not self.hw.weight_decoder_bytes_per_cycle)
                or (op == Opcode.LAYERNORM and not self.hw.layernorm_unit)):
            raise _Fault(Status.INVALID_OPCODE, f"0x{word:08X} is not a command")
        op = Opcode(op)
        if op == Opcode.SET_REG:
            if reg_of(word) not in _REGS:
                raise _Fault(Status.INVALID_REGISTER, f"register 0x{reg_of(word):02X} does not exist")
            if i + 1 >= len(w):
                raise _Fault(Status.MISSING_STOP, "SET_REG without its value word", index=len(w))
            self.regs.words[reg_of(word)] = w[i + 1]
        elif op in _EXECUTE:
            self._at = i
            try:
                _EXECUTE[op](self)
            except _Fault as fault:
                fault.detail = f"{op.name}: {fault.detail}"
                raise
        return op

    @staticmethod
    def _check_header(w: list[int]) -> RunStatus | None:
        n = len(w)
        if n >= 1 and w[0] != MAGIC:
            return RunStatus(Status.BAD_MAGIC, 0, detail=f"0x{w[0]:08X}")
        if n >= 2 and not ((w[1] >> 16) == VERSION_MAJOR and (w[1] & 0xFFFF) <= VERSION_MINOR):
            return RunStatus(Status.BAD_VERSION, 1, detail=f"version {w[1] >> 16}.{w[1] & 0xFFFF}")
        if n < HEADER_WORDS:
            return RunStatus(Status.BAD_LENGTH, n, detail=f"{n} words: the header is incomplete")
        if w[2] != n:
            return RunStatus(Status.BAD_LENGTH, 2, detail=f"header says {w[2]} words, {n} submitted")
        return None

    # -----------------------------------------------------------------------------------------
    # Memory access

    def _sram(self, name: str, addr: int, nbytes: int) -> tuple[int, int]:
        if addr + nbytes > self.hw.sram_bytes:
            end, size = addr + nbytes, self.hw.sram_bytes
            raise _Fault(Status.ADDRESS_OUT_OF_RANGE, f"{name} [0x{addr:X}, 0x{end:X}) outside SRAM of 0x{size:X} bytes")
        return addr, addr + nbytes

    def _tile(self, span: tuple[int, int], shape: tuple[int, ...]) -> np.ndarray:
        return self.sram[span[0] : span[1]].view(np.int8).reshape(shape)

    @staticmethod
    def _no_overlap(out: tuple[int, int], inputs: Mapping[str, tuple[int, int]]) -> None:
        for name, (lo, hi) in inputs.items():
            _param(out[1] <= lo or hi <= out[0], f"the output tile overlaps the {name}")

    # -----------------------------------------------------------------------------------------
    # DMA

    def _dma(self, to_sram: bool) -> None:
        r = self.regs
        region = r[Reg.DMA_EXT_REGION]
        buf = self.regions.get(region) if region < MAX_REGIONS else None
        if buf is None:
            raise _Fault(Status.INVALID_REGION, f"region {region} is not bound")
        if not to_sram and region == Region.CONST:
            raise _Fault(Status.INVALID_REGION, "CONST is read-only")
        counts = (r[Reg.DMA_N2], r[Reg.DMA_N1], r[Reg.DMA_N0])
        strides = (r[Reg.DMA_STRIDE2], r[Reg.DMA_STRIDE1], r[Reg.DMA_STRIDE0])
        _param(min(counts) >= 1, f"DMA counts {counts} must be >= 1")
        total = counts[0] * counts[1] * counts[2]
        lo, hi = self._sram("DMA block", r[Reg.DMA_SRAM_ADDR], total)
        base = r[Reg.DMA_EXT_ADDR]
        first = base + sum(min(0, (c - 1) * s) for c, s in zip(counts, strides))
        last = base + sum(max(0, (c - 1) * s) for c, s in zip(counts, strides))
        if first < 0 or last >= buf.size:
            raise _Fault(Status.ADDRESS_OUT_OF_RANGE,
                         f"region {region} bytes [{first}, {last}] outside its {buf.size} bytes")  # fmt: skip
        i2, i1, i0 = np.ix_(*(np.arange(c, dtype=np.int64) for c in counts))
        ext = (base + i2 * strides[0] + i1 * strides[1] + i0 * strides[2]).ravel()
        if to_sram:
            self.sram[lo:hi] = buf[ext]
        else:
            data = self.sram[lo:hi]
            if np.unique(ext).size != ext.size:  # repeated addresses: the last write wins
                _, last_idx = np.unique(ext[::-1], return_index=True)
                keep = ext.size - 1 - last_idx
                ext, data = ext[keep], data[keep]
            buf[ext] = data

    def _dma_decode(self, background: bool = False) -> None:
        """DMA_IN_DECODE: DMA_N0 contiguous encoded bytes decoded into DMA_DECODE_BYTES of SRAM."""
        r = self.regs
        region = r[Reg.DMA_EXT_REGION]
        buf = self.regions.get(region) if region < MAX_REGIONS else None
        if buf is None:
            raise _Fault(Status.INVALID_REGION, f"region {region} is not bound")
        n0, decoded = r[Reg.DMA_N0], r[Reg.DMA_DECODE_BYTES]
        _param(n0 >= 1 and decoded >= 1, f"DMA_N0 {n0} and DMA_DECODE_BYTES {decoded} must be >= 1")
        _param(n0 <= DECODE_BUFFER_BYTES, f"DMA_N0 {n0} exceeds the decoder's {DECODE_BUFFER_BYTES}-byte buffer")
        lo, hi = self._sram("DMA block", r[Reg.DMA_SRAM_ADDR], decoded)
        base = r[Reg.DMA_EXT_ADDR]
        if base + n0 > buf.size:
            raise _Fault(Status.ADDRESS_OUT_OF_RANGE, f"region {region} bytes [{base}, {base + n0}) outside its {buf.size} bytes")
        try:
            self.sram[lo:hi] = weight_codec.decode(buf[base : base + n0], decoded)
        except weight_codec.CodecError as err:
            fault = _Fault(Status.BAD_ENCODING, f"DMA_IN_DECODE_ASYNC: {err}" if background else str(err), index=self._at)
            self._bad_code = self._bad_code or fault
            if not background:
                raise fault from None

    def _dma_decode_async(self) -> None:
        self._dma_decode(background=True)

    def _dma_in(self) -> None:
        self._dma(True)

    def _dma_out(self) -> None:
        self._dma(False)

    # -----------------------------------------------------------------------------------------
    # Shared parameter checks

    def _check_int8(self, *regs: Reg) -> None:
        for reg in regs:
            _param(-128 <= self.regs[reg] <= 127, f"{reg.name} = {self.regs[reg]} is not int8")

    def _check_clamp(self) -> tuple[int, int]:
        lo, hi = self.regs[Reg.ACT_MIN], self.regs[Reg.ACT_MAX]
        _param(-128 <= lo <= hi <= 127, f"ACT_MIN..ACT_MAX = {lo}..{hi} is not an int8 range")
        return lo, hi

    def _check_shift(self, reg: Reg) -> int:
        s = self.regs[reg]
        _param(SHIFT_MIN <= s <= SHIFT_MAX, f"{reg.name} = {s} outside [{SHIFT_MIN}, {SHIFT_MAX}]")
        return s

    def _shape(self, prefix: str) -> tuple[int, int, int]:
        shape = tuple(self.regs[Reg[f"{prefix}_{d}"]] for d in "HWC")
        _param(min(shape) >= 1, f"{prefix} shape {shape} has an empty dimension")
        return shape

    def _window(self, max_kernel: int, max_stride: int):
        r = self.regs
        kernel = (r[Reg.KERNEL_H], r[Reg.KERNEL_W])
        stride = (r[Reg.STRIDE_H], r[Reg.STRIDE_W])
        pads = (r[Reg.PAD_TOP], r[Reg.PAD_LEFT], r[Reg.PAD_BOTTOM], r[Reg.PAD_RIGHT])
        _param(1 <= min(kernel) and max(kernel) <= max_kernel, f"kernel {kernel} outside 1..{max_kernel}")
        _param(1 <= min(stride) and max(stride) <= max_stride, f"stride {stride} outside 1..{max_stride}")
        _param(max(pads[0], pads[2]) < kernel[0] and max(pads[1], pads[3]) < kernel[1],
               f"padding {pads} not smaller than the kernel {kernel}")  # fmt: skip
        return kernel, stride, pads

    def _check_ofm_size(self, ifm, ofm, kernel, stride, pads) -> None:
        expect = ((ifm[0] + pads[0] + pads[2] - kernel[0]) // stride[0] + 1,
                  (ifm[1] + pads[1] + pads[3] - kernel[1]) // stride[1] + 1)  # fmt: skip
        _param(ofm[:2] == expect, f"OFM {ofm[0]}x{ofm[1]}, the window gives {expect[0]}x{expect[1]}")

    def _requant_table(self, span: tuple[int, int], channels: int, fc: bool = False) -> np.ndarray:
        table = np.frombuffer(self.sram[span[0] : span[1]].tobytes(), "<i4").reshape(channels, 3).astype(np.int64)
        if fc:  # (bias, mantissa, exponent): nx.pack_fc_scale's words
            lo, hi = table[:, 1] & 0xFFFFFFFF, table[:, 2] & 0xFFFFFFFF
            exponent = ((hi >> 24) ^ 0x80) - 0x80
            bad = ((hi >> 21) & 7 != 0) | (exponent > nx.FC_EXPONENT_MAX)
            _param(not bad.any(), f"FC requantize record {np.flatnonzero(bad)[:1]}: exponent above -53 or bits 23..21 set")
            return np.stack([table[:, 0], lo | ((hi & 0x1FFFFF) << 32), exponent], axis=1)
        bad = (table[:, 2] < SHIFT_MIN) | (table[:, 2] > SHIFT_MAX)
        _param(not bad.any(), f"requantize shift {table[bad, 2][:1]} outside [{SHIFT_MIN}, {SHIFT_MAX}]")
        return table

    # -----------------------------------------------------------------------------------------
    # Multiply-accumulate operations: CONV, DWCONV, FC

    def _mac(self, opcode: Opcode) -> None:
        r, hw = self.regs, self.hw
        ifm, ofm = self._shape("IFM"), self._shape("OFM")
        self._check_int8(Reg.IFM_ZERO_POINT, Reg.OFM_ZERO_POINT)
        act = self._check_clamp()
        _param(max(ifm[2], ofm[2]) <= hw.max_channels, f"channels above {hw.max_channels}")
        if opcode == Opcode.FC:
            kernel, stride, pads = (1, 1), (1, 1), (0, 0, 0, 0)
            _param(ifm[0] == ofm[0] == 1 and ifm[1] == ofm[1], f"FC IFM {ifm} and OFM {ofm}: need H 1 and equal rows")
            _param(ifm[2] <= hw.max_fc_features and ofm[2] <= hw.max_fc_features, "FC features above the limit")
            weights_shape = (ofm[2], ifm[2])
        else:
            kernel, stride, pads = self._window(hw.max_kernel, hw.max_stride)
            self._check_ofm_size(ifm, ofm, kernel, stride, pads)
            if opcode == Opcode.DWCONV:
                _param(ifm[2] == ofm[2], f"DWCONV IFM_C {ifm[2]} != OFM_C {ofm[2]}")
                weights_shape = (ofm[2], *kernel)
            else:
                weights_shape = (ofm[2], *kernel, ifm[2])
        _param(r[Reg.REQUANT_ADDR] % 4 == 0, "REQUANT_ADDR is not 4-byte aligned")
        spans = {
            "IFM": self._sram("IFM", r[Reg.IFM_ADDR], math.prod(ifm)),
            "weights": self._sram("weights", r[Reg.WEIGHT_ADDR], math.prod(weights_shape)),
            "requant table": self._sram("requant table", r[Reg.REQUANT_ADDR], ofm[2] * REQUANT_RECORD_BYTES),
        }
        out = self._sram("OFM", r[Reg.OFM_ADDR], math.prod(ofm))
        self._no_overlap(out, spans)
        table = self._requant_table(spans["requant table"], ofm[2], fc=opcode == Opcode.FC)

        x = self._tile(spans["IFM"], ifm).astype(np.int64) - r[Reg.IFM_ZERO_POINT]
        w = self._tile(spans["weights"], weights_shape).astype(np.int64)
        x = np.pad(x, ((pads[0], pads[2]), (pads[1], pads[3]), (0, 0)))  # padding reads zero_point: 0 here
        oh, ow = ofm[0], ofm[1]
        acc = np.zeros((oh, ow, ofm[2]), np.int64)
        for kh in range(kernel[0]):
            for kw in range(kernel[1]):
                rows = slice(kh, kh + stride[0] * (oh - 1) + 1, stride[0])
                cols = slice(kw, kw + stride[1] * (ow - 1) + 1, stride[1])
                patch = x[rows, cols]
                if opcode == Opcode.CONV:
                    acc += patch @ w[:, kh, kw, :].T
                elif opcode == Opcode.DWCONV:
                    acc += patch * w[:, kh, kw]
                else:
                    acc += patch @ w.T
        acc = ((acc + 2**31) & WORD_MASK) - 2**31  # the int32 accumulator wraps
        requantize = nx.fc_requantize if opcode == Opcode.FC else nx.requantize
        out_tile = requantize(acc, table[:, 0], table[:, 1], table[:, 2], r[Reg.OFM_ZERO_POINT], *act)
        self._tile(out, ofm)[...] = out_tile

    def _conv(self) -> None:
        self._mac(Opcode.CONV)

    def _dwconv(self) -> None:
        self._mac(Opcode.DWCONV)

    def _fc(self) -> None:
        self._mac(Opcode.FC)

    # -----------------------------------------------------------------------------------------
    # Pools and mean

    def _pool(self, kernel_fn) -> None:
        r, hw = self.regs, self.hw
        ifm, ofm = self._shape("IFM"), self._shape("OFM")
        act = self._check_clamp()
        kernel, stride, pads = self._window(hw.max_pool_window, hw.max_pool_stride)
        self._check_ofm_size(ifm, ofm, kernel, stride, pads)
        _param(ifm[2] == ofm[2], f"IFM_C {ifm[2]} != OFM_C {ofm[2]}")
        span = self._sram("IFM", r[Reg.IFM_ADDR], math.prod(ifm))
        out = self._sram("OFM", r[Reg.OFM_ADDR], math.prod(ofm))
        self._no_overlap(out, {"IFM": span})
        x = self._tile(span, ifm)
        self._tile(out, ofm)[...] = kernel_fn(x[None], kernel, stride, pads, *act)[0]

    def _avgpool(self) -> None:
        self._pool(nx.avg_pool2d)

    def _maxpool(self) -> None:
        self._pool(nx.max_pool2d)

    def _mean(self) -> None:
        r = self.regs
        ifm = self._shape("IFM")
        self._check_int8(Reg.IFM_ZERO_POINT, Reg.OFM_ZERO_POINT)
        lo, hi = self._check_clamp()
        shift = self._check_shift(Reg.OFM_SHIFT)
        _param(ifm[0] * ifm[1] <= self.hw.max_mean_elements, f"mean over {ifm[0] * ifm[1]} elements")
        span = self._sram("IFM", r[Reg.IFM_ADDR], math.prod(ifm))
        out = self._sram("OFM", r[Reg.OFM_ADDR], ifm[2])
        self._no_overlap(out, {"IFM": span})
        x = self._tile(span, ifm)
        y = nx.mean(x, (0, 1), False, r[Reg.IFM_ZERO_POINT], r[Reg.OFM_ZERO_POINT], r[Reg.OFM_MULTIPLIER], shift)
        self._tile(out, (ifm[2],))[...] = np.clip(y, lo, hi)

    # -----------------------------------------------------------------------------------------
    # Elementwise: ADD, SQDIFF, MUL, LUT

    def _add(self) -> None:
        self._rescaled(nx.add)

    def _sqdiff(self) -> None:
        self._rescaled(sqd.squared_difference)

    def _rescaled(self, kernel) -> None:
        """ADD's datapath (ADD, SQDIFF): both inputs shifted and rescaled, combined by ``kernel``."""
        r = self.regs
        shape = self._shape("OFM")
        self._check_int8(Reg.IFM_ZERO_POINT, Reg.IFM2_ZERO_POINT, Reg.OFM_ZERO_POINT)
        act = self._check_clamp()
        _param(0 <= r[Reg.LEFT_SHIFT] <= 31, f"LEFT_SHIFT {r[Reg.LEFT_SHIFT]} outside [0, 31]")
        shifts = [self._check_shift(s) for s in (Reg.IFM_SHIFT, Reg.IFM2_SHIFT, Reg.OFM_SHIFT)]
        a, b, out = self._binary_operands(shape)
        params = nx.AddParams(r[Reg.LEFT_SHIFT], r[Reg.IFM_MULTIPLIER], shifts[0], r[Reg.IFM2_MULTIPLIER], shifts[1],
                              r[Reg.OFM_MULTIPLIER], shifts[2])  # fmt: skip
        y = kernel(a, b, r[Reg.IFM_ZERO_POINT], r[Reg.IFM2_ZERO_POINT], r[Reg.OFM_ZERO_POINT], params, *act)
        self._tile(out, shape)[...] = y

    def _mul(self) -> None:
        r = self.regs
        shape = self._shape("OFM")
        self._check_int8(Reg.IFM_ZERO_POINT, Reg.IFM2_ZERO_POINT, Reg.OFM_ZERO_POINT)
        act = self._check_clamp()
        shift = self._check_shift(Reg.OFM_SHIFT)
        a, b, out = self._binary_operands(shape)
        y = nx.mul(a, b, r[Reg.IFM_ZERO_POINT], r[Reg.IFM2_ZERO_POINT], r[Reg.OFM_ZERO_POINT], r[Reg.OFM_MULTIPLIER],
                   shift, *act)  # fmt: skip
        self._tile(out, shape)[...] = y

    def _binary_operands(self, shape: tuple[int, int, int]):
        """ADD / SQDIFF / MUL: the IFM and IFM2 tiles (IFM2 a (1, 1, C) vector when IFM2_BROADCAST) and
        the OFM span, after the broadcast flag, range and overlap checks."""
        r = self.regs
        broadcast = r[Reg.IFM2_BROADCAST]
        _param(broadcast in (0, 1), f"IFM2_BROADCAST = {broadcast} is not 0 or 1")
        nbytes = math.prod(shape)
        shape2 = (1, 1, shape[2]) if broadcast else shape
        spans = {
            "IFM": self._sram("IFM", r[Reg.IFM_ADDR], nbytes),
            "IFM2": self._sram("IFM2", r[Reg.IFM2_ADDR], math.prod(shape2)),
        }
        out = self._sram("OFM", r[Reg.OFM_ADDR], nbytes)
        self._no_overlap(out, spans)
        return self._tile(spans["IFM"], shape), self._tile(spans["IFM2"], shape2), out

    def _lut(self) -> None:
        r = self.regs
        shape = self._shape("OFM")
        nbytes = math.prod(shape)
        spans = {
            "IFM": self._sram("IFM", r[Reg.IFM_ADDR], nbytes),
            "table": self._sram("table", r[Reg.LUT_ADDR], 256),
        }
        out = self._sram("OFM", r[Reg.OFM_ADDR], nbytes)
        self._no_overlap(out, spans)
        table = self._tile(spans["table"], (256,))
        self._tile(out, shape)[...] = nx.lut_lookup(self._tile(spans["IFM"], shape), table)

    def _softmax(self) -> None:
        r = self.regs
        shape = self._shape("OFM")
        _param(shape[2] <= SOFTMAX_MAX_CHANNELS, f"SOFTMAX over {shape[2]} channels: at most {SOFTMAX_MAX_CHANNELS}")
        _param(r[Reg.LUT_ADDR] % 4 == 0, "LUT_ADDR is not 4-byte aligned")
        nbytes = math.prod(shape)
        spans = {
            "IFM": self._sram("IFM", r[Reg.IFM_ADDR], nbytes),
            "table": self._sram("table", r[Reg.LUT_ADDR], SOFTMAX_TABLE_BYTES),
        }
        out = self._sram("OFM", r[Reg.OFM_ADDR], nbytes)
        self._no_overlap(out, spans)
        lo, hi = spans["table"]
        table = np.frombuffer(self.sram[lo:hi].tobytes(), "<i4")
        x = self._tile(spans["IFM"], shape).reshape(-1, shape[2])
        self._tile(out, shape)[...] = softmax.run(x, table).reshape(shape)

    def _layernorm(self) -> None:
        """LAYERNORM (npu_byoc.arch.numerics_layernorm): per pixel over its OFM_C channels."""
        r = self.regs
        shape = self._shape("OFM")
        self._check_int8(Reg.IFM_ZERO_POINT, Reg.OFM_ZERO_POINT)
        act = self._check_clamp()
        c, frac_bits, epsilon_fx = shape[2], r[Reg.IFM_SHIFT], r[Reg.IFM_MULTIPLIER]
        _param(c <= LAYERNORM_MAX_CHANNELS, f"LAYERNORM over {c} channels: at most {LAYERNORM_MAX_CHANNELS}")
        _param(0 <= frac_bits <= LAYERNORM_MAX_FRAC_BITS and frac_bits % 2 == 0,
               f"IFM_SHIFT = {frac_bits}: the epsilon term's fraction bits are even, 0..{LAYERNORM_MAX_FRAC_BITS}")
        _param(epsilon_fx >= 0, f"IFM_MULTIPLIER = {epsilon_fx}: the epsilon term is not negative")
        _param(r[Reg.REQUANT_ADDR] % 4 == 0, "REQUANT_ADDR is not 4-byte aligned")
        nbytes = math.prod(shape)
        spans = {
            "IFM": self._sram("IFM", r[Reg.IFM_ADDR], nbytes),
            "records": self._sram("records", r[Reg.REQUANT_ADDR], c * REQUANT_RECORD_BYTES),
        }
        out = self._sram("OFM", r[Reg.OFM_ADDR], nbytes)
        self._no_overlap(out, spans)
        lo, hi = spans["records"]
        g, b = ln.from_records(np.frombuffer(self.sram[lo:hi].tobytes(), "<i4"))
        x = self._tile(spans["IFM"], shape)
        y = ln.run(x, r[Reg.IFM_ZERO_POINT], r[Reg.OFM_ZERO_POINT], epsilon_fx, frac_bits, g, b, *act)
        self._tile(out, shape)[...] = y


_EXECUTE = {
    Opcode.DMA_IN: Machine._dma_in,
    Opcode.DMA_OUT: Machine._dma_out,
    # Background DMAs: the hardware holds a kick whose SRAM operands meet a DMA still in flight
    # (docs/isa.md, "The DMA interlock"), so copying at issue is what it computes, for any stream.
    Opcode.DMA_IN_ASYNC: Machine._dma_in,
    Opcode.DMA_OUT_ASYNC: Machine._dma_out,
    Opcode.DMA_IN_DECODE: Machine._dma_decode,
    Opcode.DMA_IN_DECODE_ASYNC: Machine._dma_decode_async,
    Opcode.WAIT_DMA: lambda self: None,  # ordering only: nothing to do when DMAs copy at issue
    Opcode.CONV: Machine._conv,
    Opcode.DWCONV: Machine._dwconv,
    Opcode.FC: Machine._fc,
    Opcode.AVGPOOL: Machine._avgpool,
    Opcode.MAXPOOL: Machine._maxpool,
    Opcode.MEAN: Machine._mean,
    Opcode.ADD: Machine._add,
    Opcode.LUT: Machine._lut,
    Opcode.MUL: Machine._mul,
    Opcode.SOFTMAX: Machine._softmax,
    Opcode.SQDIFF: Machine._sqdiff,
    Opcode.LAYERNORM: Machine._layernorm,
}


__all__ = ["Machine", "RunStatus"]
