"""Co-simulation report of the fixture models on the RTL: cycles, MAC utilization, speed.

    python hw/sim/cosim_report.py [--layers] [MODEL ...]

For every NPU partition of each model (default: the three fixtures of tests/fixtures/models)
it schedules the partition for the default HwConfig, runs the stream on the RTL under
Verilator with a command trace, checks the regions against the stream machine (0 LSB), and
prints, per kind of MAC operation:

    kick cycles   the clock cycles of the CONV / DWCONV / FC kicks themselves (fetch of the
                  kick word, checks, requantize-table scan, compute, drain)
    kick util.    MACs / (R * C * kick cycles): how busy the array is while it computes
    layer util.   MACs / (R * C * all cycles of the layer's steps, DMA and SET_REGs included)

and the whole run's cycles, wall time and simulated cycles per second. docs/cosim.md quotes
its output. ``--layers`` adds one line per layer.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import npu_byoc  # noqa: E402
from npu_byoc.codegen.encoder import Kick, encode_with_starts  # noqa: E402
from npu_byoc.codegen.lower import lower_module  # noqa: E402
from npu_byoc.codegen.schedule import schedule_partition  # noqa: E402
from npu_byoc.hwconfig import DEFAULT_CONFIG  # noqa: E402
from npu_byoc.isa import Opcode, Reg, Region  # noqa: E402
from npu_byoc.runtime import golden  # noqa: E402
from npu_byoc.runtime.machine import Machine  # noqa: E402
from npu_byoc.runtime.verilator import VerilatorNpu  # noqa: E402

MODELS = ["tiny_cnn_int8.tflite", "tiny_cnn_qdq.onnx", "mobilenet_v2_int8.tflite"]
KINDS = ["conv", "pointwise", "depthwise", "fc"]


def kind_of(step) -> str | None:
    if not isinstance(step, Kick) or step.opcode not in (Opcode.CONV, Opcode.DWCONV, Opcode.FC):
        return None
    r = dict(step.regs)
    if step.opcode == Opcode.DWCONV:
        return "depthwise"
    if step.opcode == Opcode.FC:
        return "fc"
    return "pointwise" if r[Reg.KERNEL_H] == r[Reg.KERNEL_W] == 1 else "conv"


def macs_of(step) -> int:
    r = dict(step.regs)
    if step.opcode == Opcode.FC:
        return r[Reg.OFM_W] * r[Reg.OFM_C] * r[Reg.IFM_C]
    taps = r[Reg.KERNEL_H] * r[Reg.KERNEL_W] * (r[Reg.IFM_C] if step.opcode == Opcode.CONV else 1)
    return r[Reg.OFM_H] * r[Reg.OFM_W] * r[Reg.OFM_C] * taps


def report(model: str, npu: VerilatorNpu, layers: bool) -> dict:
    hw = npu.hw
    peak = hw.array_rows * hw.array_cols
    plans = lower_module(npu_byoc.partition_for_npu(npu_byoc.load_model(ROOT / "tests" / "fixtures" / "models" / model)))
    totals = defaultdict(lambda: [0, 0, 0])  # kind -> MACs, kick cycles, layer cycles
    rows: list[str] = []
    run_cycles = run_wall = 0.0
    for name, plan in plans.items():
        schedule = schedule_partition(plan, hw)
        words, starts = encode_with_starts(schedule.steps)
        step_of_word = {}
        for k in range(len(schedule.steps)):
            end = starts[k + 1] if k + 1 < len(starts) else len(words) - 1
            step_of_word[end - 1] = k
        rng = np.random.default_rng(0)
        inputs = [rng.integers(-128, 128, size=io.shape, dtype=np.int8) for io in plan.inputs]
        regions = golden.allocate_regions(plan, inputs)
        regions[int(Region.CONST)] = np.frombuffer(schedule.constants, np.uint8).copy()
        reference = {r: a.copy() for r, a in regions.items()}
        t0 = time.perf_counter()
        got = npu.run(words, regions, trace=True)
        run_wall += time.perf_counter() - t0
        run_cycles += got.cycles
        Machine(hw).run(words, reference)
        assert got.ok and all(np.array_equal(regions[r], reference[r]) for r in regions), f"{model} {name}: {got}"
        layer_cycles = defaultdict(int)
        layer_kick = {}
        for entry in got.trace:
            if entry.opcode == Opcode.STOP:
                continue
            k = step_of_word[entry.word_index]
            layer = schedule.step_op[k]
            layer_cycles[layer] += entry.cycles
            kind = kind_of(schedule.steps[k])
            if kind:
                t = layer_kick.setdefault(layer, [kind, 0, 0])
                t[1] += macs_of(schedule.steps[k])
                t[2] += entry.cycles
        for layer, (kind, macs, cycles) in sorted(layer_kick.items()):
            totals[kind][0] += macs
            totals[kind][1] += cycles
            totals[kind][2] += layer_cycles[layer]
            if layers:
                op = plan.ops[layer]
                rows.append(f"| {name} | {layer} | {kind} | {'x'.join(map(str, op.ifm.shape))} -> "
                            f"{'x'.join(map(str, op.ofm.shape))} | {macs} | {cycles} | {macs / (peak * cycles):.1%} | "
                            f"{layer_cycles[layer]} | {macs / (peak * layer_cycles[layer]):.1%} |")  # fmt: skip
    if layers:
        print(f"\n{model}\n")
        print("| partition | layer | kind | shape | MACs | kick cycles | kick util. | layer cycles | layer util. |")
        print("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |")
        print("\n".join(rows))
    return {"totals": dict(totals), "cycles": run_cycles, "wall": run_wall, "peak": peak}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=MODELS)
    parser.add_argument("--layers", action="store_true", help="one line per MAC layer")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    npu = VerilatorNpu(DEFAULT_CONFIG)
    print(f"build (or cache hit): {time.perf_counter() - t0:.1f} s; array {DEFAULT_CONFIG.array_rows} x "
          f"{DEFAULT_CONFIG.array_cols}")  # fmt: skip
    summary = ["| model | kind | MACs | kick cycles | kick util. | layer cycles | layer util. |",
               "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    speeds = []
    for model in args.models:
        r = report(model, npu, args.layers)
        peak = r["peak"]
        for kind in KINDS:
            if kind in r["totals"]:
                macs, kick, layer = r["totals"][kind]
                summary.append(f"| {model} | {kind} | {macs} | {kick} | {macs / (peak * kick):.1%} | {layer} | "
                               f"{macs / (peak * layer):.1%} |")  # fmt: skip
        speeds.append((model, r["cycles"], r["wall"]))
    print()
    print("\n".join(summary))
    print()
    print("| model | RTL cycles (all partitions) | wall (s) | simulated cycles/s |")
    print("| --- | ---: | ---: | ---: |")
    for model, cycles, wall in speeds:
        print(f"| {model} | {int(cycles)} | {wall:.3f} | {cycles / wall / 1e6:.2f} M |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
