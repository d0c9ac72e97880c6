"""The RTL's units, one at a time, against npu_byoc.arch.numerics (the integer spec).

* lint: every module of hw/rtl is clean under ``verilator --lint-only -Wall``;
* the requantize unit (hw/rtl/npu_requant.v) under its own testbench
  (hw/sim/npu_requant_tb.cc): random and edge-case vectors against
  ``fixed_point.multiply_by_quantized_multiplier`` and ``numerics.requantize``;
* each compute unit through the whole NPU with single-kick streams (DMA the operands in, one
  kick, DMA the result out): the MAC array with its per-column requantize (CONV, DWCONV, FC),
  the pools, MEAN, ADD and LUT on random shapes, windows and parameters, against references
  written here from numpy and numerics.py — not against the stream machine;
* the DMA's 3-D strided copies against numpy indexing;
* the command decoder on random word streams against the stream machine (status, word index,
  commands executed).

The Verilator builds are session-scoped and cached (npu_byoc.runtime.verilator).
"""

from __future__ import annotations

from dataclasses import replace

import ctypes

import numpy as np
import pytest

from npu_byoc.arch import fixed_point as fp
from npu_byoc.arch import numerics as nx
from npu_byoc.arch.encoder import Dma, Kick, encode
from npu_byoc.arch.config import DEFAULT_CONFIG
from npu_byoc.arch.isa import (
    HEADER_WORDS, KICK_REGS, MAGIC, VERSION, Opcode, Reg, Status, kick_word, set_reg_word,
)  # fmt: skip
from npu_byoc.runtime import verilator as V
from npu_byoc.runtime.machine import Machine

HW = DEFAULT_CONFIG
IO_IN, IO_OUT = 2, 3  # the single-kick streams' input blob and output regions


@pytest.fixture(scope="session")
def rtl() -> V.VerilatorNpu:
    return V.VerilatorNpu(HW)


@pytest.fixture(scope="session")
def requant_tb():
    lib = ctypes.CDLL(str(V.build_unit_library("npu_requant", "npu_requant_tb.cc")))
    i32 = ctypes.POINTER(ctypes.c_int32)
    lib.npu_requant_tb.argtypes = [ctypes.c_size_t, *[i32] * 8, ctypes.POINTER(ctypes.c_int8)]
    lib.npu_requant_tb.restype = None

    def run(acc, bias, multiplier, shift, zero_point, act_min, act_max):
        args = [np.ascontiguousarray(a, dtype=np.int32) for a in (acc, bias, multiplier, shift, zero_point, act_min,
                                                                  act_max)]  # fmt: skip
        n = args[0].size
        scaled = np.zeros(n, np.int32)
        out = np.zeros(n, np.int8)
        ptrs = [a.ctypes.data_as(i32) for a in args]
        lib.npu_requant_tb(n, *ptrs, scaled.ctypes.data_as(i32), out.ctypes.data_as(ctypes.POINTER(ctypes.c_int8)))
        return scaled, out

    return run


# =============================================================================================
# lint


def test_rtl_is_lint_clean():
    for hw in (HW, replace(HW, weight_decoder_bytes_per_cycle=16)):  # without and with the weight decoder
        for result in V.lint(hw):
            assert result.returncode == 0, result.stderr
            assert "%Warning" not in result.stderr and "%Error" not in result.stderr, result.stderr


# =============================================================================================
# the requantize unit


def _wrap32(a):
    return ((np.asarray(a, np.int64) + 2**31) & 0xFFFFFFFF) - 2**31


def test_requantize_unit_random_and_edge_vectors(requant_tb):
    rng = np.random.default_rng(5)
    n = 20000
    i32 = lambda k: rng.integers(-(2**31), 2**31, k, dtype=np.int64)  # noqa: E731
    acc = np.concatenate([i32(n // 2), rng.integers(-(2**20), 2**20, n // 2)])
    bias = np.concatenate([i32(n // 4), rng.integers(-(2**16), 2**16, n - n // 4)])
    multiplier = np.concatenate([i32(n // 4), rng.integers(2**30, 2**31, n - n // 4)])
    shift = rng.integers(-31, 31, n)
    lo = rng.integers(-128, 128, n)
    hi = rng.integers(-128, 128, n)
    lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    zp = rng.integers(-128, 128, n)
    # edges: INT32_MIN * INT32_MIN (the SRDHM saturation), ties of both roundings, extreme shifts
    edges = [
        (-(2**31), 0, -(2**31), 0), (-(2**31), 0, -(2**31), -31), (2**31 - 1, 0, 2**31 - 1, 30),
        (1, 0, 2**30, 0), (-1, 0, 2**30, 0), (-3, 0, 2**30, 0), (5, 0, 2**30, 1), (-5, 0, 2**30, -1),
        (-1, 0, 2**30, -1), (3, 0, 2**30, -1), (-(2**31), 0, 2**30, -31), (2**31 - 1, 1, 2**30, 0),
        (1234, 56, 1759218526, -11), (140, 0, 744713490, -1), (0, 0, 0, 0), (7, 0, -(2**30), -2),
    ]  # fmt: skip
    e = np.array(edges, np.int64)
    acc, bias, multiplier, shift = (np.concatenate([x, e[:, k]]) for k, x in enumerate((acc, bias, multiplier, shift)))
    lo = np.concatenate([lo, np.full(len(edges), -128)])
    hi = np.concatenate([hi, np.full(len(edges), 127)])
    zp = np.concatenate([zp, np.zeros(len(edges), np.int64)])

    scaled, out = requant_tb(acc, bias, multiplier, shift, zp, lo, hi)
    x = _wrap32(acc + bias)
    expect_scaled = np.array([int(fp.multiply_by_quantized_multiplier(a, m, s)) for a, m, s in zip(x, multiplier, shift)])
    np.testing.assert_array_equal(scaled, expect_scaled)
    expect = [int(nx.requantize(a, b, m, s, z, lo_, hi_)) for a, b, m, s, z, lo_, hi_ in
              zip(acc, bias, multiplier, shift, zp, lo, hi)]  # fmt: skip
    np.testing.assert_array_equal(out, np.array(expect, np.int8))
    assert scaled[n] == fp.saturating_rounding_doubling_high_mul(-(2**31), -(2**31)) == 2**31 - 1


# =============================================================================================
# single-kick streams


class Sram:
    """An SRAM image built operand by operand (16-byte aligned), loaded by one DMA_IN."""

    def __init__(self) -> None:
        self.blob = bytearray()

    def put(self, data) -> int:
        addr = -(-len(self.blob) // 16) * 16
        self.blob += bytes(addr - len(self.blob)) + bytes(np.ascontiguousarray(data).view(np.uint8).ravel())
        return addr

    def reserve(self, nbytes: int) -> int:
        return self.put(np.zeros(nbytes, np.uint8))


def run_kick(rtl, sram: Sram, opcode: Opcode, regs: dict, out_addr: int, out_bytes: int):
    """DMA the image in, kick, DMA the output out; returns (status, output bytes as int8)."""
    regs = {r: int(v) for r, v in regs.items()}
    steps = [
        Dma(Opcode.DMA_IN, IO_IN, 0, 0, len(sram.blob)),
        Kick.make(opcode, {r: regs.get(r, 0) for r in KICK_REGS[opcode]}),
        Dma(Opcode.DMA_OUT, IO_OUT, 0, out_addr, out_bytes),
    ]
    regions = {IO_IN: np.frombuffer(bytes(sram.blob), np.uint8).copy(), IO_OUT: np.zeros(out_bytes, np.uint8)}
    result = rtl.run(encode(steps), regions)
    return result, regions[IO_OUT].view(np.int8)


def _clamp(rng):
    if rng.random() < 0.5:
        return -128, 127
    lo, hi = sorted(int(v) for v in rng.integers(-128, 128, 2))
    return lo, hi


def _requant_table(rng, channels: int):
    bias = rng.integers(-(2**18), 2**18, channels)
    multiplier = rng.integers(2**30, 2**31, channels)
    shift = rng.integers(-16, 2, channels)
    if rng.random() < 0.2:  # any int32 multiplier and any legal shift
        multiplier = rng.integers(-(2**31), 2**31, channels)
        shift = rng.integers(-31, 31, channels)
    return bias, multiplier, shift


def _fc_requant_table(rng, channels: int):
    """FC records: a double scale mantissa * 2^exponent below 1 (numerics.pack_fc_scale)."""
    bias = rng.integers(-(2**18), 2**18, channels)
    mantissa = rng.integers(2**52, 2**53, channels, dtype=np.int64)
    exponent = rng.integers(-80, -60, channels)
    if rng.random() < 0.2:  # any legal exponent, mantissa 0 too
        mantissa[0] = 0
        exponent = rng.integers(-128, -52, channels)
    return bias, mantissa, exponent


def _window(rng, H, W, max_k, max_s):
    while True:
        kh, kw = (int(v) for v in rng.integers(1, max_k + 1, 2))
        sh, sw = (int(v) for v in rng.integers(1, max_s + 1, 2))
        pads = [int(rng.integers(0, k)) for k in (kh, kw, kh, kw)]
        if H + pads[0] + pads[2] >= kh and W + pads[1] + pads[3] >= kw:
            oh = (H + pads[0] + pads[2] - kh) // sh + 1
            ow = (W + pads[1] + pads[3] - kw) // sw + 1
            return (kh, kw), (sh, sw), pads, (oh, ow)


def _window_regs(kernel, stride, pads):
    return {Reg.KERNEL_H: kernel[0], Reg.KERNEL_W: kernel[1], Reg.STRIDE_H: stride[0], Reg.STRIDE_W: stride[1],
            Reg.PAD_TOP: pads[0], Reg.PAD_LEFT: pads[1], Reg.PAD_BOTTOM: pads[2], Reg.PAD_RIGHT: pads[3]}  # fmt: skip


def reference_mac(kind, x, w, zp_in, kernel, stride, pads):
    """int32 accumulators Σ (x - zp_in) · w over each window (padding contributes 0), wrapping."""
    H, W, C = x.shape
    xz = np.pad(x.astype(np.int64) - zp_in, ((pads[0], pads[2]), (pads[1], pads[3]), (0, 0)))
    oh = (H + pads[0] + pads[2] - kernel[0]) // stride[0] + 1
    ow = (W + pads[1] + pads[3] - kernel[1]) // stride[1] + 1
    oc = w.shape[0]
    acc = np.zeros((oh, ow, oc), np.int64)
    for oy in range(oh):
        for ox in range(ow):
            win = xz[oy * stride[0] : oy * stride[0] + kernel[0], ox * stride[1] : ox * stride[1] + kernel[1], :]
            if kind == "dw":
                acc[oy, ox] = np.einsum("hwc,chw->c", win, w.astype(np.int64))
            else:
                acc[oy, ox] = np.einsum("hwc,ohwc->o", win, w.astype(np.int64))
    return _wrap32(acc)


@pytest.mark.parametrize("kind", ["conv", "dw", "fc"])
def test_mac_array_and_requantize_random_kicks(rtl, kind):
    rng = np.random.default_rng({"conv": 11, "dw": 12, "fc": 13}[kind])
    for case in range(40):
        if kind == "fc":
            H, W, C = 1, int(rng.integers(1, 70)), int(rng.integers(1, 100))
            kernel, stride, pads, (oh, ow) = (1, 1), (1, 1), [0, 0, 0, 0], (1, W)
            oc = int(rng.integers(1, 45))
            w = rng.integers(-128, 128, (oc, 1, 1, C)).astype(np.int8)
        else:
            H, W = int(rng.integers(1, 13)), int(rng.integers(1, 13))
            C = int(rng.integers(1, 41 if kind == "dw" else 21))
            kernel, stride, pads, (oh, ow) = _window(rng, H, W, 5 if case % 4 else 11, 3)
            oc = C if kind == "dw" else int(rng.integers(1, 41))
            wshape = (oc, *kernel) if kind == "dw" else (oc, *kernel, C)
            w = rng.integers(-128, 128, wshape).astype(np.int8)
        x = rng.integers(-128, 128, (H, W, C)).astype(np.int8)
        zp_in, zp_out = (int(v) for v in rng.integers(-128, 128, 2))
        if kind == "fc":  # FC's records hold LiteRT's double scale
            bias, mantissa, exponent = _fc_requant_table(rng, oc)
            multiplier, shift = nx.pack_fc_scale(mantissa, exponent)
        else:
            bias, multiplier, shift = _requant_table(rng, oc)
        lo, hi = _clamp(rng)

        sram = Sram()
        ifm = sram.put(x)
        weights = sram.put(w)
        table = sram.put(np.stack([bias, multiplier, shift], 1).astype("<i4"))
        ofm = sram.reserve(oh * ow * oc)
        regs = {Reg.IFM_ADDR: ifm, Reg.IFM_H: H, Reg.IFM_W: W, Reg.IFM_C: C, Reg.IFM_ZERO_POINT: zp_in,
                Reg.OFM_ADDR: ofm, Reg.OFM_H: oh, Reg.OFM_W: ow, Reg.OFM_C: oc, Reg.OFM_ZERO_POINT: zp_out,
                Reg.ACT_MIN: lo, Reg.ACT_MAX: hi, Reg.WEIGHT_ADDR: weights, Reg.REQUANT_ADDR: table,
                **_window_regs(kernel, stride, pads)}  # fmt: skip
        opcode = {"conv": Opcode.CONV, "dw": Opcode.DWCONV, "fc": Opcode.FC}[kind]
        result, got = run_kick(rtl, sram, opcode, regs, ofm, oh * ow * oc)
        assert result.ok, f"case {case}: {result}"

        acc = reference_mac(kind, x, w, zp_in, kernel, stride, pads)
        if kind == "fc":
            expect = nx.fc_requantize(acc, bias, mantissa, exponent, zp_out, lo, hi)
        else:
            expect = nx.requantize(acc, bias, multiplier, shift, zp_out, lo, hi)
        np.testing.assert_array_equal(got.reshape(oh, ow, oc), expect,
                                      err_msg=f"{kind} case {case}: {H}x{W}x{C} -> {oh}x{ow}x{oc} k{kernel} s{stride} "
                                              f"p{pads}")  # fmt: skip


@pytest.mark.parametrize("pool", ["avg", "max"])
def test_pool_unit_random_kicks(rtl, pool):
    rng = np.random.default_rng(21 if pool == "avg" else 22)
    for case in range(40):
        H, W, C = int(rng.integers(1, 13)), int(rng.integers(1, 13)), int(rng.integers(1, 75))
        kernel, stride, pads, (oh, ow) = _window(rng, H, W, 6 if case % 5 else 16, 4 if case % 3 else 8)
        x = rng.integers(-128, 128, (H, W, C)).astype(np.int8)
        lo, hi = _clamp(rng)
        sram = Sram()
        ifm = sram.put(x)
        ofm = sram.reserve(oh * ow * C)
        regs = {Reg.IFM_ADDR: ifm, Reg.IFM_H: H, Reg.IFM_W: W, Reg.IFM_C: C, Reg.OFM_ADDR: ofm, Reg.OFM_H: oh,
                Reg.OFM_W: ow, Reg.OFM_C: C, Reg.ACT_MIN: lo, Reg.ACT_MAX: hi, **_window_regs(kernel, stride, pads)}
        opcode = Opcode.AVGPOOL if pool == "avg" else Opcode.MAXPOOL
        result, got = run_kick(rtl, sram, opcode, regs, ofm, oh * ow * C)
        assert result.ok, f"case {case}: {result}"
        fn = nx.avg_pool2d if pool == "avg" else nx.max_pool2d
        expect = fn(x[None], kernel, stride, tuple(pads), lo, hi)[0]
        np.testing.assert_array_equal(got.reshape(oh, ow, C), expect, err_msg=f"{pool} case {case} k{kernel} s{stride}")


def test_mean_unit_random_kicks(rtl):
    rng = np.random.default_rng(31)
    for case in range(40):
        H, W, C = int(rng.integers(1, 12)), int(rng.integers(1, 12)), int(rng.integers(1, 100))
        x = rng.integers(-128, 128, (H, W, C)).astype(np.int8)
        zp_in, zp_out = (int(v) for v in rng.integers(-128, 128, 2))
        if case % 4:
            m, s = nx.mean_params(float(rng.uniform(0.005, 0.2)), float(rng.uniform(0.005, 0.2)), H * W)
        else:
            m, s = int(rng.integers(-(2**31), 2**31)), int(rng.integers(-31, 31))
        lo, hi = _clamp(rng)
        sram = Sram()
        ifm = sram.put(x)
        ofm = sram.reserve(C)
        regs = {Reg.IFM_ADDR: ifm, Reg.IFM_H: H, Reg.IFM_W: W, Reg.IFM_C: C, Reg.IFM_ZERO_POINT: zp_in,
                Reg.OFM_ADDR: ofm, Reg.OFM_ZERO_POINT: zp_out, Reg.OFM_MULTIPLIER: m, Reg.OFM_SHIFT: s,
                Reg.ACT_MIN: lo, Reg.ACT_MAX: hi}  # fmt: skip
        result, got = run_kick(rtl, sram, Opcode.MEAN, regs, ofm, C)
        assert result.ok, f"case {case}: {result}"
        expect = np.clip(nx.mean(x, (0, 1), False, zp_in, zp_out, m, s), lo, hi)
        np.testing.assert_array_equal(got, expect, err_msg=f"mean case {case}")


def test_add_unit_random_kicks(rtl):
    rng = np.random.default_rng(41)
    for case in range(40):
        H, W, C = int(rng.integers(1, 10)), int(rng.integers(1, 10)), int(rng.integers(1, 50))
        a = rng.integers(-128, 128, (H, W, C)).astype(np.int8)
        b = rng.integers(-128, 128, (H, W, C)).astype(np.int8)
        zp1, zp2, zpo = (int(v) for v in rng.integers(-128, 128, 3))
        if case % 4:
            p = nx.add_params(*(float(v) for v in rng.uniform(0.005, 0.3, 3)))
        else:  # any legal raw parameters
            p = nx.AddParams(int(rng.integers(0, 32)), *[int(v) for v in (rng.integers(-(2**31), 2**31),
                             rng.integers(-31, 31), rng.integers(-(2**31), 2**31), rng.integers(-31, 31),
                             rng.integers(-(2**31), 2**31), rng.integers(-31, 31))])  # fmt: skip
        lo, hi = _clamp(rng)
        sram = Sram()
        ia, ib = sram.put(a), sram.put(b)
        ofm = sram.reserve(a.size)
        regs = {Reg.IFM_ADDR: ia, Reg.IFM_ZERO_POINT: zp1, Reg.IFM2_ADDR: ib, Reg.IFM2_ZERO_POINT: zp2,
                Reg.OFM_ADDR: ofm, Reg.OFM_H: H, Reg.OFM_W: W, Reg.OFM_C: C, Reg.OFM_ZERO_POINT: zpo,
                Reg.ACT_MIN: lo, Reg.ACT_MAX: hi, Reg.LEFT_SHIFT: p.left_shift,
                Reg.IFM_MULTIPLIER: p.input1_multiplier, Reg.IFM_SHIFT: p.input1_shift,
                Reg.IFM2_MULTIPLIER: p.input2_multiplier, Reg.IFM2_SHIFT: p.input2_shift,
                Reg.OFM_MULTIPLIER: p.output_multiplier, Reg.OFM_SHIFT: p.output_shift}  # fmt: skip
        result, got = run_kick(rtl, sram, Opcode.ADD, regs, ofm, a.size)
        assert result.ok, f"case {case}: {result}"
        expect = nx.add(a, b, zp1, zp2, zpo, p, lo, hi)
        np.testing.assert_array_equal(got.reshape(H, W, C), expect, err_msg=f"add case {case}: {p}")


def _mul_reference(a, b, zp1, zp2, zpo, m, s, lo, hi):
    """MulElementwise written out here: (a - zp1)(b - zp2), MBQM, + zp_out, clamp."""
    prod = (a.astype(np.int64) - zp1) * (b.astype(np.int64) - zp2)
    return np.clip(fp.multiply_by_quantized_multiplier(prod, m, s).astype(np.int64) + zpo, lo, hi).astype(np.int8)


@pytest.mark.parametrize("broadcast", [0, 1])
def test_mul_unit_random_kicks(rtl, broadcast):
    """MUL on random shapes (channels across the 32-lane groups), scales and raw parameters,
    IFM2 of the OFM shape or one broadcast channel vector; the cycles as cycles.py says."""
    from npu_byoc.arch.cycles import stream_cycles

    rng = np.random.default_rng(61 + broadcast)
    for case in range(30):
        H, W, C = int(rng.integers(1, 8)), int(rng.integers(1, 8)), int(rng.integers(1, 80))
        a = rng.integers(-128, 128, (H, W, C)).astype(np.int8)
        b = rng.integers(-128, 128, (1, 1, C) if broadcast else (H, W, C)).astype(np.int8)
        zp1, zp2, zpo = (int(v) for v in rng.integers(-128, 128, 3))
        if case % 4:
            m, s = nx.mul_params(*(float(v) for v in rng.uniform(0.002, 0.3, 3)))
        else:  # any legal raw parameters (a left shift wraps the product, as numerics does)
            m, s = int(rng.integers(-(2**31), 2**31)), int(rng.integers(-31, 31))
        lo, hi = _clamp(rng)
        sram = Sram()
        ia, ib = sram.put(a), sram.put(b)
        ofm = sram.reserve(a.size)
        regs = {Reg.IFM_ADDR: ia, Reg.IFM_ZERO_POINT: zp1, Reg.IFM2_ADDR: ib, Reg.IFM2_ZERO_POINT: zp2,
                Reg.IFM2_BROADCAST: broadcast, Reg.OFM_ADDR: ofm, Reg.OFM_H: H, Reg.OFM_W: W, Reg.OFM_C: C,
                Reg.OFM_ZERO_POINT: zpo, Reg.ACT_MIN: lo, Reg.ACT_MAX: hi, Reg.OFM_MULTIPLIER: m,
                Reg.OFM_SHIFT: s}  # fmt: skip
        result, got = run_kick(rtl, sram, Opcode.MUL, regs, ofm, a.size)
        assert result.ok, f"case {case}: {result}"
        np.testing.assert_array_equal(got.reshape(H, W, C), _mul_reference(a, b, zp1, zp2, zpo, m, s, lo, hi),
                                      err_msg=f"mul case {case}: m={m} s={s}")
        steps = [Dma(Opcode.DMA_IN, IO_IN, 0, 0, len(sram.blob)), Kick.make(Opcode.MUL, regs),
                 Dma(Opcode.DMA_OUT, IO_OUT, 0, ofm, a.size)]  # fmt: skip
        assert result.cycles == stream_cycles(steps, HW), f"mul case {case}"


def test_broadcast_add_unit_random_kicks(rtl):
    """ADD with IFM2_BROADCAST: the channel vector added at every pixel."""
    rng = np.random.default_rng(71)
    for case in range(20):
        H, W, C = int(rng.integers(1, 8)), int(rng.integers(1, 8)), int(rng.integers(1, 80))
        a = rng.integers(-128, 128, (H, W, C)).astype(np.int8)
        b = rng.integers(-128, 128, (1, 1, C)).astype(np.int8)
        zp1, zp2, zpo = (int(v) for v in rng.integers(-128, 128, 3))
        p = nx.add_params(*(float(v) for v in rng.uniform(0.005, 0.3, 3)))
        lo, hi = _clamp(rng)
        sram = Sram()
        ia, ib = sram.put(a), sram.put(b)
        ofm = sram.reserve(a.size)
        regs = {Reg.IFM_ADDR: ia, Reg.IFM_ZERO_POINT: zp1, Reg.IFM2_ADDR: ib, Reg.IFM2_ZERO_POINT: zp2,
                Reg.IFM2_BROADCAST: 1, Reg.OFM_ADDR: ofm, Reg.OFM_H: H, Reg.OFM_W: W, Reg.OFM_C: C,
                Reg.OFM_ZERO_POINT: zpo, Reg.ACT_MIN: lo, Reg.ACT_MAX: hi, Reg.LEFT_SHIFT: p.left_shift,
                Reg.IFM_MULTIPLIER: p.input1_multiplier, Reg.IFM_SHIFT: p.input1_shift,
                Reg.IFM2_MULTIPLIER: p.input2_multiplier, Reg.IFM2_SHIFT: p.input2_shift,
                Reg.OFM_MULTIPLIER: p.output_multiplier, Reg.OFM_SHIFT: p.output_shift}  # fmt: skip
        result, got = run_kick(rtl, sram, Opcode.ADD, regs, ofm, a.size)
        assert result.ok, f"case {case}: {result}"
        expect = nx.add(a, np.broadcast_to(b, a.shape), zp1, zp2, zpo, p, lo, hi)
        np.testing.assert_array_equal(got.reshape(H, W, C), expect, err_msg=f"broadcast add case {case}")


def test_lut_unit_random_kicks(rtl):
    rng = np.random.default_rng(51)
    for case in range(30):
        H, W, C = int(rng.integers(1, 10)), int(rng.integers(1, 10)), int(rng.integers(1, 50))
        x = rng.integers(-128, 128, (H, W, C)).astype(np.int8)
        table = rng.integers(-128, 128, 256).astype(np.int8)
        if case == 0:
            table = nx.sigmoid_lut(0.0625, 0)
        sram = Sram()
        lut = sram.put(table)
        ifm = sram.put(x)
        ofm = sram.reserve(x.size)
        regs = {Reg.IFM_ADDR: ifm, Reg.OFM_ADDR: ofm, Reg.OFM_H: H, Reg.OFM_W: W, Reg.OFM_C: C, Reg.LUT_ADDR: lut}
        result, got = run_kick(rtl, sram, Opcode.LUT, regs, ofm, x.size)
        assert result.ok, f"case {case}: {result}"
        np.testing.assert_array_equal(got.reshape(H, W, C), nx.lut_lookup(x, table), err_msg=f"lut case {case}")


# =============================================================================================
# the DMA


def test_dma_strided_copies(rtl):
    """Random 3-D boxes with positive, negative and zero strides, in and out; against numpy."""
    rng = np.random.default_rng(61)
    src = rng.integers(0, 256, 20000, dtype=np.uint8)
    for case in range(60):
        n = [int(v) for v in rng.integers(1, 9, 3)]  # n0, n1, n2
        if case % 3 == 0:
            n[0] = int(rng.integers(1, 70))  # long contiguous rows: 16-byte bursts and tails
        strides = [int(rng.choice([1, 1, -1, 0, 3, -7, 40, 97])) for _ in range(3)]
        first = sum(min(0, (c - 1) * s) for c, s in zip(n, strides))
        last = sum(max(0, (c - 1) * s) for c, s in zip(n, strides))
        base = int(rng.integers(-first, src.size - last))
        sram_addr = int(rng.integers(0, 300))
        i2, i1, i0 = np.ix_(np.arange(n[2]), np.arange(n[1]), np.arange(n[0]))
        ext = (base + i2 * strides[2] + i1 * strides[1] + i0 * strides[0]).ravel()
        dma_in = Dma(Opcode.DMA_IN, IO_IN, base, sram_addr, n[0], n[1], n[2], *strides)
        dma_out = Dma(Opcode.DMA_OUT, IO_OUT, base, sram_addr, n[0], n[1], n[2], *strides)
        dense = Dma(Opcode.DMA_OUT, IO_OUT + 1, 0, sram_addr, ext.size)
        regions = {IO_IN: src.copy(), IO_OUT: np.zeros(src.size, np.uint8), IO_OUT + 1: np.zeros(ext.size, np.uint8)}
        result = rtl.run(encode([dma_in, dense, dma_out]), regions)
        assert result.ok, f"case {case}: {result}"
        np.testing.assert_array_equal(regions[IO_OUT + 1], src[ext], err_msg=f"DMA_IN case {case}")
        expect = np.zeros(src.size, np.uint8)
        expect[ext] = src[ext]  # out writes back what came in (repeated addresses: same value)
        np.testing.assert_array_equal(regions[IO_OUT], expect, err_msg=f"DMA_OUT case {case}")


def test_dma_out_repeated_address_last_write_wins(rtl):
    data = np.arange(1, 9, dtype=np.uint8)
    steps = [Dma(Opcode.DMA_IN, IO_IN, 0, 0, 8), Dma(Opcode.DMA_OUT, IO_OUT, 2, 0, 4, 2, 1, 0, 1, 0)]
    regions = {IO_IN: data.copy(), IO_OUT: np.zeros(4, np.uint8)}
    assert rtl.run(encode(steps), regions).ok
    np.testing.assert_array_equal(regions[IO_OUT], [0, 0, 4, 8])  # stride0 = 0: bytes 1..4 then 5..8 hit 2, 3


# =============================================================================================
# the command decoder


def _random_stream(rng) -> np.ndarray:
    words = []
    for _ in range(int(rng.integers(0, 30))):
        pick = rng.random()
        if pick < 0.45:
            reg = int(rng.choice([int(r) for r in Reg] + [0x7F, 0x0A, 0xFF]))
            words += [set_reg_word(Reg(reg)) if reg in {int(r) for r in Reg} else (1 << 24) | (reg << 16),
                      int(rng.integers(0, 2**32)) if rng.random() < 0.3 else int(rng.integers(0, 40))]  # fmt: skip
        elif pick < 0.75:
            words.append(kick_word(Opcode(int(rng.choice([int(o) for o in Opcode])))))
        elif pick < 0.85:
            words.append(int(rng.integers(0, 2**32)))
        else:
            words.append(kick_word(Opcode.NOP) | int(rng.choice([0, 1, 1 << 23])))
    header = [MAGIC, VERSION, HEADER_WORDS + len(words)]
    if rng.random() < 0.1:
        header[int(rng.integers(0, 3))] ^= 1 << int(rng.integers(0, 32))
    cut = int(rng.integers(0, 4)) if rng.random() < 0.1 else 0
    return np.asarray((header + words)[: len(header + words) - cut], np.uint32)


def test_command_decoder_random_streams_match_the_machine(rtl):
    rng = np.random.default_rng(71)
    seen = set()
    for case in range(400):
        words = _random_stream(rng)
        regions = {r: rng.integers(0, 256, 256, dtype=np.uint8) for r in range(4)}
        theirs = {r: a.copy() for r, a in regions.items()}
        budget = int(rng.integers(1, 12)) if case % 10 == 0 else 1 << 22
        ours = rtl.run(words, regions, max_commands=budget)
        ref = Machine(HW).run(words, theirs, max_commands=budget)
        assert (ours.status, ours.word_index, ours.commands) == (ref.status, ref.word_index, ref.commands), \
            f"case {case}: RTL {ours}, machine {ref}"  # fmt: skip
        assert dict(ours.kicks) == dict(ref.kicks)
        for r in regions:
            np.testing.assert_array_equal(regions[r], theirs[r])
        seen.add(ours.status)
    assert {Status.OK, Status.BAD_MAGIC, Status.BAD_LENGTH, Status.INVALID_OPCODE, Status.INVALID_REGISTER,
            Status.MISSING_STOP, Status.INVALID_PARAMETER, Status.CYCLE_LIMIT} <= seen  # fmt: skip
