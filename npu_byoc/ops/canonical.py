"""Canonical forms: rewrites of the Relax module, before the pattern table runs, into the forms
an op's conventions match (an ONNX Split into slices, a chain of gathers into one, a max pool's
pad filled with the dtype's minimum). Each op owns its own (``CANONICAL_FORMS`` in its module);
npu_byoc.ops.registry gathers them and the partitioner applies them in ``order``. A rewrite that
folds bindings into others records it (:func:`record_absorbed`) for the coverage report."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import tvm


@dataclass(frozen=True)
class CanonicalForm:
    """One rewrite of the module, ``rewrite(mod) -> mod``; ``order``: where it runs among all
    ops' forms (lowest first: a Split becomes slices before gathers compose)."""

    order: int
    rewrite: Callable[[tvm.IRModule], tvm.IRModule]


ABSORBED_ATTR = "npu_byoc.absorbed"


def record_absorbed(mod: tvm.IRModule, names: Mapping[str, str]) -> tvm.IRModule:
    """Record that the bindings ``names`` holds were canonicalised into others (key -> the
    binding that now does its work): the coverage report credits the source operator with
    that binding's match."""
    if not names:
        return mod
    return mod.with_attr(ABSORBED_ATTR, json.dumps({**absorbed(mod), **names}))


def absorbed(mod: tvm.IRModule) -> dict[str, str]:
    """The bindings the canonicalisation folded into others (see :func:`record_absorbed`)."""
    return json.loads(str(mod.attrs[ABSORBED_ATTR])) if mod.attrs is not None and ABSORBED_ATTR in mod.attrs else {}
