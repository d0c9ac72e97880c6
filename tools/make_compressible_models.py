#!/usr/bin/env python3
"""Build the compressible-weight fixtures: a pruned and a clustered int8 MobileNet, with LiteRT references.

    /work/wt/venv-models/bin/python tools/make_compressible_models.py [--out DIR]

Both start from ``keras.applications.MobileNet(alpha=0.25, input 64x64x3, classes=10,
weights=None)``: random weights from a fixed seed (no training, no tfmot), then per
convolution kernel (conv, depthwise, the 1x1 classifier):

``mobilenet_v1_pruned_int8.tflite``
    magnitude pruning: the 60% of the kernel's weights smallest in magnitude set to 0; the
    survivors keep their values (spread over the int8 range after quantization).
``mobilenet_v1_clustered_int8.tflite``
    16 values per layer: 1-D k-means (by hand, 25 Lloyd iterations from quantiles) on the
    kernel's weights in units of their output channel's largest magnitude, the two extreme
    centroids held at -1 and +1; every weight is replaced by its centroid times its channel's
    largest magnitude. Each channel keeps its largest magnitude, so the per-channel int8
    quantization maps the layer onto the same 16 int8 values in every channel - what
    clustering a model for a per-channel int8 NPU gives.

Then BatchNorm statistics are set to those of the calibration batch (make_models.calibrate_bn:
activations stay in range without training), the model is converted full-integer int8 with a
random representative dataset, and LiteRT's reference kernels give ``NAME.npz`` (2 inputs and
their outputs; no per-tensor dump, to keep the fixtures small).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_models as mm  # noqa: E402  (tools/ is not a package)

SHAPE = (64, 64, 3)
PRUNE_FRACTION = 0.6
CLUSTERS = 16
KMEANS_ITERATIONS = 25


def prune(kernel: np.ndarray) -> np.ndarray:
    """The kernel with its PRUNE_FRACTION smallest-magnitude weights set to 0."""
    threshold = np.quantile(np.abs(kernel), PRUNE_FRACTION)
    return np.where(np.abs(kernel) > threshold, kernel, 0).astype(kernel.dtype)


def cluster(kernel: np.ndarray, channel_axis: int) -> np.ndarray:
    """The kernel with CLUSTERS values per layer in units of each output channel's largest magnitude."""
    scale = np.max(np.abs(kernel), axis=tuple(a for a in range(kernel.ndim) if a != channel_axis), keepdims=True)
    scale = np.where(scale > 0, scale, 1)
    x = (kernel / scale).ravel()
    centroids = np.quantile(x, np.linspace(0, 1, CLUSTERS))
    centroids[0], centroids[-1] = -1.0, 1.0
    for _ in range(KMEANS_ITERATIONS):
        nearest = np.abs(x[:, None] - centroids[None, :]).argmin(axis=1)
        for k in range(1, CLUSTERS - 1):  # the extremes stay at -1, +1
            if (nearest == k).any():
                centroids[k] = x[nearest == k].mean()
    nearest = np.abs(x[:, None] - centroids[None, :]).argmin(axis=1)
    return (centroids[nearest].reshape(kernel.shape) * scale).astype(kernel.dtype)


def _kernels(model):
    """(layer, kernel index in get_weights(), output-channel axis) of every convolution."""
    import keras

    for layer in model.layers:
        if isinstance(layer, keras.layers.DepthwiseConv2D):
            yield layer, 0, 2  # (kh, kw, C, 1): channel C
        elif isinstance(layer, keras.layers.Conv2D | keras.layers.Dense):
            yield layer, 0, layer.get_weights()[0].ndim - 1


def build(name: str, transform, out: Path) -> None:
    import keras

    mm._set_seeds()
    model = keras.applications.MobileNet(alpha=0.25, weights=None, classes=10,
                                         input_tensor=keras.Input(shape=SHAPE, batch_size=1, name="input"))  # fmt: skip
    for layer, index, axis in _kernels(model):
        weights = layer.get_weights()
        weights[index] = transform(weights[index], axis)
        layer.set_weights(weights)
    rng = np.random.default_rng(mm.SEED)
    calib = rng.uniform(-1, 1, size=(16, *SHAPE)).astype(np.float32)
    mm.calibrate_bn(model, calib)
    path = out / f"{name}.tflite"
    path.write_bytes(mm.convert_int8(model, calib))
    print(f"{path.name}: {path.stat().st_size} bytes")
    arrays = mm.tflite_references(path, rng.uniform(-1, 1, size=(2, *SHAPE)).astype(np.float32),
                                  {"versions": mm._versions(), "seed": mm.SEED, "transform": name})  # fmt: skip
    tensors = path.with_suffix(".tensors.npz")
    tensors.unlink()  # the per-tensor dump is not needed: keep the fixtures small
    assert arrays["output_0"].shape[0] == 2


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=mm.DEFAULT_OUT)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    build("mobilenet_v1_pruned_int8", lambda k, axis: prune(k), args.out)
    build("mobilenet_v1_clustered_int8", cluster, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
