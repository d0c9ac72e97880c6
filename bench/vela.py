"""Benchmark: our RTL's cycles beside Arm Vela's Ethos-U55-256 (or U85-256) estimate, per model and per layer.

    .venv/bin/pip install -e ".[bench]"                       # ethos-u-vela (optional extra)
    .venv/bin/python bench/vela.py                            # the TFLite fixtures, 16 and 8 bytes/cycle
    .venv/bin/python bench/vela.py --dma-bytes-per-cycle 8 --per-layer mobilenet_v2_int8.tflite
    .venv/bin/python bench/vela.py --vela-config Ethos_U55_High_End_Embedded/Sram_Only \
                                   --vela-config Ethos_U55_High_End_Embedded/Shared_Sram   # Vela's memory, both sides
    .venv/bin/python bench/vela.py --accelerator ethos-u85-256 --dma-bytes-per-cycle 16 \
                                   --models vit_tiny_int8.tflite kws_transformer_int8.tflite  # the transformers on U85
    .venv/bin/python bench/vela.py --quick                    # smoke run: tiny_cnn_int8 at 16 bytes/cycle
                                                              # (without Vela: our side only, said so)
    .venv/bin/python bench/vela.py --compressed               # the pruned and clustered fixtures: our encoded
                                                              # weights beside Vela's, cycles with and without
                                                              # the weight decoder (C model = cycle model)
    .venv/bin/python bench/vela.py --compressed --record      # ... and record Vela's figures for the tests

Both sides get the same int8 TFLite file and the same memory system:

  ours   ``npu_byoc.runtime.cosim``: every NPU partition on the Verilog RTL under Verilator, as
         the one stream production runs, with ``--hw dma_bytes_per_cycle=D`` (8 x 32 = 256
         MACs per cycle, 256 KiB SRAM); cycles of all NPU partitions, DMA included. Layers the NPU does not run stay on the CPU and are
         not counted (the coverage column says how many MACs that is).
  Vela   ``vela --accelerator-config ethos-u55-256`` (256 MACs per cycle) with a system
         configuration written here: every tensor in SRAM (``Sram_Only``), SRAM at D bytes
         per cycle (``Sram_clock_scale = D / 8`` on Ethos-U55's 64-bit AXI port, D / 16 on
         U65's and U85's 128-bit one), the
         latencies and burst length of Arm's ``Ethos_U55_High_End_Embedded``. Its
         ``cycles_total`` (NPU and memory access, as its summary CSV reports) is the yardstick;
         ``cycles_npu`` is shown too.

Per layer (``--per-layer MODEL``): our layer's RTL cycles beside Vela's "Op Cycles" for the
operator with the same output tensor name (Vela folds activations into the producing op, as
we do). Ratios below 1 mean fewer cycles than Vela's estimate. The script prints figures; it
asserts nothing.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from typing import NamedTuple
from pathlib import Path

from benchlib import FIXTURES, QUICK_BANNER, QUICK_MODEL, sample  # noqa: E402  (puts the repo on sys.path)

from npu_byoc.util import escape  # noqa: E402
from npu_byoc.arch.config import configure  # noqa: E402
from npu_byoc.arch.vela_config import from_vela_ini  # noqa: E402
from npu_byoc.errors import NpuByocError  # noqa: E402
from npu_byoc.runtime.cosim import cosim  # noqa: E402

MODELS = [
    "mobilenet_v2_int8.tflite",
    "mobilenet_v1_batch_none_int8.tflite",
    "ds_cnn_int8.tflite",
    "resnet_small_int8.tflite",
    "densenet_small_int8.tflite",
    "tiny_cnn_int8.tflite",
]

# Ethos_U55_High_End_Embedded (Arm's vela.ini) with every tensor in SRAM at D bytes per cycle.
VELA_INI = """\
[System_Config.npu_byoc_matched]
core_clock=500e6
axi0_port=Sram
axi1_port=Sram
Sram_clock_scale={scale}
Sram_burst_length=32
Sram_read_latency=32
Sram_write_latency=32
Sram_max_reads=4
Sram_max_writes=4

[Memory_Mode.npu_byoc_sram_only]
const_mem_area=Axi0
arena_mem_area=Axi0
cache_mem_area=Axi0
"""


VELA_FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "vela.ini"
NO_VELA = 'bench/vela.py needs Arm Vela: pip install -e ".[bench]" (ethos-u-vela)'


def find_vela() -> str | None:
    exe = shutil.which("vela") or str(Path(sys.executable).with_name("vela"))
    return exe if Path(exe).exists() else None


def vela_exe() -> str:
    exe = find_vela()
    if exe is None:
        sys.exit(NO_VELA)
    return exe


def run_vela(model: Path, setup, work: Path) -> tuple[dict, list[dict]]:
    """Vela's summary row and per-layer rows for ``model`` on ``setup``'s memory."""
    if setup.vela is None:  # every tensor in SRAM at D bytes per cycle
        ini, system, mode = work / "npu_byoc.ini", "npu_byoc_matched", "npu_byoc_sram_only"
        ini.write_text(VELA_INI.format(scale=setup.dma_bytes / axi_bytes(setup.accelerator)))
    else:
        ini, system, mode = setup.vela
    out = work / f"{model.stem}-{setup.label.replace('/', '-')}"
    cmd = [vela_exe(), str(model), "--accelerator-config", setup.accelerator, "--config", str(ini),
           "--system-config", system, "--memory-mode", mode,
           "--output-dir", str(out), "--verbose-performance"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:  # a model Vela cannot compile is a result: its last line, in the table
        last = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}").splitlines()[-1]
        return {"error": f"vela failed: {last}"}, []
    summary = next(out.glob("*_summary_*.csv"))
    layers = next(out.glob("*_per-layer.csv"))
    with summary.open() as f:
        row = next(csv.DictReader(f))
    with layers.open() as f:
        per_layer = list(csv.DictReader(f))
    return row, per_layer


class Setup(NamedTuple):
    """One memory system for both sides: our port width and HwConfig fields, Vela's ini."""

    label: str
    dma_bytes: int
    accelerator: str = "ethos-u55-256"
    vela: tuple[Path, str, str] | None = None  # (ini, system config, memory mode); None: VELA_INI
    fields: tuple = ()  # HwConfig fields from the ini (npu-byoc hw --from-vela-ini)


def axi_bytes(accelerator: str) -> int:
    """Bytes per cycle of one AXI port: Ethos-U55's is 64 bits wide, U65's and U85's 128."""
    return 16 if "u85" in accelerator or "u65" in accelerator else 8


def macs_per_cycle(accelerator: str) -> int:
    """The MAC array of a Vela accelerator configuration, e.g. ethos-u85-256 -> 256."""
    return int(accelerator.rsplit("-", 1)[1])


def setups(args) -> list[Setup]:
    """--vela-config SYSTEM/MODE: Vela's memory for both sides; else the matched SRAM at each width."""
    if not args.vela_config:
        widths = args.dma_bytes_per_cycle or ([16] if args.quick else [16, 8])
        return [Setup(str(d), d, args.accelerator) for d in widths]
    port = axi_bytes(args.accelerator)
    out = []
    for spec in args.vela_config:
        system, _, mode = spec.partition("/")
        if not mode:
            sys.exit(f"--vela-config {spec!r}: expected SYSTEM/MODE, e.g. Ethos_U55_High_End_Embedded/Shared_Sram")
        try:
            fields = from_vela_ini(args.vela_ini, system, mode, port)
        except NpuByocError as err:
            sys.exit(str(err))
        for d in args.dma_bytes_per_cycle or [port]:
            out.append(Setup(f"{spec} @ {d}", d, args.accelerator, (Path(args.vela_ini), system, mode),
                             tuple(fields.items())))  # fmt: skip
    return out


def run_ours(model: Path, setup: Setup, overlap: int = 0, queue: int | None = None):
    extra = {} if queue is None else {"dma_queue_depth": queue}
    hw = configure(dma_bytes_per_cycle=setup.dma_bytes, dma_overlap=overlap, **dict(setup.fields), **extra)
    return cosim(model, sample(model.name)[0], hw=hw)


def vela_cycles_by_layer(rows: list[dict]) -> dict[str, int]:
    """Vela's Op Cycles per output tensor: its Name column lists the fused tensors' names, the
    op's own output first (the name our layer carries); fused activations add 0 cycles."""
    out: dict[str, int] = defaultdict(int)
    for r in rows:
        out[r["Name"].split(";")[0]] += int(float(r["Op Cycles"]))
    return out


COMPRESSIBLE = ("mobilenet_v1_pruned_int8.tflite", "mobilenet_v1_clustered_int8.tflite")
VELA_WEIGHTS = FIXTURES / "compressible_vela.json"  # Vela's figures for them, recorded with --compressed --record
DECODER_BYTES = 16  # weight_decoder_bytes_per_cycle of the "with decoder" columns


def vela_weights(model: Path, work: Path) -> dict:
    """Vela's total_original_weights and total_npu_encoded_weights (mlw) for ``model`` on
    ethos-u55-256 with its default configuration (the weights do not depend on the memory)."""
    out = work / f"{model.stem}-weights"
    cmd = [vela_exe(), str(model), "--accelerator-config", "ethos-u55-256", "--output-dir", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"vela failed on {model.name}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    with next(out.glob("*_summary_*.csv")).open() as f:
        row = next(csv.DictReader(f))
    return {k: int(row[k]) for k in ("total_original_weights", "total_npu_encoded_weights")}


def compressed(args, have_vela: bool) -> int:
    """Our encoded weights beside Vela's, and our cycles with and without the weight decoder."""
    import json

    import npu_byoc
    from npu_byoc.arch import cycles
    from npu_byoc.codegen.lower import lower_module
    from npu_byoc.codegen.schedule import schedule_partition
    from npu_byoc.codegen.weight_compress import weight_bytes

    recorded = json.loads(VELA_WEIGHTS.read_text()) if VELA_WEIGHTS.exists() else {}
    if args.quick:
        print(QUICK_BANNER)
    if not have_vela:
        print(f"Vela's figures recorded in {VELA_WEIGHTS.name} ({'quick mode' if args.quick else NO_VELA})\n")
    memories = {"default": {}}
    for mode in ("Sram_Only", "Shared_Sram"):
        memories[f"U55 {mode}"] = {"dma_bytes_per_cycle": 8,
                                   **from_vela_ini(VELA_FIXTURE, "Ethos_U55_High_End_Embedded", mode, 8)}  # fmt: skip
    weights, timing = [], []
    with tempfile.TemporaryDirectory(prefix="npu_byoc_vela_") as tmp:
        for name in COMPRESSIBLE:
            vela = vela_weights(FIXTURES / name, Path(tmp)) if have_vela else recorded.get(name)
            if args.record and have_vela:
                recorded[name] = {**vela, "vela": "ethos-u-vela 5.2.0, --accelerator-config ethos-u55-256"}
            plans = lower_module(npu_byoc.partition_for_npu(npu_byoc.load_model(FIXTURES / name)))
            for label, fields in memories.items():
                raw = configure(**fields)
                hw = configure(raw, weight_decoder_bytes_per_cycle=DECODER_BYTES)
                before = after = original = encoded = 0
                for plan in plans.values():
                    schedule = schedule_partition(plan, hw)
                    before += cycles.stream_cycles(schedule_partition(plan, raw).steps, raw)
                    after += cycles.stream_cycles(schedule.steps, hw)
                    for op, tiling in zip(plan.ops, schedule.tilings):
                        o, e = weight_bytes(op, tiling.channels, hw)
                        original, encoded = original + o, encoded + e
                timing.append((name, label, before, after))
            weights.append((name, original, encoded, vela, "" if have_vela else " (recorded)"))
    if args.record and have_vela:
        VELA_WEIGHTS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    print("| model | weights | ours: encoded | ours / original | Vela: total_npu_encoded_weights | Vela / original | "
          "ours / Vela |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, original, encoded, vela, note in weights:
        theirs = (f"{vela['total_npu_encoded_weights']:,}{note} | {vela['total_npu_encoded_weights'] / original:.3f} | "
                  f"{encoded / vela['total_npu_encoded_weights']:.3f}") if vela else "- | - | -"  # fmt: skip
        print(f"| {name} | {original:,} | {encoded:,} | {encoded / original:.3f} | {theirs} |")
    print(f"\nCycles of the NPU partitions (the analytic model = the C model = the RTL: tests/test_rtl_wdec.py), "
          f"without and with a weight decoder of {DECODER_BYTES} bytes per cycle:\n")  # fmt: skip
    print("| model | memory | weight_decoder=0 | with decoder | after / before |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name, label, before, after in timing:
        print(f"| {name} | {label} | {before:,} | {after:,} | {after / before:.2f} |")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run: {QUICK_MODEL} at 16 bytes/cycle; without Vela, our side only")
    parser.add_argument("--dma-bytes-per-cycle", type=int, action="append", help="default: 16 and 8")
    parser.add_argument("--per-layer", help="print the per-layer table of this model")
    parser.add_argument("--dma-overlap", type=int, default=1, choices=(0, 1),
                        help="HwConfig.dma_overlap (default 1: background DMA; 0: sequential)")
    parser.add_argument("--dma-queue-depth", type=int, help="HwConfig.dma_queue_depth (default: the HwConfig's)")
    parser.add_argument("--vela-config", action="append", metavar="SYSTEM/MODE",
                        help="both sides on Vela's system configuration and memory mode (repeatable), e.g. "
                        "Ethos_U55_High_End_Embedded/Shared_Sram; our port: the accelerator's AXI width")
    parser.add_argument("--vela-ini", default=str(VELA_FIXTURE), help="Vela's ini (default: tests/fixtures/vela.ini)")
    parser.add_argument("--accelerator", default="ethos-u55-256", help="Vela's --accelerator-config")
    parser.add_argument("--compressed", action="store_true",
                        help="the pruned and clustered fixtures: encoded weights beside Vela's, cycles with the decoder")
    parser.add_argument("--record", action="store_true", help=f"with --compressed: write Vela's figures to {VELA_WEIGHTS.name}")
    args = parser.parse_args(argv)
    if args.compressed:  # quick or without Vela: Vela's recorded figures, said so
        return compressed(args, find_vela() is not None and not args.quick)
    runs = setups(args)
    models = args.models or ([QUICK_MODEL] if args.quick else MODELS)
    # The full run compares with Vela, so it needs it (said before any work); the quick run
    # checks our side and the tables without it, and says so in its output.
    have_vela = find_vela() is not None if args.quick else bool(vela_exe())
    if args.quick:
        print(QUICK_BANNER)
        if not have_vela:
            print(f"Vela columns empty ('-'): {NO_VELA}\n")

    rows = []
    with tempfile.TemporaryDirectory(prefix="npu_byoc_vela_") as tmp:
        for d in runs:
            for name in models:
                model = FIXTURES / name
                vela, vela_layers = run_vela(model, d, Path(tmp)) if have_vela else (None, [])
                ours = run_ours(model, d, args.dma_overlap, args.dma_queue_depth)
                s = ours.summary
                rows.append((name, d, s, vela, ours, vela_layers))
                print(f"{name} @ {d.label}: ours {s['cycles']}, Vela {(vela or {}).get('cycles_total', '-')}",
                      file=sys.stderr)  # fmt: skip

    # MAC util: MACs / (array MACs per cycle x cycles), ours over the MACs of our NPU layers,
    # Vela's over its nn_macs (every MAC of the network, its CPU operators' too)
    print(f"| model | memory (bytes/cycle) | MACs on NPU | ours: cycles | ours: ms | bound | ours / bound | ours: MAC util | "
          f"Vela {args.accelerator}: cycles_total | Vela cycles_npu | Vela nn_macs | Vela: MAC util | ours / Vela |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    failed = []
    for name, d, s, vela, _, _ in rows:
        if vela and "error" in vela:
            failed.append(f"{name} @ {d.label}: {escape.markdown(vela['error'])}")
            theirs = "failed | failed | - | - | -"
        elif vela:
            total, macs = float(vela["cycles_total"]), int(float(vela["nn_macs"]))
            util = macs / (macs_per_cycle(args.accelerator) * total)
            theirs = f"{total:,.0f} | {float(vela['cycles_npu']):,.0f} | {macs:,} | {100 * util:.1f}% | {s['cycles'] / total:.2f}"
        else:
            theirs = "- | - | - | - | -"
        util = s["utilization_overall"]
        print(f"| {name} | {d.label} | {s['macs']:,} | {s['cycles']:,} | {s['milliseconds']:.3f} | {s['bound_cycles']:,.0f} | "
              f"{s['cycles'] / s['bound_cycles']:.2f} | {100 * util if util else 0:.1f}% | {theirs} |")  # fmt: skip
    for line in failed:
        print(f"\n{line}")

    print("\nPer op class (ours: RTL cycles of the class's layers; Vela: Op Cycles of the operators with the "
          "same output tensors):\n")  # fmt: skip
    print("| model | memory (bytes/cycle) | class | layers | ours | Vela | ours / Vela |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
    for name, d, s, vela, ours, vela_layers in rows:
        cycles = vela_cycles_by_layer(vela_layers)
        for cls in s["per_class"]:
            layers = [r for r in ours.layers if r.op == cls]
            if not vela or "error" in vela:
                print(f"| {name} | {d.label} | {cls} | -/{len(layers)} | {sum(r.cycles for r in layers):,} | - | - |")
                continue
            matched = [r for r in layers if r.name in cycles]
            a, b = sum(r.cycles for r in matched), sum(cycles[r.name] for r in matched)
            print(f"| {name} | {d.label} | {cls} | {len(matched)}/{len(layers)} | {a:,} | {b:,} | "
                  f"{a / b if b else float('nan'):.2f} |")  # fmt: skip

    for name, d, s, vela, ours, vela_layers in rows:
        if name != args.per_layer:
            continue
        cycles = vela_cycles_by_layer(vela_layers)
        print(f"\nPer layer, {name} on {d.label}:\n")
        print("| # | layer | op | MACs | ours | Vela | ours / Vela |")
        print("| ---: | --- | --- | ---: | ---: | ---: | ---: |")
        for r in ours.layers:
            v = cycles.get(r.name)
            ratio = f"{r.cycles / v:.2f}" if v else "-"
            print(f"| {r.index} | {escape.markdown(r.name[-48:])} | {r.op} | {r.macs:,} | {r.cycles:,} | "
                  f"{'-' if v is None else v} | {ratio} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
