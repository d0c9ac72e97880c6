"""Shrinking a failing case and saving / replaying its reproducer.

``shrink(spec, still_fails)`` tries, greedily and in order, smaller variants of the spec — drop
an op, halve or decrement a dimension of the input, an op's channel / feature count, kernel,
stride or padding, put a field of the hardware configuration (``--random-hw``) back to its
default — and keeps each one for which ``still_fails(spec)`` holds, until none does
or the budget runs out. Shapes downstream follow (npu_byoc.tools.fuzz.generators): halving the
input's height shrinks every op after it.

A reproducer is a directory::

    spec.json     the (shrunk) spec: ``npu-byoc fuzz --replay DIR`` rebuilds the model from it
    model.json    the Relax module (tvm.ir.save_json; ``npu-byoc run model.json`` loads it)
    model.py      the same module as TVMScript, to read
    inputs.npz    the inputs the mismatch was found with (input_0, input_1, ...)
    README.txt    what failed and the command to replay it
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from . import builder
from . import generators as gen


def _smaller(v: int, floor: int = 1) -> list[int]:
    return sorted({x for x in (v // 2, v - 1) if floor <= x < v}, reverse=False)


def candidates(spec: dict) -> Iterator[dict]:
    """Smaller variants of ``spec``, the most aggressive first."""
    ops = spec["ops"]
    for j in range(len(ops) - 1, -1, -1):  # drop an op
        if len(ops) > 1:
            s = copy.deepcopy(spec)
            del s["ops"][j]
            yield s
    for name in spec.get("hw", {}):  # a configuration field back to its default
        s = copy.deepcopy(spec)
        del s["hw"][name]
        yield s
    shape = spec["input"]["shape"]
    for d in range(len(shape)):
        for v in _smaller(shape[d]):
            s = copy.deepcopy(spec)
            s["input"]["shape"][d] = v
            yield s
    for j, op in enumerate(ops):
        for key in ("out_channels", "out_features"):
            if key in op and op["kind"] != "depthwise":
                for v in _smaller(op[key]):
                    s = copy.deepcopy(spec)
                    s["ops"][j][key] = v
                    yield s
        for key, floor in (("kernel", 1), ("pool", 1), ("strides", 1), ("padding", 0)):
            for i, v in enumerate(op.get(key, [])):
                for w in _smaller(v, floor) if floor else ([v - 1] if v > 0 else []):
                    s = copy.deepcopy(spec)
                    s["ops"][j][key][i] = w
                    yield s


def _valid(spec: dict) -> bool:
    try:
        builder.tensors_of(spec)
        builder.build(spec)
    except gen.InvalidSpec:
        return False
    return True


def shrink(spec: dict, still_fails: Callable[[dict], bool], max_tries: int = 80, max_seconds: float = 120.0) -> dict:
    """The smallest variant of ``spec`` found greedily for which ``still_fails`` holds."""
    best = spec
    tries, t0 = 0, time.monotonic()
    progress = True
    while progress:
        progress = False
        for cand in candidates(best):
            if tries >= max_tries or time.monotonic() - t0 > max_seconds:
                return best
            if not _valid(cand):
                continue
            tries += 1
            if still_fails(cand):
                best, progress = cand, True
                break
    return best


def save(directory: Path, spec: dict, inputs: list[np.ndarray], summary: str) -> Path:
    """Write a reproducer directory (see the module docstring); returns it."""
    import tvm

    directory.mkdir(parents=True, exist_ok=True)
    mod = builder.build(spec).mod
    (directory / "spec.json").write_text(json.dumps(spec, indent=1) + "\n")
    (directory / "model.json").write_text(tvm.ir.save_json(mod))
    (directory / "model.py").write_text(mod.script(show_meta=False))
    np.savez(directory / "inputs.npz", **{f"input_{k}": x for k, x in enumerate(inputs)})
    (directory / "README.txt").write_text(
        f"{summary}\n\nreplay: npu-byoc fuzz --replay {directory}\n"
    )
    return directory


def load(directory: Path) -> tuple[dict, list[np.ndarray] | None]:
    """The spec and inputs of a reproducer directory."""
    spec = json.loads((directory / "spec.json").read_text())
    path = directory / "inputs.npz"
    if not path.is_file():
        return spec, None
    with np.load(path, allow_pickle=False) as z:
        inputs = [z[f"input_{k}"] for k in range(len(z.files))]
    return spec, inputs
