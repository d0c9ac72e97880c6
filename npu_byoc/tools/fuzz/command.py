"""``npu-byoc fuzz``: the command line of the differential fuzzer (docs/fuzz.md)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from ...errors import NpuByocError

BACKENDS = ("golden", "functional", "verilator", "cpu")


def _backends(text: str) -> tuple[str, ...]:
    names = tuple(b.strip() for b in text.split(",") if b.strip())
    unknown = [b for b in names if b not in BACKENDS]
    if unknown:
        raise NpuByocError(f"--backends: unknown backend(s) {', '.join(unknown)} (known: {', '.join(BACKENDS)})")
    return tuple(dict.fromkeys(("golden", *names)))  # golden is the spec: always run


def add_parser(sub) -> None:
    f = sub.add_parser("fuzz", help="differential fuzzing: random int8 models on every backend, mutated model files")
    f.add_argument("--count", type=int, default=100, help="number of cases (default 100)")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--mode", default="ops", choices=["ops", "files"])
    f.add_argument("--backends", default=",".join(BACKENDS), help=f"ops mode: comma-separated ({','.join(BACKENDS)})")
    f.add_argument("--out", help="directory for reproducers (default: a new temporary directory)")
    f.add_argument("--no-reduce", action="store_true", help="save failing cases without shrinking them")
    f.add_argument("--fixtures", help="files mode: directory of .tflite/.onnx models (default tests/fixtures/models)")
    f.add_argument("--timeout", type=float, default=120.0, help="files mode: seconds per case")
    f.add_argument("--random-hw", action="store_true",
                   help="ops mode: every case draws a hardware configuration of its own (docs/fuzz.md)")
    f.add_argument("--replay", metavar="DIR", help="re-run a saved reproducer")
    f.set_defaults(func=cmd_fuzz)


def cmd_fuzz(args) -> int:
    backends = _backends(args.backends)
    if args.replay:
        return _replay(Path(args.replay), backends)
    if args.count < 0:
        raise NpuByocError("--count must be >= 0")
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="npu_byoc_fuzz_"))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise NpuByocError(f"--out {out}: cannot create the directory ({err.strerror})") from None
    if args.mode == "files":
        from .files import default_fixtures, run_files

        fixtures = Path(args.fixtures) if args.fixtures else default_fixtures()
        if not fixtures.is_dir():
            raise NpuByocError(f"{fixtures}: no fixture directory (pass --fixtures DIR)")
        tally = run_files(args.count, args.seed, out, fixtures, args.timeout)
        sys.stdout.write(tally.to_text(args.seed))
        return 1 if tally.failures else 0
    from .campaign import run_campaign

    tally = run_campaign(args.count, args.seed, backends, out, reduce=not args.no_reduce,
                         random_hw=getattr(args, "random_hw", False))
    if tally.failures:
        print(f"reproducers: {out}", file=sys.stderr)
    sys.stdout.write(tally.to_text(args.seed, backends))
    return 1 if tally.failures else 0


def _replay(directory: Path, backends) -> int:
    from .campaign import replay

    if not (directory / "spec.json").is_file():
        raise NpuByocError(f"{directory}: not a fuzz reproducer (no spec.json)")
    out = replay(directory, backends)
    hw = f"; hardware {out.hw}" if out.hw else ""
    print(f"replay {directory}: ops {', '.join(out.ops)}; placement {out.placement}{hw}")
    for m in out.mismatches:
        print(f"  MISMATCH {m.pair}: {m.detail}")
    print("result: " + ("PASS" if out.ok else "FAIL"))
    return 0 if out.ok else 1
