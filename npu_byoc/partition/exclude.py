"""The user's deny-list: operators kept on the CPU by name (``partition_for_npu(exclude=...)``,
``npu-byoc ... --exclude``).

A name is one of

- an NPU operation of the pattern table (``npu.softmax``): that pattern is not matched at all;
- an operator type of the model (``SOFTMAX``, ``CONV_2D``; ONNX ``Conv``): every operator of
  that type stays on the CPU;
- a layer, the name of one operator of the model (the coverage report's ``name`` column).

Operator types and layers are checked per match: a match that covers a binding of an excluded
operator is refused with the reason "excluded by the user (NAME)", which the coverage report
shows. A name that is none of these is an error naming it (a typo must not silently keep
everything on the NPU).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from ..errors import NpuByocError
from ..util import escape

USER_REASON = "excluded by the user"


class UnknownExcludeError(NpuByocError, ValueError):
    """An ``exclude`` name that is no NPU operation, operator type or layer of the model."""


def split_names(exclude: Iterable[str], npu_operations: Iterable[str]) -> tuple[set[str], list[str]]:
    """(NPU operations, the other names in the user's order, duplicates dropped)."""
    known = set(npu_operations)
    ops, rest = set(), []
    for name in exclude:
        name = str(name)
        if name in known:
            ops.add(name)
        elif name not in rest:
            rest.append(name)
    return ops, rest


def excluded_layers(names: list[str], info, npu_operations: Iterable[str]) -> dict[str, str]:
    """Source operator name -> the user's name that excludes it (its type or its own name),
    for the ``names`` that are not NPU operations; ``info``: the model's ModelInfo."""
    if not names:
        return {}
    ops = [o for o in (info.ops if info is not None else ()) if not o.qdq]
    out: dict[str, str] = {}
    for name in names:
        hits = [o for o in ops if o.op == name or o.name == name]
        if not hits:
            raise UnknownExcludeError(_unknown_message(name, ops, info, npu_operations))
        for o in hits:
            out.setdefault(o.name, name)
    return out


def _unknown_message(name: str, ops, info, npu_operations: Iterable[str]) -> str:
    where = Path(info.path).name if info is not None else "the module"
    types = sorted({o.op for o in ops})
    shown = ", ".join(types[:12]) + (", ..." if len(types) > 12 else "")
    return (f"exclude '{escape.text(name, 80)}': no operator type or layer of {escape.text(where, 80)} has that "
            f"name (its operator types: {escape.text(shown, 300) or 'none recorded'}; or an NPU operation such as "
            f"{', '.join(sorted(npu_operations)[:3])}, ...)")  # fmt: skip


def match_exclusion(source_names: Iterable[str | None], excluded: Mapping[str, str]) -> str | None:
    """The reason a match is refused when it covers an excluded operator, else None."""
    for n in source_names:
        if n is not None and n in excluded:
            return f"{USER_REASON} ({excluded[n]})"
    return None


__all__ = ["USER_REASON", "UnknownExcludeError", "split_names", "excluded_layers", "match_exclusion"]
