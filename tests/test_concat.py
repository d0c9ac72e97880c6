"""CONCATENATION along channels, rows or columns: each input's producer writes its slice of
the output in place; an input that cannot be written in place (a partition input, one concatenated twice,
one ONNX rescales) is copied into its slice by a requantize LUT op.

* concat_cnn_int8 / densenet_small_int8 (TFLite, tools/make_models.py): the concatenations run
  on the NPU and the models are 0 LSB off LiteRT's reference kernels (golden, C model, RTL);
* tiny_cnn_qdq.onnx / qop_cnn (onnxruntime QDQ and QLinearConcat, inputs quantized unlike the
  output): the rescaling copies are exact against onnxruntime;
* Relax modules against TVM's CPU build; the reasons of what stays on the CPU.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from tvm import relax
from tvm.script import relax as R

import npu_byoc
from npu_byoc.codegen.lower import lower_partition
from npu_byoc.ops.npu_ops import Lut
from npu_byoc.arch.config import configure
from npu_byoc.ops.composites import npu_functions
from npu_byoc.partition.pipeline import partition_for_npu

from .conftest import model_path, reference

_built: dict = {}
_reports: dict = {}


def _model(name: str, backend: str):
    if (name, backend) not in _built:
        _built[name, backend] = npu_byoc.build(npu_byoc.load_model(model_path(name)), backend)
    return _built[name, backend]


def _coverage(name: str):
    if name not in _reports:
        _reports[name] = npu_byoc.coverage_report(npu_byoc.load_model(model_path(name)))
    return _reports[name]


def _concats(name: str) -> dict:
    return {o.name.split("/")[-2] if "/" in o.name else o.name: o for o in _coverage(name).ops
            if o.op in ("CONCATENATION", "Concat", "QLinearConcat")}  # fmt: skip


def _plans(name: str) -> list:
    part = partition_for_npu(npu_byoc.load_model(model_path(name)))
    return [lower_partition(n, f) for n, f in npu_functions(part).items()]


# ------------------------------------------------------------------------------- coverage
def test_densenet_is_one_partition():
    r = _coverage("densenet_small_int8.tflite")
    assert r.summary["partitions"] == 1
    assert [o.op for o in r.ops if not o.offloaded] == []
    (plan,) = _plans("densenet_small_int8.tflite")
    assert plan.copy_ops == ()  # every concatenation in place: zero copy


def test_concat_cnn_coverage_and_reasons():
    cats = _concats("concat_cnn_int8.tflite")
    for name in ("cat_input_1", "cat_branches_1", "cat_dense_1"):
        assert cats[name].offloaded and cats[name].pattern == "npu.concat", name
    assert cats["cat_rows_1"].offloaded  # along H: each producer writes its rows in place


def test_only_the_model_input_is_copied():
    """concat((input, conv(input))): the model input is a partition input, so it is copied into
    its slice (one LUT op, the identity table); everything else is written in place."""
    plans = _plans("concat_cnn_int8.tflite")
    copies = [(p.ops[k], k_in) for p in plans for k, k_in in p.copy_ops]
    assert [k_in for _, k_in in copies] == [0]
    op = copies[0][0]
    assert isinstance(op, Lut) and np.array_equal(op.table, np.arange(-128, 128).astype(np.int8))
    assert op.ofm.is_slice and op.ofm.shape[2] == 3 and op.ofm.pitch == 8


@pytest.mark.parametrize("name", ["tiny_cnn_qdq.onnx", "qop_cnn_s8s8.onnx", "qop_cnn_u8s8.onnx"])
def test_onnx_concat_rescales_its_inputs(name):
    (cat,) = _concats(name).values()
    assert cat.offloaded and cat.pattern == "npu.concat"
    rescaled = [k for p in _plans(name) for _, k in p.copy_ops]
    assert rescaled == [0, 1, 2]  # onnxruntime gave each branch its own scale


def test_uint8_concat_of_one_tensor_twice():
    """TFLite uint8 (flipped to int8 on the NPU): concat((a, b, b)) writes b once in place and
    copies it once; the whole model is one partition."""
    r = _coverage("tiny_cnn_uint8.tflite")
    assert r.summary["ops_offloaded"] == r.summary["ops_total"] and r.summary["partitions"] == 1
    assert [k for p in _plans("tiny_cnn_uint8.tflite") for _, k in p.copy_ops] == [1]


# ------------------------------------------------------------------------------- numerics
@pytest.mark.parametrize("backend", ["golden", "functional", pytest.param("verilator", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", ["concat_cnn_int8.tflite", "densenet_small_int8.tflite", "tiny_cnn_uint8.tflite"])
def test_model_is_litert_exact(name, backend):
    ref = reference(name)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        for got, want in zip(_model(name, backend).run(inputs), outputs):
            np.testing.assert_array_equal(got, np.asarray(want).reshape(got.shape))


@pytest.mark.parametrize("backend", ["golden", "functional"])
def test_rescaled_concat_within_one_lsb_of_onnxruntime(backend):
    """qop_cnn_u8s8 (QLinearConcat of three branches, each with its own scale) in one NPU
    partition: the output is within 1 LSB of onnxruntime's (the convs requantize in fixed
    point, onnxruntime in float: test_onnx_qop); the copies themselves are exact
    (test_golden's per-op comparison with onnxruntime's tensors of tiny_cnn_qdq)."""
    name = "qop_cnn_u8s8.onnx"
    ref = np.load(model_path(name).with_suffix(".npz"))
    meta = json.loads(str(ref["meta"]))
    for s in range(ref["input_0"].shape[0]):
        got = _model(name, backend).run([ref["input_0"][s : s + 1]])[0]
        lsb = np.abs(got.astype(np.float64) - ref["output_0"][s : s + 1]).max() / meta["outputs"][0]["scale"]
        assert lsb <= 1.0 + 1e-4


def _int8_concat(first_is_input: bool):
    """x -> relu-free requantize LUT (sigmoid) -> concat with x or with a second LUT output."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([1, 4, 4, 3], "int8"))
    s, z = relax.const(np.float32(0.05)), relax.const(np.int8(-4))
    with bb.function("main", [x]):
        with bb.dataflow():
            def sig(v, scale):
                d = bb.emit(R.dequantize(v, s, z, axis=-1))
                y = bb.emit(R.sigmoid(d))
                return bb.emit(R.quantize(y, relax.const(np.float32(scale)), relax.const(np.int8(-128)), axis=-1,
                                          out_dtype="int8"))  # fmt: skip
            a = sig(x, 1 / 256)
            b = x if first_is_input else sig(a, 1 / 256)
            cat = bb.emit(R.concat([b, a], axis=3))
            out = bb.emit_output(cat)
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.parametrize("first_is_input", [True, False], ids=["input_copied", "in_place"])
def test_int8_concat_equals_tvm(first_is_input):
    """The hand-written int8 form (the concatenation of int8 tensors: bytes, no arithmetic)
    against TVM's CPU build of the same module."""
    mod = _int8_concat(first_is_input)
    part = partition_for_npu(mod)
    assert len(npu_functions(part)) == 1
    x = np.random.default_rng(3).integers(-128, 128, (1, 4, 4, 3), dtype=np.int8)
    want = npu_byoc.build(mod, "cpu").run([x])[0]
    for backend in ("golden", "functional"):
        np.testing.assert_array_equal(npu_byoc.build(part, backend).run([x])[0], want)


def test_tflite_concat_of_differently_quantized_inputs_stays_on_the_cpu():
    """TFLite numerics (a hand-written QDQ module): LiteRT copies bytes, TVM rescales; no
    single answer, so the CPU keeps it and says why."""
    bb = relax.BlockBuilder()
    a = relax.Var("a", relax.TensorType([1, 4, 4, 2], "int8"))
    with bb.function("main", [a]):
        with bb.dataflow():
            def lut(scale):
                d = bb.emit(R.dequantize(a, relax.const(np.float32(0.05)), relax.const(np.int8(0)), axis=-1))
                return bb.emit(R.quantize(bb.emit(R.sigmoid(d)), relax.const(np.float32(scale)),
                                          relax.const(np.int8(-128)), axis=-1, out_dtype="int8"))  # fmt: skip
            parts = [bb.emit(R.dequantize(v, relax.const(np.float32(sc)), relax.const(np.int8(-128)), axis=-1))
                     for v, sc in ((lut(1 / 256), 1 / 256), (lut(1 / 128), 1 / 128))]  # fmt: skip
            cat = bb.emit(R.quantize(bb.emit(R.concat(parts, axis=3)), relax.const(np.float32(1 / 128)),
                                     relax.const(np.int8(-128)), axis=-1, out_dtype="int8"))  # fmt: skip
            out = bb.emit_output(cat)
        bb.emit_func_output(out)
    r = npu_byoc.coverage_report(bb.get())
    (cat_op,) = [o for o in r.ops if o.op == "relax.concat"]
    assert not cat_op.offloaded and "quantized unlike its output" in cat_op.reason


# ------------------------------------------------------------------------------- co-simulation
@pytest.mark.slow
def test_cosim_shows_the_copies_as_layers():
    """The rescaling copies are layers of the whole-partition co-simulation (cycles from the
    stream, RTL equal to golden), and the layers after the concatenation get TVM's reference
    fed the concatenation's value."""
    from npu_byoc.runtime.cosim import cosim

    ref = reference("tiny_cnn_qdq.onnx")
    rep = cosim(model_path("tiny_cnn_qdq.onnx"), ref["inputs"][0], ref["outputs"][0])
    copies = [layer for layer in rep.layers if "[input " in layer.name]
    assert [c.op for c in copies] == ["lut"] * 3 and all(c.cycles > 0 for c in copies)
    assert all(layer.max_diff_golden in (None, 0) for layer in rep.layers)
    # TVM's reference of each copy (dequantize -> quantize, in float) agrees exactly
    assert [c.max_diff_tvm for c in copies] == [0, 0, 0]
    after = rep.layers[rep.layers.index(copies[-1]) + 1]
    assert after.max_diff_tvm is not None and after.max_diff_tvm <= 1  # TVM's rounding (docs/numerics.md)


# ------------------------------------------------------------------------------- random cases
def _random_concat(seed: int, dim: str = "C"):
    """x -> 1..3 quantized 1x1 conv branches (1..39 channels; all x's channels when ``dim`` is
    H or W), maybe x itself (a partition input: copied) and maybe the first branch again
    (concatenated twice: copied) -> concat along ``dim`` -> avg pool 1x1 + ReLU; NHWC or NCHW,
    1..19 x 1..19; SRAM from 2 KiB (row tiles of strided slices) to 256 KiB, sequential or
    overlapped DMA."""
    rng = np.random.default_rng(seed)
    layout = str(rng.choice(["NHWC", "NCHW"]))
    h, w = (int(v) for v in rng.integers(1, 20, 2))
    cs = [int(c) for c in rng.integers(1, 40, int(rng.integers(1, 4)))]
    with_input, dup = bool(rng.random() < 0.4), bool(rng.random() < 0.3)
    dup = dup or len(cs) + with_input < 2
    c0 = int(rng.integers(1, 9))
    if dim != "C":
        cs = [c0] * len(cs)
    axis = layout.index(dim)
    shape = (1, h, w, c0) if layout == "NHWC" else (1, c0, h, w)
    s, z = relax.const(np.float32(0.04)), relax.const(np.int8(-5))  # every tensor's quantization
    x = relax.Var("x", relax.TensorType(list(shape), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            def deq(v):
                return bb.emit(R.dequantize(v, s, z, axis=-1))

            def q(v):
                return bb.emit(R.quantize(v, s, z, axis=-1, out_dtype="int8"))

            parts = []
            for c in cs:
                wt = rng.integers(-60, 60, (c, c0, 1, 1) if layout == "NCHW" else (1, 1, c0, c)).astype(np.int8)
                wd = bb.emit(R.dequantize(relax.const(wt), relax.const(np.float32(0.02)), relax.const(np.int8(0)),
                                          axis=-1))  # fmt: skip
                parts.append(q(bb.emit(R.nn.conv2d(deq(x), wd, data_layout=layout,
                                                   kernel_layout="OIHW" if layout == "NCHW" else "HWIO"))))  # fmt: skip
            parts += [x] * with_input + parts[:1] * dup
            cat = q(bb.emit(R.concat([deq(p) for p in parts], axis=axis)))
            pool = bb.emit(R.nn.avg_pool2d(deq(cat), pool_size=(1, 1), layout=layout))
            out = bb.emit_output(q(bb.emit(R.nn.relu(pool))))
        bb.emit_func_output(out)
    hw = configure(sram_bytes=int(rng.choice([2048, 4096, 262144])), dma_overlap=int(rng.integers(0, 2)))
    return bb.get(), rng.integers(-128, 128, shape).astype(np.int8), hw


# Every seed on the golden model and the C model; on the RTL the seeds whose SRAM (4 KiB, the
# default) other RTL tests build too: each SRAM size is a Verilator build of its own, and the
# 2 KiB seeds (0, 2) add a build for tiling the 4 KiB ones already exercise on the RTL.
@pytest.mark.parametrize(
    "seed, backend",
    [(seed, backend) for seed in range(6) for backend in ("golden", "functional")]
    + [pytest.param(seed, "verilator", marks=pytest.mark.slow) for seed in (1, 3, 4, 5)],
)
def test_random_concatenations_equal_the_concatenation_on_the_cpu(seed, backend):
    _check_random_concat(seed, backend, "C")


@pytest.mark.parametrize(
    "seed, dim, backend",
    [(0, "H", "functional"), (1, "W", "functional"), (2, "H", "functional"), (3, "W", "functional"),
     pytest.param(1, "H", "verilator", marks=pytest.mark.slow)],
)
def test_random_concatenations_along_rows_and_columns(seed, dim, backend):
    """The same along H or W: each producer writes its box of rows or columns in place."""
    _check_random_concat(seed, backend, dim)


_random_cases: dict = {}


def _check_random_concat(seed: int, backend: str, dim: str) -> None:
    """The NPU with the concatenation equals the same model with only the concatenation on
    the CPU (TVM; same quantization everywhere, so bytes): in-place slices, copies, NCHW
    planes, tiles, overlapped DMA."""
    if (seed, dim) not in _random_cases:  # the case and its reference, once for every backend
        mod, x, hw = _random_concat(seed, dim)
        part = partition_for_npu(mod, hw=hw)
        (cat,) = [o for o in npu_byoc.coverage_report(mod, hw=hw).ops if o.op == "relax.concat"]
        assert cat.offloaded and len(npu_functions(part)) == 1
        want = npu_byoc.build(partition_for_npu(mod, exclude=["npu.concat"]), "golden").run([x])[0]
        _random_cases[seed, dim] = part, x, hw, want
    part, x, hw, want = _random_cases[seed, dim]
    np.testing.assert_array_equal(npu_byoc.build(part, backend, hw=hw).run([x])[0], want)


# ------------------------------------------------------------------ rank-3 sequences, a class token
def _class_token_concat(axis: int, token_first: bool):
    """x [1, 6, 5] -> sigmoid (an NPU op) -> concat with a model constant along the sequence
    (axis 1: a transformer's class token [1, 1, 5]) or the channels (axis 2: [1, 6, 3])."""
    s, z = relax.const(np.float32(0.05)), relax.const(np.int8(-4))
    token_shape = (1, 1, 5) if axis == 1 else (1, 6, 3)
    token = relax.const(np.random.default_rng(axis).integers(-128, 128, token_shape).astype(np.int8))
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([1, 6, 5], "int8"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(R.sigmoid(bb.emit(R.dequantize(x, s, z, axis=-1))))
            q = bb.emit(R.quantize(y, s, z, axis=-1, out_dtype="int8"))
            parts = [bb.emit(R.dequantize(v, s, z, axis=-1)) for v in ((token, q) if token_first else (q, token))]
            out = bb.emit_output(bb.emit(R.quantize(bb.emit(R.concat(parts, axis=axis)), s, z, axis=-1,
                                                    out_dtype="int8")))  # fmt: skip
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.parametrize("axis, token_first", [(1, True), (1, False), (2, True)])
def test_sequence_concat_with_a_constant_equals_tvm(axis, token_first):
    """A concatenation of a rank-3 sequence along its length or its channels, one input a model
    constant (copied in from the CONST region), the other written in place: the bytes TVM's CPU
    build gives (same quantization: no arithmetic)."""
    mod = _class_token_concat(axis, token_first)
    part = partition_for_npu(mod)
    (cat,) = [o for o in npu_byoc.coverage_report(mod).ops if o.op == "relax.concat"]
    assert cat.offloaded and len(npu_functions(part)) == 1
    x = np.random.default_rng(4).integers(-128, 128, (1, 6, 5), dtype=np.int8)
    want = npu_byoc.build(mod, "cpu").run([x])[0]
    for backend in ("golden", "functional"):
        np.testing.assert_array_equal(npu_byoc.build(part, backend).run([x])[0], want, err_msg=backend)
