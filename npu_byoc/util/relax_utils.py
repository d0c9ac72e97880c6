"""Small helpers for reading Relax expressions: constant folding of parameter chains, shapes,
attributes. Kept free of NPU policy so patterns, lowering and reports can share them."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import tvm
from tvm import relax


Constant = tvm.ir.expr.Constant


def constant_value(c) -> np.ndarray:
    """The numpy value of a Relax constant."""
    v = c.value
    return v.numpy() if hasattr(v, "numpy") else np.asarray(v)


class NotConstant(Exception):
    """The expression depends on a run-time value."""


def op_name(expr) -> str | None:
    if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
        return expr.op.name
    return None


def resolve(expr, bindings: Mapping):
    """Follow Vars through ``bindings`` (Var -> bound value) to the defining expression."""
    seen = 0
    while isinstance(expr, relax.Var) and expr in bindings and seen < 1000:
        expr = bindings[expr]
        seen += 1
    return expr


def prim_value(x):
    """The Python number inside an IntImm/FloatImm/PrimValue/scalar Constant."""
    if isinstance(x, Constant):
        return constant_value(x).item()
    if hasattr(x, "value"):
        v = x.value
        return v.value if hasattr(v, "value") else v
    if isinstance(x, int | float):
        return x
    raise NotConstant(f"{x} is not a scalar constant")


def shape_of(expr) -> tuple[int, ...]:
    sinfo = expr.ty
    if not isinstance(sinfo, relax.TensorType) or sinfo.shape is None:
        raise NotConstant("tensor shape is unknown")
    dims = []
    for d in sinfo.shape.values:
        if not isinstance(d, tvm.ir.prim.expr.IntImm):
            raise NotConstant(f"dynamic dimension {d}")
        dims.append(int(d))
    return tuple(dims)


def dtype_of(expr) -> str:
    sinfo = expr.ty
    return str(sinfo.dtype) if isinstance(sinfo, relax.TensorType) else "unknown"


def _shape_expr_values(e) -> tuple[int, ...]:
    if isinstance(e, relax.ShapeExpr):
        return tuple(int(v) for v in e.values)
    raise NotConstant("shape argument is not constant")


# Evaluators for the ops that appear on parameter paths (weights, scales, zero points).
_CONST_EVAL = {
    "relax.multiply": lambda c, a: a[0] * a[1],
    "relax.divide": lambda c, a: a[0] / a[1],
    "relax.reshape": lambda c, a: a[0].reshape(_shape_expr_values(c.args[1])),
    "relax.permute_dims": lambda c, a: np.transpose(
        a[0], None if c.attrs.axes is None else [int(v) for v in c.attrs.axes]
    ),
    "relax.astype": lambda c, a: a[0].astype(str(c.attrs.dtype)),
    "relax.expand_dims": lambda c, a: np.expand_dims(a[0], tuple(int(v) for v in c.attrs.axis)),
    "relax.squeeze": lambda c, a: np.squeeze(
        a[0], None if c.attrs.axis is None else tuple(int(v) for v in c.attrs.axis)
    ),
}


def const_eval(expr, bindings: Mapping = {}) -> np.ndarray:
    """Evaluate a constant sub-expression (constants combined by reshape, permute_dims,
    multiply, ...) to a numpy array, or raise NotConstant."""
    expr = resolve(expr, bindings)
    if isinstance(expr, Constant):
        return constant_value(expr)
    name = op_name(expr)
    if name in _CONST_EVAL:
        tensor_args = [a for a in expr.args if not isinstance(a, relax.ShapeExpr)]
        vals = [const_eval(a, bindings) for a in tensor_args]
        return np.asarray(_CONST_EVAL[name](expr, vals))
    if isinstance(expr, relax.Var):
        raise NotConstant(f"'{expr.name}' is a run-time value")
    raise NotConstant(f"{name or type(expr).__name__} is not a constant expression")


def int_list(values) -> tuple[int, ...]:
    return tuple(int(v) for v in values)
