"""torchvision models as int8 ONNX through onnxruntime's quantizer, through npu_byoc: coverage,
partitions, and the NPU result against onnxruntime and against TVM's CPU build.

Models the tests never saw, made as a PyTorch user makes them: torchvision's definition with
random weights (torch.manual_seed(0)), ``torch.onnx.export``, then onnxruntime's
``quantize_static`` after its ``quant_pre_process`` (int8 activations, per-channel int8 weights,
a random calibration set) in both of its formats, QDQ and QOperator. Two steps, two environments:

    # 1. make the models and onnxruntime's outputs (needs torch, torchvision, onnx and
    #    onnxruntime, which npu_byoc itself never needs: use a separate venv)
    python bench/onnx_apps.py --make /tmp/onnx_apps [--models squeezenet1_1 ...] [--formats qdq]
    # 2. run them through npu_byoc (the project's venv; neither torch nor onnxruntime)
    .venv/bin/python bench/onnx_apps.py /tmp/onnx_apps [--formats qdq qop]
    # smoke run of step 2: the committed torchvision-style fixtures (tools/make_transformer_models.py)
    .venv/bin/python bench/onnx_apps.py --quick

Step 2 prints, per model and format, the columns of keras_apps.py (operators on the NPU, MACs on
the NPU, NPU partitions, CPU<->NPU transitions, operators left on the CPU by type, with each
type's reasons indented below) and:
  from ``npu_byoc.runtime.compare`` on the golden backend: the model output's largest
  difference from onnxruntime's (graph optimizations disabled: its reference QDQ / QLinear
  kernels) and from TVM's CPU build of the same file, and TVM's CPU build against onnxruntime;
  from ``npu_byoc.runtime.cosim``: the largest difference of any NPU layer from TVM's CPU build
  of that layer fed the same input (the issue's "within 1 LSB layer by layer": not compounded),
  the RTL against the golden model (0: bit-exact) and the RTL's cycles of the NPU partitions.
All differences in LSB of the output's (layer's) int8 scale.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from benchlib import COVERAGE_HEADER, FIXTURES, QUICK_BANNER, coverage_cells, one_line, print_reasons, sample  # (puts the repo on sys.path)

# --quick: torchvision-style ONNX fixtures quantized the same way, onnxruntime's outputs in their .npz
QUICK_FIXTURES = {"shufflenet_unit": "channel_shuffle_qdq.onnx", "squeezenet_pools": "ceil_pool_qdq.onnx",
                  "regnet_groups": "grouped_conv_qdq.onnx"}  # fmt: skip
# name -> (torchvision.models constructor, its keyword arguments, the input's side in pixels)
MODELS = {
    "regnet_x_400mf": ("regnet_x_400mf", {}, 64),
    "shufflenet_v2_x0_5": ("shufflenet_v2_x0_5", {}, 64),
    "squeezenet1_1": ("squeezenet1_1", {}, 64),
    "mobilenet_v2": ("mobilenet_v2", {}, 64),
}
FORMATS = {"qdq": "QDQ", "qop": "QOperator"}  # file suffix -> onnxruntime's QuantFormat
OPSET = 17
CALIBRATION = 8


def _import_torchvision():
    """torchvision without its C extension. PyPI's torchvision wheel links CUDA builds of torch;
    beside the CPU wheel of torch its extension (the detection ops: nms, roi_align) does not
    load and registering their meta kernels fails the import. The classification models use
    none of them: skip the two registration modules."""
    import types

    for name in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
        sys.modules.setdefault(name, types.ModuleType(name))
    import torchvision

    return torchvision


def _export(name: str, path: Path):
    """torchvision's model ``name`` (random weights, seed 0) exported to ONNX at ``path``;
    its input shape."""
    import torch

    torchvision = _import_torchvision()

    ctor, kwargs, side = MODELS[name]
    torch.manual_seed(0)
    model = getattr(torchvision.models, ctor)(weights=None, **kwargs).eval()
    shape = (1, 3, side, side)
    torch.onnx.export(model, (torch.zeros(shape),), str(path), input_names=["input"], output_names=["output"],
                      opset_version=OPSET, dynamo=False)  # the TorchScript exporter: one node per torch op
    return shape


def _quantize(fpath: Path, qpath: Path, fmt: str, calib: np.ndarray) -> None:
    """onnxruntime's documented recipe: quant_pre_process (shape inference and its graph
    optimizer; it removes the Identity nodes the exporter puts on the folded BatchNorm biases,
    on which the QOperator quantizer fails), then quantize_static."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    pre = qpath.with_suffix(".pre.onnx")
    quant_pre_process(str(fpath), str(pre))

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"input": calib[i : i + 1]} for i in range(len(calib))])

        def get_next(self):
            return next(self.it, None)

    quantize_static(str(pre), str(qpath), Reader(), quant_format=QuantFormat[FORMATS[fmt]], per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)  # fmt: skip
    pre.unlink()


def make(out: Path, names: list[str], formats: list[str]) -> None:
    try:
        import onnxruntime as ort
        import torch  # noqa: F401

        _import_torchvision()
    except ImportError as err:
        sys.exit(f"bench/onnx_apps.py --make needs torch, torchvision, onnx and onnxruntime ({err.name} is missing): "
                 "pip install torch torchvision onnx onnxruntime, in a separate venv (npu_byoc never needs them)")

    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        fpath = out / f"{name}.float.onnx"
        shape = _export(name, fpath)
        rng = np.random.default_rng(0)
        calib = rng.uniform(-1, 1, (CALIBRATION, *shape[1:])).astype(np.float32)
        x = rng.uniform(-1, 1, shape).astype(np.float32)
        np.save(out / f"{name}.in.npy", x)
        for fmt in formats:
            qpath = out / f"{name}_{fmt}.onnx"
            _quantize(fpath, qpath, fmt, calib)
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            sess = ort.InferenceSession(str(qpath), options, providers=["CPUExecutionProvider"])
            np.save(out / f"{name}_{fmt}.out.npy", sess.run(None, {"input": x})[0])
            print(f"{name} {fmt}: {qpath.stat().st_size:,} bytes", flush=True)


def made(folder: Path, names: list[str], formats: list[str]):
    """(row name, model file, input, onnxruntime's output) of what --make wrote, None if missing."""
    for name in names:
        for fmt in formats:
            path = folder / f"{name}_{fmt}.onnx"
            if not path.exists():
                yield f"{name} {fmt}", path, None, None
            else:
                yield f"{name} {fmt}", path, np.load(folder / f"{name}.in.npy"), np.load(folder / f"{name}_{fmt}.out.npy")


def fixtures():
    """The same for the committed fixtures of --quick (their first recorded sample)."""
    for name, fixture in QUICK_FIXTURES.items():
        (x,), (y,) = sample(fixture)
        yield f"{name} qdq", FIXTURES / fixture, x, y


def run(models) -> None:
    import npu_byoc
    from npu_byoc.runtime.compare import compare
    from npu_byoc.runtime.cosim import cosim

    print(f"{COVERAGE_HEADER} {'vs ORT':>6} {'vs TVM':>6} {'TVM-ORT':>7} {'layers':>6} {'RTL':>3} {'cycles':>10} "
          f"{'seconds':>7}  on the CPU (why: the indented lines)")
    for name, path, x, want in models:
        if x is None:
            print(f"{name:<24} (no {path}: make it with --make)")
            continue
        t0 = time.perf_counter()
        try:
            mod = npu_byoc.load_model(path)
            part = npu_byoc.partition_for_npu(mod)  # once: coverage and cosim take it as it is
            lead, cpu, reasons = coverage_cells(name, npu_byoc.coverage_report(part))
            report = compare(mod, [x], [want])  # (partitions its own copy beside TVM's CPU build)
            rtl = cosim(part, [x], strict=False).summary
        except Exception as err:  # one model's failure is a figure (e.g. does not import), not the end
            print(f"{name:<24} failed: {one_line(err)}", flush=True)
            continue
        (out,) = report.outputs
        layers = "-" if rtl["max_diff_tvm"] is None else rtl["max_diff_tvm"]
        print(f"{lead} {out.golden_vs_reference.max_lsb:>6g} {out.golden_vs_cpu.max_lsb:>6g} "
              f"{out.cpu_vs_reference.max_lsb:>7g} {layers:>6} {rtl['max_diff_golden']:>3} {rtl['cycles']:>10,} "
              f"{time.perf_counter() - t0:>7.1f}  {cpu}", flush=True)
        print_reasons(reasons)
    print("vs ORT / vs TVM: the NPU's model output against onnxruntime's / TVM's CPU build; TVM-ORT: TVM's CPU "
          "build against onnxruntime; layers: the largest difference of any NPU layer from TVM's CPU build of it fed the "
          "same input; RTL: the RTL against the golden model; in LSB. cycles: the RTL's, of the NPU partitions.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path, nargs="?", help="where --make writes the models / step 2 reads them")
    ap.add_argument("--quick", action="store_true", help="smoke run of step 2 on committed fixtures (no torch)")
    ap.add_argument("--make", action="store_true", help="make the models and onnxruntime's outputs (torch)")
    ap.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    ap.add_argument("--formats", nargs="+", choices=list(FORMATS), default=list(FORMATS))
    args = ap.parse_args(argv)
    if args.quick:
        print(QUICK_BANNER)
        run(fixtures())
    elif args.folder is None:
        ap.error("give the models' folder (or --quick)")
    elif args.make:
        make(args.folder, args.models, args.formats)
    else:
        run(made(args.folder, args.models, args.formats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
