"""Benchmark: what a one-layer waveform costs (``npu-byoc cosim --trace FILE --trace-layers NAME``).

    .venv/bin/python bench/waveform.py                     # bundled MobileNetV2, three layers
    .venv/bin/python bench/waveform.py --layers 0,30 --format vcd
    .venv/bin/python bench/waveform.py --quick             # smoke run: tiny_cnn, its first layer

For the model's first NPU partition (its stream as production runs it, the first image), runs
on the RTL are timed (best of ``--repeat``, the runs of a row taken in turn). A layer is the
cycles [first, end) of its window (what ``--trace-layers`` dumps), and every figure of it is a
difference of two runs of the same stream on the same harness, stopped at cycle ``end`` and at
cycle ``first`` (``max_cycles``):

  layer           the untraced build over the layer's cycles: the co-simulation of the layer
  layer traced    the traced build over the same cycles, dumping them (the file opened before)
  in window       layer traced / layer: what dumping costs per simulated cycle
  trace adds      the whole stream with the window dumped on the traced build minus the whole
                  stream on the untraced build: all the waveform costs a co-simulation, the
                  traced build's run outside the window and opening and closing the file included
  all in          (layer + trace adds) / layer: the layer with its waveform, everything
                  counted, in units of the layer without (issue 26 asks for <= 3)

Both Verilator builds are made (or loaded from the cache) before timing. The times are this
process's CPU time (user + system, the file's writes included; ``--clock wall`` for wall time):
on a shared machine other processes' load would otherwise decide the ratios. The file sizes are
exact.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

from benchlib import QUICK_BANNER  # noqa: E402  (puts the repo on sys.path)

import numpy as np  # noqa: E402

import npu_byoc  # noqa: E402
from npu_byoc.arch.encoder import encode_with_starts  # noqa: E402
from npu_byoc.arch.isa import Region  # noqa: E402
from npu_byoc.codegen.lower import lower_module  # noqa: E402
from npu_byoc.codegen.schedule import schedule_partition  # noqa: E402
from npu_byoc.frontends.bundled import bundled_model  # noqa: E402
from npu_byoc.runtime import golden  # noqa: E402
from npu_byoc.runtime.verilator import VerilatorNpu  # noqa: E402
from npu_byoc.runtime.waveform import cycle_window, word_window  # noqa: E402


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def best(fns, prepare, repeat: int, clock=time.process_time) -> tuple[list[float], object]:
    """The fastest of ``repeat`` calls ``fn(prepare())`` of each of ``fns``, taken in turn (the
    machine's load drifts alike for all), and the first's result. Only the RTL run is timed:
    the input regions are made before, the garbage collector stays out of it."""
    times, out = [[] for _ in fns], None
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            arg = prepare()
            gc.collect()
            gc.disable()
            t0 = clock()
            result = fn(arg)
            times[i].append(clock() - t0)
            gc.enable()
            out = result if i == 0 else out
    return [min(t) for t in times], out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mobilenet_v2", help="a bundled model (tiny_cnn, mobilenet_v2)")
    ap.add_argument("--layers", default="3,30,60", help="op indexes in the partition, comma-separated")
    ap.add_argument("--format", default="vcd", choices=["vcd", "fst"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--clock", default="cpu", choices=sorted(CLOCKS), help="what is timed (default: CPU time)")
    ap.add_argument("--quick", action="store_true", help="tiny_cnn, its first layer, one repeat")
    args = ap.parse_args(argv)
    if args.quick:
        print(QUICK_BANNER)
        args.model, args.layers, args.repeat = "tiny_cnn", "0", 1

    path = bundled_model(args.model)
    x = np.load(path.with_suffix(".input.npy"))
    plan = next(iter(lower_module(npu_byoc.partition_for_npu(npu_byoc.load_model(path))).values()))
    schedule = schedule_partition(plan)
    words, starts = encode_with_starts(schedule.steps)

    def regions():
        r = golden.allocate_regions(plan, [x])
        r[int(Region.CONST)] = np.frombuffer(schedule.constants, np.uint8)
        return golden.image_regions(plan, r, 0)

    plain, traced = VerilatorNpu(), VerilatorNpu(waveform=args.format)
    clock = CLOCKS[args.clock]
    run_plain = lambda r: plain.run(words, r, trace=True)  # noqa: E731
    run_off = lambda r: traced.run(words, r, trace=True)  # noqa: E731
    (t_plain, t_off), status = best([run_plain, run_off], regions, args.repeat, clock)
    print(f"{path.name}, partition {plan.name}: {len(plan.ops)} layers, {status.cycles} cycles; untraced "
          f"{t_plain * 1e3:.2f} ms ({args.clock}), traced build without a window {t_off * 1e3:.2f} ms "
          f"({t_off / t_plain:.3f}x)")  # fmt: skip
    print()
    print("| # | layer | cycles | layer ms | layer traced ms | in window | trace adds ms | all in | file MB |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for k in (int(v) for v in args.layers.split(",")):
            span = word_window(schedule.steps, schedule.step_op, starts, len(words), [k])
            first, end = cycle_window(status.trace, schedule.steps, schedule.step_op, [k], status.cycles)
            out = Path(tmp) / f"layer{k}.{args.format}"

            def plain_to(cycles):
                return lambda r: plain.run(words, r, max_cycles=cycles)

            def traced_to(cycles):
                return lambda r: traced.run(words, r, waveform_path=out, waveform_words=span, max_cycles=cycles)

            whole = lambda r: traced.run(words, r, trace=True, waveform_path=out, waveform_words=span)  # noqa: E731
            (p0, p1, w0, w1, t_plain, t_win), _ = best(
                [plain_to(first), plain_to(end), traced_to(first), traced_to(end), run_plain, whole],
                regions, args.repeat, clock)  # fmt: skip
            layer, dumped, adds = p1 - p0, w1 - w0, t_win - t_plain
            print(f"| {k} | {plan.ops[k].name[-40:]} | {end - first} | {layer * 1e3:.2f} | {dumped * 1e3:.2f} | "
                  f"{dumped / layer:.1f} | {adds * 1e3:.2f} | {(layer + adds) / layer:.1f} | "
                  f"{out.stat().st_size / 1e6:.1f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
