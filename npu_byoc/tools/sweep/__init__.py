"""Design-space exploration: models × hardware configurations, measured by the analytic model.

    from npu_byoc.tools.sweep import run_sweep
    result = run_sweep(["tiny_cnn_int8.tflite"], {"array_rows": [8, 16], "sram_bytes": [128 << 10, 256 << 10]})
    print(result.to_text())

Per (model, configuration) point: offload coverage, the NPU cycles of every partition's
schedule (npu_byoc.arch.cycles, equal to the RTL), MAC utilization, SRAM high-water mark,
external traffic, an area proxy (npu_byoc.tools.sweep.pareto) and whether the point is on the model's
Pareto front of cycles against area. ``verify=N`` co-simulates N points per model on the RTL.
Points are cached on disk (npu_byoc.tools.sweep.store) and run serially, in a local process pool or
as Ray tasks (npu_byoc.tools.sweep.runner); the result is the same whichever way they ran.
docs/sweep.md is the user's guide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ...errors import NpuByocError
from ...arch.config import DEFAULT_CONFIG, HwConfig
from ...util.progress import Progress
from . import store
from .pareto import AREA_WEIGHTS, area_um2, pareto_front, spread
from .point import ModelRef, model_sha256
from .runner import PoolExecutor, RayExecutor

SCHEMA_VERSION = 1

# Points (models × configurations) a sweep runs without --max-points: about 40 minutes at a
# point's 2.5 s on a large model; a larger grid is most likely a typo (docs/sweep.md).
MAX_POINTS = 1000


@dataclass
class SweepResult:
    """Every point of a sweep, in a fixed order: models as given, grid points in grid order."""

    grid: dict[str, list[int]]
    base: dict
    area_weights: dict[str, float]
    points: list[dict] = field(default_factory=list)
    code_version: str = ""
    exclude: list[str] = field(default_factory=list)  # the operators kept on the CPU (--exclude)

    @property
    def verify_failures(self) -> list[dict]:
        return [p for p in self.points if p.get("verify") is not None and not p["verify"]["ok"]]

    def to_dict(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, "code_version": self.code_version, "base_hw": self.base,
                "grid": self.grid, "area_weights": self.area_weights, "exclude": self.exclude,
                "points": self.points}  # fmt: skip

    def to_json(self) -> str:
        from .report import to_json

        return to_json(self)

    def to_text(self) -> str:
        from .report import to_text

        return to_text(self)

    def to_csv(self) -> str:
        from .report import to_csv

        return to_csv(self)

    def plot(self, path: str | Path) -> None:
        from .report import plot

        plot(self, path)


def model_ref(path: str | Path, exclude: Sequence[str] = ()) -> ModelRef:
    path = Path(path)
    if not path.is_file():
        raise NpuByocError(f"{path}: no such model file")
    return ModelRef(path.name, str(path), model_sha256(path), tuple(exclude))


def check_exclude(model: ModelRef) -> None:
    """One line naming an ``exclude`` name the model has no operator or layer of (before any
    point runs: a typo must not make every point's partition the same as without it)."""
    from ...partition.pipeline import check_exclude as check
    from .point import _imported

    if model.exclude:
        check(_imported(model.path, model.sha256), model.exclude)


def run_sweep(
    models: Sequence[str | Path],
    grid: dict[str, list[int]],
    base: HwConfig = DEFAULT_CONFIG,
    *,
    jobs: int = 1,
    ray: bool = False,
    ray_address: str | None = None,
    verify: int = 0,
    use_cache: bool = True,
    area_weights: dict[str, float] = AREA_WEIGHTS,
    progress: bool = False,
    max_points: int | None = MAX_POINTS,
    exclude: Sequence[str] = (),
) -> SweepResult:
    """Measure every model on every configuration of ``grid`` over ``base``; see the module
    docstring. ``use_cache=False`` recomputes every point (and refreshes the cache). A sweep
    of more than ``max_points`` points (None: no limit) is refused before any is made.
    ``exclude``: operators kept on the CPU in every point (partition_for_npu's ``exclude``)."""
    from .grid import point_count
    from .grid import points as grid_points

    count = len(models) * point_count(grid)
    if max_points is not None and count > max_points:
        raise NpuByocError(f"the sweep has {count:,} points ({len(models)} model(s) x {point_count(grid):,} "
                           f"configurations), more than the limit of {max_points:,}: raise it with "
                           f"--max-points {count} to run them all")  # fmt: skip
    refs = [model_ref(m, exclude) for m in models]
    names = [r.name for r in refs]
    if len(set(names)) != len(names):  # two files of one name: tell them apart by path
        refs = [ModelRef(r.path, r.path, r.sha256, r.exclude) for r in refs]
    configs = grid_points(grid, base)
    result = SweepResult(grid={k: list(v) for k, v in grid.items()}, base=asdict(base),
                         area_weights=dict(area_weights), code_version=store.code_version(),
                         exclude=list(exclude))  # fmt: skip
    cells = [(m, hw) for m in refs for hw in configs]
    keys = [store.point_key(m.sha256, hw, m.exclude) for m, hw in cells]
    measured: list[dict | None] = [store.load(k) if use_cache else None for k in keys]
    todo = [i for i, r in enumerate(measured) if r is None]
    for m in dict.fromkeys(cells[i][0] for i in todo):  # cached points had their names checked when measured
        check_exclude(m)
    bar = Progress(len(todo), enabled=progress and bool(todo), prefix="sweep", unit="points")
    if todo:
        bar.note(f"sweep: {len(cells) - len(todo)} of {len(cells)} points cached, {len(todo)} to measure")

    def done(k: int, value: dict) -> None:
        i = todo[k]
        measured[i] = value
        store.store(keys[i], value)  # at once: an interrupted sweep resumes from here
        bar.update(len(todo) - measured.count(None), cells[i][0].name)

    tasks = [("point", cells[i][0], asdict(cells[i][1])) for i in todo]
    executor = RayExecutor(ray_address, jobs) if ray else PoolExecutor(jobs)
    try:
        try:
            executor.run(tasks, done)
        finally:
            bar.close()
        for (m, hw), value in zip(cells, measured):
            point = {"model": m.name, "model_sha256": m.sha256, "config": {f: getattr(hw, f) for f in grid}}
            result.points.append(point | value | {"area_um2": area_um2(hw, area_weights), "pareto": False,
                                                  "verify": None})  # fmt: skip
        _mark_front(result)
        if verify > 0:
            _verify(result, cells, verify, executor, progress)
    finally:
        executor.close()
    return result


def _by_model(result: SweepResult) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, p in enumerate(result.points):
        out.setdefault(p["model"], []).append(i)
    return out


def _mark_front(result: SweepResult) -> None:
    """The Pareto front of (cycles, area) per model, over the feasible points."""
    for indices in _by_model(result).values():
        feasible = [i for i in indices if result.points[i]["error"] is None]
        front = pareto_front([(result.points[i]["cycles"], result.points[i]["area_um2"]) for i in feasible])
        for i, on in zip(feasible, front):
            result.points[i]["pareto"] = on


def verify_choice(result: SweepResult, n: int) -> list[int]:
    """Per model, ``n`` points spread along its Pareto front by area (all of it if shorter)."""
    chosen = []
    for indices in _by_model(result).values():
        front = sorted((i for i in indices if result.points[i]["pareto"]),
                       key=lambda i: (result.points[i]["area_um2"], result.points[i]["cycles"]))  # fmt: skip
        chosen += spread(front, n)
    return chosen


def _verify(result: SweepResult, cells, n: int, executor, progress: bool) -> None:
    """Co-simulate the chosen points (``cells[i]``: the (model, HwConfig) of point i)."""
    chosen = verify_choice(result, n)
    tasks = [("verify", cells[i][0], asdict(cells[i][1])) for i in chosen]
    bar = Progress(len(tasks), enabled=progress, prefix="verify", unit="points")
    bar.note(f"sweep: co-simulating {len(tasks)} point(s) on the RTL (Verilator builds each configuration "
             "once, then caches it) ...")  # fmt: skip
    finished = []

    def done(k: int, value: dict) -> None:
        result.points[chosen[k]]["verify"] = value
        finished.append(k)
        bar.update(len(finished), result.points[chosen[k]]["model"])

    try:
        executor.run(tasks, done)
    finally:
        bar.close()


__all__ = ["run_sweep", "SweepResult", "verify_choice", "model_ref", "check_exclude", "MAX_POINTS"]
