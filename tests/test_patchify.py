"""Patchify convolutions above the NPU's strides (npu_byoc.ops.patchify): a k x k / k conv as
space-to-depth (strided copies into channel slices) and a 1x1 conv, on existing ops.

* the 1x1 conv over the space-to-depth with the rearranged kernel is the k x k / k conv of its
  definition (numpy loops);
* Relax modules: QDQ 4x4/4, 5x5/5, 8x8/8 convs in NHWC, 4x4/4 and 6x6/6 in NCHW, kernels smaller
  than the stride (3x2/4 NHWC, 1x1/4 NCHW), offloaded whole, golden == C model
  (== the RTL, slow), within 1 LSB of TVM's CPU build (its float conv);
* the fixtures' stride-4 convs (ViT's patch embedding, ConvNeXt's stem) fed LiteRT's own input
  give LiteRT's output tensor exactly (the per-layer contract, .tensors.npz);
* what the rewrite leaves alone (overlapping windows, padding) keeps its stride reason.
"""

from __future__ import annotations

import numpy as np
import pytest
from tvm import relax
from tvm.relax import op as R

import npu_byoc
from npu_byoc.ops.patchify import patch_weights
from npu_byoc.partition.pipeline import partition_log

from .conftest import npu_layers_against_litert

_built: dict = {}


def _build(key, make, backend: str):
    if (key, backend) not in _built:
        _built[key, backend] = npu_byoc.build(make(), backend)
    return _built[key, backend]


def _direct_conv(x, w_ohwi, k: int) -> np.ndarray:
    """k x k / k convolution of an (H, W, C) map by its definition."""
    h, w, _ = x.shape
    out = np.zeros((h // k, w // k, w_ohwi.shape[0]), np.int64)
    for i in range(h // k):
        for j in range(w // k):
            patch = x[i * k : (i + 1) * k, j * k : (j + 1) * k].astype(np.int64)
            out[i, j] = np.einsum("abc,oabc->o", patch, w_ohwi.astype(np.int64))
    return out


@pytest.mark.parametrize("kernel_layout", ["HWIO", "OIHW"])
def test_space_to_depth_then_1x1_is_the_patch_conv(kernel_layout):
    rng = np.random.default_rng(0)
    k, c, o = 4, 3, 5
    x = rng.integers(-128, 128, (8, 12, c))
    w_ohwi = rng.integers(-127, 128, (o, k, k, c))
    w = np.transpose(w_ohwi, ["OHWI".index(a) for a in kernel_layout])
    w1, _ = patch_weights(w, kernel_layout)
    w1_oi = np.transpose(w1, [kernel_layout.index(a) for a in "OHWI"]).reshape(o, -1)
    # y[i, j, (a*k + b)*C + c] = x[k*i + a, k*j + b, c]
    y = x.reshape(2, k, 3, k, c).transpose(0, 2, 1, 3, 4).reshape(2, 3, k * k * c)
    np.testing.assert_array_equal(np.einsum("hwi,oi->hwo", y, w1_oi), _direct_conv(x, w_ohwi, k))


def _patch_conv(shape, k: int, oc: int = 8, padding=(0, 0, 0, 0), stride=None, layout: str = "NHWC",
                kernel=None):  # fmt: skip
    """x int8 -> QDQ conv (kernel k x k unless said, stride k unless said) with bias -> int8,
    NHWC (HWIO) or NCHW (OIHW)."""
    nhwc = layout == "NHWC"
    c = shape[3] if nhwc else shape[1]
    rng = np.random.default_rng(k)
    kh, kw = kernel or (k, k)
    w = rng.integers(-127, 128, (kh, kw, c, oc) if nhwc else (oc, c, kh, kw)).astype("int8")
    s_w = np.linspace(0.002, 0.006, oc).astype("float32")
    bias = rng.integers(-2000, 2000, oc).astype("int32")
    channel = 3 if nhwc else 1
    x = relax.Var("x", relax.TensorType(list(shape), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            xd = bb.emit(R.dequantize(x, relax.const(0.02, "float32"), relax.const(3, "int8"), axis=channel))
            wd = bb.emit(R.dequantize(relax.const(w), relax.const(s_w), relax.const(np.zeros(oc, "int8")),
                                      axis=3 if nhwc else 0))  # fmt: skip
            y = bb.emit(R.nn.conv2d(xd, wd, strides=stride or k, padding=padding, data_layout=layout,
                                    kernel_layout="HWIO" if nhwc else "OIHW", out_dtype="float32"))  # fmt: skip
            bd = bb.emit(R.dequantize(relax.const(bias), relax.const(0.02 * s_w), relax.const(np.zeros(oc, "int32")),
                                      axis=0))  # fmt: skip
            y = bb.emit(R.add(y, bd if nhwc else R.reshape(bd, (1, oc, 1, 1))))
            q = bb.emit(R.quantize(y, relax.const(0.1, "float32"), relax.const(-7, "int8"), axis=channel,
                                   out_dtype="int8"))  # fmt: skip
            gv = bb.emit_output(q)
        bb.emit_func_output(gv)
    return bb.get()


# (shape, stride, layout, kernel when smaller than the stride)
CASES = [((1, 16, 16, 3), 4, "NHWC", None), ((1, 10, 15, 2), 5, "NHWC", None), ((1, 16, 8, 1), 8, "NHWC", None),
         ((1, 3, 16, 16), 4, "NCHW", None), ((1, 2, 12, 18), 6, "NCHW", None), ((1, 13, 16, 3), 4, "NHWC", (3, 2)),
         ((1, 4, 9, 13), 4, "NCHW", (1, 1))]  # fmt: skip


@pytest.mark.parametrize("backend", ["golden", "functional", pytest.param("verilator", marks=pytest.mark.slow)])
@pytest.mark.parametrize("shape,k,layout,kernel", CASES,
                         ids=[f"{lay}-{'x'.join(map(str, ker or (k, k)))}s{k}" for _, k, lay, ker in CASES])  # fmt: skip
def test_patch_conv_against_tvm_cpu(shape, k, layout, kernel, backend):
    make = lambda: _patch_conv(shape, k, layout=layout, kernel=kernel)  # noqa: E731
    log = partition_log(npu_byoc.partition_for_npu(make()))
    moves = ("npu.conv2d", "npu.gather", "npu.concat")  # the conv, its copies and their concatenation
    assert all(d.accepted for d in log if d.pattern in moves), [(d.pattern, d.reason) for d in log]
    model = _build((shape, k, layout, kernel), make, backend)
    assert len(model.plans) == 1, "one NPU partition"
    x = np.random.default_rng(1).integers(-128, 128, shape).astype("int8")
    got = model.run([x])[0]
    if backend != "golden":
        np.testing.assert_array_equal(got, _build((shape, k, layout, kernel), make, "golden").run([x])[0])
    cpu = _build((shape, k, layout, kernel), make, "cpu").run([x])[0]
    assert got.shape == cpu.shape and np.abs(got.astype(int) - cpu.astype(int)).max() <= 1


@pytest.mark.parametrize("padding,stride", [((1, 1, 1, 1), None), ((0, 0, 0, 0), 3)], ids=["padded", "overlapping"])
def test_what_the_rewrite_leaves_alone_runs_as_a_conv(padding, stride):
    # a padded 4x4/4 conv (npu.strided_conv2d: tests/test_strided_conv.py), and a 4x4/3 one
    # (overlapping windows, stride 3: the NPU's own)
    log = partition_log(npu_byoc.partition_for_npu(_patch_conv((1, 16, 16, 3), 4, padding=padding, stride=stride)))
    (d,) = [d for d in log if d.pattern in ("npu.conv2d", "npu.strided_conv2d")]
    assert d.accepted and d.pattern == ("npu.strided_conv2d" if stride is None else "npu.conv2d")


FIXTURE_CONVS = [("vit_tiny_int8.tflite", "patch_embed"), ("convnext_block_int8.tflite", "stem_conv")]


@pytest.mark.parametrize("name,conv", FIXTURE_CONVS)
def test_fixture_patch_conv_is_litert_exactly(name, conv):
    """The stride-4 conv, from LiteRT's own input tensor through the space-to-depth copies and
    the 1x1 conv, gives LiteRT's output tensor bit for bit."""
    checked = []
    for op, got, want in npu_layers_against_litert(name):
        if conv in op.name:
            np.testing.assert_array_equal(got, want, err_msg=op.name)
            checked.append((op.kind, tuple(op.kernel)))
    assert checked == [("conv2d", (1, 1))]
