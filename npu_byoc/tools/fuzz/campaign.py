"""The ops-mode campaign: N random cases, counted; a shrunk reproducer for every failure."""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import generators as gen
from . import reducer
from .runner import Outcome, Runner, reason_class

PAIRS = ("golden-functional", "golden-verilator", "golden-cpu", "fused-per-op", "refused-cpu", "reason", "crash")


def case_seed(seed: int, index: int) -> int:
    """The seed of case ``index`` of a campaign (independent streams per case)."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


@dataclass
class Tally:
    cases: int = 0
    placement: Counter = field(default_factory=Counter)  # npu / partial / cpu
    per_op: dict = field(default_factory=dict)  # label -> Counter(npu=, cpu=)
    mismatches: Counter = field(default_factory=Counter)  # pair -> cases
    refused: Counter = field(default_factory=Counter)  # reason class -> ops
    expected: Counter = field(default_factory=Counter)
    cpu_unavailable: Counter = field(default_factory=Counter)
    max_cpu_lsb: int = 0
    failures: list[tuple[int, str]] = field(default_factory=list)  # (case seed, reproducer or detail)
    seconds: float = 0.0
    invalid: list[str] = field(default_factory=list)  # specs that did not build (generator bugs)
    random_hw: int = 0  # cases run under a configuration of their own (--random-hw)
    hw_fields: Counter = field(default_factory=Counter)  # field -> cases where it was off the default
    rtl_skipped: int = 0  # cases whose configuration the RTL was not built for

    def add(self, out: Outcome) -> None:
        self.cases += 1
        self.placement[out.placement] += 1
        for label, on in zip(out.ops, out.offloaded):
            self.per_op.setdefault(label, Counter())["npu" if on else "cpu"] += 1
        for pair in out.signature():
            self.mismatches[pair] += 1
        for r in out.reasons:
            self.refused[reason_class(r) if r else "(no reason)"] += 1
        self.expected.update(out.expected)
        if out.cpu_unavailable:
            self.cpu_unavailable[reason_class(out.cpu_unavailable)] += 1
        self.max_cpu_lsb = max(self.max_cpu_lsb, out.max_cpu_lsb)
        if "hw" in out.spec:
            self.random_hw += 1
            self.hw_fields.update(out.hw.keys())
        self.rtl_skipped += out.rtl_skipped

    def to_text(self, seed: int, backends) -> str:
        rate = self.cases / self.seconds if self.seconds else 0.0
        lines = [f"npu-byoc fuzz (ops): seed {seed}, backends {','.join(backends)}"]
        lines.append("  per op (kind/convention): ops offloaded to the NPU / stayed on the CPU")
        for label in sorted(self.per_op):
            c = self.per_op[label]
            lines.append(f"    {label:<24} {c['npu']:>6} / {c['cpu']:<6}")
        lines.append("  refused (stayed on the CPU with a reason; not counted as NPU passes):")
        for reason, n in self.refused.most_common():
            lines.append(f"    {n:>6}  {reason}")
        if self.expected:
            lines.append("  expected deviations from TVM's CPU build (> 1 LSB, documented in docs/fuzz.md):")
            for cls, n in self.expected.most_common():
                lines.append(f"    {n:>6}  {cls}")
        if self.cpu_unavailable:
            lines.append("  TVM's CPU build of the case failed (no CPU comparison for it):")
            for cls, n in self.cpu_unavailable.most_common():
                lines.append(f"    {n:>6}  {cls}")
        for text in self.invalid[:5]:
            lines.append(f"  GENERATOR ERROR {text}")
        for s, where in self.failures[:20]:
            lines.append(f"  FAILED case seed {s}: {where}")
        if self.random_hw:
            lines.append(f"  random hardware configurations: {self.random_hw} cases; fields drawn off the default "
                         f"(cases): " + ", ".join(f"{k} {n}" for k, n in sorted(self.hw_fields.items())))  # fmt: skip
        if self.rtl_skipped:
            lines.append(f"  RTL not run in {self.rtl_skipped} cases: it is built for the default configuration only")
        p = self.placement
        cpu = f"; max golden vs TVM CPU {self.max_cpu_lsb} LSB" if "cpu" in backends else ""
        lines.append(f"  cases: {self.cases} (every op on the NPU {p['npu']}, partly {p['partial']}, "
                     f"all on the CPU {p['cpu']}){cpu}")  # fmt: skip
        lines.append("  mismatches (cases) per pair: " + ", ".join(f"{k} {self.mismatches[k]}" for k in PAIRS))
        lines.append(f"  time: {self.seconds:.1f} s, {rate:.2f} cases/s; result: "
                     f"{'FAIL' if self.failures else 'PASS'}")  # fmt: skip
        return "\n".join(lines) + "\n"


def run_campaign(count: int, seed: int, backends, out_dir: Path | None, *, reduce: bool = True,
                 progress=sys.stderr, runner: Runner | None = None, kinds: tuple[str, ...] = gen.OP_KINDS,
                 reduce_tries: int = 80, random_hw: bool = False) -> Tally:  # fmt: skip
    """``count`` random cases from ``seed``; failures are shrunk and saved under ``out_dir``.
    Every 25 cases the counts so far go to ``out_dir/summary.txt`` (a long run stopped early
    still has its figures). ``random_hw``: each case also draws a hardware configuration
    (generators.random_hw, from the case seed; the ops drawn do not change) and runs under it."""
    runner = runner or Runner(backends)
    tally = Tally()
    t0 = time.perf_counter()
    for i in range(count):
        s = case_seed(seed, i)
        spec = gen.random_spec(s, kinds)
        if random_hw:
            spec["hw"] = gen.random_hw(s)
        try:
            out = runner.run(spec)
        except gen.InvalidSpec as err:  # a generator bug, not an NPU one: counted, shown
            tally.invalid.append(f"case seed {s}: {err}")
            continue
        tally.add(out)
        if not out.ok:
            tally.failures.append((s, _report_failure(runner, spec, out, out_dir, reduce_tries if reduce else 0)))
        tally.seconds = time.perf_counter() - t0
        if progress is not None and (i + 1) % 25 == 0:
            print(f"fuzz: {i + 1}/{count} cases, {len(tally.failures)} failing, "
                  f"{tally.cases / tally.seconds:.2f} cases/s", file=progress, flush=True)  # fmt: skip
        if out_dir is not None and (i + 1) % 25 == 0:
            (Path(out_dir) / "summary.txt").write_text(tally.to_text(seed, runner.backends))
    tally.seconds = time.perf_counter() - t0
    return tally


def _report_failure(runner: Runner, spec: dict, out: Outcome, out_dir: Path | None, reduce_tries: int) -> str:
    detail = "; ".join(f"{m.pair}: {m.detail}" for m in out.mismatches)
    if out_dir is None:
        return detail
    pairs = out.signature()
    small, inputs = spec, out.inputs
    if reduce_tries:
        small = reducer.shrink(spec, lambda s: bool(runner.run(s).signature() & pairs), max_tries=reduce_tries)
        if small is not spec:
            again = runner.run(small)
            inputs, detail = again.inputs, "; ".join(f"{m.pair}: {m.detail}" for m in again.mismatches)
    hw = f"\nhardware configuration (fields off the default): {small['hw']}" if "hw" in small else ""
    where = reducer.save(Path(out_dir) / f"case-{spec['seed']}", small, inputs,
                         f"ops: {', '.join(o['kind'] for o in small['ops'])}{hw}\n{detail}")  # fmt: skip
    return f"{detail} -> {where}"


def replay(directory: Path, backends) -> Outcome:
    """Re-run a reproducer, under the configuration its spec.json names (``"hw"``), if any."""
    from ...arch.config import HwConfigError
    from ...errors import NpuByocError
    from .runner import hw_of

    spec, inputs = reducer.load(directory)
    try:
        hw_of(spec)
    except (HwConfigError, gen.InvalidSpec) as err:
        raise NpuByocError(f"{directory / 'spec.json'}: 'hw': {err}") from None
    return Runner(backends).run(spec, inputs)
