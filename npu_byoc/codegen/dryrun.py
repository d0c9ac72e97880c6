"""The compiler's dry run of one op, the last check of every match: the op lowered alone by
the compiler's own registry, its kicks within the configuration's unit limits, its shifts in
range, one tile of it in the SRAM. The partitioner applies it to each match, and lowering to
each composite it reads back; an op's own checks (npu_byoc.ops.checks) do not reach up to the
scheduler it asks."""

from __future__ import annotations

from ..arch.config import HwConfig
from ..arch.limits import ShapeError, shift_reason
from .tiling import check_geometry, untileable_reason
from ..errors import LoweringError
from ..ops.kick_limits import lower_alone
from ..ops.entry import NpuPattern
from ..ops.records import DEFAULT_NUMERICS, QOp, Reject
from ..ops.registry import LOWERINGS, unit_reason


def lowering_reason(op, hw: HwConfig) -> str | None:
    """Why ``op``, lowered alone, cannot run: lowering refuses it, a shift is out of range, a
    lowered kick breaks a unit limit of ``hw`` (:func:`unit_reason`), or the scheduler cannot
    cut it into tiles that fit the SRAM (None: it runs)."""

    try:
        npu_op = lower_alone(op, hw, LOWERINGS[type(op)])
        check_geometry(npu_op, "op")
    except (ShapeError, Reject) as err:
        return str(err)
    except LoweringError as err:
        return err.reason
    return shift_reason(npu_op) or unit_reason(npu_op, hw) or untileable_reason(npu_op, hw)


def lowers_and_fits(op: QOp, hw: HwConfig) -> str | None:
    """Lowered alone, the op's shifts lie in the ranges the NPU runs, every kick it lowers to keeps the unit limits of the configuration (max_channels, max_kernel, max_stride, max_pool_window, max_pool_stride, max_mean_elements, max_fc_features: what the NPU checks at each kick), and a tile of one output row and one output channel fits the SRAM (the compiler's own lowering and tiling search)."""
    return lowering_reason(op, hw)


FINAL = (lowers_and_fits,)


def checks_of(entry: NpuPattern) -> tuple:
    """Every check a match of ``entry`` passes: its own, then the dry run (a view has no NPU
    op to lower)."""
    return entry.checks if entry.view else (*entry.checks, *FINAL)


def final_reason(entry: NpuPattern, op: QOp, hw: HwConfig, numerics: str = DEFAULT_NUMERICS) -> str | None:
    """Why the dry run refuses ``op``, a match of ``entry`` its own checks accepted (a view has
    no NPU op to lower), prefixed as the entry prefixes its reasons."""
    if entry.view:
        return None
    for check in FINAL:
        reason = check(op, hw)
        if reason:
            return f"{entry.subject(numerics)}: {reason}" if entry.subject else reason
    return None


def evaluate(entry: NpuPattern, root, bindings, hw: HwConfig, numerics: str = DEFAULT_NUMERICS,
             *args) -> tuple[QOp | None, str | None]:
    """:meth:`NpuPattern.evaluate` (same arguments), then the dry run on what it accepts."""
    op, reason = entry.evaluate(root, bindings, hw, numerics, *args)
    if op is None or reason:
        return op, reason
    return op, final_reason(entry, op, hw, numerics)


__all__ = ["lowering_reason", "lowers_and_fits", "FINAL", "checks_of", "final_reason", "evaluate"]
