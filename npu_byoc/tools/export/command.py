"""``npu-byoc export MODEL -o DIR``: the command line of the exporter (docs/export.md)."""

from __future__ import annotations

from pathlib import Path

from ...util import escape
from . import export_model


def add_parser(sub, func, input_shape) -> None:
    """The ``export`` subcommand; ``func`` loads the model and the hardware configuration (the
    CLI's own options) and calls :func:`run`; ``input_shape`` parses ``--input-shape``."""
    e = sub.add_parser("export", help="a model as a stand-alone C99 library of its NPU command stream (docs/export.md)")
    e.add_argument("model", help=".tflite, .onnx or Relax .json: every run-time operator on the NPU")
    e.add_argument("-o", "--output-dir", dest="directory", required=True, metavar="DIR",
                   help="the directory to write (created; files of the same name are replaced)")
    e.add_argument("--input-shape", action="append", type=input_shape, metavar="NAME=d0,d1,...",
                   help="fix an input's open dimensions (repeatable); a plain N fixes every open batch (default 1)")
    e.add_argument("--hw", action="append", metavar="FIELD=VALUE",
                   help="a hardware configuration field (repeatable), e.g. --hw array_rows=16 --hw sram_bytes=512K")
    e.add_argument("--hw-file", metavar="CFG.toml", help="hardware configuration fields from a TOML file")
    e.add_argument("--exclude", action="append", metavar="OP_OR_LAYER",
                   help="keep an operator type, a layer or an NPU operation on the CPU (repeatable): the export "
                        "then refuses the model, naming them")  # fmt: skip
    e.set_defaults(func=func)


def run(args, mod, hw) -> int:
    result = export_model(mod, args.directory, hw, model_name=Path(args.model).name)
    where = escape.text(result.directory)
    print(f"wrote {where}: {', '.join(f for f in result.files if '/' not in f)}, rtl/, sim/")
    print(f"  {len(result.partitions)} NPU partition(s) ({', '.join(result.partitions)}): {result.stream_words} "
          f"stream words, {result.constant_bytes} constant bytes, {result.scratch_bytes} scratch bytes")  # fmt: skip
    print(f"  build: make -C {where}   (then: {where}/model_run in.bin out.bin)")
    return 0
