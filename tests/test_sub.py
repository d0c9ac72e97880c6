"""SUB (npu.sub): the ADD unit with the subtrahend's multiplier negated, as LiteRT's sub.cc
prepares it (``input2_multiplier *= op_sign``) before running the int8 add kernels.

References: LiteRT's add arithmetic written out in tests/litert_reference.py (with input 2's
multiplier negated: sub.cc), LiteRT's own tensors recorded with the Keras Normalization fixture.
"""

from __future__ import annotations

import numpy as np
import pytest

import npu_byoc
from npu_byoc.arch.config import DEFAULT_CONFIG
from npu_byoc.codegen.lower import lower_module
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.ops.broadcast import ChannelReplicated
from npu_byoc.ops.composites import npu_functions
from npu_byoc.ops.npu_ops import Add
from npu_byoc.partition.pipeline import partition_for_npu
from npu_byoc.runtime import golden
from npu_byoc.runtime.cosim import cosim
from npu_byoc.runtime.machine import Machine

from . import litert_reference as ref
from . import relax_builders as rb
from .conftest import model_path, npu_layers_against_litert, reference

SCALES = dict(scale_a=0.5, zp_a=1, scale_b=0.25, zp_b=-2, output_scale=0.75, output_zp=3)


def _litert_sub(x, y, s=SCALES, first_minus_second=True) -> np.ndarray:
    """LiteRT's int8 SUB on numpy's broadcast of the operands: add.cc's parameters with input 2's
    multiplier negated (``x`` is input 1: the minuend)."""
    x, y = np.broadcast_arrays(x, y)
    sa, sb = (s["scale_a"], s["scale_b"]) if first_minus_second else (s["scale_b"], s["scale_a"])
    za, zb = (s["zp_a"], s["zp_b"]) if first_minus_second else (s["zp_b"], s["zp_a"])
    p = list(ref.add_prepare(sa, sb, s["output_scale"]))
    p[3] = -p[3]
    return ref.add_func(x, y, za, zb, s["output_zp"], p).astype(np.int8)


def _run(mod, x) -> np.ndarray:
    """``mod`` as one NPU partition: the golden model's output, equal to the stream machine's."""
    part = partition_for_npu(mod)
    assert len(npu_functions(part)) == 1, part.script()
    got = npu_byoc.build(part, "golden").run(x)[0]
    (plan,) = lower_module(part).values()
    schedule = schedule_partition(plan, DEFAULT_CONFIG)
    regions, statuses = golden.run_stream(Machine(DEFAULT_CONFIG), plan, schedule.words(), schedule.constants, x)
    assert all(st.ok for st in statuses), statuses
    np.testing.assert_array_equal(golden.read_outputs(plan, regions)[0], got)
    return got


def test_every_int8_pair_is_litert_sub():
    """All 65,536 pairs of int8 values (the first operand's rows, the second's columns) at two
    scale sets, one where the subtrahend has the larger scale: LiteRT's SUB exactly."""
    a = np.repeat(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256, 1)
    b = np.tile(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256, 1)
    for s in (SCALES, dict(scale_a=0.0123, zp_a=-7, scale_b=0.0371, zp_b=5, output_scale=0.0415, output_zp=-9)):
        mod = rb.qdq_add(shape=a.shape, op="subtract", **s)
        np.testing.assert_array_equal(_run(mod, [a, b]), _litert_sub(a, b, s), err_msg=str(s))


# kind -> (first operand's shape, second operand's shape): minuend, subtrahend
KINDS = {
    "channel_vector": ((1, 6, 5, 8), (1, 1, 1, 8)),
    "channel_vector_first": ((1, 1, 1, 8), (1, 6, 5, 8)),
    "pixel_vector": ((1, 6, 5, 8), (1, 6, 5, 1)),
    "pixel_vector_first": ((1, 6, 5, 1), (1, 6, 5, 8)),
    "row": ((1, 6, 5, 8), (1, 1, 5, 8)),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_broadcast_sub_of_two_activations(kind):
    """Either operand broadcast (the unit's channel broadcast, the MAC array's replication, a
    stride-0 DMA): the operands may swap places on the NPU, the negated one stays the subtrahend."""
    a_shape, b_shape = KINDS[kind]
    rng = np.random.default_rng(len(kind))
    x = [rng.integers(-128, 128, s, dtype=np.int8) for s in (a_shape, b_shape)]
    mod = rb.qdq_add(shape=a_shape, b_shape=b_shape, op="subtract", **SCALES)
    got = _run(mod, x)
    np.testing.assert_array_equal(got, _litert_sub(*x))
    assert np.abs(got.astype(int) - npu_byoc.build(mod, "cpu").run(x)[0].astype(int)).max() <= 1


@pytest.mark.parametrize("shape, const_first", [((1, 1, 1, 8), False), ((1, 1, 1, 8), True), ((1, 6, 5, 1), False),
                                                ((1, 6, 5, 8), True)])  # fmt: skip
def test_sub_of_a_model_constant(shape, const_first):
    """A constant of any broadcastable shape (channel vector, pixel vector, whole tensor), either
    side of the minus: x − c, or c − x (the record's ``reverse``)."""
    rng = np.random.default_rng(sum(shape))
    c = rng.integers(-128, 128, shape, dtype=np.int8)
    x = rng.integers(-128, 128, (1, 6, 5, 8), dtype=np.int8)
    mod = rb.qdq_add(shape=x.shape, b_const=c, op="subtract", b_first=const_first, **SCALES)
    got = _run(mod, [x])
    want = _litert_sub(c, x, first_minus_second=False) if const_first else _litert_sub(x, c)
    np.testing.assert_array_equal(got, want)


NORMALIZATION = "normalization_sub_int8.tflite"


def test_keras_normalization_runs_whole_on_the_npu_bit_exact_with_litert():
    """keras.applications' preprocessing Normalization (a SUB of a 3-value constant), a SUB of a
    pixel-vector constant and a channel-vector constant minus an activation: every operator on
    the NPU, one partition; each SUB (an ADD kick with a negative multiplier) LiteRT's tensor
    exactly fed LiteRT's inputs, the model's output 0 LSB off LiteRT end to end, the RTL equal
    to the golden model with the cycle model exact."""
    part = partition_for_npu(npu_byoc.load_model(model_path(NORMALIZATION)))
    report = npu_byoc.coverage_report(part)
    assert [o.pattern for o in report.ops if o.op == "SUB"] == ["npu.sub"] * 3
    assert all(o.offloaded for o in report.ops) and report.summary["partitions"] == 1
    subs = []
    for op, got, want in npu_layers_against_litert(NORMALIZATION):
        if want is not None:
            np.testing.assert_array_equal(got, want, err_msg=op.name)
            add = op.binary if isinstance(op, ChannelReplicated) else op
            if isinstance(add, Add) and min(add.ifm_multiplier, add.ifm2_multiplier) < 0:
                subs.append(op)
    assert len(subs) == 3
    model, r = npu_byoc.build(part, "functional"), reference(NORMALIZATION)
    for x, y in zip(r["inputs"], r["outputs"]):
        np.testing.assert_array_equal(model.run(x)[0], y[0])
    rep = cosim(model_path(NORMALIZATION), r["inputs"][0], r["outputs"][0])  # the RTL, its cycles
    assert rep.summary["max_diff_golden"] == 0 and rep.summary["cycle_model_exact"]


def _float_constant_sub(c: np.ndarray, const_first: bool, op: str = "subtract"):
    """dequantize(int8 x; 0.05, zp 2) − a float32 constant (or the constant minus it) ->
    quantize(0.04, zp −1): onnxruntime's QDQ Sub, whose initializer its quantizer leaves float."""
    from tvm import relax
    from tvm.script import relax as R

    x = relax.Var("x", relax.TensorType([1, 6, 5, 8], "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            d = bb.emit(R.dequantize(x, relax.const(0.05, "float32"), relax.const(2, "int8"), axis=-1))
            k = relax.const(c.astype("float32"))
            y = bb.emit({"subtract": R.subtract, "add": R.add}[op](*((k, d) if const_first else (d, k))))
            q = bb.emit(R.quantize(y, relax.const(0.04, "float32"), relax.const(-1, "int8"), axis=-1, out_dtype="int8"))
            gv = bb.emit_output(q)
        bb.emit_func_output(gv)
    return bb.get()


FLOAT_CONSTANTS = {  # name -> (constant shape, constant first, op)
    "channel_vector": ((1, 1, 1, 8), False, "subtract"),
    "channel_vector_first": ((1, 1, 1, 8), True, "subtract"),
    "pixel_vector": ((1, 6, 5, 1), False, "subtract"),
    "scalar": ((1,), False, "subtract"),
    "add_row": ((1, 1, 5, 8), False, "add"),
}


@pytest.mark.parametrize("name", list(FLOAT_CONSTANTS))
def test_a_float_constant_is_quantized_and_stays_within_1_lsb_of_tvm(name):
    """The float constant becomes int8 (its range in 255 steps, each no coarser than the output's
    scale): one NPU partition, within 1 LSB of TVM's CPU build of the float computation."""
    shape, first, op = FLOAT_CONSTANTS[name]
    rng = np.random.default_rng(len(name))
    c = rng.uniform(-1.5, 2.0, shape).astype(np.float32)
    mod = _float_constant_sub(c, first, op)
    x = rng.integers(-128, 128, (1, 6, 5, 8), dtype=np.int8)
    got = _run(mod, [x])
    cpu = npu_byoc.build(mod, "cpu").run([x])[0]
    assert np.abs(got.astype(int) - cpu.astype(int)).max() <= 1


def test_a_float_constant_too_wide_for_the_output_scale_says_why():
    """A constant whose int8 step would be coarser than the output's scale stays on the CPU."""
    from npu_byoc.partition.pipeline import partition_log

    mod = _float_constant_sub(np.array([[[[-20.0, 30.0, 0.5, 1, 2, 3, 4, 5]]]], np.float32), False)
    (d,) = [d for d in partition_log(partition_for_npu(mod)) if d.pattern == "npu.sub"]
    assert not d.accepted and "coarser than the output's scale" in d.reason
