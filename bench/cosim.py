"""Benchmark: whole-model co-simulation on the RTL (npu_byoc.runtime.cosim) of every fixture.

    .venv/bin/python bench/cosim.py                       # the fixture models below (~40 s warm)
    .venv/bin/python bench/cosim.py --models mobilenet_v2_int8.tflite
    .venv/bin/python bench/cosim.py --quick               # smoke run: tiny_cnn_int8 (seconds, warm cache)
    .venv/bin/python bench/cosim.py --hw-file u55.toml    # another memory (npu-byoc hw --from-vela-ini)

For each model, with the first input of its recorded reference (tests/fixtures/models/*.npz):
``cosim(model, inputs, reference)`` — every NPU partition on the Verilog RTL under Verilator as
the one stream production runs (intermediate tensors resident in SRAM), its outputs checked
against the golden model (must be 0 LSB), each layer's golden value against TVM's CPU result of
the same layer on the same inputs. The Verilator library is built (or loaded from the cache)
before the first model, so "wall" is a warm-build figure: loading the model, partitioning,
compiling the host graph, TVM's per-layer reference (compiled on a model's first run, then
loaded from the cache), the co-simulation, the comparisons.

Columns:
  cycles          RTL clock cycles of all NPU partitions (one stream each: DMA included)
  ms              cycles at the configuration's core_clock_hz, milliseconds
  util            MACs / (R·C · cycles): the array's utilization overall, DMA included
  util@compute    MACs / (R·C · cycles of the MAC kicks): while the array computes
  conv, pw, dw, fc  util@compute of standard convolutions, pointwise (1x1) convolutions,
                  depthwise convolutions and fully connected layers
  sim c/s         simulated cycles per second of wall time in the RTL (Verilator) runs
  wall            the whole co-simulation, seconds (warm build cache); compile: TVM's part of it

Issue 5's targets: >= 90% on standard and pointwise convolutions, >= 50% on depthwise (while
computing), >= 0.5 M simulated cycles/s, a MobileNetV2-class model in <= 30 s wall. This script
prints figures and a verdict per target; it asserts nothing (tests/test_cosim.py does).
"""

from __future__ import annotations

import argparse
import sys
import time

from benchlib import FIXTURES, QUICK_BANNER, QUICK_MODEL, sample  # noqa: E402  (puts the repo on sys.path)

from npu_byoc.arch.config import DEFAULT_CONFIG, configure  # noqa: E402
from npu_byoc.arch.options import config_from  # noqa: E402
from npu_byoc.runtime.cosim import cosim  # noqa: E402
from npu_byoc.runtime.cosim_report import CLASS_NAMES  # noqa: E402
from npu_byoc.runtime.cosim_report import MAC_CLASSES as ALL_MAC_CLASSES  # noqa: E402
from npu_byoc.runtime.verilator import VerilatorNpu  # noqa: E402

MODELS = ["tiny_cnn_int8.tflite", "tiny_cnn_qdq.onnx", "mobilenet_v2_int8.tflite",
          # segmentation decoders: TRANSPOSE_CONV, resizes, crops, skip concatenations (issue 9)
          "unet_int8.tflite", "transpose_conv_int8.tflite", "upsample_cnn_int8.tflite", "resize_bilinear_int8.tflite"]
MAC_CLASSES = ["conv", "pointwise", "depthwise", "fc"]  # the first table's columns


def pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*")
    parser.add_argument("--quick", action="store_true", help=f"smoke run: {QUICK_MODEL} only")
    parser.add_argument("--dma-overlap", type=int, default=1, choices=(0, 1),
                        help="HwConfig.dma_overlap (default 1: background DMA; 0: sequential)")
    parser.add_argument("--hw-file", help="a hardware configuration (TOML; e.g. npu-byoc hw --from-vela-ini ...)")
    args = parser.parse_args(argv)
    models = args.models or ([QUICK_MODEL] if args.quick else MODELS)
    if args.quick:
        print(QUICK_BANNER)

    t0 = time.perf_counter()
    hw = configure(config_from(file=args.hw_file) if args.hw_file else DEFAULT_CONFIG, dma_overlap=args.dma_overlap)
    npu = VerilatorNpu(hw)
    print(f"RTL library: {time.perf_counter() - t0:.1f} s (build or cache); array {hw.array_rows} x "
          f"{hw.array_cols}, {hw.sram_bytes // 1024} KiB SRAM\n")  # fmt: skip
    reports = []
    for model in models:
        inputs, reference = sample(model)
        report = cosim(FIXTURES / model, inputs, reference, hw=hw, npu=npu)
        reports.append((model, report))
        print(f"{model}: {len(report.layers)} layers, {report.summary['wall_seconds']:.1f} s", file=sys.stderr)

    print("| model | layers | MACs | cycles | ms | util | util@compute | conv | pw | dw | fc | sim c/s | wall (s) | "
          "compile (s) | max LSB golden / TVM |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for model, r in reports:
        s = r.summary
        per = s["per_class"]
        cls = " | ".join(pct(per[c]["utilization"]) if c in per else "-" for c in MAC_CLASSES)
        print(f"| {model} | {s['layers']} | {s['macs']} | {s['cycles']} | {s['milliseconds']:.3f} | {pct(s['utilization_overall'])} | "
              f"{pct(s['utilization'])} | {cls} | {s['simulated_cycles_per_second'] / 1e6:.2f} M | "
              f"{s['wall_seconds']:.1f} | {s['seconds']['compile']:.1f} | {s['max_diff_golden']} / "
              f"{s['max_diff_tvm']} |")  # fmt: skip

    print("\nPer MAC class (util@compute: while the array computes; util: DMA included):\n")
    print("| model | class | layers | MACs | cycles | compute cycles | util@compute | util |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for model, r in reports:
        for c in ALL_MAC_CLASSES:
            if c in r.summary["per_class"]:
                p = r.summary["per_class"][c]
                print(f"| {model} | {CLASS_NAMES[c]} | {p['layers']} | {p['macs']} | {p['cycles']} | "
                      f"{p['compute_cycles']} | {pct(p['utilization'])} | {pct(p['utilization_overall'])} |")  # fmt: skip

    print("\nTargets (issue 5):")
    for model, r in reports:
        s, per = r.summary, r.summary["per_class"]
        checks = [
            ("standard conv >= 90%", per.get("conv", {}).get("utilization"), 0.9),
            ("pointwise >= 90%", per.get("pointwise", {}).get("utilization"), 0.9),
            ("depthwise >= 50%", per.get("depthwise", {}).get("utilization"), 0.5),
        ]
        parts = [f"{name}: {pct(v)} {'met' if v is not None and v >= lim else 'NOT met'}" for name, v, lim in checks]
        speed = s["simulated_cycles_per_second"]
        parts.append(f">= 0.5 M cycles/s: {speed / 1e6:.2f} M {'met' if speed >= 0.5e6 else 'NOT met'}")
        if "mobilenet" in model:
            parts.append(f"<= 30 s wall: {s['wall_seconds']:.1f} s {'met' if s['wall_seconds'] <= 30 else 'NOT met'}")
        print(f"  {model}: " + "; ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
