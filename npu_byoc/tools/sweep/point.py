"""One point of a sweep: a model on one hardware configuration.

``evaluate`` partitions the model for the configuration (the partition checks depend on it),
lowers and schedules every NPU partition, and measures the schedules with the analytic cycle
model (npu_byoc.arch.cycles, equal to the RTL cycle for cycle): no TVM build of the model.
``verify`` runs the same partition streams on the RTL under Verilator with seeded random
inputs and compares cycles with the analytic model and outputs with the golden model.

Both run in worker processes (a local pool or Ray tasks): their arguments and results are
plain data (a :class:`ModelRef` and a dict of HwConfig fields in, a JSON-able dict out).
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from ...arch.config import HwConfig


@dataclass(frozen=True)
class ModelRef:
    """A model file: its name (the report's), where it is, its :func:`model_sha256`, and the
    operators the user keeps on the CPU (``--exclude``: partition_for_npu's ``exclude``)."""

    name: str
    path: str
    sha256: str
    exclude: tuple[str, ...] = ()


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    _hash_file(h, path)
    return h.hexdigest()


def _hash_file(h, path) -> None:
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)


def model_sha256(path: str | Path) -> str:
    """The SHA-256 a model's results are cached by: of the file's bytes and, for an ONNX model
    with external data, of each external file's name and bytes too (results follow the weights
    wherever they are stored). A model without external data hashes as :func:`file_sha256`."""
    import os

    from ...frontends.load import external_data_files
    from ...frontends.onnx_external import model_dir

    files = external_data_files(path)
    if not files:
        return file_sha256(path)
    h = hashlib.sha256()
    _hash_file(h, path)
    for f in files:
        rel = os.path.relpath(f, model_dir(path)).encode("utf-8", "surrogateescape")
        h.update(b"\0external\0%d\0%s\0%d\0" % (len(rel), rel, os.path.getsize(f)))
        _hash_file(h, f)
    return h.hexdigest()


def model_bytes(path: str | Path) -> bytes:
    """The model as one file's bytes, for a worker that gets bytes rather than a path: an ONNX
    model's external data goes inside (the worker has no folder to read it from)."""
    if Path(path).suffix.lower() == ".onnx":
        from ...frontends.onnx_external import embedded_bytes

        return embedded_bytes(path)
    return Path(path).read_bytes()


def materialize(model: ModelRef, data: bytes) -> ModelRef:
    """The model's bytes as a file on this machine (a Ray worker on another node gets the bytes,
    not the driver's path): written once under the cache directory, by content."""
    from ...util.cache import atomic_write, cache_subdir, is_intact

    dest = cache_subdir("sweep", "models", model.sha256) / Path(model.name).name
    if not is_intact(dest):
        atomic_write(dest, data)
    return ModelRef(model.name, str(dest), model.sha256, model.exclude)


def hw_of(values: dict) -> HwConfig:
    """The HwConfig of a dict of its fields (a task's argument)."""
    return HwConfig(**{f.name: int(values[f.name]) for f in fields(HwConfig) if f.name in values})


@functools.lru_cache(maxsize=8)
def _imported(path: str, sha256: str):
    from ...frontends.load import load_model

    return load_model(path)


def _schedules(mod, hw: HwConfig, exclude: tuple[str, ...] = ()):
    """The partitioned module's coverage summary, plans and schedules for ``hw``."""
    from ...codegen.lower import lower_module
    from ...codegen.schedule import schedule_partition
    from ...partition.coverage import coverage_report
    from ...codegen.tiling import is_untileable_reason
    from ...errors import NpuByocError
    from ...partition.pipeline import partition_for_npu, partition_log

    part = partition_for_npu(mod, hw=hw, exclude=exclude)
    # An op no tile of this SRAM fits now stays on the CPU; for the sweep the configuration
    # cannot run the model (its fewer NPU cycles would otherwise look like a better point).
    unfit = next((d for d in partition_log(part) if not d.accepted and is_untileable_reason(d.reason)), None)
    if unfit is not None:
        raise NpuByocError(f"layer '{unfit.layer}' ({unfit.pattern}): {unfit.reason}")
    summary = coverage_report(part).summary
    plans = lower_module(part, hw)
    return summary, {name: (plan, schedule_partition(plan, hw)) for name, plan in sorted(plans.items())}


def evaluate(model: ModelRef, hw_fields: dict) -> dict:
    """Coverage, analytic cycles, utilization, SRAM high-water mark and external traffic of
    ``model`` on the configuration ``hw_fields``. A partition the configuration cannot run
    (a layer that does not fit its SRAM) makes the point infeasible: ``error`` says why."""
    from ...arch.encoder import Dma
    from ...codegen.tiling import tile_sram_bytes
    from ...errors import NpuByocError
    from ...arch.isa import Opcode
    from ...arch.cycles import step_cycles, stream_cycles
    from ...partition.exclude import UnknownExcludeError

    hw = hw_of(hw_fields)
    mod = _imported(model.path, model.sha256)  # a model that does not load fails the sweep, not a point
    out: dict = {"error": None}
    try:
        summary, scheduled = _schedules(mod, hw, model.exclude)
    except UnknownExcludeError:  # a typo in --exclude fails the sweep, not a point
        raise
    except NpuByocError as err:
        return {**out, "error": str(err)}
    out |= {k: summary[k] for k in ("ops_total", "ops_offloaded", "macs_total", "macs_offloaded", "partitions")}
    cycles = dma_cycles = npu_macs = high_water = 0
    traffic = {Opcode.DMA_IN: 0, Opcode.DMA_OUT: 0}
    for plan, schedule in scheduled.values():
        cycles += stream_cycles(schedule.steps, hw)
        npu_macs += plan.macs
        for op, t in zip(plan.ops, schedule.tilings):
            high_water = max(high_water, tile_sram_bytes(op, t.rows, t.channels))
        for step in schedule.steps:
            if isinstance(step, Dma):
                traffic[step.direction] += step.nbytes
                dma_cycles += 1 + step_cycles(step, hw)  # the engine's busy cycles
    peak = hw.array_rows * hw.array_cols
    return out | {
        "npu_macs": npu_macs,
        "cycles": cycles,
        "dma_cycles": dma_cycles,
        "utilization": npu_macs / (cycles * peak) if cycles else 0.0,
        "sram_high_water": high_water,
        "dma_in_bytes": traffic[Opcode.DMA_IN],
        "dma_out_bytes": traffic[Opcode.DMA_OUT],
        "external_bytes": traffic[Opcode.DMA_IN] + traffic[Opcode.DMA_OUT],
    }


def _seed(model: ModelRef, partition: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{model.sha256}/{partition}".encode()).digest()[:8], "little")


def verify(model: ModelRef, hw_fields: dict) -> dict:
    """Every NPU partition's whole stream on the RTL (Verilator, built or fetched from the cache
    for this configuration under its build lock) with seeded random int8 inputs: the RTL's
    cycles against the analytic model's, its outputs against the golden model's."""
    from ...runtime import golden
    from ...arch.cycles import stream_budget, stream_cycles
    from ...runtime.verilator import VerilatorNpu

    hw = hw_of(hw_fields)
    _, scheduled = _schedules(_imported(model.path, model.sha256), hw, model.exclude)
    npu = VerilatorNpu(hw)
    rows = []
    for name, (plan, schedule) in scheduled.items():
        rng = np.random.default_rng(_seed(model, name))
        inputs = [rng.integers(np.iinfo(io.dtype).min, np.iinfo(io.dtype).max + 1, size=io.shape, dtype=io.dtype)
                  for io in plan.inputs]  # fmt: skip
        expected = golden.run_plan(plan, inputs)
        regions, statuses = golden.run_stream(npu, plan, schedule.words(), schedule.constants, inputs,
                                              max_cycles=stream_budget(schedule.steps, hw))  # as a model library
        status = statuses[-1]
        got = golden.read_outputs(plan, regions)
        diff = max((int(np.max(np.abs(g.astype(np.int64) - e.astype(np.int64)), initial=0))
                    for g, e in zip(got, expected)), default=0)  # fmt: skip
        rows.append({"partition": name, "status": status.status.name, "rtl_cycles": sum(st.cycles for st in statuses),
                     "predicted_cycles": plan.batch * stream_cycles(schedule.steps, hw), "max_diff_golden": diff})  # fmt: skip
    ok = all(r["status"] == "OK" and r["rtl_cycles"] == r["predicted_cycles"] and r["max_diff_golden"] == 0
             for r in rows)  # fmt: skip
    return {
        "ok": ok,
        "rtl_cycles": sum(r["rtl_cycles"] for r in rows),
        "predicted_cycles": sum(r["predicted_cycles"] for r in rows),
        "max_diff_golden": max((r["max_diff_golden"] for r in rows), default=0),
        "partitions": rows,
    }


TASKS = {"point": evaluate, "verify": verify}

__all__ = ["ModelRef", "file_sha256", "model_sha256", "model_bytes", "materialize", "hw_of", "evaluate", "verify", "TASKS"]
