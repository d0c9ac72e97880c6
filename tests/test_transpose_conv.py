"""TRANSPOSE_CONV on the NPU: one stride-1 CONV per output phase, written to every stride-th
row and column of the output by strided DMA (npu_byoc.ops.transpose_conv).

* the phase decomposition equals the scatter form of TFLite's reference kernel exactly, on
  random geometries (two independent formulations in the golden model);
* transpose_conv_int8 (TensorFlow's converter: a U-Net decoder's upsampling, a skip
  concatenation, a fused RELU6, strides (2, 2), (2, 1) and 1) is one NPU partition and
  0 LSB off LiteRT's reference kernels: golden, C model and RTL;
* random Relax modules, NHWC (TFLite) and NCHW (ONNX QDQ), small SRAMs and both DMA modes:
  the C model and the RTL equal the golden model, which is within 1 LSB of TVM's CPU build
  (TVM computes the op in float32);
* what stays on the CPU says why, and TVM's CPU build of an NHWC conv2d_transpose works
  (npu_byoc.runtime.tvm_legalize).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import npu_byoc
from npu_byoc.codegen.lower import lower_partition
from npu_byoc.ops.npu_ops import TensorRef, TransposeConv2D
from npu_byoc.ops.transpose_conv import golden_transpose_conv2d
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.arch.config import configure
from npu_byoc.arch.isa import Region
from npu_byoc.ops.composites import npu_functions
from npu_byoc.partition.pipeline import partition_for_npu, partition_log
from npu_byoc.runtime import golden
from npu_byoc.runtime.verilator import VerilatorNpu
from npu_byoc.ops.transpose_conv_phases import axis_phases

from . import relax_builders as rb
from .conftest import assert_equals_reference, built, model_path, reference, run_phases
from .test_overlap import assert_specs_agree

MODEL = "transpose_conv_int8.tflite"


# ------------------------------------------------------------------------------- geometry
def _random_op(rng):
    """A TransposeConv2D of random geometry whose phases all read input (or None)."""
    h, w = (int(v) for v in rng.integers(1, 8, 2))
    kernel = [int(v) for v in rng.integers(1, 6, 2)]
    stride = [int(rng.integers(1, k + 1)) for k in kernel]
    pad = [int(rng.integers(0, k)) for k in kernel]
    extra = [int(rng.integers(0, s)) for s in stride]  # output padding
    oh, ow = ((n - 1) * s + k - 2 * p + e for n, s, k, p, e in zip((h, w), stride, kernel, pad, extra))
    if min(oh, ow) < 1:
        return None
    cin, cout = (int(v) for v in rng.integers(1, 6, 2))
    op = TransposeConv2D(
        name="t", ifm=TensorRef("x", int(Region.IO), 0, (h, w, cin)), ofm=TensorRef("y", int(Region.IO) + 1, 0, (oh, ow, cout)),
        weights=rng.integers(-127, 128, (cout, *kernel, cin)).astype(np.int8),
        bias=rng.integers(-2000, 2000, cout).astype(np.int32), multiplier=np.full(cout, 1 << 30, np.int32),
        shift=np.full(cout, -6, np.int32), ifm_zero_point=int(rng.integers(-20, 20)),
        ofm_zero_point=int(rng.integers(-20, 20)), stride=tuple(stride), pad_before=tuple(pad), act_min=-128, act_max=127,
    )  # fmt: skip
    try:
        op.phases
    except ValueError:
        return None
    return op


def test_phases_equal_the_scatter_form():
    """Every phase, run as the golden model's stride-1 conv on its crop of the input and
    written through its strided box of the output, gives TFLite's scatter-accumulate result."""
    rng = np.random.default_rng(2024)
    checked = 0
    while checked < 150:
        op = _random_op(rng)
        if op is None:
            continue
        x = rng.integers(-128, 128, op.ifm.shape).astype(np.int8)
        np.testing.assert_array_equal(run_phases(op, x), golden_transpose_conv2d(op, x))
        checked += 1


def test_outputs_no_input_reaches_are_refused():
    """A kernel 2 stride 2 layer of 3 inputs scatters to 6 outputs: an output of 8 leaves two
    positions with no input tap; a stride above the kernel leaves gaps between the taps."""
    with pytest.raises(ValueError, match="reach beyond the input"):
        axis_phases(kernel=2, stride=2, pad=0, in_size=3, out_size=8)
    with pytest.raises(ValueError, match="stride 3 larger than the kernel 2"):
        axis_phases(kernel=2, stride=3, pad=0, in_size=3, out_size=8)
    phases = axis_phases(kernel=3, stride=2, pad=0, in_size=4, out_size=8)  # TFLite SAME, 4 -> 8
    assert [(p.phase, p.count, p.taps) for p in phases] == [(0, 4, (2, 0)), (1, 4, (1,))]


# ------------------------------------------------------------------------------- the TFLite model
def test_decoder_is_one_partition_with_every_transpose_conv():
    report = npu_byoc.coverage_report(npu_byoc.load_model(model_path(MODEL)))
    assert report.summary["ops_offloaded"] == report.summary["ops_total"]
    assert report.summary["partitions"] == 1
    tconv = [o for o in report.ops if o.op == "TRANSPOSE_CONV"]
    assert len(tconv) == 4 and all(o.pattern == "npu.transpose_conv2d" for o in tconv)
    # TVM's import drops TRANSPOSE_CONV's fused activation; npu_byoc's keeps it (a clip)
    relu6 = [o for o in tconv if "up_k3s2" in o.name]
    assert relu6 and relu6[0].convention.startswith("qdq+bias+clip")


@pytest.mark.parametrize("backend", ["golden", "functional", pytest.param("verilator", marks=pytest.mark.slow)])
def test_decoder_is_litert_exact(backend):
    assert_equals_reference(MODEL, backend)


def test_cpu_build_of_the_decoder_runs():
    """TVM's CPU build of the whole model (the NHWC conv2d_transpose legalized by npu_byoc):
    within 2 LSB of LiteRT (TVM's TFLite import computes TRANSPOSE_CONV in float32)."""
    ref = reference(MODEL)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        for g, want in zip(built(MODEL, "cpu").run(inputs), outputs):
            assert np.abs(g.astype(int) - np.asarray(want).reshape(g.shape).astype(int)).max() <= 2


@pytest.mark.slow
def test_cosim_reports_transposed_convs():
    from npu_byoc.runtime.cosim import cosim

    ref = reference(MODEL)
    rep = cosim(model_path(MODEL), ref["inputs"][0], ref["outputs"][0])
    layers = [r for r in rep.layers if r.op == "transpose_conv"]
    assert len(layers) == 4 and all(r.macs > 0 and r.kicks >= 1 for r in layers)
    assert all(r.max_diff_golden in (None, 0) for r in rep.layers)
    assert rep.summary["cycle_model_exact"] and rep.summary["max_diff_golden"] == 0
    assert [o["max_diff"] for o in rep.summary["outputs"]] == [0, 0]  # both model outputs vs LiteRT


@pytest.mark.parametrize("backend", ["golden", "functional"])
def test_onnx_qdq_conv_transpose_within_one_lsb_of_onnxruntime(backend):
    """convt_qdq.onnx (onnxruntime's QDQ quantizer; ConvTranspose with pads and output_padding,
    NCHW): both ConvTranspose on the NPU in one partition, within 1 LSB of onnxruntime, which
    computes ConvTranspose in float between DequantizeLinear and QuantizeLinear."""
    name = "convt_qdq.onnx"
    mod = npu_byoc.load_model(model_path(name))
    report = npu_byoc.coverage_report(mod)
    assert [o.pattern for o in report.ops if o.op == "ConvTranspose"] == ["npu.transpose_conv2d"] * 2
    assert report.summary["ops_offloaded"] == report.summary["ops_total"] and report.summary["partitions"] == 1
    ref = np.load(model_path(name).with_suffix(".npz"))
    scale = json.loads(str(ref["meta"]))["outputs"][0]["scale"]
    model = npu_byoc.build(mod, backend)
    for s in range(ref["input_0"].shape[0]):
        got = model.run([ref["input_0"][s : s + 1]])[0]
        assert np.abs(got.astype(np.float64) - ref["output_0"][s : s + 1]).max() / scale <= 1 + 1e-5


# ------------------------------------------------------------------------------- random Relax
def _random_case(seed: int):
    rng = np.random.default_rng(seed)
    while True:
        kernel = tuple(int(v) for v in rng.integers(1, 6, 2))
        strides = tuple(int(rng.integers(1, k + 1)) for k in kernel)
        pads = tuple(int(rng.integers(0, k)) for k in kernel)
        kw = dict(
            layout=str(rng.choice(["NHWC", "NCHW"])), input_hw=tuple(int(v) for v in rng.integers(2, 9, 2)),
            in_channels=int(rng.integers(1, 20)), out_channels=int(rng.integers(1, 20)), kernel=kernel,
            strides=strides, padding=(*pads, *pads), output_padding=tuple(int(rng.integers(0, s)) for s in strides),
            seed=seed, bias=rng.integers(-3000, 3000, 64), input_zp=int(rng.integers(-30, 30)),
        )  # fmt: skip
        kw["bias"] = kw["bias"][: kw["out_channels"]]
        mod = rb.qdq_conv2d_transpose(**kw)
        (d,) = partition_log(partition_for_npu(mod))
        if d.accepted:
            break
    shape = [int(v) for v in mod["main"].params[0].ty.shape]
    # the SRAM sizes test_concat's random cases build the RTL for (Verilator builds are cached)
    hw = configure(sram_bytes=int(rng.choice([2048, 4096, 262144])), dma_overlap=int(rng.integers(0, 2)))
    return mod, rng.integers(-128, 128, shape).astype(np.int8), hw


@pytest.mark.parametrize("seed", range(8))
def test_random_transpose_convs_equal_the_golden_model(seed):
    """Tiles of small SRAMs, both layouts, output padding, sequential or overlapped DMA: the
    partition's stream gives the same bytes and status on the RTL, the stream machine and the C
    model, in the analytic model's cycles, and the golden model's scatter form, which is within
    1 LSB of TVM's float32 CPU build."""
    mod, x, hw = _random_case(seed)
    (plan,) = [lower_partition(n, f, hw) for n, f in npu_functions(partition_for_npu(mod, hw=hw)).items()]
    assert_specs_agree(VerilatorNpu(hw), plan, schedule_partition(plan, hw), [x], hw, f"seed {seed}")
    (want,) = golden.run_plan(plan, [x])
    cpu = npu_byoc.build(mod, "cpu").run([x])[0]
    assert np.abs(cpu.astype(int) - want.reshape(cpu.shape).astype(int)).max() <= 1


# ------------------------------------------------------------------------------- the CPU side
@pytest.mark.parametrize(
    "kw, reason",
    [
        (dict(groups=2), "grouped conv2d_transpose (groups=2)"),
        (dict(kernel=(2, 2), strides=(3, 3), padding=(0, 0, 0, 0)), "stride (3, 3) with a 2x2 kernel"),
        (dict(dilation=(2, 2)), "conv2d_transpose dilation (2, 2)"),
    ],
)
def test_what_the_npu_refuses_stays_on_the_cpu_with_a_reason(kw, reason):
    mod = rb.qdq_conv2d_transpose(**kw)
    (d,) = partition_log(partition_for_npu(mod))
    assert d.pattern == "npu.transpose_conv2d" and not d.accepted and reason in d.reason
    x = np.zeros([int(v) for v in mod["main"].params[0].ty.shape], np.int8)
    assert npu_byoc.build(mod, "golden").run([x])[0].shape == tuple(int(v) for v in mod["main"].ret_ty.shape)


def test_nhwc_cpu_build_equals_tvms_nchw_kernel():
    """The NHWC legalization (npu_byoc.runtime.tvm_legalize) gives TVM's own NCHW result, transposed."""
    nhwc, nchw = (rb.qdq_conv2d_transpose(layout=layout, bias=np.arange(6) * 40) for layout in ("NHWC", "NCHW"))
    x = np.random.default_rng(3).integers(-128, 128, (1, 5, 6, 4)).astype(np.int8)
    a = npu_byoc.build(nhwc, "cpu").run([x])[0]
    b = npu_byoc.build(nchw, "cpu").run([np.ascontiguousarray(x.transpose(0, 3, 1, 2))])[0]
    np.testing.assert_array_equal(a, b.transpose(0, 2, 3, 1))


def test_uint8_transposed_conv_runs_as_its_int8_equivalent():
    """uint8 activations and uint8 weights with zero point 128 (TFLite's legacy uint8 models):
    the record flips to int8 like a conv's (it used to crash on the weights' source dtype) and
    the NPU result is within 1 LSB of TVM's float32 CPU build."""
    from tvm import relax
    from tvm.relax.op import dequantize, quantize
    from tvm.relax.op.nn import conv2d_transpose

    x = relax.Var("x", relax.TensorType([1, 4, 4, 3], "uint8"))
    w = np.random.default_rng(0).integers(0, 256, (3, 5, 3, 3)).astype(np.uint8)
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            d = bb.emit(dequantize(x, relax.const(np.float32(0.05)), relax.const(np.uint8(128))))
            wd = bb.emit(dequantize(relax.const(w), relax.const(np.float32(0.01)), relax.const(np.uint8(128)), axis=1))
            y = bb.emit(conv2d_transpose(d, wd, strides=(2, 2), padding=(0, 0, 1, 1), data_layout="NHWC",
                                         kernel_layout="IOHW", out_dtype="float32"))  # fmt: skip
            q = bb.emit_output(quantize(y, relax.const(np.float32(0.2)), relax.const(np.uint8(120)), out_dtype="uint8"))
        bb.emit_func_output(q)
    mod = bb.get()
    (d,) = partition_log(partition_for_npu(mod))
    assert (d.pattern, d.accepted, d.activations) == ("npu.transpose_conv2d", True, "uint8 activations (U8U8)")
    xv = np.random.default_rng(1).integers(0, 256, (1, 4, 4, 3)).astype(np.uint8)
    got = npu_byoc.build(mod, "functional").run([xv])[0]
    cpu = npu_byoc.build(mod, "cpu").run([xv])[0]
    assert got.dtype == np.uint8 and np.abs(got.astype(int) - cpu.astype(int)).max() <= 1
