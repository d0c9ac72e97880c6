"""``npu-byoc sweep``: the command line of npu_byoc.tools.sweep (docs/sweep.md).

Nothing here imports TVM: a sweep whose every point is cached reads JSON files and prints.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ...errors import NpuByocError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("models", nargs="+", metavar="MODEL", help=".tflite / .onnx files, or a bundled model's name")
    p.add_argument("--grid", action="append", default=[], metavar="FIELD=v1,v2,...",
                   help="hardware field values to sweep (repeatable; values as --hw takes them: 128K, 1M)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                   help="local worker processes (default: the CPU count; 1: in this process)")
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="run the points as Ray tasks on the cluster at ADDRESS (alone: a local Ray instance)")
    p.add_argument("--verify", type=int, default=0, metavar="N",
                   help="co-simulate N points per model (spread along its Pareto front) on the RTL; exit 1 on "
                        "any difference")  # fmt: skip
    p.add_argument("--format", default="text", choices=["text", "json", "csv"])
    p.add_argument("-o", "--output", help="write the result here instead of stdout")
    p.add_argument("--plot", metavar="PNG", help="draw cycles vs area and the Pareto front per model")
    p.add_argument("--no-cache", action="store_true", help="recompute every point (the cache is refreshed)")
    p.add_argument("--area-weights", metavar="mac=400,sram_byte=2,dma_byte=1000",
                   help="µm² per MAC, per SRAM byte, per byte/cycle of the memory port (docs/sweep.md)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--exclude", action="append", default=[], metavar="OP_OR_LAYER",
                   help="keep an operator type (SOFTMAX), a layer (by name) or an NPU operation (npu.softmax) on the "
                   "CPU in every point; repeatable")  # fmt: skip
    p.add_argument("--max-points", type=int, default=None, metavar="N",
                   help="run a sweep of more than 1000 points (models x configurations) up to N")


def _model_path(name: str) -> Path:
    from ...frontends.bundled import BUNDLED, bundled_model

    path = Path(name)
    if not path.exists() and name in BUNDLED:
        return bundled_model(name)
    return path


def run(args, hw) -> int:
    """The sweep of ``args`` over the base configuration ``hw``; 1 when --verify found a
    difference (after writing the result)."""
    from . import MAX_POINTS, run_sweep
    from .grid import parse_grid
    from .pareto import parse_area_weights

    grid = parse_grid(args.grid)
    if args.jobs < 1:
        raise NpuByocError(f"--jobs {args.jobs}: expected 1 or more")
    if args.verify < 0:
        raise NpuByocError(f"--verify {args.verify}: expected 0 or more")
    if args.max_points is not None and args.max_points < 1:
        raise NpuByocError(f"--max-points {args.max_points}: expected 1 or more")
    result = run_sweep(
        [_model_path(m) for m in args.models], grid, hw,
        jobs=args.jobs, ray=args.ray is not None, ray_address=args.ray or None, verify=args.verify,
        use_cache=not args.no_cache, area_weights=parse_area_weights(args.area_weights),
        progress=not args.no_progress, max_points=args.max_points or MAX_POINTS, exclude=args.exclude,
    )  # fmt: skip
    text = {"text": result.to_text, "json": result.to_json, "csv": result.to_csv}[args.format]()
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    if args.plot:
        result.plot(args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    failures = result.verify_failures
    if failures:
        where = ", ".join(f"{p['model']} {p['config']}" for p in failures[:4])
        print(f"npu-byoc: error: the RTL differs from the analytic model or the golden model at {len(failures)} "
              f"point(s): {where}", file=sys.stderr)  # fmt: skip
        return 1
    return 0


__all__ = ["add_arguments", "run"]
