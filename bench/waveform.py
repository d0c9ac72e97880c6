"""Benchmark: what a one-layer waveform costs (``npu-byoc cosim --trace FILE --trace-layers NAME``).

    .venv/bin/python bench/waveform.py                     # bundled MobileNetV2, three layers
    .venv/bin/python bench/waveform.py --layers 0,30 --format vcd
    .venv/bin/python bench/waveform.py --quick             # smoke run: tiny_cnn, its first layer

For the model's first NPU partition (its stream as production runs it, the first image), each
run on the RTL is timed (best of ``--repeat``):

  untraced        the whole stream on the untraced build (the co-simulation's own run)
  traced, off     the whole stream on the traced build (``--trace``), no window: what compiling
                  tracing in costs by itself
  traced, window  the traced build dumping the layer's words only (what ``--trace-layers`` runs)
  layer           the layer's share of the untraced run (its cycles / the stream's cycles)
  trace cost      traced-window − untraced: the time the waveform adds
  ratio           (layer + trace cost) / layer: the layer simulated with its waveform, in units
                  of the layer simulated without (issue 26 asks for <= 3)

Both Verilator builds are made (or loaded from the cache) before timing. The figures are wall
times on this machine; the file sizes are exact.
"""

from __future__ import annotations

import argparse
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


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mobilenet_v2", help="a bundled model (tiny_cnn, mobilenet_v2)")
    ap.add_argument("--layers", default="3,30,60", help="op indexes in the partition, comma-separated")
    ap.add_argument("--format", default="vcd", choices=["vcd", "fst"])
    ap.add_argument("--repeat", type=int, default=3)
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
    t_plain, status = best(lambda: plain.run(words, regions(), trace=True), args.repeat)
    t_off, _ = best(lambda: traced.run(words, regions(), trace=True), args.repeat)
    print(f"{path.name}, partition {plan.name}: {len(plan.ops)} layers, {status.cycles} cycles; untraced "
          f"{t_plain:.4f} s, traced build without a window {t_off:.4f} s ({t_off / t_plain:.2f}x)")
    print()
    print("| # | layer | cycles | layer s | traced, window s | trace cost s | ratio | file MB |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for k in (int(v) for v in args.layers.split(",")):
            span = word_window(schedule.steps, schedule.step_op, starts, len(words), [k])
            first, end = cycle_window(status.trace, schedule.steps, schedule.step_op, [k], status.cycles)
            out = Path(tmp) / f"layer{k}.{args.format}"
            t_win, _ = best(lambda: traced.run(words, regions(), trace=True, waveform_path=out, waveform_words=span),
                            args.repeat)  # fmt: skip
            layer = t_plain * (end - first) / status.cycles
            cost = t_win - t_plain
            name = plan.ops[k].name[-40:]
            print(f"| {k} | {name} | {end - first} | {layer:.4f} | {t_win:.4f} | {cost:.4f} | "
                  f"{(layer + cost) / layer:.1f} | {out.stat().st_size / 1e6:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
