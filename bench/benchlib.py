"""What the benchmarks share: the fixture models and how to load them, and the quick mode's
banner (a quick run checks that a benchmark still works; its figures are not the ones to quote)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "models"
QUICK_MODEL = "tiny_cnn_int8.tflite"  # the smallest model with conv, depthwise, pool, concat, FC
QUICK_BANNER = "quick mode: a smoke run on a small model; quote the full mode's figures, not these"

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def fixture_models() -> list[str]:
    return [p.name for p in sorted(FIXTURES.glob("*")) if p.suffix in (".tflite", ".onnx")]


def load_fixture(name: str):
    """``npu_byoc.load_model`` of a fixture. A model with an open dimension beyond the batch
    (op_squeeze_int8: [-1, 1, -1, 4]) gets the input shapes its reference recorded (the .npz
    ``meta``), as the tests give them."""
    import npu_byoc
    from npu_byoc.errors import ModelLoadError

    path = FIXTURES / name
    try:
        return npu_byoc.load_model(path)
    except ModelLoadError as err:
        if "open dimension" not in str(err):
            raise
        return npu_byoc.load_model(path, input_shapes=recorded_shapes(name))


def recorded_shapes(name: str) -> dict[str, list[int]]:
    data = np.load(FIXTURES / (Path(name).stem + ".npz"))
    meta = json.loads(str(data["meta"]))
    return {t["name"]: t["shape"] for t in meta["inputs"]}


def sample(name: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The first recorded (inputs, reference outputs) of a fixture, one image each."""
    data = np.load(FIXTURES / (Path(name).stem + ".npz"))
    ins, outs = (sorted((k for k in data.files if k.startswith(p)), key=lambda k: int(k[len(p):]))
                 for p in ("input_", "output_"))  # input_2 before input_10
    return [data[k][0:1] for k in ins], [data[k][0:1] for k in outs]


# --------------------------------------------------------------------------- model-zoo tables
# keras_apps.py and onnx_apps.py print one row per model with these leading columns
COVERAGE_HEADER = f"{'model':<24} {'ops on NPU':>11} {'MACs on NPU':>12} {'parts':>5} {'trans':>5}"


def coverage_cells(name: str, report) -> tuple[str, str, dict[str, list[str]]]:
    """The leading cells of ``name``'s row from its coverage report, the operators left on the
    CPU by type ("OP xN, ...", or "-") and each type's distinct reasons."""
    import collections

    from npu_byoc.partition.coverage import CONSTANT_REASON

    s = report.summary
    cpu = [o for o in report.ops if not o.offloaded and o.reason != CONSTANT_REASON]  # no run-time work
    counts = collections.Counter(o.op for o in cpu)
    reasons: dict[str, list[str]] = {}
    for o in cpu:
        if (o.reason or "-") not in reasons.setdefault(o.op, []):
            reasons[o.op].append(o.reason or "-")
    macs = 100.0 * s["macs_offloaded"] / max(s["macs_total"], 1)
    lead = (f"{name:<24} {s['ops_offloaded']:>5}/{s['ops_total']:<5} {macs:>11.1f}% {s['partitions']:>5} "
            f"{s['transitions']:>5}")  # fmt: skip
    return lead, ", ".join(f"{op} x{n}" for op, n in counts.most_common()) or "-", reasons


def print_reasons(reasons: dict[str, list[str]], limit: int = 3) -> None:
    """Why each CPU operator type stayed there: indented notes under the model's row (the
    reasons come from the partitioner, the op names from the model file: escaped)."""
    from npu_byoc.util import escape

    for op, why in reasons.items():
        more = f" (+{len(why) - limit} more)" if len(why) > limit else ""
        print(f"    {escape.text(op)}: " + " | ".join(escape.text(w, 200) for w in why[:limit]) + more)


def one_line(err: BaseException) -> str:
    """An exception as one escaped line for a table cell (a model that does not import)."""
    from npu_byoc.util import escape

    return escape.text(f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}", 300)
