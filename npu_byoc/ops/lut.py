"""int8 -> int8 elementwise functions, run by the NPU's LUT unit: one registry entry each.

An int8 input has 256 values, so any function of one int8 value is exact as a 256-entry
table: the table is the model's reference arithmetic evaluated on every input value. Which
arithmetic is the reference depends on where the model came from (its *numerics*):

``tflite``  LiteRT's reference kernels (BUILTIN_REF): integer fixed point for HARD_SWISH,
            LEAKY_RELU, RELU*, ABS and QUANTIZE; a float32 table (``LUTPopulate``) for
            LOGISTIC, TANH and EXP. Hand-written Relax modules use these numerics too.
``onnx``    onnxruntime's QDQ execution: DequantizeLinear, the float32 function, then
            QuantizeLinear (round half to even, saturate).

TVM's CPU build of the same Relax graph computes the float function and rounds with its own
``quantize``; docs/numerics.md lists where that differs from these tables.

Adding a function is one :class:`LutFunction` in :data:`FUNCTIONS`: its Relax form(s) (as
TVM's frontends write them, in terms of the dequantized input), the source operator's name
per frontend (for reasons), and one table builder per numerics. The pattern table
(:mod:`npu_byoc.ops.table`), the lowering and docs/patterns.md derive from the registry.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from tvm.relax.dpl import DFPattern, is_const, is_op, wildcard

from ..arch import numerics as nx
from .records import QLut
from ..util.relax_utils import NotConstant, const_eval, op_name, prim_value, resolve

VALUES = np.arange(-128, 128, dtype=np.int64)  # the table index is v + 128
NUMERICS = ("tflite", "onnx")
# Which numerics a model's source format implies (frontend.ModelInfo.format).
FORMAT_NUMERICS = {"tflite": "tflite", "onnx": "onnx", "relax": "tflite"}
DEFAULT_NUMERICS = "tflite"


class NotThisFunction(Exception):
    """The match has the form's structure but not its constants; the message says why."""


@dataclass(frozen=True)
class Form:
    """One way a frontend writes the function. ``build(x)`` returns the pattern of the float
    body; ``x()`` gives a fresh dequantize pattern per use (a shared dequantize is split per
    consumer before matching)."""

    name: str
    source: str
    build: Callable[[Callable[[], DFPattern]], DFPattern]
    text: str
    # Relax ops that only this function computes, for the coverage report's "no pattern"
    # reasons (none for forms made of generic ops: add, multiply, clip).
    anchor_ops: tuple[str, ...] = ()


Table = Callable[[QLut], np.ndarray]


@dataclass(frozen=True)
class LutFunction:
    name: str  # registry key and composite name "npu.<name>"
    summary: str
    ops: Mapping[str, str]  # the source operator per numerics, for reasons
    forms: tuple[Form, ...]
    tables: Mapping[str, Table]  # numerics -> the 256 outputs (int64, before the act clamp)
    # Checks the form's constants; returns the function's parameters (alpha, ...).
    # (float body, bindings, the match's output stage) -> parameters; NotThisFunction if not.
    params: Callable[..., dict] = field(default=lambda body, bindings, tail: {})
    checks: tuple[Callable, ...] = ()  # extra constraints (op, hw) -> reason
    applies: Callable[[QLut], bool] = field(default=lambda op: True)  # silent selector

    def op_name(self, numerics: str) -> str:
        return self.ops.get(numerics, self.ops[DEFAULT_NUMERICS])


# ---------------------------------------------------------------------------------------------
# Table builders shared by several functions


def _float_in(op: QLut) -> np.ndarray:
    """float32(s_in) · float32(v − zp_in): DequantizeLinear / LUTPopulate's dequantized input."""
    return np.float32(op.input.scale) * (VALUES - op.input.zero_point).astype(np.float32)


def _quantize_half_even(y: np.ndarray, op: QLut) -> np.ndarray:
    """ONNX QuantizeLinear: round_half_even(float32(y / s_out)) + zp_out, saturated to int8."""
    q = np.rint((y.astype(np.float32) / np.float32(op.output.scale)).astype(np.float32)).astype(np.int64)
    return np.clip(q + op.output.zero_point, nx.INT8_MIN, nx.INT8_MAX)


def onnx_float(fn: Callable[[np.ndarray, dict], np.ndarray]) -> Table:
    """The onnxruntime QDQ table of a float32 function ``fn(x, params)``."""
    return lambda op: _quantize_half_even(fn(_float_in(op), dict(op.params)).astype(np.float32), op)


def tflite_lut_populate(fn: Callable[[np.ndarray], np.ndarray]) -> Table:
    """LiteRT's ``LUTPopulate<int8_t>`` of a float32 function (LOGISTIC, TANH, EXP)."""
    return lambda op: nx._lut_int8(
        fn, op.input.scale, op.input.zero_point, op.output.scale, op.output.zero_point
    ).astype(np.int64)


def _requant(x: np.ndarray, real: float, zp_out: int) -> np.ndarray:
    """zp_out + MultiplyByQuantizedMultiplier(x, QuantizeMultiplier(real)), unclamped."""
    m, s = nx.quantize_multiplier(real)
    return nx.multiply_by_quantized_multiplier(x, m, s).astype(np.int64) + zp_out


def _f32_ratio(a: float, b: float) -> float:
    """float a / float b in float32, as the C++ computes a ``float`` quotient."""
    return float(np.float32(a) / np.float32(b))


def _clamp8(q: np.ndarray) -> np.ndarray:
    return np.clip(q, nx.INT8_MIN, nx.INT8_MAX)


# ---------------------------------------------------------------------------------------------
# LiteRT integer kernels evaluated on the 256 inputs


def _tflite_requantize(op: QLut) -> np.ndarray:
    """QUANTIZE int8 -> int8 (``reference_ops::Requantize``): the multiplier of
    double(s_in) / double(s_out)."""
    x = VALUES - op.input.zero_point
    real = float(np.float32(op.input.scale)) / float(np.float32(op.output.scale))
    return _clamp8(_requant(x, real, op.output.zero_point))


def _tflite_relu(op: QLut) -> np.ndarray:
    """RELU / RELU6 / RELU_N1_TO_1 / RELU_0_TO_1 (``ReluX``): as QUANTIZE but the multiplier
    of the float32 quotient s_in / s_out (ReluPrepare); the clamp is the activation's."""
    x = VALUES - op.input.zero_point
    return _clamp8(_requant(x, _f32_ratio(op.input.scale, op.output.scale), op.output.zero_point))


def _tflite_leaky_relu(op: QLut) -> np.ndarray:
    """``QuantizeLeakyRelu``: two multipliers, float32 s_in·alpha/s_out for x < 0 and
    float32 s_in/s_out for x >= 0 (LeakyReluPrepare)."""
    alpha = np.float32(dict(op.params)["alpha"])
    s_in, s_out = np.float32(op.input.scale), np.float32(op.output.scale)
    x = VALUES - op.input.zero_point
    pos = _requant(x, float(s_in / s_out), op.output.zero_point)
    neg = _requant(x, float((s_in * alpha) / s_out), op.output.zero_point)
    return _clamp8(np.where(x >= 0, pos, neg))


def _constant(op: QLut) -> tuple[int, float, int]:
    """The scalar constant operand of ADD / SUB / MUL: (int8 value, scale, zero point)."""
    p = dict(op.params)
    return int(p["constant"]), float(p["constant_scale"]), int(p["constant_zero_point"])


def _tflite_add_scalar(op: QLut, sign: int = 1) -> np.ndarray:
    """ADD (SUB: sign −1) of a scalar constant, ``reference_integer_ops::AddFunc``; SUB is ADD
    with the second input's multiplier negated (PrepareGeneralSubOp)."""
    c, s_c, zp_c = _constant(op)
    p = nx.add_params(op.input.scale, s_c, op.output.scale)
    p = p._replace(input2_multiplier=sign * p.input2_multiplier)
    return nx.add(VALUES, c, op.input.zero_point, zp_c, op.output.zero_point, p).astype(np.int64)


def _tflite_mul_scalar(op: QLut) -> np.ndarray:
    """MUL by a scalar constant (``MulElementwise``): zp_out + MBQM((v − zp_in)·(c − zp_c)),
    multiplier of s_in·s_c/s_out."""
    c, s_c, zp_c = _constant(op)
    real = float(np.float32(op.input.scale)) * float(np.float32(s_c)) / float(np.float32(op.output.scale))
    return _clamp8(_requant((VALUES - op.input.zero_point) * (c - zp_c), real, op.output.zero_point))


def _scalar_float(op: QLut) -> np.float32:
    c, s_c, zp_c = _constant(op)
    return np.float32(s_c) * np.float32(c - zp_c)


def _tflite_abs(op: QLut) -> np.ndarray:
    """ABS (elementwise.cc): |x − zp_in|, rescaled by the float32 s_in/s_out multiplier when
    the scales differ, + zp_out."""
    x = np.abs(VALUES - op.input.zero_point)
    if np.float32(op.input.scale) == np.float32(op.output.scale):
        return _clamp8(x + op.output.zero_point)
    return _clamp8(_requant(x, _f32_ratio(op.input.scale, op.output.scale), op.output.zero_point))


def _i16(x: np.ndarray) -> np.ndarray:
    """Wrap to int16 (a C++ int -> int16_t conversion)."""
    return ((x + 32768) % 65536) - 32768


def _srdhm16(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul on int16: round(a·b / 2^15), ties up."""
    n = a * b + np.where(a * b >= 0, 1 << 14, 1 - (1 << 14))
    r = np.sign(n) * (np.abs(n) >> 15)  # C division: toward zero
    return np.where((a == -32768) & (b == -32768), 32767, r)


def _sdhm16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """TFLite's SaturatingDoublingHighMul (int16): a·b / 2^15 truncated toward zero."""
    p = a * b
    r = np.sign(p) * (np.abs(p) >> 15)
    return np.where((a == -32768) & (b == -32768), 32767, r)


def _rdbpot16(x: np.ndarray, exponent: int) -> np.ndarray:
    mask = (1 << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)


def _sat_lshift16(x: np.ndarray, amount: int) -> np.ndarray:
    return np.clip(x * (1 << amount), -32768, 32767)


def _int16_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier, then DownScaleInt32ToInt16Multiplier (round to the top 16 bits)."""
    m32, exponent = nx.quantize_multiplier(real)
    if m32 >= 2**31 - 1 - (1 << 15):
        return 32767, exponent
    return (m32 + (1 << 15)) >> 16, exponent


def hard_swish_params(op: QLut) -> tuple[int, int, int, int]:
    """HardSwishPrepare, in float32: (output multiplier, exponent, reluish multiplier, exponent)."""
    hires = np.float32(1.0 / 128.0) * np.float32(op.input.scale)
    out_m, out_e = _int16_multiplier(float(hires / np.float32(op.output.scale)))
    relu_m, relu_e = _int16_multiplier(float(hires / np.float32(3.0 / 32768.0)))
    return out_m, out_e, relu_m, relu_e


def _tflite_hard_swish(op: QLut) -> np.ndarray:
    """``reference_ops::HardSwish`` (int8): 16-bit fixed point, x·relu6(x+3)/6 as
    x_hires · reluish, with reluish = (x/3 rescaled to [-1, 1] saturating + 1) / 2."""
    out_m, out_e, relu_m, relu_e = hard_swish_params(op)
    hires = (VALUES - op.input.zero_point) * 128  # |x| <= 255: fits int16
    preshift = _srdhm16(hires, out_m)
    reluish = hires
    if relu_e > 0:
        reluish = _sat_lshift16(reluish, relu_e - 1)
    reluish = _srdhm16(reluish, relu_m)
    if relu_e > 0:
        reluish = _sat_lshift16(reluish, 1)
    if relu_e < 0:
        reluish = _rdbpot16(reluish, -relu_e)
    reluish = (reluish + (1 << 15)) >> 1
    out = _rdbpot16(_sdhm16(reluish, preshift), -out_e)
    return _clamp8(_i16(out + op.output.zero_point))


def hard_swish_exponent(op: QLut, hw) -> str | None:
    """LiteRT's int8 HARD_SWISH needs s_in / (128 · s_out) < 1 (its output exponent ≤ 0)."""
    if op.numerics == "tflite" and hard_swish_params(op)[1] > 0:
        return (
            f"output scale {op.output.scale:.6g} is below input scale / 128 "
            f"({op.input.scale / 128:.6g}): LiteRT's HARD_SWISH refuses it"
        )
    return None


# ---------------------------------------------------------------------------------------------
# float32 functions (ONNX numerics; LiteRT's float tables)


def _f32(fn):
    def f(x, p=None):
        with np.errstate(divide="ignore", invalid="ignore"):  # log(0) = -inf, sqrt(-1) = NaN: as in C
            return fn(x.astype(np.float64)).astype(np.float32)

    return f


def _sigmoid(x, p=None):
    return nx._sigmoid_f32(x)


def _hard_swish_onnx(x, p=None):
    # onnxruntime HardSwish: x · max(0, min(1, x/6 + 0.5)) in float32.
    h = np.clip(x * np.float32(1.0 / 6.0) + np.float32(0.5), np.float32(0), np.float32(1))
    return (x * h).astype(np.float32)


def _hard_sigmoid_onnx(x, p):
    # onnxruntime HardSigmoid: max(0, min(1, alpha · x + beta)) in float32.
    y = np.float32(p["alpha"]) * x.astype(np.float32) + np.float32(p["beta"])
    return np.clip(y.astype(np.float32), np.float32(0), np.float32(1))


def _elu_onnx(x, p):
    # onnxruntime Elu: x >= 0 ? x : alpha · (exp(x) − 1), float32.
    e = np.exp(x.astype(np.float64)).astype(np.float32) - np.float32(1)
    return np.where(x >= 0, x, np.float32(p["alpha"]) * e).astype(np.float32)


def tflite_float_wrapped(fn: Callable[[np.ndarray, dict], np.ndarray]) -> Table:
    """An op the converter keeps in float (ELU, NEG): DEQUANTIZE (float(double(s_in)·(v −
    zp_in))), the float32 kernel ``fn(x, params)``, QUANTIZE (round_half_away(x / float(s_out))
    + zp_out, saturated)."""

    def build(op: QLut) -> np.ndarray:
        x = (float(np.float32(op.input.scale)) * (VALUES - op.input.zero_point)).astype(np.float32)
        y = fn(x, dict(op.params)).astype(np.float32)
        scaled = (y / np.float32(op.output.scale)).astype(np.float32).astype(np.float64)
        rounded = np.where(scaled >= 0, np.floor(scaled + 0.5), -np.floor(-scaled + 0.5))
        return _clamp8(rounded.astype(np.int64) + op.output.zero_point)

    return build


def _tflite_sqrt(op: QLut) -> np.ndarray:
    """LiteRT's int8 SQRT (measured against BUILTIN_REF on tests/fixtures/ops/sqrt.npz): the
    float32 sqrt of the dequantized input, divided by s_out and truncated (no rounding)."""
    x = np.float32(op.input.scale) * (VALUES - op.input.zero_point).astype(np.float32)
    with np.errstate(invalid="ignore"):
        y = np.sqrt(x.astype(np.float64)).astype(np.float32)
    q = np.trunc((y / np.float32(op.output.scale)).astype(np.float32))
    q = np.where(np.isfinite(q), q, nx.INT32_MIN).astype(np.int64)  # sqrt(x < 0) = NaN
    return _clamp8(q + op.output.zero_point)


def _elu_tflite(x, p):
    # LiteRT's float ELU: x < 0 ? alpha · expm1f(x) : x
    return np.where(x < 0, np.float32(p["alpha"]) * np.expm1(x.astype(np.float64)).astype(np.float32), x)


def _leaky_relu_onnx(x, p):
    return np.where(x >= 0, x, x * np.float32(p["alpha"])).astype(np.float32)


def _gelu_tflite(x, p):
    """LiteRT's GeluTransform / GeluTransformApproximate in float32 (erfcf and tanhf taken as
    the correctly rounded float32 of the double function, as for the other float kernels)."""
    x = x.astype(np.float32)
    half_x = np.float32(0.5) * x
    if p["approximate"]:
        sqrt_2_over_pi = np.float32(2 / math.sqrt(math.pi) * math.sqrt(0.5))  # M_2_SQRTPI · M_SQRT1_2
        inner = sqrt_2_over_pi * (x + np.float32(0.044715) * x * x * x)
        return half_x * (np.float32(1) + np.tanh(inner.astype(np.float64)).astype(np.float32))
    arg = (x * np.float32(-math.sqrt(0.5))).astype(np.float64)
    return half_x * np.array([math.erfc(v) for v in arg], np.float32)


def _identity(x, p=None):
    return x


# ---------------------------------------------------------------------------------------------
# Forms and their constants


def _unary(relax_op: str) -> Form:
    short = relax_op.removeprefix("relax.")
    return Form("qdq", "TFLite, ONNX QDQ", lambda x: is_op(relax_op)(x()), f"dequantize(x) → {short}", (relax_op,))


def _scalar(expr, bindings) -> float | None:
    try:
        v = np.asarray(const_eval(expr, bindings))
    except NotConstant:
        return None
    return float(v.reshape(-1)[0]) if v.size == 1 else None


def _expect(what: str, got, want: float):
    if got is None or not math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-7):
        raise NotThisFunction(f"{what} is {got}, not {want}")


def _hard_swish_constants(body, bindings, tail) -> dict:
    """divide(multiply(x, clip(add(x, 3), 0, 6)), 6) or multiply(x, divide(clip(...), 6))."""
    top = resolve(body, bindings)
    if op_name(top) == "relax.divide":  # TFLite
        _expect("hard_swish divisor", _scalar(top.args[1], bindings), 6.0)
        mul = resolve(top.args[0], bindings)
        clip = resolve(mul.args[1], bindings)
    else:  # ONNX: multiply(x, divide(clip, 6))
        div = resolve(top.args[1], bindings)
        _expect("hard_swish divisor", _scalar(div.args[1], bindings), 6.0)
        clip = resolve(div.args[0], bindings)
    _expect("hard_swish clip min", float(prim_value(clip.args[1])), 0.0)
    _expect("hard_swish clip max", float(prim_value(clip.args[2])), 6.0)
    add = resolve(clip.args[0], bindings)
    _expect("hard_swish offset", _scalar(add.args[1], bindings), 3.0)
    return {}


def _hard_sigmoid_constants(body, bindings, tail) -> dict:
    """clip(add(multiply(alpha, x), beta), 0, 1): TVM's import of ONNX HardSigmoid. The clip is
    the match's float activation (``tail``), which also clamps the table."""
    clip = tail.float_act
    if op_name(clip) != "relax.clip":
        raise NotThisFunction("no clip(0, 1) after alpha·x + beta")
    _expect("hard_sigmoid clip min", float(prim_value(clip.args[1])), 0.0)
    _expect("hard_sigmoid clip max", float(prim_value(clip.args[2])), 1.0)
    add = resolve(body, bindings)
    mul = resolve(add.args[0], bindings)
    alpha = _scalar(mul.args[0], bindings)
    alpha = _scalar(mul.args[1], bindings) if alpha is None else alpha
    beta = _scalar(add.args[1], bindings)
    if alpha is None or beta is None:
        raise NotThisFunction("hard_sigmoid alpha or beta is not a constant")
    return {"alpha": alpha, "beta": beta}


def _elu_alpha(body, bindings, tail) -> dict:
    """add(multiply(−alpha, relu(subtract(1, exp(x)))), relu(x))."""
    add = resolve(body, bindings)
    mul = resolve(add.args[0], bindings)
    sub = resolve(resolve(mul.args[1], bindings).args[0], bindings)
    _expect("elu one", _scalar(sub.args[0], bindings), 1.0)
    alpha = _scalar(mul.args[0], bindings)
    if alpha is None:
        raise NotThisFunction("elu alpha is not a constant")
    return {"alpha": -alpha}


def _square_exponent(body, bindings, tail) -> dict:
    _expect("power exponent", _scalar(resolve(body, bindings).args[1], bindings), 2.0)
    return {}


def _scalar_operand(body, bindings, tail) -> dict:
    """op(dequantize(x), dequantize(c)) with c a one-value constant: c, its scale and zero point."""
    d = resolve(resolve(body, bindings).args[1], bindings)
    c = np.asarray(const_eval(d.args[0], bindings))
    scale, zp = np.asarray(const_eval(d.args[1], bindings)), np.asarray(const_eval(d.args[2], bindings))
    if c.size != 1 or scale.size != 1 or zp.size != 1:
        raise NotThisFunction(f"the constant operand has {c.size} values: one table needs a scalar")
    return {"constant": int(c.reshape(-1)[0]), "constant_scale": float(scale.reshape(-1)[0]),
            "constant_zero_point": int(zp.reshape(-1)[0])}


def _leaky_relu_alpha(body, bindings, tail) -> dict:
    return {"alpha": float(resolve(body, bindings).attrs.alpha)}


def _activation_of(body, bindings, tail) -> dict:
    """RELU-family entries are the requantize with a float activation before the quantize."""
    return {"activation": op_name(tail.float_act) if tail.float_act is not None else ""}


# TVM writes ELU (TFLite's float ELU between DEQUANTIZE and QUANTIZE, ONNX Elu) with relus.
_ELU_FORM = Form(
    "qdq",
    "TFLite, ONNX QDQ",
    lambda x: is_op("relax.add")(
        is_op("relax.multiply")(wildcard(), is_op("relax.nn.relu")(is_op("relax.subtract")(wildcard(), is_op("relax.exp")(x())))),
        is_op("relax.nn.relu")(x()),
    ),
    "dequantize(x) → add(multiply(−alpha, relu(subtract(1, exp(x)))), relu(x))",
)

def _scalar_form(relax_op: str) -> Form:
    """x op c, c a quantized constant (TFLite's ADD / SUB / MUL with a constant operand)."""
    const = is_op("relax.dequantize")(is_const(), wildcard(), wildcard())
    short = relax_op.removeprefix("relax.")
    return Form("qdq-constant", "TFLite, ONNX QDQ", lambda x: is_op(relax_op)(x(), const),
                f"dequantize(x), dequantize(constant c) → {short}(x, c)")


_REQUANT_FORM = Form("qdq", "TFLite, ONNX QDQ", lambda x: x(), "dequantize(x)")

_HARD_SWISH_FORMS = (
    Form(
        "tflite",
        "TFLite",
        lambda x: is_op("relax.divide")(
            is_op("relax.multiply")(x(), is_op("relax.clip")(is_op("relax.add")(x(), wildcard()), wildcard(), wildcard())),
            wildcard(),
        ),
        "dequantize(x) → divide(multiply(x, clip(add(x, 3), 0, 6)), 6)",
    ),
    Form(
        "onnx",
        "ONNX QDQ",
        lambda x: is_op("relax.multiply")(
            x(),
            is_op("relax.divide")(is_op("relax.clip")(is_op("relax.add")(x(), wildcard()), wildcard(), wildcard()), wildcard()),
        ),
        "dequantize(x) → multiply(x, divide(clip(add(x, 3), 0, 6), 6))",
    ),
)


# ---------------------------------------------------------------------------------------------
# The registry. Order is the pattern table's order (earlier entries win a contested binding).

FUNCTIONS: dict[str, LutFunction] = {
    f.name: f
    for f in (
        LutFunction(
            name="sigmoid",
            summary="int8 sigmoid (LOGISTIC) through a 256-entry lookup table",
            ops={"tflite": "LOGISTIC", "onnx": "Sigmoid"},
            forms=(_unary("relax.sigmoid"),),
            tables={"tflite": tflite_lut_populate(nx._sigmoid_f32), "onnx": onnx_float(_sigmoid)},
        ),
        LutFunction(
            name="tanh",
            summary="int8 tanh through a 256-entry lookup table",
            ops={"tflite": "TANH", "onnx": "Tanh"},
            forms=(_unary("relax.tanh"),),
            tables={"tflite": tflite_lut_populate(nx._tanh_f32), "onnx": onnx_float(_f32(np.tanh))},
        ),
        LutFunction(
            name="exp",
            summary="int8 exp through a 256-entry lookup table",
            ops={"tflite": "EXP", "onnx": "Exp"},
            forms=(_unary("relax.exp"),),
            tables={"tflite": tflite_lut_populate(_f32(np.exp)), "onnx": onnx_float(_f32(np.exp))},
        ),
        LutFunction(
            name="gelu",
            summary="int8 GELU (erf, or its tanh approximation) through a lookup table",
            ops={"tflite": "GELU", "onnx": "Gelu"},
            forms=(_unary("relax.nn.gelu"), _unary("relax.nn.gelu_tanh")),
            tables={"tflite": lambda op: tflite_lut_populate(lambda x: _gelu_tflite(x, dict(op.params)))(op)},
            params=lambda body, bindings, tail: {"approximate": op_name(body) == "relax.nn.gelu_tanh"},
        ),
        LutFunction(
            name="hard_swish",
            summary="int8 hard swish x·relu6(x+3)/6 (TFLite's integer kernel) through a lookup table",
            ops={"tflite": "HARD_SWISH", "onnx": "HardSwish"},
            forms=_HARD_SWISH_FORMS,
            tables={"tflite": _tflite_hard_swish, "onnx": onnx_float(_hard_swish_onnx)},
            params=_hard_swish_constants,
            checks=(hard_swish_exponent,),
        ),
        LutFunction(
            name="hard_sigmoid",
            summary="int8 hard sigmoid max(0, min(1, alpha·x + beta)) (ONNX HardSigmoid) through a lookup table",
            ops={"tflite": "HARD_SIGMOID", "onnx": "HardSigmoid"},
            forms=(Form("onnx", "ONNX QDQ", lambda x: is_op("relax.clip")(
                is_op("relax.add")(is_op("relax.multiply")(wildcard(), x()), wildcard()), wildcard(), wildcard()),
                "dequantize(x) → clip(add(multiply(alpha, x), beta), 0, 1)"),),
            tables={"onnx": onnx_float(_hard_sigmoid_onnx)},
            params=_hard_sigmoid_constants,
        ),
        LutFunction(
            name="leaky_relu",
            summary="int8 leaky ReLU through a lookup table",
            ops={"tflite": "LEAKY_RELU", "onnx": "LeakyRelu"},
            forms=(_unary("relax.nn.leakyrelu"),),
            tables={"tflite": _tflite_leaky_relu, "onnx": onnx_float(_leaky_relu_onnx)},
            params=_leaky_relu_alpha,
        ),
        LutFunction(
            name="elu",
            summary="int8 ELU through a lookup table",
            ops={"tflite": "ELU", "onnx": "Elu"},
            forms=(_ELU_FORM,),
            tables={"tflite": tflite_float_wrapped(_elu_tflite), "onnx": onnx_float(_elu_onnx)},
            params=_elu_alpha,
        ),
        LutFunction(
            name="log",
            summary="int8 natural log through a lookup table",
            ops={"tflite": "LOG", "onnx": "Log"},
            forms=(_unary("relax.log"),),
            tables={"tflite": tflite_lut_populate(_f32(np.log)), "onnx": onnx_float(_f32(np.log))},
        ),
        LutFunction(
            name="sqrt",
            summary="int8 square root through a lookup table",
            ops={"tflite": "SQRT", "onnx": "Sqrt"},
            forms=(_unary("relax.sqrt"),),
            tables={"tflite": _tflite_sqrt, "onnx": onnx_float(_f32(np.sqrt))},
        ),
        LutFunction(
            name="sin",
            summary="int8 sine through a lookup table",
            ops={"tflite": "SIN", "onnx": "Sin"},
            forms=(_unary("relax.sin"),),
            tables={"tflite": tflite_float_wrapped(_f32(np.sin)), "onnx": onnx_float(_f32(np.sin))},
        ),
        LutFunction(
            name="square",
            summary="int8 square through a lookup table",
            ops={"tflite": "SQUARE", "onnx": "Pow"},
            forms=(Form("qdq", "TFLite", lambda x: is_op("relax.power")(x(), wildcard()), "dequantize(x) → power(x, 2)"),),
            tables={"tflite": tflite_float_wrapped(lambda x, p: x * x), "onnx": onnx_float(lambda x, p: x * x)},
            params=_square_exponent,
        ),
        LutFunction(
            name="add_scalar",
            summary="int8 ADD of a scalar constant through a lookup table",
            ops={"tflite": "ADD", "onnx": "Add"},
            forms=(_scalar_form("relax.add"),),
            tables={"tflite": _tflite_add_scalar, "onnx": lambda op: onnx_float(lambda x, p: x + _scalar_float(op))(op)},
            params=_scalar_operand,
        ),
        LutFunction(
            name="sub_scalar",
            summary="int8 SUB of a scalar constant through a lookup table",
            ops={"tflite": "SUB", "onnx": "Sub"},
            forms=(_scalar_form("relax.subtract"),),
            tables={"tflite": lambda op: _tflite_add_scalar(op, -1),
                    "onnx": lambda op: onnx_float(lambda x, p: x - _scalar_float(op))(op)},
            params=_scalar_operand,
        ),
        LutFunction(
            name="mul_scalar",
            summary="int8 MUL by a scalar constant through a lookup table",
            ops={"tflite": "MUL", "onnx": "Mul"},
            forms=(_scalar_form("relax.multiply"),),
            tables={"tflite": _tflite_mul_scalar, "onnx": lambda op: onnx_float(lambda x, p: x * _scalar_float(op))(op)},
            params=_scalar_operand,
        ),
        LutFunction(
            name="neg",
            summary="int8 negation through a lookup table",
            ops={"tflite": "NEG", "onnx": "Neg"},
            forms=(_unary("relax.negative"),),
            tables={"tflite": tflite_float_wrapped(lambda x, p: -x), "onnx": onnx_float(lambda x, p: -x)},
        ),
        LutFunction(
            name="abs",
            summary="int8 absolute value through a lookup table",
            ops={"tflite": "ABS", "onnx": "Abs"},
            forms=(_unary("relax.abs"),),
            tables={"tflite": _tflite_abs, "onnx": onnx_float(_f32(np.abs))},
        ),
        LutFunction(
            name="relu",
            summary="standalone int8 RELU / RELU6 / RELU_N1_TO_1 / RELU_0_TO_1 (a requantize and a clamp) through a lookup table",
            ops={"tflite": "RELU", "onnx": "Relu/Clip"},
            forms=(_REQUANT_FORM,),
            tables={"tflite": _tflite_relu, "onnx": onnx_float(_identity)},
            params=_activation_of,
            applies=lambda op: dict(op.params).get("activation", "") != "",
        ),
        LutFunction(
            name="requantize",
            summary="int8 -> int8 requantize (QUANTIZE with new scale and zero point) through a lookup table",
            ops={"tflite": "QUANTIZE", "onnx": "QuantizeLinear"},
            forms=(_REQUANT_FORM,),
            tables={"tflite": _tflite_requantize, "onnx": onnx_float(_identity)},
            params=_activation_of,
            applies=lambda op: dict(op.params).get("activation", "") == "",
        ),
    )
}


def numerics_for(model_format: str | None) -> str:
    """The numerics a model's source format implies (unknown formats: TFLite's)."""
    return FORMAT_NUMERICS.get(model_format or "", DEFAULT_NUMERICS)


def table(op: QLut) -> np.ndarray:
    """The 256 int8 entries the NPU's LUT holds for ``op`` (activation clamp applied)."""
    fn = FUNCTIONS[op.function]
    values = fn.tables[op.numerics](op)
    return np.clip(values, op.act_min, op.act_max).astype(np.int8)


def int8_to_int8(op: QLut, hw) -> str | None:
    """The input and output are int8 (the LUT unit indexes its table with v + 128)."""
    for role, t in (("input", op.input), ("output", op.output)):
        if t.dtype != "int8":
            return f"{role} dtype {t.dtype}: the LUT unit maps int8 to int8"
    return None


def has_table(op: QLut, hw) -> str | None:
    """The function has a table for the model's numerics (TFLite or ONNX)."""
    fn = FUNCTIONS.get(op.function)
    if fn is None:
        return f"no LUT function '{op.function}'"
    if op.numerics not in fn.tables:
        return f"no table for {op.numerics} numerics (known: {', '.join(fn.tables)})"
    return None


def table_computable(op: QLut, hw) -> str | None:
    """The table can be computed at the op's scales (a model's scales are untrusted: a rescale
    the kernel's arithmetic cannot hold is refused here, after the entry's own checks)."""
    try:
        table(op)
    except (ValueError, OverflowError, ZeroDivisionError) as err:
        return f"the {op.numerics} table cannot be computed at these scales: {err}"
    return None


def lut_lookup(x, op: QLut) -> np.ndarray:
    """What the NPU computes for ``op`` on int8 ``x`` (for tests and reports)."""
    return nx.lut_lookup(x, table(op))
