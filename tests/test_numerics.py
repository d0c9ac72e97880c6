"""npu_byoc.arch.numerics against exact integer pins, exact big-int references and LiteRT vectors.

Three kinds of evidence:

* pins: hand-derived integers for QuantizeMultiplier, SRDHM, RDBPOT and
  MultiplyByQuantizedMultiplier (each derivation is written next to the pin);
* independent references written in this file from the TFLite formulas with Python ints
  and fractions (no numpy vectorization, no call into the module's kernels), compared with
  the module by hypothesis;
* LiteRT vectors (tests/fixtures/ops/*.npz, made by tools/make_op_vectors.py with
  ``OpResolverType.BUILTIN_REF``): both the module and the independent references must
  reproduce LiteRT's int8 outputs with 0 LSB difference.

Never imports TensorFlow.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_byoc.arch import fixed_point as fp
from npu_byoc.arch import numerics as nm

FIXTURES = Path(__file__).parent / "fixtures" / "ops"
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


# ======================================================================================
# Independent references (Python ints / Fractions, written from the TFLite formulas)
# ======================================================================================


def ref_round_half_away(f: Fraction) -> int:
    f = Fraction(f)
    r = math.floor(abs(f) + Fraction(1, 2))
    return r if f >= 0 else -r


def ref_quantize_multiplier(real: float) -> tuple[int, int]:
    """real = q·2^e with 1/2 <= |q| < 1 found by exact halving/doubling, not frexp."""
    if real == 0:
        return 0, 0
    a, e = abs(Fraction(real)), 0
    while a >= 1:
        a, e = a / 2, e + 1
    while a < Fraction(1, 2):
        a, e = a * 2, e - 1
    m = ref_round_half_away(a * 2**31)
    if m == 2**31:
        m, e = 2**30, e + 1
    if e < -31:
        return 0, 0
    return (m if real > 0 else -m), e


def wrap32(v: int) -> int:
    return ((v + 2**31) % 2**32) - 2**31


def ref_srdhm(a: int, b: int) -> int:
    # gemmlowp: trunc((a·b + nudge) / 2^31), nudge = 2^30 (a·b >= 0) or 1 - 2^30 (a·b < 0).
    # For a·b >= 0 that is floor(a·b/2^31 + 1/2); for a·b < 0, with N = a·b + 2^30 an
    # integer, trunc((N + 1 - 2^31)/2^31) = ceil((N + 1)/2^31) - 1 = floor(N/2^31): the same
    # floor(a·b/2^31 + 1/2). So SRDHM rounds ties toward +infinity, not away from zero.
    if a == b == I32_MIN:
        return I32_MAX
    return math.floor(Fraction(a * b, 2**31) + Fraction(1, 2))


def ref_rdbpot(x: int, exponent: int) -> int:
    return ref_round_half_away(Fraction(x, 2**exponent))


def ref_mbqm(x: int, multiplier: int, shift: int) -> int:
    left, right = max(shift, 0), max(-shift, 0)
    return ref_rdbpot(ref_srdhm(wrap32(x * 2**left), multiplier), right)


def ref_requant_params(s_in, s_w, s_out, float_product=False):
    if float_product:  # TFLite per-tensor FULLY_CONNECTED: float32(s_in · s_w) first
        eff = float(np.float32(np.float32(s_in) * np.float32(s_w))) / float(np.float32(s_out))
    else:
        eff = float(np.float32(s_in)) * float(np.float32(s_w)) / float(np.float32(s_out))
    return ref_quantize_multiplier(eff)


def ref_activation_range(act: str, scale, zp):
    def q(f):
        return int(zp) + ref_round_half_away(Fraction(float(np.float32(f) / np.float32(scale))))

    return {
        "NONE": (-128, 127),
        "RELU": (max(-128, q(0.0)), 127),
        "RELU6": (max(-128, q(0.0)), min(127, q(6.0))),
        "RELU_N1_TO_1": (max(-128, q(-1.0)), min(127, q(1.0))),
    }[act]


def ref_output_stage(acc: int, bias: int, m: int, s: int, zp_out: int, lo: int, hi: int) -> int:
    return min(max(ref_mbqm(wrap32(acc + bias), m, s) + zp_out, lo), hi)


def ref_same_or_valid(in_size, k, stride, padding):
    """(out, pad_before) by TFLite's padding.h rules."""
    out = -(-in_size // stride) if padding == "SAME" else (in_size - k) // stride + 1
    total = max((out - 1) * stride + k - in_size, 0)
    return out, total // 2


def ref_conv2d(case, depthwise=False):
    """Naive NHWC conv, integer accumulator Σ w·(x − zp_in) over taps inside the image."""
    x = case["input"].astype(np.int64)
    w = case["weights"].astype(np.int64)  # OHWI (conv) or 1HW(I·M) (depthwise)
    n, h, wd, cin = x.shape
    cout = w.shape[0] if not depthwise else w.shape[3]
    kh, kw = w.shape[1], w.shape[2]
    sh, sw = (int(v) for v in case["stride"])
    pad = str(case["padding"])
    oh, pt = ref_same_or_valid(h, kh, sh, pad)
    ow, pl = ref_same_or_valid(wd, kw, sw, pad)
    zp = int(case["input_zero_point"])
    mult = int(case["depth_multiplier"]) if depthwise else 1
    bias = case["bias"].astype(np.int64)
    lo, hi = ref_activation_range(str(case["activation"]), case["output_scale"], case["output_zero_point"])
    params = [ref_requant_params(case["input_scale"], s, case["output_scale"]) for s in case["weight_scales"]]
    out = np.zeros((n, oh, ow, cout), np.int64)
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                for oc in range(cout):
                    acc = 0
                    for fy in range(kh):
                        for fx in range(kw):
                            iy, ix = oy * sh - pt + fy, ox * sw - pl + fx
                            if not (0 <= iy < h and 0 <= ix < wd):
                                continue
                            if depthwise:
                                ic = oc // mult
                                acc += int(w[0, fy, fx, oc]) * (int(x[b, iy, ix, ic]) - zp)
                            else:
                                acc += int(np.dot(w[oc, fy, fx, :], x[b, iy, ix, :] - zp))
                    m, s = params[oc]
                    out[b, oy, ox, oc] = ref_output_stage(acc, int(bias[oc]), m, s,
                                                          int(case["output_zero_point"]), lo, hi)
    return out


def ref_c_round(v: float) -> int:
    """C's round() of a double: half away from zero (v - trunc(v) is exact in double)."""
    r = math.trunc(v)
    return r + (int(math.copysign(1, v)) if abs(v - r) >= 0.5 else 0)


def ref_fc_scale(acc: int, s_in, s_w, s_out) -> int:
    """reference_integer_ops::FullyConnected(PerChannel) with float scales (LiteRT's BUILTIN_REF):
    int32(round(double(acc) * (double(s_in) * double(s_w) / double(s_out))))."""
    eff = float(np.float32(s_in)) * float(np.float32(s_w)) / float(np.float32(s_out))
    return ref_c_round(float(acc) * eff)


def ref_fully_connected(case):
    x = case["input"].astype(np.int64)
    w = case["weights"].astype(np.int64)
    zp = int(case["input_zero_point"])
    per_tensor = case["weight_scales"].size == 1
    lo, hi = ref_activation_range(str(case["activation"]), case["output_scale"], case["output_zero_point"])
    out = np.zeros((x.shape[0], w.shape[0]), np.int64)
    for b in range(x.shape[0]):
        for o in range(w.shape[0]):
            s_w = case["weight_scales"][0 if per_tensor else o]
            acc = sum(int(w[o, k]) * (int(x[b, k]) - zp) for k in range(w.shape[1]))
            v = ref_fc_scale(wrap32(acc + int(case["bias"][o])), case["input_scale"], s_w, case["output_scale"])
            out[b, o] = min(max(v + int(case["output_zero_point"]), lo), hi)
    return out


def ref_table(case, fn):
    """LUTPopulateInt8 of LiteRT, one entry at a time in numpy float32 scalars."""
    s_in, zp_in = np.float32(case["input_scale"]), int(case["input_zero_point"])
    inv = np.float32(1.0) / np.float32(case["output_scale"])
    zp_out = int(case["output_zero_point"])
    table = {}
    for v in range(-128, 128):
        xf = np.float32(s_in * np.float32(v - zp_in))
        y = fn(xf)
        q = ref_round_half_away(Fraction(float(np.float32(y * inv)))) + zp_out
        table[v] = min(max(q, -128), 127)
    return np.array([[table[int(v)] for v in row] for row in case["input"]])


def f32_sigmoid(x):
    e = np.float32(math.exp(-float(x)))  # expf, correctly rounded
    return np.float32(np.float32(1.0) / (np.float32(1.0) + e))


def f32_tanh(x):
    return np.float32(math.tanh(float(x)))


def ref_pool(case, kind):
    x = case["input"].astype(np.int64)
    n, h, w, c = x.shape
    fh, fw = (int(v) for v in case["filter"])
    sh, sw = (int(v) for v in case["stride"])
    pad = str(case["padding"])
    oh, pt = ref_same_or_valid(h, fh, sh, pad)
    ow, pl = ref_same_or_valid(w, fw, sw, pad)
    lo, hi = ref_activation_range(str(case["activation"]), case["output_scale"], case["output_zero_point"])
    out = np.zeros((n, oh, ow, c), np.int64)
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                for ch in range(c):
                    vals = [int(x[b, iy, ix, ch])
                            for iy in range(oy * sh - pt, oy * sh - pt + fh)
                            for ix in range(ox * sw - pl, ox * sw - pl + fw)
                            if 0 <= iy < h and 0 <= ix < w]
                    if kind == "avg":
                        v = ref_round_half_away(Fraction(sum(vals), len(vals)))
                    else:
                        v = max(vals)
                    out[b, oy, ox, ch] = min(max(v, lo), hi)
    return out


def ref_mean(case):
    """LiteRT QuantizedMeanOrSum: integer sum, 1/n folded into the multiplier."""
    x = case["input"].astype(np.int64)
    axes = tuple(int(a) % x.ndim for a in case["axes"])
    n = int(np.prod([x.shape[a] for a in axes]))
    m, s = ref_quantize_multiplier(float(np.float32(case["input_scale"])) / float(np.float32(case["output_scale"])))
    k = min(n.bit_length() - 1, 32, 31 + s)
    m, s = (m * 2**k) // n, s - k
    sums = x.sum(axis=axes, keepdims=bool(case["keep_dims"]))
    zp_in, zp_out = int(case["input_zero_point"]), int(case["output_zero_point"])
    f = np.vectorize(lambda t: min(max(ref_mbqm(int(t) - zp_in * n, m, s) + zp_out, -128), 127))
    return f(sums)


def ref_add(case):
    s1, s2, so = (float(np.float32(case[k])) for k in ("input_scale", "input2_scale", "output_scale"))
    twice_max = 2 * max(s1, s2)
    m1, e1 = ref_quantize_multiplier(s1 / twice_max)
    m2, e2 = ref_quantize_multiplier(s2 / twice_max)
    mo, eo = ref_quantize_multiplier(twice_max / (2**20 * so))
    zp1, zp2, zpo = (int(case[k]) for k in ("input_zero_point", "input2_zero_point", "output_zero_point"))
    lo, hi = ref_activation_range(str(case["activation"]), case["output_scale"], case["output_zero_point"])

    def one(a, b):
        ra = ref_mbqm((int(a) - zp1) * 2**20, m1, e1)
        rb = ref_mbqm((int(b) - zp2) * 2**20, m2, e2)
        return min(max(ref_mbqm(ra + rb, mo, eo) + zpo, lo), hi)

    a, b = np.broadcast_arrays(case["input"], case["input2"])
    return np.vectorize(one)(a, b)


# ======================================================================================
# Fixture loading
# ======================================================================================


def load_cases(op: str) -> list[dict]:
    with np.load(FIXTURES / f"{op}.npz", allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        cases = [{} for _ in range(meta["cases"])]
        for key in z.files:
            if key == "meta":
                continue
            idx, field = key.split(".", 1)
            value = z[key]
            cases[int(idx[1:])][field] = value[()] if value.ndim == 0 and value.dtype.kind == "U" else value
    return cases


def cases_of(op):
    cases = load_cases(op)
    return [pytest.param(c, id=f"{op}{i}-{c['model']}") for i, c in enumerate(cases)]


def act_range(case):
    return nm.activation_range(str(case["activation"]), case["output_scale"], case["output_zero_point"])


def lsb_report(got, want):
    d = np.abs(got.astype(np.int64) - want.astype(np.int64))
    return f"max |diff| {d.max()} LSB at {np.count_nonzero(d)} of {d.size} elements"


def assert_bit_exact(got, want):
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64)), lsb_report(got, want)


# ======================================================================================
# Pins
# ======================================================================================


@pytest.mark.parametrize(
    "real, expected",
    [
        # 0.5 = 0.5·2^0: frexp → (0.5, 0); round(0.5·2^31) = 2^30 → (2^30, 0).
        # Check: 2^30 · 2^(0−31) = 0.5.
        (0.5, (2**30, 0)),
        # 1.0 = 0.5·2^1 → (2^30, 1): positive shift = left shift by 1.
        (1.0, (2**30, 1)),
        (0.0, (0, 0)),
        # 0.75 = 0.75·2^0; 0.75·2^31 = 1610612736 exactly.
        (0.75, (1610612736, 0)),
        # 0.25 = 0.5·2^-1 → (2^30, -1).
        (0.25, (2**30, -1)),
        # 1 − 2^-31 = q·2^0 with q·2^31 = 2^31 − 1: no rounding, stays below 2^31.
        (1.0 - 2.0**-31, (2**31 - 1, 0)),
        # 1 − 2^-32: q·2^31 = 2^31 − 0.5, a tie → away from zero → 2^31, which is then
        # halved with shift+1: (2^30, 1) represents exactly 1.0.
        (1.0 - 2.0**-32, (2**30, 1)),
        # 1 − 2^-40: q·2^31 = 2^31 − 2^-9 rounds up to 2^31 → (2^30, 1).
        (1.0 - 2.0**-40, (2**30, 1)),
        # 0.5 + 2^-32: q·2^31 = 2^30 + 0.5, a tie: away from zero → 2^30 + 1 (Python's
        # round() would give the even 2^30).
        (0.5 + 2.0**-32, (2**30 + 1, 0)),
        # 2^-32 = 0.5·2^-31: shift −31 is the smallest kept.
        (2.0**-32, (2**30, -31)),
        # 2^-33 = 0.5·2^-32: shift −32 < −31 → flushed to (0, 0).
        (2.0**-33, (0, 0)),
        (2.0**-40, (0, 0)),
        # 3·2^-34 = 0.75·2^-32 → flushed too, though the scale is above 2^-33.
        (3 * 2.0**-34, (0, 0)),
        # 1.5·2^20 = 0.75·2^21 → (0.75·2^31, 21).
        (1.5 * 2**20, (1610612736, 21)),
        # negative scales keep the sign in the multiplier (frexp(-0.5) = (-0.5, 0)).
        (-0.5, (-(2**30), 0)),
    ],
)
def test_quantize_multiplier_pins(real, expected):
    assert fp.quantize_multiplier(real) == expected
    assert ref_quantize_multiplier(real) == expected


def test_quantize_multiplier_rejects_non_finite():
    with pytest.raises(ValueError):
        fp.quantize_multiplier(float("inf"))
    with pytest.raises(ValueError):
        fp.quantize_multiplier(float("nan"))


def test_quantize_multiplier_array_matches_scalar():
    reals = np.array([[0.5, 1.0], [2.0**-33, 0.75]])
    m, s = fp.quantize_multiplier_array(reals)
    assert m.dtype == np.int32 and s.dtype == np.int32 and m.shape == (2, 2)
    assert m.tolist() == [[2**30, 2**30], [0, 1610612736]]
    assert s.tolist() == [[0, 1], [0, 0]]


@pytest.mark.parametrize(
    "a, b, expected",
    [
        (I32_MIN, I32_MIN, I32_MAX),  # (−2^31)²/2^31 = 2^31 does not fit: saturates
        # (2^31 − 1)² / 2^31 = 2^31 − 2 + 2^-31 → 2^31 − 2
        (I32_MAX, I32_MAX, 2**31 - 2),
        (I32_MIN, I32_MAX, -(2**31 - 1)),  # exact: −(2^31 − 1)
        (I32_MAX, I32_MIN, -(2**31 - 1)),
        (1, 2**30, 1),  # +0.5 → 1 (tie up)
        (-1, 2**30, 0),  # −0.5 → 0: ties go toward +inf, not away from zero
        (3, 2**30, 2),  # 1.5 → 2
        (-3, 2**30, -1),  # −1.5 → −1
        (-5, 2**30, -2),  # −2.5 → −2
        (0, I32_MIN, 0),
        (1000, 2**30, 500),
    ],
)
def test_srdhm_pins(a, b, expected):
    got = fp.saturating_rounding_doubling_high_mul(np.int32(a), np.int32(b))
    assert got.dtype == np.int32 and int(got) == expected
    assert ref_srdhm(a, b) == expected


@pytest.mark.parametrize(
    "x, e, expected",
    [
        (5, 1, 3), (-5, 1, -3),  # ±2.5 → ±3 (ties away from zero)
        (3, 1, 2), (-3, 1, -2),  # ±1.5 → ±2
        (1, 1, 1), (-1, 1, -1),  # ±0.5 → ±1
        (6, 2, 2), (-6, 2, -2),  # ±1.5
        (5, 2, 1), (-5, 2, -1),  # ±1.25
        (7, 2, 2), (-7, 2, -2),  # ±1.75
        (123, 0, 123), (-123, 0, -123),  # exponent 0: identity
        (2**30, 31, 1), (-(2**30), 31, -1),  # ±0.5 at the largest exponent
        (2**30 - 1, 31, 0), (-(2**30) + 1, 31, 0),
        (I32_MAX, 31, 1), (I32_MIN, 31, -1),
        (I32_MIN, 1, -(2**30)), (I32_MAX, 1, 2**30),  # 2^30 − 0.5 → 2^30
    ],
)
def test_rdbpot_pins(x, e, expected):
    got = fp.rounding_divide_by_pot(np.int32(x), e)
    assert got.dtype == np.int32 and int(got) == expected
    assert ref_rdbpot(x, e) == expected


@pytest.mark.parametrize("e", [-1, 32, 40])
def test_rdbpot_rejects_exponent_outside_0_31(e):
    with pytest.raises(ValueError):
        fp.rounding_divide_by_pot(1, e)


def test_rdbpot_broadcasts_exponents():
    got = fp.rounding_divide_by_pot(np.array([[5], [-5]]), np.array([0, 1, 2]))
    assert got.tolist() == [[5, 3, 1], [-5, -3, -1]]


@pytest.mark.parametrize(
    "x, m, shift, expected",
    [
        (5, 2**30, 1, 5),  # 0.5 · 2^1 = 1.0: x·2 then SRDHM(2x, 2^30) = x exactly
        (-7, 2**30, 1, -7),
        (3, 2**30, 0, 2),  # 1.5 → 2
        # −1.5: SRDHM rounds the tie toward +inf → −1 (a one-step half-away rounding
        # would give −2): the double-rounding kernel is not symmetric.
        (-3, 2**30, 0, -1),
        # real 0.25 (2^30, −1): SRDHM(5, 2^30) = 3 (2.5 up), RDBPOT(3, 1) = 2 (1.5 away),
        # while 5·0.25 = 1.25 would round to 1: the double rounding.
        (5, 2**30, -1, 2),
        (1 << 20, 2**30, -31, 0),  # 2^20 · 2^-32 = 2^-12 → 0
        (I32_MIN, 2**30, -31, -1),  # −2^31 · 2^-32 = −0.5 → −1
        (I32_MAX, 2**31 - 1, 0, 2**31 - 2),  # accumulator at +2^31: no overflow
        (I32_MIN, 2**31 - 1, 0, -(2**31 - 1)),
        (I32_MIN, I32_MIN, 0, I32_MAX),  # the saturating case
        # left shift overflows int32 in TFLite's C++ (x · (1 << 1)): wraps to −2^31
        (2**30, 2**30, 1, -(2**30)),
        (100, 0, -5, 0),  # a flushed multiplier gives 0
    ],
)
def test_mbqm_pins(x, m, shift, expected):
    got = fp.multiply_by_quantized_multiplier(np.int32(x), np.int32(m), shift)
    assert got.dtype == np.int32 and int(got) == expected
    assert ref_mbqm(x, m, shift) == expected


@pytest.mark.parametrize("shift", [-32, 31, 40])
def test_mbqm_rejects_shift_outside_tflite_range(shift):
    with pytest.raises(ValueError):
        fp.multiply_by_quantized_multiplier(1, 2**30, shift)


def test_kernels_reject_floats_and_out_of_range():
    with pytest.raises(TypeError):
        fp.multiply_by_quantized_multiplier(np.array([1.0]), 2**30, 0)
    with pytest.raises(ValueError):
        fp.saturating_rounding_doubling_high_mul(2**31, 1)


def test_requantize_per_channel_axis_and_wrap():
    acc = np.array([[1000, 1000, 1000], [-1000, -1000, -1000]], np.int32)
    bias = np.array([0, 24, -24], np.int32)
    mult = np.array([2**30, 2**30, 2**30], np.int32)  # 0.5 · 2^shift
    shift = np.array([-3, -4, -3], np.int32)  # scales 1/16, 1/32, 1/16
    got = nm.requantize(acc, bias, mult, shift, output_zero_point=3, channel_axis=1)
    # 1000/16 = 62.5 → SRDHM(1000, 2^30) = 500, RDBPOT(500, 3) = 62.5 → 63; +3
    # 1024/32 = 32; 976/16 = 61; −1000/16: SRDHM = −500, RDBPOT(−500, 3) = −62.5 → −63
    # −976/32 = −30.5: SRDHM(−976, 2^30) = −488, RDBPOT(−488, 4) = −30.5 → −31
    # −1024/16 = −64
    assert got.dtype == np.int8
    assert got.tolist() == [[66, 35, 64], [-60, -28, -61]]
    # channel axis 0 of the transposed accumulator gives the same numbers
    assert np.array_equal(nm.requantize(acc.T, bias, mult, shift, 3, channel_axis=0), got.T)
    # clamp to the activation range and the int8 range
    assert nm.requantize(acc, bias, mult, shift, 3, act_min=0, act_max=64).tolist() == [[64, 35, 64], [0, 0, 0]]
    # acc + bias wraps like int32 in C++: 2^31 − 1 + 1 → −2^31, then · 2^-31 → −1
    assert int(nm.requantize(np.int32(I32_MAX), np.int32(1), 2**30, -30, 0)) == -1
    assert int(nm.requantize(np.int32(I32_MAX), None, 2**30, -30, 0)) == 1


def test_activation_range_pins():
    # RELU6 with scale 6/255 ≈ 0.0235294, zp −128: quantize(6) = −128 + round(255.0) = 127
    assert nm.activation_range("RELU6", np.float32(6 / 255), -128) == (-128, 127)
    # scale 0.05, zp 10: quantize(0) = 10, quantize(6) = 10 + 120 = 130 → min(127, 130)
    assert nm.activation_range("RELU6", 0.05, 10) == (10, 127)
    assert nm.activation_range("RELU", 0.05, -20) == (-20, 127)
    assert nm.activation_range("RELU_N1_TO_1", 0.05, 0) == (-20, 20)
    assert nm.activation_range("NONE", 0.05, 0) == (-128, 127)
    with pytest.raises(ValueError):
        nm.activation_range("TANH", 0.05, 0)


def test_add_params_pin():
    # s1 = 0.5, s2 = 0.25, s_out = 1: twice_max = 1; input1 real 0.5 → (2^30, 0),
    # input2 real 0.25 → (2^30, −1), output real 1/2^20 = 0.5·2^-19 → (2^30, −19).
    p = nm.add_params(0.5, 0.25, 1.0)
    assert p == nm.AddParams(20, 2**30, 0, 2**30, -1, 2**30, -19)
    with pytest.raises(ValueError):
        nm.add_params(1.0, 1.0, 2.0**-30)  # output real multiplier 2 / (2^20 · 2^-30) ≥ 1


def test_mean_fold_pins():
    # n = 49: floor(log2 49) = 5; multiplier (2^30 · 2^5) // 49 = 34359738368 // 49 = 701219150
    # (701219150.37 truncated), shift 1 − 5.
    assert nm.fold_mean_count(2**30, 1, 49) == ((2**30 << 5) // 49, -4)
    assert nm.fold_mean_count(2**30, 1, 49) == (701219150, -4)
    # n = 64 (power of two): exact, multiplier unchanged, shift − 6
    assert nm.fold_mean_count(2**30, 0, 64) == (2**30, -6)
    # shift −29: s is clamped to 31 + (−29) = 2 so that the final shift stays ≥ −31
    assert nm.fold_mean_count(2**30, -29, 64) == ((2**30 << 2) // 64, -31)
    assert nm.mean_params(0.5, 0.5, 49) == (701219150, -4)
    with pytest.raises(ValueError):
        nm.fold_mean_count(2**30, 0, 0)


def test_pool_padding_pins():
    assert nm.pool_padding(7, 3, 2, "SAME") == (4, 1, 1)
    assert nm.pool_padding(8, 2, 2, "SAME") == (4, 0, 0)
    assert nm.pool_padding(6, 4, 2, "SAME") == (3, 1, 1)
    assert nm.pool_padding(5, 2, 1, "SAME") == (5, 0, 1)  # odd total: extra pixel after
    assert nm.pool_padding(10, 3, 2, "VALID") == (4, 0, 0)


def test_avg_pool_rounding_pins():
    # one 2x2 window per channel, sums 2, 6, −2, −6, 7, −7 over 4 elements
    sums = [2, 6, -2, -6, 7, -7]
    x = np.zeros((1, 2, 2, 6), np.int8)
    x[0, 0, 0] = sums
    got = nm.avg_pool2d(x, (2, 2), (2, 2), "VALID").ravel().tolist()
    assert got == [1, 2, -1, -2, 2, -2]  # 0.5→1, 1.5→2, −0.5→−1, −1.5→−2, 1.75→2, −1.75→−2


def test_avg_pool_excludes_padding_from_count():
    x = np.full((1, 3, 3, 1), 12, np.int8)
    x[0, 0, 0, 0] = -12
    got = nm.avg_pool2d(x, (3, 3), (1, 1), "SAME")
    # corner window: 4 valid taps, sum 24 → 6 (with zeros counted it would be 24/9 → 3)
    assert int(got[0, 0, 0, 0]) == 6
    assert int(got[0, 1, 1, 0]) == 9  # centre: (8·12 − 12)/9 = 84/9 = 9.33 → 9
    # explicit (top, left, bottom, right) padding gives the same as SAME here
    assert np.array_equal(nm.avg_pool2d(x, (3, 3), (1, 1), (1, 1, 1, 1)), got)


def test_lut_lookup_index_is_value_plus_128():
    lut = np.arange(-128, 128, dtype=np.int64)[::-1].astype(np.int8)  # f(v) = −v − 1
    assert nm.lut_lookup(np.array([-128, -1, 0, 127], np.int8), lut).tolist() == [127, 0, -1, -128]
    with pytest.raises(ValueError):
        nm.lut_lookup(np.array([0]), lut[:10])


def test_sigmoid_lut_values():
    # Any output quantization builds a table (onnxruntime picks its own, e.g. 1/255).
    lut_255 = nm.sigmoid_lut(0.1, 0, 1.0 / 255, -128)
    # sigmoid(0) * 255 = 127.5 in reals, but float32(1 / float32(1/255)) = 254.99998: 127.49999 -> 127
    assert int(lut_255[128]) == -1
    assert np.all(np.diff(lut_255.astype(int)) >= 0) and int(lut_255[-1]) == 127
    lut = nm.sigmoid_lut(0.1, 0)
    # v = 0: sigmoid(0) = 0.5 → 0.5·256 = 128 → −128 + 128 = 0
    assert int(lut[128]) == 0
    assert int(lut[0]) == -128 + round(256 / (1 + math.exp(12.8)))


# ======================================================================================
# Properties against the big-int references
# ======================================================================================

int32s = st.integers(I32_MIN, I32_MAX)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(int32s, st.integers(0, I32_MAX), st.integers(-31, 30)), min_size=1, max_size=64))
def test_mbqm_matches_bigint_reference(triples):
    x, m, s = (np.array(v, dtype=np.int64) for v in zip(*triples))
    got = fp.multiply_by_quantized_multiplier(x.astype(np.int32), m.astype(np.int32), s)
    assert got.tolist() == [ref_mbqm(*t) for t in triples]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(int32s, int32s), min_size=1, max_size=64))
def test_srdhm_matches_bigint_reference(pairs):
    a, b = (np.array(v, dtype=np.int64) for v in zip(*pairs))
    assert fp.saturating_rounding_doubling_high_mul(a, b).tolist() == [ref_srdhm(*p) for p in pairs]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(int32s, st.integers(0, 31)), min_size=1, max_size=64))
def test_rdbpot_matches_bigint_reference(pairs):
    x, e = (np.array(v, dtype=np.int64) for v in zip(*pairs))
    assert fp.rounding_divide_by_pot(x, e).tolist() == [ref_rdbpot(*p) for p in pairs]


@settings(max_examples=500, deadline=None)
@given(st.floats(min_value=2.0**-31, max_value=2.0**30, allow_nan=False, allow_infinity=False))
def test_quantize_multiplier_reconstructs_scale(real):
    m, s = fp.quantize_multiplier(real)
    assert (m, s) == ref_quantize_multiplier(real)
    assert 2**30 <= m < 2**31 and -31 <= s <= 31
    err = abs(Fraction(m) * Fraction(2) ** (s - 31) - Fraction(real))
    assert err <= Fraction(real) * Fraction(1, 2**31)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 4), st.integers(1, 3), st.integers(0, 2))
def test_avg_and_max_pool_match_naive_with_explicit_padding(seed, k, stride, pad):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, size=(1, 6, 5, 2)).astype(np.int8)
    padding = tuple(int(v) for v in rng.integers(0, min(pad, k - 1) + 1, size=4))
    got_avg = nm.avg_pool2d(x, (k, k), (stride, stride), padding, -100, 100)
    got_max = nm.max_pool2d(x, (k, k), (stride, stride), padding, -100, 100)
    top, left, bottom, right = padding
    oh = (6 + top + bottom - k) // stride + 1
    ow = (5 + left + right - k) // stride + 1
    for oy in range(oh):
        for ox in range(ow):
            for c in range(2):
                vals = [int(x[0, iy, ix, c])
                        for iy in range(oy * stride - top, oy * stride - top + k)
                        for ix in range(ox * stride - left, ox * stride - left + k)
                        if 0 <= iy < 6 and 0 <= ix < 5]
                want = ref_round_half_away(Fraction(sum(vals), len(vals)))
                assert int(got_avg[0, oy, ox, c]) == min(max(want, -100), 100)
                assert int(got_max[0, oy, ox, c]) == min(max(max(vals), -100), 100)


# ======================================================================================
# LiteRT BUILTIN_REF vectors: 0 LSB
# ======================================================================================


def conv_accumulator(case, depthwise=False):
    """int32 accumulator Σ w·(x − zp_in) (no bias) of the test's vectorized naive conv."""
    x = case["input"].astype(np.int64)
    w = case["weights"].astype(np.int64)
    zp = int(case["input_zero_point"])
    sh, sw = (int(v) for v in case["stride"])
    pad = str(case["padding"])
    kh, kw = w.shape[1], w.shape[2]
    oh, pt = ref_same_or_valid(x.shape[1], kh, sh, pad)
    ow, pl = ref_same_or_valid(x.shape[2], kw, sw, pad)
    # pad with the input zero point: (x − zp) = 0 there, same as skipping the tap
    xp = np.pad(x - zp, ((0, 0), (pt, kh + sh * oh), (pl, kw + sw * ow), (0, 0)))
    if depthwise:
        mult = int(case["depth_multiplier"])
        xe = np.repeat(xp, mult, axis=3)  # output channel oc reads input channel oc // mult
        return sum(xe[:, fy:fy + sh * oh:sh, fx:fx + sw * ow:sw, :] * w[0, fy, fx]
                   for fy in range(kh) for fx in range(kw))
    return sum(np.einsum("nhwi,oi->nhwo", xp[:, fy:fy + sh * oh:sh, fx:fx + sw * ow:sw, :], w[:, fy, fx, :])
               for fy in range(kh) for fx in range(kw))


def conv_module(case, depthwise=False):
    """Accumulator from the test's naive conv, output stage from the module."""
    acc = conv_accumulator(case, depthwise)
    m, s = nm.conv_requant_params(case["input_scale"], case["weight_scales"], case["output_scale"])
    lo, hi = act_range(case)
    return nm.requantize(acc, case["bias"], m, s, case["output_zero_point"], lo, hi, channel_axis=3)


@pytest.mark.parametrize("case", cases_of("conv2d"))
def test_conv2d_bit_exact(case):
    assert np.all(case["dilation"] == 1)
    assert_bit_exact(conv_module(case), case["output"])
    assert_bit_exact(ref_conv2d(case), case["output"])


@pytest.mark.parametrize("case", cases_of("depthwise_conv2d"))
def test_depthwise_conv2d_bit_exact(case):
    assert np.all(case["dilation"] == 1)
    assert_bit_exact(conv_module(case, depthwise=True), case["output"])
    assert_bit_exact(ref_conv2d(case, depthwise=True), case["output"])


@pytest.mark.parametrize("case", cases_of("fully_connected"))
def test_fully_connected_bit_exact(case):
    x = case["input"].astype(np.int64) - int(case["input_zero_point"])
    acc = x @ case["weights"].astype(np.int64).T
    m, e = nm.fc_scale_params(case["input_scale"], case["weight_scales"], case["output_scale"])
    lo, hi = act_range(case)
    got = nm.fc_requantize(acc, case["bias"], m, e, case["output_zero_point"], lo, hi, channel_axis=1)
    assert_bit_exact(got, case["output"])
    assert_bit_exact(ref_fully_connected(case), case["output"])


@settings(max_examples=400, deadline=None)
@given(st.integers(-(2**31), 2**31 - 1), st.floats(1e-4, 0.5), st.floats(1e-4, 0.5), st.floats(1e-3, 1.0),
       st.booleans())
def test_fc_scale_is_the_double_product_rounded(acc, s_in, s_w, s_out, near_tie):
    """numerics.fc_scale (integers only) equals C's round(double(acc) * effective), including
    accumulators whose product lies next to a half-integer."""
    eff = float(np.float32(s_in)) * float(np.float32(s_w)) / float(np.float32(s_out))
    if eff >= 1:
        return
    if near_tie:  # an accumulator whose exact product is within one step of k + 1/2
        acc = max(-(2**31), min(2**31 - 1, int((acc % 2001 - 1000 + 0.5) / eff)))
    m, e = nm.fc_scale_params(s_in, [s_w], s_out)
    assert int(nm.fc_scale(acc, m[0], e[0])) == ref_fc_scale(acc, s_in, s_w, s_out)


def test_fc_scale_ties_round_away_and_the_double_product_rounds_to_even():
    half = nm.fc_scale_params(1.0, [0.5], 1.0)
    assert nm.fc_scale([-3, -1, 1, 3], *half).tolist() == [-2, -1, 1, 2]
    # (2^31 - 1) * (2^52 + 2^21) = 2^83 - 2^21: exactly 1/2 - 2^-63 at exponent -84 (rounds to 0),
    # but the double product rounds it onto 1/2, which round() takes to 1
    acc, mantissa = 2**31 - 1, 2**52 + 2**21
    assert ref_c_round(float(acc) * (mantissa * 2.0**-84)) == 1
    assert int(nm.fc_scale(acc, mantissa, -84)) == 1
    assert int(nm.fc_scale(-acc, mantissa, -84)) == -1
    with pytest.raises(ValueError, match="not below 1"):
        nm.fc_scale_params(1.0, [2.0], 1.0)


@pytest.mark.parametrize("case", cases_of("logistic"))
def test_logistic_bit_exact(case):
    lut = nm.sigmoid_lut(case["input_scale"], case["input_zero_point"], case["output_scale"],
                         case["output_zero_point"])
    assert_bit_exact(nm.lut_lookup(case["input"], lut), case["output"])
    assert_bit_exact(ref_table(case, f32_sigmoid), case["output"])


@pytest.mark.parametrize("case", cases_of("tanh"))
def test_tanh_bit_exact(case):
    lut = nm.tanh_lut(case["input_scale"], case["input_zero_point"], case["output_scale"],
                      case["output_zero_point"])
    assert_bit_exact(nm.lut_lookup(case["input"], lut), case["output"])
    assert_bit_exact(ref_table(case, f32_tanh), case["output"])


@pytest.mark.parametrize("case", cases_of("avg_pool"))
def test_avg_pool_bit_exact(case):
    assert case["input_scale"] == case["output_scale"]
    assert case["input_zero_point"] == case["output_zero_point"]
    lo, hi = act_range(case)
    got = nm.avg_pool2d(case["input"], case["filter"], case["stride"], str(case["padding"]), lo, hi)
    assert_bit_exact(got, case["output"])
    assert_bit_exact(ref_pool(case, "avg"), case["output"])


@pytest.mark.parametrize("case", cases_of("max_pool"))
def test_max_pool_bit_exact(case):
    lo, hi = act_range(case)
    got = nm.max_pool2d(case["input"], case["filter"], case["stride"], str(case["padding"]), lo, hi)
    assert_bit_exact(got, case["output"])
    assert_bit_exact(ref_pool(case, "max"), case["output"])


@pytest.mark.parametrize("case", cases_of("mean"))
def test_mean_bit_exact(case):
    x = case["input"]
    n = int(np.prod([x.shape[int(a)] for a in case["axes"]]))
    m, s = nm.mean_params(case["input_scale"], case["output_scale"], n)
    got = nm.mean(x, case["axes"], bool(case["keep_dims"]), case["input_zero_point"],
                  case["output_zero_point"], m, s)
    assert_bit_exact(got, case["output"])
    assert_bit_exact(ref_mean(case), case["output"])


@pytest.mark.parametrize("case", cases_of("add"))
def test_add_bit_exact(case):
    p = nm.add_params(case["input_scale"], case["input2_scale"], case["output_scale"])
    lo, hi = act_range(case)
    got = nm.add(case["input"], case["input2"], case["input_zero_point"], case["input2_zero_point"],
                 case["output_zero_point"], p, lo, hi)
    assert_bit_exact(got, case["output"])
    assert_bit_exact(ref_add(case), case["output"])


# ======================================================================================
# The vectors are discriminating: they exercise what they are meant to
# ======================================================================================


def test_fixtures_cover_the_intended_cases():
    convs = load_cases("conv2d")
    assert {str(c["padding"]) for c in convs} == {"SAME", "VALID"}
    assert any(int(c["stride"][0]) == 2 for c in convs)
    assert any(str(c["activation"]) == "RELU6" for c in convs)
    assert all(c["weight_scales"].size > 1 for c in convs)  # per-channel
    assert any(int(c["depth_multiplier"]) > 1 for c in load_cases("depthwise_conv2d"))
    fcs = load_cases("fully_connected")
    assert {c["weight_scales"].size > 1 for c in fcs} == {True, False}  # both FC paths
    for c in load_cases("logistic"):
        assert sorted(c["input"].ravel().tolist()) == list(range(-128, 128))
    assert any(c["input_scale"] != c["input2_scale"] for c in load_cases("add"))
    means = load_cases("mean")
    assert {bool(c["keep_dims"]) for c in means} == {True, False}
    unsaturated = np.concatenate([np.abs(c["output"].ravel().astype(int)) < 127 for c in means])
    assert unsaturated.mean() > 0.8


def test_avg_pool_fixtures_hit_ties_of_both_signs_and_partial_windows():
    ties_pos = ties_neg = partial = 0
    for case in load_cases("avg_pool"):
        x = case["input"].astype(np.int64)
        fh, fw = (int(v) for v in case["filter"])
        sh, sw = (int(v) for v in case["stride"])
        pad = str(case["padding"])
        oh, pt = ref_same_or_valid(x.shape[1], fh, sh, pad)
        ow, pl = ref_same_or_valid(x.shape[2], fw, sw, pad)
        for oy in range(oh):
            for ox in range(ow):
                ys = [y for y in range(oy * sh - pt, oy * sh - pt + fh) if 0 <= y < x.shape[1]]
                xs = [v for v in range(ox * sw - pl, ox * sw - pl + fw) if 0 <= v < x.shape[2]]
                n = len(ys) * len(xs)
                partial += n < fh * fw
                sums = x[0][np.ix_(ys, xs)].sum(axis=(0, 1))
                ties = (2 * sums) % n == 0
                ties &= sums % n != 0
                ties_pos += int(np.count_nonzero(ties & (sums > 0)))
                ties_neg += int(np.count_nonzero(ties & (sums < 0)))
    assert ties_pos >= 20 and ties_neg >= 20 and partial >= 20


def test_mean_fixtures_distinguish_litert_from_tflite_micro_path():
    """TFLite-Micro / old TFLite (reference_integer_ops::Mean) rounds twice: requantize the
    zero-point-corrected sum with s_in/s_out, then divide by n rounding half away. LiteRT's
    BUILTIN_REF folds 1/n into the multiplier. The vectors must tell the two apart."""
    differing = 0
    for case in load_cases("mean"):
        x = case["input"].astype(np.int64)
        axes = tuple(int(a) % x.ndim for a in case["axes"])
        n = int(np.prod([x.shape[a] for a in axes]))
        m, s = ref_quantize_multiplier(float(np.float32(case["input_scale"])) / float(np.float32(case["output_scale"])))
        sums = (x - int(case["input_zero_point"])).sum(axis=axes, keepdims=bool(case["keep_dims"]))
        micro = np.vectorize(lambda t: min(max(ref_round_half_away(Fraction(ref_mbqm(int(t), m, s), n))
                                               + int(case["output_zero_point"]), -128), 127))(sums)
        differing += int(np.count_nonzero(micro != case["output"]))
    assert differing > 0


def test_avg_pool_fixtures_reject_truncating_division():
    """TVM's int32 avg_pool2d truncates the division; LiteRT rounds half away from zero."""
    differing = 0
    for case in load_cases("avg_pool"):
        x = case["input"].astype(np.int64)
        fh, fw = (int(v) for v in case["filter"])
        sh, sw = (int(v) for v in case["stride"])
        oh, pt = ref_same_or_valid(x.shape[1], fh, sh, str(case["padding"]))
        ow, pl = ref_same_or_valid(x.shape[2], fw, sw, str(case["padding"]))
        for oy in range(oh):
            for ox in range(ow):
                ys = [y for y in range(oy * sh - pt, oy * sh - pt + fh) if 0 <= y < x.shape[1]]
                xs = [v for v in range(ox * sw - pl, ox * sw - pl + fw) if 0 <= v < x.shape[2]]
                sums = x[0][np.ix_(ys, xs)].sum(axis=(0, 1))
                trunc = np.array([int(Fraction(int(t), len(ys) * len(xs))) for t in sums])
                differing += int(np.count_nonzero(trunc != case["output"][0, oy, ox]))
    assert differing > 100


def test_conv_fixtures_prove_double_rounding():
    """Outputs where TFLite's double rounding (SRDHM then RDBPOT) differs from the
    single-rounding build (TFLITE_SINGLE_ROUNDING: (x·m + 2^(30−shift)) >> (31 − shift)),
    and LiteRT agrees with double rounding there."""
    witnessed = 0
    for op, dw in (("conv2d", False), ("depthwise_conv2d", True)):
        for case in load_cases(op):
            acc = conv_accumulator(case, dw) + case["bias"].astype(np.int64)
            m, s = nm.conv_requant_params(case["input_scale"], case["weight_scales"], case["output_scale"])
            lo, hi = act_range(case)
            zp = int(case["output_zero_point"])
            for idx in np.ndindex(acc.shape):
                a, mm, ss = int(acc[idx]), int(m[idx[-1]]), int(s[idx[-1]])
                double = ref_mbqm(a, mm, ss)
                single = (a * mm + (1 << (30 - ss))) >> (31 - ss)
                if double != single and lo <= double + zp <= hi and lo <= single + zp <= hi:
                    assert int(case["output"][idx]) == double + zp
                    witnessed += 1
    assert witnessed >= 3
