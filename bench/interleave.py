"""NCHW partition inputs and outputs moved as strided transfers or laid out on chip (the
interleave and deinterleave of npu_byoc.ops.interleave): the NPU partitions' cycles (the cycle
model's, which the C model and the RTL equal) against the roofline bound, under Vela's memory.

    .venv/bin/python bench/interleave.py [MODEL ...]       # tiny_cnn_qdq.onnx and the given files
    .venv/bin/python bench/interleave.py /tmp/onnx_apps/*_qdq.onnx   # bench/onnx_apps.py --make's models
    .venv/bin/python bench/interleave.py --quick           # tiny_cnn_qdq.onnx, Sram_Only only

Per model and memory mode (Vela's Ethos_U55_High_End_Embedded from tests/fixtures/vela.ini,
converted by npu_byoc.arch.vela_config on U55's 8-byte AXI port): the cycles with the
interleave left out ("strided"), as compiled ("on chip": the compiler adds an interleave or
deinterleave where the cycle model finds the partition faster), the roofline bound of the
model (its MACs over the array, each memory's bytes over what it sustains; the bytes the
interleave's identity weights add are not the model's and are left out), and how many
partition inputs and outputs were laid out on chip. ONNX only: Vela reads TFLite files, so
these rows have no Vela column (bench/vela.py gives it for TFLite models).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchlib import FIXTURES, QUICK_BANNER  # (puts the repo on sys.path)

from npu_byoc import load_model, partition_for_npu
from npu_byoc.arch import cycles
from npu_byoc.arch.config import configure
from npu_byoc.arch.vela_config import from_vela_ini
from npu_byoc.codegen.lower import lower_module
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.runtime.cosim_report import roofline

VELA_INI = FIXTURES.parent / "vela.ini"
SYSTEM = "Ethos_U55_High_End_Embedded"
MODES = ("Sram_Only", "Shared_Sram")
PORT = 8  # Ethos-U55's AXI port, bytes per cycle: our DMA port too
QUICK_MODEL = FIXTURES / "tiny_cnn_qdq.onnx"


def partition_cycles(plans, hw) -> int:
    return sum(cycles.stream_cycles(schedule_partition(p, hw).steps, hw) for p in plans.values())


def measure(model: Path, modes) -> list[list[str]]:
    mod = partition_for_npu(load_model(str(model)))
    rows = []
    for mode in modes:
        hw = configure(dma_bytes_per_cycle=PORT, **from_vela_ini(VELA_INI, SYSTEM, mode, PORT))
        strided, on_chip = lower_module(mod, hw, interleave=False), lower_module(mod, hw)
        before, after = partition_cycles(strided, hw), partition_cycles(on_chip, hw)
        bound = roofline(strided.values(), hw)["bound_cycles"]
        moved = sum(len(p.interleaves) + len(p.deinterleaves) for p in on_chip.values())
        nchw = sum(io.ref.layout == "NCHW" and io.ref.shape[2] > 1 < io.ref.shape[0] * io.ref.shape[1]
                   for p in strided.values() for io in [*p.inputs, *p.outputs])  # planes of more than a byte
        rows.append([model.name, mode, f"{before:,}", f"{after:,}", f"{bound:,.0f}", f"{before / bound:.2f}",
                     f"{after / bound:.2f}", f"{moved} of {nchw}"])  # fmt: skip
    return rows


HEADER = ["model", "memory mode", "strided", "on chip", "bound", "strided / bound", "on chip / bound",
          "NCHW tensors laid out on chip"]  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", type=Path, nargs="*", help="ONNX (or TFLite) files besides tiny_cnn_qdq.onnx")
    ap.add_argument("--quick", action="store_true", help="tiny_cnn_qdq.onnx under Sram_Only only")
    args = ap.parse_args(argv)
    if args.quick:
        print(QUICK_BANNER)
    models = [QUICK_MODEL] if args.quick else [QUICK_MODEL, *args.models]
    modes = MODES[:1] if args.quick else MODES
    print(f"NPU partition cycles, {SYSTEM} memory converted from {VELA_INI.name}, {PORT}-byte DMA port\n")
    print("| " + " | ".join(HEADER) + " |")
    print("| --- | --- |" + " ---: |" * (len(HEADER) - 2))
    for model in models:
        for row in measure(model, modes):
            print("| " + " | ".join(row) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
