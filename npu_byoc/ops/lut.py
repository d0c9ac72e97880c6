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
per frontend (for reasons), and one table builder per numerics (:mod:`npu_byoc.ops.lut_tables`).
The table entries (:data:`ENTRIES`), the lowering and docs/patterns.md derive from the registry.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from tvm.relax.dpl import DFPattern, is_const, is_op, wildcard

from . import checks as C
from ._qdq import _Tail, _activation, _deq, _dequantize_leaves, _requant_tail
from ..arch import numerics as nx
from .entry import Convention, NpuPattern
from .npu_ops import Lut, NpuOp, TensorRef
from .npu_op_spec import NpuOpSpec
from .records import DEFAULT_NUMERICS, QLut, Reject
from .lut_tables import (
    Table, onnx_float, tflite_lut_populate, _tflite_requantize, _tflite_relu, _tflite_leaky_relu,
    _tflite_add_scalar, _tflite_mul_scalar, _scalar_float, _tflite_abs, _tflite_hard_swish, hard_swish_exponent,
    _f32, _sigmoid, _hard_swish_onnx, _hard_sigmoid_onnx, _elu_onnx, tflite_float_wrapped, _tflite_sqrt, _tflite_rsqrt,
    _elu_tflite, _leaky_relu_onnx, _gelu_tflite, _identity,
)  # fmt: skip
from ..util.relax_utils import NotConstant, const_eval, op_name, prim_value, resolve


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
            name="rsqrt",
            summary="int8 reciprocal square root (LiteRT's integer kernel: Newton-Raphson 1/sqrt) through a lookup "
                    "table",
            ops={"tflite": "RSQRT"},
            forms=(_unary("relax.rsqrt"),),
            tables={"tflite": _tflite_rsqrt},
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


def table(op: QLut) -> np.ndarray:
    """The 256 int8 entries the NPU's LUT holds for ``op`` (activation clamp applied)."""
    fn = FUNCTIONS[op.function]
    values = fn.tables[op.numerics](op)
    return np.clip(values, op.act_min, op.act_max).astype(np.int8)


def requantize_table(name: str, input, output, numerics: str) -> np.ndarray | None:
    """The table of a copy (a slice, a transpose, a channel shuffle) quantized unlike its input
    (onnxruntime's QOperator quantizer gives a ShuffleNet's Slices their own ranges): the model's
    runtime's int8 -> int8 requantize, which the copies' LUT passes apply on the way; None when
    input and output are quantized alike (the identity: a plain copy)."""
    if C.same_quantization(input, output):
        return None
    rescale = QLut("requantize", input, output, nx.INT8_MIN, nx.INT8_MAX, params=(("activation", ""),),
                   numerics=numerics)  # fmt: skip
    reason = table_computable(rescale, None)
    if reason:
        raise Reject(f"{name}: a requantizing copy: {reason}")
    return table(rescale)


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


# ---------------------------------------------------------------------------------------------
# Lowering and the table entries: one per function, in the registry's order


def _lower_lut(name: str, op: QLut, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    return Lut(name=name, function=op.function, ifm=ifms[0], ofm=ofm, table=table(op))


def _lut_entry(fn: LutFunction) -> NpuPattern:
    """One function of the LUT registry (npu_byoc.ops.lut) as a table entry."""

    def extract(root, bindings) -> QLut:
        tail = _Tail(root, bindings)
        deqs = _dequantize_leaves(tail.body, bindings)
        try:
            params = fn.params(tail.body, bindings, tail)
        except (NotThisFunction, AttributeError, IndexError) as err:
            raise Reject(f"not a {fn.name}: {err}") from None
        x = deqs[0].args[0]
        inp = _activation(deqs[0], bindings, "input", x)
        for d in deqs[1:]:
            if not d.args[0].same_as(x) or _activation(d, bindings, "input", x) != inp:
                raise Reject(f"the {fn.name} form reads two different tensors")
        out = tail.output(bindings)
        lo, hi = tail.clamp(out, bindings)
        return QLut(
            function=fn.name, input=inp, output=out, act_min=lo, act_max=hi, convention="qdq",
            params=tuple(sorted(params.items())), operands=(x,),
        )

    conventions = tuple(
        Convention(f"{form.name}{tail}", form.source, pat, form.text + tail_form)
        for form in fn.forms
        for tail, pat, tail_form in _requant_tail(form.build(_deq))
    )
    return NpuPattern(
        name=f"npu.{fn.name}",
        summary=fn.summary,
        anchor_ops=tuple(sorted({a for form in fn.forms for a in form.anchor_ops})),
        conventions=conventions,
        extract=extract,
        checks=(*C.COMMON, int8_to_int8, has_table, *fn.checks, table_computable),
        applies=fn.applies,
        subject=fn.op_name,
    )


ENTRIES = tuple(_lut_entry(fn) for fn in FUNCTIONS.values())
LOWERINGS = {QLut: _lower_lut}


# ---------------------------------------------------------------------------------------------
# Golden semantics (the typed op's spec: npu_byoc.ops.npu_op_spec)


def golden_lut(op: Lut, x: np.ndarray) -> np.ndarray:
    return nx.lut_lookup(x, op.table)


NPU_OPS = {Lut: NpuOpSpec(golden_lut, "elementwise")}
