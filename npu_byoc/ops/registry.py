"""The NPU operations, one module each, in the pattern table's order (earlier entries win a
contested binding: keep it). Each module exposes ``ENTRIES`` (its table entries, NpuPattern)
and ``LOWERINGS`` (record type -> its lowering); the pattern table (npu_byoc.ops.table), the
lowering dispatch (:data:`LOWERINGS`), docs/patterns.md and the coverage report derive from
here. Adding an operation: its module, and its line below."""

from __future__ import annotations

from collections.abc import Callable

from . import (
    add, concat, conv2d, depthwise, fully_connected, gather, lut, mean, mul, pool, reshape, resize, softmax,
    transpose_conv,
)  # fmt: skip
from .npu_ops import NpuOp, TensorRef
from .records import QOp

REGISTRY = (
    conv2d, transpose_conv, depthwise, fully_connected, pool, mean, add, mul, lut, softmax, gather, resize, reshape,
    concat,
)  # fmt: skip


def _lowerings() -> dict[type, Callable[[str, QOp, list[TensorRef], TensorRef], NpuOp]]:
    out: dict = {}
    for module in REGISTRY:
        for record, lower in module.LOWERINGS.items():
            assert record not in out, f"{module.__name__}: {record.__name__} is lowered twice"
            out[record] = lower
    return out


LOWERINGS = _lowerings()

__all__ = ["REGISTRY", "LOWERINGS"]
