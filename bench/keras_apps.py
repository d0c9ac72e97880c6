"""keras.applications models and MLPerf Tiny's reference architectures as int8 TFLite, through
npu_byoc: coverage, partitions, and the NPU result against LiteRT's reference kernels.

Models the tests never saw: TensorFlow's converter (full-integer int8, per-channel weights),
random weights, a random calibration set, small inputs. Two steps, two environments:

    # 1. make the models and LiteRT's outputs (needs tensorflow and ai-edge-litert, which
    #    npu_byoc itself never needs: use a separate venv)
    python bench/keras_apps.py --make /tmp/keras_apps [--models mobilenet_v3_small ...]
    #    (or re-record LiteRT's outputs of models made before, with ai-edge-litert only)
    python bench/keras_apps.py --litert /tmp/keras_apps
    # 2. run them through npu_byoc (the project's venv)
    .venv/bin/python bench/keras_apps.py /tmp/keras_apps [--backend golden|functional|verilator]
    # smoke run of step 2 without TensorFlow: the committed MLPerf Tiny fixtures (DS-CNN, the
    # autoencoder; tools/make_models.py made them the same way) against their LiteRT outputs
    .venv/bin/python bench/keras_apps.py --quick
    # step 2 over any committed TFLite fixtures, e.g. issue 24's transformers
    .venv/bin/python bench/keras_apps.py --fixtures vit_tiny_int8 kws_transformer_int8

Step 2 prints, per model: operators on the NPU, MACs on the NPU, NPU partitions, CPU<->NPU
transitions, the operators left on the CPU (by type) and the largest difference of the model
output, in LSB, from LiteRT's reference kernels ("vs ref", OpResolverType.BUILTIN_REF: issue
24's contract) and from its default optimized kernels ("vs opt", BUILTIN_WITHOUT_DEFAULT_DELEGATES).
The two LiteRT runs differ by design: the optimized CONV_2D rounds a negative tie of the
requantize's final right shift up where the reference kernels' RoundingDivideByPOT rounds it
away from zero (DEPTHWISE_CONV_2D differs likewise), and the optimized MEAN over H and W rounds
otherwise; the NPU follows the reference kernels (tests/test_scale_audit.py holds one measured
element of each). Each LiteRT run is a child process: the reference SOFTMAX aborts when a row's
exponentials sum to 512 or more (a 1,000-class head of random weights often does; the NPU
rounds exactly there, docs/numerics.md §8c). When the reference kernels fail on a model that
ends in a SOFTMAX, --make also records LiteRT's outputs of the model cut before it
(NAME.logits.tflite): step 2 runs it as the row "NAME:logits".
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from benchlib import COVERAGE_HEADER, QUICK_BANNER, coverage_cells, one_line, print_reasons, sample  # (puts the repo on sys.path)

# --quick: int8 TFLite fixtures of MLPerf Tiny's architectures, LiteRT's outputs in their .npz
QUICK_FIXTURES = {"ds_cnn": "ds_cnn_int8.tflite", "fc_autoencoder": "autoencoder_int8.tflite"}
# name -> (keras.applications constructor ("tf_keras:NAME": tf_keras.applications', Keras 2's), or
# a builder of this file; its keyword arguments; the input shape without the batch)
MODELS = {
    "mobilenet": ("MobileNet", dict(alpha=0.25), (96, 96, 3)),  # also MLPerf Tiny's visual wake words
    "mobilenet_v2": ("MobileNetV2", dict(alpha=0.35), (96, 96, 3)),
    "mobilenet_v3_small": ("MobileNetV3Small", dict(alpha=0.75, include_preprocessing=False), (96, 96, 3)),
    "mobilenet_v3_large": ("MobileNetV3Large", dict(alpha=0.75, include_preprocessing=False), (64, 64, 3)),
    "efficientnet_b0": ("EfficientNetB0", {}, (64, 64, 3)),
    "resnet50": ("ResNet50", {}, (64, 64, 3)),
    "densenet121": ("DenseNet121", {}, (64, 64, 3)),
    # issue 24: today's CNNs and a transformer (the smallest member of each family Keras has)
    "convnext_tiny": ("ConvNeXtTiny", {}, (64, 64, 3)),
    "regnetx002": ("tf_keras:RegNetX002", {}, (64, 64, 3)),  # Keras 3 has no RegNet: Keras 2's (tf-keras)
    "regnety002": ("tf_keras:RegNetY002", {}, (64, 64, 3)),
    "efficientnet_v2_b0": ("EfficientNetV2B0", {}, (64, 64, 3)),
    "nasnet_mobile": ("NASNetMobile", {}, (64, 64, 3)),
    "inception_v3": ("InceptionV3", {}, (75, 75, 3)),  # the smallest input its constructor accepts
    "vit": ("vit", {}, (64, 64, 3)),
    # MLPerf Tiny v1.0 reference architectures
    "resnet8": ("resnet8", {}, (32, 32, 3)),  # image classification (CIFAR-10)
    "ds_cnn": ("ds_cnn", {}, (49, 10, 1)),  # keyword spotting
    "fc_autoencoder": ("fc_autoencoder", {}, (640,)),  # anomaly detection (ToyADMOS)
}


def resnet8(input_shape):
    """MLPerf Tiny's image-classification ResNet-8: a 16-filter stem and three residual stacks
    (16, 32, 64 filters; the last two downsample with a 1x1 conv shortcut)."""
    from tensorflow import keras
    from tensorflow.keras import layers as L

    def stack(x, filters, stride):
        y = L.Conv2D(filters, 3, strides=stride, padding="same")(x)
        y = L.Activation("relu")(L.BatchNormalization()(y))
        y = L.BatchNormalization()(L.Conv2D(filters, 3, padding="same")(y))
        if stride > 1:
            x = L.Conv2D(filters, 1, strides=stride, padding="same")(x)
        return L.Activation("relu")(L.Add()([x, y]))

    x0 = keras.Input(input_shape)
    x = L.Activation("relu")(L.BatchNormalization()(L.Conv2D(16, 3, padding="same")(x0)))
    x = stack(stack(stack(x, 16, 1), 32, 2), 64, 2)
    x = L.Flatten()(L.AveragePooling2D(pool_size=x.shape[1:3])(x))
    return keras.Model(x0, L.Dense(10, activation="softmax")(x))


def ds_cnn(input_shape):
    """MLPerf Tiny's keyword-spotting DS-CNN: a 10x4 stride-2 conv, four depthwise-separable
    blocks of 64 channels, an average pool over the whole map, 12 classes."""
    from tensorflow import keras
    from tensorflow.keras import layers as L

    x0 = keras.Input(input_shape)
    x = L.Activation("relu")(L.BatchNormalization()(L.Conv2D(64, (10, 4), strides=2, padding="same")(x0)))
    for _ in range(4):
        x = L.Activation("relu")(L.BatchNormalization()(L.DepthwiseConv2D(3, padding="same")(x)))
        x = L.Activation("relu")(L.BatchNormalization()(L.Conv2D(64, 1)(x)))
    x = L.Flatten()(L.AveragePooling2D(pool_size=x.shape[1:3])(x))
    return keras.Model(x0, L.Dense(12, activation="softmax")(x))


def fc_autoencoder(input_shape):
    """MLPerf Tiny's anomaly-detection autoencoder: 640 -> 4 x 128 -> 8 -> 4 x 128 -> 640, each
    hidden Dense with BatchNormalization and ReLU."""
    from tensorflow import keras
    from tensorflow.keras import layers as L

    x0 = keras.Input(input_shape)
    x = x0
    for units in (128, 128, 128, 128, 8, 128, 128, 128, 128):
        x = L.Activation("relu")(L.BatchNormalization()(L.Dense(units)(x)))
    return keras.Model(x0, L.Dense(input_shape[0])(x))


def vit(input_shape):
    """A ViT as Keras' examples write it: 8x8 stride-8 patch Conv2D (64x64x3 -> 64 tokens of 64),
    a learned position embedding, 4 pre-norm encoder blocks (4 heads of 16, GELU MLP of 128),
    LayerNormalization, token mean, Dense 10. The blocks are the fixture vit_tiny_int8's
    (tools/make_transformer_models.py), at twice its width and depth."""
    from tensorflow import keras
    from tensorflow.keras import layers as L

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    from make_transformer_models import _encoder_block, _position_embedding

    patch, dim = input_shape[0] // 8, 64
    x0 = keras.Input(input_shape)
    x = L.Conv2D(dim, patch, strides=patch, name="patch_embed")(x0)
    x = _position_embedding(64, dim, "pos_embed")(L.Reshape((64, dim), name="tokens")(x))
    for b in range(4):
        x = _encoder_block(x, dim, 4, 2 * dim, f"block{b}")
    x = L.GlobalAveragePooling1D(name="token_mean")(L.LayerNormalization(epsilon=1e-6, name="norm")(x))
    return keras.Model(x0, L.Dense(10, activation="softmax", name="head")(x))


def _keras_model(name: str):
    import tensorflow as tf

    ctor, kwargs, shape = MODELS[name]
    if ctor in globals():
        return globals()[ctor](shape)
    if ctor.startswith("tf_keras:"):
        try:
            import tf_keras
        except ImportError:
            raise ImportError(f"{name} is Keras 2's (Keras 3 dropped RegNet): pip install tf-keras") from None
        return getattr(tf_keras.applications, ctor.partition(":")[2])(input_shape=shape, weights=None, **kwargs)
    return getattr(tf.keras.applications, ctor)(input_shape=shape, weights=None, **kwargs)


def make(out: Path, names: list[str]) -> None:
    try:
        import ai_edge_litert  # noqa: F401 (record's child processes run it)
        import tensorflow as tf
    except ImportError as err:
        sys.exit(f"bench/keras_apps.py --make needs TensorFlow and LiteRT ({err.name} is missing): "
                 "pip install tensorflow ai-edge-litert, in a separate venv (npu_byoc never needs them)")

    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        shape = MODELS[name][2]
        tf.keras.utils.set_random_seed(0)
        try:
            model = _keras_model(name)
        except ImportError as err:  # an optional package one model needs: the others still get made
            print(f"{name}: not made: {err}", flush=True)
            continue
        rng = np.random.default_rng(0)
        calib = rng.uniform(-1, 1, (8, *shape)).astype(np.float32)
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = lambda: ([calib[i : i + 1]] for i in range(len(calib)))
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = conv.inference_output_type = tf.int8
        data = conv.convert()
        (out / f"{name}.tflite").write_bytes(data)
        np.save(out / f"{name}.in.npy", rng.integers(-128, 128, (1, *shape)).astype(np.int8))
        record(out, name)
        print(f"{name}: {len(data):,} bytes", flush=True)


# LiteRT's op resolvers: the reference kernels (issue 24's contract) and the default optimized ones
KERNELS = {"ref": "BUILTIN_REF", "opt": "BUILTIN_WITHOUT_DEFAULT_DELEGATES"}


def litert_run(kernels: str, model: Path, x: Path, out: Path) -> None:
    """The child process of :func:`litert_output`: one invoke of ``model`` on ``x``, output to ``out``."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_path=str(model), experimental_op_resolver_type=getattr(OpResolverType, kernels))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.load(x))
    it.invoke()
    np.save(out, it.get_tensor(it.get_output_details()[0]["index"]))


def litert_output(kernels: str, model: Path, x: Path, out: Path) -> str | None:
    """Run LiteRT with ``kernels`` in a child process (its reference SOFTMAX aborts the process):
    None when ``out`` was written, else why not, in one line."""
    import signal
    import subprocess

    proc = subprocess.run([sys.executable, __file__, "--litert-run", kernels, str(model), str(x), str(out)],
                          capture_output=True, text=True, timeout=3600)  # fmt: skip
    if proc.returncode == 0:
        return None
    last = [line for line in proc.stderr.splitlines() if line.strip()][-1:] or [f"exit status {proc.returncode}"]
    return f"LiteRT {kernels} failed ({signal.Signals(-proc.returncode).name if proc.returncode < 0 else last[0][:200]})"


def without_final_softmax(data: bytes) -> bytes | None:
    """The model cut before the SOFTMAX that makes its one output (its logits as the output), or
    None if no SOFTMAX makes it."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(data, 0)
    graph = model.subgraphs[0]
    last = [op for op in graph.operators if list(op.outputs) == list(graph.outputs)]
    if len(last) != 1 or model.operatorCodes[last[0].opcodeIndex].builtinCode != schema.BuiltinOperator.SOFTMAX:
        return None
    graph.outputs = [last[0].inputs[0]]
    graph.operators.remove(last[0])
    model.signatureDefs = None  # they name the old output
    builder = flatbuffers.Builder(len(data) + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def record(folder: Path, name: str, x: Path | None = None) -> None:
    """LiteRT's outputs of ``name`` on its input: NAME.ref.npy (reference kernels) and NAME.opt.npy
    (optimized), or NAME.ref.txt / NAME.opt.txt saying why the run failed; if the reference
    kernels fail on a model that ends in a SOFTMAX, NAME.logits.tflite, recorded the same way
    on NAME's input."""
    model, x = folder / f"{name}.tflite", x or folder / f"{name}.in.npy"
    for tag, kernels in KERNELS.items():
        for stale in (folder / f"{name}.{tag}.npy", folder / f"{name}.{tag}.txt"):
            stale.unlink(missing_ok=True)
        failed = litert_output(kernels, model, x, folder / f"{name}.{tag}.npy")
        if failed:
            (folder / f"{name}.{tag}.txt").write_text(failed + "\n")
            print(f"{name}: {failed}", flush=True)
        if failed and tag == "ref" and (cut := without_final_softmax(model.read_bytes())) is not None:
            (folder / f"{name}.logits.tflite").write_bytes(cut)
            record(folder, f"{name}.logits", x)


def references(folder: Path, name: str) -> dict[str, np.ndarray | str | None]:
    """LiteRT's recorded outputs of ``name`` by kernels ("ref", "opt"): the array, why it is missing
    (NAME.ref.txt), or None. A folder --make wrote before the reference kernels were recorded
    holds the optimized kernels' output as NAME.out.npy."""
    refs: dict[str, np.ndarray | str | None] = {}
    for tag in KERNELS:
        npy, why = folder / f"{name}.{tag}.npy", folder / f"{name}.{tag}.txt"
        legacy = folder / f"{name}.out.npy" if tag == "opt" else npy
        refs[tag] = (np.load(npy) if npy.exists() else np.load(legacy) if legacy.exists()
                     else why.read_text().strip() if why.exists() else None)  # fmt: skip
    return refs


def made(folder: Path, names: list[str]):
    """(name, model file, input, LiteRT's outputs) of the models --make wrote, None if missing; a
    model whose reference kernels abort in its SOFTMAX is followed by its logits row."""
    for name in names:
        path = folder / f"{name}.tflite"
        if not path.exists():
            yield name, path, None, None
            continue
        x = np.load(folder / f"{name}.in.npy")
        yield name, path, x, references(folder, name)
        if (folder / f"{name}.logits.tflite").exists():
            yield f"{name}:logits", folder / f"{name}.logits.tflite", x, references(folder, f"{name}.logits")


def fixtures(named: dict[str, str]):
    """The same for committed fixtures (row name -> file; their first recorded sample, whose
    resolver the fixture's .npz names: tools/make_models.py records the reference kernels)."""
    from benchlib import FIXTURES

    for name, fixture in named.items():
        if not (FIXTURES / fixture).exists():
            yield name, FIXTURES / fixture, None, None
            continue
        (x,), (y,) = sample(fixture)
        resolver = str(np.load(FIXTURES / fixture.replace(".tflite", ".npz"))["reference"])
        yield name, FIXTURES / fixture, x, {"ref": y, "opt": None} if "BUILTIN_REF" in resolver else {"ref": None, "opt": y}


def lsb_cell(got: np.ndarray, want: np.ndarray | str | None) -> str:
    """The largest difference in LSB, "-" for no recorded output, "abort" for a failed LiteRT run."""
    if want is None:
        return "-"
    if isinstance(want, str):
        return "abort"
    return str(int(np.abs(got.astype(np.int32) - want.astype(np.int32)).max()))


def run(models, backend: str) -> None:
    import npu_byoc

    print(f"{COVERAGE_HEADER} {'vs ref':>6} {'vs opt':>6} {'seconds':>7}  on the CPU (why: the indented lines)")
    failed = {}
    for name, path, x, want in models:
        if x is None:
            print(f"{name:<24} (no {path}: make it with --make)")
            continue
        t0 = time.perf_counter()
        try:
            part = npu_byoc.partition_for_npu(npu_byoc.load_model(path))  # once, for both
            lead, cpu, reasons = coverage_cells(name, npu_byoc.coverage_report(part))
            got = npu_byoc.build(part, backend).run([x])[0]
        except Exception as err:  # one model's failure is a figure (e.g. does not import), not the end
            print(f"{name:<24} failed: {one_line(err)}", flush=True)
            continue
        ref, opt = lsb_cell(got, want["ref"]), lsb_cell(got, want["opt"])
        print(f"{lead} {ref:>6} {opt:>6} {time.perf_counter() - t0:>7.1f}  {cpu}", flush=True)
        print_reasons(reasons)
        if isinstance(want["ref"], str):
            failed[name] = want["ref"]
    for name, why in failed.items():
        print(f"{name}: {why}")
    print("vs ref: LiteRT's reference kernels (BUILTIN_REF), the contract; vs opt: its optimized kernels, "
          "which round some ties otherwise (docstring). ops on NPU counts every operator of the file; "
          "SHAPE / PACK / STRIDED_SLICE chains that the import computes (constants) count as CPU operators "
          "but do no run-time work and are not listed.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path, nargs="?", help="where --make writes the models / step 2 reads them")
    ap.add_argument("--quick", action="store_true", help="smoke run of step 2 on committed fixtures (no TensorFlow)")
    ap.add_argument("--make", action="store_true", help="make the models and LiteRT's outputs (tensorflow)")
    ap.add_argument("--litert", action="store_true",
                    help="record LiteRT's outputs (reference and optimized kernels) of models made before (ai-edge-litert)")
    ap.add_argument("--litert-run", nargs=4, help=argparse.SUPPRESS)  # litert_output's child process
    ap.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    ap.add_argument("--backend", default="golden", choices=["golden", "functional", "verilator"])
    ap.add_argument("--fixtures", nargs="+", metavar="NAME",
                    help="step 2 over these committed TFLite fixtures instead (e.g. vit_tiny_int8 kws_transformer_int8)")
    args = ap.parse_args(argv)
    if args.litert_run:
        litert_run(args.litert_run[0], *map(Path, args.litert_run[1:]))
    elif args.quick:
        print(QUICK_BANNER)
        run(fixtures(QUICK_FIXTURES), args.backend)
    elif args.fixtures:
        run(fixtures({n.removesuffix(".tflite"): n.removesuffix(".tflite") + ".tflite" for n in args.fixtures}), args.backend)
    elif args.folder is None:
        ap.error("give the models' folder (or --quick)")
    elif args.make:
        make(args.folder, args.models)
    elif args.litert:
        for name in (n for n in args.models if (args.folder / f"{n}.tflite").exists()):
            record(args.folder, name)
    else:
        run(made(args.folder, args.models), args.backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
