"""A model never fails to compile because of one op: partition, dry-run the compiler on every
NPU partition (lowering, shift ranges, scheduling, encoding), and send each op it fails on back to the CPU
with the compiler's reason in the partition log; repeat until every partition compiles.

The partition checks (npu_byoc.ops.checks, npu_byoc.ops.<op>) are meant to refuse everything the compiler refuses;
this is the net under them, so a gap between the two costs NPU coverage, not the compile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import tvm

from ..errors import LoweringError
from ..arch.config import HwConfig

REASON_PREFIX = "the NPU compiler cannot lower it: "


def lowering_failures(mod: tvm.IRModule, hw: HwConfig) -> dict[str, str]:
    """Layer name (a composite's ``npu_byoc.layer``) -> why lowering or scheduling it fails.
    A failure no single layer is at fault for names every layer of its partition."""
    from ..codegen.lower import lower_partition
    from ..codegen.schedule import op_failures
    from ..arch.limits import shift_reason
    from ..ops.composites import composite_functions, npu_functions
    from ..ops.table import LAYER_ATTR

    failures: dict[str, str] = {}
    for name, func in npu_functions(mod).items():
        layers = [str(c.attrs[LAYER_ATTR]) for _, c in composite_functions(func) if LAYER_ATTR in c.attrs]
        try:
            plan = lower_partition(name, func, hw, interleave=False)  # an interleave never fails: it is optional
        except LoweringError as err:
            for layer in [err.layer] if err.layer in layers else layers:
                failures[layer] = err.reason
            continue
        for k, reason in op_failures(plan, hw).items():
            failures[plan.layers[k]] = reason
        for op, layer in zip(plan.ops, plan.layers):
            reason = shift_reason(op)
            if reason:
                failures.setdefault(layer, reason)
    return failures


def partition_until_lowerable(mod: tvm.IRModule, partition: Callable[[Mapping], tuple], hw: HwConfig) -> tvm.IRModule:
    """``partition(denied)`` -> (module, recorder) partitions with the matches in ``denied``
    (match key -> reason) kept on the CPU. Each round denies the matches the dry run fails
    on; every round denies at least one more match, so this ends."""
    denied: dict = {}
    while True:
        out, recorder = partition(denied)
        failures = lowering_failures(out, hw)
        new = {
            recorder.layer_keys[layer]: REASON_PREFIX + reason
            for layer, reason in failures.items()
            if recorder.layer_keys.get(layer) is not None and recorder.layer_keys[layer] not in denied
        }
        if not failures:
            return out
        if not new:  # cannot attribute it to a match: keep the partition, the build reports it
            return out
        denied |= new


__all__ = ["lowering_failures", "partition_until_lowerable", "REASON_PREFIX"]
