"""npu.pad: a standalone constant PAD of any axis but the batch (rank <= 4) with any fill, as an
identity-LUT copy into the interior and constant-LUT border strips (npu_byoc.ops.pad). Against TVM's CPU build of
the same Relax module (nn.pad on int8 is exact there), LiteRT's PADV2 fixture (fills 96 and 88,
not the zero point) and, on the RTL, the golden model with the cycle model exact."""

from __future__ import annotations

import numpy as np
import pytest
from tvm import relax
from tvm.script import relax as R

import npu_byoc
from npu_byoc.partition import pipeline as P
from npu_byoc.runtime.cosim import cosim

from .conftest import model_path, reference
from .relax_builders import _build, _requantize_tail, _scale_const, _tensor, _zp_const


def _int8_pad(shape, widths, fill, pool=None, dtype="int8"):
    """nn.pad(int8 x, fill) [-> max_pool2d(3, 2)], NHWC."""
    x = _tensor("x", shape, dtype)

    def body(bb):
        y = bb.emit(R.nn.pad(x, widths, "constant", float(fill)))
        if pool is not None:
            y = bb.emit(R.nn.max_pool2d(y, pool_size=(3, 3), strides=(2, 2), layout="NHWC"))
        return y

    return _build([x], body)


def _qdq_pad(shape, widths, value, scale, zp):
    """dequantize(x) -> nn.pad(constant value) -> quantize (ONNX Pad in QDQ), NHWC."""
    x = _tensor("x", shape, "int8")

    def body(bb):
        xd = bb.emit(R.dequantize(x, _scale_const(scale), _zp_const(zp), axis=-1))
        y = bb.emit(R.nn.pad(xd, widths, "constant", float(value)))
        return _requantize_tail(bb, y, scale, zp, "int8")

    return _build([x], body)


def _npu_and_cpu(mod, x):
    part = npu_byoc.partition_for_npu(mod)
    log = [d for d in P.partition_log(part) if not d.accepted]
    assert P.npu_functions(part) and not [o for b in part["main"].body.blocks for o in b.bindings
                                          if isinstance(o.value, relax.Call) and not isinstance(o.value.op, relax.GlobalVar)
                                          and str(o.value.op.name) == "relax.nn.pad"], log  # fmt: skip
    return npu_byoc.build(part, "functional").run([x])[0], npu_byoc.build(mod, "cpu").run([x])[0]


def _input(shape, seed=0):
    return np.random.default_rng(seed).integers(-128, 128, shape, dtype=np.int8)


@pytest.mark.parametrize("widths, fill", [
    ([0, 0, 1, 1, 1, 1, 0, 0], 0),
    ([0, 0, 2, 1, 0, 3, 0, 0], 96),      # asymmetric, no left column
    ([0, 0, 0, 1, 0, 1, 0, 0], -128),    # keras ZeroPadding2D(((0, 1), (0, 1))) of NASNet
    ([0, 0, 3, 0, 0, 0, 0, 0], 127),     # top rows only
    ([0, 0, 0, 0, 2, 5, 0, 0], -7),      # columns only
])  # fmt: skip
def test_int8_pad_equals_tvm_cpu(widths, fill):
    shape = (1, 6, 5, 7)
    npu, cpu = _npu_and_cpu(_int8_pad(shape, widths, fill), _input(shape, fill & 0xFF))
    assert npu.shape == cpu.shape
    np.testing.assert_array_equal(npu, cpu)


def test_uint8_pad_keeps_its_fill():
    """A uint8 model's pad runs on the int8 NPU with its bytes flipped: the fill (200) too."""
    shape = (1, 5, 5, 3)
    x = np.random.default_rng(3).integers(0, 256, shape, dtype=np.uint8)
    npu, cpu = _npu_and_cpu(_int8_pad(shape, [0, 0, 1, 2, 2, 1, 0, 0], 200, dtype="uint8"), x)
    assert npu.dtype == np.uint8 and (npu[0, 0] == 200).all()
    np.testing.assert_array_equal(npu, cpu)


def test_qdq_pad_fills_with_the_quantized_constant():
    """Hand-derived: value 0.75 at scale 0.25, zero point -3 quantizes to 0.75 / 0.25 - 3 = 0."""
    shape = (1, 4, 4, 3)
    x = _input(shape, 1)
    npu, cpu = _npu_and_cpu(_qdq_pad(shape, [0, 0, 1, 0, 0, 2, 0, 0], 0.75, 0.25, -3), x)
    np.testing.assert_array_equal(npu, cpu)
    assert (npu[0, 0] == 0).all() and (npu[0, :, 4:] == 0).all()
    np.testing.assert_array_equal(npu[0, 1:, :4], x[0])


def test_pad_before_max_pool():
    """Filled with int8's minimum, the pad folds into the max pool (one composite); filled
    with anything else it is an npu.pad before it. Both equal TVM's CPU build."""
    shape = (1, 9, 9, 4)
    widths = [0, 0, 1, 1, 1, 1, 0, 0]
    x = _input(shape, 2)
    for fill, composites in ((-128, ["npu.max_pool2d"]), (5, ["npu.pad", "npu.max_pool2d"])):
        mod = _int8_pad(shape, widths, fill, pool=True)
        part = npu_byoc.partition_for_npu(mod)
        names = [n for f in P.npu_functions(part).values() for n, _ in P.composite_functions(f)]
        assert names == composites
        npu, cpu = _npu_and_cpu(mod, x)
        np.testing.assert_array_equal(npu, cpu)


def test_padv2_fixture_on_the_npu_is_litert_exactly_and_rtl_exact():
    name = "op_padv2_int8.tflite"
    mod = npu_byoc.load_model(model_path(name))
    ops = [o for o in npu_byoc.coverage_report(npu_byoc.partition_for_npu(mod)).ops if o.op == "PADV2"]
    assert len(ops) == 2 and all(o.offloaded for o in ops)
    ref = reference(name)
    model = npu_byoc.build(mod, "functional")
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        for got, want in zip(model.run(inputs), outputs, strict=True):
            np.testing.assert_array_equal(got, want)
    rep = cosim(model_path(name), ref["inputs"][0], ref["outputs"][0])
    assert rep.summary["max_diff_golden"] == 0 and rep.summary["cycle_model_exact"]


@pytest.mark.parametrize("shape, widths, fill", [
    ((1, 6, 5, 7), [0, 0, 0, 0, 0, 0, 1, 3], 9),            # channels only
    ((1, 6, 5, 7), [0, 0, 1, 0, 0, 2, 2, 0], -50),          # rows, columns and the channels before
    ((1, 4, 4, 3), [0, 0, 0, 0, 0, 0, 0, 13], 127),         # more channels added than the input has
    ((1, 9, 6), [0, 0, 2, 1, 3, 0], -128),                  # a sequence: its length and its features
    ((5, 6), [1, 2, 0, 4], 33),                             # rank 2: rows and features
    ((6,), [3, 2], -1),                                     # rank 1
])  # fmt: skip
def test_pad_of_any_axis_equals_tvm_cpu(shape, widths, fill):
    """PAD of the channel axis (and of any axis but the batch of a tensor of rank <= 4): the
    copy into the interior and the fill strips, among them the channels before and after the
    input's, equal TVM's CPU build (nn.pad on int8 is exact there) on the C model."""
    npu, cpu = _npu_and_cpu(_int8_pad(shape, widths, fill), _input(shape, len(shape) + fill & 0xFF))
    assert npu.shape == cpu.shape
    np.testing.assert_array_equal(npu, cpu)


def test_channel_pad_on_the_rtl_is_golden_and_cycle_exact():
    """A pad of rows and channels as one stream on the RTL: the golden model's output (np.pad by
    hand here) and the cycle model's cycles."""
    from npu_byoc.arch import cycles
    from npu_byoc.arch.config import DEFAULT_CONFIG
    from npu_byoc.codegen.lower import lower_module
    from npu_byoc.codegen.schedule import schedule_partition
    from npu_byoc.runtime import golden
    from npu_byoc.runtime import verilator as V

    shape, widths = (1, 4, 3, 5), [0, 0, 1, 0, 0, 1, 2, 3]
    (plan,) = lower_module(npu_byoc.partition_for_npu(_int8_pad(shape, widths, -9))).values()
    x = _input(shape, 4)
    schedule = schedule_partition(plan, DEFAULT_CONFIG)
    regions, statuses = golden.run_stream(V.VerilatorNpu(DEFAULT_CONFIG), plan, schedule.words(), schedule.constants,
                                          [x])  # fmt: skip
    assert statuses[0].ok, statuses
    want = np.pad(x, ((0, 0), (1, 0), (0, 1), (2, 3)), constant_values=-9)
    np.testing.assert_array_equal(golden.read_outputs(plan, regions)[0], want)
    assert statuses[0].cycles == cycles.stream_cycles(schedule.steps, DEFAULT_CONFIG)


@pytest.mark.parametrize("widths, reason", [
    ([1, 0, 0, 0, 0, 0, 0, 0], "NPU partitions run image by image"),
    ([0, 0, -1, 0, 0, 0, 0, 0], "negative widths"),
])  # fmt: skip
def test_pad_refused_with_a_reason(widths, reason):
    part = npu_byoc.partition_for_npu(_int8_pad((1, 4, 4, 3), widths, 0))
    assert not P.npu_functions(part)
    assert any(reason in (d.reason or "") for d in P.partition_log(part) if d.pattern == "npu.pad")


def test_nasnet_pads_every_npu_layer_is_litert_exactly():
    """NASNet's pads (tools/make_transformer_models.py): ZeroPadding2D before a max pool whose
    input is not clamped (fill = zero point, not int8's minimum: an npu.pad), the shifted
    path's standalone PAD, a PADV2 filled with 0.5. Every NPU layer, fed LiteRT's own input
    tensors, gives LiteRT's output tensor exactly; the model is one partition (its output 0 LSB
    off LiteRT: tests/test_transformer_fixtures.py)."""
    from npu_byoc.codegen.lower import lower_module
    from npu_byoc.frontends.load import model_info
    from npu_byoc.runtime import golden

    from .conftest import op_expected

    name = "nasnet_pads_int8.tflite"
    mod = npu_byoc.load_model(model_path(name))
    part = npu_byoc.partition_for_npu(mod)
    assert len(P.npu_functions(part)) == 1
    recorded = np.load(model_path(name).with_name(name.replace(".tflite", ".tensors.npz")))
    tensors = {k.split(";")[0]: recorded[k] for k in recorded.files if k != "__index__"}
    info = model_info(mod)
    source = {v: o.name for o in info.ops for v in o.vars}
    source.update({t.name.replace(":", "_"): t.name for t in info.inputs})

    def tensor_of(ref_name, hwc):
        return tensors[source.get(ref_name, ref_name)].reshape(hwc)

    kinds = []
    for plan in lower_module(part).values():
        regions = golden.allocate_regions(plan, [np.zeros(io.shape, np.int8) for io in plan.inputs])
        for k, op in enumerate(plan.ops):
            if any(source.get(r.name, r.name) not in tensors for r in op.inputs):
                continue
            for r in op.inputs:
                golden.write_tensor(regions, r, tensor_of(r.name, r.shape))
            np.testing.assert_array_equal(golden.run_op(op, regions), op_expected(plan, k, tensor_of), err_msg=op.name)
            kinds.append(op.kind)
    assert kinds.count("pad") == 3 and "pool" in kinds


def test_onnx_qdq_pads_import_their_quantized_fill_and_run_on_the_npu():
    """pad_qdq.onnx: onnxruntime's quantizer writes Pad's constant_value 0.25 as
    DequantizeLinear(127, scale 0.25 / 255, zero point -128); the import folds it back to 0.25,
    and both Pads (zero before a ceil-mode MaxPool, 0.25 between convs) run on the NPU, in one
    partition (within 1 LSB of onnxruntime and of TVM's CPU build per layer, on the RTL:
    tests/test_transformer_fixtures.py)."""
    mod = npu_byoc.load_model(model_path("pad_qdq.onnx"))
    fills = sorted(float(b.value.attrs.pad_value) for blk in mod["main"].body.blocks for b in blk.bindings
                   if isinstance(b.value, relax.Call) and getattr(b.value.op, "name", "") == "relax.nn.pad")  # fmt: skip
    assert fills == [0.0, 0.25]
    report = npu_byoc.coverage_report(npu_byoc.partition_for_npu(mod))
    assert all(o.offloaded for o in report.ops) and report.summary["partitions"] == 1


def _qdq_pad_max_pool(shape, widths, value, scale, zp):
    """ONNX QDQ as onnxruntime's quantizer writes it: the Pad quantized on its own, then the
    MaxPool (3/2, NCHW)."""
    x = _tensor("x", shape, "int8")

    def body(bb):
        xd = bb.emit(R.dequantize(x, _scale_const(scale), _zp_const(zp), axis=1))
        y = bb.emit(R.nn.pad(xd, widths, "constant", float(value)))
        q = bb.emit(R.quantize(y, _scale_const(scale), _zp_const(zp), axis=1, out_dtype="int8"))
        yd = bb.emit(R.dequantize(q, _scale_const(scale), _zp_const(zp), axis=1))
        p = bb.emit(R.nn.max_pool2d(yd, pool_size=(3, 3), strides=(2, 2), layout="NCHW"))
        return bb.emit(R.quantize(p, _scale_const(scale), _zp_const(zp), axis=1, out_dtype="int8"))

    return _build([x], body)


@pytest.mark.parametrize("value, composites", [
    (0.0, ["npu.max_pool2d"]),              # 0.0 quantizes to -128 (zero point): folds into the pool
    (0.5, ["npu.pad", "npu.max_pool2d"]),   # -127: a pad op before the pool
])  # fmt: skip
def test_qdq_pad_before_max_pool(value, composites):
    shape = (1, 4, 9, 9)
    mod = _qdq_pad_max_pool(shape, [0, 0, 0, 0, 1, 1, 0, 1], value, 0.5, -128)
    part = npu_byoc.partition_for_npu(mod)
    assert [n for f in P.npu_functions(part).values() for n, _ in P.composite_functions(f)] == composites
    npu, cpu = _npu_and_cpu(mod, _input(shape, 4))
    np.testing.assert_array_equal(npu, cpu)
