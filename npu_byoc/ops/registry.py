"""The NPU operations, one module each, in the pattern table's order (earlier entries win a
contested binding: keep it). Each module exposes ``ENTRIES`` (its table entries, NpuPattern),
``LOWERINGS`` (record type -> its lowering) and ``NPU_OPS`` (typed NPU op -> its NpuOpSpec:
golden semantics, tiling kind, unit limits), and where it has them ``VIEWS``, ``IN_PLACE``
and ``CANONICAL_FORMS``; the pattern table (npu_byoc.ops.table), the lowering dispatch
(:data:`LOWERINGS`), the golden model's and the tiler's dispatch (:data:`NPU_OPS`),
docs/patterns.md and the coverage report derive from here. Adding an operation: its module,
and its line below (docs/architecture.md §5)."""

from __future__ import annotations

from collections.abc import Callable

from . import (
    add, channel_shuffle, concat, conv2d, depthwise, fully_connected, gather, grouped_conv, interleave, layernorm, lut,
    matmul, mean, mul, pad, patchify, pool, reshape, resize, softmax, squared_difference, strided_conv, transpose,
    transpose_conv,
)  # fmt: skip
from .npu_op_spec import NpuOpSpec
from .npu_ops import NpuOp, Phased, TensorRef
from .records import QOp

REGISTRY = (
    conv2d, transpose_conv, depthwise, grouped_conv, strided_conv, fully_connected, matmul, pool, mean, add, mul,
    squared_difference, lut,
    softmax, layernorm, gather, resize, reshape, concat, transpose, channel_shuffle, patchify, pad,
)  # fmt: skip
# Typed ops the compiler adds with no pattern of their own (an NCHW input's interleave).
LAYOUT_OPS = (interleave,)


def _merged(attr: str) -> dict:
    """The modules' ``attr`` dicts in one (a key twice is a bug)."""
    out: dict = {}
    for module in (*REGISTRY, *LAYOUT_OPS):
        for key, value in getattr(module, attr, {}).items():
            assert key not in out, f"{module.__name__}: {key.__name__} is in {attr} twice"
            out[key] = value
    return out


# Record type -> its lowering to a typed NPU op.
LOWERINGS: dict[type, Callable[[str, QOp, list[TensorRef], TensorRef], NpuOp]] = _merged("LOWERINGS")
# Typed NPU op -> its golden semantics, tiling kind, unit limits (NpuOpSpec).
NPU_OPS: dict[type, NpuOpSpec] = _merged("NPU_OPS")
# Records that lower to no NPU op: their output is a view of their input (reshape) ...
VIEWS = _merged("VIEWS")
# ... or their inputs write their slices of it in place, the others copied in (concat: InPlace).
IN_PLACE = _merged("IN_PLACE")
# Records whose output may be a strided view of their input (a transpose: its input's strides
# permuted) when every reader of it is a STRIDED_READERS record: no NPU op, no copy ...
STRIDED_VIEWS = _merged("STRIDED_VIEWS")
# ... records whose lowering reads each operand through its strides, whatever they are (record
# type -> why), so they can read such a view directly.
STRIDED_READERS = _merged("STRIDED_READERS")
# Each op's rewrites of the module into the forms its conventions match, in their order.
CANONICAL_FORMS = tuple(sorted((f for module in REGISTRY for f in getattr(module, "CANONICAL_FORMS", ())),
                               key=lambda f: f.order))  # fmt: skip


def unit_reason(npu_op: NpuOp, hw) -> str | None:
    """Why a lowered op (each phase of a phased one) breaks a unit limit of ``hw`` that the
    stream machine checks at the kick (INVALID_PARAMETER in npu_functional.cc and
    npu_kick_check.v): the one source every check binds to, whatever the op lowers to. Each
    op's limits are its spec's (``NpuOpSpec.unit_reason``, in its module)."""
    if isinstance(npu_op, Phased):
        return next(filter(None, (unit_reason(p, hw) for p in npu_op.phases)), None)
    return NPU_OPS[type(npu_op)].unit_reason(npu_op, hw)


__all__ = ["REGISTRY", "LOWERINGS", "NPU_OPS", "VIEWS", "IN_PLACE", "STRIDED_VIEWS", "STRIDED_READERS", "CANONICAL_FORMS", "unit_reason"]
