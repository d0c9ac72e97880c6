"""The ``npu-byoc`` command line.

    npu-byoc demo                                   the main job on a bundled model
    npu-byoc coverage MODEL [--format text|json|md|html] [-o FILE]
    npu-byoc compile MODEL -o model.so [--backend functional]
    npu-byoc export MODEL -o DIR                    a stand-alone C99 library of the NPU stream (docs/export.md)
    npu-byoc run MODEL --input x.npy [--input ...] [--backend functional|verilator|golden|cpu] [--output out.npy]
    npu-byoc compare MODEL --input x.npy [--reference ref.npy] [--format text|json]
    npu-byoc cosim MODEL --input x.npy [--reference ref.npy] [--report r.json] [--csv l.csv] [--plot u.png]
                                                    [--timeline t.json] [--trace w.vcd --trace-layers NAME[,NAME]]
                                                    [--trace w.vcd --trace-words [PARTITION:]A:B]
                                                    [--exclude OP_OR_LAYER]
    npu-byoc partition MODEL [-o FILE]              the partitioned Relax module (TVMScript)
    npu-byoc patterns [--format text|md]            the NPU pattern table
    npu-byoc hw [--format text|toml|json]           the hardware configuration in effect
                [--from-vela-ini F --system-config S --memory-mode M]   ... from Vela's memory
    npu-byoc sweep MODEL... --grid FIELD=v1,v2 [--jobs N] [--ray [ADDR]] [--verify N] [--max-points N] [--plot p.png]
    npu-byoc fuzz --count N --seed S [--mode ops|files]   differential fuzzing (docs/fuzz.md)

Every command that partitions a MODEL takes ``--exclude OP_OR_LAYER`` (repeatable): an operator
type (``SOFTMAX``), a layer name or an NPU operation kept on the CPU, reported as "excluded by
the user" in coverage. Every command that loads a MODEL takes ``--input-shape NAME=d0,d1,...`` (repeatable) or
``--input-shape N`` to fix the open dimensions of a model's inputs (batch 1 by default), and
``--hw FIELD=VALUE`` (repeatable) / ``--hw-file cfg.toml`` to target another hardware
configuration (docs/hardware.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .util import escape
from .frontends.bundled import BUNDLED, bundled_model
from .errors import NpuByocError

def _emit(text: str, output: str | None) -> None:
    if output:
        try:
            Path(output).write_text(text)
        except OSError as err:
            raise NpuByocError(f"{output}: cannot write ({err.strerror})") from None
        print(f"wrote {output}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def parse_input_shape(text: str) -> tuple[str | None, object]:
    """``NAME=1,96,96,3`` (one input's shape) or ``N`` (the batch of every open input)."""
    name, sep, dims = text.rpartition("=")
    try:
        if not sep:
            return None, int(dims)
        return name, tuple(int(d) for d in dims.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}': expected NAME=d0,d1,... or a batch size") from None


def _load(args):
    """load_model(args.model) with the --input-shape options."""
    from . import load_model

    given = dict(args.input_shape or [])
    batch = given.pop(None, None)
    if batch is not None and given:
        raise NpuByocError("--input-shape: give a batch size or shapes by name, not both")
    return load_model(args.model, input_shapes=given or batch)


def _hw(args):
    """The HwConfig of the --hw-file and --hw options (the default configuration without them)."""
    from .arch.options import config_from, parse_assignment

    return config_from([parse_assignment(a) for a in args.hw or []], args.hw_file)


def _exclude(args) -> list[str]:
    """The --exclude names (operator types, layers or NPU operations kept on the CPU)."""
    return list(getattr(args, "exclude", None) or [])


def _partitioned(args, mod, hw):
    """``mod`` partitioned with the --exclude names (as it is without them: build and cosim
    partition it themselves)."""
    from . import partition_for_npu

    return partition_for_npu(mod, hw=hw, exclude=_exclude(args)) if _exclude(args) else mod


def _fitted(args, mod, hw):
    """``mod`` partitioned with the --exclude names, refused in one line when a layer does not
    fit ``hw``'s SRAM (compile, cosim and export run the model on this NPU, not partly elsewhere)."""
    from . import partition_for_npu
    from .partition.sram_fit import refuse_unfit

    return refuse_unfit(partition_for_npu(mod, hw=hw, exclude=_exclude(args)), hw)


def cmd_coverage(args) -> int:
    from . import coverage_report

    hw = _hw(args)
    report = coverage_report(_load(args), hw=hw, exclude=_exclude(args))
    from .partition.coverage import RENDERERS

    _emit(RENDERERS[args.format](report), args.output)
    return 0


def _load_inputs(paths: list[str]) -> list:
    import numpy as np

    out = []
    for p in paths:
        try:
            value = np.load(p, allow_pickle=False)
        except FileNotFoundError:
            raise NpuByocError(f"{p}: no such input file") from None
        except Exception as err:
            raise NpuByocError(f"{p}: not a .npy array ({err})") from None
        if not isinstance(value, np.ndarray):  # np.load opens a .npz as an archive of arrays
            value.close()
            raise NpuByocError(f"{p}: a .npz archive, not a .npy array (give one .npy file per array)")
        out.append(value)
    return out


def _load_references(args, mod) -> list | None:
    """The ``--reference`` arrays, one per model output, each with the output's number of
    elements (a reference of another shape is one line naming its file, before any compile)."""
    import numpy as np

    from .frontends.load import model_info

    if not args.reference:
        return None
    refs = _load_inputs(args.reference)
    info = model_info(mod)
    if info is not None:
        if len(refs) != len(info.outputs):
            raise NpuByocError(f"{args.model}: the model has {len(info.outputs)} output(s), "
                               f"got {len(refs)} --reference file(s)")  # fmt: skip
        for path, r, t in zip(args.reference, refs, info.outputs):
            if all(d >= 0 for d in t.shape) and r.size != int(np.prod(t.shape)):
                raise NpuByocError(f"{path}: reference {t.dtype} {list(r.shape)} does not fit the model output "
                                   f"'{escape.text(t.name, 80)}' {list(t.shape)}")  # fmt: skip
    return refs


def _load_with_inputs(args, paths: list[str]):
    """The model and its ``--input`` arrays, checked against the model's inputs before any
    compile: one line naming the file when an array does not fit."""
    from .frontends.load import model_info
    from .runtime.build import input_mismatch

    inputs = _load_inputs(paths)
    mod = _load(args)
    info = model_info(mod)
    if info is not None:
        if len(inputs) != len(info.inputs):
            names = ", ".join(t.name for t in info.inputs)
            raise NpuByocError(f"{args.model}: the model takes {len(info.inputs)} input(s) ({names}), "
                               f"got {len(inputs)} --input file(s)")  # fmt: skip
        for path, x, t in zip(paths, inputs, info.inputs):
            problem = input_mismatch(x, t)
            if problem:
                raise NpuByocError(f"{path}: {problem}")
    return mod, inputs


def _save_outputs(outputs, path: str | None) -> None:
    import numpy as np

    if path is None:
        for k, o in enumerate(outputs):
            print(f"output {k}: {o.dtype} {list(o.shape)}")
            print(np.array2string(o, threshold=64))
        return
    # Through an open file: numpy would add ".npy" / ".npz" to a name without it.
    try:
        with open(path, "wb") as f:
            if len(outputs) == 1 and not path.endswith(".npz"):
                np.save(f, outputs[0])
            else:
                np.savez(f, **{f"output_{k}": o for k, o in enumerate(outputs)})
    except OSError as err:
        raise NpuByocError(f"{path}: cannot write ({err.strerror})") from None
    print(f"wrote {path}", file=sys.stderr)


def cmd_run(args) -> int:
    from .runtime.build import build

    hw = _hw(args)
    mod, inputs = _load_with_inputs(args, args.input)
    if args.backend == "cpu":  # nothing is partitioned, but a typo in --exclude is still one
        from .partition.pipeline import check_exclude

        check_exclude(mod, _exclude(args))
    model = build(mod if args.backend == "cpu" else _partitioned(args, mod, hw), args.backend, hw=hw)
    _save_outputs(model.run(inputs), args.output)
    return 0


def cmd_compare(args) -> int:
    from .runtime.compare import compare

    hw = _hw(args)
    mod, inputs = _load_with_inputs(args, args.input)
    reference = _load_references(args, mod)
    report = compare(mod, inputs, reference, hw=hw, exclude=_exclude(args))
    _emit(report.to_json() + "\n" if args.format == "json" else report.to_text(), args.output)
    return 0


def _waveform(args):
    """The --trace window: --trace-layers or --trace-words (None without --trace)."""
    from .runtime.waveform import WaveformWindow, WordRange, waveform_format

    if not args.trace:
        for given, flag in ((args.trace_layers, "--trace-layers"), (args.trace_words, "--trace-words")):
            if given:
                raise NpuByocError(f"{flag}: give the waveform file with --trace FILE.vcd (or .fst)")
        return None
    waveform_format(args.trace)
    layers = tuple(args.trace_layers or ())  # names (a name may hold commas) or NAME,NAME: resolved by the plans
    if layers and args.trace_words:
        raise NpuByocError("--trace-layers and --trace-words: give one of them")
    if not layers and not args.trace_words:
        raise NpuByocError("--trace: name the window with --trace-layers NAME[,NAME] or --trace-words A:B (a whole "
                           "model's waveform is too large)")  # fmt: skip
    return WaveformWindow(Path(args.trace), layers, WordRange.parse(args.trace_words) if args.trace_words else None)


def cmd_cosim(args) -> int:
    from .runtime.cosim import CosimMismatch, cosim

    hw = _hw(args)
    waveform = _waveform(args)
    mod, inputs = _load_with_inputs(args, args.input)
    reference = _load_references(args, mod)
    failure = None
    try:
        report = cosim(_fitted(args, mod, hw), inputs, reference, hw=hw, progress=not args.no_progress,
                       waveform=waveform)
    except CosimMismatch as err:  # the report is complete: show and write it, then fail
        report, failure = err.report, str(err)
    sys.stdout.write(report.to_text(layers=not args.summary_only))
    sys.stdout.flush()
    for path, write in ((args.report, report.write_json), (args.csv, report.write_csv), (args.plot, report.plot),
                        (args.timeline, report.write_timeline)):
        if path:
            write(path)
            print(f"wrote {path}", file=sys.stderr)
    w = report.summary.get("waveform")
    if w:
        print(f"wrote {w['path']} ({w['format'].upper()}: {', '.join(escape.text(n, 80) for n in w['layers'])}; "
              f"cycles {w['cycles'][0]}-{w['cycles'][1]} of {w['partition']}, {w['ns_per_cycle']} ns per cycle)",
              file=sys.stderr)  # fmt: skip
    if failure:
        print(f"npu-byoc: error: {escape.text(failure, 2000)}", file=sys.stderr)
        return 1
    return 0


def cmd_compile(args) -> int:
    from .runtime.build import build

    hw = _hw(args)
    model = build(_fitted(args, _load(args), hw), args.backend, hw=hw, output=args.output)
    print(f"wrote {model.extra['library']} ({len(model.plans)} NPU partition(s), backend {args.backend})")
    return 0


def cmd_export(args) -> int:
    from .tools.export.command import run

    hw = _hw(args)
    return run(args, _fitted(args, _load(args), hw), hw)


def cmd_partition(args) -> int:
    from . import partition_for_npu

    hw = _hw(args)
    mod = partition_for_npu(_load(args), hw=hw, exclude=_exclude(args))
    _emit(mod.script(show_meta=False), args.output)
    return 0


def cmd_patterns(args) -> int:
    from .partition.docs import pattern_table_markdown, pattern_table_text

    _emit(pattern_table_markdown() if args.format == "md" else pattern_table_text(), args.output)
    return 0


def cmd_hw(args) -> int:
    from .arch.options import config_from, parse_assignment, render

    base = None
    if args.from_vela_ini:
        from .arch.vela_config import from_vela_ini

        if not args.system_config or not args.memory_mode:
            raise NpuByocError("--from-vela-ini needs --system-config NAME and --memory-mode NAME")
        base = from_vela_ini(args.from_vela_ini, args.system_config, args.memory_mode, args.axi_port_bytes)
    hw = config_from([parse_assignment(a) for a in args.hw or []], args.hw_file, base)
    _emit(render(hw, args.format), args.output)
    return 0


def cmd_sweep(args) -> int:
    from .tools.sweep.command import run

    return run(args, _hw(args))


def cmd_demo(args) -> int:
    from . import coverage_report, load_model, partition_for_npu
    from .ops.composites import npu_functions

    path = bundled_model(args.model)
    print(f"== npu_byoc demo: {path.name} (bundled)")
    mod = load_model(path)
    print(f"1. imported with TVM's {path.suffix[1:]} frontend: {len(mod['main'].params)} input(s)")
    part = partition_for_npu(mod)
    print(f"2. partitioned for the NPU: {len(npu_functions(part))} Codegen=\"npu\" function(s)")
    print("3. coverage report:\n")
    print(coverage_report(part).to_text())

    import numpy as np

    from .runtime.compare import compare

    x = np.load(path.with_suffix(".input.npy"))
    ref = np.load(path.with_suffix(".reference.npy"))
    print("4. run with the NPU partitions on the golden model, compared layer by layer with TVM's")
    print("   CPU build and with the outputs of TFLite's reference kernels (LiteRT):\n")
    print(compare(mod, [x], [ref]).to_text())

    print("5. co-simulation: every NPU partition on the Verilog RTL under Verilator as one stream, its")
    print("   feature maps resident in SRAM; cycles per layer, MAC-array utilization, LSB differences vs")
    print("   the golden model and vs TVM's CPU result of each layer (`npu-byoc cosim`: the per-layer table):\n")
    from .runtime.cosim import cosim
    from .runtime.verilator import VerilatorBuildError

    try:
        report = cosim(mod, [x], [ref], progress=True)
    except VerilatorBuildError as err:
        print(f"   skipped: {err}")
        return 0
    print(report.to_text(layers=False))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="npu-byoc", description="Run quantized int8 models on an int8 NPU through TVM BYOC.")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="import, partition, compare and co-simulate a bundled model")
    d.add_argument("--model", default="tiny_cnn", choices=sorted(BUNDLED), help="bundled model (default tiny_cnn)")
    d.set_defaults(func=cmd_demo)

    c = sub.add_parser("coverage", help="which operators run on the NPU, and why the others do not")
    c.add_argument("model", help=".tflite, .onnx or Relax .json")
    c.add_argument("--format", default="text", choices=["text", "json", "md", "html"])
    c.add_argument("-o", "--output", help="write to this file instead of stdout")
    c.set_defaults(func=cmd_coverage)

    k = sub.add_parser("compile", help="compile a model into a library (NPU partitions as generated C)")
    k.add_argument("model")
    k.add_argument("-o", "--output", required=True, help="the model library (.so)")
    k.add_argument("--backend", default="functional", choices=["functional", "verilator"])
    k.set_defaults(func=cmd_compile)

    r = sub.add_parser("run", help="run a model with its NPU partitions on a backend")
    r.add_argument("model")
    r.add_argument("--input", action="append", required=True, help=".npy, one per model input, in order")
    r.add_argument("--backend", default="functional", choices=["functional", "verilator", "golden", "cpu"])
    r.add_argument("--output", help="write exactly this file: .npy format (one output) or .npz (several, or a "
                   "name ending .npz); default: print")
    r.set_defaults(func=cmd_run)

    cp = sub.add_parser("compare", help="per-layer LSB differences: golden NPU path, TVM CPU, reference")
    cp.add_argument("model")
    cp.add_argument("--input", action="append", required=True)
    cp.add_argument("--reference", action="append", help="reference outputs (.npy), one per model output")
    cp.add_argument("--format", default="text", choices=["text", "json"])
    cp.add_argument("-o", "--output")
    cp.set_defaults(func=cmd_compare)

    cs = sub.add_parser("cosim", help="run every NPU layer on the RTL (Verilator): cycles, utilization, LSB differences")
    cs.add_argument("model")
    cs.add_argument("--input", action="append", required=True, help=".npy, one per model input, in order")
    cs.add_argument("--reference", action="append", help="reference outputs (.npy), one per model output")
    cs.add_argument("--report", help="write the JSON report here")
    cs.add_argument("--csv", help="write the per-layer table as CSV here")
    cs.add_argument("--plot", help="write a PNG of the per-layer MAC utilization here")
    cs.add_argument("--timeline", help="write the command timeline here: Chrome / Perfetto trace-event JSON "
                    "(docs/timeline.md)")
    cs.add_argument("--trace", metavar="FILE.vcd|FILE.fst", help="write the waveform of the --trace-layers "
                    "(every RTL signal, one sample per cycle) here (docs/waveforms.md)")
    cs.add_argument("--trace-layers", action="append", metavar="NAME[,NAME]",
                    help="the layers whose cycles --trace dumps (names as in the report; one partition; "
                    "repeatable: one name a time for a name with a comma)")
    cs.add_argument("--trace-words", metavar="[PARTITION:]A:B",
                    help="or the commands whose stream words lie in [A, B) (the timeline's and the report's word "
                    "numbers), each with its register writes")
    cs.add_argument("--summary-only", action="store_true", help="print the summary, not the per-layer table")
    cs.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    cs.set_defaults(func=cmd_cosim)

    pt = sub.add_parser("partition", help="print the partitioned Relax module")
    pt.add_argument("model")
    pt.add_argument("-o", "--output")
    pt.set_defaults(func=cmd_partition)

    for q in (c, k, r, cp, cs, pt):
        q.add_argument(
            "--exclude", action="append", metavar="OP_OR_LAYER",
            help="keep an operator type (SOFTMAX, CONV_2D), a layer (by name) or an NPU operation (npu.softmax) "
            "on the CPU; repeatable",
        )
        q.add_argument(
            "--input-shape", action="append", type=parse_input_shape, metavar="NAME=d0,d1,...",
            help="fix an input's open dimensions (repeatable); a plain N fixes every open batch "
            "(default 1)",
        )

    h = sub.add_parser("hw", help="print the hardware configuration in effect (with --hw / --hw-file)")
    h.add_argument("--format", default="text", choices=["text", "toml", "json"])
    h.add_argument("-o", "--output")
    h.add_argument("--from-vela-ini", metavar="VELA.ini",
                   help="start from a Vela system configuration and memory mode (docs/memory.md)")
    h.add_argument("--system-config", metavar="NAME", help="Vela's [System_Config.NAME]")
    h.add_argument("--memory-mode", metavar="NAME", help="Vela's [Memory_Mode.NAME]")
    h.add_argument("--axi-port-bytes", type=int, default=8, choices=[8, 16],
                   help="Vela's AXI port width in bytes per cycle: 8 (Ethos-U55, default), 16 (U65, U85)")
    h.set_defaults(func=cmd_hw)

    from .tools.sweep.command import add_arguments as add_sweep_arguments

    sw = sub.add_parser("sweep", help="models x hardware configurations: cycles, area, Pareto front (docs/sweep.md)")
    add_sweep_arguments(sw)
    sw.set_defaults(func=cmd_sweep)

    for q in (c, k, r, cp, cs, pt, h, sw):
        q.add_argument(
            "--hw", action="append", metavar="FIELD=VALUE",
            help="a hardware configuration field (repeatable), e.g. --hw array_rows=16 --hw sram_bytes=512K",
        )
        q.add_argument("--hw-file", metavar="CFG.toml", help="hardware configuration fields from a TOML file")

    t = sub.add_parser("patterns", help="print the NPU pattern table")
    t.add_argument("--format", default="text", choices=["text", "md"])
    t.add_argument("-o", "--output")
    t.set_defaults(func=cmd_patterns)

    from .tools.fuzz.command import add_parser as add_fuzz_parser

    add_fuzz_parser(sub)

    from .tools.export.command import add_parser as add_export_parser

    add_export_parser(sub, cmd_export, parse_input_shape)
    return p


# Arguments naming files the command writes: their directory is created first.
_OUTPUT_ARGS = ("output", "report", "csv", "plot", "timeline", "trace")


def _prepare_output_dirs(args) -> None:
    for key in _OUTPUT_ARGS:
        path = getattr(args, key, None)
        if isinstance(path, str) and path:
            if Path(path).is_dir():
                raise NpuByocError(f"{path}: is a directory (--{key} takes a file name)")
            parent = Path(path).parent
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise NpuByocError(f"{path}: cannot create the directory {parent} ({err.strerror})") from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        _prepare_output_dirs(args)
        return args.func(args)
    except NpuByocError as err:
        # Messages quote model-supplied names: no control characters reach the terminal.
        print(f"npu-byoc: error: {escape.text(err, 2000)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # stdout piped into `head`: stop quietly, as other CLI tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:  # Ctrl-C: the shell's convention, 128 + SIGINT, and no traceback
        print("npu-byoc: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
