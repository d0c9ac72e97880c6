"""One NPU operation's table entry: its conventions (the Relax forms TVM's frontends write it
in), the extraction of a match into its quantized-op record, and its checks. Each op module
(npu_byoc.ops.<op>) defines its entries; npu_byoc.ops.table assembles them into the table."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from tvm import relax
from tvm.relax.dpl import DFPattern

from ..arch.config import DEFAULT_CONFIG, HwConfig
from .records import DEFAULT_NUMERICS, QOp, Reject
from .uint8 import int8_equivalent


@dataclass(frozen=True)
class Convention:
    """One way a frontend writes an NPU operation."""

    name: str
    source: str  # who produces it, for the docs
    pattern: DFPattern
    form: str = ""  # the Relax ops of this convention, for the docs


@dataclass(frozen=True)
class NpuPattern:
    """One NPU operation: its conventions, the extraction and the checks."""

    name: str  # composite name, "npu.<op>"
    summary: str
    anchor_ops: tuple[str, ...]  # Relax ops this entry offloads (for "no NPU pattern" reasons)
    conventions: tuple[Convention, ...]
    extract: Callable[[relax.Expr, Mapping], QOp]
    checks: tuple[Callable, ...]
    # Silent selector between entries that share conventions (conv2d vs depthwise).
    applies: Callable[[QOp], bool] = field(default=lambda op: True)
    # The source operator's name for a numerics ("HARD_SWISH"): reasons start with it.
    subject: Callable[[str], str] | None = None
    # A view (reshape): no NPU op of its own, lowering makes its output a view of its input
    # (registry.VIEWS); nothing to dry-run through lowering alone.
    view: bool = False
    # Only moves bytes (a view, a gather): the coverage report credits an op whose bindings also
    # hold another match (a FULLY_CONNECTED with keep_num_dims ends in a reshape) to that one.
    moves_data: bool = False

    def evaluate(
        self, root, bindings: Mapping, hw: HwConfig = DEFAULT_CONFIG, numerics: str = DEFAULT_NUMERICS,
        left_shift_overflow: str = "wrap",
    ) -> tuple[QOp | None, str | None]:
        """Extract and check a match: (op, None) if the NPU runs it, else (op or None, reason).
        ``left_shift_overflow``: what the model's runtime does when a requantize left shift
        overflows (requant.left_shift_overflow_for)."""
        op, reason = self._evaluate(root, bindings, hw, numerics, left_shift_overflow)
        if reason and reason != NOT_MINE and self.subject is not None:
            reason = f"{self.subject(numerics)}: {reason}"
        return op, reason

    def _evaluate(self, root, bindings, hw, numerics, left_shift_overflow="wrap"):
        try:
            op = int8_equivalent(self.extract(root, bindings))
        except Reject as err:
            return None, str(err)
        if hasattr(op, "numerics"):  # records whose meaning depends on the source runtime
            op = replace(op, numerics=numerics)
        if hasattr(op, "left_shift_overflow"):
            op = replace(op, left_shift_overflow=left_shift_overflow)
        if not self.applies(op):
            return op, NOT_MINE
        for check in self.checks:
            reason = check(op, hw)
            if reason:
                return op, reason
        return op, None


NOT_MINE = "__not_this_entry__"  # an entry's silent "not mine" (NpuPattern.applies)
