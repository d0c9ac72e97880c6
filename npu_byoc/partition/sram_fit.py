"""The refusal of a model that does not fit a configuration's SRAM.

The partitioner leaves a layer whose smallest tile does not fit ``sram_bytes`` on the CPU with
the reason (codegen.tiling.untileable_reason). That is right for coverage and the sweep, but a
command that is asked to run the model *on this NPU* (compile, cosim, export) should not
quietly run part of it elsewhere: it refuses in one line, with what the layer needs and what
there is.
"""

from __future__ import annotations

import tvm

from ..arch.config import HwConfig
from ..codegen.tiling import is_untileable_reason
from ..errors import NpuByocError
from ..util import escape
from .pipeline import partition_log


def sram_refusal(mod: tvm.IRModule, hw: HwConfig) -> str | None:
    """Why the partitioned ``mod`` cannot run on ``hw``'s SRAM (None when every layer fits):
    the first layer that does not fit, its need and ``sram_bytes``, and how many more fail."""
    unfit = [d for d in partition_log(mod) or [] if not d.accepted and is_untileable_reason(d.reason)]
    if not unfit:
        return None
    first = unfit[0]
    more = f" (and {len(unfit) - 1} more layer(s))" if len(unfit) > 1 else ""
    return (f"the model does not fit sram_bytes={hw.sram_bytes}: layer '{escape.text(first.layer or first.pattern)}' "
            f"({escape.text(first.pattern)}): {escape.text(first.reason)}{more}; "
            "give more --hw sram_bytes or --exclude the layer")


def refuse_unfit(mod: tvm.IRModule, hw: HwConfig) -> tvm.IRModule:
    """``mod`` as it is, or NpuByocError when a layer does not fit ``hw``'s SRAM."""
    reason = sram_refusal(mod, hw)
    if reason is not None:
        raise NpuByocError(reason)
    return mod


__all__ = ["sram_refusal", "refuse_unfit"]
