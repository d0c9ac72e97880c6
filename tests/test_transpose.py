"""TRANSPOSE on the NPU (npu.transpose, npu_byoc.ops.transpose): strided DMA through the
permuted input and an identity-LUT copy, no opcode of its own.

* the H x W x C permutation of a model permutation, hand-derived, in both layouts;
* op_transpose_int8 (TFLite TRANSPOSE of the input and of a conv's output, NHWC -> NCHW) runs
  whole on the NPU, 0 LSB off LiteRT's reference kernels on golden, C model and RTL (slow);
* Relax modules: a QDQ conv (NHWC or NCHW partition) then a transpose in the QDQ or the int8
  form, and rank-2 / rank-3 transposes, against TVM's CPU build;
* a transpose that moves the batch axis stays on the CPU with its reason.
"""

from __future__ import annotations

import numpy as np
import pytest
from tvm import relax
from tvm.relax import op as R

import npu_byoc
from npu_byoc.ops.transpose import hwc_perm
from npu_byoc.partition.pipeline import partition_log

from .conftest import assert_equals_reference, model_path

_built: dict = {}


def _build(key, make, backend: str):
    if (key, backend) not in _built:
        _built[key, backend] = npu_byoc.build(make(), backend)
    return _built[key, backend]


def test_hwc_permutation_hand_derived():
    # NHWC [N, H, W, C] -> [N, C, H, W]: the output's (H, W, C) map is (C, H, W) of the input
    assert hwc_perm((0, 3, 1, 2), "NHWC") == (2, 0, 1)
    assert hwc_perm((0, 2, 1, 3), "NHWC") == (1, 0, 2)  # swap H and W
    # NCHW [N, C, H, W] -> [N, H, W, C] (output model axes 1, 2, 3 = input H, W, C): the output's
    # map (its axes 2, 3, 1) reads input W, C, H
    assert hwc_perm((0, 2, 3, 1), "NCHW") == (1, 2, 0)
    assert hwc_perm((1, 0), None) == (0, 2, 1)  # [rows, features]: W and C swap
    assert hwc_perm((0, 2, 1), "NHWC") == (0, 2, 1)  # a sequence [N, L, C] -> [N, C, L]


@pytest.mark.parametrize("backend", ["golden", "functional", pytest.param("verilator", marks=pytest.mark.slow)])
def test_tflite_transpose_is_litert_exactly(backend):
    name = "op_transpose_int8.tflite"
    report = npu_byoc.coverage_report(npu_byoc.load_model(model_path(name)))
    assert all(o.offloaded for o in report.ops), [(o.op, o.reason) for o in report.ops]
    assert [o.pattern for o in report.ops if o.op == "TRANSPOSE"] == ["npu.transpose"] * 2
    assert_equals_reference(name, backend)


def _conv_then_transpose(layout: str, axes, qdq: bool, transpose: bool = True):
    """x int8 -> QDQ conv 3x3 (4 -> 6 channels) -> [transpose(axes), QDQ or int8 form]."""
    shape = (1, 5, 7, 4) if layout == "NHWC" else (1, 4, 5, 7)
    w_shape = (3, 3, 4, 6) if layout == "NHWC" else (6, 4, 3, 3)
    w = np.random.default_rng(3).integers(-127, 128, w_shape).astype("int8")
    s_w = np.linspace(0.01, 0.03, 6).astype("float32")
    x = relax.Var("x", relax.TensorType(list(shape), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            xd = bb.emit(R.dequantize(x, relax.const(0.05, "float32"), relax.const(2, "int8"), axis=-1))
            wd = bb.emit(R.dequantize(relax.const(w), relax.const(s_w), relax.const(np.zeros(6, "int8")),
                                      axis=3 if layout == "NHWC" else 0))  # fmt: skip
            y = bb.emit(R.nn.conv2d(xd, wd, padding=(1, 1, 1, 1), data_layout=layout,
                                    kernel_layout="HWIO" if layout == "NHWC" else "OIHW", out_dtype="float32"))  # fmt: skip
            q = bb.emit(R.quantize(y, relax.const(0.2, "float32"), relax.const(-3, "int8"), axis=-1, out_dtype="int8"))
            if transpose and qdq:
                d = bb.emit(R.dequantize(q, relax.const(0.2, "float32"), relax.const(-3, "int8"), axis=-1))
                t = bb.emit(R.permute_dims(d, list(axes)))
                q = bb.emit(R.quantize(t, relax.const(0.2, "float32"), relax.const(-3, "int8"), axis=-1,
                                       out_dtype="int8"))  # fmt: skip
            elif transpose:
                q = bb.emit(R.permute_dims(q, list(axes)))
            gv = bb.emit_output(q)
        bb.emit_func_output(gv)
    return bb.get()


CASES = [("NHWC", (0, 3, 1, 2), False), ("NHWC", (0, 2, 1, 3), True), ("NCHW", (0, 2, 3, 1), True),
         ("NCHW", (0, 1, 3, 2), False)]  # fmt: skip


@pytest.mark.parametrize("backend", ["golden", "functional"])
@pytest.mark.parametrize("layout,axes,qdq", CASES, ids=[f"{c[0]}-{''.join(map(str, c[1]))}-{'qdq' if c[2] else 'int8'}"
                                                        for c in CASES])  # fmt: skip
def test_conv_then_transpose_against_tvm_cpu(layout, axes, qdq, backend):
    """One NPU partition; the transpose copies the NPU's conv output exactly (the same module
    without it, transposed by numpy) and the whole is within 1 LSB of TVM's CPU build (its
    float conv)."""
    key = (layout, axes, qdq)
    mod = _conv_then_transpose(layout, axes, qdq)
    part = npu_byoc.partition_for_npu(mod)
    log = partition_log(part)
    assert [d.accepted for d in log if d.pattern == "npu.transpose"] == [True], [(d.pattern, d.reason) for d in log]
    shape = (1, 5, 7, 4) if layout == "NHWC" else (1, 4, 5, 7)
    x = np.random.default_rng(11).integers(-128, 128, shape).astype("int8")
    got = _build(key, lambda: _conv_then_transpose(layout, axes, qdq), backend).run([x])[0]
    conv = _build((layout, "conv"), lambda: _conv_then_transpose(layout, axes, qdq, transpose=False), backend).run([x])[0]
    np.testing.assert_array_equal(got, np.transpose(conv, axes))
    cpu = _build(key, lambda: _conv_then_transpose(layout, axes, qdq), "cpu").run([x])[0]
    assert got.shape == cpu.shape and np.abs(got.astype(int) - cpu.astype(int)).max() <= 1


def _transpose_alone(shape, axes):
    x = relax.Var("x", relax.TensorType(list(shape), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(bb.emit(R.permute_dims(x, list(axes))))
        bb.emit_func_output(gv)
    return bb.get()


@pytest.mark.parametrize("backend", ["golden", "functional"])
@pytest.mark.parametrize("shape,axes", [((6, 10), (1, 0)), ((1, 9, 5), (0, 2, 1)), ((2, 3, 4, 5), (0, 3, 2, 1))])
def test_transpose_alone_is_tvm_cpu_exactly(shape, axes, backend):
    """The int8 form on a partition input, ranks 2 to 4 (a batch of 2 image by image): exact."""
    key = (shape, axes)
    x = np.random.default_rng(4).integers(-128, 128, shape).astype("int8")
    got = _build(key, lambda: _transpose_alone(shape, axes), backend).run([x])[0]
    cpu = _build(key, lambda: _transpose_alone(shape, axes), "cpu").run([x])[0]
    assert _build(key, lambda: _transpose_alone(shape, axes), backend).plans, "the transpose is offloaded"
    np.testing.assert_array_equal(got, cpu)
    np.testing.assert_array_equal(got, np.transpose(x, axes))


def test_moving_the_batch_axis_stays_on_the_cpu_with_its_reason():
    log = partition_log(npu_byoc.partition_for_npu(_transpose_alone((3, 3, 4, 5), (1, 0, 2, 3))))
    (d,) = [d for d in log if d.pattern == "npu.transpose"]
    assert not d.accepted and "moves the batch axis" in d.reason
