"""What the compiler and the golden model know about one typed NPU op, declared by the op's
module (``NPU_OPS``: NpuOp type -> :class:`NpuOpSpec`) and gathered by npu_byoc.ops.registry.

The shared code above (golden.run_op, codegen.tiling, codegen.tile_steps, the dry run) finds
an op's semantics, tiling kind and unit limits here, never through a chain over op types.
TVM-free, like the typed ops themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# The tiling kinds of npu_byoc.codegen.tiling (what a tile of the op holds in SRAM, and how its
# kicks are emitted): an op names one, the codegen owns their buffers and steps.
TILING_KINDS = ("spatial", "fully_connected", "mean", "elementwise", "softmax", "layernorm", "phased", "matmul",
                "replicated", "interleave", "deinterleave")


def no_unit_limits(npu_op, hw) -> str | None:
    """An op whose kicks no configuration limit refuses."""
    return None


@dataclass(frozen=True)
class NpuOpSpec:
    """One typed NPU op's per-op knowledge.

    ``golden(op, *inputs)``: the op on whole (H, W, C) int8 tensors, its definition (the
    executable specification the stream machine, the C model and the RTL must equal);
    ``tiling``: its kind in :data:`TILING_KINDS`; ``describe(op)``: the op in a "no tile
    fits" reason (None: the kind's own wording); ``unit_reason(op, hw)``: why one of its
    kicks breaks a unit limit of the configuration (INVALID_PARAMETER at the kick), or None.
    A phased op's phases are checked by their own specs. ``report_class``: (key, name) of its
    class in the co-simulation report, for an op the report's own table does not list."""

    golden: Callable[..., np.ndarray]
    tiling: str
    describe: Callable | None = None
    unit_reason: Callable = no_unit_limits
    report_class: tuple[str, str] | None = None

    def __post_init__(self):
        assert self.tiling in TILING_KINDS, f"unknown tiling kind {self.tiling!r}; known: {TILING_KINDS}"


def shape_text(op) -> str:
    """'HxWxC -> HxWxC' of an op, for reasons."""
    return f"{'x'.join(map(str, op.ifm.shape))} -> {'x'.join(map(str, op.ofm.shape))}"


def what(npu_op) -> str:
    """The op as unit-limit reasons name it: "conv2d 'layer'"."""
    return f"{npu_op.kind} '{npu_op.name}'"


def mac_channels_reason(npu_op, hw) -> str | None:
    """The MAC unit's channel limit (conv, depthwise, fully connected)."""
    c_in, c_out = npu_op.ifm.shape[2], npu_op.ofm.shape[2]
    if max(c_in, c_out) > hw.max_channels:
        return (f"{what(npu_op)} runs {c_in}->{c_out} channels: the NPU's MAC unit takes up to "
                f"max_channels={hw.max_channels}")  # fmt: skip
    return None


__all__ = ["NpuOpSpec", "TILING_KINDS", "no_unit_limits", "shape_text", "what", "mac_channels_reason"]
